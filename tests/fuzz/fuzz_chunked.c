/*
 * The chunked body decoder, fed a body at once and in pieces whose sizes
 * come from the input.  Both ways must agree on the outcome, on how many
 * bytes belong to the body and on the payload; a finished decoder stays
 * finished and takes nothing more.
 *
 * Input: two bytes that seed the split points, then the body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/http.h"

struct result {
	int rc;
	size_t used;		/* input bytes consumed */
	char *out;		/* the payload */
	size_t outlen;
};

/* One call on a buffer of exactly n bytes; appends the payload to res. */
static int
decode(struct http_chunked *c, const char *p, size_t n, struct result *res)
{
	size_t used = n, data = 0;
	char *buf = fuzz_dup(p, n);
	int rc;

	rc = http_chunked_decode(c, buf, &used, &data);
	FUZZ_CHECK(rc == HTTP_OK || rc == HTTP_AGAIN || rc == HTTP_ERROR);
	FUZZ_CHECK(used <= n);
	FUZZ_CHECK(data <= used);
	if (rc == HTTP_AGAIN)
		FUZZ_CHECK(used == n);
	memcpy(res->out + res->outlen, buf, data);
	res->outlen += data;
	res->used += used;
	free(buf);
	return rc;
}

static void
at_once(const char *body, size_t len, struct result *res)
{
	struct http_chunked c;
	struct result again;
	char extra[1];

	http_chunked_init(&c);
	res->rc = decode(&c, body, len, res);
	if (res->rc != HTTP_OK)
		return;
	/* Done stays done: the bytes after the body are left alone. */
	memset(&again, 0, sizeof(again));
	again.out = extra;
	FUZZ_CHECK(decode(&c, body + res->used, len - res->used, &again) ==
	    HTTP_OK);
	FUZZ_CHECK(again.used == 0 && again.outlen == 0);
}

static void
in_pieces(const char *body, size_t len, struct fuzz_split *split,
    struct result *res)
{
	struct http_chunked c;
	size_t off = 0, n;

	http_chunked_init(&c);
	res->rc = HTTP_AGAIN;
	while (off < len && res->rc == HTTP_AGAIN) {
		n = fuzz_split_next(split, len - off);
		res->rc = decode(&c, body + off, n, res);
		off += n;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result whole, parts;
	struct fuzz_split split;
	const char *body;
	size_t len;

	if (size < 2)
		return 0;
	fuzz_split_init(&split, data[0], data[1]);
	body = (const char *)data + 2;
	len = size - 2;

	memset(&whole, 0, sizeof(whole));
	memset(&parts, 0, sizeof(parts));
	whole.out = malloc(len + 1);
	parts.out = malloc(len + 1);
	FUZZ_CHECK(whole.out != NULL && parts.out != NULL);

	at_once(body, len, &whole);
	in_pieces(body, len, &split, &parts);

	FUZZ_CHECK(parts.rc == whole.rc);
	if (whole.rc != HTTP_ERROR) {
		FUZZ_CHECK(parts.used == whole.used);
		FUZZ_CHECK(parts.outlen == whole.outlen);
		FUZZ_CHECK(memcmp(parts.out, whole.out, whole.outlen) == 0);
	}
	free(whole.out);
	free(parts.out);
	return 0;
}

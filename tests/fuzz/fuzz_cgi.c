/*
 * The CGI response header parser as the FastCGI upstream drives it: the
 * application's header block arriving in pieces.  Whenever the parser
 * decides, the same bytes are parsed again in one call: how the stream
 * was cut must not change the answer.
 *
 * Input: one byte of options (HEAD, limits), two bytes that seed the
 * split points, then the stream.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/fuzz/fuzz.h"
#include "worker/cgi.h"
#include "worker/http.h"

static const size_t max_sizes[] = { 65536, 4096, 256, 64 };
static const size_t max_counts[] = { 100, 32, 4, 0 };

static bool
span_in(struct span s, const char *buf, size_t n)
{
	if (s.p == NULL)
		return s.len == 0;
	return s.p >= buf && s.len <= n && (size_t)(s.p - buf) <= n - s.len;
}

static void
check(const struct http_response *r, const char *buf, size_t n, size_t maxh,
    bool head)
{
	size_t i, j;

	FUZZ_CHECK(r->version == 11);
	FUZZ_CHECK(r->status >= 200 && r->status <= 599);
	FUZZ_CHECK(r->reason.p != NULL && span_in(r->reason, buf, n));
	FUZZ_CHECK(r->nheaders <= maxh);
	for (i = 0; i < r->nheaders; i++) {
		FUZZ_CHECK(r->headers[i].name.len > 0);
		FUZZ_CHECK(span_in(r->headers[i].name, buf, n));
		FUZZ_CHECK(span_in(r->headers[i].value, buf, n));
		FUZZ_CHECK(!(r->headers[i].name.len == 6 &&
		    strncasecmp(r->headers[i].name.p, "status", 6) == 0));
		for (j = 0; j < r->headers[i].value.len; j++)
			FUZZ_CHECK(r->headers[i].value.p[j] != '\r' &&
			    r->headers[i].value.p[j] != '\n' &&
			    r->headers[i].value.p[j] != '\0');
	}
	FUZZ_CHECK(span_in(r->cache_control, buf, n));
	FUZZ_CHECK(span_in(r->etag, buf, n));
	FUZZ_CHECK(!r->chunked && !r->close);
	FUZZ_CHECK(r->content_length >= -1);
	if (r->status == 204 || r->status == 304 || head)
		FUZZ_CHECK(r->framing == HTTP_BODY_NONE);
	else if (r->content_length >= 0)
		FUZZ_CHECK(r->framing == HTTP_BODY_LENGTH);
	else
		FUZZ_CHECK(r->framing == HTTP_BODY_UNTIL_CLOSE);
}

static void
at_once(const char *data, size_t n, ssize_t rc, const struct http_response *r,
    size_t maxh, size_t maxsize, bool head)
{
	struct http_header *h2 = calloc(maxh ? maxh : 1, sizeof(*h2));
	char *buf2 = fuzz_dup(data, n);
	struct http_response r2;
	size_t scan = 0;
	ssize_t rc2;

	FUZZ_CHECK(h2 != NULL);
	rc2 = cgi_parse_response(&r2, buf2, n, &scan, h2, maxh, maxsize, head);
	FUZZ_CHECK(rc2 == rc);
	if (rc == HTTP_ERROR)
		FUZZ_CHECK(strcmp(r2.error, r->error) == 0);
	if (rc > 0) {
		FUZZ_CHECK(r2.status == r->status);
		FUZZ_CHECK(r2.framing == r->framing);
		FUZZ_CHECK(r2.content_length == r->content_length);
		FUZZ_CHECK(r2.nheaders == r->nheaders);
	}
	free(h2);
	free(buf2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_header *h;
	struct fuzz_split split;
	struct http_response r;
	size_t maxh, maxsize, avail = 0, scan = 0, prev = 0;
	const char *s;
	bool head;
	ssize_t rc = HTTP_AGAIN;
	char *buf;

	if (size < 3)
		return 0;
	head = data[0] & 1;
	maxsize = max_sizes[(data[0] >> 1) & 3];
	maxh = max_counts[(data[0] >> 3) & 3];
	fuzz_split_init(&split, data[1], data[2]);
	s = (const char *)data + 3;
	size -= 3;
	h = calloc(maxh ? maxh : 1, sizeof(*h));
	FUZZ_CHECK(h != NULL);

	while (avail < size && rc == HTTP_AGAIN) {
		avail += fuzz_split_next(&split, size - avail);
		buf = fuzz_dup(s, avail);
		rc = cgi_parse_response(&r, buf, avail, &scan, h, maxh,
		    maxsize, head);
		if (rc == HTTP_AGAIN) {
			FUZZ_CHECK(scan >= prev && scan <= avail);
			FUZZ_CHECK(avail < maxsize);
			prev = scan;
		} else {
			at_once(s, avail, rc, &r, maxh, maxsize, head);
			if (rc == HTTP_ERROR)
				FUZZ_CHECK(r.error != NULL && r.error[0]);
			else
				check(&r, buf, (size_t)rc, maxh, head);
		}
		free(buf);
	}
	free(h);
	return 0;
}

/*
 * The upstream response parser as the proxy drives it: interim responses,
 * then a final one and its body, arriving in pieces.  Whenever the parser
 * decides, the same bytes are parsed again in one call: how the stream was
 * cut must not change the answer.  The body goes through the tracker in
 * both modes, which must agree.
 *
 * Input: one byte of options (HEAD, limits), two bytes that seed the
 * split points, then the stream.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/http.h"
#include "worker/http_response.h"

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
check_response(const struct http_response *r, const char *buf, size_t n,
    size_t maxh, bool head)
{
	struct http_cache_control cc;
	size_t i;

	FUZZ_CHECK(r->version == 10 || r->version == 11);
	FUZZ_CHECK(r->status >= 100 && r->status <= 599 && r->status != 101);
	FUZZ_CHECK(r->reason.p != NULL && span_in(r->reason, buf, n));
	FUZZ_CHECK(r->nheaders <= maxh);
	for (i = 0; i < r->nheaders; i++) {
		FUZZ_CHECK(r->headers[i].name.len > 0);
		FUZZ_CHECK(span_in(r->headers[i].name, buf, n));
		FUZZ_CHECK(span_in(r->headers[i].value, buf, n));
		(void)http_hop_by_hop(r->headers, r->nheaders,
		    r->headers[i].name);
	}
	FUZZ_CHECK(span_in(r->cache_control, buf, n));
	FUZZ_CHECK(span_in(r->vary, buf, n));
	FUZZ_CHECK(!(r->chunked && r->content_length != -1));
	FUZZ_CHECK(!(r->chunked && r->version == 10));
	FUZZ_CHECK(r->content_length >= -1);
	if (r->status < 200 || r->status == 204 || r->status == 304 || head)
		FUZZ_CHECK(r->framing == HTTP_BODY_NONE);
	if (r->framing == HTTP_BODY_UNTIL_CLOSE)
		FUZZ_CHECK(r->close);
	FUZZ_CHECK(!(r->keepalive_10 && (r->close || r->version != 10)));
	http_response_cache_control(r, &cc);
	FUZZ_CHECK(cc.max_age >= -1 && cc.max_age <= HTTP_DELTA_MAX);
	FUZZ_CHECK(cc.s_maxage >= -1 && cc.s_maxage <= HTTP_DELTA_MAX);
}

static void
check_at_once(const char *data, size_t n, ssize_t rc,
    const struct http_response *r, size_t maxh, size_t maxsize, bool head)
{
	struct http_header *h2 = calloc(maxh ? maxh : 1, sizeof(*h2));
	char *buf2 = fuzz_dup(data, n);
	struct http_response r2;
	size_t scan = 0;
	ssize_t rc2;

	FUZZ_CHECK(h2 != NULL);
	rc2 = http_parse_response(&r2, buf2, n, &scan, h2, maxh, maxsize,
	    head);
	FUZZ_CHECK(rc2 == rc);
	if (rc == HTTP_ERROR)
		FUZZ_CHECK(strcmp(r2.error, r->error) == 0);
	if (rc > 0) {
		FUZZ_CHECK(r2.status == r->status);
		FUZZ_CHECK(r2.framing == r->framing);
		FUZZ_CHECK(r2.close == r->close);
		FUZZ_CHECK(r2.content_length == r->content_length);
		FUZZ_CHECK(r2.nheaders == r->nheaders);
	}
	free(h2);
	free(buf2);
}

/* The body in both modes, fed in the same pieces; they must agree. */
static void
body(const struct http_response *r, const char *data, size_t len,
    struct fuzz_split *split)
{
	struct http_body a, b;
	size_t off = 0, n, na, nb, da, db;
	int ra = HTTP_AGAIN, rb = HTTP_AGAIN;
	char *pa, *pb;

	http_body_init(&a, r, true);
	http_body_init(&b, r, false);
	while (off < len && ra == HTTP_AGAIN) {
		n = fuzz_split_next(split, len - off);
		pa = fuzz_dup(data + off, n);
		pb = fuzz_dup(data + off, n);
		na = nb = n;
		ra = http_body_feed(&a, pa, &na, &da);
		rb = http_body_feed(&b, pb, &nb, &db);
		FUZZ_CHECK(ra == rb && na == nb && da == db);
		FUZZ_CHECK(na <= n && da <= na);
		FUZZ_CHECK(memcmp(pb, data + off, n) == 0);
		if (ra == HTTP_AGAIN)
			FUZZ_CHECK(na == n);
		off += na;
		free(pa);
		free(pb);
	}
	FUZZ_CHECK(http_body_eof(&a) == http_body_eof(&b));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_header *h;
	struct fuzz_split split;
	struct http_response r;
	size_t maxh, maxsize, pos = 0, avail = 0, scan = 0, n;
	const char *s;
	bool head;
	ssize_t rc;
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

	while (avail < size) {
		avail += fuzz_split_next(&split, size - avail);
		n = avail - pos;
		buf = fuzz_dup(s + pos, n);
		rc = http_parse_response(&r, buf, n, &scan, h, maxh, maxsize,
		    head);
		if (rc == HTTP_AGAIN) {
			FUZZ_CHECK(scan <= n && n < maxsize);
			free(buf);
			continue;
		}
		check_at_once(s + pos, n, rc, &r, maxh, maxsize, head);
		if (rc == HTTP_ERROR) {
			FUZZ_CHECK(r.error != NULL && r.error[0] != '\0');
			free(buf);
			break;
		}
		FUZZ_CHECK(rc > 0 && (size_t)rc <= n);
		check_response(&r, buf, (size_t)rc, maxh, head);
		free(buf);
		pos += (size_t)rc;
		scan = 0;
		if (r.status >= 200) {
			body(&r, s + pos, size - pos, &split);
			break;
		}
	}
	free(h);
	return 0;
}

/*
 * The request parser as a connection drives it: a stream of pipelined
 * requests, with Content-Length and chunked bodies, arriving in pieces.
 * Each call gets a buffer of exactly the unparsed bytes (as if the
 * connection had moved them to the front of its buffer) and the scan
 * offset kept from the call before.  Whenever the parser decides, the same
 * bytes are parsed again in one call from scratch: how the stream was cut
 * must not change the answer.
 *
 * Input: one byte of options (limits, header array size), two bytes that
 * seed the split points, then the stream.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/http.h"

static const struct http_limits limit_sets[] = {
	{ 8192, 32768, 100 },	/* the server's defaults */
	{ 1024, 4096, 32 },	/* the unit tests' */
	{ 100, 1000, 10 },
	{ 256, 1024, 4 },
};

enum { S_HEADER, S_BODY, S_CHUNKED, S_DONE };

struct stream {
	const char *data;
	size_t len;		/* the whole stream */
	size_t avail;		/* bytes received so far */
	size_t pos;		/* first unparsed byte */
	size_t scan;
	int state;
	uint64_t body_left;
	struct http_chunked chunk;
	struct http_limits lim;
	struct http_header *headers;
	size_t maxheaders;
};

static bool
span_in(struct span s, const char *buf, size_t n)
{
	if (s.p == NULL)
		return s.len == 0;
	return s.p >= buf && s.len <= n && (size_t)(s.p - buf) <= n - s.len;
}

static bool
span_same(struct span a, const char *abuf, struct span b, const char *bbuf)
{
	if (a.p == NULL || b.p == NULL)
		return a.p == b.p;
	return a.len == b.len && a.p - abuf == b.p - bbuf;
}

static bool
status_known(int status)
{
	switch (status) {
	case 400: case 414: case 417: case 431: case 501: case 505:
		return true;
	}
	return false;
}

/* What a complete, valid request must look like. */
static void
check_request(const struct http_request *r, const char *buf, size_t n,
    const struct stream *st)
{
	size_t i;

	FUZZ_CHECK(r->version == 10 || r->version == 11);
	FUZZ_CHECK(r->method_name.p != NULL && r->method_name.len > 0);
	FUZZ_CHECK(span_in(r->method_name, buf, n));
	FUZZ_CHECK(span_in(r->target, buf, n) && r->target.len > 0);
	/* Absolute-form without a path and CONNECT get a constant path. */
	FUZZ_CHECK(r->path.p != NULL);
	FUZZ_CHECK(span_in(r->path, buf, n) || (r->path.len <= 1 &&
	    memcmp(r->path.p, "/", r->path.len) == 0));
	FUZZ_CHECK(span_in(r->query, buf, n));
	FUZZ_CHECK(span_in(r->host, buf, n));
	FUZZ_CHECK(r->nheaders <= st->maxheaders);
	FUZZ_CHECK(r->nheaders <= st->lim.max_headers);
	FUZZ_CHECK(r->headers == st->headers);
	for (i = 0; i < r->nheaders; i++) {
		FUZZ_CHECK(span_in(r->headers[i].name, buf, n));
		FUZZ_CHECK(r->headers[i].name.len > 0);
		FUZZ_CHECK(span_in(r->headers[i].value, buf, n));
	}
	FUZZ_CHECK(r->content_length >= -1);
	FUZZ_CHECK(!(r->chunked && r->content_length != -1));
	FUZZ_CHECK(!(r->chunked && r->version == 10));
	/* The host kept is a valid one, without its port. */
	if (r->host.p != NULL)
		FUZZ_CHECK(http_host_check(r->host.p, r->host.len) ==
		    (ssize_t)r->host.len);
}

/* The same bytes in one call, from scratch, must give the same answer. */
static void
check_at_once(const char *data, size_t n, ssize_t rc,
    const struct http_request *r, const char *buf, const struct stream *st)
{
	struct http_header *h2;
	struct http_request r2;
	size_t scan = 0, i;
	ssize_t rc2;
	char *buf2;

	buf2 = fuzz_dup(data, n);
	h2 = calloc(st->maxheaders ? st->maxheaders : 1, sizeof(*h2));
	FUZZ_CHECK(h2 != NULL);
	memset(&r2, 0xa5, sizeof(r2));
	rc2 = http_parse_request(&r2, buf2, n, &scan, h2, st->maxheaders,
	    &st->lim);
	FUZZ_CHECK(rc2 == rc);
	if (rc == HTTP_ERROR)
		FUZZ_CHECK(r2.status == r->status);
	if (rc > 0) {
		FUZZ_CHECK(r2.method == r->method);
		FUZZ_CHECK(r2.version == r->version);
		FUZZ_CHECK(r2.nheaders == r->nheaders);
		FUZZ_CHECK(r2.content_length == r->content_length);
		FUZZ_CHECK(r2.chunked == r->chunked);
		FUZZ_CHECK(r2.keepalive == r->keepalive);
		FUZZ_CHECK(r2.expect_continue == r->expect_continue);
		FUZZ_CHECK(r2.absolute_form == r->absolute_form);
		FUZZ_CHECK(r2.path_plain == r->path_plain);
		FUZZ_CHECK(r2.path.len == r->path.len &&
		    memcmp(r2.path.p, r->path.p, r->path.len) == 0);
		FUZZ_CHECK(span_same(r2.query, buf2, r->query, buf));
		FUZZ_CHECK(span_same(r2.host, buf2, r->host, buf));
		FUZZ_CHECK(span_same(r2.range, buf2, r->range, buf));
		for (i = 0; i < r->nheaders; i++)
			FUZZ_CHECK(span_same(h2[i].value, buf2,
			    r->headers[i].value, buf));
	}
	free(h2);
	free(buf2);
}

/* What the static handler does next with a parsed request. */
static void
use_request(const struct http_request *r)
{
	/* The tag and time of the unit tests' conditional tables. */
	static const char etag[] = "\"abc\"";
	struct http_range out[16];
	char path[PATH_MAX];
	int status = 0, n = -1, rc;
	ssize_t len;

	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0)
		FUZZ_CHECK(status == 400 || status == 414);
	else
		FUZZ_CHECK((size_t)len < sizeof(path) && path[len] == '\0');
	/* A path the parser calls plain is its own normal form. */
	if (r->path_plain && r->path.len < sizeof(path))
		FUZZ_CHECK(len == (ssize_t)r->path.len &&
		    memcmp(path, r->path.p, r->path.len) == 0);
	(void)http_header_get(r, "Referer");
	(void)http_header_get(r, "User-Agent");
	rc = http_conditional(r, etag, sizeof(etag) - 1, 784111777);
	FUZZ_CHECK(rc == 0 || rc == 304 || rc == 412);
	if (r->range.p != NULL && http_if_range(r, etag, sizeof(etag) - 1,
	    784111777)) {
		rc = http_range_parse(r->range.p, r->range.len, 10000, out,
		    16, &n);
		FUZZ_CHECK(rc == HTTP_RANGE_OK ? n >= 1 && n <= 16 : n == 0);
	}
}

/* One call of the parser on the unparsed bytes; false to stop. */
static bool
parse_header(struct stream *st)
{
	struct http_request r;
	size_t n = st->avail - st->pos, cap;
	ssize_t rc;
	char *buf;

	/* The connection's buffer holds at most max_header_size + 1. */
	cap = st->lim.max_header_size + 1;
	if (n > cap)
		n = cap;
	buf = fuzz_dup(st->data + st->pos, n);
	memset(&r, 0x5a, sizeof(r));
	rc = http_parse_request(&r, buf, n, &st->scan, st->headers,
	    st->maxheaders, &st->lim);
	if (rc == HTTP_AGAIN) {
		/* A full buffer never waits: that would stall the client. */
		FUZZ_CHECK(n < cap);
		FUZZ_CHECK((st->scan & (SIZE_MAX >> 1)) <= n);
		free(buf);
		return false;
	}
	if (rc == HTTP_ERROR) {
		FUZZ_CHECK(status_known(r.status));
		FUZZ_CHECK(r.error != NULL && r.error[0] != '\0');
		check_at_once(st->data + st->pos, n, rc, &r, buf, st);
		free(buf);
		st->state = S_DONE;
		return false;
	}
	FUZZ_CHECK(rc > 0 && (size_t)rc <= n);
	check_request(&r, buf, (size_t)rc, st);
	check_at_once(st->data + st->pos, n, rc, &r, buf, st);
	use_request(&r);
	st->pos += (size_t)rc;
	st->scan = 0;
	if (r.chunked) {
		http_chunked_init(&st->chunk);
		st->state = S_CHUNKED;
	} else if (r.content_length > 0) {
		st->body_left = (uint64_t)r.content_length;
		st->state = S_BODY;
	}
	free(buf);
	return true;
}

/* Decodes the chunked body bytes received; false when more must come. */
static bool
parse_chunked(struct stream *st)
{
	size_t n = st->avail - st->pos, used = n, data;
	char *buf = fuzz_dup(st->data + st->pos, n);
	int rc;

	rc = http_chunked_decode(&st->chunk, buf, &used, &data);
	free(buf);
	FUZZ_CHECK(used <= n && data <= used);
	st->pos += used;
	if (rc == HTTP_AGAIN) {
		FUZZ_CHECK(used == n);
		return false;
	}
	FUZZ_CHECK(rc == HTTP_OK || rc == HTTP_ERROR);
	st->state = rc == HTTP_OK ? S_HEADER : S_DONE;
	return rc == HTTP_OK;
}

/* Handles what has arrived, as conn_process() does. */
static void
process(struct stream *st)
{
	uint64_t take;

	while (st->pos < st->avail && st->state != S_DONE) {
		switch (st->state) {
		case S_HEADER:
			if (!parse_header(st))
				return;
			break;
		case S_BODY:
			take = st->avail - st->pos;
			if (take > st->body_left)
				take = st->body_left;
			st->pos += (size_t)take;
			st->body_left -= take;
			if (st->body_left == 0)
				st->state = S_HEADER;
			break;
		case S_CHUNKED:
			if (!parse_chunked(st))
				return;
			break;
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_split split;
	struct stream st;

	if (size < 3)
		return 0;
	memset(&st, 0, sizeof(st));
	st.lim = limit_sets[data[0] & 3];
	st.maxheaders = st.lim.max_headers;
	if (data[0] & 4)	/* the caller's array is the smaller limit */
		st.maxheaders = st.lim.max_headers / 2 + 1;
	st.headers = calloc(st.maxheaders, sizeof(*st.headers));
	FUZZ_CHECK(st.headers != NULL);
	fuzz_split_init(&split, data[1], data[2]);
	st.data = (const char *)data + 3;
	st.len = size - 3;
	st.state = S_HEADER;

	while (st.avail < st.len && st.state != S_DONE) {
		st.avail += fuzz_split_next(&split, st.len - st.avail);
		process(&st);
	}
	free(st.headers);
	return 0;
}

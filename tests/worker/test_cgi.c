/*
 * CGI response headers: what an application's header block turns into.
 * Every row is parsed at once and a byte at a time, each time from a
 * buffer of exactly the bytes received so far (ASan sees a read past
 * them); both must agree.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/cgi.h"
#include "worker/http.h"
#include "worker/http_response.h"

#define NHDR	16
#define MAXHDR	1024

#define RAW(s)	.raw = (s), .len = sizeof(s) - 1

#define NONE	HTTP_BODY_NONE
#define LENGTH	HTTP_BODY_LENGTH
#define UNTIL	HTTP_BODY_UNTIL_CLOSE

struct good {
	const char *name;
	const char *raw;
	size_t len;
	size_t blocklen;		/* 0: the whole input */
	bool head;
	int status;
	const char *reason;
	int framing;
	int64_t cl;			/* -1: none */
	size_t nheaders;
	const char *first;		/* name of the first header kept */
};

static const struct good goods[] = {
	{ "what php-fpm sends",
	  RAW("X-Powered-By: PHP/8.2.36\r\n"
	      "Content-type: text/html; charset=UTF-8\r\n\r\n<html>"),
	  .blocklen = 68, .status = 200, .reason = "", .framing = UNTIL,
	  .cl = -1, .nheaders = 2, .first = "X-Powered-By" },
	{ "Status with a reason",
	  RAW("Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\n"),
	  .status = 404, .reason = "Not Found", .framing = UNTIL, .cl = -1,
	  .nheaders = 1, .first = "Content-Type" },
	{ "Status without a reason",
	  RAW("status: 503\r\n\r\n"),
	  .status = 503, .reason = "", .framing = UNTIL, .cl = -1 },
	{ "Status after other fields",
	  RAW("A: 1\r\nB: 2\r\nStatus: 201 Created\r\nC: 3\r\n\r\n"),
	  .status = 201, .reason = "Created", .framing = UNTIL, .cl = -1,
	  .nheaders = 3, .first = "A" },
	{ "Location without Status is a 302",
	  RAW("Location: /elsewhere\r\n\r\n"),
	  .status = 302, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 1, .first = "Location" },
	{ "Location with Status keeps it",
	  RAW("Status: 301 Moved Permanently\r\nLocation: http://x/\r\n\r\n"),
	  .status = 301, .reason = "Moved Permanently", .framing = UNTIL,
	  .cl = -1, .nheaders = 1, .first = "Location" },
	{ "bare LF line ends",
	  RAW("Content-Type: text/plain\nX: y\n\nbody"),
	  .blocklen = 31, .status = 200, .reason = "", .framing = UNTIL,
	  .cl = -1, .nheaders = 2, .first = "Content-Type" },
	{ "mixed line ends",
	  RAW("A: 1\nB: 2\r\n\n"),
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 2, .first = "A" },
	{ "CRLF block end after LF lines",
	  RAW("A: 1\n\r\nrest"), .blocklen = 7,
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 1, .first = "A" },
	{ "an empty block",
	  RAW("\r\nbody"), .blocklen = 2,
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1 },
	{ "an empty block with a bare LF",
	  RAW("\nbody"), .blocklen = 1,
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1 },
	{ "Content-Length",
	  RAW("Content-Length: 12\r\n\r\n"),
	  .status = 200, .reason = "", .framing = LENGTH, .cl = 12,
	  .nheaders = 1, .first = "Content-Length" },
	{ "HEAD has no body",
	  RAW("Content-Length: 12\r\n\r\n"), .head = true,
	  .status = 200, .reason = "", .framing = NONE, .cl = 12,
	  .nheaders = 1, .first = "Content-Length" },
	{ "304 has no body",
	  RAW("Status: 304 Not Modified\r\n\r\n"),
	  .status = 304, .reason = "Not Modified", .framing = NONE,
	  .cl = -1 },
	{ "204 has no body",
	  RAW("Status: 204 No Content\r\nContent-Length: 0\r\n\r\n"),
	  .status = 204, .reason = "No Content", .framing = NONE, .cl = 0,
	  .nheaders = 1, .first = "Content-Length" },
	{ "value whitespace trimmed, empty value",
	  RAW("A:   spaced  \t\r\nB:\r\n\r\n"),
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 2, .first = "A" },
	{ "Transfer-Encoding says nothing about framing",
	  RAW("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"),
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 2, .first = "Transfer-Encoding" },
	{ "obs-text in a value",
	  RAW("X: caf\xc3\xa9\r\n\r\n"),
	  .status = 200, .reason = "", .framing = UNTIL, .cl = -1,
	  .nheaders = 1, .first = "X" },
	{ "Status 599",
	  RAW("Status: 599 Custom\r\n\r\n"),
	  .status = 599, .reason = "Custom", .framing = UNTIL, .cl = -1 },
};

struct bad {
	const char *name;
	const char *raw;
	size_t len;
	const char *why;
};

static const struct bad bads[] = {
	{ "bare CR", RAW("A: 1\rB: 2\r\n\r\n"), "bare CR" },
	{ "bare CR at the block end", RAW("A: 1\r\n\r\r\n"), "bare CR" },
	{ "CR CR LF", RAW("A: 1\r\r\n\r\n"), "bare CR" },
	{ "obs-fold", RAW("A: 1\r\n  more\r\n\r\n"), "obs-fold" },
	{ "no colon", RAW("Justtext\r\n\r\n"), "missing colon" },
	{ "no colon, bare LF", RAW("Justtext\n\n"), "missing colon" },
	{ "space in a name", RAW("Just text\r\n\r\n"), "before colon" },
	{ "slash in a name", RAW("A/B: 1\r\n\r\n"), "field name" },
	{ "space before colon", RAW("A : 1\r\n\r\n"), "before colon" },
	{ "empty name", RAW(": 1\r\n\r\n"), "empty field name" },
	{ "bare LF after a value with CR", RAW("A: 1\rx\n\n"), "bare CR" },
	{ "NUL in value", RAW("A: x\0y\r\n\r\n"), "field value" },
	{ "control in value", RAW("A: x\x01y\r\n\r\n"), "field value" },
	{ "Status not a number", RAW("Status: OK\r\n\r\n"), "invalid Status" },
	{ "Status of two digits", RAW("Status: 20\r\n\r\n"),
	  "invalid Status" },
	{ "Status of four digits", RAW("Status: 2000\r\n\r\n"),
	  "invalid Status" },
	{ "Status with a tab", RAW("Status: 200\tOK\r\n\r\n"),
	  "invalid Status" },
	{ "empty Status", RAW("Status:\r\n\r\n"), "invalid Status" },
	{ "Status 100", RAW("Status: 100 Continue\r\n\r\n"), "out of range" },
	{ "Status 101", RAW("Status: 101 Switching\r\n\r\n"),
	  "out of range" },
	{ "Status 600", RAW("Status: 600 X\r\n\r\n"), "out of range" },
	{ "Status 099", RAW("Status: 099 X\r\n\r\n"), "out of range" },
	{ "two Status fields", RAW("Status: 200\r\nStatus: 404\r\n\r\n"),
	  "duplicate Status" },
	{ "two Content-Length", RAW("Content-Length: 1\r\n"
	  "Content-Length: 1\r\n\r\n"), "duplicate Content-Length" },
	{ "bad Content-Length", RAW("Content-Length: 1x\r\n\r\n"),
	  "invalid Content-Length" },
	{ "negative Content-Length", RAW("Content-Length: -1\r\n\r\n"),
	  "invalid Content-Length" },
	{ "Content-Length in a 204",
	  RAW("Status: 204\r\nContent-Length: 3\r\n\r\n"), "204" },
};

static void *
copy(const char *p, size_t n)
{
	void *b = malloc(n ? n : 1);

	cr_assert(b != NULL);
	memcpy(b, p, n);
	return b;
}

static ssize_t
parse_once(const char *raw, size_t len, bool head, char **buf,
    struct http_response *r, struct http_header *h)
{
	size_t scan = 0;

	*buf = copy(raw, len);
	return cgi_parse_response(r, *buf, len, &scan, h, NHDR, MAXHDR, head);
}

static ssize_t
parse_bytewise(const char *raw, size_t len, bool head, char **buf,
    struct http_response *r, struct http_header *h, const char *name)
{
	size_t scan = 0, prev = 0, k;
	ssize_t rc = HTTP_AGAIN;

	*buf = NULL;
	for (k = 1; k <= len && rc == HTTP_AGAIN; k++) {
		free(*buf);
		*buf = copy(raw, k);
		rc = cgi_parse_response(r, *buf, k, &scan, h, NHDR, MAXHDR,
		    head);
		if (rc == HTTP_AGAIN) {
			cr_expect(scan >= prev && scan <= k,
			    "%s: scan %zu at %zu", name, scan, k);
			prev = scan;
		}
	}
	return rc;
}

static bool
span_is(struct span s, const char *want)
{
	return s.p != NULL && s.len == strlen(want) &&
	    memcmp(s.p, want, s.len) == 0;
}

static void
check_good(const struct good *t, const char *how, ssize_t rc,
    const struct http_response *r)
{
	size_t want = t->blocklen ? t->blocklen : t->len;

	cr_expect_eq(rc, (ssize_t)want, "%s (%s): returned %zd, want %zu (%s)",
	    t->name, how, rc, want, rc == HTTP_ERROR ? r->error : "");
	if (rc != (ssize_t)want)
		return;
	cr_expect_eq(r->version, 11, "%s (%s)", t->name, how);
	cr_expect_eq(r->status, t->status, "%s (%s): status %d", t->name, how,
	    r->status);
	cr_expect(span_is(r->reason, t->reason), "%s (%s): reason '%.*s'",
	    t->name, how, (int)r->reason.len, r->reason.p);
	cr_expect_eq(r->framing, t->framing, "%s (%s): framing %d", t->name,
	    how, r->framing);
	cr_expect_not(r->close, "%s (%s): close", t->name, how);
	cr_expect_not(r->chunked, "%s (%s): chunked", t->name, how);
	cr_expect_eq(r->content_length, t->cl, "%s (%s): content_length %lld",
	    t->name, how, (long long)r->content_length);
	cr_expect_eq(r->nheaders, t->nheaders, "%s (%s): %zu headers", t->name,
	    how, r->nheaders);
	if (t->first != NULL && r->nheaders > 0)
		cr_expect(span_is(r->headers[0].name, t->first),
		    "%s (%s): first header '%.*s'", t->name, how,
		    (int)r->headers[0].name.len, r->headers[0].name.p);
}

Test(cgi, good)
{
	struct http_header h[NHDR];
	struct http_response r;
	const struct good *t;
	ssize_t rc;
	char *buf;

	for (t = goods; t < goods + sizeof(goods) / sizeof(goods[0]); t++) {
		memset(&r, 0xa5, sizeof(r));
		rc = parse_once(t->raw, t->len, t->head, &buf, &r, h);
		check_good(t, "at once", rc, &r);
		free(buf);
		memset(&r, 0x5a, sizeof(r));
		rc = parse_bytewise(t->raw, t->len, t->head, &buf, &r, h,
		    t->name);
		check_good(t, "byte by byte", rc, &r);
		free(buf);
	}
}

Test(cgi, bad)
{
	struct http_header h[NHDR];
	struct http_response r;
	const struct bad *t;
	const char *why;
	ssize_t rc;
	char *buf;

	for (t = bads; t < bads + sizeof(bads) / sizeof(bads[0]); t++) {
		memset(&r, 0, sizeof(r));
		rc = parse_once(t->raw, t->len, false, &buf, &r, h);
		free(buf);
		cr_expect_eq(rc, HTTP_ERROR, "%s: returned %zd", t->name, rc);
		if (rc != HTTP_ERROR)
			continue;
		cr_expect(strstr(r.error, t->why) != NULL,
		    "%s: error '%s', want '%s'", t->name, r.error, t->why);
		why = r.error;
		memset(&r, 0, sizeof(r));
		rc = parse_bytewise(t->raw, t->len, false, &buf, &r, h,
		    t->name);
		free(buf);
		cr_expect_eq(rc, HTTP_ERROR, "%s: byte by byte %zd", t->name,
		    rc);
		cr_expect(rc != HTTP_ERROR || strcmp(r.error, why) == 0,
		    "%s: byte by byte '%s', at once '%s'", t->name, r.error,
		    why);
	}
}

Test(cgi, cache_fields)
{
	static const char raw[] =
	    "Cache-Control: max-age=60\r\nETag: \"v1\"\r\n"
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
	    "Vary: Accept-Encoding\r\nSet-Cookie: a=1\r\n"
	    "Expires: Thu, 01 Jan 2099 00:00:00 GMT\r\n"
	    "Cache-Control: public\r\n\r\n";
	struct http_header h[NHDR];
	struct http_response r;
	size_t scan = 0;

	cr_assert_eq(cgi_parse_response(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, MAXHDR, false), (ssize_t)sizeof(raw) - 1);
	cr_expect(span_is(r.cache_control, "max-age=60"));
	cr_expect(span_is(r.etag, "\"v1\""));
	cr_expect(span_is(r.last_modified, "Sun, 06 Nov 1994 08:49:37 GMT"));
	cr_expect(span_is(r.vary, "Accept-Encoding"));
	cr_expect(span_is(r.set_cookie, "a=1"));
	cr_expect(span_is(r.expires, "Thu, 01 Jan 2099 00:00:00 GMT"));
	cr_expect_null(r.age.p);
	cr_expect_null(r.date.p);
	cr_expect_eq(r.nheaders, 7);
}

/* A block of n bytes: filler lines, then the empty line. */
static void
long_block(char *buf, size_t n)
{
	size_t i;

	memset(buf, 'a', n);
	for (i = 40; i + 2 < n; i += 41)
		buf[i] = '\n';
	memcpy(buf, "X-Long: ", 8);
	for (i = 41; i + 2 < n; i += 41)
		memcpy(buf + i, "Y: ", 3);
	buf[n - 2] = '\n';
	buf[n - 1] = '\n';
}

Test(cgi, limits)
{
	struct http_header h[64];
	struct http_response r;
	size_t scan = 0;
	char buf[2048];

	/* A block of exactly the limit parses; one byte more does not. */
	long_block(buf, MAXHDR);
	buf[MAXHDR - 3] = 'a';
	cr_expect_eq(cgi_parse_response(&r, buf, MAXHDR, &scan, h, 64, MAXHDR,
	    false), MAXHDR);
	scan = 0;
	long_block(buf, MAXHDR + 1);
	cr_expect_eq(cgi_parse_response(&r, buf, MAXHDR + 1, &scan, h, 64,
	    MAXHDR, false), HTTP_ERROR);
	cr_expect_str_eq(r.error, "CGI header block too large");
	/* Too many fields; Status is not one of them. */
	scan = 0;
	cr_expect_eq(cgi_parse_response(&r, "A: 1\nStatus: 200\nB: 2\n\n", 23,
	    &scan, h, 2, MAXHDR, false), 23);
	scan = 0;
	cr_expect_eq(cgi_parse_response(&r, "A: 1\nB: 2\nC: 3\n\n", 16, &scan,
	    h, 2, MAXHDR, false), HTTP_ERROR);
	cr_expect_str_eq(r.error, "too many CGI header fields");
}

/* A slow application: one byte per call, scanning never starts over. */
Test(cgi, incremental_in_one_buffer)
{
	static const char raw[] = "Status: 200 OK\r\nA: 1\n\r\nbody";
	struct http_header h[NHDR];
	struct http_response r;
	size_t scan = 0, k;
	ssize_t rc = HTTP_AGAIN;

	for (k = 1; k <= sizeof(raw) - 1 && rc == HTTP_AGAIN; k++)
		rc = cgi_parse_response(&r, raw, k, &scan, h, NHDR, MAXHDR,
		    false);
	cr_assert_eq(rc, 23);
	cr_expect_eq(k - 1, 23);
	cr_expect_eq(r.status, 200);
	cr_expect_eq(r.nheaders, 1);
}

/*
 * HTTP/1.1 request parsing (RFC 9112): the request line and header block,
 * Host checks, content-coding choice and reason phrases (the chunked
 * body decoder is in http_chunked.c).
 *
 * The header block is parsed in two steps.  While it is incomplete, only
 * line endings are looked at (memchr for LF), which also rejects a bare CR
 * or LF as soon as it arrives.  Once "\r\n\r\n" is in the buffer, the whole
 * block is checked and split in one pass over the bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"
#include "worker/http_lex.h"



/*
 * *scan holds the resume offset in its low bits and, in the top bit,
 * whether the request line has been seen, so that the next call knows
 * which limit applies and what an empty line means without looking back.
 */
#define SCAN_RLINE	((size_t)1 << (sizeof(size_t) * 8 - 1))

/* Header fields the parser acts on. */
enum field {
	F_OTHER,
	F_HOST,
	F_CONTENT_LENGTH,
	F_TRANSFER_ENCODING,
	F_CONNECTION,
	F_EXPECT,
	F_IF_MATCH,
	F_IF_NONE_MATCH,
	F_IF_MODIFIED_SINCE,
	F_IF_UNMODIFIED_SINCE,
	F_RANGE,
	F_IF_RANGE,
};

/* What the fields said, checked together once the block is read. */
struct fields {
	struct span host;
	bool has_host;
	bool has_te;
	int te_chunked;			/* times "chunked" was listed */
	bool te_other;			/* another coding was listed */
	bool conn_close;
	bool conn_keepalive;
	bool expect_other;
};




static int
fail(struct http_request *r, int status, const char *why)
{
	r->status = status;
	r->error = why;
	return HTTP_ERROR;
}

/*
 * Looks for the end of the header block from where the last call stopped.
 * Returns the block length, HTTP_AGAIN or HTTP_ERROR.  The request line
 * with its CRLF must end within max_request_line bytes of buf (leading
 * empty lines count, which also bounds them) and the whole block within
 * max_header_size bytes; nothing past those limits is looked at, so the
 * answer does not depend on how the bytes were split.
 */
static ssize_t
find_end(struct http_request *r, const char *buf, size_t len, size_t *scan,
    const struct http_limits *lim)
{
	size_t pos = *scan & ~SCAN_RLINE, max, stop, end;
	bool rline = (*scan & SCAN_RLINE) != 0;
	ssize_t n;

	for (;;) {
		max = lim->max_header_size;
		if (!rline && lim->max_request_line < max)
			max = lim->max_request_line;
		stop = len < max ? len : max;
		if (pos >= stop)
			break;
		if ((n = http_line_end(buf, pos, stop)) < 0)
			return fail(r, 400, rline ? "bare CR in header" :
			    "bare CR in request line");
		if ((end = (size_t)n) == stop) {
			pos = stop;
			break;
		}
		if (end == 0 || buf[end - 1] != '\r')
			return fail(r, 400, rline ? "bare LF in header" :
			    "bare LF in request line");

		if (end == 1 || buf[end - 2] == '\n') {
			/* An empty line: the end, or one before the request. */
			if (rline) {
				*scan = (end - 1) | SCAN_RLINE;
				return (ssize_t)end + 1;
			}
		} else
			rline = true;
		pos = end + 1;
	}

	*scan = pos | (rline ? SCAN_RLINE : 0);
	if (len < max)
		return HTTP_AGAIN;
	if (!rline && max == lim->max_request_line)
		return fail(r, 414, "request line too long");
	return fail(r, 431, "header block too large");
}

static enum http_method
method_lookup(const char *p, size_t n)
{
	switch (n) {
	case 3:
		if (memcmp(p, "GET", 3) == 0)
			return HTTP_M_GET;
		if (memcmp(p, "PUT", 3) == 0)
			return HTTP_M_PUT;
		break;
	case 4:
		if (memcmp(p, "HEAD", 4) == 0)
			return HTTP_M_HEAD;
		if (memcmp(p, "POST", 4) == 0)
			return HTTP_M_POST;
		break;
	case 5:
		if (memcmp(p, "TRACE", 5) == 0)
			return HTTP_M_TRACE;
		if (memcmp(p, "PATCH", 5) == 0)
			return HTTP_M_PATCH;
		if (memcmp(p, "PURGE", 5) == 0)
			return HTTP_M_PURGE;
		break;
	case 6:
		if (memcmp(p, "DELETE", 6) == 0)
			return HTTP_M_DELETE;
		break;
	case 7:
		if (memcmp(p, "OPTIONS", 7) == 0)
			return HTTP_M_OPTIONS;
		if (memcmp(p, "CONNECT", 7) == 0)
			return HTTP_M_CONNECT;
		break;
	}
	return HTTP_M_UNKNOWN;
}

/* Splits an origin-form path at the first '?'. */
static void
split_query(struct http_request *r, const char *p, size_t n)
{
	const char *q = memchr(p, '?', n);

	r->path.p = p;
	r->path.len = n;
	if (q != NULL) {
		r->path.len = (size_t)(q - p);
		r->query.p = q + 1;
		r->query.len = n - r->path.len - 1;
	}
}

/* The authority of an absolute-form target replaces the Host field. */
static int
absolute_form(struct http_request *r, const char *p, size_t n)
{
	const char *a = p, *end = p + n, *e;
	ssize_t hl;

	a += http_ieq(p, "http://", 7) ? 7 : 8;
	for (e = a; e < end && *e != '/' && *e != '?'; e++)
		if (*e == '@')
			return fail(r, 400, "userinfo in request target");
	hl = http_host_check(a, (size_t)(e - a));
	if (hl <= 0)
		return fail(r, 400, "invalid authority in request target");
	r->host.p = a;
	r->host.len = (size_t)hl;
	r->absolute_form = true;
	if (e < end && *e == '/')
		split_query(r, e, (size_t)(end - e));
	else {
		r->path.p = "/";
		r->path.len = 1;
		if (e < end) {
			r->query.p = e + 1;
			r->query.len = (size_t)(end - e - 1);
		}
	}
	return HTTP_OK;
}

/*
 * Sorts the request-target into its form (RFC 9112 section 3.2); q is
 * where an origin-form path ends ('?' or the end), plain whether that
 * path is its own normal form.
 */
static int
target_form(struct http_request *r, const char *q, bool plain)
{
	const char *p = r->target.p;
	size_t n = r->target.len;
	ssize_t hl;

	if (r->method == HTTP_M_CONNECT) {
		/* authority-form = uri-host ":" port (the host's length
		 * leaves out a trailing dot: look for the colon after it) */
		hl = http_host_check(p, n);
		if (hl <= 0 || p[n - 1] == ':' ||
		    memchr(p + hl, ':', n - (size_t)hl) == NULL)
			return fail(r, 400, "CONNECT needs host:port");
		r->host.p = p;
		r->host.len = (size_t)hl;
		r->path.p = "";
		r->path.len = 0;
		return HTTP_OK;
	}
	if (p[0] == '/') {
		r->path.p = p;
		r->path.len = (size_t)(q - p);
		if (q < p + n) {
			r->query.p = q + 1;
			r->query.len = n - r->path.len - 1;
		}
		r->path_plain = plain;
		return HTTP_OK;
	}
	if (p[0] == '*' && n == 1) {
		if (r->method != HTTP_M_OPTIONS)
			return fail(r, 400, "asterisk-form without OPTIONS");
		r->path = r->target;
		return HTTP_OK;
	}
	if ((n > 7 && http_ieq(p, "http://", 7)) || (n > 8 && http_ieq(p, "https://", 8)))
		return absolute_form(r, p, n);
	return fail(r, 400, "invalid request target");
}

/*
 * Parses "method SP request-target SP HTTP-version CRLF" at *pp; a LF
 * before end stops every scan (parse_block() checks the CRLF).
 */
static int
request_line(struct http_request *r, const char **pp, const char *end)
{
	const char *p = *pp, *t, *v, *q;
	bool plain = true;

	r->method_name.p = p;
	if (end - p > 4 && memcmp(p, "GET ", 4) == 0) {
		/* Most requests: one word's compare. */
		r->method_name.len = 3;
		r->method = HTTP_M_GET;
		p += 3;
	} else {
		while (IS(*p, C_TCHAR))
			p++;
		if (*p != ' ' || p == r->method_name.p)
			return fail(r, 400, "invalid method");
		r->method_name.len = (size_t)(p - r->method_name.p);
		r->method = method_lookup(r->method_name.p,
		    r->method_name.len);
	}

	/*
	 * The path up to '?' is also looked at as http_path_normalize()
	 * would: printable, no '%', no "//" or "/." (a '/' is never last in
	 * the block, so p[1] can be read).
	 */
	t = ++p;
	for (;;) {
		while (IS(p[0], C_PATH) && IS(p[1], C_PATH) &&
		    IS(p[2], C_PATH) && IS(p[3], C_PATH))
			p += 4;
		while (IS(*p, C_PATH))
			p++;
		if (*p == '/') {
			if (p[1] == '/' || p[1] == '.')
				plain = false;
		} else if (*p == '%')
			plain = false;
		else
			break;
		p++;
	}
	q = p;
	while (IS(*p, C_TARGET))
		p++;
	if (*p == '\r')
		return fail(r, 400, "missing HTTP version");
	if (*p != ' ')
		return fail(r, 400, "invalid character in request target");
	if (p == t)
		return fail(r, 400, "empty request target");
	r->target.p = t;
	r->target.len = (size_t)(p - t);

	/* "HTTP/" DIGIT "." DIGIT CRLF, then at least the final CRLF. */
	v = p + 1;
	if (end - v < 12)
		return fail(r, 400, "invalid HTTP version");
	if (memcmp(v, "HTTP/1.1\r", 9) == 0) {
		/* Most requests: two words' compare. */
		r->version = 11;
	} else {
		if (memcmp(v, "HTTP/", 5) != 0 || !IS(v[5], C_DIGIT) ||
		    v[6] != '.' || !IS(v[7], C_DIGIT) || v[8] != '\r')
			return fail(r, 400, "invalid HTTP version");
		if (v[5] != '1')
			return fail(r, 505, "unsupported HTTP version");
		r->version = v[7] == '0' ? 10 : 11;
	}
	*pp = v + 10;

	return target_form(r, q, plain);
}

static enum field
field_lookup(const char *p, size_t n)
{
	uint32_t w, host;

	switch (n) {
	case 4:
		/* Every request has one: a word's compare.  A tchar ORed
		 * with 0x20 is a letter only when it was that letter. */
		memcpy(&w, p, 4);
		memcpy(&host, "host", 4);
		if ((w | 0x20202020u) == host)
			return F_HOST;
		break;
	case 5:
		if (http_ieq(p, "range", 5))
			return F_RANGE;
		break;
	case 6:
		if (http_ieq(p, "expect", 6))
			return F_EXPECT;
		break;
	case 8:
		if (http_ieq(p, "if-match", 8))
			return F_IF_MATCH;
		if (http_ieq(p, "if-range", 8))
			return F_IF_RANGE;
		break;
	case 10:
		if (http_ieq(p, "connection", 10))
			return F_CONNECTION;
		break;
	case 13:
		if (http_ieq(p, "if-none-match", 13))
			return F_IF_NONE_MATCH;
		break;
	case 14:
		if (http_ieq(p, "content-length", 14))
			return F_CONTENT_LENGTH;
		break;
	case 17:
		if (http_ieq(p, "transfer-encoding", 17))
			return F_TRANSFER_ENCODING;
		if (http_ieq(p, "if-modified-since", 17))
			return F_IF_MODIFIED_SINCE;
		break;
	case 19:
		if (http_ieq(p, "if-unmodified-since", 19))
			return F_IF_UNMODIFIED_SINCE;
		break;
	}
	return F_OTHER;
}



static int
content_length(struct http_request *r, struct span v)
{
	const char *why = http_content_length(v, &r->content_length);

	return why == NULL ? HTTP_OK : fail(r, 400, why);
}

/*
 * Several Transfer-Encoding lines form one list.  Codings are counted here
 * and judged once all fields are read.
 */
static int
transfer_encoding(struct http_request *r, struct fields *f, struct span v)
{
	const char *p = v.p, *end = v.p + v.len;
	struct span e;
	size_t n;

	if (r->version == 10)
		return fail(r, 400, "Transfer-Encoding in HTTP/1.0");
	f->has_te = true;
	while (http_list_next(&p, end, &e)) {
		n = http_token_len(e);
		if (n == e.len && http_span_ieq(e, "chunked"))
			f->te_chunked++;
		else if (n == e.len)
			f->te_other = true;
		else {
			/* A coding with parameters, or not a token. */
			while (n < e.len && IS(e.p[n], C_WS))
				n++;
			if (n == 0 || e.p[n] != ';')
				return fail(r, 400,
				    "invalid Transfer-Encoding");
			f->te_other = true;
		}
	}
	return HTTP_OK;
}

static int
connection(struct http_request *r, struct fields *f, struct span v)
{
	const char *why;

	r->connection = true;
	why = http_connection(v, &f->conn_close, &f->conn_keepalive,
	    &r->conn_options);

	return why == NULL ? HTTP_OK : fail(r, 400, why);
}

/* HTTP/1.0 has no Expect (RFC 9110 section 10.1.1): ignore it there. */
static void
expect(struct http_request *r, struct fields *f, struct span v)
{
	const char *p = v.p, *end = v.p + v.len;
	struct span e;

	if (r->version == 10)
		return;
	while (http_list_next(&p, end, &e)) {
		if (http_span_ieq(e, "100-continue"))
			r->expect_continue = true;
		else
			f->expect_other = true;
	}
}

/* Fields that may appear once; a second one is an error. */
static int
singleton(struct http_request *r, struct span *dst, struct span v,
    const char *dup)
{
	if (dst->p != NULL)
		return fail(r, 400, dup);
	*dst = v;
	return HTTP_OK;
}

static int
field(struct http_request *r, struct fields *f, const struct http_header *h)
{
	switch (field_lookup(h->name.p, h->name.len)) {
	case F_OTHER:
		break;
	case F_HOST:
		if (f->has_host)
			return fail(r, 400, "duplicate Host");
		f->has_host = true;
		f->host = h->value;
		break;
	case F_CONTENT_LENGTH:
		return content_length(r, h->value);
	case F_TRANSFER_ENCODING:
		return transfer_encoding(r, f, h->value);
	case F_CONNECTION:
		return connection(r, f, h->value);
	case F_EXPECT:
		expect(r, f, h->value);
		break;
	case F_IF_MATCH:
		/* Only the first line of these lists is used. */
		if (r->if_match.p == NULL)
			r->if_match = h->value;
		break;
	case F_IF_NONE_MATCH:
		if (r->if_none_match.p == NULL)
			r->if_none_match = h->value;
		break;
	case F_IF_MODIFIED_SINCE:
		return singleton(r, &r->if_modified_since, h->value,
		    "duplicate If-Modified-Since");
	case F_IF_UNMODIFIED_SINCE:
		return singleton(r, &r->if_unmodified_since, h->value,
		    "duplicate If-Unmodified-Since");
	case F_RANGE:
		return singleton(r, &r->range, h->value, "duplicate Range");
	case F_IF_RANGE:
		return singleton(r, &r->if_range, h->value,
		    "duplicate If-Range");
	}
	return HTTP_OK;
}

/* Parses one "name: value" line at *pp, which ends in CRLF before end. */
static int
field_line(struct http_request *r, const char **pp, const char *end,
    struct http_header *h)
{
	const char *why = http_field_line_in(pp, end, h);

	return why == NULL ? HTTP_OK : fail(r, 400, why);
}

/* Whether n bytes, at most 64, are the same: a word at a time (the last
 * word overlapping), which for a short host beats a call to memcmp(). */
static inline bool
same_bytes(const char *a, const char *b, size_t n)
{
	uint64_t x, y;

	if (n < 8)
		return memcmp(a, b, n) == 0;
	for (; n > 8; a += 8, b += 8, n -= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return false;
	}
	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	return x == y;
}

/*
 * http_host_check() of a Host value, with the answer for the last value
 * kept: a client names the same host in each of its requests.  *id
 * numbers the values kept, so that what depends on the value alone (the
 * server block) can be kept by the number (0: the value is not kept).
 */
static ssize_t
host_check(struct span host, uint64_t *id)
{
	static struct {
		size_t len;
		ssize_t hl;
		uint64_t id;
		char host[64];
	} last = { .hl = -2 };

	if (last.hl != -2 && host.len == last.len &&
	    same_bytes(host.p, last.host, host.len)) {
		*id = last.id;
		return last.hl;
	}
	if (host.len > sizeof(last.host)) {
		*id = 0;
		return http_host_check(host.p, host.len);
	}
	last.len = host.len;
	last.hl = http_host_check(host.p, host.len);
	memcpy(last.host, host.p, host.len);
	*id = ++last.id;
	return last.hl;
}

/* The checks that need all fields, in order of severity. */
static int
fields_done(struct http_request *r, struct fields *f)
{
	ssize_t hl;

	if (r->version == 11 && !f->has_host)
		return fail(r, 400, "missing Host");
	if (f->has_host && r->host.p == NULL) {
		hl = host_check(f->host, &r->host_id);
		if (hl < 0)
			return fail(r, 400, "invalid Host");
		r->host.p = f->host.p;
		r->host.len = (size_t)hl;
	}
	if (f->has_te) {
		if (r->content_length != -1)
			return fail(r, 400,
			    "both Transfer-Encoding and Content-Length");
		if (f->te_chunked > 1)
			return fail(r, 400, "chunked applied twice");
		if (f->te_other)
			return fail(r, 501, "unsupported transfer coding");
		if (f->te_chunked == 0)
			return fail(r, 400, "empty Transfer-Encoding");
		r->chunked = true;
	}
	if (f->expect_other)
		return fail(r, 417, "unsupported expectation");
	if (r->version == 11)
		r->keepalive = !f->conn_close;
	else
		r->keepalive = f->conn_keepalive && !f->conn_close;
	return HTTP_OK;
}

/*
 * Parses a header block at buf.  checked: find_end() has seen all of it,
 * so every line ends in CRLF and end is where the block ends.  Unchecked,
 * end is one past the last LF of the buffer, where every scan stops (no
 * scan takes CR or LF), and each line's CRLF and the request line's limit
 * are checked here.  Returns the block's length, HTTP_ERROR, or (only
 * unchecked) HTTP_AGAIN when the bytes are not a whole block this way.
 */
static inline ssize_t
parse_block(struct http_request *r, const char *buf, const char *end,
    struct http_header *headers, size_t maxheaders,
    const struct http_limits *lim, bool checked)
{
	const char *p = buf;
	struct fields f;
	size_t cap;

	memset(&f, 0, sizeof(f));
	cap = lim->max_headers < maxheaders ? lim->max_headers : maxheaders;

	for (;;) {
		if (!checked && p == end)
			return HTTP_AGAIN;
		if (*p != '\r')
			break;
		if (!checked && p[1] != '\n')
			return HTTP_AGAIN;
		p += 2;
	}
	if (request_line(r, &p, end) == HTTP_ERROR)
		return HTTP_ERROR;
	if (!checked && (p[-1] != '\n' ||
	    (size_t)(p - buf) > lim->max_request_line))
		return HTTP_AGAIN;
	for (;;) {
		if (!checked && p == end)
			return HTTP_AGAIN;
		if (*p == '\r')
			break;
		if (r->nheaders == cap)
			return fail(r, 431, "too many header fields");
		if (field_line(r, &p, end, &headers[r->nheaders]) ==
		    HTTP_ERROR)
			return HTTP_ERROR;
		if (!checked && p[-1] != '\n')
			return HTTP_AGAIN;
		if (field(r, &f, &headers[r->nheaders++]) == HTTP_ERROR)
			return HTTP_ERROR;
	}
	if (!checked && p[1] != '\n')
		return HTTP_AGAIN;
	if (fields_done(r, &f) == HTTP_ERROR)
		return HTTP_ERROR;
	return p + 2 - buf;
}

static void
request_init(struct http_request *r, struct http_header *headers)
{
	memset(r, 0, sizeof(*r));
	r->headers = headers;
	r->content_length = -1;
}

/*
 * A new request whose block is all in the buffer, the common case, is
 * parsed in one pass: the block is not looked for first.  Anything else
 * (a block still coming, a bare CR or LF, any error, a limit) goes the
 * long way, find_end() then parse_block(), which gives the answer, so
 * both ways answer alike by construction.
 */
ssize_t
http_parse_request(struct http_request *r, const char *buf, size_t len,
    size_t *scan, struct http_header *headers, size_t maxheaders,
    const struct http_limits *lim)
{
	const char *lf;
	ssize_t n;

	if (*scan == 0 && (lf = memrchr(buf, '\n', len <
	    lim->max_header_size ? len : lim->max_header_size)) != NULL) {
		request_init(r, headers);
		n = parse_block(r, buf, lf + 1, headers, maxheaders, lim,
		    false);
		if (n > 0)
			return n;
	}
	n = find_end(r, buf, len, scan, lim);
	if (n < 0)
		return n;
	request_init(r, headers);
	return parse_block(r, buf, buf + n, headers, maxheaders, lim, true);
}

struct span
http_header_getn(const struct http_request *r, const char *name, size_t n)
{
	struct span none = { NULL, 0 };
	const struct http_header *h;
	size_t i, j;

	for (i = 0; i < r->nheaders; i++) {
		h = &r->headers[i];
		if (h->name.len != n)
			continue;
		for (j = 0; j < n; j++)
			if (http_lower((unsigned char)h->name.p[j]) !=
			    http_lower((unsigned char)name[j]))
				break;
		if (j == n)
			return h->value;
	}
	return none;
}

struct span
http_request_authority(const struct http_request *r)
{
	const char *a, *e, *end = r->target.p + r->target.len;

	if (!r->absolute_form)
		return http_header_get(r, "Host");
	a = r->target.p + (http_ieq(r->target.p, "http://", 7) ? 7 : 8);
	for (e = a; e < end && *e != '/' && *e != '?'; e++)
		;
	return (struct span){ a, (size_t)(e - a) };
}

/* Checks an IPv6address (RFC 3986 section 3.2.2) between the brackets. */
static bool
ipv6_check(const char *p, size_t n)
{
	size_t i = 0, k, groups = 0, dots, digits;
	bool gap = false;

	if (n >= 2 && p[0] == ':' && p[1] == ':') {
		gap = true;
		i = 2;
	}
	while (i < n) {
		for (k = i; k < n && k - i < 5 && IS(p[k], C_HEX); k++)
			;
		if (k < n && p[k] == '.') {
			/* The IPv4 tail: four decimal octets. */
			for (dots = 0, digits = 0; i < n; i++) {
				if (p[i] == '.') {
					if (digits == 0 || ++dots > 3)
						return false;
					digits = 0;
				} else if (!IS(p[i], C_DIGIT) ||
				    ++digits > 3 || (digits == 2 &&
				    p[i - 1] == '0'))
					return false;
				else if (digits == 3 &&
				    (p[i - 2] - '0') * 100 +
				    (p[i - 1] - '0') * 10 + (p[i] - '0') > 255)
					return false;
			}
			if (dots != 3 || digits == 0)
				return false;
			groups += 2;
			break;
		}
		if (k == i || k - i > 4)
			return false;
		groups++;
		i = k;
		if (i == n)
			break;
		if (p[i++] != ':' || i == n)
			return false;
		if (p[i] == ':') {
			if (gap)
				return false;
			gap = true;
			i++;
		}
	}
	return gap ? groups <= 7 : groups == 8;
}

/*
 * An IPv4 address is also a reg-name, so the reg-name rule covers it.  An
 * empty host is refused, as no virtual host can match it; so are IPv6 zone
 * identifiers and IPvFuture.  An IPv6 literal keeps its brackets.  A name's
 * one trailing dot (the absolute DNS form, "example.com.") is not part of
 * the host it names, and an empty label ("a..b", ".a") names none: as in
 * nginx, which nginx users' server names rely on.
 */
ssize_t
http_host_check(const char *p, size_t len)
{
	size_t i = 0, port = 0, digits, hl;
	const char *rb;

	if (len > 0 && p[0] == '[') {
		rb = memchr(p, ']', len);
		if (rb == NULL || !ipv6_check(p + 1, (size_t)(rb - p - 1)))
			return -1;
		i = (size_t)(rb - p) + 1;
		hl = i;
	} else {
		for (;;) {
			while (i < len && IS(p[i], C_HOST))
				i++;
			if (i + 2 < len && p[i] == '%' &&
			    IS(p[i + 1], C_HEX) && IS(p[i + 2], C_HEX))
				i += 3;
			else
				break;
		}
		hl = i > 1 && p[i - 1] == '.' ? i - 1 : i;
		if (hl == 0 || p[0] == '.' || memmem(p, i, "..", 2) != NULL)
			return -1;	/* an empty label names no host */
	}
	if (i == len)
		return (ssize_t)hl;
	if (p[i] != ':' || len - i - 1 > 5)
		return -1;
	for (digits = i + 1; digits < len; digits++) {
		if (!IS(p[digits], C_DIGIT))
			return -1;
		port = port * 10 + (size_t)(p[digits] - '0');
	}
	return port > 65535 ? -1 : (ssize_t)hl;
}

/* A weight ("q=0.5") of zero: "0", "0.", "0.0" up to "0.000". */
static bool
weight_zero(struct span e)
{
	const char *p = e.p, *end = e.p + e.len, *semi;

	while ((semi = memchr(p, ';', (size_t)(end - p))) != NULL) {
		p = http_skip_ows(semi + 1, end);
		if (end - p >= 2 && (p[0] == 'q' || p[0] == 'Q') &&
		    p[1] == '=') {
			p += 2;
			if (p == end || *p != '0')
				return false;
			for (p++; p < end && (*p == '.' || *p == '0'); p++)
				;
			return p == end || *p == ';' || IS(*p, C_WS);
		}
	}
	return false;
}

bool
http_accepts_gzip(struct span v)
{
	const char *p = v.p, *end = v.p + v.len;
	int gzip = -1, star = -1;
	struct span e, name;

	if (v.p == NULL)
		return false;
	while (http_list_next(&p, end, &e)) {
		name.p = e.p;
		name.len = http_token_len(e);
		if (name.len == 1 && name.p[0] == '*')
			star = !weight_zero(e);
		else if ((name.len == 4 && http_ieq(name.p, "gzip", 4)) ||
		    (name.len == 6 && http_ieq(name.p, "x-gzip", 6)))
			gzip = !weight_zero(e);
	}
	return gzip == 1 || (gzip == -1 && star == 1);
}

/* The weight of a list element, in thousandths: "q=0.5" is 500; 1000
 * without one.  A malformed weight counts as 0, which refuses. */
static int
weight(struct span e)
{
	const char *p = e.p, *end = e.p + e.len, *semi;
	int q, i;

	while ((semi = memchr(p, ';', (size_t)(end - p))) != NULL) {
		p = http_skip_ows(semi + 1, end);
		if (end - p < 3 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=')
			continue;
		p += 2;
		if (*p != '0' && *p != '1')
			return 0;
		q = (*p++ - '0') * 1000;
		if (p < end && *p == '.')
			for (p++, i = 100; p < end && IS(*p, C_DIGIT) &&
			    i > 0; p++, i /= 10)
				q += (*p - '0') * i;
		return q > 1000 ? 1000 : q;
	}
	return 1000;
}

const char *const http_enc_token[ENC_COUNT] = {
	[ENC_BR] = "br", [ENC_GZIP] = "gzip",
};
const char *const http_enc_field[ENC_COUNT] = {
	[ENC_BR] = "Content-Encoding: br\r\n",
	[ENC_GZIP] = "Content-Encoding: gzip\r\n",
};

int
http_encoding_pick(struct span v, const char *const *names, int n,
    unsigned offer)
{
	const char *p = v.p, *end = v.p + v.len;
	int q[32], star = -1, identity = -1, best = -1, i, w;
	struct span e, name;

	if (v.p == NULL || n > 32)
		return -1;
	for (i = 0; i < n; i++)
		q[i] = -1;
	while (http_list_next(&p, end, &e)) {
		name.p = e.p;
		name.len = http_token_len(e);
		w = weight(e);
		if (name.len == 1 && name.p[0] == '*')
			star = w;
		else if (name.len == 8 && http_ieq(name.p, "identity", 8))
			identity = w;
		else if (name.len == 6 && http_ieq(name.p, "x-gzip", 6))
			name.len = 4, name.p += 2;
		for (i = 0; i < n; i++)
			if (strlen(names[i]) == name.len &&
			    http_ieq(name.p, names[i], name.len))
				q[i] = w;
	}
	for (i = 0; i < n; i++) {
		if (!(offer & 1u << i))
			continue;
		w = q[i] >= 0 ? q[i] : star;
		if (w > 0 && (best < 0 || w > (q[best] >= 0 ? q[best] : star)))
			best = i;
	}
	if (best < 0)
		return -1;
	w = q[best] >= 0 ? q[best] : star;
	/* identity, acceptable unless refused, wins only when it is asked
	 * for (by name or "*") with more weight. */
	if (identity < 0)
		identity = star;
	return identity > w ? -1 : best;
}

/* Every status corral names, with its reason phrase. */
#define HTTP_STATUSES \
	S(100, "Continue") \
	S(101, "Switching Protocols") \
	S(200, "OK") \
	S(201, "Created") \
	S(204, "No Content") \
	S(206, "Partial Content") \
	S(301, "Moved Permanently") \
	S(302, "Found") \
	S(303, "See Other") \
	S(304, "Not Modified") \
	S(307, "Temporary Redirect") \
	S(308, "Permanent Redirect") \
	S(400, "Bad Request") \
	S(401, "Unauthorized") \
	S(403, "Forbidden") \
	S(404, "Not Found") \
	S(405, "Method Not Allowed") \
	S(408, "Request Timeout") \
	S(411, "Length Required") \
	S(412, "Precondition Failed") \
	S(413, "Content Too Large") \
	S(414, "URI Too Long") \
	S(415, "Unsupported Media Type") \
	S(416, "Range Not Satisfiable") \
	S(417, "Expectation Failed") \
	S(421, "Misdirected Request") \
	S(426, "Upgrade Required") \
	S(431, "Request Header Fields Too Large") \
	S(500, "Internal Server Error") \
	S(501, "Not Implemented") \
	S(502, "Bad Gateway") \
	S(503, "Service Unavailable") \
	S(504, "Gateway Timeout") \
	S(505, "HTTP Version Not Supported")

const char *
http_reason(int status)
{
	switch (status) {
#define S(code, reason)	case code: return reason;
	HTTP_STATUSES
#undef S
	}
	return "Unknown";
}

/* Whole status lines, made by the compiler: nothing to format per response. */
const char *
http_status_line(int status, size_t *len)
{
	switch (status) {
#define S(code, reason)	case code: \
		*len = sizeof("HTTP/1.1 " #code " " reason "\r\n") - 1; \
		return "HTTP/1.1 " #code " " reason "\r\n";
	HTTP_STATUSES
#undef S
	}
	return NULL;
}

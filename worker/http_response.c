/*
 * HTTP/1.1 response parsing for the reverse proxy (RFC 9112): the status
 * line and header block, body framing, hop-by-hop fields and Cache-Control
 * (RFC 9111).
 *
 * As for requests, the header block is parsed in two steps.  While it is
 * incomplete, only line endings are looked at (memchr for LF), which also
 * rejects a bare CR or LF as soon as it arrives.  Once "\r\n\r\n" is in the
 * buffer, the whole block is checked and split in one pass.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"
#include "worker/http_lex.h"
#include "worker/http_field.h"
#include "worker/http_response.h"



/* Header fields the parser acts on. */
enum field {
	F_OTHER,
	F_CONTENT_LENGTH,
	F_TRANSFER_ENCODING,
	F_CONNECTION,
	F_SPAN,				/* kept for the cache, first line */
};

#define FIELD(s, f)	{ s, sizeof(s) - 1, f, 0 }
#define SPAN(s, member)							\
	{ s, sizeof(s) - 1, F_SPAN, offsetof(struct http_response, member) }

static const struct field_def {
	const char *name;		/* lower case */
	size_t len;
	enum field f;
	size_t span;			/* where F_SPAN keeps it */
} field_defs[] = {
	FIELD("content-length", F_CONTENT_LENGTH),
	FIELD("transfer-encoding", F_TRANSFER_ENCODING),
	FIELD("connection", F_CONNECTION),
	SPAN("cache-control", cache_control),
	SPAN("expires", expires),
	SPAN("etag", etag),
	SPAN("last-modified", last_modified),
	SPAN("vary", vary),
	SPAN("set-cookie", set_cookie),
	SPAN("age", age),
	SPAN("date", date),
	SPAN("pragma", pragma),
};

#undef FIELD
#undef SPAN

/* What the fields said, checked together once the block is read. */
struct fields {
	bool has_te;
	int te_chunked;			/* times "chunked" was listed */
	bool te_other;			/* another coding was listed */
	bool conn_close;
	bool conn_keepalive;
};




/* Both sides in any case. */
static bool
span_caseeq(struct span a, struct span b)
{
	size_t i;

	if (a.len != b.len)
		return false;
	for (i = 0; i < a.len; i++)
		if (http_lower((unsigned char)a.p[i]) !=
		    http_lower((unsigned char)b.p[i]))
			return false;
	return true;
}

static int
fail(struct http_response *r, const char *why)
{
	r->error = why;
	return HTTP_ERROR;
}

/*
 * Looks for the end of the header block from where the last call stopped.
 * Returns the block length, HTTP_AGAIN or HTTP_ERROR.  Nothing past max
 * bytes is looked at, so the answer does not depend on how the bytes were
 * split.
 */
static ssize_t
find_end(struct http_response *r, const char *buf, size_t len, size_t *scan,
    size_t max)
{
	size_t pos = *scan, stop = len < max ? len : max, end;
	ssize_t n;

	while (pos < stop) {
		if ((n = http_line_end(buf, pos, stop)) < 0)
			return fail(r, "bare CR in response header");
		if ((end = (size_t)n) == stop) {
			pos = stop;
			break;
		}
		if (end == 0 || buf[end - 1] != '\r')
			return fail(r, "bare LF in response header");
		if (end == 1)
			return fail(r, "empty line before status line");
		if (buf[end - 2] == '\n') {
			*scan = end - 1;
			return (ssize_t)end + 1;
		}
		pos = end + 1;
	}

	*scan = pos;
	if (len < max)
		return HTTP_AGAIN;
	return fail(r, "response header block too large");
}

/*
 * Parses "HTTP/1.x SP 3DIGIT SP reason CRLF" at *pp.  find_end has made
 * sure that the line ends in CRLF and that the block goes on for at least
 * two more bytes, so each test below, which fails on CR, may look one byte
 * further.
 */
static int
status_line(struct http_response *r, const char **pp)
{
	const char *p = *pp, *s;

	if (memcmp(p, "HTTP/", 5) != 0 || !IS(p[5], C_DIGIT) ||
	    p[6] != '.' || !IS(p[7], C_DIGIT) || p[8] != ' ')
		return fail(r, "invalid status line");
	if (p[5] != '1')
		return fail(r, "unsupported HTTP version");
	r->version = p[7] == '0' ? 10 : 11;

	if (!IS(p[9], C_DIGIT) || !IS(p[10], C_DIGIT) || !IS(p[11], C_DIGIT))
		return fail(r, "invalid status code");
	r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	/* 600 to 999 are relayed, never stored, as nginx and Varnish do. */
	if (r->status < 100 || r->status > 999)
		return fail(r, "invalid status code");
	if (p[12] != ' ')
		return fail(r, "missing SP after status code");
	if (r->status == 101)
		return fail(r, "unrequested 101 Switching Protocols");

	s = p + 13;
	for (p = s; IS(*p, C_VALUE); p++)
		;
	if (*p != '\r')
		return fail(r, "invalid character in reason phrase");
	r->reason.p = s;
	r->reason.len = (size_t)(p - s);
	*pp = p + 2;
	return HTTP_OK;
}

static const struct field_def *
field_lookup(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(field_defs) / sizeof(field_defs[0]); i++)
		if (field_defs[i].len == n &&
		    http_name_eq(p, field_defs[i].name, n))
			return &field_defs[i];
	return NULL;
}



static int
content_length(struct http_response *r, struct span v)
{
	const char *why = http_content_length(v, &r->content_length);

	return why == NULL ? HTTP_OK : fail(r, why);
}

/*
 * Several Transfer-Encoding lines form one list.  Anything but "chunked"
 * is counted as another coding, which fields_done() refuses.
 */
static int
transfer_encoding(struct http_response *r, struct fields *f, struct span v)
{
	const char *p = v.p, *end = v.p + v.len;
	struct span e;

	if (r->version == 10)
		return fail(r, "Transfer-Encoding in HTTP/1.0");
	f->has_te = true;
	while (http_list_next(&p, end, &e)) {
		if (http_span_ieq(e, "chunked"))
			f->te_chunked++;
		else
			f->te_other = true;
	}
	return HTTP_OK;
}

static int
connection(struct http_response *r, struct fields *f, struct span v)
{
	bool other;
	const char *why = http_connection(v, &f->conn_close,
	    &f->conn_keepalive, &other);

	return why == NULL ? HTTP_OK : fail(r, why);
}

/* The first line of a field the cache reads is kept in its span. */
static void
keep_span(struct http_response *r, const struct field_def *d, struct span v)
{
	struct span *s = (struct span *)(void *)((char *)r + d->span);

	if (s->p == NULL)
		*s = v;
}

static int
field(struct http_response *r, struct fields *f, const struct http_header *h)
{
	const struct field_def *d = field_lookup(h->name.p, h->name.len);

	if (d == NULL)
		return HTTP_OK;
	switch (d->f) {
	case F_CONTENT_LENGTH:
		return content_length(r, h->value);
	case F_TRANSFER_ENCODING:
		return transfer_encoding(r, f, h->value);
	case F_CONNECTION:
		return connection(r, f, h->value);
	case F_SPAN:
		keep_span(r, d, h->value);
		break;
	case F_OTHER:
		break;
	}
	return HTTP_OK;
}

void
http_response_keep_field(struct http_response *r, const struct http_header *h)
{
	const struct field_def *d = field_lookup(h->name.p, h->name.len);

	if (d != NULL && d->f == F_SPAN)
		keep_span(r, d, h->value);
}

/* Parses one "name: value" line at *pp, which ends in CRLF; end is the
 * end of the block (for the word-wide scan of values). */
static int
field_line(struct http_response *r, const char **pp, const char *end,
    struct http_header *h)
{
	const char *why = http_field_line_in(pp, end, h);

	return why == NULL ? HTTP_OK : fail(r, why);
}

/* The framing of RFC 9112 section 6.3, once all fields are known. */
static int
fields_done(struct http_response *r, struct fields *f, bool head)
{
	bool nobody = r->status < 200 || r->status == 204;

	if (f->has_te) {
		if (r->content_length != -1)
			return fail(r,
			    "both Transfer-Encoding and Content-Length");
		if (f->te_other)
			return fail(r, "unsupported transfer coding");
		if (f->te_chunked > 1)
			return fail(r, "chunked applied twice");
		if (f->te_chunked == 0)
			return fail(r, "empty Transfer-Encoding");
		if (nobody)
			return fail(r, "Transfer-Encoding in 1xx or 204");
		r->chunked = true;
	}
	if (nobody && r->content_length > 0)
		return fail(r, "Content-Length in 1xx or 204");

	if (nobody || r->status == 304 || head)
		r->framing = HTTP_BODY_NONE;
	else if (r->chunked)
		r->framing = HTTP_BODY_CHUNKED;
	else if (r->content_length != -1)
		r->framing = HTTP_BODY_LENGTH;
	else
		r->framing = HTTP_BODY_UNTIL_CLOSE;

	r->close = f->conn_close || r->framing == HTTP_BODY_UNTIL_CLOSE ||
	    (r->version == 10 && !f->conn_keepalive);
	r->keepalive_10 = r->version == 10 && !r->close;
	return HTTP_OK;
}

/* Parses a complete header block. */
static int
parse_block(struct http_response *r, const char *buf, size_t len,
    struct http_header *headers, size_t maxheaders, bool head)
{
	const char *p = buf;
	struct fields f;

	memset(&f, 0, sizeof(f));
	if (status_line(r, &p) == HTTP_ERROR)
		return HTTP_ERROR;
	while (*p != '\r') {
		if (r->nheaders == maxheaders)
			return fail(r, "too many header fields");
		if (field_line(r, &p, buf + len, &headers[r->nheaders]) ==
		    HTTP_ERROR)
			return HTTP_ERROR;
		if (field(r, &f, &headers[r->nheaders++]) == HTTP_ERROR)
			return HTTP_ERROR;
	}
	return fields_done(r, &f, head);
}

ssize_t
http_parse_response(struct http_response *r, const char *buf, size_t len,
    size_t *scan, struct http_header *headers, size_t maxheaders,
    size_t max_header_size, bool head_request)
{
	ssize_t n;

	n = find_end(r, buf, len, scan, max_header_size);
	if (n < 0)
		return n;

	memset(r, 0, sizeof(*r));
	r->headers = headers;
	r->content_length = -1;
	if (parse_block(r, buf, (size_t)n, headers, maxheaders,
	    head_request) == HTTP_ERROR)
		return HTTP_ERROR;
	return n;
}

struct span
http_response_header(const struct http_response *r, const char *name,
    size_t *i)
{
	struct span want = { name, strlen(name) }, none = { NULL, 0 };

	while (*i < r->nheaders) {
		if (span_caseeq(r->headers[*i].name, want))
			return r->headers[(*i)++].value;
		(*i)++;
	}
	return none;
}

bool
http_connection_has_token(struct span value, struct span token)
{
	const char *p = value.p, *end;
	struct span e;

	if (value.p == NULL)
		return false;
	end = value.p + value.len;
	while (http_list_next(&p, end, &e))
		if (span_caseeq(e, token))
			return true;
	return false;
}

bool
http_hop_by_hop(const struct http_header *headers, size_t n,
    struct span name)
{
	return (http_field_flags(name) & HF_HOP) != 0 ||
	    http_field_connection_option(headers, n, name);
}

void
http_body_init(struct http_body *b, const struct http_response *r,
    bool decode)
{
	memset(b, 0, sizeof(*b));
	b->framing = r->framing;
	b->decode = decode;
	if (b->framing == HTTP_BODY_LENGTH)
		b->left = (uint64_t)r->content_length;
	else if (b->framing == HTTP_BODY_CHUNKED)
		http_chunked_init(&b->ch);
	b->done = b->framing == HTTP_BODY_NONE ||
	    (b->framing == HTTP_BODY_LENGTH && b->left == 0);
}

/*
 * Checks chunked framing without writing to buf.  Given one byte, the
 * decoder has nothing to move; given a run that is all chunk data, it
 * moves nothing either.  So framing goes a byte at a time, and once a
 * byte turns out to be data, the rest of the chunk goes in one call.
 */
static int
chunked_check(struct http_body *b, char *buf, size_t *len, size_t *data)
{
	size_t i = 0, n, d, total = 0;
	int rc = HTTP_AGAIN;

	while (i < *len && rc == HTTP_AGAIN) {
		n = 1;
		if (b->in_data) {
			n = *len - i;
			if (n > b->ch.remaining)
				n = (size_t)b->ch.remaining;
		}
		rc = http_chunked_decode(&b->ch, buf + i, &n, &d);
		i += n;
		total += d;
		b->in_data = d > 0 && b->ch.remaining > 0;
	}
	*len = i;
	*data = total;
	return rc;
}

int
http_body_feed(struct http_body *b, char *buf, size_t *len, size_t *data)
{
	size_t n = *len;
	int rc;

	if (b->done) {
		*len = 0;
		*data = 0;
		return HTTP_OK;
	}
	switch (b->framing) {
	case HTTP_BODY_LENGTH:
		if (n > b->left)
			n = (size_t)b->left;
		b->left -= n;
		*len = n;
		*data = n;
		b->done = b->left == 0;
		return b->done ? HTTP_OK : HTTP_AGAIN;
	case HTTP_BODY_UNTIL_CLOSE:
		*data = n;
		return HTTP_AGAIN;
	case HTTP_BODY_CHUNKED:
		if (b->decode)
			rc = http_chunked_decode(&b->ch, buf, len, data);
		else
			rc = chunked_check(b, buf, len, data);
		if (rc == HTTP_OK)
			b->done = true;
		else if (rc == HTTP_ERROR)
			b->framing = -1;	/* stays an error */
		return rc;
	}
	*len = 0;
	*data = 0;
	return HTTP_ERROR;
}

int
http_body_eof(const struct http_body *b)
{
	if (b->done || b->framing == HTTP_BODY_UNTIL_CLOSE)
		return HTTP_OK;
	return HTTP_ERROR;
}

/* Cache-Control directives and what their argument means. */
enum cc_kind {
	CC_FLAG,			/* a bool, argument ignored */
	CC_NO_CACHE,			/* qualified or not */
	CC_AGE,				/* delta-seconds, bad means 0 */
	CC_EXTRA,			/* delta-seconds, bad is ignored */
	CC_STALE,			/* the same, absent means any */
};

#define CC(s, k, member)						\
	{ s, sizeof(s) - 1, k, offsetof(struct http_cache_control, member) }

static const struct cc_def {
	const char *name;		/* lower case */
	size_t len;
	enum cc_kind kind;
	size_t off;
} cc_defs[] = {
	CC("max-age", CC_AGE, max_age),
	CC("s-maxage", CC_AGE, s_maxage),
	CC("no-cache", CC_NO_CACHE, no_cache),
	CC("no-store", CC_FLAG, no_store),
	CC("private", CC_FLAG, private_),
	CC("public", CC_FLAG, public_),
	CC("must-revalidate", CC_FLAG, must_revalidate),
	CC("proxy-revalidate", CC_FLAG, proxy_revalidate),
	CC("must-understand", CC_FLAG, must_understand),
	CC("no-transform", CC_FLAG, no_transform),
	CC("immutable", CC_FLAG, immutable),
	CC("stale-while-revalidate", CC_EXTRA, stale_while_revalidate),
	CC("stale-if-error", CC_EXTRA, stale_if_error),
	CC("max-stale", CC_STALE, max_stale),
	CC("min-fresh", CC_EXTRA, min_fresh),
	CC("only-if-cached", CC_FLAG, only_if_cached),
};

#undef CC

/* delta-seconds = 1*DIGIT, clamped (RFC 9111 section 1.2.2); -1 if bad. */
static int64_t
delta_seconds(struct span a)
{
	int64_t n = 0;
	size_t i;

	if (a.p == NULL || a.len == 0)
		return -1;
	for (i = 0; i < a.len; i++) {
		if (!IS(a.p[i], C_DIGIT))
			return -1;
		if (n < HTTP_DELTA_MAX)
			n = n * 10 + (a.p[i] - '0');
	}
	return n > HTTP_DELTA_MAX ? HTTP_DELTA_MAX : n;
}

static void
cc_directive(struct http_cache_control *cc, struct span name, struct span arg)
{
	const struct cc_def *d = NULL;
	int64_t *num, v;
	size_t i;

	for (i = 0; i < sizeof(cc_defs) / sizeof(cc_defs[0]); i++)
		if (name.len == cc_defs[i].len &&
		    http_ieq(name.p, cc_defs[i].name, name.len)) {
			d = &cc_defs[i];
			break;
		}
	if (d == NULL)
		return;
	num = (int64_t *)(void *)((char *)cc + d->off);
	switch (d->kind) {
	case CC_FLAG:
		*(bool *)(void *)((char *)cc + d->off) = true;
		return;
	case CC_NO_CACHE:
		if (arg.p != NULL)
			cc->has_no_cache_fields = true;
		else
			cc->no_cache = true;
		return;
	case CC_AGE:
	case CC_EXTRA:
	case CC_STALE:
		v = d->kind == CC_STALE && arg.p == NULL ? HTTP_DELTA_MAX :
		    delta_seconds(arg);
		if (v < 0 && d->kind != CC_AGE)
			return;
		if (v < 0)
			v = 0;
		if (*num == -1 || v < *num)
			*num = v;
		return;
	}
}

/*
 * Reads directive [ "=" ( token / quoted-string ) ] at *pp, tolerating
 * BWS around "=" and skipping whatever else comes before the next comma.
 * arg.p is NULL when there is no "=".
 */
static void
cc_next(const char **pp, const char *end, struct span *name,
    struct span *arg)
{
	const char *p = *pp, *s;

	name->p = p;
	while (p < end && IS(*p, C_TCHAR))
		p++;
	name->len = (size_t)(p - name->p);
	arg->p = NULL;
	arg->len = 0;
	while (p < end && IS(*p, C_WS))
		p++;
	if (p < end && *p == '=') {
		for (p++; p < end && IS(*p, C_WS); p++)
			;
		if (p < end && *p == '"') {
			for (s = ++p; p < end && *p != '"'; p++)
				if (*p == '\\' && p + 1 < end)
					p++;
			arg->p = s;
			arg->len = (size_t)(p - s);
			if (p < end)
				p++;
		} else {
			for (s = p; p < end && IS(*p, C_TCHAR); p++)
				;
			arg->p = s;
			arg->len = (size_t)(p - s);
		}
	}
	while (p < end && *p != ',')
		p++;
	*pp = p;
}

static void
cc_add(struct http_cache_control *cc, struct span v)
{
	const char *p = v.p, *end;
	struct span name, arg;

	if (v.p == NULL)
		return;
	end = v.p + v.len;
	for (;;) {
		while (p < end && (*p == ',' || IS(*p, C_WS)))
			p++;
		if (p == end)
			return;
		cc_next(&p, end, &name, &arg);
		cc_directive(cc, name, arg);
	}
}

static void
cc_reset(struct http_cache_control *cc)
{
	memset(cc, 0, sizeof(*cc));
	cc->max_age = -1;
	cc->s_maxage = -1;
	cc->stale_while_revalidate = -1;
	cc->stale_if_error = -1;
	cc->max_stale = -1;
	cc->min_fresh = -1;
}

void
http_cache_control_parse(struct span v, struct http_cache_control *cc)
{
	cc_reset(cc);
	cc_add(cc, v);
}

bool
http_response_directives(const struct http_response *r, const char *name,
    struct http_cache_control *cc)
{
	struct span v;
	size_t i = 0;
	bool any = false;

	cc_reset(cc);
	while ((v = http_response_header(r, name, &i)).p != NULL) {
		cc_add(cc, v);
		any = true;
	}
	return any;
}

void
http_response_cache_control(const struct http_response *r,
    struct http_cache_control *cc)
{
	http_response_directives(r, "cache-control", cc);
}

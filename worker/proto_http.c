/*
 * HTTP/1.1 to upstream servers, as an upstream protocol module
 * (worker/upstream_proto.h).
 *
 * The request goes in origin form with the client's fields as the
 * handler's rules let them through, and framing stated anew: a body the
 * client sent chunked goes chunked, one with a length goes with that
 * length.  The response is parsed strictly (worker/http_response.h) and
 * its body relayed with its framing as is, or decoded when asked.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "master/config.h"
#include "worker/conn.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"
#include "worker/upstream.h"
#include "worker/upstream_proto.h"

struct http_ctx {
	bool chunked;			/* the request body goes chunked */
	bool no_body;			/* the response has none (HEAD) */
	size_t scan;			/* the head parser's progress */
	const struct http_response *r;
	struct http_body body;
};

static bool
add_field(struct upstream_buf *b, const struct http_header *h)
{
	return upstream_buf_span(b, h->name) && upstream_buf_add(b, ": ", 2) &&
	    upstream_buf_span(b, h->value) && upstream_buf_add(b, "\r\n", 2);
}

/* Bytes a path may hold as they are (RFC 3986 pchar and '/'). */
static bool
path_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

/* Appends a decoded path, percent-encoding what a path may not hold. */
static bool
add_encoded(struct upstream_buf *b, const char *p, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	char esc[3] = { '%', 0, 0 };
	size_t i, run = 0;

	for (i = 0; i < n; i++) {
		if (path_char((unsigned char)p[i]))
			continue;
		if (!upstream_buf_add(b, p + run, i - run))
			return false;
		esc[1] = hex[(unsigned char)p[i] >> 4];
		esc[2] = hex[(unsigned char)p[i] & 15];
		if (!upstream_buf_add(b, esc, 3))
			return false;
		run = i + 1;
	}
	return upstream_buf_add(b, p + run, n - run);
}

/*
 * proxy_path: the location's prefix becomes proxy_path, as nginx's
 * "proxy_pass http://b/;" does.  The rest of the path goes as the client
 * wrote it when its bytes spell the prefix, else (an escaped prefix) the
 * normalised path's rest, escaped again.
 */
static bool
add_replaced(struct upstream_buf *b, const struct http_request *r,
    const struct config_location *l)
{
	char norm[PATH_MAX];
	ssize_t n;
	int status;

	if (!upstream_buf_str(b, l->proxy_path))
		return false;
	if (r->path.len >= l->prefix_len &&
	    memcmp(r->path.p, l->prefix, l->prefix_len) == 0) {
		if (!upstream_buf_add(b, r->path.p + l->prefix_len,
		    r->path.len - l->prefix_len))
			return false;
	} else {
		n = http_path_normalize(norm, sizeof(norm), r->path.p,
		    r->path.len, &status);
		if (n < (ssize_t)l->prefix_len)
			return false;
		if (!add_encoded(b, norm + l->prefix_len,
		    (size_t)n - l->prefix_len))
			return false;
	}
	return r->query.p == NULL || (upstream_buf_add(b, "?", 1) &&
	    upstream_buf_span(b, r->query));
}

static bool
add_target(struct upstream_buf *b, const struct http_request *r,
    const struct config_location *l)
{
	if (l->proxy_path != NULL)
		return add_replaced(b, r, l);
	/* Absolute form goes as origin form (RFC 9112 3.2.1). */
	if (!r->absolute_form)
		return upstream_buf_span(b, r->target);
	if (!(r->path.len > 0 ? upstream_buf_span(b, r->path) :
	    upstream_buf_add(b, "/", 1)))
		return false;
	return r->query.p == NULL || (upstream_buf_add(b, "?", 1) &&
	    upstream_buf_span(b, r->query));
}

static int
http_request_head(struct upstream_conn *uc, void *vctx,
    const struct upstream_request *rq, struct upstream_buf *out)
{
	struct http_ctx *ctx = vctx;
	const struct http_request *r = rq->r;
	const struct http_header *h;
	char line[64];
	bool ok, host = http_header_get(r, "Host").p != NULL;
	size_t i;

	ctx->chunked = r->chunked;
	ctx->no_body = rq->no_body;
	ok = upstream_buf_span(out, rq->method) &&
	    upstream_buf_add(out, " ", 1) && add_target(out, r, rq->loc) &&
	    upstream_buf_str(out, " HTTP/1.1\r\n");
	for (h = r->headers; ok && h < r->headers + r->nheaders; h++) {
		if (rq->keep(rq, h))
			ok = add_field(out, h);
	}
	for (i = 0; !host && i < rq->nadd; i++)
		host = http_span_ieq(rq->add[i].name, "host");
	if (ok && !host) {
		/* HTTP/1.0 without Host: the upstream needs one. */
		ok = upstream_buf_str(out, "Host: ") && (r->host.p != NULL ?
		    upstream_buf_span(out, r->host) : upstream_buf_str(out,
		    upstream_peer_host(upstream_conn_peer(uc)))) &&
		    upstream_buf_add(out, "\r\n", 2);
	}
	for (i = 0; ok && i < rq->nadd; i++)
		ok = add_field(out, &rq->add[i]);
	if (r->chunked) {
		ok = ok && upstream_buf_str(out,
		    "Transfer-Encoding: chunked\r\n");
	} else if (r->content_length >= 0) {
		snprintf(line, sizeof(line), "Content-Length: %lld\r\n",
		    (long long)r->content_length);
		ok = ok && upstream_buf_str(out, line);
	}
	return ok && upstream_buf_add(out, "\r\n", 2) ? 0 : 502;
}

static bool
http_request_body(void *vctx, const char *p, size_t len, bool last,
    struct upstream_buf *out)
{
	struct http_ctx *ctx = vctx;
	char size[24];
	bool ok = true;

	if (ctx->chunked && len > 0) {
		ok = upstream_buf_add(out, size, http_chunk_line(size, len)) &&
		    upstream_buf_add(out, p, len) &&
		    upstream_buf_add(out, "\r\n", 2);
	} else if (len > 0) {
		ok = upstream_buf_add(out, p, len);
	}
	if (last && ctx->chunked)
		ok = ok && upstream_buf_add(out, "0\r\n\r\n", 5);
	return ok;
}

static int
http_response_head(struct upstream_conn *uc, void *vctx, char *buf,
    size_t len, size_t *consumed, struct http_response *r, const char **why)
{
	struct http_ctx *ctx = vctx;
	const struct config *cf = worker.cf;
	ssize_t n;

	n = http_parse_response(r, buf, len, &ctx->scan, worker.headers,
	    cf->max_headers, cf->max_header_size, ctx->no_body);
	if (n == HTTP_AGAIN)
		return HTTP_AGAIN;
	if (n == HTTP_ERROR) {
		*why = r->error;
		return HTTP_ERROR;
	}
	/* A 1xx is followed by the final response: parse that anew. */
	ctx->scan = 0;
	ctx->r = r;
	*consumed = (size_t)n;
	return HTTP_OK;
}

static void
http_body_begin(void *vctx, const struct http_response *r, bool decode)
{
	struct http_ctx *ctx = vctx;

	http_body_init(&ctx->body, r, decode);
}

static int
http_response_body(struct upstream_conn *uc, void *vctx, char *buf,
    size_t *len, size_t *data)
{
	struct http_ctx *ctx = vctx;

	return http_body_feed(&ctx->body, buf, len, data);
}

static int
http_response_eof(void *vctx)
{
	struct http_ctx *ctx = vctx;

	return http_body_eof(&ctx->body);
}

static bool
http_reusable(void *vctx)
{
	struct http_ctx *ctx = vctx;

	return !ctx->r->close;
}

const struct upstream_proto proto_http = {
	.name = "http",
	.ctx_size = sizeof(struct http_ctx),
	.request_head = http_request_head,
	.request_body = http_request_body,
	.response_head = http_response_head,
	.body_init = http_body_begin,
	.response_body = http_response_body,
	.response_eof = http_response_eof,
	.reusable = http_reusable,
};

const struct upstream_proto *
upstream_proto_for(const struct config_upstream *up)
{
	switch (up->protocol) {
	case PROTO_FASTCGI:
		return &proto_fcgi;
	case PROTO_MEMCACHED:
		return &proto_memcached;
	default:
		return &proto_http;
	}
}

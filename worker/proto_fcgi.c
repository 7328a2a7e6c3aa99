/*
 * FastCGI to application servers (php-fpm), as an upstream protocol
 * module (worker/upstream_proto.h).
 *
 * One request per connection at a time, FCGI_KEEP_CONN when the group
 * keeps connections.  Each request has an id of its own (a per-worker
 * count, never 0): output an application sends after END_REQUEST, once
 * the connection went back to the pool, would otherwise read as the start
 * of the next response on it; with another id it is refused (502).  The
 * request is BEGIN_REQUEST, the CGI/1.1 parameters (worker/fcgi_params.c)
 * and the body as STDIN records (its length known: the handler reads a
 * chunked body whole first, worker/reqbody.h); the
 * response is STDOUT records holding a CGI header block (worker/cgi.h)
 * and the body, STDERR records that go to the error log at warn, and
 * END_REQUEST.  A head that comes whole in its first piece of STDOUT (the
 * usual case) is parsed where it is; one split over pieces (STDERR may
 * split it) is copied out of the records into memory of the exchange;
 * the body is decoded in place.  Record
 * and header errors are 502s and never stored (worker/fcgi_record.h).
 */
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/cgi.h"
#include "worker/conn.h"
#include "worker/fcgi_params.h"
#include "worker/fcgi_record.h"
#include "worker/http_response.h"
#include "worker/upstream.h"
#include "worker/upstream_proto.h"

#define HEAD_INIT	1024		/* grown up to max_header_size */
#define ERR_LINE_MAX	2048		/* one STDERR line in the log */

struct fcgi_ctx {
	struct fcgi_parser p;
	uint16_t id;			/* the request's */
	bool keep_conn;			/* asked the application to keep it */
	bool no_body;			/* HEAD: discard what STDOUT brings */
	bool stdin_done;		/* the empty STDIN record was written */
	bool discard;			/* 204, 304, HEAD: the body is dropped */
	bool trailing;			/* bytes came after END_REQUEST */
	bool over_logged;		/* "more than Content-Length" said */
	int64_t left;			/* Content-Length still to come; -1 */
	char *head;			/* STDOUT up to the end of the head */
	size_t hlen, hsize, hscan;
	const char *peer;		/* for the log: the server asked */
};

/* Writes STDERR to the error log at warn, line by line. */
static void
log_stderr(const struct fcgi_ctx *ctx, const char *p, size_t len)
{
	const char *nl, *end = p + len;
	size_t n;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		n = (size_t)((nl != NULL ? nl : end) - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if (n > 0)
			log_warn("FastCGI %s stderr: %.*s", ctx->peer,
			    (int)(n < ERR_LINE_MAX ? n : ERR_LINE_MAX), p);
		p = nl != NULL ? nl + 1 : end;
	}
}

/* The request ------------------------------------------------------- */

static bool
add_stdin(struct upstream_buf *out, uint16_t id, const char *p, size_t len)
{
	char *h;
	size_t n;

	do {
		if ((h = upstream_buf_reserve(out, FCGI_HEADER_LEN)) == NULL)
			return false;
		n = fcgi_stdin_header(h, id, len);
		out->len += FCGI_HEADER_LEN;
		if (n > 0 && !upstream_buf_add(out, p, n))
			return false;
		p += n;
		len -= n;
	} while (len > 0);
	return true;
}

/*
 * BEGIN_REQUEST and PARAMS, and the empty STDIN of a request without a
 * body.  The driver keeps these bytes for a replay on a new connection.
 */
static int
fcgi_request_head(struct upstream_conn *uc, void *vctx,
    const struct upstream_request *rq, struct upstream_buf *out)
{
	static uint16_t last_id;
	struct fcgi_ctx *ctx = vctx;
	const struct http_request *r = rq->r;
	int status;

	if (++last_id == 0)
		last_id = 1;
	ctx->id = last_id;
	ctx->peer = upstream_peer_name(upstream_conn_peer(uc));
	ctx->no_body = rq->no_body;
	ctx->keep_conn = rq->up->keepalive > 0;
	ctx->left = -1;
	fcgi_parser_init(&ctx->p, ctx->id);
	if (r->chunked) {
		/* CGI needs CONTENT_LENGTH: the handler reads a chunked body
		 * whole first (worker/reqbody.h), so this is a bug. */
		log_error("FastCGI %s: a chunked body was not read whole",
		    ctx->peer);
		return 500;
	}
	status = fcgi_params_build(rq, ctx->id, ctx->keep_conn, out);
	if (status != 0 || r->content_length > 0)
		return status;
	ctx->stdin_done = true;
	return add_stdin(out, ctx->id, NULL, 0) ? 0 : 502;
}

static bool
fcgi_request_body(void *vctx, const char *p, size_t len, bool last,
    struct upstream_buf *out)
{
	struct fcgi_ctx *ctx = vctx;

	if (len > 0 && !add_stdin(out, ctx->id, p, len))
		return false;
	if (last && !ctx->stdin_done) {
		if (!add_stdin(out, ctx->id, NULL, 0))
			return false;
		ctx->stdin_done = true;
	}
	return true;
}

/* The response ------------------------------------------------------ */

/* Appends STDOUT bytes to the head buffer; false when it would be too
 * large or memory ran out. */
static bool
head_add(struct fcgi_ctx *ctx, const char *p, size_t n, const char **why)
{
	size_t max = worker.cf->max_header_size, size;
	char *h;

	if (ctx->hlen + n > ctx->hsize) {
		if (ctx->hlen + n > max) {
			/* The parser decides: it may find the end in time. */
			n = max - ctx->hlen;
			if (n == 0) {
				*why = "CGI header block too large";
				return false;
			}
		}
		size = ctx->hsize > 0 ? ctx->hsize : HEAD_INIT;
		while (size < ctx->hlen + n)
			size *= 2;
		if (size > max)
			size = max;
		if ((h = realloc(ctx->head, size)) == NULL) {
			*why = "out of memory for the response header";
			return false;
		}
		ctx->head = h;
		ctx->hsize = size;
	}
	memcpy(ctx->head + ctx->hlen, p, n);
	ctx->hlen += n;
	return true;
}

static int
fcgi_response_head(struct upstream_conn *uc, void *vctx, char *buf,
    size_t len, size_t *consumed, struct http_response *r, const char **why)
{
	struct fcgi_ctx *ctx = vctx;
	const struct config *cf = worker.cf;
	struct span data;
	size_t pos = 0, used, before;
	uint64_t whole;
	ssize_t n;
	int rc;

	/* next_upstream may have moved the request since it was built. */
	ctx->peer = upstream_peer_name(upstream_conn_peer(uc));
	while (pos < len) {
		rc = fcgi_parse(&ctx->p, buf + pos, len - pos, &used, &data);
		pos += used;
		switch (rc) {
		case FCGI_R_STDERR:
			log_stderr(ctx, data.p, data.len);
			continue;
		case FCGI_R_STDOUT:
			break;
		case FCGI_R_END:
			*why = "END_REQUEST before the end of the CGI header";
			return HTTP_ERROR;
		case FCGI_R_ERROR:
			*why = ctx->p.error;
			return HTTP_ERROR;
		default:
			continue;
		}
		before = ctx->hlen;
		if (before == 0) {
			/* The usual head, whole in its first piece: parsed
			 * where it is (the driver keeps it in place through
			 * the head's callback), copied only to wait for more. */
			n = cgi_parse_response(r, data.p, data.len,
			    &ctx->hscan, worker.headers, cf->max_headers,
			    cf->max_header_size, ctx->no_body);
			if (n == HTTP_AGAIN &&
			    !head_add(ctx, data.p, data.len, why))
				return HTTP_ERROR;
		} else {
			if (!head_add(ctx, data.p, data.len, why))
				return HTTP_ERROR;
			n = cgi_parse_response(r, ctx->head, ctx->hlen,
			    &ctx->hscan, worker.headers, cf->max_headers,
			    cf->max_header_size, ctx->no_body);
		}
		if (n == HTTP_ERROR) {
			*why = r->error;
			return HTTP_ERROR;
		}
		if (n == HTTP_AGAIN) {
			if (ctx->hlen - before < data.len) {
				*why = "CGI header block too large";
				return HTTP_ERROR;
			}
			continue;
		}
		/* The head ends inside this piece: the rest is body. */
		used = data.len - ((size_t)n - before);
		fcgi_parse_unread(&ctx->p, used);
		*consumed = pos - used;
		/* END_REQUEST came with the head: the body's length is
		 * known, so the client gets a Content-Length, not chunks
		 * (and an HTTP/1.0 client keeps its connection). */
		if (r->framing == HTTP_BODY_UNTIL_CLOSE &&
		    fcgi_parse_ahead(&ctx->p, buf + *consumed,
		    len - *consumed, &whole)) {
			r->framing = HTTP_BODY_LENGTH;
			r->content_length = (int64_t)whole;
		}
		return HTTP_OK;
	}
	*consumed = pos;
	return HTTP_AGAIN;
}

static void
fcgi_body_init(void *vctx, const struct http_response *r, bool decode)
{
	struct fcgi_ctx *ctx = vctx;

	(void)decode;			/* FastCGI always decodes */
	ctx->discard = r->framing == HTTP_BODY_NONE;
	ctx->left = r->framing == HTTP_BODY_LENGTH ? r->content_length : -1;
}

/* Keeps a piece of STDOUT at buf + *out, within Content-Length. */
static void
body_piece(struct fcgi_ctx *ctx, char *buf, size_t *out, struct span data)
{
	size_t n = data.len;

	if (ctx->discard)
		return;
	if (ctx->left >= 0 && (uint64_t)ctx->left < n) {
		if (!ctx->over_logged)
			log_warn("FastCGI %s sent more than its "
			    "Content-Length: the rest is dropped", ctx->peer);
		ctx->over_logged = true;
		n = (size_t)ctx->left;
	}
	memmove(buf + *out, data.p, n);
	*out += n;
	if (ctx->left >= 0)
		ctx->left -= (int64_t)n;
}

static int
fcgi_response_body(struct upstream_conn *uc, void *vctx, char *buf,
    size_t *len, size_t *data)
{
	struct fcgi_ctx *ctx = vctx;
	struct span piece;
	size_t pos = 0, out = 0, used;
	int rc;

	(void)uc;
	for (;;) {
		rc = fcgi_parse(&ctx->p, buf + pos, *len - pos, &used, &piece);
		pos += used;
		switch (rc) {
		case FCGI_R_STDOUT:
			body_piece(ctx, buf, &out, piece);
			continue;
		case FCGI_R_STDERR:
			log_stderr(ctx, piece.p, piece.len);
			continue;
		case FCGI_R_AGAIN:
			*len = pos;
			*data = out;
			return HTTP_AGAIN;
		case FCGI_R_END:
			ctx->trailing = pos < *len;
			*len = pos;
			*data = out;
			if (ctx->left > 0) {
				log_error("FastCGI %s: response shorter than "
				    "its Content-Length", ctx->peer);
				return HTTP_ERROR;
			}
			return HTTP_OK;
		default:
			log_error("FastCGI %s: %s", ctx->peer, ctx->p.error);
			*len = pos;
			*data = out;
			return HTTP_ERROR;
		}
	}
}

static int
fcgi_response_eof(void *vctx)
{
	struct fcgi_ctx *ctx = vctx;
	const char *why = fcgi_parse_eof(&ctx->p);

	if (why == NULL)
		return HTTP_OK;
	log_error("FastCGI %s: %s", ctx->peer, why);
	return HTTP_ERROR;
}

static bool
fcgi_reusable(void *vctx)
{
	struct fcgi_ctx *ctx = vctx;

	return ctx->keep_conn && ctx->stdin_done && !ctx->trailing &&
	    fcgi_parse_done(&ctx->p);
}

static void
fcgi_done(void *vctx)
{
	struct fcgi_ctx *ctx = vctx;

	free(ctx->head);
	ctx->head = NULL;
}

const struct upstream_proto proto_fcgi = {
	.name = "fastcgi",
	.ctx_size = sizeof(struct fcgi_ctx),
	.request_head = fcgi_request_head,
	.request_body = fcgi_request_body,
	.response_head = fcgi_response_head,
	.body_init = fcgi_body_init,
	.response_body = fcgi_response_body,
	.response_eof = fcgi_response_eof,
	.reusable = fcgi_reusable,
	.done = fcgi_done,
};

/*
 * memcached's get as an upstream protocol (nginx's memcached_pass): the
 * request is "get KEY", the value is the body.  VALUE becomes a 200 whose
 * Content-Type comes from the URI's extension (the location's
 * default_type otherwise) and whose Content-Encoding is gzip when the
 * item's flags have the location's memcached_gzip_flag bits; END becomes
 * a 404 that the proxy hands to error_page (to send the request to the
 * application, as nginx does), never relays; anything else is a 502.
 *
 * The key is the request's $uri (or $request_uri), escaped as nginx
 * escapes it for memcached (space, control bytes and '%' as %XX), so the
 * application stores a page under the same key the client asks for.  On
 * a ketama group it also picks the node (upstream_proto's hash_key).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "master/config.h"
#include "master/master.h"
#include "worker/conn_impl.h"
#include "worker/http_response.h"
#include "worker/mc_http.h"
#include "worker/mc_parse.h"
#include "worker/static.h"
#include "worker/upstream_proto.h"

#define TRAILER		"\r\nEND\r\n"
#define TRAILER_LEN	7
#define HEAD_LINE_MAX	(MC_KEY_MAX + 64)

enum { S_HEAD, S_VALUE, S_TRAILER, S_DONE };

struct mc_proto {
	int state;
	bool head_request;
	bool clean;			/* nothing after END */
	uint64_t left;			/* value bytes still to come */
	size_t tpos;			/* of TRAILER matched */
	uint32_t gzip_flag;
	const struct config_location *loc;
	struct http_header hdr[2];
	const char *type;		/* the config's or the MIME table's */
	char path[256];			/* for the type */
	size_t path_len;
};

/* The key: $uri or $request_uri, escaped; 0 when it is too long. */
static size_t
make_key(const struct upstream_request *rq, char *key, size_t size)
{
	const struct http_request *r = rq->r;
	char path[PATH_MAX];
	ssize_t len;
	int status;

	if (size < MC_KEY_MAX)
		return 0;
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	return len < 0 ? 0 : mc_http_request_key(rq->c, rq->loc, r, path,
	    (size_t)len, key);
}

static size_t
hash_key(const struct upstream_request *rq, char *key, size_t size)
{
	return make_key(rq, key, size);
}

static int
request_head(struct upstream_conn *uc, void *ctx,
    const struct upstream_request *rq, struct upstream_buf *out)
{
	struct mc_proto *m = ctx;
	char key[MC_KEY_MAX];
	size_t n = make_key(rq, key, sizeof(key));
	int status;
	ssize_t len;

	(void)uc;
	if (rq->r->method != HTTP_M_GET && rq->r->method != HTTP_M_HEAD)
		return 405;
	if (n == 0)
		return 404;
	m->head_request = rq->no_body;
	m->gzip_flag = rq->loc->memcached_gzip_flag;
	m->loc = rq->loc;
	len = http_path_normalize(m->path, sizeof(m->path), rq->r->path.p,
	    rq->r->path.len, &status);
	m->path_len = len > 0 ? (size_t)len : 0;
	if (!upstream_buf_add(out, "get ", 4) || !upstream_buf_add(out, key,
	    n) || !upstream_buf_add(out, "\r\n", 2))
		return 500;
	return 0;
}

/* Never called: request_head refuses requests with a body method. */
static bool
request_body(void *ctx, const char *p, size_t len, bool last,
    struct upstream_buf *out)
{
	(void)ctx;
	(void)p;
	(void)len;
	(void)last;
	(void)out;
	return true;
}

static void
header(struct http_header *h, const char *name, const char *value)
{
	h->name.p = name;
	h->name.len = strlen(name);
	h->value.p = value;
	h->value.len = strlen(value);
}

/* "VALUE key flags bytes" -> 200, "END" -> 404. */
static int
response_head(struct upstream_conn *uc, void *ctx, char *buf, size_t len,
    size_t *consumed, struct http_response *r, const char **why)
{
	struct mc_proto *m = ctx;
	const char *nl = memchr(buf, '\n', len), *type;
	unsigned long long flags, bytes;
	char key[MC_KEY_MAX + 1];
	int n = 0;

	(void)uc;
	*consumed = 0;
	if (nl == NULL) {
		if (len > HEAD_LINE_MAX) {
			*why = "memcached: no line end in its answer";
			return HTTP_ERROR;
		}
		return HTTP_AGAIN;
	}
	*consumed = (size_t)(nl - buf) + 1;
	memset(r, 0, sizeof(*r));
	r->version = 11;
	r->content_length = -1;
	r->headers = m->hdr;
	if (nl - buf == 4 && memcmp(buf, "END\r", 4) == 0) {
		r->status = 404;	/* an empty body, so it is framed */
		r->content_length = 0;
		r->framing = m->head_request ? HTTP_BODY_NONE :
		    HTTP_BODY_LENGTH;
		m->state = S_DONE;
		m->clean = true;
		return HTTP_OK;
	}
	if (sscanf(buf, "VALUE %250s %llu %llu%n", key, &flags, &bytes,
	    &n) != 3 || buf + n + 1 != nl || buf[n] != '\r') {
		*why = "memcached: not a VALUE line";
		return HTTP_ERROR;
	}
	r->status = 200;
	r->content_length = (int64_t)bytes;
	r->framing = m->head_request ? HTTP_BODY_NONE : HTTP_BODY_LENGTH;
	type = mime_lookup(worker.rt->mime, m->path, m->path_len);
	if (type == NULL)
		type = m->loc->default_type != NULL ? m->loc->default_type :
		    worker.cf->default_type;
	m->type = type;
	header(&m->hdr[r->nheaders++], "Content-Type", m->type);
	if (m->gzip_flag != 0 && (flags & m->gzip_flag) != 0)
		header(&m->hdr[r->nheaders++], "Content-Encoding", "gzip");
	m->left = bytes;
	m->state = S_VALUE;
	return HTTP_OK;
}

static void
body_init(void *ctx, const struct http_response *r, bool decode)
{
	(void)ctx;
	(void)r;
	(void)decode;
}

/* The value's bytes are the body; "\r\nEND\r\n" ends it. */
static int
response_body(struct upstream_conn *uc, void *ctx, char *buf, size_t *len,
    size_t *data)
{
	struct mc_proto *m = ctx;
	size_t have = *len, used = 0, n;

	(void)uc;
	*data = 0;
	if (m->state == S_VALUE) {
		n = have < m->left ? have : (size_t)m->left;
		m->left -= n;
		used = n;
		if (!m->head_request)
			*data = n;
		if (m->left == 0)
			m->state = S_TRAILER;
	}
	while (m->state == S_TRAILER && used < have) {
		if (buf[used] != TRAILER[m->tpos])
			return HTTP_ERROR;
		used++;
		if (++m->tpos == TRAILER_LEN)
			m->state = S_DONE;
	}
	*len = used;
	if (m->state != S_DONE)
		return HTTP_AGAIN;
	m->clean = used == have;
	return HTTP_OK;
}

static int
response_eof(void *ctx)
{
	(void)ctx;
	return HTTP_ERROR;
}

static bool
reusable(void *ctx)
{
	const struct mc_proto *m = ctx;

	return m->state == S_DONE && m->clean;
}

const struct upstream_proto proto_memcached = {
	.name = "memcached",
	.ctx_size = sizeof(struct mc_proto),
	.request_head = request_head,
	.request_body = request_body,
	.response_head = response_head,
	.body_init = body_init,
	.response_body = response_body,
	.response_eof = response_eof,
	.reusable = reusable,
	.done = NULL,
	.hash_key = hash_key,
	.intercept_404 = true,
};

/*
 * The CGI/1.1 parameters of a FastCGI request.  See fcgi_params.h.
 *
 * The list is written twice with the same calls: once to count its bytes
 * (fcgi_params_init with no buffer), once into the room reserved for
 * them, so nothing is copied twice and nothing is allocated per request.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config.h"
#include "worker/conn.h"
#include "worker/fcgi_params.h"
#include "worker/fcgi_record.h"
#include "worker/http_lex.h"
#include "worker/static.h"
#include "worker/upstream_proto.h"

#define SOFTWARE	"corral/" PACKAGE_VERSION

/* The parameters corral sends by default, in nginx's order. */
#define FCGI_DEFAULTS(X)						\
	X(SCRIPT_FILENAME)	X(QUERY_STRING)		X(REQUEST_METHOD) \
	X(CONTENT_TYPE)		X(CONTENT_LENGTH)	X(SCRIPT_NAME)	\
	X(PATH_INFO)		X(REQUEST_URI)		X(DOCUMENT_URI)	\
	X(DOCUMENT_ROOT)	X(SERVER_PROTOCOL)	X(REQUEST_SCHEME) \
	X(GATEWAY_INTERFACE)	X(SERVER_SOFTWARE)	X(REMOTE_ADDR)	\
	X(REMOTE_PORT)		X(SERVER_ADDR)		X(SERVER_PORT)	\
	X(SERVER_NAME)		X(REDIRECT_STATUS)	X(HTTPS)

enum param {
#define X(name)	P_##name,
	FCGI_DEFAULTS(X)
#undef X
	P_COUNT
};

static const struct span names[] = {
#define X(name)	{ #name, sizeof(#name) - 1 },
	FCGI_DEFAULTS(X)
#undef X
};

/* Each default's value: up to two pieces (root and script name). */
struct values {
	struct span v[P_COUNT][2];
	char uri[PATH_MAX];
	char script[PATH_MAX];
	char cl[24], rport[8], sport[8];
	char saddr[INET6_ADDRSTRLEN];
};

/* Pieces of a joined header value, grown as requests need. */
static struct span *pieces;
static size_t npieces;

static struct span
str(const char *s)
{
	return (struct span){ s, strlen(s) };
}

static bool
is_script_filename(const struct config_fcgi_param *p)
{
	return strcmp(p->name, "SCRIPT_FILENAME") == 0;
}

/* Whether a fastcgi_param of the location names this parameter. */
static bool
overridden(const struct config_fastcgi *f, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < f->nparams; i++)
		if (strlen(f->params[i].name) == len &&
		    memcmp(f->params[i].name, name, len) == 0)
			return true;
	return false;
}

/* SCRIPT_NAME from the URI, with the index for a folder. */
static int
script_name(const struct upstream_request *rq, struct values *v,
    size_t *len)
{
	const struct http_request *r = rq->r;
	const struct config_fastcgi *f = rq->loc->fastcgi;
	ssize_t n;
	int status;

	n = http_path_normalize(v->uri, sizeof(v->uri), r->path.p, r->path.len,
	    &status);
	if (n < 0)
		return status;
	memcpy(v->script, v->uri, (size_t)n + 1);
	*len = (size_t)n;
	if (v->script[n - 1] == '/' && f->index != NULL && f->index[0]) {
		if ((size_t)n + strlen(f->index) >= sizeof(v->script))
			return 414;
		strcpy(v->script + n, f->index);
		*len += strlen(f->index);
	}
	return 0;
}

static void
defaults(const struct upstream_request *rq, struct values *v, size_t slen,
    size_t ulen)
{
	const struct http_request *r = rq->r;
	const struct config_server *s = conn_server(rq->c);
	struct span (*x)[2] = v->v;
	unsigned port;

	memset(x, 0, sizeof(v->v));
	x[P_SCRIPT_FILENAME][0] = str(s->root);
	x[P_SCRIPT_FILENAME][1] = (struct span){ v->script, slen };
	x[P_QUERY_STRING][0] = r->query.p != NULL ? r->query : str("");
	/* GET for a HEAD that fills the cache, as for HTTP. */
	x[P_REQUEST_METHOD][0] = rq->method;
	x[P_CONTENT_TYPE][0] = http_header_get(r, "Content-Type");
	if (x[P_CONTENT_TYPE][0].p == NULL)
		x[P_CONTENT_TYPE][0] = str("");
	v->cl[0] = '\0';
	if (r->content_length >= 0)
		snprintf(v->cl, sizeof(v->cl), "%lld",
		    (long long)r->content_length);
	x[P_CONTENT_LENGTH][0] = str(v->cl);
	x[P_SCRIPT_NAME][0] = (struct span){ v->script, slen };
	x[P_PATH_INFO][0] = str("");
	x[P_REQUEST_URI][0] = r->target;
	x[P_DOCUMENT_URI][0] = (struct span){ v->uri, ulen };
	x[P_DOCUMENT_ROOT][0] = str(s->root);
	x[P_SERVER_PROTOCOL][0] = str(r->version == 10 ? "HTTP/1.0" :
	    "HTTP/1.1");
	x[P_REQUEST_SCHEME][0] = str(conn_tls(rq->c) ? "https" : "http");
	x[P_GATEWAY_INTERFACE][0] = str("CGI/1.1");
	x[P_SERVER_SOFTWARE][0] = str(SOFTWARE);
	x[P_REMOTE_ADDR][0] = str(conn_peer(rq->c));
	snprintf(v->rport, sizeof(v->rport), "%u", conn_peer_port(rq->c));
	x[P_REMOTE_PORT][0] = str(v->rport);
	if (!conn_local(rq->c, v->saddr, sizeof(v->saddr), &port)) {
		v->saddr[0] = '\0';
		port = 0;
	}
	snprintf(v->sport, sizeof(v->sport), "%u", port);
	x[P_SERVER_ADDR][0] = str(v->saddr);
	x[P_SERVER_PORT][0] = str(v->sport);
	x[P_SERVER_NAME][0] = str(s->nnames > 0 ? s->names[0] : "");
	x[P_REDIRECT_STATUS][0] = str("200");
	/* nginx: fastcgi_param HTTPS $https if_not_empty. */
	x[P_HTTPS][0] = str(conn_tls(rq->c) ? "on" : "");
}

static bool
same_name(struct span a, struct span b)
{
	return a.len == b.len && strncasecmp(a.p, b.p, a.len) == 0;
}

/*
 * Whether field h (at index i of the request's fields) goes as HTTP_*:
 * the handler's rules pass it (they drop Proxy, for httpoxy), no
 * fastcgi_param takes its name, and it is the first of its name (the
 * others join it).
 */
static bool
passes(const struct upstream_request *rq, size_t i)
{
	const struct http_request *r = rq->r;
	const struct http_header *h = &r->headers[i];
	const struct config_fastcgi *f = rq->loc->fastcgi;
	char cgi[128];
	size_t j;

	if (!rq->keep(rq, h))
		return false;
	for (j = 0; j < i; j++)
		if (same_name(r->headers[j].name, h->name) &&
		    rq->keep(rq, &r->headers[j]))
			return false;
	if (f->nparams > 0 && h->name.len + 5 < sizeof(cgi)) {
		memcpy(cgi, "HTTP_", 5);
		for (j = 0; j < h->name.len; j++)
			cgi[5 + j] = h->name.p[j] == '-' ? '_' :
			    (char)(h->name.p[j] >= 'a' && h->name.p[j] <= 'z' ?
			    h->name.p[j] - 32 : h->name.p[j]);
		if (overridden(f, cgi, 5 + h->name.len))
			return false;
	}
	return true;
}

/* Field i and the later ones of its name, joined; false without memory. */
static bool
add_field(struct fcgi_params *w, const struct upstream_request *rq,
    size_t i)
{
	const struct http_request *r = rq->r;
	const struct http_header *h = &r->headers[i];
	struct span sep = http_span_ieq(h->name, "cookie") ?
	    (struct span){ "; ", 2 } : (struct span){ ", ", 2 };
	struct span *np;
	size_t j, n = 0;

	for (j = i; j < r->nheaders; j++) {
		if (j > i && !(same_name(r->headers[j].name, h->name) &&
		    rq->keep(rq, &r->headers[j])))
			continue;
		if (n + 2 > npieces) {
			np = realloc(pieces, (npieces + 16) * 2 * sizeof(*np));
			if (np == NULL)
				return false;
			pieces = np;
			npieces = (npieces + 16) * 2;
		}
		if (n > 0)
			pieces[n++] = sep;
		pieces[n++] = r->headers[j].value;
	}
	return fcgi_params_add(w, h->name.p, h->name.len, true, pieces, n);
}

/* The whole list; the same calls count it and write it. */
static bool
write_all(struct fcgi_params *w, const struct upstream_request *rq,
    const struct values *v)
{
	const struct config_fastcgi *f = rq->loc->fastcgi;
	const struct http_request *r = rq->r;
	const struct config_fcgi_param *p;
	struct span val;
	size_t i;
	bool ok = true;

	for (i = 0; ok && i < P_COUNT; i++)
		if (!overridden(f, names[i].p, names[i].len) &&
		    (i != P_HTTPS || v->v[i][0].len > 0))
			ok = fcgi_params_add(w, names[i].p, names[i].len,
			    false, v->v[i], v->v[i][1].p != NULL ? 2 : 1);
	for (p = f->params; ok && p < f->params + f->nparams; p++) {
		val = str(p->value);
		if (val.len > 0 || !p->if_not_empty)
			ok = fcgi_params_add(w, p->name, strlen(p->name), false,
			    &val, 1);
	}
	for (i = 0; ok && i < r->nheaders; i++)
		if (passes(rq, i))
			ok = add_field(w, rq, i);
	for (i = 0; ok && i < rq->nadd; i++)
		ok = fcgi_params_add(w, rq->add[i].name.p,
		    rq->add[i].name.len, true, &rq->add[i].value, 1);
	return ok;
}

int
fcgi_params_build(const struct upstream_request *rq, uint16_t id,
    bool keep_conn, struct upstream_buf *out)
{
	const struct config_fastcgi *f = rq->loc->fastcgi;
	const struct config_server *s = conn_server(rq->c);
	struct fcgi_params w;
	struct values v;
	size_t slen = 0, n, i;
	char *dst;
	bool check = f->script_check;
	int status;

	if ((status = script_name(rq, &v, &slen)) != 0)
		return status;
	/* A SCRIPT_FILENAME of the config is the user's choice: not ours to
	 * check against the URI. */
	for (i = 0; i < f->nparams; i++)
		if (is_script_filename(&f->params[i]))
			check = false;
	if (check && (status = static_file_status(
	    (size_t)(s - worker.cf->servers), v.script, slen)) != 0)
		return status;
	defaults(rq, &v, slen, strlen(v.uri));

	fcgi_params_init(&w, NULL, id);
	if (!write_all(&w, rq, &v))
		return 500;
	n = FCGI_BEGIN_LEN + fcgi_params_end(&w);
	if ((dst = upstream_buf_reserve(out, n)) == NULL)
		return 502;
	fcgi_begin_request(dst, id, keep_conn);
	fcgi_params_init(&w, dst + FCGI_BEGIN_LEN, id);
	if (!write_all(&w, rq, &v))
		return 502;
	fcgi_params_end(&w);
	out->len += n;
	return 0;
}

void
fcgi_params_free(void)
{
	free(pieces);
	pieces = NULL;
	npieces = 0;
}

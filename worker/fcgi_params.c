/*
 * The CGI/1.1 parameters of a FastCGI request.  See fcgi_params.h.
 *
 * The list is written once into the room the request buffer has; a list
 * larger than that is counted by the same calls and written again into
 * room of its size, so nothing is allocated per request.
 */
#include <limits.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn.h"
#include "worker/fcgi_params.h"
#include "worker/fcgi_record.h"
#include "worker/http_lex.h"
#include "worker/static.h"
#include "worker/upstream_proto.h"
#include "worker/vars.h"

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

#define PREP_MAX	(64 * 1024)	/* expanded values of one request */
#define PARAMS_ROOM	2048		/* the list's room before it is
					   counted: most fit */

/*
 * What the request's route says, taken when the handler starts: the
 * route ($uri after try_files or rewrites, $args, regex groups) and the
 * client's fields are current then, and the request may be built later
 * (after its body is read whole, or the cache's lock).
 */
struct fcgi_prep {
	const char *root;		/* $document_root */
	char uri[PATH_MAX];		/* $uri: DOCUMENT_URI */
	size_t urilen;
	char script[PATH_MAX];		/* SCRIPT_NAME */
	size_t slen;
	char pinfo[PATH_MAX];		/* PATH_INFO */
	size_t pilen;
	char *buf;			/* QUERY_STRING, then the values of
					   the fastcgi_param list */
	size_t size, len;
	size_t args_len;		/* at buf[0] */
	size_t *off;			/* each param's value in buf */
	size_t *vlen;			/* its length; SIZE_MAX: not sent */
	size_t noff;
};

static pcre2_match_data *md;

/* Each default's value: up to two pieces (root and script name). */
struct values {
	struct span v[P_COUNT][2];
	char cl[24], rport[24], sport[24];	/* http_u64 wants 20 */
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

static void
defaults(const struct upstream_request *rq, struct values *v)
{
	const struct http_request *r = rq->r;
	const struct config_server *s = conn_server(rq->c);
	const struct fcgi_prep *fp = rq->fcgi;
	struct span (*x)[2] = v->v;
	unsigned port;

	memset(x, 0, sizeof(v->v));
	x[P_SCRIPT_FILENAME][0] = str(fp->root);
	x[P_SCRIPT_FILENAME][1] = (struct span){ fp->script, fp->slen };
	x[P_QUERY_STRING][0] = (struct span){ fp->buf ? fp->buf : "",
	    fp->args_len };
	/* GET for a HEAD that fills the cache, as for HTTP. */
	x[P_REQUEST_METHOD][0] = rq->method;
	x[P_CONTENT_TYPE][0] = http_header_get(r, "Content-Type");
	if (x[P_CONTENT_TYPE][0].p == NULL)
		x[P_CONTENT_TYPE][0] = str("");
	x[P_CONTENT_LENGTH][0] = (struct span){ v->cl,
	    r->content_length >= 0 ?
	    http_u64(v->cl, (uint64_t)r->content_length) : 0 };
	x[P_SCRIPT_NAME][0] = (struct span){ fp->script, fp->slen };
	x[P_PATH_INFO][0] = (struct span){ fp->pinfo, fp->pilen };
	x[P_REQUEST_URI][0] = r->target;
	x[P_DOCUMENT_URI][0] = (struct span){ fp->uri, fp->urilen };
	x[P_DOCUMENT_ROOT][0] = str(fp->root);
	x[P_SERVER_PROTOCOL][0] = str(r->version == 10 ? "HTTP/1.0" :
	    "HTTP/1.1");
	x[P_REQUEST_SCHEME][0] = str(conn_tls(rq->c) ? "https" : "http");
	x[P_GATEWAY_INTERFACE][0] = str("CGI/1.1");
	x[P_SERVER_SOFTWARE][0] = str(SOFTWARE);
	x[P_REMOTE_ADDR][0] = str(conn_peer(rq->c));
	x[P_REMOTE_PORT][0] = (struct span){ v->rport,
	    http_u64(v->rport, conn_peer_port(rq->c)) };
	if (!conn_local(rq->c, v->saddr, sizeof(v->saddr), &port)) {
		v->saddr[0] = '\0';
		port = 0;
	}
	x[P_SERVER_ADDR][0] = str(v->saddr);
	x[P_SERVER_PORT][0] = (struct span){ v->sport,
	    http_u64(v->sport, port) };
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
	const struct fcgi_prep *fp = rq->fcgi;
	struct span val;
	size_t i;
	bool ok = true;

	for (i = 0; ok && i < P_COUNT; i++)
		if (!overridden(f, names[i].p, names[i].len) &&
		    (i != P_HTTPS || v->v[i][0].len > 0))
			ok = fcgi_params_add(w, names[i].p, names[i].len,
			    false, v->v[i], v->v[i][1].p != NULL ? 2 : 1);
	for (i = 0; ok && i < f->nparams; i++) {
		if (fp->vlen[i] == SIZE_MAX)
			continue;
		val = (struct span){ fp->buf + fp->off[i], fp->vlen[i] };
		ok = fcgi_params_add(w, f->params[i].name,
		    strlen(f->params[i].name), false, &val, 1);
	}
	for (i = 0; ok && i < r->nheaders; i++)
		if (passes(rq, i))
			ok = add_field(w, rq, i);
	for (i = 0; ok && i < rq->nadd; i++)
		ok = fcgi_params_add(w, rq->add[i].name.p,
		    rq->add[i].name.len, true, &rq->add[i].value, 1);
	return ok;
}

/* SCRIPT_NAME and PATH_INFO from $uri, as nginx's
 * fastcgi_split_path_info and fastcgi_index make them. */
static int
split(struct fcgi_prep *fp, const struct config_fastcgi *f)
{
	const char *script = fp->uri, *pinfo = "";
	size_t slen = fp->urilen, pilen = 0, ilen;
	PCRE2_SIZE *ov;

	if (f->split_re != NULL) {
		if (md == NULL && (md = pcre2_match_data_create(3, NULL)) ==
		    NULL)
			return 500;
		if (pcre2_match(f->split_re, (PCRE2_SPTR)fp->uri, fp->urilen,
		    0, 0, md, NULL) == 3) {
			ov = pcre2_get_ovector_pointer(md);
			script = fp->uri + ov[2];
			slen = ov[3] - ov[2];
			pinfo = fp->uri + ov[4];
			pilen = ov[5] - ov[4];
		}
	}
	ilen = slen > 0 && script[slen - 1] == '/' && f->index != NULL ?
	    strlen(f->index) : 0;
	if (slen + ilen >= sizeof(fp->script))
		return 414;
	memmove(fp->script, script, slen);
	memcpy(fp->script + slen, f->index, ilen);
	fp->slen = slen + ilen;
	fp->script[fp->slen] = '\0';
	memcpy(fp->pinfo, pinfo, pilen);
	fp->pilen = pilen;
	fp->pinfo[pilen] = '\0';
	return 0;
}

/* Room for n more bytes (and a NUL) in fp->buf; false past PREP_MAX or
 * without memory. */
static bool
prep_room(struct fcgi_prep *fp, size_t n)
{
	size_t size = fp->size > 0 ? fp->size : 1024;
	char *nb;

	while (size < fp->len + n + 1)
		size *= 2;
	if (size > PREP_MAX)
		return false;
	if (size > fp->size) {
		if ((nb = realloc(fp->buf, size)) == NULL)
			return false;
		fp->buf = nb;
		fp->size = size;
	}
	return true;
}

/* The fastcgi_param values, expanded into fp->buf. */
static int
expand_params(struct fcgi_prep *fp, const struct config_fastcgi *f,
    const struct conn *c, const struct vars_ctx *x)
{
	size_t i, room, *no;
	ssize_t n;

	if (f->nparams > fp->noff) {
		if ((no = realloc(fp->off, 2 * f->nparams * sizeof(*no))) ==
		    NULL)
			return 500;
		fp->off = no;
		fp->vlen = no + f->nparams;
		fp->noff = f->nparams;
	} else if (f->nparams > 0) {
		fp->vlen = fp->off + fp->noff;
	}
	for (i = 0; i < f->nparams; i++) {
		/* Expanded again into twice the room until it fits. */
		for (room = 256;; room *= 2) {
			if (!prep_room(fp, room))
				return 500;
			n = vars_expand(f->params[i].tmpl, c, x,
			    fp->buf + fp->len, fp->size - fp->len);
			if (n >= 0)
				break;
		}
		fp->off[i] = fp->len;
		fp->vlen[i] = n == 0 && f->params[i].if_not_empty ? SIZE_MAX :
		    (size_t)n;
		fp->len += (size_t)n;
	}
	return 0;
}

int
fcgi_params_prepare(struct fcgi_prep **fpp, const struct conn *c,
    const struct config_location *l, const struct vars_ctx *vx)
{
	const struct config_fastcgi *f = l->fastcgi;
	struct fcgi_prep *fp = *fpp;
	struct vars_ctx x = *vx;
	bool check = f->script_check;
	size_t i;
	int status;

	if (fp == NULL && (fp = *fpp = calloc(1, sizeof(*fp))) == NULL)
		return 500;
	fp->root = x.root != NULL ? x.root : conn_server(c)->root;
	if (x.urilen >= sizeof(fp->uri))
		return 414;
	memcpy(fp->uri, x.uri, x.urilen);
	fp->urilen = x.urilen;
	fp->uri[fp->urilen] = '\0';
	if ((status = split(fp, f)) != 0)
		return status;
	fp->len = 0;
	fp->args_len = x.args != NULL ? x.argslen : 0;
	if (!prep_room(fp, fp->args_len))
		return 500;
	if (fp->args_len > 0)
		memcpy(fp->buf, x.args, fp->args_len);
	fp->len = fp->args_len;
	x.script_name = fp->script;
	x.script_name_len = fp->slen;
	x.path_info = fp->pinfo;
	x.path_info_len = fp->pilen;
	if ((status = expand_params(fp, f, c, &x)) != 0) {
		log_error("client %s: the fastcgi_param values are larger "
		    "than %d bytes", conn_peer(c), PREP_MAX);
		return status;
	}
	/* A SCRIPT_FILENAME of the config is the user's choice: not ours to
	 * check against the URI. */
	for (i = 0; i < f->nparams; i++)
		if (is_script_filename(&f->params[i]))
			check = false;
	if (check)
		return static_file_status(l, fp->script, fp->slen);
	return 0;
}

void
fcgi_prep_free(struct fcgi_prep *fp)
{
	if (fp == NULL)
		return;
	free(fp->buf);
	free(fp->off);
	free(fp);
}

int
fcgi_params_build(const struct upstream_request *rq, uint16_t id,
    bool keep_conn, struct upstream_buf *out)
{
	struct fcgi_params w;
	struct values v;
	size_t n, room;
	char *dst;

	if (rq->fcgi == NULL)
		return 500;
	defaults(rq, &v);

	/* Written once into the buffer's room; a list larger than that is
	 * counted by the same pass, then written into room of its size. */
	if ((dst = upstream_buf_reserve(out, FCGI_BEGIN_LEN +
	    PARAMS_ROOM)) == NULL)
		return 502;
	room = out->size - out->len - FCGI_BEGIN_LEN;
	fcgi_params_init(&w, dst + FCGI_BEGIN_LEN, id);
	w.cap = room;
	if (!write_all(&w, rq, &v))
		return 500;
	if ((n = fcgi_params_end(&w)) > room) {
		if ((dst = upstream_buf_reserve(out, FCGI_BEGIN_LEN + n)) ==
		    NULL)
			return 502;
		fcgi_params_init(&w, dst + FCGI_BEGIN_LEN, id);
		if (!write_all(&w, rq, &v))
			return 502;
		fcgi_params_end(&w);
	}
	fcgi_begin_request(dst, id, keep_conn);
	out->len += FCGI_BEGIN_LEN + n;
	return 0;
}

void
fcgi_params_free(void)
{
	free(pieces);
	pieces = NULL;
	npieces = 0;
}

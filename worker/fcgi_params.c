/*
 * The CGI/1.1 parameters of a FastCGI request.  See fcgi_params.h.
 *
 * The list is written straight into the request buffer's room, as one
 * record whose header is written once its length is known: a default's
 * name is a constant, copied inline.  A list that does not fit there
 * (or in one record) is written again by the general writer
 * (worker/fcgi_record.h), counted first, into room of its size, so
 * nothing is allocated per request.
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
#define PARAMS_ROOM	2048		/* the room the list is first
					   written in: most fit */

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

/* Each default's value; SCRIPT_FILENAME's is two pieces, the root and
 * the script's name. */
struct values {
	struct span v[P_COUNT];
	struct span script;
	char cl[24], rport[24], sport[24];	/* http_u64 wants 20 */
	char saddr[INET6_ADDRSTRLEN];
};

/* Pieces of a joined header value, grown as requests need. */
static struct span *pieces;
static size_t npieces;

/*
 * Where the pairs go: straight to d (up to end) when w is NULL, else to
 * the general writer.  d becomes NULL when a pair does not fit: the list
 * is written again through w.
 */
struct emit {
	char *d, *end;
	struct fcgi_params *w;
	bool ok;			/* no length over FCGI_PAIR_MAX, no
					   memory short */
};

static struct span
str(const char *s)
{
	return (struct span){ s, strlen(s) };
}

#define LIT(s)	((struct span){ s, sizeof(s) - 1 })

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
	struct span *x = v->v;
	struct span root = str(fp->root);
	bool tls = conn_tls(rq->c);
	unsigned port;
	size_t i;

	x[P_SCRIPT_FILENAME] = root;
	v->script = (struct span){ fp->script, fp->slen };
	x[P_QUERY_STRING] = (struct span){ fp->buf ? fp->buf : "",
	    fp->args_len };
	/* GET for a HEAD that fills the cache, as for HTTP. */
	x[P_REQUEST_METHOD] = rq->method;
	x[P_CONTENT_TYPE] = LIT("");
	for (i = 0; i < r->nheaders; i++)
		if (r->headers[i].name.len == 12 &&
		    http_ieq(r->headers[i].name.p, "content-type", 12)) {
			x[P_CONTENT_TYPE] = r->headers[i].value;
			break;
		}
	x[P_CONTENT_LENGTH] = (struct span){ v->cl,
	    r->content_length >= 0 ?
	    http_u64(v->cl, (uint64_t)r->content_length) : 0 };
	x[P_SCRIPT_NAME] = (struct span){ fp->script, fp->slen };
	x[P_PATH_INFO] = (struct span){ fp->pinfo, fp->pilen };
	x[P_REQUEST_URI] = r->target;
	x[P_DOCUMENT_URI] = (struct span){ fp->uri, fp->urilen };
	x[P_DOCUMENT_ROOT] = root;
	x[P_SERVER_PROTOCOL] = r->version == 10 ? LIT("HTTP/1.0") :
	    LIT("HTTP/1.1");
	x[P_REQUEST_SCHEME] = tls ? LIT("https") : LIT("http");
	x[P_GATEWAY_INTERFACE] = LIT("CGI/1.1");
	x[P_SERVER_SOFTWARE] = LIT(SOFTWARE);
	x[P_REMOTE_ADDR] = str(conn_peer(rq->c));
	x[P_REMOTE_PORT] = (struct span){ v->rport,
	    http_u64(v->rport, conn_peer_port(rq->c)) };
	if (!conn_local(rq->c, v->saddr, sizeof(v->saddr), &port)) {
		v->saddr[0] = '\0';
		port = 0;
	}
	x[P_SERVER_ADDR] = str(v->saddr);
	x[P_SERVER_PORT] = (struct span){ v->sport,
	    http_u64(v->sport, port) };
	x[P_SERVER_NAME] = s->nnames > 0 ? str(s->names[0]) : LIT("");
	x[P_REDIRECT_STATUS] = LIT("200");
	/* nginx: fastcgi_param HTTPS $https if_not_empty. */
	x[P_HTTPS] = tls ? LIT("on") : LIT("");
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
		fcgi_cgi_name(cgi + 5, h->name.p, h->name.len);
		if (overridden(f, cgi, 5 + h->name.len))
			return false;
	}
	return true;
}

/* Writes a pair length, in one byte below 128 and in four above. */
static inline char *
put_len(char *d, size_t n)
{
	unsigned char *u = (unsigned char *)d;

	if (n < 128) {
		u[0] = (unsigned char)n;
		return d + 1;
	}
	u[0] = (unsigned char)(n >> 24 | 0x80);
	u[1] = (unsigned char)(n >> 16);
	u[2] = (unsigned char)(n >> 8);
	u[3] = (unsigned char)n;
	return d + 4;
}

/* One pair, its value in nv pieces. */
static void
emit(struct emit *e, const char *name, size_t nlen, bool http,
    const struct span *v, size_t nv)
{
	size_t i, vlen = 0, flen = nlen + (http ? 5 : 0);
	char *d = e->d;

	if (e->w != NULL) {
		if (!fcgi_params_add_any(e->w, name, nlen, http, v, nv))
			e->ok = false;
		return;
	}
	if (d == NULL)
		return;
	for (i = 0; i < nv; i++)
		vlen += v[i].len;
	/* Both lengths in four bytes at most, and no overflow. */
	if (vlen > FCGI_MAX_CONTENT || flen > FCGI_MAX_CONTENT ||
	    (size_t)(e->end - d) < 8 + flen + vlen) {
		e->d = NULL;
		return;
	}
	d = put_len(d, flen);
	d = put_len(d, vlen);
	if (http) {
		memcpy(d, "HTTP_", 5);
		fcgi_cgi_name(d + 5, name, nlen);
	} else {
		memcpy(d, name, nlen);
	}
	d += flen;
	/* An empty piece may have no pointer. */
	for (i = 0; i < nv; i++)
		if (v[i].len > 0) {
			memcpy(d, v[i].p, v[i].len);
			d += v[i].len;
		}
	e->d = d;
}

/*
 * A request field with its value on one line (most are, and the fields
 * the handler adds): the same as emit(), inline, for a name below 123
 * bytes; anything else goes to emit().
 */
static inline void
emit_field1(struct emit *e, struct span name, const struct span *v)
{
	char *d = e->d;

	if (e->w != NULL || d == NULL || name.len >= 128 - 5 ||
	    v->len > FCGI_MAX_CONTENT ||
	    (size_t)(e->end - d) < 10 + name.len + v->len) {
		emit(e, name.p, name.len, true, v, 1);
		return;
	}
	*d++ = (char)(name.len + 5);
	d = put_len(d, v->len);
	memcpy(d, "HTTP_", 5);
	fcgi_cgi_name(d + 5, name.p, name.len);
	d += 5 + name.len;
	if (v->len > 0)
		memcpy(d, v->p, v->len);
	e->d = d + v->len;
}

/* The defaults' names, all told. */
enum {
#define X(name)	+ sizeof(#name) - 1
	NAMES_LEN = 0 FCGI_DEFAULTS(X)
#undef X
};

/* The most the defaults can take: each name's length in a byte, its
 * value's in up to four. */
static size_t
defaults_size(const struct values *v)
{
	size_t n = NAMES_LEN + 5 * P_COUNT + v->script.len, i;

	for (i = 0; i < P_COUNT; i++)
		n += v->v[i].len;
	return n;
}

/*
 * A default at d, which has room: a constant name below 128 bytes, its
 * value in one piece or, with more (NULL but for SCRIPT_FILENAME), two.
 * Inline, so that the name's copy is a few moves and a default of one
 * piece has no code for a second.
 */
static inline char *
put_default(char *d, const char *name, size_t nlen, const struct span *v,
    const struct span *more)
{
	*d++ = (char)nlen;
	d = put_len(d, v->len + (more != NULL ? more->len : 0));
	memcpy(d, name, nlen);
	d += nlen;
	if (v->len > 0)
		memcpy(d, v->p, v->len);
	d += v->len;
	if (more != NULL && more->len > 0) {
		memcpy(d, more->p, more->len);
		d += more->len;
	}
	return d;
}

/*
 * The defaults but those in skip: straight at e->d when they all fit
 * there (no check a pair), else through the general writer, in the same
 * order (FCGI_DEFAULTS).
 */
static void
emit_defaults(struct emit *e, const struct values *v, uint32_t skip)
{
	struct span two[2];
	char *d = e->d;
	size_t i;

	if (e->w != NULL) {
		for (i = 0; i < P_COUNT; i++) {
			if (skip & (uint32_t)1 << i)
				continue;
			two[0] = v->v[i];
			two[1] = v->script;
			emit(e, names[i].p, names[i].len, false, two,
			    i == P_SCRIPT_FILENAME ? 2 : 1);
		}
		return;
	}
	if (d == NULL)
		return;
	if ((size_t)(e->end - d) < defaults_size(v)) {
		e->d = NULL;		/* the general writer, then */
		return;
	}
#define X(name)								\
	if (!(skip & (uint32_t)1 << P_##name))				\
		d = put_default(d, #name, sizeof(#name) - 1,		\
		    &v->v[P_##name],					\
		    P_##name == P_SCRIPT_FILENAME ? &v->script : NULL);
	FCGI_DEFAULTS(X)
#undef X
	e->d = d;
}

/* Field i and the later ones of its name, joined. */
static void
emit_field(struct emit *e, const struct upstream_request *rq, size_t i)
{
	const struct http_request *r = rq->r;
	const struct http_header *h = &r->headers[i];
	struct span sep, *np;
	size_t j, n = 0;

	for (j = i + 1; j < r->nheaders; j++)
		if (same_name(r->headers[j].name, h->name) &&
		    rq->keep(rq, &r->headers[j]))
			break;
	if (j == r->nheaders) {
		/* The usual field: one line, its value as it is. */
		emit_field1(e, h->name, &h->value);
		return;
	}
	sep = http_span_ieq(h->name, "cookie") ? LIT("; ") : LIT(", ");
	for (j = i; j < r->nheaders; j++) {
		if (j > i && !(same_name(r->headers[j].name, h->name) &&
		    rq->keep(rq, &r->headers[j])))
			continue;
		if (n + 2 > npieces) {
			np = realloc(pieces, (npieces + 16) * 2 * sizeof(*np));
			if (np == NULL) {
				e->ok = false;
				return;
			}
			pieces = np;
			npieces = (npieces + 16) * 2;
		}
		if (n > 0)
			pieces[n++] = sep;
		pieces[n++] = r->headers[j].value;
	}
	emit(e, h->name.p, h->name.len, true, pieces, n);
}

/* The defaults a fastcgi_param of the location replaces, a bit each. */
static uint32_t
replaced(const struct config_fastcgi *f)
{
	uint32_t skip = 0;
	size_t i;

	for (i = 0; i < P_COUNT; i++)
		if (overridden(f, names[i].p, names[i].len))
			skip |= (uint32_t)1 << i;
	return skip;
}

/* The whole list, in order; the same calls write it either way. */
static void
emit_all(struct emit *e, const struct upstream_request *rq,
    const struct values *v)
{
	const struct config_fastcgi *f = rq->loc->fastcgi;
	const struct http_request *r = rq->r;
	const struct fcgi_prep *fp = rq->fcgi;
	uint32_t skip = f->nparams > 0 ? replaced(f) : 0;
	struct span val;
	size_t i;

	/* HTTPS only when it has a value (nginx: if_not_empty). */
	if (v->v[P_HTTPS].len == 0)
		skip |= (uint32_t)1 << P_HTTPS;
	emit_defaults(e, v, skip);
	for (i = 0; i < f->nparams; i++) {
		if (fp->vlen[i] == SIZE_MAX)
			continue;
		val = (struct span){ fp->buf + fp->off[i], fp->vlen[i] };
		emit(e, f->params[i].name, strlen(f->params[i].name), false,
		    &val, 1);
	}
	for (i = 0; i < r->nheaders; i++)
		if (passes(rq, i))
			emit_field(e, rq, i);
	for (i = 0; i < rq->nadd; i++)
		emit_field1(e, rq->add[i].name, &rq->add[i].value);
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
	struct emit e = { .ok = true };
	size_t n, room;
	char *dst, *rec;

	if (rq->fcgi == NULL)
		return 500;
	defaults(rq, &v);

	/* Straight into the buffer's room, as one record. */
	if ((dst = upstream_buf_reserve(out, FCGI_BEGIN_LEN +
	    2 * FCGI_HEADER_LEN + PARAMS_ROOM)) == NULL)
		return 502;
	room = out->size - out->len - FCGI_BEGIN_LEN - 2 * FCGI_HEADER_LEN;
	rec = dst + FCGI_BEGIN_LEN;
	e.d = rec + FCGI_HEADER_LEN;
	e.end = e.d + (room < FCGI_MAX_CONTENT ? room : FCGI_MAX_CONTENT);
	emit_all(&e, rq, &v);
	if (!e.ok)
		return 500;
	if (e.d != NULL) {
		n = (size_t)(e.d - (rec + FCGI_HEADER_LEN));
		if (n > 0) {
			fcgi_header(rec, FCGI_PARAMS, id, n);
			rec += FCGI_HEADER_LEN + n;
		}
		/* The empty record that ends the stream. */
		fcgi_header(rec, FCGI_PARAMS, id, 0);
		fcgi_begin_request(dst, id, keep_conn);
		out->len += (size_t)(rec + FCGI_HEADER_LEN - dst);
		return 0;
	}

	/* Larger: counted by the general writer, then written into room
	 * of its size. */
	fcgi_params_init(&w, NULL, id);
	e.w = &w;
	emit_all(&e, rq, &v);
	if (!e.ok)
		return 500;
	n = fcgi_params_end(&w);
	if ((dst = upstream_buf_reserve(out, FCGI_BEGIN_LEN + n)) == NULL)
		return 502;
	fcgi_params_init(&w, dst + FCGI_BEGIN_LEN, id);
	emit_all(&e, rq, &v);
	if (!e.ok)
		return 502;
	fcgi_params_end(&w);
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

/*
 * What answers a request, in nginx's order: the server chosen by address
 * and Host; the server's rewrites; the location (exact, longest prefix,
 * regex); its rewrites and return; limits and access; try_files; then a
 * handler: the proxy, files, a redirect or an error page.
 *
 * The decision is made once per request, before its body is read, into
 * the worker's one route, which lasts until the handler has run in the
 * same turn of the loop.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <limits.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/access.h"
#include "worker/conn_impl.h"
#include "worker/proxy.h"
#include "worker/static.h"
#include "worker/vars.h"

#define REDIRECTS_MAX	10	/* internal redirects of one request */
#define OVEC_PAIRS	10

enum kind {
	K_FILES,		/* static files under c->loc */
	K_OPTIONS,
	K_ERROR,		/* rt.status */
	K_REDIRECT,		/* rt.status, Location rt.text */
	K_TEXT,			/* rt.status, body rt.text */
};

static struct {
	enum kind kind;
	int status;
	char uri[PATH_MAX];	/* current $uri, normalised */
	size_t urilen;
	bool plain;		/* uri is the request's plain path: no "/." */
	const char *args;	/* current $args */
	size_t argslen;
	char argsbuf[4096];
	char subject[PATH_MAX];	/* what the last regex matched */
	size_t ovec[2 * OVEC_PAIRS];
	int ncap;
	int redirects;
	const struct config_location *named;	/* try_files's "@app" */
	int delay_ms;
	char text[8192];
	size_t textlen;
} rt;

static pcre2_match_data *md;

static bool
name_match(const char *name, struct span host)
{
	size_t n = strlen(name);

	if (name[0] == '*' && name[1] == '.') {
		/* "*.example.com" matches "a.example.com", not itself. */
		n -= 1;
		return host.len > n && strncasecmp(host.p + host.len - n,
		    name + 1, n) == 0;
	}
	return host.len == n && strncasecmp(host.p, name, n) == 0;
}

static bool
listens_on(const struct config_server *s, int lidx)
{
	for (size_t i = 0; i < s->nlisten; i++)
		if (s->listen[i] == (size_t)lidx)
			return true;
	return false;
}

static size_t
find_server(struct span host, int lidx)
{
	const struct config *cf = worker.cf;
	size_t i, j, dflt = 0;

	for (i = 0; i < cf->nservers; i++) {
		if (!listens_on(&cf->servers[i], lidx))
			continue;
		if (cf->servers[i].default_for[lidx])
			dflt = i;
		if (host.p == NULL)
			continue;
		for (j = 0; j < cf->servers[i].nnames; j++)
			if (name_match(cf->servers[i].names[j], host))
				return i;
	}
	return dflt;
}

/*
 * Among the servers on this address: the name, else the default one.
 * The answer for the last Host is kept (the config does not change in a
 * worker's life): keep-alive and pipelined requests name the same host
 * again and again.
 */
size_t
request_server(struct span host, int lidx)
{
	static struct {
		bool set;
		int lidx;
		size_t len, srv;
		char host[64];
	} last;
	size_t srv;

	if (host.p != NULL && last.set && lidx == last.lidx &&
	    host.len == last.len &&
	    memcmp(host.p, last.host, host.len) == 0)
		return last.srv;
	srv = find_server(host, lidx);
	if (host.p != NULL && host.len <= sizeof(last.host)) {
		last.set = true;
		last.lidx = lidx;
		last.len = host.len;
		last.srv = srv;
		memcpy(last.host, host.p, host.len);
	}
	return srv;
}

/*
 * The answer for the last Host's number (http.h: host_id), which saves
 * comparing the bytes again.
 */
size_t
request_server_of(const struct http_request *r, int lidx)
{
	static struct {
		uint64_t id;
		int lidx;
		size_t srv;
	} last;

	if (r->host_id != 0 && r->host_id == last.id && lidx == last.lidx)
		return last.srv;
	last.srv = request_server(r->host, lidx);
	last.id = r->host_id;
	last.lidx = lidx;
	return last.srv;
}

/* Regular expressions and variables ---------------------------------- */

static bool
re_match(const void *re, const char *s, size_t len)
{
	PCRE2_SIZE *ov;
	int rc, i;

	if (md == NULL && (md = pcre2_match_data_create(OVEC_PAIRS,
	    NULL)) == NULL)
		return false;
	rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, NULL);
	if (rc < 0) {
		if (rc != PCRE2_ERROR_NOMATCH)
			log_warn("regular expression: error %d", rc);
		return false;
	}
	if (rc == 0 || rc > OVEC_PAIRS)
		rc = OVEC_PAIRS;
	ov = pcre2_get_ovector_pointer(md);
	if (len >= sizeof(rt.subject))
		return false;
	memcpy(rt.subject, s, len);
	rt.subject[len] = '\0';
	for (i = 0; i < 2 * rc; i++)
		rt.ovec[i] = ov[i] == PCRE2_UNSET ? (size_t)-1 : ov[i];
	rt.ncap = rc;
	return true;
}

static void
ctx_of(struct vars_ctx *x, const struct conn *c)
{
	memset(x, 0, sizeof(*x));
	x->uri = rt.uri;
	x->urilen = rt.urilen;
	x->args = rt.args;
	x->argslen = rt.argslen;
	x->subject = rt.subject;
	x->ovector = rt.ncap > 0 ? rt.ovec : NULL;
	x->ncaptures = rt.ncap;
	if (c->loc != NULL)
		x->root = worker.cf->dirs[c->loc->dir];
}

void
request_vars(const struct conn *c, struct vars_ctx *x)
{
	ctx_of(x, c);
}

ssize_t
request_expand(const struct conn *c, const struct vars_tmpl *t, char *out,
    size_t len)
{
	struct vars_ctx x;

	ctx_of(&x, c);
	return vars_expand(t, c, &x, out, len);
}

/* Locations ------------------------------------------------------------ */

/* nginx's order: exact, then the longest prefix unless it is "^~", then
 * the first regex in the order written, then that longest prefix. */
static const struct config_location *
find_location(const struct config_server *s, const char *uri, size_t len)
{
	const struct config_location *l, *best = NULL;

	for (l = s->locations; l < s->locations + s->nlocations; l++) {
		if (l->match == LOC_EXACT && l->prefix_len == len &&
		    memcmp(l->prefix, uri, len) == 0)
			return l;
		if ((l->match == LOC_PREFIX || l->match == LOC_PREFIX_STOP) &&
		    len >= l->prefix_len &&
		    memcmp(l->prefix, uri, l->prefix_len) == 0 &&
		    (best == NULL || l->prefix_len > best->prefix_len))
			best = l;
	}
	if (best != NULL && best->match == LOC_PREFIX_STOP)
		return best;
	for (l = s->locations; l < s->locations + s->nlocations; l++)
		if (l->match == LOC_REGEX && re_match(l->re, uri, len))
			return l;
	return best != NULL ? best : &s->base;
}

/* The location titled name ("@app") of server s, or NULL. */
static const struct config_location *
named_location(const struct config_server *s, const char *name, size_t len)
{
	const struct config_location *l;

	for (l = s->locations; l < s->locations + s->nlocations; l++)
		if (l->match == LOC_NAMED && l->prefix_len == len &&
		    memcmp(l->prefix, name, len) == 0)
			return l;
	return NULL;
}

/* Normalises a URI made by a rewrite: its bytes are decoded already. */
static bool
set_uri(const char *p, size_t len)
{
	char enc[PATH_MAX];
	size_t i, n = 0;
	ssize_t r;
	int status;

	for (i = 0; i < len && n + 4 < sizeof(enc); i++) {
		if (p[i] == '%') {
			memcpy(enc + n, "%25", 3);
			n += 3;
		} else
			enc[n++] = p[i];
	}
	if (i < len)
		return false;
	r = http_path_normalize(rt.uri, sizeof(rt.uri), enc, n, &status);
	if (r < 0)
		return false;
	rt.urilen = (size_t)r;
	rt.plain = false;
	return true;
}

/* "uri?args": new args, with the old ones after them unless it ends
 * in '?'. */
static void
set_args(const char *q, size_t len)
{
	char tmp[sizeof(rt.argsbuf)];
	size_t n = 0;

	if (len > 0 && q[len - 1] == '?') {
		len--;
	} else if (rt.args != NULL && rt.argslen > 0) {
		n = (size_t)snprintf(tmp, sizeof(tmp), "%.*s&%.*s", (int)len,
		    q, (int)rt.argslen, rt.args);
		q = tmp;
		len = n < sizeof(tmp) ? n : sizeof(tmp) - 1;
	}
	if (len >= sizeof(rt.argsbuf))
		len = sizeof(rt.argsbuf) - 1;
	memmove(rt.argsbuf, q, len);
	rt.args = rt.argsbuf;
	rt.argslen = len;
}

static bool
is_absolute(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* Appends p to rt.text with bytes that could break a header encoded. */
static size_t
put_safe(size_t n, const char *p, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char ch;
	size_t i;

	for (i = 0; i < len && n + 4 < sizeof(rt.text); i++) {
		ch = (unsigned char)p[i];
		if (ch <= 0x20 || ch >= 0x7f) {
			rt.text[n++] = '%';
			rt.text[n++] = hex[ch >> 4];
			rt.text[n++] = hex[ch & 15];
		} else
			rt.text[n++] = (char)ch;
	}
	return n;
}

/* A Location value: no byte of the request can break the header. */
static void
set_location(const char *p, size_t len, bool with_args)
{
	size_t n = put_safe(0, p, len);

	if (with_args && rt.args != NULL && rt.argslen > 0 &&
	    n + 1 < sizeof(rt.text)) {
		rt.text[n++] = '?';
		n = put_safe(n, rt.args, rt.argslen);
	}
	rt.text[n] = '\0';
	rt.textlen = n;
}

static void
route_error(int status)
{
	rt.kind = K_ERROR;
	rt.status = status;
}

/*
 * Runs the rewrites of l.  Returns the flag of the one that ended them,
 * REWRITE_NEXT when none did (*changed says whether the URI changed),
 * or -1 when the request is answered (redirect or error).
 */
static int do_rewrites(struct conn *c, const struct config_location *l,
    bool *changed);

static inline int
run_rewrites(struct conn *c, const struct config_location *l,
    bool *changed)
{
	*changed = false;
	/* Most locations have none: no call, and no frame of PATH_MAX. */
	return l->nrewrites == 0 ? REWRITE_NEXT : do_rewrites(c, l, changed);
}

static int
do_rewrites(struct conn *c, const struct config_location *l,
    bool *changed)
{
	const struct config_rewrite *rw;
	char buf[PATH_MAX + 4096];
	const char *q;
	ssize_t n;
	size_t ul;

	for (rw = l->rewrites; rw < l->rewrites + l->nrewrites; rw++) {
		if (!re_match(rw->re, rt.uri, rt.urilen))
			continue;
		if ((n = request_expand(c, rw->to, buf, sizeof(buf))) < 0) {
			route_error(500);
			return -1;
		}
		q = memchr(buf, '?', (size_t)n);
		ul = q ? (size_t)(q - buf) : (size_t)n;
		if (q != NULL)
			set_args(q + 1, (size_t)n - ul - 1);
		if (rw->flag == REWRITE_REDIRECT || rw->flag ==
		    REWRITE_PERMANENT || is_absolute(buf)) {
			rt.kind = K_REDIRECT;
			rt.status = rw->flag == REWRITE_PERMANENT ? 301 : 302;
			set_location(buf, ul, true);
			return -1;
		}
		if (!set_uri(buf, ul)) {
			log_info("client %s: rewrite made a bad URI \"%.*s\"",
			    c->peer, (int)ul, buf);
			route_error(500);
			return -1;
		}
		*changed = true;
		if (rw->flag != REWRITE_NEXT)
			return rw->flag;
	}
	return REWRITE_NEXT;
}

/* return = "301 URL", "404", "200 text". */
static void
run_return(struct conn *c, const struct config_location *l)
{
	ssize_t n = 0;
	int st = l->return_status;

	if (l->return_text != NULL && (n = request_expand(c, l->return_text,
	    rt.text, sizeof(rt.text))) < 0) {
		route_error(500);
		return;
	}
	rt.status = st;
	if (st == 301 || st == 302 || st == 303 || st == 307 || st == 308) {
		char tmp[sizeof(rt.text)];

		memcpy(tmp, rt.text, (size_t)n);
		rt.kind = K_REDIRECT;
		set_location(tmp, (size_t)n, false);
	} else if (l->return_text != NULL) {
		rt.kind = K_TEXT;
		rt.textlen = (size_t)n;
	} else
		rt.kind = K_ERROR;
}

/* Access and limits ------------------------------------------------------ */

/* nginx's order: limit_req, limit_conn, allow/deny, auth_basic. */
static enum route_action
run_access(struct conn *c, const struct config_location *l)
{
	int st;

	if (l->limit_req_zone >= 0 && !c->limits_passed) {
		st = limit_req(c, l, &rt.delay_ms);
		if (st < 0)
			return ROUTE_DELAY;
		if (st > 0) {
			route_error(st);
			return ROUTE_ANSWER;
		}
	}
	if (l->limit_conn_zone >= 0 && c->lc_zone < 0 &&
	    (st = limit_conn_enter(c, l)) > 0) {
		route_error(st);
		return ROUTE_ANSWER;
	}
	if (l->nacl == 0 ? !l->acl_default_allow :
	    !acl_allows(l, conn_client_family(c), conn_client_addr(c))) {
		log_info("client %s: access forbidden by rule", c->peer);
		route_error(403);
		return ROUTE_ANSWER;
	}
	if (l->auth_realm != NULL && !auth_check(c, l)) {
		route_error(401);
		return ROUTE_ANSWER;
	}
	if (l->status)
		return ROUTE_STATUS;
	if (l->memcached_local)
		return ROUTE_MEMCACHED;
	return l->upstream >= 0 ? ROUTE_PROXY : ROUTE_ANSWER;
}

/* try_files ------------------------------------------------------------- */

/* The path below the location's folder for a URI (root or alias). */
static ssize_t
map_path(const struct conn *c, const struct config_location *l,
    const char *uri, size_t len, char *out, size_t outlen)
{
	char tmp[PATH_MAX];
	const char *rest;
	ssize_t n;
	int status;

	if (!l->alias) {
		if (len >= outlen)
			return -1;
		memcpy(out, uri, len + 1);
		return (ssize_t)len;
	}
	if (l->alias_tmpl != NULL) {
		if ((n = request_expand(c, l->alias_tmpl, tmp, sizeof(tmp))) <
		    0)
			return -1;
		/* Captures cannot climb out: normalised again below the
		 * alias's fixed folder. */
		return http_path_normalize(out, outlen, tmp, (size_t)n,
		    &status);
	}
	rest = l->match == LOC_REGEX || len < l->prefix_len ? uri :
	    uri + l->prefix_len;
	n = snprintf(out, outlen, "%s%s", rest[0] == '/' ? "" : "/", rest);
	return n < 0 || (size_t)n >= outlen ? -1 : n;
}

/* Tries each entry; the first that exists becomes $uri.  The last is a
 * status or a URI to route again.  Returns false when re-routed. */
static bool
run_try_files(struct conn *c, const struct config_location *l)
{
	char uri[PATH_MAX], rel[PATH_MAX];
	const char *q;
	ssize_t n, r;
	size_t i, ul;
	int kind;

	for (i = 0; i + 1 < l->ntry_files; i++) {
		n = request_expand(c, l->try_files[i], uri, sizeof(uri));
		if (n <= 0 || uri[0] != '/')
			continue;
		r = map_path(c, l, uri, (size_t)n, rel, sizeof(rel));
		if (r < 0)
			continue;
		kind = static_probe(l, rel, (size_t)r);
		if ((kind == 1 && uri[n - 1] != '/') ||
		    (kind == 2 && uri[n - 1] == '/')) {
			set_uri(uri, (size_t)n);
			return true;
		}
	}
	n = request_expand(c, l->try_files[i], uri, sizeof(uri));
	if (n > 1 && uri[0] == '=') {
		route_error(atoi(uri + 1));
		return true;
	}
	/* "@app": that location takes the request, its URI unchanged. */
	if (n > 1 && uri[0] == '@') {
		rt.named = named_location(&worker.cf->servers[c->srv], uri,
		    (size_t)n);
		if (rt.named == NULL) {
			route_error(500);
			return true;
		}
		return false;
	}
	q = n > 0 ? memchr(uri, '?', (size_t)n) : NULL;
	ul = q ? (size_t)(q - uri) : (size_t)(n > 0 ? n : 0);
	if (q != NULL) {
		/* nginx replaces the arguments here (a rewrite appends):
		 * "/index.php?$query_string" keeps them once. */
		rt.argslen = 0;
		set_args(q + 1, (size_t)n - ul - 1);
	}
	if (!set_uri(uri, ul)) {
		route_error(500);
		return true;
	}
	return false;
}

/* Routing ---------------------------------------------------------------- */

static enum route_action
route_uri(struct conn *c)
{
	const struct config_server *s = &worker.cf->servers[c->srv];
	const struct config_location *l;
	enum route_action act;
	bool changed;
	int flag;

	if (run_rewrites(c, &s->base, &changed) < 0)
		return ROUTE_ANSWER;
	if (s->base.return_status != 0) {
		run_return(c, &s->base);
		return ROUTE_ANSWER;
	}
	for (;;) {
		if (++rt.redirects > REDIRECTS_MAX) {
			log_error("client %s: more than %d internal redirects "
			    "for \"%s\"", c->peer, REDIRECTS_MAX, rt.uri);
			route_error(500);
			return ROUTE_ANSWER;
		}
		rt.ncap = 0;
		l = c->loc = s->nlocations == 0 ? &s->base :
		    find_location(s, rt.uri, rt.urilen);
		if ((flag = run_rewrites(c, l, &changed)) < 0)
			return ROUTE_ANSWER;
		/* A changed URI looks for its location again, as in nginx. */
		if (flag == REWRITE_LAST || (flag == REWRITE_NEXT && changed))
			continue;
		if (l->return_status != 0) {
			run_return(c, l);
			return ROUTE_ANSWER;
		}
		act = run_access(c, l);
		if (act != ROUTE_ANSWER || rt.kind != K_FILES)
			return act;
		if (l->ntry_files == 0 || run_try_files(c, l))
			return ROUTE_ANSWER;
		if (rt.named != NULL) {
			l = c->loc = rt.named;
			rt.named = NULL;
			if (l->return_status != 0) {
				run_return(c, l);
				return ROUTE_ANSWER;
			}
			return run_access(c, l);
		}
	}
}

enum route_action
request_route(struct conn *c)
{
	const struct config_server *s = &worker.cf->servers[c->srv];
	const struct http_request *r = &c->rq->req;
	ssize_t len;
	int status;

	c->loc = &s->base;
	c->in_error_page = false;
	rt.kind = K_FILES;
	rt.redirects = 0;
	rt.named = NULL;
	rt.ncap = 0;
	rt.args = r->query.p;
	rt.argslen = r->query.len;
	if (r->method == HTTP_M_CONNECT) {
		route_error(405);
		return ROUTE_ANSWER;
	}
	if (r->method == HTTP_M_OPTIONS && r->path.len == 1 &&
	    r->path.p[0] == '*') {
		rt.kind = K_OPTIONS;
		return ROUTE_ANSWER;
	}
	/* The parser has seen whether the path needs normalising. */
	if (r->path_plain && r->path.len < sizeof(rt.uri)) {
		memcpy(rt.uri, r->path.p, r->path.len);
		rt.uri[r->path.len] = '\0';
		rt.urilen = r->path.len;
		rt.plain = true;
		return route_uri(c);
	}
	rt.plain = false;
	len = http_path_normalize(rt.uri, sizeof(rt.uri), r->path.p,
	    r->path.len, &status);
	if (len < 0) {
		log_info("client %s: bad path \"%.*s\"", c->peer,
		    (int)r->path.len, r->path.p);
		route_error(status);
		return ROUTE_ANSWER;
	}
	rt.urilen = (size_t)len;
	return route_uri(c);
}

int
request_delay_ms(void)
{
	return rt.delay_ms;
}

void
request_end(struct conn *c)
{
	limit_conn_leave(c);
}

/* Handlers ---------------------------------------------------------------- */

static void
handle_options(struct conn *c)
{
	resp_status(c, 200);
	resp_header(c, resp_allow, resp_allow_len);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
}

static void
handle_redirect(struct conn *c, int status, const char *url, size_t len)
{
	char hdr[sizeof(rt.text) + 16];
	int n;

	n = snprintf(hdr, sizeof(hdr), "Location: %.*s\r\n", (int)len, url);
	if (n < 0 || (size_t)n >= sizeof(hdr)) {
		resp_error(c, 500);
		return;
	}
	resp_error_hdr(c, status, hdr, (size_t)n);
}

static void
handle_text(struct conn *c)
{
	resp_status(c, rt.status);
	resp_header(c, "Content-Type: text/plain\r\n", 26);
	resp_end_headers(c, (int64_t)rt.textlen);
	if (!resp_is_head(c))
		resp_body_copy(c, rt.text, rt.textlen);
	resp_done(c, rt.status, resp_is_head(c) ? 0 : rt.textlen);
}

/* "/.git/config" and "/.env" are not served; "/.well-known/" is. */
static bool
dotfile(const char *uri, size_t len)
{
	const char *p = uri, *end = uri + len;

	for (; p < end; p++) {
		if (*p != '/' || p + 1 >= end || p[1] != '.')
			continue;
		if (p == uri && len >= 13 && strncmp(p, "/.well-known/", 13) ==
		    0)
			continue;
		return true;
	}
	return false;
}

/* Files under an alias: the path below it is made apart. */
static void
handle_alias(struct conn *c, const struct config_location *l)
{
	char rel[PATH_MAX];
	ssize_t n;

	n = map_path(c, l, rt.uri, rt.urilen, rel, sizeof(rel));
	if (n < 0) {
		resp_error(c, 414);
		return;
	}
	static_serve(c, l, rt.uri, rt.urilen, rel, (size_t)n, 0);
}

static void
handle_files(struct conn *c)
{
	const struct config_location *l = c->loc;
	const struct http_request *r = &c->rq->req;

	switch (r->method) {
	case HTTP_M_GET:
	case HTTP_M_HEAD:
		break;
	case HTTP_M_OPTIONS:
		handle_options(c);
		return;
	case HTTP_M_UNKNOWN:
		log_info("client %s: unknown method \"%.*s\"", c->peer,
		    (int)r->method_name.len, r->method_name.p);
		resp_error(c, 501);
		return;
	default:
		resp_error(c, 405);
		return;
	}
	if (!l->dotfiles && !rt.plain && dotfile(rt.uri, rt.urilen)) {
		log_info("client %s: \"%s\" is a dotfile: forbidden", c->peer,
		    rt.uri);
		resp_error(c, 403);
		return;
	}
	/* Under a root, the path below it is $uri itself (map_path()). */
	if (l->alias)
		handle_alias(c, l);
	else
		static_serve(c, l, rt.uri, rt.urilen, rt.uri, rt.urilen, 0);
}

void
request_handle(struct conn *c)
{
	switch (rt.kind) {
	case K_OPTIONS:
		handle_options(c);
		break;
	case K_ERROR:
		resp_error(c, rt.status);
		break;
	case K_REDIRECT:
		handle_redirect(c, rt.status, rt.text, rt.textlen);
		break;
	case K_TEXT:
		handle_text(c);
		break;
	case K_FILES:
		handle_files(c);
		break;
	}
}

/* error_page ------------------------------------------------------------ */

/*
 * error_page's "@app": a location that proxies (or runs FastCGI) takes a
 * request that has no body, as it is; one of files serves the request's
 * URI from its folder.
 */
static bool
error_to_named(struct conn *c, const struct config_server *s,
    const struct config_error_page *ep, int status)
{
	const struct config_location *pl;
	const struct http_request *r = &c->rq->req;
	char rel[PATH_MAX];
	ssize_t n;

	if ((pl = named_location(s, ep->uri, strlen(ep->uri))) == NULL ||
	    pl->status || pl->memcached_local)
		return false;
	if (pl->upstream >= 0) {
		if (c->rq->px != NULL || r->content_length > 0 || r->chunked ||
		    (r->method != HTTP_M_GET && r->method != HTTP_M_HEAD))
			return false;
		c->loc = pl;
		return proxy_start(c, pl, &c->rq->px) >= 0;
	}
	n = map_path(c, pl, rt.uri, rt.urilen, rel, sizeof(rel));
	if (n < 0 || static_probe(pl, rel, (size_t)n) != 1)
		return false;
	c->loc = pl;
	static_serve(c, pl, rt.uri, rt.urilen, rel, (size_t)n,
	    ep->answer > 0 ? ep->answer : ep->answer < 0 ? 0 : status);
	return true;
}

bool
request_error_page(struct conn *c, int status)
{
	const struct config_location *l = c->loc, *pl;
	const struct config_error_page *ep = NULL;
	const struct config_server *s;
	char rel[PATH_MAX];
	ssize_t n;
	size_t i;

	if (l == NULL || c->in_error_page || c->srv >= worker.cf->nservers)
		return false;
	for (i = 0; i < l->nerror_pages && ep == NULL; i++)
		if (l->error_pages[i].status == status)
			ep = &l->error_pages[i];
	if (ep == NULL)
		return false;
	c->in_error_page = true;
	if (is_absolute(ep->uri)) {
		handle_redirect(c, 302, ep->uri, strlen(ep->uri));
		return true;
	}
	s = &worker.cf->servers[c->srv];
	if (ep->uri[0] == '@')
		return error_to_named(c, s, ep, status);
	/* Served from the files of the page's own location. */
	if (!set_uri(ep->uri, strlen(ep->uri)))
		return false;
	rt.ncap = 0;
	pl = find_location(s, rt.uri, rt.urilen);
	if (pl->upstream >= 0)
		return false;
	n = map_path(c, pl, rt.uri, rt.urilen, rel, sizeof(rel));
	if (n < 0 || static_probe(pl, rel, (size_t)n) != 1)
		return false;
	c->loc = pl;
	static_serve(c, pl, rt.uri, rt.urilen, rel, (size_t)n,
	    ep->answer ? ep->answer : status);
	return true;
}

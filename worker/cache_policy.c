/*
 * RFC 9111 for a shared cache, as pure functions: see cache_policy.h.
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "master/config.h"
#include "worker/cache_policy.h"
#include "worker/http_lex.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

static int64_t
sat(int64_t v)
{
	return v < 0 ? 0 : v > HTTP_DELTA_MAX ? HTTP_DELTA_MAX : v;
}

static int64_t
max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Statuses ------------------------------------------------------------- */

bool
cp_status_heuristic(int status)
{
	static const int ok[] = {
		200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501
	};
	size_t i;

	for (i = 0; i < nitems(ok); i++)
		if (ok[i] == status)
			return true;
	return false;
}

bool
cp_status_understood(int status)
{
	/* The final statuses of RFC 9110 whose caching rules corral keeps. */
	if (status >= 200 && status <= 206)
		return true;
	if ((status >= 300 && status <= 305) || status == 307 ||
	    status == 308)
		return true;
	if ((status >= 400 && status <= 417) || status == 421 ||
	    status == 422 || status == 426)
		return true;
	return status >= 500 && status <= 505;
}

/* Age and freshness ------------------------------------------------------ */

int64_t
cp_age_value(struct span v)
{
	const char *p, *end;
	int64_t n = 0;

	if (v.p == NULL)
		return -1;
	p = http_skip_ows(v.p, v.p + v.len);
	for (end = p; end < v.p + v.len && *end != ','; end++)
		;
	while (end > p && IS(end[-1], C_WS))
		end--;
	if (p == end)
		return -1;
	for (; p < end; p++) {
		if (!IS(*p, C_DIGIT))
			return -1;
		if (n < HTTP_DELTA_MAX)
			n = n * 10 + (*p - '0');
	}
	return n > HTTP_DELTA_MAX ? HTTP_DELTA_MAX : n;
}

int64_t
cp_initial_age(int64_t age_value, int64_t date, const struct cp_times *t)
{
	int64_t apparent = sat(t->response - date);
	int64_t delay = sat(t->response - t->request);

	return sat(max64(apparent, sat(age_value) + delay));
}

int64_t
cp_age(const struct cp_fresh *f, int64_t now)
{
	return sat(now - f->born);
}

int64_t
cp_heuristic(int64_t date, int64_t last_modified, int64_t max)
{
	int64_t h;

	if (last_modified < 0 || last_modified >= date)
		return 0;
	h = (date - last_modified) / 10;
	return h > max ? max : h;
}

bool
cp_is_fresh(const struct cp_fresh *f, const struct http_cache_control *rq,
    int64_t now)
{
	int64_t age = cp_age(f, now), life = f->lifetime;

	if (f->flags & CP_F_NO_CACHE)
		return false;
	if (rq != NULL) {
		if (rq->no_cache || (rq->max_age >= 0 && age > rq->max_age))
			return false;
		if (rq->min_fresh >= 0)
			life -= rq->min_fresh;
	}
	return age < life;
}

int64_t
cp_stale_window(const struct cp_fresh *f,
    const struct http_cache_control *rq, enum cp_stale why, int64_t config)
{
	int64_t w;

	if (f->flags & (CP_F_REVALIDATE | CP_F_NO_CACHE))
		return -1;
	w = why == CP_STALE_REVALIDATING ? f->swr : f->sie;
	if (rq != NULL) {
		w = max64(w, rq->max_stale);
		if (why == CP_STALE_ERROR)
			w = max64(w, rq->stale_if_error);
	}
	return max64(w, config);
}

bool
cp_stale_ok(const struct cp_fresh *f, const struct http_cache_control *rq,
    enum cp_stale why, int64_t config, int64_t now)
{
	int64_t w = cp_stale_window(f, rq, why, config);

	return w >= 0 && cp_age(f, now) - f->lifetime < w;
}

/* Storing ---------------------------------------------------------------- */

bool
cp_response_cc(const struct cp_conf *conf, const struct http_response *r,
    struct http_cache_control *cc)
{
	if (conf->cdn_control &&
	    (http_response_directives(r, "cdn-cache-control", cc) ||
	    http_response_directives(r, "surrogate-control", cc)))
		return true;
	http_response_cache_control(r, cc);
	return false;
}

/*
 * A response's date, read robustly as RFC 9110 5.6.7 encourages: names of
 * days and months and "GMT" in any case (nginx, ATS and the browsers do),
 * which the strict parser shared with If-Modified-Since refuses.
 */
static int64_t
date_of(struct span v)
{
	char buf[64];
	size_t i, run = 0;
	time_t t;

	if (v.p == NULL)
		return -1;
	if ((t = http_date_parse(v.p, v.len)) != (time_t)-1)
		return (int64_t)t;
	if (v.len >= sizeof(buf))
		return -1;
	for (i = 0; i <= v.len; i++) {
		unsigned char ch = i < v.len ? (unsigned char)v.p[i] : ' ';

		if (http_lower(ch) >= 'a' && http_lower(ch) <= 'z') {
			buf[i] = (char)(run == 0 ? http_lower(ch) - 0x20 :
			    http_lower(ch));
			run++;
			continue;
		}
		if (run == 3 && http_ieq(buf + i - 3, "gmt", 3))
			memcpy(buf + i - 3, "GMT", 3);
		run = 0;
		if (i < v.len)
			buf[i] = (char)ch;
	}
	t = http_date_parse(buf, v.len);
	return t == (time_t)-1 ? -1 : (int64_t)t;
}

static bool
vary_star(const struct http_response *r)
{
	struct span v, e;
	const char *p;
	size_t i = 0;

	while ((v = http_response_header(r, "vary", &i)).p != NULL)
		for (p = v.p; http_list_next(&p, v.p + v.len, &e);)
			if (e.len == 1 && *e.p == '*')
				return true;
	return false;
}

/*
 * The lifetime an operator set for responses silent on freshness; -1:
 * none, -2: such responses are kept out (a cache_valid of 0).
 */
static int64_t
configured(const struct cp_conf *conf, int status, enum cp_source *src)
{
	int64_t any = -1;
	size_t i;

	for (i = 0; i < conf->nvalid; i++) {
		if (conf->valid[i].status == status) {
			*src = CP_SRC_VALID;
			return conf->valid[i].ttl > 0 ? conf->valid[i].ttl : -2;
		}
		if (conf->valid[i].status == CONFIG_VALID_ANY && any < 0)
			any = conf->valid[i].ttl;
	}
	if (any >= 0) {
		*src = CP_SRC_VALID;
		return any > 0 ? any : -2;
	}
	if (conf->default_ttl > 0 && cp_status_heuristic(status)) {
		*src = CP_SRC_TTL;
		return conf->default_ttl;
	}
	return -1;
}

/* The freshness lifetime, explicit first (RFC 9111 4.2.1); -1: none. */
static int64_t
lifetime(const struct cp_conf *conf, const struct http_response *r,
    const struct http_cache_control *cc, bool targeted, int64_t date,
    struct cp_fresh *f)
{
	int64_t exp, lm, life;

	f->source = CP_SRC_EXPLICIT;
	if (cc->s_maxage >= 0) {
		/* s-maxage implies proxy-revalidate (RFC 9111 5.2.2.10). */
		f->flags |= CP_F_REVALIDATE;
		return cc->s_maxage;
	}
	if (cc->max_age >= 0)
		return cc->max_age;
	if (!targeted && r->expires.p != NULL) {
		/* An invalid Expires is a time in the past (5.3). */
		exp = date_of(r->expires);
		return exp < 0 || exp <= date ? 0 : exp - date;
	}
	if ((life = configured(conf, r->status, &f->source)) >= 0)
		return life;
	if (life == -2) {
		f->source = CP_SRC_NONE;
		return -1;
	}
	lm = date_of(r->last_modified);
	if (lm >= 0 && (cp_status_heuristic(r->status) || cc->public_)) {
		f->source = CP_SRC_HEURISTIC;
		return cp_heuristic(date, lm, conf->heuristic_max);
	}
	f->source = CP_SRC_NONE;
	return -1;
}

/* What may not be stored: *why set, CP_PASS when pass allows it. */
static enum cp_verdict
refuse(const char **why, const char *reason, bool pass)
{
	*why = reason;
	return pass ? CP_PASS : CP_SKIP;
}

/* Refusals by the request, the status and the directives; CP_STORE: none. */
static enum cp_verdict
forbidden(const struct cp_req *rq, const struct http_response *r,
    const struct http_cache_control *cc, const char **why)
{
	/* Alike for every client: a 2xx or 3xx to a request with nothing
	 * personal, so no client can make a key pass for the others. */
	bool pass = r->status >= 200 && r->status < 400 &&
	    !rq->authorization && !rq->cookie;

	if (rq->method != HTTP_M_GET && rq->method != HTTP_M_HEAD)
		return refuse(why, "method", false);
	if (r->status < 200 || r->status > 599 || r->status == 206 ||
	    r->status == 304)
		return refuse(why, "status", false);
	if (rq->cc.no_store)
		return refuse(why, "request no-store", false);
	if (cc->must_understand && !cp_status_understood(r->status))
		return refuse(why, "must-understand, unknown status", false);
	/* must-understand on a known status overrides no-store (5.2.2.3). */
	if (cc->no_store && !cc->must_understand)
		return refuse(why, "no-store", pass);
	if (cc->private_)
		return refuse(why, "private", pass);
	if (r->set_cookie.p != NULL)
		return refuse(why, "Set-Cookie", pass);
	if (vary_star(r))
		return refuse(why, "Vary: *", pass);
	/* Credentials (RFC 9111 3.5), and cookies likewise: only what the
	 * response allows shared caches. */
	if (rq->authorization && !cc->public_ && cc->s_maxage < 0 &&
	    !cc->must_revalidate)
		return refuse(why, "Authorization", false);
	if (rq->cookie && !cc->public_ && cc->s_maxage < 0)
		return refuse(why, "Cookie", false);
	return CP_STORE;
}

enum cp_verdict
cp_judge(const struct cp_conf *conf, const struct cp_req *rq,
    const struct http_response *r, const struct cp_times *t,
    struct cp_fresh *f, const char **why)
{
	struct http_cache_control cc;
	enum cp_verdict v;
	bool targeted;
	int64_t life;

	memset(f, 0, sizeof(*f));
	f->swr = f->sie = -1;
	*why = NULL;
	targeted = cp_response_cc(conf, r, &cc);
	if ((v = forbidden(rq, r, &cc, why)) != CP_STORE)
		return v;
	/* No Date: the time it came (RFC 9110 6.6.1). */
	if ((f->date = date_of(r->date)) < 0)
		f->date = t->response;
	f->born = t->response - cp_initial_age(cp_age_value(r->age), f->date,
	    t);
	life = lifetime(conf, r, &cc, targeted, f->date, f);
	/* no-cache needs no lifetime: each use is validated (5.2.2.4). */
	if (life < 0 && (cc.no_cache || cc.has_no_cache_fields) &&
	    (r->etag.p != NULL || r->last_modified.p != NULL))
		life = 0;
	if (life < 0)
		return refuse(why, "no freshness", false);
	f->lifetime = sat(life);
	if (cc.no_cache || cc.has_no_cache_fields)
		f->flags |= CP_F_NO_CACHE;
	if (cc.must_revalidate || cc.proxy_revalidate)
		f->flags |= CP_F_REVALIDATE;
	f->swr = cc.stale_while_revalidate;
	f->sie = cc.stale_if_error;
	/* Stale at once, and nothing to revalidate it by or to serve it for. */
	if ((f->lifetime == 0 || (f->flags & CP_F_NO_CACHE)) &&
	    r->etag.p == NULL && r->last_modified.p == NULL &&
	    f->swr <= 0 && f->sie <= 0)
		return refuse(why, "stale at once, no validator", false);
	return CP_STORE;
}

/* Vary ------------------------------------------------------------------- */

#define CODINGS_MAX	16
#define CODING_LEN	32

struct coding {
	char name[CODING_LEN + 2];	/* '-' when refused, the name, NUL */
};

/* A q=0 parameter among params: the coding is refused (RFC 9110 12.4.2). */
static bool
q_zero(const char *p, const char *end)
{
	const char *q;
	int k;

	while ((p = memchr(p, ';', (size_t)(end - p))) != NULL) {
		p = http_skip_ows(p + 1, end);
		if (end - p < 2 || (*p != 'q' && *p != 'Q') || p[1] != '=')
			continue;
		q = p + 2;
		if (q == end || *q++ != '0')
			return false;
		if (q < end && *q == '.')
			for (q++, k = 0; q < end && *q == '0' && k < 3; q++)
				k++;
		q = http_skip_ows(q, end);
		return q == end || *q == ';';
	}
	return false;
}

static int
coding_cmp(const void *a, const void *b)
{
	return strcmp(((const struct coding *)a)->name,
	    ((const struct coding *)b)->name);
}

/* One Accept-Encoding member into c; false when it cannot be keyed. */
static bool
coding_of(struct span e, struct coding *c)
{
	size_t n = http_token_len(e), i, o = 0;
	const char *params = e.p + n;

	if (n == 0 || n > CODING_LEN)
		return false;
	if (q_zero(params, e.p + e.len))
		c->name[o++] = '-';
	i = 0;
	if (n > 2 && http_ieq(e.p, "x-", 2) && (n == 6 || n == 10) &&
	    (http_ieq(e.p + 2, "gzip", 4) || http_ieq(e.p + 2, "compress",
	    8)))
		i = 2;			/* x-gzip is gzip (RFC 9110 8.4.1) */
	for (; i < n; i++)
		c->name[o++] = (char)http_lower((unsigned char)e.p[i]);
	c->name[o] = '\0';
	return true;
}

static ssize_t
put(char *out, size_t size, size_t o, const char *p, size_t n)
{
	if (o + n > size)
		return -1;
	memcpy(out + o, p, n);
	return (ssize_t)(o + n);
}

static ssize_t
accept_encoding(const struct span *lines, size_t n, char *out, size_t size)
{
	struct coding c[CODINGS_MAX];
	struct span e;
	const char *p;
	size_t i, k = 0;
	ssize_t o = 0;

	for (i = 0; i < n; i++)
		for (p = lines[i].p; http_list_next(&p, lines[i].p +
		    lines[i].len, &e);)
			if (k == CODINGS_MAX || !coding_of(e, &c[k++]))
				return -2;
	qsort(c, k, sizeof(c[0]), coding_cmp);
	for (i = 0; i < k && o >= 0; i++) {
		if (i > 0 && strcmp(c[i].name, c[i - 1].name) == 0)
			continue;
		if (o > 0)
			o = put(out, size, (size_t)o, ",", 1);
		if (o >= 0)
			o = put(out, size, (size_t)o, c[i].name,
			    strlen(c[i].name));
	}
	return o;
}

/* One Accept-Language member: its range in lower case and its weight. */
struct lang {
	char name[CODING_LEN + 1];
	int q;				/* 0..1000 */
};

/* The weight among params (RFC 9110 12.4.2); -1 when malformed. */
static int
weight(const char *p, const char *end)
{
	int q = 1000, k, scale = 100;

	p = http_skip_ows(p, end);
	if (p == end)
		return q;
	if (*p++ != ';')
		return -1;
	p = http_skip_ows(p, end);
	if (end - p < 3 || (*p != 'q' && *p != 'Q') || p[1] != '=' ||
	    (p[2] != '0' && p[2] != '1'))
		return -1;
	q = (p[2] - '0') * 1000;
	p += 3;
	if (p < end && *p == '.')
		for (p++, k = 0; p < end && k < 3 && IS(*p, C_DIGIT); p++, k++) {
			q += (*p - '0') * scale;
			scale /= 10;
		}
	p = http_skip_ows(p, end);
	return p == end && q <= 1000 ? q : -1;
}

static int
lang_cmp(const void *a, const void *b)
{
	const struct lang *x = a, *y = b;

	if (x->q != y->q)
		return y->q - x->q;
	return strcmp(x->name, y->name);
}

/*
 * Accept-Language as its set of weighted ranges: the order of ranges of
 * one weight, their case and the whitespace do not change what the
 * origin selects (RFC 9110 12.5.4; BCP 47 tags are case-insensitive).
 */
static ssize_t
accept_language(const struct span *lines, size_t n, char *out, size_t size)
{
	struct lang l[CODINGS_MAX];
	struct span e;
	const char *p;
	size_t i, j, k = 0, len;
	ssize_t o = 0;
	char q[8];

	for (i = 0; i < n; i++)
		for (p = lines[i].p; http_list_next(&p, lines[i].p +
		    lines[i].len, &e);) {
			for (len = 0; len < e.len && (IS(e.p[len], C_TCHAR) &&
			    e.p[len] != ';'); len++)
				;
			if (k == CODINGS_MAX || len == 0 || len > CODING_LEN ||
			    (l[k].q = weight(e.p + len, e.p + e.len)) < 0)
				return -2;
			for (j = 0; j < len; j++)
				l[k].name[j] = (char)http_lower(
				    (unsigned char)e.p[j]);
			l[k++].name[len] = '\0';
		}
	qsort(l, k, sizeof(l[0]), lang_cmp);
	for (i = 0; i < k && o >= 0; i++) {
		if (i > 0 && lang_cmp(&l[i], &l[i - 1]) == 0)
			continue;
		if (o > 0)
			o = put(out, size, (size_t)o, ",", 1);
		if (o >= 0)
			o = put(out, size, (size_t)o, l[i].name,
			    strlen(l[i].name));
		if (o >= 0 && l[i].q != 1000)
			o = put(out, size, (size_t)o, q, (size_t)snprintf(q,
			    sizeof(q), ";q=%d", l[i].q));
	}
	return o;
}

/* Every member of every line, joined by ",": a list without its OWS. */
static ssize_t
joined(const struct span *lines, size_t n, char *out, size_t size)
{
	struct span e;
	const char *p;
	ssize_t o = 0;
	size_t i;
	bool first = true;

	for (i = 0; i < n; i++) {
		for (p = lines[i].p; o >= 0 && http_list_next(&p,
		    lines[i].p + lines[i].len, &e); first = false) {
			if (!first)
				o = put(out, size, (size_t)o, ",", 1);
			if (o >= 0)
				o = put(out, size, (size_t)o, e.p, e.len);
		}
	}
	return o;
}

ssize_t
cp_vary_value(struct span name, const struct span *lines, size_t n,
    char *out, size_t size)
{
	ssize_t o;

	if (n == 0)
		return put(out, size, 0, "\x01", 1);
	if (http_span_ieq(name, "accept-encoding") &&
	    (o = accept_encoding(lines, n, out, size)) != -2)
		return o;
	if (http_span_ieq(name, "accept-language") &&
	    (o = accept_language(lines, n, out, size)) != -2)
		return o;
	/* Too many or unkeyable members: the field as sent, apart. */
	return joined(lines, n, out, size);
}

/* Freshening -------------------------------------------------------------- */

static bool
never_updated(const struct http_response *r, struct span name,
    const char *const *skip)
{
	static const char *const fixed[] = {
		"content-length", "transfer-encoding", "content-encoding",
		"content-range", "set-cookie", NULL
	};
	const char *const *s;

	if (http_hop_by_hop(r->headers, r->nheaders, name))
		return true;
	for (s = fixed; *s != NULL; s++)
		if (http_span_ieq(name, *s))
			return true;
	for (s = skip; s != NULL && *s != NULL; s++)
		if (http_span_ieq(name, *s))
			return true;
	return false;
}

static bool
in_response(const struct http_response *r, struct span name,
    const char *const *skip)
{
	size_t i;

	for (i = 0; i < r->nheaders; i++)
		if (r->headers[i].name.len == name.len &&
		    strncasecmp(r->headers[i].name.p, name.p, name.len) == 0)
			return !never_updated(r, name, skip);
	return false;
}

size_t
cp_freshen_size(size_t len, const struct http_response *r)
{
	size_t i, n = len;

	for (i = 0; i < r->nheaders; i++)
		n += r->headers[i].name.len + r->headers[i].value.len + 4;
	return n;
}

size_t
cp_freshen(const char *lines, size_t len, const struct http_response *r,
    const char *const *skip, char *out)
{
	const char *p = lines, *end = lines + len, *nl, *colon;
	const struct http_header *h;
	struct span name;
	size_t o = 0;

	for (; p < end; p = nl) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		colon = memchr(p, ':', (size_t)(nl - p));
		if (colon != NULL) {
			name.p = p;
			name.len = (size_t)(colon - p);
			if (in_response(r, name, skip))
				continue;
		}
		memcpy(out + o, p, (size_t)(nl - p));
		o += (size_t)(nl - p);
	}
	for (h = r->headers; h < r->headers + r->nheaders; h++) {
		if (never_updated(r, h->name, skip))
			continue;
		memcpy(out + o, h->name.p, h->name.len);
		o += h->name.len;
		memcpy(out + o, ": ", 2);
		memcpy(out + o + 2, h->value.p, h->value.len);
		o += 2 + h->value.len;
		memcpy(out + o, "\r\n", 2);
		o += 2;
	}
	return o;
}

/* Entity tags ------------------------------------------------------------- */

/* The opaque-tag of a well-formed entity-tag, W/ dropped; false if not. */
static bool
opaque(const char *p, size_t n, struct span *o)
{
	size_t i;

	if (n >= 2 && p[0] == 'W' && p[1] == '/') {
		p += 2;
		n -= 2;
	}
	if (n < 2 || p[0] != '"' || p[n - 1] != '"')
		return false;
	for (i = 1; i < n - 1; i++)
		if (p[i] == '"' || (unsigned char)p[i] < 0x21 ||
		    p[i] == 0x7f)
			return false;
	o->p = p;
	o->len = n;
	return true;
}

bool
cp_etag_match(struct span inm, const char *etag, size_t len)
{
	const char *p = inm.p, *end = inm.p + inm.len, *s, *t;
	struct span mine, theirs;
	bool quoted, ok = opaque(etag, len, &mine);

	if (inm.p == NULL)
		return false;
	while (p < end) {
		while (p < end && (*p == ',' || IS(*p, C_WS)))
			p++;
		/* A member ends at a comma outside quotes. */
		for (s = p, quoted = false; p < end && (quoted || *p != ',');
		    p++)
			if (*p == '"')
				quoted = !quoted;
		for (t = p; t > s && IS(t[-1], C_WS); t--)
			;
		if (t == s)
			continue;
		if ((t - s == 1 && *s == '*') ||
		    ((size_t)(t - s) == len && memcmp(s, etag, len) == 0))
			return true;
		if (ok && opaque(s, (size_t)(t - s), &theirs) &&
		    theirs.len == mine.len &&
		    memcmp(theirs.p, mine.p, mine.len) == 0)
			return true;
	}
	return false;
}

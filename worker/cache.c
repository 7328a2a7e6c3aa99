/*
 * The cache: keys, objects, lookups with the stampede lock, PURGE and
 * invalidation.  What RFC 9111 decides is in cache_policy.c (pure
 * functions); storing proxied responses is in cache_store.c, answers from
 * stored objects in cache_answer.c, the gzip copies in cache_gzip.c.
 *
 * Objects stay in the store past their freshness (cache_grace, or their
 * stale windows when longer), which the object header tracks, so a stale
 * copy can be revalidated or served when the upstream fails.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/cache_impl.h"
#include "worker/conn.h"
#include "worker/http_field.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"
#include "worker/resp.h"
#include "worker/status.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

const struct cache_ns_info cache_ns_table[] = {
#define CACHE_NS_ROW(name, ch, what)	{ #name, ch, what },
	CACHE_NAMESPACES(CACHE_NS_ROW)
#undef CACHE_NS_ROW
};
const size_t cache_ns_count = nitems(cache_ns_table);

static struct cache_req *free_cr;

/* Objects ------------------------------------------------------------ */

size_t
cache_key(char *key, enum cache_ns ns, const void *a, size_t alen,
    const void *b, size_t blen)
{
	/* Written so that no sum can wrap. */
	if (alen >= STORE_KEY_MAX || blen >= STORE_KEY_MAX - alen)
		return 0;
	key[0] = (char)ns;
	if (alen > 0)
		memcpy(key + 1, a, alen);
	if (blen > 0)
		memcpy(key + 1 + alen, b, blen);
	return 1 + alen + blen;
}

/*
 * Reads the header of a pinned value; false when it is not ours, or of an
 * older layout (a persisted store of an older corral): a miss.
 */
bool
cobj_read(const struct store_ref *ref, struct cache_obj *co)
{
	if (ref->len < sizeof(*co))
		return false;
	memcpy(co, ref->data, sizeof(*co));
	return co->magic == CO_MAGIC &&
	    ref->len == sizeof(*co) + co->etag_len + co->hlen + co->blen;
}

void
cobj_init(struct cache_obj *co, uint16_t kind, uint64_t blen)
{
	memset(co, 0, sizeof(*co));
	co->magic = CO_MAGIC;
	co->kind = kind;
	co->status = 200;
	co->lifetime = CO_FOREVER;
	co->swr = co->sie = -1;
	co->mtime = -1;
	co->blen = blen;
}

/* The freshness of a stored response, as the policy reads it. */
void
cobj_fresh(const struct cache_obj *co, struct cp_fresh *f)
{
	memset(f, 0, sizeof(*f));
	f->date = co->date;
	f->born = co->born;
	f->lifetime = co->lifetime;
	f->swr = co->swr;
	f->sie = co->sie;
	f->flags = co->cpflags;
}

void
cobj_set_fresh(struct cache_obj *co, const struct cp_fresh *f)
{
	co->date = f->date;
	co->born = f->born;
	co->lifetime = f->lifetime;
	co->swr = f->swr;
	co->sie = f->sie;
	co->cpflags = f->flags;
}

enum store_result
cache_body_reserve(struct store *s, const void *key, size_t klen,
    size_t len, struct store_wref *w, char **body)
{
	struct cache_obj co;
	enum store_result sr;

	sr = store_reserve(s, key, klen, sizeof(co) + len, 0, 0, w);
	if (sr != STORE_OK)
		return sr;
	cobj_init(&co, CO_RESP, len);
	memcpy(w->data, &co, sizeof(co));
	*body = (char *)w->data + sizeof(co);
	return STORE_OK;
}

uint64_t
cache_body_max(uint64_t max_object)
{
	return max_object > sizeof(struct cache_obj) ?
	    max_object - sizeof(struct cache_obj) : 0;
}

enum store_result
cache_body_set(struct store *s, const void *key, size_t klen,
    const void *body, size_t len)
{
	struct store_wref w;
	enum store_result sr;
	char *at;

	if ((sr = cache_body_reserve(s, key, klen, len, &w, &at)) != STORE_OK)
		return sr;
	memcpy(at, body, len);
	return store_commit(s, &w);
}

enum store_result
cache_nothing_set(struct store *s, const void *key, size_t klen)
{
	struct cache_obj co;

	cobj_init(&co, CO_PASS, 0);
	return store_set(s, key, klen, &co, sizeof(co), 0, 0);
}

int
cache_body_of(const struct store_ref *ref, size_t *off, size_t *len)
{
	struct cache_obj co;

	if (!cobj_read(ref, &co))
		return -1;
	if (co.kind != CO_RESP)
		return 0;
	*off = sizeof(co) + co.etag_len + co.hlen;
	*len = (size_t)co.blen;
	return 1;
}

/* The key of a response's gzip copy: 'Z', then its own; 0: too long. */
size_t
zkey_of(const char *key, size_t klen, char *z)
{
	return cache_key(z, CACHE_NS_GZIP_COPY, key, klen, NULL, 0);
}

/* The same for its brotli copy, 'Q'. */
size_t
qkey_of(const char *key, size_t klen, char *q)
{
	return cache_key(q, CACHE_NS_BR_COPY, key, klen, NULL, 0);
}

/* Keys of proxied responses ------------------------------------------- */

static void
key_add(char *key, size_t *len, const void *p, size_t n, bool *ok)
{
	if (!*ok || *len + n > STORE_KEY_MAX) {
		*ok = false;
		return;
	}
	memcpy(key + *len, p, n);
	*len += n;
}

/*
 * "P" authority NUL path NUL query, into key: the request as it goes
 * upstream (nginx keys on what it sends), so two requests that differ
 * there never share an entry, and one the origin sees one way is never
 * stored under another spelling.  The authority is the Host the upstream
 * gets, with its port, in lower case; the path is the client's bytes,
 * as the upstream gets them or as proxy_path maps them.
 */
static size_t
url_key_of(char *key, struct span host, struct span path, struct span query)
{
	size_t qlen = query.p != NULL ? query.len : 0, i, n;

	/* Written so that no sum can wrap. */
	if (host.len >= 256 || path.len > STORE_KEY_MAX ||
	    qlen > STORE_KEY_MAX || 3 + host.len + path.len + qlen >
	    STORE_KEY_MAX)
		return 0;
	key[0] = CACHE_NS_URL;
	for (i = 0; i < host.len; i++)
		key[1 + i] = (char)http_lower((unsigned char)host.p[i]);
	n = 1 + host.len;
	key[n++] = '\0';
	memcpy(key + n, path.p, path.len);
	n += path.len;
	key[n++] = '\0';
	if (qlen > 0)
		memcpy(key + n, query.p, qlen);
	return n + qlen;
}

/* The request's fields the cache reads, found in one pass. */
struct req_fields {
	struct span host;		/* the first Host */
	struct span ae;			/* the first Accept-Encoding */
	bool auth;			/* Authorization */
	bool cc;			/* Cache-Control */
};

static void
req_fields(const struct http_request *r, struct req_fields *f)
{
	const struct http_header *h, *end = r->headers + r->nheaders;

	memset(f, 0, sizeof(*f));
	for (h = r->headers; h < end; h++) {
		switch (h->name.len) {
		case 4:
			if (f->host.p == NULL && http_ieq(h->name.p, "host", 4))
				f->host = h->value;
			break;
		case 13:
			if (http_ieq(h->name.p, "authorization", 13))
				f->auth = true;
			else if (http_ieq(h->name.p, "cache-control", 13))
				f->cc = true;
			break;
		case 15:
			if (f->ae.p == NULL &&
			    http_ieq(h->name.p, "accept-encoding", 15))
				f->ae = h->value;
			break;
		}
	}
}

/* The authority the request names (http_request_authority()). */
static struct span
req_authority(const struct http_request *r, const struct req_fields *f)
{
	struct span host = r->absolute_form ? http_request_authority(r) :
	    f->host;

	return host.p != NULL ? host : r->host;
}

static bool
url_key(struct cache_req *cr, const struct http_request *r,
    const struct req_fields *f)
{
	cr->klen = url_key_of(cr->key, req_authority(r, f), r->path,
	    r->query);
	cr->okey = cr->key;
	cr->oklen = cr->klen;
	return cr->klen > 0;
}

#define VARY_LINES	16		/* lines of one field that can key */

/*
 * The variant key: "V" gen, the URL, then each field Vary names with the
 * request's value, as cp_vary_value() normalises all its lines.
 */
bool
variant_key(struct cache_req *cr, uint64_t gen, const char *names,
    size_t len)
{
	char g[24], name[64], val[STORE_KEY_MAX];
	const char *p = names, *end = names + len, *comma;
	struct span lines[VARY_LINES], nm;
	const struct http_header *h;
	size_t n = 0, nl, k;
	ssize_t vl;
	bool ok = true;

	if (cr->r == NULL)
		return false;
	snprintf(g, sizeof(g), "%c%016llx", CACHE_NS_VARIANT,
	    (unsigned long long)gen);
	key_add(cr->vkey, &n, g, strlen(g), &ok);
	key_add(cr->vkey, &n, cr->key + 1, cr->klen - 1, &ok);
	while (ok && p < end) {
		comma = memchr(p, ',', (size_t)(end - p));
		nl = (size_t)((comma ? comma : end) - p);
		if (nl == 0 || nl >= sizeof(name))
			return false;
		memcpy(name, p, nl);
		name[nl] = '\0';
		nm = (struct span){ name, nl };
		k = 0;
		for (h = cr->r->headers; h < cr->r->headers +
		    cr->r->nheaders; h++) {
			if (!http_span_ieq(h->name, name))
				continue;
			if (k == VARY_LINES)
				return false;
			lines[k++] = h->value;
		}
		if ((vl = cp_vary_value(nm, lines, k, val, sizeof(val))) < 0)
			return false;
		key_add(cr->vkey, &n, "\n", 1, &ok);
		key_add(cr->vkey, &n, name, nl, &ok);
		key_add(cr->vkey, &n, "=", 1, &ok);
		key_add(cr->vkey, &n, val, (size_t)vl, &ok);
		p += nl + 1;
	}
	cr->okey = cr->vkey;
	cr->oklen = n;
	return ok;
}

/* Lookups ------------------------------------------------------------ */

/* The response stored for the request, following a Vary spec. */
enum obj
obj_get(struct cache_req *cr, struct store_ref *ref, struct cache_obj *co)
{
	struct store *s = worker.store;
	bool ok;

	cr->okey = cr->key;
	cr->oklen = cr->klen;
	if (store_get(s, cr->key, cr->klen, ref) != STORE_HIT)
		return OBJ_NONE;
	if (!cobj_read(ref, co)) {
		store_release(s, ref);
		return OBJ_NONE;
	}
	if (co->kind == CO_VARY) {
		ok = variant_key(cr, co->gen, (const char *)ref->data +
		    sizeof(*co), co->hlen);
		store_release(s, ref);
		if (!ok)
			return OBJ_PASS;
		if (store_get(s, cr->okey, cr->oklen, ref) != STORE_HIT)
			return OBJ_NONE;
		if (!cobj_read(ref, co)) {
			store_release(s, ref);
			return OBJ_NONE;
		}
	}
	if (co->kind == CO_PASS || co->kind == CO_MISS) {
		store_release(s, ref);
		return co->kind == CO_PASS ? OBJ_PASS : OBJ_MISS;
	}
	if (co->kind != CO_RESP) {
		store_release(s, ref);
		return OBJ_NONE;
	}
	return OBJ_FOUND;
}

/* Drops a key's response and its compressed copies. */
static enum store_result
key_delete(const char *key, size_t klen)
{
	char z[STORE_KEY_MAX];
	size_t zlen = zkey_of(key, klen, z);

	if (zlen > 0)
		store_delete(worker.store, z, zlen);
	if ((zlen = qkey_of(key, klen, z)) > 0)
		store_delete(worker.store, z, zlen);
	return store_delete(worker.store, key, klen);
}

/* Drops the URL: its response, or its Vary spec and so every variant. */
enum store_result
obj_delete(struct cache_req *cr)
{
	return key_delete(cr->key, cr->klen);
}

/* Keeps the validators and freshness of a stale copy. */
static void
note_stale(struct cache_req *cr, const struct store_ref *ref,
    const struct cache_obj *co)
{
	cr->stale = true;
	cobj_fresh(co, &cr->sf);
	cr->etag_len = co->etag_len <= sizeof(cr->etag) ? co->etag_len : 0;
	memcpy(cr->etag, (const char *)ref->data + sizeof(*co),
	    cr->etag_len);
	cr->mtime = co->mtime;
}

/*
 * Whether the stale copy may be served: the response's own window for
 * why (stale-while-revalidate, stale-if-error), the request's, or the
 * location's cache_stale bit (within cache_grace), unless the response
 * forbids serving it stale (RFC 9111 4.2.4).
 */
bool
stale_ok(const struct cache_req *cr, enum cp_stale why, unsigned bit)
{
	int64_t config = (cr->loc->cache_stale & bit) ? HTTP_DELTA_MAX : -1;

	return cr->stale && cp_stale_ok(&cr->sf, &cr->rcc, why, config,
	    worker.now);
}

/* Serves the stale copy when there is one; false when there is none. */
bool
serve_stale(struct cache_req *cr, enum xc xc)
{
	struct store_ref ref;
	struct cache_obj co;

	if (obj_get(cr, &ref, &co) != OBJ_FOUND)
		return false;
	cache_answer(cr, &ref, &co, xc);
	return true;
}

void
lease_release(struct cache_req *cr)
{
	if (cr->lease) {
		cr->lease = false;
		store_lease_release(worker.store, cr->lkey, cr->lklen);
	}
}

/*
 * A client's max-stale (RFC 9111 5.2.1.2): it takes the stale copy as it
 * is, unless the response must be revalidated or the request asks more.
 */
static bool
max_stale_ok(const struct cache_req *cr, const struct cp_fresh *f)
{
	const struct http_cache_control *q = &cr->rcc;
	int64_t age = cp_age(f, worker.now);

	if (q->max_stale < 0 || q->no_cache ||
	    (f->flags & (CP_F_REVALIDATE | CP_F_NO_CACHE)) ||
	    (q->max_age >= 0 && age > q->max_age))
		return false;
	return age - f->lifetime <= q->max_stale;
}

/*
 * The stale copy goes to this client now and the fetch refreshes it for
 * the next ones, when the response's stale-while-revalidate (RFC 5861)
 * allows it.  (cache_stale "updating" serves the others while this one
 * waits, as nginx without proxy_cache_background_update.)
 */
static enum cache_verdict
refresh_behind(struct cache_req *cr)
{
	if (!cr->stale || cr->rcc.no_cache || !cp_stale_ok(&cr->sf, NULL,
	    CP_STALE_REVALIDATING, -1, worker.now) ||
	    !serve_stale(cr, XC_UPDATING))
		return CACHE_FETCH;
	cr->bg = true;
	return CACHE_REFRESH;
}

/* The fill's lock: a lease on the object's key with its own prefix. */
static enum cache_verdict
lock(struct cache_req *cr)
{
	struct store *s = worker.store;
	struct store_ref ref, lref;
	struct cache_obj co;
	enum store_result lr;
	uint64_t token;
	struct cp_fresh f;

	cr->lkey[0] = cr->okey[0] == CACHE_NS_URL ? CACHE_NS_URL_LEASE :
	    CACHE_NS_VARIANT_LEASE;
	memcpy(cr->lkey + 1, cr->okey + 1, cr->oklen - 1);
	cr->lklen = cr->oklen;
	lr = store_lookup(s, cr->lkey, cr->lklen, &lref);
	token = lref.wait_token;	/* a release empties the ref */
	if (lr == STORE_HIT || lr == STORE_STALE_LEASE ||
	    lr == STORE_STALE_WAIT)
		store_release(s, &lref);
	switch (lr) {
	case STORE_LEASE:
	case STORE_STALE_LEASE:
		cr->lease = true;
		/* The last filler may have finished in between. */
		if (obj_get(cr, &ref, &co) == OBJ_FOUND) {
			cobj_fresh(&co, &f);
			if (cp_is_fresh(&f, &cr->rcc, worker.now)) {
				lease_release(cr);
				cache_answer(cr, &ref, &co, XC_HIT);
				return CACHE_ANSWERED;
			}
			store_release(s, &ref);
		}
		return refresh_behind(cr);
	case STORE_WAIT:
	case STORE_STALE_WAIT:
		if (stale_ok(cr, CP_STALE_REVALIDATING, CACHE_STALE_UPDATING) &&
		    serve_stale(cr, XC_UPDATING))
			return CACHE_ANSWERED;
		/* The store's name for the key: the end of its lease wakes
		 * this worker with it (worker.c, wake_cb). */
		cr->token = token;
		return CACHE_WAIT;
	default:
		return CACHE_FETCH;	/* no lock to be had: fill anyway */
	}
}

/* only-if-cached and nothing to use (RFC 9111 5.2.1.7). */
static enum cache_verdict
not_cached(struct cache_req *cr)
{
	cr->role = CR_LOOKED;
	resp_error(cr->c, 504);
	return CACHE_ANSWERED;
}

enum cache_verdict
cache_lookup(struct cache_req *cr, bool lock_timed_out)
{
	struct store_ref ref;
	struct cache_obj co;
	struct cp_fresh f;
	enum cache_verdict v;
	enum obj o;

	cr->stale = cr->reval = false;
	o = obj_get(cr, &ref, &co);
	if (o == OBJ_PASS) {
		if (cr->rcc.only_if_cached)
			return not_cached(cr);
		cr->xc = XC_BYPASS;
		cr->role = CR_LOOKED;
		return CACHE_FETCH;
	}
	if (o == OBJ_FOUND) {
		cobj_fresh(&co, &f);
		if (cp_is_fresh(&f, &cr->rcc, worker.now)) {
			cache_answer(cr, &ref, &co, XC_HIT);
			return CACHE_ANSWERED;
		}
		if (max_stale_ok(cr, &f)) {
			/* What the client asked for, as it is. */
			cache_answer(cr, &ref, &co, XC_STALE);
			return CACHE_ANSWERED;
		}
		note_stale(cr, &ref, &co);
		store_release(worker.store, &ref);
	}
	if (cr->rcc.only_if_cached)
		return not_cached(cr);
	cr->xc = o == OBJ_FOUND ? XC_EXPIRED : XC_MISS;
	cr->reval = cr->stale && (cr->etag_len > 0 || cr->mtime >= 0);
	if (!cache_fills(cr))
		return CACHE_FETCH;
	/* Hit-for-miss, or no lock: each request fetches for itself. */
	if (o == OBJ_MISS || !cr->loc->cache_lock)
		return refresh_behind(cr);
	v = lock(cr);
	if (v == CACHE_WAIT && lock_timed_out) {
		/* Whoever holds the lease fills the entry. */
		cr->role = CR_LOOKED;
		return CACHE_FETCH;
	}
	return v;
}

uint64_t
cache_wait_token(const struct cache_req *cr)
{
	return cr->token;
}

/* PURGE and invalidation ---------------------------------------------- */

static bool
purge_allowed(const struct cache_req *cr)
{
	const struct config_location *l = cr->loc;
	const char *peer = conn_peer(cr->c);
	size_t i;

	for (i = 0; i < l->npurge_allow; i++)
		if (strcmp(l->purge_allow[i], peer) == 0)
			return true;
	return false;
}

/* What a purge by prefix drops: the URL keys under "host NUL prefix". */
struct prefix {
	const char *p;			/* host NUL path prefix */
	size_t len;
};

/*
 * P keys, V keys (their URL after the generation) and the gzip (Z) and
 * brotli (Q) copies of both.  Runs under a stripe lock of the store.
 */
static bool
prefix_match(const void *key, size_t klen, void *arg)
{
	const struct prefix *pf = arg;
	const char *k = key;
	size_t skip;

	if (klen > 0 && (k[0] == CACHE_NS_GZIP_COPY ||
	    k[0] == CACHE_NS_BR_COPY)) {
		k++;
		klen--;
	}
	if (klen == 0)
		return false;
	skip = k[0] == CACHE_NS_URL ? 1 : k[0] == CACHE_NS_VARIANT ? 17 : 0;
	return skip > 0 && klen >= skip + pf->len &&
	    memcmp(k + skip, pf->p, pf->len) == 0;
}

/*
 * A PURGE whose path ends in a star ("/img/" then "*"): every stored
 * response of the host whose path starts with /img/, with its variants
 * and gzip and brotli copies (the convention of ngx_cache_purge).  The store is
 * scanned once, so this is for rare administrative purges, not for every
 * request.  memcached cannot delete by prefix: with an l2 cluster the
 * purge is refused, as the next miss would bring the old copies back.
 */
static void
purge_prefix(struct cache_req *cr, const struct http_request *r)
{
	struct conn *c = cr->c;
	struct span host = http_request_authority(r);
	struct span path = { r->path.p, r->path.len - 1 };
	struct prefix pf;
	char body[64];
	size_t n;
	int len;

	if (worker.cf->cache.l2 >= 0) {
		log_warn("client %s: PURGE %.*s: a purge by prefix cannot "
		    "reach the cache's l2 memcached cluster; refused",
		    conn_peer(c), (int)r->path.len, r->path.p);
		resp_error(c, 501);
		return;
	}
	if (host.p == NULL)
		host = r->host;
	if ((cr->klen = url_key_of(cr->key, host, path,
	    (struct span){ NULL, 0 })) == 0) {
		resp_error(c, 414);
		return;
	}
	/* host NUL prefix: the key without its namespace and last NUL. */
	pf.p = cr->key + 1;
	pf.len = cr->klen - 2;
	n = store_delete_matching(worker.store, prefix_match, &pf);
	log_info("client %s: PURGE %.*s: %zu objects", conn_peer(c),
	    (int)r->path.len, r->path.p, n);
	if (n == 0) {
		resp_error(c, 404);
		return;
	}
	len = snprintf(body, sizeof(body), "purged %zu\n", n);
	resp_status(c, 200);
	resp_header(c, "Content-Type: text/plain\r\n", 26);
	resp_end_headers(c, len);
	resp_body_copy(c, body, (size_t)len);
	resp_done(c, 200, (uint64_t)len);
}

/* Drops the URL and with its Vary spec every variant. */
static void
purge(struct cache_req *cr, const struct http_request *r)
{
	struct conn *c = cr->c;
	struct req_fields f;

	if (!purge_allowed(cr) && !status_purge_ok(c)) {
		log_info("client %s: PURGE not allowed", conn_peer(c));
		resp_error(c, 403);
		return;
	}
	if (r->content_length > 0 || r->chunked) {
		/* Never passed on: a PURGE is the cache's, not the
		 * origin's, and it has nothing to say in a body. */
		log_info("client %s: PURGE with a body", conn_peer(c));
		resp_no_keepalive(c);
		resp_error(c, 400);
		return;
	}
	if (r->query.p == NULL && r->path.len > 0 &&
	    r->path.p[r->path.len - 1] == '*') {
		purge_prefix(cr, r);
		return;
	}
	req_fields(r, &f);
	if (!url_key(cr, r, &f)) {
		resp_error(c, 404);
		return;
	}
	cache_l2_purge(cr);
	if (obj_delete(cr) != STORE_OK) {
		resp_error(c, 404);
		return;
	}
	resp_status(c, 200);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
}

/*
 * Drops the URI a Location or Content-Location names when it is of the
 * same authority (RFC 9111 4.4: never another host's, which would let
 * one origin empty another's entries).
 */
static void
invalidate_uri(const struct cache_req *cr, struct span host, struct span v)
{
	char key[STORE_KEY_MAX];
	const char *p = v.p, *end = v.p + v.len, *a, *q;
	struct span path, query = { NULL, 0 };
	size_t klen;

	if (p == NULL || p == end)
		return;
	if (end - p > 7 && (http_ieq(p, "http://", 7) ||
	    http_ieq(p, "https://", 8))) {
		a = p + (http_ieq(p, "http://", 7) ? 7 : 8);
		for (p = a; p < end && *p != '/' && *p != '?' && *p != '#';
		    p++)
			;
		if ((size_t)(p - a) != host.len || !http_ieq(a, host.p,
		    host.len))
			return;
	}
	if (p == end || *p != '/' || (end - p > 1 && p[1] == '/'))
		return;			/* relative, or another authority */
	if ((q = memchr(p, '#', (size_t)(end - p))) != NULL)
		end = q;
	path.p = p;
	path.len = (size_t)(end - p);
	if ((q = memchr(p, '?', (size_t)(end - p))) != NULL) {
		path.len = (size_t)(q - p);
		query.p = q + 1;
		query.len = (size_t)(end - q - 1);
	}
	if ((klen = url_key_of(key, host, path, query)) > 0)
		key_delete(key, klen);
}

/*
 * An unsafe method's success drops the URL, and the same-host URIs in
 * its Location and Content-Location (RFC 9111 4.4).
 */
void
cache_invalidate(struct cache_req *cr, const struct http_response *r)
{
	struct span host;
	size_t i;

	if (r->status < 200 || r->status >= 400)
		return;
	obj_delete(cr);
	/* The key's authority: 'P', then it up to a NUL. */
	host.p = cr->key + 1;
	host.len = strlen(host.p);
	i = 0;
	invalidate_uri(cr, host, http_response_header(r, "Location", &i));
	i = 0;
	invalidate_uri(cr, host, http_response_header(r, "Content-Location",
	    &i));
}

/* Starting ------------------------------------------------------------ */

static void
cond_keep(struct cache_req *cr, struct span from, struct span *to,
    size_t *n)
{
	to->p = NULL;
	to->len = 0;
	if (from.p == NULL || from.len > sizeof(cr->cond) - *n)
		return;		/* too long to keep: as if absent */
	memcpy(cr->cond + *n, from.p, from.len);
	to->p = cr->cond + *n;
	to->len = from.len;
	*n += from.len;
}

/*
 * The compressed copies the client takes, best first by its q-values
 * (RFC 9110 12.5.3), among those the config makes.
 */
static void
accept_copies(struct cache_req *cr, struct span ae)
{
	unsigned offer = (worker.cf->brotli ? 1u << ENC_BR : 0) |
	    (worker.cf->gzip ? 1u << ENC_GZIP : 0);
	int i, pick;

	cr->enc_pick[0] = cr->enc_pick[1] = -1;
	if (ae.p == NULL || cr->rcc.no_transform)
		return;
	for (i = 0; i < 2 && offer != 0; i++) {
		pick = http_encoding_pick(ae, http_enc_token, ENC_COUNT,
		    offer);
		if (pick < 0)
			break;
		cr->enc_pick[i] = (signed char)pick;
		offer &= ~(1u << pick);
	}
}

/* Copies the client's preconditions and Range: the input buffer moves on. */
static void
save_cond(struct cache_req *cr, const struct http_request *r,
    const struct req_fields *f)
{
	size_t n = 0;

	cond_keep(cr, r->if_none_match, &cr->inm, &n);
	/* If-None-Match overrides If-Modified-Since (RFC 9110 13.1.3): when
	 * it is too long to keep, neither may answer 304. */
	cond_keep(cr, r->if_none_match.p == NULL ? r->if_modified_since :
	    (struct span){ NULL, 0 }, &cr->ims, &n);
	cond_keep(cr, r->if_range, &cr->if_range, &n);
	cond_keep(cr, r->range, &cr->range, &n);
	/* A Range without its If-Range would be answered wrongly. */
	if (r->if_range.p != NULL && cr->if_range.p == NULL)
		cr->range.p = NULL;
	/* A client's no-transform (RFC 9111 5.2.1.6) keeps the plain copy. */
	accept_copies(cr, f->ae);
}

/* The request's Cache-Control, every line of it (any: there is one). */
static void
request_cc(const struct http_request *r, bool any,
    struct http_cache_control *cc)
{
	struct http_response fields;

	memset(&fields, 0, sizeof(fields));
	if (any) {
		fields.headers = r->headers;
		fields.nheaders = r->nheaders;
	}
	http_response_directives(&fields, "cache-control", cc);
}

struct cache_req *
cache_req_new(struct conn *c, const struct config_location *l)
{
	struct cache_req *cr = free_cr;

	if (!l->cache || worker.store == NULL)
		return NULL;
	if (cr != NULL)
		free_cr = cr->next;
	else if ((cr = malloc(sizeof(*cr))) == NULL)
		return NULL;
	/* The keys and buffers are written before they are read. */
	memset(cr, 0, offsetof(struct cache_req, etag));
	cr->c = c;
	cr->loc = l;
	cr->okey = cr->key;
	cr->inm.p = cr->ims.p = cr->range.p = cr->if_range.p = NULL;
	cr->etag_len = 0;
	cr->mtime = -1;
	cr->klen = cr->oklen = cr->lklen = 0;
	return cr;
}

void
cache_req_free(struct cache_req *cr)
{
	lease_release(cr);
	free(cr->cbuf);
	cr->next = free_cr;
	free_cr = cr;
}

void
cache_req_free_all(void)
{
	struct cache_req *cr;

	while ((cr = free_cr) != NULL) {
		free_cr = cr->next;
		free(cr);
	}
}

/* Safe methods (RFC 9110 9.2.1) leave stored responses alone. */
static bool
safe_method(int m)
{
	return m == HTTP_M_GET || m == HTTP_M_HEAD || m == HTTP_M_OPTIONS ||
	    m == HTTP_M_TRACE;
}

enum cache_verdict
cache_start(struct cache_req *cr, const struct http_request *r)
{
	bool get = r->method == HTTP_M_GET || r->method == HTTP_M_HEAD;
	struct req_fields f;

	cr->r = r;
	cr->method = r->method;
	cr->xc = XC_BYPASS;
	cr->role = CR_PASS;
	if (r->method == HTTP_M_PURGE) {
		purge(cr, r);
		return CACHE_ANSWERED;
	}
	req_fields(r, &f);
	if (!url_key(cr, r, &f)) {
		cr->klen = 0;
		return CACHE_FETCH;
	}
	cr->unsafe = !safe_method(r->method);
	if (!get || r->content_length > 0 || r->chunked)
		return CACHE_FETCH;
	request_cc(r, f.cc, &cr->rcc);
	/* A HEAD miss fetches the GET, as nginx and Varnish do: it fills. */
	cr->role = CR_FILL;
	if (f.auth)
		return CACHE_FETCH;	/* stored if the response allows */
	cr->role = CR_LOOKUP;
	save_cond(cr, r, &f);
	return cache_lookup(cr, false);
}

void
cache_request(struct cache_req *cr, const struct http_request *r)
{
	cr->r = r;
}

bool
cache_fills(const struct cache_req *cr)
{
	return cr != NULL && (cr->role == CR_FILL || cr->role == CR_LOOKUP);
}

bool
cache_mediates(const struct cache_req *cr)
{
	return cr != NULL && cr->role == CR_LOOKUP;
}

bool
cache_refreshing(const struct cache_req *cr)
{
	return cr != NULL && cr->bg;
}

/*
 * A fill answers the client's preconditions itself, and so does a
 * revalidation that sends the stale copy's validators: either way the
 * client's do not go upstream.
 */
bool
cache_hides_field(const struct cache_req *cr, struct span name)
{
	return cr != NULL && (cr->role == CR_LOOKUP || cr->reval) &&
	    (http_field_flags(name) & HF_CONDITIONAL) != 0;
}

size_t
cache_validators(struct cache_req *cr, struct http_header *out, char *buf,
    size_t size)
{
	size_t n = 0;

	/* The request goes now: the start of the exchange (4.2.3). */
	cr->t_req = worker.now;
	if (!cr->reval)
		return 0;
	if (cr->etag_len > 0) {
		out[n].name = (struct span){ "If-None-Match", 13 };
		out[n].value = (struct span){ cr->etag, cr->etag_len };
		n++;
	}
	if (cr->mtime >= 0 && size > HTTP_DATE_LEN) {
		http_date_format((time_t)cr->mtime, buf);
		out[n].name = (struct span){ "If-Modified-Since", 17 };
		out[n].value = (struct span){ buf, HTTP_DATE_LEN };
		n++;
	}
	return n;
}

bool
cache_serve_stale(struct cache_req *cr, int status)
{
	if (cr->bg)
		return false;
	return stale_ok(cr, CP_STALE_ERROR, status == 504 ?
	    CACHE_STALE_TIMEOUT : CACHE_STALE_ERROR) &&
	    serve_stale(cr, XC_STALE);
}

/* What the location tells the policy. */
void
cache_conf(const struct config_location *l, struct cp_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	conf->valid = l->cache_valid;
	conf->nvalid = l->ncache_valid;
	conf->default_ttl = l->cache_ttl;
	conf->heuristic_max = CP_HEURISTIC_MAX;
	conf->cdn_control = l->cache_cdn_control;
}

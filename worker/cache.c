/*
 * The cache: keys, objects, lookups with the stampede lock, PURGE, and the
 * RFC 9111 policy.  Storing proxied responses is in cache_store.c, answers
 * from stored objects in cache_answer.c, the gzip copies in cache_gzip.c.
 *
 * Objects stay in the store cache_grace seconds past their freshness,
 * which the object header tracks, so a stale copy can be revalidated or
 * served when the upstream fails.
 */
#include <ctype.h>
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
	if (1 + alen + blen > STORE_KEY_MAX)
		return 0;
	key[0] = (char)ns;
	if (alen > 0)
		memcpy(key + 1, a, alen);
	if (blen > 0)
		memcpy(key + 1 + alen, b, blen);
	return 1 + alen + blen;
}

/* Reads the header of a pinned value; false when it is not ours. */
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
	co->fresh_until = INT64_MAX;
	co->mtime = -1;
	co->blen = blen;
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

/* "P" host NUL path NUL query: one URL, however it was spelt. */
static bool
url_key(struct cache_req *cr, const struct http_request *r)
{
	char path[PATH_MAX], host[256], ns = CACHE_NS_URL;
	ssize_t len;
	size_t i, n = 0;
	bool ok = true;
	int status;

	if (r->host.len >= sizeof(host))
		return false;
	for (i = 0; i < r->host.len; i++)
		host[i] = (char)tolower((unsigned char)r->host.p[i]);
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0)
		return false;
	key_add(cr->key, &n, &ns, 1, &ok);
	key_add(cr->key, &n, host, r->host.len, &ok);
	key_add(cr->key, &n, "", 1, &ok);
	key_add(cr->key, &n, path, (size_t)len, &ok);
	key_add(cr->key, &n, "", 1, &ok);
	if (r->query.p != NULL)
		key_add(cr->key, &n, r->query.p, r->query.len, &ok);
	cr->klen = n;
	cr->okey = cr->key;
	cr->oklen = n;
	return ok;
}

/*
 * The variant key: "V" gen, the URL, then each field Vary names with the
 * request's value; Accept-Encoding counts only as gzip or identity.
 */
bool
variant_key(struct cache_req *cr, uint64_t gen, const char *names,
    size_t len)
{
	char g[24], name[64];
	const char *p = names, *end = names + len, *comma;
	struct span v;
	size_t n = 0, nl;
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
		v = http_header_get(cr->r, name);
		key_add(cr->vkey, &n, "\n", 1, &ok);
		key_add(cr->vkey, &n, name, nl, &ok);
		key_add(cr->vkey, &n, "=", 1, &ok);
		if (strcmp(name, "accept-encoding") == 0) {
			bool gz = v.p != NULL && memmem(v.p, v.len, "gzip",
			    4) != NULL;

			key_add(cr->vkey, &n, gz ? "gzip" : "identity",
			    gz ? 4 : 8, &ok);
		} else if (v.p != NULL) {
			key_add(cr->vkey, &n, v.p, v.len, &ok);
		}
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
	if (co->kind == CO_PASS) {
		store_release(s, ref);
		return OBJ_PASS;
	}
	if (co->kind == CO_VARY) {
		ok = variant_key(cr, co->gen, (const char *)ref->data +
		    sizeof(*co), co->hlen);
		store_release(s, ref);
		if (!ok)
			return OBJ_PASS;
		if (store_get(s, cr->okey, cr->oklen, ref) != STORE_HIT)
			return OBJ_NONE;
		if (!cobj_read(ref, co) || co->kind != CO_RESP) {
			store_release(s, ref);
			return OBJ_NONE;
		}
	}
	return OBJ_FOUND;
}

static bool
cobj_fresh(const struct cache_obj *co)
{
	return co->fresh_until == INT64_MAX || worker.now < co->fresh_until;
}

/* Drops the URL's response and its gzip copy. */
enum store_result
obj_delete(struct cache_req *cr)
{
	char z[STORE_KEY_MAX];
	size_t zlen = zkey_of(cr->key, cr->klen, z);

	if (zlen > 0)
		store_delete(worker.store, z, zlen);
	return store_delete(worker.store, cr->key, cr->klen);
}

/* Keeps the validators of a stale copy for a conditional refresh. */
static void
note_stale(struct cache_req *cr, const struct store_ref *ref,
    const struct cache_obj *co)
{
	cr->stale = true;
	cr->etag_len = co->etag_len <= sizeof(cr->etag) ? co->etag_len : 0;
	memcpy(cr->etag, (const char *)ref->data + sizeof(*co),
	    cr->etag_len);
	cr->mtime = co->mtime;
}

bool
stale_ok(const struct cache_req *cr, unsigned bit)
{
	return cr->stale && (cr->loc->cache_stale & bit) != 0;
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

/* The fill's lock: a lease on the object's key with its own prefix. */
static enum cache_verdict
lock(struct cache_req *cr)
{
	struct store *s = worker.store;
	struct store_ref ref, lref;
	struct cache_obj co;
	enum store_result lr;
	uint64_t token;

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
			if (cobj_fresh(&co)) {
				lease_release(cr);
				cache_answer(cr, &ref, &co, XC_HIT);
				return CACHE_ANSWERED;
			}
			store_release(s, &ref);
		}
		return CACHE_FETCH;
	case STORE_WAIT:
	case STORE_STALE_WAIT:
		if (stale_ok(cr, CACHE_STALE_UPDATING) &&
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

enum cache_verdict
cache_lookup(struct cache_req *cr, bool lock_timed_out)
{
	struct store_ref ref;
	struct cache_obj co;
	enum cache_verdict v;
	enum obj o;

	cr->stale = cr->reval = false;
	o = obj_get(cr, &ref, &co);
	if (o == OBJ_PASS) {
		cr->xc = XC_BYPASS;
		cr->role = CR_LOOKED;
		return CACHE_FETCH;
	}
	if (o == OBJ_FOUND && cobj_fresh(&co)) {
		cache_answer(cr, &ref, &co, XC_HIT);
		return CACHE_ANSWERED;
	}
	cr->xc = o == OBJ_FOUND ? XC_EXPIRED : XC_MISS;
	if (o == OBJ_FOUND) {
		note_stale(cr, &ref, &co);
		store_release(worker.store, &ref);
	}
	cr->reval = cr->stale && (cr->etag_len > 0 || cr->mtime >= 0);
	if (!cache_fills(cr) || !cr->loc->cache_lock)
		return CACHE_FETCH;
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

/* PURGE ---------------------------------------------------------------- */

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

/* Drops the URL and with its Vary spec every variant. */
static void
purge(struct cache_req *cr, const struct http_request *r)
{
	struct conn *c = cr->c;

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
	if (!url_key(cr, r) || obj_delete(cr) != STORE_OK) {
		resp_error(c, 404);
		return;
	}
	resp_status(c, 200);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
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

/* Copies the client's preconditions and Range: the input buffer moves on. */
static void
save_cond(struct cache_req *cr, const struct http_request *r)
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
	cr->accept_gzip = worker.cf->gzip &&
	    http_accepts_gzip(http_header_get(r, "Accept-Encoding")) &&
	    !http_connection_has_token(http_header_get(r, "Cache-Control"),
	    (struct span){ "no-transform", 12 });
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

enum cache_verdict
cache_start(struct cache_req *cr, const struct http_request *r)
{
	bool get = r->method == HTTP_M_GET || r->method == HTTP_M_HEAD;

	cr->r = r;
	cr->method = r->method;
	cr->xc = XC_BYPASS;
	cr->role = CR_PASS;
	if (r->method == HTTP_M_PURGE) {
		purge(cr, r);
		return CACHE_ANSWERED;
	}
	if (!url_key(cr, r)) {
		cr->klen = 0;
		return CACHE_FETCH;
	}
	if (!get || r->content_length > 0 || r->chunked)
		return CACHE_FETCH;
	/* A HEAD miss fetches the GET, as nginx and Varnish do: it fills. */
	cr->role = CR_FILL;
	if (http_header_get(r, "Authorization").p != NULL)
		return CACHE_FETCH;	/* stored if the response allows */
	cr->role = CR_LOOKUP;
	save_cond(cr, r);
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
	return stale_ok(cr, status == 504 ? CACHE_STALE_TIMEOUT :
	    CACHE_STALE_ERROR) && serve_stale(cr, XC_STALE);
}

/* RFC 9111 policy ------------------------------------------------------ */

/*
 * What RFC 9111 decides, as pure functions of the request and response:
 * these move to worker/cache_policy.c (the cache engineer's), so they are
 * kept together here, with the behaviour they had in proxy.c.
 */

/* Statuses stored without explicit freshness (RFC 9110 15.1). */
static const int heuristic_ok[] = {
	200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501
};

/* Explicit freshness lifetime from the response, or -1 (RFC 9111 4.2.1). */
int64_t
policy_lifetime(const struct http_response *r, const struct http_cache_control *cc)
{
	time_t exp, date;

	if (cc->s_maxage >= 0)
		return cc->s_maxage;
	if (cc->max_age >= 0)
		return cc->max_age;
	if (r->expires.p == NULL)
		return -1;
	exp = http_date_parse(r->expires.p, r->expires.len);
	date = r->date.p != NULL ? http_date_parse(r->date.p, r->date.len) :
	    -1;
	if (date == -1)
		date = worker.now;
	return exp == -1 || exp <= date ? 0 : (int64_t)(exp - date);
}

bool
policy_status_storable(int status, bool explicit)
{
	size_t i;

	if (status == 206 || status == 304)
		return false;
	if (explicit)
		return true;
	for (i = 0; i < nitems(heuristic_ok); i++)
		if (heuristic_ok[i] == status)
			return true;
	return false;
}

/* The Vary field names, lower case, joined by commas; false for "*". */
bool
policy_vary_names(const struct http_response *r, char *out, size_t size,
    size_t *len)
{
	struct span v;
	size_t i = 0, n = 0, j;
	const char *p, *end, *t;

	*len = 0;
	while ((v = http_response_header(r, "Vary", &i)).p != NULL) {
		for (p = v.p, end = v.p + v.len; p < end; p = t + 1) {
			while (p < end && (*p == ' ' || *p == '\t' ||
			    *p == ','))
				p++;
			for (t = p; t < end && *t != ',' && *t != ' ' &&
			    *t != '\t'; t++)
				;
			if (t == p)
				break;
			if (t - p == 1 && *p == '*')
				return false;
			if (n + (size_t)(t - p) + 1 > size)
				return false;
			if (n > 0)
				out[n++] = ',';
			for (j = 0; j < (size_t)(t - p); j++)
				out[n++] = (char)tolower((unsigned char)p[j]);
		}
	}
	*len = n;
	return true;
}

bool
policy_unsafe_method(int m)
{
	return m == HTTP_M_POST || m == HTTP_M_PUT || m == HTTP_M_DELETE ||
	    m == HTTP_M_PATCH;
}

/* Whether a response may be stored at all (for everyone). */
bool
policy_storable(const struct cache_req *cr, const struct http_response *r,
    const struct http_cache_control *cc, bool explicit)
{
	return policy_status_storable(r->status, explicit) && !cc->no_store &&
	    !cc->private_ && r->set_cookie.p == NULL &&
	    (cr->role == CR_LOOKUP || cc->public_ || cc->s_maxage >= 0 ||
	    cc->must_revalidate);
}

/* End of the RFC 9111 policy ------------------------------------------- */


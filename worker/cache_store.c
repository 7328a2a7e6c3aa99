/*
 * Storing proxied responses: the verdict on a response head (the policy's,
 * worker/cache_policy.h), the copy of its body as it is relayed,
 * publishing it (with its gzip copy), and the update of a stale copy by a
 * 304 (RFC 9111 4.3.4).
 */
#include <ctype.h>
#include <stdint.h>
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

/*
 * Fields a stored header never takes from a 304: corral states them on
 * each answer or keeps them in the object's header, and the validator and
 * digests of the stored bytes, which a 304 with other values does not
 * make true (RFC 9111 3.2: fields the integrity of the stored response
 * depends on; a different strong validator selects no stored response,
 * 4.3.4).  The gzip copy keeps its own for the same reason.
 */
const char *const cache_not_merged[] = {
	"age", "date", "server", "x-cache", "etag", "content-md5", "digest",
	"content-digest", "repr-digest", NULL
};

/* Storing -------------------------------------------------------------- */

/* The Vary field names, lower case, joined by commas. */
static bool
vary_names(const struct http_response *r, char *out, size_t size,
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

/* The Vary spec of the URL with these names, made when it is new. */
static bool
vary_spec(struct cache_req *cr, const char *names, size_t len, int64_t ttl)
{
	static unsigned seq;
	struct store *s = worker.store;
	struct store_ref ref;
	struct cache_obj co;
	uint64_t gen = 0;
	char buf[sizeof(co) + 512];

	if (store_get(s, cr->key, cr->klen, &ref) == STORE_HIT) {
		if (cobj_read(&ref, &co) && co.kind == CO_VARY &&
		    co.hlen == len && memcmp((const char *)ref.data +
		    sizeof(co), names, len) == 0)
			gen = co.gen;
		store_release(s, &ref);
	}
	if (gen == 0) {
		/* A new generation: variants of an older spec are gone. */
		gen = ((uint64_t)worker.now_ms << 24) ^
		    ((uint64_t)getpid() << 8) ^ ++seq;
		cobj_init(&co, CO_VARY, 0);
		co.status = 0;
		/* As long as its variant: what a copy in the cache's second
		 * level is kept for where it is read back (store_ttl). */
		co.born = worker.now;
		co.lifetime = ttl == 0 ? CO_FOREVER :
		    ttl > STORE_TTL_RELATIVE_MAX ? ttl - worker.now : ttl;
		co.mtime = 0;
		co.gen = gen;
		co.hlen = (uint32_t)len;
		memcpy(buf, &co, sizeof(co));
		memcpy(buf + sizeof(co), names, len);
		if (store_set(s, cr->key, cr->klen, buf, sizeof(co) + len,
		    ttl, 0) != STORE_OK)
			return false;
		cache_l2_push(cr, buf, sizeof(co) + len, ttl);
	}
	return variant_key(cr, gen, names, len);
}

static bool
cbuf_add(struct cache_req *cr, const void *p, size_t n)
{
	size_t want = cr->csize ? cr->csize : 4096;
	char *b;

	if (n == 0)
		return true;
	while (cr->clen + n > want)
		want *= 2;
	if (want != cr->csize) {
		if ((b = realloc(cr->cbuf, want)) == NULL)
			return false;
		cr->cbuf = b;
		cr->csize = want;
	}
	memcpy(cr->cbuf + cr->clen, p, n);
	cr->clen += n;
	return true;
}

static void
cbuf_drop(struct cache_req *cr)
{
	free(cr->cbuf);
	cr->cbuf = NULL;
	cr->csize = cr->clen = 0;
	cr->storing = false;
}

/*
 * The store's TTL of an object: past its freshness by cache_grace, or by
 * its stale windows when they are longer; absolute when far.
 */
int64_t
store_ttl(const struct cache_req *cr, const struct cache_obj *co)
{
	int64_t keep = cr->loc->cache_grace, ttl;

	if (co->lifetime == CO_FOREVER)
		return 0;
	if (co->swr > keep)
		keep = co->swr;
	if (co->sie > keep)
		keep = co->sie;
	ttl = co->born + co->lifetime + keep - worker.now;
	if (ttl < 1)
		ttl = 1;
	return ttl > STORE_TTL_RELATIVE_MAX ? worker.now + ttl : ttl;
}

/* A marker of a kind (CO_PASS, CO_MISS) under the object's key. */
static void
mark(struct cache_req *cr, uint16_t kind)
{
	int64_t ttl = (cr->loc->cache_pass_ttl_ms + 999) / 1000;
	struct cache_obj co;

	if (ttl <= 0 || cr->role != CR_LOOKUP)
		return;
	cobj_init(&co, kind, 0);
	co.status = 0;
	co.lifetime = 0;
	co.mtime = 0;
	store_set(worker.store, cr->okey, cr->oklen, &co, sizeof(co), ttl, 0);
}

/*
 * Not stored.  A response uncacheable for everyone makes the URL
 * hit-for-pass (Varnish's); one only this request got (its credentials,
 * its cookie, a status it provoked) leaves hit-for-miss, so the waiters
 * and the next requests fetch at once and may store what they get, and a
 * stale copy is kept.  Either way the lease is let go now, so its waiters
 * go on at once rather than after the whole body streamed by.
 */
static void
pass(struct cache_req *cr, bool for_everyone)
{
	if (for_everyone)
		mark(cr, CO_PASS);
	else if (!cr->stale)
		mark(cr, CO_MISS);
	lease_release(cr);
}

/* The largest object the store takes now, header and lines included. */
static size_t
object_max(void)
{
	size_t m = store_max_object(worker.store);

	return worker.cf->cache.max_object < m ?
	    (size_t)worker.cf->cache.max_object : m;
}

/* Over the store's limit: counted by the store as too large, streamed
 * only; the size is the same for everyone. */
static void
too_large(struct cache_req *cr)
{
	store_count_too_large(worker.store, cr->okey, cr->oklen);
	pass(cr, true);
}

static bool
store_fields(struct cache_req *cr, const struct http_response *r)
{
	const struct http_header *h;
	bool ok = true;

	for (h = r->headers; ok && h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    (http_field_flags(h->name) & HF_NOT_STORED))
			continue;
		ok = cbuf_add(cr, h->name.p, h->name.len) &&
		    cbuf_add(cr, ": ", 2) &&
		    cbuf_add(cr, h->value.p, h->value.len) &&
		    cbuf_add(cr, "\r\n", 2);
	}
	return ok;
}

/* Starts the copy: the object header, entity tag and header lines. */
static void
copy_begin(struct cache_req *cr, const struct http_response *r,
    const struct http_cache_control *cc, size_t nvary)
{
	struct cache_obj *co = &cr->co;

	cr->gz = gz_wanted(r, cc, nvary);
	if (cr->gz)
		co->gen = fill_nonce();
	cr->clen = 0;
	if (!cbuf_add(cr, co, sizeof(*co)) ||
	    !cbuf_add(cr, r->etag.p, co->etag_len) ||
	    !store_fields(cr, r) ||
	    (cr->gz && !cbuf_add(cr, "Vary: Accept-Encoding\r\n", 23))) {
		cbuf_drop(cr);
		return;
	}
	co->hlen = (uint32_t)(cr->clen - sizeof(*co) - co->etag_len);
	cr->storing = true;
}

/* What of the request the policy weighs. */
static void
policy_req(const struct cache_req *cr, struct cp_req *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->method = HTTP_M_GET;	/* a HEAD's fill is a GET */
	rq->cc = cr->rcc;
	if (cr->r != NULL) {
		rq->authorization =
		    http_header_get(cr->r, "Authorization").p != NULL;
		rq->cookie = http_header_get(cr->r, "Cookie").p != NULL;
	}
}

void
cache_decide(struct cache_req *cr, const struct http_response *r)
{
	struct http_cache_control cc;
	struct cache_obj *co = &cr->co;
	struct cp_conf conf;
	struct cp_req rq;
	struct cp_times t = { cr->t_req, worker.now };
	struct cp_fresh f;
	enum cp_verdict v;
	const char *why;
	char names[512];
	size_t nlen;

	cr->gz = false;
	if (cr->klen == 0)
		return;
	if (cr->unsafe) {
		cache_invalidate(cr, r);
		return;
	}
	if (!cache_fills(cr))
		return;
	cache_conf(cr->loc, &conf);
	policy_req(cr, &rq);
	v = cp_judge(&conf, &rq, r, &t, &f, &why);
	if (v != CP_STORE) {
		pass(cr, v == CP_PASS);
		return;
	}
	if (!vary_names(r, names, sizeof(names), &nlen)) {
		pass(cr, true);
		return;
	}
	if (r->framing == HTTP_BODY_LENGTH &&
	    (uint64_t)r->content_length > object_max()) {
		too_large(cr);
		return;
	}
	cp_response_cc(&conf, r, &cc);
	cobj_init(co, CO_RESP, 0);
	co->status = (uint16_t)r->status;
	cobj_set_fresh(co, &f);
	co->mtime = r->last_modified.p != NULL ? http_date_parse(
	    r->last_modified.p, r->last_modified.len) : -1;
	if (r->etag.p != NULL && r->etag.len <= CO_ETAG_MAX)
		co->etag_len = (uint32_t)r->etag.len;
	cr->cttl = store_ttl(cr, co);
	if (nlen > 0 && !vary_spec(cr, names, nlen, cr->cttl))
		return;
	copy_begin(cr, r, &cc, nlen);
	if (cr->storing && cr->clen + (r->framing == HTTP_BODY_LENGTH ?
	    (size_t)r->content_length : 0) > object_max()) {
		cbuf_drop(cr);
		too_large(cr);
	}
}

bool
cache_storing(const struct cache_req *cr)
{
	return cr != NULL && cr->storing;
}

void
cache_copy(struct cache_req *cr, const char *p, size_t len)
{
	if (!cr->storing)
		return;
	if (cr->clen + len > object_max()) {
		cbuf_drop(cr);
		too_large(cr);
	} else if (!cbuf_add(cr, p, len)) {
		cbuf_drop(cr);
	}
}

void
cache_commit(struct cache_req *cr)
{
	if (!cr->storing)
		return;
	cr->storing = false;
	cr->co.blen = cr->clen - sizeof(cr->co) - cr->co.etag_len -
	    cr->co.hlen;
	/* The one compression this response gets, for every worker. */
	if (cr->gz)
		cr->co.flags |= gz_store(cr);
	memcpy(cr->cbuf, &cr->co, sizeof(cr->co));
	store_set(worker.store, cr->okey, cr->oklen, cr->cbuf, cr->clen,
	    cr->cttl, 0);
	cache_l2_push(cr, cr->cbuf, cr->clen, cr->cttl);
}

/* Updating from a 304 ---------------------------------------------------- */

/* The stored lines as fields of r (its spans point into lines). */
static size_t
lines_fields(const char *lines, size_t len, struct http_header *h,
    size_t max)
{
	const char *p = lines, *end = lines + len, *nl, *colon, *v;
	size_t n = 0;

	for (; p < end && n < max; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			break;
		if ((colon = memchr(p, ':', (size_t)(nl - p))) == NULL)
			continue;
		for (v = colon + 1; v < nl && (*v == ' ' || *v == '\t'); v++)
			;
		h[n].name = (struct span){ p, (size_t)(colon - p) };
		h[n].value = (struct span){ v, (size_t)(nl - v) };
		if (h[n].value.len > 0 && nl[-1] == '\r')
			h[n].value.len--;
		n++;
	}
	return n;
}

/*
 * The stored response with the 304's fields merged into its lines (RFC
 * 9111 3.2), judged anew as of the 304's exchange; its object written to
 * *out (malloc'd), its freshness into *co.  False when it may no longer be
 * stored, or on a failure.
 */
static bool
freshen(struct cache_req *cr, const struct store_ref *ref,
    struct cache_obj *co, const struct http_response *r, char **out,
    size_t *outlen)
{
	const char *lines = (const char *)ref->data + sizeof(*co) +
	    co->etag_len;
	struct cp_times t = { cr->t_req, worker.now };
	struct http_response m;
	struct http_header *h = NULL;
	struct cp_conf conf;
	struct cp_req rq;
	struct cp_fresh f;
	const char *why;
	char *obj, *merged;
	size_t mlen, n, i, elen;
	bool ok = false;

	if ((obj = malloc(sizeof(*co) + CO_ETAG_MAX +
	    cp_freshen_size(co->hlen, r) + co->blen)) == NULL)
		return false;
	merged = obj + sizeof(*co) + CO_ETAG_MAX;
	mlen = cp_freshen(lines, co->hlen, r, cache_not_merged, merged);
	if ((h = calloc(mlen / 4 + 1, sizeof(*h))) == NULL)
		goto out;
	/* The merged response, as the policy reads one. */
	memset(&m, 0, sizeof(m));
	m.version = 11;
	m.status = co->status;
	m.headers = h;
	m.nheaders = lines_fields(merged, mlen, h, mlen / 4 + 1);
	m.content_length = -1;
	for (i = 0; i < m.nheaders; i++)
		http_response_keep_field(&m, &h[i]);
	/* Its Date and Age are the 304's (never stored in the lines). */
	m.date = r->date;
	m.age = r->age;
	cache_conf(cr->loc, &conf);
	policy_req(cr, &rq);
	if (cp_judge(&conf, &rq, &m, &t, &f, &why) != CP_STORE) {
		log_info("a 304 made the stored response unstorable: %s",
		    why != NULL ? why : "?");
		goto out;
	}
	co->mtime = m.last_modified.p != NULL ? http_date_parse(
	    m.last_modified.p, m.last_modified.len) : -1;
	elen = m.etag.p != NULL && m.etag.len <= CO_ETAG_MAX ? m.etag.len : 0;
	/* etag, lines, body: the lines are in place after the room. */
	n = sizeof(*co);
	if (elen > 0)
		memcpy(obj + n, m.etag.p, elen);
	n += elen;
	memmove(obj + n, merged, mlen);
	n += mlen;
	memcpy(obj + n, lines + co->hlen, co->blen);
	n += co->blen;
	cobj_set_fresh(co, &f);
	co->etag_len = (uint32_t)elen;
	co->hlen = (uint32_t)mlen;
	memcpy(obj, co, sizeof(*co));
	*out = obj;
	*outlen = n;
	obj = NULL;
	ok = true;
out:
	free(h);
	free(obj);
	return ok;
}

/*
 * The upstream said 304 to a revalidation: the stale copy takes the 304's
 * fields and new freshness without its body being fetched again, and
 * answers (unless the client has its answer already).
 */
static bool
refresh(struct cache_req *cr, const struct http_response *r)
{
	struct store_ref ref;
	struct cache_obj co;
	char *obj;
	size_t len;

	if (obj_get(cr, &ref, &co) != OBJ_FOUND)
		return false;
	if (!freshen(cr, &ref, &co, r, &obj, &len)) {
		/* It stays valid for this answer, not for storing. */
		store_release(worker.store, &ref);
		if (cr->bg) {
			obj_delete(cr);
			return true;
		}
		serve_stale(cr, XC_EXPIRED);
		obj_delete(cr);
		return true;
	}
	store_release(worker.store, &ref);
	/* The compressed copies first: an answer takes one only when both
	 * match. */
	if (co.flags & CO_COPIES)
		gz_renew(cr, &co, r);
	store_set(worker.store, cr->okey, cr->oklen, obj, len,
	    store_ttl(cr, &co), 0);
	free(obj);
	return cr->bg || serve_stale(cr, XC_EXPIRED);
}

bool
cache_intercept(struct cache_req *cr, const struct http_response *r,
    const char *peer)
{
	int st = r->status;
	unsigned bit = st == 500 ? CACHE_STALE_500 : st == 502 ?
	    CACHE_STALE_502 : st == 503 ? CACHE_STALE_503 : st == 504 ?
	    CACHE_STALE_504 : 0;

	if (cr->reval && st == 304)
		return refresh(cr, r);
	if (cr->bg || bit == 0 || !stale_ok(cr, CP_STALE_ERROR, bit) ||
	    !serve_stale(cr, XC_STALE))
		return false;
	log_warn("upstream %s answered %d; served a stale copy", peer, st);
	return true;
}

bool
cache_states_x_cache(const struct cache_req *cr)
{
	return cr != NULL && cr->xc != XC_NONE && cr->loc->x_cache;
}

void
cache_head_lines(const struct cache_req *cr, struct conn *c)
{
	if (cr == NULL)
		return;
	/* Hits of what is stored now will vary: say so already. */
	if (cr->gz)
		resp_header(c, "Vary: Accept-Encoding\r\n", 23);
	if (cr->xc != XC_NONE)
		status_cache(c, xc_name[cr->xc]);
	if (cache_states_x_cache(cr))
		resp_header(c, xc_line[cr->xc].p, xc_line[cr->xc].len);
}

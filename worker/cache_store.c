/*
 * Storing proxied responses: the verdict on a response head, the copy of
 * its body as it is relayed, publishing it (with its gzip copy), and the
 * refresh of a stale copy by a 304.
 */
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

/* Storing -------------------------------------------------------------- */

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
		co.fresh_until = 0;
		co.mtime = 0;
		co.gen = gen;
		co.hlen = (uint32_t)len;
		memcpy(buf, &co, sizeof(co));
		memcpy(buf + sizeof(co), names, len);
		if (store_set(s, cr->key, cr->klen, buf, sizeof(co) + len,
		    ttl, 0) != STORE_OK)
			return false;
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

/* The store's TTL: past freshness by cache_grace, absolute when far. */
int64_t
store_ttl(const struct cache_req *cr, int64_t fresh_until)
{
	int64_t grace = cr->loc->cache_grace, ttl;

	if (fresh_until == INT64_MAX)
		return 0;
	ttl = fresh_until + grace - worker.now;
	if (ttl < 1)
		ttl = 1;
	return ttl > STORE_TTL_RELATIVE_MAX ? fresh_until + grace : ttl;
}

static void
mark_pass(struct cache_req *cr)
{
	int64_t ttl = (cr->loc->cache_pass_ttl_ms + 999) / 1000;
	struct cache_obj co;

	if (ttl <= 0 || cr->role != CR_LOOKUP)
		return;
	cobj_init(&co, CO_PASS, 0);
	co.status = 0;
	co.fresh_until = 0;
	co.mtime = 0;
	store_set(worker.store, cr->key, cr->klen, &co, sizeof(co), ttl, 0);
}

/*
 * The response will not be stored: the URL goes hit-for-pass, and the
 * lease is let go now, so its waiters fetch for themselves at once rather
 * than after the whole body streamed by.
 */
static void
pass(struct cache_req *cr)
{
	mark_pass(cr);
	lease_release(cr);
}

/* Over max_object: counted by the store as too large, streamed only. */
static void
too_large(struct cache_req *cr)
{
	store_count_too_large(worker.store, cr->okey, cr->oklen);
	pass(cr);
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

void
cache_decide(struct cache_req *cr, const struct http_response *r)
{
	struct http_cache_control cc;
	struct cache_obj *co = &cr->co;
	char names[512];
	size_t nlen;
	int64_t life, age = 0;
	bool explicit;

	cr->gz = false;
	if (cr->klen == 0)
		return;
	if (policy_unsafe_method(cr->method)) {
		if (r->status >= 200 && r->status < 400)
			obj_delete(cr);
		return;
	}
	if (!cache_fills(cr))
		return;
	http_response_cache_control(r, &cc);
	life = policy_lifetime(r, &cc);
	explicit = life >= 0;
	if (!policy_storable(cr, r, &cc, explicit) ||
	    !policy_vary_names(r, names, sizeof(names), &nlen)) {
		pass(cr);
		return;
	}
	if (r->framing == HTTP_BODY_LENGTH &&
	    (uint64_t)r->content_length > worker.cf->cache.max_object) {
		too_large(cr);
		return;
	}
	if (r->age.p != NULL)
		age = strtoll(r->age.p, NULL, 10);
	if (age < 0 || age > HTTP_DELTA_MAX)
		age = 0;
	if (!explicit)
		life = cr->loc->cache_ttl;
	if (cc.no_cache)
		life = 0;
	cobj_init(co, CO_RESP, 0);
	co->status = (uint16_t)r->status;
	co->born = worker.now - age;
	co->fresh_until = !explicit && life == 0 && !cc.no_cache ?
	    INT64_MAX : co->born + life;
	co->mtime = r->last_modified.p != NULL ? http_date_parse(
	    r->last_modified.p, r->last_modified.len) : -1;
	if (r->etag.p != NULL && r->etag.len <= CO_ETAG_MAX)
		co->etag_len = (uint32_t)r->etag.len;
	cr->cttl = store_ttl(cr, co->fresh_until);
	if (nlen > 0 && !vary_spec(cr, names, nlen, cr->cttl))
		return;
	copy_begin(cr, r, &cc, nlen);
}

bool
cache_storing(const struct cache_req *cr)
{
	return cr != NULL && cr->storing;
}

void
cache_copy(struct cache_req *cr, const char *p, size_t len)
{
	size_t body = cr->clen - sizeof(cr->co) - cr->co.etag_len -
	    cr->co.hlen;

	if (!cr->storing)
		return;
	if (body + len > worker.cf->cache.max_object) {
		too_large(cr);
		cbuf_drop(cr);
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
	if (cr->gz && gz_store(cr))
		cr->co.flags |= CO_GZ;
	memcpy(cr->cbuf, &cr->co, sizeof(cr->co));
	store_set(worker.store, cr->okey, cr->oklen, cr->cbuf, cr->clen,
	    cr->cttl, 0);
}

/*
 * The upstream said 304 to a revalidation: the stale copy gets new
 * freshness without its body being fetched again, and answers.
 */
static bool
refresh(struct cache_req *cr, const struct http_response *r)
{
	struct http_cache_control cc;
	struct store_ref ref;
	struct cache_obj co;
	int64_t life;
	char *copy;

	if (obj_get(cr, &ref, &co) != OBJ_FOUND)
		return false;
	http_response_cache_control(r, &cc);
	life = policy_lifetime(r, &cc);
	if (life < 0)
		life = co.fresh_until == INT64_MAX ? cr->loc->cache_ttl :
		    co.fresh_until - co.born;
	if ((copy = malloc(ref.len)) == NULL) {
		store_release(worker.store, &ref);
		return false;
	}
	memcpy(copy, ref.data, ref.len);
	store_release(worker.store, &ref);
	co.born = worker.now;
	co.fresh_until = co.born + life;
	memcpy(copy, &co, sizeof(co));
	/* The gzip copy first: an answer takes it only when both match. */
	if (co.flags & CO_GZ)
		gz_renew(cr, &co);
	store_set(worker.store, cr->okey, cr->oklen, copy,
	    sizeof(co) + co.etag_len + co.hlen + co.blen,
	    store_ttl(cr, co.fresh_until), 0);
	free(copy);
	return serve_stale(cr, XC_EXPIRED);
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
	if (bit == 0 || !stale_ok(cr, bit) || !serve_stale(cr, XC_STALE))
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

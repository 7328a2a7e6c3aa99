/*
 * The cache's second level (cache { l2 = "NAME" }): a memcached cluster
 * that every corral machine shares.  A request that misses the local
 * store and holds the fill's lease asks the cluster first, with a short
 * timeout; a hit is stored locally, which ends the lease, so the waiters
 * of this machine are answered too, and one machine's fill is every
 * machine's hit.  Fills go to the cluster after they are stored here,
 * without waiting, with the same TTL; a PURGE deletes there too.  A
 * cluster that is down or slow only means the origin is asked.
 *
 * The cluster holds the stored object as it is (worker/cache_impl.h's
 * format, which checks itself when read back) under "corral:" and a hash
 * of the object's store key, a valid memcached key of fixed length.  A
 * variant's key leaves out its spec's generation, which its value carries
 * first instead (and must match when read back, so a purged spec's
 * variants are never taken for a new spec's): then the variant a request
 * needs can be asked for beside its URL, in the same get, whenever the
 * URL's Vary names are among the few lists seen lately.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "master/config.h"
#include "worker/cache_impl.h"
#include "worker/conn.h"
#include "worker/mc_client.h"
#include "worker/upstream.h"

#define L2_KEY_LEN	(7 + 32)
#define GEN_LEN		16		/* a variant key's generation, hex */
#define SEEN		4		/* Vary lists remembered */
#define SEEN_NAMES	256

/* The Vary lists of specs seen lately, newest replacing oldest. */
static struct {
	char names[SEEN_NAMES];
	size_t len;
} seen[SEEN];
static size_t nseen, seen_next;

static void
learn(const char *names, size_t len)
{
	size_t i;

	if (len == 0 || len > SEEN_NAMES)
		return;
	for (i = 0; i < nseen; i++)
		if (seen[i].len == len && memcmp(seen[i].names, names,
		    len) == 0)
			return;
	i = seen_next++ % SEEN;
	memcpy(seen[i].names, names, len);
	seen[i].len = len;
	if (nseen < SEEN)
		nseen++;
}

/* A spec's names, when obj (len bytes) is one. */
static void
learn_spec(const char *obj, size_t len)
{
	struct cache_obj co;

	if (len < sizeof(co))
		return;
	memcpy(&co, obj, sizeof(co));
	if (co.magic == CO_MAGIC && co.kind == CO_VARY &&
	    co.hlen <= len - sizeof(co))
		learn(obj + sizeof(co), co.hlen);
}

static bool
is_variant(const char *skey, size_t klen)
{
	return klen > 1 + GEN_LEN && skey[0] == CACHE_NS_VARIANT;
}

static struct upstream *
l2_group(void)
{
	int i = worker.cf->cache.l2;

	return i >= 0 && upstream_init() ? upstream_group((size_t)i) : NULL;
}

/* The cluster's key of a store key (a variant's without its generation). */
static size_t
l2_key(const char *skey, size_t klen, char *out)
{
	char k[STORE_KEY_MAX];
	XXH128_hash_t h;

	if (is_variant(skey, klen)) {
		k[0] = skey[0];
		memcpy(k + 1, skey + 1 + GEN_LEN, klen - 1 - GEN_LEN);
		h = XXH3_128bits(k, klen - GEN_LEN);
	} else
		h = XXH3_128bits(skey, klen);
	snprintf(out, L2_KEY_LEN + 1, "corral:%016" PRIx64 "%016" PRIx64,
	    (uint64_t)h.high64, (uint64_t)h.low64);
	return L2_KEY_LEN;
}

bool
cache_l2_wanted(const struct cache_req *cr)
{
	/* Not a background refresh: the client has its answer already and
	 * the cluster's copy is likely the same stale one. */
	return cr != NULL && worker.cf->cache.l2 >= 0 && cr->lease &&
	    cr->xc == XC_MISS && !cr->bg;
}

struct mc_call *
cache_l2_get(struct cache_req *cr, mc_get_cb cb, void *arg)
{
	struct upstream *u = l2_group();
	char keys[1 + SEEN][L2_KEY_LEN + 1];
	const char *kp[1 + SEEN];
	size_t kl[1 + SEEN], n = 1, i, j;
	bool url = cr->okey == cr->key;

	if (u == NULL)
		return NULL;
	kl[0] = l2_key(cr->okey, cr->oklen, keys[0]);
	/* The URL is not here: its variant, were its names one of these. */
	for (i = 0; url && i < nseen; i++) {
		if (!variant_key(cr, 0, seen[i].names, seen[i].len))
			continue;
		kl[n] = l2_key(cr->vkey, cr->oklen, keys[n]);
		for (j = 1; j < n && strcmp(keys[j], keys[n]) != 0; j++)
			;
		if (j == n)
			n++;
	}
	if (url) {
		cr->okey = cr->key;
		cr->oklen = cr->klen;
	}
	for (i = 0; i < n; i++)
		kp[i] = keys[i];
	return mc_client_get(u, kp, kl, n, worker.cf->cache.l2_timeout_ms, cb,
	    arg);
}

/* Stores a copy the cluster had under the store key; false: not kept. */
static bool
l2_store(struct cache_req *cr, const char *key, size_t klen,
    const char *data, size_t len)
{
	struct store_ref ref = { .data = data, .len = len };
	struct cache_obj co;
	struct cp_fresh f;
	char *copy;
	bool ok;

	if (!cobj_read(&ref, &co) || co.kind == CO_PASS ||
	    (co.flags & CO_COPY))
		return false;
	cobj_fresh(&co, &f);
	if (co.kind == CO_RESP && !cp_is_fresh(&f, NULL, worker.now))
		return false;
	if ((copy = malloc(len)) == NULL)
		return false;
	memcpy(copy, data, len);
	/* Its compressed copies stayed on the machine that made them. */
	co.flags &= ~(uint32_t)CO_COPIES;
	memcpy(copy, &co, sizeof(co));
	ok = store_set(worker.store, key, klen, copy, len,
	    store_ttl(cr, &co), 0) == STORE_OK;
	free(copy);
	return ok;
}

/* A variant's value of the spec whose variant key (cr->okey) it is. */
static bool
variant_store(struct cache_req *cr, const struct mc_value *v)
{
	return v->data != NULL && v->len > GEN_LEN &&
	    memcmp(v->data, cr->okey + 1, GEN_LEN) == 0 &&
	    l2_store(cr, cr->okey, cr->oklen, v->data + GEN_LEN,
	    v->len - GEN_LEN);
}

bool
cache_l2_fill(struct cache_req *cr, const struct mc_value *v, size_t n)
{
	struct store_ref ref = { .data = v[0].data, .len = v[0].len };
	char key[L2_KEY_LEN + 1];
	struct cache_obj co;
	bool ok;
	size_t i;

	if (v[0].data == NULL)
		return false;
	if (is_variant(cr->okey, cr->oklen)) {
		ok = variant_store(cr, &v[0]);
		lease_release(cr);
		return ok;
	}
	/* A Vary spec: the variant that came with it first, so the waiters
	 * the lease's end wakes find both. */
	if (cobj_read(&ref, &co) && co.kind == CO_VARY &&
	    co.hlen <= v[0].len - sizeof(co)) {
		learn(v[0].data + sizeof(co), co.hlen);
		if (variant_key(cr, co.gen, v[0].data + sizeof(co), co.hlen)) {
			l2_key(cr->okey, cr->oklen, key);
			for (i = 1; i < n; i++)
				if (v[i].klen == L2_KEY_LEN &&
				    memcmp(v[i].key, key, L2_KEY_LEN) == 0)
					variant_store(cr, &v[i]);
		}
		cr->okey = cr->key;
		cr->oklen = cr->klen;
	}
	ok = l2_store(cr, cr->key, cr->klen, v[0].data, v[0].len);
	lease_release(cr);
	return ok;
}

void
cache_l2_push(const struct cache_req *cr, const void *obj, size_t len,
    int64_t ttl)
{
	struct upstream *u = l2_group();
	char key[L2_KEY_LEN + 1];
	bool var = is_variant(cr->okey, cr->oklen);

	learn_spec(obj, len);
	/* A variant's value names its spec's generation first. */
	if (u != NULL)
		mc_client_set(u, key, l2_key(cr->okey, cr->oklen, key),
		    cr->okey + 1, var ? GEN_LEN : 0, obj, len, ttl,
		    worker.cf->cache.l2_timeout_ms * 10);
}

void
cache_l2_purge(const struct cache_req *cr)
{
	struct upstream *u = l2_group();
	char key[L2_KEY_LEN + 1];

	if (u != NULL)
		mc_client_delete(u, key, l2_key(cr->okey, cr->oklen, key),
		    worker.cf->cache.l2_timeout_ms * 10);
}

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
 * of the object's store key, a valid memcached key of fixed length.
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

static struct upstream *
l2_group(void)
{
	int i = worker.cf->cache.l2;

	return i >= 0 && upstream_init() ? upstream_group((size_t)i) : NULL;
}

static size_t
l2_key(const char *skey, size_t klen, char *out)
{
	XXH128_hash_t h = XXH3_128bits(skey, klen);

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
	char key[L2_KEY_LEN + 1];

	if (u == NULL)
		return NULL;
	return mc_client_get(u, key, l2_key(cr->okey, cr->oklen, key),
	    worker.cf->cache.l2_timeout_ms, cb, arg);
}

bool
cache_l2_fill(struct cache_req *cr, const char *data, size_t len)
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
	ok = store_set(worker.store, cr->okey, cr->oklen, copy, len,
	    store_ttl(cr, &co), 0) == STORE_OK;
	free(copy);
	lease_release(cr);
	return ok;
}

void
cache_l2_push(const struct cache_req *cr, const void *obj, size_t len,
    int64_t ttl)
{
	struct upstream *u = l2_group();
	char key[L2_KEY_LEN + 1];

	if (u != NULL)
		mc_client_set(u, key, l2_key(cr->okey, cr->oklen, key), obj,
		    len, ttl, worker.cf->cache.l2_timeout_ms * 10);
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

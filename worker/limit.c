/*
 * limit_req and limit_conn, with their state in the shared store so that
 * the limit holds across all workers (nginx keeps its zones in shared
 * memory too).  A key is the zone's number and a 128-bit hash of the
 * zone's key for the request ($remote_addr ...), so any client costs one
 * small entry, and the store's LRU bounds how many there are.
 *
 * limit_req is nginx's leaky bucket: "excess" drains at the zone's rate;
 * a request adds one; over burst it is refused, else it waits for what is
 * in front of it (or not, with nodelay).  limit_conn pins its key: the
 * store counts the pins, and drops a dead worker's with its slot.
 */
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/store.h"
#include "worker/access.h"
#include "worker/cache.h"
#include "worker/conn_impl.h"

#define KEY_LEN		(1 + 2 + 16)
#define VALUE_MAX	1024

struct lr_state {
	int64_t last_ms;
	int64_t excess;			/* milli-requests */
};

struct lr_arg {
	int64_t now_ms;
	int64_t rate;			/* milli-requests per second */
	int64_t burst;			/* milli-requests */
	int64_t excess;			/* out */
	bool busy;			/* out */
};

/* Runs under the stripe lock: arithmetic only. */
static long
lr_update(const void *old, size_t oldlen, void *out, void *argp)
{
	struct lr_arg *a = argp;
	struct lr_state st;
	int64_t elapsed, excess = 0;

	if (old != NULL && oldlen == sizeof(st)) {
		memcpy(&st, old, sizeof(st));
		elapsed = a->now_ms - st.last_ms;
		if (elapsed < 0)
			elapsed = 0;
		excess = st.excess - a->rate * elapsed / 1000 + 1000;
		if (excess < 0)
			excess = 0;
	}
	if (excess > a->burst) {
		a->busy = true;
		return -1;
	}
	st.last_ms = a->now_ms;
	st.excess = excess;
	a->excess = excess;
	memcpy(out, &st, sizeof(st));
	return (long)sizeof(st);
}

/* The namespace, the zone, and the hash of its key for this request. */
static bool
make_key(struct conn *c, enum cache_ns ns, int zone, unsigned char *key)
{
	const struct config_limit_zone *z = &worker.cf->limit_zones[zone];
	char value[VALUE_MAX];
	XXH128_hash_t h;
	ssize_t n;

	if ((n = request_expand(c, z->key, value, sizeof(value))) < 0)
		return false;
	h = XXH3_128bits(value, (size_t)n);
	key[0] = (unsigned char)ns;
	key[1] = (unsigned char)(zone >> 8);
	key[2] = (unsigned char)zone;
	memcpy(key + 3, &h.low64, 8);
	memcpy(key + 11, &h.high64, 8);
	return true;
}

int
limit_req(struct conn *c, const struct config_location *l, int *delay_ms)
{
	const struct config_limit_zone *z =
	    &worker.cf->limit_zones[l->limit_req_zone];
	struct lr_arg a = {
		.now_ms = (int64_t)worker.now_ms,
		.rate = (int64_t)z->rate_milli,
		.burst = (int64_t)l->limit_req_burst * 1000,
	};
	unsigned char key[KEY_LEN];
	enum store_result r;
	int64_t ttl;

	if (worker.store == NULL || !make_key(c, CACHE_NS_LIMIT_REQ,
	    l->limit_req_zone, key))
		return 0;
	/* Kept until the bucket would be empty again, and a bit. */
	ttl = 2 + (a.burst + 1000) / (a.rate > 0 ? a.rate : 1);
	r = store_update(worker.store, key, sizeof(key), ttl, 0, lr_update,
	    &a);
	if (a.busy) {
		log_info("client %s: limiting requests of zone \"%s\"",
		    c->peer, z->name);
		return z->status;
	}
	if (r != STORE_OK) {
		/* The store is full of pinned values: let it through. */
		log_warn("limit_req zone \"%s\": store error %d", z->name,
		    (int)r);
		return 0;
	}
	if (l->limit_req_nodelay || a.excess == 0)
		return 0;
	*delay_ms = (int)(a.excess * 1000 / a.rate);
	if (*delay_ms == 0)
		return 0;
	log_info("client %s: delaying request %d ms (zone \"%s\")", c->peer,
	    *delay_ms, z->name);
	return -1;
}

int
limit_conn_enter(struct conn *c, const struct config_location *l)
{
	const struct config_limit_zone *z =
	    &worker.cf->limit_zones[l->limit_conn_zone];
	unsigned char key[KEY_LEN];
	enum store_result r;

	if (worker.store == NULL || !make_key(c, CACHE_NS_LIMIT_CONN,
	    l->limit_conn_zone,
	    key))
		return 0;
	r = store_acquire(worker.store, key, sizeof(key),
	    (unsigned)l->limit_conn, &c->rq->lc_ref);
	if (r == STORE_HIT) {
		c->lc_zone = l->limit_conn_zone;
		return 0;
	}
	if (r == STORE_UNCHANGED) {
		log_info("client %s: limiting connections of zone \"%s\"",
		    c->peer, z->name);
		return z->status;
	}
	log_warn("limit_conn zone \"%s\": store error %d", z->name, (int)r);
	return 0;
}

void
limit_conn_leave(struct conn *c)
{
	if (c->lc_zone < 0)
		return;
	store_release(worker.store, &c->rq->lc_ref);
	c->lc_zone = -1;
}

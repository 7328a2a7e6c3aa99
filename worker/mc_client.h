/*
 * A client of a memcached cluster (an upstream group with protocol =
 * memcached and hash = ketama), for the cache's second level: gets with a
 * short timeout, and sets and deletes sent without waiting.  Each goes to
 * the node of its key on the ring of the nodes that are up; failures
 * count against the node (max_fails, fail_timeout).  Internal to worker/.
 */
#ifndef CORRAL_MC_CLIENT_H
#define CORRAL_MC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

struct mc_call;
struct upstream;

#define MC_GET_KEYS	8		/* the most keys of one get */

/* A key of a get and its value: data NULL for a miss, a timeout or a
 * failure of its node. */
struct mc_value {
	const char *key;
	size_t klen;
	const char *data;
	size_t len;
};

/* The get's answer, v[i] for its key i; valid during the call. */
typedef void (*mc_get_cb)(void *arg, const struct mc_value *v, size_t n);

/*
 * Starts a get of n keys (at most MC_GET_KEYS): one "get k1 k2 ..." to
 * each node that holds some, all at once; cb is called once, later, when
 * every node answered or timed out, unless cancelled.  NULL (and no call)
 * when no node is up or nothing could be started.
 */
struct mc_call *mc_client_get(struct upstream *u, const char *const *keys,
    const size_t *klens, size_t n, int timeout_ms, mc_get_cb cb, void *arg);
/* The get's caller is gone: cb will not be called. */
void mc_client_cancel(struct mc_call *call);

/* Stores plen bytes at pre then vlen at val as one value (with
 * memcached's TTL rules), or deletes, without waiting. */
void mc_client_set(struct upstream *u, const char *key, size_t klen,
    const void *pre, size_t plen, const void *val, size_t vlen, int64_t ttl,
    int timeout_ms);
void mc_client_delete(struct upstream *u, const char *key, size_t klen,
    int timeout_ms);

/* Drops every operation under way (worker exit). */
void mc_client_free_all(void);

#endif

/*
 * The cache: one object format and one key scheme in the shared store
 * (shm/store.h), used by the static files and by the proxy.
 *
 * Keys start with one byte that names their namespace; every user of the
 * store has its own, listed once in CACHE_NAMESPACES below (add yours
 * there).  A stored object is a header (its kind, status, freshness,
 * validators, sizes), then its entity tag, its header lines and its body:
 * static files keep bodies only, proxied responses all of it.  A key of
 * the proxy holds a response, a hit-for-pass marker, or a Vary spec whose
 * generation and field names lead to the variants.
 *
 * For a proxied request, a struct cache_req carries what the cache knows
 * of it: its keys, its lease, the validators of a stale copy, and the
 * response being copied for storing.  The handler (worker/proxy.c) asks
 * at each step:
 *
 *   cache_start       purge, answer from the cache, fetch, or wait;
 *                     or answer with a stale copy and fetch to refresh it
 *   cache_lookup      again, after a wake-up or the lock timeout
 *   cache_intercept   the head came: a 304 that refreshes the stale copy,
 *                     or a 5xx that cache_stale covers, answered here
 *   cache_decide      the head came: store it (copy the body) or pass
 *   cache_copy        body bytes, as relayed
 *   cache_commit      the body is complete: publish it (and a gzip copy)
 *   cache_serve_stale the upstream failed: the stale copy, if allowed
 *
 * Refills are serialised by store leases on an auxiliary key, never
 * stored ('L' or 'W' + the object key), as the store only leases keys that
 * are missing: other requests wait (worker/waitlist.h) under the lease
 * key's token and look again when it ends.  Internal to worker/.
 */
#ifndef CORRAL_CACHE_H
#define CORRAL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/store.h"
#include "worker/http.h"

/* name, first byte of the key, what such a key holds */
#define CACHE_NAMESPACES(X)						\
	X(FILE,		'F', "a static file's bytes: server, device, "	\
	    "inode, size, mtime, path")					\
	X(FILE_GZIP,	'G', "a static file's gzip copy, or a marker: "	\
	    "it does not shrink (the F key's rest)")			\
	X(FILE_BR,	'B', "a static file's brotli copy, or a marker: "	\
	    "it does not shrink (the F key's rest)")			\
	X(URL,		'P', "a proxied response, a hit-for-pass marker "	\
	    "or a Vary spec: host NUL path NUL query")			\
	X(VARIANT,	'V', "a response that varies: the spec's "	\
	    "generation, the URL, the request's values of the fields")	\
	X(GZIP_COPY,	'Z', "the gzip copy of a P or V response (Z, "	\
	    "then that key)")						\
	X(BR_COPY,	'Q', "the brotli copy of a P or V response (Q, "	\
	    "then that key)")						\
	X(URL_LEASE,	'L', "the lease of a P fill (never stored)")	\
	X(VARIANT_LEASE, 'W', "the lease of a V fill (never stored)")	\
	X(TLS_SESSION,	'T', "TLS session state (worker/tls_session.h)")	\
	X(LIMIT_REQ,	'R', "limit_req state: zone, hash of its key")	\
	X(LIMIT_CONN,	'C', "limit_conn holders: zone, hash of its key")	\
	X(MEMCACHED,	'M', "a memcached item (worker/mc_store.h): the "	\
	    "client's key; 'M' alone is the flush_all marker")		\
	X(MEMCACHED_WIN, 'N', "a meta get's win token was handed out: "	\
	    "the item's cas, then its key")				\
	X(MEMCACHED_GZIP, 'Y', "the gzip copy of a memcached item served "	\
	    "over HTTP, or empty (it does not shrink): cas, key")		\
	X(MEMCACHED_BR,	'K', "the brotli copy of a memcached item served "	\
	    "over HTTP, or empty (it does not shrink): cas, key")

enum cache_ns {
#define CACHE_NS_ENUM(name, ch, what)	CACHE_NS_##name = ch,
	CACHE_NAMESPACES(CACHE_NS_ENUM)
#undef CACHE_NS_ENUM
};

struct cache_ns_info {
	const char *name;
	char prefix;
	const char *what;
};
extern const struct cache_ns_info cache_ns_table[];
extern const size_t cache_ns_count;

/* Objects of static files ---------------------------------------------- */

/*
 * A key in namespace ns: its prefix byte, then a and b.  Returns its
 * length, or 0 when it would be over STORE_KEY_MAX.
 */
size_t cache_key(char *key, enum cache_ns ns, const void *a, size_t alen,
    const void *b, size_t blen);

/*
 * Reserves an object of len body bytes under key (kept until replaced);
 * *body is where the caller writes them, without the lock, before
 * store_commit().
 */
enum store_result cache_body_reserve(struct store *s, const void *key,
    size_t klen, size_t len, struct store_wref *w, char **body);

/* The largest body an object of max_object bytes has room for. */
uint64_t cache_body_max(uint64_t max_object);

/* Stores len body bytes as an object under key. */
enum store_result cache_body_set(struct store *s, const void *key,
    size_t klen, const void *body, size_t len);

/* Stores a marker: there is nothing worth keeping under key. */
enum store_result cache_nothing_set(struct store *s, const void *key,
    size_t klen);

/*
 * The body of a pinned object: 1 with its offset in the value and its
 * length, 0 for a marker, -1 when the value is no object of ours.
 */
int cache_body_of(const struct store_ref *ref, size_t *off, size_t *len);

/* Proxied requests ------------------------------------------------------ */

struct conn;
struct config_location;
struct http_header;
struct http_request;
struct http_response;
struct cache_req;

enum cache_verdict {
	CACHE_ANSWERED,			/* the response is queued */
	CACHE_FETCH,			/* go to the upstream */
	CACHE_WAIT,			/* another request fills the key */
	CACHE_REFRESH,			/* a stale copy is queued: fetch to
					   refresh it, relaying nothing */
};

/* The cache's part of a request under l; NULL when l does not cache. */
struct cache_req *cache_req_new(struct conn *c,
    const struct config_location *l);

/* Lets go of its lease and of a copy under way, and frees it. */
void cache_req_free(struct cache_req *cr);

/* Frees what is kept for reuse; at exit. */
void cache_req_free_all(void);

/*
 * A new request: answers a PURGE or a fresh hit, else says whether to
 * fetch or to wait for the filler.  r is the client's request; the cache
 * reads its fields (for Vary) until told otherwise by cache_request().
 */
enum cache_verdict cache_start(struct cache_req *cr,
    const struct http_request *r);

/*
 * Where the request's fields are from now on: the handler's copy, made
 * when the client's buffer moves on; NULL when nothing will be stored
 * (!cache_fills()).
 */
void cache_request(struct cache_req *cr, const struct http_request *r);

/*
 * Looks again, after a wake-up or when the lock timed out (then a request
 * that would wait fetches without storing).
 */
enum cache_verdict cache_lookup(struct cache_req *cr, bool lock_timed_out);

/* CACHE_WAIT: the token to wait under (see worker/waitlist.h). */
uint64_t cache_wait_token(const struct cache_req *cr);

/*
 * CACHE_REFRESH was said: the client has its answer, the exchange only
 * refreshes the cache (the handler relays nothing, the cache answers
 * nothing).
 */
bool cache_refreshing(const struct cache_req *cr);

/*
 * The second level (cache { l2 = ... }, worker/cache_l2.c): whether this
 * miss, which fills the key, asks the cluster first; the get (NULL when no
 * node is up: fetch), which asks for the URL's variant too when the URL
 * is not here (one round trip when its Vary names are ones seen lately);
 * and its answer, stored here and the lease ended (false when it is not a
 * fresh object: fetch).
 */
struct mc_call;
struct mc_value;
bool cache_l2_wanted(const struct cache_req *cr);
struct mc_call *cache_l2_get(struct cache_req *cr,
    void (*cb)(void *arg, const struct mc_value *v, size_t n), void *arg);
bool cache_l2_fill(struct cache_req *cr, const struct mc_value *v,
    size_t n);

/* The response may be stored: the handler keeps a copy of the request's
 * fields for cache_decide, and fetches a HEAD as GET. */
bool cache_fills(const struct cache_req *cr);

/*
 * The cache, not the upstream, answers the client's preconditions, Range
 * and HEAD: the upstream gets a plain GET (a lookup that fills).
 */
bool cache_mediates(const struct cache_req *cr);

/* Fields the handler must not forward: preconditions the cache answers. */
bool cache_hides_field(const struct cache_req *cr, struct span name);

/*
 * The request goes upstream now: the stale copy's validators to send
 * (If-None-Match, If-Modified-Since) into out (room for 2), their values
 * in buf; returns how many.
 */
size_t cache_validators(struct cache_req *cr, struct http_header *out,
    char *buf, size_t size);

/*
 * The head came.  True when the cache answered instead: a 304 refreshed
 * the stale copy, or a 5xx that cache_stale covers served it.  peer names
 * the upstream for the log.
 */
bool cache_intercept(struct cache_req *cr, const struct http_response *resp,
    const char *peer);

/*
 * Decides whether the response is stored (then its body is copied as it
 * is relayed) or marks the URL hit-for-pass; after an unsafe method, drops
 * the URL.
 */
void cache_decide(struct cache_req *cr, const struct http_response *resp);

/* True while the body is copied for storing (it must come decoded). */
bool cache_storing(const struct cache_req *cr);

/* True when corral states X-Cache itself: an upstream's is dropped. */
bool cache_states_x_cache(const struct cache_req *cr);

/* Lines to add to the relayed head: X-Cache, and Vary when a gzip copy
 * will be made. */
void cache_head_lines(const struct cache_req *cr, struct conn *c);

/* Payload bytes of the body, as relayed. */
void cache_copy(struct cache_req *cr, const char *p, size_t len);

/* The body is complete: publishes it. */
void cache_commit(struct cache_req *cr);

/*
 * The upstream failed with status (502, 504) before the head: answers with
 * the stale copy when cache_stale allows; false when it did not.
 */
bool cache_serve_stale(struct cache_req *cr, int status);

#endif

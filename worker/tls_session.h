/*
 * TLS session resumption in any worker: TLS 1.2 session IDs (and TLS 1.3
 * stateful tickets, when tickets are off) in a shared store under the key
 * namespace CACHE_NS_TLS_SESSION (worker/cache.h), with the store's TTL set to the session's
 * timeout; and stateless tickets sealed with the master's shared keys
 * (shm/tls_keys.h).  A worker keeps the sessions it decoded, and takes
 * one from there while the store still has its ID.
 */
#ifndef CORRAL_TLS_SESSION_H
#define CORRAL_TLS_SESSION_H

struct config_tls;
struct ssl_ctx_st;
struct store;
struct tls_keys;

/*
 * Sets up resumption on ctx: the session cache in sessions (may be NULL:
 * no cache), tickets with keys (may be NULL: no tickets).  0 or -1.
 */
int tls_session_setup(struct ssl_ctx_st *ctx, const struct config_tls *t,
    struct store *sessions, struct tls_keys *keys);

#endif

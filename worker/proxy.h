/*
 * The reverse proxy: requests under a location with "proxy" go to an
 * upstream group (worker/upstream.h) in its protocol (upstream_proto.h),
 * through the cache (cache.h) when the location has one; the response
 * streams back to the client as it arrives.  Internal to worker/.
 */
#ifndef CORRAL_PROXY_H
#define CORRAL_PROXY_H

#include <stdbool.h>
#include <stddef.h>

struct conn;
struct config_location;
struct proxy;

/*
 * Starts the current request of c under location l, which has a proxy.
 * Returns 0 when it was answered at once (from the cache, or a PURGE):
 * *pxp is NULL and the response is queued.  Returns 1 when *pxp is set:
 * the request header was copied, so the input buffer may move on, and
 * the response, or an error, comes later through conn_proxy_done() (the
 * request may first wait for another one to fill the cache).  Returns -1
 * when memory ran out.
 */
int proxy_start(struct conn *c, const struct config_location *l,
    struct proxy **pxp);

/* How many more request body bytes the proxy takes now; 0: pause. */
size_t proxy_body_room(const struct proxy *px);

/*
 * Hands over decoded request body bytes; last is set with the final ones
 * (len may then be 0).
 */
void proxy_body(struct proxy *px, const char *p, size_t len, bool last);

/* The client's output queue is empty: reading the upstream may resume. */
void proxy_drained(struct proxy *px);

/*
 * Gives up: closes the upstream connection and frees px.  Returns true
 * when the response header had gone to the client already.
 */
bool proxy_cancel(struct proxy *px);

/* Closes pooled upstream connections and frees everything; at exit. */
void proxy_free_all(void);

#endif

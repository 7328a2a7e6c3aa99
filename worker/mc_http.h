/*
 * Serving the memcached listener's items over HTTP (memcached_key in a
 * location without a memcached upstream).  Internal to worker/.
 */
#ifndef CORRAL_MC_HTTP_H
#define CORRAL_MC_HTTP_H

#include <stddef.h>

struct conn;
struct config_location;

/* Answers the request with the item of the location's key, or 404. */
void mc_http_serve(struct conn *c, const struct config_location *l);

/* The key of a URI as nginx escapes it for memcached (space, control
 * bytes and '%' as %XX); 0 when it is over 250 bytes. */
size_t mc_http_key(const char *p, size_t len, char *key);

/*
 * The key of location l for request r of c (path: its URI normalised):
 * memcached_key expanded with the request's own values ($uri is the
 * normalised path, $args its query; rewrites do not change it), escaped
 * as above; 0 when it does not fit.  The same for the listener's items
 * and for a memcached upstream, whenever it is asked.
 */
struct http_request;
size_t mc_http_request_key(const struct conn *c,
    const struct config_location *l, const struct http_request *r,
    const char *path, size_t plen, char *key);

#endif

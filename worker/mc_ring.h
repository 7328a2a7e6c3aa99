/*
 * The ketama ring of a memcached cluster, as libmemcached builds it with
 * MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (libketama's, which PHP's
 * OPT_LIBKETAMA_COMPATIBLE and other libmemcached clients use): each
 * live server gets 160 points per equal share of weight, 4 from each MD5
 * of "host:port-N" (the port left out when it is 11211), and a key goes
 * to the first point at or after the first 4 bytes of its MD5.  Servers
 * that are down are left out of the ring, so their keys move to the next
 * point, exactly as such clients move them when they eject a server.
 */
#ifndef CORRAL_MC_RING_H
#define CORRAL_MC_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config_peer;
struct mc_ring;

/* A ring of the peers whose live[i] is true (live NULL: all); NULL when
 * memory runs out.  An empty ring picks nothing. */
struct mc_ring *mc_ring_build(const struct config_peer *peers, size_t n,
    const bool *live);
void mc_ring_free(struct mc_ring *r);

/* The peer of a key, or -1 when no peer is live. */
int mc_ring_pick(const struct mc_ring *r, const char *key, size_t klen);

/* libmemcached's MD5 hash of a key (hashkit_md5). */
uint32_t mc_ketama_hash(const char *key, size_t klen);

#endif

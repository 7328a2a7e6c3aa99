/*
 * Upstream groups, as one worker sees them: the peers of each group with
 * their smooth weighted round-robin state and failure counts, a LIFO pool
 * of idle keep-alive connections per group, and non-blocking connects over
 * TCP or unix sockets.  Nothing here knows a protocol: HTTP, FastCGI and
 * whatever comes next use the same peers and pools.  The state is per
 * worker (no locks, no sharing); it is built from worker.cf on first use.
 *
 * Peer choice follows nginx: each pick adds every usable peer's weight to
 * its current value, takes the peer with the highest, and subtracts the
 * total from it, so weights 5,1,1 give a a b a c a a.  A peer that fails
 * max_fails times within fail_timeout is left out for fail_timeout; when
 * all are out, all are used.
 *
 * The exchange driver that runs one request over these connections is in
 * worker/upstream_conn.h.  Internal to worker/.
 */
#ifndef CORRAL_UPSTREAM_H
#define CORRAL_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

struct config_upstream;
struct upstream;		/* one group */
struct upstream_peer;		/* one server of a group */

/*
 * Builds the state of every group of worker.cf, completely, before it is
 * published: false (and nothing published) when memory ran out.  Does
 * nothing when it is built already.
 */
bool upstream_init(void);

/* Group number i of the config, or NULL (not built, or out of range). */
struct upstream *upstream_group(size_t i);

const struct config_upstream *upstream_config(const struct upstream *u);

/* The next peer by smooth weighted round-robin, among those that are up. */
struct upstream_peer *upstream_pick(struct upstream *u);

/* As written in the config: "127.0.0.1:9000", "unix:/run/app.sock". */
const char *upstream_peer_name(const struct upstream_peer *p);

/* The peer as a Host value: its address, or "localhost" for a socket. */
const char *upstream_peer_host(const struct upstream_peer *p);

/* Counts a failure; enough of them within fail_timeout take p out. */
void upstream_peer_failed(struct upstream *u, struct upstream_peer *p);

/* p answered: its failures are forgiven. */
void upstream_peer_ok(struct upstream_peer *p);

/*
 * The newest idle connection to p that the peer has not closed (checked
 * with a MSG_PEEK), or -1.  Connections found closed are dropped.
 */
int upstream_pool_get(struct upstream *u, struct upstream_peer *p);

/* Keeps fd idle for p; the least recently used one goes when full. */
void upstream_pool_put(struct upstream *u, struct upstream_peer *p, int fd);

/*
 * A non-blocking socket to p with connect() started, or -1 (errno set)
 * when there is no socket.  *err is set to the errno of a connect() that
 * failed at once, else 0; either way the caller waits for writability and
 * reads SO_ERROR, so both failures are reported the same way.
 */
int upstream_connect(const struct upstream_peer *p, int *err);

/* Closes every pooled connection and frees the groups; at exit. */
void upstream_free_all(void);

#endif

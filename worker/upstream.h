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
 * The second half (worker/upstream_conn.c) drives one exchange over such
 * a connection for a handler: connect with connect_timeout, send with
 * send_timeout, read with read_timeout between two reads once the request
 * is sent, replay an idempotent request once on a new connection when a
 * reused one failed before any byte came back, send it to another peer
 * when its peer failed before answering (next_upstream), and pool the
 * connection
 * when the exchange ended cleanly.  The bytes are a protocol module's
 * (worker/upstream_proto.h).  Internal to worker/.
 */
#ifndef CORRAL_UPSTREAM_H
#define CORRAL_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config_upstream;
struct http_response;
struct ssl_st;
struct upstream_proto;
struct upstream_request;
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

/*
 * next_upstream: the next peer by the same round-robin among those that
 * are up and not in tried (bits from upstream_peer_bit()), or NULL.
 */
struct upstream_peer *upstream_pick_next(struct upstream *u, uint64_t tried);
uint64_t upstream_peer_bit(const struct upstream *u,
    const struct upstream_peer *p);

/*
 * hash = ketama: the peer of key on the ring of the peers that are up
 * (worker/mc_ring.h), NULL when none is; otherwise upstream_pick().
 */
struct upstream_peer *upstream_pick_key(struct upstream *u, const char *key,
    size_t klen);
/* Whether any peer of u is up now. */
bool upstream_any_up(const struct upstream *u);

/* As written in the config: "127.0.0.1:9000", "unix:/run/app.sock". */
const char *upstream_peer_name(const struct upstream_peer *p);

/* The peer as a Host value: its address, or "localhost" for a socket. */
const char *upstream_peer_host(const struct upstream_peer *p);

/* Counts a failure; enough of them within fail_timeout take p out. */
void upstream_peer_failed(struct upstream *u, struct upstream_peer *p);

/* The counters' row of p (shm/stats.h). */
struct stats_peer_row *upstream_peer_stats(const struct upstream *u,
    const struct upstream_peer *p);

/* p answered: its failures are forgiven. */
void upstream_peer_ok(struct upstream_peer *p);

/*
 * A connection to a peer, from connect to close: its socket, TLS session
 * and events (worker/upstream_conn.c).  It stays registered for reading
 * all its life, also while it idles in the pool.
 */
struct upstream_link;

int upstream_link_fd(const struct upstream_link *l);
/* Closes it (close_notify when clean) and frees it. */
void upstream_link_close(struct upstream_link *l, bool clean);

/*
 * For a user with events of its own (worker/mc_client.c), plain sockets
 * only.  adopt: fd as a connection watched for reading (NULL: out of
 * memory), to pool; release: frees l but leaves its fd open.  Watch the
 * fd yourself before either, and stop after: libevent then counts two
 * readers of one fd for a moment and makes no epoll_ctl().
 */
struct upstream_link *upstream_link_adopt(struct upstream *u, int fd);
void upstream_link_release(struct upstream_link *l);

/*
 * The newest idle connection to p, or NULL.  With check, one the peer has
 * not closed (a MSG_PEEK; connections found closed are closed): for a
 * request that cannot be retried.
 */
struct upstream_link *upstream_pool_get(struct upstream *u,
    struct upstream_peer *p, bool check);

/*
 * Keeps l idle for p; the least recently used one is closed when full.
 * False (l untouched: close it) when the group keeps no idle connections.
 */
bool upstream_pool_put(struct upstream *u, struct upstream_peer *p,
    struct upstream_link *l);

/* Takes l out of the pool (the peer closed it); the caller closes it. */
void upstream_pool_drop(struct upstream *u, struct upstream_link *l);

/*
 * A non-blocking socket to p with connect() started, or -1 (errno set)
 * when there is no socket.  *err is set to the errno of a connect() that
 * failed at once, else 0; either way the caller waits for writability and
 * reads SO_ERROR, so both failures are reported the same way.
 */
int upstream_connect(const struct upstream_peer *p, int *err);

/* Whether exchanges with p go over TLS ("https://", tls = on). */
bool upstream_peer_tls(const struct upstream *u,
    const struct upstream_peer *p);

/*
 * A client session on fd, connected to p: SNI, the name or address its
 * certificate is checked against, and p's last session to resume.  NULL
 * (logged) on failure.
 */
struct ssl_st *upstream_tls_new(struct upstream *u, struct upstream_peer *p,
    int fd);

/*
 * Drives the handshake: 0 when done, TLS_WANT_READ / TLS_WANT_WRITE
 * (worker/tls.h), or TLS_FAILED with why (a certificate that does not
 * verify, ...).
 */
int upstream_tls_handshake(struct ssl_st *ssl, char *why, size_t len);

/* Frees a session (NULL: nothing), with close_notify when clean. */
void upstream_tls_close(struct ssl_st *ssl, bool clean);

/* Closes every pooled connection and frees the groups; at exit. */
void upstream_free_all(void);

/* Exchanges ---------------------------------------------------------- */

struct upstream_conn;		/* one exchange, on one connection */

/*
 * What the driver tells the handler.  A callback that closed the exchange
 * (upstream_conn_close) returns false, and the driver leaves it alone.
 */
struct upstream_handler {
	/*
	 * An interim (1xx) response head, before the final one; may be
	 * NULL.  False when the handler closed the exchange.
	 */
	bool (*interim)(void *arg, const struct http_response *r);
	/*
	 * The final response head (its spans valid during the call).  Set
	 * *decode to get payload bytes only (see upstream_proto.h).
	 */
	bool (*head)(void *arg, const struct http_response *r, bool *decode);
	/*
	 * Body bytes p[0..len), which the handler may rewrite.  With last
	 * the response is complete and its connection pooled or closed
	 * already: the handler closes the exchange inside the call.
	 */
	bool (*body)(void *arg, char *p, size_t len, bool last);
	/*
	 * The exchange failed and was logged: 502 (refused, broken,
	 * malformed, cut short) or 504 (timed out).  The handler closes it.
	 */
	void (*error)(void *arg, int status);
	/* The request is sent so far: more of its body may come. */
	void (*sent)(void *arg);
};

/*
 * Starts an exchange with a peer of u: builds the request from rq (valid
 * during the call only), then sends it on a pooled connection or a new
 * one.  NULL with *status set when it cannot start: 502, or the status a
 * module answers with (see request_head).
 */
struct upstream_conn *upstream_conn_open(struct upstream *u,
    const struct upstream_proto *proto, const struct upstream_request *rq,
    const struct upstream_handler *h, void *arg, int *status);

/* Request body bytes as they come from the client; last with the end. */
void upstream_conn_body(struct upstream_conn *uc, const char *p, size_t len,
    bool last);

/* How many body bytes the exchange takes now; 0: wait for sent(). */
size_t upstream_conn_body_room(const struct upstream_conn *uc);

/* Stops reading the response (the client is behind), and goes on. */
void upstream_conn_pause(struct upstream_conn *uc);
void upstream_conn_resume(struct upstream_conn *uc);

/*
 * Ends the exchange and frees it.  The connection is pooled when the
 * exchange is complete and clean (or the rest of the response is already
 * in and complete, e.g. a 304 the handler answered from the cache),
 * else closed.
 */
void upstream_conn_close(struct upstream_conn *uc);

/* As written in the config, for the handler's log lines. */
const char *upstream_conn_peer_name(const struct upstream_conn *uc);

/* Frees the exchanges kept for reuse; at exit. */
void upstream_conn_free_all(void);

#endif

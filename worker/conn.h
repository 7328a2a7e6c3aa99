/*
 * Client connections inside a worker: reading and parsing requests,
 * routing them, and queueing responses that leave in as few writes as
 * possible.  Internal to worker/.
 */
#ifndef CORRAL_CONN_H
#define CORRAL_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <event2/event.h>

#include "worker/http.h"

struct config;
struct config_server;
struct runtime;
struct conn;
struct fentry;
struct fcache;
struct pin;
struct proxy;
struct store;
struct store_ref;

/* One per worker process; set up by worker_main(). */
struct worker {
	struct event_base *base;
	const struct runtime *rt;
	const struct config *cf;
	int slot;
	bool quitting;			/* graceful stop: no new requests */
	unsigned nconns;

	struct http_limits limits;
	struct http_header *headers;	/* parse scratch, cf->max_headers */
	struct fcache *fcache;
	struct store *store;		/* NULL when the cache is off */

	/* "Server: ...\r\nDate: ...\r\n", rebuilt once a second. */
	time_t now;
	uint64_t now_ms;
	uint64_t now_us;		/* the same, in microseconds */
	char common[128];
	size_t common_len;
	char log_time[32];		/* "30/Nov/2026:08:00:00 +0000" */
	const char *server_line;
	size_t server_line_len;
};

extern struct worker worker;

/* Called by conn.c when a connection is gone. */
void worker_conn_closed(void);

/* Called by conn.c when a connection starts waiting between requests. */
void worker_conn_idle(void);

/* Refreshes the cached clock and the Date header if a second has passed. */
void worker_update_time(void);

/* Sets up the connections' timers; at worker start.  False when out of
 * memory. */
bool conn_init(void);

/* Takes over an accepted socket; closes it on failure. */
void conn_accept(int fd, const struct sockaddr *sa, socklen_t salen,
    int listen_idx);

/*
 * Graceful stop: closes keep-alive connections that are idle, after a
 * short grace for those that just finished a response, whose client may
 * already be sending the next request.
 */
void conn_quit_idle(void);

/*
 * Out of worker_connections: closes the oldest idle keep-alive
 * connection, as nginx does; false when none is idle.
 */
bool conn_reuse_idle(void);

/* Reopens the access logs by path (log rotation). */
void access_log_reopen(void);

/* Closes every connection and frees what connections use; at exit. */
void conn_close_all(void);

/* Sets up the access log buffers; at worker start. */
void access_log_init(void);

/* Writes out buffered access log lines. */
void access_log_flush(void);

/* Writes what is buffered and frees the buffers; at exit. */
void access_log_close(void);

/* The request being answered. */
const struct http_request *conn_req(const struct conn *c);

/* True when the request is HEAD (no body goes out). */
bool resp_is_head(const struct conn *c);

/* The connection closes after this response (body without a length). */
void resp_no_keepalive(struct conn *c);

/*
 * For the proxy (worker/proxy.c), whose responses come later than the
 * request.  While a proxied response is in flight, requests pipelined
 * behind it wait, and the connection is neither idle nor closed when its
 * output drains: proxy_drained() is called instead.
 */

/* The server block the request went to (chosen by Host). */
const struct config_server *conn_server(const struct conn *c);

/* The client's address, for logs and X-Forwarded-For. */
const char *conn_peer(const struct conn *c);

/* The client's port. */
unsigned conn_peer_port(const struct conn *c);

/*
 * When the request came through a trusted proxy (real_ip_from), that
 * proxy's address (the connection's peer); NULL otherwise.  conn_peer()
 * is then the client it named, when it named one.
 */
const char *conn_via_trusted(const struct conn *c);

/*
 * The address and port the connection came in on, as text (for CGI's
 * SERVER_ADDR): the listen entry's, or getsockname()'s for a wildcard.
 */
bool conn_local(const struct conn *c, char *addr, size_t size,
    unsigned *port);

/* The connection is HTTPS. */
bool conn_tls(const struct conn *c);

/* File bytes leave with sendfile(): sendfile is on and the connection is
 * plain or has kernel TLS. */
bool conn_sendfile(const struct conn *c);

/*
 * Copies what the access log needs (method, target, Host, Referer,
 * User-Agent) out of the input buffer into buf, which must live until the
 * response is done, and points the request at it.  hdrs has room for two
 * fields.
 */
void conn_save_request(struct conn *c, char *buf, size_t size,
    struct http_header *hdrs);

/* Output bytes held in the connection's buffer (sent or not). */
size_t conn_out_buffered(const struct conn *c);

/* Writes what is queued; false when that closed the connection. */
bool conn_flush(struct conn *c);

/*
 * Writes what is queued once, copying the lent bytes the socket did not
 * take (resp_body_lend()); the rest goes, or a failure closes the
 * connection, at its next write.
 */
void conn_send_lent(struct conn *c);

/* The proxy can take request body bytes again. */
void conn_body_resume(struct conn *c);

/* The proxied response is complete (or answered with an error). */
void conn_proxy_done(struct conn *c);
/* The exchange ended in status, for the location's error_page to answer
 * (which may start another exchange); nothing of it went out. */
void conn_proxy_error(struct conn *c, int status);

/* Closes the connection at once, the response unfinished. */
void conn_abort(struct conn *c);

/*
 * For the access log ($upstream_*): the peer that answered the request
 * (or the last that failed),
 * its status, and the times to connect and to its response header in
 * microseconds (-1: not known).  addr must live as long as the config.
 */
void conn_log_upstream(struct conn *c, const char *addr, int status,
    int64_t connect_us, int64_t response_us);

/*
 * The server last given to conn_log_upstream() failed and the request
 * goes to another (next_upstream): its values join the earlier servers',
 * which the log lists first, as nginx does (at most CONN_LOG_TRIES).
 */
void conn_log_upstream_next(struct conn *c);

/* For $upstream_cache_status: "HIT", "MISS", ... (a static string). */
void conn_log_cache(struct conn *c, const char *status);

/* For $ssl_protocol: the TLS version of the connection (static), or
 * NULL (plain HTTP, or before the handshake is done). */
const char *conn_tls_protocol(const struct conn *c);

#endif

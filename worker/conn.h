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
	char common[128];
	size_t common_len;
	char log_time[32];		/* "30/Nov/2026:08:00:00 +0000" */
	const char *server_line;
	size_t server_line_len;

	struct conn *idle_head;		/* connections waiting between
					   requests, for graceful stop */
};

extern struct worker worker;

/* Called by conn.c when a connection is gone. */
void worker_conn_closed(void);

/* Refreshes the cached clock and the Date header if a second has passed. */
void worker_update_time(void);

/* Takes over an accepted socket; closes it on failure. */
void conn_accept(int fd, const struct sockaddr *sa, socklen_t salen,
    int listen_idx);

/*
 * Graceful stop: closes keep-alive connections that are idle, after a
 * short grace for those that just finished a response, whose client may
 * already be sending the next request.
 */
void conn_quit_idle(void);

/* Reopens the access logs by path (log rotation). */
void access_log_reopen(void);

/* Closes every connection and frees what connections use; at exit. */
void conn_close_all(void);

/* Sets up the access log buffers; at worker start. */
void access_log_init(void);

/* Writes out buffered access log lines. */
void access_log_flush(void);

/* The request being answered. */
const struct http_request *conn_req(const struct conn *c);

/* Starts a response: status line, Server and Date. */
void resp_status(struct conn *c, int status);

/* Only the status line, with a reason phrase of len bytes (an upstream's). */
void resp_status_reason(struct conn *c, int status, const char *reason,
    size_t len);

/* Adds ready-made header lines ("Name: value\r\n..."). */
void resp_header(struct conn *c, const char *lines, size_t len);

/* Adds the line "<name><v>\r\n"; name has len bytes and ends in ": ". */
void resp_header_u64(struct conn *c, const char *name, size_t len,
    uint64_t v);

/* Adds one formatted header line; fmt has no CRLF. */
void resp_headerf(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Ends the header block with Content-Length (when len >= 0) and the
 * Connection field.  For HEAD and 304 the caller pushes no body.
 */
void resp_end_headers(struct conn *c, int64_t len);

/* Queues body bytes; they must stay valid until ref is released. */
void resp_body_mem(struct conn *c, const void *p, size_t len,
    struct fentry *ref);

/* Queues part of an open file, sent with sendfile (or read+write). */
void resp_body_file(struct conn *c, struct fentry *ref, int fd, off_t off,
    off_t len);

/* Wraps a pinned store value so queued segments can share it. */
struct pin *pin_take(const struct store_ref *ref);

/* Drops one use of a pin; the last one releases the store value. */
void pin_put(struct pin *p);

/* Queues bytes of a pinned store value; the pin is released once sent. */
void resp_body_pin(struct conn *c, struct pin *p, size_t off, size_t len);

/* Gives up on a response whose headers are queued: close after them. */
void resp_abort(struct conn *c);

/* Copies small body bytes into the output buffer. */
void resp_body_copy(struct conn *c, const void *p, size_t len);

/* A representation that Range requests may address. */
#define RESP_RANGES_MAX	16	/* keeps a response within its segments */
struct resp_rep {
	const char *lines;		/* its header lines, Content-Type too */
	size_t len;
	const char *extra;		/* lines about this answer (Age) */
	size_t elen;
	const char *type;		/* its Content-Type, for the parts */
	size_t tlen;
	const char *etag;		/* quoted, for If-Range; or len 0 */
	size_t etag_len;
	time_t mtime;			/* Last-Modified, or -1 */
	uint64_t size;
	int max_ranges;
	/* Queues len bytes of the body from off. */
	void (*part)(struct conn *c, void *arg, uint64_t off, uint64_t len);
	void *arg;
};

/*
 * Answers the Range of r (its If-Range too) from rep: 206 with one part or
 * multipart/byteranges, or 416.  False when the answer is the whole
 * representation: no Range, neither GET nor HEAD, If-Range not matched, or
 * a Range that is to be ignored.
 */
bool resp_range(struct conn *c, const struct http_request *r,
    const struct resp_rep *rep);

/* A complete error response with a small HTML body. */
void resp_error(struct conn *c, int status);

/* The same, with extra ready-made header lines. */
void resp_error_hdr(struct conn *c, int status, const char *lines,
    size_t len);

/* Records what the access log needs once the response is queued. */
void resp_done(struct conn *c, int status, uint64_t body_bytes);

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

/* The client's address, for logs and X-Forwarded-For. */
const char *conn_peer(const struct conn *c);

/*
 * Copies what the access log needs (method, target, Referer, User-Agent)
 * out of the input buffer into buf, which must live until the response is
 * done, and points the request at it.  hdrs has room for two fields.
 */
void conn_save_request(struct conn *c, char *buf, size_t size,
    struct http_header *hdrs);

/* Output bytes held in the connection's buffer (sent or not). */
size_t conn_out_buffered(const struct conn *c);

/* Writes what is queued; false when that closed the connection. */
bool conn_flush(struct conn *c);

/* The proxy can take request body bytes again. */
void conn_body_resume(struct conn *c);

/* The proxied response is complete (or answered with an error). */
void conn_proxy_done(struct conn *c);

/* Closes the connection at once, the response unfinished. */
void conn_abort(struct conn *c);

#endif

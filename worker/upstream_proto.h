/*
 * Upstream protocols: the bytes of one exchange with an application server,
 * as the upstream driver (worker/upstream.h, upstream_conn.c) asks for them.
 *
 * The driver owns the connection: it picks the peer, takes a pooled
 * connection or connects (TCP or unix socket), writes the bytes the module
 * produced, reads the response into its buffer, times every step out, and
 * replays the request once on a new connection when a reused one failed
 * before answering.  The module owns the bytes: it writes the request
 * (head, then body framing as the body streams), parses the response head
 * into a struct http_response, decodes the body, and says whether the
 * connection may carry another exchange.  It does no I/O and keeps its
 * state in ctx: ctx_size bytes, zeroed by the driver for each exchange.
 * The handler (worker/proxy.c) sees only struct http_response and body
 * bytes, so its header rules, the cache and the relay to the client are
 * the same for every protocol (nginx: ngx_http_upstream.c drives,
 * ngx_http_proxy_module.c and ngx_http_fastcgi_module.c fill in
 * create_request, process_header and input_filter).
 *
 * How a protocol plugs in (FastCGI, memcached, ...):
 *  1. worker/proto_NAME.c defines a const struct upstream_proto with the
 *     callbacks below and is declared at the end of this header.
 *  2. upstream_proto_for() returns it for the groups whose config names
 *     it (config_upstream's protocol).
 *  3. Nothing else changes.  The request it builds comes from the
 *     client's request through the handler's header rules (rq->keep) plus
 *     the fields the handler adds (rq->add); the head it parses may live
 *     in the module's own memory (its spans need to stay valid until the
 *     next callback or done()); body bytes are decoded in place.
 *
 * Call order for one exchange: request_head, then request_body for each
 * piece of a request body (the last one with last set; none at all when
 * the request has no body), response_head until it says HTTP_OK, then
 * body_init and response_body until HTTP_OK (or response_eof when the peer
 * closes first), reusable, and done (always, also after errors and
 * cancels).  request_head runs again when the driver replays the request.
 */
#ifndef CORRAL_UPSTREAM_PROTO_H
#define CORRAL_UPSTREAM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"

struct config_location;
struct config_upstream;
struct conn;
struct fcgi_prep;
struct http_response;
struct upstream_conn;
struct upstream_peer;

/* A growable output buffer: the request bytes, as the driver sends them. */
struct upstream_buf {
	char *p;
	size_t size;			/* allocated */
	size_t len;			/* written */
};

/* Room for n more bytes at p + len, or NULL (out of memory). */
char *upstream_buf_grow(struct upstream_buf *b, size_t n);

static inline char *
upstream_buf_reserve(struct upstream_buf *b, size_t n)
{
	return b->size - b->len >= n ? b->p + b->len : upstream_buf_grow(b, n);
}

/*
 * Appends n bytes; false when out of memory.  Inline: a request head is
 * some twenty small appends, most of them of constant length, which the
 * compiler then copies without a call.
 */
static inline bool
upstream_buf_add(struct upstream_buf *b, const void *p, size_t n)
{
	char *at;

	if (n == 0)
		return true;
	if ((at = upstream_buf_reserve(b, n)) == NULL)
		return false;
	memcpy(at, p, n);
	b->len += n;
	return true;
}

/* Appends a NUL-terminated string, or a span. */
static inline bool
upstream_buf_str(struct upstream_buf *b, const char *s)
{
	return upstream_buf_add(b, s, strlen(s));
}

static inline bool
upstream_buf_span(struct upstream_buf *b, struct span s)
{
	return upstream_buf_add(b, s.p, s.len);
}

/* What the handler asks for: the client's request after its rules. */
struct upstream_request {
	const struct http_request *r;	/* the client's request; its spans
					   are valid during request_head */
	struct span method;		/* to ask for (GET for a HEAD that
					   fills the cache) */
	bool no_body;			/* no response body will come (HEAD) */
	bool idempotent;		/* may be sent twice (RFC 9110 9.2.2) */
	/* The handler's header rules: whether field h is passed on. */
	bool (*keep)(const struct upstream_request *rq,
	    const struct http_header *h);
	void *arg;			/* for keep */
	const struct http_header *add;	/* fields the handler adds */
	size_t nadd;
	struct conn *c;			/* the client's connection */
	const struct config_location *loc;
	const struct config_upstream *up;
	const struct fcgi_prep *fcgi;	/* FastCGI: fcgi_params_prepare() */
};

struct upstream_proto {
	const char *name;		/* for the logs: "http", "fastcgi" */
	size_t ctx_size;		/* state per exchange, zeroed */

	/*
	 * Writes the request head to out (all of a request that has no
	 * body: the module sees no request_body call then).  Returns 0, or
	 * an HTTP status to answer instead, before any connection is made
	 * (a FastCGI script that does not exist: 404).
	 */
	int (*request_head)(struct upstream_conn *uc, void *ctx,
	    const struct upstream_request *rq, struct upstream_buf *out);

	/* Frames len body bytes at p; last with the final ones (len may be
	 * 0).  False when out of memory. */
	bool (*request_body)(void *ctx, const char *p, size_t len, bool last,
	    struct upstream_buf *out);

	/*
	 * Parses the response head from buf[0..len), which the module may
	 * rewrite in place; the driver keeps what it left and appends.
	 * *consumed is how many bytes of buf the module is done with (also
	 * with HTTP_AGAIN: the driver drops them).  Returns HTTP_OK with *r
	 * filled (a status under 200 is an interim response: the driver
	 * drops it and asks again), HTTP_AGAIN for more bytes, HTTP_ERROR
	 * with *why for the log (502).  The driver's buffer holds up to
	 * max_header_size unconsumed bytes.
	 */
	int (*response_head)(struct upstream_conn *uc, void *ctx, char *buf,
	    size_t len, size_t *consumed, struct http_response *r,
	    const char **why);

	/*
	 * The body of the head just parsed begins.  decode asks for payload
	 * bytes only; without it HTTP's chunked framing stays in the bytes
	 * (relayed as is).  A module whose framing means nothing to an HTTP
	 * client always decodes, and reports HTTP_BODY_LENGTH or
	 * HTTP_BODY_UNTIL_CLOSE (with r->close false: the module, not the
	 * connection, ends it) in the head.
	 */
	void (*body_init)(void *ctx, const struct http_response *r,
	    bool decode);

	/*
	 * Consumes body bytes buf[0..*len): on return *len is how many
	 * belonged to the response and *data how many payload bytes they
	 * hold, moved to buf[0..*data) when decoding.  Called for every
	 * response, even one without a body (it may still have to read to
	 * its protocol's end).  HTTP_OK: complete; HTTP_AGAIN: more;
	 * HTTP_ERROR: malformed (502, never stored).
	 */
	int (*response_body)(struct upstream_conn *uc, void *ctx, char *buf,
	    size_t *len, size_t *data);

	/* The peer closed: HTTP_OK when that ends the body cleanly (read
	 * until close), HTTP_ERROR when the response was cut short. */
	int (*response_eof)(void *ctx);

	/* After HTTP_OK: may the connection carry another exchange? */
	bool (*reusable)(void *ctx);

	/* Frees what the module holds for the exchange; may be NULL. */
	void (*done)(void *ctx);
	/*
	 * For groups hashed by key (hash = ketama): writes the request's
	 * key (at most size bytes) and returns its length, 0 when it has
	 * none (answered 404).  May be NULL: round-robin.
	 */
	size_t (*hash_key)(const struct upstream_request *rq, char *key,
	    size_t size);

	/* Its 404 is a miss for error_page to send on (nginx's
	 * intercept_404 of memcached_pass), never relayed as it came. */
	bool intercept_404;
};

#define UPSTREAM_KEY_MAX	256

/* The peer of the exchange, for a module's own log lines and Host. */
struct upstream_peer *upstream_conn_peer(const struct upstream_conn *uc);

/* The protocol an upstream group speaks. */
const struct upstream_proto *upstream_proto_for(
    const struct config_upstream *up);

/* HTTP/1.1 (worker/proto_http.c). */
extern const struct upstream_proto proto_http;

/* FastCGI (worker/proto_fcgi.c). */
extern const struct upstream_proto proto_fcgi;
/* memcached's get, as nginx's memcached_pass (worker/proto_memcached.c). */
extern const struct upstream_proto proto_memcached;

#endif

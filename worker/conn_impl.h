/*
 * The inside of a client connection, shared by the files that make up the
 * connection layer: conn.c (reading, parsing, timers, life cycle),
 * conn_body.c (request bodies), conn_peer.c (who the client is), output.c
 * (the queue of segments and writing it), resp.c (building responses),
 * request.c (choosing a server and a handler), access_log.c and tls.c
 * (SNI picks a server).  Nothing outside these files includes it.
 */
#ifndef CORRAL_CONN_IMPL_H
#define CORRAL_CONN_IMPL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <event2/event_struct.h>

#include "shm/stats.h"
#include "shm/store.h"
#include "worker/deadline.h"
#include "worker/conn.h"
#include "worker/http.h"
#include "worker/log_format.h"
#include "worker/resp.h"

#define IBUF_INIT	4096
#define OBUF_INIT	4096
#define OBUF_BIG	(4 * OBUF_INIT)
#define OSEG_MAX	128
#define OSEG_RESERVE	40	/* room one response may need */
#define OUT_HIGH	(256 * 1024)
#define IOV_BATCH	64
#define TLS_STAGE	16384	/* one full TLS record of plaintext */

enum cstate {
	CS_HEADER,		/* waiting for or parsing a request header;
				   first, so a zeroed connection is in it */
	CS_BODY,		/* reading a request body to discard it */
	CS_LINGER,		/* after an error: drain input, then close */
	CS_HANDSHAKE,		/* TLS handshake, before any request */
	CS_PROXY,		/* the PROXY protocol header, before all */
};

/* Each kind but T_NONE is a deadline queue (deadline.h), T_NONE a list,
 * so that every connection is in one (conn_close_all() finds them there);
 * T_IDLE's queue is the idle keep-alive connections, oldest first. */
enum ctimer { T_NONE, T_IDLE, T_HEADER, T_BODY, T_SEND, T_LINGER,
	T_HANDSHAKE, T_DELAY, T_PROXY, T_QUIT, T_KINDS };

/* SEG_LENT: memory that is valid only until the next conn_flush() (see
 * resp_body_lend()); what the socket did not take is then copied. */
enum seg_type { SEG_OBUF, SEG_MEM, SEG_FILE, SEG_LENT };

struct oseg {
	uint8_t type;
	int fd;			/* SEG_FILE */
	const char *p;		/* SEG_MEM, SEG_LENT */
	size_t off;		/* SEG_OBUF offset */
	off_t foff;		/* SEG_FILE offset */
	size_t len;
	struct fentry *ref;
	struct pin *pin;
};

/* A store value pinned while segments that point into it are queued. */
struct pin {
	struct store_ref ref;
	unsigned uses;
	struct pin *next;	/* free list */
};

/*
 * What the access log says of a response beyond the request: set by the
 * proxy through conn_log_upstream() and conn_log_cache(), cleared once
 * the response is logged.  Strings live as long as the config.
 */
#define CONN_LOG_TRIES	4	/* earlier servers logged, at most */

struct conn_log {
	const char *upstream_addr;
	const char *cache_status;
	int upstream_status;
	int64_t upstream_connect_us;	/* plus one; 0: none */
	int64_t upstream_response_us;	/* plus one; 0: none */
	unsigned ntries;
	struct log_try tries[CONN_LOG_TRIES];
};

/*
 * What a connection holds only while it has a request: its input buffer
 * and the request's state, lent together and given back together
 * (bufpool.c), so that an idle keep-alive connection does not carry them.
 * A connection without one points at an empty, shared one (no input
 * buffer) that nothing writes but zeros.
 */
struct conn_rq {
	/* The input; CS_PROXY: the PROXY protocol header's bytes so far. */
	char *ibuf;
	size_t isize, ilen, ipos, scan;
	struct http_request req;
	struct http_chunked chunk;
	struct conn_log log;
	struct store_ref lc_ref;	/* limit_conn: the pin that counts it
					   (conn.lc_zone >= 0) */
	struct proxy *px;	/* a proxied response is in flight */
	uint64_t req_start_us;	/* when the request's first byte came */
	unsigned char peer_addr[16];	/* the client a trusted proxy named */
	uint64_t body_left;
	uint64_t body_seen;
	uint64_t body_got;	/* bytes of the body read, framing too */
	uint64_t body_start_ms;	/* dl_now() when the body began */
	uint64_t body_last_ms;	/* ...and when its last bytes came */
	bool body_chunked;
	uint8_t peer_family;	/* of peer_addr; 0: none */
};

/*
 * What every connection holds, busy or idle, ordered by size so that
 * nothing is padding: an idle keep-alive connection costs its malloc()
 * chunk of this, its read event's file descriptor slot in libevent, and
 * nothing else (see struct conn_rq and bufpool.c for the rest).
 */
struct conn {
	struct event rev;
	struct dl_node tnode;	/* in the queue of its timer kind */
	struct event *wev;	/* only while waiting to write */
	struct ssl_st *ssl;	/* NULL: plain HTTP */
	struct conn_rq *rq;	/* never NULL (see struct conn_rq) */
	uint64_t serial;	/* this worker's connection number */
	const struct config_location *loc;	/* of the current request */

	struct oseg *segs;	/* OSEG_MAX of them, or NULL when idle */
	char *obuf;
	size_t osize, olen;
	size_t opending;
	uint16_t shead, stail;	/* at most OSEG_MAX */

	int fd;
	int lidx;		/* the listen entry it came in on */
	unsigned srv;		/* the server block of the request */
	unsigned nreq;
	int resp_status;	/* of the response being built */
	int lc_zone;		/* limit_conn held in this zone, or -1 */
	uint16_t peer_port;
	uint8_t state;		/* enum cstate */
	uint8_t timer;		/* enum ctimer */
	bool close_after;	/* close once the output is written */
	bool linger;		/* and drain the input first */
	bool keepalive;		/* the current request allows it */
	bool head;
	bool broken;		/* out of memory building a response */
	bool rpaused;		/* not reading: the proxy is full */
	bool busy;		/* counted as writing a response */
	bool idle;		/* counted as idle (T_IDLE or T_QUIT) */
	bool ktls;		/* files go out with SSL_sendfile */
	bool tls_rwant_w;	/* a TLS read waits for writability */
	bool tls_wwant_r;	/* a TLS write waits for readability */
	bool io_failed;		/* no memory for an event: close */
	bool in_error_page;	/* serving an error_page: no other one */
	bool limits_passed;	/* limit_req let it through (delayed) */
	bool via_trusted;	/* the connection's peer is in real_ip_from */
	bool peer_real;		/* peer names the client behind it (in
				   rq->peer_addr) */
	uint8_t conn_family;	/* the connection's own peer */
	uint8_t tls_kept;	/* tls.c: its buffers kept while idle */
	unsigned char conn_addr[16];
	char peer[INET6_ADDRSTRLEN];	/* the client as text */
};

_Static_assert(OSEG_MAX <= UINT16_MAX, "segment indexes are 16 bits");

/* The client: the connection's peer, or who a trusted proxy named. */
static inline int
conn_client_family(const struct conn *c)
{
	return c->peer_real && c->rq->peer_family != 0 ? c->rq->peer_family :
	    c->conn_family;
}

static inline const unsigned char *
conn_client_addr(const struct conn *c)
{
	return c->peer_real && c->rq->peer_family != 0 ? c->rq->peer_addr :
	    c->conn_addr;
}

/*
 * bufpool.c: the buffers a connection holds only while it is busy.  The
 * input and output buffers start at these sizes (the output one moves to
 * OBUF_BIG, then grows with realloc(); see output.c); the segment array
 * is OSEG_MAX segments; BUF_RQ is a struct conn_rq.
 */
enum buf_kind { BUF_IN, BUF_OUT, BUF_OUT_BIG, BUF_SEGS, BUF_RQ, BUF_KINDS };

/* A buffer of kind k, from the free list or malloc(); NULL when out of
 * memory. */
void *buf_get(enum buf_kind k);
/* Gives a buffer of kind k (of its initial size) back; NULL is ignored. */
void buf_put(enum buf_kind k, void *p);
/* Frees the free lists; at exit. */
void buf_free_all(void);


/* output.c */

/* obuf_reserve() when the buffer must grow; NULL when out of memory. */
char *obuf_grow(struct conn *c, size_t n);
/* obuf_commit() when the bytes cannot extend the last segment. */
void obuf_seg(struct conn *c, size_t n);

/*
 * The three below run several times per response, so their common case
 * is inline: a response head is a few copies into the buffer, not a few
 * calls each.
 */

/* Room for n more bytes at the end of the output buffer, or NULL. */
static inline char *
obuf_reserve(struct conn *c, size_t n)
{
	if (c->olen + n <= c->osize)
		return c->obuf + c->olen;
	return obuf_grow(c, n);
}

/* Makes the n bytes written at obuf_reserve() part of the queue,
 * extending the last segment if it ends there, so the heads of
 * pipelined responses stay one iovec. */
static inline void
obuf_commit(struct conn *c, size_t n)
{
	struct oseg *last;

	if (c->stail > c->shead) {
		last = &c->segs[c->stail - 1];
		if (last->type == SEG_OBUF && last->off + last->len == c->olen) {
			last->len += n;
			c->olen += n;
			c->opending += n;
			return;
		}
	}
	obuf_seg(c, n);
}

/* Copies n bytes into the output buffer. */
static inline void
obuf_add(struct conn *c, const void *p, size_t n)
{
	char *dst = obuf_reserve(c, n);

	if (dst == NULL) {
		c->broken = true;
		return;
	}
	memcpy(dst, p, n);
	obuf_commit(c, n);
}
/* A new segment at the tail, or NULL when the queue is full. */
struct oseg *seg_new(struct conn *c, enum seg_type type, size_t len);
/* Queues len bytes at p; NULL when len is 0 or there is no room. */
struct oseg *seg_mem(struct conn *c, const void *p, size_t len);
/* Returns 0 when everything is written, 1 when blocked, -1 on error. */
int out_flush(struct conn *c);
/* After a blocked out_flush(): copies the lent bytes left into the output
 * buffer; false when out of memory. */
bool out_keep_lent(struct conn *c);
/* Drops everything queued. */
void out_reset(struct conn *c);
/* Gives back the output buffers of a connection with nothing queued. */
void out_release(struct conn *c);

/* resp.c */

extern const char resp_allow[];		/* "Allow: ...\r\n" */
extern const size_t resp_allow_len;
/* Frees the pins kept for reuse; at exit. */
void pin_free_all(void);

/* conn_body.c */

/* Sets up reading the body of the request just parsed; false when it is
 * refused (413 queued). */
bool body_begin(struct conn *c);
/*
 * Takes the body bytes in the input buffer (to the proxy, if one has
 * the request).  Returns 0 when the body is complete, HTTP_AGAIN when
 * more is to come, or the status for a bad one.
 */
int body_consume(struct conn *c);
/* When the body times out, in dl_now() milliseconds. */
uint64_t body_due(const struct conn *c);
/* Reading goes on after the proxy paused it. */
void body_resumed(struct conn *c);
/* A bad body while proxying: answers it unless the response has begun. */
void body_failed(struct conn *c, int status);

/* conn_peer.c */

/* Sets the connection's peer (c->peer, its port and address). */
void conn_peer_set(struct conn *c, const struct sockaddr *sa);
/* real_ip_from: the client a trusted proxy names in the request just
 * parsed, or the connection's peer again. */
void conn_real_ip(struct conn *c);
/* Reads the PROXY protocol header into the input buffer, which the caller
 * made; 1 when it is complete (the peer is then the client it names), 0
 * when more is to come, -1 when the connection must close (logged). */
int conn_pp_read(struct conn *c);

/* request.c */

/* The server block for a Host value on listen entry lidx. */
size_t request_server(struct span host, int lidx);
/* The same for a request's Host. */
size_t request_server_of(const struct http_request *r, int lidx);

enum route_action {
	ROUTE_ANSWER,		/* request_handle() answers it */
	ROUTE_PROXY,		/* c->loc has an upstream */
	ROUTE_STATUS,		/* c->loc is the status page */
	ROUTE_MEMCACHED,	/* c->loc serves the listener's items */
	ROUTE_DELAY,		/* limit_req: wait request_delay_ms() */
};

/*
 * Chooses the location of the request just parsed (rewrites, return) and
 * checks access and limits; sets c->loc.  What it found lasts until
 * request_handle() or proxy_start(), in the same turn of the loop.
 */
enum route_action request_route(struct conn *c);
/* How long a delayed request waits. */
int request_delay_ms(void);
/* Answers a request that no proxy took: files, return, errors. */
void request_handle(struct conn *c);
/* Serves the error_page for status if one is set; false if none. */
bool request_error_page(struct conn *c, int status);
/* The request is over: limit_conn lets go of it. */
void request_end(struct conn *c);
/* Expands a template with the variables of the current request. */
struct vars_tmpl;
ssize_t request_expand(const struct conn *c, const struct vars_tmpl *t,
    char *out, size_t len);

#endif

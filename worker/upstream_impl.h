/*
 * Inside the upstream driver, shared by upstream_conn.c (one exchange) and
 * upstream_link.c (the connection under it: socket, TLS session and the
 * events that stay added for its life).  Nothing else includes it.
 */
#ifndef CORRAL_UPSTREAM_IMPL_H
#define CORRAL_UPSTREAM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "worker/deadline.h"
#include "worker/http_response.h"
#include "worker/upstream.h"
#include "worker/upstream_proto.h"

struct conn;
struct ssl_st;
struct upstream_handler;
struct upstream_peer;
struct upstream_proto;

#define UC_RBUF		(32 * 1024)	/* reads, and a head that fits (grown
					   up to max_header_size) */
#define UC_WBUF		4096
#define UC_WBUF_HIGH	(64 * 1024)	/* request bytes waiting to go */
#define UC_CTX		256		/* module state kept with a free
					   exchange; more is allocated */

enum uc_state {
	UC_CONNECT,			/* connect() under way */
	UC_HANDSHAKE,			/* TLS handshake under way */
	UC_HEAD,			/* waiting for the response head */
	UC_HEADED,			/* head handed over, body not begun */
	UC_BODY,			/* relaying the body */
	UC_DONE,			/* complete; connection let go */
};

enum uc_timer {
	UT_NONE,
	UT_CONNECT,			/* connect and TLS handshake */
	UT_SEND,			/* request bytes wait for room */
	UT_READ,			/* the request is sent: the answer */
};

struct upstream_link {
	int fd;
	struct ssl_st *ssl;		/* while pooled; the exchange's else */
	struct upstream *up;
	struct upstream_conn *uc;	/* its exchange; NULL while pooled */
	bool reading, writing;		/* rev, wev added */
	struct event rev, wev;
	struct upstream_link *next;	/* free list */
};

struct upstream_conn {
	struct upstream *up;
	struct upstream_peer *peer;
	const struct upstream_proto *proto;
	const struct upstream_handler *h;
	void *arg;
	const char *client;		/* for log lines */
	struct conn *c;			/* the client's, for its log line */
	uint64_t open_us, connect_us;	/* when it began, and its connect */
	int64_t connect_time_us;	/* -1: a pooled connection */
	struct upstream_link *link;	/* the connection, or NULL */
	int fd;				/* link's, or -1 */
	struct ssl_st *ssl;		/* TLS to the peer, or NULL */
	enum uc_state state;
	enum uc_timer timer;
	struct dl_node tnode;
	int cerr;			/* connect() failed at once */

	/* The request side. */
	bool idempotent;
	bool has_body;
	bool body_done;			/* all of it was handed over */
	bool replayable;		/* wbuf still holds the whole request */
	bool write_shut;		/* the peer stopped taking bytes */
	bool reused;			/* the connection came from the pool */
	bool retried;
	unsigned moves;			/* to another peer: next_upstream, or
					   the key's next node (hashed) */
	uint64_t tried;			/* next_upstream: peers tried */
	size_t hklen;			/* hashed groups: the key, else 0 */
	char hkey[UPSTREAM_KEY_MAX];
	struct upstream_buf w;
	size_t wpos;

	/* The response side. */
	bool got_bytes;			/* the peer answered something */
	bool decode;			/* the handler takes payload only */
	bool paused;			/* not reading: the client is behind */
	char *rbuf;
	size_t rsize, rlen;
	size_t hlen;			/* UC_HEADED: the head's bytes */
	uint64_t body_bytes;		/* payload so far, for the log */
	struct http_response resp;

	void *ctx;			/* the module's state */
	size_t ctx_size;
	struct upstream_conn *next;	/* free list */
};

/* upstream_conn.c: the exchange's side of the link's events. */
void uc_read(struct upstream_conn *uc);
void uc_write(struct upstream_conn *uc);

/* upstream_link.c: a link for fd, its events assigned but not added. */
struct upstream_link *upstream_link_new(struct upstream *u,
    struct upstream_conn *uc, int fd);
void upstream_link_free_all(void);

/* Reading stays on once asked for: the event lives as long as the link. */
static inline void
link_read(struct upstream_link *l)
{
	if (!l->reading) {
		event_add(&l->rev, NULL);
		l->reading = true;
	}
}

static inline void
link_write(struct upstream_link *l, bool on)
{
	if (on && !l->writing)
		event_add(&l->wev, NULL);
	else if (!on && l->writing)
		event_del(&l->wev);
	l->writing = on;
}

#endif

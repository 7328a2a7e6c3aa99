/*
 * Client connections.
 *
 * A connection reads into one buffer, parses every complete request in it,
 * queues each response (headers in the output buffer, bodies as references
 * to cached bytes or file ranges) and only then writes, so responses to
 * pipelined requests leave together in one sendmsg().  While output is
 * pending the connection does not read: a client that never reads cannot
 * make us buffer without bound.
 *
 * Deadlines are absolute: a request header must arrive within
 * header_timeout of its first byte however slowly it trickles in.  They
 * are deadline queues (deadline.h), one per kind of timeout, not a timer
 * in each connection.
 *
 * An idle keep-alive connection holds no buffer: the input buffer (and
 * with it the request's state, struct conn_rq) is taken when the socket
 * becomes readable, both buffers go back to the worker's free lists
 * (bufpool.c) when the connection goes idle, and the write event exists
 * only while output waits, so an idle client costs about 350 bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn_impl.h"
#include "worker/mc_http.h"
#include "worker/proxy.h"
#include "worker/status.h"
#include "worker/tls.h"

#define QUIT_IDLE_GRACE_MS 1000

static struct dl_queue *tq[T_KINDS];	/* one per timer kind but T_NONE */
static struct dl_node untimed = { &untimed, &untimed, DL_NEVER };
static uint64_t conn_serial;
static struct conn_rq rq_none;	/* of connections without a request */

static void conn_close(struct conn *c);
static void conn_process(struct conn *c);
static bool request_go(struct conn *c, enum route_action act);
static void conn_write(struct conn *c);
static void req_forget(struct conn *c);
static void read_cb(evutil_socket_t fd, short what, void *arg);
static void write_cb(evutil_socket_t fd, short what, void *arg);
static void pp_read(struct conn *c);
static void conn_start(struct conn *c);
static void conn_timer(struct conn *c, enum ctimer kind, int ms);
static void body_timer(struct conn *c);
static void ibuf_release(struct conn *c);

const struct http_request *
conn_req(const struct conn *c)
{
	return &c->rq->req;
}

const struct config_server *
conn_server(const struct conn *c)
{
	return &worker.cf->servers[c->srv];
}

bool
conn_tls(const struct conn *c)
{
	return c->ssl != NULL;
}

bool
conn_sendfile(const struct conn *c)
{
	return worker.cf->sendfile && (c->ssl == NULL || c->ktls);
}

size_t
conn_out_buffered(const struct conn *c)
{
	return c->olen;
}

/*
 * Waits for input.  Over TLS, bytes already inside the session would
 * never make the socket readable again: the read is made active instead.
 */
static void
rev_add(struct conn *c)
{
	event_add(&c->rev, NULL);
	if (c->ssl != NULL && tls_pending(c->ssl))
		event_active(&c->rev, EV_READ, 1);
}

/*
 * The write event exists only while a connection waits for writability:
 * most responses leave in one sendmsg(), and an idle connection should not
 * carry an event it does not use.  Without memory for it, the connection
 * is closed from its timer, where nothing above still holds it.
 */
static void
wev_add(struct conn *c)
{
	if (c->wev == NULL) {
		c->wev = event_new(worker.base, c->fd, EV_WRITE | EV_PERSIST,
		    write_cb, c);
		if (c->wev == NULL) {
			log_at(L_ERROR, errno, "client %s: write event",
			    c->peer);
			c->io_failed = true;
			conn_timer(c, T_SEND, 0);
			return;
		}
	}
	event_add(c->wev, NULL);
}

static void
wev_del(struct conn *c)
{
	if (c->wev != NULL)
		event_del(c->wev);
}

static bool
wev_pending(const struct conn *c)
{
	return c->wev != NULL && event_pending(c->wev, EV_WRITE, NULL);
}

/* Gives the write event back once the connection is idle or closed. */
static void
wev_free(struct conn *c)
{
	if (c->wev != NULL) {
		event_free(c->wev);
		c->wev = NULL;
	}
}

/* Reads from the client unless paused or blocked on output. */
static void
conn_read_on(struct conn *c)
{
	if (!c->rpaused && !wev_pending(c))
		rev_add(c);
}

/* Timers ------------------------------------------------------------ */

#define CONN_OF(n) \
	((struct conn *)((char *)(n) - offsetof(struct conn, tnode)))

static void timer_cb(struct dl_node *n);

bool
conn_init(void)
{
	for (int k = T_NONE + 1; k < T_KINDS; k++)
		if ((tq[k] = dl_queue_new(worker.base, timer_cb)) == NULL)
			return false;
	return true;
}

/* Moves the connection to the queue of kind, due in ms. */
static void
timer_move(struct conn *c, enum ctimer kind, uint64_t ms)
{
	dl_del(&c->tnode);
	c->timer = kind;
	dl_add(tq[kind], &c->tnode, ms);
}

/* The same, due at the time at, dl_now() having said now. */
static void
timer_move_at(struct conn *c, enum ctimer kind, uint64_t at, uint64_t now)
{
	dl_del(&c->tnode);
	c->timer = kind;
	dl_add_at(tq[kind], &c->tnode, at, now);
}

static void
timer_stop(struct conn *c)
{
	if (c->timer == T_NONE)
		return;
	dl_del(&c->tnode);
	c->timer = T_NONE;
	dl_append(&untimed, &c->tnode);
}

/* Sets the timer unless one of that kind runs: the deadlines are
 * absolute, except the send timeout's, which each write renews. */
static void
conn_timer(struct conn *c, enum ctimer kind, int ms)
{
	if (c->io_failed)
		ms = 0;		/* see wev_add() */
	else if (c->timer == kind && kind != T_SEND)
		return;
	timer_move(c, kind, (uint64_t)ms);
}

static void
timer_cb(struct dl_node *n)
{
	struct conn *c = CONN_OF(n);
	enum ctimer kind = c->timer;

	/* Out of its queue already: with those without a timer. */
	c->timer = T_NONE;
	dl_append(&untimed, &c->tnode);
	worker_update_time();
	if (c->io_failed) {
		conn_close(c);
		return;
	}
	if (kind != T_IDLE && kind != T_LINGER && kind != T_QUIT)
		STATS_INC(conn_timeouts);
	switch (kind) {
	case T_DELAY:
		/* limit_req made it wait; it goes on where it stopped. */
		c->rpaused = false;
		c->limits_passed = true;
		conn_read_on(c);
		request_go(c, request_route(c));
		conn_process(c);
		return;
	case T_HEADER:
		log_info("client %s timed out sending a request header",
		    c->peer);
		goto timeout408;
	case T_BODY:
		log_info("client %s timed out sending a request body",
		    c->peer);
		goto timeout408;
	case T_SEND:
		log_info("client %s timed out reading the response", c->peer);
		break;
	case T_PROXY:
		log_info("client %s timed out sending the PROXY protocol "
		    "header", c->peer);
		break;
	case T_HANDSHAKE:
		log_info("client %s timed out in the TLS handshake", c->peer);
		STATS_INC(tls_failed);
		break;
	default:
		break;
	}
	conn_close(c);
	return;

timeout408:
	if (c->shead != c->stail || c->state == CS_BODY) {
		/* In a body, the response went out already. */
		conn_close(c);
		return;
	}
	req_forget(c);
	c->keepalive = false;
	c->head = false;
	c->loc = NULL;		/* no error_page: there is no request */
	resp_error(c, 408);
	conn_write(c);
}

/*
 * Drops what the last request pointed at: the header array is scratch
 * shared by every connection of the worker, and the buffer has moved on.
 */
static void
req_forget(struct conn *c)
{
	memset(&c->rq->req.method_name, 0, sizeof(c->rq->req.method_name));
	c->rq->req.headers = NULL;
	c->rq->req.nheaders = 0;
}

/* Counts the connection as writing a response, or no longer. */
static void
conn_set_busy(struct conn *c, bool on)
{
	if (c->busy == on)
		return;
	c->busy = on;
	STATS_ADD(conn_writing, on ? 1 : -1);
}

/*
 * Idle keep-alive connections are T_IDLE's queue, oldest first, so that a
 * graceful stop can close them and a worker out of connections can reuse
 * the oldest.  A connection leaves it when a request comes.
 */
static void
idle_set(struct conn *c, bool on)
{
	if (c->idle == on)
		return;
	c->idle = on;
	STATS_ADD(conn_idle, on ? 1 : -1);
	if (c->ssl != NULL)
		tls_idle(c->ssl, &c->tls_kept, on);
	if (on) {
		worker_conn_idle();
		return;
	}
	if (c->timer == T_IDLE || c->timer == T_QUIT)
		timer_stop(c);
}

bool
conn_reuse_idle(void)
{
	struct dl_node *n = dl_first(tq[T_IDLE]);

	if (n == NULL)
		return false;
	conn_close(CONN_OF(n));
	return true;
}

void
conn_quit_idle(void)
{
	uint64_t now = dl_now(), ka = (uint64_t)worker.cf->keepalive_timeout_ms;
	uint64_t idle;
	struct dl_node *n, *next;
	struct conn *c;

	/* Oldest first: each one's grace ends after the one before it, so
	 * T_QUIT's queue is appended to in order. */
	for (n = dl_first(tq[T_IDLE]); n != NULL; n = next) {
		next = dl_next(tq[T_IDLE], n);
		c = CONN_OF(n);
		idle = n->at > now + ka ? 0 : now + ka - n->at;
		if (idle >= QUIT_IDLE_GRACE_MS)
			conn_close(c);
		else
			timer_move(c, T_QUIT, QUIT_IDLE_GRACE_MS - idle);
	}
}

static void
conn_linger(struct conn *c)
{
	if (c->ssl != NULL)
		tls_shutdown(c->ssl);
	shutdown(c->fd, SHUT_WR);
	c->state = CS_LINGER;
	c->rq->ilen = c->rq->ipos = 0;
	wev_del(c);
	event_add(&c->rev, NULL);
	conn_timer(c, T_LINGER, worker.cf->lingering_timeout_ms);
}

/* After the queue drained: go on reading, or close. */
static void
conn_drained(struct conn *c)
{
	wev_del(c);
	if (c->timer == T_DELAY)
		return;		/* a delayed request goes on later */
	if (c->rq->px == NULL)
		conn_set_busy(c, false);
	if (c->rq->px == NULL && c->lc_zone >= 0)
		request_end(c);
	if (c->rq->px != NULL) {
		/* The proxied response goes on: its upstream times it. */
		if (c->state != CS_BODY)
			timer_stop(c);
		conn_read_on(c);
		proxy_drained(c->rq->px);
		return;
	}
	if (c->close_after) {
		if (c->linger || c->rq->ipos < c->rq->ilen ||
		    c->state == CS_BODY)
			conn_linger(c);
		else
			conn_close(c);
		return;
	}
	rev_add(c);
	if (c->rq->ipos < c->rq->ilen) {
		/* Requests that waited behind the full queue. */
		conn_process(c);
		return;
	}
	if (c->state == CS_HEADER) {
		conn_timer(c, T_IDLE, worker.cf->keepalive_timeout_ms);
		idle_set(c, true);
		if (worker.quitting) {
			conn_close(c);
			return;
		}
		ibuf_release(c);
		out_release(c);
		wev_free(c);
	}
}

/* Waits until the rest of the output can go: writability, or for a
 * TLS write that needs the peer's bytes first, readability. */
static void
conn_wait_output(struct conn *c)
{
	if (c->tls_wwant_r) {
		wev_del(c);
		event_add(&c->rev, NULL);
	} else {
		event_del(&c->rev);
		wev_add(c);
	}
	conn_timer(c, T_SEND, worker.cf->send_timeout_ms);
}

bool
conn_flush(struct conn *c)
{
	switch (out_flush(c)) {
	case 0:
		conn_drained(c);
		return true;
	case 1:
		if (out_keep_lent(c)) {
			conn_wait_output(c);
			return true;
		}
		log_error("client %s: out of memory for the output", c->peer);
		/* FALLTHROUGH */
	default:
		conn_close(c);
		return false;
	}
}

void
conn_send_lent(struct conn *c)
{
	int rc = out_flush(c);

	if (rc == 1 && !out_keep_lent(c)) {
		log_error("client %s: out of memory for the output", c->peer);
		rc = -1;
	}
	if (rc == -1)
		c->broken = true;	/* out_flush() fails from now on */
}

static void
conn_write(struct conn *c)
{
	conn_flush(c);
}

void
conn_body_resume(struct conn *c)
{
	if (!c->rpaused)
		return;
	c->rpaused = false;
	if (c->state == CS_BODY && c->timer != T_BODY)
		body_resumed(c);
	conn_read_on(c);
	conn_process(c);
}

void
conn_proxy_done(struct conn *c)
{
	c->rq->px = NULL;
	c->rpaused = false;
	req_forget(c);
	if (c->state == CS_BODY) {
		if (c->timer != T_BODY)
			body_resumed(c);
		body_timer(c);
	}
	if (c->shead != c->stail)
		conn_write(c);
	else
		conn_drained(c);
}

void
conn_proxy_error(struct conn *c, int status)
{
	c->rq->px = NULL;
	resp_error(c, status);
	if (c->rq->px == NULL)	/* else the page's exchange ends it */
		conn_proxy_done(c);
}

void
conn_abort(struct conn *c)
{
	c->rq->px = NULL;		/* the proxy let go of it already */
	conn_close(c);
}

/* Drives the TLS handshake; requests are read once it is done. */
static void
conn_handshake(struct conn *c)
{
	switch (tls_handshake(c->ssl, c->fd, c->peer)) {
	case 0:
		c->state = CS_HEADER;
		c->ktls = worker.cf->sendfile && tls_ktls_send(c->ssl);
		wev_del(c);
		event_add(&c->rev, NULL);
		conn_timer(c, T_HEADER, worker.cf->header_timeout_ms);
		read_cb(c->fd, EV_READ, c);
		return;
	case TLS_WANT_READ:
		wev_del(c);
		event_add(&c->rev, NULL);
		return;
	case TLS_WANT_WRITE:
		event_del(&c->rev);
		wev_add(c);
		return;
	case TLS_PLAIN_HTTP:
		/* As nginx does: a 400 in plain text, then close. */
		tls_free(c->ssl);
		c->ssl = NULL;
		c->state = CS_HEADER;
		resp_error(c, 400);
		conn_write(c);
		return;
	default:
		conn_close(c);
		return;
	}
}

/* Over TLS: the handshake, or a write that had to read first. */
static bool
tls_read_event(struct conn *c)
{
	if (c->state == CS_HANDSHAKE) {
		conn_handshake(c);
		return true;
	}
	if (!c->tls_wwant_r)
		return false;
	c->tls_wwant_r = false;
	conn_write(c);
	return true;
}

/* Over TLS: the handshake, or a read that had to write first. */
static bool
tls_write_event(struct conn *c)
{
	if (c->state == CS_HANDSHAKE) {
		conn_handshake(c);
		return true;
	}
	if (!c->tls_rwant_w)
		return false;
	c->tls_rwant_w = false;
	if (c->shead == c->stail)
		wev_del(c);
	read_cb(c->fd, EV_READ, c);
	return true;
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	worker_update_time();
	if (c->ssl != NULL && tls_write_event(c))
		return;
	conn_write(c);
}

/* Sets the body's timer (see body_due()), reading the clock once. */
static void
body_timer(struct conn *c)
{
	uint64_t now = dl_now(), due = body_due(c);

	if (c->io_failed || due < now)
		due = now;		/* io_failed: see wev_add() */
	timer_move_at(c, T_BODY, due, now);
}

static bool
keepalive_allowed(const struct conn *c)
{
	const struct config *cf = worker.cf;

	if (!c->rq->req.keepalive || worker.quitting ||
	    cf->keepalive_timeout_ms == 0)
		return false;
	return cf->keepalive_requests == 0 ||
	    c->nreq < (unsigned)cf->keepalive_requests;
}

/* Parses one request header; false when processing has to stop. */
static bool
parse_one(struct conn *c)
{
	struct http_request *r = &c->rq->req;
	enum route_action act;
	ssize_t n;

	if (c->rq->scan == 0)
		c->rq->req_start_us = worker.now_us;
	n = http_parse_request(r, c->rq->ibuf + c->rq->ipos,
	    c->rq->ilen - c->rq->ipos, &c->rq->scan, worker.headers,
	    worker.cf->max_headers, &worker.limits);
	if (n == HTTP_AGAIN) {
		idle_set(c, false);
		conn_timer(c, T_HEADER, worker.cf->header_timeout_ms);
		return false;
	}
	c->head = false;
	if (n == HTTP_ERROR && c->nreq == 0 &&
	    (unsigned char)c->rq->ibuf[c->rq->ipos] == TLS_RECORD_HANDSHAKE) {
		/* An HTTP error page means nothing to a TLS client. */
		log_info("client %s sent a TLS handshake to a plain HTTP "
		    "port", c->peer);
		c->rq->ipos = c->rq->ilen;
		c->close_after = true;
		return false;
	}
	conn_set_busy(c, true);
	if (n == HTTP_ERROR) {
		log_info("client %s: %d: %s", c->peer, r->status,
		    r->error ? r->error : "bad request");
		c->keepalive = false;
		c->loc = NULL;	/* the last request's location is not this one's */
		req_forget(c);
		resp_error(c, r->status);
		return false;
	}
	idle_set(c, false);
	c->nreq++;
	c->keepalive = keepalive_allowed(c);
	c->head = r->method == HTTP_M_HEAD;
	c->rq->ipos += (size_t)n;
	c->rq->scan = 0;
	c->srv = request_server_of(r, c->lidx);
	if (c->peer_real || worker.cf->nreal_ip_from > 0)
		conn_real_ip(c);
	else
		c->via_trusted = false;	/* most trust no proxy: no call */
	c->limits_passed = false;
	act = request_route(c);
	if (act == ROUTE_DELAY) {
		/* Nothing more is read until it goes on (see timer_cb). */
		c->rpaused = true;
		event_del(&c->rev);
		conn_timer(c, T_DELAY, request_delay_ms());
		return false;
	}
	return request_go(c, act);
}

/* Goes on with a routed request: its body, the proxy or a handler. */
static bool
request_go(struct conn *c, enum route_action act)
{
	struct http_request *r = &c->rq->req;
	bool has_body, answered = false;
	int rc;

	has_body = r->content_length > 0 || r->chunked;
	if (has_body && !body_begin(c))
		return false;
	if (act == ROUTE_STATUS) {
		status_serve(c, c->loc);
		answered = true;
	} else if (act == ROUTE_MEMCACHED) {
		mc_http_serve(c, c->loc);
		answered = true;
	} else if (act == ROUTE_PROXY) {
		rc = proxy_start(c, c->loc, &c->rq->px);
		if (rc < 0) {
			c->keepalive = false;
			resp_error(c, 502);
			return false;
		}
		answered = rc == 0;
	}
	if (has_body) {
		/* What already arrived is checked before answering, so a
		 * bad body gets its own status, as nginx does. */
		rc = body_consume(c);
		if (rc > 0) {
			if (c->rq->px != NULL) {
				proxy_cancel(c->rq->px);
				c->rq->px = NULL;
			}
			resp_error(c, rc);
			return false;
		}
		if (rc == HTTP_AGAIN)
			c->state = CS_BODY;
	}
	if (c->rq->px == NULL && !answered)
		request_handle(c);
	return true;
}

static void
conn_process(struct conn *c)
{
	int rc;

	while (!c->close_after || (c->rq->px != NULL && c->state == CS_BODY)) {
		if (c->state == CS_BODY) {
			rc = body_consume(c);
			if (rc == HTTP_AGAIN && c->rq->px != NULL &&
			    proxy_body_room(c->rq->px) == 0) {
				/* The upstream's send timeout runs. */
				c->rpaused = true;
				event_del(&c->rev);
				timer_stop(c);
				c->rq->body_last_ms = dl_now();	/* paused */
				break;
			}
			if (rc == HTTP_AGAIN) {
				body_timer(c);
				break;
			}
			if (rc > 0) {
				body_failed(c, rc);
				break;
			}
			c->state = CS_HEADER;
			continue;
		}
		if (c->rq->px != NULL || c->close_after)
			break;		/* pipelined requests wait */
		if (c->stail + OSEG_RESERVE > OSEG_MAX ||
		    c->opending > OUT_HIGH)
			break;
		if (c->rq->ipos == c->rq->ilen)
			break;
		if (!parse_one(c))
			break;
	}
	if (c->rq->ipos == c->rq->ilen)
		c->rq->ipos = c->rq->ilen = 0;
	if (c->shead != c->stail)
		conn_write(c);
	else if (c->close_after)
		conn_drained(c);
	else if (c->state == CS_HEADER && c->rq->ilen == 0)
		conn_drained(c);
	else if (c->ssl != NULL && tls_pending(c->ssl) &&
	    event_pending(&c->rev, EV_READ, NULL))
		event_active(&c->rev, EV_READ, 1);
}

/* Reads from the socket or, over TLS, from the session. */
static ssize_t
conn_recv(struct conn *c, void *buf, size_t len)
{
	ssize_t n;

	if (c->ssl == NULL)
		return recv(c->fd, buf, len, 0);
	n = tls_recv(c->ssl, buf, len, c->peer);
	if (n >= 0)
		return n;
	if (n == -1) {
		errno = ECONNRESET;	/* logged already */
		return -1;
	}
	if (n == TLS_WANT_WRITE) {
		c->tls_rwant_w = true;
		wev_add(c);
	} else {
		tls_release(c->ssl);
	}
	errno = EAGAIN;
	return -1;
}

/* Gives the input buffer back when nothing in it is left to parse. */
static void
ibuf_release(struct conn *c)
{
	struct conn_rq *rq = c->rq;

	if (rq->ibuf == NULL || rq->ipos != rq->ilen)
		return;
	if (rq->isize == IBUF_INIT)
		buf_put(BUF_IN, rq->ibuf);
	else
		free(rq->ibuf);
	buf_put(BUF_RQ, rq);
	c->rq = &rq_none;
}

/*
 * Makes room for more input: take a buffer, compact, then grow up to the
 * header limit.
 */
static bool
ibuf_room(struct conn *c)
{
	size_t max = worker.cf->max_header_size + 1, size;
	struct conn_rq *rq;
	char *p;

	if (c->rq->ibuf == NULL) {
		/* c->rq is rq_none: the buffer comes with a request's state. */
		if ((rq = buf_get(BUF_RQ)) == NULL) {
			log_at(L_ERROR, errno, "request");
			return false;
		}
		memset(rq, 0, sizeof(*rq));
		if ((rq->ibuf = buf_get(BUF_IN)) == NULL) {
			log_at(L_ERROR, errno, "input buffer");
			buf_put(BUF_RQ, rq);
			return false;
		}
		rq->isize = IBUF_INIT;
		c->rq = rq;
	}
	if (c->rq->ilen < c->rq->isize)
		return true;
	if (c->rq->ipos > 0) {
		memmove(c->rq->ibuf, c->rq->ibuf + c->rq->ipos,
		    c->rq->ilen - c->rq->ipos);
		c->rq->ilen -= c->rq->ipos;
		c->rq->ipos = 0;
		return true;
	}
	if (c->rq->isize >= max)
		return false;
	size = c->rq->isize * 2 < max ? c->rq->isize * 2 : max;
	if (c->rq->isize == IBUF_INIT) {
		p = malloc(size);
		if (p != NULL) {
			memcpy(p, c->rq->ibuf, c->rq->ilen);
			buf_put(BUF_IN, c->rq->ibuf);
		}
	} else {
		p = realloc(c->rq->ibuf, size);
	}
	if (p == NULL) {
		log_at(L_ERROR, errno, "input buffer");
		return false;
	}
	c->rq->ibuf = p;
	c->rq->isize = size;
	return true;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	ssize_t n;

	worker_update_time();
	if (c->state == CS_PROXY) {
		pp_read(c);
		return;
	}
	if (c->ssl != NULL && tls_read_event(c))
		return;
	if (c->state == CS_LINGER) {
		char junk[4096];

		n = recv(c->fd, junk, sizeof(junk), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	if (!ibuf_room(c) && c->rq->px != NULL) {
		/* Requests pipelined behind a proxied one fill the buffer;
		 * they are read once the response is done. */
		c->rpaused = true;
		event_del(&c->rev);
		return;
	}
	if (c->rq->isize - c->rq->ilen == 0) {
		/* A full buffer always holds a complete header or is over
		 * the limit, which the parser reports; we never get here
		 * unless memory ran out (or the buffer could not be had). */
		conn_close(c);
		return;
	}
	n = conn_recv(c, c->rq->ibuf + c->rq->ilen, c->rq->isize - c->rq->ilen);
	if (n > 0) {
		STATS_ADD(bytes_in, n);
		c->rq->ilen += (size_t)n;
		conn_process(c);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0 && errno != ECONNRESET)
		log_at(L_INFO, errno, "recv from %s", c->peer);
	else if (n == 0 && c->rq->ilen > c->rq->ipos)
		log_info("client %s closed the connection mid-request",
		    c->peer);
	conn_close(c);
}

/* Accept and close -------------------------------------------------- */

void
conn_accept(int fd, const struct sockaddr *sa, socklen_t salen,
    int listen_idx)
{
	struct conn *c;
	int on = 1;

	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		log_at(L_ERROR, errno, "connection");
		close(fd);
		worker_conn_closed();
		return;
	}
	STATS_INC(conn_accepted);
	STATS_INC(conn_active);
	c->serial = ++conn_serial;
	c->fd = fd;
	c->lc_zone = -1;
	c->rq = &rq_none;
	conn_peer_set(c, sa);
	c->lidx = listen_idx;
	dl_append(&untimed, &c->tnode);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	event_assign(&c->rev, worker.base, fd, EV_READ | EV_PERSIST, read_cb,
	    c);
	log_debug("accept %s%s%s:%u on %s",
	    sa->sa_family == AF_INET6 ? "[" : "", c->peer,
	    sa->sa_family == AF_INET6 ? "]" : "",
	    ntohs(((const struct sockaddr_in *)sa)->sin_port),
	    worker.cf->listen[listen_idx].text);
	event_add(&c->rev, NULL);
	if (worker.cf->listen[listen_idx].proxy_protocol) {
		c->state = CS_PROXY;
		conn_timer(c, T_PROXY, worker.cf->header_timeout_ms);
		pp_read(c);
		return;
	}
	conn_start(c);
}

/* The connection's first bytes are the client's: TLS, or a request. */
static void
conn_start(struct conn *c)
{
	int listen_idx = c->lidx, fd = c->fd;

	if (worker.cf->listen[listen_idx].tls) {
		c->ssl = tls_new(fd, listen_idx);
		if (c->ssl == NULL) {
			conn_close(c);
			return;
		}
		c->state = CS_HANDSHAKE;
		conn_timer(c, T_HANDSHAKE, worker.cf->tls.handshake_timeout_ms);
		conn_handshake(c);
		return;
	}
	conn_timer(c, T_HEADER, worker.cf->header_timeout_ms);
	/* With TCP_DEFER_ACCEPT the request is usually here already. */
	read_cb(fd, EV_READ, c);
}

/* The PROXY protocol header, then the client's own bytes. */
static void
pp_read(struct conn *c)
{
	int rc;

	if (c->rq->ibuf == NULL && !ibuf_room(c)) {
		conn_close(c);
		return;
	}
	rc = conn_pp_read(c);
	if (rc < 0) {
		conn_close(c);
	} else if (rc > 0) {
		c->state = CS_HEADER;
		conn_start(c);
	}
}

static void
conn_close(struct conn *c)
{
	struct proxy *px = c->rq->px;

	c->rq->px = NULL;
	if (px != NULL)
		proxy_cancel(px);
	if (c->lc_zone >= 0)
		request_end(c);
	idle_set(c, false);
	conn_set_busy(c, false);
	STATS_DEC(conn_active);
	dl_del(&c->tnode);
	event_del(&c->rev);
	wev_free(c);
	out_reset(c);
	if (c->ssl != NULL) {
		tls_shutdown(c->ssl);
		tls_free(c->ssl);
	}
	out_release(c);
	close(c->fd);
	c->rq->ipos = c->rq->ilen;
	ibuf_release(c);
	free(c);
	worker_conn_closed();
}

void
conn_close_all(void)
{
	struct dl_node *n;
	int k;

	/* Closing one may move another (a proxy's client) to a queue
	 * already looked at: start again until all are empty. */
	for (k = 0; k < T_KINDS; k++) {
		n = k == T_NONE ? (untimed.next != &untimed ? untimed.next :
		    NULL) : tq[k] != NULL ? dl_first(tq[k]) : NULL;
		if (n != NULL) {
			conn_close(CONN_OF(n));
			k = -1;
		}
	}
	for (k = 0; k < T_KINDS; k++) {
		dl_queue_free(tq[k]);
		tq[k] = NULL;
	}
	proxy_free_all();
	pin_free_all();
	buf_free_all();
	access_log_close();
}

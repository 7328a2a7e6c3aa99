/*
 * The upstream driver: one exchange over one connection to a peer.
 *
 * The request's bytes (from the protocol module) wait in wbuf and go out
 * as the socket takes them; the response is read into rbuf, its head
 * parsed by the module and handed to the handler, then each read's body
 * bytes are decoded by the module and handed over at once.  The handler
 * stops reading with upstream_conn_pause() while its client is behind.
 *
 * The connection under an exchange is a struct upstream_link
 * (upstream_link.c), whose read event stays added for its life: taking
 * and returning a pooled connection touches no event.  The write event
 * is added only while bytes wait for room.
 *
 * One timer per exchange, on a deadline queue (worker/deadline.h): the
 * connect timeout (connect and TLS handshake), the send timeout while
 * request bytes wait, renewed by each write, and the read timeout once
 * the whole request is sent, renewed by each read: "between two reads".
 * A slow client body is timed by the connection's body_timeout, not by
 * the upstream's.
 *
 * Reuse: a connection goes back to the pool only when the module says so,
 * the whole request went out, and no byte came after the response.
 *
 * Over TLS the connection gets a session once connected, and the
 * handshake runs under connect_timeout (as nginx's proxy_connect_timeout
 * covers it).  Bytes go through the session (worker/tls.h); what OpenSSL
 * has decrypted already never makes the socket readable again, so after
 * each read the rest is asked for at once (uc_more).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn.h"
#include "worker/deadline.h"
#include "worker/http_response.h"
#include "shm/stats.h"
#include "worker/tls.h"
#include "worker/upstream.h"
#include "worker/upstream_impl.h"
#include "worker/upstream_proto.h"

static struct upstream_conn *free_uc;
static struct dl_queue *uq;		/* the exchanges' timers */

static void uc_due(struct dl_node *);

/* Buffers ------------------------------------------------------------ */

char *
upstream_buf_grow(struct upstream_buf *b, size_t n)
{
	size_t want = b->size ? b->size : UC_WBUF;
	char *p;

	while (b->len + n > want)
		want *= 2;
	if (want != b->size) {
		if ((p = realloc(b->p, want)) == NULL)
			return NULL;
		b->p = p;
		b->size = want;
	}
	return b->p + b->len;
}

/* Life of an exchange ------------------------------------------------- */

static struct upstream_conn *
uc_alloc(size_t ctx_size)
{
	struct upstream_conn *uc = free_uc;
	void *ctx;

	if (uc != NULL) {
		free_uc = uc->next;
	} else {
		if ((uc = calloc(1, sizeof(*uc))) == NULL)
			return NULL;
		uc->w.p = malloc(UC_WBUF);
		uc->rbuf = malloc(UC_RBUF);
		uc->ctx = malloc(UC_CTX);
		if (uc->w.p == NULL || uc->rbuf == NULL || uc->ctx == NULL)
			goto fail;
		uc->w.size = UC_WBUF;
		uc->rsize = UC_RBUF;
		uc->ctx_size = UC_CTX;
	}
	if (ctx_size > uc->ctx_size) {
		if ((ctx = realloc(uc->ctx, ctx_size)) == NULL) {
			uc->next = free_uc;
			free_uc = uc;
			return NULL;
		}
		uc->ctx = ctx;
		uc->ctx_size = ctx_size;
	}
	memset(uc->ctx, 0, ctx_size);
	return uc;
fail:
	free(uc->w.p);
	free(uc->rbuf);
	free(uc->ctx);
	free(uc);
	return NULL;
}

static void
uc_untime(struct upstream_conn *uc)
{
	if (uc->timer != UT_NONE) {
		dl_del(&uc->tnode);
		uc->timer = UT_NONE;
	}
}

/* Sets (or renews) the exchange's one timer. */
static void
uc_time(struct upstream_conn *uc, enum uc_timer t)
{
	const struct config_upstream *cf = upstream_config(uc->up);

	uc_untime(uc);
	uc->timer = t;
	dl_add(uq, &uc->tnode, (uint64_t)(t == UT_CONNECT ?
	    cf->connect_timeout_ms : t == UT_SEND ? cf->send_timeout_ms :
	    cf->read_timeout_ms));
}

/*
 * Gives the connection back to the pool, or closes it.  It stays
 * registered for reading: in the pool, that is how a peer closing it is
 * seen.
 */
static void
uc_detach(struct upstream_conn *uc, bool reuse)
{
	struct upstream_link *l = uc->link;

	if (l == NULL)
		return;
	uc_untime(uc);
	/* Bytes OpenSSL holds past the response: not for the next one. */
	if (reuse && uc->ssl != NULL && tls_pending(uc->ssl))
		reuse = false;
	link_write(l, false);
	l->ssl = uc->ssl;
	l->uc = NULL;
	if (reuse) {
		upstream_peer_ok(uc->peer);
		link_read(l);
		reuse = upstream_pool_put(uc->up, uc->peer, l);
	}
	/* close_notify only after a clean end of the exchange. */
	if (!reuse)
		upstream_link_close(l, uc->state == UC_DONE ||
		    uc->state == UC_HEADED);
	uc->link = NULL;
	uc->ssl = NULL;
	uc->fd = -1;
}

static void
uc_free(struct upstream_conn *uc)
{
	uc_untime(uc);
	if (uc->proto->done != NULL)
		uc->proto->done(uc->ctx);
	if (uc->rsize > UC_RBUF) {
		/* A large head grew it; do not keep that around. */
		char *n = realloc(uc->rbuf, UC_RBUF);

		if (n != NULL) {
			uc->rbuf = n;
			uc->rsize = UC_RBUF;
		}
	}
	if (uc->w.size > UC_WBUF_HIGH) {
		char *n = realloc(uc->w.p, UC_WBUF);

		if (n != NULL) {
			uc->w.p = n;
			uc->w.size = UC_WBUF;
		}
	}
	uc->next = free_uc;
	free_uc = uc;
}

void
upstream_conn_free_all(void)
{
	struct upstream_conn *uc;

	while ((uc = free_uc) != NULL) {
		free_uc = uc->next;
		free(uc->w.p);
		free(uc->rbuf);
		free(uc->ctx);
		free(uc);
	}
	upstream_link_free_all();
	dl_queue_free(uq);
	uq = NULL;
}

struct upstream_peer *
upstream_conn_peer(const struct upstream_conn *uc)
{
	return uc->peer;
}

const char *
upstream_conn_peer_name(const struct upstream_conn *uc)
{
	return upstream_peer_name(uc->peer);
}

/* Errors -------------------------------------------------------------- */

/* The access log's $upstream_* for a server that gave no answer. */
static void
uc_log_try(struct upstream_conn *uc, int status)
{
	conn_log_upstream(uc->c, upstream_peer_name(uc->peer), status,
	    uc->connect_time_us, (int64_t)(worker.now_us - uc->open_us));
}

/* Logs, counts a peer's fault, closes the connection, tells the handler. */
static void __attribute__((format(printf, 4, 5)))
uc_fail(struct upstream_conn *uc, int status, bool peer_fault,
    const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("upstream %s: %s, client %s", upstream_peer_name(uc->peer),
	    msg, uc->client);
	if (uc->state < UC_HEADED)
		uc_log_try(uc, status);
	if (peer_fault)
		upstream_peer_failed(uc->up, uc->peer);
	uc_detach(uc, false);
	uc->h->error(uc->arg, status);
}

/* Events -------------------------------------------------------------- */

/* Request bytes wait: the write event, under the send timeout. */
static void
uc_want_write(struct upstream_conn *uc)
{
	link_write(uc->link, true);
	uc_time(uc, UT_SEND);
}

/* Reads; the read timeout runs once the whole request is sent. */
static void
uc_want_read(struct upstream_conn *uc)
{
	if (uc->paused || uc->state == UC_CONNECT ||
	    uc->state == UC_HANDSHAKE || uc->link == NULL)
		return;
	link_read(uc->link);
	if (uc->body_done && uc->wpos == uc->w.len)
		uc_time(uc, UT_READ);
}

/*
 * A TLS read or write as the socket call it replaces: a want is EAGAIN
 * (the caller waits and tries again), a failure without errno is EPROTO.
 */
static ssize_t
uc_tls_result(ssize_t n)
{
	if (n == TLS_WANT_READ || n == TLS_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (n < 0 && errno == 0)
		errno = EPROTO;
	return n;
}

/* Bytes to the peer: the socket's, or through the TLS session. */
static ssize_t
uc_send(struct upstream_conn *uc, const char *p, size_t len)
{
	if (uc->ssl == NULL)
		return send(uc->fd, p, len, MSG_NOSIGNAL);
	return uc_tls_result(tls_send(uc->ssl, p, len,
	    upstream_peer_name(uc->peer)));
}

/* Bytes from the peer; 0 at its end, -1 with errno (EAGAIN: later). */
static ssize_t
uc_recv(struct upstream_conn *uc, char *p, size_t len)
{
	if (uc->ssl == NULL)
		return recv(uc->fd, p, len, 0);
	return uc_tls_result(tls_recv(uc->ssl, p, len,
	    upstream_peer_name(uc->peer)));
}

/*
 * Decrypted bytes wait inside the session: read them now, as the socket
 * will not say so.  Only while the exchange reads.
 */
static void
uc_more(struct upstream_conn *uc)
{
	if (uc->ssl != NULL && uc->link != NULL && !uc->paused &&
	    uc->state >= UC_HEAD && uc->state < UC_DONE &&
	    tls_pending(uc->ssl))
		event_active(&uc->link->rev, EV_READ, 0);
}

/* Connecting ---------------------------------------------------------- */

/* Starts a fresh connection; false when there is no socket. */
static bool
uc_connect(struct upstream_conn *uc)
{
	uc->state = UC_CONNECT;
	uc->reused = false;
	uc->connect_us = worker.now_us;
	uc->fd = upstream_connect(uc->peer, &uc->cerr);
	if (uc->fd == -1) {
		log_at(L_ERROR, errno, "upstream %s: socket",
		    upstream_peer_name(uc->peer));
		return false;
	}
	if ((uc->link = upstream_link_new(uc->up, uc, uc->fd)) == NULL) {
		log_error("upstream %s: out of memory",
		    upstream_peer_name(uc->peer));
		close(uc->fd);
		uc->fd = -1;
		return false;
	}
	link_write(uc->link, true);
	uc_time(uc, UT_CONNECT);
	return true;
}

/*
 * Writes a request with no body to a pooled connection at once: its
 * socket has room, so waiting to be told so would cost two epoll_ctl()
 * and a loop.  What does not go out, or fails, is left to write_cb, which
 * also reports the error (not from here: the caller has no exchange yet).
 */
static void
uc_write_now(struct upstream_conn *uc)
{
	ssize_t n = uc_send(uc, uc->w.p, uc->w.len);

	if (n > 0)
		uc->wpos = (size_t)n;
	if (uc->wpos < uc->w.len)
		uc_want_write(uc);
	else
		uc_want_read(uc);	/* now with the read timeout */
}

/* A pooled connection to the chosen peer, or a new one. */
static bool
uc_begin(struct upstream_conn *uc)
{
	struct upstream_link *l;

	/* A request that cannot be retried wants a connection checked. */
	l = upstream_pool_get(uc->up, uc->peer, !uc->idempotent);
	if (l == NULL)
		return uc_connect(uc);
	/* Its read event is added already. */
	uc->link = l;
	l->uc = uc;
	uc->fd = l->fd;
	uc->ssl = l->ssl;
	l->ssl = NULL;
	uc->reused = true;
	uc->state = UC_HEAD;
	if (uc->has_body)
		uc_want_write(uc);
	else
		uc_write_now(uc);
	return true;
}

/* The peer for a request: by its key on a hashed group, NULL (and the
 * status to answer) when it has none or no peer is up. */
static struct upstream_peer *
pick(struct upstream_conn *uc, struct upstream *u,
    const struct upstream_proto *proto, const struct upstream_request *rq,
    int *status)
{
	struct upstream_peer *p;
	size_t n;

	uc->hklen = 0;
	if (upstream_config(u)->hash != HASH_KETAMA || proto->hash_key == NULL)
		return upstream_pick(u);
	if ((n = proto->hash_key(rq, uc->hkey, sizeof(uc->hkey))) == 0) {
		*status = 404;		/* no such key can be stored */
		return NULL;
	}
	uc->hklen = n;			/* kept for uc_move() */
	if ((p = upstream_pick_key(u, uc->hkey, n)) == NULL)
		log_warn("upstream \"%s\": every server is down",
		    upstream_config(u)->name);
	return p;
}

struct upstream_conn *
upstream_conn_open(struct upstream *u, const struct upstream_proto *proto,
    const struct upstream_request *rq, const struct upstream_handler *h,
    void *arg, int *status)
{
	const struct http_request *r = rq->r;
	struct upstream_conn *uc;
	int st;

	*status = 502;
	if (uq == NULL && (uq = dl_queue_new(worker.base, uc_due)) == NULL)
		return NULL;
	if ((uc = uc_alloc(proto->ctx_size)) == NULL)
		return NULL;
	uc->up = u;
	if ((uc->peer = pick(uc, u, proto, rq, status)) == NULL) {
		uc_free(uc);
		return NULL;
	}
	uc->proto = proto;
	uc->h = h;
	uc->arg = arg;
	uc->client = conn_peer(rq->c);
	uc->c = rq->c;
	uc->open_us = worker.now_us;
	uc->connect_time_us = -1;
	STATS_ROW_INC(upstream_peer_stats(u, uc->peer), peer_requests);
	uc->link = NULL;
	uc->fd = -1;
	uc->ssl = NULL;
	uc->state = UC_CONNECT;
	uc->timer = UT_NONE;
	uc->idempotent = rq->idempotent;
	uc->has_body = r->content_length > 0 || r->chunked;
	uc->body_done = !uc->has_body;
	uc->replayable = true;
	uc->write_shut = uc->reused = uc->retried = false;
	uc->moves = 0;
	uc->tried = 0;
	uc->got_bytes = uc->paused = false;
	uc->w.len = uc->wpos = 0;
	uc->rlen = 0;
	uc->body_bytes = 0;
	if ((st = proto->request_head(uc, uc->ctx, rq, &uc->w)) != 0) {
		*status = st;
		uc_free(uc);
		return NULL;
	}
	if (!uc_begin(uc)) {
		uc_free(uc);
		return NULL;
	}
	return uc;
}

/* Once, on a fresh connection, when a pooled one failed early. */
static bool
uc_retry(struct upstream_conn *uc)
{
	if (!uc->reused || uc->retried || uc->got_bytes || !uc->idempotent ||
	    !uc->replayable)
		return false;
	log_info("upstream %s: kept-alive connection failed; retrying on a "
	    "new one", upstream_peer_name(uc->peer));
	uc_detach(uc, false);
	uc->retried = true;
	uc->wpos = 0;
	uc->rlen = 0;
	if (uc_connect(uc))
		return true;
	uc_fail(uc, 502, false, "cannot retry");
	return true;
}

/* The request starts again on next: on a pooled connection when pooled
 * (a hashed group's move connects afresh: its node just refused one). */
static void
uc_go(struct upstream_conn *uc, struct upstream_peer *next, bool pooled,
    int status)
{
	uc_log_try(uc, status);
	conn_log_upstream_next(uc->c);
	uc->open_us = worker.now_us;
	uc->connect_time_us = -1;
	uc_detach(uc, false);
	uc->peer = next;
	uc->moves++;
	uc->retried = false;		/* next's pooled one may be stale */
	uc->wpos = 0;
	uc->rlen = 0;
	STATS_ROW_INC(upstream_peer_stats(uc->up, next), peer_requests);
	if (!(pooled ? uc_begin(uc) : uc_connect(uc)))
		uc_fail(uc, 502, false, "cannot connect");
}

/*
 * A hashed group's node refused the connection: it counts as failed, and
 * when that takes it off the ring the request goes to the key's next
 * node, where a libmemcached client ejecting it puts the key too.  True
 * when the exchange went on or failed here.
 */
static bool
uc_move(struct upstream_conn *uc, int err)
{
	struct upstream_peer *next;

	if (uc->hklen == 0 || uc->got_bytes ||
	    uc->moves >= upstream_config(uc->up)->npeers)
		return false;
	upstream_peer_failed(uc->up, uc->peer);
	next = upstream_pick_key(uc->up, uc->hkey, uc->hklen);
	if (next == NULL || next == uc->peer) {
		uc_fail(uc, 502, false, "connect: %s", strerror(err));
		return true;
	}
	log_warn("upstream %s: connect: %s, client %s; the key goes to %s",
	    upstream_peer_name(uc->peer), strerror(err), uc->client,
	    upstream_peer_name(next));
	uc_go(uc, next, false, 502);
	return true;
}

/*
 * next_upstream: the peer failed (why: NEXT_ERROR or NEXT_TIMEOUT) before
 * its answer began, so the request goes to another peer of the group that
 * is up and was not tried, as nginx's proxy_next_upstream.  Once bytes of
 * the request may have reached the peer, only a request that can be sent
 * twice goes on (idempotent, or non_idempotent said so) and only while
 * the buffer still holds all of it.  True when the exchange went on (or
 * failed here); false leaves the failure to the caller.
 */
static bool
uc_next(struct upstream_conn *uc, unsigned why, const char *what, int err)
{
	const struct config_upstream *cf = upstream_config(uc->up);
	bool sent = uc->reused || uc->state >= UC_HEAD;
	struct upstream_peer *next;
	size_t tries;

	if (uc->hklen != 0 || uc->got_bytes || uc->state > UC_HEAD ||
	    (cf->next_upstream & why) == 0)
		return false;
	if (sent && (!uc->replayable || (!uc->idempotent &&
	    (cf->next_upstream & NEXT_NON_IDEMPOTENT) == 0)))
		return false;
	/* At most every peer once: the tried bits cover the first 64
	 * only, so past them the count is what bounds it. */
	tries = cf->npeers;
	if (cf->next_upstream_tries > 0 &&
	    (size_t)cf->next_upstream_tries < tries)
		tries = (size_t)cf->next_upstream_tries;
	if (uc->moves + 1 >= tries)
		return false;
	uc->tried |= upstream_peer_bit(uc->up, uc->peer);
	if ((next = upstream_pick_next(uc->up, uc->tried)) == NULL)
		return false;		/* the caller counts the failure */
	upstream_peer_failed(uc->up, uc->peer);
	log_warn("upstream %s: %s%s%s, client %s; trying %s",
	    upstream_peer_name(uc->peer), what, err ? ": " : "",
	    err ? strerror(err) : "", uc->client, upstream_peer_name(next));
	uc_go(uc, next, true, why == NEXT_TIMEOUT ? 504 : 502);
	return true;
}

/* The exchange's timer is due. */
static void
uc_due(struct dl_node *n)
{
	struct upstream_conn *uc = (struct upstream_conn *)(void *)
	    ((char *)n - offsetof(struct upstream_conn, tnode));
	enum uc_timer t = uc->timer;
	const char *what;

	uc->timer = UT_NONE;		/* out of the queue already */
	worker_update_time();
	if (t == UT_CONNECT) {
		what = uc->state == UC_HANDSHAKE ? "TLS handshake timed out" :
		    "connect timed out";
		if (!uc_next(uc, NEXT_TIMEOUT, what, 0))
			uc_fail(uc, 504, true, "%s", what);
	} else if (t == UT_SEND) {
		if (!uc_next(uc, NEXT_TIMEOUT, "send timed out", 0))
			uc_fail(uc, 504, false, "timed out sending the "
			    "request");
	} else if (t == UT_READ) {
		if (!uc_next(uc, NEXT_TIMEOUT, "read timed out", 0))
			uc_fail(uc, 504, uc->state != UC_BODY,
			    "read timed out");
	}
}

/* Connected (and the handshake done): the request goes out. */
static void
uc_ready(struct upstream_conn *uc)
{
	uc->connect_time_us = (int64_t)(worker.now_us - uc->connect_us);
	STATS_HIST(&upstream_peer_stats(uc->up, uc->peer)->connect,
	    (uint64_t)uc->connect_time_us);
	uc->state = UC_HEAD;
	uc_want_read(uc);
	uc_want_write(uc);
}

/* One step of the TLS handshake, from either event. */
static void
uc_handshake(struct upstream_conn *uc)
{
	char why[256];
	int rc = upstream_tls_handshake(uc->ssl, why, sizeof(why));

	if (rc == 0) {
		uc_ready(uc);
		return;
	}
	if (rc == TLS_FAILED) {
		if (uc_next(uc, NEXT_ERROR, "TLS handshake failed", 0))
			return;
		uc_fail(uc, 502, true, "TLS handshake: %s", why);
		return;
	}
	/* Reading is always on; writing only when asked for.  The connect
	 * timer covers the whole handshake. */
	link_write(uc->link, rc == TLS_WANT_WRITE);
}

static void
uc_connected(struct upstream_conn *uc)
{
	int err = uc->cerr;
	socklen_t len = sizeof(err);

	if (err == 0 &&
	    getsockopt(uc->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	if (err != 0) {
		if (!uc_move(uc, err) &&
		    !uc_next(uc, NEXT_ERROR, "connect", err))
			uc_fail(uc, 502, true, "connect: %s", strerror(err));
		return;
	}
	if (upstream_peer_tls(uc->up, uc->peer)) {
		if ((uc->ssl = upstream_tls_new(uc->up, uc->peer, uc->fd)) ==
		    NULL) {
			uc_fail(uc, 502, false, "no TLS session");
			return;
		}
		uc->state = UC_HANDSHAKE;
		link_read(uc->link);
		uc_handshake(uc);
		return;
	}
	link_read(uc->link);
	uc_ready(uc);
}

/* The request --------------------------------------------------------- */

void
upstream_conn_body(struct upstream_conn *uc, const char *p, size_t len,
    bool last)
{
	if (uc->write_shut) {
		uc->body_done = last;
		return;
	}
	if ((len > 0 || last) &&
	    !uc->proto->request_body(uc->ctx, p, len, last, &uc->w)) {
		/* The peer gets a short body and the connection is not
		 * reused. */
		log_error("upstream %s: out of memory for the request body",
		    upstream_peer_name(uc->peer));
		uc->write_shut = true;
	}
	uc->body_done = last;
	if (uc->state != UC_CONNECT && uc->state != UC_HANDSHAKE &&
	    uc->wpos < uc->w.len)
		uc_want_write(uc);
}

size_t
upstream_conn_body_room(const struct upstream_conn *uc)
{
	size_t queued = uc->w.len - uc->wpos;

	return queued >= UC_WBUF_HIGH ? 0 : UC_WBUF_HIGH - queued;
}

void
uc_write(struct upstream_conn *uc)
{
	ssize_t n;

	worker_update_time();
	if (uc->state == UC_CONNECT) {
		uc_connected(uc);
		return;
	}
	if (uc->state == UC_HANDSHAKE) {
		uc_handshake(uc);
		return;
	}
	if (uc->wpos < uc->w.len && !uc->write_shut) {
		n = uc_send(uc, uc->w.p + uc->wpos, uc->w.len - uc->wpos);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			if (uc_retry(uc) ||
			    uc_next(uc, NEXT_ERROR, "send", errno))
				return;
			if (!uc->got_bytes) {
				/* As a failed connect or read, it counts
				 * against the peer; a pooled connection may
				 * just have gone stale. */
				uc_fail(uc, 502, !uc->reused, "send: %s",
				    strerror(errno));
				return;
			}
			/* It answered already; read what it says. */
			uc->write_shut = true;
		} else {
			uc->wpos += (size_t)n;
		}
	}
	if (uc->wpos < uc->w.len && !uc->write_shut) {
		uc_time(uc, UT_SEND);	/* renewed by each write */
		return;
	}
	link_write(uc->link, false);
	uc_untime(uc);
	if (uc->has_body) {
		/* Body bytes leave the buffer: no replay from here on. */
		uc->wpos = uc->w.len = 0;
		uc->replayable = false;
	}
	uc_want_read(uc);
	if (!uc->body_done)
		uc->h->sent(uc->arg);
}

/* The response -------------------------------------------------------- */

void
upstream_conn_pause(struct upstream_conn *uc)
{
	uc->paused = true;
	if (uc->link != NULL && uc->link->reading) {
		event_del(&uc->link->rev);
		uc->link->reading = false;
	}
	if (uc->timer == UT_READ)
		uc_untime(uc);
}

void
upstream_conn_resume(struct upstream_conn *uc)
{
	if (!uc->paused)
		return;
	uc->paused = false;
	uc_want_read(uc);
	uc_more(uc);
}

/* Whether the connection may carry the next exchange. */
static bool
uc_reusable(const struct upstream_conn *uc)
{
	return uc->proto->reusable(uc->ctx) && uc->body_done &&
	    !uc->write_shut && uc->wpos == uc->w.len;
}

/*
 * Feeds body bytes buf[0..n), in rbuf, to the module and the handler.
 * False when the exchange is gone (complete, failed or closed by the
 * handler).
 */
static bool
uc_relay(struct upstream_conn *uc, char *buf, size_t n)
{
	size_t len = n, data, out;
	int rc;

	rc = uc->proto->response_body(uc, uc->ctx, buf, &len, &data);
	if (rc == HTTP_ERROR) {
		uc_fail(uc, 502, true, "bad framing in the response body");
		return false;
	}
	uc->body_bytes += data;
	out = uc->decode ? data : len;
	if (rc != HTTP_OK)
		return uc->h->body(uc->arg, buf, out, false);
	if (len < n)
		log_warn("upstream %s sent %zu bytes after the response; "
		    "closing it", upstream_peer_name(uc->peer), n - len);
	uc->state = UC_DONE;		/* first: a clean end for the session */
	uc_detach(uc, len == n && uc_reusable(uc));
	uc->h->body(uc->arg, buf, out, true);
	return false;
}

/* The head is in: hand it over, then the body bytes read with it. */
static bool
uc_headed(struct upstream_conn *uc, size_t n)
{
	bool decode = false;
	size_t len;

	upstream_peer_ok(uc->peer);
	STATS_HIST(&upstream_peer_stats(uc->up, uc->peer)->response,
	    worker.now_us - uc->open_us);
	conn_log_upstream(uc->c, upstream_peer_name(uc->peer),
	    uc->resp.status, uc->connect_time_us,
	    (int64_t)(worker.now_us - uc->open_us));
	uc->state = UC_HEADED;
	uc->hlen = n;
	if (!uc->h->head(uc->arg, &uc->resp, &decode))
		return false;
	uc->decode = decode;
	uc->proto->body_init(uc->ctx, &uc->resp, decode);
	uc->state = UC_BODY;
	/* The body bytes read with the head go out from where they are: the
	 * next read starts at rbuf again, as every body read does. */
	len = uc->rlen - n;
	uc->rlen = 0;
	/* Also with no bytes after the head: an empty body is done. */
	return uc_relay(uc, uc->rbuf + n, len);
}

/* Parses the response head in rbuf; true when the exchange goes on. */
static bool
uc_head(struct upstream_conn *uc)
{
	const struct config *cf = worker.cf;
	const char *why = NULL;
	size_t used;
	char *grown;
	int rc;

	for (;;) {
		used = 0;
		rc = uc->proto->response_head(uc, uc->ctx, uc->rbuf, uc->rlen,
		    &used, &uc->resp, &why);
		if (rc == HTTP_ERROR) {
			uc_fail(uc, 502, true, "invalid response header: %s",
			    why != NULL ? why : "?");
			return false;
		}
		if (rc == HTTP_OK && uc->resp.status >= 200)
			return uc_headed(uc, used);
		if (rc == HTTP_OK && uc->h->interim != NULL &&
		    !uc->h->interim(uc->arg, &uc->resp))
			return false;
		/* Consumed by the module, or an interim (1xx) response. */
		uc->rlen -= used;
		memmove(uc->rbuf, uc->rbuf + used, uc->rlen);
		if (rc == HTTP_OK)
			continue;
		if (uc->rlen < uc->rsize)
			return true;
		if (uc->rsize >= cf->max_header_size + 4) {
			uc_fail(uc, 502, true, "response header too large");
			return false;
		}
		if ((grown = realloc(uc->rbuf, uc->rsize * 2)) == NULL) {
			uc_fail(uc, 502, false, "out of memory");
			return false;
		}
		uc->rbuf = grown;
		uc->rsize *= 2;
		return true;
	}
}

static void
uc_eof(struct upstream_conn *uc, int err)
{
	if (uc_retry(uc) || uc_next(uc, NEXT_ERROR, err ? "read" :
	    "connection closed", err))
		return;
	if (uc->state != UC_BODY) {
		uc_fail(uc, 502, true, "%s before the response header",
		    err ? strerror(err) : "connection closed");
		return;
	}
	/* A reset ends nothing cleanly, even a body read until close:
	 * what came may be cut short, so it is never stored. */
	if (err == 0 && uc->proto->response_eof(uc->ctx) == HTTP_OK) {
		uc->state = UC_DONE;
		uc_detach(uc, false);
		uc->h->body(uc->arg, uc->rbuf, 0, true);
		return;
	}
	uc_fail(uc, 502, false, "connection %s after %llu body bytes",
	    err ? strerror(err) : "closed",
	    (unsigned long long)uc->body_bytes);
}

/*
 * A read left the exchange going: the read timeout starts again (each
 * read renews it, but the one that ends the response has nothing left to
 * time), and what the session holds is read.
 */
static void
uc_went_on(struct upstream_conn *uc)
{
	if (uc->timer == UT_READ)
		uc_time(uc, UT_READ);
	uc_more(uc);
}

void
uc_read(struct upstream_conn *uc)
{
	ssize_t n;

	worker_update_time();
	if (uc->state == UC_HANDSHAKE) {
		uc_handshake(uc);
		return;
	}
	n = uc_recv(uc, uc->rbuf + uc->rlen, uc->rsize - uc->rlen);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		uc_eof(uc, n < 0 ? errno : 0);
		return;
	}
	uc->got_bytes = true;
	uc->rlen += (size_t)n;
	if (uc->state != UC_BODY) {
		if (uc_head(uc))
			uc_went_on(uc);
		return;
	}
	n = (ssize_t)uc->rlen;
	uc->rlen = 0;
	if (uc_relay(uc, uc->rbuf, (size_t)n))
		uc_went_on(uc);
}

/* The end ------------------------------------------------------------- */

/*
 * A handler that answered from the head alone (a 304 it refreshed the
 * cache with, a HEAD it stored nothing for) leaves the rest of the
 * response: the connection is kept only when that rest is already in and
 * complete.
 */
static bool
uc_rest_complete(struct upstream_conn *uc)
{
	size_t rest = uc->rlen - uc->hlen, len = rest, data;

	uc->proto->body_init(uc->ctx, &uc->resp, true);
	return uc->proto->response_body(uc, uc->ctx, uc->rbuf + uc->hlen,
	    &len, &data) == HTTP_OK && len == rest && uc_reusable(uc);
}

void
upstream_conn_close(struct upstream_conn *uc)
{
	/* From the head callback, rbuf still starts with the head. */
	if (uc->link != NULL)
		uc_detach(uc, uc->state == UC_HEADED && uc_rest_complete(uc));
	uc_free(uc);
}

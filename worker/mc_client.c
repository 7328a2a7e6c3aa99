/*
 * The memcached cluster client of the second-level cache (mc_client.h):
 * one operation at a time on a connection of the node that ketama picks
 * (a kept-alive one from the group's pool when there is one), its own
 * timer, and the node marked failed on a refused or broken connection or
 * a timeout, so that after max_fails its keys move on the ring.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/store.h"
#include "worker/conn.h"
#include "worker/mc_client.h"
#include "worker/mc_parse.h"
#include "worker/upstream.h"

#define READ_INIT	16384
#define TRAILER		"\r\nEND\r\n"

enum op_kind { OP_GET, OP_SET, OP_DELETE };

struct mc_call {
	enum op_kind kind;
	struct upstream *u;
	struct upstream_peer *peer;
	int fd;
	bool connecting, reused;
	struct event *ev, *timer;
	char *w;			/* the request */
	size_t wlen, wpos;
	char *r;			/* the answer */
	size_t rlen, rsize, rmax;
	mc_get_cb cb;
	void *arg;
	struct mc_call *prev, *next;	/* every op under way */
};

static struct mc_call *ops;

static void op_event(evutil_socket_t, short, void *);

static void
op_free(struct mc_call *op, bool keep)
{
	if (op->prev != NULL)
		op->prev->next = op->next;
	else if (ops == op)
		ops = op->next;
	if (op->next != NULL)
		op->next->prev = op->prev;
	/* The pool watches a kept fd before op->ev stops: no epoll_ctl. */
	if (op->fd != -1 && !(keep && upstream_pool_put(op->u, op->peer,
	    op->fd, NULL)))
		close(op->fd);
	if (op->ev != NULL)
		event_free(op->ev);
	if (op->timer != NULL)
		event_free(op->timer);
	free(op->w);
	free(op->r);
	free(op);
}

/* A get is answered (data NULL: a miss or a failure); the op ends. */
static void
op_end(struct mc_call *op, bool keep, const char *data, size_t len)
{
	mc_get_cb cb = op->cb;
	void *arg = op->arg;

	op->cb = NULL;
	if (cb != NULL)
		cb(arg, data, len);
	op_free(op, keep);
}

static void
op_fail(struct mc_call *op, int err, const char *why)
{
	log_at(L_WARN, err, "memcached %s: %s", upstream_peer_name(op->peer),
	    why);
	upstream_peer_failed(op->u, op->peer);
	op_end(op, false, NULL, 0);
}

static bool
op_arm(struct mc_call *op, short what)
{
	event_del(op->ev);
	event_assign(op->ev, worker.base, op->fd, what | EV_PERSIST, op_event,
	    op);
	return event_add(op->ev, NULL) == 0;
}

/*
 * The answer so far: 1 complete (*data and *len: a value, or NULL for a
 * miss or a stored/deleted reply), 0 more to come, -1 not memcached's.
 */
static int
parse(struct mc_call *op, const char **data, size_t *len)
{
	const char *nl = memchr(op->r, '\n', op->rlen);
	unsigned long long flags, bytes;
	char key[MC_KEY_MAX + 1];
	size_t head;
	int n = 0;

	*data = NULL;
	*len = 0;
	if (nl == NULL)
		return op->rlen > MC_KEY_MAX + 64 ? -1 : 0;
	head = (size_t)(nl - op->r) + 1;
	/* STORED, DELETED, NOT_FOUND, SERVER_ERROR: one line */
	if (op->kind != OP_GET)
		return head == op->rlen ? 1 : -1;
	if (head == 5 && memcmp(op->r, "END\r\n", 5) == 0)
		return op->rlen == 5 ? 1 : -1;
	if (sscanf(op->r, "VALUE %250s %llu %llu%n", key, &flags, &bytes,
	    &n) != 3 || op->r + n + 2 != nl + 1 || op->r[n] != '\r' ||
	    bytes > op->rmax)
		return -1;
	if (op->rlen < head + bytes + sizeof(TRAILER) - 1)
		return 0;
	if (op->rlen != head + bytes + sizeof(TRAILER) - 1 ||
	    memcmp(op->r + head + bytes, TRAILER, sizeof(TRAILER) - 1) != 0)
		return -1;
	*data = op->r + head;
	*len = (size_t)bytes;
	return 1;
}

static void
op_read(struct mc_call *op)
{
	const char *data;
	size_t len, size;
	ssize_t n;
	char *b;
	int rc;

	for (;;) {
		if (op->rlen == op->rsize) {
			size = op->rsize * 2;
			if (size > op->rmax + MC_KEY_MAX + 128)
				size = op->rmax + MC_KEY_MAX + 128;
			if (size <= op->rsize ||
			    (b = realloc(op->r, size)) == NULL) {
				op_fail(op, 0, "answer too large");
				return;
			}
			op->r = b;
			op->rsize = size;
		}
		n = recv(op->fd, op->r + op->rlen, op->rsize - op->rlen, 0);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			op_fail(op, n == 0 ? 0 : errno, "connection closed");
			return;
		}
		op->rlen += (size_t)n;
		if ((rc = parse(op, &data, &len)) == 0)
			continue;
		if (rc < 0) {
			op_fail(op, 0, "not a memcached answer");
			return;
		}
		upstream_peer_ok(op->peer);
		op_end(op, true, data, len);
		return;
	}
}

static void
op_event(evutil_socket_t fd, short what, void *arg)
{
	struct mc_call *op = arg;
	socklen_t slen = sizeof(int);
	int err = 0;
	ssize_t n;

	worker_update_time();
	if (what & EV_TIMEOUT) {
		op_fail(op, 0, "timed out");
		return;
	}
	if (op->connecting) {
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &slen) == -1 ||
		    err != 0) {
			op_fail(op, err ? err : errno, "connect");
			return;
		}
		op->connecting = false;
	}
	if (what & EV_WRITE) {
		while (op->wpos < op->wlen) {
			n = send(fd, op->w + op->wpos, op->wlen - op->wpos,
			    MSG_NOSIGNAL);
			if (n == -1 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n == -1) {
				op_fail(op, errno, "send");
				return;
			}
			op->wpos += (size_t)n;
		}
		if (!op_arm(op, EV_READ))
			op_fail(op, 0, "event_add");
		return;
	}
	op_read(op);
}

/* Starts op on a connection to the node of key; false: none is up. */
static bool
op_start(struct mc_call *op, const char *key, size_t klen, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct ssl_st *tls;		/* memcached peers are plain */
	int err = 0;
	bool ok;

	op->fd = -1;
	if ((op->peer = upstream_pick_key(op->u, key, klen)) == NULL)
		return false;
	/* Checked: a set or delete cannot be sent twice, a get that failed
	 * on a stale connection would count against a healthy node. */
	op->fd = upstream_pool_get(op->u, op->peer, true, &tls);
	op->reused = op->fd != -1;
	if (op->fd == -1) {
		op->fd = upstream_connect(op->peer, &err);
		if (op->fd == -1)
			return false;
		op->connecting = true;
		if (err != 0) {
			close(op->fd);
			op->fd = -1;
			log_at(L_WARN, err, "memcached %s: connect",
			    upstream_peer_name(op->peer));
			upstream_peer_failed(op->u, op->peer);
			return false;
		}
	}
	op->ev = event_new(worker.base, op->fd, EV_WRITE | EV_PERSIST,
	    op_event, op);
	op->timer = evtimer_new(worker.base, op_event, op);
	ok = op->ev != NULL && op->timer != NULL &&
	    event_add(op->ev, NULL) == 0 && evtimer_add(op->timer, &tv) == 0;
	if (op->reused)		/* after op->ev watches it: no epoll_ctl */
		upstream_pool_taken(op->u);
	return ok;
}

static struct mc_call *
op_new(enum op_kind kind, struct upstream *u, size_t wsize)
{
	struct mc_call *op = calloc(1, sizeof(*op));

	if (op == NULL)
		return NULL;
	op->kind = kind;
	op->u = u;
	op->fd = -1;
	op->next = ops;
	if (ops != NULL)
		ops->prev = op;
	ops = op;
	op->rsize = kind == OP_GET ? READ_INIT : 64;
	op->rmax = worker.store != NULL ? store_max_object(worker.store) : 0;
	if ((op->w = malloc(wsize)) == NULL ||
	    (op->r = malloc(op->rsize)) == NULL) {
		op_free(op, false);
		return NULL;
	}
	return op;
}

struct mc_call *
mc_client_get(struct upstream *u, const char *key, size_t klen,
    int timeout_ms, mc_get_cb cb, void *arg)
{
	struct mc_call *op = op_new(OP_GET, u, klen + 8);

	if (op == NULL)
		return NULL;
	memcpy(op->w, "get ", 4);
	memcpy(op->w + 4, key, klen);
	memcpy(op->w + 4 + klen, "\r\n", 2);
	op->wlen = klen + 6;
	op->cb = cb;
	op->arg = arg;
	if (!op_start(op, key, klen, timeout_ms)) {
		op->cb = NULL;
		op_free(op, false);
		return NULL;
	}
	return op;
}

void
mc_client_cancel(struct mc_call *op)
{
	op->cb = NULL;
	op_free(op, false);	/* its answer may still come: not pooled */
}

void
mc_client_set(struct upstream *u, const char *key, size_t klen,
    const void *val, size_t vlen, int64_t ttl, int timeout_ms)
{
	struct mc_call *op = op_new(OP_SET, u, klen + vlen + 64);
	int n;

	if (op == NULL)
		return;
	n = snprintf(op->w, klen + 64, "set %.*s 0 %lld %zu\r\n", (int)klen,
	    key, (long long)ttl, vlen);
	memcpy(op->w + n, val, vlen);
	memcpy(op->w + n + vlen, "\r\n", 2);
	op->wlen = (size_t)n + vlen + 2;
	if (!op_start(op, key, klen, timeout_ms))
		op_free(op, false);
}

void
mc_client_delete(struct upstream *u, const char *key, size_t klen,
    int timeout_ms)
{
	struct mc_call *op = op_new(OP_DELETE, u, klen + 16);

	if (op == NULL)
		return;
	op->wlen = (size_t)snprintf(op->w, klen + 16, "delete %.*s\r\n",
	    (int)klen, key);
	if (!op_start(op, key, klen, timeout_ms))
		op_free(op, false);
}

void
mc_client_free_all(void)
{
	while (ops != NULL) {
		ops->cb = NULL;
		op_free(ops, false);
	}
}

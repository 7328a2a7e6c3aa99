/*
 * The memcached cluster client of the second-level cache (mc_client.h):
 * one operation at a time on a connection of the node that ketama picks
 * (a kept-alive one from the group's pool when there is one), its own
 * timer, and the node marked failed on a refused or broken connection or
 * a timeout, so that after max_fails its keys move on the ring.  A get of
 * several keys is one "get k1 k2 ..." per node that holds some of them,
 * all sent at once: one round trip.
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

enum op_kind { OP_GET, OP_SET, OP_DELETE };

struct node_op;

/* A get: its keys, what came for each, the operations still out. */
struct mc_call {
	mc_get_cb cb;
	void *arg;
	size_t n, pending;
	struct mc_value v[MC_GET_KEYS];
	struct node_op *ops[MC_GET_KEYS];	/* NULL once ended */
	char *bufs[MC_GET_KEYS];	/* their answers, which v points in */
	char keys[MC_GET_KEYS][MC_KEY_MAX];
};

struct node_op {
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
	struct mc_call *call;		/* OP_GET: the get it is part of */
	size_t slot;			/* in call->ops */
	size_t nkeys, idx[MC_GET_KEYS];	/* of call's keys, asked here */
	size_t off[MC_GET_KEYS], len[MC_GET_KEYS];	/* values in r */
	bool found[MC_GET_KEYS];
	size_t ppos;			/* of r parsed */
	struct node_op *prev, *next;	/* every op under way */
};

static struct node_op *ops;

static void op_event(evutil_socket_t, short, void *);

static void
op_free(struct node_op *op, bool keep)
{
	if (op->prev != NULL)
		op->prev->next = op->next;
	else if (ops == op)
		ops = op->next;
	if (op->next != NULL)
		op->next->prev = op->prev;
	/* The pool watches a kept fd before op->ev stops: no epoll_ctl. */
	if (op->fd != -1) {
		struct upstream_link *l = keep &&
		    upstream_config(op->u)->keepalive > 0 ?
		    upstream_link_adopt(op->u, op->fd) : NULL;

		if (l == NULL)
			close(op->fd);
		else if (!upstream_pool_put(op->u, op->peer, l))
			upstream_link_close(l, true);
	}
	if (op->ev != NULL)
		event_free(op->ev);
	if (op->timer != NULL)
		event_free(op->timer);
	free(op->w);
	free(op->r);
	free(op);
}

static void
call_free(struct mc_call *call)
{
	for (size_t i = 0; i < call->n; i++) {
		if (call->ops[i] != NULL) {
			call->ops[i]->call = NULL;
			op_free(call->ops[i], false);
		}
		free(call->bufs[i]);
	}
	free(call);
}

/*
 * The op ends (ok: its answer is whole); a get's values go to its call,
 * which answers once its last op ended.
 */
static void
op_end(struct node_op *op, bool ok)
{
	struct mc_call *call = op->call;
	size_t i, k;

	if (call == NULL) {
		op_free(op, ok);
		return;
	}
	for (i = 0; ok && i < op->nkeys; i++) {
		if (!op->found[i])
			continue;
		k = op->idx[i];
		call->v[k].data = op->r + op->off[i];
		call->v[k].len = op->len[i];
	}
	call->bufs[op->slot] = op->r;	/* the values stay until the end */
	op->r = NULL;
	call->ops[op->slot] = NULL;
	op_free(op, ok);
	if (--call->pending > 0)
		return;
	if (call->cb != NULL)
		call->cb(call->arg, call->v, call->n);
	call_free(call);
}

static void
op_fail(struct node_op *op, int err, const char *why)
{
	log_at(L_WARN, err, "memcached %s: %s", upstream_peer_name(op->peer),
	    why);
	upstream_peer_failed(op->u, op->peer);
	op_end(op, false);
}

static bool
op_arm(struct node_op *op, short what)
{
	event_del(op->ev);
	event_assign(op->ev, worker.base, op->fd, what | EV_PERSIST, op_event,
	    op);
	return event_add(op->ev, NULL) == 0;
}

/*
 * A get's answer so far: VALUE blocks of the keys asked, then END.  1
 * complete, 0 more to come, -1 not memcached's.
 */
static int
parse_get(struct node_op *op)
{
	unsigned long long flags, bytes;
	char key[MC_KEY_MAX + 1];
	const char *p, *nl;
	size_t left, head, i;
	int n;

	for (;;) {
		p = op->r + op->ppos;
		left = op->rlen - op->ppos;
		if ((nl = memchr(p, '\n', left)) == NULL)
			return left > MC_KEY_MAX + 64 ? -1 : 0;
		head = (size_t)(nl - p) + 1;
		if (head == 5 && memcmp(p, "END\r\n", 5) == 0)
			return left == 5 ? 1 : -1;
		n = 0;
		if (sscanf(p, "VALUE %250s %llu %llu%n", key, &flags, &bytes,
		    &n) != 3 || p + n + 2 != nl + 1 || p[n] != '\r' ||
		    bytes > op->rmax)
			return -1;
		if (left < head + bytes + 2)
			return 0;
		if (memcmp(p + head + bytes, "\r\n", 2) != 0)
			return -1;
		/* One of ours, each once. */
		for (i = 0; i < op->nkeys; i++)
			if (!op->found[i] && strcmp(key,
			    op->call->keys[op->idx[i]]) == 0)
				break;
		if (i == op->nkeys)
			return -1;
		op->found[i] = true;
		op->off[i] = op->ppos + head;
		op->len[i] = (size_t)bytes;
		op->ppos += head + (size_t)bytes + 2;
	}
}

/* 1: the one line of a set or delete came, 0 more, -1 not memcached's. */
static int
parse_reply(const struct node_op *op)
{
	const char *nl = memchr(op->r, '\n', op->rlen);

	if (nl == NULL)
		return op->rlen > MC_KEY_MAX + 64 ? -1 : 0;
	/* STORED, DELETED, NOT_FOUND, SERVER_ERROR */
	return (size_t)(nl - op->r) + 1 == op->rlen ? 1 : -1;
}

static void
op_read(struct node_op *op)
{
	/* Room for every value asked, at most max_object each. */
	size_t cap = (op->rmax + MC_KEY_MAX + 128) * (op->nkeys ? op->nkeys : 1);
	size_t size;
	ssize_t n;
	char *b;
	int rc;

	for (;;) {
		/* One byte kept for a NUL: sscanf never reads past it. */
		if (op->rlen + 1 >= op->rsize) {
			size = op->rsize * 2;
			if (size > cap)
				size = cap;
			if (size <= op->rsize ||
			    (b = realloc(op->r, size)) == NULL) {
				op_fail(op, 0, "answer too large");
				return;
			}
			op->r = b;
			op->rsize = size;
		}
		n = recv(op->fd, op->r + op->rlen, op->rsize - op->rlen - 1,
		    0);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			op_fail(op, n == 0 ? 0 : errno, "connection closed");
			return;
		}
		op->rlen += (size_t)n;
		op->r[op->rlen] = '\0';
		rc = op->kind == OP_GET ? parse_get(op) : parse_reply(op);
		if (rc == 0)
			continue;
		if (rc < 0) {
			op_fail(op, 0, "not a memcached answer");
			return;
		}
		upstream_peer_ok(op->peer);
		op_end(op, true);
		return;
	}
}

static void
op_event(evutil_socket_t fd, short what, void *arg)
{
	struct node_op *op = arg;
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

/* Starts op on a connection to peer; false: it cannot. */
static bool
op_start(struct node_op *op, struct upstream_peer *peer, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct upstream_link *l;	/* memcached peers are plain */
	int err = 0;
	bool ok;

	op->fd = -1;
	if ((op->peer = peer) == NULL)
		return false;
	/* Checked: a set or delete cannot be sent twice, a get that failed
	 * on a stale connection would count against a healthy node. */
	l = upstream_pool_get(op->u, op->peer, true);
	op->fd = l != NULL ? upstream_link_fd(l) : -1;
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
	if (l != NULL)		/* after op->ev watches it: no epoll_ctl */
		upstream_link_release(l);
	return ok;
}

static struct node_op *
op_new(enum op_kind kind, struct upstream *u, size_t wsize)
{
	struct node_op *op = calloc(1, sizeof(*op));

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

/* The op of call that asks peer, made when it is the first key there. */
static struct node_op *
get_op(struct mc_call *call, struct upstream *u, struct upstream_peer *peer,
    struct upstream_peer **peers, size_t *nops)
{
	size_t i;

	for (i = 0; i < *nops; i++)
		if (peers[i] == peer)
			return call->ops[i];
	/* "get" and at most every key with its space, then CRLF */
	call->ops[i] = op_new(OP_GET, u, 3 + call->n * (MC_KEY_MAX + 1) + 2);
	if (call->ops[i] == NULL)
		return NULL;
	call->ops[i]->call = call;
	call->ops[i]->slot = i;
	memcpy(call->ops[i]->w, "get", 3);
	call->ops[i]->wlen = 3;
	peers[i] = peer;
	(*nops)++;
	return call->ops[i];
}

struct mc_call *
mc_client_get(struct upstream *u, const char *const *keys,
    const size_t *klens, size_t n, int timeout_ms, mc_get_cb cb, void *arg)
{
	struct upstream_peer *peers[MC_GET_KEYS], *peer;
	struct mc_call *call;
	struct node_op *op;
	size_t i, nops = 0, started = 0;

	if (n == 0 || n > MC_GET_KEYS || (call = calloc(1, sizeof(*call))) ==
	    NULL)
		return NULL;
	call->n = n;
	/* The keys of each node in one command: one round trip. */
	for (i = 0; i < n; i++) {
		if (klens[i] == 0 || klens[i] >= MC_KEY_MAX)
			goto fail;
		memcpy(call->keys[i], keys[i], klens[i]);
		call->v[i].key = call->keys[i];
		call->v[i].klen = klens[i];
		if ((peer = upstream_pick_key(u, keys[i], klens[i])) == NULL)
			continue;	/* no node is up: a miss */
		if ((op = get_op(call, u, peer, peers, &nops)) == NULL)
			goto fail;
		op->w[op->wlen++] = ' ';
		memcpy(op->w + op->wlen, keys[i], klens[i]);
		op->wlen += klens[i];
		op->idx[op->nkeys++] = i;
	}
	for (i = 0; i < nops; i++) {
		memcpy(call->ops[i]->w + call->ops[i]->wlen, "\r\n", 2);
		call->ops[i]->wlen += 2;
	}
	call->pending = nops;
	for (i = 0; i < nops; i++) {
		if (op_start(call->ops[i], peers[i], timeout_ms)) {
			started++;
			continue;
		}
		/* That node's keys are misses; the others are asked. */
		call->ops[i]->call = NULL;
		op_free(call->ops[i], false);
		call->ops[i] = NULL;
		call->pending--;
	}
	if (started > 0) {
		call->cb = cb;
		call->arg = arg;
		return call;
	}
fail:
	call_free(call);
	return NULL;
}

void
mc_client_cancel(struct mc_call *call)
{
	call->cb = NULL;
	call_free(call);	/* answers may still come: not pooled */
}

void
mc_client_set(struct upstream *u, const char *key, size_t klen,
    const void *pre, size_t plen, const void *val, size_t vlen, int64_t ttl,
    int timeout_ms)
{
	struct node_op *op = op_new(OP_SET, u, klen + plen + vlen + 64);
	int n;

	if (op == NULL)
		return;
	n = snprintf(op->w, klen + 64, "set %.*s 0 %lld %zu\r\n", (int)klen,
	    key, (long long)ttl, plen + vlen);
	memcpy(op->w + n, pre, plen);
	memcpy(op->w + n + plen, val, vlen);
	memcpy(op->w + n + plen + vlen, "\r\n", 2);
	op->wlen = (size_t)n + plen + vlen + 2;
	if (!op_start(op, upstream_pick_key(u, key, klen), timeout_ms))
		op_free(op, false);
}

void
mc_client_delete(struct upstream *u, const char *key, size_t klen,
    int timeout_ms)
{
	struct node_op *op = op_new(OP_DELETE, u, klen + 16);

	if (op == NULL)
		return;
	op->wlen = (size_t)snprintf(op->w, klen + 16, "delete %.*s\r\n",
	    (int)klen, key);
	if (!op_start(op, upstream_pick_key(u, key, klen), timeout_ms))
		op_free(op, false);
}

void
mc_client_free_all(void)
{
	struct node_op *op;

	while ((op = ops) != NULL) {
		if (op->call != NULL) {
			op->call->cb = NULL;
			call_free(op->call);	/* frees op too */
		} else
			op_free(op, false);
	}
}

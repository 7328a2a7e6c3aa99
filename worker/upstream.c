/*
 * Upstream groups: peers, failures, keep-alive pools and connects.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/stats.h"
#include "worker/conn.h"
#include "worker/status.h"
#include "worker/upstream.h"

struct upstream_peer {
	const struct config_peer *cf;
	int cur;			/* smooth weighted round-robin */
	unsigned fails;
	uint64_t first_fail_ms;
	uint64_t down_until_ms;
};

struct idle {
	int fd;
	struct upstream_peer *peer;
};

struct upstream {
	const struct config_upstream *cf;
	struct upstream_peer *peers;
	struct idle *pool;		/* cf->keepalive slots, newest last */
	unsigned nidle;
};

static struct upstream *ups;
static size_t nups;

static void
groups_free(struct upstream *u, size_t n)
{
	size_t i;

	for (i = 0; u != NULL && i < n; i++) {
		while (u[i].nidle > 0)
			close(u[i].pool[--u[i].nidle].fd);
		free(u[i].peers);
		free(u[i].pool);
	}
	free(u);
}

bool
upstream_init(void)
{
	const struct config *cf = worker.cf;
	struct upstream *all, *u;
	size_t i, j;

	if (ups != NULL || cf->nupstreams == 0)
		return true;
	if ((all = calloc(cf->nupstreams, sizeof(*all))) == NULL)
		return false;
	for (i = 0; i < cf->nupstreams; i++) {
		u = &all[i];
		u->cf = &cf->upstreams[i];
		u->peers = calloc(u->cf->npeers, sizeof(*u->peers));
		u->pool = calloc((size_t)u->cf->keepalive + 1,
		    sizeof(*u->pool));
		if (u->peers == NULL || u->pool == NULL) {
			groups_free(all, i + 1);
			return false;
		}
		for (j = 0; j < u->cf->npeers; j++)
			u->peers[j].cf = &u->cf->peers[j];
	}
	/* Published whole: a later call never sees half of it. */
	nups = cf->nupstreams;
	ups = all;
	return true;
}

struct upstream *
upstream_group(size_t i)
{
	return ups != NULL && i < nups ? &ups[i] : NULL;
}

const struct config_upstream *
upstream_config(const struct upstream *u)
{
	return u->cf;
}

const char *
upstream_peer_name(const struct upstream_peer *p)
{
	return p->cf->text;
}

const char *
upstream_peer_host(const struct upstream_peer *p)
{
	return p->cf->addr.ss_family == AF_UNIX ? "localhost" : p->cf->text;
}

/* Peers ------------------------------------------------------------- */

static bool
peer_down(const struct upstream_peer *p)
{
	return p->down_until_ms > worker.now_ms;
}

struct upstream_peer *
upstream_pick(struct upstream *u)
{
	struct upstream_peer *p, *best = NULL;
	struct upstream_peer *end = u->peers + u->cf->npeers;
	bool any_up = false;
	int total = 0;

	for (p = u->peers; p < end; p++)
		any_up |= !peer_down(p);
	for (p = u->peers; p < end; p++) {
		if (any_up && peer_down(p))
			continue;
		p->cur += p->cf->weight;
		total += p->cf->weight;
		if (best == NULL || p->cur > best->cur)
			best = p;
	}
	best->cur -= total;
	return best;
}

void
upstream_peer_failed(struct upstream *u, struct upstream_peer *p)
{
	const struct config_upstream *cf = u->cf;

	STATS_PEER_INC(cf, p->cf, peer_failures);
	if (cf->max_fails == 0)
		return;
	if (p->fails > 0 &&
	    worker.now_ms - p->first_fail_ms >= (uint64_t)cf->fail_timeout_ms)
		p->fails = 0;
	if (p->fails++ == 0)
		p->first_fail_ms = worker.now_ms;
	if (p->fails < (unsigned)cf->max_fails)
		return;
	log_error("upstream \"%s\" server %s marked down for %d ms after "
	    "%u failures", cf->name, p->cf->text, cf->fail_timeout_ms,
	    p->fails);
	p->fails = 0;
	p->down_until_ms = worker.now_ms + (uint64_t)cf->fail_timeout_ms;
	status_peer(cf, p->cf)->v[STAT_peer_down] = p->down_until_ms;
}

struct stats_peer_row *
upstream_peer_stats(const struct upstream *u, const struct upstream_peer *p)
{
	return status_peer(u->cf, p->cf);
}

void
upstream_peer_ok(struct upstream_peer *p)
{
	p->fails = 0;
}

/* Pool -------------------------------------------------------------- */

/* True when an idle connection was not closed by the peer. */
static bool
idle_alive(int fd)
{
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int
upstream_pool_get(struct upstream *u, struct upstream_peer *p)
{
	unsigned i;
	int fd;

	for (i = u->nidle; i-- > 0;) {
		if (u->pool[i].peer != p)
			continue;
		fd = u->pool[i].fd;
		memmove(&u->pool[i], &u->pool[i + 1],
		    (u->nidle - i - 1) * sizeof(*u->pool));
		u->nidle--;
		if (idle_alive(fd))
			return fd;
		close(fd);
	}
	return -1;
}

void
upstream_pool_put(struct upstream *u, struct upstream_peer *p, int fd)
{
	if (u->cf->keepalive == 0) {
		close(fd);
		return;
	}
	if (u->nidle == (unsigned)u->cf->keepalive) {
		/* The least recently used one goes. */
		close(u->pool[0].fd);
		memmove(&u->pool[0], &u->pool[1],
		    (u->nidle - 1) * sizeof(*u->pool));
		u->nidle--;
	}
	u->pool[u->nidle].fd = fd;
	u->pool[u->nidle].peer = p;
	u->nidle++;
}

/* Connecting -------------------------------------------------------- */

int
upstream_connect(const struct upstream_peer *p, int *err)
{
	const struct config_peer *cf = p->cf;
	int fd, on = 1;

	*err = 0;
	fd = socket(cf->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (cf->addr.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	/* A unix socket whose listener is behind says EAGAIN, not
	 * EINPROGRESS: the peer is not taking connections. */
	if (connect(fd, (const struct sockaddr *)&cf->addr, cf->addrlen) ==
	    -1 && errno != EINPROGRESS)
		*err = errno;
	return fd;
}

void
upstream_free_all(void)
{
	groups_free(ups, nups);
	ups = NULL;
	nups = 0;
}

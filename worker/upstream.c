/*
 * Upstream groups: peers, failures, keep-alive pools and connects.
 *
 * The pool holds the driver's connections (struct upstream_link, in
 * worker/upstream_conn.c), which stay registered for reading for their
 * whole life: while one idles, the driver notices a peer that closes it
 * and drops it from here, and taking and returning one touches neither
 * libevent nor the kernel's epoll set.
 *
 * A peer over TLS ("https://") gets a client session on its socket once
 * connected: SNI and the name its certificate must carry are tls_name, or
 * the name the server was written with, or else its address (checked as
 * an IP address, and no SNI, which takes names only: RFC 6066 3).  The session rides in the pool with its fd,
 * and the peer keeps the last session (or ticket) it gave, so the next
 * new connection resumes (nginx's proxy_ssl_session_reuse).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "master/tls_client.h"
#include "shm/stats.h"
#include "worker/conn.h"
#include "worker/mc_ring.h"
#include "worker/status.h"
#include "worker/tls.h"
#include "worker/upstream.h"

struct upstream_peer {
	const struct config_peer *cf;
	int cur;			/* smooth weighted round-robin */
	unsigned fails;
	uint64_t first_fail_ms;
	uint64_t down_until_ms;
	SSL_SESSION *session;		/* TLS: the last one it gave */
};

struct idle {
	struct upstream_link *l;
	struct upstream_peer *peer;
};

struct upstream {
	const struct config_upstream *cf;
	struct upstream_peer *peers;
	struct idle *pool;		/* the idle ones, newest last */
	unsigned nidle;
	struct mc_ring *ring;		/* hash = ketama: of the peers up */
	bool *ring_live;		/* which peers the ring has */
	SSL_CTX *tls;			/* its peers' over TLS, or NULL */
};

static struct upstream *ups;
static size_t nups;

static void
groups_free(struct upstream *u, size_t n)
{
	size_t i;

	for (i = 0; u != NULL && i < n; i++) {
		while (u[i].nidle > 0)
			upstream_link_close(u[i].pool[--u[i].nidle].l, true);
		for (size_t j = 0; u[i].peers != NULL &&
		    j < u[i].cf->npeers; j++)
			SSL_SESSION_free(u[i].peers[j].session);
		free(u[i].peers);
		free(u[i].pool);
		mc_ring_free(u[i].ring);
		free(u[i].ring_live);
	}
	free(u);
}

/*
 * A new session (or TLS 1.3 ticket) from a peer, which may come after
 * the handshake, while a response is read: the peer keeps it for its
 * next connection.  Returning 1 keeps OpenSSL's reference.
 */
static int
session_keep(SSL *ssl, SSL_SESSION *sess)
{
	struct upstream_peer *p = SSL_get_app_data(ssl);

	if (p == NULL)
		return 0;
	SSL_SESSION_free(p->session);
	p->session = sess;
	return 1;
}

bool
upstream_init(void)
{
	const struct config *cf = worker.cf;
	struct upstream *all, *u;
	size_t i, j, n;

	if (ups != NULL || cf->nupstreams == 0)
		return true;
	if ((all = calloc(cf->nupstreams, sizeof(*all))) == NULL)
		return false;
	for (i = 0; i < cf->nupstreams; i++) {
		u = &all[i];
		u->cf = &cf->upstreams[i];
		n = (size_t)u->cf->keepalive + 1;
		u->peers = calloc(u->cf->npeers, sizeof(*u->peers));
		u->pool = calloc(n, sizeof(*u->pool));
		u->ring_live = calloc(u->cf->npeers, sizeof(*u->ring_live));
		if (u->peers == NULL || u->pool == NULL ||
		    u->ring_live == NULL) {
			groups_free(all, i + 1);
			return false;
		}
		for (j = 0; j < u->cf->npeers; j++)
			u->peers[j].cf = &u->cf->peers[j];
		u->tls = worker.rt != NULL ?
		    tls_client_ctx(worker.rt->tls_up, i) : NULL;
		if (u->tls != NULL && u->cf->tls_session_reuse)
			SSL_CTX_sess_set_new_cb(u->tls, session_keep);
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

/* Peer i was tried already: the first 64 have a bit each. */
static bool
tried_has(uint64_t tried, size_t i)
{
	return i < 64 && (tried & (UINT64_C(1) << i)) != 0;
}

/*
 * Smooth weighted round-robin over the peers not in tried; down ones only
 * when all are down (first pick), never for a retry (every_down false).
 */
static struct upstream_peer *
pick_among(struct upstream *u, uint64_t tried, bool every_down)
{
	struct upstream_peer *p, *best = NULL;
	struct upstream_peer *end = u->peers + u->cf->npeers;
	bool any_up = false;
	int total = 0;

	for (p = u->peers; p < end; p++)
		any_up |= !peer_down(p) && !tried_has(tried,
		    (size_t)(p - u->peers));
	if (!any_up && !every_down)
		return NULL;
	for (p = u->peers; p < end; p++) {
		if (tried_has(tried, (size_t)(p - u->peers)) ||
		    (any_up && peer_down(p)))
			continue;
		p->cur += p->cf->weight;
		total += p->cf->weight;
		if (best == NULL || p->cur > best->cur)
			best = p;
	}
	best->cur -= total;
	return best;
}

struct upstream_peer *
upstream_pick(struct upstream *u)
{
	return pick_among(u, 0, true);
}

struct upstream_peer *
upstream_pick_next(struct upstream *u, uint64_t tried)
{
	return pick_among(u, tried, false);
}

uint64_t
upstream_peer_bit(const struct upstream *u, const struct upstream_peer *p)
{
	size_t i = (size_t)(p - u->peers);

	return i < 64 ? UINT64_C(1) << i : 0;
}

/*
 * The ring of the peers that are up, rebuilt when that set changed (a
 * peer went down or came back), as libmemcached rebuilds its continuum
 * when it ejects a server or takes it back.
 */
static const struct mc_ring *
ring_now(struct upstream *u)
{
	size_t i, n = u->cf->npeers;
	bool same = u->ring != NULL;
	struct mc_ring *r;

	for (i = 0; i < n; i++)
		same &= u->ring_live[i] == !peer_down(&u->peers[i]);
	if (same)
		return u->ring;
	for (i = 0; i < n; i++)
		u->ring_live[i] = !peer_down(&u->peers[i]);
	if ((r = mc_ring_build(u->cf->peers, n, u->ring_live)) == NULL)
		return u->ring;		/* keep the old one */
	mc_ring_free(u->ring);
	u->ring = r;
	return r;
}

struct upstream_peer *
upstream_pick_key(struct upstream *u, const char *key, size_t klen)
{
	int i;

	if (u->cf->hash != HASH_KETAMA)
		return upstream_pick(u);
	if ((i = mc_ring_pick(ring_now(u), key, klen)) < 0)
		return NULL;
	return &u->peers[i];
}

bool
upstream_any_up(const struct upstream *u)
{
	for (size_t i = 0; i < u->cf->npeers; i++)
		if (!peer_down(&u->peers[i]))
			return true;
	return false;
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
	if (STATS_ON)
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

/* Takes entry i out of the pool. */
static struct upstream_link *
pool_remove(struct upstream *u, unsigned i)
{
	struct upstream_link *l = u->pool[i].l;

	memmove(&u->pool[i], &u->pool[i + 1],
	    (u->nidle - i - 1) * sizeof(*u->pool));
	u->nidle--;
	return l;
}

void
upstream_pool_drop(struct upstream *u, struct upstream_link *l)
{
	for (unsigned i = u->nidle; i-- > 0;)
		if (u->pool[i].l == l) {
			pool_remove(u, i);
			return;
		}
}

struct upstream_link *
upstream_pool_get(struct upstream *u, struct upstream_peer *p, bool check)
{
	struct upstream_link *l;
	unsigned i;

	for (i = u->nidle; i-- > 0;) {
		if (u->pool[i].peer != p)
			continue;
		l = pool_remove(u, i);
		if (!check || idle_alive(upstream_link_fd(l)))
			return l;
		upstream_link_close(l, true);
	}
	return NULL;
}

bool
upstream_pool_put(struct upstream *u, struct upstream_peer *p,
    struct upstream_link *l)
{
	if (u->cf->keepalive == 0)
		return false;
	if (u->nidle == (unsigned)u->cf->keepalive)	/* the least recently
							   used goes */
		upstream_link_close(pool_remove(u, 0), true);
	u->pool[u->nidle].l = l;
	u->pool[u->nidle].peer = p;
	u->nidle++;
	return true;
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

/* TLS ----------------------------------------------------------------- */

bool
upstream_peer_tls(const struct upstream *u, const struct upstream_peer *p)
{
	return u->tls != NULL && p->cf->tls;
}

/* The peer's address (or name) without its port. */
static const char *
peer_ip(const struct config_peer *cf, char *buf, size_t len)
{
	const char *t = cf->text, *end = strrchr(t, ':');
	size_t n;

	if (cf->addr.ss_family == AF_UNIX || end == NULL)
		return NULL;
	if (t[0] == '[') {
		t++;
		end--;			/* "]:port" */
	}
	n = (size_t)(end - t);
	if (n >= len)
		return NULL;
	memcpy(buf, t, n);
	buf[n] = '\0';
	return buf;
}

SSL *
upstream_tls_new(struct upstream *u, struct upstream_peer *p, int fd)
{
	const char *name = u->cf->tls_name;
	char ip[64], host[CONFIG_PEER_TEXT];
	SSL *ssl;
	int ok;

	/* A server written by name: that name, as nginx's proxy_ssl_name. */
	if (name == NULL && p->cf->named &&
	    peer_ip(p->cf, host, sizeof(host)) != NULL)
		name = host;

	tls_fresh_errors();
	if ((ssl = SSL_new(u->tls)) == NULL || SSL_set_fd(ssl, fd) != 1)
		goto failed;
	SSL_set_connect_state(ssl);
	SSL_set_app_data(ssl, p);
	if (name != NULL) {
		/* SNI, and the name the certificate must have. */
		ok = SSL_set_tlsext_host_name(ssl, name) == 1 &&
		    SSL_set1_host(ssl, name) == 1;
	} else {
		/* No name: the certificate must carry the address. */
		ok = peer_ip(p->cf, ip, sizeof(ip)) != NULL &&
		    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) ==
		    1;
		if (!ok && !u->cf->tls_verify)
			ok = true;
	}
	if (!ok)
		goto failed;
	if (p->session != NULL && u->cf->tls_session_reuse)
		SSL_set_session(ssl, p->session);
	return ssl;

failed:
	log_error("upstream %s: cannot make a TLS session: %s", p->cf->text,
	    ERR_reason_error_string(ERR_peek_last_error()) ?
	    ERR_reason_error_string(ERR_peek_last_error()) : "?");
	ERR_clear_error();
	SSL_free(ssl);
	return NULL;
}

int
upstream_tls_handshake(SSL *ssl, char *why, size_t len)
{
	long v;
	int rc, err;

	tls_fresh_errors();
	errno = 0;
	rc = SSL_do_handshake(ssl);
	if (rc == 1)
		return 0;
	if ((rc = tls_wants(ssl, rc, &err)) != TLS_FAILED)
		return rc;
	if ((v = SSL_get_verify_result(ssl)) != X509_V_OK)
		snprintf(why, len, "certificate verify failed: %s",
		    X509_verify_cert_error_string(v));
	else
		snprintf(why, len, "%s", tls_why(err));
	ERR_clear_error();
	return TLS_FAILED;
}

/*
 * Without a shutdown OpenSSL takes the session for a bad one and makes it
 * unresumable, also when the peer keeps it: an exchange that failed
 * after the handshake says nothing against the session (nginx does the
 * same with a quiet shutdown).
 */
void
upstream_tls_close(SSL *ssl, bool clean)
{
	if (ssl == NULL)
		return;
	if (clean)
		tls_shutdown(ssl);
	SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	tls_free(ssl);
}

void
upstream_free_all(void)
{
	groups_free(ups, nups);
	ups = NULL;
	nups = 0;
}

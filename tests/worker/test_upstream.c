/*
 * The upstream layer alone: peer choice by smooth weighted round-robin,
 * peers taken out and brought back by max_fails/fail_timeout, the
 * keep-alive pool (per peer, newest first, closed connections dropped,
 * the least recently used one evicted) and connects over unix sockets.
 * The clock is worker.now_ms, set by each test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/event.h>

#include "master/config.h"
#include "worker/conn.h"
#include "worker/upstream.h"

static struct config cf;
static struct config_upstream ucf;
static struct config_peer peers[4];

/* A group "app" of n peers with these weights. */
static struct upstream *
group(const int *weights, size_t n, int max_fails, int fail_timeout_ms,
    int keepalive)
{
	size_t i;

	upstream_free_all();
	memset(&cf, 0, sizeof(cf));
	memset(&ucf, 0, sizeof(ucf));
	memset(peers, 0, sizeof(peers));
	for (i = 0; i < n; i++) {
		snprintf(peers[i].text, sizeof(peers[i].text),
		    "127.0.0.1:%zu", 9000 + i);
		peers[i].addr.ss_family = AF_INET;
		peers[i].weight = weights[i];
	}
	ucf.name = "app";
	ucf.peers = peers;
	ucf.npeers = n;
	ucf.max_fails = max_fails;
	ucf.fail_timeout_ms = fail_timeout_ms;
	ucf.keepalive = keepalive;
	cf.upstreams = &ucf;
	cf.nupstreams = 1;
	worker.cf = &cf;
	worker.now_ms = 1000000;
	/* The pool watches idle connections on the worker's loop. */
	if (worker.base == NULL)
		cr_assert_not_null(worker.base = event_base_new());
	cr_assert(upstream_init());
	cr_assert_not_null(upstream_group(0));
	cr_assert_null(upstream_group(1));
	return upstream_group(0);
}

/* The next n picks as letters: peer 0 is 'a'. */
static const char *
picks(struct upstream *u, size_t n)
{
	static char got[64];
	size_t i;

	for (i = 0; i < n; i++) {
		const char *name = upstream_peer_name(upstream_pick(u));

		got[i] = (char)('a' + atoi(strrchr(name, ':') + 1) - 9000);
	}
	got[n] = '\0';
	return got;
}

static void
expect_picks(struct upstream *u, const char *want)
{
	cr_expect_str_eq(picks(u, strlen(want)), want);
}

static void
fini(void)
{
	upstream_free_all();
}

TestSuite(upstream, .fini = fini);

Test(upstream, smooth_weighted_round_robin_as_nginx)
{
	int w[] = { 5, 1, 1 };
	struct upstream *u = group(w, 3, 0, 1000, 0);

	/* Spread out, not aaaaabc; and the same again each cycle. */
	expect_picks(u, "aabacaa" "aabacaa" "aabacaa");
}

Test(upstream, equal_weights_take_turns)
{
	int w[] = { 1, 1, 1 };

	expect_picks(group(w, 3, 0, 1000, 0), "abcabcabc");
}

Test(upstream, failures_take_a_peer_out_for_fail_timeout)
{
	int w[] = { 1, 1 };
	struct upstream *u = group(w, 2, 2, 1000, 0);
	struct upstream_peer *a = upstream_pick(u);
	const char *p;

	cr_assert_str_eq(upstream_peer_name(a), "127.0.0.1:9000");
	upstream_peer_failed(u, a);
	expect_picks(u, "baba");		/* one failure of two */
	upstream_peer_failed(u, a);
	expect_picks(u, "bbbb");		/* out */
	worker.now_ms += 999;
	expect_picks(u, "bb");
	worker.now_ms += 1;
	p = picks(u, 4);			/* back, in turns */
	cr_expect(strcmp(p, "abab") == 0 || strcmp(p, "baba") == 0, "%s", p);
}

Test(upstream, failures_count_within_fail_timeout_only)
{
	int w[] = { 1, 1 };
	struct upstream *u = group(w, 2, 2, 1000, 0);
	struct upstream_peer *a = upstream_pick(u);

	upstream_peer_failed(u, a);
	worker.now_ms += 1000;			/* the first one is forgotten */
	upstream_peer_failed(u, a);
	expect_picks(u, "baba");
	/* An answer forgives the failures so far. */
	upstream_peer_ok(a);
	upstream_peer_failed(u, a);
	expect_picks(u, "baba");
}

Test(upstream, all_out_means_all_used)
{
	int w[] = { 1, 1 };
	struct upstream *u = group(w, 2, 1, 5000, 0);
	struct upstream_peer *a = upstream_pick(u);
	struct upstream_peer *b = upstream_pick(u);

	upstream_peer_failed(u, a);
	expect_picks(u, "bbb");
	upstream_peer_failed(u, b);
	expect_picks(u, "abab");
}

Test(upstream, max_fails_0_never_takes_a_peer_out)
{
	int w[] = { 1, 1 };
	struct upstream *u = group(w, 2, 0, 1000, 0);
	struct upstream_peer *a = upstream_pick(u);
	int i;

	for (i = 0; i < 100; i++)
		upstream_peer_failed(u, a);
	expect_picks(u, "baba");
}

/* A connected pair: the pool keeps fds[0]; fds[1] is the peer's end. */
static void
pair(int fds[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
}

/* Pools fd as a connection to p, watched as the driver's would be. */
static bool
put(struct upstream *u, struct upstream_peer *p, int fd)
{
	struct upstream_link *l = upstream_link_adopt(u, fd);

	cr_assert_not_null(l);
	if (upstream_pool_put(u, p, l))
		return true;
	upstream_link_release(l);
	return false;
}

/* The fd of the pool's connection to p (taken out, left open), or -1. */
static int
get(struct upstream *u, struct upstream_peer *p, bool check)
{
	struct upstream_link *l = upstream_pool_get(u, p, check);
	int fd;

	if (l == NULL)
		return -1;
	fd = upstream_link_fd(l);
	upstream_link_release(l);
	return fd;
}

/* True when the peer's end sees the pool's end closed. */
static bool
closed_by_pool(int peer_end)
{
	struct pollfd p = { .fd = peer_end, .events = POLLIN };
	char b;

	/* EOF, or a reset when the pool's end had unread bytes. */
	return poll(&p, 1, 1000) == 1 && read(peer_end, &b, 1) <= 0;
}

Test(upstream, pool_is_per_peer_newest_first)
{
	int w[] = { 1, 1 };
	struct upstream *u = group(w, 2, 0, 1000, 4);
	struct upstream_peer *a = upstream_pick(u), *b = upstream_pick(u);
	int x[2], y[2], z[2];

	pair(x);
	pair(y);
	pair(z);
	put(u, a, x[0]);
	put(u, b, y[0]);
	put(u, a, z[0]);
	cr_expect_eq(get(u, a, false), z[0]);
	cr_expect_eq(get(u, a, false), x[0]);
	cr_expect_eq(get(u, a, false), -1);
	cr_expect_eq(get(u, b, false), y[0]);
	cr_expect_eq(get(u, b, false), -1);
}

/* Takes the pool's connection to p, which must be want. */
static void
take(struct upstream *u, struct upstream_peer *p, bool check, int want)
{
	cr_expect_eq(get(u, p, check), want);
}

Test(upstream, pool_checks_what_the_peer_closed)
{
	int w[] = { 1 };
	struct upstream *u = group(w, 1, 0, 1000, 4);
	struct upstream_peer *a = upstream_pick(u);
	int x[2], y[2];

	pair(x);
	pair(y);
	cr_assert(put(u, a, x[0]));
	cr_assert(put(u, a, y[0]));
	close(y[1]);				/* the newest one died */
	take(u, a, true, x[0]);
	take(u, a, true, -1);
	/* A peer that sent bytes while idle is not to be trusted either. */
	cr_assert(put(u, a, x[0]));
	cr_assert_eq(write(x[1], "H", 1), 1);
	take(u, a, true, -1);
	cr_expect(closed_by_pool(x[1]));
}

Test(upstream, idle_connections_closed_by_the_peer_leave_the_pool)
{
	int w[] = { 1 };
	struct upstream *u = group(w, 1, 0, 1000, 4);
	struct upstream_peer *a = upstream_pick(u);
	int x[2], y[2], z[2];

	pair(x);
	pair(y);
	pair(z);
	cr_assert(put(u, a, x[0]));
	cr_assert(put(u, a, y[0]));
	cr_assert(put(u, a, z[0]));
	close(y[1]);
	cr_assert_eq(write(z[1], "H", 1), 1);	/* unasked bytes */
	/* The loop sees both, without anyone asking the pool. */
	cr_assert_eq(event_base_loop(worker.base, EVLOOP_NONBLOCK), 0);
	cr_expect(closed_by_pool(z[1]));
	take(u, a, false, x[0]);
	take(u, a, false, -1);
}

Test(upstream, full_pool_closes_the_least_recently_used)
{
	int w[] = { 1 };
	struct upstream *u = group(w, 1, 0, 1000, 2);
	struct upstream_peer *a = upstream_pick(u);
	int x[2], y[2], z[2];

	pair(x);
	pair(y);
	pair(z);
	put(u, a, x[0]);
	put(u, a, y[0]);
	put(u, a, z[0]);
	cr_expect(closed_by_pool(x[1]));
	cr_expect_eq(get(u, a, false), z[0]);
	cr_expect_eq(get(u, a, false), y[0]);
}

Test(upstream, keepalive_0_keeps_nothing)
{
	int w[] = { 1 };
	struct upstream *u = group(w, 1, 0, 1000, 0);
	struct upstream_peer *a = upstream_pick(u);
	int x[2];

	pair(x);
	cr_expect_not(put(u, a, x[0]));
	cr_expect_eq(get(u, a, false), -1);
}

/* Peer 0 becomes unix:path. */
static struct upstream *
unix_group(const char *path)
{
	int w[] = { 1 };
	struct upstream *u;
	struct sockaddr_un *un = (struct sockaddr_un *)&peers[0].addr;

	u = group(w, 1, 0, 1000, 0);
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	strcpy(un->sun_path, path);
	peers[0].addrlen = (socklen_t)(offsetof(struct sockaddr_un,
	    sun_path) + strlen(path) + 1);
	snprintf(peers[0].text, sizeof(peers[0].text), "unix:%s", path);
	return u;
}

Test(upstream, connects_over_a_unix_socket)
{
	char dir[] = "/tmp/corral-ups-XXXXXX", path[64];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct upstream *u;
	struct upstream_peer *p;
	struct pollfd pf;
	int lfd, fd, afd, err;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/app.sock", dir);
	strcpy(sun.sun_path, path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(lfd, 8), 0);
	u = unix_group(path);
	p = upstream_pick(u);
	cr_expect_str_eq(upstream_peer_host(p), "localhost");
	fd = upstream_connect(p, &err);
	cr_assert_geq(fd, 0);
	cr_expect_eq(err, 0);
	pf.fd = fd;
	pf.events = POLLOUT;
	cr_assert_eq(poll(&pf, 1, 1000), 1);
	afd = accept(lfd, NULL, NULL);
	cr_assert_geq(afd, 0);
	cr_assert_eq(write(fd, "ping", 4), 4);
	close(fd);
	close(afd);
	close(lfd);
	unlink(path);
	/* No listener: the error comes back the way a TCP one does. */
	fd = upstream_connect(p, &err);
	cr_assert_geq(fd, 0);
	cr_expect_eq(err, ENOENT);
	close(fd);
	rmdir(dir);
}

#ifndef __SANITIZE_ADDRESS__
/*
 * Fails the calloc() calls numbered fail_at and up, counted from when
 * counting is armed: upstream_init() must publish nothing then.
 */
extern void *__libc_calloc(size_t, size_t);
static int calls, fail_at = -1;

void *
calloc(size_t n, size_t size)
{
	if (fail_at >= 0 && ++calls >= fail_at) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_calloc(n, size);
}

Test(upstream, init_publishes_nothing_until_complete)
{
	int w[] = { 1, 1 };
	int at;

	for (at = 1; at <= 3; at++) {
		group(w, 2, 0, 1000, 8);
		upstream_free_all();
		calls = 0;
		fail_at = at;
		cr_expect_not(upstream_init(), "calloc %d failed", at);
		fail_at = -1;
		cr_expect_null(upstream_group(0), "calloc %d failed", at);
		/* And the next try builds it. */
		cr_expect(upstream_init());
		cr_assert_not_null(upstream_group(0));
		cr_expect_not_null(upstream_pick(upstream_group(0)));
	}
}
#endif

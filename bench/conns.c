/*
 * bench/conns: a load client for many connections, for bench/run's conns
 * and accept suites, where wrk falls short: it opens its connections
 * before the measured part starts, holds idle ones as long as asked, and
 * times a burst of new ones.  One thread, epoll, HTTP/1.1 keep-alive GETs,
 * responses read to their Content-Length.
 *
 * Usage: conns MODE [-c N] [-d SECONDS] [-l MS] PORT PATH
 *
 *   run    opens N connections (at most 256 connecting at a time) and gets
 *          one response on each, prints "READY N", waits for a line on
 *          stdin, then keeps one request in flight on every connection
 *          for SECONDS and prints one line as bench/wrk/report.lua does:
 *          "BENCH requests=... duration_us=... p50_us=... p99_us=...".
 *   hold   opens N connections, gets one response on each, prints
 *          "READY N", and keeps them open and idle until stdin closes.
 *   burst  starts N connects at once; each sends its request as soon as
 *          it is connected (or MS ms later), then prints "BURST n=...
 *          answered=... errors=... p50_us=... p99_us=... max_us=...
 *          wait_max_us=... slow=..." (times from connect() to the last
 *          byte of the response, less the MS ms; wait from the request's
 *          send; slow: how many took 1 s or more), then "READY", and
 *          holds the connections until stdin closes.
 *
 * Connections close with a reset (SO_LINGER 0), so that runs of 10,000
 * leave no TIME_WAIT behind to take the next run's ports.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HBUF		1024	/* the most of a response header kept */
#define CONNECTING_MAX	256	/* connects in progress while opening */
#define SLOW_US		1000000
#define BURST_WAIT_S	30	/* a burst's answers are awaited this long */

/* Latency histogram: 64 steps per power of two, in microseconds. */
#define SUB		64
#define NBUCKETS	(SUB * 40)

enum state { CONNECTING, DELAYED, SENT, IDLE };

struct conn {
	int fd;
	enum state state;
	int status;		/* of the response being read, 0: in header */
	size_t hlen;		/* header bytes in hbuf */
	uint64_t left;		/* body bytes still to come */
	uint64_t t_start;	/* connect() */
	uint64_t t_conn;	/* the connect completed */
	uint64_t t_send;	/* the request went out */
	struct conn *next;	/* in the line of delayed sends */
	char hbuf[HBUF];
};

enum mode { RUN, HOLD, BURST };

static struct sockaddr_in addr = { .sin_family = AF_INET };
static char req[512];
static size_t reqlen;
static int ep;
static enum mode mode;
static long nconns = 100, seconds = 5, late_ms;
static struct conn *conns;

static uint64_t hist[NBUCKETS];
static uint64_t nreq, max_us;
static struct {
	uint64_t connect, read, write, status;
} err;

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void __attribute__((noreturn))
die(const char *what)
{
	perror(what);
	exit(1);
}

static unsigned
bucket(uint64_t v)
{
	unsigned e;

	if (v < SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if ((e - 5) * SUB >= NBUCKETS)
		return NBUCKETS - 1;
	return (e - 5) * SUB + (unsigned)((v >> (e - 6)) & (SUB - 1));
}

/* The smallest value of a bucket. */
static uint64_t
bucket_value(unsigned i)
{
	unsigned e = i / SUB + 5;

	if (i < SUB)
		return i;
	return (uint64_t)(SUB + i % SUB) << (e - 6);
}

static void
record(uint64_t us)
{
	hist[bucket(us)]++;
	nreq++;
	if (us > max_us)
		max_us = us;
}

static uint64_t
percentile(double p)
{
	uint64_t want = (uint64_t)(p / 100.0 * (double)nreq + 0.5), seen = 0;

	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < NBUCKETS; i++)
		if ((seen += hist[i]) >= want)
			return bucket_value(i);
	return max_us;
}

static int
watch(int op, struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	return epoll_ctl(ep, op, c->fd, &ev);
}

static void
conn_close(struct conn *c)
{
	struct linger lg = { 1, 0 };

	if (c->fd == -1)
		return;
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c->fd);
	c->fd = -1;
}

/* Starts a non-blocking connect; false (counted) if it failed at once. */
static bool
conn_open(struct conn *c)
{
	int one = 1;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->fd == -1)
		die("socket");
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = CONNECTING;
	c->status = 0;
	c->hlen = 0;
	c->t_start = now_us();
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == -1 &&
	    errno != EINPROGRESS) {
		err.connect++;
		conn_close(c);
		return false;
	}
	if (watch(EPOLL_CTL_ADD, c, EPOLLOUT))
		die("epoll_ctl");
	return true;
}

static bool
conn_send(struct conn *c)
{
	c->t_send = now_us();
	if (send(c->fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen) {
		err.write++;
		return false;
	}
	c->state = SENT;
	return true;
}

/* Parses the response header in hbuf; false if it is not one. */
static bool
parse_header(struct conn *c, const char *end)
{
	const char *p, *nl;

	if (c->hlen < 12 || memcmp(c->hbuf, "HTTP/1.", 7) != 0)
		return false;
	c->status = atoi(c->hbuf + 9);
	for (p = c->hbuf; p != NULL && p < end; p = nl == NULL ? NULL :
	    nl + 1) {
		if (strncasecmp(p, "content-length:", 15) == 0) {
			c->left = strtoull(p + 15, NULL, 10);
			return c->status > 0;
		}
		nl = memchr(p, '\n', (size_t)(end - p));
	}
	return false;
}

/*
 * Takes n bytes of the response on c; returns how many were used, or -1
 * if the response is bad.  c->state becomes IDLE at its end.
 */
static ssize_t
take(struct conn *c, const char *data, size_t n)
{
	size_t used = 0, room;
	char *end;

	if (c->status == 0) {
		room = HBUF - c->hlen;
		used = n < room ? n : room;
		memcpy(c->hbuf + c->hlen, data, used);
		c->hlen += used;
		end = memmem(c->hbuf, c->hlen, "\r\n\r\n", 4);
		if (end == NULL)
			return c->hlen == HBUF ? -1 : (ssize_t)used;
		if (!parse_header(c, end))
			return -1;
		/* What followed the header in this read is body. */
		used -= c->hlen - (size_t)(end + 4 - c->hbuf);
		c->hlen = 0;
	}
	room = n - used;
	if (room > c->left)
		room = (size_t)c->left;
	c->left -= room;
	used += room;
	if (c->left == 0) {
		if (c->status >= 400)
			err.status++;
		c->status = 0;
		c->state = IDLE;
	}
	return (ssize_t)used;
}

/*
 * Reads what there is on c; returns the number of responses completed
 * (0 or 1: one request is in flight), or -1 when the connection failed.
 */
static int
conn_read(struct conn *c)
{
	static char buf[65536];
	ssize_t n = recv(c->fd, buf, sizeof(buf), 0), k;

	if (n == -1 && errno == EAGAIN)
		return 0;
	if (n <= 0 || c->state != SENT) {
		err.read++;
		return -1;
	}
	k = take(c, buf, (size_t)n);
	if (k == -1 || k != n) {
		err.read++;
		return -1;
	}
	return c->state == IDLE;
}

/* The connect finished: true if it succeeded. */
static bool
connected(struct conn *c)
{
	int e = 0;
	socklen_t len = sizeof(e);

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len);
	if (e != 0) {
		err.connect++;
		return false;
	}
	return watch(EPOLL_CTL_MOD, c, EPOLLIN) == 0;
}

/*
 * Opens every connection and gets one response on each, with at most
 * CONNECTING_MAX connects in progress.  A connection that fails is tried
 * again, up to a few failures in all.
 */
static void
open_all(void)
{
	struct epoll_event evs[256];
	struct conn **todo = malloc((size_t)nconns * sizeof(*todo));
	long ntodo = nconns, ready = 0, busy = 0, failures = 0;

	if (todo == NULL)
		die("malloc");
	for (long i = 0; i < nconns; i++)
		todo[i] = &conns[nconns - 1 - i];
	while (ready < nconns) {
		while (busy < CONNECTING_MAX && ntodo > 0) {
			struct conn *c = todo[--ntodo];

			if (conn_open(c))
				busy++;
			else
				todo[ntodo++] = c;
			if (c->fd == -1 && ++failures > 100 + nconns / 10)
				die("connect");
		}
		int n = epoll_wait(ep, evs, 256, 10000);

		if (n == 0) {
			fprintf(stderr, "conns: no progress for 10 s "
			    "(%ld of %ld ready)\n", ready, nconns);
			exit(1);
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			int r = 0;

			if (c->state == CONNECTING) {
				if (connected(c) && conn_send(c))
					continue;
				r = -1;
			} else if ((r = conn_read(c)) == 0) {
				continue;
			}
			busy--;
			if (r == 1) {
				ready++;
				continue;
			}
			conn_close(c);
			todo[ntodo++] = c;
			if (++failures > 100 + nconns / 10) {
				fprintf(stderr, "conns: too many failures\n");
				exit(1);
			}
		}
	}
	free(todo);
	/* Counted while opening; the run counts its own. */
	memset(&err, 0, sizeof(err));
}

static void
wait_line(void)
{
	char line[64];

	if (fgets(line, sizeof(line), stdin) == NULL)
		exit(0);
}

static void
wait_eof(void)
{
	char buf[64];

	while (read(0, buf, sizeof(buf)) > 0)
		;
}

static void
close_all(void)
{
	for (long i = 0; i < nconns; i++)
		conn_close(&conns[i]);
}

static void
run(void)
{
	struct epoll_event evs[256];
	uint64_t t0, end, t;

	open_all();
	printf("READY %ld\n", nconns);
	fflush(stdout);
	wait_line();
	t0 = now_us();
	end = t0 + (uint64_t)seconds * 1000000;
	for (long i = 0; i < nconns; i++)
		if (!conn_send(&conns[i]))
			die("send");
	while ((t = now_us()) < end) {
		int n = epoll_wait(ep, evs, 256, (int)((end - t) / 1000) + 1);

		t = now_us();
		for (int i = 0; i < n && t < end; i++) {
			struct conn *c = evs[i].data.ptr;
			int r;

			if (c->state == CONNECTING) {
				if (connected(c) && conn_send(c))
					continue;
			} else if ((r = conn_read(c)) == 0) {
				continue;
			} else if (r == 1) {
				record(t - c->t_send);
				if (conn_send(c))
					continue;
			}
			/* A failed connection: open a new one. */
			conn_close(c);
			conn_open(c);
		}
	}
	printf("BENCH requests=%llu duration_us=%llu bytes=0 connect=%llu "
	    "read=%llu write=%llu status=%llu timeout=0 p50_us=%llu "
	    "p99_us=%llu max_us=%llu\n", (unsigned long long)nreq,
	    (unsigned long long)(t - t0), (unsigned long long)err.connect,
	    (unsigned long long)err.read, (unsigned long long)err.write,
	    (unsigned long long)err.status,
	    (unsigned long long)percentile(50),
	    (unsigned long long)percentile(99), (unsigned long long)max_us);
	fflush(stdout);
	close_all();
}

static void
hold(void)
{
	open_all();
	printf("READY %ld\n", nconns);
	fflush(stdout);
	wait_eof();
	close_all();
}

static void
burst(void)
{
	struct epoll_event evs[256];
	struct conn *line = NULL, **tail = &line;
	uint64_t deadline, wait_max = 0, slow = 0, took;
	long done = 0, failed = 0;

	for (long i = 0; i < nconns; i++)
		if (!conn_open(&conns[i]))
			failed++;
	deadline = now_us() + (uint64_t)(BURST_WAIT_S + late_ms / 1000) *
	    1000000;
	while (done + failed < nconns && now_us() < deadline) {
		int timeout = line == NULL ? 100 : (int)((line->t_send -
		    now_us() + 999) / 1000);
		int n = epoll_wait(ep, evs, 256, timeout < 0 ? 0 : timeout);
		uint64_t t = now_us();

		/* Delayed requests whose time has come. */
		while (line != NULL && line->t_send <= t) {
			struct conn *c = line;

			if ((line = c->next) == NULL)
				tail = &line;
			if (!conn_send(c)) {
				failed++;
				conn_close(c);
			}
		}
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			int r;

			if (c->fd == -1)
				continue;
			if (c->state == CONNECTING) {
				c->t_conn = t;
				if (!connected(c)) {
					failed++;
					conn_close(c);
				} else if (late_ms > 0) {
					c->state = DELAYED;
					c->t_send = t + (uint64_t)late_ms *
					    1000;
					c->next = NULL;
					*tail = c;
					tail = &c->next;
				} else if (!conn_send(c)) {
					failed++;
					conn_close(c);
				}
				continue;
			}
			if ((r = conn_read(c)) == 0)
				continue;
			if (r == -1) {
				failed++;
				conn_close(c);
				continue;
			}
			/* The time it took, less the wait asked for. */
			took = (c->t_conn - c->t_start) + (t - c->t_send);
			done++;
			record(took);
			if (t - c->t_send > wait_max)
				wait_max = t - c->t_send;
			if (took >= SLOW_US)
				slow++;
		}
	}
	printf("BURST n=%ld answered=%ld errors=%ld p50_us=%llu p99_us=%llu "
	    "max_us=%llu wait_max_us=%llu slow=%llu\n", nconns, done,
	    nconns - done, (unsigned long long)percentile(50),
	    (unsigned long long)percentile(99), (unsigned long long)max_us,
	    (unsigned long long)wait_max, (unsigned long long)slow);
	printf("READY %ld\n", done);
	fflush(stdout);
	wait_eof();
	close_all();
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: conns run|hold|burst [-c N] [-d SECONDS] "
	    "[-l MS] PORT PATH\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct rlimit rl;
	int opt;

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "run") == 0)
		mode = RUN;
	else if (strcmp(argv[1], "hold") == 0)
		mode = HOLD;
	else if (strcmp(argv[1], "burst") == 0)
		mode = BURST;
	else
		usage();
	optind = 2;
	while ((opt = getopt(argc, argv, "c:d:l:")) != -1) {
		switch (opt) {
		case 'c':
			nconns = atol(optarg);
			break;
		case 'd':
			seconds = atol(optarg);
			break;
		case 'l':
			late_ms = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2 || nconns < 1 || seconds < 1 || late_ms < 0)
		usage();
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons((uint16_t)atoi(argv[optind]));
	reqlen = (size_t)snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n"
	    "Host: 127.0.0.1:%s\r\n\r\n", argv[optind + 1], argv[optind]);
	if (reqlen >= sizeof(req))
		usage();
	/* Room for every connection: the soft limit up to the hard one. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	if ((conns = calloc((size_t)nconns, sizeof(*conns))) == NULL)
		die("calloc");
	for (long i = 0; i < nconns; i++)
		conns[i].fd = -1;
	if ((ep = epoll_create1(0)) == -1)
		die("epoll_create1");
	switch (mode) {
	case RUN:
		run();
		break;
	case HOLD:
		hold();
		break;
	case BURST:
		burst();
		break;
	}
	return 0;
}

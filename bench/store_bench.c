/*
 * Operations per second of the shared store, from 1 and 2 processes, for
 * a 4000-byte value: get (hit) and set.  For scale, the same gets against
 * a memcached on 127.0.0.1 (text protocol, one connection per process,
 * one request at a time).
 *
 * usage: store_bench [memcached_port [ops]]
 * Prints "name ops_per_sec" lines; without a reachable memcached that part
 * is skipped with a note on stderr.
 */
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/mcnet.h"
#include "shm/store.h"

#define VLEN	4000
#define NKEYS	1000

struct bench {
	struct store *s;
	int port;
	long ops;
};

typedef int (*bench_fn)(struct bench *, unsigned id);

static double
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
key_of(char *buf, size_t len, long i)
{
	snprintf(buf, len, "bench:key:%ld", i % NKEYS);
}

static int
store_get_loop(struct bench *b, unsigned id)
{
	struct store_ref ref;
	char key[64];
	unsigned sum = 0;
	long i;

	for (i = 0; i < b->ops; i++) {
		key_of(key, sizeof(key), i * 7 + id);
		if (store_get(b->s, key, strlen(key), &ref) != STORE_HIT)
			return -1;
		sum += ((const unsigned char *)ref.data)[ref.len - 1];
		store_release(b->s, &ref);
	}
	return (int)(sum & 0);
}

static int
store_set_loop(struct bench *b, unsigned id)
{
	static char val[VLEN];
	char key[64];
	long i;

	for (i = 0; i < b->ops; i++) {
		key_of(key, sizeof(key), i * 7 + id);
		val[0] = (char)i;
		if (store_set(b->s, key, strlen(key), val, VLEN, 0, 0) !=
		    STORE_OK)
			return -1;
	}
	return 0;
}

/* Reads until the reply ends with tail; the reply is small and known. */
static int
read_reply(int fd, char *buf, size_t cap, const char *tail)
{
	size_t got = 0, tl = strlen(tail);
	ssize_t n;

	for (;;) {
		if (got >= tl && memcmp(buf + got - tl, tail, tl) == 0)
			return (int)got;
		if (got == cap || (n = read(fd, buf + got, cap - got)) <= 0)
			return -1;
		got += (size_t)n;
	}
}

static int
mc_fill(int port)
{
	static char cmd[VLEN + 128], buf[64];
	char key[64];
	int fd, n;
	long i;

	if ((fd = mc_dial(port)) == -1)
		return -1;
	for (i = 0; i < NKEYS; i++) {
		key_of(key, sizeof(key), i);
		n = snprintf(cmd, sizeof(cmd), "set %s 0 0 %d\r\n", key, VLEN);
		memset(cmd + n, 'v', VLEN);
		memcpy(cmd + n + VLEN, "\r\n", 2);
		if (write_all(fd, cmd, (size_t)n + VLEN + 2) == -1 ||
		    read_reply(fd, buf, sizeof(buf), "\r\n") != 8)
			return close(fd), -1;
	}
	close(fd);
	return 0;
}

static int
mc_get_loop(struct bench *b, unsigned id)
{
	static char buf[VLEN + 256];
	char cmd[96], key[64];
	int fd, n;
	long i;

	if ((fd = mc_dial(b->port)) == -1)
		return -1;
	for (i = 0; i < b->ops; i++) {
		key_of(key, sizeof(key), i * 7 + id);
		n = snprintf(cmd, sizeof(cmd), "get %s\r\n", key);
		if (write_all(fd, cmd, (size_t)n) == -1 ||
		    read_reply(fd, buf, sizeof(buf), "\r\nEND\r\n") <= VLEN)
			return close(fd), -1;
	}
	close(fd);
	return 0;
}

/* Runs fn in nproc forked processes at once; returns total ops/s. */
static double
run(struct bench *b, bench_fn fn, unsigned nproc)
{
	int go[2], res[2], status;
	double elapsed, worst = 0;
	unsigned i;
	char c;

	if (pipe(go) == -1 || pipe(res) == -1)
		return -1;
	for (i = 0; i < nproc; i++) {
		if (fork() == 0) {
			close(go[1]);
			if ((b->s != NULL && store_attach(b->s, i) == -1) ||
			    read(go[0], &c, 1) != 0)
				_exit(1);
			elapsed = now_sec();
			if (fn(b, i) == -1)
				_exit(1);
			elapsed = now_sec() - elapsed;
			_exit(write(res[1], &elapsed, sizeof(elapsed)) !=
			    sizeof(elapsed));
		}
	}
	close(go[0]);
	close(go[1]);	/* everyone starts at once */
	close(res[1]);
	for (i = 0; i < nproc; i++)
		if (read(res[0], &elapsed, sizeof(elapsed)) ==
		    sizeof(elapsed) && elapsed > worst)
			worst = elapsed;
	for (i = 0; i < nproc; i++)
		if (wait(&status) == -1 || status != 0)
			worst = -1;
	close(res[0]);
	return worst > 0 ? b->ops * nproc / worst : -1;
}

static void
report(const char *name, double rate)
{
	if (rate < 0)
		fprintf(stderr, "# %s failed\n", name);
	else
		printf("%s %.0f\n", name, rate);
	fflush(stdout);
}

static int
bench_store(struct bench *b)
{
	struct store_options o = {
		.size = 64 << 20, .stripes = 16, .max_object = 8192,
		.max_slots = 4,
	};
	static char val[VLEN];
	char err[256], key[64];
	long i;

	if ((b->s = store_create(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "store_create: %s\n", err);
		return -1;
	}
	store_attach(b->s, 3);
	for (i = 0; i < NKEYS; i++) {
		key_of(key, sizeof(key), i);
		store_set(b->s, key, strlen(key), val, VLEN, 0, 0);
	}
	report("store_get_1proc", run(b, store_get_loop, 1));
	report("store_get_2proc", run(b, store_get_loop, 2));
	report("store_set_1proc", run(b, store_set_loop, 1));
	report("store_set_2proc", run(b, store_set_loop, 2));
	store_destroy(b->s);
	b->s = NULL;
	return 0;
}

int
main(int argc, char **argv)
{
	struct bench b = { .ops = 200000 };

	if (argc > 1)
		b.port = atoi(argv[1]);
	if (argc > 2)
		b.ops = atol(argv[2]);
	if (b.ops <= 0) {
		fprintf(stderr, "usage: store_bench [memcached_port [ops]]\n");
		return 2;
	}
	if (bench_store(&b) == -1)
		return 1;
	if (b.port <= 0 || mc_fill(b.port) == -1) {
		fprintf(stderr, "# memcached: cannot use 127.0.0.1:%d, "
		    "skipped\n", b.port);
		return 0;
	}
	/* A round trip costs far more than a store call. */
	b.ops = b.ops / 10 > 0 ? b.ops / 10 : 1;
	report("memcached_get_1proc", run(&b, mc_get_loop, 1));
	report("memcached_get_2proc", run(&b, mc_get_loop, 2));
	return 0;
}

/*
 * How much of its memory a store holds when it first evicts, and how many
 * values a random read finds after twice its size was written (issue 13,
 * "a store that keeps what fits").  The same values go to corral's store
 * (64 MiB, made as the master makes it) and to a memcached started with
 * -m 64: sizes log-uniform from 100 B to 512 KiB, the same sequence.
 *
 * usage: store_fill [memcached_port [mib]]
 * Prints "name value" lines:
 *   corral_fill        key + value bytes held at the first eviction / size
 *   memcached_fill     the same for memcached, by reading every key back
 *   memcached_self     memcached's own bytes / limit_maxbytes then
 *   corral_hits        values found by one random read of every key
 *   memcached_hits     after 2 x size bytes of values were written
 *   corral_byte_hits   the same, counting bytes
 *   memcached_byte_hits
 *   corral_values      values written before the first eviction
 *   memcached_values
 * Without a reachable memcached its lines are skipped with a note.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/mcnet.h"
#include "shm/store.h"

#define MIN_VALUE	100
#define MAX_VALUE	(512 << 10)
#define MAX_KEYS	200000

struct seq {
	size_t n;		/* values in the sequence */
	uint32_t *len;
	uint32_t *order;	/* a random order of 0..n-1, for the reads */
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Values until twice the size is written; then a shuffled read order. */
static int
make_seq(struct seq *q, uint64_t size)
{
	uint64_t total = 0;
	double u, lo = log(MIN_VALUE), hi = log(MAX_VALUE);
	size_t i, j;
	uint32_t t;

	q->len = calloc(MAX_KEYS, sizeof(*q->len));
	q->order = calloc(MAX_KEYS, sizeof(*q->order));
	if (q->len == NULL || q->order == NULL)
		return -1;
	for (q->n = 0; q->n < MAX_KEYS && total < 2 * size; q->n++) {
		u = (double)(rnd() >> 11) / (double)(1ULL << 53);
		q->len[q->n] = (uint32_t)exp(lo + u * (hi - lo));
		total += q->len[q->n];
	}
	for (i = 0; i < q->n; i++)
		q->order[i] = (uint32_t)i;
	for (i = q->n - 1; i > 0; i--) {
		j = (size_t)(rnd() % (i + 1));
		t = q->order[i];
		q->order[i] = q->order[j];
		q->order[j] = t;
	}
	return 0;
}

static int
key_of(char *buf, size_t len, size_t i)
{
	return snprintf(buf, len, "fill:%zu", i);
}

static char value[MAX_VALUE];

/* ---- corral's store ---- */

struct result {
	double fill, self, hits, byte_hits;
	size_t values;
	uint64_t hit_bytes, all_bytes;
	size_t nhits;
};

/* Counts one read of value i of the sequence. */
static void
tally(struct result *r, const struct seq *q, size_t i, bool hit)
{
	r->all_bytes += q->len[i];
	if (hit) {
		r->nhits++;
		r->hit_bytes += q->len[i];
	}
}

static void
tally_end(struct result *r, const struct seq *q)
{
	r->hits = (double)r->nhits / (double)q->n;
	r->byte_hits = (double)r->hit_bytes / (double)r->all_bytes;
}

static int
corral_held(struct store *s, size_t upto, uint64_t *held)
{
	struct store_ref ref;
	char key[32];
	size_t i;
	int n;

	*held = 0;
	for (i = 0; i <= upto; i++) {
		n = key_of(key, sizeof(key), i);
		if (store_get(s, key, (size_t)n, &ref) == STORE_HIT) {
			*held += (uint64_t)n + ref.len;
			store_release(s, &ref);
		}
	}
	return 0;
}

static int
run_corral(const struct seq *q, uint64_t size, struct result *r)
{
	/* As master/master.c makes it for up to 4 workers. */
	struct store_options o = {
		.size = size, .stripes = 16, .max_object = 1 << 20,
		.max_slots = 16, .max_refs = 4096,
	};
	struct store_stats st;
	struct store_ref ref;
	struct store *s;
	char err[256], key[32];
	uint64_t held;
	size_t i;
	int n;

	if ((s = store_create(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "# store_create: %s\n", err);
		return -1;
	}
	store_attach(s, 0);
	r->values = 0;
	for (i = 0; i < q->n; i++) {
		n = key_of(key, sizeof(key), i);
		if (store_set(s, key, (size_t)n, value, q->len[i], 0, 0) !=
		    STORE_OK) {
			fprintf(stderr, "# corral: set %zu failed\n", i);
			store_destroy(s);
			return -1;
		}
		if (r->values == 0) {
			store_stats(s, &st);
			if (st.evictions > 0) {
				r->values = i;
				corral_held(s, i, &held);
				r->fill = (double)held / (double)size;
			}
		}
	}
	for (i = 0; i < q->n; i++) {
		n = key_of(key, sizeof(key), q->order[i]);
		if (store_get(s, key, (size_t)n, &ref) == STORE_HIT) {
			tally(r, q, q->order[i], true);
			store_release(s, &ref);
		} else {
			tally(r, q, q->order[i], false);
		}
	}
	tally_end(r, q);
	store_destroy(s);
	return 0;
}

/* ---- memcached, text protocol ---- */

struct conn {
	int fd;
	char buf[1 << 16];
	size_t len, pos;
};

static int
mc_connect(struct conn *c, int port)
{
	c->len = c->pos = 0;
	return (c->fd = mc_dial(port)) == -1 ? -1 : 0;
}

static int
fill_buf(struct conn *c)
{
	ssize_t n;

	if (c->pos > 0) {
		memmove(c->buf, c->buf + c->pos, c->len - c->pos);
		c->len -= c->pos;
		c->pos = 0;
	}
	if (c->len == sizeof(c->buf))
		return -1;
	do
		n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c->len += (size_t)n;
	return 0;
}

/* One reply line, without its CRLF, into line. */
static int
read_line(struct conn *c, char *line, size_t cap)
{
	char *eol;
	size_t n;

	while ((eol = memchr(c->buf + c->pos, '\n', c->len - c->pos)) ==
	    NULL)
		if (fill_buf(c) == -1)
			return -1;
	n = (size_t)(eol - (c->buf + c->pos));
	if (n > 0 && eol[-1] == '\r')
		n--;
	if (n >= cap)
		return -1;
	memcpy(line, c->buf + c->pos, n);
	line[n] = '\0';
	c->pos = (size_t)(eol - c->buf) + 1;
	return 0;
}

static int
skip_bytes(struct conn *c, size_t n)
{
	size_t have;

	while (n > 0) {
		if (c->pos == c->len && fill_buf(c) == -1)
			return -1;
		have = c->len - c->pos < n ? c->len - c->pos : n;
		c->pos += have;
		n -= have;
	}
	return 0;
}

static int
mc_set(struct conn *c, const char *key, size_t len)
{
	char cmd[128], line[128];
	int n = snprintf(cmd, sizeof(cmd), "set %s 0 0 %zu\r\n", key, len);

	if (write_all(c->fd, cmd, (size_t)n) == -1 ||
	    write_all(c->fd, value, len) == -1 ||
	    write_all(c->fd, "\r\n", 2) == -1 ||
	    read_line(c, line, sizeof(line)) == -1)
		return -1;
	return strcmp(line, "STORED") == 0 ? 0 : -1;
}

/* The length of key's value, or -1 if memcached has none. */
static long
mc_get_len(struct conn *c, const char *key)
{
	char cmd[128], line[256];
	unsigned flags;
	long len = -1;
	int n = snprintf(cmd, sizeof(cmd), "get %s\r\n", key);

	if (write_all(c->fd, cmd, (size_t)n) == -1 ||
	    read_line(c, line, sizeof(line)) == -1)
		return -2;
	if (strncmp(line, "VALUE ", 6) == 0) {
		if (sscanf(line + 6, "%*s %u %ld", &flags, &len) != 2 ||
		    skip_bytes(c, (size_t)len + 2) == -1 ||
		    read_line(c, line, sizeof(line)) == -1)
			return -2;
	}
	return strcmp(line, "END") == 0 ? len : -2;
}

/* One number of "stats". */
static int
mc_stat(struct conn *c, const char *name, uint64_t *v)
{
	char line[256], want[64];
	int found = 0;

	snprintf(want, sizeof(want), "STAT %s ", name);
	if (write_all(c->fd, "stats\r\n", 7) == -1)
		return -1;
	for (;;) {
		if (read_line(c, line, sizeof(line)) == -1)
			return -1;
		if (strcmp(line, "END") == 0)
			return found ? 0 : -1;
		if (strncmp(line, want, strlen(want)) == 0 &&
		    sscanf(line + strlen(want), "%" SCNu64, v) == 1)
			found = 1;
	}
}

static int
run_memcached(const struct seq *q, int port, struct result *r)
{
	struct conn *c = calloc(1, sizeof(*c));
	uint64_t ev, bytes, limit, held = 0;
	char key[32];
	size_t i, j;
	long len;

	if (c == NULL || mc_connect(c, port) == -1) {
		free(c);
		return -1;
	}
	r->values = 0;
	for (i = 0; i < q->n; i++) {
		key_of(key, sizeof(key), i);
		if (mc_set(c, key, q->len[i]) == -1)
			goto fail;
		if (r->values != 0)
			continue;
		if (mc_stat(c, "evictions", &ev) == -1)
			goto fail;
		if (ev == 0)
			continue;
		r->values = i;
		if (mc_stat(c, "bytes", &bytes) == -1 ||
		    mc_stat(c, "limit_maxbytes", &limit) == -1)
			goto fail;
		for (j = 0; j <= i; j++) {
			key_of(key, sizeof(key), j);
			if ((len = mc_get_len(c, key)) == -2)
				goto fail;
			if (len >= 0)
				held += strlen(key) + (uint64_t)len;
		}
		r->fill = (double)held / (double)limit;
		r->self = (double)bytes / (double)limit;
	}
	for (i = 0; i < q->n; i++) {
		key_of(key, sizeof(key), q->order[i]);
		if ((len = mc_get_len(c, key)) == -2)
			goto fail;
		tally(r, q, q->order[i], len >= 0);
	}
	tally_end(r, q);
	close(c->fd);
	free(c);
	return 0;
fail:
	fprintf(stderr, "# memcached: the protocol exchange failed\n");
	close(c->fd);
	free(c);
	return -1;
}

int
main(int argc, char **argv)
{
	struct seq q;
	struct result cr = { 0 }, mr = { 0 };
	int port = argc > 1 ? atoi(argv[1]) : 0;
	uint64_t size = (uint64_t)(argc > 2 ? atoi(argv[2]) : 64) << 20;

	memset(value, 'v', sizeof(value));
	if (size == 0 || make_seq(&q, size) == -1) {
		fprintf(stderr, "usage: store_fill [memcached_port [mib]]\n");
		return 2;
	}
	if (run_corral(&q, size, &cr) == -1) {
		free(q.len);
		free(q.order);
		return 1;
	}
	printf("corral_fill %.4f\ncorral_values %zu\ncorral_hits %.4f\n"
	    "corral_byte_hits %.4f\n", cr.fill, cr.values, cr.hits,
	    cr.byte_hits);
	fflush(stdout);
	if (port <= 0 || run_memcached(&q, port, &mr) == -1) {
		fprintf(stderr, "# memcached: cannot use 127.0.0.1:%d, "
		    "skipped\n", port);
		free(q.len);
		free(q.order);
		return 0;
	}
	printf("memcached_fill %.4f\nmemcached_self %.4f\n"
	    "memcached_values %zu\nmemcached_hits %.4f\n"
	    "memcached_byte_hits %.4f\n", mr.fill, mr.self, mr.values,
	    mr.hits, mr.byte_hits);
	free(q.len);
	free(q.order);
	return 0;
}

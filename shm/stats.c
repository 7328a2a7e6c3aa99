/*
 * The counters' mapping (see shm/stats.h).
 *
 * Layout, every part a multiple of 64 bytes so that no two writers share a
 * cache line:
 *
 *   head          magic, version, sizes, what the master counts
 *   server names  server_rows names of NAME_LEN bytes
 *   peer names    peer_rows names
 *   slots[]       per worker: a line with its pid, the worker counters,
 *                 the request time histogram, server rows, peer rows
 *
 * Only the master writes the head and the names, only a slot's worker its
 * counters (and the master its gauges, once that worker is dead).
 * Readers load each value with a relaxed atomic load, which is a plain
 * load: a sum may mix values a few increments apart, never a torn one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/stats.h"
#include "shm/store.h"

#define STATS_MAGIC	0x5354415453524c43ULL	/* "CLRSTATS" */
#define STATS_VERSION	2
#define NAME_LEN	128
#define LINE		64
#define HEAD_SIZE	4096
#define IS_GAUGE_COUNTER	0
#define IS_GAUGE_GAUGE		1

struct head {
	uint64_t magic;
	uint64_t version;
	uint64_t size, slots, server_rows, peer_rows, slot_size;
	uint64_t nworker, nserver, npeer, nbuckets;	/* the tables */
	int64_t started;
	int64_t master_pid;
	uint64_t generation, workers, reloads, worker_restarts;
	uint64_t nservers, npeers;			/* rows named */
	uint64_t cache_words;		/* of cache[]; 0: no snapshot */
	uint64_t cache[64];		/* the store's counters, a copy */
	uint64_t purge_token[2];	/* for corral -P (see stats.h) */
	uint64_t counters;		/* CORRAL_COUNTERS of the writer */
};
_Static_assert(sizeof(struct head) <= HEAD_SIZE, "the head fits its page");
_Static_assert(sizeof(struct store_stats) <= 64 * sizeof(uint64_t),
    "the store's counters fit the snapshot");

/* The first line of a slot. */
struct slot_head {
	int64_t pid;		/* the worker's, 0 when free */
	uint64_t used;		/* taken by the master */
};

struct stats {
	uint8_t *base;
	size_t size;
	bool writable;
	struct head *h;
};

struct stats_mine stats_me;

/* Until a worker attaches, increments land here. */
static uint64_t scratch_w[STATS_NWORKER];
static struct stats_hist scratch_hist;

__attribute__((constructor)) static void
scratch_init(void)
{
	stats_me.w = scratch_w;
	stats_me.req_time = &scratch_hist;
}

static size_t
round_line(size_t n)
{
	return (n + LINE - 1) / LINE * LINE;
}

static size_t
slot_size(uint64_t server_rows, uint64_t peer_rows)
{
	return LINE + round_line(STATS_NWORKER * sizeof(uint64_t) +
	    sizeof(struct stats_hist) +
	    server_rows * STATS_NSERVER * sizeof(uint64_t) +
	    peer_rows * sizeof(struct stats_peer_row));
}

static size_t
names_off(void)
{
	return HEAD_SIZE;
}

static size_t
slots_off(uint64_t server_rows, uint64_t peer_rows)
{
	return HEAD_SIZE + round_line((server_rows + peer_rows) * NAME_LEN);
}

static size_t
total_size(uint64_t slots, uint64_t server_rows, uint64_t peer_rows)
{
	return slots_off(server_rows, peer_rows) +
	    slots * slot_size(server_rows, peer_rows);
}

static char *
server_name(const struct stats *st, unsigned row)
{
	return (char *)st->base + names_off() + (size_t)row * NAME_LEN;
}

static char *
peer_name(const struct stats *st, unsigned row)
{
	return (char *)st->base + names_off() +
	    (size_t)(st->h->server_rows + row) * NAME_LEN;
}

static uint8_t *
slot_at(const struct stats *st, unsigned i)
{
	return st->base + slots_off(st->h->server_rows, st->h->peer_rows) +
	    (size_t)i * st->h->slot_size;
}

/* Points mine at the parts of the slot at p. */
static void
slot_parts(const struct stats *st, uint8_t *p, struct stats_mine *m)
{
	p += LINE;
	m->w = (uint64_t *)p;
	p += STATS_NWORKER * sizeof(uint64_t);
	m->req_time = (struct stats_hist *)p;
	p += sizeof(struct stats_hist);
	m->srv = (uint64_t *)p;
	p += st->h->server_rows * STATS_NSERVER * sizeof(uint64_t);
	m->peer = (struct stats_peer_row *)p;
}

static void __attribute__((format(printf, 3, 4)))
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct stats *
stats_create(const struct stats_options *o, char *err, size_t errlen)
{
	struct stats *st;
	size_t size;
	void *p;
	int fd = -1;

	if (o->slots == 0 || o->server_rows < 2 || o->peer_rows < 2) {
		fail(err, errlen, "bad sizes");
		return NULL;
	}
	size = total_size(o->slots, o->server_rows, o->peer_rows);
	if (o->path != NULL) {
		/* A new file, not the old one truncated: a reader that
		 * still maps the old one keeps valid memory. */
		if (unlink(o->path) == -1 && errno != ENOENT) {
			fail(err, errlen, "unlink %s: %s", o->path,
			    strerror(errno));
			return NULL;
		}
		/* Its purge token is for those who may run corral -P. */
		fd = open(o->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600);
		if (fd == -1 || ftruncate(fd, (off_t)size) == -1) {
			fail(err, errlen, "%s: %s", o->path, strerror(errno));
			if (fd != -1)
				close(fd);
			return NULL;
		}
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    0);
		close(fd);
	} else {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED) {
		fail(err, errlen, "mmap %zu bytes: %s", size, strerror(errno));
		return NULL;
	}
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		munmap(p, size);
		fail(err, errlen, "out of memory");
		return NULL;
	}
	st->base = p;
	st->size = size;
	st->writable = true;
	st->h = p;
	st->h->version = STATS_VERSION;
	st->h->size = size;
	st->h->slots = o->slots;
	st->h->server_rows = o->server_rows;
	st->h->peer_rows = o->peer_rows;
	st->h->slot_size = slot_size(o->server_rows, o->peer_rows);
	st->h->nworker = STATS_NWORKER;
	st->h->nserver = STATS_NSERVER;
	st->h->npeer = STATS_NPEER;
	st->h->nbuckets = STATS_NBUCKETS;
	st->h->started = (int64_t)time(NULL);
	st->h->master_pid = getpid();
	st->h->counters = STATS_ON;
	if (getrandom(st->h->purge_token, sizeof(st->h->purge_token), 0) !=
	    sizeof(st->h->purge_token)) {
		fail(err, errlen, "getrandom: %s", strerror(errno));
		stats_destroy(st);
		return NULL;
	}
	snprintf(server_name(st, o->server_rows - 1), NAME_LEN, "(other)");
	snprintf(peer_name(st, o->peer_rows - 1), NAME_LEN, "(other)");
	/* Readers check the magic last. */
	__atomic_store_n(&st->h->magic, STATS_MAGIC, __ATOMIC_RELEASE);
	return st;
}

struct stats *
stats_open_file(const char *path, char *err, size_t errlen)
{
	struct stats *st;
	struct head h;
	struct stat sb;
	void *p;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		fail(err, errlen, "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) == -1 || pread(fd, &h, sizeof(h), 0) !=
	    (ssize_t)sizeof(h) || h.magic != STATS_MAGIC) {
		fail(err, errlen, "not a corral stats file");
		close(fd);
		return NULL;
	}
	if (h.version != STATS_VERSION || h.nworker != STATS_NWORKER ||
	    h.nserver != STATS_NSERVER || h.npeer != STATS_NPEER ||
	    h.nbuckets != STATS_NBUCKETS) {
		fail(err, errlen, "written by another version of corral");
		close(fd);
		return NULL;
	}
	if ((uint64_t)sb.st_size != h.size || h.slot_size !=
	    slot_size(h.server_rows, h.peer_rows) || h.size !=
	    total_size(h.slots, h.server_rows, h.peer_rows)) {
		fail(err, errlen, "damaged: its size does not match");
		close(fd);
		return NULL;
	}
	p = mmap(NULL, h.size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fail(err, errlen, "mmap: %s", strerror(errno));
		return NULL;
	}
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		munmap(p, h.size);
		fail(err, errlen, "out of memory");
		return NULL;
	}
	st->base = p;
	st->size = h.size;
	st->h = p;
	return st;
}

void
stats_destroy(struct stats *st)
{
	if (st == NULL)
		return;
	munmap(st->base, st->size);
	free(st);
}

int
stats_slot_take(struct stats *st)
{
	struct slot_head *sh;

	for (unsigned i = 0; i < st->h->slots; i++) {
		sh = (struct slot_head *)slot_at(st, i);
		if (!sh->used) {
			sh->used = 1;
			return (int)i;
		}
	}
	return -1;
}

void
stats_slot_give(struct stats *st, int slot)
{
	struct stats_mine m;
	struct slot_head *sh;

#define ZERO_GAUGE(id, kind, ...) \
	if (IS_GAUGE_##kind) m.w[STAT_##id] = 0;
	if (slot < 0 || (unsigned)slot >= st->h->slots)
		return;
	sh = (struct slot_head *)slot_at(st, (unsigned)slot);
	slot_parts(st, (uint8_t *)sh, &m);
	STATS_WORKER(ZERO_GAUGE)
	for (unsigned r = 0; r < st->h->peer_rows; r++)
		m.peer[r].v[STAT_peer_down] = 0;
	sh->pid = 0;
	sh->used = 0;
#undef ZERO_GAUGE
}

static unsigned
row_find(struct stats *st, char *(*name)(const struct stats *, unsigned),
    uint64_t rows, uint64_t *used, const char *want)
{
	unsigned i;

	for (i = 0; i < *used; i++)
		if (strncmp(name(st, i), want, NAME_LEN - 1) == 0)
			return i;
	if (*used + 1 >= rows)
		return (unsigned)rows - 1;	/* "(other)" */
	snprintf(name(st, i), NAME_LEN, "%s", want);
	__atomic_store_n(used, *used + 1, __ATOMIC_RELEASE);
	return i;
}

unsigned
stats_server_row(struct stats *st, const char *name)
{
	return row_find(st, server_name, st->h->server_rows,
	    &st->h->nservers, name);
}

unsigned
stats_peer_row(struct stats *st, const char *name)
{
	return row_find(st, peer_name, st->h->peer_rows, &st->h->npeers,
	    name);
}

void
stats_master_reloaded(struct stats *st, unsigned generation,
    unsigned workers, bool reload)
{
	/* Here, not at creation: the master may have forked to detach. */
	st->h->master_pid = getpid();
	st->h->generation = generation;
	st->h->workers = workers;
	if (reload)
		st->h->reloads++;
}

void
stats_master_cache(struct stats *st, const struct store_stats *ss)
{
	/* A reader may see a copy half old, half new: counters a second
	 * apart, which is what a snapshot is anyway. */
	memcpy(st->h->cache, ss, sizeof(*ss));
	__atomic_store_n(&st->h->cache_words, sizeof(*ss) / sizeof(uint64_t),
	    __ATOMIC_RELEASE);
}

bool
stats_cache(const struct stats *st, struct store_stats *out)
{
	if (__atomic_load_n(&st->h->cache_words, __ATOMIC_ACQUIRE) !=
	    sizeof(*out) / sizeof(uint64_t))
		return false;
	memcpy(out, st->h->cache, sizeof(*out));
	return true;
}

void
stats_purge_token(const struct stats *st, char hex[STATS_TOKEN_LEN + 1])
{
	snprintf(hex, STATS_TOKEN_LEN + 1, "%016llx%016llx",
	    (unsigned long long)st->h->purge_token[0],
	    (unsigned long long)st->h->purge_token[1]);
}

void
stats_master_respawned(struct stats *st)
{
	st->h->worker_restarts++;
}

int
stats_attach(struct stats *st, int slot, struct stats_mine *mine)
{
	struct slot_head *sh;
	uint8_t *p;

	if (slot < 0 || (unsigned)slot >= st->h->slots) {
		/* No slot to be had: count privately, for nobody.  Kept
		 * until exit. */
		p = calloc(1, st->h->slot_size);
		if (p == NULL)
			return -1;
		slot_parts(st, p, mine);
		return 0;
	}
	sh = (struct slot_head *)slot_at(st, (unsigned)slot);
	sh->pid = getpid();
	slot_parts(st, (uint8_t *)sh, mine);
	return 0;
}

static uint64_t
ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void
hist_sum(struct stats_hist *to, const struct stats_hist *from)
{
	for (unsigned b = 0; b < STATS_NBUCKETS; b++)
		to->bucket[b] += ld(&from->bucket[b]);
	to->sum_us += ld(&from->sum_us);
}

int
stats_sum(const struct stats *st, uint64_t now_ms, struct stats_sum *sum)
{
	const struct head *h = st->h;
	struct stats_mine m;
	unsigned i, r, k;

	memset(sum, 0, sizeof(*sum));
	sum->counters = h->counters != 0;
	sum->master_pid = (pid_t)h->master_pid;
	sum->started = h->started;
	sum->generation = (unsigned)ld(&h->generation);
	sum->workers = (unsigned)ld(&h->workers);
	sum->reloads = ld(&h->reloads);
	sum->worker_restarts = ld(&h->worker_restarts);
	sum->nservers = (unsigned)__atomic_load_n(&h->nservers,
	    __ATOMIC_ACQUIRE);
	sum->npeers = (unsigned)__atomic_load_n(&h->npeers, __ATOMIC_ACQUIRE);
	/* "(other)" shows only when it counted something; see below. */
	sum->server_name = calloc(h->server_rows, sizeof(char *));
	sum->peer_name = calloc(h->peer_rows, sizeof(char *));
	sum->srv = calloc(h->server_rows * STATS_NSERVER, sizeof(uint64_t));
	sum->peer = calloc(h->peer_rows, sizeof(struct stats_peer_row));
	sum->worker = calloc(h->slots, sizeof(*sum->worker));
	if (sum->server_name == NULL || sum->peer_name == NULL ||
	    sum->srv == NULL || sum->peer == NULL || sum->worker == NULL) {
		stats_sum_free(sum);
		return -1;
	}
	for (i = 0; i < h->slots; i++) {
		const struct slot_head *sh = (void *)slot_at(st, i);

		slot_parts(st, (uint8_t *)sh, &m);
		if (ld((const uint64_t *)&sh->pid) != 0) {
			struct stats_worker *sw = &sum->worker[sum->slots_used++];

			sw->pid = (pid_t)ld((const uint64_t *)&sh->pid);
			sw->requests = ld(&m.w[STAT_requests]);
			sw->active = ld(&m.w[STAT_conn_active]);
			sw->accepted = ld(&m.w[STAT_conn_accepted]);
			sum->slots_busy += ld(&m.w[STAT_conn_writing]) != 0;
		}
		for (k = 0; k < STATS_NWORKER; k++)
			sum->w[k] += ld(&m.w[k]);
		hist_sum(&sum->req_time, m.req_time);
		for (k = 0; k < h->server_rows * STATS_NSERVER; k++)
			sum->srv[k] += ld(&m.srv[k]);
		for (r = 0; r < h->peer_rows; r++) {
			for (k = 0; k < STATS_NPEER; k++)
				sum->peer[r].v[k] += k == STAT_peer_down ?
				    ld(&m.peer[r].v[k]) > now_ms :
				    ld(&m.peer[r].v[k]);
			hist_sum(&sum->peer[r].connect, &m.peer[r].connect);
			hist_sum(&sum->peer[r].response, &m.peer[r].response);
		}
	}
	for (r = 0; r < sum->nservers; r++)
		sum->server_name[r] = server_name(st, r);
	if (sum->srv[(h->server_rows - 1) * STATS_NSERVER + STAT_srv_requests]) {
		/* The overflow row, moved up behind the named ones. */
		memcpy(&sum->srv[sum->nservers * STATS_NSERVER],
		    &sum->srv[(h->server_rows - 1) * STATS_NSERVER],
		    STATS_NSERVER * sizeof(uint64_t));
		sum->server_name[sum->nservers++] = server_name(st,
		    (unsigned)h->server_rows - 1);
	}
	for (r = 0; r < sum->npeers; r++)
		sum->peer_name[r] = peer_name(st, r);
	if (sum->peer[h->peer_rows - 1].v[STAT_peer_requests]) {
		sum->peer[sum->npeers] = sum->peer[h->peer_rows - 1];
		sum->peer_name[sum->npeers++] = peer_name(st,
		    (unsigned)h->peer_rows - 1);
	}
	return 0;
}

void
stats_sum_free(struct stats_sum *sum)
{
	free(sum->server_name);
	free(sum->peer_name);
	free(sum->srv);
	free(sum->peer);
	free(sum->worker);
	memset(sum, 0, sizeof(*sum));
}

unsigned
stats_bucket_ms(unsigned i)
{
#define BUCKET(ms) ms,
	static const unsigned ms[] = { STATS_BUCKETS(BUCKET) 0 };
#undef BUCKET

	return i < STATS_NBUCKETS ? ms[i] : 0;
}

void
stats_hist_add(struct stats_hist *h, uint64_t us)
{
	unsigned b = 0;

	while (b + 1 < STATS_NBUCKETS && us > stats_bucket_ms(b) * 1000ULL)
		b++;
	h->bucket[b]++;
	h->sum_us += us;
}

uint64_t
stats_hist_count(const struct stats_hist *h)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < STATS_NBUCKETS; b++)
		n += h->bucket[b];
	return n;
}

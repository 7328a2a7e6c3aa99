/*
 * Private to shm/: the layout of the mapping and the helpers that the
 * store's .c files share.  Nothing outside shm/ includes this.
 *
 * Mapping (every reference inside it is an offset from its start):
 *
 *   header        magic, version, the options, the layout, hash secret
 *   pool          the pool lock, free runs of pages, free chunks per class
 *   stripes[]     per stripe: lock, LRU lists, waiters, counters
 *   slots[]       per process slot: pid, wake ring, then max_refs records
 *   buckets[]     the hash index, a contiguous share per stripe
 *   waitbits[]    per stripe: slots waiting on any key (the fallback)
 *   ptab[]        one entry per page of the arena
 *   arena         pages of PAGE bytes: runs of pages, each free, a slab
 *                 (cut in chunks of one size class) or one big item
 *
 * Memory belongs to the whole store, not to a stripe: any stripe's items
 * live in any page, and a page freed by one class or stripe serves any
 * other.  Values up to SLAB_MAX bytes (with their header) live in slab
 * chunks; larger ones get a run of whole pages of their own, so the page
 * size does not grow with max_object and a value is always contiguous.
 * Placeholders (a key being filled, under a lease) have slabs of their
 * own: they cannot be evicted, and would pin the pages of values.
 *
 * The layout is a pure function of the options, so whoever maps the file
 * recomputes it and compares instead of trusting what the file says.
 */
#ifndef CORRAL_STORE_IMPL_H
#define CORRAL_STORE_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/store.h"
#ifdef CORRAL_TEST_HOOKS
#include "shm/store_test.h"
#endif

#define STORE_MAGIC	0x45524f54534c5243ULL	/* "CRLSTORE" */
#define STORE_VERSION	2
#define HDR_SIZE	4096
#define SECRET_SIZE	192
#define PAGE		4096		/* the pool's unit */
#define MAX_CLASSES	32		/* slab classes + the big class */
#define CHUNK_MIN	128
#define SLAB_MAX	8192		/* largest slab chunk; more: a run */
#define SLAB_BYTES_MIN	32768		/* a slab is at least this long */
#define NO_SLOT		0xffff
#define MAX_SLOTS	4096
#define WAKE_RING	64		/* tokens a slot can have queued */
#define STRIPE_WAITERS	16		/* (key, slot) waits a stripe keeps */
#define NBINS		64		/* free run lists */
#define EXACT_BINS	32		/* runs of 1..32 pages: one bin each */
#define NO_PAGE		UINT32_MAX
#define LATER_MAX	16	/* unpins a process leaves for later */

/* Record kinds, in the low bits of an item offset (items are 8-aligned). */
#define REC_PIN		1
#define REC_LEASE	2
#define REC_RESV	3
#define REC_KIND(v)	((unsigned)((v) & 7))
#define REC_OFF(v)	((v) & ~(uint64_t)7)

/* Chunk states; none is 0 so that zeroed memory is not mistaken for one. */
#define ST_FREE		0xf1	/* the pool's: in its class's free list */
#define ST_RESV		0xa2	/* being written by its reserver */
#define ST_LINKED	0xb3	/* in the hash table and an LRU */
#define ST_ZOMBIE	0xc4	/* unlinked, freed when its pins drop to 0 */

#define IT_PLACEHOLDER	0x01	/* no value: only holds a lease */

/*
 * A page table entry.  Kind in the low 4 bits; a run's head says its
 * length in pages and, for a slab, its class and chunks in use; every
 * other page of a used run points at its head; a free run has its head
 * and its last page (FTAIL, pointing at the head) filled in, the pages
 * between are 0.  Only the pool lock writes it.
 */
#define PT_NONE		0
#define PT_FREE		1
#define PT_SLAB		2
#define PT_BIG		3
#define PT_BODY		4	/* page of a used run: aux = head */
#define PT_FTAIL	5	/* last page of a free run: aux = head */
#define PT_KIND(e)	((unsigned)((e) & 0xf))
#define PT_CLASS(e)	((unsigned)(((e) >> 4) & 0xff))
#define PT_LEN(e)	((uint32_t)(((e) >> 12) & 0x3ffffff))
#define PT_AUX(e)	((uint32_t)((e) >> 38))
#define PT_MAKE(k, c, len, aux) ((uint64_t)(k) | (uint64_t)(c) << 4 | \
	(uint64_t)(len) << 12 | (uint64_t)(aux) << 38)
#define PT_MAX_PAGES	0x3ffffff

/* Everything that the options decide; compared with memcmp on attach. */
struct layout {
	uint64_t size, stripes, max_object, max_slots, max_refs, lease_timeout;
	uint64_t npages, nbuckets, stripe_buckets, nclasses;
	uint64_t lease_class;	/* slabs of placeholders only */
	uint64_t big_class;	/* a run of pages per item */
	uint64_t pool_off, stripe_off, stripe_size, slot_off, slot_size;
	uint64_t bucket_off, waitbits_off, wait_words, ptab_off, arena_off;
	uint64_t chunk[MAX_CLASSES];		/* chunk bytes; big: 0 */
	uint64_t slab_pages[MAX_CLASSES];	/* pages of one slab */
};

struct header {
	uint64_t magic;
	uint64_t version;
	struct layout l;
	uint64_t clean;		/* set by a clean shutdown of a persist store */
	uint64_t sweep_pos;	/* where store_sweep() goes on */
	uint64_t cas_next;	/* the next value version handed out */
	uint8_t secret[SECRET_SIZE];
};

/* Gauges and counters, written under the stripe lock, read without it. */
struct counters {
#define STORE_X_FIELD(name, kind, help)	uint64_t name;
	STORE_COUNTERS(STORE_X_FIELD)
#undef STORE_X_FIELD
} __attribute__((aligned(64)));

/* The page pool; everything in it is guarded by its mutex. */
struct pool {
	pthread_mutex_t mutex;
	uint32_t busy;		/* set while locked: a restart wipes it */
	uint32_t pad;
	uint64_t free_pages;
	uint64_t bin_mask;	/* bins that hold a run */
	uint32_t bin[NBINS];	/* first page of a free run, or NO_PAGE */
	uint64_t chunk_free[MAX_CLASSES];	/* offset of a free chunk */
	uint64_t slabs[MAX_CLASSES];		/* slabs of each class */
	uint64_t lock_recoveries, corruptions;	/* added to the stripes' */
} __attribute__((aligned(64)));

/* A free run's first page starts with its links in its bin. */
struct free_run {
	uint32_t prev, next;
};

/* A slot waiting on a key: STORE_WAIT registered it here. */
struct waiter {
	uint64_t token;		/* 0: unused */
	uint32_t slot;
	uint32_t pad;
};

struct stripe {
	pthread_mutex_t mutex;
	uint32_t busy;		/* set while locked: a restart wipes it */
	uint32_t pad;
	uint64_t lru_head[MAX_CLASSES];
	uint64_t lru_tail[MAX_CLASSES];
	struct waiter waiters[STRIPE_WAITERS];
	struct counters c;
} __attribute__((aligned(64)));

struct slot {
	int32_t pid;
	uint32_t overflow;	/* tokens were lost: wake every waiter */
	uint32_t ring_hint;
	uint32_t pad[13];
	uint64_t ring[WAKE_RING];	/* tokens of ended leases; 0: empty */
	uint64_t rec[];		/* item offset | REC_*, or 0 */
};

/*
 * The header of every item, in a slab chunk or at the start of a big
 * run; the key follows, 8-aligned, then the value.  A free chunk reuses
 * prev/next as its links in its class's free list.
 */
struct item {
	uint64_t hnext;		/* next in the hash chain */
	uint64_t prev, next;	/* LRU when linked, free list when free */
	uint64_t hash;
	uint64_t cas;		/* version: unique per stored value */
	int64_t exptime;	/* absolute, 0: never */
	int64_t lease_deadline;
	uint32_t vcsum;		/* of the value (0 unless persist) */
	uint32_t vlen;
	uint32_t flags;
	uint32_t refcount;	/* pins and reservations */
	int32_t lease_pid;
	uint32_t lease_rec;	/* index of the lease in its owner's slot */
	uint32_t csum;		/* of the fields above the LRU links + key */
	uint32_t atime;		/* last use, store clock seconds */
	uint16_t lease_slot;	/* NO_SLOT: no lease */
	uint16_t klen;
	uint8_t cls;
	uint8_t state;
	uint8_t iflags;
	uint8_t pad;
};

/* A pin store_release_later() left, to drop under its stripe's lock. */
struct later {
	uint64_t off;
	uint32_t rec;
	uint32_t si;
};

/* An item to evict, found under the pool lock and checked under its own. */
struct victim {
	uint64_t off;
	uint64_t cas;
};

struct store {
	char *base;
	int fd;			/* the file (master only), or -1 */
	char *path;		/* its name */
	bool file_gone;		/* its removal was reported */
	int memfd;		/* the memory of the store */
	int *efd;		/* one eventfd a slot */
	struct layout l;	/* computed here, never read from the map */
	struct header *h;
	int slot;		/* -1 in the master */
	pid_t pid;
	pid_t creator;
	bool persist;
	uint32_t rec_hint;
	uint32_t sample;	/* where the next eviction looks first */
	struct later later[LATER_MAX];	/* unpins left for later */
	unsigned nlater;
	uint64_t *wake;		/* slots to wake once the lock is dropped */
	bool wake_any;
	bool bad;		/* a bad link was seen under a stripe lock */
	bool pool_bad;		/* the same under the pool lock */
	/* chunk_start()'s constants, from l (chunk_div_init); not in the map */
	uint64_t chunk_inv[MAX_CLASSES];	/* odd part's inverse mod 2^64 */
	uint64_t chunk_lim[MAX_CLASSES];	/* UINT64_MAX / chunk */
	uint8_t chunk_tz[MAX_CLASSES];		/* chunk's trailing 0 bits */
	int pool_depth;		/* the pool lock is held (nested count) */
	uint8_t secret[SECRET_SIZE];
	int64_t (*clock)(void *);
	void *clock_arg;
	char note[256];
#ifdef CORRAL_TEST_HOOKS
	uint64_t (*hashfn)(const void *, size_t);
	void (*hook[STORE_HOOK_POINTS])(void *);
	void *hook_arg[STORE_HOOK_POINTS];
#endif
};

/* A test hook: compiled only into the unit tests' copy of shm/. */
#ifdef CORRAL_TEST_HOOKS
#define TEST_HOOK(s, point) do { \
	if ((s)->hook[point] != NULL) \
		(s)->hook[point]((s)->hook_arg[point]); \
} while (0)
#else
#define TEST_HOOK(s, point) do { } while (0)
#endif

#define ALIGN(x, a)	(((x) + (a) - 1) / (a) * (a))
#define ITEM_HDR	sizeof(struct item)

/* Counters have one writer (the lock holder) and lock-free readers. */
#define CNT_ADD(st, f, n) \
	__atomic_store_n(&(st)->c.f, (st)->c.f + (n), __ATOMIC_RELAXED)
#define CNT_SUB(st, f, n) \
	__atomic_store_n(&(st)->c.f, (st)->c.f - (n), __ATOMIC_RELAXED)
/* For the few counted without the stripe lock (never with CNT_ADD). */
#define CNT_ATOMIC(st, f) \
	__atomic_fetch_add(&(st)->c.f, 1, __ATOMIC_RELAXED)

/* store.c */
int store_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *store_fmt_size(char *buf, size_t len, uint64_t v);
int layout_compute(struct layout *l, const struct store_options *o,
    char *err, size_t errlen);
int64_t store_now(const struct store *s);
int store_init_fresh(struct store *s, char *err, size_t errlen);
const char *store_header_mismatch(const struct header *h,
    const struct layout *l);
void store_adopt_image(struct store *s, size_t *kept, size_t *dropped);
void store_sum_stats(const char *base, const struct layout *l,
    struct store_stats *o);

/* pool.c: the page pool, its lock, runs, slabs and free chunks */
struct pool *pool_at(const struct store *s);
uint64_t *ptab_at(const struct store *s);
char *page_at(const struct store *s, uint64_t page);
uint64_t page_of_off(const struct store *s, uint64_t off);
void pool_mutex_init(struct pool *p);
int pool_lock(struct store *s);
void pool_unlock(struct store *s);
void pool_init(struct store *s);
int class_for(const struct store *s, size_t total);
uint64_t big_pages(size_t total);
uint64_t item_capacity(const struct store *s, const struct item *it);
struct item *do_pool_alloc(struct store *s, unsigned cls, size_t total,
    uint64_t hash, uint32_t *rec, bool *norec);
void do_pool_free(struct store *s, struct item *it);
void do_pool_rebuild(struct store *s);
/* Calls fn on every item (used chunk or big run), under the pool lock. */
void do_pool_each(struct store *s, void (*fn)(struct store *, struct item *,
    void *), void *arg);
bool do_pool_run_of(const struct store *s, uint64_t page, uint64_t *head,
    uint64_t *entry);
void chunk_div_init(struct store *s);
bool chunk_start(const struct store *s, unsigned cls, uint64_t in);
struct item *item_at(const struct store *s, uint64_t off);
bool item_sane(const struct store *s, const struct item *it, uint64_t cap);

/* stripe.c: stripes, locks, items, LRU, hash chains, records, repair */
struct stripe *stripe_at(const struct store *s, unsigned si);
struct slot *slot_at(const struct store *s, unsigned slot);
uint64_t *bucket_at(const struct store *s, unsigned si, uint64_t hash);
unsigned stripe_of_hash(const struct store *s, uint64_t hash);
uint64_t key_hash(const struct store *s, const void *key, size_t klen);
char *item_key(struct item *it);
char *item_value(struct item *it);
uint64_t item_off(const struct store *s, const struct item *it);
bool item_expired(const struct item *it, int64_t now);
bool item_leased(const struct item *it);
bool item_evictable(const struct item *it);
unsigned item_lru(const struct store *s, const struct item *it);
uint32_t item_csum(const struct item *it);
uint32_t value_csum(const struct store *s, const void *val, size_t len);
void robust_mutex_init(pthread_mutex_t *m);
void stripe_mutex_init(struct stripe *st);
void stripe_init(struct store *s, unsigned si);
int stripe_lock(struct store *s, unsigned si);
void stripe_unlock(struct store *s, unsigned si);
void do_stripe_rebuild(struct store *s, unsigned si);
size_t store_rebuild_all(struct store *s, bool check_values);
void do_item_link(struct store *s, unsigned si, struct item *it);
void do_item_unlink(struct store *s, unsigned si, struct item *it);
void do_item_free(struct store *s, struct item *it);
void do_lru_bump(struct store *s, unsigned si, struct item *it);
struct item *do_item_find(struct store *s, unsigned si, uint64_t hash,
    const void *key, size_t klen);
bool do_lease_end(struct store *s, unsigned si, struct item *it);
void do_evict(struct store *s, unsigned si, struct item *it, int64_t now);
int rec_claim(struct store *s, uint64_t val);
void rec_clear(struct store *s, unsigned slot, uint32_t idx, uint64_t val);
void do_item_unpin(struct store *s, struct item *it);
int item_stripe_lock(struct store *s, uint64_t off);
const struct item *item_peek(const struct store *s, uint64_t off);
int item_stripe_lock_at(struct store *s, uint64_t off, struct item **itp);

/* ops.c: shared with update.c */
int lock_key(struct store *s, const void *key, size_t klen, uint64_t *hash,
    unsigned *si);
int64_t ttl_to_exptime(int64_t ttl, int64_t now);
bool is_live(const struct item *it, int64_t now);
void do_resv_drop(struct store *s, struct item *it, uint32_t rec);

/* evict.c: allocation that makes room, with no lock held */
struct item *store_alloc(struct store *s, size_t total, bool lease,
    uint64_t hash, uint32_t *rec, enum store_result *why);

/* wake.c: per-key waiters and the slots' wake rings */
uint64_t token_of(uint64_t hash);
void do_wait_register(struct store *s, unsigned si, uint64_t token);
void do_wake_key(struct store *s, unsigned si, uint64_t token);
void do_wake_all(struct store *s, unsigned si);
void wake_flush(struct store *s);
void wake_slot_reset(struct store *s, unsigned slot);
uint64_t *waitbits_at(const struct store *s, unsigned si);

#endif

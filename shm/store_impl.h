/*
 * Private to shm/: the layout of the mapping and the helpers that the
 * store's .c files share.  Nothing outside shm/ includes this.
 *
 * Mapping (every reference inside it is an offset from its start):
 *
 *   header        magic, version, the options, the layout, hash secret
 *   stripes[]     per stripe: robust mutex, LRU and free lists, counters
 *   slots[]       per process slot: pid, then max_refs records
 *   regions[]     per stripe: hash buckets, page table, waiter bitmap, and
 *                 the arena of pages, each page cut in chunks of one class
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

#define STORE_MAGIC	0x45524f54534c5243ULL	/* "CRLSTORE" */
#define STORE_VERSION	1
#define HDR_SIZE	4096
#define SECRET_SIZE	192
#define MAX_CLASSES	64
#define PAGE_MIN	65536
#define CHUNK_MIN	128
#define NO_CLASS	0xff
#define NO_SLOT		0xffff
#define MAX_SLOTS	4096

/* Record kinds, in the low bits of an item offset (items are 8-aligned). */
#define REC_PIN		1
#define REC_LEASE	2
#define REC_RESV	3
#define REC_KIND(v)	((unsigned)((v) & 7))
#define REC_OFF(v)	((v) & ~(uint64_t)7)

/* Chunk states; none is 0 so that zeroed memory is not mistaken for one. */
#define ST_FREE		0xf1
#define ST_RESV		0xa2	/* being written by its reserver */
#define ST_LINKED	0xb3	/* in the hash table and an LRU */
#define ST_ZOMBIE	0xc4	/* unlinked, freed when its pins drop to 0 */

#define IT_PLACEHOLDER	0x01	/* no value: only holds a lease */

/* Everything that the options decide; compared with memcmp on attach. */
struct layout {
	uint64_t size, stripes, max_object, max_slots, max_refs, lease_timeout;
	uint64_t page_size, npages, nbuckets, nclasses;
	uint64_t stripe_off, stripe_size, slot_off, slot_size;
	uint64_t region_off, region_size;
	uint64_t bucket_rel, ptab_rel, wait_rel, arena_rel, wait_words;
	uint64_t chunk[MAX_CLASSES];
};

struct header {
	uint64_t magic;
	uint64_t version;
	struct layout l;
	uint64_t clean;		/* set by a clean shutdown of a persist store */
	uint64_t sweep_pos;	/* where store_sweep() goes on */
	uint8_t secret[SECRET_SIZE];
};

/* Gauges and counters, written under the stripe lock, read without it. */
struct counters {
#define STORE_X_FIELD(name, kind, help)	uint64_t name;
	STORE_COUNTERS(STORE_X_FIELD)
#undef STORE_X_FIELD
} __attribute__((aligned(64)));

struct stripe {
	pthread_mutex_t mutex;
	uint32_t busy;		/* set while locked: a restart wipes it */
	uint32_t free_pages;
	uint64_t ptab_csum;	/* page table checksum at clean shutdown */
	uint64_t lru_head[MAX_CLASSES];
	uint64_t lru_tail[MAX_CLASSES];
	uint64_t free_head[MAX_CLASSES];
	uint32_t pages[MAX_CLASSES];
	struct counters c;
} __attribute__((aligned(64)));

struct slot {
	int32_t pid;
	uint32_t pad[15];
	uint64_t rec[];		/* item offset | REC_*, or 0 */
};

/* The header of every chunk; the key follows, 8-aligned, then the value. */
struct item {
	uint64_t hnext;		/* next in the hash chain */
	uint64_t prev, next;	/* LRU when linked, free list when free */
	uint64_t hash;
	int64_t exptime;	/* absolute, 0: never */
	int64_t lease_deadline;
	uint32_t vlen;
	uint32_t flags;
	uint32_t refcount;	/* pins and reservations */
	int32_t lease_pid;
	uint32_t lease_rec;	/* index of the lease in its owner's slot */
	uint32_t csum;		/* of the fields above the LRU links + key */
	uint16_t lease_slot;	/* NO_SLOT: no lease */
	uint16_t klen;
	uint8_t cls;
	uint8_t state;
	uint8_t iflags;
	uint8_t pad;
};

/* A page table entry: class in the low byte, chunks in use above it. */
#define PT_CLASS(e)	((e) & 0xff)
#define PT_USED(e)	((e) >> 8)
#define PT_MAKE(c, u)	((uint32_t)(c) | ((uint32_t)(u) << 8))

struct store {
	char *base;
	int fd;
	int *efd;		/* one eventfd a slot */
	struct layout l;	/* computed here, never read from the map */
	struct header *h;
	int slot;		/* -1 in the master */
	pid_t pid;
	pid_t creator;
	bool persist;
	uint32_t rec_hint;
	uint64_t *wake;		/* slots to wake once the lock is dropped */
	bool wake_any;
	bool bad;		/* a bad link was seen under the lock */
	uint8_t secret[SECRET_SIZE];
	int64_t (*clock)(void *);
	void *clock_arg;
	char note[256];
#ifdef CORRAL_TEST_HOOKS
	uint64_t (*hashfn)(const void *, size_t);
	void (*hook[1])(void *);
	void *hook_arg[1];
#endif
};

/* A test hook: compiled only into the unit tests' copy of shm/. */
#ifdef CORRAL_TEST_HOOKS
#include "shm/store_test.h"
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

/* store.c */
int layout_compute(struct layout *l, const struct store_options *o,
    char *err, size_t errlen);
int64_t store_now(const struct store *s);

/* slab.c: stripes, locks, items, allocation, LRU, hash chains */
struct stripe *stripe_at(const struct store *s, unsigned si);
struct slot *slot_at(const struct store *s, unsigned slot);
uint64_t *bucket_at(const struct store *s, unsigned si, uint64_t hash);
uint32_t *ptab_at(const struct store *s, unsigned si);
uint64_t *waiters_at(const struct store *s, unsigned si);
uint64_t arena_off(const struct store *s, unsigned si);
unsigned stripe_of_hash(const struct store *s, uint64_t hash);
int stripe_of_off(const struct store *s, uint64_t off);
uint64_t key_hash(const struct store *s, const void *key, size_t klen);
char *item_key(struct item *it);
char *item_value(struct item *it);
uint64_t item_off(const struct store *s, const struct item *it);
struct item *item_at(const struct store *s, unsigned si, uint64_t off);
bool item_expired(const struct item *it, int64_t now);
bool item_leased(const struct item *it);
uint32_t item_csum(const struct item *it);
void stripe_init(struct store *s, unsigned si);

/* A robust, process-shared mutex for the stripe, unheld. */
void stripe_mutex_init(struct stripe *st);
int stripe_lock(struct store *s, unsigned si);
void stripe_unlock(struct store *s, unsigned si);
void do_stripe_rebuild(struct store *s, unsigned si, bool keep);
void do_stripe_wipe(struct store *s, unsigned si);
struct item *do_item_alloc(struct store *s, unsigned si, size_t total);
void do_item_free(struct store *s, unsigned si, struct item *it);
void do_item_link(struct store *s, unsigned si, struct item *it);
void do_item_unlink(struct store *s, unsigned si, struct item *it);
void do_lru_bump(struct store *s, unsigned si, struct item *it);
struct item *do_item_find(struct store *s, unsigned si, uint64_t hash,
    const void *key, size_t klen);
bool do_lease_end(struct store *s, unsigned si, struct item *it);
void do_wake_waiters(struct store *s, unsigned si);
int rec_claim(struct store *s, uint64_t val);
void rec_clear(struct store *s, unsigned slot, uint32_t idx, uint64_t val);
void do_item_unpin(struct store *s, unsigned si, struct item *it);
uint64_t ptab_checksum(const struct store *s, unsigned si);

#endif

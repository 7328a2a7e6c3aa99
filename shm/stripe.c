/*
 * Stripes of the shared store: their locks, the items' hash chains and
 * LRU lists, the slot records, and the repair of a stripe that a dead
 * process left behind.
 *
 * Lock rules (for every file in shm/):
 *
 *  - Each stripe has one process-shared robust mutex.  It guards its hash
 *    buckets, its LRU lists, its waiters, its counters, every item whose
 *    key hashes to it (whatever page the item is in) unless the item is
 *    ST_FREE, and the slot records (in any slot) that pin or lease such
 *    an item.  The pool (pool.c) has a lock of its own for pages and free
 *    chunks.
 *  - A process holds at most one stripe lock at a time, and may take the
 *    pool lock inside it (stripe, then pool; never the reverse).  Making
 *    room by eviction takes victims' stripe locks one at a time, holding
 *    no lock in between (evict.c).
 *  - Functions named do_* expect the lock(s) they touch held; the others
 *    take them.
 *  - No I/O and no allocation while a lock is held: wakeups are collected
 *    into s->wake and written to the eventfds by stripe_unlock(), after
 *    the mutex is released.  Values are copied in by their reserver with
 *    no lock (store_reserve/store_commit), and read through pins.
 *  - A pinned item (refcount > 0) is never freed or reused; unlinking it
 *    makes it a zombie that the last unpin frees.
 *  - If the holder dies, the next locker gets EOWNERDEAD: it rebuilds the
 *    stripe from the items themselves (do_stripe_rebuild), counts the
 *    recovery and marks the mutex consistent.  Only items in state
 *    ST_LINKED with a good checksum are kept, and an item reaches that
 *    state only after its value was written, so nothing half-written is
 *    ever served.
 *  - Every offset read from the mapping is checked (item_at) before it is
 *    followed; a bad one flags the stripe, which is rebuilt before unlock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "shm/store_impl.h"

struct stripe *
stripe_at(const struct store *s, unsigned si)
{
	return (struct stripe *)(s->base + s->l.stripe_off +
	    (uint64_t)si * s->l.stripe_size);
}

struct slot *
slot_at(const struct store *s, unsigned slot)
{
	return (struct slot *)(s->base + s->l.slot_off +
	    (uint64_t)slot * s->l.slot_size);
}

/* The stripe takes the high bits of the hash, its bucket the low ones. */
unsigned
stripe_of_hash(const struct store *s, uint64_t hash)
{
	return (unsigned)((hash >> 40) & (s->l.stripes - 1));
}

uint64_t *
bucket_at(const struct store *s, unsigned si, uint64_t hash)
{
	uint64_t *b = (uint64_t *)(s->base + s->l.bucket_off);

	return b + (uint64_t)si * s->l.stripe_buckets +
	    (hash & (s->l.stripe_buckets - 1));
}

uint64_t
key_hash(const struct store *s, const void *key, size_t klen)
{
#ifdef CORRAL_TEST_HOOKS
	if (s->hashfn != NULL)
		return s->hashfn(key, klen);
#endif
	return XXH3_64bits_withSecret(key, klen, s->secret, SECRET_SIZE);
}

char *
item_key(struct item *it)
{
	return (char *)(it + 1);
}

char *
item_value(struct item *it)
{
	return item_key(it) + ALIGN((size_t)it->klen, 8);
}

uint64_t
item_off(const struct store *s, const struct item *it)
{
	return (uint64_t)((const char *)it - s->base);
}

bool
item_expired(const struct item *it, int64_t now)
{
	return it->exptime != 0 && it->exptime <= now;
}

bool
item_leased(const struct item *it)
{
	return it->lease_slot != NO_SLOT;
}

/* Nobody uses it: eviction may take it. */
bool
item_evictable(const struct item *it)
{
	return it->state == ST_LINKED && it->refcount == 0 &&
	    !item_leased(it);
}

/* The LRU list of its size: a slab class, or the big one. */
unsigned
item_lru(const struct store *s, const struct item *it)
{
	return it->cls < s->l.nclasses ? it->cls : 0;
}

/* Covers what a reader trusts, so a restart keeps no garbled item. */
uint32_t
item_csum(const struct item *it)
{
	uint64_t seed;

	seed = it->hash ^ ((uint64_t)it->exptime * 0x9e3779b97f4a7c15ULL) ^
	    ((uint64_t)it->vlen << 32 | it->flags) ^
	    ((uint64_t)it->klen << 16 | (uint64_t)it->iflags << 8 | it->cls) ^
	    (it->cas * 0xc2b2ae3d27d4eb4fULL) ^ ((uint64_t)it->vcsum << 7);
	return (uint32_t)XXH3_64bits_withSeed(it + 1, it->klen, seed);
}

/*
 * Only a saved image's load checks a value's checksum (store_adopt_image):
 * a store that is never saved takes none, and its items say 0.
 */
uint32_t
value_csum(const struct store *s, const void *val, size_t len)
{
	return s->persist ? (uint32_t)XXH3_64bits(val, len) : 0;
}

/* A link read from the map: 0 ends the list; a bad one flags the stripe. */
static struct item *
follow(struct store *s, uint64_t off)
{
	struct item *it;

	if (off == 0)
		return NULL;
	if ((it = item_at(s, off)) == NULL || it->state == ST_FREE) {
		s->bad = true;
		return NULL;
	}
	return it;
}

/* A process-shared mutex whose holder's death the next locker learns. */
void
robust_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &ma);
	pthread_mutexattr_destroy(&ma);
}

void
stripe_mutex_init(struct stripe *st)
{
	robust_mutex_init(&st->mutex);
	st->busy = 0;
}

/* An empty stripe with a fresh lock; counters start at 0. */
void
stripe_init(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);

	memset(st, 0, sizeof(*st));
	stripe_mutex_init(st);
	memset(bucket_at(s, si, 0), 0, s->l.stripe_buckets * 8);
	memset(waitbits_at(s, si), 0, s->l.wait_words * 8);
}

int
stripe_lock(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);
	int rc;

	rc = pthread_mutex_lock(&st->mutex);
	if (rc == EOWNERDEAD) {
		/* The holder died mid-change: trust only the items. */
		do_stripe_rebuild(s, si);
		CNT_ADD(st, lock_recoveries, 1);
		pthread_mutex_consistent(&st->mutex);
		rc = 0;
	}
	if (rc != 0)
		return -1;
	st->busy = 1;
	s->bad = false;
	return 0;
}

void
stripe_unlock(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);

	if (s->bad) {
		do_stripe_rebuild(s, si);
		CNT_ADD(st, corruptions, 1);
		s->bad = false;
	}
	st->busy = 0;
	pthread_mutex_unlock(&st->mutex);
	wake_flush(s);
}

/*
 * The item header at off, unchecked, when it lies in the arena: read
 * without the lock only to choose the stripe to lock.
 */
const struct item *
item_peek(const struct store *s, uint64_t off)
{
	const struct layout *l = &s->l;

	if (off < l->arena_off || off % 8 != 0 ||
	    off - l->arena_off > l->npages * PAGE - ITEM_HDR)
		return NULL;
	return (const struct item *)(s->base + off);
}

/*
 * Locks the stripe of the item at off (a record's), and checks that the
 * item is still there and still of that stripe.  The stripe, and the item
 * in *itp when itp is not NULL; -1 if not.
 */
int
item_stripe_lock_at(struct store *s, uint64_t off, struct item **itp)
{
	const struct item *p;
	struct item *it;
	unsigned si;
	int tries;

	for (tries = 0; tries < 4; tries++) {
		if ((p = item_peek(s, off)) == NULL || p->state == ST_FREE)
			return -1;
		si = stripe_of_hash(s, __atomic_load_n(&p->hash,
		    __ATOMIC_RELAXED));
		if (stripe_lock(s, si) == -1)
			return -1;
		if ((it = item_at(s, off)) != NULL && it->state != ST_FREE &&
		    stripe_of_hash(s, it->hash) == si) {
			if (itp != NULL)
				*itp = it;
			return (int)si;
		}
		stripe_unlock(s, si);
	}
	return -1;
}

int
item_stripe_lock(struct store *s, uint64_t off)
{
	return item_stripe_lock_at(s, off, NULL);
}

/* LRU lists, one per stripe and size, through prev/next. */
static void
do_lru_push(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);
	unsigned c = item_lru(s, it);
	uint64_t off = item_off(s, it);
	struct item *h = follow(s, st->lru_head[c]);

	it->prev = 0;
	it->next = h != NULL ? st->lru_head[c] : 0;
	if (h != NULL)
		h->prev = off;
	else
		st->lru_tail[c] = off;
	st->lru_head[c] = off;
}

static void
do_lru_remove(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);
	unsigned c = item_lru(s, it);
	struct item *p = follow(s, it->prev);
	struct item *n = follow(s, it->next);

	if (p != NULL)
		p->next = n != NULL ? it->next : 0;
	else
		st->lru_head[c] = n != NULL ? it->next : 0;
	if (n != NULL)
		n->prev = p != NULL ? it->prev : 0;
	else
		st->lru_tail[c] = p != NULL ? it->prev : 0;
	it->prev = it->next = 0;
}

void
do_lru_bump(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);

	it->atime = (uint32_t)store_now(s);
	if (st->lru_head[item_lru(s, it)] == item_off(s, it))
		return;
	do_lru_remove(s, si, it);
	do_lru_push(s, si, it);
}

/* Gives an item's memory back to the pool (stripe lock held). */
void
do_item_free(struct store *s, struct item *it)
{
	if (s->pool_depth > 0) {
		do_pool_free(s, it);
		return;
	}
	if (pool_lock(s) == -1)
		return;
	do_pool_free(s, it);
	pool_unlock(s);
}

void
do_item_link(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);
	uint64_t *b = bucket_at(s, si, it->hash);

	it->hnext = *b;
	*b = item_off(s, it);
	it->atime = (uint32_t)store_now(s);
	do_lru_push(s, si, it);
	__atomic_store_n(&it->state, ST_LINKED, __ATOMIC_RELEASE);
	if (!(it->iflags & IT_PLACEHOLDER)) {
		CNT_ADD(st, items, 1);
		CNT_ADD(st, bytes_used, item_capacity(s, it));
	}
}

static void
do_hash_remove(struct store *s, unsigned si, struct item *it)
{
	uint64_t *link = bucket_at(s, si, it->hash);
	uint64_t off = item_off(s, it), n;
	struct item *cur;

	for (n = 0; *link != 0 && n <= s->l.npages * PAGE / CHUNK_MIN; n++) {
		if (*link == off) {
			*link = it->hnext;
			it->hnext = 0;
			return;
		}
		if ((cur = follow(s, *link)) == NULL)
			return;
		link = &cur->hnext;
	}
	s->bad = true;	/* linked but not in its chain, or a loop */
}

/* Clears the lease and wakes the key's waiters; the item stays. */
static void
do_lease_drop(struct store *s, unsigned si, struct item *it)
{
	if (!item_leased(it))
		return;
	rec_clear(s, it->lease_slot, it->lease_rec,
	    item_off(s, it) | REC_LEASE);
	it->lease_slot = NO_SLOT;
	do_wake_key(s, si, token_of(it->hash));
}

/* Ends a lease; a placeholder goes with it (returns true then). */
bool
do_lease_end(struct store *s, unsigned si, struct item *it)
{
	do_lease_drop(s, si, it);
	if (it->iflags & IT_PLACEHOLDER) {
		do_item_unlink(s, si, it);
		return true;
	}
	return false;
}

void
do_item_unlink(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);

	do_lease_drop(s, si, it);
	do_hash_remove(s, si, it);
	do_lru_remove(s, si, it);
	if (!(it->iflags & IT_PLACEHOLDER)) {
		CNT_SUB(st, items, 1);
		CNT_SUB(st, bytes_used, item_capacity(s, it));
	}
	if (it->refcount == 0)
		do_item_free(s, it);
	else
		it->state = ST_ZOMBIE;
}

/* Drops a live item to make room, counting why it went. */
void
do_evict(struct store *s, unsigned si, struct item *it, int64_t now)
{
	struct stripe *st = stripe_at(s, si);

	if (item_expired(it, now))
		CNT_ADD(st, expirations, 1);
	else if (!(it->iflags & IT_PLACEHOLDER))
		CNT_ADD(st, evictions, 1);
	do_item_unlink(s, si, it);
}

struct item *
do_item_find(struct store *s, unsigned si, uint64_t hash, const void *key,
    size_t klen)
{
	struct item *it = follow(s, *bucket_at(s, si, hash));
	uint64_t n, max = s->l.npages * PAGE / CHUNK_MIN;

	for (n = 0; it != NULL && n <= max; n++) {
		if (it->state != ST_LINKED) {
			s->bad = true;
			return NULL;
		}
		if (it->hash == hash && it->klen == klen &&
		    memcmp(item_key(it), key, klen) == 0)
			return it;
		it = follow(s, it->hnext);
	}
	if (it != NULL)
		s->bad = true;	/* a loop */
	return NULL;
}

/* Drops one pin or reservation; the last one frees an unlinked item. */
void
do_item_unpin(struct store *s, struct item *it)
{
	if (it->refcount > 0)
		it->refcount--;
	if (it->refcount == 0 &&
	    (it->state == ST_ZOMBIE || it->state == ST_RESV))
		do_item_free(s, it);
}

/* Records are claimed only by their slot's owner, so no race on claim. */
int
rec_claim(struct store *s, uint64_t val)
{
	uint64_t *rec = slot_at(s, (unsigned)s->slot)->rec;
	uint32_t i, n = (uint32_t)s->l.max_refs;

	if (s->slot < 0)
		return -1;
	for (i = 0; i < n; i++) {
		uint32_t k = (s->rec_hint + i) % n;

		if (__atomic_load_n(&rec[k], __ATOMIC_RELAXED) == 0) {
			__atomic_store_n(&rec[k], val, __ATOMIC_RELEASE);
			s->rec_hint = k + 1;
			return (int)k;
		}
	}
	return -1;
}

void
rec_clear(struct store *s, unsigned slot, uint32_t idx, uint64_t val)
{
	uint64_t *rec;

	if (slot >= s->l.max_slots || idx >= s->l.max_refs)
		return;
	rec = &slot_at(s, slot)->rec[idx];
	__atomic_compare_exchange_n(rec, &val, 0, false, __ATOMIC_RELEASE,
	    __ATOMIC_RELAXED);
}

/* ---- repair ---- */

struct rebuild {
	unsigned si;
	bool all;		/* every stripe (a restart), not one */
	bool check_values;	/* and check each value's checksum */
	size_t kept, dropped;
};

static bool
rebuild_mine(const struct store *s, const struct item *it,
    const struct rebuild *rb)
{
	return rb->all || stripe_of_hash(s, it->hash) == rb->si;
}

static void
zero_refs(struct store *s, struct item *it, void *arg)
{
	if (rebuild_mine(s, it, arg))
		it->refcount = 0;
}

/* Sets refcounts from the slot records: they, not the items, are truth. */
static void
do_count_records(struct store *s, const struct rebuild *rb)
{
	uint64_t sl, k, v;
	uint64_t *rec;
	struct item *it;
	unsigned kind;

	for (sl = 0; sl < s->l.max_slots; sl++) {
		rec = slot_at(s, (unsigned)sl)->rec;
		for (k = 0; k < s->l.max_refs; k++) {
			v = __atomic_load_n(&rec[k], __ATOMIC_ACQUIRE);
			if (v == 0)
				continue;
			it = item_at(s, REC_OFF(v));
			if (it == NULL || it->state == ST_FREE ||
			    !rebuild_mine(s, it, rb))
				continue;
			kind = REC_KIND(v);
			if ((kind == REC_PIN && (it->state == ST_LINKED ||
			    it->state == ST_ZOMBIE)) ||
			    (kind == REC_RESV && it->state == ST_RESV))
				it->refcount++;
			else	/* leases die with the stripe's old state */
				rec_clear(s, (unsigned)sl, (uint32_t)k, v);
		}
	}
}

static bool
item_keepable(struct store *s, struct item *it, bool check_value)
{
	return it->state == ST_LINKED && !(it->iflags & IT_PLACEHOLDER) &&
	    it->klen > 0 && item_csum(it) == it->csum &&
	    key_hash(s, item_key(it), it->klen) == it->hash &&
	    (!check_value ||
	    value_csum(s, item_value(it), it->vlen) == it->vcsum);
}

/* Puts one item back where its state says, during a rebuild. */
static void
rebuild_item(struct store *s, struct item *it, void *arg)
{
	struct rebuild *rb = arg;
	unsigned si;

	if (!rebuild_mine(s, it, rb))
		return;
	si = stripe_of_hash(s, it->hash);
	it->lease_slot = NO_SLOT;
	it->prev = it->next = it->hnext = 0;
	if (it->state == ST_LINKED) {
		if (item_keepable(s, it, rb->check_values)) {
			do_item_link(s, si, it);
			rb->kept++;
			return;
		}
		if (!(it->iflags & IT_PLACEHOLDER)) {
			CNT_ADD(stripe_at(s, si), corruptions, 1);
			rb->dropped++;
		}
		it->state = ST_ZOMBIE;
	}
	if (it->refcount == 0)
		do_pool_free(s, it);
}

static void
do_stripe_reset(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);

	memset(st->lru_head, 0, sizeof(st->lru_head));
	memset(st->lru_tail, 0, sizeof(st->lru_tail));
	memset(bucket_at(s, si, 0), 0, s->l.stripe_buckets * 8);
	__atomic_store_n(&st->c.items, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->c.bytes_used, 0, __ATOMIC_RELAXED);
}

static void
do_rebuild(struct store *s, struct rebuild *rb)
{
	do_pool_each(s, zero_refs, rb);
	do_count_records(s, rb);
	do_pool_each(s, rebuild_item, rb);
}

/*
 * Rebuilds a stripe's chains, lists and counts from the items of its
 * keys, wherever they are in the pool (under the pool lock, so pages do
 * not move meanwhile).  Leases are dropped and every waiter is woken.
 */
void
do_stripe_rebuild(struct store *s, unsigned si)
{
	struct rebuild rb = { .si = si };
	bool nested = s->pool_depth > 0;

	do_stripe_reset(s, si);
	if (!nested && pool_lock(s) == -1)
		return;
	do_rebuild(s, &rb);
	if (!nested)
		pool_unlock(s);
	do_wake_all(s, si);
}

/*
 * A restart's repair: the pool, then every stripe at once.  Single
 * process, no lock needed.  Returns the items dropped as damaged.
 */
size_t
store_rebuild_all(struct store *s, bool check_values)
{
	struct rebuild rb = { .all = true, .check_values = check_values };
	unsigned si;

	for (si = 0; si < s->l.stripes; si++)
		do_stripe_reset(s, si);
	s->pool_depth = 1;
	do_pool_rebuild(s);
	do_rebuild(s, &rb);
	s->pool_depth = 0;
	return rb.dropped;
}

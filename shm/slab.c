/*
 * Stripes of the shared store: locks, chunk allocation, LRU, hash chains,
 * and the repair of a stripe that a dead process left behind.
 *
 * Lock rules (for every file in shm/):
 *
 *  - Each stripe has one process-shared robust mutex.  It guards everything
 *    in that stripe: its hash buckets, page table, free lists, LRU lists,
 *    waiter bitmap, counters, every item in its arena, and the slot records
 *    (in any slot) that point into the stripe.
 *  - A process holds at most one stripe lock at a time, so there is no lock
 *    order to respect.
 *  - Functions named do_* expect the stripe lock held; the others take it.
 *  - No I/O and no allocation while a lock is held: wakeups are collected
 *    into s->wake and written to the eventfds by stripe_unlock(), after the
 *    mutex is released.  Values are copied by the caller outside the lock
 *    (store_reserve/store_commit), and read through pins without it.
 *  - A pinned item (refcount > 0) is never freed or reused; unlinking it
 *    makes it a zombie that the last unpin frees.
 *  - If the holder dies, the next locker gets EOWNERDEAD: it rebuilds the
 *    stripe from the chunks themselves (do_stripe_rebuild), counts the
 *    recovery and marks the mutex consistent.  Only chunks in state
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

#define EVICT_SCAN	16	/* LRU tail items looked at per eviction */
#define STEAL_CLASSES	4	/* classes asked for a page, biggest first */

static void do_list_push(struct store *, unsigned, uint64_t *,
    uint64_t *, struct item *);
static void do_list_remove(struct store *, unsigned, uint64_t *,
    uint64_t *, struct item *);

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

static char *
region_at(const struct store *s, unsigned si)
{
	return s->base + s->l.region_off + (uint64_t)si * s->l.region_size;
}

uint64_t *
bucket_at(const struct store *s, unsigned si, uint64_t hash)
{
	uint64_t *b = (uint64_t *)(region_at(s, si) + s->l.bucket_rel);

	return b + (hash & (s->l.nbuckets - 1));
}

uint32_t *
ptab_at(const struct store *s, unsigned si)
{
	return (uint32_t *)(region_at(s, si) + s->l.ptab_rel);
}

uint64_t *
waiters_at(const struct store *s, unsigned si)
{
	return (uint64_t *)(region_at(s, si) + s->l.wait_rel);
}

uint64_t
arena_off(const struct store *s, unsigned si)
{
	return s->l.region_off + (uint64_t)si * s->l.region_size +
	    s->l.arena_rel;
}

/* The stripe takes the high half of the hash, the bucket the low half. */
unsigned
stripe_of_hash(const struct store *s, uint64_t hash)
{
	return (unsigned)((hash >> 32) & (s->l.stripes - 1));
}

int
stripe_of_off(const struct store *s, uint64_t off)
{
	uint64_t si;

	if (off < s->l.region_off)
		return -1;
	si = (off - s->l.region_off) / s->l.region_size;
	return si < s->l.stripes ? (int)si : -1;
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

/* Covers what a reader trusts, so a restart keeps no garbled item. */
uint32_t
item_csum(const struct item *it)
{
	uint64_t seed;

	seed = it->hash ^ ((uint64_t)it->exptime * 0x9e3779b97f4a7c15ULL) ^
	    ((uint64_t)it->vlen << 32 | it->flags) ^
	    ((uint64_t)it->klen << 16 | (uint64_t)it->iflags << 8 | it->cls);
	return (uint32_t)XXH3_64bits_withSeed(it + 1, it->klen, seed);
}

static bool
item_sane(const struct store *s, const struct item *it)
{
	switch (it->state) {
	case ST_FREE:
		return true;
	case ST_RESV:
	case ST_LINKED:
	case ST_ZOMBIE:
		return it->klen <= STORE_KEY_MAX && ITEM_HDR +
		    ALIGN((uint64_t)it->klen, 8) + it->vlen <=
		    s->l.chunk[it->cls];
	default:
		return false;
	}
}

/* The item at off, if off is the start of a sane chunk of stripe si. */
struct item *
item_at(const struct store *s, unsigned si, uint64_t off)
{
	const struct layout *l = &s->l;
	uint64_t lo = arena_off(s, si), rel, in;
	unsigned cls;
	struct item *it;

	if (off < lo || off - lo >= l->npages * l->page_size)
		return NULL;
	rel = off - lo;
	in = rel % l->page_size;
	cls = PT_CLASS(ptab_at(s, si)[rel / l->page_size]);
	if (cls >= l->nclasses || in % l->chunk[cls] != 0 ||
	    in + l->chunk[cls] > l->page_size)
		return NULL;
	it = (struct item *)(s->base + off);
	if (it->cls != cls || !item_sane(s, it))
		return NULL;
	return it;
}

/* A link read from the map: 0 ends the list; a bad one flags the stripe. */
static struct item *
follow(struct store *s, unsigned si, uint64_t off)
{
	struct item *it;

	if (off == 0)
		return NULL;
	if ((it = item_at(s, si, off)) == NULL)
		s->bad = true;
	return it;
}

static uint64_t
page_of(const struct store *s, unsigned si, const struct item *it)
{
	return (item_off(s, it) - arena_off(s, si)) / s->l.page_size;
}

static struct item *
chunk_at(const struct store *s, unsigned si, uint64_t page, uint64_t k,
    unsigned cls)
{
	return (struct item *)(s->base + arena_off(s, si) +
	    page * s->l.page_size + k * s->l.chunk[cls]);
}

void
stripe_mutex_init(struct stripe *st)
{
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&st->mutex, &ma);
	pthread_mutexattr_destroy(&ma);
	st->busy = 0;
}

void
stripe_init(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);
	uint64_t p;

	stripe_mutex_init(st);
	for (p = 0; p < s->l.npages; p++)
		ptab_at(s, si)[p] = PT_MAKE(NO_CLASS, 0);
	do_stripe_rebuild(s, si, false);
}

/* Slots whose eventfd must be written once the lock is dropped. */
void
do_wake_waiters(struct store *s, unsigned si)
{
	uint64_t *w = waiters_at(s, si);
	uint64_t i;

	for (i = 0; i < s->l.wait_words; i++) {
		s->wake[i] |= w[i];
		s->wake_any |= w[i] != 0;
		w[i] = 0;
	}
}

/* Writes the collected wakeups; runs with no lock held. */
static void
wake_flush(struct store *s)
{
	uint64_t one = 1, i, bits;
	unsigned b;

	if (!s->wake_any)
		return;
	for (i = 0; i < s->l.wait_words; i++) {
		for (bits = s->wake[i]; bits != 0; bits &= bits - 1) {
			b = (unsigned)(i * 64 + __builtin_ctzll(bits));
			if (b < s->l.max_slots &&
			    write(s->efd[b], &one, sizeof(one)) < 0)
				(void)0;	/* EAGAIN: already readable */
		}
		s->wake[i] = 0;
	}
	s->wake_any = false;
}

int
stripe_lock(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);
	int rc;

	rc = pthread_mutex_lock(&st->mutex);
	if (rc == EOWNERDEAD) {
		/* The holder died mid-change: trust only the chunks. */
		do_stripe_rebuild(s, si, true);
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
		do_stripe_rebuild(s, si, true);
		CNT_ADD(st, corruptions, 1);
		s->bad = false;
	}
	st->busy = 0;
	pthread_mutex_unlock(&st->mutex);
	wake_flush(s);
}

/* Doubly linked lists through prev/next: LRU (with tail) and free lists. */
static void
do_list_push(struct store *s, unsigned si, uint64_t *head,
    uint64_t *tail, struct item *it)
{
	uint64_t off = item_off(s, it);
	struct item *h = follow(s, si, *head);

	it->prev = 0;
	it->next = h != NULL ? *head : 0;
	if (h != NULL)
		h->prev = off;
	else if (tail != NULL)
		*tail = off;
	*head = off;
}

static void
do_list_remove(struct store *s, unsigned si, uint64_t *head,
    uint64_t *tail, struct item *it)
{
	struct item *p = follow(s, si, it->prev);
	struct item *n = follow(s, si, it->next);

	if (p != NULL)
		p->next = n != NULL ? it->next : 0;
	else
		*head = n != NULL ? it->next : 0;
	if (n != NULL)
		n->prev = p != NULL ? it->prev : 0;
	else if (tail != NULL)
		*tail = p != NULL ? it->prev : 0;
	it->prev = it->next = 0;
}

static void
do_page_used_add(struct store *s, unsigned si, uint64_t page, int d)
{
	uint32_t *pt = &ptab_at(s, si)[page];

	*pt = PT_MAKE(PT_CLASS(*pt), (uint32_t)((int)PT_USED(*pt) + d));
}

void
do_item_free(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);

	do_page_used_add(s, si, page_of(s, si, it), -1);
	it->state = ST_FREE;
	it->refcount = 0;
	it->lease_slot = NO_SLOT;
	it->iflags = 0;
	do_list_push(s, si, &st->free_head[it->cls], NULL, it);
}

/* Returns a page to the pool; every chunk in it must be free. */
static void
do_page_release(struct store *s, unsigned si, uint64_t page)
{
	struct stripe *st = stripe_at(s, si);
	uint32_t *pt = &ptab_at(s, si)[page];
	unsigned cls = PT_CLASS(*pt);
	uint64_t k, n = s->l.page_size / s->l.chunk[cls];

	for (k = 0; k < n; k++)
		do_list_remove(s, si, &st->free_head[cls], NULL,
		    chunk_at(s, si, page, k, cls));
	*pt = PT_MAKE(NO_CLASS, 0);
	st->pages[cls]--;
	st->free_pages++;
}

/* Gives a free (or emptied) page to class cls, cut into free chunks. */
static bool
do_page_assign(struct store *s, unsigned si, unsigned cls)
{
	struct stripe *st = stripe_at(s, si);
	uint32_t *pt = ptab_at(s, si);
	uint64_t p, k, n, found = UINT64_MAX;
	struct item *it;

	for (p = 0; p < s->l.npages && found == UINT64_MAX; p++)
		if (PT_CLASS(pt[p]) == NO_CLASS)
			found = p;
	for (p = 0; p < s->l.npages && found == UINT64_MAX; p++)
		if (PT_USED(pt[p]) == 0) {
			do_page_release(s, si, p);
			found = p;
		}
	if (found == UINT64_MAX)
		return false;
	pt[found] = PT_MAKE(cls, 0);
	st->pages[cls]++;
	st->free_pages--;
	n = s->l.page_size / s->l.chunk[cls];
	for (k = 0; k < n; k++) {
		it = chunk_at(s, si, found, k, cls);
		memset(it, 0, ITEM_HDR);
		it->cls = (uint8_t)cls;
		it->state = ST_FREE;
		it->lease_slot = NO_SLOT;
		do_list_push(s, si, &st->free_head[cls], NULL, it);
	}
	return true;
}

static bool
evictable(const struct item *it)
{
	return it->state == ST_LINKED && it->refcount == 0 &&
	    !item_leased(it);
}

static void
do_evict(struct store *s, unsigned si, struct item *it, int64_t now)
{
	struct stripe *st = stripe_at(s, si);

	if (item_expired(it, now))
		CNT_ADD(st, expirations, 1);
	else if (!(it->iflags & IT_PLACEHOLDER))
		CNT_ADD(st, evictions, 1);
	do_item_unlink(s, si, it);
}

/* Frees one chunk of class cls from its LRU tail, expired ones first. */
static bool
do_evict_lru(struct store *s, unsigned si, unsigned cls, int64_t now)
{
	struct stripe *st = stripe_at(s, si);
	struct item *it, *victim = NULL;
	int n;

	it = follow(s, si, st->lru_tail[cls]);
	for (n = 0; it != NULL && n < EVICT_SCAN; n++) {
		if (evictable(it)) {
			if (item_expired(it, now)) {
				victim = it;
				break;
			}
			if (victim == NULL)
				victim = it;
		}
		it = follow(s, si, it->prev);
	}
	if (victim == NULL)
		return false;
	do_evict(s, si, victim, now);
	return true;
}

static bool
do_page_evictable(struct store *s, unsigned si, uint64_t page,
    unsigned cls)
{
	uint64_t k, n = s->l.page_size / s->l.chunk[cls];
	struct item *it;

	for (k = 0; k < n; k++) {
		it = chunk_at(s, si, page, k, cls);
		if (it->state != ST_FREE && !evictable(it))
			return false;
	}
	return true;
}

/* Evicts a whole page of class from whose LRU tail items are not pinned. */
static bool
do_steal_from(struct store *s, unsigned si, unsigned from, int64_t now)
{
	struct stripe *st = stripe_at(s, si);
	uint64_t page, k, n = s->l.page_size / s->l.chunk[from];
	struct item *it = follow(s, si, st->lru_tail[from]);
	int tries;

	for (tries = 0; it != NULL && tries < EVICT_SCAN; tries++) {
		page = page_of(s, si, it);
		if (do_page_evictable(s, si, page, from)) {
			for (k = 0; k < n; k++) {
				it = chunk_at(s, si, page, k, from);
				if (it->state == ST_LINKED)
					do_evict(s, si, it, now);
			}
			do_page_release(s, si, page);
			return true;
		}
		it = follow(s, si, it->prev);
	}
	return false;
}

/*
 * Moves a page to class cls from the classes with the most pages,
 * evicting what it holds: without this, pages would stay with the sizes
 * that came first (memcached's "slab calcification").
 */
static bool
do_steal_page(struct store *s, unsigned si, unsigned cls, int64_t now)
{
	struct stripe *st = stripe_at(s, si);
	bool tried[MAX_CLASSES] = { false };
	unsigned c, from;
	int round;

	for (round = 0; round < STEAL_CLASSES; round++) {
		from = NO_CLASS;
		for (c = 0; c < s->l.nclasses; c++)
			if (c != cls && !tried[c] && st->pages[c] > 0 &&
			    (from == NO_CLASS ||
			    st->pages[c] > st->pages[from]))
				from = c;
		if (from == NO_CLASS)
			return false;
		if (do_steal_from(s, si, from, now))
			return true;
		tried[from] = true;
	}
	return false;
}

static int
class_for(const struct store *s, size_t total)
{
	unsigned c;

	for (c = 0; c < s->l.nclasses; c++)
		if (s->l.chunk[c] >= total)
			return (int)c;
	return -1;
}

static struct item *
do_free_pop(struct store *s, unsigned si, unsigned cls)
{
	struct stripe *st = stripe_at(s, si);
	struct item *it = follow(s, si, st->free_head[cls]);

	if (it == NULL)
		return NULL;
	if (it->state != ST_FREE) {
		s->bad = true;
		return NULL;
	}
	do_list_remove(s, si, &st->free_head[cls], NULL, it);
	return it;
}

/* A chunk for total bytes, in state ST_RESV, evicting if need be. */
struct item *
do_item_alloc(struct store *s, unsigned si, size_t total)
{
	int64_t now = store_now(s);
	struct item *it;
	int cls = class_for(s, total);

	if (cls < 0)
		return NULL;
	it = do_free_pop(s, si, (unsigned)cls);
	if (it == NULL && (do_page_assign(s, si, (unsigned)cls) ||
	    do_evict_lru(s, si, (unsigned)cls, now) ||
	    (do_steal_page(s, si, (unsigned)cls, now) &&
	    do_page_assign(s, si, (unsigned)cls))))
		it = do_free_pop(s, si, (unsigned)cls);
	if (it == NULL)
		return NULL;
	do_page_used_add(s, si, page_of(s, si, it), 1);
	it->state = ST_RESV;
	it->refcount = 0;
	it->lease_slot = NO_SLOT;
	it->iflags = 0;
	it->hnext = 0;
	return it;
}

void
do_item_link(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);
	uint64_t *b = bucket_at(s, si, it->hash);

	it->hnext = *b;
	*b = item_off(s, it);
	do_list_push(s, si, &st->lru_head[it->cls], &st->lru_tail[it->cls],
	    it);
	it->state = ST_LINKED;
	if (!(it->iflags & IT_PLACEHOLDER)) {
		CNT_ADD(st, items, 1);
		CNT_ADD(st, bytes_used, s->l.chunk[it->cls]);
	}
}

static void
do_hash_remove(struct store *s, unsigned si, struct item *it)
{
	uint64_t *link = bucket_at(s, si, it->hash);
	uint64_t off = item_off(s, it), n;
	struct item *cur;

	for (n = 0; *link != 0 && n <= s->l.npages * s->l.page_size /
	    CHUNK_MIN; n++) {
		if (*link == off) {
			*link = it->hnext;
			it->hnext = 0;
			return;
		}
		if ((cur = follow(s, si, *link)) == NULL)
			return;
		link = &cur->hnext;
	}
	s->bad = true;	/* linked but not in its chain, or a loop */
}

/* Clears the lease and wakes the stripe's waiters; the item stays. */
static void
do_lease_drop(struct store *s, unsigned si, struct item *it)
{
	if (!item_leased(it))
		return;
	rec_clear(s, it->lease_slot, it->lease_rec,
	    item_off(s, it) | REC_LEASE);
	it->lease_slot = NO_SLOT;
	do_wake_waiters(s, si);
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
	do_list_remove(s, si, &st->lru_head[it->cls], &st->lru_tail[it->cls],
	    it);
	if (!(it->iflags & IT_PLACEHOLDER)) {
		CNT_SUB(st, items, 1);
		CNT_SUB(st, bytes_used, s->l.chunk[it->cls]);
	}
	if (it->refcount == 0)
		do_item_free(s, si, it);
	else
		it->state = ST_ZOMBIE;
}

void
do_lru_bump(struct store *s, unsigned si, struct item *it)
{
	struct stripe *st = stripe_at(s, si);

	if (st->lru_head[it->cls] == item_off(s, it))
		return;
	do_list_remove(s, si, &st->lru_head[it->cls], &st->lru_tail[it->cls],
	    it);
	do_list_push(s, si, &st->lru_head[it->cls], &st->lru_tail[it->cls],
	    it);
}

struct item *
do_item_find(struct store *s, unsigned si, uint64_t hash, const void *key,
    size_t klen)
{
	struct item *it = follow(s, si, *bucket_at(s, si, hash));
	uint64_t n, max = s->l.npages * s->l.page_size / CHUNK_MIN;

	for (n = 0; it != NULL && n <= max; n++) {
		if (it->state != ST_LINKED) {
			s->bad = true;
			return NULL;
		}
		if (it->hash == hash && it->klen == klen &&
		    memcmp(item_key(it), key, klen) == 0)
			return it;
		it = follow(s, si, it->hnext);
	}
	if (it != NULL)
		s->bad = true;	/* a loop */
	return NULL;
}

/* Drops one pin or reservation; the last one frees an unlinked item. */
void
do_item_unpin(struct store *s, unsigned si, struct item *it)
{
	if (it->refcount > 0)
		it->refcount--;
	if (it->refcount == 0 &&
	    (it->state == ST_ZOMBIE || it->state == ST_RESV))
		do_item_free(s, si, it);
}

/* Records are claimed only by their slot's owner, so no race on claim. */
int
rec_claim(struct store *s, uint64_t val)
{
	uint64_t *rec = slot_at(s, (unsigned)s->slot)->rec;
	uint32_t i, n = (uint32_t)s->l.max_refs;

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

/* Sets refcounts from the slot records: they, not the items, are truth. */
static void
do_count_records(struct store *s, unsigned si)
{
	uint64_t sl, k, v;
	uint64_t *rec;
	struct item *it;
	unsigned kind;

	for (sl = 0; sl < s->l.max_slots; sl++) {
		rec = slot_at(s, (unsigned)sl)->rec;
		for (k = 0; k < s->l.max_refs; k++) {
			v = __atomic_load_n(&rec[k], __ATOMIC_ACQUIRE);
			if (v == 0 || stripe_of_off(s, REC_OFF(v)) != (int)si)
				continue;
			it = item_at(s, si, REC_OFF(v));
			kind = REC_KIND(v);
			if (it != NULL && ((kind == REC_PIN &&
			    (it->state == ST_LINKED ||
			    it->state == ST_ZOMBIE)) ||
			    (kind == REC_RESV && it->state == ST_RESV)))
				it->refcount++;
			else	/* leases die with the stripe's old state */
				rec_clear(s, (unsigned)sl, (uint32_t)k, v);
		}
	}
}

static bool
item_keepable(struct store *s, unsigned si, struct item *it)
{
	return it->state == ST_LINKED && !(it->iflags & IT_PLACEHOLDER) &&
	    it->klen > 0 && item_sane(s, it) && item_csum(it) == it->csum &&
	    stripe_of_hash(s, it->hash) == si &&
	    key_hash(s, item_key(it), it->klen) == it->hash;
}

/* Puts one chunk back where its state says, during a rebuild. */
static void
do_rebuild_chunk(struct store *s, unsigned si, struct item *it, bool keep)
{
	struct stripe *st = stripe_at(s, si);
	bool kept = keep && item_keepable(s, si, it);

	it->lease_slot = NO_SLOT;
	it->prev = it->next = it->hnext = 0;
	if (kept) {
		do_item_link(s, si, it);
	} else if (it->refcount > 0) {
		if (it->state != ST_RESV)
			it->state = ST_ZOMBIE;
	} else {
		it->state = ST_FREE;
		it->iflags = 0;
		do_list_push(s, si, &st->free_head[it->cls], NULL, it);
		return;
	}
	do_page_used_add(s, si, page_of(s, si, it), 1);
}

/*
 * Rebuilds a stripe's lists, chains and counts from its page table and
 * chunk states.  keep: keep committed items; else only pinned ones stay
 * (as zombies).  Leases are dropped and every waiter is woken.
 */
void
do_stripe_rebuild(struct store *s, unsigned si, bool keep)
{
	struct stripe *st = stripe_at(s, si);
	uint32_t *pt = ptab_at(s, si);
	uint64_t p, k, n;
	unsigned cls;

	memset(st->lru_head, 0, sizeof(st->lru_head));
	memset(st->lru_tail, 0, sizeof(st->lru_tail));
	memset(st->free_head, 0, sizeof(st->free_head));
	memset(st->pages, 0, sizeof(st->pages));
	memset(bucket_at(s, si, 0), 0, s->l.nbuckets * sizeof(uint64_t));
	__atomic_store_n(&st->c.items, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->c.bytes_used, 0, __ATOMIC_RELAXED);
	st->free_pages = 0;
	for (p = 0; p < s->l.npages; p++) {
		cls = PT_CLASS(pt[p]);
		if (cls >= s->l.nclasses) {
			pt[p] = PT_MAKE(NO_CLASS, 0);
			st->free_pages++;
			continue;
		}
		pt[p] = PT_MAKE(cls, 0);
		st->pages[cls]++;
		n = s->l.page_size / s->l.chunk[cls];
		for (k = 0; k < n; k++) {
			struct item *it = chunk_at(s, si, p, k, cls);

			it->refcount = 0;
			if (it->cls != cls || !item_sane(s, it)) {
				it->cls = (uint8_t)cls;
				it->state = ST_FREE;
			}
		}
	}
	do_count_records(s, si);
	for (p = 0; p < s->l.npages; p++) {
		if ((cls = PT_CLASS(pt[p])) == NO_CLASS)
			continue;
		n = s->l.page_size / s->l.chunk[cls];
		for (k = 0; k < n; k++)
			do_rebuild_chunk(s, si, chunk_at(s, si, p, k, cls),
			    keep);
	}
	do_wake_waiters(s, si);
}

/* Empties a stripe that nobody pins (a restart found it unusable). */
void
do_stripe_wipe(struct store *s, unsigned si)
{
	uint64_t p;

	for (p = 0; p < s->l.npages; p++)
		ptab_at(s, si)[p] = PT_MAKE(NO_CLASS, 0);
	do_stripe_rebuild(s, si, false);
}

uint64_t
ptab_checksum(const struct store *s, unsigned si)
{
	return XXH3_64bits(ptab_at(s, si), s->l.npages * sizeof(uint32_t));
}

/*
 * Allocation that makes room.  The pool is asked first; only when it has
 * no chunk of the class and no run long enough does anything get evicted,
 * so a store evicts only when it is full.
 *
 * Victims are chosen under the pool lock, from the LRU tails of a few
 * stripes (all of them when there are few):
 *
 *  - the least recently used item of the class that needs room, as
 *    memcached does: a chunk of a slab, or for a big item a window of
 *    pages around the oldest big item;
 *  - unless that class's oldest is much younger than the oldest item of
 *    all: then a window of pages around the oldest items, whatever size
 *    they are.  Its pages then serve this class: this is how pages move
 *    between classes and stripes when the mix of sizes changes.
 *
 * A window grows from its item's run over the neighbours that cost the
 * fewest evictions (free runs first) until it is as long as the run
 * needed.
 *
 * The pool lock is then dropped, and each victim is evicted under its
 * own stripe lock, after checking it is the same item (its cas) and still
 * unused.  No two locks of the same kind are ever held.
 */
#include <stdint.h>
#include <string.h>

#include "shm/store_impl.h"

#define ALLOC_ROUNDS	64	/* plan-and-evict rounds before NOMEM */
#define MAX_VICTIMS	256	/* items one round may evict */
#define RANDOM_WINDOWS	16	/* tried when no old item's window works */
#define NO_ANCHOR	UINT64_MAX
#define SAMPLE_STRIPES	8	/* stripes whose tails are compared */
#define TAIL_SCAN	8	/* items looked at from an LRU tail */
#define CANDIDATES	8	/* windows tried around the oldest items */

struct cost {
	uint64_t items;		/* evicted with the run */
	int64_t fresh;		/* atime of its most recently used one */
};

struct plan {
	uint64_t anchor;		/* where the last round's window was */
	int64_t now;
	struct victim *v;
	size_t n, max;
	struct item *cand[CANDIDATES];	/* oldest first */
	unsigned ncand;
	struct item *same;		/* oldest of the wanted class */
};

static uint32_t
age_of(const struct item *it, int64_t now)
{
	uint32_t t = __atomic_load_n(&it->atime, __ATOMIC_RELAXED);

	return (uint32_t)now - t < (1U << 31) ? (uint32_t)now - t : 0;
}

/* Is a older than b (expired counts as oldest)? */
static bool
older(const struct item *a, const struct item *b, int64_t now)
{
	bool ea = item_expired(a, now), eb = item_expired(b, now);

	if (ea != eb)
		return ea;
	return age_of(a, now) > age_of(b, now);
}

/* The first evictable item from the tail of one LRU, expired first. */
static struct item *
tail_pick(struct store *s, unsigned si, unsigned c, int64_t now)
{
	struct stripe *st = stripe_at(s, si);
	struct item *it, *pick = NULL;
	uint64_t off = __atomic_load_n(&st->lru_tail[c], __ATOMIC_RELAXED);
	int n;

	for (n = 0; off != 0 && n < TAIL_SCAN; n++) {
		/* Read without the stripe lock: only a hint, checked later.
		 * The pool lock keeps the memory an item's meanwhile. */
		if ((it = item_at(s, off)) == NULL || it->state == ST_FREE)
			break;
		if (item_evictable(it)) {
			if (item_expired(it, now))
				return it;
			if (pick == NULL)
				pick = it;
		}
		off = __atomic_load_n(&it->prev, __ATOMIC_RELAXED);
	}
	return pick;
}

static void
cand_add(struct plan *pl, struct item *it)
{
	unsigned i, j;

	for (i = 0; i < pl->ncand; i++)
		if (older(it, pl->cand[i], pl->now))
			break;
	if (i == CANDIDATES)
		return;
	if (pl->ncand < CANDIDATES)
		pl->ncand++;
	for (j = pl->ncand - 1; j > i; j--)
		pl->cand[j] = pl->cand[j - 1];
	pl->cand[i] = it;
}

static void
do_sample(struct store *s, struct plan *pl, unsigned cls)
{
	unsigned k, si, c, n = s->l.stripes < SAMPLE_STRIPES ?
	    (unsigned)s->l.stripes : SAMPLE_STRIPES;
	unsigned first = s->sample;
	struct item *it;

	s->sample += n;
	for (k = 0; k < n; k++) {
		si = (first + k) & (unsigned)(s->l.stripes - 1);
		for (c = 0; c < s->l.nclasses; c++) {
			if ((it = tail_pick(s, si, c, pl->now)) == NULL)
				continue;
			cand_add(pl, it);
			if (c == cls && (pl->same == NULL ||
			    older(it, pl->same, pl->now)))
				pl->same = it;
		}
	}
}

static bool
add_victim(struct store *s, struct plan *pl, struct item *it)
{
	if (pl->n == pl->max)
		return false;
	pl->v[pl->n].off = item_off(s, it);
	pl->v[pl->n].cas = it->cas;
	pl->n++;
	return true;
}

/*
 * Whether the run at h can be evicted, how many items that costs, and how
 * recently what it holds was used (its freshest item's atime).  With add,
 * its items are added to the plan, as many as it has room for (*full then
 * says the plan is full).
 */
static bool
run_cost(struct store *s, struct plan *pl, uint64_t h, uint64_t e,
    bool add, bool *full, struct cost *c)
{
	uint64_t k, n, cs;
	struct item *it;

	c->items = 0;
	c->fresh = 0;
	if (PT_KIND(e) == PT_FREE)
		return true;
	cs = PT_KIND(e) == PT_BIG ? PT_LEN(e) * PAGE :
	    s->l.chunk[PT_CLASS(e)];
	n = PT_LEN(e) * PAGE / cs;
	for (k = 0; k < n; k++) {
		it = (struct item *)(page_at(s, h) + k * cs);
		if (it->state == ST_FREE)
			continue;
		if (!item_evictable(it))
			return false;
		c->items++;
		if ((int64_t)it->atime > c->fresh)
			c->fresh = it->atime;
		if (add && !add_victim(s, pl, it))
			*full = true;
	}
	return true;
}

/*
 * Is evicting a cheaper than evicting b?  What is far less recently used
 * goes first (LRU); between runs used alike, the one with fewer items.
 */
static bool
cheaper(const struct cost *a, const struct cost *b, int64_t now)
{
	uint64_t aa = (uint64_t)(now - a->fresh), ab = (uint64_t)(now -
	    b->fresh);

	if (a->items == 0 || b->items == 0)
		return a->items <= b->items;
	if (aa > 2 * ab + 1 || ab > 2 * aa + 1)
		return aa > ab;
	if (a->items != b->items)
		return a->items < b->items;
	return aa >= ab;
}

/* The run that holds page, even inside a free run (found from its head). */
static bool
run_containing(const struct store *s, uint64_t page, uint64_t *head,
    uint64_t *e)
{
	uint64_t h = page;

	if (do_pool_run_of(s, page, head, e))
		return true;
	while (h > 0 && ptab_at(s)[h] == 0)
		h--;
	return do_pool_run_of(s, h, head, e) && PT_KIND(*e) == PT_FREE &&
	    *head + PT_LEN(*e) > page;
}

/*
 * Grows a window from the run at page until it spans need pages, over
 * the neighbour (left or right) that costs fewer items, adding what it
 * holds to the plan.  A window with more items than the plan holds is
 * evicted in parts, over several rounds (pl->anchor).
 */
static bool
do_window(struct store *s, struct plan *pl, uint64_t page, uint64_t need)
{
	uint64_t a, b, e, le, re, lh, rh;
	struct cost ca, lc, rc;
	size_t n0 = pl->n;
	bool full = false, lok, rok;

	if (!run_containing(s, page, &a, &e) ||
	    !run_cost(s, pl, a, e, false, &full, &ca))
		return false;
	b = a + PT_LEN(e);
	run_cost(s, pl, a, e, true, &full, &ca);
	while (b - a < need && !full) {
		lok = a > 0 && do_pool_run_of(s, a - 1, &lh, &le) &&
		    run_cost(s, pl, lh, le, false, &full, &lc);
		rok = b < s->l.npages && do_pool_run_of(s, b, &rh, &re) &&
		    run_cost(s, pl, rh, re, false, &full, &rc);
		if (rok && (!lok || cheaper(&rc, &lc, pl->now))) {
			run_cost(s, pl, rh, re, true, &full, &rc);
			b = rh + PT_LEN(re);
		} else if (lok) {
			run_cost(s, pl, lh, le, true, &full, &lc);
			a = lh;
		} else {
			pl->n = n0;
			return false;
		}
	}
	pl->anchor = a;
	return pl->n > n0;
}

/*
 * Chooses what to evict for an item of class cls, total bytes.  A class
 * makes room from its own least recently used items, as in memcached,
 * unless they are much younger than the oldest of all: then memory moves
 * to it from where that oldest item is (memcached's automove, by age).
 */
static size_t
do_plan(struct store *s, struct plan *pl, unsigned cls, size_t total)
{
	uint64_t need = cls < s->l.big_class ? s->l.slab_pages[cls] :
	    big_pages(total), page;
	unsigned i;
	bool move;

	pl->n = 0;
	pl->ncand = 0;
	pl->same = NULL;
	pl->now = store_now(s);
	/* Go on with last round's window while it can still be made. */
	if (pl->anchor != NO_ANCHOR && pl->anchor < s->l.npages &&
	    do_window(s, pl, pl->anchor, need))
		return pl->n;
	pl->anchor = NO_ANCHOR;
	do_sample(s, pl, cls);
	if (pl->ncand == 0)
		return 0;
	move = pl->same == NULL || (!item_expired(pl->same, pl->now) &&
	    age_of(pl->cand[0], pl->now) >
	    2 * (uint64_t)age_of(pl->same, pl->now) + 1);
	if (!move && cls < s->l.big_class) {
		add_victim(s, pl, pl->same);
		return 1;
	}
	if (!move && do_window(s, pl, page_of_off(s, item_off(s, pl->same)),
	    need))
		return pl->n;
	for (i = 0; i < pl->ncand; i++)
		if (do_window(s, pl, page_of_off(s, item_off(s, pl->cand[i])),
		    need))
			return pl->n;
	if (pl->same != NULL && cls < s->l.big_class) {
		add_victim(s, pl, pl->same);
		return 1;
	}
	/* What is oldest sits among what is in use: any window that can be
	 * made is better than none. */
	for (i = 0; i < RANDOM_WINDOWS; i++) {
		page = (s->sample * 2654435761U + i * 40503U) % s->l.npages;
		s->sample++;
		if (do_window(s, pl, page, need))
			return pl->n;
	}
	return 0;
}

/* Evicts one planned victim if it is still that item and still unused. */
static void
evict_victim(struct store *s, const struct victim *v)
{
	struct item *it = item_at(s, v->off);
	unsigned si;

	if (it == NULL || it->state != ST_LINKED)
		return;
	si = stripe_of_hash(s, __atomic_load_n(&it->hash, __ATOMIC_RELAXED));
	if (stripe_lock(s, si) == -1)
		return;
	it = item_at(s, v->off);
	if (it != NULL && it->state == ST_LINKED && it->cas == v->cas &&
	    stripe_of_hash(s, it->hash) == si && item_evictable(it))
		do_evict(s, si, it, store_now(s));
	stripe_unlock(s, si);
}

/*
 * An item of total bytes for hash (a placeholder's if lease), reserved (ST_RESV, one reservation
 * in this slot's record *rec).  Called with no lock held.  NULL with
 * *why STORE_NOMEM or STORE_NOREF.
 */
struct item *
store_alloc(struct store *s, size_t total, bool lease, uint64_t hash,
    uint32_t *rec, enum store_result *why)
{
	unsigned cls = lease ? (unsigned)s->l.lease_class :
	    (unsigned)class_for(s, total);
	struct victim v[MAX_VICTIMS];
	struct plan pl = { .anchor = NO_ANCHOR, .v = v, .max = MAX_VICTIMS };
	struct item *it;
	size_t n, i;
	bool norec;
	int round;

	*why = STORE_NOMEM;
	for (round = 0; round < ALLOC_ROUNDS; round++) {
		if (pool_lock(s) == -1)
			return NULL;
		it = do_pool_alloc(s, cls, total, hash, rec, &norec);
		n = it == NULL && !norec ? do_plan(s, &pl, cls, total) : 0;
		pool_unlock(s);
		if (it != NULL)
			return it;
		if (s->nlater != 0) {
			/* Our own pins left for later may hold the room, or
			 * the records: drop them, then ask again. */
			store_release_flush(s);
			continue;
		}
		if (norec) {
			*why = STORE_NOREF;
			return NULL;
		}
		if (n == 0)
			return NULL;
		TEST_HOOK(s, STORE_HOOK_EVICT);
		for (i = 0; i < n; i++)
			evict_victim(s, &v[i]);
	}
	return NULL;
}

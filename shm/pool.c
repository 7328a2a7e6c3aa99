/*
 * The page pool: every page of the arena, whichever stripe or size class
 * uses it.  A run of pages is free, a slab (chunks of one class, for
 * values up to SLAB_MAX bytes with their header) or one big item.  Free
 * runs sit in bins by length and merge with their free neighbours, so a
 * page given back by one class or stripe serves any other (memcached's
 * global page pool, without its fixed page size).
 *
 * Lock rules (see also stripe.c):
 *
 *  - The pool mutex guards the page table, the bins, the free chunk lists
 *    and every chunk in state ST_FREE.  A chunk moves into or out of
 *    ST_FREE only under it.
 *  - A process may take it while it holds one stripe lock (stripe, then
 *    pool), never the other way round, and never twice.
 *  - If the holder dies, the next locker rebuilds the pool from the page
 *    table's run heads and the chunks' states (do_pool_rebuild).  Every
 *    change to the table is ordered so that one store, to a run's head
 *    entry, makes it take effect: a crash before it leaves the old run,
 *    after it the new one, and the rest is redone by the rebuild.
 */
#include <sys/mman.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shm/store_impl.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

struct pool *
pool_at(const struct store *s)
{
	return (struct pool *)(s->base + s->l.pool_off);
}

uint64_t *
ptab_at(const struct store *s)
{
	return (uint64_t *)(s->base + s->l.ptab_off);
}

char *
page_at(const struct store *s, uint64_t page)
{
	return s->base + s->l.arena_off + page * PAGE;
}

uint64_t
page_of_off(const struct store *s, uint64_t off)
{
	return (off - s->l.arena_off) / PAGE;
}

static uint64_t
pt_get(const struct store *s, uint64_t page)
{
	return __atomic_load_n(&ptab_at(s)[page], __ATOMIC_RELAXED);
}

/* Stores are single 8-byte writes: a reader never sees half of one. */
static void
pt_set(struct store *s, uint64_t page, uint64_t e)
{
	__atomic_store_n(&ptab_at(s)[page], e, __ATOMIC_RELEASE);
}

void
pool_mutex_init(struct pool *p)
{
	robust_mutex_init(&p->mutex);
	p->busy = 0;
}

int
pool_lock(struct store *s)
{
	struct pool *p = pool_at(s);
	int rc;

	rc = pthread_mutex_lock(&p->mutex);
	if (rc == EOWNERDEAD) {
		/* The holder died mid-change: trust only the table's heads. */
		s->pool_depth = 1;
		do_pool_rebuild(s);
		p->lock_recoveries++;
		pthread_mutex_consistent(&p->mutex);
		rc = 0;
	}
	if (rc != 0)
		return -1;
	p->busy = 1;
	s->pool_bad = false;
	s->pool_depth = 1;
	return 0;
}

void
pool_unlock(struct store *s)
{
	struct pool *p = pool_at(s);

	if (s->pool_bad) {
		do_pool_rebuild(s);
		p->corruptions++;
		s->pool_bad = false;
	}
	p->busy = 0;
	s->pool_depth = 0;
	pthread_mutex_unlock(&p->mutex);
}

/* ---- size classes ---- */

int
class_for(const struct store *s, size_t total)
{
	unsigned c;

	for (c = 0; c < s->l.lease_class; c++)
		if (s->l.chunk[c] >= total)
			return (int)c;
	return (int)s->l.big_class;
}

uint64_t
big_pages(size_t total)
{
	return ((uint64_t)total + PAGE - 1) / PAGE;
}

/* The run that holds page: its first page and head entry; false if the
 * page is inside a free run (neither its head nor its tail) or damaged.
 * Static and always inlined: item_at() runs it on every link it checks. */
static inline __attribute__((always_inline)) bool
run_of(const struct store *s, uint64_t page, uint64_t *head, uint64_t *entry)
{
	uint64_t e = pt_get(s, page), h = page, len;
	unsigned kind;

	if (PT_KIND(e) == PT_BODY || PT_KIND(e) == PT_FTAIL) {
		h = PT_AUX(e);
		if (h >= page)
			return false;
		e = pt_get(s, h);
	}
	kind = PT_KIND(e);
	len = PT_LEN(e);
	if ((kind != PT_FREE && kind != PT_SLAB && kind != PT_BIG) ||
	    len == 0 || h + len > s->l.npages || h + len <= page)
		return false;
	*head = h;
	*entry = e;
	return true;
}

bool
do_pool_run_of(const struct store *s, uint64_t page, uint64_t *head,
    uint64_t *entry)
{
	return run_of(s, page, head, entry);
}

/*
 * in % chunk == 0 without a division (item_at() asks it of every link):
 * with chunk = d << k, d odd, and inv the inverse of d mod 2^64, the
 * multiples of chunk are exactly the in whose in * inv, rotated right by
 * k, is at most UINT64_MAX / chunk (Hacker's Delight, 10-17).
 */
void
chunk_div_init(struct store *s)
{
	uint64_t c, d, inv;
	unsigned cls, i;

	for (cls = 0; cls < MAX_CLASSES; cls++) {
		if ((c = s->l.chunk[cls]) == 0)
			continue;	/* the big class: no chunks */
		s->chunk_tz[cls] = (uint8_t)__builtin_ctzll(c);
		d = c >> s->chunk_tz[cls];
		inv = d;	/* right in 3 bits; each step doubles them */
		for (i = 0; i < 5; i++)
			inv *= 2 - d * inv;
		s->chunk_inv[cls] = inv;
		s->chunk_lim[cls] = UINT64_MAX / c;
	}
}

static inline __attribute__((always_inline)) bool
starts_chunk(const struct store *s, unsigned cls, uint64_t in)
{
	uint64_t x = in * s->chunk_inv[cls];
	unsigned k = s->chunk_tz[cls];

	x = x >> k | x << ((64 - k) & 63);	/* one ror */
	return x <= s->chunk_lim[cls];
}

/* The same for the tests; cls below big_class. */
bool
chunk_start(const struct store *s, unsigned cls, uint64_t in)
{
	return starts_chunk(s, cls, in);
}

/* Fits in cap bytes with its key and value, and has a known state. */
static inline __attribute__((always_inline)) bool
sane(const struct store *s, const struct item *it, uint64_t cap)
{
	switch (it->state) {
	case ST_FREE:
		return true;
	case ST_RESV:
	case ST_LINKED:
	case ST_ZOMBIE:
		return it->klen <= STORE_KEY_MAX && it->vlen <=
		    s->l.max_object && ITEM_HDR + ALIGN((uint64_t)it->klen,
		    8) + it->vlen <= cap;
	default:
		return false;
	}
}

bool
item_sane(const struct store *s, const struct item *it, uint64_t cap)
{
	return sane(s, it, cap);
}

/*
 * The item at off, if off is the start of a sane chunk or big run.  Every
 * offset read from the map goes through here before it is followed (an
 * LRU or hash link, a free chunk's link, a slot record), so it is here,
 * next to the page table, that its checks are inlined: run_of() and
 * sane() are the same checks as do_pool_run_of() and item_sane(), with
 * no calls and no division (136 -> 96 instructions a call, callgrind).
 */
struct item *
item_at(const struct store *s, uint64_t off)
{
	const struct layout *l = &s->l;
	uint64_t head, e, in, chunk;
	unsigned cls;
	struct item *it;

	if (off < l->arena_off || off - l->arena_off >= l->npages * PAGE ||
	    off % 8 != 0)
		return NULL;
	if (!run_of(s, (off - l->arena_off) / PAGE, &head, &e))
		return NULL;
	in = off - l->arena_off - head * PAGE;
	it = (struct item *)(s->base + off);
	cls = PT_CLASS(e);
	if (PT_KIND(e) == PT_BIG) {
		if (in != 0 || it->cls != l->big_class)
			return NULL;
		return sane(s, it, PT_LEN(e) * PAGE) ? it : NULL;
	}
	if (PT_KIND(e) != PT_SLAB || cls >= l->big_class)
		return NULL;
	chunk = l->chunk[cls];
	if (!starts_chunk(s, cls, in) || in + chunk > PT_LEN(e) * PAGE ||
	    it->cls != cls)
		return NULL;
	return sane(s, it, chunk) ? it : NULL;
}

uint64_t
item_capacity(const struct store *s, const struct item *it)
{
	uint64_t page;

	if (it->cls < s->l.big_class)
		return s->l.chunk[it->cls];
	page = page_of_off(s, item_off(s, it));
	return (uint64_t)PT_LEN(pt_get(s, page)) * PAGE;
}

/* ---- bins of free runs ---- */

static unsigned
bin_of(uint64_t len)
{
	unsigned b;

	if (len <= EXACT_BINS)
		return (unsigned)len - 1;
	b = EXACT_BINS + (63 - (unsigned)__builtin_clzll(len)) - 5;
	return b < NBINS ? b : NBINS - 1;
}

static struct free_run *
run_links(const struct store *s, uint64_t page)
{
	return (struct free_run *)page_at(s, page);
}

/* A link read from a free run: it must name the head of a free run. */
static bool
free_head_ok(struct store *s, uint32_t page)
{
	if (page == NO_PAGE)
		return true;
	if (page < s->l.npages && PT_KIND(pt_get(s, page)) == PT_FREE)
		return true;
	s->pool_bad = true;
	return false;
}

static void
do_bin_insert(struct store *s, uint64_t h, uint64_t len)
{
	struct pool *p = pool_at(s);
	struct free_run *fr = run_links(s, h);
	unsigned b = bin_of(len);

	fr->prev = NO_PAGE;
	fr->next = p->bin[b];
	if (p->bin[b] != NO_PAGE && free_head_ok(s, p->bin[b]))
		run_links(s, p->bin[b])->prev = (uint32_t)h;
	p->bin[b] = (uint32_t)h;
	p->bin_mask |= 1ULL << b;
	p->free_pages += len;
}

static void
do_bin_remove(struct store *s, uint64_t h, uint64_t len)
{
	struct pool *p = pool_at(s);
	struct free_run *fr = run_links(s, h);
	unsigned b = bin_of(len);

	if (!free_head_ok(s, fr->prev) || !free_head_ok(s, fr->next))
		return;
	if (fr->prev != NO_PAGE)
		run_links(s, fr->prev)->next = fr->next;
	else
		p->bin[b] = fr->next;
	if (fr->next != NO_PAGE)
		run_links(s, fr->next)->prev = fr->prev;
	if (p->bin[b] == NO_PAGE)
		p->bin_mask &= ~(1ULL << b);
	p->free_pages -= len;
}

/* Marks [h, h + len) a free run: tail first, the head makes it so. */
static void
set_free_run(struct store *s, uint64_t h, uint64_t len)
{
	if (len > 1)
		pt_set(s, h + len - 1, PT_MAKE(PT_FTAIL, 0, 0, h));
	pt_set(s, h, PT_MAKE(PT_FREE, 0, len, 0));
}

/* Marks [h, h + len) used: bodies first, the head makes it so. */
static void
set_used_run(struct store *s, uint64_t h, uint64_t len, unsigned kind,
    unsigned cls)
{
	uint64_t i;

	for (i = 1; i < len; i++)
		pt_set(s, h + i, PT_MAKE(PT_BODY, 0, 0, h));
	pt_set(s, h, PT_MAKE(kind, cls, len, 0));
}

/* A free run in bin b at least len long, or NO_PAGE. */
static uint32_t
do_bin_fit(struct store *s, unsigned b, uint64_t len)
{
	uint32_t h = pool_at(s)->bin[b];
	uint64_t n;

	for (n = 0; h != NO_PAGE && n < s->l.npages; n++) {
		if (!free_head_ok(s, h))
			return NO_PAGE;
		if (PT_LEN(pt_get(s, h)) >= len)
			return h;
		h = run_links(s, h)->next;
	}
	return NO_PAGE;
}

/*
 * Takes len pages from the smallest bin that has room, from the low end
 * of the run or (high) its high end; the rest of the run goes back to its
 * bin.  Slabs taken low and big items high keep each kind together, so
 * that making room for a big item seldom means emptying slabs of small
 * ones.  Returns the first page; the caller commits the run with
 * set_used_run().
 */
static bool
do_run_take(struct store *s, uint64_t len, bool high, uint64_t *page)
{
	struct pool *p = pool_at(s);
	unsigned b = bin_of(len);
	uint64_t mask, have;
	uint32_t h = NO_PAGE;

	if (b >= EXACT_BINS)
		h = do_bin_fit(s, b++, len);
	while (h == NO_PAGE) {
		mask = b < NBINS ? p->bin_mask >> b : 0;
		if (mask == 0)
			return false;
		b += (unsigned)__builtin_ctzll(mask);
		h = p->bin[b];
		if (!free_head_ok(s, h) || h == NO_PAGE)
			return false;
		b++;
	}
	have = PT_LEN(pt_get(s, h));
	do_bin_remove(s, h, have);
	/* A slab's headers will touch every page of it, and the free run
	 * left above it keeps its links in the page that follows: fault
	 * them in with one call, cheaper than a fault a page (a kernel
	 * without it: a fault a page, as before).  Big items are written
	 * by their reserver with no lock held, and fault there. */
	if (!high)
		(void)madvise(page_at(s, h), (len + (have > len)) * PAGE,
		    MADV_POPULATE_WRITE);
	if (have > len && high) {
		set_free_run(s, h, have - len);
		do_bin_insert(s, h, have - len);
		*page = h + have - len;
	} else if (have > len) {
		set_free_run(s, h + len, have - len);
		do_bin_insert(s, h + len, have - len);
		*page = h;
	} else {
		*page = h;
	}
	TEST_HOOK(s, STORE_HOOK_POOL_SPLIT);
	return true;
}

/* Gives back [h, h + len), merged with the free runs on either side. */
static void
do_run_release(struct store *s, uint64_t h, uint64_t len)
{
	uint64_t start = h, n = len, e, q, i, tail;
	bool right = false, left = false;

	if (h + len < s->l.npages &&
	    PT_KIND(e = pt_get(s, h + len)) == PT_FREE &&
	    h + len + PT_LEN(e) <= s->l.npages) {
		do_bin_remove(s, h + len, PT_LEN(e));
		n += PT_LEN(e);
		right = true;
	}
	if (h > 0) {
		e = pt_get(s, h - 1);
		q = PT_KIND(e) == PT_FTAIL ? PT_AUX(e) :
		    PT_KIND(e) == PT_FREE ? h - 1 : UINT64_MAX;
		if (q < h && PT_KIND(e = pt_get(s, q)) == PT_FREE &&
		    q + PT_LEN(e) == h) {
			do_bin_remove(s, q, PT_LEN(e));
			start = q;
			n += PT_LEN(e);
			left = true;
		}
	}
	TEST_HOOK(s, STORE_HOOK_POOL_FREE);
	set_free_run(s, start, n);
	/* Free runs have nothing between head and tail: clear what the
	 * old runs had there (never walk the free neighbours' insides). */
	tail = start + n - 1;
	for (i = h; i < h + len; i++)
		if (i != start && i != tail)
			pt_set(s, i, 0);
	if (right && h + len != tail)
		pt_set(s, h + len, 0);
	if (left && h - 1 != start)
		pt_set(s, h - 1, 0);
	do_bin_insert(s, start, n);
}

/* ---- slabs and their chunks ---- */

static struct item *
chunk_at(const struct store *s, uint64_t page, uint64_t k, unsigned cls)
{
	return (struct item *)(page_at(s, page) + k * s->l.chunk[cls]);
}

static uint64_t
slab_chunks(const struct store *s, unsigned cls)
{
	return s->l.slab_pages[cls] * PAGE / s->l.chunk[cls];
}

/* A free chunk of the class's list, checked before it is trusted. */
static struct item *
free_chunk(struct store *s, uint64_t off, unsigned cls)
{
	struct item *it;

	if (off == 0)
		return NULL;
	it = item_at(s, off);
	if (it == NULL || it->state != ST_FREE || it->cls != cls) {
		s->pool_bad = true;
		return NULL;
	}
	return it;
}

static void
do_chunk_push(struct store *s, struct item *it)
{
	struct pool *p = pool_at(s);
	uint64_t off = item_off(s, it);
	struct item *h = free_chunk(s, p->chunk_free[it->cls], it->cls);

	it->prev = 0;
	it->next = h != NULL ? item_off(s, h) : 0;
	if (h != NULL)
		h->prev = off;
	p->chunk_free[it->cls] = off;
}

static void
do_chunk_unlist(struct store *s, struct item *it)
{
	struct pool *p = pool_at(s);
	struct item *pv = free_chunk(s, it->prev, it->cls);
	struct item *nx = free_chunk(s, it->next, it->cls);

	if (pv != NULL)
		pv->next = nx != NULL ? it->next : 0;
	else
		p->chunk_free[it->cls] = nx != NULL ? it->next : 0;
	if (nx != NULL)
		nx->prev = pv != NULL ? it->prev : 0;
	it->prev = it->next = 0;
}

/* Adds d to the chunks in use of the slab that holds it. */
static uint64_t
do_slab_used_add(struct store *s, const struct item *it, int d)
{
	uint64_t page = page_of_off(s, item_off(s, it)), h, e, used;

	if (!do_pool_run_of(s, page, &h, &e) || PT_KIND(e) != PT_SLAB) {
		s->pool_bad = true;
		return 1;
	}
	used = PT_AUX(e) + (uint64_t)(int64_t)d;
	pt_set(s, h, PT_MAKE(PT_SLAB, PT_CLASS(e), PT_LEN(e), used));
	return used;
}

/* A new slab of class cls, cut into free chunks. */
static bool
do_slab_new(struct store *s, unsigned cls)
{
	uint64_t h, k, n = slab_chunks(s, cls);
	struct item *it;

	if (!do_run_take(s, s->l.slab_pages[cls], false, &h))
		return false;
	/* Every header is written before the run is a slab, so a crash
	 * never leaves old bytes that look like items in it. */
	for (k = 0; k < n; k++) {
		it = chunk_at(s, h, k, cls);
		memset(it, 0, ITEM_HDR);
		it->cls = (uint8_t)cls;
		it->state = ST_FREE;
		it->lease_slot = NO_SLOT;
		if (k == n / 2)
			TEST_HOOK(s, STORE_HOOK_CARVE);
	}
	set_used_run(s, h, s->l.slab_pages[cls], PT_SLAB, cls);
	for (k = n; k-- > 0;)
		do_chunk_push(s, chunk_at(s, h, k, cls));
	pool_at(s)->slabs[cls]++;
	return true;
}

/* An empty slab goes back to the pool for any class or a big item. */
static void
do_slab_release(struct store *s, uint64_t h, unsigned cls)
{
	uint64_t k, n = slab_chunks(s, cls);

	for (k = 0; k < n; k++)
		do_chunk_unlist(s, chunk_at(s, h, k, cls));
	pool_at(s)->slabs[cls]--;
	do_run_release(s, h, s->l.slab_pages[cls]);
}

/*
 * A chunk or run for an item of total bytes, in state ST_RESV with one
 * reservation: rec is claimed in the caller's slot before the item
 * exists, so a crash leaves either nothing or a record that the reap
 * finds.  NULL when the pool has no room (or *norec: no free record).
 */
struct item *
do_pool_alloc(struct store *s, unsigned ucls, size_t total, uint64_t hash,
    uint32_t *recp, bool *norec)
{
	int cls = (int)ucls;
	uint64_t h = 0, n = 0;
	struct item *it;
	int rec;

	*norec = false;
	if (cls < (int)s->l.big_class) {
		it = free_chunk(s, pool_at(s)->chunk_free[cls], (unsigned)cls);
		if (it == NULL && do_slab_new(s, (unsigned)cls))
			it = free_chunk(s, pool_at(s)->chunk_free[cls],
			    (unsigned)cls);
		if (it == NULL)
			return NULL;
	} else {
		n = big_pages(total);
		if (!do_run_take(s, n, true, &h))
			return NULL;
		it = (struct item *)page_at(s, h);
	}
	if ((rec = rec_claim(s, item_off(s, it) | REC_RESV)) < 0) {
		*norec = true;
		if (n > 0)
			do_run_release(s, h, n);
		return NULL;
	}
	if (n == 0)
		do_chunk_unlist(s, it);
	memset(it, 0, ITEM_HDR);
	it->hash = hash;
	it->cls = (uint8_t)cls;
	it->lease_slot = NO_SLOT;
	it->refcount = 1;
	*recp = (uint32_t)rec;
	__atomic_store_n(&it->state, ST_RESV, __ATOMIC_RELEASE);
	if (n > 0)
		set_used_run(s, h, n, PT_BIG, (unsigned)cls);
	else
		do_slab_used_add(s, it, 1);
	return it;
}

/* Returns an item's memory to the pool; nothing may point at it. */
void
do_pool_free(struct store *s, struct item *it)
{
	uint64_t page = page_of_off(s, item_off(s, it)), h, e;

	if (!do_pool_run_of(s, page, &h, &e) || (PT_KIND(e) != PT_SLAB &&
	    PT_KIND(e) != PT_BIG) ||
	    (PT_KIND(e) == PT_BIG) != (it->cls == s->l.big_class)) {
		s->pool_bad = true;
		return;
	}
	__atomic_store_n(&it->state, ST_FREE, __ATOMIC_RELEASE);
	it->iflags = 0;
	it->refcount = 0;
	it->lease_slot = NO_SLOT;
	if (PT_KIND(e) == PT_BIG) {
		do_run_release(s, h, PT_LEN(e));
		return;
	}
	do_chunk_push(s, it);
	if (do_slab_used_add(s, it, -1) == 0)
		do_slab_release(s, h, it->cls);
}

/* ---- walking and rebuilding ---- */

static bool
state_used(uint8_t st)
{
	return st == ST_RESV || st == ST_LINKED || st == ST_ZOMBIE;
}

/* Is the run at h (of the head entry e) a plausible used run? */
static bool
run_valid(const struct store *s, uint64_t h, uint64_t e)
{
	unsigned k = PT_KIND(e), cls = PT_CLASS(e);
	uint64_t len = PT_LEN(e);
	const struct item *it;

	if (len == 0 || h + len > s->l.npages)
		return false;
	if (k == PT_SLAB)
		return cls < s->l.big_class && len == s->l.slab_pages[cls];
	if (k != PT_BIG || cls != s->l.big_class)
		return false;
	it = (const struct item *)page_at(s, h);
	return it->cls == cls && state_used(it->state) &&
	    item_sane(s, it, len * PAGE) &&
	    big_pages(ITEM_HDR + ALIGN((size_t)it->klen, 8) + it->vlen) ==
	    len;
}

/*
 * Calls fn on every used item.  fn may free the item it is given: the
 * walk reads where to go on first, and steps over what freeing cleared.
 */
void
do_pool_each(struct store *s, void (*fn)(struct store *, struct item *,
    void *), void *arg)
{
	uint64_t p = 0, e, len, k, n;
	unsigned cls;
	struct item *it;

	while (p < s->l.npages) {
		e = pt_get(s, p);
		len = PT_LEN(e);
		if ((PT_KIND(e) != PT_SLAB && PT_KIND(e) != PT_BIG) ||
		    !run_valid(s, p, e)) {
			p += PT_KIND(e) == PT_FREE && len > 0 &&
			    p + len <= s->l.npages ? len : 1;
			continue;
		}
		if (PT_KIND(e) == PT_BIG) {
			fn(s, (struct item *)page_at(s, p), arg);
		} else {
			cls = PT_CLASS(e);
			n = slab_chunks(s, cls);
			for (k = 0; k < n; k++) {
				it = chunk_at(s, p, k, cls);
				if (state_used(it->state))
					fn(s, it, arg);
			}
		}
		p += len;
	}
}

/* A slab found by the rebuild: chunks relisted, its use counted. */
static uint64_t
do_rebuild_slab(struct store *s, uint64_t h, unsigned cls)
{
	uint64_t k, n = slab_chunks(s, cls), used = 0;
	struct item *it;

	for (k = 0; k < n; k++) {
		it = chunk_at(s, h, k, cls);
		if (it->cls == cls && state_used(it->state)) {
			used++;
			continue;
		}
		/* Free, or garbage nobody owns: free it. */
		memset(it, 0, ITEM_HDR);
		it->cls = (uint8_t)cls;
		it->state = ST_FREE;
		it->lease_slot = NO_SLOT;
	}
	if (used == 0)
		return 0;
	pt_set(s, h, PT_MAKE(PT_SLAB, cls, s->l.slab_pages[cls], used));
	for (k = n; k-- > 0;) {
		it = chunk_at(s, h, k, cls);
		if (it->state == ST_FREE)
			do_chunk_push(s, it);
	}
	pool_at(s)->slabs[cls]++;
	return used;
}

/* Clears reservation records whose chunk never became ST_RESV. */
static void
do_rebuild_records(struct store *s)
{
	uint64_t sl, k, v;
	uint64_t *rec;
	struct item *it;

	for (sl = 0; sl < s->l.max_slots; sl++) {
		rec = slot_at(s, (unsigned)sl)->rec;
		for (k = 0; k < s->l.max_refs; k++) {
			v = __atomic_load_n(&rec[k], __ATOMIC_ACQUIRE);
			if (v == 0 || REC_KIND(v) != REC_RESV)
				continue;
			it = item_at(s, REC_OFF(v));
			if (it == NULL || it->state != ST_RESV)
				rec_clear(s, (unsigned)sl, (uint32_t)k, v);
		}
	}
}

/* Does every page after h, up to len, say what a run of len pages at h
 * would have there (a used run's bodies, or a free run's nothing)? */
static bool
run_clean(const struct store *s, uint64_t h, uint64_t len, bool used)
{
	uint64_t i, body = PT_MAKE(PT_BODY, 0, 0, h);

	for (i = h + 1; i < h + len; i++)
		if (pt_get(s, i) != (used ? body : i + 1 == h + len && len > 1 ?
		    PT_MAKE(PT_FTAIL, 0, 0, h) : 0))
			return false;
	return true;
}

/*
 * Rebuilds the bins, free lists and use counts from the run heads and
 * the chunks' states.  A head is trusted only if the pages it covers say
 * the same; anything else becomes free pages, so a crash in the middle of
 * a change (or a damaged table) never lets two runs overlap.  The
 * stripes' items in used runs are left where they are.
 */
void
do_pool_rebuild(struct store *s)
{
	struct pool *p = pool_at(s);
	uint64_t pg = 0, e, len, fstart = UINT64_MAX, i, step;
	unsigned k;
	bool used;

	p->free_pages = 0;
	p->bin_mask = 0;
	for (i = 0; i < NBINS; i++)
		p->bin[i] = NO_PAGE;
	memset(p->chunk_free, 0, sizeof(p->chunk_free));
	memset(p->slabs, 0, sizeof(p->slabs));
	while (pg < s->l.npages) {
		e = pt_get(s, pg);
		k = PT_KIND(e);
		len = PT_LEN(e);
		used = (k == PT_BIG || k == PT_SLAB) && run_valid(s, pg, e) &&
		    run_clean(s, pg, len, true) &&
		    (k == PT_BIG || do_rebuild_slab(s, pg, PT_CLASS(e)) > 0);
		if (used) {
			if (fstart != UINT64_MAX)
				do_run_release(s, fstart, pg - fstart);
			fstart = UINT64_MAX;
			pg += len;
			continue;
		}
		/* Free, or nothing to trust: free pages up to the next
		 * head that is one. */
		if (fstart == UINT64_MAX)
			fstart = pg;
		step = 1;
		if (k == PT_FREE && len > 0 && pg + len <= s->l.npages &&
		    run_clean(s, pg, len, false))
			step = len;
		else if (k == PT_SLAB && run_valid(s, pg, e) &&
		    run_clean(s, pg, len, true))
			step = len;	/* an empty slab */
		for (i = pg; i < pg + step; i++)
			pt_set(s, i, 0);
		pg += step;
	}
	if (fstart != UINT64_MAX)
		do_run_release(s, fstart, s->l.npages - fstart);
	do_rebuild_records(s);
}

/* An empty pool: one free run of every page. */
void
pool_init(struct store *s)
{
	struct pool *p = pool_at(s);
	uint64_t i;

	pool_mutex_init(p);
	for (i = 0; i < s->l.npages; i++)
		pt_set(s, i, 0);
	do_pool_rebuild(s);
}

/*
 * Test-only code of the store: hooks and a checker of its invariants.
 * Only the unit tests' copy of shm/ has this file (tests/include.am).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shm/store_impl.h"
#include "shm/store_test.h"

void
store_test_set_hash(struct store *s, uint64_t (*hash)(const void *, size_t))
{
	s->hashfn = hash;
}

void
store_test_set_hook(struct store *s, enum store_hook_point point,
    void (*hook)(void *), void *arg)
{
	s->hook[point] = hook;
	s->hook_arg[point] = arg;
}

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		snprintf(err, errlen, __VA_ARGS__); \
		return -1; \
	} \
} while (0)

static uint64_t
pt(struct store *s, uint64_t p)
{
	return ptab_at(s)[p];
}

/* The page table covers the arena with runs; free runs are in bins. */
static int
check_runs(struct store *s, char *err, size_t errlen, uint64_t *freep)
{
	struct pool *p = pool_at(s);
	uint64_t pg = 0, e, len, i, nfree = 0, inbins = 0, h, n;
	unsigned b, prev_free = 0;

	while (pg < s->l.npages) {
		e = pt(s, pg);
		len = PT_LEN(e);
		CHECK(len > 0 && pg + len <= s->l.npages, "page %" PRIu64
		    ": bad head %#" PRIx64, pg, e);
		switch (PT_KIND(e)) {
		case PT_FREE:
			CHECK(!prev_free, "page %" PRIu64 ": two free runs "
			    "side by side", pg);
			for (i = pg + 1; i + 1 < pg + len; i++)
				CHECK(pt(s, i) == 0, "page %" PRIu64 ": inside "
				    "a free run, %#" PRIx64, i, pt(s, i));
			if (len > 1)
				CHECK(pt(s, pg + len - 1) ==
				    PT_MAKE(PT_FTAIL, 0, 0, pg), "page %"
				    PRIu64 ": bad free tail", pg + len - 1);
			nfree += len;
			prev_free = 1;
			break;
		case PT_SLAB:
		case PT_BIG:
			for (i = pg + 1; i < pg + len; i++)
				CHECK(pt(s, i) == PT_MAKE(PT_BODY, 0, 0, pg),
				    "page %" PRIu64 ": bad body", i);
			prev_free = 0;
			break;
		default:
			CHECK(0, "page %" PRIu64 ": kind %u", pg,
			    PT_KIND(e));
		}
		pg += len;
	}
	CHECK(nfree == p->free_pages, "free pages %" PRIu64 ", pool says %"
	    PRIu64, nfree, p->free_pages);
	for (b = 0; b < NBINS; b++) {
		CHECK(((p->bin_mask >> b) & 1) == (p->bin[b] != NO_PAGE),
		    "bin %u: mask disagrees", b);
		for (h = p->bin[b], n = 0; h != NO_PAGE; n++) {
			CHECK(n < s->l.npages && h < s->l.npages &&
			    PT_KIND(pt(s, h)) == PT_FREE, "bin %u: bad run",
			    b);
			inbins += PT_LEN(pt(s, h));
			h = ((struct free_run *)page_at(s, h))->next;
		}
	}
	CHECK(inbins == nfree, "bins hold %" PRIu64 " pages of %" PRIu64,
	    inbins, nfree);
	*freep = nfree;
	return 0;
}

struct tally {
	unsigned si;
	uint64_t linked, items, bytes, zombies;
	int bad;
	char why[128];
};

static void
count_item(struct store *s, struct item *it, void *arg)
{
	struct tally *t = arg;

	if (stripe_of_hash(s, it->hash) != t->si)
		return;
	if (it->state == ST_LINKED) {
		t->linked++;
		if (!(it->iflags & IT_PLACEHOLDER)) {
			t->items++;
			t->bytes += item_capacity(s, it);
		}
		if (item_csum(it) != it->csum && t->bad == 0) {
			t->bad = 1;
			snprintf(t->why, sizeof(t->why), "item at %" PRIu64
			    ": bad checksum", item_off(s, it));
		}
	}
}

/* Chains and LRU lists reach exactly the stripe's linked items. */
static int
check_stripe(struct store *s, unsigned si, char *err, size_t errlen)
{
	struct stripe *st = stripe_at(s, si);
	struct tally t = { .si = si };
	uint64_t b, off, n = 0, lru = 0, max = s->l.npages * PAGE / CHUNK_MIN;
	struct item *it;
	unsigned c;

	do_pool_each(s, count_item, &t);
	CHECK(!t.bad, "stripe %u: %s", si, t.why);
	for (b = 0; b < s->l.stripe_buckets; b++) {
		off = bucket_at(s, si, 0)[b];
		while (off != 0) {
			it = item_at(s, off);
			CHECK(it != NULL && it->state == ST_LINKED &&
			    stripe_of_hash(s, it->hash) == si, "stripe %u: "
			    "bad chain link %" PRIu64, si, off);
			CHECK(++n <= max, "stripe %u: chain loop", si);
			off = it->hnext;
		}
	}
	for (c = 0; c < s->l.nclasses; c++) {
		for (off = st->lru_head[c]; off != 0; off = it->next) {
			it = item_at(s, off);
			CHECK(it != NULL && it->state == ST_LINKED &&
			    item_lru(s, it) == c, "stripe %u: bad LRU link",
			    si);
			CHECK(++lru <= max, "stripe %u: LRU loop", si);
		}
	}
	CHECK(n == t.linked, "stripe %u: chains hold %" PRIu64 " of %" PRIu64
	    " linked items", si, n, t.linked);
	CHECK(lru == t.linked, "stripe %u: LRUs hold %" PRIu64 " of %" PRIu64
	    " linked items", si, lru, t.linked);
	CHECK(st->c.items == t.items, "stripe %u: items %" PRIu64 ", counted %"
	    PRIu64, si, st->c.items, t.items);
	CHECK(st->c.bytes_used == t.bytes, "stripe %u: bytes_used %" PRIu64
	    ", counted %" PRIu64, si, st->c.bytes_used, t.bytes);
	return 0;
}

int
store_test_check(struct store *s, char *err, size_t errlen)
{
	uint64_t nfree;
	unsigned si;
	int r;

	for (si = 0; si < s->l.stripes; si++) {
		if (stripe_lock(s, si) == -1)
			CHECK(0, "stripe %u: cannot lock", si);
		if (pool_lock(s) == -1) {
			stripe_unlock(s, si);
			CHECK(0, "pool: cannot lock");
		}
		r = check_runs(s, err, errlen, &nfree);
		if (r == 0)
			r = check_stripe(s, si, err, errlen);
		pool_unlock(s);
		stripe_unlock(s, si);
		if (r != 0)
			return r;
	}
	return 0;
}

void
store_test_pool(struct store *s, uint64_t *free_pages, uint64_t *longest)
{
	uint64_t pg = 0, e;

	*free_pages = *longest = 0;
	if (pool_lock(s) == -1)
		return;
	*free_pages = pool_at(s)->free_pages;
	while (pg < s->l.npages) {
		e = pt(s, pg);
		if (PT_LEN(e) == 0)
			break;
		if (PT_KIND(e) == PT_FREE && PT_LEN(e) > *longest)
			*longest = PT_LEN(e);
		pg += PT_LEN(e);
	}
	pool_unlock(s);
}

bool
store_test_chunk_start(struct store *s, unsigned cls, uint64_t in,
    uint64_t *chunk)
{
	*chunk = 0;
	if (cls >= s->l.big_class)
		return false;
	*chunk = s->l.chunk[cls];
	return chunk_start(s, cls, in);
}

/*
 * The page pool (issue 13, "a store that keeps what fits"): memory serves
 * the whole store, so it fills before it evicts whatever the mix of sizes
 * and the number of stripes; pages move between size classes when the mix
 * changes; big values find contiguous room; eviction follows recency
 * across stripes; the pool's invariants hold after random traffic; and a
 * chunk's start is told without a division as it is with one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <criterion/criterion.h>

/* What a test saw, for the log (cr_log_info leaks in parallel runs). */
#define test_note(...) do { \
	fprintf(stderr, "[note] " __VA_ARGS__); \
	fputc('\n', stderr); \
} while (0)

#include "shm/store.h"
#include "shm/store_test.h"
#include "tests/shm/single.h"

/* Like the master makes it: 4 slots for each of 4 workers, 4096 refs. */
static struct store *
mk(size_t size, unsigned stripes, size_t max_object)
{
	struct store_options o = {
		.size = size, .stripes = stripes, .max_object = max_object,
		.max_slots = 16, .max_refs = 4096,
	};
	char err[256];
	struct store *s = store_create(&o, err, sizeof(err));

	cr_assert_not_null(s, "store_create: %s", err);
	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	return s;
}

static uint64_t rng_state;

static uint64_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Log-uniform from lo to hi bytes: as many 100 B values as 100 KB ones. */
static size_t
log_uniform(size_t lo, size_t hi)
{
	double u = (double)(rnd() >> 11) / (double)(1ULL << 53);

	return (size_t)(exp(log((double)lo) + u * (log((double)hi) -
	    log((double)lo))));
}

static char bigbuf[1 << 20];

/* Stores vlen bytes under key, a second after the last put. */
static enum store_result
put(struct store *s, const char *key, size_t vlen)
{
	fake_now++;
	return store_set(s, key, strlen(key), bigbuf, vlen, 0, 0);
}

/*
 * Fills a store with log-uniform values until the first eviction; the
 * fraction of size that keys and values held then.
 */
static double
fill_fraction(size_t size, unsigned stripes, size_t hi)
{
	struct store *s = mk(size, stripes, 1 << 20);
	struct store_stats st;
	size_t *len = calloc(200000, sizeof(*len)), held = 0;
	char key[32], err[256];
	int n, i;

	cr_assert_not_null(len);
	rng_state = 0x9e3779b97f4a7c15ULL;
	for (n = 0; n < 200000; n++) {
		snprintf(key, sizeof(key), "fill:%d", n);
		len[n] = log_uniform(100, hi);
		cr_assert_eq(put(s, key, len[n]), STORE_OK, "set %d", n);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	cr_assert_lt(n, 200000);
	for (i = 0; i <= n; i++) {
		struct store_ref ref;

		snprintf(key, sizeof(key), "fill:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			held += strlen(key) + ref.len;
			store_release(s, &ref);
		}
	}
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);
	free(len);
	return (double)held / (double)size;
}

/* Issue 13: 64m (memcached's default) with the default 16 stripes, and
 * with 64 stripes (refused at start before the pool). */
Test(store_pool, fills_before_it_evicts, .timeout = 120)
{
	double f16 = fill_fraction(64 << 20, 16, 512 << 10);
	double f64 = fill_fraction(64 << 20, 64, 512 << 10);
	double small = fill_fraction(16 << 20, 16, 4096);

	test_note("held at the first eviction: %.3f (16 stripes), %.3f "
	    "(64 stripes), %.3f (small values)", f16, f64, small);
	cr_assert_geq(f16, 0.85, "16 stripes: %.3f", f16);
	cr_assert_geq(f64, 0.85, "64 stripes: %.3f", f64);
	/* Small values pay their headers and size classes. */
	cr_assert_geq(small, 0.70, "small values: %.3f", small);
}

/* Full of small values, then only big ones: the small ones' pages are
 * taken for the big, and the other way round (memcached's rebalancer). */
Test(store_pool, pages_move_between_classes, .timeout = 60)
{
	struct store *s = mk(16 << 20, 16, 1 << 20);
	struct store_stats st;
	char key[32], err[256];
	int i, big = 0;

	for (i = 0;; i++) {
		snprintf(key, sizeof(key), "small:%d", i);
		cr_assert_eq(put(s, key, 300), STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "big:%d", i);
		cr_assert_eq(put(s, key, 300 << 10), STORE_OK, "big %d", i);
	}
	for (i = 0; i < 200; i++) {
		struct store_ref ref;

		snprintf(key, sizeof(key), "big:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			big++;
			store_release(s, &ref);
		}
	}
	/* 16 MiB holds about 50 values of 300 KiB. */
	cr_assert_geq(big, 45, "only %d big values kept", big);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	/* A class takes pages from others once their items are twice as
	 * old as its own (memcached's automove, by age): the big values
	 * go, all of them, since nobody reads them any more. */
	for (i = 0; i < 40000; i++) {
		snprintf(key, sizeof(key), "small2:%d", i);
		cr_assert_eq(put(s, key, 1000), STORE_OK, "small2 %d", i);
	}
	for (i = 0, big = 0; i < 200; i++) {
		struct store_ref ref;

		snprintf(key, sizeof(key), "big:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			big++;
			store_release(s, &ref);
		}
	}
	cr_assert_eq(big, 0, "%d big values still there", big);
	store_stats(s, &st);
	cr_assert_geq(st.items, 12000, "only %llu small values kept",
	    (unsigned long long)st.items);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);
}

/* Memory cut into holes by small values left between big ones: a value
 * of the largest size still finds a run, by evicting a window. */
Test(store_pool, big_values_find_contiguous_room, .timeout = 60)
{
	struct store *s = mk(8 << 20, 4, 1 << 20);
	struct store_stats st;
	uint64_t freep, longest;
	char key[32], err[256];
	int i;

	for (i = 0;; i++) {
		snprintf(key, sizeof(key), "a:%d", i);
		cr_assert_eq(put(s, key, i % 2 ? 20000 : 60000), STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	/* Delete every other: half the memory free, in small holes. */
	for (i = 0; i < 400; i += 2) {
		snprintf(key, sizeof(key), "a:%d", i);
		store_delete(s, key, strlen(key));
	}
	store_test_pool(s, &freep, &longest);
	test_note("free pages %llu, longest run %llu",
	    (unsigned long long)freep, (unsigned long long)longest);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "huge:%d", i);
		cr_assert_eq(put(s, key, 1 << 20), STORE_OK, "huge %d", i);
	}
	store_stats(s, &st);
	cr_assert_eq(st.nomem, 0);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);
}

/* The least recently used go first, whichever stripe they are in. */
Test(store_pool, eviction_follows_recency_across_stripes, .timeout = 60)
{
	struct store *s = mk(8 << 20, 16, 1 << 20);
	struct store_stats st;
	struct store_ref ref;
	char key[32];
	int n, i, touched = 0, untouched = 0;

	for (n = 0;; n++) {
		snprintf(key, sizeof(key), "k:%d", n);
		cr_assert_eq(put(s, key, 2000), STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	fake_now += 100;
	/* Use every even key, later. */
	for (i = 0; i < n; i += 2) {
		snprintf(key, sizeof(key), "k:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT)
			store_release(s, &ref);
	}
	fake_now += 100;
	for (i = 0; i < n / 4; i++) {
		snprintf(key, sizeof(key), "new:%d", i);
		cr_assert_eq(put(s, key, 2000), STORE_OK);
	}
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			store_release(s, &ref);
			continue;
		}
		if (i % 2 == 0)
			touched++;
		else
			untouched++;
	}
	test_note("evicted: %d used, %d unused", touched, untouched);
	cr_assert_geq(untouched, n / 4 - 50);
	cr_assert_leq(touched, n / 100 + 5, "%d recently used evicted",
	    touched);
	store_destroy(s);
}

/* Random sizes, sets, deletes, pins held a while and expiries: the
 * pool's and the stripes' invariants hold all along. */
Test(store_pool, invariants_after_random_traffic, .timeout = 120)
{
	struct store *s = mk(8 << 20, 8, 256 << 10);
	struct store_ref held[16];
	struct store_stats st;
	char key[32], err[512];
	int i, h = 0;

	memset(held, 0, sizeof(held));
	rng_state = 42;
	for (i = 0; i < 60000; i++) {
		unsigned k = (unsigned)(rnd() % 3000), r = (unsigned)(rnd() %
		    100);

		snprintf(key, sizeof(key), "r:%u", k);
		if (r < 40) {
			store_set(s, key, strlen(key), bigbuf,
			    log_uniform(10, 256 << 10), rnd() % 10 == 0 ?
			    1 + (int64_t)(rnd() % 3) : 0, 0);
		} else if (r < 80) {
			store_release(s, &held[h]);
			store_get(s, key, strlen(key), &held[h]);
			h = (h + 1) % 16;
		} else if (r < 90) {
			store_delete(s, key, strlen(key));
		} else if (r < 95) {
			struct store_ref ref;

			if (store_lookup(s, key, strlen(key), &ref) ==
			    STORE_LEASE && rnd() % 2)
				store_lease_release(s, key, strlen(key));
			store_release(s, &ref);
		} else {
			store_sweep(s, 64);
		}
		if (i % 200 == 0)
			fake_now++;
		if (i % 5000 == 0)
			cr_assert_eq(store_test_check(s, err, sizeof(err)), 0,
			    "op %d: %s", i, err);
	}
	for (i = 0; i < 16; i++)
		store_release(s, &held[i]);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_stats(s, &st);
	test_note("sets %llu evictions %llu nomem %llu items %llu",
	    (unsigned long long)st.sets, (unsigned long long)st.evictions,
	    (unsigned long long)st.nomem, (unsigned long long)st.items);
	cr_assert_gt(st.evictions, 0, "the test must press memory");
	cr_assert_eq(st.nomem, 0);
	cr_assert_eq(st.corruptions, 0);
	cr_assert_eq(st.lock_recoveries, 0);
	store_destroy(s);
}

static long
count_up(const void *old, size_t oldlen, void *out, void *arg)
{
	uint64_t v = 0;

	if (old != NULL && oldlen == sizeof(v))
		memcpy(&v, old, sizeof(v));
	v++;
	memcpy(out, &v, sizeof(v));
	return (long)sizeof(v);
}

/* Read-modify-writes in a full store: they make room like any store. */
Test(store_pool, updates_and_holders_in_a_full_store, .timeout = 60)
{
	struct store *s = mk(4 << 20, 4, 256 << 10);
	struct store_stats st;
	struct store_ref ref;
	char key[32], err[512];
	int i;

	for (i = 0;; i++) {
		snprintf(key, sizeof(key), "big:%d", i);
		cr_assert_eq(put(s, key, 100000), STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "n:%d", i % 700);
		fake_now++;
		cr_assert_eq(store_update(s, key, strlen(key), 0, 0, count_up,
		    NULL), STORE_OK, "update %d", i);
	}
	for (i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "h:%d", i);
		cr_assert_eq(store_acquire(s, key, strlen(key), 1, &ref),
		    STORE_HIT);
		store_release(s, &ref);
	}
	cr_assert_eq(store_get(s, "n:5", 3, &ref), STORE_HIT);
	cr_assert_eq(ref.len, 8);
	store_release(s, &ref);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);
}

/*
 * item_at() finds a chunk's start without a division: it agrees with
 * in % chunk for every class, on every offset of a few slabs and on any
 * 64-bit one (a link read from a damaged map can say anything).
 */
Test(store_pool, chunk_start_agrees_with_modulo, .timeout = 60)
{
	struct store *s = mk(4 << 20, 1, 1 << 20);
	uint64_t chunk, in, classes = 0;
	unsigned cls;
	int i;

	rng_state = 0x5eed;
	for (cls = 0;; cls++) {
		store_test_chunk_start(s, cls, 0, &chunk);
		if (chunk == 0)
			break;
		classes++;
		for (in = 0; in < 4 * chunk + 4 * 65536; in++)
			cr_assert_eq(store_test_chunk_start(s, cls, in, &chunk),
			    in % chunk == 0, "class %u (%llu B), %llu", cls,
			    (unsigned long long)chunk, (unsigned long long)in);
		for (i = 0; i < 200000; i++) {
			in = i % 2 ? rnd() : rnd() / chunk * chunk +
			    (uint64_t)(i % 5) - 2;
			cr_assert_eq(store_test_chunk_start(s, cls, in, &chunk),
			    in % chunk == 0, "class %u (%llu B), %llu", cls,
			    (unsigned long long)chunk, (unsigned long long)in);
		}
	}
	cr_assert_gt(classes, 10, "only %llu slab classes",
	    (unsigned long long)classes);
	store_destroy(s);
}

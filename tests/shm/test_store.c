/*
 * Single-process tests of the shared store: TTLs, LRU eviction, size
 * limits, hash collisions, pins, leases, the sweep, counters, persistence
 * and a full disk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* unshare() */
#endif
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/store.h"
#include "shm/store_test.h"
#include "tests/shm/single.h"

/* An anonymous store with the fake clock, attached as slot 0. */
static struct store *
mk(size_t size, unsigned stripes, size_t max_object)
{
	struct store_options o = {
		.size = size, .stripes = stripes, .max_object = max_object,
		.max_slots = 4,
	};
	char err[256];
	struct store *s = store_create(&o, err, sizeof(err));

	cr_assert_not_null(s, "store_create: %s", err);
	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	return s;
}

Test(store, set_get_delete)
{
	struct store *s = mk(4 << 20, 4, 4096);

	expect(s, "a", NULL);
	cr_assert_eq(set_str(s, "a", "apple", 0), STORE_OK);
	cr_assert_eq(set_str(s, "b", "banana", 0), STORE_OK);
	expect(s, "a", "apple");
	cr_assert_eq(set_str(s, "a", "apricot", 0), STORE_OK);
	expect(s, "a", "apricot");
	cr_assert_eq(store_delete(s, "a", 1), STORE_OK);
	cr_assert_eq(store_delete(s, "a", 1), STORE_NOT_FOUND);
	expect(s, "a", NULL);
	expect(s, "b", "banana");
	cr_assert_eq(store_get(s, "", 0, &(struct store_ref){0}),
	    STORE_EINVAL);
	store_destroy(s);
}

struct ttl_case {
	int64_t set_at, ttl, check_at;
	bool hit;
	int64_t expires;
};

/* memcached's table: 0 never, up to 30 days relative, then absolute. */
static const struct ttl_case ttl_cases[] = {
	{ 1000000000, 0, 4000000000LL, true, 0 },
	{ 1000000000, 10, 1000000009, true, 1000000010 },
	{ 1000000000, 10, 1000000010, false, 0 },
	{ 1000000000, 2592000, 1002591999, true, 1002592000 },
	{ 1000000000, 2592000, 1002592000, false, 0 },
	{ 1000000000, 2592001, 1000000000, false, 0 },
	{ 2592000, 2592001, 2592000, true, 2592001 },
	{ 2592000, 2592001, 2592001, false, 0 },
	{ 1000000000, 1000000100, 1000000099, true, 1000000100 },
	{ 1000000000, 1000000100, 1000000100, false, 0 },
	{ 1000000000, -1, 1000000000, false, 0 },
	{ 1000000000, -2592001, 1000000000, false, 0 },
};

Test(store, ttl_table)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;
	size_t i;
	enum store_result r;

	for (i = 0; i < sizeof(ttl_cases) / sizeof(ttl_cases[0]); i++) {
		const struct ttl_case *c = &ttl_cases[i];
		char key[16];

		snprintf(key, sizeof(key), "ttl%zu", i);
		fake_now = c->set_at;
		cr_assert_eq(set_str(s, key, "v", c->ttl), STORE_OK);
		fake_now = c->check_at;
		r = store_get(s, key, strlen(key), &ref);
		cr_assert_eq(r, c->hit ? STORE_HIT : STORE_MISS,
		    "case %zu: ttl %lld set at %lld, read at %lld", i,
		    (long long)c->ttl, (long long)c->set_at,
		    (long long)c->check_at);
		if (c->hit)
			cr_assert_eq(ref.expires, c->expires, "case %zu", i);
		store_release(s, &ref);
	}
	store_destroy(s);
}

/* How many values of vlen bytes one stripe holds before it evicts. */
static int
capacity(size_t size, size_t vlen)
{
	struct store *s = mk(size, 1, 4096);
	struct store_stats st;
	char key[32], *val = calloc(1, vlen);
	int n;

	for (n = 0;; n++) {
		snprintf(key, sizeof(key), "key%06d", n);
		cr_assert_eq(store_set(s, key, strlen(key), val, vlen, 0, 0),
		    STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	store_destroy(s);
	free(val);
	return n;
}

Test(store, lru_eviction_order)
{
	int cap = capacity(1 << 20, 1000), i;
	struct store *s = mk(1 << 20, 1, 4096);
	struct store_stats st;
	struct store_ref ref;
	char key[32], val[1000];

	cr_assert_gt(cap, 10);
	memset(val, 'x', sizeof(val));
	for (i = 0; i < cap; i++) {
		snprintf(key, sizeof(key), "key%06d", i);
		cr_assert_eq(store_set(s, key, strlen(key), val, sizeof(val),
		    0, 0), STORE_OK);
	}
	store_stats(s, &st);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.items, (uint64_t)cap);
	/* Touch the oldest: the next two sets evict key1 then key2. */
	cr_assert_eq(store_get(s, "key000000", 9, &ref), STORE_HIT);
	store_release(s, &ref);
	cr_assert_eq(store_set(s, "new1", 4, val, sizeof(val), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "key000001", 9, &(struct store_ref){0}),
	    STORE_MISS);
	cr_assert_eq(store_set(s, "new2", 4, val, sizeof(val), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "key000002", 9, &(struct store_ref){0}),
	    STORE_MISS);
	store_stats(s, &st);
	cr_assert_eq(st.evictions, 2);
	cr_assert_eq(st.items, (uint64_t)cap);
	cr_assert_eq(store_get(s, "key000000", 9, &ref), STORE_HIT);
	store_release(s, &ref);
	cr_assert_eq(store_get(s, "key000003", 9, &ref), STORE_HIT);
	store_release(s, &ref);
	store_destroy(s);
}

Test(store, expired_evicted_before_live)
{
	int cap = capacity(1 << 20, 1000), i;
	struct store *s = mk(1 << 20, 1, 4096);
	struct store_stats st;
	struct store_ref ref;
	char key[32], val[1000] = { 0 };

	for (i = 0; i < cap; i++) {
		snprintf(key, sizeof(key), "key%06d", i);
		/* Key 5 expires; the LRU tail (key 0) does not. */
		cr_assert_eq(store_set(s, key, strlen(key), val, sizeof(val),
		    i == 5 ? 10 : 0, 0), STORE_OK);
	}
	fake_now += 20;
	cr_assert_eq(store_set(s, "new", 3, val, sizeof(val), 0, 0),
	    STORE_OK);
	store_stats(s, &st);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(st.expirations, 1);
	cr_assert_eq(store_get(s, "key000000", 9, &ref), STORE_HIT);
	store_release(s, &ref);
	store_destroy(s);
}

/* A pinned value stays intact when replaced, deleted and pressed out. */
Test(store, pin_outlives_replace_and_eviction)
{
	struct store *s = mk(1 << 20, 1, 4096);
	struct store_ref ref;
	char key[32], val[1000], old[1000];
	int i;

	memset(old, 'o', sizeof(old));
	memset(val, 'n', sizeof(val));
	cr_assert_eq(store_set(s, "pinned", 6, old, sizeof(old), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "pinned", 6, &ref), STORE_HIT);
	cr_assert_eq(store_set(s, "pinned", 6, val, 10, 0, 0), STORE_OK);
	cr_assert_eq(store_delete(s, "pinned", 6), STORE_OK);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "fill%06d", i);
		cr_assert_eq(store_set(s, key, strlen(key), val, sizeof(val),
		    0, 0), STORE_OK);
	}
	cr_assert_eq(ref.len, sizeof(old));
	cr_assert_arr_eq(ref.data, old, sizeof(old));
	store_release(s, &ref);
	cr_assert_eq(ref.data, NULL);
	store_destroy(s);
}

Test(store, pinned_lru_tail_is_skipped)
{
	int cap = capacity(1 << 20, 1000), i;
	struct store *s = mk(1 << 20, 1, 4096);
	struct store_ref ref;
	char key[32], val[1000] = { 0 };

	for (i = 0; i < cap; i++) {
		snprintf(key, sizeof(key), "key%06d", i);
		cr_assert_eq(store_set(s, key, strlen(key), val, sizeof(val),
		    0, 0), STORE_OK);
	}
	cr_assert_eq(store_get(s, "key000000", 9, &ref), STORE_HIT);
	/* Touch all the others: the pinned key0 is now the LRU tail. */
	for (i = 1; i < cap; i++) {
		struct store_ref r2;

		snprintf(key, sizeof(key), "key%06d", i);
		cr_assert_eq(store_get(s, key, strlen(key), &r2), STORE_HIT);
		store_release(s, &r2);
	}
	cr_assert_eq(store_set(s, "new", 3, val, sizeof(val), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "key000001", 9, &(struct store_ref){0}),
	    STORE_MISS);
	store_release(s, &ref);
	cr_assert_eq(store_get(s, "key000000", 9, &ref), STORE_HIT);
	store_release(s, &ref);
	store_destroy(s);
}

Test(store, max_object)
{
	struct store *s = mk(4 << 20, 2, 3000);
	struct store_stats st;
	struct store_wref w;
	char *val = calloc(1, 3001);

	cr_assert_eq(store_set(s, "fits", 4, val, 3000, 0, 0), STORE_OK);
	cr_assert_eq(store_set(s, "big", 3, val, 3001, 0, 0),
	    STORE_TOO_LARGE);
	cr_assert_eq(store_reserve(s, "big", 3, 3001, 0, 0, &w),
	    STORE_TOO_LARGE);
	cr_assert_eq(store_get(s, "big", 3, &(struct store_ref){0}),
	    STORE_MISS);
	store_stats(s, &st);
	cr_assert_eq(st.too_large, 2);
	cr_assert_eq(st.sets, 1);
	cr_assert_eq(st.items, 1);
	free(val);
	store_destroy(s);
}

static uint64_t
same_hash(const void *key, size_t len)
{
	return 42;
}

/* Every key in one bucket: only the full key comparison tells them apart. */
Test(store, hash_collisions)
{
	struct store *s = mk(4 << 20, 4, 4096);
	char key[32], val[32];
	struct store_ref ref;
	int i;

	store_test_set_hash(s, same_hash);
	cr_assert_eq(set_str(s, "ab", "short", 0), STORE_OK);
	cr_assert_eq(set_str(s, "abc", "long", 0), STORE_OK);
	cr_assert_eq(set_str(s, "abd", "other", 0), STORE_OK);
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(val, sizeof(val), "v%d", i);
		cr_assert_eq(set_str(s, key, val, 0), STORE_OK);
	}
	expect(s, "ab", "short");
	expect(s, "abc", "long");
	expect(s, "abd", "other");
	expect(s, "a", NULL);
	expect(s, "abe", NULL);
	for (i = 0; i < 200; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(store_delete(s, key, strlen(key)), STORE_OK);
	}
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(val, sizeof(val), "v%d", i);
		expect(s, key, i % 2 ? val : NULL);
	}
	cr_assert_eq(store_get(s, "abc", 3, &ref), STORE_HIT);
	store_release(s, &ref);
	store_destroy(s);
}

Test(store, stats_add_up)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_stats st;

	set_str(s, "a", "1", 0);
	set_str(s, "b", "2", 0);
	set_str(s, "c", "3", 5);
	expect(s, "a", "1");
	expect(s, "x", NULL);
	store_delete(s, "b", 1);
	fake_now += 10;
	expect(s, "c", NULL);
	store_stats(s, &st);
	cr_assert_eq(st.gets, 3);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.misses, 2);
	cr_assert_eq(st.gets, st.hits + st.misses);
	cr_assert_eq(st.sets, 3);
	cr_assert_eq(st.deletes, 1);
	cr_assert_eq(st.expirations, 1);
	cr_assert_eq(st.items, 1);
	cr_assert_gt(st.bytes_used, 0);
	cr_assert_gt(st.bytes_total, st.bytes_used);
	cr_assert_leq(st.bytes_total, 4 << 20);
	store_destroy(s);
}

Test(store, reserve_commit_abort)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_wref w;

	cr_assert_eq(store_reserve(s, "k", 1, 5, 0, 7, &w), STORE_OK);
	memcpy(w.data, "hello", 5);
	expect(s, "k", NULL);	/* not visible before the commit */
	cr_assert_eq(store_commit(s, &w), STORE_OK);
	expect(s, "k", "hello");
	cr_assert_eq(store_reserve(s, "k", 1, 5, 0, 7, &w), STORE_OK);
	memcpy(w.data, "world", 5);
	store_abort(s, &w);
	expect(s, "k", "hello");
	cr_assert_eq(store_commit(s, &w), STORE_EINVAL);
	store_destroy(s);
}

Test(store, max_refs_per_slot)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 1, .max_object = 100,
		.max_slots = 2, .max_refs = 3,
	};
	struct store *s = store_create(&o, NULL, 0);
	struct store_ref r[4];
	int i;

	cr_assert_not_null(s);
	cr_assert_eq(store_attach(s, 1), 0);
	set_str(s, "k", "v", 0);
	for (i = 0; i < 3; i++)
		cr_assert_eq(store_get(s, "k", 1, &r[i]), STORE_HIT);
	cr_assert_eq(store_get(s, "k", 1, &r[3]), STORE_NOREF);
	store_release(s, &r[0]);
	cr_assert_eq(store_get(s, "k", 1, &r[3]), STORE_HIT);
	store_destroy(s);
}

/* A store whose slot 1 holds at most two pins, and "a" and "b" in
 * different stripes (the stripe takes the hash's bits from 40 up). */
static uint64_t
ab_hash(const void *key, size_t klen)
{
	return klen > 0 && *(const char *)key == 'b' ? 1ULL << 40 : 0;
}

static struct store *
mk_two_refs(void)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 4, .max_object = 100,
		.max_slots = 2, .max_refs = 2,
	};
	struct store *s = store_create(&o, NULL, 0);

	cr_assert_not_null(s);
	store_test_set_hash(s, ab_hash);
	cr_assert_eq(store_attach(s, 1), 0);
	cr_assert_eq(set_str(s, "a", "apple", 0), STORE_OK);
	cr_assert_eq(set_str(s, "b", "banana", 0), STORE_OK);
	return s;
}

/* The next get in the stripe unpins what was left for later. */
Test(store, release_later_rides_on_the_next_get)
{
	struct store *s = mk_two_refs();
	struct store_ref r[3];

	cr_assert_eq(store_get(s, "a", 1, &r[0]), STORE_HIT);
	cr_assert(store_release_later(s, &r[0]));
	cr_assert_null(r[0].data, "the ref is emptied at once");
	/* Without the ride, the third pin would find no record. */
	cr_assert_eq(store_get(s, "a", 1, &r[1]), STORE_HIT);
	cr_assert_eq(store_get(s, "a", 1, &r[2]), STORE_HIT);
	store_release(s, &r[1]);
	store_release(s, &r[2]);
	cr_assert_eq(store_test_check(s, NULL, 0), 0);
	store_destroy(s);
}

/* Until then it is a pin; a get in another stripe leaves it alone. */
Test(store, release_later_holds_until_flushed)
{
	struct store *s = mk_two_refs();
	struct store_ref ra, rb, rb2;

	cr_assert_eq(store_get(s, "a", 1, &ra), STORE_HIT);
	cr_assert(store_release_later(s, &ra));
	cr_assert_eq(store_get(s, "b", 1, &rb), STORE_HIT);
	cr_assert_eq(store_get(s, "b", 1, &rb2), STORE_NOREF,
	    "a's pin still holds its record");
	store_release_flush(s);
	cr_assert_eq(store_get(s, "b", 1, &rb2), STORE_HIT);
	store_release(s, &rb);
	store_release(s, &rb2);
	cr_assert_eq(store_test_check(s, NULL, 0), 0);
	store_destroy(s);
}

/* A process that needs records or room drops its own later unpins. */
Test(store, release_later_gives_way_to_a_set)
{
	struct store *s = mk_two_refs();
	struct store_ref ra, rb;

	cr_assert_eq(store_get(s, "a", 1, &ra), STORE_HIT);
	cr_assert_eq(store_get(s, "b", 1, &rb), STORE_HIT);
	cr_assert(store_release_later(s, &ra));
	cr_assert(store_release_later(s, &rb));
	/* The reservation needs a record: both were the later pins'. */
	cr_assert_eq(set_str(s, "c", "cherry", 0), STORE_OK);
	expect(s, "c", "cherry");
	cr_assert_eq(store_test_check(s, NULL, 0), 0);
	store_destroy(s);
}

/* A value deleted while pinned is unpinned at once, and its room freed. */
Test(store, release_later_of_a_deleted_value_is_now)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 1, .max_object = 8192,
		.max_slots = 2,
	};
	struct store *s = store_create(&o, NULL, 0);
	struct store_ref ref;
	uint64_t before, after, longest;
	static char big[8192];

	cr_assert_not_null(s);
	cr_assert_eq(store_attach(s, 1), 0);
	store_test_pool(s, &before, &longest);
	cr_assert_eq(store_set(s, "big", 3, big, sizeof(big), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "big", 3, &ref), STORE_HIT);
	cr_assert_eq(store_delete(s, "big", 3), STORE_OK);
	cr_assert_not(store_release_later(s, &ref));
	store_test_pool(s, &after, &longest);
	cr_assert_eq(after, before, "free pages %lu, were %lu",
	    (unsigned long)after, (unsigned long)before);
	cr_assert_eq(store_test_check(s, NULL, 0), 0);
	store_destroy(s);
}

static bool
woken(struct store *s, unsigned slot)
{
	struct pollfd p = { .fd = store_wake_fd(s, slot), .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, 0) != 1)
		return false;
	cr_assert_eq(read(p.fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	return true;
}

Test(store, lease_single_process)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;
	struct store_stats st;

	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	cr_assert_eq(ref.data, NULL);
	cr_assert_eq(ref.lease_deadline, fake_now + 10);
	cr_assert_eq(store_get(s, "k", 1, &ref), STORE_MISS);
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_WAIT);
	cr_assert(!woken(s, 0));
	cr_assert_eq(set_str(s, "k", "filled", 0), STORE_OK);
	cr_assert(woken(s, 0));
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_HIT);
	cr_assert_arr_eq(ref.data, "filled", 6);
	store_release(s, &ref);

	/* Giving up hands the lease to the next caller. */
	cr_assert_eq(store_lookup(s, "j", 1, &ref), STORE_LEASE);
	cr_assert_eq(store_lookup(s, "j", 1, &ref), STORE_WAIT);
	cr_assert_eq(store_lease_release(s, "j", 1), STORE_OK);
	cr_assert(woken(s, 0));
	cr_assert_eq(store_lease_release(s, "j", 1), STORE_NOT_FOUND);
	cr_assert_eq(store_lookup(s, "j", 1, &ref), STORE_LEASE);
	store_stats(s, &st);
	cr_assert_eq(st.lease_grants, 3);
	cr_assert_eq(st.lease_waits, 2);
	store_destroy(s);
}

Test(store, lease_stale_while_revalidate)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref, ref2;

	cr_assert_eq(set_str(s, "k", "old", 10), STORE_OK);
	fake_now += 10;
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_STALE_LEASE);
	cr_assert(ref.stale);
	cr_assert_arr_eq(ref.data, "old", 3);
	cr_assert_eq(store_lookup(s, "k", 1, &ref2), STORE_STALE_WAIT);
	cr_assert(ref2.stale);
	cr_assert_arr_eq(ref2.data, "old", 3);
	/* A plain get never serves the stale value. */
	cr_assert_eq(store_get(s, "k", 1, &(struct store_ref){0}),
	    STORE_MISS);
	cr_assert_eq(set_str(s, "k", "new", 10), STORE_OK);
	cr_assert(woken(s, 0));
	cr_assert_arr_eq(ref.data, "old", 3);	/* still pinned */
	store_release(s, &ref);
	store_release(s, &ref2);
	expect(s, "k", "new");
	store_destroy(s);
}

Test(store, lease_deadline_passes)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;
	struct store_stats st;

	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_WAIT);
	fake_now += 9;
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_WAIT);
	cr_assert(!woken(s, 0));
	fake_now += 1;
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	cr_assert(woken(s, 0));
	store_stats(s, &st);
	cr_assert_eq(st.lease_timeouts, 1);
	/* The sweep also ends lapsed leases and wakes the waiters. */
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_WAIT);
	fake_now += 10;
	store_sweep(s, 100000);
	cr_assert(woken(s, 0));
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	store_stats(s, &st);
	cr_assert_eq(st.lease_timeouts, 2);
	store_destroy(s);
}

Test(store, delete_ends_lease)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;

	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_WAIT);
	cr_assert_eq(store_delete(s, "k", 1), STORE_NOT_FOUND);
	cr_assert(woken(s, 0));
	cr_assert_eq(store_lookup(s, "k", 1, &ref), STORE_LEASE);
	store_destroy(s);
}

Test(store, sweep_reclaims_expired)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_stats st;
	char key[16];
	int i;

	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(set_str(s, key, "v", i < 30 ? 5 : 0), STORE_OK);
	}
	cr_assert_eq(store_sweep(s, 1000000), 0);
	fake_now += 5;
	cr_assert_eq(store_sweep(s, 1000000), 30);
	store_stats(s, &st);
	cr_assert_eq(st.expirations, 30);
	cr_assert_eq(st.items, 20);
	cr_assert_eq(store_sweep(s, 1000000), 0);
	store_destroy(s);
}

static bool
starts_with_a(const void *key, size_t klen, void *arg)
{
	return klen >= strlen(arg) && memcmp(key, arg, strlen(arg)) == 0;
}

Test(store, delete_matching_by_prefix)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;
	struct store_stats st;
	char key[16];
	int i;

	for (i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "%c/%d", i % 3 == 0 ? 'a' : 'b', i);
		/* Expired ones go too: stale copies are served otherwise. */
		cr_assert_eq(set_str(s, key, "v", i < 30 ? 5 : 0), STORE_OK);
	}
	fake_now += 5;
	/* A key being filled is its filler's, not the purge's. */
	cr_assert_eq(store_lookup(s, "a/fill", 6, &ref), STORE_LEASE);
	cr_assert_eq(store_delete_matching(s, starts_with_a, "a/"), 100);
	for (i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "%c/%d", i % 3 == 0 ? 'a' : 'b', i);
		cr_assert_eq(store_get(s, key, strlen(key), &ref),
		    i % 3 == 0 || i < 30 ? STORE_MISS : STORE_HIT, "%s", key);
		if (ref.data != NULL)
			store_release(s, &ref);
	}
	cr_assert_eq(store_lookup(s, "a/fill", 6, &ref), STORE_WAIT);
	cr_assert_eq(store_delete_matching(s, starts_with_a, "a/"), 0);
	store_stats(s, &st);
	cr_assert_eq(st.deletes, 100);
	store_destroy(s);
}

Test(store, bad_options)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 3, .max_object = 100,
		.max_slots = 2,
	};
	char err[256];
	struct store *s;

	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "power of two") != NULL, "%s", err);
	cr_assert_eq(store_check(&o, err, sizeof(err)), -1);
	/* Two of the largest value must fit; the message says how much. */
	o.stripes = 64;
	o.max_object = 1 << 20;
	o.size = 2 << 20;
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "size 2m is too small for max_object 1m with "
	    "64 stripes and 2 worker slots: at least ") != NULL, "%s", err);
	o.size = 3 << 20;
	cr_assert_eq(store_check(&o, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(s = store_create(&o, err, sizeof(err)), "%s", err);
	store_destroy(s);
	/* Many stripes in a small store: each stripe costs about 1 KiB,
	 * never a page of its own (issue 13: 64m with 64 stripes). */
	o.stripes = 4096;
	o.max_object = 4096;
	o.size = 8 << 20;
	cr_assert_not_null(s = store_create(&o, err, sizeof(err)), "%s", err);
	store_destroy(s);
}

Test(store, attach_checks_slot)
{
	struct store *s = mk(4 << 20, 4, 4096);

	cr_assert_eq(store_attach(s, 4), -1);
	cr_assert_eq(store_wake_fd(s, 4), -1);
	cr_assert_geq(store_wake_fd(s, 3), 0);
	store_destroy(s);
}

/* ---- versions and conditional stores (memcached's gets/cas/add...) ---- */

static uint64_t
cas_of(struct store *s, const char *k)
{
	struct store_ref ref;
	uint64_t cas;

	cr_assert_eq(store_get(s, k, strlen(k), &ref), STORE_HIT, "%s", k);
	cas = ref.cas;
	store_release(s, &ref);
	return cas;
}

Test(store, cas_is_new_with_every_store)
{
	struct store *s = mk(4 << 20, 4, 4096);
	uint64_t a1, b1, a2, got;

	cr_assert_eq(set_str(s, "a", "1", 0), STORE_OK);
	cr_assert_eq(set_str(s, "b", "1", 0), STORE_OK);
	a1 = cas_of(s, "a");
	b1 = cas_of(s, "b");
	cr_assert_neq(a1, 0);
	cr_assert_neq(a1, b1);
	cr_assert_eq(cas_of(s, "a"), a1, "a read does not change it");
	cr_assert_eq(store_set_if(s, "a", 1, "2", 1, 0, 7, STORE_IF_ANY, 0,
	    &got), STORE_OK);
	a2 = cas_of(s, "a");
	cr_assert_eq(got, a2);
	cr_assert_neq(a2, a1);
	cr_assert_neq(a2, b1);
	store_destroy(s);
}

Test(store, conditional_stores)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_stats st;
	uint64_t cas, newcas;

	/* add: only when there is no live value */
	cr_assert_eq(store_set_if(s, "k", 1, "v1", 2, 0, 7, STORE_IF_ABSENT,
	    0, NULL), STORE_OK);
	cr_assert_eq(store_set_if(s, "k", 1, "v2", 2, 0, 7, STORE_IF_ABSENT,
	    0, NULL), STORE_EXISTS);
	expect(s, "k", "v1");
	/* replace: only when there is one */
	cr_assert_eq(store_set_if(s, "none", 4, "x", 1, 0, 7,
	    STORE_IF_PRESENT, 0, NULL), STORE_NOT_FOUND);
	expect(s, "none", NULL);
	cr_assert_eq(store_set_if(s, "k", 1, "v3", 2, 0, 7, STORE_IF_PRESENT,
	    0, NULL), STORE_OK);
	expect(s, "k", "v3");
	/* cas: only over the version read */
	cas = cas_of(s, "k");
	cr_assert_eq(store_set_if(s, "k", 1, "v4", 2, 0, 7, STORE_IF_CAS,
	    cas + 1, NULL), STORE_EXISTS);
	expect(s, "k", "v3");
	cr_assert_eq(store_set_if(s, "k", 1, "v4", 2, 0, 7, STORE_IF_CAS,
	    cas, &newcas), STORE_OK);
	expect(s, "k", "v4");
	cr_assert_eq(store_set_if(s, "k", 1, "v5", 2, 0, 7, STORE_IF_CAS,
	    cas, NULL), STORE_EXISTS, "the old version is gone");
	cr_assert_eq(store_set_if(s, "gone", 4, "x", 1, 0, 7, STORE_IF_CAS,
	    newcas, NULL), STORE_NOT_FOUND);
	/* An expired value counts as none. */
	cr_assert_eq(set_str(s, "e", "old", 5), STORE_OK);
	fake_now += 5;
	cr_assert_eq(store_set_if(s, "e", 1, "x", 1, 0, 7, STORE_IF_PRESENT,
	    0, NULL), STORE_NOT_FOUND);
	cr_assert_eq(store_set_if(s, "e", 1, "new", 3, 0, 7,
	    STORE_IF_ABSENT, 0, NULL), STORE_OK);
	expect(s, "e", "new");
	/* Refused stores leave nothing reserved behind. */
	store_stats(s, &st);
	cr_assert_eq(st.items, 2);
	cr_assert_eq(st.sets, 5);
	store_destroy(s);
}

Test(store, commit_if_drops_a_refused_reservation)
{
	struct store *s = mk(4 << 20, 1, 4096);
	struct store_wref w;
	struct store_stats st;
	char err[256];

	cr_assert_eq(set_str(s, "k", "v", 0), STORE_OK);
	cr_assert_eq(store_reserve(s, "k", 1, 3, 0, 7, &w), STORE_OK);
	memcpy(w.data, "new", 3);
	cr_assert_eq(store_commit_if(s, &w, STORE_IF_ABSENT, 0, NULL),
	    STORE_EXISTS);
	cr_assert_eq(w.data, NULL);
	cr_assert_eq(store_commit(s, &w), STORE_EINVAL);
	expect(s, "k", "v");
	store_stats(s, &st);
	cr_assert_eq(st.items, 1);
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);
}

Test(store, touch)
{
	struct store *s = mk(4 << 20, 4, 4096);
	struct store_ref ref;

	cr_assert_eq(set_str(s, "k", "v", 10), STORE_OK);
	cr_assert_eq(store_touch(s, "k", 1, 100), STORE_OK);
	fake_now += 50;
	cr_assert_eq(store_get(s, "k", 1, &ref), STORE_HIT);
	cr_assert_eq(ref.expires, fake_now + 50);
	store_release(s, &ref);
	cr_assert_eq(store_touch(s, "k", 1, -1), STORE_OK);
	expect(s, "k", NULL);
	cr_assert_eq(store_touch(s, "k", 1, 100), STORE_NOT_FOUND);
	cr_assert_eq(store_touch(s, "x", 1, 100), STORE_NOT_FOUND);
	store_destroy(s);
}

/* ---- wakeups by key ---- */

static size_t
drain(struct store *s, unsigned slot, uint64_t *tok, size_t max,
    bool *overflow)
{
	uint64_t v;

	if (read(store_wake_fd(s, slot), &v, sizeof(v)) != sizeof(v))
		return 0;
	return store_wake_drain(s, slot, tok, max, overflow);
}

Test(store, a_lease_end_wakes_with_its_key)
{
	struct store *s = mk(4 << 20, 1, 4096);
	struct store_ref ref;
	uint64_t tok[8], ta, tb;
	bool overflow;

	cr_assert_eq(store_lookup(s, "a", 1, &ref), STORE_LEASE);
	ta = ref.wait_token;
	cr_assert_neq(ta, 0);
	cr_assert_eq(store_key_token(s, "a", 1), ta);
	cr_assert_eq(store_lookup(s, "b", 1, &ref), STORE_LEASE);
	tb = ref.wait_token;
	cr_assert_neq(ta, tb);
	cr_assert_eq(store_lookup(s, "a", 1, &ref), STORE_WAIT);
	cr_assert_eq(ref.wait_token, ta);
	cr_assert_eq(store_lookup(s, "b", 1, &ref), STORE_WAIT);
	cr_assert_eq(ref.wait_token, tb);
	/* Two waits on one key by one slot: one token. */
	cr_assert_eq(store_lookup(s, "a", 1, &ref), STORE_WAIT);
	cr_assert(!woken(s, 0));
	cr_assert_eq(set_str(s, "b", "filled", 0), STORE_OK);
	cr_assert_eq(drain(s, 0, tok, 8, &overflow), 1);
	cr_assert_eq(tok[0], tb, "only b's waiters");
	cr_assert(!overflow);
	cr_assert_eq(store_wake_drain(s, 0, tok, 8, &overflow), 0);
	cr_assert_eq(store_lease_release(s, "a", 1), STORE_OK);
	cr_assert_eq(drain(s, 0, tok, 8, &overflow), 1);
	cr_assert_eq(tok[0], ta);
	cr_assert(!overflow);
	/* Filling again wakes nobody: nobody waits any more. */
	cr_assert_eq(set_str(s, "b", "again", 0), STORE_OK);
	cr_assert(!woken(s, 0));
	store_destroy(s);
}

/* More keys waited on than a stripe's table holds: the rest wait on the
 * whole stripe and are woken with "overflow", never forgotten. */
Test(store, waiter_table_full_falls_back_to_the_stripe)
{
	struct store *s = mk(4 << 20, 1, 4096);
	struct store_ref ref;
	uint64_t tok[64];
	bool overflow;
	char key[16];
	int i;

	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(store_lookup(s, key, strlen(key), &ref),
		    STORE_LEASE);
		cr_assert_eq(store_lookup(s, key, strlen(key), &ref),
		    STORE_WAIT);
	}
	cr_assert_eq(set_str(s, "k39", "v", 0), STORE_OK);
	drain(s, 0, tok, 64, &overflow);
	cr_assert(overflow, "k39's wait did not fit in the table");
	cr_assert_eq(set_str(s, "k0", "v", 0), STORE_OK);
	cr_assert_eq(drain(s, 0, tok, 64, &overflow), 1);
	cr_assert_eq(tok[0], store_key_token(s, "k0", 2));
	store_destroy(s);
}

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

static int64_t fake_now = 1000000000;

static int64_t
fake_clock(void *arg)
{
	return fake_now;
}

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

static enum store_result
set_str(struct store *s, const char *k, const char *v, int64_t ttl)
{
	return store_set(s, k, strlen(k), v, strlen(v), ttl, 7);
}

/* Asserts that k is a hit with value v (NULL: a miss). */
static void
expect(struct store *s, const char *k, const char *v)
{
	struct store_ref ref;
	enum store_result r = store_get(s, k, strlen(k), &ref);

	if (v == NULL) {
		cr_assert_eq(r, STORE_MISS, "%s: want a miss, got %d", k, r);
		return;
	}
	cr_assert_eq(r, STORE_HIT, "%s: want a hit, got %d", k, r);
	cr_assert_eq(ref.len, strlen(v), "%s: length", k);
	cr_assert_arr_eq(ref.data, v, ref.len, "%s: value", k);
	cr_assert_eq(ref.flags, 7);
	store_release(s, &ref);
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

Test(store, bad_options)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 3, .max_object = 100,
		.max_slots = 2,
	};
	char err[256];

	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "power of two") != NULL, "%s", err);
	o.stripes = 64;
	o.size = 1 << 20;
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "too small") != NULL, "%s", err);
}

Test(store, attach_checks_slot)
{
	struct store *s = mk(4 << 20, 4, 4096);

	cr_assert_eq(store_attach(s, 4), -1);
	cr_assert_eq(store_wake_fd(s, 4), -1);
	cr_assert_geq(store_wake_fd(s, 3), 0);
	store_destroy(s);
}

/* A fresh directory for store files, removed by the test's own exit. */
static char *
tmpdir(void)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/store-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	return dir;
}

static struct store *
mk_file(const char *path, size_t size, unsigned stripes, bool persist,
    char *err, size_t errlen)
{
	struct store_options o = {
		.path = path, .size = size, .stripes = stripes,
		.max_object = 4096, .persist = persist, .max_slots = 4,
	};
	struct store *s = store_create(&o, err, errlen);

	cr_assert_not_null(s, "store_create: %s", err);
	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	return s;
}

static void
cleanup(const char *dir, const char *path)
{
	unlink(path);
	rmdir(dir);
}

Test(store_persist, warm_restart_keeps_contents)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;
	struct store_stats st;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: new file");
	set_str(s, "a", "apple", 0);
	set_str(s, "b", "banana", 0);
	set_str(s, "gone", "x", 0);
	store_delete(s, "gone", 4);
	store_destroy(s);

	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "kept 2 items; 0 of 4 stripes wiped");
	cr_assert_str_eq(store_note(s), err);
	expect(s, "a", "apple");
	expect(s, "b", "banana");
	expect(s, "gone", NULL);
	store_stats(s, &st);
	cr_assert_eq(st.items, 2);
	cr_assert_eq(st.sets, 3);	/* counters survive too */
	store_destroy(s);

	/* Without persist the same file starts empty. */
	s = mk_file(path, 4 << 20, 4, false, err, sizeof(err));
	expect(s, "a", NULL);
	store_destroy(s);
	cleanup(dir, path);
}

Test(store_persist, different_size_starts_empty)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	set_str(s, "a", "apple", 0);
	store_destroy(s);
	s = mk_file(path, 8 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: file size 4194304, want "
	    "8388608");
	expect(s, "a", NULL);
	set_str(s, "a", "again", 0);
	store_destroy(s);
	s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
	cr_assert(strstr(err, "started empty: stripes") == err, "%s", err);
	expect(s, "a", NULL);
	store_destroy(s);
	cleanup(dir, path);
}

Test(store_persist, corrupt_page_table_wipes_that_stripe)
{
	char *dir = tmpdir(), path[128], err[256], key[16];
	struct store *s;
	struct store_stats st;
	int fd, i, hits = 0;
	uint32_t bad = 0x00000030;	/* class 0x30, claims 0 used */

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 1, true, err, sizeof(err));
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		set_str(s, key, "v", 0);
	}
	store_destroy(s);
	/* The first page table entry of stripe 0 sits after the buckets;
	 * find it by its value: class 0, 20 chunks used. */
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	{
		uint32_t want = 0 | (20u << 8), v;
		off_t off;

		for (off = 4096; pread(fd, &v, 4, off) == 4; off += 4)
			if (v == want)
				break;
		cr_assert_eq(v, want, "page table entry not found");
		cr_assert_eq(pwrite(fd, &bad, 4, off), 4);
	}
	close(fd);
	s = mk_file(path, 4 << 20, 1, true, err, sizeof(err));
	cr_assert_str_eq(err, "kept 0 items; 1 of 1 stripes wiped");
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		hits += store_get(s, key, strlen(key),
		    &(struct store_ref){0}) == STORE_HIT;
	}
	cr_assert_eq(hits, 0);
	store_stats(s, &st);
	cr_assert_eq(st.items, 0);
	set_str(s, "k1", "works", 0);
	expect(s, "k1", "works");
	store_destroy(s);
	cleanup(dir, path);
}

static void
die_in_lock(void *arg)
{
	raise(SIGKILL);
}

/* The whole server dies while a stripe is locked: that stripe is wiped,
 * the others are kept although the file was not closed cleanly. */
Test(store_persist, crash_in_lock_wipes_only_that_stripe)
{
	char *dir = tmpdir(), path[128], err[256], key[16];
	struct store *s;
	struct store_ref ref;
	int status, i, hits = 0;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/cache", dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
		for (i = 0; i < 64; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			set_str(s, key, "v", 0);
		}
		store_test_set_hook(s, STORE_HOOK_COMMIT, die_in_lock, NULL);
		set_str(s, "k0", "never", 0);
		_exit(1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
	cr_assert(strstr(err, "; 1 of 8 stripes wiped") != NULL, "%s", err);
	cr_assert_eq(store_get(s, "k0", 2, &ref), STORE_MISS);
	for (i = 1; i < 64; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			cr_assert_arr_eq(ref.data, "v", 1);
			hits++;
			store_release(s, &ref);
		}
	}
	cr_assert(hits > 32 && hits < 63, "hits %d", hits);
	store_destroy(s);
	cleanup(dir, path);
}

Test(store_persist, stats_read_file)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;
	struct store_stats st;
	int fd;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, false, err, sizeof(err));
	set_str(s, "a", "1", 0);
	set_str(s, "b", "2", 0);
	expect(s, "a", "1");
	expect(s, "z", NULL);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st.sets, 2);
	cr_assert_eq(st.gets, 2);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.items, 2);
	store_destroy(s);

	/* A damaged header is an error, never a guess. */
	fd = open(path, O_RDWR);
	cr_assert_eq(pwrite(fd, "\x01", 1, 16), 1);
	close(fd);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	cr_assert(strstr(err, "header") != NULL, "%s", err);
	fd = open(path, O_RDWR);
	cr_assert_eq(pwrite(fd, "X", 1, 0), 1);
	close(fd);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	cr_assert(strstr(err, "bad magic") != NULL, "%s", err);
	cr_assert_eq(store_stats_read_file("/nonexistent", &st, err,
	    sizeof(err)), -1);
	cleanup(dir, path);
}

Test(store_persist, second_master_refused)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store_options o = {
		.path = NULL, .size = 4 << 20, .stripes = 4,
		.max_object = 4096, .max_slots = 4,
	};
	struct store *s;

	snprintf(path, sizeof(path), "%s/cache", dir);
	o.path = path;
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "in use") != NULL, "%s", err);
	store_destroy(s);
	cleanup(dir, path);
}

/* A 1 MiB tmpfs in a private mount namespace stands in for a full disk. */
Test(store_persist, fallocate_failure_is_an_error)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store_options o = {
		.path = path, .size = 4 << 20, .stripes = 4,
		.max_object = 4096, .max_slots = 4,
	};
	struct store *s;

	if (unshare(CLONE_NEWNS) == -1 &&
	    unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
		cr_skip_test("cannot make a mount namespace: %s",
		    strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=1m") == -1)
		cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/cache", dir);
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "cannot reserve 4194304 bytes: No space left "
	    "on device") != NULL, "%s", err);
	o.size = 512 << 10;
	o.stripes = 1;
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	store_destroy(s);
	umount(dir);
	rmdir(dir);
}

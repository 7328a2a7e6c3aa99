/*
 * store_update() and store_acquire(): the read-modify-write and the
 * holder count that rate limits (and memcached's incr, decr and cas) use,
 * across processes and with a holder that dies.
 */
#include <sys/wait.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/store.h"
#include "tests/shm/single.h"

static struct store *
mk(unsigned slots)
{
	struct store_options o = {
		.size = 4 << 20, .stripes = 4, .max_object = 4096,
		.max_slots = slots,
	};
	char err[256];
	struct store *s = store_create(&o, err, sizeof(err));

	cr_assert_not_null(s, "store_create: %s", err);
	return s;
}

/* Adds *arg to a 64-bit counter; -1 leaves it when it would pass 100. */
static long
add(const void *old, size_t oldlen, void *out, void *arg)
{
	uint64_t v = 0;

	if (old != NULL) {
		cr_assert_eq(oldlen, sizeof(v));
		memcpy(&v, old, sizeof(v));
	}
	v += *(uint64_t *)arg;
	if (v > 100)
		return -1;
	memcpy(out, &v, sizeof(v));
	return (long)sizeof(v);
}

static uint64_t
value(struct store *s, const char *k)
{
	struct store_ref ref;
	uint64_t v;

	cr_assert_eq(store_get(s, k, strlen(k), &ref), STORE_HIT);
	cr_assert_eq(ref.len, sizeof(v));
	memcpy(&v, ref.data, sizeof(v));
	store_release(s, &ref);
	return v;
}

Test(store_update, creates_updates_and_leaves_alone)
{
	struct store *s = mk(2);
	uint64_t one = 1, many = 200;

	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_update(s, "n", 1, 0, 3, add, &one), STORE_OK);
	cr_assert_eq(store_update(s, "n", 1, 0, 3, add, &one), STORE_OK);
	cr_assert_eq(value(s, "n"), 2);
	cr_assert_eq(store_update(s, "n", 1, 0, 3, add, &many),
	    STORE_UNCHANGED);
	cr_assert_eq(value(s, "n"), 2);
	store_destroy(s);
}

Test(store_update, pinned_value_is_replaced_not_changed_under_a_reader)
{
	struct store *s = mk(2);
	struct store_ref ref;
	uint64_t one = 1, v;

	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_update(s, "n", 1, 0, 0, add, &one), STORE_OK);
	cr_assert_eq(store_get(s, "n", 1, &ref), STORE_HIT);
	cr_assert_eq(store_update(s, "n", 1, 0, 0, add, &one), STORE_OK);
	memcpy(&v, ref.data, sizeof(v));
	cr_assert_eq(v, 1, "the reader's copy must not change");
	store_release(s, &ref);
	cr_assert_eq(value(s, "n"), 2);
	store_destroy(s);
}

Test(store_update, expired_value_starts_again)
{
	struct store *s = mk(2);
	uint64_t five = 5;

	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_update(s, "n", 1, 10, 0, add, &five), STORE_OK);
	fake_now += 11;
	cr_assert_eq(store_update(s, "n", 1, 10, 0, add, &five), STORE_OK);
	cr_assert_eq(value(s, "n"), 5);
	store_destroy(s);
}

/* Four processes add 1000 times each: no update is lost. */
Test(store_update, atomic_across_processes)
{
	struct store *s = mk(5);
	uint64_t one = 1;
	int status, i, j;
	pid_t pids[4];

	for (i = 0; i < 4; i++) {
		if ((pids[i] = fork()) == 0) {
			if (store_attach(s, (unsigned)i + 1) != 0)
				_exit(2);
			for (j = 0; j < 25; j++)
				if (store_update(s, "c", 1, 0, 0, add, &one) !=
				    STORE_OK)
					_exit(3);
			_exit(0);
		}
	}
	for (i = 0; i < 4; i++) {
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(value(s, "c"), 100);
	store_destroy(s);
}

Test(store_acquire, counts_holders_and_reaps_the_dead)
{
	struct store *s = mk(3);
	struct store_ref a, b, c;
	int status;
	pid_t pid;
	int p[2];
	char ch;

	cr_assert_eq(pipe(p), 0);
	if ((pid = fork()) == 0) {
		struct store_ref r;

		if (store_attach(s, 1) != 0 ||
		    store_acquire(s, "k", 1, 2, &r) != STORE_HIT)
			_exit(2);
		if (write(p[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(p[0], &ch, 1), 1);
	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_acquire(s, "k", 1, 2, &a), STORE_HIT);
	cr_assert_eq(store_acquire(s, "k", 1, 2, &b), STORE_UNCHANGED);
	/* The other holder dies holding its pin: the master reaps it. */
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	store_reap_slot(s, 1);
	cr_assert_eq(store_acquire(s, "k", 1, 2, &b), STORE_HIT);
	cr_assert_eq(store_acquire(s, "k", 1, 2, &c), STORE_UNCHANGED);
	store_release(s, &a);
	cr_assert_eq(store_acquire(s, "k", 1, 2, &c), STORE_HIT);
	store_release(s, &b);
	store_release(s, &c);
	store_destroy(s);
}

/*
 * In a full store, a change finds no free memory under its stripe lock:
 * it drops the lock while eviction makes room, then starts again (and an
 * acquire alike).  Nothing is lost: the values come out right.
 */
Test(store_update, full_store_evicts_then_starts_again)
{
	struct store *s = mk(2);
	struct store_stats st;
	struct store_ref ref;
	static char big[4000];
	uint64_t one = 1, evicted;
	char key[32];
	int i;

	cr_assert_eq(store_attach(s, 0), 0);
	memset(big, 'x', sizeof(big));
	for (i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "fill%d", i);
		cr_assert_eq(store_set(s, key, strlen(key), big, sizeof(big),
		    0, 0), STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	cr_assert_gt(st.evictions, 0, "the store never filled");
	evicted = st.evictions;
	cr_assert_eq(store_update(s, "n", 1, 0, 0, add, &one), STORE_OK);
	cr_assert_eq(store_update(s, "n", 1, 0, 0, add, &one), STORE_OK);
	cr_assert_eq(value(s, "n"), 2);
	cr_assert_eq(store_acquire(s, "k", 1, 1, &ref), STORE_HIT);
	store_release(s, &ref);
	store_stats(s, &st);
	cr_assert_gt(st.evictions, evicted, "room was made for the changes");
	store_destroy(s);
}

/*
 * Helpers of the single-process store tests: a clock that a test moves
 * (store_set_clock(s, fake_clock, NULL), then fake_now += ...), and
 * string values with flags 7.  The multi-process tests have procs.h.
 */
#ifndef CORRAL_TEST_STORE_SINGLE_H
#define CORRAL_TEST_STORE_SINGLE_H

#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "shm/store.h"

static int64_t fake_now = 1000000000;

static inline int64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static inline enum store_result
set_str(struct store *s, const char *k, const char *v, int64_t ttl)
{
	return store_set(s, k, strlen(k), v, strlen(v), ttl, 7);
}

/* Asserts that k is a hit with value v and flags 7 (v NULL: a miss). */
static inline void
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

#endif

/*
 * Test-only entry points of the store.  They exist only in the copy of
 * shm/ that the unit tests link (built with -DCORRAL_TEST_HOOKS, with
 * shm/store_test.c, see tests/include.am); corral itself has neither the
 * calls nor the hooks.
 */
#ifndef CORRAL_STORE_TEST_H
#define CORRAL_STORE_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/store.h"

/* Where a test hook runs; each point is inside the lock(s) named. */
enum store_hook_point {
	STORE_HOOK_COMMIT,	/* stripe: old value unlinked, new not yet */
	STORE_HOOK_POOL_SPLIT,	/* pool: a free run split, the new run not
				 * yet marked used */
	STORE_HOOK_POOL_FREE,	/* pool (in a stripe): a run being given
				 * back and merged with its neighbours */
	STORE_HOOK_CARVE,	/* pool: a new slab half cut into chunks */
	STORE_HOOK_EVICT,	/* no lock: victims chosen, not yet evicted */
	STORE_HOOK_REWRITE,	/* stripe: store_update() half way through
				 * rewriting a value in place */
	STORE_HOOK_POINTS
};

/* Replaces the key hash (to force collisions). */
void store_test_set_hash(struct store *s,
    uint64_t (*hash)(const void *, size_t));
/* Calls hook(arg) at point; NULL removes it. */
void store_test_set_hook(struct store *s, enum store_hook_point point,
    void (*hook)(void *), void *arg);
/*
 * Checks every invariant of the pool and the stripes (taking the locks
 * in turn): 0, or -1 and what is wrong in err.
 */
int store_test_check(struct store *s, char *err, size_t errlen);
/* Free pages in the pool, and the longest free run. */
void store_test_pool(struct store *s, uint64_t *free_pages,
    uint64_t *longest_run);
/*
 * Whether item_at() takes in (bytes from a slab's start) as the start of a
 * chunk of class cls, and that class's chunk size in *chunk; false and 0
 * past the slab classes.
 */
bool store_test_chunk_start(struct store *s, unsigned cls, uint64_t in,
    uint64_t *chunk);

#endif

/*
 * Test-only entry points of the store.  They exist only in the copy of
 * shm/ that the unit tests link (built with -DCORRAL_TEST_HOOKS, see
 * tests/include.am); corral itself has neither the calls nor the hooks.
 */
#ifndef CORRAL_STORE_TEST_H
#define CORRAL_STORE_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "shm/store.h"

/* Where a test hook runs; each point is inside the lock(s) named. */
enum store_hook_point {
	STORE_HOOK_COMMIT,	/* stripe lock, old value unlinked, new not */
};

/* Replaces the key hash (to force collisions). */
void store_test_set_hash(struct store *s,
    uint64_t (*hash)(const void *, size_t));
/* Calls hook(arg) at point; NULL removes it. */
void store_test_set_hook(struct store *s, enum store_hook_point point,
    void (*hook)(void *), void *arg);

#endif

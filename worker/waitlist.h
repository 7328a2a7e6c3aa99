/*
 * Requests waiting for a cache fill, keyed by object (Varnish parks a
 * request on the busy object's waiting list and hsh_rush wakes only
 * those).  A waiter is a struct embedded in the request's state, filed in a
 * per-worker hash table under a 64-bit token that names the object's key;
 * when the fill of that key ends, waitlist_wake(token) calls back the
 * waiters of that key alone.  Each waiter also has a timer of its own (the
 * lock timeout), separate from any I/O event of its owner.
 *
 * The tokens come from the store (store_ref.wait_token, the store's name
 * for a key), so the store can say which keys' leases ended.  Until the
 * store reports them, the worker wakes everyone on each wake-up
 * (waitlist_wake_all) and every waiter looks its key up again.
 *
 * Callbacks may add waiters (even the one called, under any token) and
 * remove any waiter: a wake-up never calls a waiter added during it.
 * Per worker; internal to worker/.
 */
#ifndef CORRAL_WAITLIST_H
#define CORRAL_WAITLIST_H

#include <stdbool.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/event_struct.h>

struct waiter;

/* Called once a waiter is taken off the list: woken, or timed out. */
typedef void (*waiter_fn)(struct waiter *w, bool timed_out);

struct waiter {				/* fields private to waitlist.c */
	uint64_t token;
	struct waiter *next, **pprev;	/* in a bucket or the waking list */
	struct event timer;
	waiter_fn fn;
	bool queued;
	uint64_t since_us;		/* when it began to wait */
};

/* Files w under token, with a timer of timeout_ms (0: none). */
void waitlist_add(struct waiter *w, uint64_t token, int timeout_ms,
    waiter_fn fn);

/* Takes w off the list if it is on it; its callback is not called. */
void waitlist_remove(struct waiter *w);

/* True while w is on the list. */
bool waitlist_queued(const struct waiter *w);

/* Calls back the waiters of token. */
void waitlist_wake(uint64_t token);

/* Calls back every waiter: the store could not say which keys. */
void waitlist_wake_all(void);

/* How many wait; for tests and the status page. */
unsigned waitlist_count(void);

/* Frees the table (no waiter may be left); at exit. */
void waitlist_free_all(void);

#endif

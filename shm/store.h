/*
 * The shared-memory store: one mapping made by the master before it forks,
 * used by every worker.  Keys (opaque bytes: the store assumes no format;
 * each user keeps a prefix of its own) map to opaque values; a hit is a
 * pinned reference into the mapping, so the caller writes the value to a
 * socket without a copy and without holding any lock.  Leases make sure
 * that one process, across all of them, refills a missing or expired key
 * while the others wait.
 *
 * Memory belongs to the whole store: values of every size share one pool
 * of pages, and the store evicts (least recently used first) only when
 * that pool is full.
 *
 * Life cycle: the master calls store_create(), then forks; each child calls
 * store_attach() with its slot number.  When a child dies the master calls
 * store_reap_slot() for that slot (outside the signal handler), which drops
 * its pins, reservations and leases.  The master calls store_sweep() now and
 * then and store_destroy() at exit, after the workers are gone.
 *
 * TTLs follow memcached: 0 never expires, 1..2592000 are seconds from now,
 * larger values are an absolute Unix time, negative values are expired.
 * An expired entry is never a HIT.  store_get() reclaims it; store_lookup()
 * keeps it readable as stale while a lease to refresh it is held, until
 * it is replaced or store_sweep() reclaims it.
 *
 * After STORE_WAIT, the caller's slot is registered on that key, whose
 * token is ref.wait_token.  When the lease on the key ends (the value is
 * stored, the filler gives up, dies or runs out of time) the token is
 * queued for the slot and its eventfd, store_wake_fd(), becomes readable:
 * read the 8-byte counter, then store_wake_drain() the tokens and look up
 * those keys again.  Wakeups can be spurious.  A waiter may also arm a
 * timer for ref.lease_deadline, since a lapsed lease only wakes waiters
 * when someone looks the key up or sweeps.
 *
 * Every stored value has a version, its cas (memcached's gets/cas): a
 * 64-bit number that no other value of the store had, new with every
 * store.  store_commit_if() and store_set_if() store only under a
 * condition on the key's current value (add, replace, cas).
 *
 * A struct store is per process and not thread-safe; get, lookup, set and
 * the other per-key calls need store_attach() first.
 */
#ifndef CORRAL_STORE_H
#define CORRAL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "shm/store_counters.h"

#define STORE_KEY_MAX		1024	/* longest key, bytes */
#define STORE_TTL_RELATIVE_MAX	2592000	/* 30 days: larger is absolute */

struct store;

struct store_options {
	const char *path;	/* file for a copy and corral -s; NULL: none */
	/* Opens path read-write (created if missing); NULL: open(2) with
	 * O_NOFOLLOW.  The master passes its checks (master/fsafe.c). */
	int (*open_file)(const char *path, char *err, size_t errlen);
	size_t size;		/* bytes of the whole mapping */
	unsigned stripes;	/* lock stripes, a power of two */
	size_t max_object;	/* largest value stored */
	bool persist;		/* keep the contents in path across restarts */
	unsigned max_slots;	/* processes that attach: 0..max_slots-1 */
	unsigned max_refs;	/* pins + leases one slot holds; 0: 1024 */
	unsigned lease_timeout;	/* seconds a filler has; 0: 10 */
};

enum store_result {
	STORE_OK = 0,		/* set, delete, touch or release done */
	STORE_HIT,		/* fresh value, pinned in the ref */
	STORE_MISS,		/* store_get() found nothing fresh */
	STORE_LEASE,		/* caller is now the one filler */
	STORE_WAIT,		/* someone else fills: wait on the wake fd */
	STORE_STALE_LEASE,	/* STORE_LEASE, and a stale value is pinned */
	STORE_STALE_WAIT,	/* STORE_WAIT, and a stale value is pinned */
	STORE_NOT_FOUND,	/* no live value (delete, replace, cas...) */
	STORE_EXISTS,		/* add found a value; cas found another */
	STORE_TOO_LARGE,	/* value over max_object: not stored */
	STORE_NOMEM,		/* nothing could be evicted to make room */
	STORE_NOREF,		/* this slot holds max_refs pins already */
	STORE_EINVAL,		/* bad key or argument, or not attached */
	STORE_UNCHANGED,	/* store_update(): fn left the key alone;
				   store_acquire(): max holders already */
};

/* When a conditional store goes ahead (memcached's set/add/replace/cas). */
enum store_cond {
	STORE_IF_ANY = 0,	/* always */
	STORE_IF_ABSENT,	/* no live value */
	STORE_IF_PRESENT,	/* a live value */
	STORE_IF_CAS,		/* a live value whose cas is the one given */
};

/* A pinned value; the fields are read-only for the caller. */
struct store_ref {
	const void *data;	/* the value, in the mapping */
	size_t len;
	uint32_t flags;		/* the caller's metadata from the set */
	int64_t expires;	/* absolute Unix time, 0: never */
	int64_t lease_deadline;	/* LEASE, WAIT: when the filler's lease lapses */
	uint64_t wait_token;	/* LEASE, WAIT: the key's token, never 0 */
	uint64_t cas;		/* the value's version */
	bool stale;		/* expired, served while being refreshed */
	uint64_t off_;		/* private */
	uint32_t rec_;		/* private */
};

/* Space reserved for a value that the caller copies in without the lock. */
struct store_wref {
	void *data;
	size_t len;
	uint64_t off_;		/* private */
	uint32_t rec_;		/* private */
};

/* The counters of shm/store_counters.h, summed over the whole store. */
struct store_stats {
#define STORE_X_FIELD(name, kind, help)	uint64_t name;
	STORE_COUNTERS(STORE_X_FIELD)
#undef STORE_X_FIELD
};

/* One row of the counter table, for printing them all in order. */
struct store_counter_info {
	const char *name;
	const char *kind;	/* "counter" or "gauge" */
	const char *help;
	size_t offset;		/* of the uint64_t in struct store_stats */
};
extern const struct store_counter_info store_counter_table[];
extern const size_t store_counter_count;

/*
 * What store_create() would refuse, without making anything: the layout,
 * the machine's memory, the file's folder and room.  0 or -1 + err.
 */
int store_check(const struct store_options *opts, char *err, size_t errlen);
/* Master, before fork: makes the store (persist: reloads it); NULL + err. */
struct store *store_create(const struct store_options *opts, char *err,
    size_t errlen);
/* Child, after fork: takes slot; drops what a dead holder left. 0 or -1. */
int store_attach(struct store *s, unsigned slot);
/* The eventfd that wakes slot's waiters; readable means "drain". */
int store_wake_fd(const struct store *s, unsigned slot);
/*
 * Takes up to max tokens of keys whose lease ended from slot's queue.
 * *overflow: some were lost, so every waiter of the slot must look again.
 * Call after reading the eventfd, until it returns less than max.
 */
size_t store_wake_drain(struct store *s, unsigned slot, uint64_t *tokens,
    size_t max, bool *overflow);
/* The token of a key, as in ref.wait_token, without a lookup. */
uint64_t store_key_token(const struct store *s, const void *key,
    size_t klen);
/* Why a persistent store kept or dropped its contents ("" if no file). */
const char *store_note(const struct store *s);

/* Fresh value or STORE_MISS; never leases. Expired entries are reclaimed. */
enum store_result store_get(struct store *s, const void *key, size_t klen,
    struct store_ref *ref);
/* HIT, or a lease outcome (see enum store_result) for a missing key. */
enum store_result store_lookup(struct store *s, const void *key, size_t klen,
    struct store_ref *ref);
/* Unpins a value from get or lookup; the ref is then empty. */
void store_release(struct store *s, struct store_ref *ref);
/*
 * The same, later: under the lock of this process's next get or lookup in
 * the value's stripe (a hit on a hot key then locks once, not twice), or
 * at store_release_flush(), or when this process needs room.  Until then
 * it is a pin like any other (a dead process's are reaped).  A value no
 * longer linked is unpinned at once.  True if left for later: the caller
 * must then see that store_release_flush() runs soon.
 */
bool store_release_later(struct store *s, struct store_ref *ref);
/* Unpins everything store_release_later() left, one lock per stripe. */
void store_release_flush(struct store *s);

/* Stores a copy of the value; also completes a lease on the key. */
enum store_result store_set(struct store *s, const void *key, size_t klen,
    const void *val, size_t vlen, int64_t ttl, uint32_t flags);
/* store_set() under cond; *newcas (if not NULL) gets the new version. */
enum store_result store_set_if(struct store *s, const void *key,
    size_t klen, const void *val, size_t vlen, int64_t ttl, uint32_t flags,
    enum store_cond cond, uint64_t cas, uint64_t *newcas);
/* Reserves vlen bytes at w->data for the caller to fill without the lock. */
enum store_result store_reserve(struct store *s, const void *key,
    size_t klen, size_t vlen, int64_t ttl, uint32_t flags,
    struct store_wref *w);
/* Publishes a filled reservation, replacing the key and ending its lease. */
enum store_result store_commit(struct store *s, struct store_wref *w);
/* store_commit() under cond; if it does not hold, the reservation goes. */
enum store_result store_commit_if(struct store *s, struct store_wref *w,
    enum store_cond cond, uint64_t cas, uint64_t *newcas);
/* Drops a reservation that will not be committed. */
void store_abort(struct store *s, struct store_wref *w);
/* A new TTL for a live value (memcached's touch). */
enum store_result store_touch(struct store *s, const void *key, size_t klen,
    int64_t ttl);
/* Removes the key and ends any lease on it. */
enum store_result store_delete(struct store *s, const void *key,
    size_t klen);
/* Gives up this slot's lease on key; the waiters are woken. */
enum store_result store_lease_release(struct store *s, const void *key,
    size_t klen);

/*
 * A read-modify-write of a small value, atomic across processes: under the
 * key's stripe lock, fn gets the value (NULL and 0 when there is none or it
 * expired) and writes the new one at out, which has room for
 * STORE_UPDATE_MAX bytes, returning its length, or -1 to leave the key
 * alone.  fn must be pure: no I/O, no locks, no store calls; it may run
 * twice.  A written key gets ttl, flags and a new cas.  Returns STORE_OK,
 * STORE_UNCHANGED, STORE_NOMEM or STORE_EINVAL.  Rate limits use it; so
 * can memcached's incr and decr.
 */
#define STORE_UPDATE_MAX	256
typedef long (*store_update_fn)(const void *old, size_t oldlen, void *out,
    void *arg);
enum store_result store_update(struct store *s, const void *key,
    size_t klen, int64_t ttl, uint32_t flags, store_update_fn fn, void *arg);

/*
 * Counts holders: pins key (made with an empty value when missing) unless
 * max pins are held on it already, across all processes.  STORE_HIT when
 * pinned (store_release() lets go; a dead holder's pin is reaped with its
 * slot), STORE_UNCHANGED when max are held, or an error.  limit_conn uses
 * it.
 */
enum store_result store_acquire(struct store *s, const void *key,
    size_t klen, unsigned max, struct store_ref *ref);

/*
 * Deletes every value whose key match() accepts (a purge by prefix),
 * expired or not; keys being filled under a lease are left to their
 * filler.  match runs under a stripe lock: pure, no store calls.  One
 * pass over the whole index, a few buckets per lock hold: O(entries),
 * for rare administrative deletes.  Returns how many went.
 */
typedef bool (*store_match_fn)(const void *key, size_t klen, void *arg);
size_t store_delete_matching(struct store *s, store_match_fn match,
    void *arg);

/* Reclaims expired entries and lapsed leases; returns entries reclaimed. */
size_t store_sweep(struct store *s, size_t budget);
/* Master: releases every pin, reservation and lease of a dead slot. */
void store_reap_slot(struct store *s, unsigned slot);
/* Sums the counters of every stripe. */
void store_stats(const struct store *s, struct store_stats *out);
/* Reads the counters through a store's file, the running server's or a
 * saved copy, without joining it.  0 or -1 + err. */
int store_stats_read_file(const char *path, struct store_stats *out,
    char *err, size_t errlen);
/*
 * The process that made the store forked and exited (a master detaching):
 * the child becomes its keeper, which saves the file at the end and is
 * named in it for corral -s.  -1 when the file cannot be written.
 */
int store_moved(struct store *s);

/* Unmaps; the creator writes the file (the whole store with persist). */
void store_destroy(struct store *s);
/*
 * Master, now and then: 1 (and what happened, for the log) if the file
 * was cut or replaced since the last call.  The store itself is never in
 * danger; the file is made whole again for the copy at the stop.
 */
int store_watch_file(struct store *s, char *msg, size_t msglen);

/* The largest value this store takes (kept from its start until a restart). */
size_t store_max_object(const struct store *s);
/* Counts a value not stored for its size, without reserving anything. */
void store_count_too_large(struct store *s, const void *key, size_t klen);

/* Replaces time(): seconds since the epoch, for tests. */
void store_set_clock(struct store *s, int64_t (*now)(void *), void *arg);

#endif

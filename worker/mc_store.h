/*
 * memcached items in the shared store: what the memcached listener
 * (worker/mc_conn.c) writes and the HTTP side (memcached_key) serves.
 *
 * An item's key is CACHE_NS_MEMCACHED ('M') and the client's key, so
 * nothing a client writes can be taken for a cached response or a file.
 * Its value is a small header (when it was stored, whether it was
 * invalidated) and the client's bytes; the store's flags field holds the
 * client's 32-bit flags and the store's cas is the item's cas.  TTLs are
 * memcached's, as the store's are.
 *
 * flush_all is a marker key ('M' alone, never a client key: those have at
 * least one byte) whose value says from when on items are void, and
 * whose own cas is the first cas that survives an immediate flush: every
 * lookup checks it, so a flush is seen at once by every worker.
 */
#ifndef CORRAL_MC_STORE_H
#define CORRAL_MC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/store.h"
#include "worker/mc_parse.h"

/* In front of the client's bytes in every value. */
struct mc_item {
	uint32_t time;			/* Unix time it was stored */
	uint32_t bits;			/* MC_ITEM_* */
};
#define MC_ITEM_STALE	0x01		/* md ... I: invalid until replaced */
#define MC_ITEM_WON	0x02		/* made by mg N: its token is taken */

#define MC_STORE_KEY	(1 + MC_KEY_MAX)

/* A fetched item, pinned until mc_release(). */
struct mc_got {
	struct store_ref ref;
	const struct mc_item *item;
	const char *data;		/* the client's bytes */
	size_t len;
};

/* The store key of a client key; returns its length. */
size_t mc_store_key(char *out, const char *key, size_t klen);

/* The largest value the store takes with the header in front. */
size_t mc_value_max(struct store *s);

/* A live, unflushed item, pinned; false when there is none. */
bool mc_fetch(struct store *s, const char *key, size_t klen,
    struct mc_got *g);
void mc_release(struct store *s, struct mc_got *g);

/*
 * Reserves room for vlen bytes of a new value under key; *data is where
 * the caller copies them.  Then mc_commit() under cond, or store_abort().
 */
enum store_result mc_reserve(struct store *s, const char *key, size_t klen,
    size_t vlen, int64_t exptime, uint32_t flags, uint32_t bits,
    struct store_wref *w, char **data);
enum store_result mc_commit(struct store *s, struct store_wref *w,
    enum store_cond cond, uint64_t cas, uint64_t *newcas);

/* Drops the item if flush_all voided it (before a conditional store). */
void mc_settle(struct store *s, const char *key, size_t klen);

/* delete, touch: STORE_OK or STORE_NOT_FOUND (flushed items count as
 * not found). */
enum store_result mc_delete(struct store *s, const char *key, size_t klen);
enum store_result mc_touch(struct store *s, const char *key, size_t klen,
    int64_t exptime);

/* flush_all [delay]: items stored before now + delay are void then. */
enum store_result mc_flush(struct store *s, int64_t delay);

/* The store's TTL for memcached's exptime at now (the same rules; a
 * remaining TTL for reconstructed values keeps its absolute time). */
int64_t mc_ttl_of_expires(int64_t expires);

#endif

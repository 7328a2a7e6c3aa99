/*
 * Changes made under the key's stripe lock from start to end: a
 * read-modify-write of a small value (store_update: rate limits, and
 * memcached's incr and decr), and a count of holders (store_acquire:
 * limit_conn).  Memory is taken from the pool inside the lock when it has
 * some; when only eviction would make room, the lock is dropped for it and
 * the change starts again (fn is pure, so running it twice is harmless).
 * Lock rules: see stripe.c and pool.c.
 */
#include <string.h>

#include "shm/store_impl.h"

/* An item of total bytes from what the pool has free (stripe lock held,
 * the pool lock taken inside it); NULL when only eviction would do. */
static struct item *
do_alloc_free(struct store *s, size_t total, uint64_t hash, uint32_t *rec)
{
	struct item *it;
	bool norec;

	if (pool_lock(s) == -1)
		return NULL;
	it = do_pool_alloc(s, (unsigned)class_for(s, total), total, hash, rec,
	    &norec);
	pool_unlock(s);
	return it;
}

/*
 * A spare item of need bytes for a change under stripe si's lock: from
 * what the pool has free, or else made with the lock dropped, since only
 * eviction would make room and it cannot run under a stripe lock; then
 * *relocked says that the caller must start its change again.  Otherwise
 * the error, the lock released.
 */
static enum store_result
do_spare(struct store *s, unsigned si, size_t need, uint64_t hash,
    struct item **spare, uint32_t *rec, bool *relocked)
{
	enum store_result why;

	*relocked = false;
	if ((*spare = do_alloc_free(s, need, hash, rec)) != NULL)
		return STORE_OK;
	stripe_unlock(s, si);
	if ((*spare = store_alloc(s, need, false, hash, rec, &why)) == NULL) {
		if (why == STORE_NOMEM)
			CNT_ATOMIC(stripe_at(s, si), nomem);
		return why;
	}
	if (stripe_lock(s, si) == -1)
		return STORE_EINVAL;
	*relocked = true;
	return STORE_OK;
}

/* Links a reserved item holding key and val in place of old. */
static void
do_put(struct store *s, unsigned si, struct item *it, uint32_t rec,
    const void *key, size_t klen, const void *val, size_t vlen,
    int64_t exptime, uint32_t flags, struct item *old)
{
	it->klen = (uint16_t)klen;
	it->vlen = (uint32_t)vlen;
	it->flags = flags;
	it->exptime = exptime;
	memcpy(item_key(it), key, klen);
	memcpy(item_value(it), val, vlen);
	it->vcsum = value_csum(s, val, vlen);
	it->cas = __atomic_fetch_add(&s->h->cas_next, 1, __ATOMIC_RELAXED);
	it->csum = item_csum(it);
	if (old != NULL)
		do_item_unlink(s, si, old);
	do_item_link(s, si, it);
	rec_clear(s, (unsigned)s->slot, rec, item_off(s, it) | REC_RESV);
	it->refcount--;
}

/*
 * The key's current item, a dead one reclaimed (stripe lock held).  NULL
 * if there is none, or only a placeholder or an expired value.
 */
static struct item *
do_current(struct store *s, unsigned si, uint64_t hash, const void *key,
    size_t klen, int64_t now, struct item **found)
{
	struct item *it = do_item_find(s, si, hash, key, klen);

	if (it != NULL && !(it->iflags & IT_PLACEHOLDER) &&
	    item_expired(it, now) && !item_leased(it)) {
		CNT_ADD(stripe_at(s, si), expirations, 1);
		do_item_unlink(s, si, it);
		it = NULL;
	}
	*found = it;
	return it != NULL && is_live(it, now) ? it : NULL;
}

enum store_result
store_update(struct store *s, const void *key, size_t klen, int64_t ttl,
    uint32_t flags, store_update_fn fn, void *arg)
{
	unsigned char out[STORE_UPDATE_MAX];
	size_t need = ITEM_HDR + ALIGN(klen, 8) + STORE_UPDATE_MAX;
	struct item *it, *found, *spare = NULL;
	enum store_result r, why;
	int64_t now = store_now(s);
	uint32_t rec = 0;
	uint64_t hash;
	unsigned si;
	long n;
	bool relocked;

	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
again:
	it = do_current(s, si, hash, key, klen, now, &found);
	n = fn(it != NULL ? item_value(it) : NULL, it != NULL ? it->vlen : 0,
	    out, arg);
	if (n < 0 || n > STORE_UPDATE_MAX) {
		r = n < 0 ? STORE_UNCHANGED : STORE_EINVAL;
	} else if (it != NULL && !item_leased(it) && it->refcount == 0 &&
	    it->vlen == (uint32_t)n) {
		/*
		 * Nobody reads it: rewritten in place.  Its checksum is
		 * spoilt first, so a process killed mid-copy leaves an item
		 * that the lock's repair drops (and counts), not a value
		 * half old and half new that the next reader would trust.
		 */
		__atomic_store_n(&it->csum, ~it->csum, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		memcpy(item_value(it), out, (size_t)n / 2);
		TEST_HOOK(s, STORE_HOOK_REWRITE);
		memcpy(item_value(it) + n / 2, out + n / 2, (size_t)(n - n / 2));
		it->vcsum = value_csum(s, out, (size_t)n);
		it->exptime = ttl_to_exptime(ttl, now);
		it->flags = flags;
		it->cas = __atomic_fetch_add(&s->h->cas_next, 1,
		    __ATOMIC_RELAXED);
		it->csum = item_csum(it);
		do_lru_bump(s, si, it);
		r = STORE_OK;
	} else {
		if (spare == NULL) {
			if ((why = do_spare(s, si, need, hash, &spare, &rec,
			    &relocked)) != STORE_OK)
				return why;
			if (relocked)
				goto again;
		}
		do_put(s, si, spare, rec, key, klen, out, (size_t)n,
		    ttl_to_exptime(ttl, now), flags, found);
		spare = NULL;
		r = STORE_OK;
	}
	if (spare != NULL)
		do_resv_drop(s, spare, rec);
	if (r == STORE_OK)
		CNT_ADD(stripe_at(s, si), sets, 1);
	stripe_unlock(s, si);
	return r;
}

/* Pins it if fewer than max hold it (stripe lock held). */
static enum store_result
do_take(struct store *s, unsigned si, struct item *it, unsigned max,
    struct store_ref *ref)
{
	int rec;

	if (it->refcount >= max)
		return STORE_UNCHANGED;
	if ((rec = rec_claim(s, item_off(s, it) | REC_PIN)) < 0)
		return STORE_NOREF;
	it->refcount++;
	ref->data = item_value(it);
	ref->len = it->vlen;
	ref->flags = it->flags;
	ref->expires = it->exptime;
	ref->cas = it->cas;
	ref->off_ = item_off(s, it);
	ref->rec_ = (uint32_t)rec;
	do_lru_bump(s, si, it);
	return STORE_HIT;
}

enum store_result
store_acquire(struct store *s, const void *key, size_t klen, unsigned max,
    struct store_ref *ref)
{
	size_t need = ITEM_HDR + ALIGN(klen, 8);
	struct item *it, *found, *spare = NULL;
	enum store_result r, why;
	int64_t now = store_now(s);
	uint32_t rec = 0;
	uint64_t hash;
	unsigned si;
	bool relocked;

	memset(ref, 0, sizeof(*ref));
	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
again:
	it = do_current(s, si, hash, key, klen, now, &found);
	if (it == NULL && found != NULL &&
	    (found->refcount > 0 || item_leased(found))) {
		r = STORE_UNCHANGED;	/* someone fills it or reads it */
	} else if (it != NULL) {
		r = do_take(s, si, it, max, ref);
	} else {
		if (spare == NULL) {
			if ((why = do_spare(s, si, need, hash, &spare, &rec,
			    &relocked)) != STORE_OK)
				return why;
			if (relocked)
				goto again;
		}
		do_put(s, si, spare, rec, key, klen, "", 0, 0, 0, found);
		it = spare;
		spare = NULL;
		r = do_take(s, si, it, max, ref);
	}
	if (spare != NULL)
		do_resv_drop(s, spare, rec);
	stripe_unlock(s, si);
	return r;
}

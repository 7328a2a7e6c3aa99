/*
 * What workers do with the store: get, lookup with leases, set through a
 * reservation (plain or conditional), touch, delete, release, and the
 * sweep.  Each public function takes one stripe lock, calls do_* helpers,
 * and drops it; memory is found (and made, by eviction) before the lock
 * is taken, and wakeups and the copy of a value happen with no lock held.
 * Unpins left for later (store_release_later) ride on the lock of the
 * process's next get or lookup in their stripe.
 * Lock rules: see stripe.c and pool.c.
 */
#include <string.h>
#include <unistd.h>

#include "shm/store_impl.h"

#define SWEEP_BATCH	16	/* buckets looked at per lock hold */

/* memcached's rule: up to 30 days is relative, above it absolute. */
int64_t
ttl_to_exptime(int64_t ttl, int64_t now)
{
	if (ttl == 0)
		return 0;
	if (ttl < 0)
		return -1;	/* non-zero and in the past: expired */
	if (ttl <= STORE_TTL_RELATIVE_MAX)
		return now + ttl;
	return ttl;
}

static bool
key_ok(const struct store *s, size_t klen)
{
	return s->slot >= 0 && klen > 0 && klen <= STORE_KEY_MAX;
}

static bool
is_placeholder(const struct item *it)
{
	return (it->iflags & IT_PLACEHOLDER) != 0;
}

/* A value that a get may return: not a placeholder, not expired. */
bool
is_live(const struct item *it, int64_t now)
{
	return !is_placeholder(it) && !item_expired(it, now);
}

static uint64_t
next_cas(struct store *s)
{
	return __atomic_fetch_add(&s->h->cas_next, 1, __ATOMIC_RELAXED);
}

/* Pins it for the caller; the slot record comes first so a crash leaves
 * a trace that store_reap_slot() finds. */
static enum store_result
do_pin(struct store *s, struct item *it, bool stale, struct store_ref *ref)
{
	int rec = rec_claim(s, item_off(s, it) | REC_PIN);

	if (rec < 0)
		return STORE_NOREF;
	it->refcount++;
	ref->data = item_value(it);
	ref->len = it->vlen;
	ref->flags = it->flags;
	ref->expires = it->exptime;
	ref->cas = it->cas;
	ref->stale = stale;
	ref->off_ = item_off(s, it);
	ref->rec_ = (uint32_t)rec;
	return STORE_HIT;
}

/* A hit on a fresh item: pin it, count it and move it up its LRU. */
static enum store_result
do_hit(struct store *s, unsigned si, struct item *it, struct store_ref *ref)
{
	struct stripe *st = stripe_at(s, si);
	enum store_result r = do_pin(s, it, false, ref);

	if (r == STORE_HIT) {
		CNT_ADD(st, hits, 1);
		do_lru_bump(s, si, it);
	} else {
		CNT_ADD(st, misses, 1);
	}
	return r;
}

/* Hashes a key and takes its stripe's lock; -1 for a bad key or lock. */
int
lock_key(struct store *s, const void *key, size_t klen, uint64_t *hash,
    unsigned *si)
{
	if (!key_ok(s, klen))
		return -1;
	*hash = key_hash(s, key, klen);
	*si = stripe_of_hash(s, *hash);
	return stripe_lock(s, *si);
}

/* Drops this slot's pin record idx on it, under its stripe's lock. */
static void
do_unpin(struct store *s, struct item *it, uint64_t off, uint32_t idx)
{
	uint64_t v = off | REC_PIN;
	uint64_t *rec = &slot_at(s, (unsigned)s->slot)->rec[idx];

	if (__atomic_load_n(rec, __ATOMIC_RELAXED) == v) {
		rec_clear(s, (unsigned)s->slot, idx, v);
		do_item_unpin(s, it);
	}
}

/*
 * Drops the pins left for later in stripe si, which is locked (unless
 * locking it failed: then only their records go, as store_release()
 * does when it cannot lock).  While its record holds, a pinned item is
 * there (a repair keeps the items that records pin), so its offset, ours,
 * needs no item_at(): the state and stripe are checked all the same.
 */
static void
do_release_later(struct store *s, unsigned si, bool locked)
{
	uint64_t *rec = slot_at(s, (unsigned)s->slot)->rec;
	struct later *l = s->later;
	struct item *it;
	uint64_t v;
	unsigned i, n = 0;

	for (i = 0; i < s->nlater; i++) {
		if (l[i].si != si) {
			l[n++] = l[i];
			continue;
		}
		v = l[i].off | REC_PIN;
		if (__atomic_load_n(&rec[l[i].rec], __ATOMIC_RELAXED) != v)
			continue;	/* a repair took it */
		it = (struct item *)(s->base + l[i].off);
		rec_clear(s, (unsigned)s->slot, l[i].rec, v);
		if (locked && (it->state == ST_LINKED ||
		    it->state == ST_ZOMBIE) && stripe_of_hash(s, it->hash) == si)
			do_item_unpin(s, it);
	}
	s->nlater = n;
}

enum store_result
store_get(struct store *s, const void *key, size_t klen,
    struct store_ref *ref)
{
	uint64_t hash;
	unsigned si;
	struct stripe *st;
	struct item *it;
	enum store_result r = STORE_MISS;
	int64_t now = store_now(s);

	memset(ref, 0, sizeof(*ref));
	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
	if (s->nlater != 0)
		do_release_later(s, si, true);
	st = stripe_at(s, si);
	CNT_ADD(st, gets, 1);
	it = do_item_find(s, si, hash, key, klen);
	if (it != NULL && !is_placeholder(it) && item_expired(it, now) &&
	    !item_leased(it)) {
		/* Lazy reclaim; a leased one stays for stale readers. */
		CNT_ADD(st, expirations, 1);
		do_item_unlink(s, si, it);
		it = NULL;
	}
	if (it == NULL || !is_live(it, now))
		CNT_ADD(st, misses, 1);
	else
		r = do_hit(s, si, it, ref);
	stripe_unlock(s, si);
	return r;
}

/* Makes this slot the one filler of it; a placeholder dies on failure. */
static enum store_result
do_lease_grant(struct store *s, unsigned si, struct item *it, int64_t now,
    struct store_ref *ref)
{
	int rec = rec_claim(s, item_off(s, it) | REC_LEASE);

	if (rec < 0) {
		if (is_placeholder(it))
			do_item_unlink(s, si, it);
		return STORE_NOREF;
	}
	it->lease_slot = (uint16_t)s->slot;
	it->lease_pid = (int32_t)s->pid;
	it->lease_rec = (uint32_t)rec;
	it->lease_deadline = now + (int64_t)s->l.lease_timeout;
	ref->lease_deadline = it->lease_deadline;
	ref->wait_token = token_of(it->hash);
	CNT_ADD(stripe_at(s, si), lease_grants, 1);
	return STORE_LEASE;
}

/* Registers this slot as a waiter of the key: its lease end wakes it. */
static enum store_result
do_lease_wait(struct store *s, unsigned si, struct item *it,
    struct store_ref *ref)
{
	ref->wait_token = token_of(it->hash);
	do_wait_register(s, si, ref->wait_token);
	ref->lease_deadline = it->lease_deadline;
	CNT_ADD(stripe_at(s, si), lease_waits, 1);
	return STORE_WAIT;
}

/* Turns a reserved item into the placeholder that holds a new lease. */
static void
do_placeholder_link(struct store *s, unsigned si, struct item *it,
    uint32_t rec)
{
	it->exptime = 0;
	it->iflags = IT_PLACEHOLDER;
	it->cas = next_cas(s);
	it->csum = item_csum(it);
	do_item_link(s, si, it);
	rec_clear(s, (unsigned)s->slot, rec, item_off(s, it) | REC_RESV);
	it->refcount--;
}

/* The lease part of a lookup that found no fresh value. */
static enum store_result
do_lookup_miss(struct store *s, unsigned si, struct item *it,
    struct store_ref *ref)
{
	struct stripe *st = stripe_at(s, si);
	int64_t now = store_now(s);
	enum store_result r;
	bool stale = !is_placeholder(it);

	if (!item_leased(it))
		r = do_lease_grant(s, si, it, now, ref);
	else
		r = do_lease_wait(s, si, it, ref);
	if (r == STORE_NOREF || !stale || do_pin(s, it, true, ref) !=
	    STORE_HIT)
		return r;
	CNT_ADD(st, stale_hits, 1);
	return r == STORE_LEASE ? STORE_STALE_LEASE : STORE_STALE_WAIT;
}

/* A placeholder for key, made with no lock held; NULL if no room. */
static struct item *
new_placeholder(struct store *s, uint64_t hash, const void *key,
    size_t klen, uint32_t *rec, enum store_result *why)
{
	struct item *it;

	it = store_alloc(s, ITEM_HDR + ALIGN(klen, 8), true, hash, rec, why);
	if (it == NULL)
		return NULL;
	it->klen = (uint16_t)klen;
	memcpy(item_key(it), key, klen);
	return it;
}

/* A reservation (a pending placeholder, a spare) not needed after all. */
void
do_resv_drop(struct store *s, struct item *it, uint32_t rec)
{
	rec_clear(s, (unsigned)s->slot, rec, item_off(s, it) | REC_RESV);
	do_item_unpin(s, it);
}

enum store_result
store_lookup(struct store *s, const void *key, size_t klen,
    struct store_ref *ref)
{
	uint64_t hash;
	unsigned si;
	struct stripe *st;
	struct item *it, *ph = NULL;
	enum store_result r;
	int64_t now = store_now(s);
	uint32_t rec = 0;

	memset(ref, 0, sizeof(*ref));
	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
	if (s->nlater != 0)
		do_release_later(s, si, true);
	st = stripe_at(s, si);
	CNT_ADD(st, gets, 1);
again:
	it = do_item_find(s, si, hash, key, klen);
	if (it != NULL && item_leased(it) && it->lease_deadline <= now) {
		/* The filler ran out of time: the lease is up for grabs. */
		CNT_ADD(st, lease_timeouts, 1);
		if (do_lease_end(s, si, it))
			it = NULL;
	}
	if (it != NULL && is_live(it, now)) {
		r = do_hit(s, si, it, ref);
	} else if (it == NULL && ph == NULL) {
		/* Memory is found with no lock held, then look again. */
		stripe_unlock(s, si);
		if ((ph = new_placeholder(s, hash, key, klen, &rec, &r)) ==
		    NULL) {
			if (r == STORE_NOMEM)
				CNT_ATOMIC(st, nomem);
			if (stripe_lock(s, si) == 0) {
				CNT_ADD(st, misses, 1);
				stripe_unlock(s, si);
			}
			return r;
		}
		if (stripe_lock(s, si) == -1)
			return STORE_EINVAL;
		goto again;
	} else {
		CNT_ADD(st, misses, 1);
		if (it == NULL) {
			do_placeholder_link(s, si, ph, rec);
			it = ph;
			ph = NULL;
		}
		r = do_lookup_miss(s, si, it, ref);
	}
	if (ph != NULL)		/* someone else made the key meanwhile */
		do_resv_drop(s, ph, rec);
	stripe_unlock(s, si);
	return r;
}

void
store_release(struct store *s, struct store_ref *ref)
{
	struct item *it;
	int si;

	if (ref->off_ == 0 || s->slot < 0 || ref->rec_ >= s->l.max_refs) {
		memset(ref, 0, sizeof(*ref));
		return;
	}
	if ((si = item_stripe_lock_at(s, ref->off_, &it)) >= 0) {
		do_unpin(s, it, ref->off_, ref->rec_);
		stripe_unlock(s, (unsigned)si);
	} else {
		/* A repair dropped the item: only the record is left. */
		rec_clear(s, (unsigned)s->slot, ref->rec_, ref->off_ | REC_PIN);
	}
	memset(ref, 0, sizeof(*ref));
}

bool
store_release_later(struct store *s, struct store_ref *ref)
{
	const struct item *p = NULL;

	if (ref->off_ != 0 && s->slot >= 0 && ref->rec_ < s->l.max_refs)
		p = item_peek(s, ref->off_);
	/* A value deleted or replaced meanwhile goes now: its last unpin
	 * gives its room back.  (Pinned, an item keeps its hash.) */
	if (p == NULL || __atomic_load_n(&p->state, __ATOMIC_RELAXED) !=
	    ST_LINKED) {
		store_release(s, ref);
		return false;
	}
	if (s->nlater == LATER_MAX)
		store_release_flush(s);
	s->later[s->nlater].off = ref->off_;
	s->later[s->nlater].rec = ref->rec_;
	s->later[s->nlater].si = stripe_of_hash(s,
	    __atomic_load_n(&p->hash, __ATOMIC_RELAXED));
	s->nlater++;
	memset(ref, 0, sizeof(*ref));
	return true;
}

void
store_release_flush(struct store *s)
{
	unsigned si;

	while (s->nlater > 0) {
		si = s->later[0].si;
		if (stripe_lock(s, si) == 0) {
			do_release_later(s, si, true);
			stripe_unlock(s, si);
		} else {
			do_release_later(s, si, false);
		}
	}
}

enum store_result
store_reserve(struct store *s, const void *key, size_t klen, size_t vlen,
    int64_t ttl, uint32_t flags, struct store_wref *w)
{
	uint64_t hash;
	struct item *it;
	enum store_result why;
	uint32_t rec;

	memset(w, 0, sizeof(*w));
	if (!key_ok(s, klen))
		return STORE_EINVAL;
	hash = key_hash(s, key, klen);
	if (vlen > s->l.max_object) {
		CNT_ATOMIC(stripe_at(s, stripe_of_hash(s, hash)), too_large);
		return STORE_TOO_LARGE;
	}
	it = store_alloc(s, ITEM_HDR + ALIGN(klen, 8) + vlen, false, hash,
	    &rec, &why);
	if (it == NULL) {
		if (why == STORE_NOMEM)
			CNT_ATOMIC(stripe_at(s, stripe_of_hash(s, hash)),
			    nomem);
		return why;
	}
	/* Ours alone until the commit: no lock needed to fill it in. */
	it->klen = (uint16_t)klen;
	it->vlen = (uint32_t)vlen;
	it->flags = flags;
	it->exptime = ttl_to_exptime(ttl, store_now(s));
	memcpy(item_key(it), key, klen);
	w->data = item_value(it);
	w->len = vlen;
	w->off_ = item_off(s, it);
	w->rec_ = rec;
	return STORE_OK;
}

/* The reservation behind w, if it is still this slot's; else NULL. */
static struct item *
do_wref_item(struct store *s, const struct store_wref *w)
{
	struct item *it = item_at(s, w->off_);
	uint64_t *rec = slot_at(s, (unsigned)s->slot)->rec;

	if (it == NULL || it->state != ST_RESV ||
	    __atomic_load_n(&rec[w->rec_], __ATOMIC_RELAXED) !=
	    (w->off_ | REC_RESV))
		return NULL;
	return it;
}

static bool
wref_ok(const struct store *s, const struct store_wref *w)
{
	return w->off_ != 0 && s->slot >= 0 && w->rec_ < s->l.max_refs;
}

/* Does the key's current value (old, maybe NULL) allow the store? */
static enum store_result
cond_check(const struct item *old, int64_t now, enum store_cond cond,
    uint64_t cas)
{
	bool live = old != NULL && is_live(old, now);

	switch (cond) {
	case STORE_IF_ABSENT:
		return live ? STORE_EXISTS : STORE_OK;
	case STORE_IF_PRESENT:
		return live ? STORE_OK : STORE_NOT_FOUND;
	case STORE_IF_CAS:
		if (!live)
			return STORE_NOT_FOUND;
		return old->cas == cas ? STORE_OK : STORE_EXISTS;
	default:
		return STORE_OK;
	}
}

/* Links a filled reservation in place of old (stripe lock held). */
static void
do_commit(struct store *s, unsigned si, struct item *it, struct item *old,
    uint32_t rec)
{
	if (old != NULL)	/* also ends its lease, wakes */
		do_item_unlink(s, si, old);
	TEST_HOOK(s, STORE_HOOK_COMMIT);
	it->cas = next_cas(s);
	it->csum = item_csum(it);
	do_item_link(s, si, it);
	rec_clear(s, (unsigned)s->slot, rec, item_off(s, it) | REC_RESV);
	it->refcount--;
	CNT_ADD(stripe_at(s, si), sets, 1);
}

enum store_result
store_commit_if(struct store *s, struct store_wref *w, enum store_cond cond,
    uint64_t cas, uint64_t *newcas)
{
	struct item *it, *old;
	enum store_result r = STORE_EINVAL;
	uint32_t vcsum;
	int si;

	if (newcas != NULL)
		*newcas = 0;
	if (!wref_ok(s, w))
		return STORE_EINVAL;
	/* The checksum is taken before the lock, over what was written. */
	vcsum = value_csum(s, w->data, w->len);
	if ((si = item_stripe_lock(s, w->off_)) < 0) {
		memset(w, 0, sizeof(*w));
		return STORE_EINVAL;
	}
	if ((it = do_wref_item(s, w)) != NULL) {
		it->vcsum = vcsum;
		old = do_item_find(s, (unsigned)si, it->hash, item_key(it),
		    it->klen);
		r = cond_check(old, store_now(s), cond, cas);
		if (r == STORE_OK) {
			do_commit(s, (unsigned)si, it, old, w->rec_);
			if (newcas != NULL)
				*newcas = it->cas;
		} else {
			do_resv_drop(s, it, w->rec_);
		}
	}
	stripe_unlock(s, (unsigned)si);
	memset(w, 0, sizeof(*w));
	return r;
}

enum store_result
store_commit(struct store *s, struct store_wref *w)
{
	return store_commit_if(s, w, STORE_IF_ANY, 0, NULL);
}

void
store_abort(struct store *s, struct store_wref *w)
{
	struct item *it;
	int si;

	if (wref_ok(s, w) && (si = item_stripe_lock(s, w->off_)) >= 0) {
		if ((it = do_wref_item(s, w)) != NULL)
			do_resv_drop(s, it, w->rec_);
		stripe_unlock(s, (unsigned)si);
	}
	memset(w, 0, sizeof(*w));
}

enum store_result
store_set_if(struct store *s, const void *key, size_t klen, const void *val,
    size_t vlen, int64_t ttl, uint32_t flags, enum store_cond cond,
    uint64_t cas, uint64_t *newcas)
{
	struct store_wref w;
	enum store_result r;

	r = store_reserve(s, key, klen, vlen, ttl, flags, &w);
	if (r != STORE_OK)
		return r;
	memcpy(w.data, val, vlen);
	return store_commit_if(s, &w, cond, cas, newcas);
}

enum store_result
store_set(struct store *s, const void *key, size_t klen, const void *val,
    size_t vlen, int64_t ttl, uint32_t flags)
{
	return store_set_if(s, key, klen, val, vlen, ttl, flags,
	    STORE_IF_ANY, 0, NULL);
}

enum store_result
store_touch(struct store *s, const void *key, size_t klen, int64_t ttl)
{
	uint64_t hash;
	unsigned si;
	struct item *it;
	enum store_result r = STORE_NOT_FOUND;
	int64_t now = store_now(s);

	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
	it = do_item_find(s, si, hash, key, klen);
	if (it != NULL && is_live(it, now)) {
		it->exptime = ttl_to_exptime(ttl, now);
		it->csum = item_csum(it);
		do_lru_bump(s, si, it);
		r = STORE_OK;
	}
	stripe_unlock(s, si);
	return r;
}

enum store_result
store_delete(struct store *s, const void *key, size_t klen)
{
	uint64_t hash;
	unsigned si;
	struct item *it;
	enum store_result r = STORE_NOT_FOUND;

	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
	it = do_item_find(s, si, hash, key, klen);
	if (it != NULL) {
		if (is_live(it, store_now(s))) {
			CNT_ADD(stripe_at(s, si), deletes, 1);
			r = STORE_OK;
		}
		do_item_unlink(s, si, it);
	}
	stripe_unlock(s, si);
	return r;
}

enum store_result
store_lease_release(struct store *s, const void *key, size_t klen)
{
	uint64_t hash;
	unsigned si;
	struct item *it;
	enum store_result r = STORE_NOT_FOUND;

	if (lock_key(s, key, klen, &hash, &si) == -1)
		return STORE_EINVAL;
	it = do_item_find(s, si, hash, key, klen);
	if (it != NULL && item_leased(it) && it->lease_slot == s->slot &&
	    it->lease_pid == s->pid) {
		do_lease_end(s, si, it);
		r = STORE_OK;
	}
	stripe_unlock(s, si);
	return r;
}

/*
 * Calls fn on each linked item of one bucket (fn may unlink it); returns
 * the items looked at.  A bad link ends the walk and is noted.
 */
static size_t
do_bucket_each(struct store *s, unsigned si, uint64_t *bucket,
    void (*fn)(struct store *, unsigned, struct item *, void *), void *arg)
{
	struct item *it;
	uint64_t off = *bucket;
	size_t n = 0, max = s->l.npages * PAGE / CHUNK_MIN;

	while (off != 0 && n++ < max) {
		it = item_at(s, off);
		if (it == NULL || it->state != ST_LINKED) {
			s->bad = true;
			break;
		}
		off = it->hnext;	/* read before it may be unlinked */
		fn(s, si, it, arg);
	}
	return n;
}

struct sweep {
	int64_t now;
	size_t reclaimed;
};

/* One item of the sweep: a lapsed lease ends, an expired value goes. */
static void
do_sweep_item(struct store *s, unsigned si, struct item *it, void *arg)
{
	struct stripe *st = stripe_at(s, si);
	struct sweep *sw = arg;

	if (item_leased(it) && it->lease_deadline <= sw->now) {
		CNT_ADD(st, lease_timeouts, 1);
		if (do_lease_end(s, si, it))
			return;
	}
	if (!is_placeholder(it) && !item_leased(it) &&
	    item_expired(it, sw->now)) {
		CNT_ADD(st, expirations, 1);
		do_item_unlink(s, si, it);
		sw->reclaimed++;
	}
}

size_t
store_sweep(struct store *s, size_t budget)
{
	uint64_t nb = s->l.stripe_buckets, total = s->l.nbuckets, pos, b, n;
	uint64_t *base;
	struct sweep sw = { store_now(s), 0 };
	size_t seen = 0;
	unsigned si;

	/* At most one pass over the whole index per call. */
	for (n = 0; seen < budget && n < (total + SWEEP_BATCH - 1) /
	    SWEEP_BATCH; n++) {
		/* Shared cursor: sweepers in several processes split work. */
		pos = __atomic_fetch_add(&s->h->sweep_pos, SWEEP_BATCH,
		    __ATOMIC_RELAXED) % total;
		si = (unsigned)(pos / nb);
		if (stripe_lock(s, si) == -1)
			break;
		base = bucket_at(s, si, 0);
		for (b = pos % nb; b < pos % nb + SWEEP_BATCH && b < nb; b++)
			seen += 1 + do_bucket_each(s, si, &base[b],
			    do_sweep_item, &sw);
		stripe_unlock(s, si);
	}
	return sw.reclaimed;
}

struct matching {
	store_match_fn match;
	void *arg;
	size_t deleted;
};

/* One item of store_delete_matching(). */
static void
do_match_item(struct store *s, unsigned si, struct item *it, void *arg)
{
	struct matching *m = arg;

	if (is_placeholder(it) || !m->match(item_key(it), it->klen, m->arg))
		return;
	CNT_ADD(stripe_at(s, si), deletes, 1);
	do_item_unlink(s, si, it);
	m->deleted++;
}

size_t
store_delete_matching(struct store *s, store_match_fn match, void *arg)
{
	uint64_t nb = s->l.stripe_buckets, b, end;
	struct matching m = { match, arg, 0 };
	unsigned si;

	if (s->slot < 0)
		return 0;
	/* A few buckets per lock hold, as the sweep: the others wait no
	 * longer than for any store call. */
	for (si = 0; si < s->l.stripes; si++)
		for (b = 0; b < nb; b = end) {
			end = b + SWEEP_BATCH < nb ? b + SWEEP_BATCH : nb;
			if (stripe_lock(s, si) == -1)
				return m.deleted;
			for (; b < end; b++)
				do_bucket_each(s, si, bucket_at(s, si, 0) + b,
				    do_match_item, &m);
			stripe_unlock(s, si);
		}
	return m.deleted;
}

/*
 * Wakeups keyed by object.  A lookup that must wait registers its slot on
 * the key's token in the stripe's waiter table; when the lease on that key
 * ends, the token goes into the wake ring of each slot registered on it,
 * and only those slots' eventfds are written.  The worker drains its ring
 * and wakes only the requests waiting for those keys.
 *
 * When the table is full, a slot is registered on the whole stripe (the
 * waitbits), and any lease end in the stripe wakes it with "overflow":
 * its worker then wakes all its waiters, as a full ring does too.
 *
 * Rings are written by whoever ends a lease, under that key's stripe
 * lock, so several stripes' holders may write one ring at once: each
 * entry is claimed with a compare-and-swap from 0, and the owner empties
 * entries with an exchange.  A writer that dies leaves at most one token
 * too many, never a stuck ring.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shm/store_impl.h"

/* A key's token: its hash, never 0 (0 marks an empty ring entry). */
uint64_t
token_of(uint64_t hash)
{
	return hash != 0 ? hash : 1;
}

uint64_t
store_key_token(const struct store *s, const void *key, size_t klen)
{
	return token_of(key_hash(s, key, klen));
}

uint64_t *
waitbits_at(const struct store *s, unsigned si)
{
	return (uint64_t *)(s->base + s->l.waitbits_off) +
	    (uint64_t)si * s->l.wait_words;
}

static void
mark_wake(struct store *s, unsigned slot)
{
	s->wake[slot / 64] |= 1ULL << (slot % 64);
	s->wake_any = true;
}

/* Registers this slot as waiting on token (stripe lock held). */
void
do_wait_register(struct store *s, unsigned si, uint64_t token)
{
	struct stripe *st = stripe_at(s, si);
	struct waiter *w, *freew = NULL;
	unsigned i, slot = (unsigned)s->slot;

	for (i = 0; i < STRIPE_WAITERS; i++) {
		w = &st->waiters[i];
		if (w->token == token && w->slot == slot)
			return;
		if (w->token == 0 && freew == NULL)
			freew = w;
	}
	if (freew != NULL) {
		freew->slot = slot;
		freew->token = token;
		return;
	}
	waitbits_at(s, si)[slot / 64] |= 1ULL << (slot % 64);
}

static void
ring_push(struct store *s, unsigned slot, uint64_t token)
{
	struct slot *sl;
	uint64_t zero;
	unsigned i, k, hint;

	if (slot >= s->l.max_slots)
		return;
	sl = slot_at(s, slot);
	mark_wake(s, slot);
	for (i = 0; i < WAKE_RING; i++)
		if (__atomic_load_n(&sl->ring[i], __ATOMIC_RELAXED) == token)
			return;
	hint = __atomic_fetch_add(&sl->ring_hint, 1, __ATOMIC_RELAXED);
	for (i = 0; i < WAKE_RING; i++) {
		k = (hint + i) % WAKE_RING;
		zero = 0;
		if (__atomic_compare_exchange_n(&sl->ring[k], &zero, token,
		    false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
	__atomic_store_n(&sl->overflow, 1, __ATOMIC_RELEASE);
}

/* The slots registered on the stripe as a whole: wake them all. */
static void
do_wake_bits(struct store *s, unsigned si)
{
	uint64_t *w = waitbits_at(s, si), bits, i;
	unsigned slot;

	for (i = 0; i < s->l.wait_words; i++) {
		for (bits = w[i]; bits != 0; bits &= bits - 1) {
			slot = (unsigned)(i * 64 + __builtin_ctzll(bits));
			if (slot < s->l.max_slots) {
				__atomic_store_n(&slot_at(s, slot)->overflow,
				    1, __ATOMIC_RELEASE);
				mark_wake(s, slot);
			}
		}
		w[i] = 0;
	}
}

/* The lease on token's key ended: wake the slots waiting on it. */
void
do_wake_key(struct store *s, unsigned si, uint64_t token)
{
	struct stripe *st = stripe_at(s, si);
	struct waiter *w;
	unsigned i;

	for (i = 0; i < STRIPE_WAITERS; i++) {
		w = &st->waiters[i];
		if (w->token != token)
			continue;
		ring_push(s, w->slot, token);
		w->token = 0;
	}
	do_wake_bits(s, si);
}

/* Every waiter of the stripe (it was rebuilt): with their tokens. */
void
do_wake_all(struct store *s, unsigned si)
{
	struct stripe *st = stripe_at(s, si);
	struct waiter *w;
	unsigned i;

	for (i = 0; i < STRIPE_WAITERS; i++) {
		w = &st->waiters[i];
		if (w->token != 0 && w->slot < s->l.max_slots)
			ring_push(s, w->slot, w->token);
		w->token = 0;
	}
	do_wake_bits(s, si);
}

/* Writes the collected wakeups; runs with no lock held. */
void
wake_flush(struct store *s)
{
	uint64_t one = 1, i, bits;
	unsigned b;

	if (!s->wake_any)
		return;
	for (i = 0; i < s->l.wait_words; i++) {
		for (bits = s->wake[i]; bits != 0; bits &= bits - 1) {
			b = (unsigned)(i * 64 + __builtin_ctzll(bits));
			if (b < s->l.max_slots &&
			    write(s->efd[b], &one, sizeof(one)) < 0)
				(void)0;	/* EAGAIN: already readable */
		}
		s->wake[i] = 0;
	}
	s->wake_any = false;
}

/* A new process in the slot starts with nothing queued. */
void
wake_slot_reset(struct store *s, unsigned slot)
{
	struct slot *sl = slot_at(s, slot);
	unsigned i;

	for (i = 0; i < WAKE_RING; i++)
		__atomic_store_n(&sl->ring[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->overflow, 0, __ATOMIC_RELAXED);
}

size_t
store_wake_drain(struct store *s, unsigned slot, uint64_t *tokens,
    size_t max, bool *overflow)
{
	struct slot *sl;
	uint64_t t;
	size_t n = 0;
	unsigned i;

	*overflow = false;
	if (slot >= s->l.max_slots)
		return 0;
	sl = slot_at(s, slot);
	for (i = 0; i < WAKE_RING && n < max; i++) {
		if (__atomic_load_n(&sl->ring[i], __ATOMIC_RELAXED) == 0)
			continue;
		t = __atomic_exchange_n(&sl->ring[i], 0, __ATOMIC_ACQUIRE);
		if (t != 0)
			tokens[n++] = t;
	}
	*overflow = __atomic_exchange_n(&sl->overflow, 0,
	    __ATOMIC_ACQUIRE) != 0;
	return n;
}

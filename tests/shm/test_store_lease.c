/*
 * The stampede lease across processes: 50 processes miss the same key at
 * once, exactly one fills it and the rest are woken through their
 * eventfds; a killed filler's lease passes to exactly one waiter.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/store.h"
#include "tests/shm/procs.h"

/* ---- the stampede lease ---- */

enum { M_LEASE = 1, M_WAIT, M_HIT, M_BAD };

struct msg {
	int slot;
	int kind;
};

struct herd {
	struct store *s;
	int res[2];		/* children -> parent */
	int start[2];		/* closed by the parent: everyone goes */
	int cmd[64][2];		/* parent -> one child: "fill now" */
};

static void
say(struct herd *h, int slot, int kind)
{
	struct msg m = { slot, kind };

	if (write(h->res[1], &m, sizeof(m)) != sizeof(m))
		_exit(4);
}

static const char hot_val[] = "the one true value";

/* Waits on our eventfd, then looks up again, until a hit. */
static void
herd_wait(struct herd *h, int slot)
{
	struct pollfd p = { .fd = store_wake_fd(h->s, (unsigned)slot),
	    .events = POLLIN };
	struct store_ref ref;
	enum store_result r;
	uint64_t v;
	char c;

	for (;;) {
		if (poll(&p, 1, -1) != 1 || read(p.fd, &v, sizeof(v)) !=
		    sizeof(v))
			_exit(5);
		r = store_lookup(h->s, "hot", 3, &ref);
		if (r == STORE_HIT) {
			say(h, slot, ref.len == sizeof(hot_val) &&
			    memcmp(ref.data, hot_val, ref.len) == 0 ?
			    M_HIT : M_BAD);
			store_release(h->s, &ref);
			_exit(0);
		}
		if (r == STORE_LEASE)
			break;
		if (r != STORE_WAIT)
			_exit(6);
	}
	say(h, slot, M_LEASE);
	if (read(h->cmd[slot][0], &c, 1) != 1)
		_exit(7);
	store_set(h->s, "hot", 3, hot_val, sizeof(hot_val), 0, 0);
	_exit(0);
}

static void
herd_child(struct herd *h, int slot)
{
	enum store_result r;
	char c;

	if (store_attach(h->s, (unsigned)slot) == -1)
		_exit(3);
	if (read(h->start[0], &c, 1) != 0)
		_exit(3);
	r = store_lookup(h->s, "hot", 3, &(struct store_ref){0});
	if (r == STORE_WAIT) {
		say(h, slot, M_WAIT);
		herd_wait(h, slot);
	}
	if (r != STORE_LEASE)
		_exit(6);
	say(h, slot, M_LEASE);
	if (read(h->cmd[slot][0], &c, 1) != 1)
		_exit(0);	/* killed before this in the takeover test */
	store_set(h->s, "hot", 3, hot_val, sizeof(hot_val), 0, 0);
	_exit(0);
}

static void
herd_start(struct herd *h, int n, pid_t *pid)
{
	int i;

	h->s = mk(4 << 20, 4, 4096, 64);
	cr_assert_eq(pipe(h->res), 0);
	cr_assert_eq(pipe(h->start), 0);
	for (i = 0; i < n; i++)
		cr_assert_eq(pipe(h->cmd[i]), 0);
	for (i = 0; i < n; i++) {
		if ((pid[i] = fork_child()) == 0) {
			close(h->start[1]);
			herd_child(h, i);
		}
		cr_assert_gt(pid[i], 0);
	}
	close(h->start[1]);	/* all children read EOF at once */
}

static struct msg
herd_next(struct herd *h)
{
	struct msg m;

	cr_assert_eq(read(h->res[0], &m, sizeof(m)), (ssize_t)sizeof(m));
	cr_assert_neq(m.kind, M_BAD, "slot %d read a wrong value", m.slot);
	return m;
}

Test(store_lease, stampede_50_processes_one_lease, .timeout = 30)
{
	struct herd h;
	struct store_stats st;
	pid_t pid[50];
	int i, leases = 0, waits = 0, hits = 0, owner = -1;
	struct msg m;

	herd_start(&h, 50, pid);
	for (i = 0; i < 50; i++) {
		m = herd_next(&h);
		if (m.kind == M_LEASE) {
			leases++;
			owner = m.slot;
		}
		waits += m.kind == M_WAIT;
	}
	cr_assert_eq(leases, 1);
	cr_assert_eq(waits, 49);
	cr_assert_eq(write(h.cmd[owner][1], "f", 1), 1);
	for (i = 0; i < 49; i++) {
		m = herd_next(&h);
		cr_assert_eq(m.kind, M_HIT, "slot %d: %d", m.slot, m.kind);
		hits++;
	}
	cr_assert_eq(hits, 49);
	for (i = 0; i < 50; i++)
		wait_ok(pid[i]);
	store_stats(h.s, &st);
	cr_assert_eq(st.lease_grants, 1);
	cr_assert_eq(st.sets, 1);
	cr_assert_geq(st.lease_waits, 49);
	store_destroy(h.s);
}

Test(store_lease, lease_owner_killed_one_waiter_takes_over, .timeout = 30)
{
	struct herd h;
	struct store_stats st;
	pid_t pid[8];
	int i, owner = -1, owner2 = -1, hits = 0;
	struct msg m;

	herd_start(&h, 8, pid);
	for (i = 0; i < 8; i++) {
		m = herd_next(&h);
		if (m.kind == M_LEASE)
			owner = m.slot;
	}
	cr_assert_geq(owner, 0);
	kill_wait(pid[owner]);
	store_reap_slot(h.s, (unsigned)owner);
	m = herd_next(&h);
	cr_assert_eq(m.kind, M_LEASE, "after the reap, a waiter leases");
	owner2 = m.slot;
	cr_assert_neq(owner2, owner);
	cr_assert_eq(write(h.cmd[owner2][1], "f", 1), 1);
	for (i = 0; i < 6; i++) {
		m = herd_next(&h);
		cr_assert_eq(m.kind, M_HIT, "slot %d: %d (a second lease?)",
		    m.slot, m.kind);
		hits++;
	}
	cr_assert_eq(hits, 6);
	for (i = 0; i < 8; i++)
		if (i != owner)
			wait_ok(pid[i]);
	store_stats(h.s, &st);
	cr_assert_eq(st.lease_grants, 2);
	store_destroy(h.s);
}

/* ---- wakeups keyed by object ---- */

static bool
readable(struct store *s, unsigned slot)
{
	struct pollfd p = { .fd = store_wake_fd(s, slot), .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/*
 * Eight processes wait on two keys of one stripe: the fill of one key
 * wakes only its own waiters, with its token (issue 13: the wakeup is
 * keyed by the object, not by the stripe).
 */
Test(store_lease, a_fill_wakes_only_its_keys_waiters, .timeout = 30)
{
	struct store *s = mk(4 << 20, 1, 4096, 16);
	struct store_ref ref;
	uint64_t tok[8], v;
	bool overflow;
	int res[2], i;
	pid_t pid[8];
	char c;

	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_lookup(s, "a", 1, &ref), STORE_LEASE);
	cr_assert_eq(store_lookup(s, "b", 1, &ref), STORE_LEASE);
	cr_assert_eq(pipe(res), 0);
	for (i = 0; i < 8; i++) {
		if ((pid[i] = fork_child()) == 0) {
			const char *k = i < 4 ? "a" : "b";

			if (store_attach(s, (unsigned)i + 1) == -1 ||
			    store_lookup(s, k, 1, &ref) != STORE_WAIT ||
			    ref.wait_token != store_key_token(s, k, 1) ||
			    write(res[1], "w", 1) != 1)
				_exit(3);
			_exit(0);
		}
	}
	for (i = 0; i < 8; i++) {
		cr_assert_eq(read(res[0], &c, 1), 1);
		wait_ok(pid[i]);
	}
	cr_assert_eq(store_set(s, "b", 1, "B", 1, 0, 0), STORE_OK);
	for (i = 0; i < 8; i++)
		cr_assert_eq(readable(s, (unsigned)i + 1), i >= 4,
		    "slot %d", i + 1);
	for (i = 4; i < 8; i++) {
		cr_assert_eq(read(store_wake_fd(s, (unsigned)i + 1), &v,
		    sizeof(v)), (ssize_t)sizeof(v));
		cr_assert_eq(store_wake_drain(s, (unsigned)i + 1, tok, 8,
		    &overflow), 1);
		cr_assert_eq(tok[0], store_key_token(s, "b", 1));
		cr_assert(!overflow);
	}
	cr_assert_eq(store_lease_release(s, "a", 1), STORE_OK);
	for (i = 0; i < 4; i++) {
		cr_assert(readable(s, (unsigned)i + 1), "slot %d", i + 1);
		cr_assert_eq(store_wake_drain(s, (unsigned)i + 1, tok, 8,
		    &overflow), 1);
		cr_assert_eq(tok[0], store_key_token(s, "a", 1));
	}
	store_destroy(s);
}

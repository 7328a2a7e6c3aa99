/*
 * Multi-process tests of the shared store: forked processes share one
 * mapping as corral's workers do.  Random traffic with self-checking
 * values, and processes killed while holding a lock or writing a value.
 * Handshakes go through pipes; nothing waits on time.
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
#include <sched.h>
#include <unistd.h>

#include <criterion/criterion.h>

/* What a test saw, for the log (cr_log_info leaks in parallel runs). */
#define test_note(...) do { \
	fprintf(stderr, "[note] " __VA_ARGS__); \
	fputc('\n', stderr); \
} while (0)
#include <xxhash.h>

#include "shm/store.h"
#include "shm/store_test.h"
#include "tests/shm/procs.h"

/*
 * Self-describing values: a header naming the key and a sequence number,
 * then a payload derived from both, then a checksum of everything before.
 */
struct val_hdr {
	uint32_t magic;
	uint32_t key;
	uint64_t seq;
	uint32_t len;
	uint32_t pad;
};

#define VAL_MAGIC	0x76616c21

static size_t
make_val(char *buf, unsigned key, uint64_t seq, size_t plen)
{
	struct val_hdr h = { VAL_MAGIC, key, seq, (uint32_t)plen, 0 };
	uint64_t sum;
	size_t i;

	memcpy(buf, &h, sizeof(h));
	for (i = 0; i < plen; i++)
		buf[sizeof(h) + i] = (char)(seq * 31 + i * 7 + key);
	sum = XXH64(buf, sizeof(h) + plen, 0);
	memcpy(buf + sizeof(h) + plen, &sum, sizeof(sum));
	return sizeof(h) + plen + sizeof(sum);
}

static bool
val_ok(const void *data, size_t len, unsigned key)
{
	struct val_hdr h;
	uint64_t sum;

	if (len < sizeof(h) + sizeof(sum))
		return false;
	memcpy(&h, data, sizeof(h));
	if (h.magic != VAL_MAGIC || h.key != key ||
	    sizeof(h) + h.len + sizeof(sum) != len)
		return false;
	memcpy(&sum, (const char *)data + len - sizeof(sum), sizeof(sum));
	return sum == XXH64(data, len - sizeof(sum), 0);
}

/* ---- random traffic from 8 processes ---- */

#define NPROC	8
#define NKEYS	1000
#define OPS	30000
#define HELD	4

struct tally {
	uint64_t gets, hits, sets, deletes, bad;
};

struct worker {
	struct store *s;
	unsigned id;
	uint64_t rng, seq;
	struct tally t;
	struct store_ref held[HELD];
	unsigned key[HELD];
	unsigned next;
	char buf[8192];
};

static uint64_t
rnd(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

/* Keeps a few values pinned a while, checking them again on release. */
static void
hold(struct worker *w, struct store_ref *ref, unsigned key)
{
	struct store_ref *old = &w->held[w->next];

	if (old->data != NULL) {
		if (!val_ok(old->data, old->len, w->key[w->next]))
			w->t.bad++;
		store_release(w->s, old);
	}
	*old = *ref;
	w->key[w->next] = key;
	w->next = (w->next + 1) % HELD;
}

static void
check(struct worker *w, struct store_ref *ref, unsigned key)
{
	if (!val_ok(ref->data, ref->len, key))
		w->t.bad++;
	hold(w, ref, key);
}

static int64_t
rnd_ttl(struct worker *w)
{
	unsigned r = (unsigned)(rnd(w) % 100);

	if (r < 80)
		return 0;
	if (r < 95)
		return 1 + (int64_t)(r % 3);
	return -1;
}

static void
do_set(struct worker *w, const char *key, unsigned k)
{
	size_t len = make_val(w->buf, k, w->seq++, rnd(w) % 6000);

	if (store_set(w->s, key, strlen(key), w->buf, len, rnd_ttl(w),
	    k) == STORE_OK)
		w->t.sets++;
	else
		store_lease_release(w->s, key, strlen(key));
}

static void
do_lookup(struct worker *w, const char *key, unsigned k)
{
	struct store_ref ref;
	enum store_result r = store_lookup(w->s, key, strlen(key), &ref);

	w->t.gets++;
	if (r == STORE_HIT)
		w->t.hits++;
	if (ref.data != NULL)
		check(w, &ref, k);
	if (r == STORE_LEASE || r == STORE_STALE_LEASE)
		do_set(w, key, k);
}

static void
do_op(struct worker *w)
{
	unsigned k = (unsigned)(rnd(w) % NKEYS), r = (unsigned)(rnd(w) % 100);
	struct store_ref ref;
	char key[32];

	snprintf(key, sizeof(key), "key:%u", k);
	if (r < 40) {
		w->t.gets++;
		if (store_get(w->s, key, strlen(key), &ref) == STORE_HIT) {
			w->t.hits++;
			check(w, &ref, k);
		}
	} else if (r < 55) {
		do_lookup(w, key, k);
	} else if (r < 85) {
		do_set(w, key, k);
	} else if (r < 95) {
		w->t.deletes += store_delete(w->s, key, strlen(key)) ==
		    STORE_OK;
	} else {
		store_sweep(w->s, 64);
	}
}

static void
worker_run(struct store *s, unsigned id, int out)
{
	struct worker *w = calloc(1, sizeof(*w));
	int i;

	w->s = s;
	w->id = id;
	w->rng = 0x9e3779b97f4a7c15ULL * (id + 1);
	if (store_attach(s, id) == -1)
		_exit(3);
	for (i = 0; i < OPS; i++) {
		do_op(w);
		if (id == 0 && i % 200 == 0)
			__atomic_fetch_add(shared_now, 1, __ATOMIC_RELAXED);
	}
	for (i = 0; i < HELD; i++)
		hold(w, &(struct store_ref){0}, 0);
	if (write(out, &w->t, sizeof(w->t)) != sizeof(w->t))
		_exit(4);
	_exit(w->t.bad != 0 ? 2 : 0);
}

Test(store_procs, random_traffic_8_processes, .timeout = 60)
{
	struct store *s = mk(3 << 20, 4, 8192, NPROC + 1);
	struct tally sum = { 0 }, t;
	struct store_stats st;
	struct store_ref ref;
	pid_t pid[NPROC];
	int fds[2], i, present = 0;
	char key[32];

	cr_assert_eq(pipe(fds), 0);
	for (i = 0; i < NPROC; i++) {
		if ((pid[i] = fork_child()) == 0)
			worker_run(s, (unsigned)i, fds[1]);
		cr_assert_gt(pid[i], 0);
	}
	for (i = 0; i < NPROC; i++) {
		cr_assert_eq(read(fds[0], &t, sizeof(t)), (ssize_t)sizeof(t));
		sum.gets += t.gets;
		sum.hits += t.hits;
		sum.sets += t.sets;
		sum.deletes += t.deletes;
		sum.bad += t.bad;
	}
	for (i = 0; i < NPROC; i++)
		wait_ok(pid[i]);
	cr_assert_eq(sum.bad, 0, "%llu torn values", (unsigned long long)
	    sum.bad);
	store_stats(s, &st);
	test_note("gets %llu hits %llu sets %llu evictions %llu "
	    "expirations %llu nomem %llu leases %llu", (unsigned long long)
	    st.gets, (unsigned long long)st.hits, (unsigned long long)st.sets,
	    (unsigned long long)st.evictions, (unsigned long long)
	    st.expirations, (unsigned long long)st.nomem,
	    (unsigned long long)st.lease_grants);
	cr_assert_eq(st.gets, sum.gets);
	cr_assert_eq(st.hits, sum.hits);
	cr_assert_eq(st.gets, st.hits + st.misses);
	cr_assert_eq(st.sets, sum.sets);
	cr_assert_eq(st.deletes, sum.deletes);
	cr_assert_gt(st.evictions, 0, "the test must press memory");
	cr_assert_gt(st.expirations, 0);
	cr_assert_gt(st.lease_grants, 0);
	cr_assert_eq(st.lock_recoveries, 0);
	cr_assert_eq(st.corruptions, 0);
	cr_assert_leq(st.bytes_used, st.bytes_total);

	/* Nothing is pinned any more; every live key is counted once. */
	cr_assert_eq(store_attach(s, NPROC), 0);
	store_sweep(s, SIZE_MAX);
	store_stats(s, &st);
	for (i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			cr_assert(val_ok(ref.data, ref.len, (unsigned)i));
			present++;
			store_release(s, &ref);
		}
	}
	cr_assert_eq(st.items, (uint64_t)present);
	store_destroy(s);
}

/* ---- processes killed at the worst moments ---- */

struct handshake {
	int in[2];	/* child -> parent: "I am there" */
	int go[2];	/* parent never writes: the child waits for its kill */
};

static void
pause_here(void *arg)
{
	struct handshake *h = arg;
	char c;

	if (write(h->in[1], "x", 1) != 1)
		_exit(5);
	while (read(h->go[0], &c, 1) != 0)
		;
	_exit(6);
}

static void
handshake_init(struct handshake *h)
{
	cr_assert_eq(pipe(h->in), 0);
	cr_assert_eq(pipe(h->go), 0);
}

static void
handshake_wait(struct handshake *h)
{
	char c;

	cr_assert_eq(read(h->in[0], &c, 1), 1);
}

static void
expect_val(struct store *s, const char *key, const char *val)
{
	struct store_ref ref;

	cr_assert_eq(store_get(s, key, strlen(key), &ref), STORE_HIT, "%s",
	    key);
	cr_assert_eq(ref.len, strlen(val));
	cr_assert_arr_eq(ref.data, val, ref.len);
	store_release(s, &ref);
}

Test(store_procs, killed_while_holding_stripe_lock, .timeout = 20)
{
	struct store *s = mk(4 << 20, 1, 4096, 4);
	struct handshake h;
	struct store_stats st;
	struct store_ref ref;
	pid_t holder, other;

	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_set(s, "a", 1, "old-a", 5, 0, 0), STORE_OK);
	cr_assert_eq(store_set(s, "b", 1, "old-b", 5, 0, 0), STORE_OK);
	handshake_init(&h);
	if ((holder = fork_child()) == 0) {
		if (store_attach(s, 1) == -1)
			_exit(3);
		store_test_set_hook(s, STORE_HOOK_COMMIT, pause_here, &h);
		/* Pauses mid-commit: old "a" unlinked, new one not linked. */
		store_set(s, "a", 1, "new-a", 5, 0, 0);
		_exit(7);
	}
	handshake_wait(&h);
	/* Another worker queues on the held lock (or arrives after). */
	if ((other = fork_child()) == 0) {
		if (store_attach(s, 2) == -1 ||
		    store_get(s, "b", 1, &ref) != STORE_HIT ||
		    memcmp(ref.data, "old-b", 5) != 0)
			_exit(8);
		store_release(s, &ref);
		_exit(0);
	}
	kill_wait(holder);
	wait_ok(other);
	/* Never a half-made "a": the old one was gone, the new unfinished. */
	cr_assert_eq(store_get(s, "a", 1, &ref), STORE_MISS);
	expect_val(s, "b", "old-b");
	store_stats(s, &st);
	cr_assert_eq(st.lock_recoveries, 1);
	cr_assert_eq(st.items, 1);
	store_reap_slot(s, 1);
	cr_assert_eq(store_set(s, "a", 1, "next-a", 6, 0, 0), STORE_OK);
	expect_val(s, "a", "next-a");
	store_stats(s, &st);
	cr_assert_eq(st.lock_recoveries, 1);
	store_destroy(s);
}

Test(store_procs, killed_while_writing_a_value, .timeout = 20)
{
	struct store *s = mk(4 << 20, 1, 4096, 4);
	struct handshake h;
	struct store_stats st;
	pid_t pid;

	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_set(s, "a", 1, "old-a", 5, 0, 0), STORE_OK);
	handshake_init(&h);
	if ((pid = fork_child()) == 0) {
		struct store_wref w;
		struct store_ref ref;

		if (store_attach(s, 1) == -1 ||
		    store_get(s, "a", 1, &ref) != STORE_HIT ||
		    store_lookup(s, "c", 1, &ref) != STORE_LEASE ||
		    store_reserve(s, "a", 1, 4000, 0, 0, &w) != STORE_OK)
			_exit(3);
		memset(w.data, 'n', 2000);	/* half the value */
		pause_here(&h);
	}
	handshake_wait(&h);
	kill_wait(pid);
	expect_val(s, "a", "old-a");
	cr_assert_eq(store_lookup(s, "c", 1, &(struct store_ref){0}),
	    STORE_WAIT, "the dead child's lease holds until reaped");
	store_reap_slot(s, 1);
	cr_assert(poll(&(struct pollfd){ .fd = store_wake_fd(s, 0),
	    .events = POLLIN }, 1, 0) == 1, "reaping wakes the waiters");
	cr_assert_eq(store_lookup(s, "c", 1, &(struct store_ref){0}),
	    STORE_LEASE);
	/* The dead child's pin and reservation went with the reap. */
	cr_assert_eq(store_delete(s, "a", 1), STORE_OK);
	cr_assert_eq(store_set(s, "a", 1, "new-a", 5, 0, 0), STORE_OK);
	expect_val(s, "a", "new-a");
	store_stats(s, &st);
	cr_assert_eq(st.lock_recoveries, 0);
	store_destroy(s);
}

/* Rewrites an 8-byte value with eight 'n's. */
static long
to_new(const void *old, size_t oldlen, void *out, void *arg)
{
	(void)old;
	(void)oldlen;
	(void)arg;
	memset(out, 'n', 8);
	return 8;
}

/*
 * store_update() rewrites an unread value in place: killed half way, it
 * leaves no value half old and half new.  The lock's repair drops it.
 */
Test(store_procs, killed_while_rewriting_in_place, .timeout = 20)
{
	struct store *s = mk(4 << 20, 1, 4096, 4);
	struct handshake h;
	struct store_stats st;
	struct store_ref ref;
	pid_t pid;

	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(store_set(s, "n", 1, "oooooooo", 8, 0, 0), STORE_OK);
	cr_assert_eq(store_set(s, "b", 1, "old-b", 5, 0, 0), STORE_OK);
	handshake_init(&h);
	if ((pid = fork_child()) == 0) {
		if (store_attach(s, 1) == -1)
			_exit(3);
		store_test_set_hook(s, STORE_HOOK_REWRITE, pause_here, &h);
		store_update(s, "n", 1, 0, 0, to_new, NULL);
		_exit(7);
	}
	handshake_wait(&h);
	kill_wait(pid);
	cr_assert_eq(store_get(s, "n", 1, &ref), STORE_MISS,
	    "a half-rewritten value was served: '%.*s'", (int)ref.len,
	    (const char *)ref.data);
	expect_val(s, "b", "old-b");
	store_stats(s, &st);
	cr_assert_eq(st.lock_recoveries, 1);
	cr_assert_eq(st.corruptions, 1);
	store_reap_slot(s, 1);
	cr_assert_eq(store_update(s, "n", 1, 0, 0, to_new, NULL), STORE_OK);
	expect_val(s, "n", "nnnnnnnn");
	store_destroy(s);
}

/* Pins left for later are pins: a dead holder's go with its reap. */
Test(store_procs, killed_with_unpins_left_for_later, .timeout = 20)
{
	struct store *s = mk(4 << 20, 1, 8192, 4);
	static char big[8192];
	struct handshake h;
	uint64_t before, after, longest;
	pid_t pid;

	cr_assert_eq(store_attach(s, 0), 0);
	store_test_pool(s, &before, &longest);
	cr_assert_eq(store_set(s, "a", 1, big, sizeof(big), 0, 0), STORE_OK);
	handshake_init(&h);
	if ((pid = fork_child()) == 0) {
		struct store_ref ref;

		if (store_attach(s, 1) == -1 ||
		    store_get(s, "a", 1, &ref) != STORE_HIT ||
		    !store_release_later(s, &ref))
			_exit(3);
		pause_here(&h);
	}
	handshake_wait(&h);
	kill_wait(pid);
	cr_assert_eq(store_delete(s, "a", 1), STORE_OK);
	store_test_pool(s, &after, &longest);
	cr_assert_lt(after, before, "the dead child's pin holds until reaped");
	store_reap_slot(s, 1);
	store_test_pool(s, &after, &longest);
	cr_assert_eq(after, before, "free pages %lu, were %lu",
	    (unsigned long)after, (unsigned long)before);
	cr_assert_eq(store_test_check(s, NULL, 0), 0);
	store_destroy(s);
}

/* ---- killed inside the pool lock, or while evicting ---- */

/* Stops where the hook runs, the first time, until the parent says go. */
static void
pause_then_go(void *arg)
{
	struct handshake *h = arg;
	static bool done;
	char c;

	if (done)
		return;
	done = true;
	if (write(h->in[1], "x", 1) != 1)
		_exit(5);
	if (read(h->go[0], &c, 1) != 1)
		_exit(6);
}

static char big[256 << 10];

static void
check_ok(struct store *s)
{
	char err[512];

	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
}

/*
 * A child stops at point (inside the pool lock), holding what it holds
 * there; another process then needs the pool, and the child is killed.
 * The other process must go on, the pool be whole again, and every value
 * that was stored still be there, intact.
 */
static void
kill_at(enum store_hook_point point, void (*op)(struct store *))
{
	struct store *s = mk(8 << 20, 4, 256 << 10, 4);
	struct handshake h;
	struct store_stats st;
	char key[32];
	pid_t holder, other;
	int i;

	cr_assert_eq(store_attach(s, 0), 0);
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "keep:%d", i);
		memset(big, 'a' + i % 26, sizeof(big));
		cr_assert_eq(store_set(s, key, strlen(key), big,
		    (size_t)(i % 4 ? 100 + i : 30000 + i), 0, 0), STORE_OK);
	}
	handshake_init(&h);
	if ((holder = fork_child()) == 0) {
		if (store_attach(s, 1) == -1)
			_exit(3);
		store_test_set_hook(s, point, pause_here, &h);
		op(s);
		_exit(7);
	}
	handshake_wait(&h);
	/* Needs the pool: queues on the held lock, or comes after. */
	if ((other = fork_child()) == 0) {
		if (store_attach(s, 2) == -1 ||
		    store_set(s, "other", 5, big, 50000, 0, 0) != STORE_OK ||
		    store_set(s, "other2", 6, "x", 1, 0, 0) != STORE_OK)
			_exit(8);
		_exit(0);
	}
	kill_wait(holder);
	wait_ok(other);
	store_reap_slot(s, 1);
	check_ok(s);
	for (i = 0; i < 40; i++) {
		struct store_ref ref;
		size_t len = (size_t)(i % 4 ? 100 + i : 30000 + i), k;

		snprintf(key, sizeof(key), "keep:%d", i);
		cr_assert_eq(store_get(s, key, strlen(key), &ref), STORE_HIT,
		    "%s", key);
		cr_assert_eq(ref.len, len);
		for (k = 0; k < len; k++)
			cr_assert_eq(((const char *)ref.data)[k],
			    'a' + i % 26, "%s byte %zu", key, k);
		store_release(s, &ref);
	}
	store_stats(s, &st);
	cr_assert_geq(st.lock_recoveries, 1);
	cr_assert_eq(st.corruptions, 0);
	/* And it keeps working. */
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "after:%d", i);
		cr_assert_eq(store_set(s, key, strlen(key), big,
		    (size_t)(i * 997 % 60000), 0, 0), STORE_OK);
	}
	check_ok(s);
	store_destroy(s);
}

static void
op_new_run(struct store *s)
{
	store_set(s, "newbig", 6, big, 100000, 0, 0);
}

static void
op_new_slab(struct store *s)
{
	/* A size no slab had yet. */
	store_set(s, "newsmall", 8, big, 3000, 0, 0);
}

static void
op_free_run(struct store *s)
{
	store_set(s, "tmp", 3, big, 100000, 0, 0);
	store_delete(s, "tmp", 3);
}

Test(store_procs, killed_while_splitting_a_free_run, .timeout = 30)
{
	kill_at(STORE_HOOK_POOL_SPLIT, op_new_run);
}

Test(store_procs, killed_while_cutting_a_slab, .timeout = 30)
{
	kill_at(STORE_HOOK_CARVE, op_new_slab);
}

Test(store_procs, killed_while_freeing_a_run, .timeout = 30)
{
	kill_at(STORE_HOOK_POOL_FREE, op_free_run);
}

/*
 * Victims are chosen under the pool lock and evicted later under their
 * own: one pinned in between stays, and its value stays intact.
 */
Test(store_procs, victim_pinned_between_plan_and_eviction, .timeout = 30)
{
	struct store *s = mk(4 << 20, 1, 64 << 10, 4);
	struct handshake h;
	struct store_ref ref[64];
	struct store_stats st;
	char key[32];
	pid_t pid;
	int n, i, pinned = 0;

	cr_assert_eq(store_attach(s, 0), 0);
	memset(big, 'p', sizeof(big));
	for (n = 0;; n++) {
		snprintf(key, sizeof(key), "k:%d", n);
		cr_assert_eq(store_set(s, key, strlen(key), big, 40000, 0, 0),
		    STORE_OK);
		store_stats(s, &st);
		if (st.evictions > 0)
			break;
	}
	handshake_init(&h);
	if ((pid = fork_child()) == 0) {
		if (store_attach(s, 1) == -1)
			_exit(3);
		store_test_set_hook(s, STORE_HOOK_EVICT, pause_then_go, &h);
		if (store_set(s, "late", 4, big, 40000, 0, 0) != STORE_OK)
			_exit(4);
		_exit(0);
	}
	handshake_wait(&h);
	/* Pin what is oldest: the victims just chosen. */
	for (i = 0; i <= n && pinned < 64; i++) {
		snprintf(key, sizeof(key), "k:%d", i);
		if (store_get(s, key, strlen(key), &ref[pinned]) == STORE_HIT)
			pinned++;
	}
	cr_assert_eq(write(h.go[1], "g", 1), 1);
	wait_ok(pid);
	for (i = 0; i < pinned; i++) {
		cr_assert_eq(ref[i].len, 40000);
		cr_assert_eq(((const char *)ref[i].data)[39999], 'p');
		store_release(s, &ref[i]);
	}
	check_ok(s);
	store_destroy(s);
}

/*
 * Processes doing random traffic are killed at random moments, often
 * inside a lock; after each kill and reap the store is whole and every
 * value read back is the one written.
 */
struct chaos {
	uint64_t *ops;		/* shared: operations done by the child */
};

Test(store_procs, killed_at_random_moments, .timeout = 120)
{
	struct store *s = mk(4 << 20, 4, 64 << 10, 4);
	uint64_t *ops = mmap(NULL, sizeof(*ops), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct store_stats st;
	struct store_ref ref;
	char key[32];
	int round, i, present = 0;
	pid_t pid;

	cr_assert_neq(ops, MAP_FAILED);
	cr_assert_eq(store_attach(s, 0), 0);
	for (round = 0; round < 150; round++) {
		uint64_t start, want = 50 + (uint64_t)(round * 7919 % 400);

		start = __atomic_load_n(ops, __ATOMIC_RELAXED);
		if ((pid = fork_child()) == 0) {
			struct worker *w = calloc(1, sizeof(*w));

			if (w == NULL || store_attach(s, 1) == -1)
				_exit(3);
			w->s = s;
			w->id = 1;
			w->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(round + 3);
			for (;;) {
				do_op(w);
				__atomic_fetch_add(ops, 1, __ATOMIC_RELAXED);
			}
		}
		/* No sleep: kill as soon as it has done some work. */
		while (__atomic_load_n(ops, __ATOMIC_RELAXED) - start < want)
			sched_yield();
		kill_wait(pid);
		store_reap_slot(s, 1);
		check_ok(s);
	}
	for (i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key:%d", i);
		if (store_get(s, key, strlen(key), &ref) == STORE_HIT) {
			cr_assert(val_ok(ref.data, ref.len, (unsigned)i),
			    "key %d torn", i);
			present++;
			store_release(s, &ref);
		}
	}
	store_stats(s, &st);
	test_note("%d present, %llu lock recoveries", present,
	    (unsigned long long)st.lock_recoveries);
	cr_assert_eq(st.items, (uint64_t)present);
	cr_assert_gt(st.lock_recoveries, 0, "no kill landed in a lock");
	store_destroy(s);
}

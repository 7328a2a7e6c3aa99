/*
 * The waiting list alone: a wake-up of one token calls back the waiters of
 * that token only, however many share a bucket; callbacks may add (also
 * themselves, under the same token) and remove waiters without anyone
 * being called twice; wake_all calls everyone once; timers fire with
 * timed_out set and are gone once a waiter is woken or removed.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <stdint.h>
#include <string.h>

#include "worker/conn.h"
#include "worker/waitlist.h"

#define N	200

struct item {
	struct waiter w;		/* first: the callback casts back */
	int id;
	int calls;
	int timeouts;
	uint64_t readd;			/* re-add under this token, 0: no */
	struct item *victim;		/* removed by this one's callback */
};

static struct item items[N];

static void
called(struct waiter *w, bool timed_out)
{
	struct item *it = (struct item *)w;

	it->calls++;
	if (timed_out)
		it->timeouts++;
	if (it->victim != NULL)
		waitlist_remove(&it->victim->w);
	if (it->readd != 0) {
		uint64_t t = it->readd;

		it->readd = 0;
		waitlist_add(&it->w, t, 0, called);
	}
}

static void
init(void)
{
	memset(items, 0, sizeof(items));
	worker.base = event_base_new();
	cr_assert_not_null(worker.base);
}

static void
fini(void)
{
	int i;

	for (i = 0; i < N; i++)
		waitlist_remove(&items[i].w);
	waitlist_free_all();
	event_base_free(worker.base);
	worker.base = NULL;
}

TestSuite(waitlist, .init = init, .fini = fini);

Test(waitlist, wakes_only_the_waiters_of_the_token)
{
	int i;

	/* Tokens 1..10, twenty waiters each: many share buckets. */
	for (i = 0; i < N; i++)
		waitlist_add(&items[i].w, 1 + (uint64_t)(i % 10) * 64, 0,
		    called);
	cr_assert_eq(waitlist_count(), N);
	waitlist_wake(1 + 3 * 64);
	for (i = 0; i < N; i++)
		cr_expect_eq(items[i].calls, i % 10 == 3 ? 1 : 0, "%d", i);
	cr_expect_eq(waitlist_count(), N - 20);
	waitlist_wake(1 + 3 * 64);		/* nobody left there */
	waitlist_wake(999);			/* nobody at all */
	for (i = 0; i < N; i++)
		cr_expect_eq(items[i].calls, i % 10 == 3 ? 1 : 0, "%d", i);
	for (i = 0; i < N; i++)
		cr_expect_eq(waitlist_queued(&items[i].w), i % 10 != 3);
}

Test(waitlist, a_waiter_that_waits_again_is_not_called_twice)
{
	int i;

	for (i = 0; i < 10; i++) {
		items[i].readd = 7;		/* the same token again */
		waitlist_add(&items[i].w, 7, 0, called);
	}
	waitlist_wake(7);
	for (i = 0; i < 10; i++) {
		cr_expect_eq(items[i].calls, 1);
		cr_expect(waitlist_queued(&items[i].w));
	}
	waitlist_wake(7);
	for (i = 0; i < 10; i++) {
		cr_expect_eq(items[i].calls, 2);
		cr_expect_not(waitlist_queued(&items[i].w));
	}
	cr_expect_eq(waitlist_count(), 0);
}

Test(waitlist, a_callback_may_remove_the_next_waiter)
{
	int i, called_total = 0;

	for (i = 0; i < 10; i++)
		waitlist_add(&items[i].w, 5, 0, called);
	/* Whoever is called first takes all the others off. */
	for (i = 0; i < 10; i++)
		items[i].victim = &items[(i + 1) % 10];
	waitlist_wake(5);
	for (i = 0; i < 10; i++)
		called_total += items[i].calls;
	/* Each call removes one not yet called: half of them run. */
	cr_expect_eq(called_total, 5);
	cr_expect_eq(waitlist_count(), 0);
}

Test(waitlist, wake_all_calls_everyone_once)
{
	int i;

	for (i = 0; i < N; i++) {
		items[i].readd = 1000 + (uint64_t)i;
		waitlist_add(&items[i].w, (uint64_t)i * 7919, 0, called);
	}
	waitlist_wake_all();
	for (i = 0; i < N; i++) {
		cr_expect_eq(items[i].calls, 1);
		cr_expect(waitlist_queued(&items[i].w));
	}
	waitlist_wake(1000 + 42);
	cr_expect_eq(items[42].calls, 2);
	cr_expect_eq(items[41].calls, 1);
}

Test(waitlist, timers_fire_alone_and_stop_when_woken, .timeout = 10)
{
	waitlist_add(&items[0].w, 1, 20, called);
	waitlist_add(&items[1].w, 2, 20, called);
	waitlist_add(&items[2].w, 3, 0, called);
	waitlist_wake(2);		/* its timer must not fire after */
	event_base_loop(worker.base, EVLOOP_ONCE);
	cr_expect_eq(items[0].calls, 1);
	cr_expect_eq(items[0].timeouts, 1);
	cr_expect_eq(items[1].calls, 1);
	cr_expect_eq(items[1].timeouts, 0);
	cr_expect_eq(items[2].calls, 0);
	cr_expect(waitlist_queued(&items[2].w));
	cr_expect_not(waitlist_queued(&items[0].w));
	/* Nothing else is pending: the loop has no event left. */
	cr_expect_eq(event_base_loop(worker.base, EVLOOP_NONBLOCK), 1);
}

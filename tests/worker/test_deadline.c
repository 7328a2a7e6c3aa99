/*
 * Deadline queues alone, on a real event base and the real clock: nodes
 * fire in deadline order, never before their deadline, once; a node taken
 * out never fires; deadlines of other lengths go in their place; a fire
 * callback may re-add its node and take others out.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "worker/deadline.h"

#define N	16

struct item {
	struct dl_node node;		/* first: fired() casts back */
	int id;
	int fired;
	uint64_t at;			/* the deadline it had */
	uint64_t when;			/* dl_now() when it fired */
	uint64_t readd;			/* re-add in this many ms, 0: no */
	struct item *victim;		/* taken out by this one's fire */
};

static struct event_base *base;
static unsigned clock_reads;

/* Counts the reads of the clock (this program's, libevent's too) and
 * reads it. */
int
clock_gettime(clockid_t id, struct timespec *ts)
{
	clock_reads++;
	return (int)syscall(SYS_clock_gettime, id, ts);
}
static struct dl_queue *q;
static struct item items[N];
static int order[N * 2], norder;

static void
fired(struct dl_node *n)
{
	struct item *it = (struct item *)n;

	it->fired++;
	it->at = n->at;
	it->when = dl_now();
	order[norder++] = it->id;
	if (it->victim != NULL) {
		dl_del(&it->victim->node);
		it->victim = NULL;
	}
	if (it->readd != 0) {
		uint64_t ms = it->readd;

		it->readd = 0;
		dl_add(q, n, ms);
	}
}

static void
init(void)
{
	memset(items, 0, sizeof(items));
	norder = 0;
	for (int i = 0; i < N; i++)
		items[i].id = i;
	base = event_base_new();
	cr_assert_not_null(base);
	q = dl_queue_new(base, fired);
	cr_assert_not_null(q);
}

static void
fini(void)
{
	dl_queue_free(q);
	event_base_free(base);
}

TestSuite(deadline, .init = init, .fini = fini);

static void
run(void)
{
	/* Returns once the queue's timer is no longer set. */
	cr_assert_eq(event_base_dispatch(base), 1);
}

Test(deadline, same_duration_fires_in_order_not_before_its_deadline)
{
	uint64_t t0 = dl_now();

	for (int i = 0; i < N; i++)
		dl_add(q, &items[i].node, 30);
	run();
	cr_assert_eq(norder, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(order[i], i);
		cr_assert_eq(items[i].fired, 1);
		cr_assert_geq(items[i].at, t0 + 30);
		cr_assert_geq(items[i].when, items[i].at);
		cr_assert_lt(items[i].when, items[i].at + 1000);
	}
	cr_assert_null(dl_first(q));
}

Test(deadline, a_node_taken_out_never_fires)
{
	for (int i = 0; i < 4; i++)
		dl_add(q, &items[i].node, 20 + 10 * (uint64_t)i);
	/* The head, which the timer was set for, and one in the middle. */
	dl_del(&items[0].node);
	dl_del(&items[2].node);
	run();
	cr_assert_eq(norder, 2);
	cr_assert_eq(order[0], 1);
	cr_assert_eq(order[1], 3);
	cr_assert_eq(items[0].fired + items[2].fired, 0);
}

Test(deadline, other_lengths_go_in_their_place)
{
	static const uint64_t ms[] = { 80, 20, 60, 40, 20, 100 };
	static const int want[] = { 1, 4, 3, 2, 0, 5 };

	for (int i = 0; i < 6; i++)
		dl_add(q, &items[i].node, ms[i]);
	cr_assert_eq((struct item *)dl_first(q), &items[1]);
	cr_assert_eq((struct item *)dl_next(q, dl_first(q)), &items[4]);
	run();
	cr_assert_eq(norder, 6);
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(order[i], want[i]);
		cr_assert_geq(items[order[i]].when, items[order[i]].at);
	}
}

Test(deadline, never_is_kept_and_never_fires)
{
	dl_add(q, &items[0].node, DL_NEVER);
	dl_add(q, &items[1].node, 10);
	cr_assert_eq((struct item *)dl_first(q), &items[1]);
	run();
	cr_assert_eq(norder, 1);
	cr_assert_eq(order[0], 1);
	cr_assert_eq((struct item *)dl_first(q), &items[0]);
	cr_assert_null(dl_next(q, dl_first(q)));
	dl_del(&items[0].node);
	cr_assert_null(dl_first(q));
}

Test(deadline, fire_may_re_add_itself_and_take_others_out)
{
	items[0].readd = 30;		/* fires again, after 3 */
	items[1].victim = &items[2];	/* 2 never fires */
	dl_add(q, &items[0].node, 10);
	dl_add(q, &items[1].node, 20);
	dl_add(q, &items[2].node, 25);
	dl_add(q, &items[3].node, 30);
	run();
	cr_assert_eq(norder, 4);
	cr_assert_eq(order[0], 0);
	cr_assert_eq(order[1], 1);
	cr_assert_eq(order[2], 3);
	cr_assert_eq(order[3], 0);
	cr_assert_eq(items[0].fired, 2);
	cr_assert_eq(items[2].fired, 0);
}

Test(deadline, plain_list_append_and_del)
{
	struct dl_node list = { &list, &list, DL_NEVER };

	dl_append(&list, &items[0].node);
	dl_append(&list, &items[1].node);
	cr_assert_eq(list.next, &items[0].node);
	cr_assert_eq(list.prev, &items[1].node);
	dl_del(&items[0].node);
	cr_assert_eq(list.next, &items[1].node);
	dl_del(&items[1].node);
	cr_assert_eq(list.next, &list);
	cr_assert_eq(list.prev, &list);
}

Test(deadline, a_caller_that_read_the_clock_adds_without_reading_it_again)
{
	uint64_t now = dl_now();
	unsigned reads = clock_reads;

	/* Behind a node due earlier, whose timer is set: no read at all
	 * (dl_add() reads it once).  As the new head it sets the timer,
	 * which is libevent's read, from now. */
	dl_add(q, &items[0].node, 20);
	cr_assert_gt(clock_reads, reads);
	reads = clock_reads;
	dl_add_at(q, &items[1].node, now + 40, now);
	cr_assert_eq(clock_reads, reads);
	cr_assert_eq(items[1].node.at, now + 40);
	dl_add_at(q, &items[2].node, now + 10, now);
	cr_assert_eq((struct item *)dl_first(q), &items[2]);
	run();
	cr_assert_eq(norder, 3);
	cr_assert_eq(order[0], 2);
	cr_assert_eq(order[1], 0);
	cr_assert_eq(order[2], 1);
	for (int i = 0; i < 3; i++)
		cr_assert_geq(items[i].when, items[i].at);
}

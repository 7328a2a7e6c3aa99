/*
 * The waiting list: a chained hash table of waiters by token, doubled
 * when it holds twice as many waiters as buckets.  A wake-up first moves
 * the waiters it will call to a private list, then calls them one by one,
 * so whatever the callbacks add or remove, nobody is called twice and the
 * walk never follows a freed waiter.
 */
#include <stdlib.h>
#include <string.h>

#include "shm/stats.h"
#include "worker/conn.h"
#include "worker/waitlist.h"

#define BUCKETS_MIN	64

static struct waiter **buckets;
static size_t nbuckets;			/* a power of two */
static unsigned count;
static struct waiter *waking;		/* being called back */

static size_t
slot(uint64_t token)
{
	/* Tokens are hashes already; fold the high bits in anyway. */
	return (size_t)(token ^ (token >> 32)) & (nbuckets - 1);
}

static void
link_in(struct waiter **head, struct waiter *w)
{
	w->next = *head;
	if (*head != NULL)
		(*head)->pprev = &w->next;
	*head = w;
	w->pprev = head;
}

static void
unlink_w(struct waiter *w)
{
	*w->pprev = w->next;
	if (w->next != NULL)
		w->next->pprev = w->pprev;
	w->next = NULL;
	w->pprev = NULL;
}

/* Doubles the table; keeps the old one when memory runs out. */
static void
grow(void)
{
	size_t n = nbuckets ? nbuckets * 2 : BUCKETS_MIN, i;
	struct waiter **old = buckets, *w;
	size_t oldn = nbuckets;

	if ((buckets = calloc(n, sizeof(*buckets))) == NULL) {
		buckets = old;
		return;
	}
	nbuckets = n;
	for (i = 0; i < oldn; i++)
		while ((w = old[i]) != NULL) {
			unlink_w(w);
			link_in(&buckets[slot(w->token)], w);
		}
	free(old);
}

static void
timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct waiter *w = arg;

	worker_update_time();
	waitlist_remove(w);
	w->fn(w, true);
}

void
waitlist_add(struct waiter *w, uint64_t token, int timeout_ms, waiter_fn fn)
{
	struct timeval tv;

	if (nbuckets == 0 || count >= 2 * nbuckets)
		grow();
	w->token = token;
	w->fn = fn;
	w->queued = true;
	w->since_us = worker.now_us;
	STATS_INC(stampede_waits);
	if (nbuckets == 0) {
		/* No table at all: the waiter is called at the next
		 * wake-up, as all are. */
		link_in(&waking, w);
	} else {
		link_in(&buckets[slot(token)], w);
	}
	count++;
	evtimer_assign(&w->timer, worker.base, timeout_cb, w);
	if (timeout_ms > 0) {
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (timeout_ms % 1000) * 1000;
		evtimer_add(&w->timer, &tv);
	}
}

void
waitlist_remove(struct waiter *w)
{
	if (!w->queued)
		return;
	w->queued = false;
	STATS_ADD(stampede_wait_us, worker.now_us - w->since_us);
	evtimer_del(&w->timer);
	unlink_w(w);
	count--;
}

bool
waitlist_queued(const struct waiter *w)
{
	return w->queued;
}

/* Calls back the waiters moved to the waking list. */
static void
call_waking(void)
{
	struct waiter *w;

	while ((w = waking) != NULL) {
		waitlist_remove(w);
		w->fn(w, false);
	}
}

void
waitlist_wake(uint64_t token)
{
	struct waiter *w, *next;

	if (nbuckets == 0)
		return;
	for (w = buckets[slot(token)]; w != NULL; w = next) {
		next = w->next;
		if (w->token != token)
			continue;
		unlink_w(w);
		link_in(&waking, w);
	}
	call_waking();
}

void
waitlist_wake_all(void)
{
	struct waiter *w;
	size_t i;

	for (i = 0; i < nbuckets; i++)
		while ((w = buckets[i]) != NULL) {
			unlink_w(w);
			link_in(&waking, w);
		}
	call_waking();
}

unsigned
waitlist_count(void)
{
	return count;
}

void
waitlist_free_all(void)
{
	free(buckets);
	buckets = NULL;
	nbuckets = 0;
}

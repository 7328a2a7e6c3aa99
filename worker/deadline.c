/*
 * Deadline queues (see deadline.h): a circular doubly linked list sorted
 * by deadline, around a node of the queue's own (so that taking a node
 * out needs no queue and no test), and one libevent timer, armed for the
 * earliest deadline it has been asked for and set again from the head
 * when it fires.
 */
#include <stdlib.h>
#include <time.h>
#include <event2/event.h>

#include "worker/deadline.h"

struct dl_queue {
	struct dl_node list;		/* next: the head; prev: the tail */
	uint64_t armed;		/* the timer's deadline; 0: not set */
	dl_fire_fn *fire;
	struct event *ev;
};

uint64_t
dl_now(void)
{
	struct timespec ts;

	/* What libevent's own timers use: no system call, 4 ms steps. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
arm(struct dl_queue *q, uint64_t at, uint64_t now)
{
	uint64_t ms = at > now ? at - now : 0;
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	q->armed = at;
	evtimer_add(q->ev, &tv);
}

static void
due_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dl_queue *q = arg;
	struct dl_node *n;
	uint64_t now = dl_now();

	(void)fd;
	(void)what;
	q->armed = 0;
	/* The head is read again each time: fire() changes the queue. */
	while ((n = q->list.next) != &q->list && n->at <= now) {
		dl_del(n);
		q->fire(n);
	}
	n = q->list.next;
	if (n != &q->list && n->at != DL_NEVER &&
	    (q->armed == 0 || n->at < q->armed))
		arm(q, n->at, now);
}

struct dl_queue *
dl_queue_new(struct event_base *base, dl_fire_fn *fire)
{
	struct dl_queue *q = calloc(1, sizeof(*q));

	if (q == NULL)
		return NULL;
	q->list.next = q->list.prev = &q->list;
	q->fire = fire;
	q->ev = evtimer_new(base, due_cb, q);
	if (q->ev == NULL) {
		free(q);
		return NULL;
	}
	return q;
}

void
dl_queue_free(struct dl_queue *q)
{
	if (q == NULL)
		return;
	event_free(q->ev);
	free(q);
}

static inline void
add_at(struct dl_queue *q, struct dl_node *n, uint64_t at, uint64_t now)
{
	struct dl_node *p = q->list.prev;

	if (at != DL_NEVER) {
		/* Same duration: p is the tail; else walk back to the place. */
		while (p != &q->list && p->at > at)
			p = p->prev;
		if (q->armed == 0 || at < q->armed)
			arm(q, at, now);
	}
	n->at = at;
	n->prev = p;
	n->next = p->next;
	p->next->prev = n;
	p->next = n;
}

void
dl_add(struct dl_queue *q, struct dl_node *n, uint64_t ms)
{
	uint64_t now;

	if (ms == DL_NEVER) {
		add_at(q, n, DL_NEVER, 0);
		return;
	}
	now = dl_now();
	add_at(q, n, now + ms, now);
}

void
dl_add_at(struct dl_queue *q, struct dl_node *n, uint64_t at, uint64_t now)
{
	add_at(q, n, at, now);
}

struct dl_node *
dl_first(const struct dl_queue *q)
{
	return q->list.next != &q->list ? q->list.next : NULL;
}

struct dl_node *
dl_next(const struct dl_queue *q, const struct dl_node *n)
{
	return n->next != &q->list ? n->next : NULL;
}

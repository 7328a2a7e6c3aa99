/*
 * Deadline queues: the timers of many objects that share a few durations,
 * as a worker's connections share keepalive_timeout, header_timeout and
 * the like.  Every object of a queue waits the same time, so appending
 * keeps the queue sorted: an object needs only a list node and its
 * deadline (24 bytes, where a libevent timer is 128), and one libevent
 * timer per queue fires for the head.  Removing an object leaves that
 * timer alone: it may fire early once, finds nothing due and is set again
 * for the new head.  A deadline of another length is inserted in order
 * from the tail, which stays cheap when it is the exception.
 */
#ifndef CORRAL_DEADLINE_H
#define CORRAL_DEADLINE_H

#include <stdint.h>

struct event_base;
struct dl_queue;

/* Embedded in each object. */
struct dl_node {
	struct dl_node *prev, *next;
	uint64_t at;			/* monotonic milliseconds */
};

#define DL_NEVER	UINT64_MAX	/* in a queue, never due */

/* Called for each node that is due, already out of its queue; it may add
 * and remove any node, this one included. */
typedef void dl_fire_fn(struct dl_node *n);

/* A queue whose due nodes go to fire; NULL when out of memory. */
struct dl_queue *dl_queue_new(struct event_base *base, dl_fire_fn *fire);
/* Frees the queue (its nodes are the caller's). */
void dl_queue_free(struct dl_queue *q);
/* Adds n, in no queue, due in ms milliseconds (DL_NEVER: never). */
void dl_add(struct dl_queue *q, struct dl_node *n, uint64_t ms);
/* The same, due at the monotonic time at, for a caller that read the
 * clock already (it said now): the clock is not read again. */
void dl_add_at(struct dl_queue *q, struct dl_node *n, uint64_t at,
    uint64_t now);
/* Takes n out of its queue (or list). */
static inline void
dl_del(struct dl_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
}

/*
 * A plain list of nodes that wait for nothing (a circular list around
 * list, set up as {&list, &list, DL_NEVER}): n goes at the end.
 */
static inline void
dl_append(struct dl_node *list, struct dl_node *n)
{
	n->at = DL_NEVER;
	n->next = list;
	n->prev = list->prev;
	list->prev->next = n;
	list->prev = n;
}
/* The node due first, or NULL. */
struct dl_node *dl_first(const struct dl_queue *q);
/* The node due after n, or NULL. */
struct dl_node *dl_next(const struct dl_queue *q, const struct dl_node *n);
/* Now, in monotonic milliseconds. */
uint64_t dl_now(void);

#endif

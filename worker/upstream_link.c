/*
 * An upstream connection (struct upstream_link): its socket, its TLS
 * session while pooled, and its two events.  The read event is added once,
 * when connected, and kept until the link is closed, also while it idles in
 * the pool: it goes to the exchange that holds the link, or, in the pool,
 * closes it (the peer closed it or spoke out of turn).  Links are kept on
 * a free list for the next connection.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/event.h>

#include "worker/tls.h"
#include "worker/upstream.h"
#include "worker/upstream_impl.h"
#include "worker/conn.h"

static struct upstream_link *free_link;

static void
link_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_link *l = arg;
	char b;

	(void)what;
	if (l->uc != NULL) {
		uc_read(l->uc);
		return;
	}
	/* Pooled: a wakeup meant for its last exchange finds nothing. */
	if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	/* The peer closed it or sent bytes nobody asked for: either way it
	 * cannot carry a request. */
	upstream_pool_drop(l->up, l);
	upstream_link_close(l, true);
}

static void
link_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upstream_link *l = arg;

	(void)fd;
	(void)what;
	if (l->uc != NULL)
		uc_write(l->uc);
}

struct upstream_link *
upstream_link_new(struct upstream *u, struct upstream_conn *uc, int fd)
{
	struct upstream_link *l = free_link;

	if (l != NULL)
		free_link = l->next;
	else if ((l = malloc(sizeof(*l))) == NULL)
		return NULL;
	l->fd = fd;
	l->ssl = NULL;
	l->up = u;
	l->uc = uc;
	l->reading = l->writing = false;
	event_assign(&l->rev, worker.base, fd, EV_READ | EV_PERSIST,
	    link_read_cb, l);
	event_assign(&l->wev, worker.base, fd, EV_WRITE | EV_PERSIST,
	    link_write_cb, l);
	return l;
}

int
upstream_link_fd(const struct upstream_link *l)
{
	return l->fd;
}

struct upstream_link *
upstream_link_adopt(struct upstream *u, int fd)
{
	struct upstream_link *l = upstream_link_new(u, NULL, fd);

	if (l != NULL)
		l->reading = event_add(&l->rev, NULL) == 0;
	return l;
}

void
upstream_link_release(struct upstream_link *l)
{
	if (l->reading)
		event_del(&l->rev);
	if (l->writing)
		event_del(&l->wev);
	l->next = free_link;
	free_link = l;
}

void
upstream_link_close(struct upstream_link *l, bool clean)
{
	if (l->reading)
		event_del(&l->rev);
	if (l->writing)
		event_del(&l->wev);
	upstream_tls_close(l->ssl, clean);
	close(l->fd);
	l->ssl = NULL;
	l->fd = -1;
	l->next = free_link;
	free_link = l;
}

void
upstream_link_free_all(void)
{
	struct upstream_link *l;

	while ((l = free_link) != NULL) {
		free_link = l->next;
		free(l);
	}
}

/*
 * The part of bench/relay and bench/fcgi_relay that is not the protocol
 * (relay_core.h): accepting and reading clients, the pool of upstream
 * connections and the line of clients waiting for one, the epoll loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bench/relay_core.h"

#define UB(u)	((struct up_base *)(u))

int relay_ep;
static const struct relay_proto *proto;
static struct sockaddr_storage up_addr;
static socklen_t up_addrlen;
static struct up *idle;
static struct client *line_head, *line_tail;
static unsigned nups, max_ups = 32;
/* Clients closed during a batch of events, freed after it: a later event
 * of the same batch may still point at one. */
static struct client *dead;

void
relay_die(const char *what)
{
	perror(what);
	exit(1);
}

void
relay_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", proto->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

int
relay_watch(int op, int fd, void *ptr, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	return epoll_ctl(relay_ep, op, fd, &ev);
}

bool
relay_init(const struct relay_proto *p, int *argc, char ***argv)
{
	proto = p;
	if (*argc > 2 && strcmp((*argv)[1], "-k") == 0) {
		max_ups = (unsigned)strtoul((*argv)[2], NULL, 10);
		*argc -= 2;
		*argv += 2;
	}
	return max_ups != 0;
}

static void
up_close(struct up *u)
{
	close(UB(u)->s.fd);
	free(u);
	nups--;
}

void
relay_client_free(struct client *c)
{
	close(c->s.fd);
	c->s.fd = -1;
	c->next = dead;
	dead = c;
}

void
relay_release(struct up *u)
{
	struct client *c = line_head;

	UB(u)->c = NULL;
	if (c != NULL) {
		if ((line_head = c->next) == NULL)
			line_tail = NULL;
		c->next = NULL;
		UB(u)->next = NULL;
		c->up = u;
		UB(u)->c = c;
		relay_serve(c);
		return;
	}
	UB(u)->next = idle;
	idle = u;
}

/* An idle upstream connection, a new one, or NULL when all are busy. */
static struct up *
up_get(void)
{
	struct up *u = idle;
	char what[64];
	int fd, one = 1;

	if (u != NULL) {
		idle = UB(u)->next;
		return u;
	}
	if (nups == max_ups)
		return NULL;
	/* A blocking connect: once per upstream connection, before the
	 * run. */
	if ((fd = socket(up_addr.ss_family, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&up_addr, up_addrlen) == -1) {
		snprintf(what, sizeof(what), "connect to %s", proto->upstream);
		relay_die(what);
	}
	if (up_addr.ss_family == AF_INET)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Non-blocking from here: a recv() with nothing to read must not
	 * stop the loop. */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) == -1)
		relay_die("fcntl");
	if ((u = calloc(1, proto->up_size)) == NULL)
		relay_die("calloc");
	UB(u)->s.fd = fd;
	UB(u)->s.is_up = true;
	if (relay_watch(EPOLL_CTL_ADD, fd, u, EPOLLIN))
		relay_die("epoll_ctl");
	nups++;
	return u;
}

/* Length of the whole first request in rbuf, or 0. */
static size_t
request_len(const struct client *c)
{
	const char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);

	return end == NULL ? 0 : (size_t)(end + 4 - c->rbuf);
}

void
relay_serve(struct client *c)
{
	struct up *u = c->up;

	if (c->reqlen == 0 && (c->reqlen = request_len(c)) == 0)
		return;
	if (u == NULL) {
		if ((u = up_get()) == NULL) {
			if (line_tail != NULL)
				line_tail->next = c;
			else
				line_head = c;
			line_tail = c;
			return;
		}
		c->up = u;
		UB(u)->c = c;
	}
	proto->send(u, c);
}

void
relay_answered(struct up *u, struct client *c)
{
	memmove(c->rbuf, c->rbuf + c->reqlen, c->rlen - c->reqlen);
	c->rlen -= c->reqlen;
	if ((c->reqlen = request_len(c)) > 0) {
		relay_serve(c);	/* a pipelined request, on the same
				   connection */
		return;
	}
	c->up = NULL;
	relay_release(u);
}

void
relay_up_closed(struct up *u)
{
	if (UB(u)->c != NULL)
		relay_fail("%s closed mid-answer", proto->upstream);
	if (idle == u)
		idle = UB(u)->next;
	else
		for (struct up *p = idle; p != NULL; p = UB(p)->next)
			if (UB(p)->next == u)
				UB(p)->next = UB(u)->next;
	up_close(u);
}

/* Takes c out of the line for an upstream connection, if it is in it. */
static void
line_remove(struct client *c)
{
	for (struct client **p = &line_head; *p != NULL; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			if (line_tail == c) {
				line_tail = NULL;
				for (struct client *q = line_head; q != NULL;
				    q = q->next)
					line_tail = q;
			}
			break;
		}
}

static void
client_read(struct client *c)
{
	ssize_t n;

	if (c->rlen == RBUF) {
		/* A request in flight and the buffer full: wait. */
		relay_watch(EPOLL_CTL_MOD, c->s.fd, c, 0);
		return;
	}
	n = recv(c->s.fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
	if (n == -1 && errno == EAGAIN)
		return;
	if (n <= 0) {
		relay_watch(EPOLL_CTL_DEL, c->s.fd, NULL, 0);
		if (c->up != NULL && proto->client_gone(c))
			return;
		line_remove(c);
		relay_client_free(c);
		return;
	}
	c->rlen += (size_t)n;
	if (c->up == NULL && c->reqlen == 0)
		relay_serve(c);
}

static void
accept_all(int lfd)
{
	struct client *c;
	int fd, one = 1;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) != -1) {
		if ((c = calloc(1, sizeof(*c))) == NULL) {
			close(fd);
			continue;
		}
		c->s.fd = fd;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (relay_watch(EPOLL_CTL_ADD, fd, c, EPOLLIN))
			relay_client_free(c);
	}
}

void
relay_run(int port, const struct sockaddr *sa, socklen_t salen)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct epoll_event evs[256];
	int lfd, one = 1;

	memcpy(&up_addr, sa, salen);
	up_addrlen = salen;
	signal(SIGPIPE, SIG_IGN);
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4096) || (relay_ep = epoll_create1(0)) == -1 ||
	    relay_watch(EPOLL_CTL_ADD, lfd, NULL, EPOLLIN))
		relay_die("listen");
	for (;;) {
		int n = epoll_wait(relay_ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct sock *k = evs[i].data.ptr;
			struct client *c = (struct client *)k;

			if (k == NULL)
				accept_all(lfd);
			else if (k->fd == -1)
				continue;	/* freed earlier in the batch */
			else if (k->is_up)
				proto->up_read((struct up *)k);
			else if (c->writing)
				proto->client_writable(c);
			else
				client_read(c);
		}
		while (dead != NULL) {
			struct client *c = dead;

			dead = c->next;
			free(c);
		}
	}
}

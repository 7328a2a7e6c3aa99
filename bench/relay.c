/*
 * bench/relay: the least a reverse proxy can do per request, as the
 * yardstick of bench/run's uncached proxy case.  For each GET a client
 * sends it takes an idle kept-alive connection to the origin (or opens
 * one, up to -k of them, or waits in line for one), writes the client's
 * request bytes to it unchanged, reads the answer and writes each piece
 * back to the client as it comes, then puts the origin connection back.
 * The end of an answer is its header plus Content-Length; nothing else of
 * HTTP is looked at, nothing is rewritten.  Its CPU per request is the
 * kernel's price for the four socket operations a proxy cannot avoid.
 * Requests with a body, chunked answers and errors from the origin are out
 * of its scope: not a proxy to use.
 *
 * Usage: relay [-k CONNS] PORT ORIGIN_PORT
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define RBUF		8192
#define UBUF		65536

struct up;

/* What an epoll event points at: a client or an origin connection. */
struct sock {
	int fd;
	bool is_up;
};

/* A client connection, with its request bytes. */
struct client {
	struct sock s;
	bool writing;		/* registered for EPOLLOUT */
	bool closed;		/* the client went away mid-answer */
	struct up *up;		/* the origin connection answering it */
	struct client *next;	/* in the line for an origin connection */
	size_t rlen;		/* request bytes in rbuf */
	size_t reqlen;		/* length of the first request, 0: none */
	char rbuf[RBUF];
};

/* An origin connection, idle or carrying one client's exchange. */
struct up {
	struct sock s;
	struct client *c;
	struct up *next;	/* in the idle list */
	size_t got;		/* answer bytes read so far */
	size_t want;		/* header + body, 0 until the header is in */
	size_t blen, boff;	/* bytes in buf not yet written to c */
	char buf[UBUF];
};

static int ep;
static struct sockaddr_in origin = { .sin_family = AF_INET };
static struct up *idle;
static struct client *line_head, *line_tail;
static unsigned nups, max_ups = 32;

static void __attribute__((noreturn))
die(const char *what)
{
	perror(what);
	exit(1);
}

static int
watch(int op, int fd, void *ptr, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	return epoll_ctl(ep, op, fd, &ev);
}

static void
up_close(struct up *u)
{
	close(u->s.fd);
	free(u);
	nups--;
}

static void
client_free(struct client *c)
{
	close(c->s.fd);
	free(c);
}

static void serve(struct client *c);

/* The end of an exchange: the origin connection goes idle, or to the
 * next client in line. */
static void
up_release(struct up *u)
{
	struct client *c = line_head;

	u->c = NULL;
	if (c != NULL) {
		if ((line_head = c->next) == NULL)
			line_tail = NULL;
		c->next = NULL;
		u->next = NULL;
		c->up = u;
		u->c = c;
		serve(c);
		return;
	}
	u->next = idle;
	idle = u;
}

/* An idle origin connection, a new one, or NULL when all are busy. */
static struct up *
up_get(void)
{
	struct up *u = idle;
	int fd, one = 1;

	if (u != NULL) {
		idle = u->next;
		return u;
	}
	if (nups == max_ups)
		return NULL;
	/* A blocking connect: once per origin connection, before the run. */
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&origin, sizeof(origin)) == -1)
		die("connect to the origin");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((u = calloc(1, sizeof(*u))) == NULL)
		die("calloc");
	u->s.fd = fd;
	u->s.is_up = true;
	if (watch(EPOLL_CTL_ADD, fd, u, EPOLLIN))
		die("epoll_ctl");
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

/* Hands the first request in rbuf to an origin connection. */
static void
serve(struct client *c)
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
		u->c = c;
	}
	u->got = u->want = u->blen = u->boff = 0;
	if (send(u->s.fd, c->rbuf, c->reqlen, MSG_NOSIGNAL) !=
	    (ssize_t)c->reqlen)
		die("send to the origin");
}

/* Header plus Content-Length of the answer in buf, or 0 if incomplete. */
static size_t
answer_len(const struct up *u)
{
	const char *end = memmem(u->buf, u->blen, "\r\n\r\n", 4), *p, *nl;

	if (end == NULL)
		return 0;
	for (p = u->buf; p != NULL && p < end; p = nl == NULL ? NULL :
	    nl + 1) {
		if (strncasecmp(p, "content-length:", 15) == 0)
			return (size_t)(end + 4 - u->buf) +
			    strtoul(p + 15, NULL, 10);
		nl = memchr(p, '\n', (size_t)(end - p));
	}
	fprintf(stderr, "relay: an answer without Content-Length\n");
	exit(1);
}

/* Writes what the origin sent to the client; false if it must wait. */
static bool
up_write(struct up *u)
{
	struct client *c = u->c;
	ssize_t n;

	if (!c->closed) {
		n = send(c->s.fd, u->buf + u->boff, u->blen - u->boff,
		    MSG_NOSIGNAL);
		if (n == -1 && errno != EAGAIN)
			c->closed = true;
		else if (n >= 0)
			u->boff += (size_t)n;
	}
	if (!c->closed && u->boff < u->blen) {
		/* Stop reading the origin until the client drains. */
		watch(EPOLL_CTL_MOD, u->s.fd, u, 0);
		watch(EPOLL_CTL_MOD, c->s.fd, c, EPOLLOUT);
		c->writing = true;
		return false;
	}
	u->boff = u->blen = 0;
	if (u->got < u->want || u->want == 0)
		return true;
	/* The whole answer is out. */
	if (c->closed) {
		client_free(c);
		up_release(u);
		return true;
	}
	memmove(c->rbuf, c->rbuf + c->reqlen, c->rlen - c->reqlen);
	c->rlen -= c->reqlen;
	if ((c->reqlen = request_len(c)) > 0) {
		serve(c);	/* a pipelined request, on the same connection */
		return true;
	}
	c->up = NULL;
	up_release(u);
	return true;
}

static void
up_read(struct up *u)
{
	ssize_t n = recv(u->s.fd, u->buf + u->blen, UBUF - u->blen, 0);

	if (n <= 0) {
		if (n == -1 && errno == EAGAIN)
			return;
		if (u->c != NULL) {
			fprintf(stderr, "relay: the origin closed mid-answer\n");
			exit(1);
		}
		if (idle == u)
			idle = u->next;
		else
			for (struct up *p = idle; p != NULL; p = p->next)
				if (p->next == u)
					p->next = u->next;
		up_close(u);
		return;
	}
	if (u->c == NULL) {
		fprintf(stderr, "relay: the origin sent bytes unasked\n");
		exit(1);
	}
	if (u->want == 0) {
		u->blen += (size_t)n;
		if ((u->want = answer_len(u)) == 0)
			return;	/* more header to come */
		u->got = u->blen;
	} else {
		u->blen += (size_t)n;
		u->got += (size_t)n;
	}
	up_write(u);
}

static void
client_read(struct client *c)
{
	ssize_t n;

	if (c->rlen == RBUF) {
		/* A request in flight and the buffer full: wait. */
		watch(EPOLL_CTL_MOD, c->s.fd, c, 0);
		return;
	}
	n = recv(c->s.fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
	if (n == -1 && errno == EAGAIN)
		return;
	if (n <= 0) {
		watch(EPOLL_CTL_DEL, c->s.fd, NULL, 0);
		if (c->up != NULL) {
			c->closed = true;	/* freed when the answer ends */
			return;
		}
		for (struct client **p = &line_head; *p != NULL;
		    p = &(*p)->next)
			if (*p == c) {
				*p = c->next;
				if (line_tail == c) {
					line_tail = NULL;
					for (struct client *q = line_head;
					    q != NULL; q = q->next)
						line_tail = q;
				}
				break;
			}
		client_free(c);
		return;
	}
	c->rlen += (size_t)n;
	if (c->up == NULL && c->reqlen == 0)
		serve(c);
}

static void
client_writable(struct client *c)
{
	struct up *u = c->up;

	c->writing = false;
	watch(EPOLL_CTL_MOD, c->s.fd, c, EPOLLIN);
	watch(EPOLL_CTL_MOD, u->s.fd, u, EPOLLIN);
	up_write(u);
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
		if (watch(EPOLL_CTL_ADD, fd, c, EPOLLIN))
			client_free(c);
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct epoll_event evs[256];
	int lfd, one = 1;

	if (argc > 2 && strcmp(argv[1], "-k") == 0) {
		max_ups = (unsigned)strtoul(argv[2], NULL, 10);
		argc -= 2;
		argv += 2;
	}
	if (argc != 3 || max_ups == 0) {
		fprintf(stderr, "usage: relay [-k CONNS] PORT ORIGIN_PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	sin.sin_port = htons((uint16_t)atoi(argv[1]));
	sin.sin_addr.s_addr = origin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	origin.sin_port = htons((uint16_t)atoi(argv[2]));
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4096) || (ep = epoll_create1(0)) == -1 ||
	    watch(EPOLL_CTL_ADD, lfd, NULL, EPOLLIN))
		die("listen");
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct sock *k = evs[i].data.ptr;
			struct client *c = (struct client *)k;

			if (k == NULL)
				accept_all(lfd);
			else if (k->is_up)
				up_read((struct up *)k);
			else if (c->writing)
				client_writable(c);
			else
				client_read(c);
		}
	}
}

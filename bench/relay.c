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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "bench/relay_core.h"

/* An origin connection, idle or carrying one client's exchange. */
struct up {
	struct up_base b;
	size_t got;		/* answer bytes read so far */
	size_t want;		/* header + body, 0 until the header is in */
	size_t blen, boff;	/* bytes in buf not yet written to c */
	char buf[UBUF];
};

/* Writes the client's request bytes to the origin unchanged. */
static void
send_request(struct up *u, struct client *c)
{
	u->got = u->want = u->blen = u->boff = 0;
	if (send(u->b.s.fd, c->rbuf, c->reqlen, MSG_NOSIGNAL) !=
	    (ssize_t)c->reqlen)
		relay_die("send to the origin");
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
	relay_fail("an answer without Content-Length");
}

/* Writes what the origin sent to the client; false if it must wait. */
static bool
up_write(struct up *u)
{
	struct client *c = u->b.c;
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
		relay_watch(EPOLL_CTL_MOD, u->b.s.fd, u, 0);
		relay_watch(EPOLL_CTL_MOD, c->s.fd, c, EPOLLOUT);
		c->writing = true;
		return false;
	}
	u->boff = u->blen = 0;
	if (u->got < u->want || u->want == 0)
		return true;
	/* The whole answer is out. */
	if (c->closed) {
		relay_client_free(c);
		relay_release(u);
		return true;
	}
	relay_answered(u, c);
	return true;
}

static void
up_read(struct up *u)
{
	ssize_t n = recv(u->b.s.fd, u->buf + u->blen, UBUF - u->blen, 0);

	if (n <= 0) {
		if (n == -1 && errno == EAGAIN)
			return;
		relay_up_closed(u);
		return;
	}
	if (u->b.c == NULL)
		relay_fail("the origin sent bytes unasked");
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
client_writable(struct client *c)
{
	struct up *u = c->up;

	c->writing = false;
	relay_watch(EPOLL_CTL_MOD, c->s.fd, c, EPOLLIN);
	relay_watch(EPOLL_CTL_MOD, u->b.s.fd, u, EPOLLIN);
	up_write(u);
}

/* The client left mid-answer: the answer is read to its end and
 * dropped, then the client is freed (up_write()). */
static bool
client_gone(struct client *c)
{
	c->closed = true;
	return true;
}

static const struct relay_proto relay = {
	.name = "relay",
	.upstream = "the origin",
	.up_size = sizeof(struct up),
	.send = send_request,
	.up_read = up_read,
	.client_writable = client_writable,
	.client_gone = client_gone,
};

int
main(int argc, char **argv)
{
	struct sockaddr_in origin = { .sin_family = AF_INET };

	if (!relay_init(&relay, &argc, &argv) || argc != 3) {
		fprintf(stderr, "usage: relay [-k CONNS] PORT ORIGIN_PORT\n");
		return 2;
	}
	origin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	origin.sin_port = htons((uint16_t)atoi(argv[2]));
	relay_run(atoi(argv[1]), (struct sockaddr *)&origin,
	    sizeof(origin));
}

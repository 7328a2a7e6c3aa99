/*
 * bench/floor: the least a server can do per request, as a yardstick for
 * bench/run.  It answers each GET with bytes prepared before the run (a
 * response captured from corral), using one recv and one writev per batch
 * of requests on a connection, so its CPU per request is what the kernel
 * costs for this exchange and nothing else.  A response of -s BYTES or
 * more (32 KiB by default) goes out with one sendfile() from its file
 * instead, head and body together, as the least a server can do for a
 * large file is to let the kernel send it from the page cache.  No HTTP
 * beyond finding the end of a request and its path; not a server to use.
 *
 * Usage: floor [-s BYTES] PORT PATH=FILE...
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RESP	16
#define RBUF		8192
#define MAX_OUT		64	/* responses queued on a connection */

/* Responses at least this long go out with sendfile(); -s changes it. */
static size_t sendfile_min = 32768;

struct resp {
	char *path;
	char *data;
	size_t len;
	int fd;			/* the file, for sendfile() */
};

/* A response being sent: off bytes of it are out. */
struct out {
	const struct resp *r;
	size_t off;
};

struct client {
	int fd;
	size_t rlen;		/* unparsed request bytes in rbuf */
	unsigned qhead, qlen;	/* ring of queued responses */
	bool waiting;		/* registered for EPOLLOUT */
	struct out q[MAX_OUT];
	char rbuf[RBUF];
};

static struct resp resps[MAX_RESP];
static size_t nresps;
static const char notfound[] = "HTTP/1.1 404 Not Found\r\n"
    "Content-Length: 0\r\n\r\n";
static const struct resp nf = { NULL, (char *)notfound,
    sizeof(notfound) - 1, -1 };

static void __attribute__((noreturn))
die(const char *what)
{
	perror(what);
	exit(1);
}

/* PATH=FILE: the response kept in memory, and its file for sendfile. */
static void
load(char *arg)
{
	char *eq = strchr(arg, '=');
	struct stat st;
	int fd;

	if (eq == NULL || nresps == MAX_RESP) {
		fprintf(stderr, "floor: bad argument %s\n", arg);
		exit(2);
	}
	*eq = '\0';
	if ((fd = open(eq + 1, O_RDONLY)) == -1 || fstat(fd, &st) == -1)
		die(eq + 1);
	resps[nresps].path = arg;
	resps[nresps].len = (size_t)st.st_size;
	if ((resps[nresps].data = malloc(resps[nresps].len + 1)) == NULL ||
	    read(fd, resps[nresps].data, resps[nresps].len) != st.st_size)
		die(eq + 1);
	resps[nresps].fd = resps[nresps].len >= sendfile_min ? fd : -1;
	if (resps[nresps].fd == -1)
		close(fd);
	nresps++;
}

/* The response for the request at p (its header ends before end). */
static const struct resp *
lookup(const char *p, const char *end)
{
	const char *sp = memchr(p, ' ', (size_t)(end - p)), *path, *e;

	if (sp == NULL)
		return &nf;
	path = sp + 1;
	if ((e = memchr(path, ' ', (size_t)(end - path))) == NULL)
		return &nf;
	for (size_t i = 0; i < nresps; i++)
		if (strlen(resps[i].path) == (size_t)(e - path) &&
		    memcmp(resps[i].path, path, (size_t)(e - path)) == 0)
			return &resps[i];
	return &nf;
}

static void
drop(int ep, struct client *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
}

static struct out *
head(struct client *c)
{
	return &c->q[c->qhead % MAX_OUT];
}

/*
 * One write: sendfile() for a large response at the head of the queue,
 * else one writev() of every memory response up to the next large one.
 * Returns bytes written, 0 when the socket is full, -1 on error.
 */
static ssize_t
write_some(struct client *c)
{
	struct iovec iov[MAX_OUT];
	struct out *o = head(c);
	ssize_t n;
	int k = 0;

	if (o->r->fd != -1) {
		off_t off = (off_t)o->off;

		n = sendfile(c->fd, o->r->fd, &off, o->r->len - o->off);
	} else {
		for (unsigned i = 0; i < c->qlen; i++) {
			o = &c->q[(c->qhead + i) % MAX_OUT];
			if (o->r->fd != -1)
				break;
			iov[k].iov_base = o->r->data + o->off;
			iov[k++].iov_len = o->r->len - o->off;
		}
		n = writev(c->fd, iov, k);
	}
	if (n == -1)
		return errno == EAGAIN ? 0 : -1;
	return n;
}

/* Writes the queue until it is empty or the socket is full; -1 on error. */
static int
flush(int ep, struct client *c)
{
	struct epoll_event ev = { .data.ptr = c };
	ssize_t n = 1;

	while (c->qlen > 0 && (n = write_some(c)) > 0) {
		while (n > 0) {
			struct out *o = head(c);
			size_t k = o->r->len - o->off;

			if ((size_t)n < k)
				k = (size_t)n;
			o->off += k;
			n -= (ssize_t)k;
			if (o->off == o->r->len) {
				c->qhead++;
				c->qlen--;
			}
		}
	}
	if (n == -1)
		return -1;
	if (c->waiting == (c->qlen > 0))
		return 0;
	c->waiting = c->qlen > 0;
	ev.events = c->waiting ? EPOLLOUT : EPOLLIN;
	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Queues a response for every whole request in rbuf and writes them. */
static int
answer(int ep, struct client *c)
{
	size_t at;
	char *end;

	do {
		at = 0;
		while (c->qlen < MAX_OUT && (end = memmem(c->rbuf + at,
		    c->rlen - at, "\r\n\r\n", 4)) != NULL) {
			struct out *o = &c->q[(c->qhead + c->qlen++) %
			    MAX_OUT];

			o->r = lookup(c->rbuf + at, end);
			o->off = 0;
			at = (size_t)(end + 4 - c->rbuf);
		}
		memmove(c->rbuf, c->rbuf + at, c->rlen - at);
		c->rlen -= at;
		if (c->qlen == 0 || flush(ep, c) == -1)
			return c->qlen == 0 ? 0 : -1;
		/* A full queue may have left whole requests behind. */
	} while (!c->waiting && at > 0 &&
	    memmem(c->rbuf, c->rlen, "\r\n\r\n", 4) != NULL);
	return 0;
}

/* Reads what there is and answers every whole request. */
static int
serve(int ep, struct client *c)
{
	ssize_t n;

	if (c->rlen == RBUF)
		return -1;
	n = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
	if (n <= 0)
		return n == -1 && errno == EAGAIN ? 0 : -1;
	c->rlen += (size_t)n;
	return answer(ep, c);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct epoll_event ev, evs[256];
	int lfd, ep, one = 1;

	if (argc > 2 && strcmp(argv[1], "-s") == 0) {
		sendfile_min = strtoul(argv[2], NULL, 10);
		argc -= 2;
		argv += 2;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: floor [-s BYTES] PORT PATH=FILE...\n");
		return 2;
	}
	for (int i = 2; i < argc; i++)
		load(argv[i]);
	signal(SIGPIPE, SIG_IGN);
	sin.sin_port = htons((uint16_t)atoi(argv[1]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4096) || (ep = epoll_create1(0)) == -1)
		die("listen");
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl");
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct client *c = evs[i].data.ptr;
			int fd, rc;

			if (c == NULL) {
				while ((fd = accept4(lfd, NULL, NULL,
				    SOCK_NONBLOCK)) != -1) {
					c = calloc(1, sizeof(*c));
					if (c == NULL) {
						close(fd);
						continue;
					}
					c->fd = fd;
					setsockopt(fd, IPPROTO_TCP, TCP_NODELAY,
					    &one, sizeof(one));
					ev.events = EPOLLIN;
					ev.data.ptr = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
						drop(ep, c);
				}
				continue;
			}
			if (!c->waiting)
				rc = serve(ep, c);
			else if ((rc = flush(ep, c)) == 0 && !c->waiting)
				rc = answer(ep, c);	/* requests left */
			if (rc)
				drop(ep, c);
		}
	}
}

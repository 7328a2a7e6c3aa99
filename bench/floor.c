/*
 * bench/floor: the least a server can do per request, as a yardstick for
 * bench/run.  It answers each GET with bytes prepared before the run (a
 * response captured from corral), using one recv and one writev per batch
 * of requests on a connection, so its CPU per request is what the kernel
 * costs for this exchange and nothing else.  No HTTP beyond finding the
 * end of a request and its path; not a server to use.
 *
 * Usage: floor PORT PATH=FILE...
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_RESP	16
#define RBUF		8192
#define MAX_IOV		64

struct resp {
	char *path;
	char *data;
	size_t len;
};

struct client {
	int fd;
	size_t rlen;		/* unparsed request bytes in rbuf */
	int npend;		/* unsent output after a short write */
	struct iovec pend[MAX_IOV];
	char rbuf[RBUF];
};

static struct resp resps[MAX_RESP];
static size_t nresps;
static const char notfound[] = "HTTP/1.1 404 Not Found\r\n"
    "Content-Length: 0\r\n\r\n";

static void __attribute__((noreturn))
die(const char *what)
{
	perror(what);
	exit(1);
}

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
	if ((resps[nresps].data = malloc(resps[nresps].len)) == NULL ||
	    read(fd, resps[nresps].data, resps[nresps].len) != st.st_size)
		die(eq + 1);
	close(fd);
	nresps++;
}

/* The response for the request at p (its header ends before end). */
static const struct resp *
lookup(const char *p, const char *end)
{
	const char *sp = memchr(p, ' ', (size_t)(end - p)), *path, *e;
	static const struct resp nf = { NULL, (char *)notfound,
	    sizeof(notfound) - 1 };

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

/*
 * Writes the iovecs; what a short write leaves stays in c->pend (the
 * responses never move) until the socket drains.  -1 on error.
 */
static int
put(int ep, struct client *c, struct iovec *iov, int n)
{
	struct epoll_event ev = { .data.ptr = c };
	ssize_t w = writev(c->fd, iov, n);
	bool was = c->npend > 0;
	int i;

	if (w == -1 && errno != EAGAIN)
		return -1;
	for (i = 0; i < n && w > 0; i++) {
		size_t k = (size_t)w < iov[i].iov_len ? (size_t)w :
		    iov[i].iov_len;

		iov[i].iov_base = (char *)iov[i].iov_base + k;
		iov[i].iov_len -= k;
		w -= (ssize_t)k;
		if (iov[i].iov_len > 0)
			break;
	}
	c->npend = n - i;
	memmove(c->pend, iov + i, (size_t)c->npend * sizeof(*iov));
	if (was == (c->npend > 0))
		return 0;
	ev.events = c->npend > 0 ? EPOLLOUT : EPOLLIN;
	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Reads what there is and answers every whole request in one writev. */
static int
serve(int ep, struct client *c)
{
	struct iovec iov[MAX_IOV];
	ssize_t n;
	size_t at = 0;
	char *end;
	int niov = 0;

	n = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen, 0);
	if (n <= 0)
		return n == -1 && errno == EAGAIN ? 0 : -1;
	c->rlen += (size_t)n;
	while (niov < MAX_IOV && (end = memmem(c->rbuf + at, c->rlen - at,
	    "\r\n\r\n", 4)) != NULL) {
		const struct resp *r = lookup(c->rbuf + at, end);

		iov[niov].iov_base = r->data;
		iov[niov++].iov_len = r->len;
		at = (size_t)(end + 4 - c->rbuf);
	}
	memmove(c->rbuf, c->rbuf + at, c->rlen - at);
	c->rlen -= at;
	if (c->rlen == RBUF)
		return -1;
	return niov > 0 ? put(ep, c, iov, niov) : 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct epoll_event ev, evs[256];
	int lfd, ep, one = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: floor PORT PATH=FILE...\n");
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
			rc = c->npend > 0 ? put(ep, c, c->pend, c->npend) :
			    serve(ep, c);
			if (rc)
				drop(ep, c);
		}
	}
}

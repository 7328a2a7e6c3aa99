/*
 * bench/fcgi_relay: the least a FastCGI front can do per request, as the
 * yardstick of bench/run's uncached FastCGI case.  For each GET a client
 * sends it takes an idle kept-alive connection to php-fpm (or opens one,
 * up to -k of them, or waits in line for one), writes one FastCGI request
 * built once at start (BEGIN_REQUEST with FCGI_KEEP_CONN, the CGI/1.1
 * parameters corral sends by default for that URI, an empty STDIN) with
 * one send, reads the STDOUT records up to END_REQUEST, and writes the
 * answer to the client with one writev: a status line, the script's own
 * header lines, a Content-Length, the body.  Nothing of the client's
 * request is parsed beyond its end, no Status: line is honoured, STDERR
 * is dropped.  Its CPU per request is the kernel's price for the four
 * socket operations a FastCGI front cannot avoid.  Requests with a body
 * and errors from php-fpm are out of its scope: not a front to use.
 *
 * Usage: fcgi_relay [-k CONNS] PORT FPM_SOCKET DOCUMENT_ROOT URI
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define RBUF		8192
#define UBUF		65536
#define FCGI_HEAD	8
#define FCGI_STDOUT	6
#define FCGI_END	3

struct up;

/* What an epoll event points at: a client or a php-fpm connection. */
struct sock {
	int fd;
	bool is_up;
};

/* A client connection, with its request bytes. */
struct client {
	struct sock s;
	struct up *up;		/* the php-fpm connection answering it */
	struct client *next;	/* in the line for a php-fpm connection */
	size_t rlen;		/* request bytes in rbuf */
	size_t reqlen;		/* length of the first request, 0: none */
	char rbuf[RBUF];
};

/* A php-fpm connection, idle or carrying one client's exchange. */
struct up {
	struct sock s;
	struct client *c;
	struct up *next;	/* in the idle list */
	size_t rlen;		/* record bytes in rbuf */
	size_t olen;		/* STDOUT payload gathered in out */
	char rbuf[UBUF];
	char out[UBUF];
};

static int ep;
static struct sockaddr_un fpm = { .sun_family = AF_UNIX };
static struct up *idle;
static struct client *line_head, *line_tail;
static unsigned nups, max_ups = 32;
static char req[4096];		/* the FastCGI request, built once */
static size_t reqlen;

static void __attribute__((noreturn))
die(const char *what)
{
	perror(what);
	exit(1);
}

static void __attribute__((noreturn))
fail(const char *what)
{
	fprintf(stderr, "fcgi_relay: %s\n", what);
	exit(1);
}

static int
watch(int op, int fd, void *ptr, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = ptr };

	return epoll_ctl(ep, op, fd, &ev);
}

/* Appends one FastCGI name-value pair to the PARAMS body at p. */
static char *
param(char *p, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);
	size_t *lens[] = { &n, &v };

	if ((size_t)(p - req) + n + v + 16 > sizeof(req))
		fail("the parameters do not fit");
	for (int i = 0; i < 2; i++) {
		size_t l = *lens[i];

		if (l < 128)
			*p++ = (char)l;
		else {
			*p++ = (char)(0x80 | (l >> 24));
			*p++ = (char)(l >> 16);
			*p++ = (char)(l >> 8);
			*p++ = (char)l;
		}
	}
	memcpy(p, name, n);
	memcpy(p + n, value, v);
	return p + n + v;
}

static void
record_head(char *p, int type, size_t len)
{
	p[0] = 1;
	p[1] = (char)type;
	p[2] = 0;
	p[3] = 1;		/* request id 1: one at a time per connection */
	p[4] = (char)(len >> 8);
	p[5] = (char)len;
	p[6] = p[7] = 0;
}

/*
 * The request: what corral sends by default (worker/fcgi_params.c, in
 * nginx's order) for a GET of uri from wrk on 127.0.0.1, whose only field
 * is Host, then the X-Forwarded-* fields corral adds.  REMOTE_PORT is a
 * fixed number of the same width.
 */
static void
build(const char *port, const char *root, const char *uri)
{
	char file[4096], host[64];
	char *p = req, *params;
	size_t plen;

	snprintf(file, sizeof(file), "%s%s", root, uri);
	snprintf(host, sizeof(host), "127.0.0.1:%s", port);
	record_head(p, 1, 8);			/* BEGIN_REQUEST */
	memcpy(p + 8, "\0\1\1\0\0\0\0\0", 8);	/* RESPONDER, KEEP_CONN */
	p += 16;
	params = p + FCGI_HEAD;
	p = param(params, "SCRIPT_FILENAME", file);
	p = param(p, "QUERY_STRING", "");
	p = param(p, "REQUEST_METHOD", "GET");
	p = param(p, "CONTENT_TYPE", "");
	p = param(p, "CONTENT_LENGTH", "");
	p = param(p, "SCRIPT_NAME", uri);
	p = param(p, "PATH_INFO", "");
	p = param(p, "REQUEST_URI", uri);
	p = param(p, "DOCUMENT_URI", uri);
	p = param(p, "DOCUMENT_ROOT", root);
	p = param(p, "SERVER_PROTOCOL", "HTTP/1.1");
	p = param(p, "REQUEST_SCHEME", "http");
	p = param(p, "GATEWAY_INTERFACE", "CGI/1.1");
	p = param(p, "SERVER_SOFTWARE", "corral/0.1.0");
	p = param(p, "REMOTE_ADDR", "127.0.0.1");
	p = param(p, "REMOTE_PORT", "45678");
	p = param(p, "SERVER_ADDR", "127.0.0.1");
	p = param(p, "SERVER_PORT", port);
	p = param(p, "SERVER_NAME", "localhost");
	p = param(p, "REDIRECT_STATUS", "200");
	p = param(p, "HTTP_HOST", host);
	/* The proxy handler's own fields, which corral passes as HTTP_*
	 * to FastCGI too. */
	p = param(p, "HTTP_X_FORWARDED_FOR", "127.0.0.1");
	p = param(p, "HTTP_X_FORWARDED_PROTO", "http");
	p = param(p, "HTTP_X_FORWARDED_HOST", host);
	plen = (size_t)(p - params);
	record_head(params - FCGI_HEAD, 4, plen);	/* PARAMS */
	record_head(p, 4, 0);				/* their end */
	record_head(p + FCGI_HEAD, 5, 0);		/* empty STDIN */
	reqlen = (size_t)(p + 2 * FCGI_HEAD - req);
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

/* The end of an exchange: the connection goes idle, or to the next
 * client in line. */
static void
up_release(struct up *u)
{
	struct client *c = line_head;

	u->c = NULL;
	if (c != NULL) {
		if ((line_head = c->next) == NULL)
			line_tail = NULL;
		c->next = NULL;
		c->up = u;
		u->c = c;
		serve(c);
		return;
	}
	u->next = idle;
	idle = u;
}

/* An idle php-fpm connection, a new one, or NULL when all are busy. */
static struct up *
up_get(void)
{
	struct up *u = idle;
	int fd;

	if (u != NULL) {
		idle = u->next;
		return u;
	}
	if (nups == max_ups)
		return NULL;
	/* A blocking connect: once per connection, before the run. */
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&fpm, sizeof(fpm)) == -1)
		die("connect to php-fpm");
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

/* Sends the FastCGI request for the first request in rbuf. */
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
	u->rlen = u->olen = 0;
	if (send(u->s.fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
		die("send to php-fpm");
}

/* The answer is whole: one writev to the client, blocking if it must
 * (the client reads what it asked for). */
static void
answer(struct up *u)
{
	struct client *c = u->c;
	const char *end = memmem(u->out, u->olen, "\r\n\r\n", 4);
	char cl[64];
	struct iovec iov[4];
	size_t head, total = 0;
	ssize_t n;

	if (end == NULL)
		fail("STDOUT without a header block");
	head = (size_t)(end + 2 - u->out);
	iov[0] = (struct iovec){ "HTTP/1.1 200 OK\r\n", 17 };
	iov[1] = (struct iovec){ u->out, head };
	iov[2] = (struct iovec){ cl, (size_t)snprintf(cl, sizeof(cl),
	    "Content-Length: %zu\r\n\r\n", u->olen - head - 2) };
	iov[3] = (struct iovec){ u->out + head + 2, u->olen - head - 2 };
	for (int i = 0; i < 4; i++)
		total += iov[i].iov_len;
	n = writev(c->s.fd, iov, 4);
	if (n >= 0 && (size_t)n != total)
		fail("a short write to a client (not in its scope)");
	if (n == -1) {
		watch(EPOLL_CTL_DEL, c->s.fd, NULL, 0);
		client_free(c);
		up_release(u);
		return;
	}
	memmove(c->rbuf, c->rbuf + c->reqlen, c->rlen - c->reqlen);
	c->rlen -= c->reqlen;
	if ((c->reqlen = request_len(c)) > 0) {
		serve(c);	/* a pipelined request, on the same connection */
		return;
	}
	c->up = NULL;
	up_release(u);
}

/* Takes whole records from rbuf: STDOUT payload to out, STDERR dropped;
 * true at END_REQUEST. */
static bool
records(struct up *u)
{
	size_t off = 0;
	bool done = false;

	while (u->rlen - off >= FCGI_HEAD) {
		const unsigned char *h = (unsigned char *)u->rbuf + off;
		size_t len = (size_t)h[4] << 8 | h[5], all;

		all = FCGI_HEAD + len + h[6];
		if (u->rlen - off < all)
			break;
		if (h[1] == FCGI_STDOUT) {
			if (u->olen + len > UBUF)
				fail("an answer past 64 KiB (not in its scope)");
			memcpy(u->out + u->olen, h + FCGI_HEAD, len);
			u->olen += len;
		}
		off += all;
		if (h[1] == FCGI_END) {
			done = true;
			break;
		}
	}
	if (done && off != u->rlen)
		fail("bytes after END_REQUEST");
	memmove(u->rbuf, u->rbuf + off, u->rlen - off);
	u->rlen -= off;
	return done;
}

static void
up_read(struct up *u)
{
	ssize_t n = recv(u->s.fd, u->rbuf + u->rlen, UBUF - u->rlen, 0);

	if (n <= 0) {
		if (n == -1 && errno == EAGAIN)
			return;
		if (u->c != NULL)
			fail("php-fpm closed mid-answer");
		if (idle == u)
			idle = u->next;
		else
			for (struct up *p = idle; p != NULL; p = p->next)
				if (p->next == u)
					p->next = u->next;
		up_close(u);
		return;
	}
	if (u->c == NULL)
		fail("php-fpm sent bytes unasked");
	u->rlen += (size_t)n;
	if (records(u))
		answer(u);
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
			/* Let the answer come and go to the idle list. */
			c->up->c = NULL;
			while (!records(c->up)) {
				n = recv(c->up->s.fd, c->up->rbuf +
				    c->up->rlen, UBUF - c->up->rlen, 0);
				if (n <= 0)
					fail("php-fpm closed mid-answer");
				c->up->rlen += (size_t)n;
			}
			up_release(c->up);
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
	if (argc != 5 || max_ups == 0 ||
	    strlen(argv[2]) >= sizeof(fpm.sun_path)) {
		fprintf(stderr, "usage: fcgi_relay [-k CONNS] PORT FPM_SOCKET "
		    "DOCUMENT_ROOT URI\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	strcpy(fpm.sun_path, argv[2]);
	build(argv[1], argv[3], argv[4]);
	sin.sin_port = htons((uint16_t)atoi(argv[1]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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

			if (k == NULL)
				accept_all(lfd);
			else if (k->is_up)
				up_read((struct up *)k);
			else
				client_read((struct client *)k);
		}
	}
}

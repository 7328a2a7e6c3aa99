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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench/relay_core.h"

#define FCGI_HEAD	8
#define FCGI_STDOUT	6
#define FCGI_END	3

/* A php-fpm connection, idle or carrying one client's exchange. */
struct up {
	struct up_base b;
	size_t rlen;		/* record bytes in rbuf */
	size_t olen;		/* STDOUT payload gathered in out */
	char rbuf[UBUF];
	char out[UBUF];
};

static char req[4096];		/* the FastCGI request, built once */
static size_t reqlen;

/* Appends one FastCGI name-value pair to the PARAMS body at p. */
static char *
param(char *p, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);
	size_t *lens[] = { &n, &v };

	if ((size_t)(p - req) + n + v + 16 > sizeof(req))
		relay_fail("the parameters do not fit");
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

/* Sends the FastCGI request for the first request in rbuf. */
static void
send_request(struct up *u, struct client *c)
{
	u->rlen = u->olen = 0;
	if (send(u->b.s.fd, req, reqlen, MSG_NOSIGNAL) != (ssize_t)reqlen)
		relay_die("send to php-fpm");
}

/* The answer is whole: one writev to the client (the client reads what
 * it asked for), or, if the client left, it is dropped. */
static void
answer(struct up *u)
{
	struct client *c = u->b.c;
	const char *end = memmem(u->out, u->olen, "\r\n\r\n", 4);
	char cl[64];
	struct iovec iov[4];
	size_t head, total = 0;
	ssize_t n;

	if (c->closed) {
		relay_client_free(c);
		relay_release(u);
		return;
	}
	if (end == NULL)
		relay_fail("STDOUT without a header block");
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
		relay_fail("a short write to a client (not in its scope)");
	if (n == -1) {
		relay_watch(EPOLL_CTL_DEL, c->s.fd, NULL, 0);
		relay_client_free(c);
		relay_release(u);
		return;
	}
	relay_answered(u, c);
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
				relay_fail("an answer past 64 KiB (not in its scope)");
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
		relay_fail("bytes after END_REQUEST");
	memmove(u->rbuf, u->rbuf + off, u->rlen - off);
	u->rlen -= off;
	return done;
}

static void
up_read(struct up *u)
{
	ssize_t n = recv(u->b.s.fd, u->rbuf + u->rlen, UBUF - u->rlen, 0);

	if (n <= 0) {
		if (n == -1 && errno == EAGAIN)
			return;
		relay_up_closed(u);
		return;
	}
	if (u->b.c == NULL)
		relay_fail("php-fpm sent bytes unasked");
	u->rlen += (size_t)n;
	if (records(u))
		answer(u);
}

/* The client left mid-answer: the answer is read to its end as it comes
 * and dropped, then the client is freed and the connection goes back to
 * the pool (answer()).  Not read here at once: waiting for php-fpm would
 * stop the loop, and the connection's own readiness, maybe in the same
 * batch of events, would then find nothing to read. */
static bool
client_gone(struct client *c)
{
	c->closed = true;
	return true;
}

static const struct relay_proto fcgi = {
	.name = "fcgi_relay",
	.upstream = "php-fpm",
	.up_size = sizeof(struct up),
	.send = send_request,
	.up_read = up_read,
	.client_writable = NULL,
	.client_gone = client_gone,
};

int
main(int argc, char **argv)
{
	struct sockaddr_un fpm = { .sun_family = AF_UNIX };

	if (!relay_init(&fcgi, &argc, &argv) || argc != 5 ||
	    strlen(argv[2]) >= sizeof(fpm.sun_path)) {
		fprintf(stderr, "usage: fcgi_relay [-k CONNS] PORT FPM_SOCKET "
		    "DOCUMENT_ROOT URI\n");
		return 2;
	}
	strcpy(fpm.sun_path, argv[2]);
	build(argv[1], argv[3], argv[4]);
	relay_run(atoi(argv[1]), (struct sockaddr *)&fpm, sizeof(fpm));
}

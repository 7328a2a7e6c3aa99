/*
 * bench/tls_floor: the least a TLS HTTP/1.1 server can do, as the tls
 * suite's yardstick (bench/floor is the plain one).  One process, epoll,
 * non-blocking sockets, OpenSSL 3 with corral's protocols, ciphers and
 * options; every request, whatever it asks, gets the same response
 * prepared before the run (one captured from corral).  Per request on a
 * kept-alive connection: one SSL_read (read-ahead: a whole record in one
 * read()), one SSL_write of every response due, nothing else; an HTTP/1.0
 * request (openssl s_time) is answered and the connection closed, so the
 * handshake cases have a floor too.  Sessions resume from OpenSSL's own
 * in-process cache (by session ID) and by tickets under OpenSSL's own
 * keys.  With -k the kernel does the record layer when it takes the keys
 * (SSL_OP_ENABLE_KTLS), and the floor then read()s and write()s the
 * socket itself.  Not a server to use.
 *
 * Usage: tls_floor [-k] [-T] PORT CERT KEY RESPONSE
 *   -k  kernel TLS; -T  no tickets (TLS 1.2 resumes by session ID)
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
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define RBUF		16384	/* a whole record's plaintext */
#define MAX_OUT		64	/* responses written at once */

/* corral's defaults (master/config.c), which nginx's bench config has. */
#define CIPHERS "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:" \
	"DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
#define SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:" \
	"TLS_CHACHA20_POLY1305_SHA256"

struct client {
	int fd;
	SSL *ssl;
	bool ready;		/* handshake done */
	bool ktls_rx, ktls_tx;	/* the kernel has the keys */
	bool closing;		/* HTTP/1.0: close once the answer is out */
	bool waiting;		/* registered for EPOLLOUT */
	size_t rlen;		/* unparsed request bytes in rbuf */
	size_t olen, ooff;	/* the answer being written */
	char *out;
	char rbuf[RBUF];
};

static char *resp;
static size_t resp_len;
static int ep;
static bool kernel_noted;

static void __attribute__((noreturn))
die(const char *what)
{
	fprintf(stderr, "tls_floor: %s: %s\n", what, errno ? strerror(errno) :
	    ERR_reason_error_string(ERR_get_error()));
	exit(1);
}

static void
load(const char *path)
{
	struct stat st;
	int fd;

	if ((fd = open(path, O_RDONLY)) == -1 || fstat(fd, &st) == -1)
		die(path);
	resp_len = (size_t)st.st_size;
	/* Room for MAX_OUT copies: a batch of pipelined requests is one
	 * write, its copies made once here. */
	if ((resp = malloc(resp_len * MAX_OUT)) == NULL ||
	    read(fd, resp, resp_len) != st.st_size)
		die(path);
	for (int i = 1; i < MAX_OUT; i++)
		memcpy(resp + (size_t)i * resp_len, resp, resp_len);
	close(fd);
}

static SSL_CTX *
context(const char *cert, const char *key, bool ktls, bool tickets)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	uint64_t opts = SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF;

	errno = 0;
	if (ctx == NULL)
		die("SSL_CTX_new");
	if (ktls)
		opts |= SSL_OP_ENABLE_KTLS;
	if (!tickets)
		opts |= SSL_OP_NO_TICKET;
	SSL_CTX_set_options(ctx, opts);
	SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"floor", 5);
	SSL_CTX_set_timeout(ctx, 300);
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_cipher_list(ctx, CIPHERS) ||
	    !SSL_CTX_set_ciphersuites(ctx, SUITES))
		die("protocols");
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		die(cert);
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)
		die(key);
	return ctx;
}

static void
drop(struct client *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	SSL_free(c->ssl);
	close(c->fd);
	free(c);
}

static int
want(struct client *c, bool out)
{
	struct epoll_event ev = { .events = out ? EPOLLOUT : EPOLLIN,
	    .data.ptr = c };

	if (c->waiting == out)
		return 0;
	c->waiting = out;
	return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* An SSL call that returned rc: 0 to wait (registered), -1 to drop. */
static int
ssl_wait(struct client *c, int rc)
{
	switch (SSL_get_error(c->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		return want(c, false);
	case SSL_ERROR_WANT_WRITE:
		return want(c, true);
	default:
		ERR_clear_error();
		return -1;
	}
}

/* Writes what is due: 1 when all is out, 0 to wait, -1 to drop. */
static int
flush(struct client *c)
{
	while (c->ooff < c->olen) {
		size_t n;

		if (c->ktls_tx) {
			ssize_t w = write(c->fd, c->out + c->ooff,
			    c->olen - c->ooff);

			if (w == -1)
				return errno == EAGAIN ? want(c, true) : -1;
			n = (size_t)w;
		} else if (SSL_write_ex(c->ssl, c->out + c->ooff,
		    c->olen - c->ooff, &n) != 1) {
			return ssl_wait(c, 0) == 0 ? 0 : -1;
		}
		c->ooff += n;
	}
	c->olen = c->ooff = 0;
	if (c->closing) {
		SSL_shutdown(c->ssl);
		return -1;
	}
	return want(c, false) == 0 ? 1 : -1;
}

/* Answers whole requests in rbuf, MAX_OUT at most: 1 done, 0 waiting,
 * -1 drop. */
static int
answer_some(struct client *c)
{
	size_t at = 0, k = 0;
	char *end;

	while (k < MAX_OUT && !c->closing && (end = memmem(c->rbuf + at,
	    c->rlen - at, "\r\n\r\n", 4)) != NULL) {
		const char *eol = memmem(c->rbuf + at, (size_t)(end -
		    c->rbuf - at) + 2, "\r\n", 2);

		c->closing = eol - (c->rbuf + at) >= 8 &&
		    memcmp(eol - 8, "HTTP/1.0", 8) == 0;
		at = (size_t)(end + 4 - c->rbuf);
		k++;
	}
	if (k == 0)
		return c->rlen == RBUF ? -1 : 1;
	memmove(c->rbuf, c->rbuf + at, c->rlen - at);
	c->rlen -= at;
	c->out = resp;
	c->olen = k * resp_len;
	c->ooff = 0;
	return flush(c);
}

/* Answers every whole request in rbuf: 1 done, 0 waiting, -1 drop. */
static int
answer(struct client *c)
{
	int rc;

	while ((rc = answer_some(c)) == 1 &&
	    memmem(c->rbuf, c->rlen, "\r\n\r\n", 4) != NULL)
		;
	return rc;
}

static void
handshaken(struct client *c)
{
	c->ready = true;
	c->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(c->ssl)) != 0;
	c->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(c->ssl)) != 0 &&
	    !SSL_has_pending(c->ssl);
	if (!kernel_noted) {
		kernel_noted = true;
		fprintf(stderr, "tls_floor: %s %s, kernel TLS send %s, "
		    "receive %s\n", SSL_get_version(c->ssl),
		    SSL_get_cipher_name(c->ssl), c->ktls_tx ? "on" : "off",
		    c->ktls_rx ? "on" : "off");
	}
}

/* Reads what there is and answers it: 0 to go on waiting, -1 to drop. */
static int
serve(struct client *c)
{
	int rc;

	if (c->olen > 0) {		/* EPOLLOUT for a partial answer */
		if ((rc = flush(c)) <= 0)
			return rc;
	}
	if (!c->ready) {
		if ((rc = SSL_do_handshake(c->ssl)) != 1)
			return ssl_wait(c, rc);
		handshaken(c);
	}
	do {
		size_t n;

		if (c->ktls_rx) {
			ssize_t r = read(c->fd, c->rbuf + c->rlen,
			    RBUF - c->rlen);

			/* EIO: a record that is not data (an alert). */
			if (r <= 0)
				return r == -1 && errno == EAGAIN ?
				    want(c, false) : -1;
			n = (size_t)r;
		} else if (SSL_read_ex(c->ssl, c->rbuf + c->rlen,
		    RBUF - c->rlen, &n) != 1) {
			return ssl_wait(c, 0);
		}
		c->rlen += n;
		if ((rc = answer(c)) <= 0)
			return rc;
		/* Read-ahead may hold more records than that read gave. */
	} while (!c->ktls_rx && SSL_has_pending(c->ssl));
	return 0;
}

static void
accept_all(int lfd, SSL_CTX *ctx)
{
	int fd, one = 1;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) != -1) {
		struct client *c = calloc(1, sizeof(*c));
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

		if (c == NULL || (c->ssl = SSL_new(ctx)) == NULL) {
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		SSL_set_fd(c->ssl, fd);
		SSL_set_accept_state(c->ssl);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1)
			drop(c);
	}
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct epoll_event ev = { .events = EPOLLIN }, evs[256];
	bool ktls = false, tickets = true;
	int lfd, one = 1, opt;
	SSL_CTX *ctx;

	while ((opt = getopt(argc, argv, "kT")) != -1) {
		if (opt == 'k')
			ktls = true;
		else if (opt == 'T')
			tickets = false;
		else
			goto usage;
	}
	if (argc - optind != 4)
		goto usage;
	load(argv[optind + 3]);
	ctx = context(argv[optind + 1], argv[optind + 2], ktls, tickets);
	signal(SIGPIPE, SIG_IGN);
	sin.sin_port = htons((uint16_t)atoi(argv[optind]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	errno = 0;
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4096) || (ep = epoll_create1(0)) == -1)
		die("listen");
	ev.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev))
		die("epoll_ctl");
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct client *c = evs[i].data.ptr;

			if (c == NULL)
				accept_all(lfd, ctx);
			else if (serve(c) == -1)
				drop(c);
		}
	}
usage:
	fprintf(stderr, "usage: tls_floor [-k] [-T] PORT CERT KEY "
	    "RESPONSE\n");
	return 2;
}

/*
 * What bench/relay and bench/fcgi_relay share: the clients, the pool of
 * kept-alive upstream connections with its line of clients waiting for
 * one, and the epoll loop.  Each program brings the protocol: what it
 * sends upstream for a client's request and what it does with what comes
 * back (struct relay_proto).  One request per upstream connection at a
 * time; a client's pipelined requests go one after the other.
 */
#ifndef CORRAL_BENCH_RELAY_CORE_H
#define CORRAL_BENCH_RELAY_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RBUF		8192
#define UBUF		65536

struct up;

/* What an epoll event points at: a client or an upstream connection. */
struct sock {
	int fd;
	bool is_up;
};

/* A client connection, with its request bytes. */
struct client {
	struct sock s;
	bool writing;		/* registered for EPOLLOUT */
	bool closed;		/* the client went away mid-answer */
	struct up *up;		/* the upstream connection answering it */
	struct client *next;	/* in the line for an upstream connection */
	size_t rlen;		/* request bytes in rbuf */
	size_t reqlen;		/* length of the first request, 0: none */
	char rbuf[RBUF];
};

/* An upstream connection, idle or carrying one client's exchange; the
 * program's own struct up begins with it. */
struct up_base {
	struct sock s;
	struct client *c;
	struct up *next;	/* in the idle list */
};

struct relay_proto {
	const char *name;	/* of the program, for its messages */
	const char *upstream;	/* "the origin", "php-fpm" */
	size_t up_size;		/* sizeof(struct up) */
	/* Sends c's first request (c->reqlen bytes in c->rbuf) on u. */
	void (*send)(struct up *u, struct client *c);
	/* u is readable while it carries an exchange. */
	void (*up_read)(struct up *u);
	/* c, which asked for EPOLLOUT, is writable; NULL if none asks. */
	void (*client_writable)(struct client *c);
	/* c closed while u answers it: true when the program frees c
	 * later (sets c->closed), false when u is let go of already. */
	bool (*client_gone)(struct client *c);
};

extern int relay_ep;

/* perror(what), exit 1. */
void relay_die(const char *what) __attribute__((noreturn));
/* "NAME: what", exit 1. */
void relay_fail(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));
/* epoll_ctl(relay_ep, op, fd) for ptr and events. */
int relay_watch(int op, int fd, void *ptr, uint32_t events);

/* First: sets the protocol, and takes "-k CONNS" (the most upstream
 * connections, 32 by default) off the front of the arguments; false if
 * it is 0. */
bool relay_init(const struct relay_proto *p, int *argc, char ***argv);

/* Sends c's first request upstream when it is whole: on its upstream
 * connection, an idle one, a new one, or it waits in line. */
void relay_serve(struct client *c);
/* The whole answer went to c: its next pipelined request goes on u, or
 * u goes back to the pool. */
void relay_answered(struct up *u, struct client *c);
/* The end of an exchange: u goes idle, or to the next client in line. */
void relay_release(struct up *u);
/* recv() on u said the upstream closed or failed: out of the pool, or,
 * mid-answer, the end of the run. */
void relay_up_closed(struct up *u);
/* Closes a client; it is freed after the batch of events (one later in
 * the batch may still point at it). */
void relay_client_free(struct client *c);

/* Listens on 127.0.0.1:port and serves until killed; the upstream is at
 * sa (connected to with blocking connects, before the run). */
void relay_run(int port, const struct sockaddr *sa, socklen_t salen)
    __attribute__((noreturn));

#endif

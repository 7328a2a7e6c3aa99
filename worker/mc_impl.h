/*
 * Inside the memcached listener: a connection, its buffers, and the
 * commands run on it (mc_conn.c reads and writes, mc_exec.c runs the
 * classic commands, mc_meta.c the meta ones).  Internal to worker/.
 */
#ifndef CORRAL_MC_IMPL_H
#define CORRAL_MC_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "shm/store.h"
#include "worker/mc_parse.h"

enum mc_state {
	MC_CMD = 0,		/* reading a command line */
	MC_DATA,		/* copying a value's bytes into the store */
	MC_SWALLOW,		/* skipping a value that is not stored */
	MC_SKIPLINE,		/* after a bad data chunk: up to a newline */
	MC_CLOSING,		/* quit: close once the output is gone */
};

/* A storage command waiting for its data block. */
struct mc_pending {
	struct mc_cmd cmd;		/* its pointers are not kept */
	char key[MC_KEY_MAX];
	size_t klen;
	char flags[MC_LINE_MAX];	/* meta flags, for the reply */
	size_t flags_len;
	struct store_wref w;		/* the reservation being filled */
	char *dst;			/* where the next byte goes */
	char *tmp;			/* append/prepend: the new bytes */
	size_t need;			/* value bytes still to come */
};

struct mc_conn {
	int fd;
	struct event *ev;		/* read, or write when output waits */
	struct event *timer;		/* idle_timeout */
	struct mc_conn *prev, *next;
	enum mc_state state;
	bool writing;			/* ev waits for POLLOUT */

	char *in;
	size_t ipos, ilen, isize;
	char *out;
	size_t opos, olen, osize;

	size_t swallow;			/* MC_SWALLOW: bytes left */
	struct mc_pending p;
};

/* Counts one of two counters. */
#define STAT_IF(cond, a, b)	do {					\
	if (cond)							\
		STATS_INC(a);						\
	else								\
		STATS_INC(b);						\
} while (0)

/* Output: appends to the connection's buffer (grows; never fails but
 * closes the connection when memory runs out). */
void mc_out(struct mc_conn *c, const void *p, size_t n);
void mc_outs(struct mc_conn *c, const char *s);
void mc_out_u64(struct mc_conn *c, uint64_t v);
void mc_out_i64(struct mc_conn *c, int64_t v);
/* A reply line: s and CRLF, unless noreply. */
void mc_reply(struct mc_conn *c, const char *s, bool noreply);

/*
 * Parses and runs a command line; for a storage command it sets up c->p
 * and the state for the data block.  Returns false when the connection
 * must close (quit).
 */
bool mc_exec_line(struct mc_conn *c, const char *line, size_t len,
    struct mc_cmd *cmd);
/* The data block of c->p arrived whole and well ended: store it. */
void mc_exec_store(struct mc_conn *c);
/* Drops what c->p holds (a reservation, a buffer). */
void mc_pending_free(struct mc_conn *c);

/* Sets up the data block of a storage command (rmw: append, prepend). */
void mc_expect_data(struct mc_conn *c, const struct mc_cmd *cmd,
    int64_t exptime, uint32_t flags, bool rmw);
/* append/prepend add to key's value; STORE_OK, NOT_FOUND, TOO_LARGE... */
enum store_result mc_concat(const char *key, size_t klen, const char *add,
    size_t alen, bool front, uint64_t *newcas);
/* incr/decr; STORE_NOREF when the value is not a number. */
enum store_result mc_arith(const char *key, size_t klen, bool incr,
    uint64_t delta, uint64_t *out, uint64_t *newcas);

/* Meta commands (mc_meta.c). */
void mc_meta(struct mc_conn *c, struct mc_cmd *cmd);
void mc_meta_store(struct mc_conn *c);

/* The largest value this listener takes. */
size_t mc_max_item(void);

/* An integer value as incr sees it: digits, white space around. */
bool mc_number(const char *p, size_t n, uint64_t *v);

#endif

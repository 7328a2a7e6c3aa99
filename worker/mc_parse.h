/*
 * memcached's text protocol, as memcached 1.6 reads it: the classic
 * commands (get, set, incr...) and the meta commands (mg, ms, md, ma, mn,
 * me).  A pure parser of untrusted bytes: no I/O, no allocation; the
 * connection (worker/mc_conn.c) finds a line with mc_line(), parses it
 * with mc_parse() and runs the command.
 *
 * Replies to bad input are memcached's own, word for word, so that
 * clients and tests see no difference ("ERROR", "CLIENT_ERROR bad command
 * line format"...).  A NUL ends a line where it stands, as in memcached.
 */
#ifndef CORRAL_MC_PARSE_H
#define CORRAL_MC_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_KEY_MAX		250	/* longest key, bytes */
#define MC_LINE_MAX		2048	/* no newline by then: closed */
#define MC_OPAQUE_MAX		32	/* meta O token */
#define MC_VALUE_MAX		(2147483647 - 2)

/* id, name on the wire */
#define MC_COMMANDS(X)							\
	X(GET, "get") X(GETS, "gets") X(GAT, "gat") X(GATS, "gats")	\
	X(SET, "set") X(ADD, "add") X(REPLACE, "replace")		\
	X(APPEND, "append") X(PREPEND, "prepend") X(CAS, "cas")		\
	X(DELETE, "delete") X(INCR, "incr") X(DECR, "decr")		\
	X(TOUCH, "touch") X(FLUSH_ALL, "flush_all")			\
	X(VERSION, "version") X(VERBOSITY, "verbosity")			\
	X(STATS, "stats") X(QUIT, "quit")				\
	X(MG, "mg") X(MS, "ms") X(MD, "md") X(MA, "ma") X(MN, "mn")	\
	X(ME, "me")

enum mc_op {
#define MC_OP_ENUM(id, name)	MC_##id,
	MC_COMMANDS(MC_OP_ENUM)
#undef MC_OP_ENUM
	MC_NOPS
};

extern const char *const mc_op_name[MC_NOPS];

/* A meta flag letter as a bit of struct mc_meta.has. */
#define MC_F(ch)	(UINT64_C(1) << ((ch) >= 'a' ? (ch) - 'a' + 26 : \
			    (ch) - 'A'))

/* The flags of a meta command, their tokens decoded. */
struct mc_meta {
	uint64_t has;			/* MC_F() of each flag given */
	const char *flags;		/* the flag tokens as sent, for the
					   reply, which echoes them in order */
	size_t flags_len;
	int64_t ttl;			/* T */
	int64_t vivify;			/* N: autovivify with this TTL */
	int64_t recache;		/* R: win when the TTL is below */
	uint64_t cas;			/* C: compare */
	uint64_t new_cas;		/* E: explicit version (ignored) */
	uint32_t client_flags;		/* F */
	uint64_t initial;		/* J: ma's value on autovivify */
	uint64_t delta;			/* D: ma's delta, 1 by default */
	char mode;			/* M: ms E A P R S, ma I + D - */
	bool quiet;			/* q: only failures are answered */
	bool base64;			/* b: the key was base64 */
};

/* One parsed command; pointers are into the line. */
struct mc_cmd {
	enum mc_op op;
	const char *key;		/* the first key (decoded for b) */
	size_t klen;
	const char *keys;		/* get*: every key, space separated */
	size_t keys_len;
	uint32_t flags;			/* client flags of a storage command */
	int64_t exptime;		/* memcached's TTL rules */
	size_t vlen;			/* storage: data bytes that follow */
	uint64_t cas;			/* cas: the version compared */
	uint64_t delta;			/* incr, decr */
	bool noreply;			/* answer nothing (even most errors) */
	bool swallow;			/* error: still skip vlen + 2 bytes */
	bool has_arg;			/* flush_all delay, verbosity level */
	uint64_t arg;
	const char *sub;		/* stats: the sub-command, or NULL */
	size_t sub_len;
	struct mc_meta meta;
	char keybuf[MC_KEY_MAX];	/* a base64 key, decoded */
};

enum mc_line {
	MC_LINE_MORE = 0,		/* no newline yet */
	MC_LINE_OK,			/* a line: *len bytes, *used eaten */
	MC_LINE_CLOSE,			/* junk: close the connection */
};

/*
 * Looks for a command line at the start of buf.  *len is its length
 * without the newline (and a CR before it), *used with them.  A line
 * longer than MC_LINE_MAX is junk unless it is a get or gets of many keys
 * (up to max bytes); a first byte of memcached's binary protocol is junk.
 */
enum mc_line mc_line(const char *buf, size_t n, size_t max, size_t *len,
    size_t *used);

/*
 * Parses one line (without its newline).  Returns NULL and fills cmd, or
 * the reply that memcached gives to such a line ("ERROR", "CLIENT_ERROR
 * ...", without CRLF).  Even then cmd->noreply says whether to send it,
 * and cmd->swallow whether cmd->vlen data bytes and CRLF follow that must
 * be skipped (an ms whose length was readable).
 */
const char *mc_parse(const char *line, size_t len, struct mc_cmd *cmd);

/* Next key of a get line from *p (< end); false when there are no more. */
bool mc_next_key(const char **p, const char *end, const char **key,
    size_t *klen);

/* Encodes a key in base64 for a meta reply's k flag; returns the length. */
size_t mc_base64_encode(const char *in, size_t n, char *out);

#endif

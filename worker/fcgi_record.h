/*
 * FastCGI records (the FastCGI 1.0 specification), with no I/O: what a
 * web server writes to an application (BEGIN_REQUEST, PARAMS, STDIN) and
 * a strict, incremental parser of what comes back (STDOUT, STDERR,
 * END_REQUEST).  Used by the FastCGI upstream protocol and its fuzzer.
 *
 * A record is an 8-byte header (version 1, type, request id, content
 * length, padding length, reserved), then the content and the padding.
 * The web server's side is always the responder role with one request per
 * connection at a time, which the connection may outlive (FCGI_KEEP_CONN).
 */
#ifndef CORRAL_FCGI_RECORD_H
#define CORRAL_FCGI_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/http.h"

#define FCGI_VERSION_1		1
#define FCGI_HEADER_LEN		8
#define FCGI_MAX_CONTENT	65535
#define FCGI_BEGIN_LEN		16	/* header and body of BEGIN_REQUEST */

/* Record types: name and number, written once. */
#define FCGI_TYPES(X)							\
	X(BEGIN_REQUEST, 1)						\
	X(ABORT_REQUEST, 2)						\
	X(END_REQUEST, 3)						\
	X(PARAMS, 4)							\
	X(STDIN, 5)							\
	X(STDOUT, 6)							\
	X(STDERR, 7)							\
	X(DATA, 8)							\
	X(GET_VALUES, 9)						\
	X(GET_VALUES_RESULT, 10)					\
	X(UNKNOWN_TYPE, 11)

enum fcgi_type {
#define X(name, n)	FCGI_##name = n,
	FCGI_TYPES(X)
#undef X
	FCGI_MAXTYPE = FCGI_UNKNOWN_TYPE
};

/* "STDOUT" for FCGI_STDOUT; NULL for a number that is no type. */
const char *fcgi_type_name(unsigned type);

/* Writes a record header for clen (<= FCGI_MAX_CONTENT) content bytes. */
void fcgi_header(char *out, enum fcgi_type type, uint16_t id, size_t clen);

/*
 * Writes BEGIN_REQUEST for the responder role, FCGI_BEGIN_LEN bytes:
 * with keep_conn the application leaves the connection open after the
 * request, for the next one.
 */
void fcgi_begin_request(char *out, uint16_t id, bool keep_conn);

/*
 * The PARAMS stream: name-value pairs, each length in one byte below 128
 * and in four (high bit set) above, packed into records.  A pair is never
 * split between two records unless it is larger than one record can hold:
 * php-fpm, like other applications, parses each record on its own.
 *
 * The writer counts without writing when out is NULL, so a caller can
 * size a buffer with the same calls that will fill it.
 */
struct fcgi_params {
	char *out;			/* NULL: only count */
	size_t cap;			/* room at out; a pair past it
					   turns the writer to counting */
	size_t len;			/* bytes of the stream so far */
	size_t rec;			/* offset of the open record */
	size_t clen;			/* its content bytes */
	uint16_t id;
	bool open;
};

/* The longest name or value a pair can carry (31-bit lengths). */
#define FCGI_PAIR_MAX		0x7fffffffu

void fcgi_params_init(struct fcgi_params *w, char *out, uint16_t id);

/*
 * Adds a pair whose value is the concatenation of the nv pieces.  With
 * http set the name is a request header's, passed as CGI asks (RFC 3875
 * section 4.1.18): "HTTP_", then the name in upper case with '-' as '_'.
 * Returns false, writing nothing, when a length is over FCGI_PAIR_MAX.
 */
bool fcgi_params_add_any(struct fcgi_params *w, const char *name,
    size_t nlen, bool http, const struct span *value, size_t nv);

/* Eight bytes of a name as CGI writes them, at once: each of 'a'..'z'
 * less 0x20, each '-' made '_' (a xor of 0x72), every other byte kept. */
static inline uint64_t
fcgi_cgi_word(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
	uint64_t low7 = x & ~high, lower, dash;

	/* Bytes of 0x61..0x7a: at least 'a' and not past 'z'. */
	lower = (low7 + ones * (0x80 - 'a')) &
	    ~(low7 + ones * (0x80 - 'z' - 1)) & ~x & high;
	x ^= lower >> 2;
	/* Bytes equal to '-': zero after the xor. */
	low7 = x ^ ones * '-';
	dash = ~(((low7 & ~high) + ~high) | low7) & high;
	return x ^ (dash >> 7) * ('-' ^ '_');
}

/* Copies n bytes of a header name as CGI writes it: upper case, '-' as
 * '_'.  A word at a time from eight bytes on, the last word overlapping
 * the one before. */
static inline void
fcgi_cgi_name(char *dst, const char *src, size_t n)
{
	uint64_t w;
	size_t i;
	char c;

	if (n >= 8) {
		for (i = 0; i + 8 <= n; i += 8) {
			memcpy(&w, src + i, 8);
			w = fcgi_cgi_word(w);
			memcpy(dst + i, &w, 8);
		}
		if (i < n) {
			memcpy(&w, src + n - 8, 8);
			w = fcgi_cgi_word(w);
			memcpy(dst + n - 8, &w, 8);
		}
		return;
	}
	for (i = 0; i < n; i++) {
		c = src[i];
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		else if (c == '-')
			c = '_';
		dst[i] = c;
	}
}

/*
 * The same.  The usual pair (a name, a value in one or two pieces, both
 * lengths in a byte) going into a record with room to spare is written
 * here, inline: a request's list is some twenty-five of them, and the
 * general path's steps cost more than the copies.
 */
static inline bool
fcgi_params_add(struct fcgi_params *w, const char *name, size_t nlen,
    bool http, const struct span *value, size_t nv)
{
	size_t flen = nlen + (http ? 5 : 0), vlen, size, hdr;
	char *d;

	if (w->out == NULL || flen >= 128 || (nv != 1 && nv != 2))
		return fcgi_params_add_any(w, name, nlen, http, value, nv);
	vlen = value[0].len + (nv == 2 ? value[1].len : 0);
	size = 2 + flen + vlen;
	/* The first pair opens the first record. */
	hdr = w->open ? 0 : FCGI_HEADER_LEN;
	if (vlen >= 128 || (w->open && w->clen + size > FCGI_MAX_CONTENT) ||
	    w->len > w->cap || size + hdr > w->cap - w->len)
		return fcgi_params_add_any(w, name, nlen, http, value, nv);
	if (!w->open) {
		w->rec = w->len;
		w->len += FCGI_HEADER_LEN;
		w->clen = 0;
		w->open = true;
	}
	d = w->out + w->len;
	d[0] = (char)flen;
	d[1] = (char)vlen;
	d += 2;
	if (http) {
		memcpy(d, "HTTP_", 5);
		fcgi_cgi_name(d + 5, name, nlen);
	} else
		memcpy(d, name, nlen);
	d += flen;
	/* An empty piece may have no pointer. */
	if (value[0].len > 0)
		memcpy(d, value[0].p, value[0].len);
	if (nv == 2 && value[1].len > 0)
		memcpy(d + value[0].len, value[1].p, value[1].len);
	w->len += size;
	w->clen += size;
	return true;
}

/* The same with a string value. */
bool fcgi_params_str(struct fcgi_params *w, const char *name,
    const char *value);

/*
 * Closes the open record and appends the empty PARAMS record that ends
 * the stream.  Returns the length of everything written (or counted).
 */
size_t fcgi_params_end(struct fcgi_params *w);

/*
 * STDIN: the request body as records of at most FCGI_MAX_CONTENT bytes,
 * then an empty one.  Writes the header of the next record for len body
 * bytes still to send and returns how many of them it carries; with len 0
 * it writes the empty record that ends the stream.
 */
size_t fcgi_stdin_header(char *out, uint16_t id, size_t len);

/*
 * The parser of the application's records for one request.
 *
 * fcgi_parse() consumes input until it has something to say, and returns:
 * FCGI_R_STDOUT or FCGI_R_STDERR with *data, a piece of that stream (a
 * span into buf, never empty; a record's content may come in several
 * pieces), FCGI_R_END when END_REQUEST arrived complete, FCGI_R_AGAIN
 * when all input was consumed, or FCGI_R_ERROR with p->error set.  *used
 * says how many bytes of buf were consumed in each case.
 *
 * Strict: a version other than 1, a type that is not one, a type an
 * application may not send here (anything but STDOUT, STDERR and
 * END_REQUEST), another request id (management records included), an
 * END_REQUEST whose length is not 8 or whose protocol status is not
 * REQUEST_COMPLETE, a stream record after that stream's empty record, and
 * any byte after END_REQUEST are errors: the caller answers 502 or aborts
 * and closes the connection.  END_REQUEST may come without the empty
 * STDOUT record before it.  Padding (0..255 bytes) is skipped.
 */
#define FCGI_R_ERROR	(-1)
#define FCGI_R_AGAIN	0
#define FCGI_R_STDOUT	1
#define FCGI_R_STDERR	2
#define FCGI_R_END	3

struct fcgi_parser {
	uint16_t id;
	uint8_t state;
	uint8_t type;			/* of the record being read */
	uint8_t have;			/* header or END_REQUEST body bytes */
	uint8_t pad;			/* padding bytes to skip */
	uint16_t left;			/* content bytes to come */
	bool stdout_closed;
	bool stderr_closed;
	uint8_t buf[FCGI_HEADER_LEN];
	uint32_t app_status;		/* from END_REQUEST */
	const char *error;
};

void fcgi_parser_init(struct fcgi_parser *p, uint16_t id);

int fcgi_parse(struct fcgi_parser *p, const char *buf, size_t len,
    size_t *used, struct span *data);

/*
 * Gives back the last n bytes of the piece of STDOUT or STDERR just
 * returned, with *used reduced by n by the caller: the next call returns
 * them again.  For a caller that found where its part of a stream ends
 * (the CGI header) inside a piece.
 */
void fcgi_parse_unread(struct fcgi_parser *p, size_t n);

/*
 * Looks ahead at buf, the input that follows what was consumed, without
 * consuming it: true when the parse goes on to END_REQUEST inside buf
 * without an error, with *out the STDOUT bytes it returns on the way.
 * Says whether a response is all in hand.
 */
bool fcgi_parse_ahead(const struct fcgi_parser *p, const char *buf,
    size_t len, uint64_t *out);

/* True when the connection may end here: END_REQUEST was read. */
bool fcgi_parse_done(const struct fcgi_parser *p);

/* Why an end of stream here is an error, for the log; NULL when it is not. */
const char *fcgi_parse_eof(const struct fcgi_parser *p);

#endif

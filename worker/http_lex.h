/*
 * The lexical pieces that the request and response parsers share: RFC 9110
 * character classes and the small scanners for tokens, lists, numbers and
 * field lines.  Internal to worker/.
 */
#ifndef CORRAL_HTTP_LEX_H
#define CORRAL_HTTP_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"

/* Character classes, one byte of flags per octet. */
#define C_TCHAR		0x01	/* token (RFC 9110 section 5.6.2) */
#define C_TARGET	0x02	/* request-target: 0x21-0x7e, not '#' */
#define C_VALUE		0x04	/* field-value and obs-text */
#define C_HOST		0x08	/* reg-name: unreserved, sub-delims */
#define C_HEX		0x10
#define C_DIGIT		0x20
#define C_WS		0x40	/* SP, HTAB */
#define C_PATH		0x80	/* request-target but '/', '%' and '?' */

extern const uint8_t http_cls[256];

#define IS(c, f)	((http_cls[(unsigned char)(c)] & (f)) != 0)

static inline unsigned char
http_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c | 0x20 : c;
}

/* Compares n bytes with a lower case literal, ignoring the case of p.
 * Inline: with a literal the loop unrolls, and header names are matched
 * with it on every request. */
static inline bool
http_ieq(const char *p, const char *lc, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (http_lower((unsigned char)p[i]) != (unsigned char)lc[i])
			return false;
	return true;
}

/* The same for a whole span. */
bool http_span_ieq(struct span s, const char *lc);

/*
 * http_ieq() for a field name (or any bytes the lexer lets into a field)
 * against a name of lower case letters, digits and '-', a word at a time.
 * ORing 0x20 into a byte lowers a letter and turns no other such byte into
 * one of those: only CR would become '-', and only controls digits.
 */
static inline bool
http_name_eq(const char *p, const char *lc, size_t n)
{
	const uint64_t low = 0x2020202020202020ull;
	uint64_t x, y;
	uint32_t a, b, c, d;

	if (n >= 8) {
		for (; n > 8; p += 8, lc += 8, n -= 8) {
			__builtin_memcpy(&x, p, 8);
			__builtin_memcpy(&y, lc, 8);
			if ((x | low) != y)
				return false;
		}
		__builtin_memcpy(&x, p + n - 8, 8);
		__builtin_memcpy(&y, lc + n - 8, 8);
		return (x | low) == y;
	}
	if (n >= 4) {
		/* Two words that overlap when n < 8. */
		__builtin_memcpy(&a, p, 4);
		__builtin_memcpy(&b, lc, 4);
		__builtin_memcpy(&c, p + n - 4, 4);
		__builtin_memcpy(&d, lc + n - 4, 4);
		return ((a | (uint32_t)low) == b) & ((c | (uint32_t)low) == d);
	}
	return http_ieq(p, lc, n);
}

/*
 * Returns the next element of a comma-separated list without its OWS;
 * empty elements are skipped (RFC 9110 section 5.6.1).
 */
bool http_list_next(const char **pp, const char *end, struct span *e);

/* How many leading bytes of s are tchar. */
size_t http_token_len(struct span s);

/* Parses 1*DIGIT into *out: 0, -1 when not digits, -2 when over int64. */
int http_decimal(struct span v, int64_t *out);

/*
 * Reads a Content-Length value into *cl, which is -1 until the first one:
 * a second one is refused, even when equal.  Returns NULL, or why not.
 */
const char *http_content_length(struct span v, int64_t *cl);

static inline const char *
http_skip_ows(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/*
 * Splits one field line at *pp (the block is known to end in CRLF CRLF)
 * into name and trimmed value and moves *pp past its CRLF.  Returns NULL,
 * or why the line is malformed.
 */
const char *http_field_line(const char **pp, struct http_header *h);

/* The same for a block that ends before end: values are scanned eight
 * bytes at a time where the block has them. */
const char *http_field_line_in(const char **pp, const char *end,
    struct http_header *h);

/* The same for a block whose lines may also end in a bare LF (CGI). */
const char *http_field_line_lf(const char **pp, struct http_header *h);

/*
 * The header-block scanners' common step: finds the next LF in
 * buf[pos, stop) and checks that no CR stands anywhere but right before
 * it, or last in the buffer when its LF has not come yet (one left so by
 * the previous call is at pos - 1).  Returns the LF's index, stop when
 * there is none yet, or -1 for a bare CR.
 */
static inline ssize_t
http_line_end(const char *buf, size_t pos, size_t stop)
{
	const char *lf = memchr(buf + pos, '\n', stop - pos);
	size_t end = lf != NULL ? (size_t)(lf - buf) : stop;
	size_t from = pos > 0 && buf[pos - 1] == '\r' ? pos - 1 : pos;

	if (end > from + 1 && memchr(buf + from, '\r', end - 1 - from) != NULL)
		return -1;
	return (ssize_t)end;
}

/*
 * Reads a Connection value: sets *close and *keepalive for those tokens,
 * and *other for any other.  Returns NULL, or why the value is malformed.
 */
const char *http_connection(struct span v, bool *close, bool *keepalive,
    bool *other);

#endif

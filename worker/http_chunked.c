/*
 * The chunked transfer coding (RFC 9112 section 7.1), decoded in place one
 * byte at a time so that a body may arrive split anywhere: request bodies
 * and upstream responses both come through here.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"
#include "worker/http_lex.h"

/* Chunked body decoder states. */
enum {
	CH_SIZE,		/* first hex digit of a chunk-size */
	CH_SIZE_MORE,		/* more digits, ';', BWS or CR */
	CH_SIZE_WS,		/* BWS after the size: more, or ';' */
	CH_EXT,			/* chunk-ext up to CR */
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER,		/* start of a trailer line, or the end */
	CH_TNAME,
	CH_TVALUE,
	CH_TLF,
	CH_END_LF,
	CH_DONE,
};

#define CH_MAX_DIGITS	16
#define CH_MAX_LINE	4096		/* size line with extensions */
#define CH_MAX_TRAILERS	8192

void
http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE;
}

static int
hexval(unsigned char c)
{
	if (IS(c, C_DIGIT))
		return c - '0';
	return http_lower(c) - 'a' + 10;
}

/* One byte of framing; returns HTTP_OK to go on or HTTP_ERROR. */
static int
chunked_byte(struct http_chunked *c, unsigned char ch)
{
	if (c->state >= CH_TRAILER && ++c->trailers > CH_MAX_TRAILERS)
		return HTTP_ERROR;

	switch (c->state) {
	case CH_SIZE:
		if (!IS(ch, C_HEX))
			return HTTP_ERROR;
		c->remaining = (uint64_t)hexval(ch);
		c->line = 1;
		c->state = CH_SIZE_MORE;
		break;
	case CH_SIZE_MORE:
		if (IS(ch, C_HEX)) {
			if (++c->line > CH_MAX_DIGITS ||
			    c->remaining > (uint64_t)INT64_MAX >> 4)
				return HTTP_ERROR;
			c->remaining = (c->remaining << 4) |
			    (uint64_t)hexval(ch);
		} else if (ch == '\r')
			c->state = CH_SIZE_LF;
		else if (ch == ';')
			c->state = CH_EXT;
		else if (IS(ch, C_WS))
			c->state = CH_SIZE_WS;
		else
			return HTTP_ERROR;
		break;
	case CH_SIZE_WS:
		if (++c->line > CH_MAX_LINE)
			return HTTP_ERROR;
		if (ch == ';')
			c->state = CH_EXT;
		else if (!IS(ch, C_WS))
			return HTTP_ERROR;
		break;
	case CH_EXT:
		if (ch == '\r')
			c->state = CH_SIZE_LF;
		else if (++c->line > CH_MAX_LINE || !IS(ch, C_VALUE))
			return HTTP_ERROR;
		break;
	case CH_SIZE_LF:
		if (ch != '\n')
			return HTTP_ERROR;
		c->state = c->remaining == 0 ? CH_TRAILER : CH_DATA;
		break;
	case CH_DATA_CR:
		if (ch != '\r')
			return HTTP_ERROR;
		c->state = CH_DATA_LF;
		break;
	case CH_DATA_LF:
		if (ch != '\n')
			return HTTP_ERROR;
		c->state = CH_SIZE;
		break;
	case CH_TRAILER:
		if (ch == '\r')
			c->state = CH_END_LF;
		else if (IS(ch, C_TCHAR))
			c->state = CH_TNAME;
		else
			return HTTP_ERROR;	/* obs-fold, CTL, ':' */
		break;
	case CH_TNAME:
		if (ch == ':')
			c->state = CH_TVALUE;
		else if (!IS(ch, C_TCHAR))
			return HTTP_ERROR;
		break;
	case CH_TVALUE:
		if (ch == '\r')
			c->state = CH_TLF;
		else if (!IS(ch, C_VALUE))
			return HTTP_ERROR;
		break;
	case CH_TLF:
		if (ch != '\n')
			return HTTP_ERROR;
		c->state = CH_TRAILER;
		break;
	case CH_END_LF:
		if (ch != '\n')
			return HTTP_ERROR;
		c->state = CH_DONE;
		break;
	default:
		return HTTP_ERROR;
	}
	return HTTP_OK;
}

int
http_chunked_decode(struct http_chunked *c, char *buf, size_t *len,
    size_t *data)
{
	size_t i = 0, o = 0, n;
	int rc = HTTP_AGAIN;

	while (i < *len) {
		if (c->state == CH_DONE) {
			rc = HTTP_OK;
			break;
		}
		if (c->state == CH_DATA) {
			n = *len - i;
			if (n > c->remaining)
				n = (size_t)c->remaining;
			if (o != i)
				memmove(buf + o, buf + i, n);
			i += n;
			o += n;
			c->remaining -= n;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			continue;
		}
		if (chunked_byte(c, (unsigned char)buf[i++]) == HTTP_ERROR) {
			rc = HTTP_ERROR;
			break;
		}
	}
	if (c->state == CH_DONE)
		rc = HTTP_OK;
	*len = i;
	*data = o;
	return rc;
}

/*
 * Request path normalisation: percent-decoding, UTF-8 validation, dot
 * segments (RFC 3986 section 5.2.4) and repeated slashes, in one pass.
 *
 * Decoding comes first, so "%2e%2e" is a ".." segment and "%2F" separates
 * segments like '/'.  Every decoded byte is checked before it is used, and
 * a bad byte in a segment that a later ".." would remove is still an error.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include "worker/http.h"

/* Expected continuation bytes of a UTF-8 sequence (RFC 3629 section 4). */
struct utf8 {
	int need;
	unsigned char lo, hi;		/* range of the next byte */
};

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Returns false for a byte that cannot come next in valid UTF-8. */
static bool
utf8_next(struct utf8 *u, unsigned char c)
{
	if (u->need > 0) {
		if (c < u->lo || c > u->hi)
			return false;
		u->need--;
		u->lo = 0x80;
		u->hi = 0xbf;
		return true;
	}
	u->lo = 0x80;
	u->hi = 0xbf;
	if (c < 0x80)
		return true;
	if (c < 0xc2)			/* continuation, or overlong C0 C1 */
		return false;
	if (c < 0xe0)
		u->need = 1;
	else if (c < 0xf0) {
		u->need = 2;
		if (c == 0xe0)		/* overlong */
			u->lo = 0xa0;
		else if (c == 0xed)	/* surrogates */
			u->hi = 0x9f;
	} else if (c < 0xf5) {
		u->need = 3;
		if (c == 0xf0)		/* overlong */
			u->lo = 0x90;
		else if (c == 0xf4)	/* above U+10FFFF */
			u->hi = 0x8f;
	} else
		return false;
	return true;
}

/*
 * Ends the segment that starts at dst[*seg]: drops "." and ".." (and with
 * it the segment before), and adds a '/' when another segment follows.
 * Returns the new length, or -1 with *status set.
 */
static ssize_t
segment_end(char *dst, size_t dstlen, size_t o, size_t *seg, bool slash,
    int *status)
{
	size_t n = o - *seg;

	if (n == 1 && dst[*seg] == '.')
		o = *seg;
	else if (n == 2 && dst[*seg] == '.' && dst[*seg + 1] == '.') {
		if (*seg == 1) {
			*status = 400;		/* above the root */
			return -1;
		}
		for (o = *seg - 1; dst[o - 1] != '/'; o--)
			;
	} else if (n > 0 && slash) {
		if (o + 2 > dstlen) {
			*status = 414;		/* no room for '/' and NUL */
			return -1;
		}
		dst[o++] = '/';
	}
	*seg = o;
	return (ssize_t)o;
}

/*
 * Most paths need none of the work below: printable ASCII with no '%'
 * and no "//", "/." that could start an empty or dot segment.  Such a
 * path is its own normal form; true when src is one.
 */
static bool
plain(const char *src, size_t len)
{
	size_t i;
	unsigned char c;

	for (i = 0; i < len; i++) {
		c = (unsigned char)src[i];
		if (c <= 0x20 || c >= 0x7f || c == '%')
			return false;
		if (c == '/' && i + 1 < len &&
		    (src[i + 1] == '/' || src[i + 1] == '.'))
			return false;
	}
	return true;
}

ssize_t
http_path_normalize(char *dst, size_t dstlen, const char *src,
    size_t srclen, int *status)
{
	struct utf8 u = { 0, 0x80, 0xbf };
	size_t i = 1, o = 1, seg = 1;
	ssize_t n;
	int hi, lo, st = 400;
	unsigned char c;

	if (srclen == 0 || src[0] != '/')
		goto bad;
	if (srclen < dstlen && plain(src, srclen)) {
		memcpy(dst, src, srclen);
		dst[srclen] = '\0';
		return (ssize_t)srclen;
	}
	if (dstlen < 2) {
		st = 414;
		goto bad;
	}
	dst[0] = '/';

	while (i < srclen) {
		c = (unsigned char)src[i++];
		if (c == '%') {
			if (srclen - i < 2)
				goto bad;
			hi = hexval((unsigned char)src[i]);
			lo = hexval((unsigned char)src[i + 1]);
			if (hi < 0 || lo < 0)
				goto bad;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || !utf8_next(&u, c))
			goto bad;
		if (c == '/') {
			n = segment_end(dst, dstlen, o, &seg, true, &st);
			if (n < 0)
				goto bad;
			o = (size_t)n;
			continue;
		}
		/* Room for c and the NUL. */
		if (o + 2 > dstlen) {
			st = 414;
			goto bad;
		}
		dst[o++] = (char)c;
	}
	if (u.need > 0)
		goto bad;
	n = segment_end(dst, dstlen, o, &seg, false, &st);
	if (n < 0)
		goto bad;
	dst[n] = '\0';
	return n;

bad:
	*status = st;
	return -1;
}

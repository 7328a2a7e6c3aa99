/*
 * Path decoding and normalisation.  A path that is accepted must come out
 * as what openat2() below the document root expects: absolute, no empty,
 * "." or ".." segment, no NUL or control byte, valid UTF-8, no longer than
 * the input; normalising it again changes nothing.  Every destination size
 * gives the same answer or 414, and nothing is written past it.
 *
 * Input: one byte, a small destination size to try too, then the raw path.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/http.h"

/* Length of the valid UTF-8 sequence at p (RFC 3629), 0 if invalid. */
static size_t
utf8_len(const unsigned char *p, size_t left)
{
	uint32_t cp;
	size_t n, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	n = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	cp = p[0] & (0x7f >> n);
	if (n > left)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

static void
check_clean(const char *dst, size_t n)
{
	const unsigned char *p = (const unsigned char *)dst;
	size_t i, k, seg;

	FUZZ_CHECK(n >= 1 && dst[0] == '/');
	FUZZ_CHECK(dst[n] == '\0');
	for (i = 0; i < n; i += k) {
		FUZZ_CHECK(p[i] >= 0x20 && p[i] != 0x7f);
		k = utf8_len(p + i, n - i);
		FUZZ_CHECK(k > 0);
	}
	/* Segments: between slashes, none empty (but the last), "." or "..". */
	for (i = 1; i <= n; i = seg + 1) {
		const char *s = memchr(dst + i, '/', n - i);

		seg = s != NULL ? (size_t)(s - dst) : n;
		if (seg == n && i == n)
			break;		/* a trailing slash */
		FUZZ_CHECK(seg > i);
		FUZZ_CHECK(!(seg - i == 1 && dst[i] == '.'));
		FUZZ_CHECK(!(seg - i == 2 && dst[i] == '.' &&
		    dst[i + 1] == '.'));
	}
}

/* Normalises src into a buffer of exactly dstlen bytes. */
static ssize_t
normalize(const char *src, size_t srclen, size_t dstlen, char **out,
    int *status)
{
	char *dst = malloc(dstlen > 0 ? dstlen : 1);
	ssize_t n;

	FUZZ_CHECK(dst != NULL);
	*status = -7;
	n = http_path_normalize(dst, dstlen, src, srclen, status);
	if (n >= 0) {
		FUZZ_CHECK((size_t)n < dstlen);
		FUZZ_CHECK(*status == -7);
	} else {
		FUZZ_CHECK(n == -1);
		FUZZ_CHECK(*status == 400 || *status == 414);
	}
	*out = dst;
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *src, *dst, *dst2;
	int status, status2;
	size_t len, small;
	ssize_t n, n2;

	if (size < 1)
		return 0;
	small = data[0];
	len = size - 1;
	src = fuzz_dup(data + 1, len);

	/* The output is never longer than the input. */
	n = normalize(src, len, len + 1, &dst, &status);
	FUZZ_CHECK(n >= 0 || status == 400);
	if (n >= 0) {
		check_clean(dst, (size_t)n);
		/*
		 * Room for the result alone may not do (dot segments are
		 * written before they are removed), but never gives another
		 * answer; one byte less never fits.
		 */
		n2 = normalize(src, len, (size_t)n + 1, &dst2, &status2);
		FUZZ_CHECK((n2 == n && memcmp(dst, dst2, (size_t)n + 1) == 0)
		    || status2 == 414);
		free(dst2);
		n2 = normalize(src, len, (size_t)n, &dst2, &status2);
		FUZZ_CHECK(n2 == -1 && status2 == 414);
		free(dst2);
		/* A clean path is a fixed point, unless it holds a '%'. */
		if (memchr(dst, '%', (size_t)n) == NULL) {
			n2 = normalize(dst, (size_t)n, (size_t)n + 1, &dst2,
			    &status2);
			FUZZ_CHECK(n2 == n &&
			    memcmp(dst, dst2, (size_t)n) == 0);
			free(dst2);
		}
	}

	/* Any other size: the same answer, or 414. */
	n2 = normalize(src, len, small, &dst2, &status2);
	if (n2 >= 0)
		FUZZ_CHECK(n2 == n && memcmp(dst, dst2, (size_t)n + 1) == 0);
	else
		FUZZ_CHECK(status2 == 414 || (n < 0 && status2 == status));
	free(dst2);
	free(dst);
	free(src);
	return 0;
}

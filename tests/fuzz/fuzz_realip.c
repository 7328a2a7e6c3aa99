/*
 * X-Forwarded-For as a client may send it, through the realip walk: any
 * bytes, as up to 8 field lines (split at LF).  The answer must be an
 * IPv4 or IPv6 address or none, and the same whether the lines come
 * apart or joined by commas into one.
 *
 * Input: one byte of options (bit 0: recursive), then the lines.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/fuzz/fuzz.h"
#include "worker/realip.h"

/* Trusts addresses whose last byte is even: any rule will do. */
static bool
trusted(const struct sockaddr *sa, void *arg)
{
	const struct sockaddr_storage *ss = (const void *)sa;

	(void)arg;
	return ((const unsigned char *)ss)[sizeof(*ss) - 1] % 2 == 0 ||
	    sa->sa_family == AF_INET6;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage a, b;
	struct span v[8], one;
	size_t n = 0, i, start = 0, len;
	char *buf, *joined;
	bool ra, rb, rec;

	if (size < 1)
		return 0;
	rec = data[0] & 1;
	len = size - 1;
	for (i = 0; i < len; i++)
		if (data[1 + i] == '\n' && ++n == 8)
			return 0;	/* at most 8 lines */
	buf = fuzz_dup(data + 1, len);
	joined = fuzz_dup(data + 1, len);
	n = 0;
	for (i = 0; i <= len; i++) {
		if (i < len && buf[i] != '\n')
			continue;
		v[n].p = buf + start;
		v[n].len = i - start;
		n++;
		if (i < len)
			joined[i] = ',';
		start = i + 1;
	}
	ra = realip_from_xff(v, n, rec, trusted, NULL, &a);
	if (ra)
		FUZZ_CHECK(a.ss_family == AF_INET || a.ss_family == AF_INET6);
	one.p = joined;
	one.len = len;
	rb = realip_from_xff(&one, 1, rec, trusted, NULL, &b);
	FUZZ_CHECK(ra == rb);
	if (ra)
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	free(buf);
	free(joined);
	return 0;
}

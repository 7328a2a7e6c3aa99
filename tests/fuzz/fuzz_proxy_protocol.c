/*
 * The PROXY protocol parser as a connection feeds it: the header arriving
 * in pieces in front of a request.  A header found in the whole input is
 * found, with the same length, in every longer prefix and in itself
 * alone, and every shorter prefix says "more"; an error is the same error
 * from the prefix where it first shows on.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tests/fuzz/fuzz.h"
#include "worker/proxy_protocol.h"

static ssize_t
parse(const uint8_t *data, size_t n, struct pp_header *h, const char **why)
{
	char *buf = fuzz_dup(data, n);
	ssize_t rc;

	*why = NULL;
	rc = proxy_protocol_parse(buf, n, h, why);
	free(buf);
	return rc;
}

static void
check_header(const struct pp_header *h)
{
	FUZZ_CHECK(h->version == 1 || h->version == 2);
	if (h->local)
		return;
	FUZZ_CHECK(h->src.ss_family == h->dst.ss_family);
	FUZZ_CHECK(h->src.ss_family == AF_INET ||
	    h->src.ss_family == AF_INET6);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_header h, h2;
	const char *why, *why2;
	ssize_t rc, rc2;
	size_t k, first_error = 0;

	rc = parse(data, size, &h, &why);
	FUZZ_CHECK(rc >= -1 && rc <= (ssize_t)size);
	if (rc == -1)
		FUZZ_CHECK(why != NULL && why[0] != '\0');
	if (rc > 0) {
		check_header(&h);
		FUZZ_CHECK(rc <= (h.version == 1 ? PP_V1_MAX : PP_V2_MAX));
		rc2 = parse(data, (size_t)rc, &h2, &why2);
		FUZZ_CHECK(rc2 == rc && h2.version == h.version &&
		    h2.local == h.local);
		if (!h.local)
			FUZZ_CHECK(memcmp(&h.src, &h2.src, h.srclen) == 0);
	}
	/* Prefixes: "more" up to the answer, then the answer. */
	for (k = 0; k < size && k < 256; k++) {
		rc2 = parse(data, k, &h2, &why2);
		if (rc > 0 && k < (size_t)rc)
			FUZZ_CHECK(rc2 == PP_AGAIN);
		if (rc2 == -1 && first_error == 0) {
			first_error = k;
			FUZZ_CHECK(rc == -1 && strcmp(why2, why) == 0);
		}
		if (rc2 > 0)
			FUZZ_CHECK(rc2 == rc);
	}
	return 0;
}

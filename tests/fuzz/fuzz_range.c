/*
 * The Range parser.  Whatever the header says, what comes back must be
 * safe to send: at most max ranges, each inside the representation, none
 * overlapping or touching another, and nothing written past out[max - 1].
 * Allowing more ranges never changes a header that was accepted.
 *
 * Input: one byte for max, one that picks the representation size, then
 * the header value.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/http.h"

#define MAX_RANGES	20

static const uint64_t sizes[] = {
	0, 1, 2, 10, 100, 1000, 9999, 10000, 65536, 1048576,
	(uint64_t)1 << 32, INT64_MAX, (uint64_t)INT64_MAX + 1,
	UINT64_MAX - 1, UINT64_MAX, 123456789,
};

static bool
apart(const struct http_range *a, const struct http_range *b)
{
	return a->last + 1 < b->first || b->last + 1 < a->first;
}

static int
parse(const char *v, size_t len, uint64_t size, int max,
    struct http_range **outp, int *n)
{
	struct http_range *out;
	int rc, i, j;

	/* Exactly max elements, so that ASan sees a write past them. */
	out = malloc(max > 0 ? (size_t)max * sizeof(*out) : 1);
	FUZZ_CHECK(out != NULL);
	*n = -5;
	rc = http_range_parse(v, len, size, out, max, n);
	FUZZ_CHECK(rc == HTTP_RANGE_NONE || rc == HTTP_RANGE_OK ||
	    rc == HTTP_RANGE_UNSATISFIABLE);
	if (rc != HTTP_RANGE_OK) {
		FUZZ_CHECK(*n == 0);
		*outp = out;
		return rc;
	}
	FUZZ_CHECK(*n >= 1 && *n <= max);
	for (i = 0; i < *n; i++) {
		FUZZ_CHECK(out[i].first <= out[i].last);
		FUZZ_CHECK(out[i].last < size);
		for (j = 0; j < i; j++)
			FUZZ_CHECK(apart(&out[i], &out[j]));
	}
	*outp = out;
	return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_range *out, *more;
	uint64_t rsize;
	int max, rc, rc2, n, n2;
	size_t len;
	char *v;

	if (size < 2)
		return 0;
	max = data[0] % (MAX_RANGES + 1);
	rsize = sizes[data[1] % (sizeof(sizes) / sizeof(sizes[0]))];
	len = size - 2;
	v = fuzz_dup(data + 2, len);

	rc = parse(v, len, rsize, max, &out, &n);
	if (rc == HTTP_RANGE_OK && max < MAX_RANGES) {
		rc2 = parse(v, len, rsize, MAX_RANGES, &more, &n2);
		FUZZ_CHECK(rc2 == rc && n2 == n);
		FUZZ_CHECK(memcmp(out, more, (size_t)n * sizeof(*out)) == 0);
		free(more);
	}
	free(out);
	free(v);
	return 0;
}

/*
 * http_range_parse(): what a Range header turns into, for a representation
 * of a given size.  Each row is what the static handler would do: ignore
 * the header (200), send ranges (206) or refuse (416).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "worker/http.h"

#define NONE	HTTP_RANGE_NONE
#define OK	HTTP_RANGE_OK
#define UNSAT	HTTP_RANGE_UNSATISFIABLE
#define MAXR	8

struct range_case {
	const char *header;
	uint64_t size;
	int max;
	int result;
	int n;
	struct http_range r[MAXR];
};

static const struct range_case cases[] = {
	/* One range, the examples of RFC 9110 section 14.1.2. */
	{ "bytes=0-499", 10000, 8, OK, 1, { { 0, 499 } } },
	{ "bytes=500-999", 10000, 8, OK, 1, { { 500, 999 } } },
	{ "bytes=-500", 10000, 8, OK, 1, { { 9500, 9999 } } },
	{ "bytes=9500-", 10000, 8, OK, 1, { { 9500, 9999 } } },
	{ "bytes=0-0", 10000, 8, OK, 1, { { 0, 0 } } },
	{ "bytes=-1", 10000, 8, OK, 1, { { 9999, 9999 } } },
	{ "bytes=0-", 10000, 8, OK, 1, { { 0, 9999 } } },
	{ "bytes=9999-9999", 10000, 8, OK, 1, { { 9999, 9999 } } },
	{ "bytes=000-0010", 10000, 8, OK, 1, { { 0, 10 } } },
	{ "bytes=0000000000000000000000000000005-6", 10000, 8, OK, 1,
	    { { 5, 6 } } },
	{ "bytes=0-0", 1, 8, OK, 1, { { 0, 0 } } },
	{ "bytes=-1", 1, 8, OK, 1, { { 0, 0 } } },

	/* The unit is case-insensitive. */
	{ "Bytes=0-1", 10, 8, OK, 1, { { 0, 1 } } },
	{ "BYTES=0-1", 10, 8, OK, 1, { { 0, 1 } } },

	/* Clamping to the end of the representation. */
	{ "bytes=9000-20000", 10000, 8, OK, 1, { { 9000, 9999 } } },
	{ "bytes=-20000", 10000, 8, OK, 1, { { 0, 9999 } } },
	{ "bytes=-10000", 10000, 8, OK, 1, { { 0, 9999 } } },
	{ "bytes=0-18446744073709551615", 10000, 8, OK, 1, { { 0, 9999 } } },
	{ "bytes=-18446744073709551615", 10000, 8, OK, 1, { { 0, 9999 } } },

	/* Several ranges, kept in request order. */
	{ "bytes=0-99,200-299,-100", 10000, 8, OK, 3,
	    { { 0, 99 }, { 200, 299 }, { 9900, 9999 } } },
	{ "bytes=500-599,0-99", 10000, 8, OK, 2,
	    { { 500, 599 }, { 0, 99 } } },
	{ "bytes=0-99,101-199", 10000, 8, OK, 2,
	    { { 0, 99 }, { 101, 199 } } },

	/* Unsatisfiable specs are dropped when others remain. */
	{ "bytes=0-99,20000-", 10000, 8, OK, 1, { { 0, 99 } } },
	{ "bytes=-0,5-6", 10000, 8, OK, 1, { { 5, 6 } } },
	{ "bytes=0-9,200-300,250-", 100, 8, OK, 1, { { 0, 9 } } },

	/* OWS around list elements, and empty elements (section 5.6.1). */
	{ "bytes=0-1, 5-6", 10, 8, OK, 2, { { 0, 1 }, { 5, 6 } } },
	{ "bytes=0-1 ,\t5-6", 10, 8, OK, 2, { { 0, 1 }, { 5, 6 } } },
	{ "bytes= 0-1", 10, 8, OK, 1, { { 0, 1 } } },
	{ "bytes=0-1 ", 10, 8, OK, 1, { { 0, 1 } } },
	{ "bytes=,0-1", 10, 8, OK, 1, { { 0, 1 } } },
	{ "bytes=0-1,,5-6", 10, 8, OK, 2, { { 0, 1 }, { 5, 6 } } },
	{ "bytes=0-1,", 10, 8, OK, 1, { { 0, 1 } } },
	{ "bytes= , 0-1 , ", 10, 8, OK, 1, { { 0, 1 } } },

	/* Nothing left to send: 416. */
	{ "bytes=10000-", 10000, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=10000-20000", 10000, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=-0", 10000, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=20000-,30000-30010", 10000, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=-0,10000-", 10000, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=18446744073709551615-", UINT64_MAX, 8, UNSAT, 0,
	    { { 0, 0 } } },
	{ "bytes=1-", 1, 8, UNSAT, 0, { { 0, 0 } } },

	/* An empty representation has no satisfiable range. */
	{ "bytes=0-", 0, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=0-0", 0, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=-5", 0, 8, UNSAT, 0, { { 0, 0 } } },
	{ "bytes=x", 0, 8, NONE, 0, { { 0, 0 } } },

	/* Syntax errors: the header is ignored. */
	{ "", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes =0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes:0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=,", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes= , ", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=abc", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=-", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=--1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=1-2-3", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=-1-2", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=+1-2", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=1-+2", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0x10-20", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=1-a", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0 -1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0- 1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=1 2-3", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-1;5-6", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-1,x", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=5-4", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-1,5-4", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=20000-10000", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=10000-,a", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=\xd9\xa1-2", 10000, 8, NONE, 0, { { 0, 0 } } },

	/* Other units. */
	{ "items=0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "byte=0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytesx=0-1", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "none", 10000, 8, NONE, 0, { { 0, 0 } } },

	/* More specs than max, even unsatisfiable ones: ignored. */
	{ "bytes=0-1,3-4", 10000, 2, OK, 2, { { 0, 1 }, { 3, 4 } } },
	{ "bytes=0-1,3-4,6-7", 10000, 2, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-1,20000-,30000-", 10000, 2, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-1,,,", 10000, 1, OK, 1, { { 0, 1 } } },
	{ "bytes=0-1", 10000, 0, NONE, 0, { { 0, 0 } } },

	/* Overlapping or touching ranges: the whole body instead. */
	{ "bytes=0-99,50-149", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-99,100-199", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=100-199,0-99", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=100-199,0-100", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-0,0-0", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-,5-10", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=-500,9000-", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-9,20-29,40-49,25-25", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=50-200,-60", 100, 8, NONE, 0, { { 0, 0 } } },

	/* Numbers that do not fit 64 bits make the header invalid. */
	{ "bytes=18446744073709551616-", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=0-18446744073709551616", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=-18446744073709551616", 10000, 8, NONE, 0, { { 0, 0 } } },
	{ "bytes=99999999999999999999999-", 10000, 8, NONE, 0,
	    { { 0, 0 } } },
	{ "bytes=0-1,99999999999999999999999-", 10000, 8, NONE, 0,
	    { { 0, 0 } } },

	/* The largest representations. */
	{ "bytes=0-", UINT64_MAX, 8, OK, 1, { { 0, UINT64_MAX - 1 } } },
	{ "bytes=-1", UINT64_MAX, 8, OK, 1,
	    { { UINT64_MAX - 1, UINT64_MAX - 1 } } },
	{ "bytes=0-0,-1", UINT64_MAX, 8, OK, 2,
	    { { 0, 0 }, { UINT64_MAX - 1, UINT64_MAX - 1 } } },
};

Test(http_range, table)
{
	struct http_range out[MAXR];
	const struct range_case *c;
	size_t i;
	int k, n, rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = &cases[i];
		memset(out, 0xa5, sizeof(out));
		n = 99;
		rc = http_range_parse(c->header, strlen(c->header), c->size,
		    out, c->max, &n);
		cr_expect_eq(rc, c->result, "\"%s\" size %llu max %d: "
		    "result %d, expected %d", c->header,
		    (unsigned long long)c->size, c->max, rc, c->result);
		cr_expect_eq(n, c->n, "\"%s\": %d ranges, expected %d",
		    c->header, n, c->n);
		if (rc != c->result || n != c->n)
			continue;
		for (k = 0; k < n; k++)
			cr_expect(out[k].first == c->r[k].first &&
			    out[k].last == c->r[k].last,
			    "\"%s\" range %d: %llu-%llu, expected %llu-%llu",
			    c->header, k, (unsigned long long)out[k].first,
			    (unsigned long long)out[k].last,
			    (unsigned long long)c->r[k].first,
			    (unsigned long long)c->r[k].last);
	}
}

/* The length bounds the value: what lies after it is never read. */
Test(http_range, length_bounds_value)
{
	struct http_range out[MAXR];
	const char v[] = "bytes=0-1\0,5-6";
	int n;

	cr_expect_eq(http_range_parse(v, 9, 100, out, MAXR, &n), OK);
	cr_expect_eq(n, 1);
	cr_expect_eq(out[0].last, 1);
	cr_expect_eq(http_range_parse(v, sizeof(v) - 1, 100, out, MAXR, &n),
	    NONE, "a NUL byte is a syntax error");
	cr_expect_eq(http_range_parse("bytes=0-123", 10, 1000, out, MAXR,
	    &n), OK);
	cr_expect_eq(out[0].last, 12);
}

/* Exactly max ranges fit in out[]; the caller sizes it with max. */
Test(http_range, max_ranges_fill_out)
{
	struct http_range out[4];
	int n;

	cr_assert_eq(http_range_parse("bytes=0-0,2-2,4-4,6-6", 21,
	    10, out, 4, &n), OK);
	cr_expect_eq(n, 4);
	cr_expect_eq(out[3].first, 6);
	cr_expect_eq(http_range_parse("bytes=0-0,2-2,4-4,6-6,8-8", 25,
	    10, out, 4, &n), NONE);
	cr_expect_eq(n, 0);
}

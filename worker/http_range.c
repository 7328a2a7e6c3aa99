/*
 * The Range header field (RFC 9110 section 14.1 and 14.2).
 *
 * Anything we do not fully understand makes us ignore the header and send
 * the whole representation, which is always a correct answer.  Only a
 * well-formed byte range set whose every range lies beyond the end gets a
 * 416.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/http.h"
#include "worker/http_lex.h"


/* Reads 1*DIGIT; NULL when there is no digit or the number needs > 64 bits. */
static const char *
read_u64(const char *p, const char *end, uint64_t *out)
{
	const char *start = p;
	uint64_t v = 0;
	unsigned d;

	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (p == start)
		return NULL;
	*out = v;
	return p;
}

/*
 * Parses one range-spec at p and resolves it against size.  Returns the end
 * of the spec, or NULL when it is malformed; *ok tells whether it is
 * satisfiable, and then *r holds it clamped to the representation.
 */
static const char *
read_spec(const char *p, const char *end, uint64_t size,
    struct http_range *r, bool *ok)
{
	uint64_t first, last;

	if (*p == '-') {
		/* suffix-range: the last "last" bytes. */
		if ((p = read_u64(p + 1, end, &last)) == NULL)
			return NULL;
		*ok = last > 0 && size > 0;
		if (*ok) {
			r->first = last >= size ? 0 : size - last;
			r->last = size - 1;
		}
		return p;
	}

	if ((p = read_u64(p, end, &first)) == NULL || p == end || *p != '-')
		return NULL;
	p++;
	last = UINT64_MAX;
	if (p < end && *p >= '0' && *p <= '9') {
		if ((p = read_u64(p, end, &last)) == NULL || last < first)
			return NULL;
	}
	*ok = first < size;
	if (*ok) {
		r->first = first;
		r->last = last < size - 1 ? last : size - 1;
	}
	return p;
}

/*
 * Overlapping or touching ranges are what range amplification attacks are
 * made of, and no honest client needs them.  The O(n^2) check keeps us
 * allocation-free; n is bounded by the caller's max.
 */
static bool
ranges_overlap(const struct http_range *r, int n)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (r[i].first <= r[j].last + 1 &&
			    r[j].first <= r[i].last + 1)
				return true;
	return false;
}

static bool
is_bytes_unit(const char *v, size_t len)
{
	static const char unit[] = "bytes=";
	size_t i;
	char c;

	if (len < sizeof(unit) - 1)
		return false;
	for (i = 0; i < sizeof(unit) - 1; i++) {
		c = v[i];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (c != unit[i])
			return false;
	}
	return true;
}

/*
 * The list rules of RFC 9110 section 5.6.1 apply: OWS around elements and
 * empty elements are accepted, but at least one range-spec must be there.
 * On HTTP_RANGE_NONE or HTTP_RANGE_UNSATISFIABLE *n is 0 and out[] holds
 * nothing useful.
 */
int
http_range_parse(const char *v, size_t len, uint64_t size,
    struct http_range *out, int max, int *n)
{
	const char *p, *end = v + len;
	struct http_range r;
	int specs = 0, kept = 0;
	bool ok;

	*n = 0;
	if (!is_bytes_unit(v, len))
		return HTTP_RANGE_NONE;

	p = v + sizeof("bytes=") - 1;
	for (;;) {
		p = http_skip_ows(p, end);
		if (p < end && *p != ',') {
			p = read_spec(p, end, size, &r, &ok);
			if (p == NULL || ++specs > max)
				return HTTP_RANGE_NONE;
			if (ok)
				out[kept++] = r;
			p = http_skip_ows(p, end);
		}
		if (p == end)
			break;
		if (*p++ != ',')
			return HTTP_RANGE_NONE;
	}

	if (specs == 0 || ranges_overlap(out, kept))
		return HTTP_RANGE_NONE;
	if (kept == 0)
		return HTTP_RANGE_UNSATISFIABLE;
	*n = kept;
	return HTTP_RANGE_OK;
}

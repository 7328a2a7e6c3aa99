/*
 * Range answers (RFC 9110 section 14): one part, or multipart/byteranges,
 * for any representation whose bytes a caller can queue.  Static files and
 * cached proxy responses share it.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "worker/conn.h"
#include "worker/resp.h"
#include "worker/http_lex.h"

#define PART_HEAD_MAX	512

static int
part_header(char *buf, size_t size, const char *boundary,
    const struct resp_rep *rep, const struct http_range *rg)
{
	return snprintf(buf, size, "\r\n--%s\r\nContent-Type: %.*s\r\n"
	    "Content-Range: bytes %llu-%llu/%llu\r\n\r\n", boundary,
	    (int)rep->tlen, rep->type, (unsigned long long)rg->first,
	    (unsigned long long)rg->last, (unsigned long long)rep->size);
}

/* The header lines but Content-Type: each part states its own. */
static void
lines_but_type(struct conn *c, const char *p, size_t len)
{
	const char *end = p + len, *nl;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		if ((size_t)(nl - p) < 13 || !http_ieq(p, "content-type:", 13))
			resp_header(c, p, (size_t)(nl - p));
		p = nl;
	}
}

static void
one_part(struct conn *c, const struct resp_rep *rep,
    const struct http_range *rg)
{
	uint64_t len = rg->last - rg->first + 1;
	char cr[80];
	int n;

	resp_status(c, 206);
	resp_header(c, rep->lines, rep->len);
	if (rep->elen > 0)
		resp_header(c, rep->extra, rep->elen);
	n = snprintf(cr, sizeof(cr), "Content-Range: bytes %llu-%llu/%llu\r\n",
	    (unsigned long long)rg->first, (unsigned long long)rg->last,
	    (unsigned long long)rep->size);
	resp_header(c, cr, (size_t)n);
	resp_end_headers(c, (int64_t)len);
	if (!resp_is_head(c))
		rep->part(c, rep->arg, rg->first, len);
	resp_done(c, 206, resp_is_head(c) ? 0 : len);
}

static void
parts(struct conn *c, const struct resp_rep *rep,
    const struct http_range *rg, int n)
{
	static uint64_t seq;
	char boundary[24], part[PART_HEAD_MAX], tail[40];
	uint64_t total = 0;
	int i, len, tlen;

	/* Unpredictable enough that no body contains it by chance. */
	if (seq == 0)
		seq = (uint64_t)getpid() << 32;
	snprintf(boundary, sizeof(boundary), "%016llx",
	    (unsigned long long)XXH3_64bits(&seq, sizeof(seq)));
	seq++;
	for (i = 0; i < n; i++)
		total += (uint64_t)part_header(part, sizeof(part), boundary,
		    rep, &rg[i]) + rg[i].last - rg[i].first + 1;
	tlen = snprintf(tail, sizeof(tail), "\r\n--%s--\r\n", boundary);
	total += (uint64_t)tlen;

	resp_status(c, 206);
	lines_but_type(c, rep->lines, rep->len);
	if (rep->elen > 0)
		resp_header(c, rep->extra, rep->elen);
	resp_headerf(c, "Content-Type: multipart/byteranges; boundary=%s",
	    boundary);
	resp_end_headers(c, (int64_t)total);
	if (!resp_is_head(c)) {
		for (i = 0; i < n; i++) {
			len = part_header(part, sizeof(part), boundary, rep,
			    &rg[i]);
			resp_body_copy(c, part, (size_t)len);
			rep->part(c, rep->arg, rg[i].first,
			    rg[i].last - rg[i].first + 1);
		}
		resp_body_copy(c, tail, (size_t)tlen);
	}
	resp_done(c, 206, resp_is_head(c) ? 0 : total);
}

bool
resp_range(struct conn *c, const struct http_request *r,
    const struct resp_rep *rep)
{
	struct http_range rg[RESP_RANGES_MAX];
	char cr[64];
	int n, rc, max;

	/*
	 * GET is the only method with ranges; HEAD answers what GET would
	 * (RFC 9110 section 9.3.2), as nginx and Apache do.  A changed
	 * If-Range: the whole.
	 */
	if (r->range.p == NULL ||
	    (r->method != HTTP_M_GET && r->method != HTTP_M_HEAD) ||
	    !http_if_range(r, rep->etag, rep->etag_len, rep->mtime))
		return false;
	max = rep->max_ranges < RESP_RANGES_MAX ? rep->max_ranges :
	    RESP_RANGES_MAX;
	if (rep->tlen > PART_HEAD_MAX / 2)
		max = 1;
	rc = http_range_parse(r->range.p, r->range.len, rep->size, rg, max,
	    &n);
	if (rc == HTTP_RANGE_UNSATISFIABLE) {
		n = snprintf(cr, sizeof(cr), "Content-Range: bytes */%llu\r\n",
		    (unsigned long long)rep->size);
		resp_error_hdr(c, 416, cr, (size_t)n);
	} else if (rc == HTTP_RANGE_OK && n == 1) {
		one_part(c, rep, rg);
	} else if (rc == HTTP_RANGE_OK) {
		parts(c, rep, rg, n);
	} else {
		return false;
	}
	return true;
}

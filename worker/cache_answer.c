/*
 * Answers from stored objects: the status (304 when the client's
 * preconditions match the stored validators), the stored header lines,
 * Age and X-Cache stated on each answer, Range requests of a stored 200,
 * and the gzip copy for clients that take it.  The body goes out pinned in
 * the store, without a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "worker/cache_impl.h"
#include "worker/conn.h"
#include "worker/http_field.h"
#include "worker/http_lex.h"
#include "worker/resp.h"
#include "worker/status.h"

const char *const xc_name[] = { NULL, "HIT", "MISS", "STALE", "UPDATING",
	"EXPIRED", "BYPASS" };

#define XC_LINE(v)	{ "X-Cache: " v "\r\n", sizeof("X-Cache: " v "\r\n") - 1 }
const struct span xc_line[] = {
	{ "", 0 }, XC_LINE("HIT"), XC_LINE("MISS"), XC_LINE("STALE"),
	XC_LINE("UPDATING"), XC_LINE("EXPIRED"), XC_LINE("BYPASS")
};
#undef XC_LINE

/* The body of a cached answer: a pinned value, or its bytes to copy. */
struct hit_body {
	struct pin *pin;
	const char *data;		/* the body's first byte */
	size_t off;			/* and its offset in the value */
};

/*
 * 304 when the client's preconditions match the stored validators:
 * If-None-Match by the weak comparison (RFC 9110 13.1.2), else
 * If-Modified-Since against Last-Modified, or the Date of a response
 * without one (RFC 9110 13.1.3: the cache knows it was current then).
 */
static bool
not_modified(const struct cache_req *cr, const struct cache_obj *co,
    const char *etag)
{
	int64_t lm = co->mtime >= 0 ? co->mtime : co->date;
	time_t since;

	if (cr->inm.p != NULL)
		return cp_etag_match(cr->inm, etag, co->etag_len);
	/* A date cannot tell a compressed copy from the plain one. */
	if (cr->ims.p == NULL || lm <= 0 || (co->flags & CO_COPY))
		return false;
	since = http_date_parse(cr->ims.p, cr->ims.len);
	return since != (time_t)-1 && lm <= (int64_t)since;
}

/*
 * The fields a 304 from the cache repeats (RFC 9110 15.4.5): those that
 * guide cache updates, never representation metadata such as
 * Content-Encoding, which would relabel the copy the client holds.
 * Copied to dst (len bytes of room); returns their length.
 */
static size_t
lines_304(char *dst, const char *p, size_t len)
{
	const char *end = p + len, *nl, *colon;
	struct span name;
	size_t n = 0;

	for (; p < end; p = nl) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		if ((colon = memchr(p, ':', (size_t)(nl - p))) == NULL)
			continue;
		name.p = p;
		name.len = (size_t)(colon - p);
		if (http_field_flags(name) & HF_304_KEEP) {
			memcpy(dst + n, p, (size_t)(nl - p));
			n += (size_t)(nl - p);
		}
	}
	return n;
}

static void
hit_part(struct conn *c, void *arg, uint64_t off, uint64_t len)
{
	const struct hit_body *b = arg;

	if (b->pin != NULL)
		resp_body_pin(c, b->pin, b->off + (size_t)off, (size_t)len);
	else
		resp_body_copy(c, b->data + off, (size_t)len);
}

/* The value of the Content-Type line among stored header lines. */
static struct span
lines_type(const char *p, size_t len)
{
	const char *end = p + len, *nl;
	struct span t = { "application/octet-stream", 24 };

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			break;
		if (nl - p > 14 && http_ieq(p, "content-type:", 13)) {
			t.p = http_skip_ows(p + 13, nl);
			t.len = (size_t)(nl - 1 - t.p);	/* before CR */
			break;
		}
	}
	return t;
}

/* Answers a Range from a 200 in the cache; false when not a Range. */
static bool
answer_range(struct cache_req *cr, const struct cache_obj *co,
    const char *etag, const char *lines, struct hit_body *b,
    const char *extra, size_t elen)
{
	struct http_request rq;
	struct span type;
	struct resp_rep rep;

	if (cr->range.p == NULL || co->status != 200)
		return false;
	memset(&rq, 0, sizeof(rq));
	rq.method = resp_is_head(cr->c) ? HTTP_M_HEAD : HTTP_M_GET;
	rq.range = cr->range;
	rq.if_range = cr->if_range;
	type = lines_type(lines, co->hlen);
	memset(&rep, 0, sizeof(rep));
	rep.lines = lines;
	rep.len = co->hlen;
	rep.extra = extra;
	rep.elen = elen;
	rep.type = type.p;
	rep.tlen = type.len;
	rep.etag = etag;
	rep.etag_len = co->etag_len;
	rep.mtime = (time_t)co->mtime;
	rep.size = co->blen;
	rep.max_ranges = worker.cf->max_ranges;
	rep.part = hit_part;
	rep.arg = b;
	return resp_range(cr->c, &rq, &rep);
}

/*
 * The head of a hit but Age and X-Cache, kept per stored value and status
 * as the hits of one value repeat it: the status line, Server, the stored
 * Date (when the origin made the response, RFC 9110 6.6.1, not the time
 * of this answer), the stored lines, then Content-Length.  A value is
 * named by its cas, which no other value of the store ever had: a refresh
 * by a 304 (cache_store.c) stores a new value, with its own cas.
 */
#define KEPT_BITS	6
#define KEPT_HEADS	(1 << KEPT_BITS)

struct kept_head {
	uint64_t cas;			/* 0: empty (a cas is never 0) */
	int status;
	const char *server;
	char *buf;
	size_t size;
	size_t len;			/* the head up to Age */
	size_t tail;			/* Content-Length, after it */
};

static struct kept_head kept[KEPT_HEADS];

/* The last Date formatted: the values of one second share it. */
static void
date_line(char *p, int64_t date)
{
	static int64_t last = -1;
	static char line[HTTP_DATE_LEN + 1];	/* and its NUL */

	if (date != last) {
		http_date_format((time_t)date, line);
		last = date;
	}
	memcpy(p, line, HTTP_DATE_LEN);
}

static struct kept_head *
kept_head(int status, const struct cache_obj *co, uint64_t cas,
    const char *lines)
{
	/* Fills take several cas each (leases too): spread them. */
	struct kept_head *k = &kept[(cas * 0x9e3779b97f4a7c15ULL) >>
	    (64 - KEPT_BITS)];
	const char *sl, *r = NULL;
	size_t n, want;
	char *p;

	if (k->cas == cas && k->status == status &&
	    k->server == worker.server_line)
		return k;
	/* The ready-made status line, or one with the reason phrase. */
	if ((sl = http_status_line(status, &n)) == NULL) {
		r = http_reason(status);
		n = 13 + strlen(r) + 2;
	}
	want = n + worker.server_line_len + 6 + HTTP_DATE_LEN + 2 +
	    co->hlen + 16 + 20 + 2;
	if (want > k->size) {
		if ((p = realloc(k->buf, want)) == NULL)
			return NULL;
		k->buf = p;
		k->size = want;
	}
	p = k->buf;
	if (sl != NULL)
		memcpy(p, sl, n);
	else
		resp_status_line(p, status, r, n - 15);
	p += n;
	memcpy(p, worker.server_line, worker.server_line_len);
	p += worker.server_line_len;
	memcpy(p, "Date: ", 6);
	date_line(p + 6, co->date);
	p += 6 + HTTP_DATE_LEN;
	memcpy(p, "\r\n", 2);
	p += 2;
	if (status == 304 && co->status != 304) {
		p += lines_304(p, lines, co->hlen);
	} else {
		memcpy(p, lines, co->hlen);
		p += co->hlen;
	}
	k->len = (size_t)(p - k->buf);
	if (status != 304 && status != 204) {
		memcpy(p, "Content-Length: ", 16);
		p += 16 + http_u64(p + 16, co->blen);
		memcpy(p, "\r\n", 2);
		p += 2;
	}
	k->tail = (size_t)(p - k->buf) - k->len;
	k->cas = cas;
	k->status = status;
	k->server = worker.server_line;
	return k;
}

/* Answers from a pinned object, whose pin it takes over. */
static void
send_obj(struct cache_req *cr, struct store_ref *ref,
    const struct cache_obj *co, enum xc xc)
{
	struct conn *c = cr->c;
	const char *etag = (const char *)ref->data + sizeof(*co);
	const char *lines = etag + co->etag_len;
	size_t off = sizeof(*co) + co->etag_len + co->hlen;
	struct cp_fresh f;
	bool body, ranged;
	struct hit_body b = { NULL, (const char *)ref->data + off, off };
	struct kept_head *k;
	char extra[64];
	size_t elen;
	int status = co->status;

	if (xc != XC_NONE)
		status_cache(c, xc_name[xc]);
	/* How old it is now (RFC 9111 5.1) and X-Cache, on each answer. */
	cobj_fresh(co, &f);
	memcpy(extra, "Age: ", 5);
	elen = 5 + http_u64(extra + 5, (uint64_t)cp_age(&f, worker.now));
	memcpy(extra + elen, "\r\n", 2);
	elen += 2;
	if (cr->loc->x_cache) {
		memcpy(extra + elen, xc_line[xc].p, xc_line[xc].len);
		elen += xc_line[xc].len;
	}
	if (not_modified(cr, co, etag))
		status = 304;
	body = status != 304 && status != 204;
	if (body && co->blen > 0)
		b.pin = pin_take(ref);
	ranged = body && answer_range(cr, co, etag, lines, &b, extra, elen);
	if (!ranged) {
		/* Age is this answer's (RFC 9111 5.1): never kept. */
		if ((k = kept_head(status, co, ref->cas, lines)) != NULL)
			resp_head_whole(c, status, k->buf, k->len, extra, elen,
			    k->buf + k->len, k->tail);
		else
			resp_fail(c);
		body = body && !resp_is_head(c) && co->blen > 0;
		if (body)
			hit_part(c, &b, 0, co->blen);
		resp_done(c, status, body ? co->blen : 0);
	}
	if (b.pin != NULL)
		pin_put(b.pin);
	else
		unpin_soon(ref);
}

void
cache_answer(struct cache_req *cr, struct store_ref *ref,
    const struct cache_obj *co, enum xc xc)
{
	struct store_ref zref;
	struct cache_obj zco;

	/* Compressed once, at the fill: send that copy to who takes it. */
	if (gz_get(cr, co, &zref, &zco)) {
		store_release(worker.store, ref);
		ref = &zref;
		co = &zco;
	}
	send_obj(cr, ref, co, xc);
}

/*
 * Pages that applications wrote through the memcached listener, served
 * over HTTP: a location with memcached_key (and no memcached upstream)
 * looks the key up among the listener's items in the shared store.  The
 * value is the body; the headers come from the config (Content-Type from
 * the URI's extension, else default_type), never from the value.  The
 * item's cas is its entity tag and the time it was stored its
 * Last-Modified, so conditional requests and ranges work as for files.
 * With memcached_gzip_flag, an item whose flags have those bits is sent
 * with Content-Encoding: gzip (as SuperCache stores its pages).  A miss is
 * a 404, for error_page to pass on to the application.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "master/config.h"
#include "master/master.h"
#include "shm/store.h"
#include "worker/conn.h"
#include "worker/mc_http.h"
#include "worker/mc_store.h"
#include "worker/resp.h"
#include "worker/static.h"

struct part {
	struct pin *pin;
	size_t off;			/* of the body in the value */
};

static void
send_part(struct conn *c, void *arg, uint64_t off, uint64_t len)
{
	struct part *p = arg;

	resp_body_pin(c, p->pin, p->off + (size_t)off, (size_t)len);
}

/* The key as nginx escapes it for memcached; 0 when it is too long. */
size_t
mc_http_key(const char *p, size_t len, char *key)
{
	size_t i, n = 0;
	unsigned char ch;

	for (i = 0; i < len; i++) {
		ch = (unsigned char)p[i];
		if (ch <= 0x20 || ch == '%' || ch == 0x7f) {
			if (n + 3 > MC_KEY_MAX)
				return 0;
			n += (size_t)snprintf(key + n, 4, "%%%02X", ch);
		} else {
			if (n + 1 > MC_KEY_MAX)
				return 0;
			key[n++] = (char)ch;
		}
	}
	return n;
}

static void
answer(struct conn *c, const struct config_location *l, const char *path,
    size_t plen, struct mc_got *g)
{
	const struct http_request *r = conn_req(c);
	const char *type = mime_lookup(worker.rt->mime, path, plen);
	char lines[512], etag[32], date[HTTP_DATE_LEN + 1];
	bool gz = l->memcached_gzip_flag != 0 &&
	    (g->ref.flags & l->memcached_gzip_flag) != 0;
	struct part part = { NULL, sizeof(struct mc_item) };
	struct resp_rep rep;
	int n, elen;

	elen = snprintf(etag, sizeof(etag), "\"%" PRIx64 "\"", g->ref.cas);
	http_date_format((time_t)g->item->time, date);
	switch (http_conditional(r, etag, (size_t)elen, g->item->time)) {
	case 304:
		resp_status(c, 304);
		resp_headerf(c, "ETag: %s", etag);
		resp_headerf(c, "Last-Modified: %s", date);
		resp_end_headers(c, -1);
		resp_done(c, 304, 0);
		return;
	case 412:
		resp_error(c, 412);
		return;
	}
	n = snprintf(lines, sizeof(lines), "Content-Type: %s\r\nETag: %s\r\n"
	    "Last-Modified: %s\r\n%s", type != NULL ? type :
	    worker.cf->default_type, etag, date, gz ?
	    "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(lines)) {
		resp_error(c, 500);
		return;
	}
	if ((part.pin = pin_take(&g->ref)) == NULL) {
		resp_error(c, 503);
		return;
	}
	g->ref.data = NULL;	/* the pin has it now */
	rep = (struct resp_rep){
		.lines = lines, .len = (size_t)n,
		.type = type != NULL ? type : worker.cf->default_type,
		.etag = etag, .etag_len = (size_t)elen,
		.mtime = g->item->time, .size = g->len,
		.max_ranges = worker.cf->max_ranges,
		.part = send_part, .arg = &part,
	};
	rep.tlen = strlen(rep.type);
	if (r->range.p == NULL || !resp_range(c, r, &rep)) {
		resp_status(c, 200);
		resp_header(c, lines, (size_t)n);
		resp_end_headers(c, (int64_t)g->len);
		if (!resp_is_head(c))
			resp_body_pin(c, part.pin, part.off, g->len);
		resp_done(c, 200, resp_is_head(c) ? 0 : g->len);
	}
	pin_put(part.pin);
}

void
mc_http_serve(struct conn *c, const struct config_location *l)
{
	const struct http_request *r = conn_req(c);
	char path[PATH_MAX], key[MC_KEY_MAX];
	struct span s = l->memcached_request_uri ? r->target : r->path;
	struct mc_got g;
	ssize_t plen;
	size_t n;
	int status;

	if (r->method != HTTP_M_GET && r->method != HTTP_M_HEAD) {
		resp_error(c, 405);
		return;
	}
	plen = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (plen < 0) {
		resp_error(c, status);
		return;
	}
	n = l->memcached_request_uri ? mc_http_key(s.p, s.len, key) :
	    mc_http_key(path, (size_t)plen, key);
	if (n == 0 || worker.store == NULL ||
	    !mc_fetch(worker.store, key, n, &g)) {
		resp_error(c, 404);
		return;
	}
	answer(c, l, path, (size_t)plen, &g);
	if (g.ref.data != NULL)
		mc_release(worker.store, &g);
}

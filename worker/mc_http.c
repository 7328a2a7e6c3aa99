/*
 * Pages that applications wrote through the memcached listener, served
 * over HTTP: a location with memcached_key (and no memcached upstream)
 * looks the key up among the listener's items in the shared store.  The
 * value is the body; the headers come from the config (Content-Type from
 * the URI's extension, else the location's default_type), never from the
 * value.  The item's cas is its entity tag and the time it was stored its
 * Last-Modified, so conditional requests and ranges work as for files.
 * With memcached_gzip_flag, an item whose flags have those bits is sent
 * with Content-Encoding: gzip (as SuperCache stores its pages); with gzip
 * or brotli on, other items of gzip_types are compressed once into the
 * store, for every worker and client that takes the encoding.  A miss is a 404, for
 * error_page to pass on to the application.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "master/master.h"
#include "shm/store.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/gzip.h"
#include "worker/mc_http.h"
#include "worker/mc_store.h"
#include "worker/resp.h"
#include "worker/static.h"
#include "worker/vars.h"

#define VARY_LINE	"Vary: Accept-Encoding\r\n"

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

size_t
mc_http_request_key(const struct conn *c, const struct config_location *l,
    const struct http_request *r, const char *path, size_t plen, char *key)
{
	struct vars_ctx x = { .uri = path, .urilen = plen,
	    .args = r->query.p, .argslen = r->query.len };
	char buf[4 * MC_KEY_MAX];
	ssize_t n;

	if (l->memcached_request_uri)
		return mc_http_key(r->target.p, r->target.len, key);
	if (l->memcached_key == NULL)
		return mc_http_key(path, plen, key);
	x.root = worker.cf->dirs[l->dir];
	n = vars_expand(l->memcached_key, c, &x, buf, sizeof(buf));
	return n < 0 ? 0 : mc_http_key(buf, (size_t)n, key);
}

/* The copies made of pages, best first on a tie (as for files). */

static const struct {
	char ns;			/* of the copy's store key */
	const char *lines;		/* Content-Encoding, Vary */
	const char *suffix;		/* of its entity tag */
	char *(*compress)(const struct config *, const char *, size_t,
	    size_t *);
} encs[ENC_COUNT] = {
	[ENC_BR] = { CACHE_NS_MEMCACHED_BR, "Content-Encoding: br\r\n"
	    VARY_LINE, "br", brotli_bytes },
	[ENC_GZIP] = { CACHE_NS_MEMCACHED_GZIP, "Content-Encoding: gzip\r\n"
	    VARY_LINE, "gz", gzip_bytes },
};

/*
 * The item's copy in encoding e, made once for every worker (the store's
 * lease picks the one that compresses) and keyed by the item's cas, so a
 * new value never finds an old copy.  False: answer otherwise (it does
 * not shrink, or another worker is compressing it right now).
 */
static bool
enc_copy(enum http_enc e, const char *key, size_t klen, const struct mc_got *g,
    struct store_ref *out)
{
	struct store *s = worker.store;
	char zkey[1 + 8 + MC_KEY_MAX], *z;
	enum store_result lr;
	struct store_ref l;
	size_t zlen = 0, n = 9 + klen;

	zkey[0] = encs[e].ns;
	memcpy(zkey + 1, &g->ref.cas, 8);
	memcpy(zkey + 9, key, klen);
	lr = store_lookup(s, zkey, n, &l);
	if (lr == STORE_HIT) {
		*out = l;
		if (l.len > 0)
			return true;
		store_release(s, out);	/* does not shrink */
		return false;
	}
	if (lr == STORE_STALE_LEASE || lr == STORE_STALE_WAIT)
		store_release(s, &l);
	if (lr != STORE_LEASE && lr != STORE_STALE_LEASE)
		return false;
	z = encs[e].compress(worker.cf, g->data, g->len, &zlen);
	if (z == NULL || zlen >= g->len)
		zlen = 0;
	if (store_set(s, zkey, n, z, zlen, g->ref.expires, 0) != STORE_OK)
		store_lease_release(s, zkey, n);
	free(z);
	return zlen > 0 && store_get(s, zkey, n, out) == STORE_HIT;
}

/* 200 with the copy z in encoding e (conditionals on its entity tag). */
static void
answer_enc(struct conn *c, enum http_enc e, const char *type, const char *date,
    const struct mc_got *g, struct store_ref *z)
{
	const struct http_request *r = conn_req(c);
	char etag[40];
	struct pin *pin;
	int elen;

	elen = snprintf(etag, sizeof(etag), "\"%" PRIx64 "-%s\"",
	    g->ref.cas, encs[e].suffix);
	if (http_conditional(r, etag, (size_t)elen, g->item->time) == 304) {
		store_release(worker.store, z);
		resp_status(c, 304);
		resp_headerf(c, "ETag: %s", etag);
		resp_headerf(c, "Last-Modified: %s", date);
		resp_header(c, VARY_LINE, sizeof(VARY_LINE) - 1);
		resp_end_headers(c, -1);
		resp_done(c, 304, 0);
		return;
	}
	resp_status(c, 200);
	resp_headerf(c, "Content-Type: %s", type);
	resp_headerf(c, "ETag: %s", etag);
	resp_headerf(c, "Last-Modified: %s", date);
	resp_header(c, encs[e].lines, strlen(encs[e].lines));
	resp_end_headers(c, (int64_t)z->len);
	if (resp_is_head(c) || (pin = pin_take(z)) == NULL) {
		store_release(worker.store, z);
	} else {
		resp_body_pin(c, pin, 0, z->len);
		pin_put(pin);
	}
	resp_done(c, 200, resp_is_head(c) ? 0 : z->len);
}

/*
 * Answers with the copy the client weighs highest (Accept-Encoding's
 * q-values, as files and cached responses), made once; one that does not
 * shrink lets the next best try.  False: the item itself goes out.
 */
static bool
answer_encoded(struct conn *c, const char *type, const char *date,
    const char *key, size_t klen, const struct mc_got *g, unsigned offer)
{
	struct span ae = http_header_get(conn_req(c), "Accept-Encoding");
	struct store_ref z;
	int pick;

	if (ae.p == NULL)
		return false;
	while (offer != 0 &&
	    (pick = http_encoding_pick(ae, http_enc_token, ENC_COUNT, offer)) >= 0) {
		if (enc_copy((enum http_enc)pick, key, klen, g, &z)) {
			answer_enc(c, (enum http_enc)pick, type, date, g, &z);
			return true;
		}
		offer &= ~(1u << pick);
	}
	return false;
}

static void
answer(struct conn *c, const struct config_location *l, const char *path,
    size_t plen, const char *key, size_t klen, struct mc_got *g)
{
	const struct http_request *r = conn_req(c);
	const char *type = mime_lookup(worker.rt->mime, path, plen);
	char lines[512], etag[32], date[HTTP_DATE_LEN + 1];
	bool gz = l->memcached_gzip_flag != 0 &&
	    (g->ref.flags & l->memcached_gzip_flag) != 0, vary;
	struct part part = { NULL, sizeof(struct mc_item) };
	struct resp_rep rep;
	unsigned offer = 0;
	int n, elen;

	if (type == NULL)
		type = l->default_type != NULL ? l->default_type :
		    worker.cf->default_type;
	http_date_format((time_t)g->item->time, date);
	/* Compressed once, for every worker, when the client takes it. */
	if (!gz && g->len >= worker.cf->gzip_min_length &&
	    gzip_type(worker.cf, type, strlen(type)))
		offer = (worker.cf->brotli ? 1u << ENC_BR : 0) |
		    (worker.cf->gzip ? 1u << ENC_GZIP : 0);
	vary = offer != 0;
	if (vary && r->range.p == NULL &&
	    answer_encoded(c, type, date, key, klen, g, offer))
		return;
	elen = snprintf(etag, sizeof(etag), "\"%" PRIx64 "\"", g->ref.cas);
	switch (http_conditional(r, etag, (size_t)elen, g->item->time)) {
	case 304:
		resp_status(c, 304);
		resp_headerf(c, "ETag: %s", etag);
		resp_headerf(c, "Last-Modified: %s", date);
		if (vary || gz)
			resp_header(c, VARY_LINE, sizeof(VARY_LINE) - 1);
		resp_end_headers(c, -1);
		resp_done(c, 304, 0);
		return;
	case 412:
		resp_error(c, 412);
		return;
	}
	n = snprintf(lines, sizeof(lines), "Content-Type: %s\r\nETag: %s\r\n"
	    "Last-Modified: %s\r\n%s%s", type, etag, date, gz ?
	    "Content-Encoding: gzip\r\n" : "", gz || vary ?
	    "Vary: Accept-Encoding\r\n" : "");
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
		.type = type, .tlen = strlen(type),
		.etag = etag, .etag_len = (size_t)elen,
		.mtime = g->item->time, .size = g->len,
		.max_ranges = worker.cf->max_ranges,
		.part = send_part, .arg = &part,
	};
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
	n = mc_http_request_key(c, l, r, path, (size_t)plen, key);
	if (n == 0 || worker.store == NULL ||
	    !mc_fetch(worker.store, key, n, &g)) {
		resp_error(c, 404);
		return;
	}
	answer(c, l, path, (size_t)plen, key, n, &g);
	if (g.ref.data != NULL)
		mc_release(worker.store, &g);
}

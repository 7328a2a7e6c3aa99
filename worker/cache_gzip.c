/*
 * The compressed copies of proxied responses, one per encoding (gzip
 * under its 'Z' key, brotli under its 'Q' key): made once, when a
 * response is stored, for every worker; renewed with it by a
 * revalidation; paired with it by the fill's nonce, so a copy is only
 * ever sent for the response it was made from.  The client's
 * Accept-Encoding q-values choose among them.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "master/config.h"
#include "worker/cache_impl.h"
#include "worker/conn.h"
#include "worker/gzip.h"
#include "worker/http_field.h"
#include "worker/http_response.h"

/* Each encoding's copy, in enum http_enc order. */
static const struct {
	uint32_t kept, copy;		/* CO_* of the response, of the copy */
	const char *ce;			/* its Content-Encoding line */
	const char *etag;		/* suffix of its entity tag */
	size_t (*key)(const char *, size_t, char *);
	char *(*compress)(const struct config *, const char *, size_t,
	    size_t *);
} encs[ENC_COUNT] = {
	[ENC_BR] = { CO_BR, CO_BRCOPY, "Content-Encoding: br\r\n", "-br",
	    qkey_of, brotli_bytes },
	[ENC_GZIP] = { CO_GZ, CO_GZCOPY, "Content-Encoding: gzip\r\n",
	    "-gz", zkey_of, gzip_bytes },
};


/*
 * Tells fills of one URL apart, whichever worker made them, so a gzip copy
 * is only ever paired with the response it was made from.
 */
uint64_t
fill_nonce(void)
{
	static struct {
		uint64_t pid, seq, ms;
	} n;

	if (n.pid == 0)
		n.pid = (uint64_t)getpid();
	n.seq++;
	n.ms = worker.now_ms;
	return XXH3_64bits(&n, sizeof(n));
}

/*
 * Whether to keep compressed copies too: a plain 200 of a gzip_types type
 * that varies on nothing (the origin's own Vary means it chooses
 * encodings) and allows transforming.
 */
bool
gz_wanted(const struct http_response *r, const struct http_cache_control *cc,
    size_t nvary)
{
	struct span t;
	size_t i = 0;

	if ((!worker.cf->gzip && !worker.cf->brotli) || nvary > 0 ||
	    r->status != 200 ||
	    cc->no_transform ||
	    http_response_header(r, "Content-Encoding", &i).p != NULL)
		return false;
	i = 0;
	t = http_response_header(r, "Content-Type", &i);
	return t.p != NULL && gzip_type(worker.cf, t.p, t.len);
}

/*
 * Stores copy e of the response in cbuf under its key: the same header
 * lines plus Content-Encoding, a validator of its own, the compressed
 * body.  False when it is not worth it or cannot be done.
 */
static bool
copy_store(struct cache_req *cr, enum http_enc e)
{
	const struct cache_obj *co = &cr->co;
	const char *etag = cr->cbuf + sizeof(*co), *ce = encs[e].ce;
	const char *lines = etag + co->etag_len, *body = lines + co->hlen;
	const char *p, *nl, *end = body, *colon;
	char z[STORE_KEY_MAX], *gz, *obj, *o;
	struct span name;
	size_t zlen, glen, elen = 0, celen = strlen(ce);
	struct cache_obj zco = *co;
	bool ok;

	if (co->blen < worker.cf->gzip_min_length ||
	    (zlen = encs[e].key(cr->okey, cr->oklen, z)) == 0 ||
	    (gz = encs[e].compress(worker.cf, body, co->blen, &glen)) ==
	    NULL)
		return false;
	if (glen >= co->blen) {
		free(gz);
		return false;
	}
	/* "x" becomes "x-gz" or "x-br" (W/ kept): another representation. */
	if (co->etag_len >= 2 && etag[co->etag_len - 1] == '"')
		elen = co->etag_len + 3;
	/* The lines but ETag, then the new ETag line and Content-Encoding. */
	if ((obj = malloc(sizeof(zco) + elen + co->hlen + 8 + elen +
	    celen + glen)) == NULL) {
		free(gz);
		return false;
	}
	o = obj + sizeof(zco);
	if (elen > 0) {
		memcpy(o, etag, co->etag_len - 1);
		memcpy(o + co->etag_len - 1, encs[e].etag, 3);
		o[co->etag_len + 2] = '"';
		o += elen;
	}
	for (p = lines; p < end; p = nl) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		/* Its own ETag below; digests were of the plain bytes. */
		if ((colon = memchr(p, ':', (size_t)(nl - p))) != NULL) {
			name.p = p;
			name.len = (size_t)(colon - p);
			if (http_field_flags(name) & HF_PLAIN_ONLY)
				continue;
		}
		memcpy(o, p, (size_t)(nl - p));
		o += nl - p;
	}
	if (elen > 0) {
		memcpy(o, "ETag: ", 6);
		memcpy(o + 6, obj + sizeof(zco), elen);
		memcpy(o + 6 + elen, "\r\n", 2);
		o += 6 + elen + 2;
	}
	memcpy(o, ce, celen);
	o += celen;
	zco.etag_len = (uint32_t)elen;
	zco.hlen = (uint32_t)(o - obj - sizeof(zco) - elen);
	zco.blen = glen;
	zco.flags = encs[e].copy;
	memcpy(obj, &zco, sizeof(zco));
	memcpy(o, gz, glen);
	o += glen;
	ok = store_set(worker.store, z, zlen, obj, (size_t)(o - obj),
	    cr->cttl, 0) == STORE_OK;
	free(obj);
	free(gz);
	return ok;
}

uint32_t
gz_store(struct cache_req *cr)
{
	uint32_t kept = 0;

	if (worker.cf->gzip && copy_store(cr, ENC_GZIP))
		kept |= CO_GZ;
	if (worker.cf->brotli && copy_store(cr, ENC_BR))
		kept |= CO_BR;
	return kept;
}

/* Gives copy e the fields and freshness its response got from r. */
static void
copy_renew(const struct cache_req *cr, const struct cache_obj *co,
    const struct http_response *r, enum http_enc e)
{
	char z[STORE_KEY_MAX], *copy;
	const char *lines;
	struct store_ref ref;
	struct cache_obj zco;
	size_t zlen, n;

	if ((zlen = encs[e].key(cr->okey, cr->oklen, z)) == 0 ||
	    store_get(worker.store, z, zlen, &ref) != STORE_HIT)
		return;
	if (!cobj_read(&ref, &zco) || zco.gen != co->gen ||
	    (copy = malloc(sizeof(zco) + zco.etag_len +
	    cp_freshen_size(zco.hlen, r) + zco.blen)) == NULL) {
		store_release(worker.store, &ref);
		return;
	}
	lines = (const char *)ref.data + sizeof(zco) + zco.etag_len;
	n = sizeof(zco);
	memcpy(copy + n, lines - zco.etag_len, zco.etag_len);
	n += zco.etag_len;
	zco.hlen = (uint32_t)cp_freshen(lines, zco.hlen, r, cache_not_merged,
	    copy + n);
	n += zco.hlen;
	memcpy(copy + n, (const char *)ref.data + ref.len - zco.blen,
	    zco.blen);
	n += zco.blen;
	store_release(worker.store, &ref);
	zco.date = co->date;
	zco.born = co->born;
	zco.lifetime = co->lifetime;
	zco.swr = co->swr;
	zco.sie = co->sie;
	zco.cpflags = co->cpflags;
	zco.mtime = co->mtime;
	memcpy(copy, &zco, sizeof(zco));
	store_set(worker.store, z, zlen, copy, n, store_ttl(cr, &zco), 0);
	free(copy);
}

/*
 * Gives the compressed copies the fields and freshness their response
 * just got from a 304 (r).
 */
void
gz_renew(const struct cache_req *cr, const struct cache_obj *co,
    const struct http_response *r)
{
	for (int e = 0; e < ENC_COUNT; e++)
		if (co->flags & encs[e].kept)
			copy_renew(cr, co, r, (enum http_enc)e);
}

/*
 * The best compressed copy of a response the client takes, when it is of
 * the same fill (a refresh renews them all): pinned into *zref, *zco.
 */
bool
gz_get(const struct cache_req *cr, const struct cache_obj *co,
    struct store_ref *zref, struct cache_obj *zco)
{
	char z[STORE_KEY_MAX];
	size_t zlen;
	int i, e;

	if (!(co->flags & CO_COPIES) || cr->range.p != NULL)
		return false;
	for (i = 0; i < 2 && (e = cr->enc_pick[i]) >= 0; i++) {
		if (!(co->flags & encs[e].kept) ||
		    (zlen = encs[e].key(cr->okey, cr->oklen, z)) == 0 ||
		    store_get(worker.store, z, zlen, zref) != STORE_HIT)
			continue;
		if (cobj_read(zref, zco) && zco->kind == CO_RESP &&
		    (zco->flags & encs[e].copy) && zco->gen == co->gen &&
		    zco->born == co->born && zco->lifetime == co->lifetime)
			return true;
		store_release(worker.store, zref);
	}
	return false;
}

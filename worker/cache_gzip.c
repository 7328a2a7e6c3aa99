/*
 * The gzip copies of proxied responses: made once, when a response is
 * stored, under its 'Z' key, for every worker; renewed with it by a
 * revalidation; paired with it by the fill's nonce, so a copy is only
 * ever sent for the response it was made from.
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
 * Whether to keep a gzip copy too: a plain 200 of a gzip_types type that
 * varies on nothing (the origin's own Vary means it chooses encodings)
 * and allows transforming.
 */
bool
gz_wanted(const struct http_response *r, const struct http_cache_control *cc,
    size_t nvary)
{
	struct span t;
	size_t i = 0;

	if (!worker.cf->gzip || nvary > 0 || r->status != 200 ||
	    cc->no_transform ||
	    http_response_header(r, "Content-Encoding", &i).p != NULL)
		return false;
	i = 0;
	t = http_response_header(r, "Content-Type", &i);
	return t.p != NULL && gzip_type(worker.cf, t.p, t.len);
}

/*
 * Stores the gzip copy of the response in cbuf under its 'Z' key: the
 * same header lines plus Content-Encoding, a validator of its own, the
 * compressed body.  False when it is not worth it or cannot be done.
 */
bool
gz_store(struct cache_req *cr)
{
	static const char ce[] = "Content-Encoding: gzip\r\n";
	const struct cache_obj *co = &cr->co;
	const char *etag = cr->cbuf + sizeof(*co);
	const char *lines = etag + co->etag_len, *body = lines + co->hlen;
	const char *p, *nl, *end = body, *colon;
	char z[STORE_KEY_MAX], *gz, *obj, *o;
	struct span name;
	size_t zlen, glen, elen = 0;
	struct cache_obj zco = *co;
	bool ok;

	if (co->blen < worker.cf->gzip_min_length ||
	    (zlen = zkey_of(cr->okey, cr->oklen, z)) == 0 ||
	    (gz = gzip_bytes(worker.cf, body, co->blen, &glen)) == NULL)
		return false;
	if (glen >= co->blen) {
		free(gz);
		return false;
	}
	/* "x" becomes "x-gz" (W/ kept): another representation. */
	if (co->etag_len >= 2 && etag[co->etag_len - 1] == '"')
		elen = co->etag_len + 3;
	/* The lines but ETag, then the new ETag line and Content-Encoding. */
	if ((obj = malloc(sizeof(zco) + elen + co->hlen + 8 + elen +
	    sizeof(ce) + glen)) == NULL) {
		free(gz);
		return false;
	}
	o = obj + sizeof(zco);
	if (elen > 0) {
		memcpy(o, etag, co->etag_len - 1);
		memcpy(o + co->etag_len - 1, "-gz\"", 4);
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
	memcpy(o, ce, sizeof(ce) - 1);
	o += sizeof(ce) - 1;
	zco.etag_len = (uint32_t)elen;
	zco.hlen = (uint32_t)(o - obj - sizeof(zco) - elen);
	zco.blen = glen;
	zco.flags = CO_GZCOPY;
	memcpy(obj, &zco, sizeof(zco));
	memcpy(o, gz, glen);
	o += glen;
	ok = store_set(worker.store, z, zlen, obj, (size_t)(o - obj),
	    cr->cttl, 0) == STORE_OK;
	free(obj);
	free(gz);
	return ok;
}

/*
 * Gives the gzip copy the fields and freshness its response just got from
 * a 304 (r).
 */
void
gz_renew(const struct cache_req *cr, const struct cache_obj *co,
    const struct http_response *r)
{
	char z[STORE_KEY_MAX], *copy;
	const char *lines;
	struct store_ref ref;
	struct cache_obj zco;
	size_t zlen, n;

	if ((zlen = zkey_of(cr->okey, cr->oklen, z)) == 0 ||
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
 * The gzip copy of a response, when the client takes it and the copy is
 * of the same fill (a refresh renews both): pinned into *zref, *zco.
 */
bool
gz_get(const struct cache_req *cr, const struct cache_obj *co,
    struct store_ref *zref, struct cache_obj *zco)
{
	char z[STORE_KEY_MAX];
	size_t zlen;

	if (!(co->flags & CO_GZ) || !cr->accept_gzip || cr->range.p != NULL ||
	    (zlen = zkey_of(cr->okey, cr->oklen, z)) == 0 ||
	    store_get(worker.store, z, zlen, zref) != STORE_HIT)
		return false;
	if (cobj_read(zref, zco) && zco->kind == CO_RESP &&
	    (zco->flags & CO_GZCOPY) && zco->gen == co->gen &&
	    zco->born == co->born && zco->lifetime == co->lifetime)
		return true;
	store_release(worker.store, zref);
	return false;
}

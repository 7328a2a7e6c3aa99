/*
 * Compressed answers for static files, in the encoding the client weighs
 * highest (Accept-Encoding with q-values; brotli first on a tie):
 *
 * - gzip_static: file.br or file.gz next to file, when it is not older
 *   than file; it is sent as it is, with file's type.
 * - otherwise corral's own copies, made once into the shared store for all
 *   workers under the file's 'B' (brotli) and 'G' (gzip) keys: the
 *   store's lease picks one compressor, and a request that finds another
 *   one at work is answered uncompressed meanwhile.  A file that does not
 *   shrink is stored as an empty value and never sent compressed.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/store.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/gzip.h"
#include "worker/resp.h"
#include "worker/static.h"
#include "worker/static_impl.h"

#define cur static_cur

static const char *const enc_suffix[ENC_COUNT] = {
	[ENC_BR] = ".br", [ENC_GZIP] = ".gz",
};

static char *
compress_enc(enum http_enc e, const char *p, size_t len, size_t *outlen)
{
	return e == ENC_GZIP ? gzip_bytes(worker.cf, p, len, outlen) :
	    brotli_bytes(worker.cf, p, len, outlen);
}

/* Makes the copy of fe in encoding e, unless another worker is at it. */
static void
enc_fill(struct fentry *fe, enum http_enc e)
{
	struct store *s = worker.store;
	struct store_ref src, l;
	enum store_result lr, sr;
	char *z = NULL;
	size_t zlen = 0, body;

	lr = store_lookup(s, fe->ekey[e], fe->skeylen, &l);
	if (lr == STORE_HIT || lr == STORE_STALE_LEASE ||
	    lr == STORE_STALE_WAIT)
		store_release(s, &l);
	if (lr != STORE_LEASE && lr != STORE_STALE_LEASE)
		return;
	if (static_get_shared(fe, &src, &body)) {
		z = compress_enc(e, (const char *)src.data + body,
		    (size_t)fe->size, &zlen);
		store_release(s, &src);
	}
	if (z == NULL) {
		store_lease_release(s, fe->ekey[e], fe->skeylen);
		return;
	}
	if (zlen >= (size_t)fe->size)
		sr = cache_nothing_set(s, fe->ekey[e], fe->skeylen);
	else
		sr = cache_body_set(s, fe->ekey[e], fe->skeylen, z, zlen);
	if (sr != STORE_OK)
		store_lease_release(s, fe->ekey[e], fe->skeylen);
	free(z);
}

/* The headers of a 304 for a copy: validators and Vary, without
 * Content-Type and Content-Encoding, which would relabel the client's. */
static void
not_modified(struct conn *c, const char *hdr, size_t len, enum http_enc e)
{
	const char *nl = strchr(hdr, '\n') + 1;

	resp_status(c, 304);
	resp_header(c, nl, len - strlen(http_enc_field[e]) - (size_t)(nl - hdr));
	resp_header(c, cur.extra, cur.elen);
	resp_end_headers(c, -1);
	resp_done(c, 304, 0);
}

/* Answers with corral's copy in encoding e; false to answer otherwise. */
static bool
serve_copy(struct conn *c, struct fentry *fe, enum http_enc e)
{
	const struct http_request *r = conn_req(c);
	struct store_ref ref;
	struct pin *pin;
	size_t off, len;

	if (fe->ekey[e] == NULL)
		return false;
	if (store_get(worker.store, fe->ekey[e], fe->skeylen, &ref) !=
	    STORE_HIT) {
		enc_fill(fe, e);
		if (store_get(worker.store, fe->ekey[e], fe->skeylen, &ref) !=
		    STORE_HIT)
			return false;
	}
	if (cache_body_of(&ref, &off, &len) != 1) {
		store_release(worker.store, &ref);	/* does not shrink */
		return false;
	}
	switch (http_conditional(r, fe->eetag[e], fe->eetag_len[e],
	    fe->mtime)) {
	case 304:
		store_release(worker.store, &ref);
		not_modified(c, fe->ehdr[e], fe->ehdr_len[e], e);
		return true;
	case 412:
		store_release(worker.store, &ref);
		resp_error(c, 412);
		return true;
	}
	resp_status(c, 200);
	resp_header(c, fe->ehdr[e], fe->ehdr_len[e]);
	resp_header(c, cur.extra, cur.elen);
	resp_end_headers(c, (int64_t)len);
	if (resp_is_head(c)) {
		store_release(worker.store, &ref);
	} else if ((pin = pin_take(&ref)) != NULL) {
		resp_body_pin(c, pin, off, len);
		pin_put(pin);
	} else {
		resp_body_copy(c, (const char *)ref.data + off, len);
		store_release(worker.store, &ref);
	}
	resp_done(c, 200, resp_is_head(c) ? 0 : len);
	return true;
}

/* file.br or file.gz, if it is a file not older than fe's. */
static struct fentry *
sibling(const struct fentry *fe, enum http_enc e)
{
	char path[PATH_MAX];
	struct fentry *z;
	int n;

	n = snprintf(path, sizeof(path), "%.*s%s", (int)fe->keylen, fe->key,
	    enc_suffix[e]);
	if (n < 0 || (size_t)n >= sizeof(path))
		return NULL;
	z = static_lookup(fe->srv, path, (size_t)n);
	if (z == NULL)
		return NULL;
	if (z->err != 0 || z->is_dir || z->mtime < fe->mtime) {
		fentry_release(z);
		return NULL;
	}
	return z;
}

/* Sends gzip_static's file z for fe, in encoding e. */
static void
serve_sibling(struct conn *c, struct fentry *fe, struct fentry *z,
    enum http_enc e)
{
	const struct http_request *r = conn_req(c);
	char hdr[1024], lm[HTTP_DATE_LEN + 1];
	int n;

	http_date_format(z->mtime, lm);
	n = snprintf(hdr, sizeof(hdr), "Content-Type: %s\r\nLast-Modified: "
	    "%s\r\nETag: %s\r\nVary: Accept-Encoding\r\n%s", fe->type, lm,
	    z->etag, http_enc_field[e]);
	if (n < 0 || (size_t)n >= sizeof(hdr)) {
		resp_error(c, 500);
		return;
	}
	switch (http_conditional(r, z->etag, z->etag_len, z->mtime)) {
	case 304:
		not_modified(c, hdr, (size_t)n, e);
		return;
	case 412:
		resp_error(c, 412);
		return;
	}
	resp_status(c, 200);
	resp_header(c, hdr, (size_t)n);
	resp_header(c, cur.extra, cur.elen);
	resp_end_headers(c, z->size);
	if (!resp_is_head(c))
		static_send_body(c, z, 0, z->size);
	resp_done(c, 200, resp_is_head(c) ? 0 : (uint64_t)z->size);
}

static bool
serve_static_file(struct conn *c, struct fentry *fe, struct span ae)
{
	struct fentry *z[ENC_COUNT] = { NULL };
	unsigned offer = 0;
	int e, pick;

	for (e = 0; e < ENC_COUNT; e++)
		if ((z[e] = sibling(fe, (enum http_enc)e)) != NULL)
			offer |= 1u << e;
	pick = offer ? http_encoding_pick(ae, http_enc_token, ENC_COUNT, offer) :
	    -1;
	if (pick >= 0)
		serve_sibling(c, fe, z[pick], (enum http_enc)pick);
	for (e = 0; e < ENC_COUNT; e++)
		if (z[e] != NULL)
			fentry_release(z[e]);
	return pick >= 0;
}

bool
static_serve_encoded(struct conn *c, struct fentry *fe)
{
	unsigned offer = fe->encs;
	struct span ae;
	int pick;

	ae = http_header_get(conn_req(c), "Accept-Encoding");
	if (ae.p == NULL)
		return false;
	if (cur.loc != NULL && cur.loc->gzip_static &&
	    serve_static_file(c, fe, ae))
		return true;
	/* The best accepted copy; one that does not shrink lets the next
	 * best try. */
	while (offer != 0 &&
	    (pick = http_encoding_pick(ae, http_enc_token, ENC_COUNT, offer)) >= 0) {
		if (serve_copy(c, fe, (enum http_enc)pick))
			return true;
		offer &= ~(1u << pick);
	}
	return false;
}

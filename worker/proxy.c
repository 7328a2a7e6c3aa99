/*
 * The reverse proxy.
 *
 * Each worker keeps, per upstream group, its peers' round-robin state and
 * failure counts and a LIFO pool of idle keep-alive connections.  A proxied
 * request builds its upstream request header once, then streams the
 * client's body behind it; the response header is checked and rewritten,
 * and the body is relayed with its framing as is (or decoded for HTTP/1.0
 * clients).  Nothing is buffered whole: the client is not read while the
 * upstream cannot take more, and the upstream is not read while the
 * client's output holds more than PX_OUT_HIGH.
 *
 * Timeouts ride on the events: with EV_PERSIST a timeout is restarted by
 * each activation, which is "between two reads" (or writes).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <xxhash.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/store.h"
#include "worker/conn.h"
#include "worker/resp.h"
#include "worker/gzip.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"
#include "worker/proxy.h"
#include "worker/status.h"
#include "worker/upstream.h"

#define PX_RBUF		(32 * 1024)	/* upstream reads, and a header that
					   fits (grown up to max_header_size) */
#define PX_WBUF		4096
#define PX_WBUF_HIGH	(64 * 1024)	/* request bytes waiting to be sent */
#define PX_OUT_HIGH	(256 * 1024)	/* response bytes waiting for the
					   client */
#define PX_LOGBUF	2048

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

enum px_state { PX_WAIT, PX_CONNECT, PX_HEADER, PX_BODY };

/* What X-Cache says. */
enum xc { XC_NONE, XC_HIT, XC_MISS, XC_STALE, XC_UPDATING, XC_EXPIRED,
	XC_BYPASS };

/*
 * The header of a stored object.  A response is followed by its entity
 * tag, its header lines and its (decoded) body; a Vary spec by the field
 * names it lists.
 */
struct cobj {
	uint32_t magic;
	uint16_t kind;			/* CO_* */
	uint16_t status;
	int64_t born;			/* when its Age was 0 */
	int64_t fresh_until;		/* INT64_MAX: never stale */
	int64_t mtime;			/* Last-Modified, -1: none */
	uint64_t gen;			/* CO_VARY: names its variants */
	uint32_t etag_len;
	uint32_t hlen;			/* header lines, or the Vary names */
	uint64_t blen;
	uint32_t flags;			/* CO_GZ */
	uint32_t spare;
};

#define CO_MAGIC	0x63727270u
#define CO_GZ		1		/* a gzip copy is kept under 'Z' key */
#define CO_GZCOPY	2		/* this is such a copy */
#define CO_RESP		1
#define CO_PASS		2		/* hit-for-pass marker */
#define CO_VARY		3
#define CO_ETAG_MAX	128
#define CO_COND_MAX	1024

struct proxy {
	struct conn *c;
	struct upstream *up;
	struct upstream_peer *peer;
	int fd;
	enum px_state state;
	bool reused;			/* the connection came from the pool */
	bool retried;
	bool idempotent;
	bool has_body;
	bool chunked;			/* the request body, to the upstream */
	bool body_done;			/* all of it was handed over */
	bool replayable;		/* wbuf still holds the whole request */
	bool got_bytes;			/* the upstream answered something */
	bool write_shut;		/* the upstream stopped taking bytes */
	bool paused;			/* not reading: the client is behind */
	int cerr;			/* connect() failed at once */
	int status;
	uint64_t sent;			/* body bytes to the client */

	struct event rev, wev;

	char *wbuf;
	size_t wsize, wlen, wpos;
	char *rbuf;
	size_t rsize, rlen, scan;

	struct http_response resp;
	struct http_body body;

	struct http_header loghdrs[2];
	char logbuf[PX_LOGBUF];
	struct proxy *next;		/* free list */

	/* The cache: see "The cache" below. */
	const struct config_location *loc;
	int method;
	uint8_t xc;			/* enum xc */
	bool cached;			/* looked up in the cache */
	bool fill;			/* the response may be stored */
	bool head_get;			/* a HEAD fetched as GET, to fill */
	bool gz;			/* a gzip copy is made at commit */
	bool accept_gzip;		/* gzip on, and the client takes it */
	bool lease;			/* this request fills the key */
	bool stale;			/* a stale copy is there */
	bool reval;			/* ask the upstream if it changed */
	bool storing;			/* copying the body into cbuf */
	bool waiting;			/* in the list of waiters */
	bool built;			/* wbuf holds the request header */
	unsigned wake_gen;
	struct proxy *wprev, *wnext;
	char *cbuf;			/* object being stored */
	size_t clen, csize;
	int64_t cttl;
	struct http_body cbody;		/* decodes a chunked copy */
	struct cobj co;
	char etag[CO_ETAG_MAX];		/* validators of the stale copy */
	size_t etag_len;
	int64_t mtime;
	char cond[CO_COND_MAX];		/* the client's preconditions */
	struct span inm, ims, range, if_range;
	size_t klen, oklen, lklen;
	char *okey;			/* key of the object: key or vkey */
	char key[STORE_KEY_MAX];	/* the URL */
	char vkey[STORE_KEY_MAX];	/* a variant of it */
	char lkey[STORE_KEY_MAX];	/* the lease */
};

static struct proxy *free_px;
static struct proxy *waiters;
static unsigned wake_gen;

static void px_read_cb(evutil_socket_t, short, void *);
static void px_write_cb(evutil_socket_t, short, void *);
static void cache_end(struct proxy *);
static uint64_t fill_nonce(void);
static bool gz_wanted(const struct http_response *,
    const struct http_cache_control *, size_t);
static void gz_renew(const struct proxy *, const struct cobj *);
static bool cache_cond_header(struct span);
static bool cache_intercept(struct proxy *, size_t);

static const char *const idempotent[] = {
	"GET", "HEAD", "OPTIONS", "PUT", "DELETE", NULL
};

/* Request fields never forwarded besides the hop-by-hop ones. */
static const char *const req_drop[] = {
	"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
	"Content-Length", "Expect", NULL
};

/* Response fields corral states itself. */
static const char *const resp_drop[] = {
	"Server", "Date", "Content-Length", NULL
};

static bool
name_in(struct span name, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strlen(*list) == name.len &&
		    strncasecmp(*list, name.p, name.len) == 0)
			return true;
	return false;
}

/* Buffers ----------------------------------------------------------- */

/* Appends to a growable buffer, doubling it (from 4 KiB) as needed. */
static bool
buf_append(char **buf, size_t *size, size_t *len, const void *p, size_t n)
{
	size_t want = *size ? *size : 4096;
	char *b;

	if (n == 0)
		return true;
	while (*len + n > want)
		want *= 2;
	if (want != *size) {
		if ((b = realloc(*buf, want)) == NULL)
			return false;
		*buf = b;
		*size = want;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	return true;
}

static bool
wbuf_add(struct proxy *px, const void *p, size_t len)
{
	return buf_append(&px->wbuf, &px->wsize, &px->wlen, p, len);
}

static bool
wbuf_span(struct proxy *px, struct span s)
{
	return wbuf_add(px, s.p, s.len);
}

static bool
wbuf_str(struct proxy *px, const char *s)
{
	return wbuf_add(px, s, strlen(s));
}

static struct proxy *
px_alloc(void)
{
	struct proxy *px = free_px;

	if (px != NULL) {
		free_px = px->next;
		return px;
	}
	if ((px = calloc(1, sizeof(*px))) == NULL)
		return NULL;
	px->wbuf = malloc(PX_WBUF);
	px->rbuf = malloc(PX_RBUF);
	if (px->wbuf == NULL || px->rbuf == NULL) {
		free(px->wbuf);
		free(px->rbuf);
		free(px);
		return NULL;
	}
	px->wsize = PX_WBUF;
	px->rsize = PX_RBUF;
	return px;
}

/* Closes the upstream connection, or pools it when reusable. */
static void
px_detach(struct proxy *px, bool reuse)
{
	if (px->fd == -1)
		return;
	event_del(&px->rev);
	event_del(&px->wev);
	if (reuse)
		upstream_pool_put(px->up, px->peer, px->fd);
	else
		close(px->fd);
	px->fd = -1;
}

static void
px_release(struct proxy *px, bool reuse)
{
	cache_end(px);
	px_detach(px, reuse);
	if (px->rsize > PX_RBUF) {
		/* A large header grew it; do not keep that around. */
		char *n = realloc(px->rbuf, PX_RBUF);

		if (n != NULL) {
			px->rbuf = n;
			px->rsize = PX_RBUF;
		}
	}
	px->c = NULL;
	px->next = free_px;
	free_px = px;
}

/* The request ------------------------------------------------------- */

static bool
build_request(struct proxy *px, const struct http_request *r)
{
	const struct http_header *h;
	struct span host = http_header_get(r, "Host");
	char line[96];
	bool ok;

	ok = (px->head_get ? wbuf_str(px, "GET") :
	    wbuf_span(px, r->method_name)) && wbuf_str(px, " ");
	if (r->absolute_form) {
		ok = ok && (r->path.len > 0 ? wbuf_span(px, r->path) :
		    wbuf_str(px, "/"));
		if (r->query.p != NULL)
			ok = ok && wbuf_str(px, "?") && wbuf_span(px, r->query);
	} else {
		ok = ok && wbuf_span(px, r->target);
	}
	ok = ok && wbuf_str(px, " HTTP/1.1\r\n");
	for (h = r->headers; ok && h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    name_in(h->name, req_drop) ||
		    (px->cached && px->fill && cache_cond_header(h->name)))
			continue;
		ok = wbuf_span(px, h->name) && wbuf_str(px, ": ") &&
		    wbuf_span(px, h->value) && wbuf_str(px, "\r\n");
	}
	if (host.p == NULL) {
		/* HTTP/1.0 without Host: the upstream needs one. */
		ok = ok && wbuf_str(px, "Host: ") && (r->host.p != NULL ?
		    wbuf_span(px, r->host) :
		    wbuf_str(px, upstream_peer_host(px->peer))) &&
		    wbuf_str(px, "\r\n");
	}
	ok = ok && wbuf_str(px, "X-Forwarded-For: ") &&
	    wbuf_str(px, conn_peer(px->c)) &&
	    wbuf_str(px, "\r\nX-Forwarded-Proto: http\r\n");
	if (host.p != NULL)
		ok = ok && wbuf_str(px, "X-Forwarded-Host: ") &&
		    wbuf_span(px, host) && wbuf_str(px, "\r\n");
	if (r->chunked)
		ok = ok && wbuf_str(px, "Transfer-Encoding: chunked\r\n");
	else if (r->content_length >= 0) {
		snprintf(line, sizeof(line), "Content-Length: %lld\r\n",
		    (long long)r->content_length);
		ok = ok && wbuf_str(px, line);
	}
	return ok && wbuf_str(px, "\r\n");
}

/* Connecting -------------------------------------------------------- */

static void
px_events(struct proxy *px)
{
	event_assign(&px->rev, worker.base, px->fd, EV_READ | EV_PERSIST,
	    px_read_cb, px);
	event_assign(&px->wev, worker.base, px->fd, EV_WRITE | EV_PERSIST,
	    px_write_cb, px);
}

static void
ms_tv(struct timeval *tv, int ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

static void
px_want_write(struct proxy *px)
{
	struct timeval tv;

	ms_tv(&tv, px->state == PX_CONNECT ? upstream_config(px->up)->connect_timeout_ms :
	    upstream_config(px->up)->send_timeout_ms);
	event_add(&px->wev, &tv);
}

/* Reads; the read timeout runs once the whole request is sent. */
static void
px_want_read(struct proxy *px)
{
	struct timeval tv;
	bool sent = px->body_done && px->wpos == px->wlen;

	if (px->paused || px->state == PX_CONNECT || px->fd == -1)
		return;
	ms_tv(&tv, upstream_config(px->up)->read_timeout_ms);
	event_add(&px->rev, sent ? &tv : NULL);
}

/* Starts a fresh connection; false when there is no socket. */
static bool
px_connect(struct proxy *px)
{
	px->state = PX_CONNECT;
	px->reused = false;
	px->fd = upstream_connect(px->peer, &px->cerr);
	if (px->fd == -1) {
		log_at(L_ERROR, errno, "upstream %s: socket",
		    upstream_peer_name(px->peer));
		return false;
	}
	px_events(px);
	px_want_write(px);
	return true;
}

/* A pooled connection to the chosen peer, or a new one. */
static bool
px_begin(struct proxy *px)
{
	px->fd = upstream_pool_get(px->up, px->peer);
	if (px->fd == -1)
		return px_connect(px);
	px->reused = true;
	px->state = PX_HEADER;
	px_events(px);
	px_want_write(px);
	px_want_read(px);
	return true;
}

/* The cache ---------------------------------------------------------- */

/*
 * Responses of a location with "cache" are kept in the shared store under
 * the normalised URL.  A key holds a response, a hit-for-pass marker, or
 * a Vary spec whose generation and field names lead to the variants.
 * Objects stay in the store cache_grace seconds past their freshness, which
 * the object header tracks, so a stale copy can be revalidated or served
 * when the upstream fails.  Refills are serialised by store leases on an
 * auxiliary key, never stored ("L" or "W" + the object key), as the store
 * only leases keys that are missing: other requests wait on the store's
 * wake fd, in any worker, and look again when it fires.
 */

enum lk { LK_ANSWERED, LK_FETCH, LK_WAIT };

#define XC_LINE(v)	{ "X-Cache: " v "\r\n", sizeof("X-Cache: " v "\r\n") - 1 }
static const struct {
	const char *p;
	size_t len;
} xc_line[] = {
	{ "", 0 }, XC_LINE("HIT"), XC_LINE("MISS"), XC_LINE("STALE"),
	XC_LINE("UPDATING"), XC_LINE("EXPIRED"), XC_LINE("BYPASS")
};
#undef XC_LINE

/* Request fields a fill does not forward: the cache answers them. */
static const char *const cond_fields[] = {
	"If-None-Match", "If-Modified-Since", "If-Match",
	"If-Unmodified-Since", "If-Range", "Range", NULL
};

/* Response fields not stored: corral states them on each answer. */
static const char *const store_drop[] = {
	"Server", "Date", "Content-Length", "Age", "X-Cache", NULL
};

/* Statuses stored without explicit freshness (RFC 9110 15.1). */
static const int heuristic_ok[] = {
	200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501
};

static void px_fail(struct proxy *, int, bool, const char *, ...)
    __attribute__((format(printf, 4, 5)));
static bool px_begin(struct proxy *);

static bool
cache_cond_header(struct span name)
{
	return name_in(name, cond_fields);
}

static bool
cache_on(const struct proxy *px)
{
	return px->loc != NULL && px->loc->cache && worker.store != NULL;
}

static void
key_add(char *key, size_t *len, const void *p, size_t n, bool *ok)
{
	if (!*ok || *len + n > STORE_KEY_MAX) {
		*ok = false;
		return;
	}
	memcpy(key + *len, p, n);
	*len += n;
}

/* "P" host NUL path NUL query: one URL, however it was spelt. */
static bool
cache_key(struct proxy *px)
{
	const struct http_request *r = conn_req(px->c);
	char path[PATH_MAX], host[256];
	ssize_t len;
	size_t i, n = 0;
	bool ok = true;
	int status;

	if (r->host.len >= sizeof(host))
		return false;
	for (i = 0; i < r->host.len; i++)
		host[i] = (char)tolower((unsigned char)r->host.p[i]);
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0)
		return false;
	key_add(px->key, &n, "P", 1, &ok);
	key_add(px->key, &n, host, r->host.len, &ok);
	key_add(px->key, &n, "", 1, &ok);
	key_add(px->key, &n, path, (size_t)len, &ok);
	key_add(px->key, &n, "", 1, &ok);
	if (r->query.p != NULL)
		key_add(px->key, &n, r->query.p, r->query.len, &ok);
	px->klen = n;
	px->okey = px->key;
	px->oklen = n;
	return ok;
}

/* A request field by name, from the input or, later, from wbuf. */
static struct span
req_field(const struct proxy *px, const char *name)
{
	struct span none = { NULL, 0 }, v;
	size_t nlen = strlen(name);
	const char *p, *end, *eol;

	if (!px->built)
		return http_header_get(conn_req(px->c), name);
	p = memchr(px->wbuf, '\n', px->wlen);
	end = px->wbuf + px->wlen;
	while (p != NULL && ++p < end && *p != '\r') {
		eol = memchr(p, '\r', (size_t)(end - p));
		if (eol == NULL)
			break;
		if ((size_t)(eol - p) > nlen && p[nlen] == ':' &&
		    strncasecmp(p, name, nlen) == 0) {
			v.p = p + nlen + 1;
			while (v.p < eol && *v.p == ' ')
				v.p++;
			v.len = (size_t)(eol - v.p);
			return v;
		}
		p = memchr(eol, '\n', (size_t)(end - eol));
	}
	return none;
}

/*
 * The variant key: "V" gen, the URL, then each field Vary names with the
 * request's value; Accept-Encoding counts only as gzip or identity.
 */
static bool
variant_key(struct proxy *px, uint64_t gen, const char *names, size_t len)
{
	char g[24], name[64];
	const char *p = names, *end = names + len, *comma;
	struct span v;
	size_t n = 0, nl;
	bool ok = true;

	snprintf(g, sizeof(g), "V%016llx", (unsigned long long)gen);
	key_add(px->vkey, &n, g, strlen(g), &ok);
	key_add(px->vkey, &n, px->key + 1, px->klen - 1, &ok);
	while (ok && p < end) {
		comma = memchr(p, ',', (size_t)(end - p));
		nl = (size_t)((comma ? comma : end) - p);
		if (nl == 0 || nl >= sizeof(name))
			return false;
		memcpy(name, p, nl);
		name[nl] = '\0';
		v = req_field(px, name);
		key_add(px->vkey, &n, "\n", 1, &ok);
		key_add(px->vkey, &n, name, nl, &ok);
		key_add(px->vkey, &n, "=", 1, &ok);
		if (strcmp(name, "accept-encoding") == 0) {
			bool gz = v.p != NULL && memmem(v.p, v.len, "gzip",
			    4) != NULL;

			key_add(px->vkey, &n, gz ? "gzip" : "identity",
			    gz ? 4 : 8, &ok);
		} else if (v.p != NULL) {
			key_add(px->vkey, &n, v.p, v.len, &ok);
		}
		p += nl + 1;
	}
	px->okey = px->vkey;
	px->oklen = n;
	return ok;
}

/* Reads the object header of a pinned value; false when it is not ours. */
static bool
cobj_read(const struct store_ref *ref, struct cobj *co)
{
	if (ref->len < sizeof(*co))
		return false;
	memcpy(co, ref->data, sizeof(*co));
	return co->magic == CO_MAGIC &&
	    ref->len == sizeof(*co) + co->etag_len + co->hlen + co->blen;
}

enum obj { OBJ_NONE, OBJ_FOUND, OBJ_PASS };

/* The response stored for the request, following a Vary spec. */
static enum obj
obj_get(struct proxy *px, struct store_ref *ref, struct cobj *co)
{
	struct store *s = worker.store;
	bool ok;

	px->okey = px->key;
	px->oklen = px->klen;
	if (store_get(s, px->key, px->klen, ref) != STORE_HIT)
		return OBJ_NONE;
	if (!cobj_read(ref, co)) {
		store_release(s, ref);
		return OBJ_NONE;
	}
	if (co->kind == CO_PASS) {
		store_release(s, ref);
		return OBJ_PASS;
	}
	if (co->kind == CO_VARY) {
		ok = variant_key(px, co->gen, (const char *)ref->data +
		    sizeof(*co), co->hlen);
		store_release(s, ref);
		if (!ok)
			return OBJ_PASS;
		if (store_get(s, px->okey, px->oklen, ref) != STORE_HIT)
			return OBJ_NONE;
		if (!cobj_read(ref, co) || co->kind != CO_RESP) {
			store_release(s, ref);
			return OBJ_NONE;
		}
	}
	return OBJ_FOUND;
}

static bool
cobj_fresh(const struct cobj *co)
{
	return co->fresh_until == INT64_MAX || worker.now < co->fresh_until;
}

/* 304 when the client's preconditions match the stored validators. */
static bool
cache_not_modified(const struct proxy *px, const struct cobj *co,
    const char *etag)
{
	struct http_request rq;

	memset(&rq, 0, sizeof(rq));
	rq.method = HTTP_M_GET;
	if (px->inm.p != NULL) {
		if (co->etag_len == 0)
			return false;
		rq.if_none_match = px->inm;
	} else if (px->ims.p != NULL) {
		/* A date cannot tell the gzip copy from the plain one. */
		if (co->mtime < 0 || (co->flags & CO_GZCOPY))
			return false;
		rq.if_modified_since = px->ims;
	} else {
		return false;
	}
	return http_conditional(&rq, etag, co->etag_len,
	    (time_t)co->mtime) == 304;
}

/*
 * The fields a 304 from the cache repeats (RFC 9110 15.4.5): those that
 * guide cache updates, never representation metadata such as
 * Content-Encoding, which would relabel the copy the client holds.
 */
static const char *const not_modified_keep[] = {
	"ETag", "Vary", "Cache-Control", "Expires", "Content-Location",
	"Last-Modified", NULL
};

static void
lines_named(struct conn *c, const char *p, size_t len,
    const char *const *names)
{
	const char *end = p + len, *nl, *colon;
	struct span name;

	for (; p < end; p = nl) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		if ((colon = memchr(p, ':', (size_t)(nl - p))) == NULL)
			continue;
		name.p = p;
		name.len = (size_t)(colon - p);
		if (name_in(name, names))
			resp_header(c, p, (size_t)(nl - p));
	}
}

/* The key of a response's gzip copy: 'Z', then its own; 0: too long. */
static size_t
zkey_of(const char *key, size_t klen, char *z)
{
	if (klen + 1 > STORE_KEY_MAX)
		return 0;
	z[0] = 'Z';
	memcpy(z + 1, key, klen);
	return klen + 1;
}

/* Drops the URL's response and its gzip copy. */
static enum store_result
obj_delete(struct proxy *px)
{
	char z[STORE_KEY_MAX];
	size_t zlen = zkey_of(px->key, px->klen, z);

	if (zlen > 0)
		store_delete(worker.store, z, zlen);
	return store_delete(worker.store, px->key, px->klen);
}

/*
 * The gzip copy of a response, when the client takes it and the copy is
 * of the same fill (a refresh renews both): pinned into *zref, *zco.
 */
static bool
gz_get(const struct proxy *px, const struct cobj *co,
    struct store_ref *zref, struct cobj *zco)
{
	char z[STORE_KEY_MAX];
	size_t zlen;

	if (!(co->flags & CO_GZ) || !px->accept_gzip || px->range.p != NULL ||
	    (zlen = zkey_of(px->okey, px->oklen, z)) == 0 ||
	    store_get(worker.store, z, zlen, zref) != STORE_HIT)
		return false;
	if (cobj_read(zref, zco) && zco->kind == CO_RESP &&
	    (zco->flags & CO_GZCOPY) && zco->gen == co->gen &&
	    zco->born == co->born && zco->fresh_until == co->fresh_until)
		return true;
	store_release(worker.store, zref);
	return false;
}

/* The body of a cached answer: a pinned value, or its bytes to copy. */
struct hit_body {
	struct pin *pin;
	const char *data;		/* the body's first byte */
	size_t off;			/* and its offset in the value */
};

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
cache_range(struct proxy *px, const struct cobj *co, const char *etag,
    const char *lines, struct hit_body *b, const char *extra, size_t elen)
{
	struct http_request rq;
	struct span type;
	struct resp_rep rep;

	if (px->range.p == NULL || co->status != 200)
		return false;
	memset(&rq, 0, sizeof(rq));
	rq.method = resp_is_head(px->c) ? HTTP_M_HEAD : HTTP_M_GET;
	rq.range = px->range;
	rq.if_range = px->if_range;
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
	return resp_range(px->c, &rq, &rep);
}

static void cache_send(struct proxy *, struct store_ref *, const struct cobj *,
    enum xc);

/* Answers from a pinned object, whose pin it takes over. */
static void
cache_answer(struct proxy *px, struct store_ref *ref, const struct cobj *co,
    enum xc xc)
{
	struct store_ref zref;
	struct cobj zco;

	/* Compressed once, at the fill: send that copy to who takes it. */
	if (gz_get(px, co, &zref, &zco)) {
		store_release(worker.store, ref);
		ref = &zref;
		co = &zco;
	}
	cache_send(px, ref, co, xc);
}

/* Answers from a pinned object, whose pin it takes over. */
static void
cache_send(struct proxy *px, struct store_ref *ref, const struct cobj *co,
    enum xc xc)
{
	struct conn *c = px->c;
	const char *etag = (const char *)ref->data + sizeof(*co);
	const char *lines = etag + co->etag_len;
	size_t off = sizeof(*co) + co->etag_len + co->hlen;
	int64_t age = worker.now - co->born;
	bool x = px->loc->x_cache, body, ranged;
	struct hit_body b = { NULL, (const char *)ref->data + off, off };
	char extra[64];
	size_t elen;
	int status = co->status;

	/* Age and X-Cache, stated on each answer. */
	memcpy(extra, "Age: ", 5);
	elen = 5 + http_u64(extra + 5, (uint64_t)(age > 0 ? age : 0));
	memcpy(extra + elen, "\r\n", 2);
	elen += 2;
	if (x) {
		memcpy(extra + elen, xc_line[xc].p, xc_line[xc].len);
		elen += xc_line[xc].len;
	}
	if (cache_not_modified(px, co, etag))
		status = 304;
	body = status != 304 && status != 204;
	if (body && co->blen > 0)
		b.pin = pin_take(ref);
	ranged = body && cache_range(px, co, etag, lines, &b, extra, elen);
	if (!ranged) {
		resp_status(c, status);
		if (status == 304 && co->status != 304)
			lines_named(c, lines, co->hlen, not_modified_keep);
		else
			resp_header(c, lines, co->hlen);
		resp_header(c, extra, elen);
		resp_end_headers(c, body ? (int64_t)co->blen : -1);
		body = body && !resp_is_head(c) && co->blen > 0;
		if (body)
			hit_part(c, &b, 0, co->blen);
		resp_done(c, status, body ? co->blen : 0);
	}
	if (b.pin != NULL)
		pin_put(b.pin);
	else
		store_release(worker.store, ref);
}

/* Keeps the validators of a stale copy for a conditional refresh. */
static void
cache_note_stale(struct proxy *px, const struct store_ref *ref,
    const struct cobj *co)
{
	px->stale = true;
	px->etag_len = co->etag_len <= sizeof(px->etag) ? co->etag_len : 0;
	memcpy(px->etag, (const char *)ref->data + sizeof(*co),
	    px->etag_len);
	px->mtime = co->mtime;
}

static bool
cache_stale_ok(const struct proxy *px, unsigned bit)
{
	return px->stale && (px->loc->cache_stale & bit) != 0;
}

/* Serves the stale copy when there is one; false when there is none. */
static bool
cache_serve_stale(struct proxy *px, enum xc xc)
{
	struct store_ref ref;
	struct cobj co;

	if (obj_get(px, &ref, &co) != OBJ_FOUND)
		return false;
	cache_answer(px, &ref, &co, xc);
	return true;
}

/*
 * Looks the request up: answers it (fresh, or stale while another one
 * refreshes it), or says whether to fetch it (px->lease: and fill it) or
 * to wait for the one that does.
 */
static enum lk
cache_lookup(struct proxy *px)
{
	struct store *s = worker.store;
	struct store_ref ref, lref;
	enum store_result lr;
	struct cobj co;
	enum obj o;
	bool stale;

	px->stale = px->reval = false;
	o = obj_get(px, &ref, &co);
	if (o == OBJ_PASS) {
		px->xc = XC_BYPASS;
		px->fill = false;
		return LK_FETCH;
	}
	if (o == OBJ_FOUND && cobj_fresh(&co)) {
		cache_answer(px, &ref, &co, XC_HIT);
		return LK_ANSWERED;
	}
	stale = o == OBJ_FOUND;
	px->xc = stale ? XC_EXPIRED : XC_MISS;
	if (stale) {
		cache_note_stale(px, &ref, &co);
		store_release(s, &ref);
	}
	px->reval = stale && (px->etag_len > 0 || px->mtime >= 0);
	if (!px->fill || !px->loc->cache_lock)
		return LK_FETCH;
	px->lkey[0] = px->okey[0] == 'P' ? 'L' : 'W';
	memcpy(px->lkey + 1, px->okey + 1, px->oklen - 1);
	px->lklen = px->oklen;
	lr = store_lookup(s, px->lkey, px->lklen, &lref);
	if (lr == STORE_HIT || lr == STORE_STALE_LEASE ||
	    lr == STORE_STALE_WAIT)
		store_release(s, &lref);
	switch (lr) {
	case STORE_LEASE:
	case STORE_STALE_LEASE:
		px->lease = true;
		/* The last filler may have finished in between. */
		if (obj_get(px, &ref, &co) == OBJ_FOUND) {
			if (cobj_fresh(&co)) {
				store_lease_release(s, px->lkey, px->lklen);
				px->lease = false;
				cache_answer(px, &ref, &co, XC_HIT);
				return LK_ANSWERED;
			}
			store_release(s, &ref);
		}
		return LK_FETCH;
	case STORE_WAIT:
	case STORE_STALE_WAIT:
		if (cache_stale_ok(px, CACHE_STALE_UPDATING) &&
		    cache_serve_stale(px, XC_UPDATING))
			return LK_ANSWERED;
		return LK_WAIT;
	default:
		return LK_FETCH;	/* no lock to be had: fill anyway */
	}
}

/* Ends what the cache holds for px: its wait, its lease, its copy. */
static void
cache_end(struct proxy *px)
{
	if (px->waiting) {
		px->waiting = false;
		evtimer_del(&px->rev);
		if (px->wprev != NULL)
			px->wprev->wnext = px->wnext;
		else
			waiters = px->wnext;
		if (px->wnext != NULL)
			px->wnext->wprev = px->wprev;
	}
	if (px->lease) {
		px->lease = false;
		store_lease_release(worker.store, px->lkey, px->lklen);
	}
	free(px->cbuf);
	px->cbuf = NULL;
	px->csize = px->clen = 0;
	px->storing = false;
}

static void
px_answered_reuse(struct proxy *px, bool reuse)
{
	struct conn *c = px->c;

	px_release(px, reuse);
	conn_proxy_done(c);
}

static void
px_answered(struct proxy *px)
{
	px_answered_reuse(px, false);
}

/* Adds the stale copy's validators to the request: it may not change. */
static bool
add_validators(struct proxy *px)
{
	char date[HTTP_DATE_LEN + 1];
	bool ok = true;

	if (!px->reval)
		return true;
	px->wlen -= 2;			/* the blank line */
	if (px->etag_len > 0)
		ok = wbuf_str(px, "If-None-Match: ") &&
		    wbuf_add(px, px->etag, px->etag_len) &&
		    wbuf_str(px, "\r\n");
	if (ok && px->mtime >= 0) {
		http_date_format((time_t)px->mtime, date);
		ok = wbuf_str(px, "If-Modified-Since: ") &&
		    wbuf_str(px, date) && wbuf_str(px, "\r\n");
	}
	return ok && wbuf_str(px, "\r\n");
}

/* A waiter goes to the upstream itself. */
static void
px_go(struct proxy *px)
{
	if (!add_validators(px) || !px_begin(px))
		px_fail(px, 502, false, "cannot start the request");
}

static void
wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;

	worker_update_time();
	px->waiting = false;
	if (px->wprev != NULL)
		px->wprev->wnext = px->wnext;
	else
		waiters = px->wnext;
	if (px->wnext != NULL)
		px->wnext->wprev = px->wprev;
	log_info("client %s: cache lock timed out; fetching without it",
	    conn_peer(px->c));
	switch (cache_lookup(px)) {
	case LK_ANSWERED:
		px_answered(px);
		return;
	case LK_WAIT:
		/* Whoever holds the lease fills the entry. */
		px->fill = false;
		break;
	case LK_FETCH:
		break;
	}
	px_go(px);
}

static void
wait_add(struct proxy *px)
{
	struct timeval tv;

	px->state = PX_WAIT;
	px->waiting = true;
	px->wake_gen = wake_gen;
	px->wprev = NULL;
	px->wnext = waiters;
	if (waiters != NULL)
		waiters->wprev = px;
	waiters = px;
	evtimer_assign(&px->rev, worker.base, wait_timeout_cb, px);
	ms_tv(&tv, px->loc->cache_lock_timeout_ms);
	evtimer_add(&px->rev, &tv);
}

static void
wait_remove(struct proxy *px)
{
	bool lease = px->lease;

	px->lease = false;		/* cache_end must not drop it */
	cache_end(px);
	px->lease = lease;
}

void
proxy_wake(void)
{
	struct proxy *px;
	enum lk lk;

	wake_gen++;
	for (;;) {
		for (px = waiters; px != NULL && px->wake_gen == wake_gen;
		    px = px->wnext)
			;
		if (px == NULL)
			break;
		px->wake_gen = wake_gen;
		lk = cache_lookup(px);
		if (lk == LK_WAIT)
			continue;
		wait_remove(px);
		if (lk == LK_ANSWERED)
			px_answered(px);
		else
			px_go(px);
	}
}

static bool
peer_allowed(const struct proxy *px)
{
	const struct config_location *l = px->loc;
	const char *peer = conn_peer(px->c);
	size_t i;

	for (i = 0; i < l->npurge_allow; i++)
		if (strcmp(l->purge_allow[i], peer) == 0)
			return true;
	return false;
}

/* PURGE: drops the URL and with its Vary spec every variant. */
static void
cache_purge(struct proxy *px)
{
	struct conn *c = px->c;

	if (!peer_allowed(px) && !status_purge_ok(c)) {
		log_info("client %s: PURGE not allowed", conn_peer(c));
		resp_error(c, 403);
		return;
	}
	if (!cache_key(px) || obj_delete(px) != STORE_OK) {
		resp_error(c, 404);
		return;
	}
	resp_status(c, 200);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
}

static void
cond_keep(struct proxy *px, struct span from, struct span *to, size_t *n)
{
	to->p = NULL;
	to->len = 0;
	if (from.p == NULL || from.len > sizeof(px->cond) - *n)
		return;		/* too long to keep: as if absent */
	memcpy(px->cond + *n, from.p, from.len);
	to->p = px->cond + *n;
	to->len = from.len;
	*n += from.len;
}

/* Copies the client's preconditions and Range: the input buffer moves on. */
static void
save_cond(struct proxy *px)
{
	const struct http_request *r = conn_req(px->c);
	size_t n = 0;

	cond_keep(px, r->if_none_match, &px->inm, &n);
	/* If-None-Match overrides If-Modified-Since (RFC 9110 13.1.3): when
	 * it is too long to keep, neither may answer 304. */
	cond_keep(px, r->if_none_match.p == NULL ? r->if_modified_since :
	    (struct span){ NULL, 0 }, &px->ims, &n);
	cond_keep(px, r->if_range, &px->if_range, &n);
	cond_keep(px, r->range, &px->range, &n);
	/* A Range without its If-Range would be answered wrongly. */
	if (r->if_range.p != NULL && px->if_range.p == NULL)
		px->range.p = NULL;
	/* A client's no-transform (RFC 9111 5.2.1.6) keeps the plain copy. */
	px->accept_gzip = worker.cf->gzip &&
	    http_accepts_gzip(http_header_get(r, "Accept-Encoding")) &&
	    !http_connection_has_token(http_header_get(r, "Cache-Control"),
	    (struct span){ "no-transform", 12 });
}

/*
 * Decides what the cache does for a new request: LK_ANSWERED when it is
 * answered already, else whether to fetch or wait.
 */
static enum lk
cache_start(struct proxy *px)
{
	const struct http_request *r = conn_req(px->c);
	bool get = r->method == HTTP_M_GET || r->method == HTTP_M_HEAD;

	px->xc = XC_NONE;
	px->cached = px->fill = false;
	if (!cache_on(px))
		return LK_FETCH;
	px->xc = XC_BYPASS;
	if (r->method == HTTP_M_PURGE && r->content_length <= 0 &&
	    !r->chunked) {
		cache_purge(px);
		return LK_ANSWERED;
	}
	if (!cache_key(px)) {
		px->klen = 0;
		return LK_FETCH;
	}
	if (!get || r->content_length > 0 || r->chunked)
		return LK_FETCH;
	/* A HEAD miss fetches the GET, as nginx and Varnish do: it fills. */
	px->fill = true;
	if (http_header_get(r, "Authorization").p != NULL)
		return LK_FETCH;	/* stored if the response allows */
	px->cached = true;
	save_cond(px);
	return cache_lookup(px);
}

/* Storing -------------------------------------------------------------- */

/* Explicit freshness lifetime from the response, or -1 (RFC 9111 4.2.1). */
static int64_t
lifetime(const struct http_response *r, const struct http_cache_control *cc)
{
	time_t exp, date;

	if (cc->s_maxage >= 0)
		return cc->s_maxage;
	if (cc->max_age >= 0)
		return cc->max_age;
	if (r->expires.p == NULL)
		return -1;
	exp = http_date_parse(r->expires.p, r->expires.len);
	date = r->date.p != NULL ? http_date_parse(r->date.p, r->date.len) :
	    -1;
	if (date == -1)
		date = worker.now;
	return exp == -1 || exp <= date ? 0 : (int64_t)(exp - date);
}

static bool
status_storable(int status, bool explicit)
{
	size_t i;

	if (status == 206 || status == 304)
		return false;
	if (explicit)
		return true;
	for (i = 0; i < nitems(heuristic_ok); i++)
		if (heuristic_ok[i] == status)
			return true;
	return false;
}

/* The Vary field names, lower case, joined by commas; false for "*". */
static bool
vary_names(const struct http_response *r, char *out, size_t size,
    size_t *len)
{
	struct span v;
	size_t i = 0, n = 0, j;
	const char *p, *end, *t;

	*len = 0;
	while ((v = http_response_header(r, "Vary", &i)).p != NULL) {
		for (p = v.p, end = v.p + v.len; p < end; p = t + 1) {
			while (p < end && (*p == ' ' || *p == '\t' ||
			    *p == ','))
				p++;
			for (t = p; t < end && *t != ',' && *t != ' ' &&
			    *t != '\t'; t++)
				;
			if (t == p)
				break;
			if (t - p == 1 && *p == '*')
				return false;
			if (n + (size_t)(t - p) + 1 > size)
				return false;
			if (n > 0)
				out[n++] = ',';
			for (j = 0; j < (size_t)(t - p); j++)
				out[n++] = (char)tolower((unsigned char)p[j]);
		}
	}
	*len = n;
	return true;
}

/* The Vary spec of the URL with these names, made when it is new. */
static bool
vary_spec(struct proxy *px, const char *names, size_t len, int64_t ttl)
{
	static unsigned seq;
	struct store *s = worker.store;
	struct store_ref ref;
	struct cobj co;
	uint64_t gen = 0;
	char buf[sizeof(co) + 512];

	if (store_get(s, px->key, px->klen, &ref) == STORE_HIT) {
		if (cobj_read(&ref, &co) && co.kind == CO_VARY &&
		    co.hlen == len && memcmp((const char *)ref.data +
		    sizeof(co), names, len) == 0)
			gen = co.gen;
		store_release(s, &ref);
	}
	if (gen == 0) {
		/* A new generation: variants of an older spec are gone. */
		gen = ((uint64_t)worker.now_ms << 24) ^
		    ((uint64_t)getpid() << 8) ^ ++seq;
		memset(&co, 0, sizeof(co));
		co.magic = CO_MAGIC;
		co.kind = CO_VARY;
		co.gen = gen;
		co.hlen = (uint32_t)len;
		memcpy(buf, &co, sizeof(co));
		memcpy(buf + sizeof(co), names, len);
		if (store_set(s, px->key, px->klen, buf, sizeof(co) + len,
		    ttl, 0) != STORE_OK)
			return false;
	}
	return variant_key(px, gen, names, len);
}

static bool
cbuf_add(struct proxy *px, const void *p, size_t n)
{
	return buf_append(&px->cbuf, &px->csize, &px->clen, p, n);
}

/* The store's TTL: past freshness by cache_grace, absolute when far. */
static int64_t
store_ttl(const struct proxy *px, int64_t fresh_until)
{
	int64_t grace = px->loc->cache_grace, ttl;

	if (fresh_until == INT64_MAX)
		return 0;
	ttl = fresh_until + grace - worker.now;
	if (ttl < 1)
		ttl = 1;
	return ttl > STORE_TTL_RELATIVE_MAX ? fresh_until + grace : ttl;
}

static void
mark_pass(struct proxy *px)
{
	int64_t ttl = (px->loc->cache_pass_ttl_ms + 999) / 1000;
	struct cobj co;

	if (ttl <= 0 || !px->cached)
		return;
	memset(&co, 0, sizeof(co));
	co.magic = CO_MAGIC;
	co.kind = CO_PASS;
	store_set(worker.store, px->key, px->klen, &co, sizeof(co), ttl, 0);
}

/*
 * The response will not be stored: the URL goes hit-for-pass, and the
 * lease is let go now, so its waiters fetch for themselves at once rather
 * than after the whole body streamed by.
 */
static void
cache_pass(struct proxy *px)
{
	mark_pass(px);
	if (px->lease) {
		px->lease = false;
		store_lease_release(worker.store, px->lkey, px->lklen);
	}
}

static bool
store_fields(struct proxy *px, const struct http_response *r)
{
	const struct http_header *h;
	bool ok = true;

	for (h = r->headers; ok && h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    name_in(h->name, store_drop))
			continue;
		ok = cbuf_add(px, h->name.p, h->name.len) &&
		    cbuf_add(px, ": ", 2) &&
		    cbuf_add(px, h->value.p, h->value.len) &&
		    cbuf_add(px, "\r\n", 2);
	}
	return ok;
}

static bool
unsafe_method(int m)
{
	return m == HTTP_M_POST || m == HTTP_M_PUT || m == HTTP_M_DELETE ||
	    m == HTTP_M_PATCH;
}

/*
 * Called with the response header: invalidates the URL after an unsafe
 * method, else decides whether to store the response (and starts its
 * copy) or to mark the URL hit-for-pass.
 */
static void
cache_decide(struct proxy *px)
{
	const struct http_response *r = &px->resp;
	struct http_cache_control cc;
	struct cobj *co = &px->co;
	char names[512];
	size_t nlen;
	int64_t life, age = 0;
	bool explicit;

	px->gz = false;
	if (!cache_on(px) || px->klen == 0)
		return;
	if (unsafe_method(px->method)) {
		if (r->status >= 200 && r->status < 400)
			obj_delete(px);
		return;
	}
	if (!px->fill)
		return;
	http_response_cache_control(r, &cc);
	life = lifetime(r, &cc);
	explicit = life >= 0;
	if (!status_storable(r->status, explicit) || cc.no_store ||
	    cc.private_ || r->set_cookie.p != NULL ||
	    (!px->cached && !cc.public_ && cc.s_maxage < 0 &&
	    !cc.must_revalidate) ||
	    !vary_names(r, names, sizeof(names), &nlen)) {
		cache_pass(px);
		return;
	}
	if (r->framing == HTTP_BODY_LENGTH &&
	    (uint64_t)r->content_length > worker.cf->cache.max_object) {
		struct store_wref w;

		/* Counted by the store as too large; streamed only. */
		store_reserve(worker.store, px->okey, px->oklen,
		    (size_t)r->content_length, 1, 0, &w);
		cache_pass(px);
		return;
	}
	if (r->age.p != NULL)
		age = strtoll(r->age.p, NULL, 10);
	if (age < 0 || age > HTTP_DELTA_MAX)
		age = 0;
	if (!explicit)
		life = px->loc->cache_ttl;
	if (cc.no_cache)
		life = 0;
	memset(co, 0, sizeof(*co));
	co->magic = CO_MAGIC;
	co->kind = CO_RESP;
	co->status = (uint16_t)r->status;
	co->born = worker.now - age;
	co->fresh_until = !explicit && life == 0 && !cc.no_cache ?
	    INT64_MAX : co->born + life;
	co->mtime = r->last_modified.p != NULL ? http_date_parse(
	    r->last_modified.p, r->last_modified.len) : -1;
	if (r->etag.p != NULL && r->etag.len <= CO_ETAG_MAX)
		co->etag_len = (uint32_t)r->etag.len;
	px->cttl = store_ttl(px, co->fresh_until);
	if (nlen > 0 && !vary_spec(px, names, nlen, px->cttl))
		return;
	px->gz = gz_wanted(r, &cc, nlen);
	if (px->gz)
		co->gen = fill_nonce();
	px->clen = 0;
	if (!cbuf_add(px, co, sizeof(*co)) ||
	    !cbuf_add(px, r->etag.p, co->etag_len) ||
	    !store_fields(px, r) ||
	    (px->gz && !cbuf_add(px, "Vary: Accept-Encoding\r\n", 23))) {
		free(px->cbuf);
		px->cbuf = NULL;
		px->csize = 0;
		return;
	}
	co->hlen = (uint32_t)(px->clen - sizeof(*co) - co->etag_len);
	px->storing = true;
}

/*
 * Tells fills of one URL apart, whichever worker made them, so a gzip copy
 * is only ever paired with the response it was made from.
 */
static uint64_t
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
static bool
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
static bool
gz_store(struct proxy *px)
{
	static const char ce[] = "Content-Encoding: gzip\r\n";
	const struct cobj *co = &px->co;
	const char *etag = px->cbuf + sizeof(*co);
	const char *lines = etag + co->etag_len, *body = lines + co->hlen;
	static const char *const gz_drop[] = {
		"ETag", "Content-MD5", "Digest", "Content-Digest",
		"Repr-Digest", NULL
	};
	const char *p, *nl, *end = body, *colon;
	char z[STORE_KEY_MAX], *gz, *obj, *o;
	struct span name;
	size_t zlen, glen, elen = 0;
	struct cobj zco = *co;
	bool ok;

	if (co->blen < worker.cf->gzip_min_length ||
	    (zlen = zkey_of(px->okey, px->oklen, z)) == 0 ||
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
			if (name_in(name, gz_drop))
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
	    px->cttl, 0) == STORE_OK;
	free(obj);
	free(gz);
	return ok;
}

/* Gives up storing: too large, or no memory. */
static void
cache_drop(struct proxy *px, size_t want)
{
	struct store_wref w;

	if (want > worker.cf->cache.max_object) {
		store_reserve(worker.store, px->okey, px->oklen, want, 1, 0,
		    &w);
		cache_pass(px);
	}
	free(px->cbuf);
	px->cbuf = NULL;
	px->csize = 0;
	px->storing = false;
}

/*
 * Copies relayed body bytes: raw are the bytes as they came, payload
 * those bytes without chunked framing when the relay decoded them.
 */
static void
cache_copy(struct proxy *px, const char *raw, size_t rawlen,
    const char *payload, size_t plen)
{
	size_t body = px->clen - sizeof(px->co) - px->co.etag_len -
	    px->co.hlen, len, data, before;

	if (payload == NULL) {
		/* Decode a copy of the chunked bytes in place. */
		before = px->clen;
		if (!cbuf_add(px, raw, rawlen)) {
			cache_drop(px, 0);
			return;
		}
		len = rawlen;
		if (http_body_feed(&px->cbody, px->cbuf + before, &len,
		    &data) == HTTP_ERROR) {
			cache_drop(px, 0);
			return;
		}
		px->clen = before + data;
		if (body + data > worker.cf->cache.max_object)
			cache_drop(px, body + data);
		return;
	}
	if (body + plen > worker.cf->cache.max_object ||
	    !cbuf_add(px, payload, plen))
		cache_drop(px, body + plen);
}

/* The whole response came: publishes it. */
static void
cache_commit(struct proxy *px)
{
	if (!px->storing)
		return;
	px->storing = false;
	px->co.blen = px->clen - sizeof(px->co) - px->co.etag_len -
	    px->co.hlen;
	/* The one compression this response gets, for every worker. */
	if (px->gz && gz_store(px))
		px->co.flags |= CO_GZ;
	memcpy(px->cbuf, &px->co, sizeof(px->co));
	store_set(worker.store, px->okey, px->oklen, px->cbuf, px->clen,
	    px->cttl, 0);
}

/*
 * The upstream said 304 to a revalidation: the stale copy gets new
 * freshness without its body being fetched again, and answers.
 */
static bool
cache_refresh(struct proxy *px)
{
	const struct http_response *r = &px->resp;
	struct http_cache_control cc;
	struct store_ref ref;
	struct cobj co;
	int64_t life;
	char *copy;

	if (obj_get(px, &ref, &co) != OBJ_FOUND)
		return false;
	http_response_cache_control(r, &cc);
	life = lifetime(r, &cc);
	if (life < 0)
		life = co.fresh_until == INT64_MAX ? px->loc->cache_ttl :
		    co.fresh_until - co.born;
	if ((copy = malloc(ref.len)) == NULL) {
		store_release(worker.store, &ref);
		return false;
	}
	memcpy(copy, ref.data, ref.len);
	store_release(worker.store, &ref);
	co.born = worker.now;
	co.fresh_until = co.born + life;
	memcpy(copy, &co, sizeof(co));
	/* The gzip copy first: an answer takes it only when both match. */
	if (co.flags & CO_GZ)
		gz_renew(px, &co);
	store_set(worker.store, px->okey, px->oklen, copy,
	    sizeof(co) + co.etag_len + co.hlen + co.blen,
	    store_ttl(px, co.fresh_until), 0);
	free(copy);
	return cache_serve_stale(px, XC_EXPIRED);
}

/* Gives the gzip copy the freshness its response just got. */
static void
gz_renew(const struct proxy *px, const struct cobj *co)
{
	char z[STORE_KEY_MAX], *copy;
	struct store_ref ref;
	struct cobj zco;
	size_t zlen, len;

	if ((zlen = zkey_of(px->okey, px->oklen, z)) == 0 ||
	    store_get(worker.store, z, zlen, &ref) != STORE_HIT)
		return;
	len = ref.len;
	if (!cobj_read(&ref, &zco) || zco.gen != co->gen ||
	    (copy = malloc(len)) == NULL) {
		store_release(worker.store, &ref);
		return;
	}
	memcpy(copy, ref.data, len);
	store_release(worker.store, &ref);
	zco.born = co->born;
	zco.fresh_until = co->fresh_until;
	memcpy(copy, &zco, sizeof(zco));
	store_set(worker.store, z, zlen, copy, len,
	    store_ttl(px, zco.fresh_until), 0);
	free(copy);
}

int
proxy_start(struct conn *c, const struct config_location *l,
    struct proxy **pxp)
{
	const struct http_request *r = conn_req(c);
	const char *const *m;
	struct proxy *px;
	enum lk lk;

	*pxp = NULL;
	if (!upstream_init() || (px = px_alloc()) == NULL)
		return -1;
	if ((px->up = upstream_group((size_t)l->upstream)) == NULL) {
		px_release(px, false);
		return -1;
	}
	px->c = c;
	px->loc = l;
	px->method = r->method;
	px->fd = -1;
	px->built = px->lease = px->waiting = px->storing = false;
	px->stale = px->reval = false;
	px->klen = 0;
	px->retried = false;
	px->idempotent = false;
	for (m = idempotent; *m != NULL; m++)
		if (strlen(*m) == r->method_name.len &&
		    memcmp(*m, r->method_name.p, r->method_name.len) == 0)
			px->idempotent = true;
	px->has_body = r->content_length > 0 || r->chunked;
	px->chunked = r->chunked;
	px->body_done = !px->has_body;
	px->replayable = true;
	px->got_bytes = false;
	px->write_shut = false;
	px->paused = false;
	px->status = 0;
	px->sent = 0;
	px->gz = px->accept_gzip = false;
	px->wlen = px->wpos = 0;
	px->rlen = px->scan = 0;
	if ((lk = cache_start(px)) == LK_ANSWERED) {
		px_release(px, false);
		return 0;
	}
	px->peer = upstream_pick(px->up);
	px->head_get = r->method == HTTP_M_HEAD && px->cached && px->fill;
	if (!build_request(px, r)) {
		px_release(px, false);
		return -1;
	}
	px->built = true;
	conn_save_request(c, px->logbuf, sizeof(px->logbuf), px->loghdrs);
	if (lk == LK_WAIT) {
		wait_add(px);
		*pxp = px;
		return 1;
	}
	if (!add_validators(px) || !px_begin(px)) {
		px_release(px, false);
		return -1;
	}
	*pxp = px;
	return 1;
}

size_t
proxy_body_room(const struct proxy *px)
{
	size_t queued = px->wlen - px->wpos;

	return queued >= PX_WBUF_HIGH ? 0 : PX_WBUF_HIGH - queued;
}

void
proxy_body(struct proxy *px, const char *p, size_t len, bool last)
{
	char size[24];
	bool ok = true;

	if (px->write_shut) {
		px->body_done = last;
		return;
	}
	if (px->chunked && len > 0) {
		snprintf(size, sizeof(size), "%zx\r\n", len);
		ok = wbuf_str(px, size) && wbuf_add(px, p, len) &&
		    wbuf_str(px, "\r\n");
	} else if (len > 0) {
		ok = wbuf_add(px, p, len);
	}
	if (last && px->chunked)
		ok = ok && wbuf_str(px, "0\r\n\r\n");
	if (!ok) {
		/* Out of memory: the upstream gets a short body and the
		 * connection is not reused. */
		log_error("upstream %s: out of memory for the request body",
		    upstream_peer_name(px->peer));
		px->write_shut = true;
	}
	px->body_done = last;
	if (px->state != PX_CONNECT && px->wpos < px->wlen)
		px_want_write(px);
}

/* Errors and the end -------------------------------------------------- */

/*
 * Ends the exchange: the upstream connection is pooled when reuse, the
 * access log gets its line, and the client connection goes on.
 */
static void
px_finish(struct proxy *px, bool reuse)
{
	struct conn *c = px->c;

	reuse = reuse && !px->resp.close && px->body_done && !px->write_shut &&
	    px->wpos == px->wlen;
	if (reuse)
		upstream_peer_ok(px->peer);
	cache_commit(px);
	resp_done(c, px->status, px->sent);
	px_release(px, reuse);
	conn_proxy_done(c);
}

/* Ends an exchange answered from the cache; the upstream said no body. */
static void
px_finish_cached(struct proxy *px, bool reuse)
{
	reuse = reuse && !px->resp.close && px->body_done &&
	    !px->write_shut && px->wpos == px->wlen;
	if (reuse)
		upstream_peer_ok(px->peer);
	px_answered_reuse(px, reuse);
}

static void
px_fail(struct proxy *px, int status, bool peer_fault, const char *fmt, ...)
{
	struct conn *c = px->c;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("upstream %s: %s, client %s", upstream_peer_name(px->peer), msg,
	    conn_peer(c));
	if (peer_fault)
		upstream_peer_failed(px->up, px->peer);
	if (px->state != PX_BODY && cache_stale_ok(px, status == 504 ?
	    CACHE_STALE_TIMEOUT : CACHE_STALE_ERROR) &&
	    cache_serve_stale(px, XC_STALE)) {
		px_answered(px);
		return;
	}
	if (px->state == PX_BODY && px->head_get) {
		/* The HEAD's answer is whole: only the fill is lost. */
		resp_done(c, px->status, 0);
		px_release(px, false);
		conn_proxy_done(c);
		return;
	}
	if (px->state == PX_BODY) {
		/* The header went out: the client sees the connection end
		 * before the body does. */
		resp_done(c, px->status, px->sent);
		px_release(px, false);
		conn_abort(c);
		return;
	}
	px_release(px, false);
	resp_error(c, status);
	conn_proxy_done(c);
}

/* Once, on a fresh connection, when a pooled one failed early. */
static bool
px_retry(struct proxy *px)
{
	if (!px->reused || px->retried || px->got_bytes || !px->idempotent ||
	    !px->replayable)
		return false;
	log_info("upstream %s: kept-alive connection failed; retrying on a "
	    "new one", upstream_peer_name(px->peer));
	px_detach(px, false);
	px->retried = true;
	px->wpos = 0;
	px->rlen = px->scan = 0;
	if (px_connect(px))
		return true;
	px_fail(px, 502, false, "cannot retry");
	return true;
}

bool
proxy_cancel(struct proxy *px)
{
	bool started = px->state == PX_BODY;

	px_release(px, false);
	return started;
}

void
proxy_drained(struct proxy *px)
{
	if (!px->paused)
		return;
	px->paused = false;
	px_want_read(px);
}

/* Writing ------------------------------------------------------------- */

static void
px_connected(struct proxy *px)
{
	int err = px->cerr;
	socklen_t len = sizeof(err);

	if (err == 0 &&
	    getsockopt(px->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	if (err != 0) {
		px_fail(px, 502, true, "connect: %s", strerror(err));
		return;
	}
	px->state = PX_HEADER;
	px_want_read(px);
	px_want_write(px);
}

static void
px_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c = px->c;
	ssize_t n;

	worker_update_time();
	if (what & EV_TIMEOUT) {
		if (px->state == PX_CONNECT)
			px_fail(px, 504, true, "connect timed out");
		else
			px_fail(px, 504, false, "timed out sending the "
			    "request");
		return;
	}
	if (px->state == PX_CONNECT) {
		px_connected(px);
		return;
	}
	if (px->wpos < px->wlen && !px->write_shut) {
		n = send(px->fd, px->wbuf + px->wpos, px->wlen - px->wpos,
		    MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			if (px_retry(px))
				return;
			if (!px->got_bytes) {
				px_fail(px, 502, false, "send: %s",
				    strerror(errno));
				return;
			}
			/* It answered already; read what it says. */
			px->write_shut = true;
		} else {
			px->wpos += (size_t)n;
		}
	}
	if (px->wpos < px->wlen && !px->write_shut)
		return;
	event_del(&px->wev);
	if (px->has_body) {
		/* Body bytes leave the buffer: no replay from here on. */
		px->wpos = px->wlen = 0;
		px->replayable = false;
	}
	px_want_read(px);
	if (!px->body_done)
		conn_body_resume(c);
}

/* Reading ------------------------------------------------------------- */

/* Puts out the response header, rewritten for the client. */
static void
px_send_header(struct proxy *px)
{
	const struct http_response *r = &px->resp;
	const struct http_header *h;
	struct conn *c = px->c;
	char date[HTTP_DATE_LEN + 1];
	int64_t len = -1;
	bool decode = false;

	px->status = r->status;
	cache_decide(px);
	if (r->reason.len > 0)
		resp_status_reason(c, r->status, r->reason.p, r->reason.len);
	else
		resp_status_reason(c, r->status, http_reason(r->status),
		    strlen(http_reason(r->status)));
	resp_header(c, worker.server_line, worker.server_line_len);
	if (r->date.p != NULL) {
		resp_header(c, "Date: ", 6);
		resp_header(c, r->date.p, r->date.len);
		resp_header(c, "\r\n", 2);
	} else {
		http_date_format(worker.now, date);
		resp_headerf(c, "Date: %s", date);
	}
	for (h = r->headers; h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    name_in(h->name, resp_drop))
			continue;
		resp_header(c, h->name.p, h->name.len);
		resp_header(c, ": ", 2);
		resp_header(c, h->value.p, h->value.len);
		resp_header(c, "\r\n", 2);
	}
	/* Hits of what is stored now will vary: say so already. */
	if (px->gz)
		resp_header(c, "Vary: Accept-Encoding\r\n", 23);
	if (px->xc != XC_NONE && px->loc->x_cache)
		resp_header(c, xc_line[px->xc].p, xc_line[px->xc].len);
	switch (r->framing) {
	case HTTP_BODY_NONE:
		if (r->status != 204 && r->status != 304)
			len = r->content_length;
		break;
	case HTTP_BODY_LENGTH:
		len = r->content_length;
		break;
	case HTTP_BODY_CHUNKED:
		if (conn_req(c)->version == 11)
			resp_header(c, "Transfer-Encoding: chunked\r\n", 28);
		else {
			decode = true;
			resp_no_keepalive(c);
		}
		break;
	default:
		resp_no_keepalive(c);
		break;
	}
	resp_end_headers(c, len);
	http_body_init(&px->body, r, decode);
	http_body_init(&px->cbody, r, true);
	px->state = PX_BODY;
}

/*
 * Relays body bytes rbuf[0..n).  Returns 1 when the response is complete
 * (px is gone), -1 when it failed (px is gone), 0 for more.
 */
static int
px_relay(struct proxy *px, size_t n)
{
	size_t len = n, data, out;
	int rc;

	if (resp_is_head(px->c) && !px->head_get &&
	    px->body.framing != HTTP_BODY_NONE)
		len = 0;
	rc = http_body_feed(&px->body, px->rbuf, &len, &data);
	if (rc == HTTP_ERROR) {
		px_fail(px, 502, true, "bad chunked framing in the response "
		    "body");
		return -1;
	}
	out = px->body.decode ? data : len;
	if (px->storing && len > 0)
		cache_copy(px, px->rbuf, len, px->body.framing ==
		    HTTP_BODY_CHUNKED && !px->body.decode ? NULL : px->rbuf,
		    out);
	if (px->head_get && !px->storing) {
		px_finish(px, false);	/* too large to store after all */
		return 1;
	}
	if (px->head_get)
		out = 0;		/* stored, not sent */
	if (out > 0)
		resp_body_copy(px->c, px->rbuf, out);
	px->sent += out;
	if (rc != HTTP_OK)
		return 0;
	if (len < n)
		log_warn("upstream %s sent %zu bytes after the response; "
		    "closing it", upstream_peer_name(px->peer), n - len);
	px_finish(px, len == n);
	return 1;
}

/* Parses the response header in rbuf; 1 when done, 0 for more, -1 gone. */
static int
px_header(struct proxy *px)
{
	const struct config *cf = worker.cf;
	ssize_t n;
	char *grown;

	for (;;) {
		n = http_parse_response(&px->resp, px->rbuf, px->rlen,
		    &px->scan, worker.headers, cf->max_headers,
		    cf->max_header_size, resp_is_head(px->c) && !px->head_get);
		if (n == HTTP_AGAIN) {
			if (px->rlen < px->rsize)
				return 0;
			if (px->rsize >= cf->max_header_size + 4) {
				px_fail(px, 502, true, "response header too "
				    "large");
				return -1;
			}
			grown = realloc(px->rbuf, px->rsize * 2);
			if (grown == NULL) {
				px_fail(px, 502, false, "out of memory");
				return -1;
			}
			px->rbuf = grown;
			px->rsize *= 2;
			return 0;
		}
		if (n == HTTP_ERROR) {
			px_fail(px, 502, true, "invalid response header: %s",
			    px->resp.error ? px->resp.error : "?");
			return -1;
		}
		if (px->resp.status >= 200)
			break;
		/* 1xx: dropped; the final response follows. */
		px->rlen -= (size_t)n;
		memmove(px->rbuf, px->rbuf + n, px->rlen);
		px->scan = 0;
	}
	upstream_peer_ok(px->peer);
	if (cache_intercept(px, (size_t)n))
		return -1;
	px_send_header(px);
	if (px->head_get && !px->storing) {
		/* The HEAD is answered, and no one wants the body: the
		 * connection is kept only when there is none. */
		px_finish(px, px->rlen == (size_t)n &&
		    (px->resp.framing == HTTP_BODY_NONE ||
		    (px->resp.framing == HTTP_BODY_LENGTH &&
		    px->resp.content_length == 0)));
		return -1;
	}
	px->rlen -= (size_t)n;
	memmove(px->rbuf, px->rbuf + n, px->rlen);
	return 1;
}

/*
 * The cache answers instead of the upstream: a 304 to a revalidation, or
 * a 5xx that cache_stale covers.  True when px is gone.
 */
static bool
cache_intercept(struct proxy *px, size_t n)
{
	int st = px->resp.status;
	unsigned bit = st == 500 ? CACHE_STALE_500 : st == 502 ?
	    CACHE_STALE_502 : st == 503 ? CACHE_STALE_503 : st == 504 ?
	    CACHE_STALE_504 : 0;

	if (px->reval && st == 304) {
		if (!cache_refresh(px))
			return false;
		px_finish_cached(px, px->rlen == n);
		return true;
	}
	if (bit == 0 || !cache_stale_ok(px, bit) ||
	    !cache_serve_stale(px, XC_STALE))
		return false;
	log_warn("upstream %s answered %d; served a stale copy",
	    upstream_peer_name(px->peer), st);
	px_answered(px);
	return true;
}

static void
px_eof(struct proxy *px, int err)
{
	if (px_retry(px))
		return;
	if (px->state != PX_BODY) {
		px_fail(px, 502, true, "%s before the response header",
		    err ? strerror(err) : "connection closed");
		return;
	}
	if (http_body_eof(&px->body) == HTTP_OK) {
		px_finish(px, false);
		return;
	}
	px_fail(px, 502, false, "connection %s after %llu body bytes",
	    err ? strerror(err) : "closed",
	    (unsigned long long)px->sent);
}

static void
px_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c = px->c;
	ssize_t n;

	worker_update_time();
	if (what & EV_TIMEOUT) {
		px_fail(px, 504, px->state != PX_BODY, "read timed out");
		return;
	}
	n = recv(px->fd, px->rbuf + px->rlen, px->rsize - px->rlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		px_eof(px, n < 0 ? errno : 0);
		return;
	}
	px->got_bytes = true;
	px->rlen += (size_t)n;
	if (px->state != PX_BODY && px_header(px) != 1)
		return;
	/* Also with no bytes after the header: an empty body is done. */
	n = (ssize_t)px->rlen;
	px->rlen = 0;
	if (px_relay(px, (size_t)n) != 0)
		return;
	if (conn_out_buffered(c) > PX_OUT_HIGH) {
		/* Resumed by proxy_drained() once the client caught up. */
		px->paused = true;
		event_del(&px->rev);
	}
	conn_flush(c);
}

void
proxy_free_all(void)
{
	struct proxy *px;

	while ((px = free_px) != NULL) {
		free_px = px->next;
		free(px->wbuf);
		free(px->rbuf);
		free(px);
	}
	upstream_free_all();
}

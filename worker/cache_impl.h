/*
 * Inside the cache module: the stored object's header and the state of one
 * proxied request, shared by cache.c (keys, lookups, the policy),
 * cache_store.c (storing), cache_answer.c (answers from stored objects)
 * and cache_gzip.c (the compressed copies).
 * Nothing outside worker/cache*.c includes this.
 */
#ifndef CORRAL_CACHE_IMPL_H
#define CORRAL_CACHE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/store.h"
#include "worker/cache.h"
#include "worker/http.h"

#include "worker/cache_policy.h"
#include "worker/http_response.h"

/*
 * The header of a stored object, followed by its entity tag, its header
 * lines and its (decoded) body; a Vary spec is followed by the field names
 * it lists (in the place of the lines).  Position-independent: it lives
 * in the shared mapping and in a persisted store file.  Another layout
 * gets another CO_MAGIC: an object of an older one reads as a miss.
 */
struct cache_obj {
	uint32_t magic;
	uint16_t kind;			/* CO_* */
	uint16_t status;		/* 200..599 */
	int64_t date;			/* its Date, or when it came */
	int64_t born;			/* when its Age was 0 */
	int64_t lifetime;		/* fresh from born for this long;
					   CO_FOREVER: never stale */
	int64_t swr;			/* stale-while-revalidate, -1: none */
	int64_t sie;			/* stale-if-error, -1: none */
	int64_t mtime;			/* Last-Modified, -1: none */
	uint64_t gen;			/* CO_VARY: names its variants; a
					   response's fill, for its gzip copy */
	uint32_t etag_len;
	uint32_t hlen;			/* header lines, or the Vary names */
	uint64_t blen;
	uint32_t flags;			/* CO_GZ, CO_BR, CO_*COPY */
	uint32_t cpflags;		/* CP_F_* (worker/cache_policy.h) */
};

#define CO_MAGIC	0x63727271u	/* 0x63727270: before the date and
					   the stale windows were kept */
#define CO_RESP		1		/* a response (or a file's bytes) */
#define CO_PASS		2		/* hit-for-pass, or "nothing here" */
#define CO_VARY		3		/* a Vary spec */
#define CO_MISS		4		/* hit-for-miss: fetch at once, without
					   waiting for a fill, and store */
#define CO_GZ		1		/* a gzip copy is kept under 'Z' key */
#define CO_GZCOPY	2		/* this is such a copy */
#define CO_BR		4		/* a brotli copy under a 'Q' key */
#define CO_BRCOPY	8		/* this is such a copy */
#define CO_COPIES	(CO_GZ | CO_BR)
#define CO_COPY		(CO_GZCOPY | CO_BRCOPY)
#define CO_FOREVER	INT64_MAX
#define CO_ETAG_MAX	128
#define CO_COND_MAX	1024

/* What X-Cache says. */
enum xc { XC_NONE, XC_HIT, XC_MISS, XC_STALE, XC_UPDATING, XC_EXPIRED,
	XC_BYPASS };

/* What the cache does for a request. */
enum cr_role {
	CR_PASS,			/* neither looked up nor stored */
	CR_FILL,			/* not looked up, may be stored
					   (Authorization: stored if the
					   response allows) */
	CR_LOOKUP,			/* looked up, and filled on a miss */
	CR_LOOKED,			/* looked up, not stored: a pass
					   marker, or the lock timed out */
};

struct cache_req {
	struct conn *c;
	const struct config_location *loc;
	const struct http_request *r;	/* its fields, for Vary */
	int method;
	enum cr_role role;
	enum xc xc;
	signed char enc_pick[2];	/* the copies the client takes, best
					   first (enum http_enc), or -1 */
	bool lease;			/* this request fills the key */
	bool stale;			/* a stale copy is there */
	bool reval;			/* ask the upstream if it changed */
	bool storing;			/* copying the body into cbuf */
	bool gz;			/* compressed copies are made at
					   commit (gzip, brotli) */
	bool bg;			/* answered stale: the fetch refreshes
					   the copy for the next requests */
	bool unsafe;			/* an unsafe method: a success drops
					   the URL */
	uint64_t token;			/* CACHE_WAIT: the lease key's */
	struct http_cache_control rcc;	/* the request's Cache-Control */
	struct cp_fresh sf;		/* the stale copy's freshness */
	int64_t t_req;			/* the fetch went out */

	char *cbuf;			/* object being stored */
	size_t clen, csize;
	int64_t cttl;
	struct cache_obj co;

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
	struct cache_req *next;		/* free list */
};

/* cache.c: objects, keys, lookups */
void cobj_init(struct cache_obj *co, uint16_t kind, uint64_t blen);
bool cobj_read(const struct store_ref *ref, struct cache_obj *co);
void cobj_fresh(const struct cache_obj *co, struct cp_fresh *f);
void cobj_set_fresh(struct cache_obj *co, const struct cp_fresh *f);
size_t zkey_of(const char *key, size_t klen, char *z);
size_t qkey_of(const char *key, size_t klen, char *q);
bool variant_key(struct cache_req *cr, uint64_t gen, const char *names,
    size_t len);
enum obj { OBJ_NONE, OBJ_FOUND, OBJ_PASS, OBJ_MISS };
enum obj obj_get(struct cache_req *cr, struct store_ref *ref,
    struct cache_obj *co);
enum store_result obj_delete(struct cache_req *cr);
bool stale_ok(const struct cache_req *cr, enum cp_stale why, unsigned bit);
bool serve_stale(struct cache_req *cr, enum xc xc);
void lease_release(struct cache_req *cr);
void cache_conf(const struct config_location *l, struct cp_conf *conf);
void cache_invalidate(struct cache_req *cr, const struct http_response *r);

/* cache_l2.c: a fill, and a purge, sent to the cluster */
void cache_l2_push(const struct cache_req *cr, const void *obj, size_t len,
    int64_t ttl);
void cache_l2_purge(const struct cache_req *cr);

/* cache_store.c */
extern const char *const cache_not_merged[];	/* kept from a 304 */
int64_t store_ttl(const struct cache_req *cr, const struct cache_obj *co);

/* cache_answer.c */
void cache_answer(struct cache_req *cr, struct store_ref *ref,
    const struct cache_obj *co, enum xc xc);
extern const struct span xc_line[];
extern const char *const xc_name[];	/* "HIT", ..., for logs, counters */

/* cache_gzip.c: one compressed copy per encoding. */
uint64_t fill_nonce(void);
bool gz_wanted(const struct http_response *r,
    const struct http_cache_control *cc, size_t nvary);
/* Stores the copies; the CO_GZ / CO_BR flags of those stored. */
uint32_t gz_store(struct cache_req *cr);
void gz_renew(const struct cache_req *cr, const struct cache_obj *co,
    const struct http_response *r);
bool gz_get(const struct cache_req *cr, const struct cache_obj *co,
    struct store_ref *zref, struct cache_obj *zco);

#endif

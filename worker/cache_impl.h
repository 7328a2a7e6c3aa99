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

struct http_cache_control;
struct http_response;

/*
 * The header of a stored object, followed by its entity tag, its header
 * lines and its (decoded) body; a Vary spec is followed by the field names
 * it lists (in the place of the lines).  Position-independent: it lives
 * in the shared mapping and in a persisted store file.
 */
struct cache_obj {
	uint32_t magic;
	uint16_t kind;			/* CO_* */
	uint16_t status;
	int64_t born;			/* when its Age was 0 */
	int64_t fresh_until;		/* INT64_MAX: never stale */
	int64_t mtime;			/* Last-Modified, -1: none */
	uint64_t gen;			/* CO_VARY: names its variants; a
					   response's fill, for its gzip copy */
	uint32_t etag_len;
	uint32_t hlen;			/* header lines, or the Vary names */
	uint64_t blen;
	uint32_t flags;			/* CO_GZ, CO_GZCOPY */
	uint32_t spare;
};

#define CO_MAGIC	0x63727270u
#define CO_RESP		1		/* a response (or a file's bytes) */
#define CO_PASS		2		/* hit-for-pass, or "nothing here" */
#define CO_VARY		3		/* a Vary spec */
#define CO_GZ		1		/* a gzip copy is kept under 'Z' key */
#define CO_GZCOPY	2		/* this is such a copy */
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
	bool accept_gzip;		/* gzip on, and the client takes it */
	bool lease;			/* this request fills the key */
	bool stale;			/* a stale copy is there */
	bool reval;			/* ask the upstream if it changed */
	bool storing;			/* copying the body into cbuf */
	bool gz;			/* a gzip copy is made at commit */
	uint64_t token;			/* CACHE_WAIT: the lease key's */

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
size_t zkey_of(const char *key, size_t klen, char *z);
bool variant_key(struct cache_req *cr, uint64_t gen, const char *names,
    size_t len);
enum obj { OBJ_NONE, OBJ_FOUND, OBJ_PASS };
enum obj obj_get(struct cache_req *cr, struct store_ref *ref,
    struct cache_obj *co);
enum store_result obj_delete(struct cache_req *cr);
bool stale_ok(const struct cache_req *cr, unsigned bit);
bool serve_stale(struct cache_req *cr, enum xc xc);
void lease_release(struct cache_req *cr);

/* cache.c: the RFC 9111 policy (moving to worker/cache_policy.c) */
int64_t policy_lifetime(const struct http_response *r,
    const struct http_cache_control *cc);
bool policy_status_storable(int status, bool explicit);
bool policy_vary_names(const struct http_response *r, char *out,
    size_t size, size_t *len);
bool policy_unsafe_method(int m);
bool policy_storable(const struct cache_req *cr,
    const struct http_response *r, const struct http_cache_control *cc,
    bool explicit);

/* cache_store.c */
int64_t store_ttl(const struct cache_req *cr, int64_t fresh_until);

/* cache_answer.c */
void cache_answer(struct cache_req *cr, struct store_ref *ref,
    const struct cache_obj *co, enum xc xc);
extern const struct span xc_line[];
extern const char *const xc_name[];	/* "HIT", ..., for logs, counters */

/* cache_gzip.c */
uint64_t fill_nonce(void);
bool gz_wanted(const struct http_response *r,
    const struct http_cache_control *cc, size_t nvary);
bool gz_store(struct cache_req *cr);
void gz_renew(const struct cache_req *cr, const struct cache_obj *co);
bool gz_get(const struct cache_req *cr, const struct cache_obj *co,
    struct store_ref *zref, struct cache_obj *zco);

#endif

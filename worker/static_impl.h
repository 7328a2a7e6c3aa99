/*
 * Inside the static file handler, shared by static.c (the open-file
 * cache, plain responses, folders) and static_enc.c (compressed answers:
 * the copies made once in the shared store, and gzip_static's files next
 * to the original).  Nothing else includes it.
 */
#ifndef CORRAL_STATIC_IMPL_H
#define CORRAL_STATIC_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "worker/http.h"
#include "worker/resp.h"

struct conn;
struct pin;
struct config_location;


struct fentry {
	struct fentry *hnext;		/* hash chain */
	struct fentry *lru_prev, *lru_next;
	uint64_t hash;
	unsigned refs;			/* the table holds one */
	bool cached;			/* in the table */
	bool is_dir;
	int err;			/* errno of the open, 0 if it worked */
	int fd;				/* -1 when data or the store holds
					   the bytes */
	bool shared;			/* bytes in the shared store */
	unsigned encs;			/* 1 << enc: may be sent so */
	uint16_t skeylen;
	char *skey;			/* store key when shared */
	char *ekey[ENC_COUNT];		/* and of each compressed copy */
	off_t size;
	time_t mtime;
	dev_t dev;
	ino_t ino;
	uint64_t checked_ms;
	uint64_t used_ms;		/* last asked for */
	char *data;
	struct pin *pin;		/* held on the store's copy, or NULL */
	size_t pin_body;		/* where the body starts in it */
	const char *type;
	size_t etag_len;
	char etag[48];
	char *hdr;			/* Content-Type .. Accept-Ranges */
	size_t hdr_len;
	char *ehdr[ENC_COUNT];		/* the same for each copy, with
					   Content-Encoding last */
	size_t ehdr_len[ENC_COUNT];
	struct resp_kept kept;		/* the plain 200, see serve_kept() */
	size_t eetag_len[ENC_COUNT];
	char eetag[ENC_COUNT][56];
	char *ctype;			/* type with the location's charset */
	const char *cs;			/* that charset, part of the key */
	const char *dtype;		/* the location's default_type, too */
	size_t srv;			/* in config.dirs */
	size_t keylen;
	char key[];
};

/* What the request being served asked of the files. */
struct static_cur {
	const struct config_location *loc;
	int status;			/* an error page's, else 0 */
	char extra[192];		/* Cache-Control, Expires, Vary */
	size_t elen;
};
extern struct static_cur static_cur;

/* "Content-Encoding: gzip\r\n" and the token of each encoding. */

/* An entry of the open-file cache (no charset, the global default_type),
 * referenced; NULL when out of memory. */
struct fentry *static_lookup(size_t dir, const char *path, size_t len);

/* Reads the file into the store under its key; false if it cannot. */
bool static_store_fill(struct fentry *fe);

/* Pins the file's object in the store (filling it first if need be);
 * *body is where its bytes start.  False when the store cannot have it. */
struct store_ref;
bool static_get_shared(struct fentry *fe, struct store_ref *ref,
    size_t *body);

/* Queues len bytes of the file's body from off. */
void static_send_body(struct conn *c, struct fentry *fe, off_t off,
    off_t len);

/*
 * A compressed answer for the request, if the client accepts one:
 * gzip_static's file next to fe, else corral's own copy.  False to answer
 * with the plain bytes.
 */
bool static_serve_encoded(struct conn *c, struct fentry *fe);

#endif

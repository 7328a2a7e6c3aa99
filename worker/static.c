/*
 * Static files.
 *
 * Files are opened with openat2(RESOLVE_BENEATH) relative to the document
 * root's descriptor, so no path and no symlink can lead outside the root,
 * whatever the decoded path says.  What an open and fstat found is kept in a
 * per-worker cache for file_cache_valid: the descriptor of a large file, the
 * bytes of a small one, and the header lines they need, so a hit costs no
 * system call at all.  Small bodies leave in the same sendmsg() as their
 * headers; large ones go out with sendfile().
 *
 * With the shared store on, the bytes of files up to cache.file_max live
 * there once for all workers, as objects of the cache module (cache.h).
 * Those up to cache.file_copy_max are sent from it; larger ones go out
 * with sendfile() from the file where the connection can take it, which
 * measured cheaper than copying them (bench/, the 52 KB and 1 MB cases),
 * and their store copy only feeds the compressed copies.
 * Their key holds the file's identity (device, inode, size, mtime), so a
 * changed file is a new key and no worker can pair old headers with new
 * bytes.  A file up to file_cache_max_size keeps its pin in the worker's
 * entry, so a hit costs no store lookup, lock or pin of its own (the
 * entry's revalidation and expiry let it go); the number and bytes of
 * such pins are bounded, so the store's other users keep their room.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xxhash.h>

#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/resp.h"
#include "worker/gzip.h"
#include "worker/static.h"
#include "worker/static_impl.h"
#include "shm/store.h"

struct fcache {
	const struct config *cf;
	struct fentry **buckets;
	size_t mask;
	size_t count;
	struct fentry *lru_head, *lru_tail;	/* head is most recent */
	unsigned pins;				/* entries holding a pin */
	uint64_t pinned;			/* and their bytes */
	uint64_t pinned_max;
};

/* A quarter of the store's pins per worker (master.c STORE_MAX_REFS). */
#define FCACHE_PINS_MAX	1024

struct fcache *
fcache_create(const struct config *cf)
{
	struct fcache *fc;
	size_t n = 64;

	while (n < cf->file_cache_entries * 2)
		n *= 2;
	fc = calloc(1, sizeof(*fc));
	if (fc == NULL)
		return NULL;
	fc->buckets = calloc(n, sizeof(*fc->buckets));
	if (fc->buckets == NULL) {
		free(fc);
		return NULL;
	}
	fc->cf = cf;
	fc->mask = n - 1;
	/* A quarter of the store, shared by the workers. */
	fc->pinned_max = cf->cache.size / 4 /
	    (uint64_t)(cf->workers > 0 ? cf->workers : 1);
	return fc;
}

static void
fentry_free(struct fentry *fe)
{
	if (fe->fd != -1)
		close(fe->fd);
	free(fe->data);
	free(fe->hdr);
	free(fe->skey);
	for (int e = 0; e < ENC_COUNT; e++) {
		free(fe->ehdr[e]);
		free(fe->ekey[e]);
	}
	free(fe->ctype);
	resp_kept_free(&fe->kept);
	free(fe);
}

void
fentry_ref(struct fentry *fe)
{
	fe->refs++;
}

void
fentry_release(struct fentry *fe)
{
	if (--fe->refs == 0)
		fentry_free(fe);
}

static void
lru_unlink(struct fcache *fc, struct fentry *fe)
{
	if (fe->lru_prev != NULL)
		fe->lru_prev->lru_next = fe->lru_next;
	else
		fc->lru_head = fe->lru_next;
	if (fe->lru_next != NULL)
		fe->lru_next->lru_prev = fe->lru_prev;
	else
		fc->lru_tail = fe->lru_prev;
	fe->lru_prev = fe->lru_next = NULL;
}

static void
lru_push(struct fcache *fc, struct fentry *fe)
{
	fe->lru_prev = NULL;
	fe->lru_next = fc->lru_head;
	if (fc->lru_head != NULL)
		fc->lru_head->lru_prev = fe;
	fc->lru_head = fe;
	if (fc->lru_tail == NULL)
		fc->lru_tail = fe;
}

/* Takes an entry out of the table; queued responses may still hold it. */
static void
fcache_remove(struct fcache *fc, struct fentry *fe)
{
	struct fentry **pp = &fc->buckets[fe->hash & fc->mask];

	while (*pp != fe)
		pp = &(*pp)->hnext;
	*pp = fe->hnext;
	lru_unlink(fc, fe);
	fe->cached = false;
	fc->count--;
	if (fe->pin != NULL) {
		/* Responses still queued hold uses of their own. */
		pin_put(fe->pin);
		fe->pin = NULL;
		fc->pins--;
		fc->pinned -= (uint64_t)fe->size;
	}
	fentry_release(fe);
}

static void
fcache_insert(struct fcache *fc, struct fentry *fe)
{
	struct fentry **b;

	if (fc->cf->file_cache_entries == 0)
		return;
	while (fc->count >= fc->cf->file_cache_entries && fc->lru_tail)
		fcache_remove(fc, fc->lru_tail);
	b = &fc->buckets[fe->hash & fc->mask];
	fe->hnext = *b;
	*b = fe;
	lru_push(fc, fe);
	fe->cached = true;
	fe->refs++;
	fc->count++;
}

/*
 * Drops the entries nobody asked for in file_cache_inactive, so a worker
 * does not keep a deleted file's descriptor (and its disk space) for good.
 * The LRU list is in order of use: only expired entries are looked at.
 */
void
fcache_expire(struct fcache *fc)
{
	uint64_t inactive = (uint64_t)fc->cf->file_cache_inactive_ms;

	while (fc->lru_tail != NULL &&
	    worker.now_ms - fc->lru_tail->used_ms >= inactive)
		fcache_remove(fc, fc->lru_tail);
}

void
fcache_destroy(struct fcache *fc)
{
	while (fc->lru_tail != NULL)
		fcache_remove(fc, fc->lru_tail);
	free(fc->buckets);
	free(fc);
}

/*
 * Kernels without openat2 (before 5.6): walk the normalised path one
 * component at a time and refuse every symlink, which is stricter than
 * RESOLVE_BENEATH but never wrong.
 */
static int
open_walk(int rootfd, const char *rel, int flags)
{
	char comp[NAME_MAX + 1];
	const char *p = rel, *slash;
	int dirfd = rootfd, fd;
	size_t n;

	for (;;) {
		slash = strchr(p, '/');
		n = slash ? (size_t)(slash - p) : strlen(p);
		if (n > NAME_MAX) {
			fd = -1;
			errno = ENAMETOOLONG;
			break;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (slash == NULL || slash[1] == '\0') {
			/* "file/" names a folder, as the kernel has it. */
			fd = openat(dirfd, comp, flags | O_NOFOLLOW |
			    (slash != NULL ? O_DIRECTORY : 0));
			break;
		}
		fd = openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (dirfd != rootfd)
			close(dirfd);
		if (fd == -1)
			return -1;
		dirfd = fd;
		p = slash + 1;
	}
	if (dirfd != rootfd) {
		int saved = errno;

		close(dirfd);
		errno = saved;
	}
	return fd;
}

/* Opens path beneath the root; never follows anything out of it. */
static int
open_beneath(int rootfd, const char *rel)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
#ifdef HAVE_LINUX_OPENAT2_H
	struct open_how how;
	int fd;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)flags;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	fd = (int)syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
	if (fd != -1 || errno != ENOSYS)
		return fd;
#endif
	return open_walk(rootfd, rel, flags);
}

/* Errors that say nothing about the file and must not be cached. */
static bool
err_transient(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM ||
	    err == EINTR || err == EAGAIN || err == ENOSYS;
}

/* The one place where errno becomes an HTTP status. */
static int
errno_status(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return 404;
	case EACCES:
	case EPERM:
	case ELOOP:
	case EXDEV:
		return 403;
	case ENAMETOOLONG:
		return 414;
	case EMFILE:
	case ENFILE:
	case ENOMEM:
		return 503;
	default:
		return 500;
	}
}

static bool
read_all(int fd, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size) {
		n = pread(fd, buf + got, size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* Prepares the header lines that every response for this file carries. */
static bool
fentry_headers(struct fentry *fe)
{
	const char *vary = fe->encs ? "Vary: Accept-Encoding\r\n" : "";
	char lm[HTTP_DATE_LEN + 1];
	int n, e;

	fe->etag_len = (size_t)snprintf(fe->etag, sizeof(fe->etag),
	    "\"%llx-%llx\"", (unsigned long long)fe->mtime,
	    (unsigned long long)fe->size);
	http_date_format(fe->mtime, lm);
	n = snprintf(NULL, 0, "Content-Type: %s\r\nLast-Modified: %s\r\n"
	    "ETag: %s\r\nAccept-Ranges: bytes\r\n%s", fe->type, lm, fe->etag,
	    vary);
	fe->hdr = malloc((size_t)n + 1);
	if (fe->hdr == NULL)
		return false;
	snprintf(fe->hdr, (size_t)n + 1, "Content-Type: %s\r\n"
	    "Last-Modified: %s\r\nETag: %s\r\nAccept-Ranges: bytes\r\n%s",
	    fe->type, lm, fe->etag, vary);
	fe->hdr_len = (size_t)n;
	for (e = 0; e < ENC_COUNT; e++) {
		if (!(fe->encs & 1u << e))
			continue;
		/* Another representation, so another strong validator. */
		fe->eetag_len[e] = (size_t)snprintf(fe->eetag[e],
		    sizeof(fe->eetag[e]), "\"%llx-%llx-%s\"",
		    (unsigned long long)fe->mtime,
		    (unsigned long long)fe->size, e == ENC_GZIP ? "gz" :
		    http_enc_token[e]);
		/* Content-Encoding last: a 304 leaves it out. */
		n = snprintf(NULL, 0, "Content-Type: %s\r\nLast-Modified: "
		    "%s\r\nETag: %s\r\n%s%s", fe->type, lm, fe->eetag[e],
		    vary, http_enc_field[e]);
		if ((fe->ehdr[e] = malloc((size_t)n + 1)) == NULL)
			return false;
		snprintf(fe->ehdr[e], (size_t)n + 1, "Content-Type: %s\r\n"
		    "Last-Modified: %s\r\nETag: %s\r\n%s%s", fe->type, lm,
		    fe->eetag[e], vary, http_enc_field[e]);
		fe->ehdr_len[e] = (size_t)n;
	}
	return true;
}

/* The types nginx's charset applies to (charset_types). */
static bool
charset_type(const char *t)
{
	static const char *const types[] = { "text/html", "text/plain",
	    "text/xml", "text/css", "text/javascript",
	    "application/javascript", "application/json",
	    "application/xml", "application/rss+xml" };
	size_t n = strcspn(t, ";");

	while (n > 0 && t[n - 1] == ' ')
		n--;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strlen(types[i]) == n && strncmp(types[i], t, n) == 0)
			return true;
	return false;
}

/*
 * Store keys: 'F' (and 'G' for the gzip copy, 'B' for brotli), folder,
 * file identity, path.
 */
static bool
fentry_store_key(struct fentry *fe)
{
	uint64_t id[5] = { fe->srv, (uint64_t)fe->dev, (uint64_t)fe->ino,
	    (uint64_t)fe->size, (uint64_t)fe->mtime };
	char key[STORE_KEY_MAX];
	size_t n;

	n = cache_key(key, CACHE_NS_FILE, id, sizeof(id), fe->key,
	    fe->keylen);
	if (n == 0 || (fe->skey = malloc(n)) == NULL)
		return false;
	memcpy(fe->skey, key, n);
	fe->skeylen = (uint16_t)n;
	for (int e = 0; e < ENC_COUNT; e++)
		if ((fe->encs & 1u << e) && (fe->ekey[e] = malloc(n)) != NULL)
			cache_key(fe->ekey[e], e == ENC_GZIP ?
			    CACHE_NS_FILE_GZIP : CACHE_NS_FILE_BR, id,
			    sizeof(id), fe->key, fe->keylen);
	return true;
}

/* Fills an entry from an open descriptor. */
static void
fentry_load(struct fcache *fc, struct fentry *fe, int fd,
    const struct stat *st)
{
	const struct runtime *rt = worker.rt;

	fe->size = st->st_size;
	fe->mtime = st->st_mtime;
	fe->dev = st->st_dev;
	fe->ino = st->st_ino;
	if (S_ISDIR(st->st_mode)) {
		fe->is_dir = true;
		close(fd);
		return;
	}
	if (!S_ISREG(st->st_mode)) {
		fe->err = EACCES;
		close(fd);
		return;
	}
	fe->type = mime_lookup(rt->mime, fe->key, fe->keylen);
	if (fe->type == NULL)
		fe->type = fe->dtype != NULL ? fe->dtype :
		    fc->cf->default_type;
	if (fe->cs != NULL && charset_type(fe->type)) {
		size_t n = strcspn(fe->type, ";");

		if (asprintf(&fe->ctype, "%.*s; charset=%s", (int)n, fe->type,
		    fe->cs) == -1) {
			fe->ctype = NULL;
			fe->err = ENOMEM;
			close(fd);
			return;
		}
		fe->type = fe->ctype;
	}
	/* Compressed once into the store, for every worker. */
	if (worker.store != NULL &&
	    (uint64_t)fe->size >= fc->cf->gzip_min_length && fe->size > 0 &&
	    (uint64_t)fe->size <= fc->cf->cache.file_max &&
	    (uint64_t)fe->size <= cache_body_max(fc->cf->cache.max_object) &&
	    gzip_type(fc->cf, fe->type, strlen(fe->type)))
		fe->encs = (fc->cf->gzip ? 1u << ENC_GZIP : 0) |
		    (fc->cf->brotli ? 1u << ENC_BR : 0);
	if (!fentry_headers(fe)) {
		fe->err = ENOMEM;
		close(fd);
		return;
	}
	if (worker.store != NULL && fe->size > 0 &&
	    (uint64_t)fe->size <= fc->cf->cache.file_max &&
	    (uint64_t)fe->size <= cache_body_max(fc->cf->cache.max_object) &&
	    fentry_store_key(fe)) {
		/* The bytes are read into the store on first use. */
		fe->shared = true;
		close(fd);
		return;
	}
	if ((size_t)fe->size > fc->cf->file_cache_max_size) {
		fe->fd = fd;
		return;
	}
	fe->data = malloc(fe->size > 0 ? (size_t)fe->size : 1);
	if (fe->data == NULL || !read_all(fd, fe->data, (size_t)fe->size))
		fe->err = fe->data == NULL ? ENOMEM : EIO;
	close(fd);
}

static struct fentry *
fentry_open(struct fcache *fc, size_t srv, const char *cs, const char *dtype,
    const char *path, size_t len, uint64_t hash)
{
	struct fentry *fe;
	struct stat st;
	int fd;

	fe = calloc(1, sizeof(*fe) + len + 1);
	if (fe == NULL)
		return NULL;
	fe->fd = -1;
	fe->hash = hash;
	fe->srv = srv;
	fe->cs = cs;
	fe->dtype = dtype;
	fe->keylen = len;
	memcpy(fe->key, path, len);
	fe->checked_ms = fe->used_ms = worker.now_ms;
	fe->refs = 1;

	/* "/a/b" opens "a/b" below the root; "/" opens the root itself. */
	fd = open_beneath(worker.rt->dir_fds[srv], len > 1 ? path + 1 : ".");
	if (fd == -1)
		fe->err = errno;
	else if (fstat(fd, &st) == -1) {
		fe->err = errno;
		close(fd);
	} else
		fentry_load(fc, fe, fd, &st);
	if (!err_transient(fe->err))
		fcache_insert(fc, fe);
	return fe;
}

/* True when the file behind a cached entry is still the same one. */
static bool
fentry_still_valid(struct fentry *fe)
{
	struct stat st;
	int fd;

	fd = open_beneath(worker.rt->dir_fds[fe->srv],
	    fe->keylen > 1 ? fe->key + 1 : ".");
	if (fd == -1)
		return fe->err != 0 && errno == fe->err;
	if (fe->err != 0 || fstat(fd, &st) == -1) {
		close(fd);
		return false;
	}
	close(fd);
	return st.st_dev == fe->dev && st.st_ino == fe->ino &&
	    st.st_size == fe->size && st.st_mtime == fe->mtime &&
	    S_ISDIR(st.st_mode) == fe->is_dir;
}

/*
 * Returns a referenced entry for a path, from the cache when valid.  The
 * location's charset and default_type (NULL: none of its own) are part of
 * the key: they make the entry's Content-Type.
 */
static struct fentry *
fcache_get(struct fcache *fc, size_t srv, const char *cs, const char *dtype,
    const char *path, size_t len)
{
	uint64_t hash = XXH3_64bits_withSeed(path, len,
	    srv ^ (uint64_t)(uintptr_t)cs ^
	    ((uint64_t)(uintptr_t)dtype << 1));
	struct fentry *fe;

	for (fe = fc->buckets[hash & fc->mask]; fe != NULL; fe = fe->hnext)
		if (fe->hash == hash && fe->srv == srv && fe->cs == cs &&
		    fe->dtype == dtype && fe->keylen == len &&
		    memcmp(fe->key, path, len) == 0)
			break;
	if (fe != NULL) {
		if (worker.now_ms - fe->checked_ms >=
		    (uint64_t)fc->cf->file_cache_valid_ms) {
			if (!fentry_still_valid(fe)) {
				/* The old version's bytes are of no use to
				 * anyone now. */
				if (fe->shared)
					store_delete(worker.store, fe->skey,
					    fe->skeylen);
				for (int e = 0; e < ENC_COUNT; e++)
					if (fe->ekey[e] != NULL)
						store_delete(worker.store,
						    fe->ekey[e], fe->skeylen);
				fcache_remove(fc, fe);
				return fentry_open(fc, srv, cs, dtype, path,
				    len, hash);
			}
			fe->checked_ms = worker.now_ms;
		}
		fe->used_ms = worker.now_ms;
		if (fc->lru_head != fe) {
			lru_unlink(fc, fe);
			lru_push(fc, fe);
		}
		fe->refs++;
		return fe;
	}
	return fentry_open(fc, srv, cs, dtype, path, len, hash);
}

struct fentry *
static_lookup(size_t dir, const char *path, size_t len)
{
	return fcache_get(worker.fcache, dir, NULL, NULL, path, len);
}

/* Responses ----------------------------------------------------------- */

/* Opens the entry's file again, if it is still the same file. */
static int
fentry_reopen(const struct fentry *fe)
{
	struct stat st;
	int fd;

	fd = open_beneath(worker.rt->dir_fds[fe->srv],
	    fe->keylen > 1 ? fe->key + 1 : ".");
	if (fd == -1)
		return -1;
	if (fstat(fd, &st) == -1 || st.st_dev != fe->dev ||
	    st.st_ino != fe->ino || st.st_size != fe->size ||
	    st.st_mtime != fe->mtime) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Reads the file into the store.  The space is reserved under the stripe
 * lock but filled outside it, so no file I/O happens while a lock is held.
 */
bool
static_store_fill(struct fentry *fe)
{
	struct store_wref w;
	char *body;
	bool ok;
	int fd;

	fd = fentry_reopen(fe);
	if (fd == -1)
		return false;
	if (cache_body_reserve(worker.store, fe->skey, fe->skeylen,
	    (size_t)fe->size, &w, &body) != STORE_OK) {
		close(fd);
		return false;
	}
	ok = read_all(fd, body, (size_t)fe->size);
	close(fd);
	if (!ok) {
		store_abort(worker.store, &w);
		return false;
	}
	return store_commit(worker.store, &w) == STORE_OK;
}

/* The file's bytes in the store, pinned; false when it cannot hold them. */
bool
static_get_shared(struct fentry *fe, struct store_ref *ref, size_t *body)
{
	size_t len;

	if (store_get(worker.store, fe->skey, fe->skeylen, ref) != STORE_HIT &&
	    (!static_store_fill(fe) || store_get(worker.store, fe->skey,
	    fe->skeylen, ref) != STORE_HIT))
		return false;
	if (cache_body_of(ref, body, &len) == 1 && len == (size_t)fe->size)
		return true;
	store_release(worker.store, ref);
	return false;
}

/* Whether the entry may keep the pin of its store copy. */
static bool
may_hold(const struct fcache *fc, const struct fentry *fe)
{
	return fe->cached &&
	    (size_t)fe->size <= fc->cf->file_cache_max_size &&
	    fc->pins < FCACHE_PINS_MAX &&
	    fc->pinned + (uint64_t)fe->size <= fc->pinned_max;
}

/* Queues a body from the store; false when the store cannot hold it. */
static bool
send_shared(struct conn *c, struct fentry *fe, off_t off, off_t len)
{
	struct fcache *fc = worker.fcache;
	struct store_ref ref;
	struct pin *pin;
	size_t body;

	if (fe->pin != NULL) {
		resp_body_pin(c, fe->pin, fe->pin_body + (size_t)off,
		    (size_t)len);
		return true;
	}
	if (!static_get_shared(fe, &ref, &body))
		return false;
	if ((pin = pin_take(&ref)) == NULL) {
		store_release(worker.store, &ref);
		return false;
	}
	resp_body_pin(c, pin, body + (size_t)off, (size_t)len);
	if (may_hold(fc, fe)) {
		fe->pin = pin;		/* the entry keeps this use */
		fe->pin_body = body;
		fc->pins++;
		fc->pinned += (uint64_t)fe->size;
	} else
		pin_put(pin);
	return true;
}

void
static_send_body(struct conn *c, struct fentry *fe, off_t off, off_t len)
{
	if (fe->data != NULL) {
		resp_body_mem(c, fe->data + off, (size_t)len, fe);
		return;
	}
	if (fe->shared && ((uint64_t)fe->size <=
	    worker.fcache->cf->cache.file_copy_max || !conn_sendfile(c)) &&
	    send_shared(c, fe, off, len))
		return;
	/* A large file, a full store, or a file that changed: send from the
	 * file. */
	if (fe->fd == -1)
		fe->fd = fentry_reopen(fe);
	if (fe->fd == -1) {
		resp_abort(c);
		return;
	}
	resp_body_file(c, fe, fe->fd, off, len);
}

struct static_cur static_cur;
#define cur static_cur

/* expires: Cache-Control max-age and Expires, on 200, 206 and 304. */
static void
make_expires(void)
{
	char date[HTTP_DATE_LEN + 1];
	int64_t e = cur.loc != NULL ? cur.loc->expires : EXPIRES_OFF;
	int n;

	cur.elen = 0;
	if (e == EXPIRES_OFF || cur.status != 0)
		return;
	http_date_format(worker.now + (time_t)e, date);
	n = snprintf(cur.extra, sizeof(cur.extra), "Cache-Control: "
	    "max-age=%lld\r\nExpires: %s\r\n", (long long)e, date);
	if (n > 0 && (size_t)n < sizeof(cur.extra))
		cur.elen = (size_t)n;
}

/*
 * The plain 200 of a file, the answer to nearly every request for it:
 * one copy of its kept head, with the body when it is small and in
 * memory.  False when this response is another one.
 */
static bool
serve_kept(struct conn *c, struct fentry *fe)
{
	const void *body = NULL;

	if (cur.elen != 0)
		return false;
	if (fe->size <= RESP_KEPT_BODY_MAX)
		body = fe->data != NULL ? fe->data : fe->pin != NULL ?
		    pin_bytes(fe->pin) + fe->pin_body : NULL;
	if (!resp_kept_200(c, &fe->kept, fe->hdr, fe->hdr_len, body,
	    (uint64_t)fe->size))
		return false;
	if (body == NULL && !resp_is_head(c))
		static_send_body(c, fe, 0, fe->size);
	resp_done(c, 200, resp_is_head(c) ? 0 : (uint64_t)fe->size);
	return true;
}

static void
serve_whole(struct conn *c, struct fentry *fe)
{
	int status = cur.status != 0 ? cur.status : 200;

	if (status == 200 && serve_kept(c, fe))
		return;
	resp_status(c, status);
	resp_header(c, fe->hdr, fe->hdr_len);
	resp_header(c, cur.extra, cur.elen);
	resp_end_headers(c, fe->size);
	if (!resp_is_head(c))
		static_send_body(c, fe, 0, fe->size);
	resp_done(c, status, resp_is_head(c) ? 0 : (uint64_t)fe->size);
}

static void
serve_not_modified(struct conn *c, struct fentry *fe)
{
	resp_status(c, 304);
	/* Everything but Content-Type, which a 304 need not repeat. */
	resp_header(c, strchr(fe->hdr, '\n') + 1,
	    fe->hdr_len - (size_t)(strchr(fe->hdr, '\n') + 1 - fe->hdr));
	resp_header(c, cur.extra, cur.elen);
	resp_end_headers(c, -1);
	resp_done(c, 304, 0);
}

static void
send_part(struct conn *c, void *arg, uint64_t off, uint64_t len)
{
	static_send_body(c, arg, (off_t)off, (off_t)len);
}

/* A Range request: 206 or 416, or false to answer the whole file. */
static bool
serve_range(struct conn *c, const struct http_request *r, struct fentry *fe)
{
	struct resp_rep rep = {
		.lines = fe->hdr, .len = fe->hdr_len,
		.type = fe->type, .tlen = strlen(fe->type),
		.etag = fe->etag, .etag_len = fe->etag_len,
		.mtime = fe->mtime, .size = (uint64_t)fe->size,
		.max_ranges = worker.cf->max_ranges,
		.part = send_part, .arg = fe,
		.extra = cur.extra, .elen = cur.elen,
	};

	return resp_range(c, r, &rep);
}

static void
serve_file(struct conn *c, struct fentry *fe)
{
	const struct http_request *r = conn_req(c);

	if (cur.status != 0) {
		/* An error page: its status, not a conditional answer. */
		serve_whole(c, fe);
		return;
	}
	/* gzip_static: the plain answer varies too. */
	if (cur.loc->gzip_static && fe->encs == 0 &&
	    cur.elen + 23 < sizeof(cur.extra)) {
		memcpy(cur.extra + cur.elen, "Vary: Accept-Encoding\r\n", 23);
		cur.elen += 23;
	}
	/* Ranges address the file's own bytes: they are answered plain;
	 * with no copy and no gzip_static, nothing but plain is offered. */
	if (r->range.p == NULL && (fe->encs != 0 || cur.loc->gzip_static) &&
	    static_serve_encoded(c, fe))
		return;
	switch (http_has_conditions(r) ? http_conditional(r, fe->etag,
	    fe->etag_len, fe->mtime) : 0) {
	case 304:
		serve_not_modified(c, fe);
		return;
	case 412:
		resp_error(c, 412);
		return;
	}
	if (r->range.p == NULL || !serve_range(c, r, fe))
		serve_whole(c, fe);
}

/* Percent-encodes a path for a Location header. */
static size_t
encode_path(char *dst, size_t size, const char *src, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, n = 0;

	for (i = 0; i < len && n + 3 < size; i++) {
		unsigned char ch = (unsigned char)src[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("/-._~!$&'()*+,;=:@",
		    ch) != NULL) {
			dst[n++] = (char)ch;
		} else {
			dst[n++] = '%';
			dst[n++] = hex[ch >> 4];
			dst[n++] = hex[ch & 15];
		}
	}
	dst[n] = '\0';
	return n;
}

static void
redirect_slash(struct conn *c, const char *path, size_t len)
{
	const struct http_request *r = conn_req(c);
	char loc[PATH_MAX * 3 + 2];
	char hdr[sizeof(loc) + 64];
	size_t n;
	int h;

	n = encode_path(loc, sizeof(loc) - 1, path, len);
	loc[n++] = '/';
	loc[n] = '\0';
	if (r->query.p != NULL)
		h = snprintf(hdr, sizeof(hdr), "Location: %s?%.*s\r\n", loc,
		    (int)r->query.len, r->query.p);
	else
		h = snprintf(hdr, sizeof(hdr), "Location: %s\r\n", loc);
	if (h < 0 || (size_t)h >= sizeof(hdr)) {
		resp_error(c, 414);
		return;
	}
	resp_error_hdr(c, 301, hdr, (size_t)h);
}

static void
serve_error(struct conn *c, struct fentry *fe)
{
	const char *dir = worker.cf->dirs[fe->srv];

	if (fe->err == ENOENT || fe->err == ENOTDIR)
		log_info("\"%s%s\" not found", dir, fe->key);
	else if (fe->err == EXDEV || fe->err == ELOOP)
		log_warn("\"%s%s\" leads outside the root", dir, fe->key);
	else
		log_at(fe->err == EMFILE || fe->err == ENFILE ? L_CRIT :
		    L_ERROR, fe->err, "open \"%s%s\"", dir, fe->key);
	resp_error(c, errno_status(fe->err));
}

/* Tries the index files of a directory whose path ends in '/'. */
static void
serve_index(struct conn *c, struct fentry *dir)
{
	const struct config_location *l = cur.loc;
	struct fcache *fc = worker.fcache;
	char path[PATH_MAX];
	struct fentry *fe;
	size_t i, n;

	for (i = 0; i < l->nindex; i++) {
		n = (size_t)snprintf(path, sizeof(path), "%s%s", dir->key,
		    l->index[i]);
		if (n >= sizeof(path))
			continue;
		fe = fcache_get(fc, dir->srv, dir->cs, dir->dtype, path, n);
		if (fe == NULL)
			continue;
		if (fe->err == 0 && !fe->is_dir) {
			serve_file(c, fe);
			fentry_release(fe);
			return;
		}
		if (fe->err != 0 && fe->err != ENOENT) {
			serve_error(c, fe);
			fentry_release(fe);
			return;
		}
		fentry_release(fe);
	}
	log_error("directory index of \"%s%s\" is forbidden",
	    worker.cf->dirs[dir->srv], dir->key);
	resp_error(c, 403);
}

int
static_file_status(const struct config_location *l, const char *path,
    size_t len)
{
	const char *root = worker.cf->dirs[l->dir];
	struct fentry *fe;
	int status;

	fe = fcache_get(worker.fcache, (size_t)l->dir, NULL, NULL, path, len);
	if (fe == NULL) {
		log_at(L_ERROR, errno, "file cache");
		return 500;
	}
	status = fe->err != 0 ? errno_status(fe->err) : fe->is_dir ? 404 : 0;
	if (status == 404)
		log_info("\"%s%s\" is not a file", root, fe->key);
	else if (status != 0)
		log_at(L_ERROR, fe->err, "open \"%s%s\"", root, fe->key);
	fentry_release(fe);
	return status;
}

int
static_probe(const struct config_location *l, const char *rel, size_t len)
{
	struct fentry *fe;
	int kind;

	fe = fcache_get(worker.fcache, (size_t)l->dir, l->charset,
	    l->default_type, rel, len);
	if (fe == NULL)
		return 0;
	kind = fe->err != 0 ? 0 : fe->is_dir ? 2 : 1;
	fentry_release(fe);
	return kind;
}

void
static_serve(struct conn *c, const struct config_location *l,
    const char *uri, size_t urilen, const char *rel, size_t len, int status)
{
	struct fentry *fe;

	cur.loc = l;
	cur.status = status;
	make_expires();
	fe = fcache_get(worker.fcache, (size_t)l->dir, l->charset,
	    l->default_type, rel, len);
	if (fe == NULL) {
		log_at(L_ERROR, errno, "file cache");
		resp_error(c, 500);
		return;
	}
	if (fe->err != 0)
		serve_error(c, fe);
	else if (!fe->is_dir)
		serve_file(c, fe);
	else if (rel[len - 1] != '/')
		redirect_slash(c, uri, urilen);
	else
		serve_index(c, fe);
	fentry_release(fe);
}

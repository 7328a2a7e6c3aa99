/*
 * Static files: MIME types, the per-worker open-file cache and the handler
 * that answers GET and HEAD from a document root.
 */
#ifndef CORRAL_STATIC_H
#define CORRAL_STATIC_H

#include <stddef.h>

/* MIME types, read from an Apache-style mime.types file. */
struct mime_table;

/*
 * Loads "type ext ext ..." lines ('#' starts a comment), or the built-in
 * table (etc/mime.types as shipped) when path is NULL.  On error returns
 * NULL with "FILE:LINE: what is wrong" in err.
 */
struct mime_table *mime_load(const char *path, char *err, size_t errlen);

/* The type for the extension of path (case-insensitive), or NULL. */
const char *mime_lookup(const struct mime_table *mt, const char *path,
    size_t len);

void mime_free(struct mime_table *mt);

/*
 * The per-worker open-file cache: open descriptors, stat results, ready
 * header lines and the contents of small files, revalidated at most every
 * file_cache_valid.  Entries are reference counted so a queued response
 * keeps its bytes or descriptor alive.
 */
struct config;
struct conn;
struct fcache;
struct fentry;

struct fcache *fcache_create(const struct config *cf);
void fcache_destroy(struct fcache *fc);

/* Closes the files unused for file_cache_inactive; once a second. */
void fcache_expire(struct fcache *fc);

/* Takes and drops references for queued responses. */
void fentry_ref(struct fentry *fe);
void fentry_release(struct fentry *fe);

struct config_location;

/*
 * Answers a GET or HEAD from the folder of location l: rel is the path
 * below it (normalised, NUL-terminated, starts with '/'), uri the
 * request's, for a redirect to the folder.  status is 0, or the status
 * an error page is sent with.
 */
void static_serve(struct conn *c, const struct config_location *l,
    const char *uri, size_t urilen, const char *rel, size_t len, int status);

/* What rel is below l's folder: 0 nothing that can be served, 1 a file,
 * 2 a folder. */
int static_probe(const struct config_location *l, const char *rel,
    size_t len);

/*
 * Whether the normalised path names a regular file beneath server srv's
 * root, through the open-file cache: 0, or the status a request for it
 * gets (404, 403, 500).  For handlers that pass a file's name to an
 * application (FastCGI's SCRIPT_FILENAME).
 */
int static_file_status(const struct config_location *l, const char *path,
    size_t len);

#endif

/*
 * gzip and brotli for responses that are compressed once and kept: static
 * files and cached proxy responses.  Internal to worker/.
 */
#ifndef CORRAL_GZIP_H
#define CORRAL_GZIP_H

#include <stdbool.h>
#include <stddef.h>

struct config;

/* Whether a media type ("text/html; charset=utf-8") is in gzip_types. */
bool gzip_type(const struct config *cf, const char *type, size_t len);

/*
 * gzip (RFC 1952) of len bytes at p at the configured level, into a new
 * buffer of *outlen bytes; NULL on failure.
 */
char *gzip_bytes(const struct config *cf, const char *p, size_t len,
    size_t *outlen);

/* The same with brotli (RFC 7932) at brotli_comp_level. */
char *brotli_bytes(const struct config *cf, const char *p, size_t len,
    size_t *outlen);

#endif

/*
 * TLS contexts made by the master from the config: one per server with
 * a certificate, its key read while the master still has its privileges,
 * so workers never open key files.  Workers inherit the contexts across
 * fork and only add their per-process callbacks (worker/tls.h).
 *
 * Loading checks what a user gets wrong: an unreadable or expired
 * certificate, a key that does not match it, a cipher list OpenSSL does
 * not know; a chain that stops short of a trusted CA is a warning.
 * `corral -t`, the start and a reload run the same checks, so
 * a reload with a bad certificate keeps the old one serving.
 */
#ifndef CORRAL_TLS_CONF_H
#define CORRAL_TLS_CONF_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct ssl_ctx_st;
struct tls_conf;

/*
 * Builds the contexts of every server of cf (NULL, no error, when no
 * listen has "tls").  On error returns NULL and writes "FILE:LINE: what is
 * wrong" into err.  What clients may refuse but a sound setup can have (a
 * chain that does not reach a CA this system trusts) goes to warn as
 * "FILE:LINE: what"; warn may be NULL.
 */
struct tls_conf *tls_conf_load(const struct config *cf,
    void (*warn)(const char *msg), char *err, size_t errlen, bool *failed);

void tls_conf_free(struct tls_conf *tc);

/* The context for a server block: its own, or the default's. */
struct ssl_ctx_st *tls_conf_ctx(const struct tls_conf *tc, size_t server);

/* Every distinct context, for the workers' callbacks. */
size_t tls_conf_count(const struct tls_conf *tc);
struct ssl_ctx_st *tls_conf_nth(const struct tls_conf *tc, size_t i);

/*
 * Whether this kernel can take TLS records (the "tls" ULP); when not, why
 * is written into why.  Probed once on a loopback connection.
 */
bool tls_conf_ktls_probe(char *why, size_t len);

#endif

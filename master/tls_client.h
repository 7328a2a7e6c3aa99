/*
 * TLS to upstream peers: one client context per upstream group that has a
 * peer over TLS ("https://" or tls = on), made by the master from the
 * config and inherited by the workers (worker/upstream_tls.c drives the
 * sessions).  Verification is on by default (nginx's proxy_ssl_verify is
 * off by default; a proxy that trusts whoever answers is not what a user
 * who wrote https:// expects): against tls_trusted_certificate, or the
 * system's CAs.  `corral -t`, the start and a reload load the same way.
 */
#ifndef CORRAL_TLS_CLIENT_H
#define CORRAL_TLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct ssl_ctx_st;
struct tls_client;

/*
 * The contexts of every group of cf that speaks TLS (NULL, no error, when
 * none does).  On error returns NULL, sets *failed and writes "FILE:LINE:
 * what is wrong" into err.
 */
struct tls_client *tls_client_load(const struct config *cf, char *err,
    size_t errlen, bool *failed);

void tls_client_free(struct tls_client *tc);

/* Group i's context, or NULL when none of its peers speaks TLS. */
struct ssl_ctx_st *tls_client_ctx(const struct tls_client *tc, size_t i);

#endif

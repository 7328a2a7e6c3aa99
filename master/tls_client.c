/*
 * Client contexts for upstream groups over TLS (see tls_client.h).
 *
 * TLS 1.2 and 1.3 only, no compression, no renegotiation.  Sessions are
 * kept by the workers (one per peer, for the next connection), so the
 * context's own cache is off.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "master/config.h"
#include "master/tls_client.h"

struct tls_client {
	SSL_CTX **ctx;			/* one per cf->upstreams, or NULL */
	size_t n;
};

static void
fail(const struct config *cf, int line, char *err, size_t errlen,
    const char *what, const char *path)
{
	unsigned long e = ERR_peek_last_error();
	char why[256] = "";
	const char *file = config_where(cf, line, &line);

	if (e != 0)
		ERR_error_string_n(e, why, sizeof(why));
	ERR_clear_error();
	if (line > 0)
		snprintf(err, errlen, "%s:%d: %s \"%s\"%s%s%s", file, line,
		    what, path, e ? " (" : "", why, e ? ")" : "");
	else
		snprintf(err, errlen, "%s: %s%s%s%s", file, what,
		    e ? " (" : "", why, e ? ")" : "");
}

static SSL_CTX *
ctx_new(const struct config *cf, const struct config_upstream *u, char *err,
    size_t errlen)
{
	const char *ca = u->tls_trusted_certificate;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int fd;

	if (ctx == NULL) {
		fail(cf, 0, err, errlen, "cannot make a TLS context", NULL);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION |
	    SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* The request buffer may grow (and move) between two tries. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	if (!u->tls_verify)
		return ctx;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (ca == NULL) {
		if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			fail(cf, 0, err, errlen, "the system's CA "
			    "certificates cannot be loaded", NULL);
			SSL_CTX_free(ctx);
			return NULL;
		}
		return ctx;
	}
	/* OpenSSL's message for a missing file says little. */
	if ((fd = open(ca, O_RDONLY | O_CLOEXEC)) == -1) {
		int line, e = errno;
		const char *file = config_where(cf,
		    u->tls_trusted_certificate_line, &line);

		snprintf(err, errlen, "%s:%d: tls_trusted_certificate \"%s\": "
		    "%s", file, line, ca, strerror(e));
		SSL_CTX_free(ctx);
		return NULL;
	}
	close(fd);
	ERR_clear_error();
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		fail(cf, u->tls_trusted_certificate_line, err, errlen,
		    "tls_trusted_certificate: no PEM certificate in", ca);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

struct tls_client *
tls_client_load(const struct config *cf, char *err, size_t errlen,
    bool *failed)
{
	struct tls_client *tc;
	size_t i;
	bool any = false;

	*failed = false;
	for (i = 0; i < cf->nupstreams; i++)
		any |= cf->upstreams[i].any_tls;
	if (!any)
		return NULL;
	if ((tc = calloc(1, sizeof(*tc))) == NULL ||
	    (tc->ctx = calloc(cf->nupstreams, sizeof(*tc->ctx))) == NULL) {
		free(tc);
		snprintf(err, errlen, "%s: out of memory", cf->file);
		*failed = true;
		return NULL;
	}
	tc->n = cf->nupstreams;
	for (i = 0; i < cf->nupstreams; i++) {
		if (!cf->upstreams[i].any_tls)
			continue;
		tc->ctx[i] = ctx_new(cf, &cf->upstreams[i], err, errlen);
		if (tc->ctx[i] == NULL) {
			tls_client_free(tc);
			*failed = true;
			return NULL;
		}
	}
	return tc;
}

void
tls_client_free(struct tls_client *tc)
{
	if (tc == NULL)
		return;
	for (size_t i = 0; i < tc->n; i++)
		SSL_CTX_free(tc->ctx[i]);
	free(tc->ctx);
	free(tc);
}

SSL_CTX *
tls_client_ctx(const struct tls_client *tc, size_t i)
{
	return tc != NULL && i < tc->n ? tc->ctx[i] : NULL;
}

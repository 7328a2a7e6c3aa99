/*
 * TLS contexts, made by the master (see tls_conf.h).
 *
 * Every context gets the same protocol versions, ciphers and options from
 * the tls { } section; they differ only in the certificate.  A server
 * without a certificate shares the default one's context, as in nginx,
 * the default being the first server, or the first with a certificate.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "master/config.h"
#include "master/tls_conf.h"

#ifndef TCP_ULP
#define TCP_ULP 31
#endif

struct tls_conf {
	SSL_CTX **by_server;		/* one per cf->servers, shared refs */
	SSL_CTX **own;			/* distinct contexts */
	size_t nown;
	size_t nservers;
};

struct loading {
	const struct config *cf;
	char *err;
	size_t errlen;
	void (*warn)(const char *msg);
};

static void __attribute__((format(printf, 3, 4)))
fail(struct loading *l, int line, const char *fmt, ...)
{
	unsigned long e = ERR_peek_last_error();
	char why[256];
	const char *file = config_where(l->cf, line, &line);
	va_list ap;
	int n;

	if (line > 0)
		n = snprintf(l->err, l->errlen, "%s:%d: ", file, line);
	else
		n = snprintf(l->err, l->errlen, "%s: ", file);
	if (n < 0 || (size_t)n >= l->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(l->err + n, l->errlen - n, fmt, ap);
	va_end(ap);
	if (e != 0) {
		ERR_error_string_n(e, why, sizeof(why));
		n = (int)strlen(l->err);
		snprintf(l->err + n, l->errlen - n, " (%s)", why);
	}
	ERR_clear_error();
}

/* The file can be opened by us; OpenSSL's own message for it is vague. */
static int
readable(struct loading *l, const char *path, int line, const char *what)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd == -1) {
		ERR_clear_error();
		fail(l, line, "%s \"%s\": %s", what, path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static const char *
asn1_time_text(const ASN1_TIME *t, char *buf, size_t len)
{
	BIO *b = BIO_new(BIO_s_mem());
	int n = 0;

	buf[0] = '\0';
	if (b != NULL && ASN1_TIME_print(b, t))
		n = BIO_read(b, buf, (int)len - 1);
	buf[n > 0 ? n : 0] = '\0';
	BIO_free(b);
	return buf;
}

/* A certificate that clients would refuse is a config error, not news. */
static int
check_dates(struct loading *l, SSL_CTX *ctx, const struct config_server *s)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);
	char when[64];

	if (x == NULL) {
		fail(l, s->tls_certificate_line, "tls_certificate \"%s\" "
		    "holds no certificate", s->tls_certificate);
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
		fail(l, s->tls_certificate_line, "tls_certificate \"%s\" "
		    "expired on %s", s->tls_certificate,
		    asn1_time_text(X509_get0_notAfter(x), when, sizeof(when)));
		return -1;
	}
	if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
		fail(l, s->tls_certificate_line, "tls_certificate \"%s\" is "
		    "not valid before %s", s->tls_certificate,
		    asn1_time_text(X509_get0_notBefore(x), when, sizeof(when)));
		return -1;
	}
	return 0;
}

/* Whether a CA of this system's trust store issued x. */
static bool
system_issued(X509 *x)
{
	X509_STORE *st = X509_STORE_new();
	X509_STORE_CTX *sc = X509_STORE_CTX_new();
	X509 *issuer = NULL;
	bool found = false;

	if (st != NULL && sc != NULL && X509_STORE_set_default_paths(st) &&
	    X509_STORE_CTX_init(sc, st, x, NULL) &&
	    X509_STORE_CTX_get1_issuer(&issuer, sc, x) == 1)
		found = true;
	X509_free(issuer);
	X509_STORE_CTX_free(sc);
	X509_STORE_free(st);
	ERR_clear_error();
	return found;
}

/*
 * A missing chain: the file's last certificate is not self-signed and
 * neither the file nor this system's trust store holds its issuer (the
 * leaf alone where fullchain.pem was meant).  Browsers that cached the
 * intermediate still connect, curl and many phones do not.  A warning,
 * not an error: a leaf signed by a private CA that the clients trust is
 * a sound setup (nginx loads it without a word), and only the clients
 * know their trust store.
 */
static void
check_chain(struct loading *l, SSL_CTX *ctx, const struct config_server *s)
{
	X509 *cur = SSL_CTX_get0_certificate(ctx), *next = NULL;
	STACK_OF(X509) *chain = NULL;
	char msg[1024], subject[256], issuer[256];
	const char *file;
	int i, n, hops, line;

	if (l->warn == NULL || cur == NULL)
		return;
	SSL_CTX_get0_chain_certs(ctx, &chain);
	n = chain != NULL ? sk_X509_num(chain) : 0;
	for (hops = 0; hops <= n; hops++, cur = next) {
		if (X509_check_issued(cur, cur) == X509_V_OK)
			return;
		for (next = NULL, i = 0; i < n && next == NULL; i++)
			if (X509_check_issued(sk_X509_value(chain, i), cur) ==
			    X509_V_OK)
				next = sk_X509_value(chain, i);
		if (next == NULL)
			break;
	}
	ERR_clear_error();
	if (next != NULL || system_issued(cur))
		return;
	X509_NAME_oneline(X509_get_subject_name(cur), subject,
	    sizeof(subject));
	X509_NAME_oneline(X509_get_issuer_name(cur), issuer, sizeof(issuer));
	file = config_where(l->cf, s->tls_certificate_line, &line);
	snprintf(msg, sizeof(msg), "%s:%d: tls_certificate \"%s\": the "
	    "chain is incomplete: the issuer of \"%s\", \"%s\", is neither "
	    "in the file nor a CA this system trusts; clients that do not "
	    "have it refuse the certificate (the file should hold the full "
	    "chain, leaf first, as Let's Encrypt's fullchain.pem)",
	    file, line, s->tls_certificate, subject, issuer);
	l->warn(msg);
}

static int
set_protocols(struct loading *l, SSL_CTX *ctx)
{
	const struct config_tls *t = &l->cf->tls;
	int lo = (t->protocols & TLS_PROTO_12) ? TLS1_2_VERSION :
	    TLS1_3_VERSION;
	int hi = (t->protocols & TLS_PROTO_13) ? TLS1_3_VERSION :
	    TLS1_2_VERSION;

	if (!SSL_CTX_set_min_proto_version(ctx, lo) ||
	    !SSL_CTX_set_max_proto_version(ctx, hi)) {
		fail(l, 0, "tls protocols: not supported by this OpenSSL");
		return -1;
	}
	if ((t->protocols & TLS_PROTO_12) &&
	    !SSL_CTX_set_cipher_list(ctx, t->ciphers)) {
		fail(l, t->ciphers_line, "tls ciphers \"%s\": no cipher "
		    "OpenSSL knows", t->ciphers);
		return -1;
	}
	if ((t->protocols & TLS_PROTO_13) &&
	    !SSL_CTX_set_ciphersuites(ctx, t->ciphersuites)) {
		fail(l, t->ciphersuites_line, "tls ciphersuites \"%s\": no "
		    "TLS 1.3 suite OpenSSL knows", t->ciphersuites);
		return -1;
	}
	return 0;
}

static SSL_CTX *
ctx_new(struct loading *l, const struct config_server *s)
{
	const struct config_tls *t = &l->cf->tls;
	uint64_t opts;
	SSL_CTX *ctx;

	if (readable(l, s->tls_certificate, s->tls_certificate_line,
	    "tls_certificate") == -1 ||
	    readable(l, s->tls_certificate_key, s->tls_certificate_key_line,
	    "tls_certificate_key") == -1)
		return NULL;
	ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		fail(l, 0, "cannot make a TLS context");
		return NULL;
	}
	opts = SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF |
	    SSL_OP_SINGLE_DH_USE | SSL_OP_SINGLE_ECDH_USE;
	if (!t->session_tickets)
		opts |= SSL_OP_NO_TICKET;
	if (t->ktls)
		opts |= SSL_OP_ENABLE_KTLS;
	SSL_CTX_set_options(ctx, opts);
	/* Partial writes let a large queue leave record by record; the
	 * retried buffer is rebuilt at another address.  No
	 * SSL_MODE_RELEASE_BUFFERS: the worker gives buffers back itself,
	 * but not between the requests of a busy connection (worker/tls.c). */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* Whole records in one recv(), not a header and a body. */
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_dh_auto(ctx, 1);
	SSL_CTX_set_timeout(ctx, (long)(t->session_timeout_ms / 1000));
	if (set_protocols(l, ctx) == -1)
		goto failed;
	if (SSL_CTX_use_certificate_chain_file(ctx, s->tls_certificate) != 1) {
		fail(l, s->tls_certificate_line, "tls_certificate \"%s\": not "
		    "a PEM certificate chain", s->tls_certificate);
		goto failed;
	}
	/* A key of another certificate is reported below, as such. */
	if (SSL_CTX_use_PrivateKey_file(ctx, s->tls_certificate_key,
	    SSL_FILETYPE_PEM) != 1 && ERR_GET_REASON(ERR_peek_last_error())
	    != X509_R_KEY_VALUES_MISMATCH) {
		fail(l, s->tls_certificate_key_line, "tls_certificate_key "
		    "\"%s\": not a PEM private key", s->tls_certificate_key);
		goto failed;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		fail(l, s->tls_certificate_key_line, "tls_certificate_key "
		    "\"%s\" does not match tls_certificate \"%s\"",
		    s->tls_certificate_key, s->tls_certificate);
		goto failed;
	}
	if (check_dates(l, ctx, s) == -1)
		goto failed;
	check_chain(l, ctx, s);
	return ctx;

failed:
	SSL_CTX_free(ctx);
	return NULL;
}

static size_t
default_server(const struct config *cf)
{
	for (size_t i = 0; i < cf->nservers; i++)
		if (cf->servers[i].tls_certificate != NULL)
			return i;
	return 0;
}

struct tls_conf *
tls_conf_load(const struct config *cf, void (*warn)(const char *msg),
    char *err, size_t errlen, bool *failed)
{
	struct loading l = { cf, err, errlen, warn };
	struct tls_conf *tc;
	size_t i, def;

	*failed = false;
	if (errlen > 0)
		err[0] = '\0';
	if (!cf->any_tls)
		return NULL;
	ERR_clear_error();
	tc = calloc(1, sizeof(*tc));
	if (tc == NULL || (tc->by_server = calloc(cf->nservers,
	    sizeof(SSL_CTX *))) == NULL || (tc->own = calloc(cf->nservers,
	    sizeof(SSL_CTX *))) == NULL) {
		fail(&l, 0, "out of memory");
		goto failed;
	}
	tc->nservers = cf->nservers;
	for (i = 0; i < cf->nservers; i++) {
		if (cf->servers[i].tls_certificate == NULL)
			continue;
		tc->own[tc->nown] = ctx_new(&l, &cf->servers[i]);
		if (tc->own[tc->nown] == NULL)
			goto failed;
		tc->by_server[i] = tc->own[tc->nown++];
	}
	def = default_server(cf);
	for (i = 0; i < cf->nservers; i++)
		if (tc->by_server[i] == NULL)
			tc->by_server[i] = tc->by_server[def];
	return tc;

failed:
	*failed = true;
	tls_conf_free(tc);
	return NULL;
}

void
tls_conf_free(struct tls_conf *tc)
{
	if (tc == NULL)
		return;
	for (size_t i = 0; i < tc->nown; i++)
		SSL_CTX_free(tc->own[i]);
	free(tc->own);
	free(tc->by_server);
	free(tc);
}

SSL_CTX *
tls_conf_ctx(const struct tls_conf *tc, size_t server)
{
	return server < tc->nservers ? tc->by_server[server] :
	    tc->by_server[0];
}

size_t
tls_conf_count(const struct tls_conf *tc)
{
	return tc == NULL ? 0 : tc->nown;
}

SSL_CTX *
tls_conf_nth(const struct tls_conf *tc, size_t i)
{
	return tc->own[i];
}

bool
tls_conf_ktls_probe(char *why, size_t len)
{
	struct sockaddr_in sa;
	socklen_t salen = sizeof(sa);
	int lfd, cfd = -1, afd = -1;
	bool ok = false;

	snprintf(why, len, "no loopback socket");
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd == -1 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
	    listen(lfd, 1) == -1 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &salen) == -1)
		goto out;
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd == -1 || connect(cfd, (struct sockaddr *)&sa, salen) == -1)
		goto out;
	afd = accept(lfd, NULL, NULL);
	if (afd == -1)
		goto out;
	if (setsockopt(afd, IPPROTO_TCP, TCP_ULP, "tls", 3) == 0)
		ok = true;
	else
		snprintf(why, len, "the kernel has no TLS ULP: %s",
		    errno == ENOENT ? "module tls not loaded" :
		    strerror(errno));
out:
	if (afd != -1)
		close(afd);
	if (cfd != -1)
		close(cfd);
	if (lfd != -1)
		close(lfd);
	return ok;
}

/*
 * TLS sessions of client connections (see tls.h).
 *
 * OpenSSL reads and writes the socket itself; what it needs next comes
 * back as TLS_WANT_READ or TLS_WANT_WRITE and the connection waits for
 * that event.  Every SSL_* call starts with an empty error queue, so an
 * error is always this call's own.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "master/tls_conf.h"
#include "shm/stats.h"
#include "worker/conn_impl.h"
#include "worker/tls.h"
#include "worker/tls_session.h"

/* ALPN: what we speak, in wire format; h2 would go first here. */
static const unsigned char alpn_protos[] = "\x08http/1.1";

/* SNI: the certificate of the server block that has the name. */
static int
sni_cb(SSL *ssl, int *alert, void *arg)
{
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	struct span host;
	SSL_CTX *ctx;

	if (name == NULL)
		return SSL_TLSEXT_ERR_NOACK;
	host.p = name;
	host.len = strlen(name);
	/* Names are matched among the servers of the connection's address
	 * (tls_new() keeps its listen entry). */
	ctx = tls_conf_ctx(worker.rt->tls, request_server(host,
	    (int)(intptr_t)SSL_get_app_data(ssl)));
	if (ctx != SSL_get_SSL_CTX(ssl))
		SSL_set_SSL_CTX(ssl, ctx);
	return SSL_TLSEXT_ERR_OK;
}

static int
alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned char *sel;

	if (SSL_select_next_proto(&sel, outlen, alpn_protos,
	    sizeof(alpn_protos) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

int
tls_worker_init(const struct runtime *rt, struct store *sessions)
{
	SSL_CTX *ctx;

	for (size_t i = 0; i < tls_conf_count(rt->tls); i++) {
		ctx = tls_conf_nth(rt->tls, i);
		SSL_CTX_set_tlsext_servername_callback(ctx, sni_cb);
		SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
		if (tls_session_setup(ctx, &rt->cf->tls, sessions,
		    rt->tls_keys) == -1)
			return -1;
	}
	return 0;
}

/*
 * An empty error queue before a call, so that SSL_get_error() judges
 * this call alone.  Clearing walks every slot of the queue; looking at it
 * is cheaper, and it is empty but after a failure.
 */
void
tls_fresh_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

int
tls_wants(SSL *ssl, int rc, int *err)
{
	*err = SSL_get_error(ssl, rc);
	if (*err == SSL_ERROR_WANT_READ)
		return TLS_WANT_READ;
	if (*err == SSL_ERROR_WANT_WRITE)
		return TLS_WANT_WRITE;
	return TLS_FAILED;
}

const char *
tls_why(int err)
{
	unsigned long e = ERR_peek_last_error();
	const char *r;

	if (e == 0)
		return err == SSL_ERROR_SYSCALL && errno != 0 ?
		    strerror(errno) : "connection closed";
	r = ERR_reason_error_string(e);
	return r != NULL ? r : "TLS error";
}

SSL *
tls_new(int fd, int lidx)
{
	struct span none = { NULL, 0 };
	SSL *ssl = SSL_new(tls_conf_ctx(worker.rt->tls,
	    request_server(none, lidx)));

	if (ssl == NULL || SSL_set_fd(ssl, fd) != 1) {
		log_error("cannot make a TLS session: %s",
		    ERR_reason_error_string(ERR_get_error()));
		ERR_clear_error();
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_app_data(ssl, (void *)(intptr_t)lidx);
	SSL_set_accept_state(ssl);
	return ssl;
}

/*
 * Before OpenSSL takes a byte, a look at the first one tells a TLS
 * handshake record from a plain HTTP request (an upper-case method).
 */
static int
sniff(int fd, const char *peer)
{
	unsigned char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return TLS_WANT_READ;
	if (n <= 0)
		return TLS_FAILED;
	if (b == TLS_RECORD_HANDSHAKE)
		return 0;
	if (b >= 'A' && b <= 'Z') {
		log_info("client %s sent plain HTTP to a TLS port", peer);
		STATS_INC(tls_failed);
		return TLS_PLAIN_HTTP;
	}
	log_info("client %s: TLS handshake failed: not a TLS record", peer);
	STATS_INC(tls_failed);
	return TLS_FAILED;
}

int
tls_handshake(SSL *ssl, int fd, const char *peer)
{
	int rc, err;

	if (BIO_number_read(SSL_get_rbio(ssl)) == 0 &&
	    (rc = sniff(fd, peer)) != 0)
		return rc;
	tls_fresh_errors();
	errno = 0;
	rc = SSL_do_handshake(ssl);
	if (rc == 1) {
		if (SSL_session_reused(ssl))
			STATS_INC(tls_resumed);
		else
			STATS_INC(tls_full);
		log_debug("client %s: %s %s%s", peer, SSL_get_version(ssl),
		    SSL_get_cipher_name(ssl),
		    SSL_session_reused(ssl) ? ", resumed" : "");
		return 0;
	}
	if ((rc = tls_wants(ssl, rc, &err)) == TLS_WANT_READ)
		tls_release(ssl);
	if (rc != TLS_FAILED)
		return rc;
	STATS_INC(tls_failed);
	log_info("client %s: TLS handshake failed: %s", peer, tls_why(err));
	ERR_clear_error();
	return TLS_FAILED;
}

/* The result of a read or write that did not move a byte. */
static ssize_t
io_failed(SSL *ssl, const char *peer, const char *what)
{
	int err, rc = tls_wants(ssl, 0, &err);

	if (rc != TLS_FAILED)
		return rc;
	switch (err) {
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (errno == 0)
			return 0;
		if (errno == EAGAIN || errno == EINTR)
			return TLS_WANT_READ;
		if (errno != ECONNRESET && errno != EPIPE)
			log_at(L_INFO, errno, "%s %s", what, peer);
		return -1;
	default:
		log_info("client %s: TLS %s failed: %s", peer, what,
		    tls_why(err));
		ERR_clear_error();
		return -1;
	}
}

ssize_t
tls_recv(SSL *ssl, void *buf, size_t len, const char *peer)
{
	size_t n;

	tls_fresh_errors();
	errno = 0;
	if (SSL_read_ex(ssl, buf, len, &n) == 1)
		return (ssize_t)n;
	return io_failed(ssl, peer, "recv from");
}

ssize_t
tls_send(SSL *ssl, const void *buf, size_t len, const char *peer)
{
	size_t sent;
	ssize_t n;

	tls_fresh_errors();
	errno = 0;
	if (SSL_write_ex(ssl, buf, len, &sent) == 1)
		return (ssize_t)sent;
	n = io_failed(ssl, peer, "send to");
	return n == 0 ? -1 : n;
}

ssize_t
tls_sendfile(SSL *ssl, int fd, off_t off, size_t len, const char *peer)
{
	ossl_ssize_t n;

	tls_fresh_errors();
	errno = 0;
	n = SSL_sendfile(ssl, fd, off, len, 0);
	if (n > 0)
		return (ssize_t)n;
	n = io_failed(ssl, peer, "sendfile to");
	return n == 0 ? -1 : n;
}

const char *
tls_version(SSL *ssl)
{
	return SSL_get_version(ssl);
}

bool
tls_ktls_send(SSL *ssl)
{
	return BIO_get_ktls_send(SSL_get_wbio(ssl)) != 0;
}

bool
tls_pending(SSL *ssl)
{
	return SSL_has_pending(ssl) != 0;
}

/*
 * Buffers of idle sessions.  Given back whenever they are empty
 * (SSL_MODE_RELEASE_BUFFERS, as nginx does), OpenSSL's read and write
 * buffers, about 34 KB, were allocated and freed around every request:
 * 6% of the instructions of a 100-byte response on a kept-alive
 * connection.  Now a connection that goes idle after a response keeps
 * them for its next request, while fewer than KEPT_MAX of this worker's
 * idle connections do so and for one to two seconds at most
 * (tls_idle_sweep()).  Past either bound, and whenever a session waits
 * for the peer at another point (tls_release()), they go back as before,
 * so a worker holds at most KEPT_MAX sets more than it did.
 */
#define KEPT_MAX	32
#define KEPT_MS		1000
_Static_assert(KEPT_MAX < 256, "struct conn's tls_kept is 8 bits");

static struct kept {
	SSL		*ssl;
	uint64_t	 since_ms;
	unsigned char	*slot;		/* the connection's: index + 1 */
} kept[KEPT_MAX];
static unsigned nkept;

static void
kept_remove(unsigned char *slot)
{
	unsigned i = *slot - 1u;

	*slot = 0;
	if (i != --nkept) {
		kept[i] = kept[nkept];
		*kept[i].slot = (unsigned char)(i + 1);
	}
	STATS_ADD(tls_buffers_kept, -1);
}

void
tls_release(SSL *ssl)
{
	/* Not while decrypted or raw bytes wait in them. */
	if (!SSL_has_pending(ssl))
		SSL_free_buffers(ssl);
}

void
tls_idle(SSL *ssl, unsigned char *slot, bool on)
{
	if (!on) {
		if (*slot != 0)
			kept_remove(slot);
		return;
	}
	if (*slot != 0)
		return;
	if (nkept == KEPT_MAX) {
		tls_release(ssl);
		return;
	}
	kept[nkept] = (struct kept){ ssl, worker.now_ms, slot };
	*slot = (unsigned char)++nkept;
	STATS_ADD(tls_buffers_kept, 1);
}

void
tls_idle_sweep(void)
{
	/* Downwards: kept_remove() fills slot i from the top, seen already. */
	for (unsigned i = nkept; i-- > 0;) {
		if (worker.now_ms - kept[i].since_ms < KEPT_MS)
			continue;
		tls_release(kept[i].ssl);
		kept_remove(kept[i].slot);
	}
}

/*
 * Once only: a second SSL_shutdown() would wait for the peer's
 * close_notify, fail, and make OpenSSL drop the session from the cache.
 */
void
tls_shutdown(SSL *ssl)
{
	if (!SSL_is_init_finished(ssl) ||
	    (SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN))
		return;
	ERR_clear_error();
	SSL_shutdown(ssl);
	ERR_clear_error();
}

void
tls_free(SSL *ssl)
{
	SSL_free(ssl);
}

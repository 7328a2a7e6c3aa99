/*
 * TLS on a worker's client connections, over corral's own non-blocking
 * connection layer (worker/conn.c, worker/output.c): the handshake, reads
 * and writes, with OpenSSL's WANT_READ / WANT_WRITE turned into the
 * events the connection waits for.  SNI picks the server's certificate,
 * ALPN offers http/1.1, and sessions resume in any worker (a session
 * cache in the shared store and ticket keys from the master).
 */
#ifndef CORRAL_TLS_H
#define CORRAL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct runtime;
struct ssl_st;
struct store;

/* The first byte of a TLS connection: a handshake record. */
#define TLS_RECORD_HANDSHAKE	0x16

/* What an operation on the session needs before it can go on. */
#define TLS_WANT_READ	(-2)
#define TLS_WANT_WRITE	(-3)

/* Handshake outcomes besides 0 (done) and the two wants. */
#define TLS_FAILED	(-1)
#define TLS_PLAIN_HTTP	(-4)		/* plain HTTP sent to a TLS port */

/*
 * At worker start: SNI, ALPN, the shared session cache (in sessions, may
 * be NULL) and the ticket keys on every context of rt.  0, or -1 logged.
 */
int tls_worker_init(const struct runtime *rt, struct store *sessions);

/* A session for an accepted socket; NULL (logged) on failure. */
struct ssl_st *tls_new(int fd, int lidx);

/*
 * Drives the handshake: 0 when done, TLS_WANT_READ / TLS_WANT_WRITE, or
 * TLS_FAILED / TLS_PLAIN_HTTP (logged at info).  Outcomes are counted in
 * shm/stats.h (tls_full, tls_resumed, tls_failed).
 */
int tls_handshake(struct ssl_st *ssl, int fd, const char *peer);

/* Bytes read, 0 at the end of the stream, -1 on error, or a want. */
ssize_t tls_recv(struct ssl_st *ssl, void *buf, size_t len,
    const char *peer);

/* Bytes written (> 0), -1 on error, or a want. */
ssize_t tls_send(struct ssl_st *ssl, const void *buf, size_t len,
    const char *peer);

/* Like tls_send, from a file, through kernel TLS. */
ssize_t tls_sendfile(struct ssl_st *ssl, int fd, off_t off, size_t len,
    const char *peer);

/*
 * Calls that share tls.c's error handling (the upstream side too).
 * tls_fresh_errors() before an SSL call: an empty error queue, so that the
 * call's outcome is its own.  tls_wants() after a call that returned rc:
 * TLS_WANT_READ, TLS_WANT_WRITE, or TLS_FAILED with SSL_get_error()'s
 * code in *err; tls_why(err) then says why, for a log line.
 */
void tls_fresh_errors(void);
int tls_wants(struct ssl_st *ssl, int rc, int *err);
const char *tls_why(int err);

/* "TLSv1.3" and so on: a static string. */
const char *tls_version(struct ssl_st *ssl);

/* Kernel TLS encrypts what this session sends. */
bool tls_ktls_send(struct ssl_st *ssl);

/* Decrypted or raw bytes wait inside the session, not in the socket. */
bool tls_pending(struct ssl_st *ssl);

/*
 * Over an idle keep-alive connection (on) and when it is busy again or
 * closes (off): whether its session keeps its buffers meanwhile; kept is
 * the connection's own, zeroed with it.  tls_idle_sweep(), every second,
 * frees the buffers of sessions idle for a second or more.
 */
void tls_idle(struct ssl_st *ssl, unsigned char *kept, bool on);
void tls_idle_sweep(void);

/* The session waits for the peer: its buffers go back if they are empty. */
void tls_release(struct ssl_st *ssl);

/* Sends close_notify if it can without blocking. */
void tls_shutdown(struct ssl_st *ssl);

void tls_free(struct ssl_st *ssl);

#endif

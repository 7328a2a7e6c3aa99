/*
 * Resumption across workers (see tls_session.h).
 *
 * A session is stored DER-encoded; a worker that gets a session ID it did
 * not issue decodes the copy another worker stored.  Tickets carry the
 * session themselves, sealed with AES-256-CBC and HMAC-SHA256 under the
 * current shared key; one sealed with the previous key still opens and is
 * replaced by a new ticket.
 */
#include <stdbool.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include "master/config.h"
#include "master/log.h"
#include "shm/store.h"
#include "shm/tls_keys.h"
#include "worker/cache.h"
#include "worker/tls_session.h"

#define SESSION_MAX	4096		/* larger encodings are not kept */
#define SID_CTX		"corral"	/* one for every server: a session
					   resumes whatever the SNI */

static struct store *sessions;
static struct tls_keys *keys;
static EVP_CIPHER *aes;

/*
 * Sessions this worker decoded, by ID: decoding one (d2i_SSL_SESSION) was
 * 25,000 of the 380,000 instructions of a connection resumed by session
 * ID.  The store stays the authority: a session is taken from here only
 * while the store still has its ID, so one removed by any worker (a
 * connection that failed, RFC 5246 7.2.2) resumes nowhere.  IDs are
 * random and never stored twice, so the store's copy is this one.
 * Direct-mapped; a slot taken by another ID frees its session (the
 * connections using it keep their own references).
 */
#define DECODED_SLOTS	256

static struct decoded {
	SSL_SESSION	*sess;
	unsigned	 idlen;
	unsigned char	 id[SSL_MAX_SSL_SESSION_ID_LENGTH];
} decoded[DECODED_SLOTS];

static struct decoded *
decoded_slot(const unsigned char *id, unsigned len)
{
	unsigned h = 0;

	/* The IDs are random: their first bytes make a fine index. */
	for (unsigned i = 0; i < len && i < sizeof(h); i++)
		h = h << 8 | id[i];
	return &decoded[h % DECODED_SLOTS];
}

static bool
decoded_is(const struct decoded *d, const unsigned char *id, unsigned len)
{
	return d->sess != NULL && d->idlen == len &&
	    memcmp(d->id, id, len) == 0;
}

static void
decoded_drop(struct decoded *d)
{
	SSL_SESSION_free(d->sess);
	d->sess = NULL;
}

static size_t
session_key(unsigned char *key, const unsigned char *id, unsigned len)
{
	key[0] = CACHE_NS_TLS_SESSION;
	memcpy(key + 1, id, len);
	return (size_t)len + 1;
}

static int
new_cb(SSL *ssl, SSL_SESSION *sess)
{
	unsigned char key[1 + SSL_MAX_SSL_SESSION_ID_LENGTH];
	unsigned char buf[SESSION_MAX], *p = buf;
	const unsigned char *id;
	unsigned idlen;
	enum store_result rc;
	int n;

	/*
	 * OpenSSL calls this for every TLS 1.3 ticket it issues, two a
	 * handshake, stateless ones too.  Those carry the session in the
	 * ticket and come back as a ticket, never as an ID to look up (no
	 * early data here), so storing them only filled the store.
	 */
	if (SSL_version(ssl) == TLS1_3_VERSION &&
	    !(SSL_get_options(ssl) & SSL_OP_NO_TICKET) &&
	    SSL_get_max_early_data(ssl) == 0)
		return 0;
	n = i2d_SSL_SESSION(sess, NULL);
	id = SSL_SESSION_get_id(sess, &idlen);
	if (n <= 0 || n > (int)sizeof(buf) || idlen == 0 ||
	    idlen > SSL_MAX_SSL_SESSION_ID_LENGTH)
		return 0;
	i2d_SSL_SESSION(sess, &p);
	rc = store_set(sessions, key, session_key(key, id, idlen), buf,
	    (size_t)n, (int64_t)SSL_SESSION_get_timeout(sess), 0);
	if (rc != STORE_OK)
		log_debug("TLS session not stored: store result %d", rc);
	return 0;			/* we keep no reference */
}

static SSL_SESSION *
get_cb(SSL *ssl, const unsigned char *id, int len, int *copy)
{
	unsigned char key[1 + SSL_MAX_SSL_SESSION_ID_LENGTH];
	struct store_ref ref;
	const unsigned char *p;
	SSL_SESSION *sess;

	struct decoded *d;

	/* OpenSSL takes its own reference; ours stays in decoded[]. */
	*copy = 1;
	if (len <= 0 || len > SSL_MAX_SSL_SESSION_ID_LENGTH)
		return NULL;
	d = decoded_slot(id, (unsigned)len);
	if (store_get(sessions, key, session_key(key, id, (unsigned)len),
	    &ref) != STORE_HIT) {
		if (decoded_is(d, id, (unsigned)len))
			decoded_drop(d);	/* expired or evicted */
		return NULL;
	}
	if (decoded_is(d, id, (unsigned)len) &&
	    SSL_SESSION_is_resumable(d->sess)) {
		store_release(sessions, &ref);
		return d->sess;
	}
	p = ref.data;
	sess = d2i_SSL_SESSION(NULL, &p, (long)ref.len);
	store_release(sessions, &ref);
	if (sess == NULL)
		return NULL;
	if (d->sess != NULL)
		decoded_drop(d);
	d->sess = sess;
	d->idlen = (unsigned)len;
	memcpy(d->id, id, (size_t)len);
	return sess;
}

static void
remove_cb(SSL_CTX *ctx, SSL_SESSION *sess)
{
	unsigned char key[1 + SSL_MAX_SSL_SESSION_ID_LENGTH];
	const unsigned char *id;
	unsigned idlen;
	struct decoded *d;

	id = SSL_SESSION_get_id(sess, &idlen);
	if (idlen == 0 || idlen > SSL_MAX_SSL_SESSION_ID_LENGTH)
		return;
	store_delete(sessions, key, session_key(key, id, idlen));
	if (decoded_is(d = decoded_slot(id, idlen), id, idlen))
		decoded_drop(d);
}

static int
mac_key(EVP_MAC_CTX *hctx, unsigned char *key)
{
	OSSL_PARAM params[3];

	params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key,
	    TLS_KEY_HMAC);
	params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
	    (char *)"SHA256", 0);
	params[2] = OSSL_PARAM_construct_end();
	return EVP_MAC_CTX_set_params(hctx, params);
}

/* OpenSSL's contract: 1 ok, 2 ok but issue a new ticket, 0 unknown key
 * (full handshake), -1 error. */
static int
ticket_cb(SSL *ssl, unsigned char *name, unsigned char *iv,
    EVP_CIPHER_CTX *ectx, EVP_MAC_CTX *hctx, int enc)
{
	struct tls_key k[2];
	int n = tls_keys_read(keys, k), i, rc = -1;

	if (enc) {
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(aes)) == 1 &&
		    EVP_EncryptInit_ex(ectx, aes, NULL, k[0].aes, iv) == 1 &&
		    mac_key(hctx, k[0].hmac) == 1) {
			memcpy(name, k[0].name, TLS_KEY_NAME);
			rc = 1;
		}
		goto out;
	}
	for (i = 0; i < n; i++)
		if (memcmp(name, k[i].name, TLS_KEY_NAME) == 0)
			break;
	if (i == n) {
		rc = 0;
		goto out;
	}
	if (mac_key(hctx, k[i].hmac) == 1 &&
	    EVP_DecryptInit_ex(ectx, aes, NULL, k[i].aes, iv) == 1)
		rc = i == 0 ? 1 : 2;
out:
	OPENSSL_cleanse(k, sizeof(k));
	return rc;
}

int
tls_session_setup(SSL_CTX *ctx, const struct config_tls *t,
    struct store *st, struct tls_keys *tk)
{
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)SID_CTX,
	    sizeof(SID_CTX) - 1);
	sessions = t->session_cache ? st : NULL;
	if (sessions != NULL) {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER |
		    SSL_SESS_CACHE_NO_INTERNAL);
		SSL_CTX_sess_set_new_cb(ctx, new_cb);
		SSL_CTX_sess_set_get_cb(ctx, get_cb);
		SSL_CTX_sess_set_remove_cb(ctx, remove_cb);
	} else {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	}
	if (!t->session_tickets || tk == NULL)
		return 0;
	keys = tk;
	if (aes == NULL && (aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC",
	    NULL)) == NULL) {
		log_error("TLS tickets: no AES-256-CBC in this OpenSSL");
		return -1;
	}
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
	return 0;
}

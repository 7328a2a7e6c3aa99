/*
 * HTTP Basic authentication (RFC 7617) against an htpasswd file read when
 * the config is loaded.  Hashes are checked with crypt(3) from libxcrypt
 * (bcrypt, SHA-crypt, yescrypt); as they are slow on purpose, a worker
 * remembers the last credentials it verified, by a keyed hash, so a
 * client that sends the same header on every request costs one crypt.
 */
#include <crypt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <xxhash.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/access.h"
#include "worker/conn_impl.h"

#define AUTH_MAX	1024	/* longest user:password */
#define VERIFIED_MAX	64

static struct crypt_data *cd;
static XXH128_hash_t verified[VERIFIED_MAX];
static unsigned verified_next;
static uint64_t secret;
static char challenge[512];

static int
b64val(unsigned char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

/* Decodes base64 with padding; -1 when it is not base64. */
static ssize_t
b64decode(const char *p, size_t len, char *out, size_t outlen)
{
	size_t i, n = 0;
	uint32_t acc = 0;
	int bits = 0, v, pad = 0;

	for (i = 0; i < len; i++) {
		if (p[i] == '=') {
			pad++;
			continue;
		}
		if (pad > 0 || (v = b64val((unsigned char)p[i])) < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n + 1 >= outlen)
				return -1;
			out[n++] = (char)(acc >> bits & 0xff);
		}
	}
	if (pad > 2 || (len % 4) != 0)
		return -1;
	out[n] = '\0';
	return (ssize_t)n;
}

/* Compares two strings in time that depends only on their lengths. */
static bool
same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i;
	unsigned char d = la != lb;

	for (i = 0; i < la && i < lb; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

static bool
verify(const struct config_user *u, const char *password)
{
	const char *h;

	if (cd == NULL && (cd = calloc(1, sizeof(*cd))) == NULL) {
		log_error("auth_basic: out of memory");
		return false;
	}
	h = crypt_r(password, u->hash, cd);
	return h != NULL && h[0] != '*' && same(h, u->hash);
}

static XXH128_hash_t
cred_hash(int file, const char *cred, size_t len)
{
	if (secret == 0 && getrandom(&secret, sizeof(secret), 0) !=
	    sizeof(secret))
		secret = (uint64_t)(uintptr_t)&secret ^ 0x9e3779b97f4a7c15ULL;
	return XXH3_128bits_withSeed(cred, len, secret + (uint64_t)file);
}

static bool
verified_before(XXH128_hash_t h)
{
	for (unsigned i = 0; i < VERIFIED_MAX; i++)
		if (XXH128_isEqual(verified[i], h))
			return true;
	return false;
}

bool
auth_check(struct conn *c, const struct config_location *l)
{
	const struct config_htpasswd *f;
	struct span v = http_header_get(&c->rq->req, "Authorization");
	char cred[AUTH_MAX + 1], *colon;
	XXH128_hash_t h;
	ssize_t n;
	size_t i;

	if (l->auth_file < 0 || (size_t)l->auth_file >=
	    worker.cf->nhtpasswd)
		return false;
	f = &worker.cf->htpasswd[l->auth_file];
	if (v.p == NULL)
		return false;
	if (v.len < 6 || strncasecmp(v.p, "Basic ", 6) != 0) {
		log_info("client %s: Authorization is not Basic", c->peer);
		return false;
	}
	for (i = 6; i < v.len && v.p[i] == ' '; i++)
		;
	n = b64decode(v.p + i, v.len - i, cred, sizeof(cred));
	if (n < 0 || (colon = memchr(cred, ':', (size_t)n)) == NULL) {
		log_info("client %s: bad Basic credentials", c->peer);
		return false;
	}
	h = cred_hash(l->auth_file, cred, (size_t)n);
	if (verified_before(h))
		return true;
	*colon = '\0';
	for (i = 0; i < f->nusers; i++) {
		if (strcmp(f->users[i].name, cred) != 0)
			continue;
		if (!verify(&f->users[i], colon + 1))
			break;
		verified[verified_next++ % VERIFIED_MAX] = h;
		return true;
	}
	log_info("client %s: user \"%s\": %s", c->peer, cred,
	    i < f->nusers ? "password mismatch" : "not found");
	return false;
}

const char *
auth_challenge(const struct config_location *l, size_t *len)
{
	int n = snprintf(challenge, sizeof(challenge),
	    "WWW-Authenticate: Basic realm=\"%s\", charset=\"UTF-8\"\r\n",
	    l->auth_realm);

	*len = n > 0 && (size_t)n < sizeof(challenge) ? (size_t)n : 0;
	return challenge;
}

void
auth_free(void)
{
	free(cd);
	cd = NULL;
}

/*
 * Session ticket keys shared by every worker: the master makes them in a
 * small mapping of their own before it forks, rotates them, and keeps
 * them across reloads, so any worker of any generation decrypts a ticket
 * that another issued.  After a rotation the previous key still decrypts
 * (and the ticket is renewed) for one more period.
 *
 * They are not in the cache store on purpose: a store entry can be
 * evicted, and a lost key is every client's full handshake.
 *
 * The master is the only writer; readers copy under a sequence counter
 * and retry if a rotation raced them, so no lock is ever taken.
 */
#ifndef CORRAL_TLS_KEYS_H
#define CORRAL_TLS_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#define TLS_KEY_NAME	16
#define TLS_KEY_AES	32		/* AES-256-CBC */
#define TLS_KEY_HMAC	32		/* HMAC-SHA256 */

struct tls_key {
	uint8_t name[TLS_KEY_NAME];
	uint8_t aes[TLS_KEY_AES];
	uint8_t hmac[TLS_KEY_HMAC];
};

struct tls_keys;

/* Master, before fork: the mapping with a first key; NULL on error. */
struct tls_keys *tls_keys_create(void);
/* Master: makes a new current key when rotate_ms has passed; true then. */
bool tls_keys_tick(struct tls_keys *k, uint64_t now_ms, uint64_t rotate_ms);
/* Current key (keys[0]) and the previous one (keys[1]); returns 2, or 1
   before the first rotation. */
int tls_keys_read(const struct tls_keys *k, struct tls_key keys[2]);
/* Master, at exit. */
void tls_keys_destroy(struct tls_keys *k);

#endif

/*
 * Ticket keys in a shared mapping (see tls_keys.h): a seqlock with one
 * writer, the master.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <openssl/rand.h>

#include "shm/tls_keys.h"

struct tls_keys {
	uint64_t seq;			/* odd while the master writes */
	uint64_t made_ms;		/* when keys[0] was made (master) */
	int nkeys;
	struct tls_key keys[2];
};

static int
key_make(struct tls_key *key)
{
	return RAND_bytes((unsigned char *)key, sizeof(*key)) == 1 ? 0 : -1;
}

struct tls_keys *
tls_keys_create(void)
{
	struct tls_keys *k;

	k = mmap(NULL, sizeof(*k), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (k == MAP_FAILED)
		return NULL;
	memset(k, 0, sizeof(*k));
	if (key_make(&k->keys[0]) == -1) {
		munmap(k, sizeof(*k));
		return NULL;
	}
	k->nkeys = 1;
	return k;
}

bool
tls_keys_tick(struct tls_keys *k, uint64_t now_ms, uint64_t rotate_ms)
{
	struct tls_key next;

	if (k->made_ms == 0)
		k->made_ms = now_ms;	/* the first key's period starts */
	if (now_ms - k->made_ms < rotate_ms || key_make(&next) == -1)
		return false;
	__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	k->keys[1] = k->keys[0];
	k->keys[0] = next;
	k->nkeys = 2;
	__atomic_store_n(&k->seq, k->seq + 1, __ATOMIC_RELEASE);
	k->made_ms = now_ms;
	memset(&next, 0, sizeof(next));
	return true;
}

int
tls_keys_read(const struct tls_keys *k, struct tls_key keys[2])
{
	uint64_t s1, s2;
	int n;

	do {
		s1 = __atomic_load_n(&k->seq, __ATOMIC_ACQUIRE);
		n = k->nkeys;
		memcpy(keys, k->keys, sizeof(k->keys));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&k->seq, __ATOMIC_RELAXED);
	} while ((s1 & 1) || s1 != s2);
	return n;
}

void
tls_keys_destroy(struct tls_keys *k)
{
	if (k != NULL) {
		memset(k, 0, sizeof(*k));
		munmap(k, sizeof(*k));
	}
}

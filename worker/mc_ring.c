/*
 * The ketama ring (see mc_ring.h).  The arithmetic follows libmemcached's
 * update_continuum() to the float, so that both place every key alike.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <openssl/evp.h>

#include "master/config.h"
#include "worker/mc_ring.h"

#define POINTS_PER_SERVER	160	/* MEMCACHED_POINTS_PER_SERVER_KETAMA */
#define POINTS_PER_HASH		4
#define DEFAULT_PORT		11211

struct point {
	uint32_t value;
	unsigned peer;
};

struct mc_ring {
	size_t n;
	struct point p[];
};

static void
md5(const void *p, size_t n, unsigned char out[16])
{
	unsigned int len = 16;

	if (EVP_Digest(p, n, out, &len, EVP_md5(), NULL) != 1)
		memset(out, 0, 16);
}

static uint32_t
word(const unsigned char *d, unsigned i)
{
	return (uint32_t)d[3 + i * 4] << 24 | (uint32_t)d[2 + i * 4] << 16 |
	    (uint32_t)d[1 + i * 4] << 8 | d[i * 4];
}

uint32_t
mc_ketama_hash(const char *key, size_t klen)
{
	unsigned char d[16];

	md5(key, klen, d);
	return word(d, 0);
}

/* The host as libmemcached holds it, and the port (0: a unix socket). */
static void
host_of(const struct config_peer *p, char *host, size_t len, unsigned *port)
{
	const struct sockaddr_in *in = (const void *)&p->addr;
	const struct sockaddr_in6 *in6 = (const void *)&p->addr;

	*port = 0;
	switch (p->addr.ss_family) {
	case AF_INET:
		inet_ntop(AF_INET, &in->sin_addr, host, (socklen_t)len);
		*port = ntohs(in->sin_port);
		break;
	case AF_INET6:
		inet_ntop(AF_INET6, &in6->sin6_addr, host, (socklen_t)len);
		*port = ntohs(in6->sin6_port);
		break;
	default:
		snprintf(host, len, "%s",
		    ((const struct sockaddr_un *)&p->addr)->sun_path);
		break;
	}
}

/* A server's points: its share of 160 per live server, in fours. */
static unsigned
points(float pct, unsigned live)
{
	float f = pct * POINTS_PER_SERVER / POINTS_PER_HASH * (float)live;

	return (unsigned)floor((double)f + 0.0000000001) * POINTS_PER_HASH;
}

static int
point_cmp(const void *a, const void *b)
{
	const struct point *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

struct mc_ring *
mc_ring_build(const struct config_peer *peers, size_t n, const bool *live)
{
	struct mc_ring *r;
	unsigned char d[16];
	char host[128], name[160];
	uint64_t total = 0;
	unsigned port, live_n = 0, per, i, k, x;
	size_t at = 0, max = 0;
	float pct;
	int len;

	for (i = 0; i < n; i++)
		if (live == NULL || live[i]) {
			live_n++;
			total += (uint64_t)(peers[i].weight > 0 ?
			    peers[i].weight : 1);
		}
	for (i = 0; i < n; i++)
		if (live == NULL || live[i]) {
			pct = (float)(peers[i].weight > 0 ? peers[i].weight :
			    1) / (float)total;
			max += points(pct, live_n);
		}
	if ((r = malloc(sizeof(*r) + max * sizeof(r->p[0]))) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (live != NULL && !live[i])
			continue;
		pct = (float)(peers[i].weight > 0 ? peers[i].weight : 1) /
		    (float)total;
		per = points(pct, live_n);
		host_of(&peers[i], host, sizeof(host), &port);
		for (k = 1; k <= per / POINTS_PER_HASH; k++) {
			if (port == DEFAULT_PORT || port == 0)
				len = snprintf(name, sizeof(name), "%s-%u",
				    host, k - 1);
			else
				len = snprintf(name, sizeof(name), "%s:%u-%u",
				    host, port, k - 1);
			md5(name, (size_t)len, d);
			for (x = 0; x < POINTS_PER_HASH && at < max; x++) {
				r->p[at].value = word(d, x);
				r->p[at++].peer = i;
			}
		}
	}
	r->n = at;
	qsort(r->p, r->n, sizeof(r->p[0]), point_cmp);
	return r;
}

void
mc_ring_free(struct mc_ring *r)
{
	free(r);
}

int
mc_ring_pick(const struct mc_ring *r, const char *key, size_t klen)
{
	uint32_t h;
	size_t lo = 0, hi, mid;

	if (r == NULL || r->n == 0)
		return -1;
	h = mc_ketama_hash(key, klen);
	hi = r->n;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (r->p[mid].value < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int)r->p[hi == r->n ? 0 : hi].peer;
}

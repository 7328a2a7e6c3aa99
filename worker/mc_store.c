/*
 * memcached items in the shared store (see mc_store.h).
 */
#include <string.h>

#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/mc_store.h"

/* The flush_all marker's value. */
struct mc_flush {
	int64_t when;			/* items older than this are void */
};

static const char flush_key[1] = { CACHE_NS_MEMCACHED };

size_t
mc_store_key(char *out, const char *key, size_t klen)
{
	out[0] = CACHE_NS_MEMCACHED;
	memcpy(out + 1, key, klen);
	return klen + 1;
}

size_t
mc_value_max(struct store *s)
{
	size_t max = store_max_object(s);

	return max > sizeof(struct mc_item) ? max - sizeof(struct mc_item) :
	    0;
}

/* Was the item stored before a flush_all that has taken effect? */
static bool
flushed(struct store *s, const struct store_ref *ref,
    const struct mc_item *it)
{
	struct store_ref fr;
	struct mc_flush f;
	bool dead = false;

	if (store_get(s, flush_key, sizeof(flush_key), &fr) != STORE_HIT)
		return false;
	if (fr.len == sizeof(f)) {
		memcpy(&f, fr.data, sizeof(f));
		dead = (int64_t)worker.now >= f.when &&
		    (ref->cas < fr.cas || (int64_t)it->time < f.when);
	}
	store_release(s, &fr);
	return dead;
}

bool
mc_fetch(struct store *s, const char *key, size_t klen, struct mc_got *g)
{
	char skey[MC_STORE_KEY];
	size_t n = mc_store_key(skey, key, klen);

	if (store_get(s, skey, n, &g->ref) != STORE_HIT)
		return false;
	if (g->ref.len < sizeof(struct mc_item)) {
		store_release(s, &g->ref);	/* not ours: never */
		return false;
	}
	g->item = g->ref.data;
	g->data = (const char *)g->ref.data + sizeof(struct mc_item);
	g->len = g->ref.len - sizeof(struct mc_item);
	if (flushed(s, &g->ref, g->item)) {
		store_release(s, &g->ref);
		store_delete(s, skey, n);
		return false;
	}
	return true;
}

void
mc_release(struct store *s, struct mc_got *g)
{
	store_release(s, &g->ref);
}

enum store_result
mc_reserve(struct store *s, const char *key, size_t klen, size_t vlen,
    int64_t exptime, uint32_t flags, uint32_t bits, struct store_wref *w,
    char **data)
{
	char skey[MC_STORE_KEY];
	struct mc_item it = { (uint32_t)worker.now, bits };
	enum store_result r;

	r = store_reserve(s, skey, mc_store_key(skey, key, klen),
	    sizeof(it) + vlen, exptime, flags, w);
	if (r != STORE_OK)
		return r;
	memcpy(w->data, &it, sizeof(it));
	*data = (char *)w->data + sizeof(it);
	return STORE_OK;
}

enum store_result
mc_commit(struct store *s, struct store_wref *w, enum store_cond cond,
    uint64_t cas, uint64_t *newcas)
{
	return store_commit_if(s, w, cond, cas, newcas);
}

void
mc_settle(struct store *s, const char *key, size_t klen)
{
	struct mc_got g;

	if (mc_fetch(s, key, klen, &g))
		mc_release(s, &g);
}

enum store_result
mc_delete(struct store *s, const char *key, size_t klen)
{
	char skey[MC_STORE_KEY];
	struct mc_got g;

	if (!mc_fetch(s, key, klen, &g))
		return STORE_NOT_FOUND;
	mc_release(s, &g);
	return store_delete(s, skey, mc_store_key(skey, key, klen));
}

enum store_result
mc_touch(struct store *s, const char *key, size_t klen, int64_t exptime)
{
	char skey[MC_STORE_KEY];
	struct mc_got g;

	if (!mc_fetch(s, key, klen, &g))
		return STORE_NOT_FOUND;
	mc_release(s, &g);
	return store_touch(s, skey, mc_store_key(skey, key, klen), exptime);
}

enum store_result
mc_flush(struct store *s, int64_t delay)
{
	struct mc_flush f = { (int64_t)worker.now + (delay > 0 ? delay : 0) };

	return store_set(s, flush_key, sizeof(flush_key), &f, sizeof(f), 0,
	    0);
}

int64_t
mc_ttl_of_expires(int64_t expires)
{
	return expires;		/* 0, or an absolute time: the same rules */
}

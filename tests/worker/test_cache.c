/*
 * The cache module's parts that stand alone, on a real (anonymous) store:
 * the namespace table, keys, and the object format the static files and
 * the proxy share (bodies, reservations filled without the lock, "nothing
 * here" markers, values that are not objects).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "shm/store.h"
#include "worker/cache.h"

static struct store *s;

static void
init(void)
{
	struct store_options o = {
		.size = 8 << 20, .stripes = 2, .max_object = 64 << 10,
		.max_slots = 2,
	};
	char err[256];

	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "store_create: %s", err);
	cr_assert_eq(store_attach(s, 0), 0);
}

static void
fini(void)
{
	store_destroy(s);
}

TestSuite(cache, .init = init, .fini = fini);

Test(cache, namespaces_have_one_prefix_each)
{
	size_t i, j;

	cr_assert_geq(cache_ns_count, 7);
	for (i = 0; i < cache_ns_count; i++) {
		cr_expect_neq(cache_ns_table[i].prefix, '\0');
		cr_expect_gt(strlen(cache_ns_table[i].what), 10);
		for (j = i + 1; j < cache_ns_count; j++)
			cr_expect_neq(cache_ns_table[i].prefix,
			    cache_ns_table[j].prefix, "%s and %s",
			    cache_ns_table[i].name, cache_ns_table[j].name);
	}
	cr_expect_eq(CACHE_NS_FILE, 'F');
	cr_expect_eq(CACHE_NS_URL, 'P');
	cr_expect_eq(CACHE_NS_GZIP_COPY, 'Z');
}

Test(cache, keys_start_with_their_namespace)
{
	char key[STORE_KEY_MAX], big[STORE_KEY_MAX];
	uint64_t id[2] = { 1, 2 };

	cr_assert_eq(cache_key(key, CACHE_NS_FILE, id, sizeof(id), "/a", 2),
	    1 + sizeof(id) + 2);
	cr_expect_eq(key[0], 'F');
	cr_expect(memcmp(key + 1, id, sizeof(id)) == 0);
	cr_expect(memcmp(key + 1 + sizeof(id), "/a", 2) == 0);
	memset(big, 'x', sizeof(big));
	cr_expect_eq(cache_key(key, CACHE_NS_URL, big, STORE_KEY_MAX - 1,
	    NULL, 0), STORE_KEY_MAX);
	cr_expect_eq(cache_key(key, CACHE_NS_URL, big, STORE_KEY_MAX, NULL,
	    0), 0);
}

Test(cache, bodies_round_trip)
{
	struct store_ref ref;
	struct store_wref w;
	size_t off, len;
	char *body;

	cr_assert_eq(cache_body_set(s, "Fa", 2, "hello", 5), STORE_OK);
	cr_assert_eq(store_get(s, "Fa", 2, &ref), STORE_HIT);
	cr_assert_eq(cache_body_of(&ref, &off, &len), 1);
	cr_expect_eq(len, 5);
	cr_expect(memcmp((const char *)ref.data + off, "hello", 5) == 0);
	cr_expect_eq(off + len, ref.len);
	store_release(s, &ref);

	/* Filled without the lock, then published. */
	cr_assert_eq(cache_body_reserve(s, "Fb", 2, 3, &w, &body), STORE_OK);
	memcpy(body, "abc", 3);
	cr_assert_eq(store_commit(s, &w), STORE_OK);
	cr_assert_eq(store_get(s, "Fb", 2, &ref), STORE_HIT);
	cr_assert_eq(cache_body_of(&ref, &off, &len), 1);
	cr_expect_eq(len, 3);
	cr_expect(memcmp((const char *)ref.data + off, "abc", 3) == 0);
	store_release(s, &ref);

	/* An empty body is a body. */
	cr_assert_eq(cache_body_set(s, "Fc", 2, "", 0), STORE_OK);
	cr_assert_eq(store_get(s, "Fc", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), 1);
	cr_expect_eq(len, 0);
	store_release(s, &ref);
}

Test(cache, markers_and_foreign_values)
{
	struct store_ref ref;
	size_t off, len;
	char junk[200];

	cr_assert_eq(cache_nothing_set(s, "Ga", 2), STORE_OK);
	cr_assert_eq(store_get(s, "Ga", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), 0);
	store_release(s, &ref);

	/* A raw value (an older corral's, or another user's): not ours. */
	cr_assert_eq(store_set(s, "Fr", 2, "raw bytes", 9, 0, 0), STORE_OK);
	cr_assert_eq(store_get(s, "Fr", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), -1);
	store_release(s, &ref);
	memset(junk, 0, sizeof(junk));
	cr_assert_eq(store_set(s, "Fj", 2, junk, sizeof(junk), 0, 0),
	    STORE_OK);
	cr_assert_eq(store_get(s, "Fj", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), -1);
	store_release(s, &ref);

	/* An object whose sizes do not add up is refused. */
	cr_assert_eq(cache_body_set(s, "Ft", 2, "0123456789", 10), STORE_OK);
	cr_assert_eq(store_get(s, "Ft", 2, &ref), STORE_HIT);
	memcpy(junk, ref.data, ref.len);
	len = ref.len;
	store_release(s, &ref);
	cr_assert_eq(store_set(s, "Fu", 2, junk, len - 1, 0, 0), STORE_OK);
	cr_assert_eq(store_get(s, "Fu", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), -1);
	store_release(s, &ref);
}

Test(cache, older_layout_is_a_miss)
{
	static const uint32_t older = 0x63727270;	/* before phase B */
	struct store_ref ref;
	size_t off, len;
	char obj[512];

	/* A persisted object of the layout before the date and the stale
	 * windows were kept: the same sizes would read as other fields. */
	cr_assert_eq(cache_body_set(s, "Fn", 2, "0123456789", 10), STORE_OK);
	cr_assert_eq(store_get(s, "Fn", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), 1);
	cr_assert_leq(ref.len, sizeof(obj));
	memcpy(obj, ref.data, ref.len);
	len = ref.len;
	store_release(s, &ref);
	memcpy(obj, &older, sizeof(older));
	cr_assert_eq(store_set(s, "Fo", 2, obj, len, 0, 0), STORE_OK);
	cr_assert_eq(store_get(s, "Fo", 2, &ref), STORE_HIT);
	cr_expect_eq(cache_body_of(&ref, &off, &len), -1);
	store_release(s, &ref);
}

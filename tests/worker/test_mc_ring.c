/*
 * The ketama ring against libmemcached itself: the tables below are where
 * libmemcached 1.0.18 (pylibmc, behaviour ketama_weighted) put each key on
 * real memcached nodes, found by asking each node.  A node that is down
 * leaves the ring: its keys go where a ring without it puts them.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <string.h>

#include "master/config.h"
#include "worker/mc_ring.h"

static const char *const keys[] = {
	"key0", "key1", "key2", "key3", "key4", "key5", "key6", "key7",
	"key8", "key9", "key10", "key11", "key12", "key13", "key14",
	"key15", "key16", "key17", "key18", "key19", "key20", "key21",
	"key22", "key23", "/articles/a", "/pages/b",
};
#define NKEYS	(sizeof(keys) / sizeof(keys[0]))

/* 127.0.0.1:11211, 127.0.0.2:11211, 127.0.0.3:11211 */
static const int three[NKEYS] = {
	2, 1, 2, 0, 0, 1, 1, 1, 0, 2, 1, 1, 2, 0, 1, 2, 0, 0, 2, 2, 2, 2, 0,
	2, 2, 2,
};
/* the same and 127.0.0.1:21299 (a port other than 11211 is hashed) */
static const int four[NKEYS] = {
	3, 1, 2, 0, 0, 1, 1, 3, 3, 2, 1, 3, 2, 0, 1, 2, 0, 0, 3, 2, 3, 2, 3,
	3, 2, 2,
};

static struct config_peer peers[4];

static void
peer(int i, const char *ip, int port)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&peers[i].addr;

	memset(&peers[i], 0, sizeof(peers[i]));
	in->sin_family = AF_INET;
	in->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &in->sin_addr);
	peers[i].addrlen = sizeof(*in);
	peers[i].weight = 1;
}

static void
setup(void)
{
	peer(0, "127.0.0.1", 11211);
	peer(1, "127.0.0.2", 11211);
	peer(2, "127.0.0.3", 11211);
	peer(3, "127.0.0.1", 21299);
}

static void
check(struct mc_ring *r, const int *want)
{
	cr_assert_not_null(r);
	for (size_t i = 0; i < NKEYS; i++)
		cr_expect_eq(mc_ring_pick(r, keys[i], strlen(keys[i])),
		    want[i], "%s", keys[i]);
	mc_ring_free(r);
}

Test(mc_ring, three_nodes_as_libmemcached, .init = setup)
{
	check(mc_ring_build(peers, 3, NULL), three);
}

Test(mc_ring, four_nodes_as_libmemcached, .init = setup)
{
	check(mc_ring_build(peers, 4, NULL), four);
}

Test(mc_ring, a_node_down_leaves_the_ring, .init = setup)
{
	bool live[4] = { true, true, true, false };

	check(mc_ring_build(peers, 4, live), three);
}

Test(mc_ring, none_live, .init = setup)
{
	bool live[4] = { false, false, false, false };
	struct mc_ring *r = mc_ring_build(peers, 4, live);

	cr_assert_eq(mc_ring_pick(r, "k", 1), -1);
	mc_ring_free(r);
}

Test(mc_ring, md5_hash)
{
	/* MD5("") = d41d8cd9..., little-endian first word */
	cr_assert_eq(mc_ketama_hash("", 0), 0xd98c1dd4u);
}

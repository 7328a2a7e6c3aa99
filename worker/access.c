/*
 * allow and deny: address prefixes, IPv4 and IPv6, checked in the order
 * written; the first that matches decides, as in nginx.
 */
#include <string.h>
#include <sys/socket.h>

#include "master/config.h"
#include "worker/access.h"

static bool
prefix_match(const unsigned char *a, const unsigned char *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full) != 0)
		return false;
	return rest == 0 ||
	    ((a[full] ^ b[full]) & (unsigned char)(0xff << (8 - rest))) == 0;
}

/* An IPv4 client on an IPv6 socket ("::ffff:10.0.0.1") is IPv4 here. */
static bool
v4_mapped(const unsigned char *a)
{
	static const unsigned char pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };

	return memcmp(a, pfx, sizeof(pfx)) == 0;
}

bool
acl_allows(const struct config_location *l, int family,
    const unsigned char *addr)
{
	const struct config_acl *a;

	if (family == AF_INET6 && v4_mapped(addr)) {
		family = AF_INET;
		addr += 12;
	}
	for (a = l->acl; a < l->acl + l->nacl; a++)
		if (a->all || (a->family == family &&
		    prefix_match(a->addr, addr, a->bits)))
			return a->allow;
	return l->acl_default_allow;
}

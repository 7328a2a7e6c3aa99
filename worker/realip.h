/*
 * The client behind trusted proxies, as nginx's realip module finds it:
 * when the connection comes from an address the config trusts (a load
 * balancer, a CDN), the client is named by the X-Forwarded-For list it
 * sent instead.  Pure code: the caller says which addresses it trusts.
 *
 * X-Forwarded-For is a list of addresses, the client first and each
 * proxy's peer appended after it, over one or more field lines.  Without
 * recursion the last address is the client (one trusted proxy).  With
 * recursion the list is walked from the right past every trusted address,
 * so a chain of trusted proxies is skipped (nginx real_ip_recursive on);
 * when every address is trusted the leftmost one is the client.
 */
#ifndef CORRAL_REALIP_H
#define CORRAL_REALIP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "worker/http.h"

/* Whether the address at sa (AF_INET or AF_INET6) is trusted. */
typedef bool (*realip_trusted_fn)(const struct sockaddr *sa, void *arg);

/*
 * Walks the X-Forwarded-For field lines values[0..n) (in the order they
 * came) from the right.  Elements may be "192.0.2.1", "2001:db8::1",
 * "[2001:db8::1]", with an optional ":port" after an IPv4 address or a
 * bracketed IPv6 one (the port is ignored).  Returns true with the
 * client's address in *out (port 0); false when the list is empty or the
 * element that would name the client is not an address: the connection's
 * own address stands, as in nginx.
 */
bool realip_from_xff(const struct span *values, size_t n, bool recursive,
    realip_trusted_fn trusted, void *arg, struct sockaddr_storage *out);

struct config_cidr;

/* Whether the address (AF_INET: 4 bytes, AF_INET6: 16) is in the list. */
bool realip_cidr_match(const struct config_cidr *list, size_t n, int family,
    const unsigned char *addr);

/* Parses one address element as above into *out; false if it is none. */
bool realip_parse_addr(const char *p, size_t len,
    struct sockaddr_storage *out);

#endif

/*
 * The client behind trusted proxies.  See realip.h.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "master/config.h"
#include "worker/http.h"
#include "worker/realip.h"

static bool
is_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* Digits only, 1 to 5 of them, at most 65535. */
static bool
port_ok(const char *p, size_t n)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return false;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	return v <= 65535;
}

bool
realip_parse_addr(const char *p, size_t len, struct sockaddr_storage *out)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
	char text[INET6_ADDRSTRLEN];
	const char *colon, *close;
	bool bracket = len > 0 && p[0] == '[';

	memset(out, 0, sizeof(*out));
	if (bracket) {
		close = memchr(p, ']', len);
		if (close == NULL)
			return false;
		if ((size_t)(close + 1 - p) < len && (close[1] != ':' ||
		    !port_ok(close + 2, len - (size_t)(close + 2 - p))))
			return false;
		p++;
		len = (size_t)(close - p);
	} else if ((colon = memchr(p, ':', len)) != NULL &&
	    memchr(colon + 1, ':', len - (size_t)(colon + 1 - p)) == NULL) {
		/* One colon: IPv4 and a port. */
		if (!port_ok(colon + 1, len - (size_t)(colon + 1 - p)))
			return false;
		len = (size_t)(colon - p);
	}
	if (len == 0 || len >= sizeof(text) || memchr(p, '\0', len) != NULL)
		return false;
	memcpy(text, p, len);
	text[len] = '\0';
	if (!bracket && inet_pton(AF_INET, text, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, text, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		return true;
	}
	return false;
}

/*
 * The element before *end in the line [start, *end), without its OWS;
 * moves *end before the comma.  False when there is none left.
 */
static bool
prev_element(const char *start, const char **end, const char **p,
    size_t *len)
{
	const char *e = *end, *b;

	for (;;) {
		while (e > start && is_ws(e[-1]))
			e--;
		if (e == start)
			return false;
		if (e[-1] != ',')
			break;
		e--;			/* an empty element */
	}
	b = e;
	while (b > start && b[-1] != ',')
		b--;
	*end = b > start ? b - 1 : start;
	while (b < e && is_ws(*b))
		b++;
	*p = b;
	*len = (size_t)(e - b);
	return true;
}

bool
realip_from_xff(const struct span *values, size_t n, bool recursive,
    realip_trusted_fn trusted, void *arg, struct sockaddr_storage *out)
{
	struct sockaddr_storage addr, leftmost;
	const char *end, *p;
	bool any = false;
	size_t i, len;

	for (i = n; i-- > 0; ) {
		if (values[i].p == NULL)
			continue;
		end = values[i].p + values[i].len;
		while (prev_element(values[i].p, &end, &p, &len)) {
			if (!realip_parse_addr(p, len, &addr))
				return false;
			if (!recursive ||
			    !trusted((const struct sockaddr *)&addr, arg)) {
				*out = addr;
				return true;
			}
			leftmost = addr;
			any = true;
		}
	}
	if (any)
		*out = leftmost;
	return any;
}

bool
realip_cidr_match(const struct config_cidr *list, size_t n, int family,
    const unsigned char *addr)
{
	const struct config_cidr *c;
	unsigned full, rest;

	for (c = list; c < list + n; c++) {
		if (c->family != family)
			continue;
		full = c->bits / 8;
		rest = c->bits % 8;
		if (memcmp(c->addr, addr, full) == 0 && (rest == 0 ||
		    ((addr[full] ^ c->addr[full]) &
		    (unsigned char)(0xff00u >> rest)) == 0))
			return true;
	}
	return false;
}

/*
 * The PROXY protocol, versions 1 and 2.  See proxy_protocol.h.
 */
#include <sys/socket.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/proxy_protocol.h"

#define MIN(a, b)	((a) < (b) ? (a) : (b))

static const char v1_sig[6] = "PROXY ";
static const char v2_sig[12] = "\r\n\r\n\0\r\nQUIT\n";

#define V2_HEADER	16
#define V2_INET		12		/* address block sizes */
#define V2_INET6	36
#define V2_UNIX		216

static ssize_t
fail(const char **why, const char *what)
{
	*why = what;
	return -1;
}

/* A port: 1 to 5 digits, no leading zero, at most 65535. */
static bool
port(const char *p, size_t n, uint16_t *out)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5 || (n > 1 && p[0] == '0'))
		return false;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* A text address of family af into ss. */
static bool
address(int af, const char *p, size_t n, uint16_t portno,
    struct sockaddr_storage *ss, socklen_t *len)
{
	char text[INET6_ADDRSTRLEN];
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	if (n == 0 || n >= sizeof(text) || memchr(p, '\0', n) != NULL)
		return false;
	memcpy(text, p, n);
	text[n] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (af == AF_INET) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(portno);
		*len = sizeof(*sin);
		return inet_pton(AF_INET, text, &sin->sin_addr) == 1;
	}
	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(portno);
	*len = sizeof(*sin6);
	return inet_pton(AF_INET6, text, &sin6->sin6_addr) == 1;
}

/* The next field of a version 1 line, up to a single space or the end. */
static bool
field(const char **pp, const char *end, const char **f, size_t *n,
    bool last)
{
	const char *p = *pp, *sp = memchr(p, ' ', (size_t)(end - p));

	if (last ? sp != NULL : sp == NULL)
		return false;
	*f = p;
	*n = (size_t)((last ? end : sp) - p);
	*pp = last ? end : sp + 1;
	return *n > 0;
}

static ssize_t
v1(const char *buf, size_t len, struct pp_header *h, const char **why)
{
	const char *lf, *p, *end, *proto, *src, *dst, *sp, *dp;
	size_t np, ns, nd, nsp, ndp;
	uint16_t sport, dport;
	int af;

	lf = memchr(buf, '\n', MIN(len, (size_t)PP_V1_MAX));
	if (lf == NULL)
		return len < PP_V1_MAX ? PP_AGAIN :
		    fail(why, "PROXY protocol line too long");
	if (lf == buf || lf[-1] != '\r' ||
	    memchr(buf, '\r', (size_t)(lf - 1 - buf)) != NULL)
		return fail(why, "PROXY protocol line not ended by CRLF");
	h->version = 1;
	p = buf + sizeof(v1_sig);
	end = lf - 1;
	if ((size_t)(end - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 &&
	    (end - p == 7 || p[7] == ' ')) {
		h->local = true;	/* the rest of the line is ignored */
		return lf + 1 - buf;
	}
	if (!field(&p, end, &proto, &np, false) ||
	    !field(&p, end, &src, &ns, false) ||
	    !field(&p, end, &dst, &nd, false) ||
	    !field(&p, end, &sp, &nsp, false) ||
	    !field(&p, end, &dp, &ndp, true))
		return fail(why, "malformed PROXY protocol line");
	if (np == 4 && memcmp(proto, "TCP4", 4) == 0)
		af = AF_INET;
	else if (np == 4 && memcmp(proto, "TCP6", 4) == 0)
		af = AF_INET6;
	else
		return fail(why, "unknown PROXY protocol family");
	if (!port(sp, nsp, &sport) || !port(dp, ndp, &dport))
		return fail(why, "invalid port in PROXY protocol line");
	if (!address(af, src, ns, sport, &h->src, &h->srclen) ||
	    !address(af, dst, nd, dport, &h->dst, &h->dstlen))
		return fail(why, "invalid address in PROXY protocol line");
	h->local = false;
	return lf + 1 - buf;
}

/* TLVs: type, 16-bit length, value, filling the rest exactly. */
static bool
tlvs_valid(const unsigned char *p, size_t n)
{
	size_t vlen;

	while (n > 0) {
		if (n < 3)
			return false;
		vlen = (size_t)p[1] << 8 | p[2];
		if (vlen > n - 3)
			return false;
		p += 3 + vlen;
		n -= 3 + vlen;
	}
	return true;
}

static ssize_t
v2(const char *buf, size_t len, struct pp_header *h, const char **why)
{
	const unsigned char *b = (const unsigned char *)buf;
	struct sockaddr_in *s4, *d4;
	struct sockaddr_in6 *s6, *d6;
	size_t rest = (size_t)b[14] << 8 | b[15], need;

	if ((b[12] >> 4) != 2)
		return fail(why, "unsupported PROXY protocol version");
	if ((b[12] & 0xf) > 1)
		return fail(why, "unknown PROXY protocol command");
	if (V2_HEADER + rest > PP_V2_MAX)
		return fail(why, "PROXY protocol header too long");
	switch (b[13]) {
	case 0x00:			/* UNSPEC */
		need = 0;
		break;
	case 0x11:			/* TCP over IPv4 */
		need = V2_INET;
		break;
	case 0x21:			/* TCP over IPv6 */
		need = V2_INET6;
		break;
	case 0x31:			/* a unix stream socket */
		need = V2_UNIX;
		break;
	case 0x12: case 0x22: case 0x32:
		return fail(why, "PROXY protocol datagram addresses");
	default:
		return fail(why, "invalid PROXY protocol family");
	}
	if (rest < need)
		return fail(why, "PROXY protocol address block too short");
	if (len < V2_HEADER + rest)
		return PP_AGAIN;
	if (!tlvs_valid(b + V2_HEADER + need, rest - need))
		return fail(why, "malformed PROXY protocol TLV");
	h->version = 2;
	h->local = (b[12] & 0xf) == 0 || (b[13] != 0x11 && b[13] != 0x21);
	if (h->local)
		return (ssize_t)(V2_HEADER + rest);
	b += V2_HEADER;
	memset(&h->src, 0, sizeof(h->src));
	memset(&h->dst, 0, sizeof(h->dst));
	if (need == V2_INET) {
		s4 = (struct sockaddr_in *)&h->src;
		d4 = (struct sockaddr_in *)&h->dst;
		s4->sin_family = d4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, b, 4);
		memcpy(&d4->sin_addr, b + 4, 4);
		memcpy(&s4->sin_port, b + 8, 2);
		memcpy(&d4->sin_port, b + 10, 2);
		h->srclen = h->dstlen = sizeof(*s4);
	} else {
		s6 = (struct sockaddr_in6 *)&h->src;
		d6 = (struct sockaddr_in6 *)&h->dst;
		s6->sin6_family = d6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, b, 16);
		memcpy(&d6->sin6_addr, b + 16, 16);
		memcpy(&s6->sin6_port, b + 32, 2);
		memcpy(&d6->sin6_port, b + 34, 2);
		h->srclen = h->dstlen = sizeof(*s6);
	}
	return (ssize_t)(V2_HEADER + rest);
}

ssize_t
proxy_protocol_parse(const char *buf, size_t len, struct pp_header *h,
    const char **why)
{
	if (len == 0)
		return PP_AGAIN;
	if (buf[0] == 'P') {
		if (memcmp(buf, v1_sig, MIN(len, sizeof(v1_sig))) != 0)
			return fail(why, "no PROXY protocol header");
		return len <= sizeof(v1_sig) ? PP_AGAIN : v1(buf, len, h, why);
	}
	if (memcmp(buf, v2_sig, MIN(len, sizeof(v2_sig))) != 0)
		return fail(why, "no PROXY protocol header");
	return len < V2_HEADER ? PP_AGAIN : v2(buf, len, h, why);
}

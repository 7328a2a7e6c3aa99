/*
 * The PROXY protocol parser: headers of both versions as load balancers
 * send them, and what must be refused.  Every good row must also say
 * "more" (PP_AGAIN), never an error, for each of its prefixes.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/proxy_protocol.h"

#define RAW(s)	.raw = (s), .len = sizeof(s) - 1

#define V2SIG	"\r\n\r\n\0\r\nQUIT\n"

struct good {
	const char *name;
	const char *raw;
	size_t len;
	size_t hlen;			/* 0: all of raw */
	int version;
	bool local;
	const char *src, *dst;		/* text addresses */
	int sport, dport;
};

static const struct good goods[] = {
	{ "v1 TCP4", RAW("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n"),
	  .version = 1, .src = "192.0.2.1", .dst = "198.51.100.7",
	  .sport = 56324, .dport = 443 },
	{ "v1 TCP4 then a request",
	  RAW("PROXY TCP4 10.0.0.1 10.0.0.2 1 65535\r\nGET / HTTP/1.1\r\n"),
	  .hlen = 38, .version = 1, .src = "10.0.0.1", .dst = "10.0.0.2",
	  .sport = 1, .dport = 65535 },
	{ "v1 TCP6", RAW("PROXY TCP6 2001:db8::1 ::1 0 8080\r\n"),
	  .version = 1, .src = "2001:db8::1", .dst = "::1", .sport = 0,
	  .dport = 8080 },
	{ "v1 TCP6 mapped",
	  RAW("PROXY TCP6 ::ffff:192.0.2.1 ::ffff:192.0.2.2 80 81\r\n"),
	  .version = 1, .src = "::ffff:192.0.2.1", .dst = "::ffff:192.0.2.2",
	  .sport = 80, .dport = 81 },
	{ "v1 UNKNOWN", RAW("PROXY UNKNOWN\r\n"), .version = 1,
	  .local = true },
	{ "v1 UNKNOWN with addresses",
	  RAW("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n"),
	  .version = 1, .local = true },
	{ "v2 PROXY TCP4",
	  RAW(V2SIG "\x21\x11\x00\x0c" "\xc0\x00\x02\x01" "\xc6\x33\x64\x07"
	      "\xdc\x04" "\x01\xbb"),
	  .version = 2, .src = "192.0.2.1", .dst = "198.51.100.7",
	  .sport = 56324, .dport = 443 },
	{ "v2 PROXY TCP4 with TLVs, then a request",
	  RAW(V2SIG "\x21\x11\x00\x1a" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02"
	      "\x00\x50" "\x00\x51" "\x04\x00\x00" "\xea\x00\x08vpce-123"
	      "GET /"),
	  .hlen = 42, .version = 2, .src = "10.0.0.1", .dst = "10.0.0.2",
	  .sport = 80, .dport = 81 },
	{ "v2 PROXY TCP6",
	  RAW(V2SIG "\x21\x21\x00\x24"
	      "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01"
	      "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01" "\x1f\x90" "\x00\x16"),
	  .version = 2, .src = "2001:db8::1", .dst = "::1", .sport = 8080,
	  .dport = 22 },
	{ "v2 LOCAL", RAW(V2SIG "\x20\x00\x00\x00"), .version = 2,
	  .local = true },
	{ "v2 LOCAL with an address block",
	  RAW(V2SIG "\x20\x11\x00\x0c" "\x01\x02\x03\x04\x05\x06\x07\x08"
	      "\x00\x01\x00\x02"), .version = 2, .local = true },
	{ "v2 PROXY UNSPEC", RAW(V2SIG "\x21\x00\x00\x03" "\x04\x00\x00"),
	  .version = 2, .local = true },
};

struct bad {
	const char *name;
	const char *raw;
	size_t len;
	const char *why;
};

static const struct bad bads[] = {
	{ "a plain request", RAW("GET / HTTP/1.1\r\n"), "no PROXY" },
	{ "lower case", RAW("proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n"),
	  "no PROXY" },
	{ "PROXY without a space", RAW("PROXYTCP4"), "no PROXY" },
	{ "v1 bare LF", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 1 2\n"), "CRLF" },
	{ "v1 CR inside", RAW("PROXY TCP4 1.2.3.4\r1.2.3.5 1 2\r\n"),
	  "CRLF" },
	{ "v1 too long",
	  RAW("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 655350000\r\n"),
	  "too long" },
	{ "v1 UDP4", RAW("PROXY UDP4 1.2.3.4 1.2.3.5 1 2\r\n"),
	  "unknown PROXY protocol family" },
	{ "v1 two spaces", RAW("PROXY TCP4  1.2.3.4 1.2.3.5 1 2\r\n"),
	  "malformed" },
	{ "v1 a field missing", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n"),
	  "malformed" },
	{ "v1 a field too many", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3\r\n"),
	  "malformed" },
	{ "v1 trailing space", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 1 2 \r\n"),
	  "malformed" },
	{ "v1 IPv6 in TCP4", RAW("PROXY TCP4 ::1 ::1 1 2\r\n"),
	  "invalid address" },
	{ "v1 IPv4 in TCP6", RAW("PROXY TCP6 1.2.3.4 1.2.3.5 1 2\r\n"),
	  "invalid address" },
	{ "v1 leading zero in an address",
	  RAW("PROXY TCP4 01.2.3.4 1.2.3.5 1 2\r\n"), "invalid address" },
	{ "v1 NUL in an address",
	  RAW("PROXY TCP4 1.2.3.4\0x 1.2.3.5 1 2\r\n"), "invalid address" },
	{ "v1 port over 65535", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 65536 2\r\n"),
	  "invalid port" },
	{ "v1 port with a leading zero",
	  RAW("PROXY TCP4 1.2.3.4 1.2.3.5 080 2\r\n"), "invalid port" },
	{ "v1 port with a sign", RAW("PROXY TCP4 1.2.3.4 1.2.3.5 +80 2\r\n"),
	  "invalid port" },
	{ "v2 bad signature", RAW("\r\n\r\n\0\r\nQUIT\r" "\x21\x11\x00\x00"),
	  "no PROXY" },
	{ "v2 version 1", RAW(V2SIG "\x11\x11\x00\x0c"), "version" },
	{ "v2 version 3", RAW(V2SIG "\x31\x11\x00\x0c"), "version" },
	{ "v2 command 2", RAW(V2SIG "\x22\x11\x00\x0c"), "command" },
	{ "v2 UDP", RAW(V2SIG "\x21\x12\x00\x0c"), "datagram" },
	{ "v2 family 4", RAW(V2SIG "\x21\x41\x00\x0c"), "invalid" },
	{ "v2 INET transport 0", RAW(V2SIG "\x21\x10\x00\x0c"), "invalid" },
	{ "v2 INET transport 3", RAW(V2SIG "\x21\x13\x00\x0c"), "invalid" },
	{ "v2 address block short", RAW(V2SIG "\x21\x11\x00\x0b"),
	  "too short" },
	{ "v2 INET6 block short", RAW(V2SIG "\x21\x21\x00\x0c"),
	  "too short" },
	{ "v2 too long", RAW(V2SIG "\x21\x11\x10\x00"), "too long" },
	{ "v2 TLV past the end",
	  RAW(V2SIG "\x21\x11\x00\x10" "\x0a\x00\x00\x01\x0a\x00\x00\x02"
	      "\x00\x50\x00\x51" "\x04\x00\x05x"), "TLV" },
	{ "v2 TLV header cut",
	  RAW(V2SIG "\x21\x11\x00\x0e" "\x0a\x00\x00\x01\x0a\x00\x00\x02"
	      "\x00\x50\x00\x51" "\x04\x00"), "TLV" },
};

static void
text_of(const struct sockaddr_storage *ss, char *out, int *port)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &s4->sin_addr, out, INET6_ADDRSTRLEN);
		*port = ntohs(s4->sin_port);
	} else {
		cr_assert_eq(ss->ss_family, AF_INET6);
		inet_ntop(AF_INET6, &s6->sin6_addr, out, INET6_ADDRSTRLEN);
		*port = ntohs(s6->sin6_port);
	}
}

static ssize_t
parse(const char *raw, size_t len, struct pp_header *h, const char **why)
{
	char *buf = malloc(len ? len : 1);
	ssize_t rc;

	memcpy(buf, raw, len);
	rc = proxy_protocol_parse(buf, len, h, why);
	free(buf);
	return rc;
}

Test(proxy_protocol, good)
{
	const struct good *t;
	struct pp_header h;
	const char *why;
	char text[INET6_ADDRSTRLEN];
	size_t k, want;
	ssize_t rc;
	int port;

	for (t = goods; t < goods + sizeof(goods) / sizeof(goods[0]); t++) {
		want = t->hlen ? t->hlen : t->len;
		for (k = 0; k < want; k++) {
			why = NULL;
			rc = parse(t->raw, k, &h, &why);
			cr_expect_eq(rc, PP_AGAIN, "%s: prefix %zu: %zd %s",
			    t->name, k, rc, why ? why : "");
		}
		memset(&h, 0xa5, sizeof(h));
		rc = parse(t->raw, t->len, &h, &why);
		cr_expect_eq(rc, (ssize_t)want, "%s: %zd %s", t->name, rc,
		    rc < 0 ? why : "");
		if (rc != (ssize_t)want)
			continue;
		cr_expect_eq(h.version, t->version, "%s", t->name);
		cr_expect_eq(h.local, t->local, "%s", t->name);
		if (t->local)
			continue;
		text_of(&h.src, text, &port);
		cr_expect_str_eq(text, t->src, "%s", t->name);
		cr_expect_eq(port, t->sport, "%s", t->name);
		text_of(&h.dst, text, &port);
		cr_expect_str_eq(text, t->dst, "%s", t->name);
		cr_expect_eq(port, t->dport, "%s", t->name);
		cr_expect_eq(h.srclen, h.src.ss_family == AF_INET ?
		    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	}
}

Test(proxy_protocol, bad)
{
	const struct bad *t;
	struct pp_header h;
	const char *why;
	ssize_t rc;

	for (t = bads; t < bads + sizeof(bads) / sizeof(bads[0]); t++) {
		why = NULL;
		rc = parse(t->raw, t->len, &h, &why);
		cr_expect_eq(rc, -1, "%s: %zd", t->name, rc);
		if (rc == -1)
			cr_expect(strstr(why, t->why) != NULL,
			    "%s: '%s', want '%s'", t->name, why, t->why);
	}
}

/* A version 1 line stops at 107 bytes: 106 without LF is still "more". */
Test(proxy_protocol, v1_length_limit)
{
	char buf[PP_V1_MAX + 1];
	struct pp_header h;
	const char *why;

	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "PROXY UNKNOWN ", 14);
	buf[PP_V1_MAX - 2] = '\r';
	buf[PP_V1_MAX - 1] = '\n';
	cr_expect_eq(parse(buf, PP_V1_MAX, &h, &why), PP_V1_MAX);
	buf[PP_V1_MAX - 2] = 'x';
	buf[PP_V1_MAX - 1] = 'x';
	cr_expect_eq(parse(buf, PP_V1_MAX - 1, &h, &why), PP_AGAIN);
	cr_expect_eq(parse(buf, PP_V1_MAX, &h, &why), -1);
	cr_expect_str_eq(why, "PROXY protocol line too long");
}

/* A version 2 header of the largest size we take, TLVs filling it. */
Test(proxy_protocol, v2_length_limit)
{
	static char buf[PP_V2_MAX + 1];
	size_t rest = PP_V2_MAX - 16, tlv = rest - 12 - 3;
	struct pp_header h;
	const char *why;

	memcpy(buf, V2SIG "\x21\x11", 14);
	buf[14] = (char)(rest >> 8);
	buf[15] = (char)rest;
	memset(buf + 16, 1, 12);
	buf[28] = 0x20;
	buf[29] = (char)(tlv >> 8);
	buf[30] = (char)tlv;
	cr_expect_eq(parse(buf, PP_V2_MAX, &h, &why), PP_V2_MAX);
	cr_expect_eq(parse(buf, PP_V2_MAX - 1, &h, &why), PP_AGAIN);
	rest++;
	buf[14] = (char)(rest >> 8);
	buf[15] = (char)rest;
	cr_expect_eq(parse(buf, 16, &h, &why), -1);
}

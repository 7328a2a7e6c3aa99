/*
 * The client's address from X-Forwarded-For behind trusted proxies, with
 * and without recursion, as nginx's realip module finds it.  Trusted here:
 * 10.0.0.0/8 and ::1.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "master/config.h"
#include "worker/realip.h"

static bool
trusted(const struct sockaddr *sa, void *arg)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

	(void)arg;
	if (sa->sa_family == AF_INET)
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 10;
	return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr);
}

struct row {
	const char *name;
	const char *lines[3];
	bool recursive;
	const char *want;		/* NULL: the connection's address */
};

static const struct row rows[] = {
	{ "one address", { "192.0.2.1" }, false, "192.0.2.1" },
	{ "the last without recursion", { "192.0.2.1, 10.0.0.2" }, false,
	  "10.0.0.2" },
	{ "past the trusted with recursion", { "192.0.2.1, 10.0.0.2" }, true,
	  "192.0.2.1" },
	{ "an untrusted proxy stops the walk",
	  { "192.0.2.1, 198.51.100.3, 10.0.0.2" }, true, "198.51.100.3" },
	{ "all trusted: the leftmost", { "10.0.0.1, 10.0.0.2" }, true,
	  "10.0.0.1" },
	{ "lines joined in order", { "192.0.2.1", "10.0.0.2, 10.0.0.3" },
	  true, "192.0.2.1" },
	{ "the last line's last element", { "192.0.2.1", "198.51.100.9" },
	  false, "198.51.100.9" },
	{ "IPv6", { "2001:db8::1" }, false, "2001:db8::1" },
	{ "bracketed IPv6 with a port", { "[2001:db8::1]:443" }, false,
	  "2001:db8::1" },
	{ "bracketed IPv6", { "[2001:db8::2]" }, false, "2001:db8::2" },
	{ "IPv4 with a port", { "192.0.2.1:8080" }, false, "192.0.2.1" },
	{ "IPv6 trusted skipped", { "192.0.2.7, ::1" }, true, "192.0.2.7" },
	{ "spaces and empty elements", { " 192.0.2.1 ,, 10.0.0.5 , " }, true,
	  "192.0.2.1" },
	{ "tabs", { "\t192.0.2.4\t" }, false, "192.0.2.4" },
	{ "not an address before a trusted one",
	  { "unknown, 10.0.0.1" }, true, NULL },
	{ "not an address last", { "10.0.0.1, unknown" }, true, NULL },
	{ "garbage", { "garbage" }, false, NULL },
	{ "empty", { "" }, false, NULL },
	{ "only commas", { ",, ,", "" }, true, NULL },
	{ "port too large", { "192.0.2.1:99999" }, false, NULL },
	{ "port not digits", { "192.0.2.1:http" }, false, NULL },
	{ "bracket unclosed", { "[::1" }, false, NULL },
	{ "junk after the bracket", { "[::1]x" }, false, NULL },
	{ "IPv4 in brackets", { "[192.0.2.1]" }, false, NULL },
	{ "leading zero", { "01.2.3.4" }, false, NULL },
	{ "a hostname", { "client.example.com" }, false, NULL },
};

static void
text_of(const struct sockaddr_storage *ss, char *out)
{
	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr,
		    out, INET6_ADDRSTRLEN);
	else
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)ss)->sin6_addr, out,
		    INET6_ADDRSTRLEN);
}

Test(realip, rows)
{
	const struct row *t;
	struct sockaddr_storage out;
	struct span v[3];
	char text[INET6_ADDRSTRLEN];
	size_t n;
	bool ok;

	for (t = rows; t < rows + sizeof(rows) / sizeof(rows[0]); t++) {
		for (n = 0; n < 3 && t->lines[n] != NULL; n++) {
			v[n].p = t->lines[n];
			v[n].len = strlen(t->lines[n]);
		}
		ok = realip_from_xff(v, n, t->recursive, trusted, NULL, &out);
		cr_expect_eq(ok, t->want != NULL, "%s", t->name);
		if (!ok || t->want == NULL)
			continue;
		text_of(&out, text);
		cr_expect_str_eq(text, t->want, "%s", t->name);
	}
}

Test(realip, absent_lines_are_skipped)
{
	struct span v[2] = { { NULL, 0 }, { "192.0.2.3", 9 } };
	struct sockaddr_storage out;

	cr_assert(realip_from_xff(v, 2, false, trusted, NULL, &out));
	cr_assert_eq(out.ss_family, AF_INET);
	cr_assert_not(realip_from_xff(v, 1, false, trusted, NULL, &out));
}

Test(realip, cidr_match)
{
	struct config_cidr list[3] = {
		{ AF_INET, 8, { 10 } },
		{ AF_INET, 27, { 192, 0, 2, 32 } },
		{ AF_INET6, 33, { 0x20, 0x01, 0x0d, 0xb8, 0x80 } },
	};
	unsigned char a4[4], a6[16];

	inet_pton(AF_INET, "10.200.3.4", a4);
	cr_expect(realip_cidr_match(list, 3, AF_INET, a4));
	inet_pton(AF_INET, "11.0.0.1", a4);
	cr_expect_not(realip_cidr_match(list, 3, AF_INET, a4));
	inet_pton(AF_INET, "192.0.2.63", a4);
	cr_expect(realip_cidr_match(list, 3, AF_INET, a4));
	inet_pton(AF_INET, "192.0.2.64", a4);
	cr_expect_not(realip_cidr_match(list, 3, AF_INET, a4));
	inet_pton(AF_INET, "192.0.2.31", a4);
	cr_expect_not(realip_cidr_match(list, 3, AF_INET, a4));
	inet_pton(AF_INET6, "2001:db8:8000::1", a6);
	cr_expect(realip_cidr_match(list, 3, AF_INET6, a6));
	inet_pton(AF_INET6, "2001:db8:7fff::1", a6);
	cr_expect_not(realip_cidr_match(list, 3, AF_INET6, a6));
	/* Families never match each other, and /0 matches all of one. */
	cr_expect_not(realip_cidr_match(list, 1, AF_INET6, a6));
	list[0].bits = 0;
	cr_expect(realip_cidr_match(list, 1, AF_INET, a4));
	cr_expect_not(realip_cidr_match(list, 0, AF_INET, a4));
}

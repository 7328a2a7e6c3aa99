/* listen: addresses and their flags, which may share a port, what to bind. */
#include <sys/types.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <confuse.h>
#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"

int
parse_port(const char *s, char *out, size_t len)
{
	uint64_t port;

	if (strlen(s) > 5 || parse_scaled_count(s, &port) == -1 ||
	    port < 1 || port > 65535)
		return -1;
	snprintf(out, len, "%u", (unsigned)port);
	return 0;
}

/* Fills l from "IPv4:port", "[IPv6]:port", "*:port" or "port"; no DNS. */
const char *
parse_listen(const char *s, struct config_listen *l)
{
	struct addrinfo hints, *res;
	struct in_addr in;
	char host[sizeof(l->text)], port[8];
	const char *p;
	size_t hostlen;

	if (strlen(s) >= sizeof(l->text))
		return "too long";
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	if (s[0] == '[') {
		if ((p = strchr(s, ']')) == NULL || p[1] != ':')
			return "expected [IPv6 address]:port";
		hostlen = p - s - 1;
		memcpy(host, s + 1, hostlen);
		p += 2;
		hints.ai_family = AF_INET6;
	} else if ((p = strrchr(s, ':')) != NULL) {
		hostlen = p - s;
		memcpy(host, s, hostlen);
		p++;
	} else {
		host[0] = '*';
		hostlen = 1;
		p = s;
	}
	host[hostlen] = '\0';
	if (strcmp(host, "*") == 0)
		strcpy(host, "0.0.0.0");
	if (parse_port(p, port, sizeof(port)) == -1)
		return "the port must be a number from 1 to 65535";
	if (hints.ai_family == AF_INET && strchr(host, ':') != NULL)
		return "an IPv6 address needs brackets: [address]:port";
	if (hints.ai_family == AF_INET && inet_pton(AF_INET, host, &in) != 1)
		return "not a numeric IPv4 address (names are not resolved)";
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return "not a numeric IP address (names are not resolved)";
	memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
	l->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	strcpy(l->text, s);
	return NULL;
}

/*
 * The words a listen address may be followed by, as nginx's listen has
 * them, in any order: each sets a flag of struct config_listen.
 */
#define LISTEN_FLAGS(X)							\
	X("tls",		tls)					\
	X("ssl",		tls)		/* nginx's name */	\
	X("default_server",	default_server)				\
	X("proxy_protocol",	proxy_protocol)

static const struct {
	const char *word;
	size_t off;
} listen_flags[] = {
#define LISTEN_FLAG_ROW(w, field) { w, offsetof(struct config_listen, field) },
	LISTEN_FLAGS(LISTEN_FLAG_ROW)
#undef LISTEN_FLAG_ROW
};

/* "ADDRESS" or "ADDRESS WORD ..." with words of listen_flags. */
int
cb_listen(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	const char *why = NULL, *sp = strchr(value, ' '), *w;
	struct config_listen *l;
	char addr[sizeof(l->text)];
	size_t n = sp ? (size_t)(sp - value) : strlen(value), wl, i;

	if ((l = calloc(1, sizeof(*l))) == NULL) {
		cfg_error(cfg, "out of memory");
		return -1;
	}
	if (n >= sizeof(addr))
		why = "too long";
	else {
		memcpy(addr, value, n);
		addr[n] = '\0';
		why = parse_listen(addr, l);
	}
	for (w = sp; why == NULL && w != NULL && *w != '\0'; w += wl) {
		w += strspn(w, " ");
		wl = strcspn(w, " ");
		if (wl == 0)
			break;
		for (i = 0; i < nitems(listen_flags); i++)
			if (strlen(listen_flags[i].word) == wl &&
			    strncmp(w, listen_flags[i].word, wl) == 0)
				break;
		if (i == nitems(listen_flags)) {
			why = "the options are \"tls\", \"default_server\" "
			    "and \"proxy_protocol\"";
			break;
		}
		*(bool *)((char *)l + listen_flags[i].off) = true;
	}
	if (why == NULL && l->tls && loading->tls_listen_line == 0)
		loading->tls_listen_line = cfg->line;
	if (why != NULL) {
		cfg_error(cfg, "invalid listen address \"%s\": %s", value, why);
		free(l);
		return -1;
	}
	if (l->default_server && cfg == loading->cfg) {
		cfg_error(cfg, "default_server belongs in a server's listen");
		free(l);
		return -1;
	}
	*(void **)result = l;
	return 0;
}

/*
 * How two listen addresses relate: apart (another family or port), the
 * same address, or overlapping: the same family and port, and one of them
 * is the wildcard address, so that both cannot be bound.
 */
enum listen_rel { LISTEN_APART, LISTEN_SAME, LISTEN_OVERLAP };

static enum listen_rel
listen_rel(const struct config_listen *a, const struct config_listen *b)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&a->addr;
	const struct sockaddr_in *b4 = (const struct sockaddr_in *)&b->addr;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&a->addr;
	const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&b->addr;
	bool same, wildcard;

	if (a->addr.ss_family != b->addr.ss_family)
		return LISTEN_APART;
	if (a->addr.ss_family == AF_INET) {
		if (a4->sin_port != b4->sin_port)
			return LISTEN_APART;
		same = a4->sin_addr.s_addr == b4->sin_addr.s_addr;
		wildcard = a4->sin_addr.s_addr == INADDR_ANY ||
		    b4->sin_addr.s_addr == INADDR_ANY;
	} else {
		if (a6->sin6_port != b6->sin6_port)
			return LISTEN_APART;
		same = a6->sin6_scope_id == b6->sin6_scope_id &&
		    memcmp(&a6->sin6_addr, &b6->sin6_addr,
		    sizeof(a6->sin6_addr)) == 0;
		wildcard = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ||
		    IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr);
	}
	return same ? LISTEN_SAME : wildcard ? LISTEN_OVERLAP : LISTEN_APART;
}

static bool
same_address(const struct config_listen *a, const struct config_listen *b)
{
	return listen_rel(a, b) == LISTEN_SAME;
}

/* Runs after each value of the list, so it looks at the whole list. */
int
validate_listen(cfg_t *cfg, cfg_opt_t *opt)
{
	const struct config_listen *a, *b;
	unsigned int i, j;

	note_line(cfg, opt);
	for (i = 1; i < cfg_opt_size(opt); i++) {
		a = cfg_opt_getnptr(opt, i);
		for (j = 0; j < i; j++) {
			b = cfg_opt_getnptr(opt, j);
			if (a == NULL || b == NULL || !same_address(a, b))
				continue;
			cfg_error(cfg, "listen \"%s\" is the same address as "
			    "\"%s\"", a->text, b->text);
			return -1;
		}
	}
	return 0;
}

/* A server without listen of its own uses the global list. */
static cfg_opt_t *
listen_of(cfg_t *sec)
{
	return cfg_getopt(cfg_size(sec, "listen") > 0 ? sec : loading->cfg,
	    "listen");
}

/* Whether two servers have an address in common (names must differ). */
bool
share_listen(cfg_t *a, cfg_t *b)
{
	cfg_opt_t *la = listen_of(a), *lb = listen_of(b);
	unsigned int i, j;

	for (i = 0; i < cfg_opt_size(la); i++)
		for (j = 0; j < cfg_opt_size(lb); j++)
			if (same_address(cfg_opt_getnptr(la, i),
			    cfg_opt_getnptr(lb, j)))
				return true;
	return false;
}

/* Index of l in cf->listen, added when new; -1 when memory ran out. */
static int
listen_add(struct config *cf, const struct config_listen *l, size_t max)
{
	size_t i;

	for (i = 0; i < cf->nlisten; i++)
		if (same_address(&cf->listen[i], l))
			return (int)i;
	if (cf->nlisten == max)
		return -1;
	cf->listen[cf->nlisten] = *l;
	cf->listen[cf->nlisten].default_server = false;
	return (int)cf->nlisten++;
}

/* The default server of listen k: the one that says default_server
 * there, else the first that listens there. */
static void
choose_default(cfg_t *cfg, struct config *cf, size_t k)
{
	struct config_server *s, *first = NULL, *chosen = NULL;
	const struct config_listen *l;
	cfg_opt_t *o;
	size_t i, j;

	for (i = 0; i < cf->nservers; i++) {
		s = &cf->servers[i];
		o = listen_of(cfg_getnsec(cfg, "server", (unsigned)i));
		for (j = 0; j < s->nlisten; j++) {
			if (s->listen[j] != k)
				continue;
			if (first == NULL)
				first = s;
			l = cfg_opt_getnptr(o, (unsigned)j);
			if (l->default_server && chosen == NULL)
				chosen = s;
		}
	}
	if (chosen == NULL)
		chosen = first;
	if (chosen != NULL)
		chosen->default_for[k] = true;
}

/*
 * Every address any server listens on, once; a server without listen has
 * the global list.
 */
void
build_listen(cfg_t *cfg, struct config *cf)
{
	struct config_server *s;
	cfg_opt_t *o;
	size_t i, j, max = 0;
	int k;

	for (i = 0; i < cf->nservers; i++)
		max += cfg_opt_size(listen_of(cfg_getnsec(cfg, "server",
		    (unsigned)i)));
	if (cf->servers == NULL ||
	    (cf->listen = calloc(max, sizeof(*cf->listen))) == NULL) {
		loading->oom = true;
		return;
	}
	for (i = 0; i < cf->nservers; i++) {
		s = &cf->servers[i];
		o = listen_of(cfg_getnsec(cfg, "server", (unsigned)i));
		s->nlisten = cfg_opt_size(o);
		s->listen = calloc(s->nlisten, sizeof(*s->listen));
		if (s->listen == NULL) {
			loading->oom = true;
			return;
		}
		for (j = 0; j < s->nlisten; j++) {
			k = listen_add(cf, cfg_opt_getnptr(o, (unsigned)j), max);
			if (k < 0) {
				loading->oom = true;
				return;
			}
			s->listen[j] = (size_t)k;
		}
	}
	for (i = 0; i < cf->nservers; i++) {
		s = &cf->servers[i];
		if ((s->default_for = calloc(max, sizeof(bool))) == NULL) {
			loading->oom = true;
			return;
		}
	}
	for (i = 0; i < cf->nlisten; i++)
		choose_default(cfg, cf, i);
}

/* One pair of listen entries: a is server si's, b an earlier one. */
static bool
check_listen_pair(cfg_t *si, const struct config_listen *a,
    const struct config_listen *b, bool same_server)
{
	if (same_address(a, b) && a->default_server && b->default_server &&
	    !same_server) {
		cf_fail(si->line, "listen \"%s\": two servers are its "
		    "default_server", a->text);
		return false;
	}
	if (listen_rel(a, b) == LISTEN_OVERLAP) {
		cf_fail(si->line, "listen \"%s\" and \"%s\" cannot both be bound "
		    "(a wildcard and an address on the same port); list the "
		    "same address in both servers", a->text, b->text);
		return false;
	}
	return true;
}

/*
 * Addresses every server listens on: one default_server each, and no
 * wildcard beside a specific address on the same port.
 */
void
check_listen(cfg_t *cfg)
{
	cfg_opt_t *o, *p;
	unsigned int i, j, x, y;
	cfg_t *si;

	for (i = 0; i < cfg_size(cfg, "server"); i++) {
		si = cfg_getnsec(cfg, "server", i);
		o = listen_of(si);
		for (x = 0; x < cfg_opt_size(o); x++)
			for (j = 0; j <= i; j++) {
				p = listen_of(cfg_getnsec(cfg, "server", j));
				for (y = 0; y < cfg_opt_size(p); y++) {
					if (j == i && y >= x)
						break;
					if (!check_listen_pair(si,
					    cfg_opt_getnptr(o, x),
					    cfg_opt_getnptr(p, y), j == i))
						return;
				}
			}
	}
}

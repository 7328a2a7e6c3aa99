/* upstream blocks, and what locations send them: proxy, FastCGI, memcached. */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <confuse.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config_impl.h"
#include "worker/http_lex.h"
#include "worker/vars.h"

/*
 * A unix socket peer, "unix:PATH": a relative PATH is taken from the
 * config's folder.  The socket need not exist yet (the application may
 * start after corral).
 */
static const char *
parse_unix_peer(const char *path, struct config_peer *p)
{
	struct sockaddr_un *un = (struct sockaddr_un *)&p->addr;

	if (path[0] == '\0')
		return "expected unix:/path/to/socket";
	if (join_path(loading->tmp, sizeof(loading->tmp), loading->dir, path) == -1 ||
	    strlen(loading->tmp) >= sizeof(un->sun_path) ||
	    strlen(loading->tmp) + 5 >= sizeof(p->text))
		return "the socket path is too long (at most 107 bytes)";
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	strcpy(un->sun_path, loading->tmp);
	p->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    strlen(un->sun_path) + 1);
	snprintf(p->text, sizeof(p->text), "unix:%s", un->sun_path);
	return NULL;
}

/*
 * "name:port", resolved now, as nginx resolves its upstream servers at
 * start (and at each reload here): the first IPv4 address, else the first
 * IPv6 one, so that "localhost" is the same address on every machine.
 */
static const char *
resolve_peer(const char *addr, struct config_peer *p)
{
	static char why[320];
	const char *colon = strrchr(addr, ':');
	struct addrinfo hints, *res, *ai, *pick = NULL;
	char host[256], port[8];
	size_t n = (size_t)(colon - addr);
	int rc;

	if (n == 0 || n >= sizeof(host) || addr[0] == '[')
		return NULL;
	memcpy(host, addr, n);
	host[n] = '\0';
	if (!valid_host_name(host) || host[0] == '*' || host[0] == '_' ||
	    parse_port(colon + 1, port, sizeof(port)) == -1)
		return NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		snprintf(why, sizeof(why), "cannot resolve \"%s\": %s", host,
		    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return why;
	}
	for (ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
		if (ai->ai_family == AF_INET)
			pick = ai;
	for (ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
		if (ai->ai_family == AF_INET6)
			pick = ai;
	if (pick == NULL || pick->ai_addrlen > sizeof(p->addr)) {
		freeaddrinfo(res);
		snprintf(why, sizeof(why), "\"%s\" has no IP address", host);
		return why;
	}
	memcpy(&p->addr, pick->ai_addr, pick->ai_addrlen);
	p->addrlen = pick->ai_addrlen;
	freeaddrinfo(res);
	snprintf(p->text, sizeof(p->text), "%s", addr);
	p->named = true;
	return "";
}

/* An "IPv4:port" or "[IPv6]:port" peer, or "name:port" (resolve_peer). */
static const char *
parse_inet_peer(const char *addr, struct config_peer *p)
{
	struct config_listen l;
	const char *why, *named;

	if (addr[0] == '*' || strchr(addr, ':') == NULL)
		return "expected address:port or unix:/path";
	if (strlen(addr) >= sizeof(l.text))
		return "too long";
	if ((why = parse_listen(addr, &l)) != NULL &&
	    (named = resolve_peer(addr, p)) != NULL)
		return named[0] == '\0' ? NULL : named;
	if (why != NULL && addr[0] != '[' && strstr(why, "names") != NULL)
		return "not an IP address or a host name";
	if (why != NULL)
		return why;
	p->addr = l.addr;
	p->addrlen = l.addrlen;
	strcpy(p->text, l.text);
	return NULL;
}

/*
 * A peer address, with "https://" for TLS (or "http://"), then optional
 * " weight=N" (1..100).
 */
int
cb_peer(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	struct config_peer *p;
	const char *why = NULL, *sp = strchr(value, ' '), *full = value;
	char addr[PATH_MAX];
	size_t n;
	uint64_t w = 1;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		cfg_error(cfg, "out of memory");
		return -1;
	}
	if (strncmp(value, "https://", 8) == 0) {
		p->tls = true;
		value += 8;
	} else if (strncmp(value, "http://", 7) == 0) {
		value += 7;
	}
	n = sp ? (size_t)(sp - value) : strlen(value);
	if (n >= sizeof(addr))
		why = "too long";
	else {
		memcpy(addr, value, n);
		addr[n] = '\0';
		why = strncmp(addr, "unix:", 5) == 0 ?
		    parse_unix_peer(addr + 5, p) : parse_inet_peer(addr, p);
	}
	if (why == NULL && sp != NULL) {
		sp += strspn(sp, " ");
		if (strncmp(sp, "weight=", 7) != 0 ||
		    parse_scaled_count(sp + 7, &w) == -1 ||
		    w < 1 || w > 100)
			why = "the only option is weight=N, N from 1 to 100";
	}
	if (why != NULL) {
		cfg_error(cfg, "invalid upstream server \"%s\": %s", full,
		    why);
		free(p);
		return -1;
	}
	p->weight = (int)w;
	*(void **)result = p;
	return 0;
}

/* A memcached listen address: "IP:port" or "unix:/path"; never UDP. */
int
cb_mc_listen(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	struct config_peer *p;
	const char *why;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		cfg_error(cfg, "out of memory");
		return -1;
	}
	why = strncmp(value, "unix:", 5) == 0 ?
	    parse_unix_peer(value + 5, p) : parse_inet_peer(value, p);
	if (why != NULL) {
		cfg_error(cfg, "invalid memcached listen \"%s\": %s", value,
		    why);
		free(p);
		return -1;
	}
	*(void **)result = p;
	return 0;
}

int
cb_protocol(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	(void)opt;
	if (strcmp(value, "http") != 0 && strcmp(value, "fastcgi") != 0 &&
	    strcmp(value, "memcached") != 0) {
		cfg_error(cfg, "unknown protocol \"%s\" (http, fastcgi or "
		    "memcached)", value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

int
cb_hash(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	(void)opt;
	if (strcmp(value, "ketama") != 0 &&
	    strcmp(value, "round_robin") != 0) {
		cfg_error(cfg, "unknown hash \"%s\" (ketama or round_robin)",
		    value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

static const struct {
	const char *name;
	unsigned bit;
} next_words[] = {
	{ "error", NEXT_ERROR },
	{ "timeout", NEXT_TIMEOUT },
	{ "non_idempotent", NEXT_NON_IDEMPOTENT },
	{ "off", 0 },
};

int
cb_next(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	size_t i;

	(void)opt;
	for (i = 0; i < nitems(next_words); i++)
		if (strcmp(next_words[i].name, value) == 0) {
			*(const char **)result = value;
			return 0;
		}
	cfg_error(cfg, "unknown next_upstream \"%s\" (error, timeout, "
	    "non_idempotent or off)", value);
	return -1;
}

static unsigned
next_bits(cfg_t *sec)
{
	unsigned bits = 0;
	size_t i, j;

	for (i = 0; i < cfg_size(sec, "next_upstream"); i++)
		for (j = 0; j < nitems(next_words); j++)
			if (strcmp(next_words[j].name,
			    cfg_getnstr(sec, "next_upstream", i)) == 0)
				bits |= next_words[j].bit;
	return bits;
}

/* The key of a memcached location: the URI, as nginx's $memcached_key
 * usually is (variables of every kind come with the site's). */
int
cb_mc_key(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	struct vars_tmpl *t;
	char err[256];

	(void)opt;
	/* Variables of the request itself: no captures, no rewrites. */
	if ((t = vars_compile(value, 0, err, sizeof(err))) == NULL) {
		cfg_error(cfg, "memcached_key \"%s\": %s", value, err);
		return -1;
	}
	vars_free(t);
	*(const char **)result = value;
	return 0;
}

/* A path: '/' first, then visible bytes, no query or fragment. */
int
cb_proxy_path(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	const char *p;

	(void)opt;
	for (p = value; *p > ' ' && *p < 0x7f && *p != '?' && *p != '#'; p++)
		;
	if (value[0] != '/' || *p != '\0') {
		cfg_error(cfg, "proxy_path \"%s\": expected a path starting "
		    "with '/', without spaces, '?' or '#'", value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

/*
 * "Name value": a field name (RFC 9110 token), a space, a template.  The
 * framing and Connection are corral's; Host may change, not go.
 */
int
cb_proxy_header(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	size_t n = http_token_len((struct span){ value, strlen(value) });
	const char *v = value[n] == ' ' ? value + n + 1 : value + n;
	struct vars_tmpl *t;
	char err[256];

	if (n == 0 || (value[n] != ' ' && value[n] != '\0')) {
		cfg_error(cfg, "%s \"%s\": expected \"Name value\" with a "
		    "field name", opt->name, value);
		return -1;
	}
	if ((n == 14 && strncasecmp(value, "content-length", n) == 0) ||
	    (n == 17 && strncasecmp(value, "transfer-encoding", n) == 0) ||
	    (n == 10 && strncasecmp(value, "connection", n) == 0) ||
	    (n == 7 && strncasecmp(value, "upgrade", n) == 0)) {
		cfg_error(cfg, "%s \"%s\": corral sets %.*s itself",
		    opt->name, value, (int)n, value);
		return -1;
	}
	if (n == 4 && strncasecmp(value, "host", 4) == 0 && *v == '\0') {
		cfg_error(cfg, "%s \"%s\": a request needs a Host", opt->name,
		    value);
		return -1;
	}
	if ((t = vars_compile(v, 9, err, sizeof(err))) == NULL) {
		cfg_error(cfg, "%s \"%s\": %s", opt->name, value, err);
		return -1;
	}
	vars_free(t);
	*(const char **)result = value;
	return 0;
}

void
build_proxy_headers(cfg_t *ls, struct config_location *l)
{
	size_t ns = cfg_size(ls, "proxy_set_header"), i, n;
	size_t na = cfg_size(ls, "proxy_append_header");
	struct config_proxy_header *h;
	const char *v, *sp;
	char err[256];

	if (ns + na == 0)
		return;
	if ((l->proxy_headers = calloc(ns + na, sizeof(*h))) == NULL) {
		loading->oom = true;
		return;
	}
	l->nproxy_headers = ns + na;
	for (i = 0; i < ns + na; i++) {
		h = &l->proxy_headers[i];
		h->append = i >= ns;
		v = h->append ? cfg_getnstr(ls, "proxy_append_header",
		    (unsigned)(i - ns)) : cfg_getnstr(ls, "proxy_set_header",
		    (unsigned)i);
		sp = strchr(v, ' ');
		n = sp != NULL ? (size_t)(sp - v) : strlen(v);
		if ((h->name = strndup(v, n)) == NULL || (h->tmpl =
		    vars_compile(sp != NULL ? sp + 1 : "", 9, err,
		    sizeof(err))) == NULL)
			loading->oom = true;	/* it compiled in cb_proxy_header */
	}
}

/*
 * "NAME VALUE" or "NAME VALUE if_not_empty": NAME is what CGI names take
 * (letters, digits, '_'); VALUE may be empty ("NAME ").
 */
int
cb_fcgi_param(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	const char *p = value;
	struct vars_tmpl *t;
	char err[256];

	(void)opt;
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
	    (*p >= '0' && *p <= '9') || *p == '_')
		p++;
	if (p == value || (*p != ' ' && *p != '\0')) {
		cfg_error(cfg, "fastcgi_param \"%s\": expected \"NAME VALUE\" "
		    "with a NAME of letters, digits and '_'", value);
		return -1;
	}
	/* $1..$9 are a regex location's groups (empty when it has
	 * fewer), as in nginx. */
	if ((t = vars_compile(*p ? p + 1 : p, 9, err, sizeof(err))) ==
	    NULL) {
		cfg_error(cfg, "fastcgi_param \"%s\": %s", value, err);
		return -1;
	}
	vars_free(t);
	*(const char **)result = value;
	return 0;
}

/* nginx's fastcgi_split_path_info: a regex with two groups. */
int
cb_split_path_info(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result)
{
	char err[512];
	void *re;
	int n;

	if ((re = config_regex(value, &n, err, sizeof(err))) == NULL) {
		cfg_error(cfg, "%s: %s", opt->name, err);
		return -1;
	}
	config_regex_free(re);
	if (n != 2) {
		cfg_error(cfg, "%s \"%s\": needs two groups, the script and "
		    "the path info (it has %d)", opt->name, value, n);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

int
validate_upstream(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *sec = cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1);
	const char *hash = cfg_getstr(sec, "hash");
	const struct config_peer *p;
	bool tls = cfg_getbool(sec, "tls");
	size_t i;

	if (cfg_size(sec, "servers") == 0) {
		cfg_error(cfg, "upstream \"%s\" ending here has no servers",
		    cfg_title(sec));
		return -1;
	}
	if (hash != NULL && strcmp(hash, "ketama") == 0 &&
	    strcmp(cfg_getstr(sec, "protocol"), "memcached") != 0) {
		cfg_error(cfg, "upstream \"%s\": hash = ketama needs "
		    "protocol = memcached", cfg_title(sec));
		return -1;
	}
	for (i = 0; i < cfg_size(sec, "next_upstream"); i++)
		if (strcmp(cfg_getnstr(sec, "next_upstream", i), "off") == 0 &&
		    cfg_size(sec, "next_upstream") > 1) {
			cfg_error(cfg, "upstream \"%s\" ending here: "
			    "next_upstream \"off\" stands alone",
			    cfg_title(sec));
			return -1;
		}
	for (i = 0; i < cfg_size(sec, "servers"); i++) {
		p = cfg_getnptr(sec, "servers", i);
		if (!p->tls && !tls)
			continue;
		if (strcmp(cfg_getstr(sec, "protocol"), "http") != 0) {
			cfg_error(cfg, "upstream \"%s\" ending here: TLS "
			    "(%s) is for protocol http only", cfg_title(sec),
			    p->tls ? "https://" : "tls = on");
			return -1;
		}
		/* A socket has no name or address to check: tls_name. */
		if (p->addr.ss_family == AF_UNIX &&
		    cfg_getbool(sec, "tls_verify") &&
		    cfg_getstr(sec, "tls_name") == NULL) {
			cfg_error(cfg, "upstream \"%s\" ending here: server "
			    "%s over TLS needs tls_name, the name its "
			    "certificate is checked against (or tls_verify = "
			    "off)", cfg_title(sec), p->text);
			return -1;
		}
	}
	return 0;
}

/* The upstream may be defined later in the file: check() looks it up. */
int
validate_proxy(cfg_t *cfg, cfg_opt_t *opt)
{
	size_t i;

	if (validate_nonempty(cfg, opt) == -1)
		return -1;
	for (i = 0; i < loading->nproxy_lines; i++)
		if (loading->proxy_lines[i].sec == cfg)
			break;
	if (i == nitems(loading->proxy_lines)) {
		cfg_error(cfg, "too many locations with proxy (at most %zu)",
		    nitems(loading->proxy_lines));
		return -1;
	}
	loading->proxy_lines[i].sec = cfg;
	loading->proxy_lines[i].line = cfg->line;
	if (i == loading->nproxy_lines)
		loading->nproxy_lines++;
	return 0;
}

int
find_upstream(cfg_t *cfg, const char *name)
{
	unsigned int i;

	for (i = 0; i < cfg_size(cfg, "upstream"); i++)
		if (strcmp(cfg_title(cfg_getnsec(cfg, "upstream", i)),
		    name) == 0)
			return (int)i;
	return -1;
}

/*
 * A location's proxy or fastcgi names an upstream of the file that speaks
 * that protocol, and not both.
 */
static void
check_upstream_use(cfg_t *cfg, cfg_t *ls, int line)
{
	const char *proxy = cfg_getstr(ls, "proxy");
	const char *fcgi = cfg_getstr(ls, "fastcgi");
	const char *mc = cfg_getstr(ls, "memcached");
	const char *name = proxy != NULL ? proxy : fcgi, *want;
	int i;

	if ((proxy != NULL) + (fcgi != NULL) + (mc != NULL) > 1) {
		cf_fail(line, "a location has one of proxy, fastcgi and "
		    "memcached");
		return;
	}
	if (mc != NULL) {
		if ((i = find_upstream(cfg, mc)) < 0)
			cf_fail(line, "memcached \"%s\": no upstream has that "
			    "name", mc);
		else if (strcmp(cfg_getstr(cfg_getnsec(cfg, "upstream",
		    (unsigned)i), "protocol"), "memcached") != 0)
			cf_fail(line, "memcached \"%s\": that upstream's protocol "
			    "is not memcached (set protocol = memcached in it)",
			    mc);
		return;
	}
	if (proxy == NULL && cfg_getstr(ls, "proxy_path") != NULL) {
		cf_fail(line, "proxy_path needs proxy in its location");
		return;
	}
	if (proxy == NULL && (cfg_size(ls, "proxy_set_header") > 0 ||
	    cfg_size(ls, "proxy_append_header") > 0)) {
		cf_fail(line, "proxy_set_header and proxy_append_header need "
		    "proxy in their location (FastCGI: fastcgi_param)");
		return;
	}
	if (name == NULL)
		return;
	if ((i = find_upstream(cfg, name)) < 0) {
		cf_fail(line, "%s \"%s\": no upstream has that name",
		    proxy != NULL ? "proxy" : "fastcgi", name);
		return;
	}
	want = proxy != NULL ? "http" : "fastcgi";
	if (strcmp(cfg_getstr(cfg_getnsec(cfg, "upstream", (unsigned)i),
	    "protocol"), want) != 0)
		cf_fail(line, "%s \"%s\": that upstream's protocol is not %s%s",
		    proxy != NULL ? "proxy" : "fastcgi", name, want,
		    proxy != NULL ? " (use fastcgi = for a FastCGI upstream)" :
		    " (set protocol = fastcgi in it)");
}

/* Every proxy and fastcgi must name an upstream of the file. */
void
check_proxies(cfg_t *cfg)
{
	size_t i;

	for (i = 0; i < loading->nproxy_lines && !loading->failed; i++)
		check_upstream_use(cfg, loading->proxy_lines[i].sec,
		    loading->proxy_lines[i].line);
}

struct config_fastcgi *
build_fastcgi(cfg_t *ls)
{
	struct config_fastcgi *f = calloc(1, sizeof(*f));
	struct config_fcgi_param *p;
	const char *v, *sp, *rest;
	size_t i, n = cfg_size(ls, "fastcgi_param"), vlen;
	char err[512];
	int caps;

	if (f == NULL || (n > 0 &&
	    (f->params = calloc(n, sizeof(*f->params))) == NULL)) {
		loading->oom = true;
		return f;
	}
	f->nparams = n;
	for (i = 0; i < n; i++) {
		v = cfg_getnstr(ls, "fastcgi_param", i);
		p = &f->params[i];
		sp = strchr(v, ' ');
		rest = sp != NULL ? sp + 1 : v + strlen(v);
		vlen = strlen(rest);
		if (vlen >= 13 && strcmp(rest + vlen - 13, " if_not_empty") ==
		    0) {
			p->if_not_empty = true;
			vlen -= 13;
		}
		p->name = strndup(v, (size_t)((sp != NULL ? sp : rest) - v));
		p->value = strndup(rest, vlen);
		if (p->name == NULL || p->value == NULL ||
		    (p->tmpl = vars_compile(p->value, 9, err,
		    sizeof(err))) == NULL)
			loading->oom = true;	/* it compiled in cb_fcgi_param */
	}
	f->index = cf_copy(cfg_getstr(ls, "fastcgi_index"));
	if (cfg_getstr(ls, "fastcgi_split_path_info") != NULL &&
	    (f->split_re = config_regex(cfg_getstr(ls,
	    "fastcgi_split_path_info"), &caps, err, sizeof(err))) == NULL)
		loading->oom = true;		/* it compiled in its callback */
	f->script_check = cfg_getbool(ls, "fastcgi_script_check");
	f->request_buffering = cfg_getbool(ls, "fastcgi_request_buffering");
	return f;
}

void
free_fastcgi(struct config_fastcgi *f)
{
	size_t i;

	if (f == NULL)
		return;
	for (i = 0; i < f->nparams && f->params != NULL; i++) {
		free(f->params[i].name);
		free(f->params[i].value);
		vars_free(f->params[i].tmpl);
	}
	free(f->params);
	free(f->index);
	if (f->split_re != NULL)
		config_regex_free(f->split_re);
	free(f);
}

void
build_upstream(cfg_t *sec, struct config_upstream *u)
{
	size_t i;

	u->name = cf_copy(cfg_title(sec));
	u->npeers = cfg_size(sec, "servers");
	if ((u->peers = calloc(u->npeers, sizeof(*u->peers))) == NULL) {
		loading->oom = true;
		return;
	}
	for (i = 0; i < u->npeers; i++)
		u->peers[i] = *(struct config_peer *)
		    cfg_getnptr(sec, "servers", i);
	u->keepalive = cfg_getint(sec, "keepalive");
	u->protocol = strcmp(cfg_getstr(sec, "protocol"), "fastcgi") == 0 ?
	    PROTO_FASTCGI : strcmp(cfg_getstr(sec, "protocol"), "memcached") ==
	    0 ? PROTO_MEMCACHED : PROTO_HTTP;
	/* A memcached cluster is hashed by key unless told otherwise. */
	u->hash = u->protocol == PROTO_MEMCACHED ? HASH_KETAMA :
	    HASH_ROUND_ROBIN;
	if (cfg_getstr(sec, "hash") != NULL)
		u->hash = strcmp(cfg_getstr(sec, "hash"), "ketama") == 0 ?
		    HASH_KETAMA : HASH_ROUND_ROBIN;
	u->connect_timeout_ms = cfg_getint(sec, "connect_timeout");
	u->read_timeout_ms = cfg_getint(sec, "read_timeout");
	u->send_timeout_ms = cfg_getint(sec, "send_timeout");
	u->max_fails = cfg_getint(sec, "max_fails");
	u->fail_timeout_ms = cfg_getint(sec, "fail_timeout");
	u->next_upstream = next_bits(sec);
	u->next_upstream_tries = cfg_getint(sec, "next_upstream_tries");
	for (i = 0; i < u->npeers; i++) {
		u->peers[i].tls |= cfg_getbool(sec, "tls");
		u->any_tls |= u->peers[i].tls;
	}
	u->tls_verify = cfg_getbool(sec, "tls_verify");
	u->tls_name = cf_copy(cfg_getstr(sec, "tls_name"));
	if (cfg_getstr(sec, "tls_trusted_certificate") != NULL)
		u->tls_trusted_certificate = copy_path(cfg_getstr(sec,
		    "tls_trusted_certificate"), NULL);
	u->tls_trusted_certificate_line = opt_line(sec,
	    "tls_trusted_certificate");
	u->tls_session_reuse = cfg_getbool(sec, "tls_session_reuse");
}

/* Who may ask, and how much: allow, deny, auth_basic, body size, limits. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"
#include "worker/vars.h"

static int cb_zone_rate(cfg_t *, cfg_opt_t *, const char *, void *);

cfg_opt_t site_limit_zone_opts[] = {
	CFG_STR("key", "$remote_addr", CFGF_NONE),
	CFG_INT_CB("rate", 0, CFGF_NODEFAULT, cb_zone_rate),
	CFG_INT("status", 503, CFGF_NONE),
	CFG_END()
};

/* "10r/s" or "600r/m": kept as requests per 1000 seconds. */
static int
cb_zone_rate(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	uint64_t n = 0;
	const char *p = value;

	while (*p >= '0' && *p <= '9' && n < 1000000000)
		n = n * 10 + (uint64_t)(*p++ - '0');
	if (p == value || n == 0 || n >= 1000000000 ||
	    (strcmp(p, "r/s") != 0 && strcmp(p, "r/m") != 0)) {
		cfg_error(cfg, "invalid rate \"%s\" (like 10r/s or 30r/m)",
		    value);
		return -1;
	}
	*(long *)result = (long)(p[2] == 's' ? n * 1000 : n * 1000 / 60);
	if (*(long *)result == 0)
		*(long *)result = 1;
	return 0;
}

/* allow, deny -------------------------------------------------------------- */

static int
parse_acl(const char *v, bool allow, struct config_acl *a)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(v, '/');
	size_t n = slash ? (size_t)(slash - v) : strlen(v);
	unsigned max, i;
	char *end;
	long bits;

	memset(a, 0, sizeof(*a));
	a->allow = allow;
	if (strcmp(v, "all") == 0) {
		a->all = true;
		return 0;
	}
	if (n >= sizeof(addr))
		return -1;
	memcpy(addr, v, n);
	addr[n] = '\0';
	a->family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	if (inet_pton(a->family, addr, a->addr) != 1)
		return -1;
	max = a->family == AF_INET ? 32 : 128;
	bits = max;
	if (slash != NULL) {
		bits = strtol(slash + 1, &end, 10);
		if (end == slash + 1 || *end != '\0' || bits < 0 ||
		    bits > (long)max)
			return -1;
	}
	a->bits = (unsigned)bits;
	/* Host bits set under the mask are a typo more often than not. */
	for (i = a->bits; i < max; i++)
		if (a->addr[i / 8] & (0x80 >> (i % 8)))
			return -1;
	return 0;
}

int
validate_acl(cfg_t *cfg, cfg_opt_t *opt)
{
	struct config_acl a;
	unsigned int i;
	bool allow = strcmp(opt->name, "allow") == 0;

	for (i = 0; i < cfg_opt_size(opt); i++)
		if (parse_acl(cfg_opt_getnstr(opt, i), allow, &a) == -1) {
			cfg_error(cfg, "invalid %s \"%s\" (an IPv4 or IPv6 "
			    "address, with an optional /prefix length and no "
			    "host bits past it, or \"all\")", opt->name,
			    cfg_opt_getnstr(opt, i));
			return -1;
		}
	opt_line_note(cfg, opt->name, cfg->line);
	return 0;
}

/* auth_basic ------------------------------------------------------------ */

/* Which crypt(3) hashes are accepted; NULL when fine, else why not. */
static const char *
hash_refused(const char *h)
{
	static const char *const ok[] = { "$2y$", "$2b$", "$2a$", "$5$",
	    "$6$", "$y$", "$gy$", "$7$" };
	size_t i;

	for (i = 0; i < nitems(ok); i++)
		if (strncmp(h, ok[i], strlen(ok[i])) == 0)
			return NULL;
	if (strncmp(h, "$apr1$", 6) == 0 || strncmp(h, "$1$", 3) == 0)
		return "is MD5 (htpasswd -m), which is too weak: make it "
		    "again with htpasswd -B (bcrypt)";
	if (strncmp(h, "{SHA}", 5) == 0)
		return "is unsalted SHA-1 (htpasswd -s), which is too weak: "
		    "make it again with htpasswd -B (bcrypt)";
	if (h[0] != '$')
		return "is plain crypt or clear text (htpasswd -d or -p), "
		    "which is too weak: make it again with htpasswd -B "
		    "(bcrypt)";
	return "is of a kind corral does not know (bcrypt $2y$, SHA-crypt "
	    "$5$ or $6$, or yescrypt $y$)";
}

/*
 * Reads "user:hash" lines ('#' comments, blank lines).  On error returns
 * -1 with the message in err.
 */
static int
htpasswd_read(const char *path, struct config_htpasswd *h, char *err,
    size_t errlen)
{
	char line[1024], *colon, *end;
	const char *why;
	struct config_user *u;
	FILE *fp;
	int n = 0;

	memset(h, 0, sizeof(*h));
	if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "auth_basic_user_file \"%s\": %s", path,
		    strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), fp) != NULL) {
		n++;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0' || line[0] == '#')
			continue;
		colon = strchr(line, ':');
		if (colon == NULL || colon == line) {
			snprintf(err, errlen, "%s:%d: expected user:hash",
			    path, n);
			goto fail;
		}
		*colon++ = '\0';
		/* Apache's digest files have a realm field after it. */
		if ((end = strchr(colon, ':')) != NULL)
			*end = '\0';
		if ((why = hash_refused(colon)) != NULL) {
			snprintf(err, errlen, "%s:%d: the password of \"%s\" "
			    "%s", path, n, line, why);
			goto fail;
		}
		if (h->nusers % 16 == 0) {
			u = realloc(h->users, (h->nusers + 16) * sizeof(*u));
			if (u == NULL)
				goto oom;
			h->users = u;
		}
		u = &h->users[h->nusers];
		u->name = strdup(line);
		u->hash = strdup(colon);
		h->nusers++;
		if (u->name == NULL || u->hash == NULL)
			goto oom;
	}
	if (ferror(fp)) {
		snprintf(err, errlen, "auth_basic_user_file \"%s\": %s", path,
		    strerror(errno));
		goto fail;
	}
	fclose(fp);
	if (h->nusers == 0) {
		snprintf(err, errlen, "auth_basic_user_file \"%s\" has no "
		    "users", path);
		goto fail_closed;
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	fclose(fp);
fail_closed:
	for (size_t i = 0; i < h->nusers; i++) {
		free(h->users[i].name);
		free(h->users[i].hash);
	}
	free(h->users);
	memset(h, 0, sizeof(*h));
	return -1;
}

void
htpasswd_free(struct config_htpasswd *h)
{
	for (size_t i = 0; i < h->nusers; i++) {
		free(h->users[i].name);
		free(h->users[i].hash);
	}
	free(h->users);
	free(h->path);
}

int
validate_user_file(cfg_t *cfg, cfg_opt_t *opt)
{
	struct config_htpasswd h;
	char path[PATH_MAX], err[PATH_MAX + 256];

	if (join_path(path, sizeof(path), loading->dir, cfg_opt_getnstr(opt, 0)) ==
	    -1 || htpasswd_read(path, &h, err, sizeof(err)) == -1) {
		cfg_error(cfg, "%s", err);
		return -1;
	}
	h.path = NULL;
	htpasswd_free(&h);
	opt_line_note(cfg, opt->name, cfg->line);
	return 0;
}

int
validate_auth(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *v = cfg_opt_getnstr(opt, 0);

	if (v[0] == '\0' || strpbrk(v, "\"\\\r\n") != NULL) {
		cfg_error(cfg, "auth_basic must be a realm without quotes or "
		    "backslashes, or \"off\"");
		return -1;
	}
	opt_line_note(cfg, opt->name, cfg->line);
	return 0;
}

/* Limits --------------------------------------------------------------- */

int
validate_body_size(cfg_t *cfg, cfg_opt_t *opt)
{
	uint64_t v;

	if (parse_scaled_size(cfg_opt_getnstr(opt, 0), &v) == -1) {
		cfg_error(cfg, "invalid size \"%s\" for max_body_size (a "
		    "number with an optional k, m or g; 0: no limit)",
		    cfg_opt_getnstr(opt, 0));
		return -1;
	}
	return 0;
}

/* "ZONE [burst=N] [nodelay]" */
int
parse_limit_req(const char *v, char *zone, size_t zlen, int *burst,
    bool *nodelay)
{
	const char *p = v;
	size_t n = strcspn(p, " ");
	char *end;
	long b;

	if (n == 0 || n >= zlen)
		return -1;
	memcpy(zone, p, n);
	zone[n] = '\0';
	*burst = 0;
	*nodelay = false;
	for (p += n; *p != '\0'; ) {
		while (*p == ' ')
			p++;
		if (strncmp(p, "burst=", 6) == 0) {
			b = strtol(p + 6, &end, 10);
			if (end == p + 6 || b < 0 || b > 100000 ||
			    (*end != ' ' && *end != '\0'))
				return -1;
			*burst = (int)b;
			p = end;
		} else if (strncmp(p, "nodelay", 7) == 0 &&
		    (p[7] == ' ' || p[7] == '\0')) {
			*nodelay = true;
			p += 7;
		} else if (*p != '\0')
			return -1;
	}
	return 0;
}

/* "ZONE N", or "N" with the zone of the scope's limit_req. */
int
parse_limit_conn(const char *v, char *zone, size_t zlen, int *max)
{
	const char *sp = strrchr(v, ' ');
	const char *num = sp ? sp + 1 : v;
	char *end;
	long n;

	zone[0] = '\0';
	if (sp != NULL) {
		if ((size_t)(sp - v) >= zlen || sp == v)
			return -1;
		memcpy(zone, v, (size_t)(sp - v));
		zone[sp - v] = '\0';
	}
	n = strtol(num, &end, 10);
	if (end == num || *end != '\0' || n < 1 || n > 1000000)
		return -1;
	*max = (int)n;
	return 0;
}

int
validate_limit_req(cfg_t *cfg, cfg_opt_t *opt)
{
	char zone[128];
	int burst;
	bool nodelay;

	if (parse_limit_req(cfg_opt_getnstr(opt, 0), zone, sizeof(zone),
	    &burst, &nodelay) == -1) {
		cfg_error(cfg, "invalid limit_req \"%s\" (a limit_zone name, "
		    "then optional burst=N and nodelay)",
		    cfg_opt_getnstr(opt, 0));
		return -1;
	}
	opt_line_note(cfg, opt->name, cfg->line);
	return 0;
}

int
validate_limit_conn(cfg_t *cfg, cfg_opt_t *opt)
{
	char zone[128];
	int max;

	if (parse_limit_conn(cfg_opt_getnstr(opt, 0), zone, sizeof(zone),
	    &max) == -1) {
		cfg_error(cfg, "invalid limit_conn \"%s\" (a limit_zone name "
		    "and the most connections, like \"api 10\")",
		    cfg_opt_getnstr(opt, 0));
		return -1;
	}
	opt_line_note(cfg, opt->name, cfg->line);
	return 0;
}

int
validate_zone(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *sec = cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1);
	long status = cfg_getint(sec, "status");

	if (cfg_size(sec, "rate") == 0) {
		cfg_error(cfg, "limit_zone \"%s\" ending here has no rate",
		    cfg_title(sec));
		return -1;
	}
	if (status != 429 && status != 503) {
		cfg_error(cfg, "limit_zone \"%s\": status must be 429 or 503",
		    cfg_title(sec));
		return -1;
	}
	return cf_check_tmpl(cfg, "limit_zone key", cfg_getstr(sec, "key"), 0);
}

int
cf_find_zone(cfg_t *cfg, const char *name)
{
	for (unsigned int i = 0; i < cfg_size(cfg, "limit_zone"); i++)
		if (strcmp(cfg_title(cfg_getnsec(cfg, "limit_zone", i)), name)
		    == 0)
			return (int)i;
	return -1;
}

static int
htpasswd_index(struct config *cf, const char *file, int line)
{
	struct config_htpasswd *v, h;
	char path[PATH_MAX], err[PATH_MAX + 256];
	size_t i;

	if (join_path(path, sizeof(path), loading->dir, file) == -1) {
		cf_fail(line, "auth_basic_user_file: path too long");
		return -1;
	}
	for (i = 0; i < cf->nhtpasswd; i++)
		if (strcmp(cf->htpasswd[i].path, path) == 0)
			return (int)i;
	if (htpasswd_read(path, &h, err, sizeof(err)) == -1) {
		cf_fail(line, "%s", err);
		return -1;
	}
	v = realloc(cf->htpasswd, (cf->nhtpasswd + 1) * sizeof(*v));
	if (v == NULL || (h.path = cf_copy(path)) == NULL) {
		if (v != NULL)
			cf->htpasswd = v;
		htpasswd_free(&h);
		loading->oom = true;
		return -1;
	}
	cf->htpasswd = v;
	v[cf->nhtpasswd] = h;
	return (int)cf->nhtpasswd++;
}

static void
build_acl(cfg_t *ls, cfg_t *srv, struct config_location *l)
{
	cfg_t *sa = cf_setter(ls, srv, "allow"), *sd = cf_setter(ls, srv, "deny");
	cfg_opt_t *first, *second;
	size_t n = 0, i;

	/* Lists set in the location replace the server's, both of them. */
	if (ls != NULL && (cfg_size(ls, "allow") || cfg_size(ls, "deny")))
		sa = sd = ls;
	first = sa ? cfg_getopt(sa, "allow") : NULL;
	second = sd ? cfg_getopt(sd, "deny") : NULL;
	if (first != NULL && cfg_opt_size(first) == 0)
		first = NULL;
	if (second != NULL && cfg_opt_size(second) == 0)
		second = NULL;
	if (first == NULL && second == NULL) {
		l->acl_default_allow = true;
		return;
	}
	/* The list written first is looked at first; a client that matches
	 * no rule gets the opposite of the last list's verdict. */
	if (first != NULL && second != NULL &&
	    opt_line(sd, "deny") < opt_line(sa, "allow")) {
		cfg_opt_t *t = first;

		first = second;
		second = t;
	}
	l->nacl = (first ? cfg_opt_size(first) : 0) +
	    (second ? cfg_opt_size(second) : 0);
	if ((l->acl = calloc(l->nacl, sizeof(*l->acl))) == NULL) {
		loading->oom = true;
		l->nacl = 0;
		return;
	}
	for (i = 0; first && i < cfg_opt_size(first); i++)
		parse_acl(cfg_opt_getnstr(first, (unsigned)i),
		    strcmp(first->name, "allow") == 0, &l->acl[n++]);
	for (i = 0; second && i < cfg_opt_size(second); i++)
		parse_acl(cfg_opt_getnstr(second, (unsigned)i),
		    strcmp(second->name, "allow") == 0, &l->acl[n++]);
	l->acl_default_allow = !l->acl[n - 1].allow;
}

void
build_access(cfg_t *cfg, cfg_t *ls, cfg_t *srv, struct config *cf,
    struct config_location *l)
{
	char zone[128];
	cfg_opt_t *o;
	cfg_t *sec;
	uint64_t size;

	build_acl(ls, srv, l);
	l->auth_file = -1;
	if ((o = cf_inherited(ls, srv, "auth_basic")) != NULL &&
	    strcmp(cfg_opt_getnstr(o, 0), "off") != 0 &&
	    (sec = cf_setter(ls, srv, "auth_basic_user_file")) != NULL) {
		l->auth_realm = cf_copy(cfg_opt_getnstr(o, 0));
		l->auth_file = htpasswd_index(cf, cfg_getstr(sec,
		    "auth_basic_user_file"), opt_line(sec,
		    "auth_basic_user_file"));
	}
	l->max_body_size = cf->max_body_size;
	if ((o = cf_inherited(ls, srv, "max_body_size")) != NULL &&
	    parse_scaled_size(cfg_opt_getnstr(o, 0), &size) == 0)
		l->max_body_size = size;
	l->limit_req_zone = l->limit_conn_zone = -1;
	if ((o = cf_inherited(ls, srv, "limit_req")) != NULL &&
	    parse_limit_req(cfg_opt_getnstr(o, 0), zone, sizeof(zone),
	    &l->limit_req_burst, &l->limit_req_nodelay) == 0)
		l->limit_req_zone = cf_find_zone(cfg, zone);
	if ((o = cf_inherited(ls, srv, "limit_conn")) != NULL &&
	    parse_limit_conn(cfg_opt_getnstr(o, 0), zone, sizeof(zone),
	    &l->limit_conn) == 0)
		l->limit_conn_zone = zone[0] ? cf_find_zone(cfg, zone) :
		    l->limit_req_zone;
}

void
site_build(cfg_t *cfg, struct config *cf)
{
	struct config_limit_zone *z;
	char err[256];
	size_t i;

	cf->nlimit_zones = cfg_size(cfg, "limit_zone");
	if (cf->nlimit_zones == 0)
		return;
	cf->limit_zones = calloc(cf->nlimit_zones, sizeof(*z));
	if (cf->limit_zones == NULL) {
		loading->oom = true;
		cf->nlimit_zones = 0;
		return;
	}
	for (i = 0; i < cf->nlimit_zones; i++) {
		cfg_t *sec = cfg_getnsec(cfg, "limit_zone", (unsigned)i);

		z = &cf->limit_zones[i];
		z->name = cf_copy(cfg_title(sec));
		z->key = vars_compile(cfg_getstr(sec, "key"), 0, err,
		    sizeof(err));
		z->rate_milli = (uint64_t)cfg_getint(sec, "rate");
		z->status = (int)cfg_getint(sec, "status");
		if (z->key == NULL)
			loading->oom = true;
	}
}

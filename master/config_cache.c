/* The cache: its store and memcached sections, what a location caches. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <confuse.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"

static const struct {
	const char *name;
	unsigned bit;
} stale_words[] = {
	{ "updating", CACHE_STALE_UPDATING },
	{ "error", CACHE_STALE_ERROR },
	{ "timeout", CACHE_STALE_TIMEOUT },
	{ "http_500", CACHE_STALE_500 },
	{ "http_502", CACHE_STALE_502 },
	{ "http_503", CACHE_STALE_503 },
	{ "http_504", CACHE_STALE_504 },
};

static unsigned
stale_bit(const char *word)
{
	size_t i;

	for (i = 0; i < nitems(stale_words); i++)
		if (strcmp(stale_words[i].name, word) == 0)
			return stale_words[i].bit;
	return 0;
}

int
cb_stale(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	if (stale_bit(value) == 0) {
		cfg_error(cfg, "unknown cache_stale \"%s\" (updating, error, "
		    "timeout, http_500, http_502, http_503 or http_504)",
		    value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

/*
 * One cache_valid entry, "CODE ... TIME" (CODE: 100 to 999 or "any"; TIME
 * alone: 200, 301 and 302, as nginx): its statuses into out (NULL: only
 * counted), how many into *n.  0, or -1 with why.
 */
static int
parse_valid(const char *s, struct config_valid *out, size_t *n,
    const char **why)
{
	char word[32];
	const char *p = s, *e;
	int64_t ms = -1;
	size_t len, k = 0, i;
	int code;

	*n = 0;
	while (*p != '\0') {
		while (*p == ' ' || *p == '\t')
			p++;
		for (e = p; *e != '\0' && *e != ' ' && *e != '\t'; e++)
			;
		if ((len = (size_t)(e - p)) == 0)
			break;
		if (ms >= 0 || len >= sizeof(word)) {
			*why = "the time must come last";
			return -1;
		}
		memcpy(word, p, len);
		word[len] = '\0';
		p = e;
		if (strcmp(word, "any") == 0) {
			code = CONFIG_VALID_ANY;
		} else if (len == 3 && word[0] >= '1' && word[0] <= '9' &&
		    word[1] >= '0' && word[1] <= '9' && word[2] >= '0' &&
		    word[2] <= '9') {
			code = atoi(word);
		} else if (config_parse_time_ms(word, &ms) == 0) {
			if (ms > 30 * (int64_t)DAY) {
				*why = "the time must be at most 30d";
				return -1;
			}
			continue;
		} else {
			*why = "a status is 3 digits (100 to 999) or \"any\"";
			return -1;
		}
		if (out != NULL)
			out[k].status = code;
		k++;
	}
	if (ms < 0) {
		*why = "the time is missing";
		return -1;
	}
	if (k == 0) {
		static const int dflt[] = { 200, 301, 302 };

		for (; k < nitems(dflt); k++)
			if (out != NULL)
				out[k].status = dflt[k];
	}
	for (i = 0; out != NULL && i < k; i++)
		out[i].ttl = ms / SEC;
	*n = k;
	return 0;
}

int
cb_valid(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	const char *why = NULL;
	size_t n;

	(void)opt;
	if (parse_valid(value, NULL, &n, &why) == -1) {
		cfg_error(cfg, "invalid cache_valid \"%s\": %s (e.g. "
		    "\"200 301 10m\", \"any 1m\")", value, why);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

/* Every cache_valid entry of a location, in order. */
static void
build_valid(cfg_t *ls, struct config_location *l)
{
	size_t i, k, n = 0, total = 0, cnt = cfg_size(ls, "cache_valid");
	const char *why;

	for (i = 0; i < cnt; i++)
		if (parse_valid(cfg_getnstr(ls, "cache_valid", i), NULL, &k,
		    &why) == 0)
			total += k;
	if (total == 0)
		return;
	if ((l->cache_valid = calloc(total, sizeof(*l->cache_valid))) ==
	    NULL) {
		loading->oom = true;
		return;
	}
	for (i = 0; i < cnt; i++, n += k)
		if (parse_valid(cfg_getnstr(ls, "cache_valid", i),
		    l->cache_valid + n, &k, &why) == -1)
			k = 0;
	l->ncache_valid = n;
}

/* A numeric address, kept as inet_ntop() writes it, as clients are. */
int
cb_purge(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	unsigned char a[sizeof(struct in6_addr)];
	int af = strchr(value, ':') != NULL ? AF_INET6 : AF_INET;

	if (inet_pton(af, value, a) != 1 ||
	    inet_ntop(af, a, loading->result, sizeof(loading->result)) == NULL) {
		cfg_error(cfg, "%s \"%s\" is not a numeric address",
		    opt->name, value);
		return -1;
	}
	*(const char **)result = loading->result;
	return 0;
}

int
validate_stripes(cfg_t *cfg, cfg_opt_t *opt)
{
	long v = cfg_opt_getnint(opt, 0);

	if (validate_range(cfg, opt) == -1)
		return -1;
	if ((v & (v - 1)) != 0) {
		cfg_error(cfg, "cache stripes must be a power of two, not %ld",
		    v);
		return -1;
	}
	return 0;
}

/* The store's size, and the end of its section: where a store that
 * cannot be made is reported (by corral -t and at start alike). */
int
validate_cache_size(cfg_t *cfg, cfg_opt_t *opt)
{
	loading->cache_line = cfg->line;
	return validate_range(cfg, opt);
}

int
validate_cache(cfg_t *cfg, cfg_opt_t *opt)
{
	if (loading->cache_line == 0)
		loading->cache_line = cfg->line;
	return 0;
}

int
validate_memcached(cfg_t *cfg, cfg_opt_t *opt)
{
	if (loading->mc_line != 0) {
		cfg_error(cfg, "only one memcached section is allowed");
		return -1;
	}
	loading->mc_line = cfg->line;
	return 0;
}

int
validate_mc_max_item(cfg_t *cfg, cfg_opt_t *opt)
{
	loading->mc_max_item_line = cfg->line;
	return validate_range(cfg, opt);
}

/* cache l2 names a memcached group. */
static void
check_l2(cfg_t *cfg, cfg_t *cache)
{
	const char *name = cfg_getstr(cache, "l2");
	int i = find_upstream(cfg, name);

	if (i < 0)
		cf_fail(loading->cache_line, "cache l2 \"%s\": no upstream has that "
		    "name", name);
	else if (strcmp(cfg_getstr(cfg_getnsec(cfg, "upstream", (unsigned)i),
	    "protocol"), "memcached") != 0)
		cf_fail(loading->cache_line, "cache l2 \"%s\": that upstream's "
		    "protocol is not memcached", name);
}

/* The listener keeps its items in the store, with a small header. */
void
check_memcached(cfg_t *cfg)
{
	cfg_t *mc = cfg_size(cfg, "memcached") ? cfg_getsec(cfg, "memcached") :
	    NULL;
	cfg_t *cache = cfg_getsec(cfg, "cache");
	long max = mc ? cfg_getint(mc, "max_item") : 0;
	long obj = cfg_getint(cache, "max_object");
	char a[32], b[32];

	if (cfg_getstr(cache, "l2") != NULL)
		check_l2(cfg, cache);
	if (mc == NULL || loading->failed)
		return;
	if (cfg_size(mc, "listen") == 0)
		cf_fail(loading->mc_line, "memcached listen needs at least one address");
	else if (cfg_getint(cache, "size") == 0)
		cf_fail(loading->mc_line, "memcached keeps its items in the cache: "
		    "cache size must not be 0");
	else if (max > 0 && max + MC_ITEM_OVERHEAD > obj)
		cf_fail(loading->mc_max_item_line, "memcached max_item (%s) must be "
		    "at most cache max_object (%s) less %d bytes",
		    format_value(a, sizeof(a), U_SIZE, max),
		    format_value(b, sizeof(b), U_SIZE, obj), MC_ITEM_OVERHEAD);
}

void
build_location_cache(cfg_t *ls, struct config_location *l)
{
	size_t i;

	l->cache = cfg_getbool(ls, "cache");
	l->cache_ttl = cfg_getint(ls, "cache_ttl") / SEC;
	build_valid(ls, l);
	l->cache_cdn_control = cfg_getbool(ls, "cache_cdn_control");
	l->cache_lock = cfg_getbool(ls, "cache_lock");
	l->cache_lock_timeout_ms = cfg_getint(ls, "cache_lock_timeout");
	l->cache_pass_ttl_ms = cfg_getint(ls, "cache_pass_ttl");
	l->cache_grace = cfg_getint(ls, "cache_grace") / SEC;
	l->x_cache = cfg_getbool(ls, "x_cache");
	for (i = 0; i < cfg_size(ls, "cache_stale"); i++)
		l->cache_stale |= stale_bit(cfg_getnstr(ls, "cache_stale", i));
	l->purge_allow = copy_list(ls, "purge_allow", &l->npurge_allow);
	l->status = cfg_getbool(ls, "status");
	l->status_allow = copy_list(ls, "status_allow", &l->nstatus_allow);
}

void
build_memcached(cfg_t *cfg, struct config_memcached *m)
{
	cfg_t *sec;
	size_t i;

	if (cfg_size(cfg, "memcached") == 0)
		return;
	sec = cfg_getsec(cfg, "memcached");
	m->nlisten = cfg_size(sec, "listen");
	m->listen = calloc(m->nlisten, sizeof(*m->listen));
	if (m->listen == NULL) {
		loading->oom = true;
		m->nlisten = 0;
		return;
	}
	for (i = 0; i < m->nlisten; i++)
		m->listen[i] = *(struct config_peer *)cfg_getnptr(sec,
		    "listen", (unsigned)i);
	m->max_item = cfg_getint(sec, "max_item");
	m->allow_flush = cfg_getbool(sec, "allow_flush");
	m->idle_timeout_ms = cfg_getint(sec, "idle_timeout");
	m->line = loading->mc_line;
}

void
build_cache(cfg_t *sec, struct config_cache *c)
{
	c->path = copy_path(cfg_getstr(sec, "path"), "off");
	c->path_line = opt_line(sec, "path");
	c->size = cfg_getint(sec, "size");
	c->stripes = cfg_getint(sec, "stripes");
	c->max_object = cfg_getint(sec, "max_object");
	c->file_max = cfg_getint(sec, "file_max");
	c->file_copy_max = cfg_getint(sec, "file_copy_max");
	c->persist = cfg_getbool(sec, "persist");
	c->l2 = cfg_getstr(sec, "l2") != NULL ?
	    find_upstream(loading->cfg, cfg_getstr(sec, "l2")) : -1;
	c->l2_timeout_ms = cfg_getint(sec, "l2_timeout");
	c->line = loading->cache_line;
}

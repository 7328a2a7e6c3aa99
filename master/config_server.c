/* A server: its names, root, alias and index, and the list of its locations. */
#include <sys/stat.h>

#include <confuse.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"
#include "worker/vars.h"

int
cb_server_name(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	size_t i;

	if (!valid_host_name(value)) {
		cfg_error(cfg, "invalid server name \"%s\" (a host name, "
		    "\"*.\" and a host name, or \"_\")", value);
		return -1;
	}
	for (i = 0; value[i] != '\0'; i++)
		loading->result[i] = tolower((unsigned char)value[i]);
	loading->result[i] = '\0';
	*(const char **)result = loading->result;
	return 0;
}

/*
 * Stores the real path of a folder, so the workers never look at the
 * config's folder.  rest (may be empty) is kept after it as written.
 */
static int
check_dir(cfg_t *cfg, const char *what, const char *value, size_t n,
    const char *rest)
{
	struct stat st;
	char path[PATH_MAX];

	if (n == 0 || n >= sizeof(path)) {
		cfg_error(cfg, "%s must not be empty", what);
		return -1;
	}
	memcpy(path, value, n);
	path[n] = '\0';
	if (join_path(loading->tmp, sizeof(loading->tmp), loading->dir, path) == -1) {
		cfg_error(cfg, "%s \"%s\": path too long", what, value);
		return -1;
	}
	if (realpath(loading->tmp, loading->result) == NULL ||
	    stat(loading->result, &st) == -1) {
		cfg_error(cfg, "%s \"%s\": %s", what, loading->tmp, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		cfg_error(cfg, "%s \"%s\" is not a directory", what, loading->tmp);
		return -1;
	}
	if (strlen(loading->result) + strlen(rest) >= sizeof(loading->result)) {
		cfg_error(cfg, "%s \"%s\": path too long", what, value);
		return -1;
	}
	strcat(loading->result, rest);
	return 0;
}

int
cb_root(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	if (check_dir(cfg, "root", value, strlen(value), "") == -1)
		return -1;
	*(const char **)result = loading->result;
	return 0;
}

/*
 * An alias is a folder; in a regex location it may use captures after a
 * fixed folder ("/srv/img/$1"), which is then what the request cannot
 * leave.
 */
int
cb_alias(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	const char *dollar = strchr(value, '$'), *slash;
	size_t n = strlen(value);

	if (dollar != NULL) {
		for (slash = dollar; slash > value && *slash != '/'; slash--)
			;
		if (*slash != '/') {
			cfg_error(cfg, "alias \"%s\": a folder must come "
			    "before the first variable", value);
			return -1;
		}
		n = (size_t)(slash - value);
		if (check_dir(cfg, "alias", value, n ? n : 1, slash) == -1)
			return -1;
	} else if (check_dir(cfg, "alias", value, n, "") == -1)
		return -1;
	*(const char **)result = loading->result;
	return 0;
}

int
cb_index(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	if (value[0] == '\0' || strchr(value, '/') != NULL ||
	    strcmp(value, ".") == 0 || strcmp(value, "..") == 0) {
		cfg_error(cfg, "invalid index \"%s\" (a file name, without "
		    "'/')", value);
		return -1;
	}
	*(const char **)result = value;
	return 0;
}

static bool
has_name(cfg_t *sec, const char *name, unsigned int before)
{
	unsigned int i;

	for (i = 0; i < before; i++)
		if (strcmp(cfg_getnstr(sec, "names", i), name) == 0)
			return true;
	return false;
}

/*
 * Runs when a server section closes (cfg->line is its closing brace), so
 * that defaulted names are checked too.
 */
int
validate_server(cfg_t *cfg, cfg_opt_t *opt)
{
	unsigned int n = cfg_opt_size(opt), i, j;
	cfg_t *sec = cfg_opt_getnsec(opt, n - 1), *prev;
	const char *name;

	if (cfg_size(sec, "root") == 0) {
		cfg_error(cfg, "the server section ending here has no root");
		return -1;
	}
	for (i = 0; i < cfg_size(sec, "names"); i++) {
		name = cfg_getnstr(sec, "names", i);
		if (has_name(sec, name, i)) {
			cfg_error(cfg, "server name \"%s\" is listed twice",
			    name);
			return -1;
		}
		for (j = 0; j + 1 < n; j++) {
			prev = cfg_opt_getnsec(opt, j);
			if (!has_name(prev, name, cfg_size(prev, "names")) ||
			    !share_listen(sec, prev))
				continue;
			cfg_error(cfg, "server name \"%s\" is already used by "
			    "the server section ending on line %d", name,
			    prev->line);
			return -1;
		}
	}
	return 0;
}

/* In the order written: regex locations are tried in that order. */
static void
build_locations(cfg_t *sec, struct config_server *s)
{
	struct config_location *l;
	const char *proxy, *key;
	cfg_t *ls;
	size_t i, n = cfg_size(sec, "location");

	if (n == 0)
		return;
	if ((s->locations = calloc(n, sizeof(*s->locations))) == NULL) {
		loading->oom = true;
		return;
	}
	s->nlocations = n;
	for (i = 0; i < n; i++) {
		ls = cfg_getnsec(sec, "location", i);
		l = &s->locations[i];
		proxy = cfg_getstr(ls, "proxy");
		if (proxy == NULL)
			proxy = cfg_getstr(ls, "fastcgi");
		if (proxy == NULL)
			proxy = cfg_getstr(ls, "memcached");
		l->upstream = proxy ? find_upstream(loading->cfg, proxy) : -1;
		key = cfg_getstr(ls, "memcached_key");
		l->memcached_request_uri = key != NULL &&
		    strcmp(key, "$request_uri") == 0;
		if (key != NULL && !l->memcached_request_uri &&
		    strcmp(key, "$uri") != 0 && (l->memcached_key =
		    vars_compile(key, 0, NULL, 0)) == NULL)
			loading->oom = true;
		l->memcached_local = key != NULL && l->upstream < 0;
		l->memcached_gzip_flag = (uint32_t)cfg_getint(ls,
		    "memcached_gzip_flag");
		build_location_cache(ls, l);
		if (cfg_getstr(ls, "fastcgi") != NULL)
			l->fastcgi = build_fastcgi(ls);
		if (cfg_getstr(ls, "proxy_path") != NULL)
			l->proxy_path = cf_copy(cfg_getstr(ls, "proxy_path"));
		build_proxy_headers(ls, l);
	}
}

void
build_server(cfg_t *sec, struct config *cf, struct config_server *s)
{
	struct tls_lines *t;

	s->names = copy_list(sec, "names", &s->nnames);
	s->root = cf_copy(cfg_getstr(sec, "root"));
	s->index = copy_list(sec, "index", &s->nindex);
	s->access_log = copy_path(cfg_getstr(sec, "access_log"), "off");
	s->log_format = (size_t)find_log_format(loading->cfg,
	    cfg_getstr(sec, "access_log_format"));
	s->underscores_in_headers = cfg_getbool(sec, "underscores_in_headers");
	s->access_log_line = opt_line(sec, "access_log");
	build_locations(sec, s);
	if (s->root != NULL && !loading->oom)
		site_build_server(loading->cfg, sec, cf, s);
	if ((t = tls_lines_of(sec, false)) != NULL) {
		s->tls_certificate = copy_path(cfg_getstr(sec,
		    "tls_certificate"), NULL);
		s->tls_certificate_key = copy_path(cfg_getstr(sec,
		    "tls_certificate_key"), NULL);
		s->tls_certificate_line = t->cert;
		s->tls_certificate_key_line = t->key;
	}
}

/*
 * The configuration file, read with libconfuse: the option tables, and
 * config_load(), which parses, checks and builds in that order (each
 * section's own checks live in the config_*.c files of config_impl.h).
 *
 * Every directive is declared once in the option tables below.  Values are
 * checked while libconfuse parses them: units by the value callbacks,
 * ranges and lists by the validators, so each mistake is reported with the
 * file and line where it was made.  The first mistake stops the load;
 * corral never runs on a half-valid config.
 */
#include <sys/stat.h>

#include <confuse.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "master/config_impl.h"
#include "master/log.h"
#include "worker/log_format.h"
#include "worker/vars.h"

static const struct range {
	const char *name;
	enum unit unit;
	long min, max;
} ranges[] = {
	{ "workers",		 U_COUNT, 1, WORKERS_MAX },
	{ "worker_connections",	 U_COUNT, 16, 1048576 },
	{ "max_request_line",	 U_SIZE, 256, MB },
	{ "max_header_size",	 U_SIZE, KB, MB },
	{ "file_cache_max_size", U_SIZE, 0, 64 * MB },
	{ "max_headers",	 U_COUNT, 1, 1000 },
	{ "client_body_buffer_size", U_SIZE, KB, 64 * MB },
	{ "keepalive_requests",	 U_COUNT, 0, 1000000000 },
	{ "max_ranges",		 U_COUNT, 1, 1000 },
	{ "gzip_min_length",	 U_SIZE, 0, GB },
	{ "gzip_comp_level",	 U_COUNT, 1, 9 },
	{ "brotli_comp_level",	 U_COUNT, 0, 11 },
	{ "file_cache_entries",	 U_COUNT, 0, 1000000 },
	{ "keepalive_timeout",	 U_TIME, 0, DAY },
	{ "header_timeout",	 U_TIME, 1, DAY },
	{ "body_timeout",	 U_TIME, 1, DAY },
	{ "body_min_rate",	 U_SIZE, 0, GB },
	{ "send_timeout",	 U_TIME, 1, DAY },
	{ "lingering_timeout",	 U_TIME, 1, DAY },
	{ "file_cache_valid",	 U_TIME, 0, DAY },
	{ "file_cache_inactive", U_TIME, 1 * SEC, DAY },
	{ "worker_shutdown_timeout", U_TIME, 0, DAY },
	{ "cache|size",		 U_SIZE, 0, 64 * GB },
	{ "cache|stripes",	 U_COUNT, 1, 4096 },
	{ "cache|max_object",	 U_SIZE, 1, GB },
	{ "cache|file_max",	 U_SIZE, 0, GB },
	{ "cache|file_copy_max", U_SIZE, 0, GB },
	{ "memcached|max_item",	 U_SIZE, 0, GB },
	{ "cache|l2_timeout",	 U_TIME, 1, 60 * SEC },
	{ "memcached|idle_timeout", U_TIME, 0, DAY },
	{ "worker_rlimit_nofile", U_COUNT, 0, 1048576 },
	{ "upstream|keepalive",	 U_COUNT, 0, 10000 },
	{ "upstream|connect_timeout", U_TIME, 1, DAY },
	{ "upstream|read_timeout", U_TIME, 1, DAY },
	{ "upstream|send_timeout", U_TIME, 1, DAY },
	{ "upstream|max_fails",	 U_COUNT, 0, 1000 },
	{ "upstream|fail_timeout", U_TIME, 1, DAY },
	{ "upstream|next_upstream_tries", U_COUNT, 0, 1000 },
	{ "server|location|cache_ttl", U_TIME, 0, 30 * DAY },
	{ "server|location|cache_lock_timeout", U_TIME, 1, DAY },
	{ "server|location|cache_pass_ttl", U_TIME, 0, DAY },
	{ "server|location|cache_grace", U_TIME, 0, 7 * DAY },
	{ "tls|session_cache_size", U_SIZE, MB, GB },
	{ "tls|session_timeout", U_TIME, 1 * SEC, DAY },
	{ "tls|ticket_key_rotate", U_TIME, 1 * SEC, 7 * DAY },
	{ "tls|handshake_timeout", U_TIME, 1, DAY },
};

static cfg_opt_t location_opts[] = {
	CFG_STR("proxy", NULL, CFGF_NODEFAULT),
	CFG_STR_CB("proxy_path", NULL, CFGF_NODEFAULT, cb_proxy_path),
	CFG_STR_LIST_CB("proxy_set_header", "{}", CFGF_NONE, cb_proxy_header),
	CFG_STR_LIST_CB("proxy_append_header", "{}", CFGF_NONE,
	    cb_proxy_header),
	CFG_STR("fastcgi", NULL, CFGF_NODEFAULT),
	CFG_STR("memcached", NULL, CFGF_NODEFAULT),
	CFG_STR_CB("memcached_key", NULL, CFGF_NODEFAULT, cb_mc_key),
	CFG_INT_CB("memcached_gzip_flag", 0, CFGF_NONE, cb_count),
	CFG_STR_LIST_CB("fastcgi_param", "{}", CFGF_NONE, cb_fcgi_param),
	CFG_STR("fastcgi_index", "index.php", CFGF_NONE),
	CFG_STR_CB("fastcgi_split_path_info", NULL, CFGF_NODEFAULT,
	    cb_split_path_info),
	CFG_BOOL("fastcgi_script_check", cfg_true, CFGF_NONE),
	CFG_BOOL("fastcgi_request_buffering", cfg_true, CFGF_NONE),
	CFG_BOOL("cache", cfg_false, CFGF_NONE),
	CFG_INT_CB("cache_ttl", 0, CFGF_NONE, cb_time),
	CFG_STR_LIST_CB("cache_valid", "{}", CFGF_NONE, cb_valid),
	CFG_BOOL("cache_cdn_control", cfg_false, CFGF_NONE),
	CFG_BOOL("cache_lock", cfg_true, CFGF_NONE),
	CFG_INT_CB("cache_lock_timeout", 5 * SEC, CFGF_NONE, cb_time),
	CFG_STR_LIST_CB("cache_stale", "{error, timeout}", CFGF_NONE, cb_stale),
	CFG_INT_CB("cache_pass_ttl", 10 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("cache_grace", HOUR, CFGF_NONE, cb_time),
	CFG_STR_LIST_CB("purge_allow", "{}", CFGF_NONE, cb_purge),
	CFG_BOOL("x_cache", cfg_true, CFGF_NONE),
	CFG_BOOL("status", cfg_false, CFGF_NONE),
	CFG_STR_LIST_CB("status_allow", "{127.0.0.1, ::1}", CFGF_NONE,
	    cb_purge),
	CFG_STR_CB("root", NULL, CFGF_NODEFAULT, cb_root),
	CFG_STR_CB("alias", NULL, CFGF_NODEFAULT, cb_alias),
	CFG_STR_LIST_CB("index", NULL, CFGF_NODEFAULT, cb_index),
	SITE_SCOPE_OPTS,
	CFG_END()
};

static cfg_opt_t server_opts[] = {
	CFG_STR_LIST_CB("names", "{localhost}", CFGF_NONE, cb_server_name),
	CFG_STR_CB("root", NULL, CFGF_NODEFAULT, cb_root),
	CFG_STR_LIST_CB("index", "{index.html}", CFGF_NONE, cb_index),
	CFG_STR("access_log", "off", CFGF_NONE),
	CFG_STR("access_log_format", "combined", CFGF_NONE),
	CFG_BOOL("underscores_in_headers", cfg_false, CFGF_NONE),
	CFG_SEC("location", location_opts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES),
	CFG_PTR_LIST_CB("listen", NULL, CFGF_NODEFAULT, cb_listen, free),
	SITE_SCOPE_OPTS,
	CFG_STR("tls_certificate", NULL, CFGF_NODEFAULT),
	CFG_STR("tls_certificate_key", NULL, CFGF_NODEFAULT),
	CFG_END()
};

/* Mozilla's "intermediate" TLS 1.2 list: forward secrecy, AEAD only. */
#define TLS_CIPHERS_DEFAULT "ECDHE-ECDSA-AES128-GCM-SHA256:" \
	"ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" \
	"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:" \
	"ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:" \
	"DHE-RSA-AES256-GCM-SHA384"
#define TLS_SUITES_DEFAULT "TLS_AES_128_GCM_SHA256:" \
	"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

static cfg_opt_t tls_opts[] = {
	CFG_STR_LIST_CB("protocols", "{TLSv1.2, TLSv1.3}", CFGF_NONE,
	    cb_tls_protocol),
	CFG_STR("ciphers", TLS_CIPHERS_DEFAULT, CFGF_NONE),
	CFG_STR("ciphersuites", TLS_SUITES_DEFAULT, CFGF_NONE),
	CFG_BOOL("session_cache", cfg_true, CFGF_NONE),
	CFG_INT_CB("session_cache_size", 10 * MB, CFGF_NONE, cb_size),
	CFG_INT_CB("session_timeout", 5 * MIN, CFGF_NONE, cb_time),
	CFG_BOOL("session_tickets", cfg_true, CFGF_NONE),
	CFG_INT_CB("ticket_key_rotate", HOUR, CFGF_NONE, cb_time),
	CFG_INT_CB("handshake_timeout", 10 * SEC, CFGF_NONE, cb_time),
	CFG_BOOL("ktls", cfg_true, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t upstream_opts[] = {
	CFG_PTR_LIST_CB("servers", NULL, CFGF_NODEFAULT, cb_peer, free),
	CFG_INT_CB("keepalive", 32, CFGF_NONE, cb_count),
	CFG_STR_CB("protocol", "http", CFGF_NONE, cb_protocol),
	CFG_STR_CB("hash", NULL, CFGF_NODEFAULT, cb_hash),
	CFG_INT_CB("connect_timeout", 2 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("read_timeout", 30 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("send_timeout", 30 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("max_fails", 3, CFGF_NONE, cb_count),
	CFG_INT_CB("fail_timeout", 10 * SEC, CFGF_NONE, cb_time),
	CFG_STR_LIST_CB("next_upstream", "{error, timeout}", CFGF_NONE,
	    cb_next),
	CFG_INT_CB("next_upstream_tries", 0, CFGF_NONE, cb_count),
	CFG_BOOL("tls", cfg_false, CFGF_NONE),
	CFG_BOOL("tls_verify", cfg_true, CFGF_NONE),
	CFG_STR("tls_name", NULL, CFGF_NODEFAULT),
	CFG_STR("tls_trusted_certificate", NULL, CFGF_NODEFAULT),
	CFG_BOOL("tls_session_reuse", cfg_true, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t log_format_opts[] = {
	CFG_STR("format", NULL, CFGF_NODEFAULT),
	CFG_STR("escape", "default", CFGF_NONE),
	CFG_END()
};

static cfg_opt_t cache_opts[] = {
	CFG_STR("path", "off", CFGF_NONE),
	CFG_INT_CB("size", 256 * MB, CFGF_NONE, cb_size),
	CFG_INT_CB("stripes", 16, CFGF_NONE, cb_count),
	CFG_INT_CB("max_object", MB, CFGF_NONE, cb_size),
	CFG_INT_CB("file_max", MB, CFGF_NONE, cb_size),
	CFG_INT_CB("file_copy_max", 32 * KB, CFGF_NONE, cb_size),
	CFG_BOOL("persist", cfg_false, CFGF_NONE),
	CFG_STR("l2", NULL, CFGF_NODEFAULT),
	CFG_INT_CB("l2_timeout", 100, CFGF_NONE, cb_time),
	CFG_END()
};

static cfg_opt_t memcached_opts[] = {
	CFG_PTR_LIST_CB("listen", "{127.0.0.1:11211}", CFGF_NONE,
	    cb_mc_listen, free),
	CFG_INT_CB("max_item", 0, CFGF_NONE, cb_size),
	CFG_BOOL("allow_flush", cfg_false, CFGF_NONE),
	CFG_INT_CB("idle_timeout", 0, CFGF_NONE, cb_time),
	CFG_END()
};

static cfg_opt_t opts[] = {
	CFG_INT_CB("workers", WORKERS_AUTO, CFGF_NONE, cb_workers),
	CFG_INT_CB("worker_connections", 4096, CFGF_NONE, cb_count),
	CFG_STR("error_log", "stderr", CFGF_NONE),
	CFG_INT_CB("log_level", L_NOTICE, CFGF_NONE, cb_log_level),
	CFG_STR("pid_file", "off", CFGF_NONE),
	CFG_STR("stats_file", "auto", CFGF_NONE),
	CFG_STR("user", NULL, CFGF_NODEFAULT),
	CFG_STR("group", NULL, CFGF_NODEFAULT),
	CFG_INT_CB("worker_shutdown_timeout", 60 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("worker_rlimit_nofile", 0, CFGF_NONE, cb_count),
	CFG_BOOL("reuseport", cfg_true, CFGF_NONE),
	CFG_PTR_LIST_CB("listen", "{127.0.0.1:8080}", CFGF_NONE, cb_listen,
	    free),

	CFG_INT_CB("max_request_line", 8 * KB, CFGF_NONE, cb_size),
	CFG_INT_CB("max_header_size", 32 * KB, CFGF_NONE, cb_size),
	CFG_INT_CB("max_headers", 100, CFGF_NONE, cb_count),
	CFG_INT_CB("max_body_size", MB, CFGF_NONE, cb_size),
	CFG_INT_CB("client_body_buffer_size", 16 * KB, CFGF_NONE, cb_size),
	CFG_STR("client_body_temp_path", "/tmp", CFGF_NONE),
	CFG_INT_CB("keepalive_requests", 1000, CFGF_NONE, cb_count),
	CFG_INT_CB("keepalive_timeout", 75 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("header_timeout", 30 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("body_timeout", 60 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("body_min_rate", KB, CFGF_NONE, cb_size),
	CFG_INT_CB("send_timeout", 60 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("lingering_timeout", 5 * SEC, CFGF_NONE, cb_time),

	CFG_BOOL("server_tokens", cfg_true, CFGF_NONE),
	CFG_PTR_LIST_CB("real_ip_from", "{}", CFGF_NONE, cb_cidr, free),
	CFG_STR_CB("real_ip_header", "X-Forwarded-For", CFGF_NONE,
	    cb_real_ip_header),
	CFG_BOOL("real_ip_recursive", cfg_false, CFGF_NONE),
	CFG_BOOL("sendfile", cfg_true, CFGF_NONE),
	CFG_STR("mime_types", "builtin", CFGF_NONE),
	CFG_STR("default_type", "application/octet-stream", CFGF_NONE),
	CFG_INT_CB("max_ranges", 16, CFGF_NONE, cb_count),
	CFG_BOOL("gzip", cfg_false, CFGF_NONE),
	CFG_STR_LIST("gzip_types", "{\"text/html\", \"text/css\", "
	    "\"text/plain\", \"text/xml\", \"text/javascript\", "
	    "\"application/javascript\", \"application/json\", "
	    "\"application/xml\", \"image/svg+xml\"}", CFGF_NONE),
	CFG_INT_CB("gzip_min_length", 256, CFGF_NONE, cb_size),
	CFG_INT_CB("gzip_comp_level", 6, CFGF_NONE, cb_count),
	CFG_BOOL("brotli", cfg_false, CFGF_NONE),
	CFG_INT_CB("brotli_comp_level", 6, CFGF_NONE, cb_count),

	CFG_INT_CB("file_cache_entries", 1024, CFGF_NONE, cb_count),
	CFG_INT_CB("file_cache_valid", 1 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("file_cache_inactive", 60 * SEC, CFGF_NONE, cb_time),
	CFG_INT_CB("file_cache_max_size", 64 * KB, CFGF_NONE, cb_size),

	CFG_INT_CB("log_flush", 1 * SEC, CFGF_NONE, cb_time),
	CFG_SEC("log_format", log_format_opts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES),
	CFG_SEC("cache", cache_opts, CFGF_NONE),
	CFG_SEC("tls", tls_opts, CFGF_NONE),
	CFG_SEC("memcached", memcached_opts, CFGF_MULTI),
	CFG_SEC("upstream", upstream_opts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES),
	CFG_SEC("server", server_opts, CFGF_MULTI),
	CFG_SEC("limit_zone", site_limit_zone_opts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES),
	CFG_END()
};

#define NOPTS	nitems(opts)
_Static_assert(NOPTS <= OPTS_MAX, "loader.line is too small");

struct loader *loading;

/*
 * Remembers where an option was set, for checks made after parsing and
 * for the master's errors about the files an option names.
 */
void
note_line(cfg_t *cfg, cfg_opt_t *opt)
{
	if (cfg == loading->cfg && opt >= cfg->opts && opt < cfg->opts + NOPTS) {
		loading->line[opt - cfg->opts] = cfg->line;
		return;
	}
	if (cfg != loading->cfg)
		opt_line_note(cfg, opt->name, cfg->line);
}

static int
line_of(const char *name)
{
	cfg_opt_t *opt = cfg_getopt(loading->cfg, name);

	return opt == NULL ? 0 : loading->line[opt - loading->cfg->opts];
}

int
validate_range(cfg_t *cfg, cfg_opt_t *opt)
{
	const struct range *r;
	long v = cfg_opt_getnint(opt, 0);
	char lo[32], hi[32];

	note_line(cfg, opt);
	for (r = ranges; r < ranges + nitems(ranges); r++)
		if (strcmp(strrchr(r->name, '|') ? strrchr(r->name, '|') + 1 :
		    r->name, opt->name) == 0)
			break;
	if (r == ranges + nitems(ranges) || (v >= r->min && v <= r->max))
		return 0;
	cfg_error(cfg, "%s must be between %s and %s", opt->name,
	    format_value(lo, sizeof(lo), r->unit, r->min),
	    format_value(hi, sizeof(hi), r->unit, r->max));
	return -1;
}

static const struct {
	const char *name;
	cfg_validate_callback_t fn;
} validators[] = {
	{ "server|tls_certificate", validate_tls_line },
	{ "server|tls_certificate_key", validate_tls_line },
	{ "tls|ciphers",	validate_tls_line },
	{ "tls|ciphersuites",	validate_tls_line },
	{ "upstream",		validate_upstream },
	{ "upstream|tls_name",	validate_nonempty },
	{ "upstream|tls_trusted_certificate", validate_nonempty },
	{ "log_format",		validate_log_format },
	{ "server|location|proxy", validate_proxy },
	{ "server|location|fastcgi", validate_proxy },
	{ "server|location|memcached", validate_proxy },
	{ "server|location|proxy_path", validate_proxy },
	{ "error_log",		validate_nonempty },
	{ "pid_file",		validate_nonempty },
	{ "stats_file",		validate_nonempty },
	{ "user",		validate_nonempty },
	{ "group",		validate_nonempty },
	{ "listen",		validate_listen },
	{ "server|listen",	validate_listen },
	{ "mime_types",		validate_nonempty },
	{ "client_body_temp_path", validate_dir },
	{ "default_type",	validate_mime_type },
	{ "server|default_type", validate_mime_type },
	{ "server|location|default_type", validate_mime_type },
	{ "gzip_types",		validate_mime_types },
	{ "server",		validate_server },
	{ "cache",		validate_cache },
	{ "cache|size",		validate_cache_size },
	{ "cache|stripes",	validate_stripes },
	{ "memcached",		validate_memcached },
	{ "memcached|max_item",	validate_mc_max_item },
	{ "server|access_log",	validate_nonempty },
	{ "server|access_log_format", validate_nonempty },
	{ "cache|path",		validate_nonempty },
};

static void
set_validators(cfg_t *cfg)
{
	size_t i;

	for (i = 0; i < nitems(ranges); i++)
		cfg_set_validate_func(cfg, ranges[i].name, validate_range);
	for (i = 0; i < nitems(validators); i++)
		cfg_set_validate_func(cfg, validators[i].name,
		    validators[i].fn);
	site_set_validators(cfg);
}

/* Finds the config's folder: relative paths in the file are taken from it. */
static int
locate(const char *path)
{
	const char *slash = strrchr(path, '/'), *base = path;
	char dir[PATH_MAX];
	struct stat st;

	if (stat(path, &st) == -1) {
		cf_fail(0, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		cf_fail(0, "not a regular file");
		return -1;
	}
	strcpy(dir, ".");
	if (slash != NULL) {
		base = slash + 1;
		if ((size_t)(slash - path) >= sizeof(dir)) {
			cf_fail(0, "path too long");
			return -1;
		}
		memcpy(dir, path, slash - path);
		dir[slash - path] = '\0';
		if (slash == path)
			strcpy(dir, "/");
	}
	if (realpath(dir, loading->dir) == NULL) {
		cf_fail(0, "%s", strerror(errno));
		return -1;
	}
	if (join_path(loading->file, sizeof(loading->file), loading->dir, base) == -1) {
		cf_fail(0, "path too long");
		return -1;
	}
	return 0;
}

static int
parse(cfg_t *cfg)
{
	char *text;
	size_t len;
	FILE *fp;
	int rc;

	if ((text = include_expand(loading->path, &len)) == NULL)
		return -1;
	if (len == 0)
		rc = CFG_SUCCESS;
	else if ((fp = fmemopen(text, len, "r")) == NULL)
		rc = CFG_FILE_ERROR;
	else {
		rc = cfg_parse_fp(cfg, fp);
		fclose(fp);
	}
	free(text);
	if (rc == CFG_FILE_ERROR)
		cf_fail(0, "%s", strerror(errno));
	else if (rc != CFG_SUCCESS)
		cf_fail(0, "could not be parsed");
	return rc == CFG_SUCCESS ? 0 : -1;
}

/* Checks that need the whole file; their options may come in any order. */
static int
check(cfg_t *cfg)
{
	char a[32], b[32];
	long req = cfg_getint(cfg, "max_request_line");
	long hdr = cfg_getint(cfg, "max_header_size");
	int l1 = line_of("max_request_line"), l2 = line_of("max_header_size");

	if (cfg_size(cfg, "server") == 0)
		cf_fail(0, "no server section; at least one is required");
	else if (cfg_size(cfg, "listen") == 0)
		cf_fail(0, "listen needs at least one address");
	else if (cfg_getstr(cfg, "group") != NULL &&
	    cfg_getstr(cfg, "user") == NULL)
		cf_fail(line_of("group"), "group is set but user is not");
	else if (hdr < req)
		cf_fail(l1 > l2 ? l1 : l2, "max_header_size (%s) must be at "
		    "least max_request_line (%s)",
		    format_value(a, sizeof(a), U_SIZE, hdr),
		    format_value(b, sizeof(b), U_SIZE, req));
	if (!loading->failed)
		check_proxies(cfg);
	if (!loading->failed)
		check_log_formats(cfg);
	if (!loading->failed)
		check_tls(cfg);
	if (!loading->failed)
		check_memcached(cfg);
	if (!loading->failed)
		site_check(cfg);
	if (!loading->failed)
		check_listen(cfg);
	return loading->failed ? -1 : 0;
}

/*
 * stats_file "auto" is the pid file's name with ".stats" for ".pid", so
 * that corralctl finds both; no pid file, no stats file.
 */
static char *
stats_file_path(const char *s, const char *pid_file)
{
	size_t n;

	if (strcmp(s, "auto") != 0)
		return copy_path(s, "off");
	if (pid_file == NULL)
		return NULL;
	n = strlen(pid_file);
	if (n > 4 && strcmp(pid_file + n - 4, ".pid") == 0)
		n -= 4;
	if (snprintf(loading->tmp, sizeof(loading->tmp), "%.*s.stats", (int)n,
	    pid_file) >= (int)sizeof(loading->tmp)) {
		cf_fail(0, "path too long: %s", pid_file);
		return NULL;
	}
	return cf_copy(loading->tmp);
}

static void
build(cfg_t *cfg, struct config *cf)
{
	size_t i;

	cf->file = cf_copy(loading->file);
	cf->workers = cfg_getint(cfg, "workers");
	if (cf->workers == WORKERS_AUTO)
		cf->workers = online_cpus();
	cf->worker_connections = cfg_getint(cfg, "worker_connections");
	cf->error_log = copy_path(cfg_getstr(cfg, "error_log"), "stderr");
	cf->log_level = cfg_getint(cfg, "log_level");
	cf->pid_file = copy_path(cfg_getstr(cfg, "pid_file"), "off");
	cf->stats_file = stats_file_path(cfg_getstr(cfg, "stats_file"),
	    cf->pid_file);
	cf->stats_file_line = line_of("stats_file") ? line_of("stats_file") :
	    line_of("pid_file");
	cf->user = cf_copy(cfg_getstr(cfg, "user"));
	cf->group = cf_copy(cfg_getstr(cfg, "group"));
	cf->lines.error_log = line_of("error_log");
	cf->lines.pid_file = line_of("pid_file");
	cf->lines.user = line_of("user");
	cf->lines.group = line_of("group");
	cf->lines.listen = line_of("listen");
	cf->lines.mime_types = line_of("mime_types");
	cf->worker_shutdown_timeout_ms =
	    cfg_getint(cfg, "worker_shutdown_timeout");
	cf->worker_rlimit_nofile = cfg_getint(cfg, "worker_rlimit_nofile");
	cf->reuseport = cfg_getbool(cfg, "reuseport");
	cf->lines.reuseport = line_of("reuseport");

	cf->max_request_line = cfg_getint(cfg, "max_request_line");
	cf->max_header_size = cfg_getint(cfg, "max_header_size");
	cf->max_headers = cfg_getint(cfg, "max_headers");
	cf->max_body_size = cfg_getint(cfg, "max_body_size");
	cf->client_body_buffer_size = cfg_getint(cfg,
	    "client_body_buffer_size");
	cf->client_body_temp_path = cf_copy(cfg_getstr(cfg,
	    "client_body_temp_path"));
	cf->keepalive_requests = cfg_getint(cfg, "keepalive_requests");
	cf->keepalive_timeout_ms = cfg_getint(cfg, "keepalive_timeout");
	cf->header_timeout_ms = cfg_getint(cfg, "header_timeout");
	cf->body_timeout_ms = cfg_getint(cfg, "body_timeout");
	cf->body_min_rate = cfg_getint(cfg, "body_min_rate");
	cf->send_timeout_ms = cfg_getint(cfg, "send_timeout");
	cf->lingering_timeout_ms = cfg_getint(cfg, "lingering_timeout");

	cf->server_tokens = cfg_getbool(cfg, "server_tokens");
	build_real_ip(cfg, cf);
	cf->sendfile = cfg_getbool(cfg, "sendfile");
	cf->mime_types = copy_path(cfg_getstr(cfg, "mime_types"), "builtin");
	cf->default_type = cf_copy(cfg_getstr(cfg, "default_type"));
	cf->max_ranges = cfg_getint(cfg, "max_ranges");
	cf->gzip = cfg_getbool(cfg, "gzip");
	cf->gzip_types = copy_list(cfg, "gzip_types", &cf->ngzip_types);
	cf->gzip_min_length = cfg_getint(cfg, "gzip_min_length");
	cf->gzip_comp_level = cfg_getint(cfg, "gzip_comp_level");
	cf->brotli = cfg_getbool(cfg, "brotli");
	cf->brotli_comp_level = cfg_getint(cfg, "brotli_comp_level");

	cf->file_cache_entries = cfg_getint(cfg, "file_cache_entries");
	cf->file_cache_valid_ms = cfg_getint(cfg, "file_cache_valid");
	cf->file_cache_inactive_ms = cfg_getint(cfg, "file_cache_inactive");
	cf->file_cache_max_size = cfg_getint(cfg, "file_cache_max_size");

	build_cache(cfg_getsec(cfg, "cache"), &cf->cache);
	build_memcached(cfg, &cf->memcached);
	build_log_formats(cfg, cf);
	build_tls(cfg_getsec(cfg, "tls"), &cf->tls);

	cf->nupstreams = cfg_size(cfg, "upstream");
	if (cf->nupstreams > 0 && (cf->upstreams = calloc(cf->nupstreams,
	    sizeof(*cf->upstreams))) == NULL)
		loading->oom = true;
	for (i = 0; cf->upstreams != NULL && i < cf->nupstreams; i++)
		build_upstream(cfg_getnsec(cfg, "upstream", i),
		    &cf->upstreams[i]);

	cf->nservers = cfg_size(cfg, "server");
	if ((cf->servers = calloc(cf->nservers, sizeof(*cf->servers))) == NULL)
		loading->oom = true;
	for (i = 0; cf->servers != NULL && i < cf->nservers; i++)
		build_server(cfg_getnsec(cfg, "server", i), cf,
		    &cf->servers[i]);
	site_build(cfg, cf);
	build_listen(cfg, cf);
	for (i = 0; cf->listen != NULL && i < cf->nlisten; i++)
		cf->any_tls |= cf->listen[i].tls;
}

struct config *
config_load(const char *path, char *err, size_t errlen)
{
	struct loader *l;
	struct config *cf = NULL;
	cfg_t *cfg = NULL;

	if (errlen > 0)
		err[0] = '\0';
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	l->path = path;
	l->err = err;
	l->errlen = errlen;
	loading = l;
	if (locate(path) == -1)
		goto out;
	if ((cfg = cfg_init(opts, CFGF_NONE)) == NULL ||
	    (cfg->filename = strdup(path)) == NULL) {
		cf_fail(0, "out of memory");
		goto out;
	}
	l->cfg = cfg;
	l->cf = NULL;
	cfg_set_error_function(cfg, on_cfg_error);
	set_validators(cfg);
	if (parse(cfg) == -1 || check(cfg) == -1)
		goto out;
	if ((cf = calloc(1, sizeof(*cf))) != NULL)
		build(cfg, cf);
	if (cf == NULL || l->oom || l->failed) {
		cf_fail(0, "out of memory");
		config_free(cf);
		cf = NULL;
	} else {
		cf->src_files = l->files;
		cf->nsrc_files = l->nfiles;
		cf->src_map = l->map;
		cf->nsrc_map = l->nmap;
		l->files = NULL;
		l->map = NULL;
		l->nfiles = l->nmap = 0;
	}
out:
	if (cfg != NULL)
		cfg_free(cfg);
	include_free();
	loading = NULL;
	free(l->tls_lines);
	free(l);
	return cf;
}

static void
free_list(char **v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

const char *
config_where(const struct config *cf, int line, int *src)
{
	const struct config_src *m;

	*src = line;
	if (line <= 0 || (size_t)line > cf->nsrc_map)
		return cf->file;
	m = &cf->src_map[line - 1];
	*src = m->line;
	return m->file == 0 ? cf->file : cf->src_files[m->file];
}

void
config_free(struct config *cf)
{
	size_t i, j;

	if (cf == NULL)
		return;
	free_list(cf->src_files, cf->nsrc_files);
	free(cf->src_map);
	for (i = 0; cf->servers != NULL && i < cf->nservers; i++) {
		free_list(cf->servers[i].names, cf->servers[i].nnames);
		free(cf->servers[i].root);
		free_list(cf->servers[i].index, cf->servers[i].nindex);
		free(cf->servers[i].access_log);
		for (j = 0; j < cf->servers[i].nlocations; j++) {
			struct config_location *l =
			    &cf->servers[i].locations[j];

			free(l->prefix);
			free_list(l->purge_allow, l->npurge_allow);
			if (l->index != cf->servers[i].index)
				free_list(l->index, l->nindex);
			site_free_location(l);
			free_list(l->status_allow, l->nstatus_allow);
			free_fastcgi(l->fastcgi);
			free(l->proxy_path);
			for (size_t k = 0; k < l->nproxy_headers; k++) {
				free(l->proxy_headers[k].name);
				vars_free(l->proxy_headers[k].tmpl);
			}
			free(l->proxy_headers);
			free(l->cache_valid);
			vars_free(l->memcached_key);
		}
		free(cf->servers[i].base.prefix);
		site_free_location(&cf->servers[i].base);
		free(cf->servers[i].locations);
		free(cf->servers[i].tls_certificate);
		free(cf->servers[i].tls_certificate_key);
		free(cf->servers[i].listen);
		free(cf->servers[i].default_for);
	}
	site_free(cf);
	for (i = 0; cf->upstreams != NULL && i < cf->nupstreams; i++) {
		free(cf->upstreams[i].name);
		free(cf->upstreams[i].peers);
		free(cf->upstreams[i].tls_name);
		free(cf->upstreams[i].tls_trusted_certificate);
	}
	free(cf->upstreams);
	for (i = 0; cf->log_formats != NULL && i < cf->nlog_formats; i++) {
		free(cf->log_formats[i].name);
		log_format_free(cf->log_formats[i].fmt);
	}
	free(cf->log_formats);
	free(cf->real_ip_from);
	free(cf->servers);
	free(cf->listen);
	free(cf->file);
	free(cf->error_log);
	free(cf->pid_file);
	free(cf->stats_file);
	free(cf->user);
	free(cf->group);
	free(cf->mime_types);
	free(cf->client_body_temp_path);
	free(cf->default_type);
	free_list(cf->gzip_types, cf->ngzip_types);
	free(cf->cache.path);
	free(cf->tls.ciphers);
	free(cf->tls.ciphersuites);
	free(cf->memcached.listen);
	free(cf);
}

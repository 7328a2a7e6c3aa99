/*
 * Inside the config loader, shared by its files; nothing else includes it.
 *
 *   config.c           the option tables; config_load(): parse, check,
 *                      build, free
 *   config_error.c     errors and warnings with their file and line
 *   config_value.c     units, paths, host names, media types
 *   config_include.c   include() and the map of output lines to files
 *   config_listen.c    listen addresses, what to bind
 *   config_realip.c    real_ip_from, real_ip_header
 *   config_server.c    a server's names, root, index, locations
 *   config_upstream.c  upstreams, and what locations send them
 *   config_cache.c     the cache and memcached sections, location caching
 *   config_tls.c       TLS protocols, certificates, ciphers
 *   config_log.c       log_format
 *   config_site.c      what a server and its locations may set
 *   config_access.c    allow, deny, auth_basic, max_body_size, limits
 */
#ifndef CORRAL_CONFIG_IMPL_H
#define CORRAL_CONFIG_IMPL_H

#include <confuse.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/config.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

#define KB		1024ULL
#define MB		(1024 * KB)
#define GB		(1024 * MB)

#define SEC		1000ULL			/* times are kept in ms */
#define MIN		(60 * SEC)
#define HOUR		(60 * MIN)
#define DAY		(24 * HOUR)

#define WORKERS_AUTO	(-1)
#define WORKERS_MAX	1024
#define TOKEN_CHARS	"abcdefghijklmnopqrstuvwxyz" \
			"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
			"!#$%&'*+-.^_`|~"

enum unit { U_COUNT, U_SIZE, U_TIME };

#define OPT_LINES_MAX	4096	/* options whose line is remembered */
#define INCLUDE_DEPTH	8
#define OPTS_MAX	128	/* global options */

/*
 * State of one config_load().  libconfuse callbacks carry no user pointer,
 * hence the file-scope pointer; like libconfuse itself, loading is not
 * thread-safe.
 */
struct loader {
	const char *path;		/* as the caller wrote it */
	char *err;
	size_t errlen;
	bool failed;			/* keep the first error only */
	bool oom;
	cfg_t *cfg;
	char dir[PATH_MAX];		/* real path of the config's folder */
	char file[PATH_MAX];
	char tmp[PATH_MAX];
	char result[PATH_MAX];		/* value handed back to libconfuse */
	int line[OPTS_MAX];		/* where each global option was set */
	struct {
		cfg_t *sec;		/* a location section */
		int line;		/* where its proxy was set */
	} proxy_lines[64];
	size_t nproxy_lines;
	struct tls_lines {
		cfg_t *sec;		/* a server or the tls section */
		int cert, key;		/* where tls_certificate(_key) or
					   ciphers(uites) were set */
	} *tls_lines;
	size_t ntls_lines;
	int tls_listen_line;		/* the first listen with "tls" */
	int cache_line;			/* see struct config_cache */
	int mc_line;			/* the memcached section's end */
	int mc_max_item_line;

	/* Lines of options in sections, for checks made after parsing. */
	struct {
		cfg_t *sec;
		const char *name;
		int line;
	} opt_lines[OPT_LINES_MAX];
	size_t nopt_lines;

	/* The files the text came from, and the map of its lines. */
	char **files;
	size_t nfiles;
	struct config_src *map;
	size_t nmap;

	/* Built while parsing: folders, htpasswd files (site). */
	struct config *cf;
};

extern struct loader *loading;

/* config.c */
/*
 * Remembers where an option was set, for checks made after parsing and
 * for the master's errors about the files an option names.
 */
void note_line(cfg_t *cfg, cfg_opt_t *opt);
/* A number within its entry of the table of ranges. */
int validate_range(cfg_t *cfg, cfg_opt_t *opt);

/* config_error.c */
/* Errors with an output line (mapped back to its file), or 0 for none. */
void cf_fail(int line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A warning with a file and line; goes to the log (stderr at -t). */
void warn_at(int line, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* libconfuse's errors, through cf_fail(). */
void on_cfg_error(cfg_t *cfg, const char *fmt, va_list ap);

/* Remembers and finds the line where an option of a section was set. */
void opt_line_note(cfg_t *sec, const char *name, int line);
int opt_line(cfg_t *sec, const char *name);

/* config_value.c */
int parse_scaled_size(const char *s, uint64_t *out);
int parse_scaled_time(const char *s, uint64_t *out);
int parse_scaled_count(const char *s, uint64_t *out);
/* Prints v in the largest unit that divides it: 1048576 bytes as "1m". */
const char *format_value(char *buf, size_t len, enum unit unit, long v);
int online_cpus(void);
/* Value callbacks of the option tables. */
int cb_count(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_workers(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_size(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_time(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_log_level(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);

int join_path(char *buf, size_t len, const char *dir, const char *name);
char *cf_copy(const char *s);
/* An absolute path, or NULL when s is the word that means "none". */
char *copy_path(const char *s, const char *none);
char **copy_list(cfg_t *sec, const char *name, size_t *np);

/* A host name, "*." and a host name, or "_". */
bool valid_host_name(const char *s);
int validate_nonempty(cfg_t *cfg, cfg_opt_t *opt);
/* A directory that exists, given as an absolute path. */
int validate_dir(cfg_t *cfg, cfg_opt_t *opt);
int validate_mime_type(cfg_t *cfg, cfg_opt_t *opt);
int validate_mime_types(cfg_t *cfg, cfg_opt_t *opt);

/* config_listen.c */
int parse_port(const char *s, char *out, size_t len);
/* Fills l from "IPv4:port", "[IPv6]:port", "*:port" or "port"; no DNS. */
const char *parse_listen(const char *s, struct config_listen *l);
int cb_listen(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int validate_listen(cfg_t *cfg, cfg_opt_t *opt);
/* Whether two servers have an address in common (names must differ). */
bool share_listen(cfg_t *a, cfg_t *b);
/* One default_server per address, no wildcard beside an address. */
void check_listen(cfg_t *cfg);
/* Every address any server listens on, once. */
void build_listen(cfg_t *cfg, struct config *cf);

/* config_realip.c */
int cb_cidr(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_real_ip_header(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result);
void build_real_ip(cfg_t *cfg, struct config *cf);

/* config_server.c */
int cb_server_name(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result);
int cb_root(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_alias(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_index(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
/* When a server section closes: a root, and names not used twice. */
int validate_server(cfg_t *cfg, cfg_opt_t *opt);
void build_server(cfg_t *sec, struct config *cf, struct config_server *s);

/* config_upstream.c */
int cb_peer(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_mc_listen(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_protocol(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_hash(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_next(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_mc_key(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_proxy_path(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_proxy_header(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result);
int cb_fcgi_param(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_split_path_info(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result);
int validate_upstream(cfg_t *cfg, cfg_opt_t *opt);
/* Notes where a location's proxy, fastcgi or memcached was set. */
int validate_proxy(cfg_t *cfg, cfg_opt_t *opt);
/* The index of the upstream called name, or -1. */
int find_upstream(cfg_t *cfg, const char *name);
/* Every proxy, fastcgi and memcached names an upstream of the file. */
void check_proxies(cfg_t *cfg);
void build_upstream(cfg_t *sec, struct config_upstream *u);
void build_proxy_headers(cfg_t *ls, struct config_location *l);
struct config_fastcgi *build_fastcgi(cfg_t *ls);
void free_fastcgi(struct config_fastcgi *f);

/* config_cache.c */
int cb_stale(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int cb_valid(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
/* A numeric address, as purge_allow and status_allow take them. */
int cb_purge(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result);
int validate_cache(cfg_t *cfg, cfg_opt_t *opt);
int validate_cache_size(cfg_t *cfg, cfg_opt_t *opt);
int validate_stripes(cfg_t *cfg, cfg_opt_t *opt);
int validate_memcached(cfg_t *cfg, cfg_opt_t *opt);
int validate_mc_max_item(cfg_t *cfg, cfg_opt_t *opt);
/* cache l2 names a memcached upstream; memcached fits in the store. */
void check_memcached(cfg_t *cfg);
void build_location_cache(cfg_t *ls, struct config_location *l);
void build_cache(cfg_t *sec, struct config_cache *c);
void build_memcached(cfg_t *cfg, struct config_memcached *m);

/* config_tls.c */
int cb_tls_protocol(cfg_t *cfg, cfg_opt_t *opt, const char *value,
    void *result);
/* Notes where a certificate, its key, ciphers or ciphersuites were set. */
int validate_tls_line(cfg_t *cfg, cfg_opt_t *opt);
/* Where a server's certificate or the tls section's ciphers were set. */
struct tls_lines *tls_lines_of(cfg_t *sec, bool add);
/* A certificate has its key; a TLS listener has a certificate. */
void check_tls(cfg_t *cfg);
void build_tls(cfg_t *sec, struct config_tls *t);

/* config_log.c */
int validate_log_format(cfg_t *cfg, cfg_opt_t *opt);
/* The index of a log format: built-in ones first, then the file's. */
int find_log_format(cfg_t *cfg, const char *name);
/* Every access_log_format names a format, defined anywhere in the file. */
void check_log_formats(cfg_t *cfg);
void build_log_formats(cfg_t *cfg, struct config *cf);

/* config_include.c: the file with its includes expanded and comments
 * blanked; NULL after cf_fail(). */
char *include_expand(const char *path, size_t *lenp);
void include_free(void);

/* config_site.c */
#define SITE_SCOPE_OPTS							\
	CFG_STR("return", NULL, CFGF_NODEFAULT),			\
	CFG_STR_LIST("rewrite", NULL, CFGF_NODEFAULT),			\
	CFG_STR_LIST("try_files", NULL, CFGF_NODEFAULT),		\
	CFG_STR_LIST("error_page", NULL, CFGF_NODEFAULT),		\
	CFG_STR_LIST("allow", NULL, CFGF_NODEFAULT),			\
	CFG_STR_LIST("deny", NULL, CFGF_NODEFAULT),			\
	CFG_STR("auth_basic", NULL, CFGF_NODEFAULT),			\
	CFG_STR("auth_basic_user_file", NULL, CFGF_NODEFAULT),		\
	CFG_STR("max_body_size", NULL, CFGF_NODEFAULT),			\
	CFG_STR("limit_req", NULL, CFGF_NODEFAULT),			\
	CFG_STR("limit_conn", NULL, CFGF_NODEFAULT),			\
	CFG_STR_LIST("add_header", NULL, CFGF_NODEFAULT),		\
	CFG_STR("expires", NULL, CFGF_NODEFAULT),			\
	CFG_STR("charset", NULL, CFGF_NODEFAULT),			\
	CFG_STR("default_type", NULL, CFGF_NODEFAULT),			\
	CFG_BOOL("dotfiles", cfg_false, CFGF_NODEFAULT),		\
	CFG_BOOL("gzip_static", cfg_false, CFGF_NODEFAULT)

/* Validators of the site options, for "server|..." and
 * "server|location|...". */
/* A regular expression compiled (and JIT-compiled) once, in the master;
 * NULL with the reason in err.  *captures: its groups. */
void *config_regex(const char *re, int *captures, char *err,
    size_t errlen);
void config_regex_free(void *re);

void site_set_validators(cfg_t *cfg);
/* Checks that s compiles; used where the value is built later. */
int cf_check_tmpl(cfg_t *cfg, const char *what, const char *s, int captures);
/* The value set in the location, else in the server, else NULL. */
cfg_opt_t *cf_inherited(cfg_t *ls, cfg_t *srv, const char *name);
/* Which scope set name: ls, srv, or NULL. */
cfg_t *cf_setter(cfg_t *ls, cfg_t *srv, const char *name);
/* Checks that need the whole file (zone names). */
void site_check(cfg_t *cfg);
/* Builds the server's own settings and its locations. */
void site_build_server(cfg_t *cfg, cfg_t *sec, struct config *cf,
    struct config_server *s);
void site_free(struct config *cf);

/* A location's own fields (not the proxy's). */
void site_free_location(struct config_location *l);

/* config_access.c */
extern cfg_opt_t site_limit_zone_opts[];

int validate_acl(cfg_t *cfg, cfg_opt_t *opt);
int validate_auth(cfg_t *cfg, cfg_opt_t *opt);
int validate_user_file(cfg_t *cfg, cfg_opt_t *opt);
int validate_body_size(cfg_t *cfg, cfg_opt_t *opt);
int validate_limit_req(cfg_t *cfg, cfg_opt_t *opt);
int validate_limit_conn(cfg_t *cfg, cfg_opt_t *opt);
int validate_zone(cfg_t *cfg, cfg_opt_t *opt);
/* "ZONE [burst=N] [nodelay]" */
int parse_limit_req(const char *v, char *zone, size_t zlen, int *burst,
    bool *nodelay);
/* "ZONE N", or "N" with the zone of the scope's limit_req. */
int parse_limit_conn(const char *v, char *zone, size_t zlen, int *max);
/* The index of the limit_zone called name, or -1. */
int cf_find_zone(cfg_t *cfg, const char *name);
void htpasswd_free(struct config_htpasswd *h);
/* A scope's allow and deny, auth_basic, max_body_size and limits. */
void build_access(cfg_t *cfg, cfg_t *ls, cfg_t *srv, struct config *cf,
    struct config_location *l);
/* Builds limit zones and what the servers share. */
void site_build(cfg_t *cfg, struct config *cf);

#endif

/*
 * The configuration: parsed by libconfuse from one declarative table into a
 * typed struct that the master builds once and the workers only read.
 *
 * Sizes accept the suffixes k, m, g (powers of 1024); times accept ms, s, m,
 * h, d, and a bare number means seconds.  Relative paths are resolved against
 * the folder of the config file.
 */
#ifndef CORRAL_CONFIG_H
#define CORRAL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct config_listen {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char text[64];			/* as written, "127.0.0.1:8080" */
	bool tls;			/* "... tls": HTTPS on this address */
	bool default_server;		/* a server's "ADDR default_server" */
	bool proxy_protocol;		/* each connection starts with a PROXY
					   protocol header (v1 or v2) */
};

/*
 * One server of an upstream group: a numeric address, a host name
 * resolved when the config is loaded, or a unix socket
 * ("unix:/run/app.sock"), and a weight.
 */
#define CONFIG_PEER_TEXT	128	/* "unix:" and a sun_path, and a NUL */
struct config_peer {
	struct sockaddr_storage addr;	/* AF_INET, AF_INET6 or AF_UNIX */
	socklen_t addrlen;
	char text[CONFIG_PEER_TEXT];	/* "127.0.0.1:9000", "unix:/path" */
	int weight;			/* 1..100 */
	bool tls;			/* "https://...", or the group's tls */
	bool named;			/* text is "name:port": the name is
					   TLS's default tls_name */
};

/* An address prefix: 10.0.0.0/8, 2001:db8::/32, 192.0.2.1 (/32). */
struct config_cidr {
	int family;			/* AF_INET, AF_INET6 */
	unsigned bits;
	unsigned char addr[16];		/* host bits zero */
};

/* Where a trusted proxy names the client (real_ip_header). */
enum config_real_ip {
	REAL_IP_XFF,			/* X-Forwarded-For */
	REAL_IP_X_REAL_IP,		/* X-Real-IP */
};

/* What an upstream group speaks (worker/upstream_proto.h). */
enum config_protocol {
	PROTO_HTTP,
	PROTO_FASTCGI,
	PROTO_MEMCACHED,
};

/* next_upstream: what sends a request on to another peer of the group. */
#define NEXT_ERROR		0x01	/* connect, TLS, reset, close */
#define NEXT_TIMEOUT		0x02	/* connect, TLS, waiting for the head */
#define NEXT_NON_IDEMPOTENT	0x04	/* also once the request went out */

/* How a peer is chosen for a request. */
enum config_hash {
	HASH_ROUND_ROBIN,		/* smooth weighted round-robin */
	HASH_KETAMA,			/* by key, libmemcached's ketama */
};

struct config_upstream {
	char *name;
	enum config_protocol protocol;
	enum config_hash hash;
	struct config_peer *peers;
	size_t npeers;
	int keepalive;			/* idle connections kept per worker */
	int connect_timeout_ms;
	int read_timeout_ms;		/* between two reads */
	int send_timeout_ms;
	int max_fails;			/* 0: never mark a peer down */
	int fail_timeout_ms;
	unsigned next_upstream;		/* NEXT_*: when to try another peer */
	int next_upstream_tries;	/* peers tried at most; 0: all */
	/* TLS to the peers (master/tls_client.h). */
	bool any_tls;			/* some peer is "https://" */
	bool tls_verify;		/* the peer's certificate */
	char *tls_name;			/* SNI and the name verified; NULL:
					   the peer's address */
	char *tls_trusted_certificate;	/* CA file; NULL: the system's */
	int tls_trusted_certificate_line;
	bool tls_session_reuse;
};

/*
 * A location of a server: requests whose normalised path starts with
 * prefix go to the upstream, the others are served from files.  Proxied
 * responses may be kept in the shared store (worker/proxy.c).
 */
#define CACHE_STALE_UPDATING	0x01	/* while one request refreshes */
#define CACHE_STALE_ERROR	0x02	/* upstream unreachable or broken */
#define CACHE_STALE_TIMEOUT	0x04
#define CACHE_STALE_500		0x08
#define CACHE_STALE_502		0x10
#define CACHE_STALE_503		0x20
#define CACHE_STALE_504		0x40

/*
 * cache_valid "CODE ... TIME": how long a response of a status is fresh
 * when it says nothing of its freshness (nginx's proxy_cache_valid).
 */
#define CONFIG_VALID_ANY	0	/* status "any" */
struct config_valid {
	int status;			/* 100..999, or CONFIG_VALID_ANY */
	int64_t ttl;			/* seconds; 0: such responses are not
					   stored */
};

/* How a location's title matches a path (nginx's order of precedence). */
enum loc_match {
	LOC_NONE,			/* the server's own settings */
	LOC_PREFIX,			/* "/images/": longest wins */
	LOC_EXACT,			/* "= /": only that path */
	LOC_PREFIX_STOP,		/* "^~ /static/": no regex after it */
	LOC_REGEX,			/* "~ re" and "~* re" (any case) */
	LOC_NAMED,			/* "@app": only error_page and
					   try_files go there */
};

struct vars_tmpl;			/* worker/vars.h */

#define REWRITE_NEXT		0	/* go on with the next rewrite */
#define REWRITE_LAST		1	/* search the locations again */
#define REWRITE_BREAK		2	/* stay in this location */
#define REWRITE_REDIRECT	3	/* 302 */
#define REWRITE_PERMANENT	4	/* 301 */

struct config_rewrite {
	void *re;			/* pcre2_code, JIT-compiled */
	struct vars_tmpl *to;
	int flag;			/* REWRITE_* */
};

/* error_page "404 /404.html": the page for a status, served internally. */
struct config_error_page {
	int status;
	int answer;			/* "=200": the status sent; 0: same;
					   -1 ("= @app"): the target's */
	char *uri;			/* "/404.html" or an absolute URL */
};

/* One allow or deny rule: an address prefix, or every address. */
struct config_acl {
	bool allow;
	bool all;
	int family;			/* AF_INET, AF_INET6 */
	unsigned bits;
	unsigned char addr[16];
};

struct config_header {
	char *line;			/* "Name: value\r\n" */
	size_t len;
	bool always;			/* on error responses too */
};

/* A user of an htpasswd file. */
struct config_user {
	char *name;
	char *hash;			/* crypt(3): $2y$, $5$, $6$, $y$ */
};

struct config_htpasswd {
	char *path;
	struct config_user *users;
	size_t nusers;
};

/* limit_zone "name" { key rate status }: state in the shared store. */
struct config_limit_zone {
	char *name;
	struct vars_tmpl *key;
	uint64_t rate_milli;		/* requests per 1000 s */
	int status;			/* 429 or 503 when over */
};

#define EXPIRES_OFF	INT64_MIN

/*
 * A location of a server, and the server's own settings (servers[i].base,
 * match LOC_NONE), which the locations inherit unless they set their own.
 */
struct config_location {
	char *prefix;			/* the path, or the regex's source */
	size_t prefix_len;
	int match;			/* enum loc_match */
	void *re;			/* pcre2_code for LOC_REGEX */
	int line;			/* where the location ends */

	int upstream;			/* in config.upstreams; -1: files */
	bool cache;
	bool cache_lock;		/* one filler, the others wait */
	bool x_cache;			/* X-Cache on proxied responses */
	int64_t cache_ttl;		/* seconds a response silent on its
					   freshness is fresh, if its status
					   may be cached so; 0: not stored */
	struct config_valid *cache_valid;	/* the same per status */
	size_t ncache_valid;
	bool cache_cdn_control;		/* CDN-Cache-Control and
					   Surrogate-Control govern */
	int cache_lock_timeout_ms;
	int cache_pass_ttl_ms;		/* hit-for-pass */
	int64_t cache_grace;		/* seconds stale copies are kept */
	unsigned cache_stale;		/* CACHE_STALE_* */
	char **purge_allow;		/* numeric addresses, canonical */
	size_t npurge_allow;
	bool status;			/* the status page (worker/status.c) */
	char **status_allow;		/* who may see it, like purge_allow */
	size_t nstatus_allow;

	/* Files. */
	int dir;			/* in config.dirs: root or alias */
	bool alias;			/* the location's path is cut off */
	struct vars_tmpl *alias_tmpl;	/* alias with captures, or NULL */
	char **index;
	size_t nindex;
	struct vars_tmpl **try_files;
	size_t ntry_files;		/* the last is the fallback */
	bool dotfiles;			/* serve names starting with '.' */
	bool gzip_static;
	char *charset;			/* NULL: none */
	char *default_type;		/* the location's or its server's;
					   NULL: config.default_type */

	/* Rewrites, then return. */
	struct config_rewrite *rewrites;
	size_t nrewrites;
	int return_status;		/* 0: none */
	struct vars_tmpl *return_text;	/* URL or body, or NULL */

	/* Access. */
	struct config_acl *acl;
	size_t nacl;
	bool acl_default_allow;		/* when no rule matched */
	char *auth_realm;		/* NULL: no auth_basic */
	int auth_file;			/* in config.htpasswd */
	int limit_req_zone;		/* in config.limit_zones; -1: none */
	int limit_req_burst;
	bool limit_req_nodelay;
	int limit_conn_zone;		/* -1: none */
	int limit_conn;
	uint64_t max_body_size;		/* 0: no limit */

	/* Responses. */
	struct config_error_page *error_pages;
	size_t nerror_pages;
	struct config_header *headers;
	size_t nheaders;
	int64_t expires;		/* seconds; EXPIRES_OFF */

	struct config_fastcgi *fastcgi;	/* set with fastcgi = "NAME" */
	char *proxy_path;		/* replaces prefix upstream, or NULL */
	struct config_proxy_header *proxy_headers;	/* proxy_set_header,
							   then _append_ */
	size_t nproxy_headers;
	/* memcached = "NAME": the value of memcached_key is the body. */
	bool memcached_request_uri;	/* memcached_key = $request_uri, else
					   $uri */
	struct vars_tmpl *memcached_key; /* any other memcached_key, or NULL */
	bool memcached_local;		/* memcached_key alone: the memcached
					   listener's items (worker/mc_http.c) */
	uint32_t memcached_gzip_flag;	/* flags bits that say "gzip" */
};

/* proxy_set_header / proxy_append_header "Name value-template". */
struct config_proxy_header {
	char *name;
	struct vars_tmpl *tmpl;		/* empty with set: the field goes */
	bool append;			/* the client's stays; this is added */
};

/* fastcgi_param "NAME VALUE [if_not_empty]". */
struct config_fcgi_param {
	char *name;
	char *value;
	struct vars_tmpl *tmpl;		/* value, with its variables */
	bool if_not_empty;		/* not sent when the value is empty */
};

/* A location whose upstream speaks FastCGI (worker/fcgi_params.c). */
struct config_fastcgi {
	struct config_fcgi_param *params;	/* added to or replacing the
						   CGI/1.1 ones */
	size_t nparams;
	char *index;			/* appended to a URI ending in '/' */
	void *split_re;			/* fastcgi_split_path_info: pcre2_code
					   with two groups, or NULL */
	bool script_check;		/* 404 when SCRIPT_FILENAME is no file,
					   without asking the application */
	bool request_buffering;		/* the whole body is read before
					   the application is asked */
};

struct config_server {
	char **names;			/* lower case; "*.example.com" allowed */
	size_t nnames;
	char *root;			/* absolute path of the document root */
	char **index;
	size_t nindex;
	char *access_log;		/* absolute path, or NULL when "off" */
	size_t log_format;		/* in config.log_formats */
	bool underscores_in_headers;	/* pass such field names upstream */
	int access_log_line;		/* where it was set; 0: default */
	struct config_location base;	/* the server's own settings */
	struct config_location *locations;	/* in the order written */
	size_t nlocations;
	char *tls_certificate;		/* absolute path (full chain), or
					   NULL */
	char *tls_certificate_key;	/* absolute path */
	int tls_certificate_line;	/* where they were set, for errors */
	int tls_certificate_key_line;
	size_t *listen;			/* indexes into config.listen */
	size_t nlisten;
	bool *default_for;		/* per config.listen: the server
					   for a Host no name matches */
};

/* The tls { } section: what every TLS listener offers. */
#define TLS_PROTO_12		0x01
#define TLS_PROTO_13		0x02

struct config_tls {
	unsigned protocols;		/* TLS_PROTO_* */
	char *ciphers;			/* TLS 1.2 cipher list (OpenSSL) */
	char *ciphersuites;		/* TLS 1.3 suites */
	int ciphers_line;		/* where set, for errors; 0: default */
	int ciphersuites_line;
	bool session_cache;		/* TLS 1.2 IDs in the shared store */
	uint64_t session_cache_size;	/* own mapping when cache.size is 0 */
	int session_timeout_ms;
	bool session_tickets;
	int ticket_key_rotate_ms;
	int handshake_timeout_ms;
	bool ktls;			/* kernel TLS where available */
	int listen_line;		/* first "tls" listen, for errors */
};

struct log_format;

/* A named access log format (worker/log_format.h), compiled. */
struct config_log_format {
	char *name;
	struct log_format *fmt;
};

/* The shared-memory store (shm/store.h). */
struct config_cache {
	char *path;			/* backing file, or NULL: anonymous */
	int path_line;			/* where it was set; 0: default */
	uint64_t size;			/* 0 disables the store */
	unsigned stripes;		/* a power of two */
	uint64_t max_object;
	uint64_t file_max;		/* static files up to this are served
					   from the store */
	uint64_t file_copy_max;		/* ...copied from it up to this; above,
					   sendfile() from the file */
	bool persist;			/* keep the file's contents on restart */
	int line;			/* where the section sets size (or
					   ends): store errors point here */
	int l2;				/* memcached cluster behind the store:
					   in config.upstreams, or -1 */
	int l2_timeout_ms;		/* a get from it, at most */
};

/*
 * Lines of the file where directives that name files, users and addresses
 * were set (0: left at their default), for the errors the master finds
 * when it opens what they name.
 */
struct config_lines {
	int error_log, pid_file, user, group, listen, mime_types, reuseport;
};

/* The memcached listener (worker/mc_conn.c) on the shared store. */
#define MC_ITEM_OVERHEAD	8	/* store bytes per value besides it */
struct config_memcached {
	struct config_peer *listen;	/* "127.0.0.1:11211", "unix:/path";
					   none: no listener */
	size_t nlisten;
	uint64_t max_item;		/* largest value; 0: what the store
					   takes */
	bool allow_flush;		/* flush_all empties it */
	int idle_timeout_ms;		/* 0: connections may idle forever */
	int line;			/* where the section ends */
};

/* Where a line of the loaded text was written (see config_where()). */
struct config_src {
	int file;			/* in config.src_files */
	int line;
};

struct config {
	char *file;			/* absolute path of the config file */
	struct config_lines lines;
	int workers;			/* "auto" resolved to the CPU count */
	int worker_connections;
	char *error_log;		/* absolute path, or NULL for stderr */
	int log_level;			/* enum log_level */
	char *pid_file;			/* absolute path, or NULL */
	char *stats_file;		/* absolute path, or NULL: the
					   counters are not a file */
	int stats_file_line;		/* where it (or pid_file) is set */
	char *user;			/* NULL: keep the user we started as */
	char *group;
	int worker_shutdown_timeout_ms;	/* 0: wait as long as it takes */
	int worker_rlimit_nofile;	/* 0: leave the limit alone */
	bool reuseport;			/* a listening socket per worker on
					   each address (SO_REUSEPORT) */

	struct config_listen *listen;
	size_t nlisten;

	/* HTTP limits and timeouts. */
	size_t max_request_line;	/* longer request line: 414 */
	size_t max_header_size;		/* whole header block: 431 */
	size_t max_headers;		/* header field count: 431 */
	uint64_t max_body_size;		/* 413; 0 means no limit */
	size_t client_body_buffer_size;	/* a body kept whole: in memory up
					   to this, then in a file */
	char *client_body_temp_path;	/* directory of those files */
	int keepalive_requests;
	int keepalive_timeout_ms;
	int header_timeout_ms;		/* total, from the first byte */
	int body_timeout_ms;		/* from the body's last bytes */
	uint64_t body_min_rate;		/* bytes/s a body must average; 0 */
	int send_timeout_ms;
	int lingering_timeout_ms;

	bool server_tokens;

	/* Trusted proxies (worker/realip.h): their clients' addresses. */
	struct config_cidr *real_ip_from;
	size_t nreal_ip_from;
	enum config_real_ip real_ip_header;
	bool real_ip_recursive;
	bool sendfile;
	char *mime_types;		/* absolute path; NULL: built in */
	char *default_type;
	int max_ranges;			/* more ranges get the whole body */
	bool gzip;			/* compress files of gzip_types */
	char **gzip_types;
	size_t ngzip_types;
	uint64_t gzip_min_length;
	int gzip_comp_level;
	bool brotli;			/* and a brotli copy, same types */
	int brotli_comp_level;

	/* Per-worker open-file cache. */
	size_t file_cache_entries;
	int file_cache_valid_ms;
	int file_cache_inactive_ms;	/* unused this long: closed */
	size_t file_cache_max_size;	/* files up to this are kept in memory */

	struct config_cache cache;
	struct config_tls tls;
	bool any_tls;			/* some listen has "tls" */
	struct config_memcached memcached;

	struct config_log_format *log_formats;	/* built-in ones first */
	size_t nlog_formats;
	int log_flush_ms;		/* 0: every line written at once */

	struct config_upstream *upstreams;
	size_t nupstreams;

	struct config_server *servers;	/* servers[0] is the default */
	size_t nservers;

	char **dirs;			/* roots and alias targets, opened
					   once by the master */
	size_t ndirs;
	struct config_htpasswd *htpasswd;
	size_t nhtpasswd;
	struct config_limit_zone *limit_zones;
	size_t nlimit_zones;

	/* include() puts files inside the text: its files, and where each
	 * of its lines was written. */
	char **src_files;
	size_t nsrc_files;
	struct config_src *src_map;
	size_t nsrc_map;
};

/*
 * Parses and validates a config file.  On error returns NULL and writes
 * "FILE:LINE: what is wrong" (or "FILE: what is wrong") into err.
 */
struct config *config_load(const char *path, char *err, size_t errlen);

void config_free(struct config *cf);

/*
 * The file where line LINE of cf's text (the lines kept in struct config)
 * was written, and in *src its line in that file.
 */
const char *config_where(const struct config *cf, int line, int *src);

/* Unit parsers shared with the table's callbacks; 0 on success, -1 if bad. */
int config_parse_size(const char *s, uint64_t *out);
int config_parse_time_ms(const char *s, int64_t *out);

#endif

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
};

/*
 * One server of an upstream group: a numeric address or a unix socket
 * ("unix:/run/app.sock"), and a weight.
 */
#define CONFIG_PEER_TEXT	128	/* "unix:" and a sun_path, and a NUL */
struct config_peer {
	struct sockaddr_storage addr;	/* AF_INET, AF_INET6 or AF_UNIX */
	socklen_t addrlen;
	char text[CONFIG_PEER_TEXT];	/* "127.0.0.1:9000", "unix:/path" */
	int weight;			/* 1..100 */
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

struct config_location {
	char *prefix;			/* starts with '/' */
	size_t prefix_len;
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
	struct config_fastcgi *fastcgi;	/* set with fastcgi = "NAME" */
	char *proxy_path;		/* replaces prefix upstream, or NULL */
	/* memcached = "NAME": the value of memcached_key is the body. */
	bool memcached_request_uri;	/* memcached_key = $request_uri, else
					   $uri */
	bool memcached_local;		/* memcached_key alone: the memcached
					   listener's items (worker/mc_http.c) */
	uint32_t memcached_gzip_flag;	/* flags bits that say "gzip" */
};

/* fastcgi_param "NAME VALUE [if_not_empty]". */
struct config_fcgi_param {
	char *name;
	char *value;
	bool if_not_empty;		/* not sent when the value is empty */
};

/* A location whose upstream speaks FastCGI (worker/fcgi_params.c). */
struct config_fastcgi {
	struct config_fcgi_param *params;	/* added to or replacing the
						   CGI/1.1 ones */
	size_t nparams;
	char *index;			/* appended to a URI ending in '/' */
	bool script_check;		/* 404 when SCRIPT_FILENAME is no file,
					   without asking the application */
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
	struct config_location *locations;	/* longest prefix first */
	size_t nlocations;
	char *tls_certificate;		/* absolute path (full chain), or
					   NULL */
	char *tls_certificate_key;	/* absolute path */
	int tls_certificate_line;	/* where they were set, for errors */
	int tls_certificate_key_line;
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
	int error_log, pid_file, user, group, listen, mime_types;
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

	struct config_listen *listen;
	size_t nlisten;

	/* HTTP limits and timeouts. */
	size_t max_request_line;	/* longer request line: 414 */
	size_t max_header_size;		/* whole header block: 431 */
	size_t max_headers;		/* header field count: 431 */
	uint64_t max_body_size;		/* 413; 0 means no limit */
	int keepalive_requests;
	int keepalive_timeout_ms;
	int header_timeout_ms;		/* total, from the first byte */
	int body_timeout_ms;
	int send_timeout_ms;
	int lingering_timeout_ms;

	bool server_tokens;

	/* Trusted proxies (worker/realip.h): their clients' addresses. */
	struct config_cidr *real_ip_from;
	size_t nreal_ip_from;
	enum config_real_ip real_ip_header;
	bool real_ip_recursive;
	bool sendfile;
	char *mime_types;		/* absolute path */
	char *default_type;
	int max_ranges;			/* more ranges get the whole body */
	bool gzip;			/* compress files of gzip_types */
	char **gzip_types;
	size_t ngzip_types;
	uint64_t gzip_min_length;
	int gzip_comp_level;

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
};

/*
 * Parses and validates a config file.  On error returns NULL and writes
 * "FILE:LINE: what is wrong" (or "FILE: what is wrong") into err.
 */
struct config *config_load(const char *path, char *err, size_t errlen);

void config_free(struct config *cf);

/* Unit parsers shared with the table's callbacks; 0 on success, -1 if bad. */
int config_parse_size(const char *s, uint64_t *out);
int config_parse_time_ms(const char *s, int64_t *out);

#endif

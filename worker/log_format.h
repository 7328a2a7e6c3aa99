/*
 * Access log formats: nginx's log_format strings ("$remote_addr - ..."),
 * compiled once at config load into literal pieces and variables, and
 * rendered per response from values the connection layer gathers.  Knows
 * nothing of connections, so it is tested on its own.
 */
#ifndef CORRAL_LOG_FORMAT_H
#define CORRAL_LOG_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "worker/http.h"

/* The variables a format may use: X(id, name), names as nginx's. */
#define LOG_VARS(X) \
	X(remote_addr, "remote_addr") \
	X(remote_user, "remote_user") \
	X(time_local, "time_local") \
	X(time_iso8601, "time_iso8601") \
	X(msec, "msec") \
	X(request, "request") \
	X(request_method, "request_method") \
	X(request_uri, "request_uri") \
	X(uri, "uri") \
	X(args, "args") \
	X(server_protocol, "server_protocol") \
	X(status, "status") \
	X(body_bytes_sent, "body_bytes_sent") \
	X(request_time, "request_time") \
	X(http_referer, "http_referer") \
	X(http_user_agent, "http_user_agent") \
	X(host, "host") \
	X(server_name, "server_name") \
	X(upstream_addr, "upstream_addr") \
	X(upstream_status, "upstream_status") \
	X(upstream_connect_time, "upstream_connect_time") \
	X(upstream_response_time, "upstream_response_time") \
	X(upstream_cache_status, "upstream_cache_status") \
	X(ssl_protocol, "ssl_protocol") \
	X(request_id, "request_id") \
	X(connection, "connection") \
	X(connection_requests, "connection_requests") \
	X(pid, "pid")

#define LOG_VAR_ENUM(id, name) LOG_V_##id,
enum log_var { LOG_VARS(LOG_VAR_ENUM) LOG_NVARS };
#undef LOG_VAR_ENUM

enum log_escape {
	LOG_ESC_DEFAULT,	/* \xHH for quotes, backslash, controls */
	LOG_ESC_JSON,		/* JSON string escapes; "-" becomes "" */
	LOG_ESC_NONE,
};

struct log_format;

/* A server tried before the last one (next_upstream). */
struct log_try {
	const char *addr;
	int status;
	int64_t connect_us, response_us;	/* -1: none */
};

/* What one response logs; a span with p == NULL, or -1, logs "-". */
struct log_values {
	struct span remote_addr, method, target, referer, user_agent, host;
	const char *server_name;
	int version;			/* 10 or 11; 0: no request line */
	int status;
	uint64_t body_bytes;
	uint64_t request_time_us;
	const char *time_local;		/* "30/Nov/2026:08:00:00 +0000" */
	const char *time_iso8601;
	uint64_t now_ms;		/* Unix time */
	struct span upstream_addr, cache_status, ssl_protocol;
	int upstream_status;		/* 0: none */
	int64_t upstream_connect_us, upstream_response_us;
	/* Servers tried before the last, oldest first: the $upstream_*
	 * variables list theirs before the last's, joined by ", " (nginx). */
	const struct log_try *tries;
	unsigned ntries;
	char request_id[33];		/* 32 hex digits */
	uint64_t connection;
	unsigned connection_requests;
	int pid;
};

/*
 * Compiles src; NULL with a reason in err (which names the unknown
 * variable, say) when it is not a valid format.
 */
struct log_format *log_format_compile(const char *src, enum log_escape esc,
    char *err, size_t errlen);
void log_format_free(struct log_format *f);
/* True when the format uses variable v (so it is worth gathering). */
bool log_format_uses(const struct log_format *f, enum log_var v);

/*
 * Writes one line, with its newline, into buf; returns its length.  A
 * line longer than size is cut in its variables, never in the literal
 * text, so a JSON format stays JSON.
 */
size_t log_format_render(const struct log_format *f,
    const struct log_values *v, char *buf, size_t size);

/* The formats every config has: combined, common, main, json, timed. */
extern const struct log_format_builtin {
	const char *name, *src;
	enum log_escape esc;
} log_format_builtins[];
extern const size_t log_format_nbuiltins;

#endif

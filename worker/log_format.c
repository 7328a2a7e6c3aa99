/*
 * Access log formats (see log_format.h).  A format is a list of pieces,
 * literal text or a variable; a line is rendered into a caller's buffer
 * with no allocation.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/log_format.h"

struct piece {
	const char *text;	/* literal, or NULL for a variable */
	size_t len;
	enum log_var var;
	size_t lit_after;	/* bytes kept for the pieces after this:
				   their text, and room for numbers */
};

struct log_format {
	enum log_escape esc;
	size_t npieces;
	uint64_t uses;		/* bit per variable */
	char *src;
	struct piece pieces[];
};

static const char *const var_names[] = {
#define LOG_VAR_NAME(id, name) name,
	LOG_VARS(LOG_VAR_NAME)
#undef LOG_VAR_NAME
};
_Static_assert(LOG_NVARS <= 64, "uses is a 64-bit mask");

const struct log_format_builtin log_format_builtins[] = {
	{ "combined", "$remote_addr - $remote_user [$time_local] "
	    "\"$request\" $status $body_bytes_sent \"$http_referer\" "
	    "\"$http_user_agent\"", LOG_ESC_DEFAULT },
	{ "common", "$remote_addr - $remote_user [$time_local] "
	    "\"$request\" $status $body_bytes_sent", LOG_ESC_DEFAULT },
	/* combined with the host and the timings, for people. */
	{ "timed", "$remote_addr - $remote_user [$time_local] "
	    "\"$request\" $status $body_bytes_sent \"$http_referer\" "
	    "\"$http_user_agent\" host=$host rt=$request_time "
	    "uct=$upstream_connect_time urt=$upstream_response_time "
	    "ua=$upstream_addr us=$upstream_status "
	    "cs=$upstream_cache_status tls=$ssl_protocol id=$request_id",
	    LOG_ESC_DEFAULT },
	/* One JSON object a line, for log shippers. */
	{ "json", "{\"time\":\"$time_iso8601\",\"remote_addr\":"
	    "\"$remote_addr\",\"host\":\"$host\",\"server\":"
	    "\"$server_name\",\"method\":\"$request_method\",\"uri\":"
	    "\"$request_uri\",\"protocol\":\"$server_protocol\",\"status\":"
	    "$status,\"body_bytes_sent\":$body_bytes_sent,\"request_time\":"
	    "$request_time,\"referer\":\"$http_referer\",\"user_agent\":"
	    "\"$http_user_agent\",\"upstream_addr\":\"$upstream_addr\","
	    "\"upstream_status\":\"$upstream_status\","
	    "\"upstream_connect_time\":\"$upstream_connect_time\","
	    "\"upstream_response_time\":\"$upstream_response_time\","
	    "\"cache\":\"$upstream_cache_status\",\"tls\":\"$ssl_protocol\","
	    "\"request_id\":\"$request_id\",\"connection\":$connection,"
	    "\"connection_requests\":$connection_requests}",
	    LOG_ESC_JSON },
};
const size_t log_format_nbuiltins = sizeof(log_format_builtins) /
    sizeof(log_format_builtins[0]);

static int
find_var(const char *name, size_t len)
{
	for (int i = 0; i < LOG_NVARS; i++)
		if (strlen(var_names[i]) == len &&
		    memcmp(var_names[i], name, len) == 0)
			return i;
	return -1;
}

#define NUM_ROOM	24	/* the longest number a variable prints */

static bool
numeric(enum log_var v)
{
	switch (v) {
	case LOG_V_status:
	case LOG_V_body_bytes_sent:
	case LOG_V_request_time:
	case LOG_V_msec:
	case LOG_V_connection:
	case LOG_V_connection_requests:
	case LOG_V_pid:
	case LOG_V_upstream_status:
	case LOG_V_upstream_connect_time:
	case LOG_V_upstream_response_time:
		return true;
	default:
		return false;
	}
}

static bool
name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	    ch == '_';
}

struct log_format *
log_format_compile(const char *src, enum log_escape esc, char *err,
    size_t errlen)
{
	struct log_format *f;
	size_t n = 0, max = 1, lit = 0;
	const char *p, *name;
	size_t len;
	int v;

	for (p = src; *p != '\0'; p++)
		max += *p == '$' ? 2 : 0;
	f = calloc(1, sizeof(*f) + max * sizeof(struct piece));
	if (f == NULL || (f->src = strdup(src)) == NULL) {
		free(f);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	f->esc = esc;
	for (p = f->src; *p != '\0';) {
		if (*p != '$') {
			for (len = 0; p[len] != '\0' && p[len] != '$'; len++)
				;
			f->pieces[n++] = (struct piece){ p, len, 0, 0 };
			lit += len;
			p += len;
			continue;
		}
		bool braced = p[1] == '{';

		name = p + 1 + braced;
		for (len = 0; name_char(name[len]); len++)
			;
		if (len == 0 || (braced && name[len] != '}')) {
			snprintf(err, errlen, "bad variable at \"%.20s\"", p);
			log_format_free(f);
			return NULL;
		}
		if ((v = find_var(name, len)) < 0) {
			snprintf(err, errlen, "unknown variable \"$%.*s\"",
			    (int)len, name);
			log_format_free(f);
			return NULL;
		}
		f->pieces[n++] = (struct piece){ NULL, 0, (enum log_var)v,
		    0 };
		f->uses |= 1ULL << v;
		lit += numeric((enum log_var)v) ? NUM_ROOM : 0;
		p = name + len + braced;
	}
	f->npieces = n;
	for (size_t i = 0; i < n; i++) {
		lit -= f->pieces[i].text ? f->pieces[i].len :
		    numeric(f->pieces[i].var) ? NUM_ROOM : 0;
		f->pieces[i].lit_after = lit;
	}
	return f;
}

void
log_format_free(struct log_format *f)
{
	if (f == NULL)
		return;
	free(f->src);
	free(f);
}

bool
log_format_uses(const struct log_format *f, enum log_var v)
{
	return (f->uses >> v) & 1;
}

/* Copies s escaped into dst, at most room bytes; returns bytes written. */
static size_t
escape(enum log_escape esc, char *dst, size_t room, const char *s,
    size_t len)
{
	static const char hex[] = "0123456789abcdef";
	static const char HEX[] = "0123456789ABCDEF";
	size_t n = 0;

	if (s == NULL) {
		s = esc == LOG_ESC_JSON ? "" : "-";
		len = strlen(s);
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		char tmp[6];
		size_t k = 0;

		if (esc == LOG_ESC_NONE) {
			tmp[k++] = (char)ch;
		} else if (esc == LOG_ESC_JSON) {
			if (ch == '"' || ch == '\\') {
				tmp[k++] = '\\';
				tmp[k++] = (char)ch;
			} else if (ch < 0x20 || ch >= 0x7f) {
				/* Bytes, not characters: a log line must
				 * parse whatever a client sent. */
				memcpy(tmp, "\\u00", 4);
				k = 4;
				tmp[k++] = hex[ch >> 4];
				tmp[k++] = hex[ch & 15];
			} else {
				tmp[k++] = (char)ch;
			}
		} else if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f) {
			tmp[k++] = '\\';
			tmp[k++] = 'x';
			tmp[k++] = HEX[ch >> 4];
			tmp[k++] = HEX[ch & 15];
		} else {
			tmp[k++] = (char)ch;
		}
		if (n + k > room)
			break;
		memcpy(dst + n, tmp, k);
		n += k;
	}
	return n;
}

static struct span
sp(const char *s)
{
	return (struct span){ s, s ? strlen(s) : 0 };
}

/* A time in µs as nginx writes it: seconds with milliseconds. */
static int
secs(char *buf, size_t size, int64_t us)
{
	if (us < 0)
		return -1;
	return snprintf(buf, size, "%" PRId64 ".%03" PRId64, us / 1000000,
	    us / 1000 % 1000);
}

/*
 * The value of one variable: a span (maybe NULL: "-") or, for numbers,
 * text in num.  Numbers are never escaped.
 */
static struct span
value(enum log_var var, const struct log_values *v, char *num,
    size_t size, bool *is_num)
{
	const struct span none = { NULL, 0 };
	int n = -1;

	*is_num = true;
	switch (var) {
	case LOG_V_status:
		n = snprintf(num, size, "%d", v->status);
		break;
	case LOG_V_body_bytes_sent:
		n = snprintf(num, size, "%" PRIu64, v->body_bytes);
		break;
	case LOG_V_request_time:
		n = secs(num, size, (int64_t)v->request_time_us);
		break;
	case LOG_V_msec:
		n = snprintf(num, size, "%" PRIu64 ".%03" PRIu64,
		    v->now_ms / 1000, v->now_ms % 1000);
		break;
	case LOG_V_connection:
		n = snprintf(num, size, "%" PRIu64, v->connection);
		break;
	case LOG_V_connection_requests:
		n = snprintf(num, size, "%u", v->connection_requests);
		break;
	case LOG_V_pid:
		n = snprintf(num, size, "%d", v->pid);
		break;
	case LOG_V_upstream_status:
		if (v->upstream_status > 0)
			n = snprintf(num, size, "%d", v->upstream_status);
		break;
	case LOG_V_upstream_connect_time:
		n = secs(num, size, v->upstream_connect_us);
		break;
	case LOG_V_upstream_response_time:
		n = secs(num, size, v->upstream_response_us);
		break;
	default:
		*is_num = false;
		break;
	}
	if (*is_num)
		return n < 0 ? none : (struct span){ num, (size_t)n };
	switch (var) {
	case LOG_V_remote_addr:
		return v->remote_addr;
	case LOG_V_time_local:
		return sp(v->time_local);
	case LOG_V_time_iso8601:
		return sp(v->time_iso8601);
	case LOG_V_request_method:
		return v->method;
	case LOG_V_request_uri:
		return v->target;
	case LOG_V_uri:
	case LOG_V_args: {
		const char *q = v->target.p ? memchr(v->target.p, '?',
		    v->target.len) : NULL;

		if (var == LOG_V_uri)
			return q ? (struct span){ v->target.p,
			    (size_t)(q - v->target.p) } : v->target;
		return q ? (struct span){ q + 1, v->target.len -
		    (size_t)(q + 1 - v->target.p) } : none;
	}
	case LOG_V_server_protocol:
		return v->version == 0 ? none : sp(v->version == 10 ?
		    "HTTP/1.0" : "HTTP/1.1");
	case LOG_V_http_referer:
		return v->referer;
	case LOG_V_http_user_agent:
		return v->user_agent;
	case LOG_V_host:
		return v->host.p ? v->host : sp(v->server_name);
	case LOG_V_server_name:
		return sp(v->server_name);
	case LOG_V_upstream_addr:
		return v->upstream_addr;
	case LOG_V_upstream_cache_status:
		return v->cache_status;
	case LOG_V_ssl_protocol:
		return v->ssl_protocol;
	case LOG_V_request_id:
		return sp(v->request_id[0] ? v->request_id : NULL);
	default:
		return none;
	}
}

/* "$request": the request line as received, or nothing at all. */
static size_t
request_line(const struct log_format *f, const struct log_values *v,
    char *dst, size_t room)
{
	size_t n;

	if (v->method.p == NULL)
		return 0;
	n = escape(f->esc, dst, room, v->method.p, v->method.len);
	if (n < room)
		dst[n++] = ' ';
	n += escape(f->esc, dst + n, room - n, v->target.p, v->target.len);
	if (room - n >= 9) {
		memcpy(dst + n, v->version == 10 ? " HTTP/1.0" : " HTTP/1.1",
		    9);
		n += 9;
	}
	return n;
}

/* The $upstream_* variables: one value per server tried, in order. */
static bool
per_try(enum log_var var)
{
	return var == LOG_V_upstream_addr || var == LOG_V_upstream_status ||
	    var == LOG_V_upstream_connect_time ||
	    var == LOG_V_upstream_response_time;
}

/* One value escaped into dst, at most room bytes. */
static size_t
one_value(const struct log_format *f, enum log_var var,
    const struct log_values *v, char *dst, size_t room)
{
	char num[32];
	bool is_num;
	struct span s = value(var, v, num, sizeof(num), &is_num);

	return escape(is_num && s.p != NULL ? LOG_ESC_NONE : f->esc, dst,
	    room, s.p, s.len);
}

/* The earlier servers' values, each followed by ", ". */
static size_t
tries_values(const struct log_format *f, enum log_var var,
    const struct log_values *v, char *dst, size_t room)
{
	struct log_values t;
	size_t n = 0;

	memset(&t, 0, sizeof(t));
	for (unsigned i = 0; i < v->ntries && n < room; i++) {
		t.upstream_addr = sp(v->tries[i].addr);
		t.upstream_status = v->tries[i].status;
		t.upstream_connect_us = v->tries[i].connect_us;
		t.upstream_response_us = v->tries[i].response_us;
		n += one_value(f, var, &t, dst + n, room - n);
		n += escape(LOG_ESC_NONE, dst + n, room - n, ", ", 2);
	}
	return n;
}

size_t
log_format_render(const struct log_format *f, const struct log_values *v,
    char *buf, size_t size)
{
	size_t pos = 0, room;

	if (size == 0)
		return 0;
	size--;			/* the newline */
	for (size_t i = 0; i < f->npieces; i++) {
		const struct piece *p = &f->pieces[i];

		room = size - pos > p->lit_after ? size - pos - p->lit_after :
		    0;
		if (p->text != NULL) {
			size_t n = p->len < size - pos ? p->len : size - pos;

			memcpy(buf + pos, p->text, n);
			pos += n;
		} else if (p->var == LOG_V_request) {
			pos += request_line(f, v, buf + pos, room);
		} else if (p->var == LOG_V_remote_user) {
			pos += escape(f->esc, buf + pos, room, NULL, 0);
		} else {
			if (v->ntries > 0 && per_try(p->var)) {
				size_t k = tries_values(f, p->var, v,
				    buf + pos, room);

				pos += k;
				room -= k;
			}
			pos += one_value(f, p->var, v, buf + pos, room);
		}
	}
	buf[pos++] = '\n';
	return pos;
}

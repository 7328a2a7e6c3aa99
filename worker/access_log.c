/*
 * The access log: one buffer per server block, filled with whole lines in
 * the server's log_format (worker/log_format.h) and written when full,
 * every log_flush, and before the worker exits, so a graceful stop or a
 * reload loses no line.  With log_flush = 0 each line is written at once.
 * What a line says beyond the request (the upstream's address, status and
 * times, the cache status) is set here by the proxy and the cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "shm/stats.h"
#include "worker/conn_impl.h"
#include "worker/log_format.h"
#include "worker/status.h"
#include "worker/tls.h"

#define ALOG_BUF	(32 * 1024)
#define ALOG_LINE	8192

struct alog {
	int fd;
	const struct log_format *fmt;
	size_t len;
	char buf[ALOG_BUF];
};

static struct alog *alogs;
static struct event *flush_ev;
static uint64_t id_base;		/* random per worker, for $request_id */
static uint64_t id_next;
static char time_iso[32];		/* "2026-11-30T08:00:00+00:00" */
static time_t time_iso_at = -1;
static int my_pid;

static void
alog_write(struct alog *al)
{
	if (al->len > 0 && write(al->fd, al->buf, al->len) == -1)
		log_at(L_ERROR, errno, "write access log");
	al->len = 0;
}

void
access_log_flush(void)
{
	if (alogs == NULL)
		return;
	for (size_t i = 0; i < worker.cf->nservers; i++)
		if (alogs[i].fd != -1)
			alog_write(&alogs[i]);
}

static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	access_log_flush();
}

void
access_log_reopen(void)
{
	const struct config *cf = worker.cf;
	int fd;

	for (size_t i = 0; i < cf->nservers; i++) {
		if (alogs[i].fd == -1)
			continue;
		alog_write(&alogs[i]);
		fd = open(cf->servers[i].access_log, O_WRONLY | O_APPEND |
		    O_CREAT | O_CLOEXEC, 0640);
		if (fd == -1) {
			log_at(L_ERROR, errno, "reopen %s",
			    cf->servers[i].access_log);
			continue;
		}
		close(alogs[i].fd);
		alogs[i].fd = fd;
	}
}

/* At worker start, where failing is allowed; requests never allocate. */
void
access_log_init(void)
{
	const struct config *cf = worker.cf;
	struct timeval tv;

	alogs = calloc(cf->nservers, sizeof(*alogs));
	if (alogs == NULL)
		fatal("calloc");
	for (size_t i = 0; i < cf->nservers; i++) {
		alogs[i].fd = worker.rt->access_fds[i];
		alogs[i].fmt = cf->log_formats[cf->servers[i].log_format].fmt;
	}
	my_pid = (int)getpid();
	if (getrandom(&id_base, sizeof(id_base), 0) != sizeof(id_base))
		id_base = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	if (cf->log_flush_ms == 0)
		return;
	tv.tv_sec = cf->log_flush_ms / 1000;
	tv.tv_usec = (cf->log_flush_ms % 1000) * 1000;
	flush_ev = event_new(worker.base, -1, EV_PERSIST, flush_cb, NULL);
	if (flush_ev == NULL || event_add(flush_ev, &tv) == -1)
		fatalx("access log timer");
}

/* The ISO 8601 local time, made once a second at most. */
static const char *
iso_time(void)
{
	struct tm tm;

	if (time_iso_at != worker.now) {
		time_iso_at = worker.now;
		localtime_r(&worker.now, &tm);
		strftime(time_iso, sizeof(time_iso), "%Y-%m-%dT%H:%M:%S%z",
		    &tm);
		/* +0000 -> +00:00, as nginx writes it */
		size_t n = strlen(time_iso);

		if (n >= 5 && n + 1 < sizeof(time_iso)) {
			memmove(time_iso + n - 1, time_iso + n - 2, 3);
			time_iso[n - 2] = ':';
		}
	}
	return time_iso;
}

static struct span
span_of(const char *s)
{
	return (struct span){ s, s ? strlen(s) : 0 };
}

/* What the line of this response says, gathered from the connection. */
static void
gather(const struct conn *c, const struct log_format *f, int status,
    uint64_t body_bytes, struct log_values *v)
{
	const struct http_request *r = &c->rq->req;
	bool req = r->method_name.p != NULL;

	memset(v, 0, sizeof(*v));
	v->remote_addr = span_of(c->peer);
	if (req) {
		v->method = r->method_name;
		v->target = r->target;
		v->version = r->version;
		v->host = r->host;
		/* Header lookups are linear: only those the format needs. */
		if (log_format_uses(f, LOG_V_http_referer))
			v->referer = http_header_get(r, "Referer");
		if (log_format_uses(f, LOG_V_http_user_agent))
			v->user_agent = http_header_get(r, "User-Agent");
	}
	v->server_name = worker.cf->servers[c->srv].names[0];
	v->status = status;
	v->body_bytes = body_bytes;
	v->request_time_us = worker.now_us > c->rq->req_start_us ?
	    worker.now_us - c->rq->req_start_us : 0;
	v->time_local = worker.log_time;
	if (log_format_uses(f, LOG_V_time_iso8601))
		v->time_iso8601 = iso_time();
	v->now_ms = worker.now_ms;
	v->upstream_addr = span_of(c->rq->log.upstream_addr);
	v->upstream_status = c->rq->log.upstream_status;
	v->upstream_connect_us = c->rq->log.upstream_connect_us - 1;
	v->upstream_response_us = c->rq->log.upstream_response_us - 1;
	v->tries = c->rq->log.tries;
	v->ntries = c->rq->log.ntries;
	v->cache_status = span_of(c->rq->log.cache_status);
	if (log_format_uses(f, LOG_V_ssl_protocol))
		v->ssl_protocol = span_of(conn_tls_protocol(c));
	if (log_format_uses(f, LOG_V_request_id))
		snprintf(v->request_id, sizeof(v->request_id),
		    "%016" PRIx64 "%016" PRIx64, id_base, ++id_next);
	v->connection = c->serial;
	v->connection_requests = c->nreq;
	v->pid = my_pid;
}

/* Counts the response, then logs it: buffered, in whole lines. */
void
resp_done(struct conn *c, int status, uint64_t body_bytes)
{
	struct log_values v;
	char line[ALOG_LINE];
	struct alog *al;
	size_t n;

	if (STATS_ON)
		status_count(c, status, body_bytes);
	al = &alogs[c->srv];
	if (al->fd != -1) {
		gather(c, al->fmt, status, body_bytes, &v);
		n = log_format_render(al->fmt, &v, line, sizeof(line));
		if (al->len + n > sizeof(al->buf))
			alog_write(al);
		memcpy(al->buf + al->len, line, n);
		al->len += n;
		if (worker.cf->log_flush_ms == 0)
			alog_write(al);
	}
	/* The earlier servers' values are dead once ntries is 0. */
	memset(&c->rq->log, 0, offsetof(struct conn_log, tries));
}

/* Writes what is buffered and frees the buffers; at exit. */
void
access_log_close(void)
{
	access_log_flush();
	free(alogs);
	alogs = NULL;
	if (flush_ev != NULL)
		event_free(flush_ev);
	flush_ev = NULL;
}

/* What the line says beyond the request, set as the response is made. */

void
conn_log_upstream(struct conn *c, const char *addr, int status,
    int64_t connect_us, int64_t response_us)
{
	c->rq->log.upstream_addr = addr;
	c->rq->log.upstream_status = status;
	c->rq->log.upstream_connect_us = connect_us < 0 ? 0 : connect_us + 1;
	c->rq->log.upstream_response_us = response_us < 0 ? 0 : response_us + 1;
}

void
conn_log_upstream_next(struct conn *c)
{
	struct conn_log *l = &c->rq->log;

	if (l->upstream_addr != NULL && l->ntries < CONN_LOG_TRIES)
		l->tries[l->ntries++] = (struct log_try){ l->upstream_addr,
		    l->upstream_status, l->upstream_connect_us - 1,
		    l->upstream_response_us - 1 };
	l->upstream_addr = NULL;
	l->upstream_status = 0;
	l->upstream_connect_us = l->upstream_response_us = 0;
}

void
conn_log_cache(struct conn *c, const char *status)
{
	c->rq->log.cache_status = status;
}

const char *
conn_tls_protocol(const struct conn *c)
{
	/* Asked only by a log format that has it: not kept per connection. */
	return c->ssl != NULL && c->state != CS_HANDSHAKE ?
	    tls_version(c->ssl) : NULL;
}

static size_t
save_span(struct span *s, char *buf, size_t size, size_t used)
{
	size_t n = s->len < size - used ? s->len : size - used;

	if (s->p == NULL)
		return used;
	memcpy(buf + used, s->p, n);
	s->p = buf + used;
	s->len = n;
	return used + n;
}

void
conn_save_request(struct conn *c, char *buf, size_t size,
    struct http_header *hdrs)
{
	static const struct span names[] = {
		{ "Referer", sizeof("Referer") - 1 },
		{ "User-Agent", sizeof("User-Agent") - 1 },
	};
	struct http_request *r = &c->rq->req;
	struct span v;
	size_t used = 0, n = 0, i;

	for (i = 0; i < 2; i++) {
		v = http_header_getn(r, names[i].p, names[i].len);
		if (v.p == NULL)
			continue;
		hdrs[n].name = names[i];
		hdrs[n].value = v;
		n++;
	}
	used = save_span(&r->method_name, buf, size, used);
	used = save_span(&r->target, buf, size, used);
	used = save_span(&r->host, buf, size, used);
	for (i = 0; i < n; i++)
		used = save_span(&hdrs[i].value, buf, size, used);
	r->headers = hdrs;
	r->nheaders = n;
	memset(&r->path, 0, sizeof(r->path));
	memset(&r->query, 0, sizeof(r->query));
}

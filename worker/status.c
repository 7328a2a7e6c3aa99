/*
 * The status location and the per-response counting (see status.h).  The
 * views are built in full, then copied out: they are small, and a status
 * request is never on the hot path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "shm/stats.h"
#include "shm/store.h"
#include "worker/conn_impl.h"
#include "worker/status.h"

_Static_assert(STAT_method_purge - STAT_method_other == HTTP_M_PURGE,
    "the method counters follow enum http_method");

void
status_count(const struct conn *c, int status, uint64_t body_bytes)
{
	const struct http_request *r = &c->rq->req;
	unsigned cls = (unsigned)status / 100 - 1;
	unsigned m = r->method_name.p != NULL && r->method <= HTTP_M_PURGE ?
	    (unsigned)r->method : 0;
	uint64_t *srv;

	STATS_INC(requests);
	STATS_INC_AT(method_other, m);
	stats_hist_add(stats_me.req_time, worker.now_us > c->rq->req_start_us ?
	    worker.now_us - c->rq->req_start_us : 0);
	srv = stats_me.srv + worker.rt->server_row[c->srv] * STATS_NSERVER;
	srv[STAT_srv_requests]++;
	srv[STAT_srv_bytes_out] += body_bytes;
	if (cls < 5) {
		STATS_INC_AT(status_1xx, cls);
		srv[STAT_srv_1xx + cls]++;
	}
}

struct stats_peer_row *
status_peer(const struct config_upstream *u, const struct config_peer *p)
{
	static struct stats_peer_row nowhere;	/* a worker without rows */
	size_t ui = (size_t)(u - worker.cf->upstreams);

	if (stats_me.peer == NULL || worker.rt == NULL ||
	    worker.rt->peer_row == NULL)
		return &nowhere;
	return &stats_me.peer[worker.rt->peer_row[ui][p - u->peers]];
}

void
status_cache(struct conn *c, const char *state)
{
	static const struct {
		const char *state;
		enum stats_worker_id id;
	} ids[] = {
		{ "HIT", STAT_cache_hit }, { "MISS", STAT_cache_miss },
		{ "EXPIRED", STAT_cache_expired },
		{ "STALE", STAT_cache_stale },
		{ "UPDATING", STAT_cache_updating },
		{ "BYPASS", STAT_cache_bypass },
	};

	conn_log_cache(c, state);
	if (!STATS_ON)
		return;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (strcmp(ids[i].state, state) == 0) {
			stats_me.w[ids[i].id]++;
			return;
		}
}

void
sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	size_t size;
	char *p;
	int n;

	for (;;) {
		if (b->oom)
			return;
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL,
		    b->p ? b->size - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p != NULL && (size_t)n < b->size - b->len) {
			b->len += (size_t)n;
			return;
		}
		size = b->size ? b->size * 2 : 16384;
		while (size < b->len + (size_t)n + 1)
			size *= 2;
		if ((p = realloc(b->p, size)) == NULL) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->size = size;
	}
}

void
sb_json_strn(struct sbuf *b, const char *s, size_t n)
{
	for (; n > 0 && *s != '\0'; s++, n--) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			sb_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			sb_printf(b, "\\u%04x", ch);
		else
			sb_printf(b, "%c", ch);
	}
}

static bool
loopback(const char *peer)
{
	return strncmp(peer, "127.", 4) == 0 || strcmp(peer, "::1") == 0;
}

bool
status_purge_ok(const struct conn *c)
{
	static char token[STATS_TOKEN_LEN + 1];
	struct span v = http_header_get(&c->rq->req, "X-Corral-Purge");

	if (v.p == NULL || v.len != STATS_TOKEN_LEN || !loopback(c->peer))
		return false;
	if (token[0] == '\0')
		stats_purge_token(worker.rt->stats, token);
	unsigned char diff = 0;

	for (size_t i = 0; i < STATS_TOKEN_LEN; i++)	/* constant time */
		diff |= (unsigned char)(v.p[i] ^ token[i]);
	return diff == 0;
}

static bool
allowed(const struct conn *c, const struct config_location *l)
{
	for (size_t i = 0; i < l->nstatus_allow; i++)
		if (strcmp(l->status_allow[i], c->peer) == 0)
			return true;
	return false;
}

enum format { F_HTML, F_JSON, F_AUTO, F_PROM };

/* ?json, ?auto, ?prometheus (or format=...), or a path ending in
 * /metrics, as Prometheus expects by default. */
static enum format
pick_format(const struct http_request *r)
{
	static const struct {
		const char *word;
		enum format f;
	} words[] = {
		{ "json", F_JSON }, { "format=json", F_JSON },
		{ "auto", F_AUTO }, { "format=auto", F_AUTO },
		{ "prometheus", F_PROM }, { "format=prometheus", F_PROM },
		{ "html", F_HTML }, { "format=html", F_HTML },
	};
	struct span q = r->query;

	for (size_t i = 0; q.p != NULL && i < sizeof(words) / sizeof(*words);
	    i++)
		if (q.len == strlen(words[i].word) &&
		    strncasecmp(q.p, words[i].word, q.len) == 0)
			return words[i].f;
	if (r->path.len >= 8 &&
	    memcmp(r->path.p + r->path.len - 8, "/metrics", 8) == 0)
		return F_PROM;
	return F_HTML;
}

static void
send_view(struct conn *c, enum format f, const char *host)
{
	static const char *const types[] = {
		[F_HTML] = "text/html; charset=utf-8",
		[F_JSON] = "application/json",
		[F_AUTO] = "text/plain; charset=ISO-8859-1",
		[F_PROM] = "text/plain; version=0.0.4; charset=utf-8",
	};
	struct store_stats cache;
	struct stats_sum sum;
	struct status_view v;
	struct sbuf b = { 0 };

	if (stats_sum(worker.rt->stats, worker.now_ms, &sum) == -1) {
		resp_error(c, 500);
		return;
	}
	memset(&v, 0, sizeof(v));
	v.sum = &sum;
	v.host = host;
	v.now = worker.now;
	v.now_ms = worker.now_ms;
	if (worker.store != NULL) {
		store_stats(worker.store, &cache);
		v.cache = &cache;
	}
	if (f == F_JSON)
		status_json(&b, &v);
	else if (f == F_AUTO)
		status_auto(&b, &v);
	else
		status_prometheus(&b, &v);
	stats_sum_free(&sum);
	if (b.oom) {
		log_error("status page: out of memory");
		free(b.p);
		resp_error(c, 500);
		return;
	}
	resp_status(c, 200);
	resp_headerf(c, "Content-Type: %s", types[f]);
	resp_header(c, "Cache-Control: no-store\r\n", 25);
	resp_end_headers(c, (int64_t)b.len);
	if (!c->head)
		resp_body_copy(c, b.p, b.len);
	free(b.p);
	resp_done(c, 200, c->head ? 0 : b.len);
}

void
status_serve(struct conn *c, const struct config_location *l)
{
	const struct http_request *r = &c->rq->req;
	char host[256];
	enum format f;

	/* allow/deny, when the location has them, decided already
	 * (request_route()); status_allow is for one without. */
	if (l->nacl == 0 && !allowed(c, l)) {
		log_info("client %s: status page not allowed", c->peer);
		resp_error(c, 403);
		return;
	}
	if (r->method != HTTP_M_GET && r->method != HTTP_M_HEAD) {
		resp_error(c, 405);
		return;
	}
	f = pick_format(r);
	if (f == F_HTML) {
		resp_status(c, 200);
		resp_headerf(c, "Content-Type: text/html; charset=utf-8");
		resp_header(c, "Cache-Control: no-store\r\n", 25);
		resp_end_headers(c, (int64_t)status_html_len);
		if (!c->head)
			resp_body_mem(c, status_html, status_html_len, NULL);
		resp_done(c, 200, c->head ? 0 : status_html_len);
		return;
	}
	snprintf(host, sizeof(host), "%.*s", r->host.p ? (int)r->host.len : 0,
	    r->host.p ? r->host.p : "");
	send_view(c, f, host[0] ? host : worker.cf->servers[c->srv].names[0]);
}

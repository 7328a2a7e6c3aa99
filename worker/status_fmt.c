/*
 * The machine-readable status views: JSON (schema in corral.conf(5)),
 * Apache mod_status's ?auto lines, and the Prometheus text format 0.0.4.
 * Each expands the counter tables of shm/stats.h, so a counter added there
 * shows up in all three.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shm/stats.h"
#include "shm/store.h"
#include "worker/status.h"

#define IS_GAUGE_COUNTER	0
#define IS_GAUGE_GAUGE		1

static const struct wrow {
	const char *group, *key, *metric, *label, *help;
	int gauge;
} wrows[] = {
#define WROW(id, kind, group, key, metric, label, help) \
	{ group, key, metric, label, help, IS_GAUGE_##kind },
	STATS_WORKER(WROW)
#undef WROW
};

static const char *const srv_keys[] = {
#define SROW(id, key) key,
	STATS_SERVER(SROW)
#undef SROW
};

static const char *const peer_keys[] = {
#define PROW(id, kind, key) key,
	STATS_PEER(PROW)
#undef PROW
};

#define NWROWS		(sizeof(wrows) / sizeof(*wrows))

/* The store's counter i of shm/store_counters.h. */
static uint64_t
store_val(const struct store_stats *s, size_t i)
{
	uint64_t v;

	memcpy(&v, (const char *)s + store_counter_table[i].offset, sizeof(v));
	return v;
}

/* Connections reading a request: neither idle nor being answered. */
static uint64_t
reading(const struct stats_sum *s)
{
	uint64_t busy = s->w[STAT_conn_idle] + s->w[STAT_conn_writing];

	return s->w[STAT_conn_active] > busy ? s->w[STAT_conn_active] - busy :
	    0;
}

static double
hit_ratio(const struct status_view *v)
{
	uint64_t gets;

	if (v->cache == NULL || (gets = v->cache->gets) == 0)
		return 0;
	return (double)v->cache->hits / (double)gets;
}

/* JSON ----------------------------------------------------------------- */

static void
json_hist(struct sbuf *b, const char *name, const struct stats_hist *h)
{
	sb_printf(b, "\"%s\": {\"le_ms\": [", name);
	for (unsigned i = 0; i + 1 < STATS_NBUCKETS; i++)
		sb_printf(b, "%u, ", stats_bucket_ms(i));
	sb_printf(b, "null], \"counts\": [");
	for (unsigned i = 0; i < STATS_NBUCKETS; i++)
		sb_printf(b, "%s%" PRIu64, i ? ", " : "", h->bucket[i]);
	sb_printf(b, "], \"count\": %" PRIu64 ", \"sum_ms\": %.3f}",
	    stats_hist_count(h), (double)h->sum_us / 1000.0);
}

/* The store's own counters, kept whether or not the server counts. */
static void
json_store(struct sbuf *b, const struct status_view *v)
{
	if (v->cache == NULL) {
		sb_printf(b, "\"store\": null, \"hit_ratio\": null");
		return;
	}
	sb_printf(b, "\"store\": {");
	for (size_t i = 0; i < store_counter_count; i++)
		sb_printf(b, "%s\"%s\": %" PRIu64, i ? ", " : "",
		    store_counter_table[i].name, store_val(v->cache, i));
	sb_printf(b, "}, \"hit_ratio\": %.4f", hit_ratio(v));
}

/* What a group ends with besides its table rows. */
static void
json_group_end(struct sbuf *b, const char *group,
    const struct status_view *v)
{
	if (strcmp(group, "connections") == 0) {
		sb_printf(b, ", \"reading\": %" PRIu64, reading(v->sum));
	} else if (strcmp(group, "cache") == 0) {
		sb_printf(b, ", ");
		json_store(b, v);
	}
	sb_printf(b, "}");
}

/*
 * A build without counters: each group is null, not zeros, but for the
 * store's part of "cache".
 */
static void
json_uncounted(struct sbuf *b, const struct status_view *v)
{
	for (size_t i = 0; i < NWROWS; i++) {
		if (i > 0 && strcmp(wrows[i - 1].group, wrows[i].group) == 0)
			continue;
		sb_printf(b, ", \"%s\": ", wrows[i].group);
		if (strcmp(wrows[i].group, "cache") == 0) {
			sb_printf(b, "{");
			json_store(b, v);
			sb_printf(b, "}");
		} else {
			sb_printf(b, "null");
		}
	}
	sb_printf(b, ", \"worker_slots\": [");
	for (unsigned i = 0; i < v->sum->slots_used; i++)
		sb_printf(b, "%s{\"pid\": %d, \"requests\": null, "
		    "\"active\": null, \"accepted\": null}", i ? ", " : "",
		    (int)v->sum->worker[i].pid);
	sb_printf(b, "], \"request_time\": null, \"servers\": null, "
	    "\"upstreams\": null}\n");
}

static void
json_servers(struct sbuf *b, const struct stats_sum *s)
{
	sb_printf(b, "\"servers\": [");
	for (unsigned r = 0; r < s->nservers; r++) {
		sb_printf(b, "%s{\"name\": \"", r ? ", " : "");
		sb_json_str(b, s->server_name[r]);
		sb_printf(b, "\"");
		for (unsigned k = 0; k < STATS_NSERVER; k++)
			sb_printf(b, ", \"%s\": %" PRIu64, srv_keys[k],
			    s->srv[r * STATS_NSERVER + k]);
		sb_printf(b, "}");
	}
	sb_printf(b, "]");
}

static void
json_peers(struct sbuf *b, const struct stats_sum *s)
{
	const struct stats_peer_row *p;
	const char *slash;

	sb_printf(b, "\"upstreams\": [");
	for (unsigned r = 0; r < s->npeers; r++) {
		p = &s->peer[r];
		slash = strchr(s->peer_name[r], '/');
		sb_printf(b, "%s{\"upstream\": \"", r ? ", " : "");
		sb_json_strn(b, s->peer_name[r], slash != NULL ?
		    (size_t)(slash - s->peer_name[r]) : strlen(s->peer_name[r]));
		sb_printf(b, "\", \"peer\": \"");
		if (slash != NULL)
			sb_json_str(b, slash + 1);
		sb_printf(b, "\", \"state\": \"%s\"",
		    p->v[STAT_peer_down] ? "down" : "up");
		for (unsigned k = 0; k < STATS_NPEER; k++)
			sb_printf(b, ", \"%s\": %" PRIu64, peer_keys[k],
			    p->v[k]);
		sb_printf(b, ", ");
		json_hist(b, "connect_time", &p->connect);
		sb_printf(b, ", ");
		json_hist(b, "response_time", &p->response);
		sb_printf(b, "}");
	}
	sb_printf(b, "]");
}

void
status_json(struct sbuf *b, const struct status_view *v)
{
	const struct stats_sum *s = v->sum;
	const char *group = NULL;

	sb_printf(b, "{\"version\": 1, \"server\": \"corral/%s\", "
	    "\"host\": \"", PACKAGE_VERSION);
	sb_json_str(b, v->host);
	sb_printf(b, "\", \"time\": %" PRId64 ", \"time_ms\": %" PRIu64
	    ", \"started\": %" PRId64 ", \"uptime\": %" PRId64
	    ", \"master_pid\": %d, \"generation\": %u, \"workers\": %u"
	    ", \"worker_slots_used\": %u, \"reloads\": %" PRIu64
	    ", \"worker_restarts\": %" PRIu64, v->now, v->now_ms, s->started,
	    v->now - s->started, (int)s->master_pid, s->generation,
	    s->workers, s->slots_used, s->reloads, s->worker_restarts);
	sb_printf(b, ", \"counters\": %s", s->counters ? "true" : "false");
	if (!s->counters) {
		json_uncounted(b, v);
		return;
	}
	for (size_t i = 0; i < NWROWS; i++) {
		if (group == NULL || strcmp(group, wrows[i].group) != 0) {
			if (group != NULL)
				json_group_end(b, group, v);
			group = wrows[i].group;
			sb_printf(b, ", \"%s\": {", group);
		} else {
			sb_printf(b, ", ");
		}
		sb_printf(b, "\"%s\": %" PRIu64, wrows[i].key, s->w[i]);
	}
	json_group_end(b, group, v);
	/* Each live worker's slot: a slot's totals include those of the
	 * workers that had it before. */
	sb_printf(b, ", \"worker_slots\": [");
	for (unsigned i = 0; i < s->slots_used; i++)
		sb_printf(b, "%s{\"pid\": %d, \"requests\": %" PRIu64
		    ", \"active\": %" PRIu64 ", \"accepted\": %" PRIu64 "}",
		    i ? ", " : "", (int)s->worker[i].pid,
		    s->worker[i].requests, s->worker[i].active,
		    s->worker[i].accepted);
	sb_printf(b, "], ");
	json_hist(b, "request_time", &s->req_time);
	sb_printf(b, ", ");
	json_servers(b, s);
	sb_printf(b, ", ");
	json_peers(b, s);
	sb_printf(b, "}\n");
}

/* Apache's ?auto ----------------------------------------------------------- */

void
status_auto(struct sbuf *b, const struct status_view *v)
{
	const struct stats_sum *s = v->sum;
	uint64_t req = s->w[STAT_requests], out = s->w[STAT_bytes_out];
	int64_t up = v->now - s->started > 0 ? v->now - s->started : 1;
	double load[3] = { 0, 0, 0 };
	char now[64], start[64];
	time_t t;
	struct tm tm;

	t = (time_t)v->now;
	strftime(now, sizeof(now), "%A, %d-%b-%Y %H:%M:%S %Z",
	    localtime_r(&t, &tm));
	t = (time_t)s->started;
	strftime(start, sizeof(start), "%A, %d-%b-%Y %H:%M:%S %Z",
	    localtime_r(&t, &tm));
	if (getloadavg(load, 3) == -1)
		load[0] = load[1] = load[2] = 0;
	sb_printf(b, "%s\nServerVersion: corral/%s\nServerMPM: prefork\n"
	    "CurrentTime: %s\nRestartTime: %s\n"
	    "ParentServerConfigGeneration: %u\n"
	    "ParentServerMPMGeneration: %u\n"
	    "ServerUptimeSeconds: %" PRId64 "\nServerUptime: %" PRId64
	    " seconds\nLoad1: %.2f\nLoad5: %.2f\nLoad15: %.2f\n",
	    v->host, PACKAGE_VERSION, now, start, s->generation,
	    s->generation, up, up, load[0], load[1], load[2]);
	if (!s->counters) {
		/* No Total Accesses rather than a false 0. */
		sb_printf(b, "Counters: off\nProcesses: %u\n", s->slots_used);
		if (v->cache != NULL)
			sb_printf(b, "CacheHitRatio: %.4f\n", hit_ratio(v));
		return;
	}
	sb_printf(b, "Total Accesses: %" PRIu64 "\nTotal kBytes: %" PRIu64
	    "\nTotal Duration: %" PRIu64 "\nUptime: %" PRId64
	    "\nReqPerSec: %g\nBytesPerSec: %g\nBytesPerReq: %g\n"
	    "DurationPerReq: %g\n", req, out / 1024,
	    s->req_time.sum_us / 1000, up, (double)req / (double)up,
	    (double)out / (double)up, req ? (double)out / (double)req : 0.0,
	    req ? (double)s->req_time.sum_us / 1000.0 / (double)req : 0.0);
	sb_printf(b, "BusyWorkers: %u\nIdleWorkers: %u\nProcesses: %u\n"
	    "Stopping: %u\nConnsTotal: %" PRIu64 "\nConnsAsyncWriting: %"
	    PRIu64 "\nConnsAsyncKeepAlive: %" PRIu64 "\nConnsAsyncClosing: 0\n",
	    s->slots_busy, s->slots_used - s->slots_busy, s->slots_used,
	    s->slots_used > s->workers ? s->slots_used - s->workers : 0,
	    s->w[STAT_conn_active], s->w[STAT_conn_writing],
	    s->w[STAT_conn_idle]);
	sb_printf(b, "Scoreboard: ");
	for (unsigned i = 0; i < s->slots_used; i++)
		sb_printf(b, "%c", i < s->slots_busy ? 'W' : '_');
	sb_printf(b, "\n");
	if (v->cache != NULL)
		sb_printf(b, "CacheHitRatio: %.4f\n", hit_ratio(v));
}

/* Prometheus ---------------------------------------------------------------- */

/* A label value with the format's three escapes. */
static void
prom_label(struct sbuf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			sb_printf(b, "\\%c", *s);
		else if (*s == '\n')
			sb_printf(b, "\\n");
		else
			sb_printf(b, "%c", *s);
	}
}

static void
prom_head(struct sbuf *b, const char *name, const char *type,
    const char *help)
{
	sb_printf(b, "# HELP corral_%s %s\n# TYPE corral_%s %s\n", name, help,
	    name, type);
}

/* One histogram; labels is "" or "name=\"v\"," ready to go first. */
static void
prom_hist(struct sbuf *b, const char *name, const char *labels,
    const struct stats_hist *h)
{
	uint64_t cum = 0;

	for (unsigned i = 0; i < STATS_NBUCKETS; i++) {
		cum += h->bucket[i];
		if (i + 1 < STATS_NBUCKETS)
			sb_printf(b, "corral_%s_bucket{%sle=\"%g\"} %" PRIu64
			    "\n", name, labels, stats_bucket_ms(i) / 1000.0,
			    cum);
		else
			sb_printf(b, "corral_%s_bucket{%sle=\"+Inf\"} %" PRIu64
			    "\n", name, labels, cum);
	}
	if (*labels != '\0') {
		/* Drop the trailing comma inside the braces. */
		sb_printf(b, "corral_%s_sum{%.*s} %.6f\ncorral_%s_count{%.*s} %"
		    PRIu64 "\n", name, (int)strlen(labels) - 1, labels,
		    (double)h->sum_us / 1e6, name, (int)strlen(labels) - 1,
		    labels, cum);
	} else {
		sb_printf(b, "corral_%s_sum %.6f\ncorral_%s_count %" PRIu64
		    "\n", name, (double)h->sum_us / 1e6, name, cum);
	}
}

static void
prom_worker(struct sbuf *b, const struct stats_sum *s)
{
	const char *metric = NULL;

	for (size_t i = 0; i < NWROWS; i++) {
		const struct wrow *w = &wrows[i];
		bool seconds = strstr(w->metric, "_seconds") != NULL;

		if (metric == NULL || strcmp(metric, w->metric) != 0) {
			metric = w->metric;
			prom_head(b, metric, w->gauge ? "gauge" : "counter",
			    w->help);
		}
		sb_printf(b, "corral_%s%s%s%s ", metric, *w->label ? "{" : "",
		    w->label, *w->label ? "}" : "");
		if (seconds)	/* kept in µs */
			sb_printf(b, "%.6f\n", (double)s->w[i] / 1e6);
		else
			sb_printf(b, "%" PRIu64 "\n", s->w[i]);
		if (strcmp(metric, "connections_active") == 0) {
			prom_head(b, "connections_reading", "gauge",
			    "Connections reading a request.");
			sb_printf(b, "corral_connections_reading %" PRIu64
			    "\n", reading(s));
		}
	}
}

static void
prom_servers(struct sbuf *b, const struct stats_sum *s)
{
	static const char *const codes[] = { "1xx", "2xx", "3xx", "4xx",
	    "5xx" };

	prom_head(b, "server_responses_total", "counter",
	    "Responses by server block and status class.");
	for (unsigned r = 0; r < s->nservers; r++)
		for (unsigned k = 0; k < 5; k++) {
			sb_printf(b, "corral_server_responses_total{server=\"");
			prom_label(b, s->server_name[r]);
			sb_printf(b, "\",code=\"%s\"} %" PRIu64 "\n", codes[k],
			    s->srv[r * STATS_NSERVER + STAT_srv_1xx + k]);
		}
	prom_head(b, "server_body_sent_bytes_total", "counter",
	    "Response body bytes by server block.");
	for (unsigned r = 0; r < s->nservers; r++) {
		sb_printf(b, "corral_server_body_sent_bytes_total{server=\"");
		prom_label(b, s->server_name[r]);
		sb_printf(b, "\"} %" PRIu64 "\n",
		    s->srv[r * STATS_NSERVER + STAT_srv_bytes_out]);
	}
}

/* labels of peer r: upstream="app",peer="127.0.0.1:9000", */
static void
peer_labels(struct sbuf *b, const char *name)
{
	const char *slash = strchr(name, '/');

	sb_printf(b, "upstream=\"");
	if (slash == NULL) {
		prom_label(b, name);
		sb_printf(b, "\",");
		return;
	}
	sb_printf(b, "%.*s\",peer=\"", (int)(slash - name), name);
	prom_label(b, slash + 1);
	sb_printf(b, "\",");
}

static void
prom_peers(struct sbuf *b, const struct stats_sum *s)
{
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "upstream_requests_total", "counter",
		    "Requests sent to an upstream peer." },
		{ "upstream_failures_total", "counter",
		    "Failed attempts to reach an upstream peer." },
		{ "upstream_peer_up", "gauge",
		    "1 when no worker holds the peer down." },
	};
	struct sbuf lb = { 0 };
	uint64_t val;

	if (s->npeers == 0)
		return;
	for (unsigned k = 0; k < 3; k++) {
		prom_head(b, m[k].name, m[k].type, m[k].help);
		for (unsigned r = 0; r < s->npeers; r++) {
			lb.len = 0;
			peer_labels(&lb, s->peer_name[r]);
			val = k == 0 ? s->peer[r].v[STAT_peer_requests] :
			    k == 1 ? s->peer[r].v[STAT_peer_failures] :
			    s->peer[r].v[STAT_peer_down] == 0;
			sb_printf(b, "corral_%s{%.*s} %" PRIu64 "\n",
			    m[k].name, lb.oom ? 0 : (int)lb.len - 1,
			    lb.p ? lb.p : "", val);
		}
	}
	for (unsigned k = 0; k < 2; k++) {
		const char *name = k ? "upstream_response_duration_seconds" :
		    "upstream_connect_duration_seconds";

		prom_head(b, name, "histogram", k ?
		    "Time from sending a request to its response header." :
		    "Time to connect to an upstream peer.");
		for (unsigned r = 0; r < s->npeers; r++) {
			lb.len = 0;
			peer_labels(&lb, s->peer_name[r]);
			if (lb.oom)
				break;
			prom_hist(b, name, lb.p, k ? &s->peer[r].response :
			    &s->peer[r].connect);
		}
	}
	b->oom |= lb.oom;
	free(lb.p);
}

void
status_prometheus(struct sbuf *b, const struct status_view *v)
{
	const struct stats_sum *s = v->sum;

	prom_head(b, "build_info", "gauge", "The running version.");
	sb_printf(b, "corral_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);
	prom_head(b, "start_time_seconds", "gauge",
	    "When the master started, in Unix time.");
	sb_printf(b, "corral_start_time_seconds %" PRId64 "\n", s->started);
	prom_head(b, "generation", "gauge",
	    "Configuration generation: 1, plus one per reload.");
	sb_printf(b, "corral_generation %u\n", s->generation);
	prom_head(b, "workers", "gauge", "Worker processes configured.");
	sb_printf(b, "corral_workers %u\n", s->workers);
	prom_head(b, "reloads_total", "counter", "Configuration reloads.");
	sb_printf(b, "corral_reloads_total %" PRIu64 "\n", s->reloads);
	prom_head(b, "worker_restarts_total", "counter",
	    "Workers that died and were started again.");
	sb_printf(b, "corral_worker_restarts_total %" PRIu64 "\n",
	    s->worker_restarts);
	prom_head(b, "counters_enabled", "gauge", "1 when the request "
	    "counters are built in; 0 in a build with --disable-counters, "
	    "which has none of them.");
	sb_printf(b, "corral_counters_enabled %d\n", s->counters);
	if (s->counters) {
		prom_worker(b, s);
		prom_head(b, "http_request_duration_seconds", "histogram",
		    "Time from a request's first byte to its response.");
		prom_hist(b, "http_request_duration_seconds", "",
		    &s->req_time);
		prom_servers(b, s);
		prom_peers(b, s);
	}
	if (v->cache == NULL)
		return;
	for (size_t i = 0; i < store_counter_count; i++) {
		const struct store_counter_info *ci = &store_counter_table[i];
		bool gauge = strcmp(ci->kind, "gauge") == 0;
		const char *sname = ci->name;
		char name[64];

		/* Units last, as Prometheus names go: bytes_used is
		 * used_bytes; bytes_total is a size, not a counter. */
		if (strcmp(sname, "bytes_used") == 0)
			sname = "used_bytes";
		else if (strcmp(sname, "bytes_total") == 0)
			sname = "capacity_bytes";
		snprintf(name, sizeof(name), "store_%s%s", sname,
		    gauge ? "" : "_total");
		prom_head(b, name, gauge ? "gauge" : "counter", ci->help);
		sb_printf(b, "corral_%s %" PRIu64 "\n", name,
		    store_val(v->cache, i));
	}
	prom_head(b, "store_hit_ratio", "gauge",
	    "Store hits over gets since the start.");
	sb_printf(b, "corral_store_hit_ratio %.4f\n", hit_ratio(v));
}

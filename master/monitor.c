/*
 * corral -s and -T: the counters read from outside the server, straight
 * from the stats file (and the cache file), like varnishstat.  Works
 * whether the server runs or not: a stopped server's file keeps its last
 * numbers until the next start.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "master/config.h"
#include "master/master.h"
#include "shm/stats.h"
#include "shm/store.h"
#include "worker/status.h"

/* Everything one look at the files gives. */
struct snap {
	struct stats_sum sum;
	struct store_stats cache;
	bool have_sum, have_cache;
	uint64_t at_ms;
};

static uint64_t
wall_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static int
take(const struct config *cf, struct stats *st, struct snap *s)
{
	char err[512];

	memset(s, 0, sizeof(*s));
	s->at_ms = wall_ms();
	if (st != NULL) {
		if (stats_sum(st, s->at_ms, &s->sum) == -1) {
			fprintf(stderr, "corral: out of memory\n");
			return -1;
		}
		s->have_sum = true;
	}
	if (cf->cache.size > 0 && cf->cache.path != NULL) {
		if (store_stats_read_file(cf->cache.path, &s->cache, err,
		    sizeof(err)) == -1) {
			fprintf(stderr, "corral: %s: %s\n", cf->cache.path,
			    err);
			if (!s->have_sum)
				return -1;
		} else {
			s->have_cache = true;
		}
	} else if (st != NULL && stats_cache(st, &s->cache)) {
		/* The master's copy, a second old at most: an anonymous
		 * cache cannot be read from outside. */
		s->have_cache = true;
	}
	return 0;
}

static void
drop(struct snap *s)
{
	if (s->have_sum)
		stats_sum_free(&s->sum);
}

/* Opens the stats file, or says why there is nothing to read. */
static int
open_files(const struct config *cf, struct stats **st)
{
	char err[512];

	*st = NULL;
	if (cf->stats_file != NULL) {
		*st = stats_open_file(cf->stats_file, err, sizeof(err));
		if (*st == NULL) {
			fprintf(stderr, "corral: %s: %s\n", cf->stats_file,
			    err);
			return -1;
		}
		return 0;
	}
	if (cf->cache.size > 0 && cf->cache.path != NULL)
		return 0;
	fprintf(stderr, "corral: %s: neither stats_file (or pid_file) nor "
	    "cache.path is set; the counters cannot be read from outside\n",
	    cf->file);
	return -1;
}

/* The cache's counters as they always were: "name value" or flat JSON. */
static void
print_cache(const struct store_stats *st, bool json)
{
	size_t n = store_counter_count;

	for (size_t i = 0; i < n; i++) {
		const struct store_counter_info *ci = &store_counter_table[i];
		uint64_t v;

		memcpy(&v, (const char *)st + ci->offset, sizeof(v));
		if (json)
			printf("%s\"%s\": %" PRIu64 "%s", i == 0 ? "{" : "",
			    ci->name, v, i + 1 == n ? "}\n" : ", ");
		else
			printf("%s %" PRIu64 "\n", ci->name, v);
	}
}

/* What the status formats show, from one look at the files. */
static void
view_of(const struct snap *s, struct status_view *v)
{
	memset(v, 0, sizeof(*v));
	v->sum = &s->sum;
	v->cache = s->have_cache ? &s->cache : NULL;
	v->host = "";
	v->now = (int64_t)(s->at_ms / 1000);
	v->now_ms = s->at_ms;
}

/* "name value" lines: the Prometheus exposition without its comments. */
static void
print_lines(const struct snap *s)
{
	struct status_view v;
	struct sbuf b = { 0 };

	view_of(s, &v);
	status_prometheus(&b, &v);
	if (b.oom) {
		fprintf(stderr, "corral: out of memory\n");
		free(b.p);
		return;
	}
	for (char *line = b.p, *end; line < b.p + b.len; line = end + 1) {
		end = memchr(line, '\n', (size_t)(b.p + b.len - line));
		if (end == NULL)
			end = b.p + b.len;
		if (*line != '#')
			printf("%.*s\n", (int)(end - line), line);
	}
	free(b.p);
}

static void
print_json(const struct snap *s)
{
	struct status_view v;
	struct sbuf b = { 0 };

	view_of(s, &v);
	status_json(&b, &v);
	if (!b.oom)
		fwrite(b.p, 1, b.len, stdout);
	free(b.p);
}

int
monitor_stats(const struct config *cf, bool json)
{
	struct stats *st;
	struct snap s;

	if (open_files(cf, &st) == -1 || take(cf, st, &s) == -1) {
		stats_destroy(st);
		return 1;
	}
	if (!s.have_sum)
		print_cache(&s.cache, json);	/* no stats file: as before */
	else if (json)
		print_json(&s);
	else
		print_lines(&s);
	drop(&s);
	stats_destroy(st);
	return 0;
}

/* Summary ------------------------------------------------------------- */

static const char *
human(char *buf, size_t len, double v, const char *unit)
{
	static const char *const pre[] = { "", "k", "M", "G", "T" };
	unsigned i = 0;

	while (v >= 1000 && i < 4) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s%s" : "%.0f %s%s", v, pre[i], unit);
	return buf;
}

/* The smallest bucket bound under which q of the observations fall. */
static const char *
quantile(char *buf, size_t len, const struct stats_hist *h, double q)
{
	uint64_t n = stats_hist_count(h), seen = 0;

	if (n == 0)
		return "-";
	for (unsigned i = 0; i < STATS_NBUCKETS; i++) {
		seen += h->bucket[i];
		if ((double)seen >= q * (double)n) {
			if (stats_bucket_ms(i) == 0)
				snprintf(buf, len, ">%u ms",
				    stats_bucket_ms(i - 1));
			else
				snprintf(buf, len, "<=%u ms",
				    stats_bucket_ms(i));
			return buf;
		}
	}
	return "-";
}

static void
print_store_line(const struct snap *s)
{
	char a[32], b[32];

	if (s->have_cache)
		printf("cache        hit ratio %.1f%%  items %" PRIu64
		    "  used %s of %s  evictions %" PRIu64 "\n",
		    s->cache.gets ? 100.0 * (double)s->cache.hits /
		    (double)s->cache.gets : 0.0, s->cache.items,
		    human(a, sizeof(a), (double)s->cache.bytes_used, "B"),
		    human(b, sizeof(b), (double)s->cache.bytes_total, "B"),
		    s->cache.evictions);
}

/* Rates are over the interval since old, or since the start without one. */
static void
summary(const struct snap *s, const struct snap *old)
{
	const struct stats_sum *u = &s->sum;
	const uint64_t *w = u->w;
	double secs, req, in, out;
	char a[32], b[32], c[32], d[32];
	int64_t up = (int64_t)(s->at_ms / 1000) - u->started;
	uint64_t busy;

	if (old != NULL) {
		secs = (double)(s->at_ms - old->at_ms) / 1000.0;
		req = (double)(w[STAT_requests] - old->sum.w[STAT_requests]);
		in = (double)(w[STAT_bytes_in] - old->sum.w[STAT_bytes_in]);
		out = (double)(w[STAT_bytes_out] - old->sum.w[STAT_bytes_out]);
	} else {
		secs = (double)(up > 0 ? up : 1);
		req = (double)w[STAT_requests];
		in = (double)w[STAT_bytes_in];
		out = (double)w[STAT_bytes_out];
	}
	if (secs <= 0)
		secs = 1;
	busy = w[STAT_conn_idle] + w[STAT_conn_writing];
	printf("corral/%s  master %d  up %" PRId64 "d %02" PRId64 ":%02" PRId64
	    ":%02" PRId64 "  generation %u  workers %u/%u  reloads %" PRIu64
	    "  worker restarts %" PRIu64 "\n", PACKAGE_VERSION,
	    (int)u->master_pid, up / 86400, up % 86400 / 3600, up % 3600 / 60,
	    up % 60, u->generation, u->slots_used, u->workers, u->reloads,
	    u->worker_restarts);
	if (!u->counters) {
		printf("counters     off (this corral was built with "
		    "--disable-counters)\n");
		print_store_line(s);
		return;
	}
	printf("requests     %" PRIu64 " total, %.1f/s%s   1xx %" PRIu64
	    "  2xx %" PRIu64 "  3xx %" PRIu64 "  4xx %" PRIu64 "  5xx %"
	    PRIu64 "\n", w[STAT_requests], req / secs, old ? "" :
	    " since start", w[STAT_status_1xx], w[STAT_status_2xx],
	    w[STAT_status_3xx], w[STAT_status_4xx], w[STAT_status_5xx]);
	printf("connections  active %" PRIu64 "  reading %" PRIu64
	    "  writing %" PRIu64 "  idle %" PRIu64 "  accepted %" PRIu64
	    "  timed out %" PRIu64 "\n", w[STAT_conn_active],
	    w[STAT_conn_active] > busy ? w[STAT_conn_active] - busy : 0,
	    w[STAT_conn_writing], w[STAT_conn_idle], w[STAT_conn_accepted],
	    w[STAT_conn_timeouts]);
	printf("traffic      in %s (%s/s)  out %s (%s/s)\n",
	    human(a, sizeof(a), (double)w[STAT_bytes_in], "B"),
	    human(b, sizeof(b), in / secs, "B"),
	    human(c, sizeof(c), (double)w[STAT_bytes_out], "B"),
	    human(d, sizeof(d), out / secs, "B"));
	printf("request time avg %.2f ms  p50 %s  p99 %s\n",
	    stats_hist_count(&u->req_time) ? (double)u->req_time.sum_us /
	    1000.0 / (double)stats_hist_count(&u->req_time) : 0.0,
	    quantile(a, sizeof(a), &u->req_time, 0.5),
	    quantile(b, sizeof(b), &u->req_time, 0.99));
	print_store_line(s);
	if (w[STAT_cache_hit] + w[STAT_cache_miss] + w[STAT_cache_expired] +
	    w[STAT_cache_stale] + w[STAT_cache_updating] +
	    w[STAT_cache_bypass] + w[STAT_stampede_waits] > 0)
		printf("proxy cache  hit %" PRIu64 "  miss %" PRIu64
		    "  expired %" PRIu64 "  stale %" PRIu64 "  updating %"
		    PRIu64 "  bypass %" PRIu64 "  stampede waits %" PRIu64
		    " (%.3f s)\n", w[STAT_cache_hit], w[STAT_cache_miss],
		    w[STAT_cache_expired], w[STAT_cache_stale],
		    w[STAT_cache_updating], w[STAT_cache_bypass],
		    w[STAT_stampede_waits],
		    (double)w[STAT_stampede_wait_us] / 1e6);
	printf("\n%-32s %10s %8s %8s %8s\n", "server", "requests", "4xx",
	    "5xx", "sent");
	for (unsigned r = 0; r < u->nservers; r++) {
		const uint64_t *v = u->srv + r * STATS_NSERVER;

		printf("%-32.32s %10" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8s\n",
		    u->server_name[r], v[STAT_srv_requests], v[STAT_srv_4xx],
		    v[STAT_srv_5xx], human(a, sizeof(a),
		    (double)v[STAT_srv_bytes_out], "B"));
	}
	if (u->npeers == 0)
		return;
	printf("\n%-32s %5s %10s %8s %10s\n", "upstream peer", "state",
	    "requests", "failures", "avg ms");
	for (unsigned r = 0; r < u->npeers; r++) {
		const struct stats_peer_row *p = &u->peer[r];
		uint64_t n = stats_hist_count(&p->response);

		printf("%-32.32s %5s %10" PRIu64 " %8" PRIu64 " %10.1f\n",
		    u->peer_name[r], p->v[STAT_peer_down] ? "down" : "up",
		    p->v[STAT_peer_requests], p->v[STAT_peer_failures],
		    n ? (double)p->response.sum_us / 1000.0 / (double)n : 0.0);
	}
}

int
monitor_summary(const struct config *cf, int interval, int count)
{
	struct snap s, old;
	struct stats *st;
	bool tty = isatty(STDOUT_FILENO);
	bool have_old = false;

	if (cf->stats_file == NULL) {
		fprintf(stderr, "corral: %s: no stats_file (or pid_file): the "
		    "counters cannot be read from outside\n", cf->file);
		return 1;
	}
	if (open_files(cf, &st) == -1)
		return 1;
	for (int i = 0; count == 0 || i < count; i++) {
		if (take(cf, st, &s) == -1)
			break;
		if (tty && interval > 0)
			printf("\033[H\033[2J");
		summary(&s, have_old ? &old : NULL);
		fflush(stdout);
		if (have_old)
			drop(&old);
		old = s;
		have_old = true;
		if (interval <= 0 || (count != 0 && i + 1 == count))
			break;
		sleep((unsigned)interval);
		if (interval > 0 && !tty)
			printf("\n");
	}
	if (have_old)
		drop(&old);
	stats_destroy(st);
	return 0;
}

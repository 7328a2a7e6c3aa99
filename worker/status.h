/*
 * The status views of a location with "status = on": an HTML page with
 * live charts, ?json, ?auto (Apache mod_status) and Prometheus text, all
 * read from the counters in shared memory (shm/stats.h).  Also the
 * per-response counting that feeds them.  Internal to worker/.
 */
#ifndef CORRAL_STATUS_H
#define CORRAL_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct conn;
struct config_location;
struct config_peer;
struct config_upstream;
struct stats_peer_row;
struct stats_sum;
struct store_stats;

/* The counters' row of peer p of upstream u (both of worker.cf). */
struct stats_peer_row *status_peer(const struct config_upstream *u,
    const struct config_peer *p);
#define STATS_PEER_INC(u, p, id)	STATS_ROW_INC(status_peer((u), (p)), id)

/*
 * The cache answered c, or fetched for it, with X-Cache state (HIT, MISS,
 * EXPIRED, STALE, UPDATING or BYPASS, a static string): counted, and
 * logged as $upstream_cache_status.
 */
void status_cache(struct conn *c, const char *state);

/* Counts a response once it is queued (from resp_done()). */
void status_count(const struct conn *c, int status, uint64_t body_bytes);

/*
 * True when the request carries the server's purge token (the header
 * X-Corral-Purge, sent by corral -P) from a loopback address: it may
 * PURGE without purge_allow.
 */
bool status_purge_ok(const struct conn *c);

/* Answers the current request of c, under status location l. */
void status_serve(struct conn *c, const struct config_location *l);

/* A growable text buffer; oom is set when memory ran out. */
struct sbuf {
	char *p;
	size_t len, size;
	bool oom;
};

void sb_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* n bytes of s with JSON's escapes (quote marks are the caller's). */
void sb_json_strn(struct sbuf *b, const char *s, size_t n);
#define sb_json_str(b, s)	sb_json_strn((b), (s), strlen(s))

/* What the formats show: the counters summed, and the store's. */
struct status_view {
	const struct stats_sum *sum;
	const struct store_stats *cache;	/* NULL without a cache */
	const char *host;			/* the name asked for */
	int64_t now;				/* Unix time */
	uint64_t now_ms;
};

void status_json(struct sbuf *b, const struct status_view *v);
void status_auto(struct sbuf *b, const struct status_view *v);
void status_prometheus(struct sbuf *b, const struct status_view *v);

/* The HTML page (worker/status.html, embedded at build time). */
extern const char status_html[];
extern const size_t status_html_len;

#endif

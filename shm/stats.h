/*
 * The server's counters, in a shared mapping of their own that the master
 * makes before it forks (whether or not the cache is on).  Every worker
 * owns one slot and bumps its counters there with plain stores: no lock,
 * no atomic instruction, no line shared with another writer.  Readers (the
 * status page, corral -s) add up every slot.
 *
 * A slot outlives its worker: when one dies, the master zeroes the slot's
 * gauges and hands the slot, with its totals, to the next worker it
 * starts, so totals only ever grow.  A reload keeps the mapping; only a
 * restart (a new master) starts from zero.
 *
 * Server blocks and upstream peers get a row each, by name, assigned by
 * the master in the order it first sees them and kept across reloads, so
 * a server's totals follow its name.  Rows past the capacity share the
 * last one, "(other)".
 *
 * With a path the mapping is a file, so that corral -s and corralctl can
 * read it from outside, like varnishstat.
 */
#ifndef CORRAL_STATS_H
#define CORRAL_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * ./configure --disable-counters builds with CORRAL_COUNTERS 0: the
 * increments below compile to nothing (they are still type-checked), the
 * mapping says so, and every view reports the counters as off instead of
 * showing zeros.  It exists to measure what counting costs (bench/run
 * counters); the master's own numbers (reloads, worker restarts) and the
 * store's counters are kept either way.
 */
#ifndef CORRAL_COUNTERS
#define CORRAL_COUNTERS	1
#endif
#define STATS_ON	(CORRAL_COUNTERS != 0)

/*
 * The counters a worker keeps, written once here; the status formats,
 * corral -s and the documentation expand them.
 *   X(id, kind, group, key, metric, label, help)
 * kind is COUNTER (only grows) or GAUGE (goes up and down; zeroed with a
 * dead worker's slot).  group and key place the value in the JSON view;
 * metric and label (a Prometheus label pair or "") in the Prometheus one.
 * Entries of one metric name are consecutive.
 */
#define STATS_WORKER(X) \
	X(conn_accepted, COUNTER, "connections", "accepted", \
	    "connections_accepted_total", "", \
	    "Client connections accepted.") \
	X(conn_active, GAUGE, "connections", "active", \
	    "connections_active", "", \
	    "Client connections open now.") \
	X(conn_writing, GAUGE, "connections", "writing", \
	    "connections_writing", "", \
	    "Connections with a request being answered.") \
	X(conn_idle, GAUGE, "connections", "idle", \
	    "connections_idle", "", \
	    "Keep-alive connections waiting for the next request.") \
	X(conn_timeouts, COUNTER, "connections", "timeouts", \
	    "connections_timed_out_total", "", \
	    "Connections closed because the client was too slow.") \
	X(requests, COUNTER, "requests", "total", \
	    "http_requests_total", "", \
	    "Requests answered.") \
	X(status_1xx, COUNTER, "responses", "1xx", \
	    "http_responses_total", "code=\"1xx\"", \
	    "Responses by status class.") \
	X(status_2xx, COUNTER, "responses", "2xx", \
	    "http_responses_total", "code=\"2xx\"", "") \
	X(status_3xx, COUNTER, "responses", "3xx", \
	    "http_responses_total", "code=\"3xx\"", "") \
	X(status_4xx, COUNTER, "responses", "4xx", \
	    "http_responses_total", "code=\"4xx\"", "") \
	X(status_5xx, COUNTER, "responses", "5xx", \
	    "http_responses_total", "code=\"5xx\"", "") \
	X(method_other, COUNTER, "methods", "other", \
	    "http_requests_by_method_total", "method=\"other\"", \
	    "Requests by method.") \
	X(method_get, COUNTER, "methods", "GET", \
	    "http_requests_by_method_total", "method=\"GET\"", "") \
	X(method_head, COUNTER, "methods", "HEAD", \
	    "http_requests_by_method_total", "method=\"HEAD\"", "") \
	X(method_post, COUNTER, "methods", "POST", \
	    "http_requests_by_method_total", "method=\"POST\"", "") \
	X(method_put, COUNTER, "methods", "PUT", \
	    "http_requests_by_method_total", "method=\"PUT\"", "") \
	X(method_delete, COUNTER, "methods", "DELETE", \
	    "http_requests_by_method_total", "method=\"DELETE\"", "") \
	X(method_connect, COUNTER, "methods", "CONNECT", \
	    "http_requests_by_method_total", "method=\"CONNECT\"", "") \
	X(method_options, COUNTER, "methods", "OPTIONS", \
	    "http_requests_by_method_total", "method=\"OPTIONS\"", "") \
	X(method_trace, COUNTER, "methods", "TRACE", \
	    "http_requests_by_method_total", "method=\"TRACE\"", "") \
	X(method_patch, COUNTER, "methods", "PATCH", \
	    "http_requests_by_method_total", "method=\"PATCH\"", "") \
	X(method_purge, COUNTER, "methods", "PURGE", \
	    "http_requests_by_method_total", "method=\"PURGE\"", "") \
	X(bytes_in, COUNTER, "bytes", "in", \
	    "received_bytes_total", "", \
	    "Bytes read from clients.") \
	X(bytes_out, COUNTER, "bytes", "out", \
	    "sent_bytes_total", "", \
	    "Bytes written to clients, headers included.") \
	X(cache_hit, COUNTER, "cache", "hit", \
	    "cache_responses_total", "status=\"hit\"", \
	    "Responses of locations with cache on, by X-Cache.") \
	X(cache_miss, COUNTER, "cache", "miss", \
	    "cache_responses_total", "status=\"miss\"", "") \
	X(cache_expired, COUNTER, "cache", "expired", \
	    "cache_responses_total", "status=\"expired\"", "") \
	X(cache_stale, COUNTER, "cache", "stale", \
	    "cache_responses_total", "status=\"stale\"", "") \
	X(cache_updating, COUNTER, "cache", "updating", \
	    "cache_responses_total", "status=\"updating\"", "") \
	X(cache_bypass, COUNTER, "cache", "bypass", \
	    "cache_responses_total", "status=\"bypass\"", "") \
	X(stampede_waits, COUNTER, "cache", "stampede_waits", \
	    "cache_stampede_waits_total", "", \
	    "Requests that waited for another to fill the cache.") \
	X(stampede_wait_us, COUNTER, "cache", "stampede_wait_us", \
	    "cache_stampede_wait_seconds_total", "", \
	    "Time requests spent waiting for another to fill the cache.") \
	X(tls_full, COUNTER, "tls", "handshakes_full", \
	    "tls_handshakes_total", "type=\"full\"", \
	    "TLS handshakes by outcome.") \
	X(tls_resumed, COUNTER, "tls", "handshakes_resumed", \
	    "tls_handshakes_total", "type=\"resumed\"", "") \
	X(tls_failed, COUNTER, "tls", "handshakes_failed", \
	    "tls_handshakes_total", "type=\"failed\"", "") \
	X(tls_buffers_kept, GAUGE, "tls", "idle_buffers_kept", \
	    "tls_idle_buffers_kept", "", \
	    "Idle TLS connections that keep their buffers for the next " \
	    "request.") \
	X(mc_conn_accepted, COUNTER, "memcached", "connections_accepted", \
	    "memcached_connections_accepted_total", "", \
	    "Connections the memcached listener accepted.") \
	X(mc_conn_active, GAUGE, "memcached", "connections_active", \
	    "memcached_connections_active", "", \
	    "memcached connections open now.") \
	X(mc_cmd_get, COUNTER, "memcached", "cmd_get", \
	    "memcached_get_total", "", \
	    "memcached keys looked up (get, gets, gat, gats, mg).") \
	X(mc_get_hits, COUNTER, "memcached", "get_hits", \
	    "memcached_get_hits_total", "", \
	    "memcached lookups that found the key.") \
	X(mc_get_misses, COUNTER, "memcached", "get_misses", \
	    "memcached_get_misses_total", "", \
	    "memcached lookups that did not.") \
	X(mc_cmd_set, COUNTER, "memcached", "cmd_set", \
	    "memcached_set_total", "", \
	    "memcached storage commands (set, add, replace, append, " \
	    "prepend, cas, ms).") \
	X(mc_cmd_touch, COUNTER, "memcached", "cmd_touch", \
	    "memcached_touch_total", "", \
	    "memcached touch and gat commands.") \
	X(mc_cmd_flush, COUNTER, "memcached", "cmd_flush", \
	    "memcached_flush_total", "", \
	    "memcached flush_all commands carried out.") \
	X(mc_cmd_meta, COUNTER, "memcached", "cmd_meta", \
	    "memcached_meta_total", "", \
	    "memcached meta commands.") \
	X(mc_delete_hits, COUNTER, "memcached", "delete_hits", \
	    "memcached_delete_hits_total", "", \
	    "memcached deletes of a key that was there.") \
	X(mc_delete_misses, COUNTER, "memcached", "delete_misses", \
	    "memcached_delete_misses_total", "", \
	    "memcached deletes of a key that was not.") \
	X(mc_incr_hits, COUNTER, "memcached", "incr_hits", \
	    "memcached_incr_hits_total", "", \
	    "memcached incr of a key that was there.") \
	X(mc_incr_misses, COUNTER, "memcached", "incr_misses", \
	    "memcached_incr_misses_total", "", \
	    "memcached incr of a key that was not.") \
	X(mc_decr_hits, COUNTER, "memcached", "decr_hits", \
	    "memcached_decr_hits_total", "", \
	    "memcached decr of a key that was there.") \
	X(mc_decr_misses, COUNTER, "memcached", "decr_misses", \
	    "memcached_decr_misses_total", "", \
	    "memcached decr of a key that was not.") \
	X(mc_cas_hits, COUNTER, "memcached", "cas_hits", \
	    "memcached_cas_hits_total", "", \
	    "memcached cas that stored.") \
	X(mc_cas_misses, COUNTER, "memcached", "cas_misses", \
	    "memcached_cas_misses_total", "", \
	    "memcached cas of a key that was not there.") \
	X(mc_cas_badval, COUNTER, "memcached", "cas_badval", \
	    "memcached_cas_badval_total", "", \
	    "memcached cas whose version did not match.") \
	X(mc_touch_hits, COUNTER, "memcached", "touch_hits", \
	    "memcached_touch_hits_total", "", \
	    "memcached touch of a key that was there.") \
	X(mc_touch_misses, COUNTER, "memcached", "touch_misses", \
	    "memcached_touch_misses_total", "", \
	    "memcached touch of a key that was not.") \
	X(mc_too_large, COUNTER, "memcached", "store_too_large", \
	    "memcached_store_too_large_total", "", \
	    "memcached values refused for their size.") \
	X(mc_no_memory, COUNTER, "memcached", "store_no_memory", \
	    "memcached_store_no_memory_total", "", \
	    "memcached values refused: no room in the store.") \
	X(mc_errors, COUNTER, "memcached", "client_errors", \
	    "memcached_client_errors_total", "", \
	    "memcached command lines answered with an error.") \
	X(mc_bytes_read, COUNTER, "memcached", "bytes_read", \
	    "memcached_read_bytes_total", "", \
	    "Bytes read by the memcached listener.") \
	X(mc_bytes_written, COUNTER, "memcached", "bytes_written", \
	    "memcached_written_bytes_total", "", \
	    "Bytes written by the memcached listener.")

/* Per server block: X(id, key). */
#define STATS_SERVER(X) \
	X(srv_requests, "requests") \
	X(srv_1xx, "1xx") \
	X(srv_2xx, "2xx") \
	X(srv_3xx, "3xx") \
	X(srv_4xx, "4xx") \
	X(srv_5xx, "5xx") \
	X(srv_bytes_out, "body_bytes_out")

/* Per upstream peer: X(id, kind, key). */
#define STATS_PEER(X) \
	X(peer_requests, COUNTER, "requests") \
	X(peer_failures, COUNTER, "failures") \
	X(peer_down, GAUGE, "down_workers")
/*
 * peer_down is special: a worker writes the Unix time in ms until which
 * it keeps the peer down, and the sum counts the workers for which that
 * is still ahead.
 */

/* Upper bounds of the time histograms' buckets, in milliseconds. */
#define STATS_BUCKETS(X) \
	X(1) X(5) X(10) X(25) X(50) X(100) X(250) X(500) \
	X(1000) X(2500) X(5000) X(10000)

#define STATS_X_ENUM(id, ...) STAT_##id,
enum stats_worker_id { STATS_WORKER(STATS_X_ENUM) STATS_NWORKER };
enum stats_server_id { STATS_SERVER(STATS_X_ENUM) STATS_NSERVER };
enum stats_peer_id { STATS_PEER(STATS_X_ENUM) STATS_NPEER };
#define STATS_X_ONE(ms) + 1
#define STATS_NBUCKETS	(0 STATS_BUCKETS(STATS_X_ONE) + 1)	/* +Inf */
#undef STATS_X_ENUM

/* A time histogram: counts per bucket (not cumulative), the sum in µs. */
struct stats_hist {
	uint64_t bucket[STATS_NBUCKETS];
	uint64_t sum_us;
};

/* One row of an upstream peer. */
struct stats_peer_row {
	uint64_t v[STATS_NPEER];
	struct stats_hist connect;	/* connect to the peer */
	struct stats_hist response;	/* request sent to response header */
};

/* What a worker writes: its part of a slot. */
struct stats_mine {
	uint64_t *w;			/* STATS_NWORKER counters */
	struct stats_hist *req_time;	/* request received to response */
	uint64_t *srv;			/* [row * STATS_NSERVER + id] */
	struct stats_peer_row *peer;	/* [row] */
};

struct stats;

/* Sizes of a mapping; the master derives them from the config. */
struct stats_options {
	const char *path;		/* file, or NULL: anonymous */
	unsigned slots;			/* workers alive at once, at most */
	unsigned server_rows;		/* including "(other)" */
	unsigned peer_rows;
};

/* Master, before fork: makes the mapping (a file is recreated empty). */
struct stats *stats_create(const struct stats_options *o, char *err,
    size_t errlen);
/* Reader: maps a stats file read-only.  NULL + err. */
struct stats *stats_open_file(const char *path, char *err, size_t errlen);
/* Unmaps (the file stays, for readers after the end). */
void stats_destroy(struct stats *st);

/* Master: a free slot for a new worker, or -1 when all are taken. */
int stats_slot_take(struct stats *st);
/* Master: the slot's worker is gone; its gauges go to zero. */
void stats_slot_give(struct stats *st, int slot);
/* Master: the row of a server name or a peer ("upstream/address"). */
unsigned stats_server_row(struct stats *st, const char *name);
unsigned stats_peer_row(struct stats *st, const char *name);
/* Master: events it counts itself, and what it is running. */
void stats_master_reloaded(struct stats *st, unsigned generation,
    unsigned workers, bool reload);
void stats_master_respawned(struct stats *st);
/* Master, once a second: a copy of the store's counters for readers. */
struct store_stats;
void stats_master_cache(struct stats *st, const struct store_stats *ss);
/* Reader: that copy; false when there is none (no cache). */
bool stats_cache(const struct stats *st, struct store_stats *out);

/*
 * A random secret made with the mapping, in hex: corral -P proves with it
 * that it may purge (it can read the stats file, which only root can).
 */
#define STATS_TOKEN_LEN		32
void stats_purge_token(const struct stats *st,
    char hex[STATS_TOKEN_LEN + 1]);

/* Worker: the pointers it bumps its counters through (slot -1: none). */
int stats_attach(struct stats *st, int slot, struct stats_mine *mine);

/* Everything summed over the slots: a reader's copy. */
struct stats_sum {
	bool counters;			/* false: built --disable-counters */
	pid_t master_pid;
	int64_t started;
	unsigned generation, workers;
	unsigned slots_used;		/* workers alive */
	unsigned slots_busy;		/* of them, answering a request */
	struct stats_worker {		/* [slots_used], one per live worker */
		pid_t pid;
		uint64_t requests, active;	/* its slot's */
		uint64_t accepted;		/* connections it took */
	} *worker;
	uint64_t reloads, worker_restarts;
	uint64_t w[STATS_NWORKER];
	struct stats_hist req_time;
	unsigned nservers, npeers;
	const char **server_name;	/* [nservers], into the mapping */
	const char **peer_name;		/* [npeers] */
	uint64_t *srv;			/* [nservers * STATS_NSERVER] */
	struct stats_peer_row *peer;	/* [npeers] */
};

/* Adds up every slot into sum, as of now_ms; -1 when memory ran out. */
int stats_sum(const struct stats *st, uint64_t now_ms,
    struct stats_sum *sum);
void stats_sum_free(struct stats_sum *sum);

/* Upper bound of histogram bucket i in ms; 0 for the last, +Inf. */
unsigned stats_bucket_ms(unsigned i);
/* Adds one observation of us microseconds. */
void stats_hist_add(struct stats_hist *h, uint64_t us);
/* Observations in a histogram. */
uint64_t stats_hist_count(const struct stats_hist *h);

/*
 * The one-line increments used on the hot path; stats_me is the calling
 * worker's slot (a private scratch slot in the master and in tools).
 */
extern struct stats_mine stats_me;
#define STATS_INC(id)		STATS_ADD(id, 1)
#define STATS_DEC(id)		STATS_ADD(id, -1)
#define STATS_ADD(id, n)	\
	(STATS_ON ? (void)(stats_me.w[STAT_##id] += (uint64_t)(n)) : (void)0)
#define STATS_INC_AT(id, i)	\
	(STATS_ON ? (void)stats_me.w[STAT_##id + (i)]++ : (void)0)
/* A counter of a peer row; row is not evaluated when counting is off. */
#define STATS_ROW_INC(row, id)	\
	(STATS_ON ? (void)(row)->v[STAT_##id]++ : (void)0)
/* A histogram observation; h is not evaluated when counting is off. */
#define STATS_HIST(h, us)	(STATS_ON ? stats_hist_add((h), (us)) : (void)0)

#endif

/*
 * memcached's classic commands on the shared store, with memcached's
 * replies.  Storage commands reserve their room before the data block
 * comes, so its bytes go from the socket buffer straight into the store;
 * append, prepend, incr and decr read the old value and store the new one
 * only if nobody changed it meanwhile (the store's cas), trying again
 * otherwise.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "shm/stats.h"
#include "worker/conn.h"
#include "worker/mc_impl.h"
#include "worker/mc_store.h"

#define RETRIES		64	/* read-modify-write races lost in a row */
#define VERSION_TEXT	"1.6.0 corral/" PACKAGE_VERSION

_Static_assert(sizeof(struct mc_item) == MC_ITEM_OVERHEAD,
    "config.h's MC_ITEM_OVERHEAD is the item header");

static time_t started;

void
mc_pending_free(struct mc_conn *c)
{
	if (c->p.w.data != NULL)
		store_abort(worker.store, &c->p.w);
	free(c->p.tmp);
	c->p.tmp = NULL;
	c->p.dst = NULL;
}

static void
swallow(struct mc_conn *c, size_t vlen)
{
	c->swallow = vlen + 2;
	c->state = MC_SWALLOW;
}

/* A value that cannot be taken: the reply, and memcached's removal of
 * the old value on a plain set, then its bytes are skipped. */
static void
refuse(struct mc_conn *c, const struct mc_cmd *cmd, enum store_result r,
    bool set)
{
	bool quiet = cmd->noreply && cmd->op != MC_MS;

	if (r == STORE_TOO_LARGE) {
		STATS_INC(mc_too_large);
		mc_reply(c, "SERVER_ERROR object too large for cache", quiet);
	} else {
		STATS_INC(mc_no_memory);
		mc_reply(c, "SERVER_ERROR out of memory storing object",
		    quiet);
	}
	if (set)
		mc_delete(worker.store, cmd->key, cmd->klen);
	swallow(c, cmd->vlen);
}

/*
 * Sets up the data block of a storage command: a reservation of its size
 * (set, add, replace, cas, ms) or a buffer (append, prepend, whose final
 * size is known only with the old value).
 */
void
mc_expect_data(struct mc_conn *c, const struct mc_cmd *cmd, int64_t exptime,
    uint32_t flags, bool rmw)
{
	struct mc_pending *p = &c->p;
	enum store_result r;
	bool set = cmd->op == MC_SET || (cmd->op == MC_MS &&
	    (cmd->meta.mode == 0 || cmd->meta.mode == 'S'));

	STATS_INC(mc_cmd_set);
	if (cmd->vlen > mc_max_item()) {
		refuse(c, cmd, STORE_TOO_LARGE, set);
		return;
	}
	p->cmd = *cmd;
	memcpy(p->key, cmd->key, cmd->klen);
	p->klen = cmd->klen;
	p->cmd.key = p->key;
	if (cmd->meta.flags_len > 0)
		memcpy(p->flags, cmd->meta.flags, cmd->meta.flags_len);
	p->cmd.meta.flags = p->flags;
	p->need = cmd->vlen;
	if (rmw) {
		if ((p->tmp = malloc(cmd->vlen ? cmd->vlen : 1)) == NULL) {
			refuse(c, cmd, STORE_NOMEM, false);
			return;
		}
		p->dst = p->tmp;
	} else {
		r = mc_reserve(worker.store, cmd->key, cmd->klen, cmd->vlen,
		    exptime, flags, 0, &p->w, &p->dst);
		if (r != STORE_OK) {
			refuse(c, cmd, r, set);
			return;
		}
	}
	c->state = MC_DATA;
}

/*
 * append/prepend: the old value and the new bytes into a new value of
 * the old one's flags and expiry, if the old one is still the same.
 */
enum store_result
mc_concat(const char *key, size_t klen, const char *add, size_t alen,
    bool front, uint64_t *newcas)
{
	struct store_wref w;
	struct mc_got g;
	enum store_result r;
	char *dst;
	int i;

	for (i = 0; i < RETRIES; i++) {
		if (!mc_fetch(worker.store, key, klen, &g))
			return STORE_NOT_FOUND;
		if (g.len + alen > mc_max_item()) {
			mc_release(worker.store, &g);
			return STORE_TOO_LARGE;
		}
		r = mc_reserve(worker.store, key, klen, g.len + alen,
		    mc_ttl_of_expires(g.ref.expires), g.ref.flags, 0, &w,
		    &dst);
		if (r == STORE_OK) {
			memcpy(dst + (front ? alen : 0), g.data, g.len);
			memcpy(dst + (front ? 0 : g.len), add, alen);
			r = mc_commit(worker.store, &w, STORE_IF_CAS,
			    g.ref.cas, newcas);
		}
		mc_release(worker.store, &g);
		if (r != STORE_EXISTS)
			return r;
	}
	return STORE_EXISTS;
}

static const char *
stored_word(enum store_result r, enum mc_op op)
{
	switch (r) {
	case STORE_OK:
		return "STORED";
	case STORE_EXISTS:
		return op == MC_CAS ? "EXISTS" : "NOT_STORED";
	case STORE_NOT_FOUND:
		return op == MC_CAS ? "NOT_FOUND" : "NOT_STORED";
	case STORE_TOO_LARGE:
		return "SERVER_ERROR object too large for cache";
	default:
		return "SERVER_ERROR out of memory storing object";
	}
}

void
mc_exec_store(struct mc_conn *c)
{
	struct mc_pending *p = &c->p;
	const struct mc_cmd *cmd = &p->cmd;
	enum store_result r;
	enum store_cond cond = STORE_IF_ANY;

	if (cmd->op == MC_MS) {
		mc_meta_store(c);
		return;
	}
	switch (cmd->op) {
	case MC_APPEND: case MC_PREPEND:
		r = mc_concat(p->key, p->klen, p->tmp, cmd->vlen,
		    cmd->op == MC_PREPEND, NULL);
		free(p->tmp);
		p->tmp = NULL;
		break;
	case MC_ADD: case MC_REPLACE: case MC_CAS:
		cond = cmd->op == MC_ADD ? STORE_IF_ABSENT : cmd->op ==
		    MC_REPLACE ? STORE_IF_PRESENT : STORE_IF_CAS;
		mc_settle(worker.store, p->key, p->klen);
		r = mc_commit(worker.store, &p->w, cond, cmd->cas, NULL);
		if (cmd->op == MC_CAS)
			STATS_INC_AT(mc_cas_hits, r == STORE_OK ? 0 :
			    r == STORE_NOT_FOUND ? 1 : 2);
		break;
	default:
		r = mc_commit(worker.store, &p->w, STORE_IF_ANY, 0, NULL);
		break;
	}
	if (p->w.data != NULL)
		store_abort(worker.store, &p->w);
	mc_reply(c, stored_word(r, cmd->op), cmd->noreply);
}

/* get gets gat gats: a VALUE line and the bytes for each key found. */
static void
exec_get(struct mc_conn *c, const struct mc_cmd *cmd)
{
	bool cas = cmd->op == MC_GETS || cmd->op == MC_GATS;
	bool touch = cmd->op == MC_GAT || cmd->op == MC_GATS;
	const char *p = cmd->keys, *end = p ? p + cmd->keys_len : p, *key;
	struct mc_got g;
	size_t klen;

	while (p != NULL && mc_next_key(&p, end, &key, &klen)) {
		STAT_IF(touch, mc_cmd_touch, mc_cmd_get);
		if (touch && mc_touch(worker.store, key, klen,
		    cmd->exptime) != STORE_OK) {
			STATS_INC(mc_touch_misses);
			continue;
		}
		if (!mc_fetch(worker.store, key, klen, &g)) {
			STAT_IF(touch, mc_touch_misses, mc_get_misses);
			continue;
		}
		STAT_IF(touch, mc_touch_hits, mc_get_hits);
		mc_out(c, "VALUE ", 6);
		mc_out(c, key, klen);
		mc_out(c, " ", 1);
		mc_out_u64(c, g.ref.flags);
		mc_out(c, " ", 1);
		mc_out_u64(c, g.len);
		if (cas) {
			mc_out(c, " ", 1);
			mc_out_u64(c, g.ref.cas);
		}
		mc_out(c, "\r\n", 2);
		mc_out(c, g.data, g.len);
		mc_out(c, "\r\n", 2);
		mc_release(worker.store, &g);
	}
	mc_out(c, "END\r\n", 5);
}

bool
mc_number(const char *p, size_t n, uint64_t *v)
{
	const char *end = p + n, *d;

	*v = 0;
	while (p < end && (*p == ' ' || (*p >= '\t' && *p <= '\r')))
		p++;
	for (d = p; p < end && *p >= '0' && *p <= '9'; p++) {
		if (*v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;
		*v = *v * 10 + (uint64_t)(*p - '0');
	}
	if (p == d)
		return false;
	for (; p < end; p++)
		if (*p != ' ' && (*p < '\t' || *p > '\r'))
			return false;
	return true;
}

/*
 * incr/decr: the new number keeps the old length when it is shorter
 * (padded with spaces, as memcached rewrites in place) and the old
 * flags and expiry.  NOT_FOUND, NOT_STORED (not a number) or OK.
 */
enum store_result
mc_arith(const char *key, size_t klen, bool incr, uint64_t delta,
    uint64_t *out, uint64_t *newcas)
{
	char buf[24];
	struct mc_got g;
	struct store_wref w;
	enum store_result r;
	uint64_t v;
	size_t n, len;
	char *dst;
	int i;

	for (i = 0; i < RETRIES; i++) {
		if (!mc_fetch(worker.store, key, klen, &g))
			return STORE_NOT_FOUND;
		if (!mc_number(g.data, g.len, &v)) {
			mc_release(worker.store, &g);
			return STORE_NOREF;	/* not a number */
		}
		v = incr ? v + delta : (delta > v ? 0 : v - delta);
		n = (size_t)snprintf(buf, sizeof(buf), "%llu",
		    (unsigned long long)v);
		len = n <= g.len ? g.len : n;	/* memcached: in place */
		r = mc_reserve(worker.store, key, klen, len,
		    mc_ttl_of_expires(g.ref.expires), g.ref.flags, 0, &w,
		    &dst);
		if (r == STORE_OK) {
			memcpy(dst, buf, n);
			memset(dst + n, ' ', len - n);
			r = mc_commit(worker.store, &w, STORE_IF_CAS,
			    g.ref.cas, newcas);
		}
		mc_release(worker.store, &g);
		if (r != STORE_EXISTS) {
			*out = v;
			return r;
		}
	}
	return STORE_EXISTS;
}

static void
exec_arith(struct mc_conn *c, const struct mc_cmd *cmd)
{
	bool incr = cmd->op == MC_INCR;
	enum store_result r;
	uint64_t v;
	char buf[24];

	r = mc_arith(cmd->key, cmd->klen, incr, cmd->delta, &v, NULL);
	if (r == STORE_NOT_FOUND) {
		STAT_IF(incr, mc_incr_misses, mc_decr_misses);
		mc_reply(c, "NOT_FOUND", cmd->noreply);
	} else if (r == STORE_NOREF) {
		mc_reply(c, "CLIENT_ERROR cannot increment or decrement "
		    "non-numeric value", cmd->noreply);
	} else if (r != STORE_OK) {
		mc_reply(c, "SERVER_ERROR out of memory", cmd->noreply);
	} else {
		STAT_IF(incr, mc_incr_hits, mc_decr_hits);
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
		mc_reply(c, buf, cmd->noreply);
	}
}

static void
stat_u64(struct mc_conn *c, const char *name, uint64_t v)
{
	mc_outs(c, "STAT ");
	mc_outs(c, name);
	mc_out(c, " ", 1);
	mc_out_u64(c, v);
	mc_out(c, "\r\n", 2);
}

static void
stat_str(struct mc_conn *c, const char *name, const char *v)
{
	mc_outs(c, "STAT ");
	mc_outs(c, name);
	mc_out(c, " ", 1);
	mc_outs(c, v);
	mc_out(c, "\r\n", 2);
}

/* The memcached counters of every worker, from the shared counters. */
static void
exec_stats(struct mc_conn *c)
{
	static const struct { const char *name; size_t id; } rows[] = {
		{ "cmd_get", STAT_mc_cmd_get },
		{ "cmd_set", STAT_mc_cmd_set },
		{ "cmd_flush", STAT_mc_cmd_flush },
		{ "cmd_touch", STAT_mc_cmd_touch },
		{ "cmd_meta", STAT_mc_cmd_meta },
		{ "get_hits", STAT_mc_get_hits },
		{ "get_misses", STAT_mc_get_misses },
		{ "delete_misses", STAT_mc_delete_misses },
		{ "delete_hits", STAT_mc_delete_hits },
		{ "incr_misses", STAT_mc_incr_misses },
		{ "incr_hits", STAT_mc_incr_hits },
		{ "decr_misses", STAT_mc_decr_misses },
		{ "decr_hits", STAT_mc_decr_hits },
		{ "cas_misses", STAT_mc_cas_misses },
		{ "cas_hits", STAT_mc_cas_hits },
		{ "cas_badval", STAT_mc_cas_badval },
		{ "touch_hits", STAT_mc_touch_hits },
		{ "touch_misses", STAT_mc_touch_misses },
		{ "store_too_large", STAT_mc_too_large },
		{ "store_no_memory", STAT_mc_no_memory },
		{ "bytes_read", STAT_mc_bytes_read },
		{ "bytes_written", STAT_mc_bytes_written },
	};
	struct stats_sum sum;
	uint64_t *v = sum.w;
	struct store_stats st;
	struct rusage ru;
	char buf[64];
	size_t i;

	if (stats_sum(worker.rt->stats, worker.now_ms, &sum) == -1) {
		mc_outs(c, "SERVER_ERROR out of memory\r\n");
		return;
	}
	store_stats(worker.store, &st);
	getrusage(RUSAGE_SELF, &ru);
	stat_u64(c, "pid", (uint64_t)getpid());
	stat_u64(c, "uptime", (uint64_t)(worker.now - started));
	stat_u64(c, "time", (uint64_t)worker.now);
	stat_str(c, "version", VERSION_TEXT);
	stat_str(c, "libevent", event_get_version());
	stat_u64(c, "pointer_size", sizeof(void *) * 8);
	snprintf(buf, sizeof(buf), "%ld.%06ld", (long)ru.ru_utime.tv_sec,
	    (long)ru.ru_utime.tv_usec);
	stat_str(c, "rusage_user", buf);
	snprintf(buf, sizeof(buf), "%ld.%06ld", (long)ru.ru_stime.tv_sec,
	    (long)ru.ru_stime.tv_usec);
	stat_str(c, "rusage_system", buf);
	stat_u64(c, "max_connections",
	    (uint64_t)worker.cf->worker_connections * worker.cf->workers);
	if (sum.counters) {
		stat_u64(c, "curr_connections", v[STAT_mc_conn_active]);
		stat_u64(c, "total_connections", v[STAT_mc_conn_accepted]);
		for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			stat_u64(c, rows[i].name, v[rows[i].id]);
	} else {
		stat_str(c, "counters", "off");	/* not zeros */
	}
	stat_u64(c, "limit_maxbytes", st.bytes_total);
	stat_u64(c, "threads", (uint64_t)worker.cf->workers);
	stat_u64(c, "bytes", st.bytes_used);
	stat_u64(c, "curr_items", st.items);
	stat_u64(c, "total_items", st.sets);
	stat_u64(c, "evictions", st.evictions);
	stat_u64(c, "expired_unfetched", 0);
	stat_u64(c, "evicted_unfetched", 0);
	stat_u64(c, "item_size_max", mc_max_item());
	mc_out(c, "END\r\n", 5);
	stats_sum_free(&sum);
}

static void
exec_stats_cmd(struct mc_conn *c, const struct mc_cmd *cmd)
{
	if (cmd->sub == NULL)
		exec_stats(c);
	else if (cmd->sub_len == 8 && memcmp(cmd->sub, "settings", 8) == 0) {
		stat_u64(c, "maxconns", (uint64_t)worker.cf->
		    worker_connections * worker.cf->workers);
		stat_u64(c, "udpport", 0);
		stat_u64(c, "item_size_max", mc_max_item());
		stat_str(c, "flush_enabled", worker.cf->memcached.allow_flush ?
		    "yes" : "no");
		stat_str(c, "cas_enabled", "yes");
		stat_str(c, "binding_protocol", "ascii");
		mc_out(c, "END\r\n", 5);
	} else if ((cmd->sub_len == 5 && memcmp(cmd->sub, "items", 5) == 0) ||
	    (cmd->sub_len == 5 && memcmp(cmd->sub, "slabs", 5) == 0) ||
	    (cmd->sub_len == 5 && memcmp(cmd->sub, "sizes", 5) == 0) ||
	    (cmd->sub_len == 5 && memcmp(cmd->sub, "conns", 5) == 0))
		mc_out(c, "END\r\n", 5);	/* the store has no slabs */
	else if (cmd->sub_len == 5 && memcmp(cmd->sub, "reset", 5) == 0)
		mc_outs(c, "RESET\r\n");	/* shared counters stay */
	else
		mc_outs(c, "ERROR\r\n");
}

static void
exec_flush(struct mc_conn *c, const struct mc_cmd *cmd)
{
	if (!worker.cf->memcached.allow_flush) {
		mc_reply(c, "CLIENT_ERROR flush_all not allowed", cmd->noreply);
		return;
	}
	if (mc_flush(worker.store, cmd->has_arg ? cmd->exptime : 0) !=
	    STORE_OK) {
		mc_reply(c, "SERVER_ERROR out of memory", cmd->noreply);
		return;
	}
	STATS_INC(mc_cmd_flush);
	log_notice("memcached: flush_all%s", cmd->has_arg ? " (delayed)" :
	    "");
	mc_reply(c, "OK", cmd->noreply);
}

static bool
exec(struct mc_conn *c, const struct mc_cmd *cmd)
{
	enum store_result r;

	switch (cmd->op) {
	case MC_GET: case MC_GETS: case MC_GAT: case MC_GATS:
		exec_get(c, cmd);
		break;
	case MC_SET: case MC_ADD: case MC_REPLACE: case MC_CAS:
		mc_expect_data(c, cmd, cmd->exptime, cmd->flags, false);
		break;
	case MC_APPEND: case MC_PREPEND:
		mc_expect_data(c, cmd, 0, 0, true);
		break;
	case MC_DELETE:
		r = mc_delete(worker.store, cmd->key, cmd->klen);
		STATS_INC_AT(mc_delete_hits, r == STORE_OK ? 0 : 1);
		mc_reply(c, r == STORE_OK ? "DELETED" : "NOT_FOUND",
		    cmd->noreply);
		break;
	case MC_INCR: case MC_DECR:
		exec_arith(c, cmd);
		break;
	case MC_TOUCH:
		STATS_INC(mc_cmd_touch);
		r = mc_touch(worker.store, cmd->key, cmd->klen, cmd->exptime);
		STATS_INC_AT(mc_touch_hits, r == STORE_OK ? 0 : 1);
		mc_reply(c, r == STORE_OK ? "TOUCHED" : "NOT_FOUND",
		    cmd->noreply);
		break;
	case MC_FLUSH_ALL:
		exec_flush(c, cmd);
		break;
	case MC_VERSION:
		mc_outs(c, "VERSION " VERSION_TEXT "\r\n");
		break;
	case MC_VERBOSITY:
		mc_reply(c, "OK", cmd->noreply);
		break;
	case MC_STATS:
		exec_stats_cmd(c, cmd);
		break;
	case MC_QUIT:
		return false;
	default:
		STATS_INC(mc_cmd_meta);
		mc_meta(c, (struct mc_cmd *)cmd);
		break;
	}
	return true;
}

bool
mc_exec_line(struct mc_conn *c, const char *line, size_t len,
    struct mc_cmd *cmd)
{
	const char *why;

	if (started == 0)
		started = worker.now;
	if ((why = mc_parse(line, len, cmd)) != NULL) {
		STATS_INC(mc_errors);
		mc_reply(c, why, cmd->noreply && cmd->op < MC_MG);
		if (cmd->swallow)
			swallow(c, cmd->vlen);
		return true;
	}
	return exec(c, cmd);
}

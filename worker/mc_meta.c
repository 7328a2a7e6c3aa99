/*
 * memcached's meta commands (mg, ms, md, ma, mn, me) on the shared store.
 *
 * Win flags: a client told W is the one to refill a key that is missing
 * (mg with N), invalidated (md with I: the item is marked stale and still
 * served, with X) or about to expire (mg with R); the others are told Z
 * and keep serving what there is.  Stored values never change in place,
 * so "a token was handed out for this version of the item" is a key of
 * its own, CACHE_NS_MEMCACHED_WIN + the item's cas + its key, added only
 * if absent: across every worker exactly one client wins each version.
 * An item made by mg's N is born with the token taken (its maker won).
 */
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "shm/stats.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/mc_impl.h"
#include "worker/mc_store.h"

/* Reply flags each command echoes, in the order the client gave them. */
#define ECHO_MG		"stcflhOk"
#define ECHO_MS		"Okc"
#define ECHO_MD		"Ok"
#define ECHO_MA		"Oktc"

struct echo {
	const struct mc_got *g;		/* the item, or NULL */
	uint64_t cas;			/* a new cas (ms, ma) */
	int64_t expires;		/* -2: from g */
};

static void
out_key(struct mc_conn *c, const struct mc_cmd *cmd)
{
	char b64[MC_KEY_MAX * 2];

	mc_out(c, " k", 2);
	if (!cmd->meta.base64) {
		mc_out(c, cmd->key, cmd->klen);
		return;
	}
	mc_out(c, b64, mc_base64_encode(cmd->key, cmd->klen, b64));
	mc_out(c, " b", 2);
}

static void
out_ttl(struct mc_conn *c, int64_t expires)
{
	mc_out(c, " t", 2);
	mc_out_i64(c, expires == 0 ? -1 : expires - (int64_t)worker.now);
}

/* The flags of the reply line: those of allowed that the client sent. */
static void
echo(struct mc_conn *c, const struct mc_cmd *cmd, const char *allowed,
    const struct echo *e)
{
	const char *p = cmd->meta.flags, *end = p + cmd->meta.flags_len, *t;
	const struct mc_got *g = e->g;
	size_t n;

	while (mc_next_key(&p, end, &t, &n)) {
		if (strchr(allowed, t[0]) == NULL)
			continue;
		switch (t[0]) {
		case 'O':
			mc_out(c, " ", 1);
			mc_out(c, t, n);
			break;
		case 'k':
			out_key(c, cmd);
			break;
		case 'c':
			mc_out(c, " c", 2);
			mc_out_u64(c, e->cas ? e->cas : g ? g->ref.cas : 0);
			break;
		case 's':
			mc_out(c, " s", 2);
			mc_out_u64(c, g->len);
			break;
		case 't':
			out_ttl(c, e->expires != -2 ? e->expires :
			    g->ref.expires);
			break;
		case 'f':
			mc_out(c, " f", 2);
			mc_out_u64(c, g->ref.flags);
			break;
		case 'l':
			mc_out(c, " l", 2);
			mc_out_u64(c, worker.now - g->item->time);
			break;
		case 'h':
			mc_out(c, " h0", 3);	/* not tracked */
			break;
		}
	}
}

static void
status(struct mc_conn *c, const struct mc_cmd *cmd, const char *word,
    const char *allowed, const struct echo *e, bool quiet)
{
	if (quiet)
		return;
	mc_outs(c, word);
	echo(c, cmd, allowed, e);
	mc_out(c, "\r\n", 2);
}

/* Takes the win token of this version of the item; false: taken. */
static bool
win(const char *key, size_t klen, const struct mc_got *g)
{
	char wkey[1 + 8 + MC_KEY_MAX];

	if (g->item->bits & MC_ITEM_WON)
		return false;
	wkey[0] = CACHE_NS_MEMCACHED_WIN;
	memcpy(wkey + 1, &g->ref.cas, 8);
	memcpy(wkey + 9, key, klen);
	return store_set_if(worker.store, wkey, 9 + klen, "", 0,
	    g->ref.expires, 0, STORE_IF_ABSENT, 0, NULL) == STORE_OK;
}

/* mg N on a miss: an empty item, its token taken by this client. */
static bool
vivify(const struct mc_cmd *cmd)
{
	struct store_wref w;
	char *dst;

	if (mc_reserve(worker.store, cmd->key, cmd->klen, 0,
	    cmd->meta.vivify, 0, MC_ITEM_WON, &w, &dst) != STORE_OK)
		return false;
	mc_settle(worker.store, cmd->key, cmd->klen);
	return mc_commit(worker.store, &w, STORE_IF_ABSENT, 0, NULL) ==
	    STORE_OK;
}

static void
meta_get(struct mc_conn *c, const struct mc_cmd *cmd)
{
	const struct mc_meta *m = &cmd->meta;
	struct echo e = { NULL, 0, -2 };
	struct mc_got g;
	bool won = false, stale, z = false;

	STATS_INC(mc_cmd_get);
	if (!mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
		if (!(m->has & MC_F('N')) || !(won = vivify(cmd)) ||
		    !mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
			STATS_INC(mc_get_misses);
			status(c, cmd, "EN", ECHO_MD, &e, m->quiet);
			return;
		}
	} else
		STATS_INC(mc_get_hits);
	if (m->has & MC_F('T')) {
		STATS_INC(mc_cmd_touch);
		mc_touch(worker.store, cmd->key, cmd->klen, m->ttl);
		mc_release(worker.store, &g);
		if (!mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
			status(c, cmd, "EN", ECHO_MD, &e, m->quiet);
			return;
		}
	}
	stale = (g.item->bits & MC_ITEM_STALE) != 0;
	if (!won && (stale || ((m->has & MC_F('R')) && g.ref.expires != 0 &&
	    g.ref.expires - (int64_t)worker.now < m->recache))) {
		won = win(cmd->key, cmd->klen, &g);
		z = !won;
	} else if (!won && (g.item->bits & MC_ITEM_WON))
		z = true;
	e.g = &g;
	if (m->has & MC_F('v')) {
		mc_out(c, "VA ", 3);
		mc_out_u64(c, g.len);
	} else
		mc_out(c, "HD", 2);
	echo(c, cmd, ECHO_MG, &e);
	if (z)
		mc_out(c, " Z", 2);
	if (stale)
		mc_out(c, " X", 2);
	if (won)
		mc_out(c, " W", 2);
	mc_out(c, "\r\n", 2);
	if (m->has & MC_F('v')) {
		mc_out(c, g.data, g.len);
		mc_out(c, "\r\n", 2);
	}
	mc_release(worker.store, &g);
}

/* ms append or prepend with N on a miss: the bytes as a new item. */
static enum store_result
ms_vivify(struct mc_pending *p, uint64_t *cas)
{
	struct store_wref w;
	enum store_result r;
	char *dst;

	r = mc_reserve(worker.store, p->key, p->klen, p->cmd.vlen,
	    p->cmd.meta.vivify, p->cmd.meta.client_flags, 0, &w, &dst);
	if (r != STORE_OK)
		return r;
	memcpy(dst, p->tmp, p->cmd.vlen);
	return mc_commit(worker.store, &w, STORE_IF_ABSENT, 0, cas);
}

/* ms: the data block came; store it as the mode says. */
void
mc_meta_store(struct mc_conn *c)
{
	struct mc_pending *p = &c->p;
	const struct mc_cmd *cmd = &p->cmd;
	const struct mc_meta *m = &cmd->meta;
	struct echo e = { NULL, 0, -2 };
	enum store_cond cond = STORE_IF_ANY;
	enum store_result r;
	const char *word;

	if (m->mode == 'A' || m->mode == 'P') {
		r = mc_concat(p->key, p->klen, p->tmp, cmd->vlen,
		    m->mode == 'P', &e.cas);
		if (r == STORE_NOT_FOUND && (m->has & MC_F('N')))
			r = ms_vivify(p, &e.cas);
		free(p->tmp);
		p->tmp = NULL;
	} else {
		if (m->mode == 'E')
			cond = STORE_IF_ABSENT;
		else if (m->mode == 'R')
			cond = STORE_IF_PRESENT;
		if (m->has & MC_F('C'))
			cond = STORE_IF_CAS;
		if (cond != STORE_IF_ANY)
			mc_settle(worker.store, p->key, p->klen);
		r = mc_commit(worker.store, &p->w, cond, m->cas, &e.cas);
	}
	switch (r) {
	case STORE_OK:
		word = "HD";
		break;
	case STORE_EXISTS:
		word = cond == STORE_IF_CAS ? "EX" : "NS";
		break;
	case STORE_NOT_FOUND:
		word = cond == STORE_IF_CAS ? "NF" : "NS";
		break;
	default:
		mc_outs(c, "SERVER_ERROR out of memory storing object\r\n");
		return;
	}
	status(c, cmd, word, ECHO_MS, &e, m->quiet && r == STORE_OK);
}

/* md: delete, or mark stale (I), or empty the value (x). */
static void
meta_delete(struct mc_conn *c, const struct mc_cmd *cmd)
{
	const struct mc_meta *m = &cmd->meta;
	struct echo e = { NULL, 0, -2 };
	struct store_wref w;
	enum store_result r;
	struct mc_got g;
	char *dst;
	bool stale = (m->has & MC_F('I')) != 0;
	bool empty = (m->has & MC_F('x')) != 0;

	if (!mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
		STATS_INC(mc_delete_misses);
		status(c, cmd, "NF", ECHO_MD, &e, false);
		return;
	}
	if ((m->has & MC_F('C')) && g.ref.cas != m->cas) {
		mc_release(worker.store, &g);
		status(c, cmd, "EX", ECHO_MD, &e, false);
		return;
	}
	if (stale || empty) {
		r = mc_reserve(worker.store, cmd->key, cmd->klen,
		    empty ? 0 : g.len, (m->has & MC_F('T')) ? m->ttl :
		    mc_ttl_of_expires(g.ref.expires), empty && !stale ?
		    g.ref.flags : g.ref.flags, stale ? MC_ITEM_STALE : 0, &w,
		    &dst);
		if (r == STORE_OK) {
			if (!empty)
				memcpy(dst, g.data, g.len);
			r = mc_commit(worker.store, &w, STORE_IF_CAS,
			    g.ref.cas, NULL);
		}
	} else
		r = mc_delete(worker.store, cmd->key, cmd->klen);
	mc_release(worker.store, &g);
	STATS_INC_AT(mc_delete_hits, r == STORE_OK ? 0 : 1);
	if (r == STORE_OK)
		status(c, cmd, "HD", ECHO_MD, &e, m->quiet);
	else
		status(c, cmd, r == STORE_EXISTS ? "EX" : "NF", ECHO_MD, &e,
		    false);
}

/* ma with N on a miss: the initial value J, returned as it is. */
static enum store_result
ma_vivify(const struct mc_cmd *cmd, uint64_t *cas)
{
	struct store_wref w;
	enum store_result r;
	char buf[24], *dst;
	int n = snprintf(buf, sizeof(buf), "%llu",
	    (unsigned long long)cmd->meta.initial);

	r = mc_reserve(worker.store, cmd->key, cmd->klen, (size_t)n,
	    cmd->meta.vivify, 0, 0, &w, &dst);
	if (r != STORE_OK)
		return r;
	memcpy(dst, buf, (size_t)n);
	mc_settle(worker.store, cmd->key, cmd->klen);
	return mc_commit(worker.store, &w, STORE_IF_ABSENT, 0, cas);
}

/* ma: incr (mode I, +, none) or decr (D, -) by D, 1 by default. */
static void
meta_arith(struct mc_conn *c, const struct mc_cmd *cmd)
{
	const struct mc_meta *m = &cmd->meta;
	struct echo e = { NULL, 0, -2 };
	bool incr = m->mode != 'D' && m->mode != '-';
	enum store_result r;
	struct mc_got g;
	uint64_t v = m->initial;
	char buf[24];
	int n;

	if ((m->has & MC_F('C')) && mc_fetch(worker.store, cmd->key,
	    cmd->klen, &g)) {
		r = g.ref.cas == m->cas ? STORE_OK : STORE_EXISTS;
		mc_release(worker.store, &g);
		if (r == STORE_EXISTS) {
			status(c, cmd, "EX", ECHO_MD, &e, false);
			return;
		}
	}
	r = mc_arith(cmd->key, cmd->klen, incr, m->delta, &v, &e.cas);
	if (r == STORE_NOT_FOUND && (m->has & MC_F('N'))) {
		v = m->initial;
		r = ma_vivify(cmd, &e.cas);
	}
	if (r == STORE_NOT_FOUND)
		STAT_IF(incr, mc_incr_misses, mc_decr_misses);
	else
		STAT_IF(incr, mc_incr_hits, mc_decr_hits);
	if (r == STORE_NOREF) {
		mc_outs(c, "CLIENT_ERROR cannot increment or decrement "
		    "non-numeric value\r\n");
		return;
	}
	if (r == STORE_NOT_FOUND || r == STORE_EXISTS) {
		status(c, cmd, r == STORE_EXISTS ? "EX" : "NF", ECHO_MD, &e,
		    false);
		return;
	}
	if (r != STORE_OK) {
		mc_outs(c, "SERVER_ERROR out of memory\r\n");
		return;
	}
	if (m->has & MC_F('T'))
		mc_touch(worker.store, cmd->key, cmd->klen, m->ttl);
	if (mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
		e.expires = g.ref.expires;
		mc_release(worker.store, &g);
	} else
		e.expires = 0;
	n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	if (!(m->has & MC_F('v'))) {
		status(c, cmd, "HD", ECHO_MA, &e, m->quiet);
		return;
	}
	mc_out(c, "VA ", 3);
	mc_out_u64(c, (uint64_t)n);
	echo(c, cmd, ECHO_MA, &e);
	mc_out(c, "\r\n", 2);
	mc_out(c, buf, (size_t)n);
	mc_out(c, "\r\n", 2);
}

/* me: memcached's debug line for a key. */
static void
meta_debug(struct mc_conn *c, const struct mc_cmd *cmd)
{
	struct mc_got g;

	if (!mc_fetch(worker.store, cmd->key, cmd->klen, &g)) {
		mc_outs(c, "EN\r\n");
		return;
	}
	mc_outs(c, "ME ");
	mc_out(c, cmd->key, cmd->klen);
	mc_outs(c, " exp=");
	mc_out_i64(c, g.ref.expires == 0 ? -1 : g.ref.expires -
	    (int64_t)worker.now);
	mc_outs(c, " la=");
	mc_out_u64(c, worker.now - g.item->time);
	mc_outs(c, " cas=");
	mc_out_u64(c, g.ref.cas);
	mc_outs(c, " fetch=no cls=1 size=");
	mc_out_u64(c, g.ref.len + cmd->klen);
	mc_outs(c, "\r\n");
	mc_release(worker.store, &g);
}

void
mc_meta(struct mc_conn *c, struct mc_cmd *cmd)
{
	const struct mc_meta *m = &cmd->meta;

	switch (cmd->op) {
	case MC_MG:
		meta_get(c, cmd);
		break;
	case MC_MS:
		mc_expect_data(c, cmd, (m->has & MC_F('T')) ? m->ttl : 0,
		    m->client_flags, m->mode == 'A' || m->mode == 'P');
		break;
	case MC_MD:
		meta_delete(c, cmd);
		break;
	case MC_MA:
		meta_arith(c, cmd);
		break;
	case MC_MN:
		mc_outs(c, "MN\r\n");
		break;
	default:
		meta_debug(c, cmd);
		break;
	}
}

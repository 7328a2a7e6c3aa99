/*
 * The master process: a small state machine driven by signals.
 *
 * Signals are blocked in the master and taken synchronously with
 * sigtimedwait(), so there are no handlers at all: reaping, respawning,
 * reloading and stopping happen in the loop, never in signal context.
 * Workers unblock them after fork and watch them as libevent events.
 *
 * Each reload starts a new generation of workers on the new config, then
 * retires the old generation gracefully: the old workers stop accepting,
 * close their copies of the listening sockets, finish what they serve and
 * exit, while the master's listening sockets, shared by both generations
 * (worker i of each takes slot i's with reuseport), never close.  Nothing
 * is dropped.
 *
 * Workers learn that the master died from a pipe: the master holds its
 * only write end, so when the master is gone, killed with SIGKILL too, the
 * read end that every worker watches reports end of file.  The workers
 * then close their listening sockets, finish what they serve and exit, so
 * a new master can bind the same addresses and take the store.  (A
 * parent-death signal would not do: the kernel clears it when a worker
 * drops privileges, and it cannot say "finish first".)  A reload keeps
 * the same master, so every generation shares the one pipe.  Its write
 * end is close-on-exec: a master that re-executed itself (for a binary
 * upgrade, which corral does not do) would have to hand it on, or its
 * workers would take the exec for its death.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "master/config.h"
#include "master/fsafe.h"
#include "master/log.h"
#include "master/master.h"
#include "master/proctitle.h"
#include "master/steer.h"
#include "shm/stats.h"
#include "master/tls_conf.h"
#include "shm/store.h"
#include "shm/tls_keys.h"
#include "worker/static.h"
#include "worker/worker.h"

#define STOP_GRACE_MS		5000	/* after SIGTERM, SIGKILL */
#define RESPAWN_FAST_MS		2000	/* died sooner: back off */
#define RESPAWN_MAX_DELAY_MS	30000
#define TICK_MS			1000
#define STORE_SLOTS_MIN		16	/* room for overlapping generations */
#define STORE_MAX_REFS		4096	/* values one worker keeps pinned */
#define SWEEP_BUDGET		512	/* entries reclaimed per tick */
#define TLS_STORE_STRIPES	4
#define TLS_STORE_MAX_OBJECT	4096	/* an encoded session */

struct proc {
	pid_t pid;			/* 0 while waiting to be respawned */
	int slot;
	int store_slot;			/* -1 when none is held */
	int stats_slot;			/* -1 when none is held */
	unsigned gen;
	bool retiring;			/* told to finish and exit */
	bool terminated;		/* SIGTERM sent: next is SIGKILL */
	uint64_t started_ms;
	uint64_t respawn_at_ms;
	uint64_t deadline_ms;		/* retiring: when to stop it hard */
	unsigned fails;			/* quick deaths in a row */
};

static struct proc *procs;
static size_t nprocs, procs_cap;
static unsigned generation;
static struct runtime *rt_cur;
static sigset_t sigs;
static bool stopping;
static struct store *store;
static struct store *tls_store;		/* TLS sessions, cache off */
static struct tls_keys *tls_keys;
static bool *store_slot_used;
static unsigned store_slots;
static struct stats *stats;
static int alive_pipe[2] = { -1, -1 };	/* workers watch [0] for EOF */

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Shared store ---------------------------------------------------------- */

/* The store's file is opened as root, as fsafe.h says. */
static int
store_open_file(const char *path, char *err, size_t errlen)
{
	return fsafe_open(path, FSAFE_STORE, NULL, err, errlen);
}

/* Worker slots: room for overlapping generations of workers. */
static unsigned
store_slot_count(const struct config *cf)
{
	unsigned n = (unsigned)cf->workers * 4;

	return n > STORE_SLOTS_MIN ? n : STORE_SLOTS_MIN;
}

/* The store a config asks for; corral -t and the start both use this. */
static void
store_options_of(const struct config *cf, struct store_options *o)
{
	const struct config_cache *cc = &cf->cache;

	memset(o, 0, sizeof(*o));
	o->path = cc->path;
	o->open_file = store_open_file;
	o->size = cc->size;
	o->stripes = cc->stripes;
	o->max_object = cc->max_object;
	o->persist = cc->persist;
	o->max_slots = store_slot_count(cf);
	o->max_refs = STORE_MAX_REFS;
}

/* "FILE:LINE: cache: why", as config errors are written. */
static void
store_error(const struct config *cf, char *err, size_t errlen,
    const char *why)
{
	int line;
	const char *file = config_where(cf, cf->cache.line, &line);

	if (line > 0)
		snprintf(err, errlen, "%s:%d: cache: %s", file, line, why);
	else
		snprintf(err, errlen, "%s: cache: %s", file, why);
}

int
master_check_store(const struct config *cf, char *err, size_t errlen)
{
	struct store_options o;
	char why[512];

	if (cf->cache.size == 0)
		return 0;
	store_options_of(cf, &o);
	if (store_check(&o, why, sizeof(why)) == 0)
		return 0;
	store_error(cf, err, errlen, why);
	return -1;
}

static int
slots_init(unsigned n)
{
	store_slots = n;
	store_slot_used = calloc(store_slots, sizeof(bool));
	if (store_slot_used == NULL) {
		log_crit("cache: out of memory");
		return -1;
	}
	return 0;
}

int
master_open_store(struct runtime *rt)
{
	const struct config_cache *cc = &rt->cf->cache;
	struct store_options o;
	char why[512], err[1024];

	if (cc->size == 0)
		return 0;
	/* store_create() runs store_check() first: what -t refuses, this
	 * refuses with the same words. */
	store_options_of(rt->cf, &o);
	store = store_create(&o, why, sizeof(why));
	if (store == NULL) {
		store_error(rt->cf, err, sizeof(err), why);
		log_crit("%s", err);
		return -1;
	}
	if (slots_init(o.max_slots) == -1)
		return -1;
	if (store_note(store)[0] != '\0')
		log_notice("cache %s: %s", cc->path, store_note(store));
	rt->store = store;
	return 0;
}

/* Once a second: expired entries, and a look at the store's file. */
static void
store_tick(void)
{
	char msg[PATH_MAX + 256];

	store_sweep(store, SWEEP_BUDGET);
	if (store_watch_file(store, msg, sizeof(msg)) == 1)
		log_warn("cache: %s", msg);
}

/* TLS ------------------------------------------------------------------ */

/* Says at start and reload how TLS records will be encrypted. */
static void
log_ktls(const struct config *cf)
{
	char why[128];

	if (!cf->any_tls)
		return;
	if (!cf->tls.ktls)
		log_notice("TLS: kernel TLS is off (tls.ktls); records are "
		    "encrypted in user space");
	else if (tls_conf_ktls_probe(why, sizeof(why)))
		log_notice("TLS: kernel TLS is available: static files go "
		    "out with SSL_sendfile where the cipher allows it");
	else
		log_notice("TLS: kernel TLS is unavailable (%s); records are "
		    "encrypted in user space", why);
}

/*
 * Without the cache, sessions get a small store of their own, like
 * nginx's ssl_session_cache shared:NAME:SIZE zone; it is made once and
 * kept, like the cache, until a restart.
 */
static int
open_tls_store(const struct config *cf)
{
	struct store_options o;
	char err[512];

	if (store != NULL || tls_store != NULL || !cf->any_tls ||
	    !cf->tls.session_cache)
		return 0;
	memset(&o, 0, sizeof(o));
	o.size = cf->tls.session_cache_size;
	o.stripes = TLS_STORE_STRIPES;
	o.max_object = TLS_STORE_MAX_OBJECT;
	o.max_slots = store_slots ? store_slots : store_slot_count(cf);
	o.max_refs = 64;
	tls_store = store_create(&o, err, sizeof(err));
	if (tls_store == NULL) {
		log_crit("%s: tls session_cache_size: %s", cf->file, err);
		return -1;
	}
	return store_slots ? 0 : slots_init(o.max_slots);
}

int
master_open_tls(struct runtime *rt)
{
	/* Without TLS, OpenSSL is not even started: its random generator
	 * takes a while to seed, and the workers wait for the master. */
	if (!rt->cf->any_tls)
		return 0;
	if (tls_keys == NULL && (tls_keys = tls_keys_create()) == NULL) {
		log_crit("cannot make the TLS ticket keys");
		return -1;
	}
	if (open_tls_store(rt->cf) == -1)
		return -1;
	rt->tls_keys = tls_keys;
	rt->tls_store = store != NULL ? store : tls_store;
	if (!rt->cf->tls.session_cache)
		rt->tls_store = NULL;
	log_ktls(rt->cf);
	return 0;
}

/* A store slot for a new worker; -1 when every slot is still in use. */
static bool
slots_needed(void)
{
	return store != NULL || tls_store != NULL;
}

static int
store_slot_take(void)
{
	for (unsigned i = 0; i < store_slots; i++) {
		if (!store_slot_used[i]) {
			store_slot_used[i] = true;
			return (int)i;
		}
	}
	return -1;
}

/*
 * A dead worker's pins, reservations and leases go back to the store, and
 * its counters' slot, totals kept, to the next worker.
 */
static void
store_slot_give(struct proc *p)
{
	if (p->stats_slot >= 0) {
		stats_slot_give(stats, p->stats_slot);
		p->stats_slot = -1;
	}
	if (p->store_slot < 0)
		return;
	if (store != NULL)
		store_reap_slot(store, (unsigned)p->store_slot);
	if (tls_store != NULL)
		store_reap_slot(tls_store, (unsigned)p->store_slot);
	store_slot_used[p->store_slot] = false;
	p->store_slot = -1;
}

/* Counters ------------------------------------------------------------- */

static unsigned
rows_for(size_t n)
{
	return (unsigned)(n * 2 > 64 ? n * 2 : 64) + 1;
}

/* Gives each server block and upstream peer of rt its counters' row. */
static int
stats_rows(struct runtime *rt)
{
	const struct config *cf = rt->cf;
	const struct config_upstream *u;
	char name[192];

	rt->server_row = calloc(cf->nservers, sizeof(unsigned));
	rt->peer_row = calloc(cf->nupstreams + 1, sizeof(unsigned *));
	if (rt->server_row == NULL || rt->peer_row == NULL)
		return -1;
	for (size_t i = 0; i < cf->nservers; i++)
		rt->server_row[i] = stats_server_row(stats,
		    cf->servers[i].names[0]);
	for (size_t i = 0; i < cf->nupstreams; i++) {
		u = &cf->upstreams[i];
		rt->peer_row[i] = calloc(u->npeers, sizeof(unsigned));
		if (rt->peer_row[i] == NULL)
			return -1;
		for (size_t j = 0; j < u->npeers; j++) {
			snprintf(name, sizeof(name), "%s/%s", u->name,
			    u->peers[j].text);
			rt->peer_row[i][j] = stats_peer_row(stats, name);
		}
	}
	rt->stats = stats;
	return 0;
}

int
master_open_stats(const struct config *cf)
{
	struct stats_options o;
	size_t npeers = 0;
	char err[512];

	for (size_t i = 0; i < cf->nupstreams; i++)
		npeers += cf->upstreams[i].npeers;
	memset(&o, 0, sizeof(o));
	o.path = cf->stats_file;
	o.slots = store_slot_count(cf);
	o.server_rows = rows_for(cf->nservers);
	o.peer_rows = rows_for(npeers);
	stats = stats_create(&o, err, sizeof(err));
	if (stats == NULL) {
		log_crit("%s: stats_file: %s", cf->file, err);
		return -1;
	}
	return 0;
}

int
master_attach_stats(struct runtime *rt)
{
	if (stats_rows(rt) == -1) {
		log_crit("counters: out of memory");
		return -1;
	}
	return 0;
}

static bool
cache_changed(const struct config_cache *a, const struct config_cache *b)
{
	return a->size != b->size || a->stripes != b->stripes ||
	    a->max_object != b->max_object || a->persist != b->persist ||
	    (a->path == NULL) != (b->path == NULL) ||
	    (a->path != NULL && strcmp(a->path, b->path) != 0);
}

/* Workers -------------------------------------------------------------- */

static struct proc *
proc_add(int slot)
{
	struct proc *p;
	size_t cap;

	if (nprocs == procs_cap) {
		cap = procs_cap ? procs_cap * 2 : 16;
		p = realloc(procs, cap * sizeof(*p));
		if (p == NULL) {
			log_at(L_CRIT, errno, "worker table");
			return NULL;
		}
		procs = p;
		procs_cap = cap;
	}
	p = &procs[nprocs++];
	memset(p, 0, sizeof(*p));
	p->slot = slot;
	p->store_slot = -1;
	p->stats_slot = -1;
	p->gen = generation;
	return p;
}

static void
spawn(struct proc *p)
{
	pid_t pid;

	if (slots_needed() && p->store_slot < 0) {
		p->store_slot = store_slot_take();
		if (p->store_slot < 0) {
			/* Retiring generations still hold every slot. */
			log_warn("worker %d waits for a cache slot", p->slot);
			p->respawn_at_ms = now_ms() + TICK_MS;
			return;
		}
	}
	if (p->stats_slot < 0 && (p->stats_slot = stats_slot_take(stats)) < 0)
		log_warn("worker %d has no counters' slot: what it serves is "
		    "not counted", p->slot);
	pid = fork();
	if (pid == -1) {
		log_at(L_ERROR, errno, "fork worker %d", p->slot);
		p->respawn_at_ms = now_ms() + TICK_MS;
		return;
	}
	if (pid == 0) {
		int slot = p->slot, sslot = p->store_slot;
		int cslot = p->stats_slot;
		unsigned gen = p->gen;

		/* Only the master may hold the write end, or its death
		 * would go unseen.  Signals stay blocked until the worker
		 * watches them. */
		close(alive_pipe[1]);
		free(procs);
		free(store_slot_used);
		worker_main(rt_cur, slot, gen, sslot, cslot, alive_pipe[0]);
	}
	p->pid = pid;
	p->started_ms = now_ms();
	p->respawn_at_ms = 0;
	log_info("started worker %d of generation %u, pid %d", p->slot,
	    p->gen, (int)pid);
}

static int
spawn_generation(void)
{
	struct proc *p;

	for (int i = 0; i < rt_cur->cf->workers; i++) {
		p = proc_add(i);
		if (p == NULL)
			return -1;
		spawn(p);
	}
	return 0;
}

/* Decides when a dead worker comes back: at once, unless it keeps dying. */
static void
schedule_respawn(struct proc *p)
{
	uint64_t now = now_ms(), delay = 0;

	if (now - p->started_ms < RESPAWN_FAST_MS)
		p->fails++;
	else
		p->fails = 0;
	if (p->fails > 0) {
		delay = 100ULL << (p->fails < 9 ? p->fails : 9);
		if (delay > RESPAWN_MAX_DELAY_MS)
			delay = RESPAWN_MAX_DELAY_MS;
		if (p->fails >= 3)
			log_crit("worker %d keeps dying right after start; "
			    "next try in %llu ms", p->slot,
			    (unsigned long long)delay);
	}
	p->respawn_at_ms = now + delay;
}

static struct proc *
proc_find(pid_t pid)
{
	for (size_t i = 0; i < nprocs; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	return NULL;
}

static void
proc_remove(struct proc *p)
{
	*p = procs[--nprocs];
}

static void
log_death(const struct proc *p, int status)
{
	if (WIFSIGNALED(status))
		log_error("worker %d (pid %d) killed by signal %d%s", p->slot,
		    (int)p->pid, WTERMSIG(status),
		    WCOREDUMP(status) ? " (core dumped)" : "");
	else
		log_error("worker %d (pid %d) exited with code %d", p->slot,
		    (int)p->pid, WEXITSTATUS(status));
}

static void
reap(void)
{
	struct proc *p;
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		p = proc_find(pid);
		if (p == NULL)
			continue;
		store_slot_give(p);
		if (p->retiring || stopping) {
			log_info("worker %d of generation %u (pid %d) exited",
			    p->slot, p->gen, (int)pid);
			if (WIFSIGNALED(status) && WTERMSIG(status) != SIGTERM &&
			    WTERMSIG(status) != SIGKILL)
				log_death(p, status);
			proc_remove(p);
			continue;
		}
		log_death(p, status);
		p->pid = 0;
		stats_master_respawned(stats);
		schedule_respawn(p);
	}
}

/* Tells a worker to finish what it serves and exit. */
static void
retire(struct proc *p, uint64_t now)
{
	int ms = rt_cur->cf->worker_shutdown_timeout_ms;

	p->retiring = true;
	p->deadline_ms = ms > 0 ? now + (uint64_t)ms : UINT64_MAX;
	if (p->pid != 0)
		kill(p->pid, SIGQUIT);
}

static void
retire_all(unsigned gen)
{
	uint64_t now = now_ms();
	size_t i = 0;

	while (i < nprocs) {
		struct proc *p = &procs[i];

		if (p->gen > gen || p->retiring) {
			i++;
			continue;
		}
		if (p->pid == 0) {
			/* Waiting to be respawned: nothing to retire. */
			store_slot_give(p);
			proc_remove(p);
			continue;
		}
		retire(p, now);
		i++;
	}
}

static void
terminate_all(void)
{
	uint64_t deadline = now_ms() + STOP_GRACE_MS;

	for (size_t i = 0; i < nprocs; i++) {
		if (procs[i].pid == 0) {
			store_slot_give(&procs[i]);
			proc_remove(&procs[i--]);
			continue;
		}
		procs[i].retiring = true;
		procs[i].terminated = true;
		procs[i].deadline_ms = deadline;
		kill(procs[i].pid, SIGTERM);
	}
}

/* Stops hard the retiring workers that are past their deadline. */
static void
enforce_deadlines(uint64_t now)
{
	for (size_t i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		if (!p->retiring || p->pid == 0 || now < p->deadline_ms)
			continue;
		if (!p->terminated) {
			log_warn("worker %d (pid %d) did not finish within "
			    "worker_shutdown_timeout; stopping it", p->slot,
			    (int)p->pid);
			kill(p->pid, SIGTERM);
			p->terminated = true;
			p->deadline_ms = now + STOP_GRACE_MS;
		} else {
			log_warn("worker %d (pid %d) ignored SIGTERM; killing "
			    "it", p->slot, (int)p->pid);
			kill(p->pid, SIGKILL);
			p->deadline_ms = UINT64_MAX;
		}
	}
}

static void
signal_workers(int sig)
{
	for (size_t i = 0; i < nprocs; i++)
		if (procs[i].pid != 0)
			kill(procs[i].pid, sig);
}

/* Reload and log rotation ---------------------------------------------- */

void
master_warn_log(const char *msg)
{
	log_warn("%s", msg);
}

/* Loads a new config completely; on any error the old one keeps serving. */
static void
reload(void)
{
	struct mime_table *mime;
	struct runtime *rt, *old;
	struct config *cf;
	char err[1024];

	cf = config_load(rt_cur->cf->file, err, sizeof(err));
	if (cf == NULL) {
		log_error("%s; reload aborted, the old config stays", err);
		return;
	}
	mime = master_mime(cf, err, sizeof(err));
	if (mime == NULL) {
		log_error("%s; reload aborted, the old config stays", err);
		config_free(cf);
		return;
	}
	if (cf->reuseport != rt_cur->cf->reuseport) {
		/* One shared socket and a group of SO_REUSEPORT ones cannot
		 * hold the same address at once. */
		log_warn("%s: reuseport changed; the running sockets keep "
		    "reuseport = %s until a restart", cf->file,
		    rt_cur->cf->reuseport ? "on" : "off");
		cf->reuseport = rt_cur->cf->reuseport;
	}
	if (master_preflight(cf, master_warn_log, err, sizeof(err)) == -1) {
		log_error("%s; reload aborted, the old config stays", err);
		mime_free(mime);
		config_free(cf);
		return;
	}
	rt = runtime_open(cf, mime, rt_cur);
	if (rt == NULL) {
		log_error("reload aborted, the old config stays");
		return;
	}
	rt->store = store;
	if (stats_rows(rt) == -1) {
		log_error("counters: out of memory; reload aborted");
		runtime_retire(rt, rt_cur);
		return;
	}
	if (master_open_tls(rt) == -1) {
		log_error("reload aborted, the old config stays");
		runtime_retire(rt, rt_cur);
		return;
	}
	if (cache_changed(&rt->cf->cache, &rt_cur->cf->cache))
		log_warn("%s: the cache section changed; the running cache "
		    "keeps its old settings until a restart", rt->cf->file);
	if (master_error_log(rt->cf, err, sizeof(err)) == -1) {
		log_error("%s; reload aborted, the old config stays", err);
		runtime_retire(rt, rt_cur);
		return;
	}
	log_level_max = rt->cf->log_level;
	old = rt_cur;
	rt_cur = rt;
	steer_free();		/* the new runtime's groups start afresh */
	/* Close what went away before forking, or the new workers would
	 * inherit a removed socket and keep it accepting. */
	runtime_retire(old, rt_cur);
	generation++;
	if (spawn_generation() == -1)
		log_crit("could not start all workers of generation %u",
		    generation);
	retire_all(generation - 1);
	stats_master_reloaded(stats, generation, (unsigned)rt_cur->cf->workers,
	    true);
	log_notice("reloaded %s: generation %u, %d workers", rt_cur->cf->file,
	    generation, rt_cur->cf->workers);
}

/* SIGUSR1: reopen our logs, create the new files, and let workers follow. */
static void
reopen_logs(void)
{
	const struct config *cf = rt_cur->cf;
	char err[PATH_MAX + 512];
	int fd;

	/* Files made anew are given to the workers' user through their
	 * descriptors, never by path. */
	if (master_error_log(cf, err, sizeof(err)) == -1)
		log_error("reopen: %s", err);
	for (size_t i = 0; i < cf->nservers; i++) {
		if (cf->servers[i].access_log == NULL)
			continue;
		fd = runtime_open_log(rt_cur, cf->servers[i].access_log);
		if (fd != -1)
			close(fd);
	}
	signal_workers(SIGUSR1);
	log_notice("logs reopened");
}

/* The loop -------------------------------------------------------------- */

static void
respawn_due(uint64_t now, uint64_t *next)
{
	for (size_t i = 0; i < nprocs; i++) {
		struct proc *p = &procs[i];

		if (p->pid != 0 || p->retiring || stopping)
			continue;
		if (p->respawn_at_ms <= now)
			spawn(p);
		else if (p->respawn_at_ms < *next)
			*next = p->respawn_at_ms;
	}
	for (size_t i = 0; i < nprocs; i++)
		if (procs[i].retiring && procs[i].pid != 0 &&
		    procs[i].deadline_ms < *next)
			*next = procs[i].deadline_ms;
}

/*
 * With reuseport, which slots take new connections (steer.h): those with
 * a worker that is not retiring and, if it died right after its start
 * twice in a row or more, has lived RESPAWN_FAST_MS since.  Until then
 * the worker only drains what its socket queued, so a worker that keeps
 * dying strands no new connection; one quick death (a kill) is not yet
 * a worker that keeps dying, and the others do not take all the load.
 */
static void
steer_workers(uint64_t now, uint64_t *next)
{
	static bool *up;
	static int cap;
	int n = rt_cur->nslots;
	uint64_t proven;

	if (n < 2)
		return;
	if (n > cap) {
		bool *p = realloc(up, (size_t)n * sizeof(*up));

		if (p == NULL)
			return;		/* tried again on the next turn */
		up = p;
		cap = n;
	}
	memset(up, 0, (size_t)n * sizeof(*up));
	for (size_t i = 0; i < nprocs; i++) {
		const struct proc *p = &procs[i];

		if (p->pid == 0 || p->retiring || p->slot >= n)
			continue;
		proven = p->started_ms + RESPAWN_FAST_MS;
		if (p->fails < 2 || now >= proven)
			up[p->slot] = true;
		else if (proven < *next)
			*next = proven;
	}
	steer_slots(rt_cur, up);
}

static void
handle_signal(int sig)
{
	switch (sig) {
	case SIGCHLD:
		reap();
		break;
	case SIGTERM:
	case SIGINT:
		log_notice("signal %d: stopping", sig);
		stopping = true;
		terminate_all();
		break;
	case SIGQUIT:
		if (stopping)
			break;
		log_notice("signal %d: stopping gracefully", sig);
		stopping = true;
		retire_all(generation);
		proctitle_set("corral: master process is shutting down");
		break;
	case SIGHUP:
		if (stopping)
			break;
		log_notice("signal %d: reloading", sig);
		reload();
		break;
	case SIGUSR1:
		reopen_logs();
		break;
	}
}

void
master_block_signals(void)
{
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int
master_run(struct runtime *rt, bool foreground)
{
	struct store_stats ss;
	struct timespec ts;
	uint64_t now, next;
	int sig;

	rt_cur = rt;
	if (!foreground) {
		master_daemonize();
		if (store != NULL && store_moved(store) == -1)
			log_at(L_ERROR, errno, "cache: cannot mark the store's "
			    "file as in use by this process");
	}
	if (pipe2(alive_pipe, O_CLOEXEC) == -1) {
		log_at(L_CRIT, errno, "pipe");
		return 1;
	}
	generation = 1;
	stats_master_reloaded(stats, generation, (unsigned)rt->cf->workers,
	    false);
	if (spawn_generation() == -1)
		return 1;
	if (rt->cf->pid_file != NULL && master_pidfile_write(rt->cf->pid_file) == -1) {
		stopping = true;
		terminate_all();
	}
	log_tee_stderr(0);
	log_notice("corral/%s started, %d workers", PACKAGE_VERSION,
	    rt->cf->workers);

	while (!stopping || nprocs > 0) {
		now = now_ms();
		next = now + TICK_MS;
		enforce_deadlines(now);
		respawn_due(now, &next);
		if (!stopping)
			steer_workers(now, &next);
		if (next < now)
			next = now;
		ts.tv_sec = (time_t)((next - now) / 1000);
		ts.tv_nsec = (long)((next - now) % 1000) * 1000000;
		sig = sigtimedwait(&sigs, NULL, &ts);
		if (sig > 0) {
			handle_signal(sig);
		} else if (store != NULL) {
			store_tick();
			store_stats(store, &ss);
			stats_master_cache(stats, &ss);
		}
		if (sig <= 0 && tls_store != NULL)
			store_sweep(tls_store, SWEEP_BUDGET);
		if (tls_keys != NULL && tls_keys_tick(tls_keys, now_ms(),
		    (uint64_t)rt_cur->cf->tls.ticket_key_rotate_ms))
			log_info("TLS ticket keys rotated");
	}
	if (rt_cur->cf->pid_file != NULL)
		unlink(rt_cur->cf->pid_file);
	log_notice("exiting");
	free(procs);
	if (store != NULL)
		store_destroy(store);
	if (tls_store != NULL)
		store_destroy(tls_store);
	free(store_slot_used);
	tls_keys_destroy(tls_keys);
	stats_destroy(stats);
	steer_free();
	runtime_free(rt_cur);
	return 0;
}

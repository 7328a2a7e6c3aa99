/*
 * The worker process: a libevent loop built after fork, accepting on the
 * listening sockets that the master bound.
 *
 * With reuseport a worker accepts on its slot's own socket of each address
 * (master/runtime.c) and closes its copies of the other slots' ones; with
 * reuseport off every worker polls the same sockets and takes what it wins.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "master/proctitle.h"
#include "shm/stats.h"
#include "shm/store.h"
#include "worker/conn.h"
#include "worker/mc_client.h"
#include "worker/mc_conn.h"
#include "worker/proxy.h"
#include "worker/resp.h"
#include "worker/waitlist.h"
#include "worker/static.h"
#include "worker/tls.h"
#include "worker/worker.h"

#define ACCEPT_BATCH		64
#define ACCEPT_PAUSE_MS		500	/* after EMFILE */

struct worker worker;

static struct event **accept_evs;
static int *listen_fds;			/* this worker's; -1 once closed */
static struct event *accept_resume_ev;
static time_t reuse_warned;		/* last "not enough" warning */
static struct event *wake_ev;
static unsigned wake_slot;		/* this worker's slot in the store */
static struct event *master_ev;		/* end of file: the master died */
static struct event *orphan_ev;		/* then: worker_shutdown_timeout */
static bool accept_paused;

void
worker_update_time(void)
{
	struct timeval tv;
	struct tm tm;
	char date[HTTP_DATE_LEN + 1];
	int n;

	event_base_gettimeofday_cached(worker.base, &tv);
	worker.now_us = (uint64_t)tv.tv_sec * 1000000 + (uint64_t)tv.tv_usec;
	worker.now_ms = worker.now_us / 1000;
	if (tv.tv_sec == worker.now)
		return;
	worker.now = tv.tv_sec;
	http_date_format(worker.now, date);
	n = snprintf(worker.common, sizeof(worker.common),
	    "%.*sDate: %s\r\n", (int)worker.server_line_len,
	    worker.server_line, date);
	worker.common_len = (size_t)n;
	localtime_r(&worker.now, &tm);
	strftime(worker.log_time, sizeof(worker.log_time),
	    "%d/%b/%Y:%H:%M:%S %z", &tm);
}

static void
accept_enable(bool on)
{
	for (size_t i = 0; i < worker.cf->nlisten; i++) {
		if (on)
			event_add(accept_evs[i], NULL);
		else
			event_del(accept_evs[i]);
	}
	accept_paused = !on;
}

/*
 * Our copies of the listening sockets: closed when we stop accepting, so
 * that a socket the master closed (an address or a slot that went away)
 * is gone at once, not kept with a queue nobody accepts from.
 */
static void
listen_close(void)
{
	for (size_t i = 0; i < worker.cf->nlisten; i++) {
		if (listen_fds[i] != -1)
			close(listen_fds[i]);
		listen_fds[i] = -1;
	}
}

/* Keeps the sockets of our slot and closes our copies of the others. */
static void
listen_take(const struct runtime *rt, int slot)
{
	size_t n = worker.cf->nlisten * (size_t)rt->nslots;

	for (size_t i = 0; i < worker.cf->nlisten; i++)
		listen_fds[i] = runtime_listen_fd(rt, i, slot);
	for (size_t k = 0; k < n; k++)
		if (rt->listen_fds[k] != listen_fds[k / (size_t)rt->nslots])
			close(rt->listen_fds[k]);
}

void
worker_conn_closed(void)
{
	worker.nconns--;
	if (worker.quitting) {
		if (worker.nconns == 0)
			event_base_loopbreak(worker.base);
		return;
	}
	if (accept_paused && !event_pending(accept_resume_ev, EV_TIMEOUT,
	    NULL))
		accept_enable(true);
}

/* Accepting stopped at worker_connections may go on by reusing it. */
void
worker_conn_idle(void)
{
	if (accept_paused && !worker.quitting &&
	    !event_pending(accept_resume_ev, EV_TIMEOUT, NULL))
		accept_enable(true);
}

/*
 * At worker_connections, a new client takes the place of the oldest idle
 * keep-alive connection rather than waiting for it to time out.  Returns
 * false when every connection is busy.
 */
static bool
accept_room(void)
{
	const char *what = "reusing idle keep-alive connections";
	bool reused;

	if (worker.nconns < (unsigned)worker.cf->worker_connections)
		return true;
	reused = conn_reuse_idle();
	if (!reused)
		what = "every connection is busy; new clients wait";
	if (worker.now != reuse_warned) {
		reuse_warned = worker.now;
		log_warn("%d worker_connections are not enough; %s",
		    worker.cf->worker_connections, what);
	}
	return reused;
}

static void
accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	if (!worker.quitting)
		accept_enable(true);
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct sockaddr_storage ss;
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };
	socklen_t len;
	int fd, i;

	worker_update_time();
	for (i = 0; i < ACCEPT_BATCH; i++) {
		if (!accept_room()) {
			accept_enable(false);
			return;
		}
		len = sizeof(ss);
		fd = accept4(lfd, (struct sockaddr *)&ss, &len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				/* Back off instead of spinning on a full
				 * descriptor table. */
				log_at(L_WARN, errno, "accept");
				accept_enable(false);
				evtimer_add(accept_resume_ev, &tv);
				return;
			}
			log_at(L_ERROR, errno, "accept");
			return;
		}
		worker.nconns++;
		conn_accept(fd, (struct sockaddr *)&ss, len,
		    (int)(intptr_t)arg);
	}
}

/* Stops accepting, lets what is in progress finish, then exits. */
static void
worker_quit(void)
{
	if (worker.quitting)
		return;
	proctitle_set("corral: worker process is shutting down");
	worker.quitting = true;
	accept_enable(false);
	listen_close();
	conn_quit_idle();
	mc_quit();
	if (worker.nconns == 0)
		event_base_loopbreak(worker.base);
}

static void
orphan_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	log_warn("requests still in progress after worker_shutdown_timeout;"
	    " closing them");
	event_base_loopbreak(worker.base);
}

/*
 * The master is gone (killed, or crashed): nobody will respawn, reload or
 * stop us.  Give the listening sockets back at once so that a new master
 * can bind them, finish what we serve, and exit; worker_shutdown_timeout
 * bounds it, as the master would have.
 */
static void
master_gone_cb(evutil_socket_t fd, short what, void *arg)
{
	int ms = worker.cf->worker_shutdown_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	char c;

	if (read(fd, &c, 1) == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	event_del(master_ev);
	log_warn("the master process is gone; finishing %u connection%s "
	    "and exiting", worker.nconns, worker.nconns == 1 ? "" : "s");
	accept_enable(false);
	listen_close();
	mc_quit();
	for (size_t i = 0; i < worker.cf->memcached.nlisten; i++)
		close(worker.rt->mc_fds[i]);
	if (ms > 0)
		evtimer_add(orphan_ev, &tv);
	worker_quit();
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	switch (sig) {
	case SIGTERM:
		event_base_loopbreak(worker.base);
		break;
	case SIGQUIT:
		if (!worker.quitting)
			log_info("graceful stop");
		worker_quit();
		break;
	case SIGUSR1:
		if (log_open(worker.cf->error_log) == -1)
			log_at(L_ERROR, errno, "reopen %s",
			    worker.cf->error_log);
		access_log_reopen();
		break;
	}
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	worker_update_time();
	fcache_expire(worker.fcache);
	tls_idle_sweep();
}

static struct event *signal_evs[4];
static size_t nsignal_evs;

static void
add_signal(int sig)
{
	struct event *ev;

	ev = evsignal_new(worker.base, sig, signal_cb, NULL);
	if (ev == NULL || evsignal_add(ev, NULL) == -1)
		fatalx("cannot watch signal %d", sig);
	signal_evs[nsignal_evs++] = ev;
}

/* Raises the descriptor limit, then becomes the unprivileged user. */
static void
drop_privileges(const struct runtime *rt)
{
	const struct config *cf = rt->cf;
	struct rlimit rl;

	if (cf->worker_rlimit_nofile > 0) {
		rl.rlim_cur = rl.rlim_max = (rlim_t)cf->worker_rlimit_nofile;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_at(L_ERROR, errno, "setrlimit(RLIMIT_NOFILE, %d)",
			    cf->worker_rlimit_nofile);
	}
	if (!rt->drop_privileges)
		return;
	if (initgroups(cf->user ? cf->user : "nobody", rt->gid) == -1)
		fatal("initgroups");
	if (setgid(rt->gid) == -1)
		fatal("setgid(%d)", (int)rt->gid);
	if (setuid(rt->uid) == -1)
		fatal("setuid(%d)", (int)rt->uid);
	if (setuid(0) != -1 || geteuid() != rt->uid || getegid() != rt->gid)
		fatalx("could not drop root privileges");
	/* Allow core dumps of the unprivileged worker. */
	prctl(PR_SET_DUMPABLE, 1);
}

/*
 * A lease that requests of this worker wait on has ended: the store
 * queued the tokens of those keys only (see shm/store.h), so only their
 * waiters look again; everyone when the store lost some (overflow).
 */
static void
wake_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n, tokens[64];
	size_t got, i;
	bool overflow, all = false;

	if (read(fd, &n, sizeof(n)) == -1 && errno != EAGAIN)
		log_at(L_ERROR, errno, "store wake fd");
	worker_update_time();
	do {
		got = store_wake_drain(worker.store, wake_slot, tokens, 64,
		    &overflow);
		for (i = 0; i < got && !all; i++)
			waitlist_wake(tokens[i]);
		all |= overflow;
	} while (got == 64);
	if (all)
		waitlist_wake_all();
}

void
worker_main(const struct runtime *rt, int slot, unsigned gen,
    int store_slot, int stats_slot, int master_fd)
{
	static const char tokens_on[] = "Server: corral/" PACKAGE_VERSION
	    "\r\n";
	static const char tokens_off[] = "Server: corral\r\n";
	const struct config *cf = rt->cf;
	struct timeval sec = { 1, 0 };
	struct event *tick;
	size_t i;

	char name[16];
	sigset_t mask;

	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	snprintf(name, sizeof(name), "worker %d", slot);
	log_set_role(name);
	log_tee_stderr(0);
	proctitle_set("corral: worker process");
	/* comm carries what ps titles do not: generation and number. */
	snprintf(name, sizeof(name), "corral g%u w%d", gen, slot);
	prctl(PR_SET_NAME, name);
	if (rt->store != NULL) {
		if (store_attach(rt->store, (unsigned)store_slot) == -1)
			fatalx("cannot attach to the cache as slot %d",
			    store_slot);
		worker.store = rt->store;
		wake_slot = (unsigned)store_slot;
	}
	if (rt->tls_store != NULL && rt->tls_store != rt->store &&
	    store_attach(rt->tls_store, (unsigned)store_slot) == -1)
		fatalx("cannot attach to the TLS session cache as slot %d",
		    store_slot);
	if (stats_attach(rt->stats, stats_slot, &stats_me) == -1)
		fatal("counters");
	drop_privileges(rt);

	worker.rt = rt;
	worker.cf = cf;
	worker.slot = slot;
	if (rt->tls != NULL && tls_worker_init(rt, rt->tls_store) == -1)
		fatalx("cannot set up TLS");
	worker.base = event_base_new();
	if (worker.base == NULL)
		fatalx("event_base_new failed");
	worker.server_line = cf->server_tokens ? tokens_on : tokens_off;
	worker.server_line_len = cf->server_tokens ? sizeof(tokens_on) - 1 :
	    sizeof(tokens_off) - 1;
	worker.limits.max_request_line = cf->max_request_line;
	worker.limits.max_header_size = cf->max_header_size;
	worker.limits.max_headers = cf->max_headers;
	worker.headers = calloc(cf->max_headers, sizeof(*worker.headers));
	worker.fcache = fcache_create(cf);
	access_log_init();
	accept_evs = calloc(cf->nlisten, sizeof(*accept_evs));
	listen_fds = calloc(cf->nlisten + 1, sizeof(*listen_fds));
	if (worker.headers == NULL || worker.fcache == NULL ||
	    accept_evs == NULL || listen_fds == NULL || !conn_init())
		fatal("worker init");
	listen_take(rt, slot);
	worker_update_time();

	for (i = 0; i < cf->nlisten; i++) {
		accept_evs[i] = event_new(worker.base, listen_fds[i],
		    EV_READ | EV_PERSIST, accept_cb, (void *)(intptr_t)i);
		if (accept_evs[i] == NULL)
			fatalx("event_new failed");
	}
	accept_resume_ev = evtimer_new(worker.base, accept_resume_cb, NULL);
	tick = event_new(worker.base, -1, EV_PERSIST, tick_cb, NULL);
	master_ev = event_new(worker.base, master_fd, EV_READ | EV_PERSIST,
	    master_gone_cb, NULL);
	orphan_ev = evtimer_new(worker.base, orphan_deadline_cb, NULL);
	if (accept_resume_ev == NULL || tick == NULL || master_ev == NULL ||
	    orphan_ev == NULL)
		fatalx("event_new failed");
	event_add(tick, &sec);
	event_add(master_ev, NULL);
	if (worker.store != NULL) {
		wake_ev = event_new(worker.base, store_wake_fd(worker.store,
		    (unsigned)store_slot), EV_READ | EV_PERSIST, wake_cb, NULL);
		if (wake_ev == NULL)
			fatalx("event_new failed");
		event_add(wake_ev, NULL);
	}
	add_signal(SIGTERM);
	add_signal(SIGQUIT);
	add_signal(SIGUSR1);
	/* The master forked us with its signals blocked; a signal that came
	 * early is delivered now, to the events above. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &mask, NULL);
	accept_enable(true);
	mc_listen_start();

	event_base_dispatch(worker.base);

	log_info("exiting");
	/* First: the entries' store pins go back to the pin pool, which
	 * conn_close_all() frees. */
	fcache_destroy(worker.fcache);
	conn_close_all();
	mc_close_all();
	mc_client_free_all();
	unpin_end();
	free(worker.headers);
	for (i = 0; i < cf->nlisten; i++)
		event_free(accept_evs[i]);
	free(accept_evs);
	free(listen_fds);
	event_free(accept_resume_ev);
	event_free(tick);
	event_free(master_ev);
	event_free(orphan_ev);
	if (wake_ev != NULL)
		event_free(wake_ev);
	for (i = 0; i < nsignal_evs; i++)
		event_free(signal_evs[i]);
	event_base_free(worker.base);
	runtime_free((struct runtime *)rt);
	exit(0);
}

/*
 * The master process.
 *
 * Signals are blocked in the master and taken synchronously with
 * sigtimedwait(), so there are no handlers at all: reaping, respawning and
 * stopping happen in the loop, never in signal context.  Workers unblock
 * them after fork and watch them as libevent signal events.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "worker/static.h"
#include "worker/worker.h"

#define LISTEN_BACKLOG		4096
#define STOP_GRACE_MS		5000	/* fast stop: SIGKILL after this */
#define RESPAWN_FAST_MS		2000	/* died sooner: back off */
#define RESPAWN_MAX_DELAY_MS	30000

struct proc {
	pid_t pid;			/* 0 when the slot is empty */
	uint64_t started_ms;
	uint64_t respawn_at_ms;		/* when to start it again */
	unsigned fails;			/* quick deaths in a row */
};

static struct proc *procs;
static int nprocs;

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int
listen_one(const struct config_listen *l)
{
	int fd, on = 1, secs = 1;

	fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_at(L_CRIT, errno, "socket %s", l->text);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (l->addr.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	if (bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) == -1) {
		log_at(L_CRIT, errno, "bind %s", l->text);
		close(fd);
		return -1;
	}
	if (listen(fd, LISTEN_BACKLOG) == -1) {
		log_at(L_CRIT, errno, "listen %s", l->text);
		close(fd);
		return -1;
	}
	/* Wake a worker only when the request has arrived. */
	setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
	return fd;
}

static int
open_access_log(const char *path)
{
	int fd;

	if (path == NULL)
		return -1;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd == -1)
		log_at(L_CRIT, errno, "open access log %s", path);
	return fd;
}

static int
runtime_open_fds(struct runtime *rt)
{
	const struct config *cf = rt->cf;
	size_t i;

	for (i = 0; i < cf->nlisten; i++)
		rt->listen_fds[i] = -1;
	for (i = 0; i < cf->nservers; i++)
		rt->root_fds[i] = rt->access_fds[i] = -1;
	for (i = 0; i < cf->nlisten; i++) {
		rt->listen_fds[i] = listen_one(&cf->listen[i]);
		if (rt->listen_fds[i] == -1)
			return -1;
	}
	for (i = 0; i < cf->nservers; i++) {
		rt->root_fds[i] = open(cf->servers[i].root,
		    O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rt->root_fds[i] == -1) {
			log_at(L_CRIT, errno, "open root %s",
			    cf->servers[i].root);
			return -1;
		}
		if (cf->servers[i].access_log != NULL) {
			rt->access_fds[i] =
			    open_access_log(cf->servers[i].access_log);
			if (rt->access_fds[i] == -1)
				return -1;
		}
	}
	return 0;
}

struct runtime *
runtime_open(struct config *cf, struct mime_table *mime)
{
	struct runtime *rt;

	log_tee_stderr(1);
	rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		fatal("calloc");
	rt->cf = cf;
	rt->mime = mime;
	rt->listen_fds = calloc(cf->nlisten, sizeof(int));
	rt->root_fds = calloc(cf->nservers, sizeof(int));
	rt->access_fds = calloc(cf->nservers, sizeof(int));
	if (!rt->listen_fds || !rt->root_fds || !rt->access_fds)
		fatal("calloc");
	if (runtime_open_fds(rt) == -1) {
		runtime_free(rt);
		return NULL;
	}
	return rt;
}

void
runtime_free(struct runtime *rt)
{
	if (rt == NULL)
		return;
	mime_free(rt->mime);
	config_free(rt->cf);
	free(rt->listen_fds);
	free(rt->root_fds);
	free(rt->access_fds);
	free(rt);
}

/* Reads a pid file; returns the pid of a live process that holds it. */
static pid_t
pidfile_live(const char *path)
{
	char buf[32];
	ssize_t n;
	long pid;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	pid = strtol(buf, NULL, 10);
	if (pid <= 0 || (kill((pid_t)pid, 0) == -1 && errno == ESRCH))
		return 0;
	return (pid_t)pid;
}

static int
pidfile_write(const char *path)
{
	char buf[32];
	int fd, n;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1) {
		log_at(L_CRIT, errno, "open pid file %s", path);
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, (size_t)n) != n) {
		log_at(L_CRIT, errno, "write pid file %s", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static void
daemonize(void)
{
	int fd;

	switch (fork()) {
	case -1:
		fatal("fork");
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() == -1)
		fatal("setsid");
	fd = open("/dev/null", O_RDWR);
	if (fd == -1)
		fatal("open /dev/null");
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

static void
spawn(const struct runtime *rt, int slot, const sigset_t *oldmask)
{
	struct proc *p = &procs[slot];
	char role[32];
	pid_t pid;

	pid = fork();
	if (pid == -1) {
		log_at(L_ERROR, errno, "fork worker %d", slot);
		p->respawn_at_ms = now_ms() + 1000;
		return;
	}
	if (pid == 0) {
		/* Die with the master rather than serve on unsupervised. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		snprintf(role, sizeof(role), "worker %d", slot);
		log_set_role(role);
		worker_main(rt, slot);
	}
	p->pid = pid;
	p->started_ms = now_ms();
	p->respawn_at_ms = 0;
	log_info("started worker %d, pid %d", slot, (int)pid);
}

/* Decides when a dead worker comes back: at once, unless it keeps dying. */
static void
schedule_respawn(struct proc *p, int slot)
{
	uint64_t now = now_ms(), delay;

	if (now - p->started_ms < RESPAWN_FAST_MS)
		p->fails++;
	else
		p->fails = 0;
	delay = 0;
	if (p->fails > 0) {
		delay = 100ULL << (p->fails < 9 ? p->fails : 9);
		if (delay > RESPAWN_MAX_DELAY_MS)
			delay = RESPAWN_MAX_DELAY_MS;
		if (p->fails >= 3)
			log_crit("worker %d keeps dying right after start; "
			    "next try in %llu ms", slot,
			    (unsigned long long)delay);
	}
	p->respawn_at_ms = now + delay;
}

static void
reap(bool stopping)
{
	int status, slot;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (slot = 0; slot < nprocs; slot++)
			if (procs[slot].pid == pid)
				break;
		if (slot == nprocs)
			continue;
		procs[slot].pid = 0;
		if (stopping) {
			log_info("worker %d (pid %d) exited", slot, (int)pid);
			continue;
		}
		if (WIFSIGNALED(status))
			log_error("worker %d (pid %d) killed by signal %d%s",
			    slot, (int)pid, WTERMSIG(status),
			    WCOREDUMP(status) ? " (core dumped)" : "");
		else
			log_error("worker %d (pid %d) exited with code %d",
			    slot, (int)pid, WEXITSTATUS(status));
		schedule_respawn(&procs[slot], slot);
	}
}

static int
live_workers(void)
{
	int n = 0;

	for (int i = 0; i < nprocs; i++)
		n += procs[i].pid != 0;
	return n;
}

static void
signal_workers(int sig)
{
	for (int i = 0; i < nprocs; i++)
		if (procs[i].pid != 0)
			kill(procs[i].pid, sig);
}

/* Stops the workers with sig and waits for them; SIGKILL after grace_ms. */
static void
stop_workers(const sigset_t *set, int sig, uint64_t grace_ms)
{
	uint64_t deadline = now_ms() + grace_ms;
	struct timespec ts = { 0, 100 * 1000000 };

	signal_workers(sig);
	while (live_workers() > 0) {
		if (now_ms() >= deadline) {
			log_warn("workers did not stop in time, killing them");
			signal_workers(SIGKILL);
			deadline = UINT64_MAX;
		}
		(void)sigtimedwait(set, NULL, &ts);
		reap(true);
	}
}

int
master_run(struct runtime *rt, bool foreground)
{
	const struct config *cf = rt->cf;
	sigset_t set, oldmask;
	struct timespec ts;
	uint64_t now, next;
	int sig, i;
	bool quit = false;

	if (cf->pid_file != NULL && pidfile_live(cf->pid_file) != 0) {
		log_crit("%s: corral is already running as pid %d",
		    cf->pid_file, (int)pidfile_live(cf->pid_file));
		runtime_free(rt);
		return 1;
	}
	if (!foreground)
		daemonize();
	if (cf->pid_file != NULL && pidfile_write(cf->pid_file) == -1) {
		runtime_free(rt);
		return 1;
	}
	log_tee_stderr(0);

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, &oldmask);
	signal(SIGPIPE, SIG_IGN);

	nprocs = cf->workers;
	procs = calloc((size_t)nprocs, sizeof(*procs));
	if (procs == NULL)
		fatal("calloc");
	for (i = 0; i < nprocs; i++)
		spawn(rt, i, &oldmask);
	log_notice("corral/%s started, %d workers", PACKAGE_VERSION, nprocs);

	while (!quit) {
		now = now_ms();
		next = now + 1000;
		for (i = 0; i < nprocs; i++) {
			if (procs[i].pid != 0 || procs[i].respawn_at_ms == 0)
				continue;
			if (procs[i].respawn_at_ms <= now)
				spawn(rt, i, &oldmask);
			else if (procs[i].respawn_at_ms < next)
				next = procs[i].respawn_at_ms;
		}
		ts.tv_sec = (time_t)((next - now) / 1000);
		ts.tv_nsec = (long)((next - now) % 1000) * 1000000;
		sig = sigtimedwait(&set, NULL, &ts);
		switch (sig) {
		case SIGCHLD:
			reap(false);
			break;
		case SIGTERM:
		case SIGINT:
			log_notice("signal %d: stopping", sig);
			stop_workers(&set, SIGTERM, STOP_GRACE_MS);
			quit = true;
			break;
		case SIGQUIT:
			log_notice("signal %d: graceful stop", sig);
			stop_workers(&set, SIGQUIT, UINT64_MAX / 2);
			quit = true;
			break;
		case SIGHUP:
			log_warn("reload is not implemented yet; ignoring HUP");
			break;
		case SIGUSR1:
			if (log_open(cf->error_log) == -1)
				log_at(L_ERROR, errno, "reopen %s",
				    cf->error_log);
			signal_workers(SIGUSR1);
			break;
		default:
			break;
		}
	}
	if (cf->pid_file != NULL)
		unlink(cf->pid_file);
	log_notice("exiting");
	free(procs);
	runtime_free(rt);
	return 0;
}

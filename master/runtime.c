/*
 * What the master opens for a config and the workers inherit: listening
 * sockets, document roots, access logs, and the user to switch to.
 *
 * On reload a new runtime adopts the listening sockets of the old one whose
 * address did not change, so they are never closed and re-bound and no
 * connection waiting in their queues is lost.
 *
 * With reuseport (the default) each address has one SO_REUSEPORT socket
 * per worker slot, and the kernel spreads new connections over them by a
 * hash of their addresses, as nginx's "listen ... reuseport" does: a burst
 * is shared evenly, where workers racing on one socket take it unevenly.
 * Slot i's sockets stay with the master, so a respawned worker i and the
 * next generation's worker i take over its queue.  A reload to fewer
 * workers closes the sockets of the slots that go, and what was queued on
 * them is reset unless net.ipv4.tcp_migrate_req moves it (Linux 5.14).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/fsafe.h"
#include "master/log.h"
#include "master/master.h"
#include "master/tls_client.h"
#include "master/tls_conf.h"
#include "worker/static.h"

#define LISTEN_BACKLOG		4096

static int
listen_one(const struct config_listen *l, bool reuseport)
{
	int fd, on = 1, secs = 1;

	fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_at(L_CRIT, errno, "socket %s", l->text);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (reuseport &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) == -1) {
		log_at(L_CRIT, errno, "SO_REUSEPORT %s", l->text);
		close(fd);
		return -1;
	}
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

static bool
same_addr(const struct config_listen *a, const struct config_listen *b)
{
	return a->addrlen == b->addrlen &&
	    memcmp(&a->addr, &b->addr, a->addrlen) == 0;
}

/* Returns the old runtime's socket for an address and slot, or -1. */
static int
adopt_listener(const struct runtime *old, const struct config_listen *l,
    int slot)
{
	if (old == NULL || slot >= old->nslots)
		return -1;
	for (size_t i = 0; i < old->cf->nlisten; i++)
		if (same_addr(&old->cf->listen[i], l))
			return runtime_listen_fd(old, i, slot);
	return -1;
}

/*
 * An address we do not hold yet must be free: another process's
 * SO_REUSEPORT sockets would take our sockets into their group and share
 * its connections with us, where a plain bind says "in use".
 */
static int
address_free(const struct config_listen *l)
{
	int e = master_bind_error(&l->addr, l->addrlen);

	if (e == EADDRINUSE) {
		log_at(L_CRIT, e, "bind %s", l->text);
		return -1;
	}
	return 0;
}

/* One socket per worker slot with reuseport, else one for all. */
static int
listen_open(struct runtime *rt, size_t i, const struct runtime *old)
{
	const struct config_listen *l = &rt->cf->listen[i];
	bool reuseport = rt->cf->reuseport;
	int fd;

	for (int s = 0; s < rt->nslots; s++) {
		fd = adopt_listener(old, l, s);
		if (fd == -1 && s == 0 && reuseport && address_free(l) == -1)
			return -1;
		if (fd == -1)
			fd = listen_one(l, reuseport);
		if (fd == -1)
			return -1;
		rt->listen_fds[i * (size_t)rt->nslots + (size_t)s] = fd;
	}
	return 0;
}

/*
 * Opens a log file for appending as root, safely (fsafe.h), owned by the
 * workers' user: they reopen it by path after a rotation (SIGUSR1).
 */
int
runtime_open_log(const struct runtime *rt, const char *path)
{
	struct fsafe_user u = { rt->drop_privileges, rt->uid, rt->gid,
	    rt->user };
	char err[PATH_MAX + 256];
	int fd;

	fd = fsafe_open(path, FSAFE_LOG, &u, err, sizeof(err));
	if (fd == -1)
		log_crit("open log %s", err);
	return fd;
}

int
master_error_log(const struct config *cf, char *err, size_t errlen)
{
	char why[PATH_MAX + 256];
	struct fsafe_user u;
	const char *file;
	int fd = -1, n;

	if (master_user(cf, &u, err, errlen) == -1)
		return -1;
	if (cf->error_log != NULL) {
		fd = fsafe_open(cf->error_log, FSAFE_LOG, &u, why,
		    sizeof(why));
		if (fd == -1) {
			file = config_where(cf, cf->lines.error_log, &n);
			if (n > 0)
				snprintf(err, errlen, "%s:%d: error_log %s",
				    file, n, why);
			else
				snprintf(err, errlen, "%s: error_log %s",
				    file, why);
			return -1;
		}
	}
	log_use_fd(fd);
	return 0;
}

/* Finds the user and group the workers run as when we are root. */
static int
resolve_user(struct runtime *rt)
{
	struct fsafe_user u;
	char err[512];

	if (master_user(rt->cf, &u, err, sizeof(err)) == -1) {
		log_crit("%s", err);
		return -1;
	}
	rt->drop_privileges = u.set;
	rt->uid = u.uid;
	rt->gid = u.gid;
	rt->user = u.name;
	return 0;
}

static int
runtime_open_fds(struct runtime *rt, const struct runtime *old)
{
	const struct config *cf = rt->cf;
	size_t i;

	for (i = 0; i < cf->nlisten; i++)
		if (listen_open(rt, i, old) == -1)
			return -1;
	if (mc_listen_open(rt, old) == -1)
		return -1;
	for (i = 0; i < cf->ndirs; i++) {
		rt->dir_fds[i] = open(cf->dirs[i],
		    O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (rt->dir_fds[i] == -1) {
			log_at(L_CRIT, errno, "open folder %s", cf->dirs[i]);
			return -1;
		}
	}
	for (i = 0; i < cf->nservers; i++) {
		if (cf->servers[i].access_log != NULL) {
			rt->access_fds[i] =
			    runtime_open_log(rt, cf->servers[i].access_log);
			if (rt->access_fds[i] == -1)
				return -1;
		}
	}
	return 0;
}

/* Certificates and keys are read here, while we are still root. */
static int
runtime_open_tls(struct runtime *rt)
{
	char err[1024];
	bool failed;

	rt->tls = tls_conf_load(rt->cf, master_warn_log, err, sizeof(err),
	    &failed);
	if (!failed)
		rt->tls_up = tls_client_load(rt->cf, err, sizeof(err),
		    &failed);
	if (failed) {
		log_crit("%s", err);
		return -1;
	}
	return 0;
}

static bool
fd_in(int fd, const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] == fd)
			return true;
	return false;
}

/* Closes what rt opened, except the sockets that keep carries on. */
static void
runtime_close(struct runtime *rt, const struct runtime *keep)
{
	const struct config *cf = rt->cf;
	size_t i;

	for (i = 0; i < cf->nlisten * (size_t)rt->nslots; i++)
		if (rt->listen_fds[i] != -1 && (keep == NULL ||
		    !fd_in(rt->listen_fds[i], keep->listen_fds,
		    keep->cf->nlisten * (size_t)keep->nslots)))
			close(rt->listen_fds[i]);
	mc_listen_close(rt, keep);
	for (i = 0; i < cf->ndirs; i++)
		if (rt->dir_fds[i] != -1)
			close(rt->dir_fds[i]);
	for (i = 0; i < cf->nservers; i++) {
		if (rt->access_fds[i] != -1)
			close(rt->access_fds[i]);
	}
}

struct runtime *
runtime_open(struct config *cf, struct mime_table *mime,
    const struct runtime *old)
{
	struct runtime *rt;
	size_t i;

	rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		goto failed;
	rt->cf = cf;
	rt->mime = mime;
	rt->nslots = cf->reuseport ? cf->workers : 1;
	rt->listen_fds = calloc(cf->nlisten * (size_t)rt->nslots + 1,
	    sizeof(int));
	rt->dir_fds = calloc(cf->ndirs + 1, sizeof(int));
	rt->access_fds = calloc(cf->nservers, sizeof(int));
	if (!rt->listen_fds || !rt->dir_fds || !rt->access_fds)
		goto failed;
	for (i = 0; i < cf->nlisten * (size_t)rt->nslots; i++)
		rt->listen_fds[i] = -1;
	for (i = 0; i < cf->ndirs; i++)
		rt->dir_fds[i] = -1;
	for (i = 0; i < cf->nservers; i++)
		rt->access_fds[i] = -1;
	if (resolve_user(rt) == -1 || runtime_open_tls(rt) == -1 ||
	    runtime_open_fds(rt, old) == -1) {
		runtime_close(rt, old);
		runtime_free(rt);
		return NULL;
	}
	return rt;

failed:
	log_at(L_CRIT, errno, "runtime");
	if (rt != NULL) {
		free(rt->listen_fds);
		free(rt->dir_fds);
		free(rt->access_fds);
		free(rt);
	}
	mime_free(mime);
	config_free(cf);
	return NULL;
}

/*
 * The kernel resets what is queued on a closed socket unless it may move
 * it to the others of its group (net.ipv4.tcp_migrate_req, Linux 5.14).
 */
static bool
migrate_req(void)
{
	char c = '0';
	int fd;

	fd = open("/proc/sys/net/ipv4/tcp_migrate_req", O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return false;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

/* A reload to fewer workers closes the sockets of the slots that go. */
static void
say_closed_slots(const struct runtime *old, const struct runtime *new)
{
	if (new == NULL || new->nslots >= old->nslots)
		return;
	if (migrate_req())
		log_notice("the listening sockets of workers %d to %d close; "
		    "connections queued on them move to the others "
		    "(net.ipv4.tcp_migrate_req)", new->nslots,
		    old->nslots - 1);
	else
		log_warn("the listening sockets of workers %d to %d close; "
		    "connections queued on them are reset (the sysctl "
		    "net.ipv4.tcp_migrate_req = 1 would move them to the "
		    "others)", new->nslots, old->nslots - 1);
}

void
runtime_retire(struct runtime *old, const struct runtime *new)
{
	say_closed_slots(old, new);
	runtime_close(old, new);
	runtime_free(old);
}

void
runtime_free(struct runtime *rt)
{
	if (rt == NULL)
		return;
	for (size_t i = 0; rt->peer_row != NULL && i < rt->cf->nupstreams; i++)
		free(rt->peer_row[i]);
	free(rt->peer_row);
	free(rt->server_row);
	mime_free(rt->mime);
	tls_conf_free(rt->tls);
	tls_client_free(rt->tls_up);
	config_free(rt->cf);
	free(rt->listen_fds);
	free(rt->dir_fds);
	free(rt->access_fds);
	free(rt->mc_fds);
	free(rt);
}

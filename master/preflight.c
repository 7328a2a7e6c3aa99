/*
 * What a config needs from the machine, checked before anything is
 * opened or bound: the users exist, the log files and the pid file's
 * folder can be written safely by root and reopened by the workers, the
 * listening addresses can be bound, the store file is safe to open.
 *
 * "corral -t" runs exactly these checks, and start and reload run them
 * first, so that what -t accepts starts and what start refuses, -t
 * reported.  Nothing here creates or changes a file.
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "master/config.h"
#include "master/fsafe.h"
#include "master/master.h"
#include "worker/static.h"

#define GROUPS_MAX	256

static int __attribute__((format(printf, 5, 6)))
at(const struct config *cf, int line, char *out, size_t outlen,
    const char *fmt, ...)
{
	const char *file = config_where(cf, line, &line);
	va_list ap;
	int n;

	if (line > 0)
		n = snprintf(out, outlen, "%s:%d: ", file, line);
	else
		n = snprintf(out, outlen, "%s: ", file);
	if (n >= 0 && (size_t)n < outlen) {
		va_start(ap, fmt);
		vsnprintf(out + n, outlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int
master_user(const struct config *cf, struct fsafe_user *u, char *err,
    size_t errlen)
{
	const char *user = cf->user != NULL ? cf->user : "nobody";
	struct passwd *pw;
	struct group *gr;

	memset(u, 0, sizeof(*u));
	if (geteuid() != 0 || strcmp(user, "root") == 0)
		return 0;
	if ((pw = getpwnam(user)) == NULL)
		return at(cf, cf->lines.user, err, errlen,
		    "user \"%s\" does not exist", user);
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	if (cf->group != NULL) {
		if ((gr = getgrnam(cf->group)) == NULL)
			return at(cf, cf->lines.group, err, errlen,
			    "group \"%s\" does not exist", cf->group);
		u->gid = gr->gr_gid;
	}
	u->name = cf->user != NULL ? cf->user : "nobody";
	u->set = true;
	return 0;
}

struct mime_table *
master_mime(const struct config *cf, char *err, size_t errlen)
{
	char why[PATH_MAX + 256];
	struct mime_table *mt;

	if ((mt = mime_load(cf->mime_types, why, sizeof(why))) == NULL)
		at(cf, cf->lines.mime_types, err, errlen, "mime_types %s", why);
	return mt;
}

/* Mode bits of a folder let the user (uid, gid and groups) enter it. */
static bool
may_enter(const struct stat *st, uid_t uid, const gid_t *groups, int n)
{
	if (st->st_uid == uid)
		return st->st_mode & S_IXUSR;
	for (int i = 0; i < n; i++)
		if (groups[i] == st->st_gid)
			return st->st_mode & S_IXGRP;
	return st->st_mode & S_IXOTH;
}

/*
 * Workers reopen logs by path after a rotation, as their user: every
 * folder on the way must let them through.  Returns the first that does
 * not, in buf, or NULL.
 */
static const char *
blocked_folder(const char *path, const struct fsafe_user *u, char *buf,
    size_t size)
{
	gid_t groups[GROUPS_MAX];
	int n = GROUPS_MAX;
	struct stat st;
	char *p;

	if (getgrouplist(u->name, u->gid, groups, &n) == -1)
		n = 0;
	if (snprintf(buf, size, "%s", path) >= (int)size)
		return NULL;
	for (p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode) &&
		    !may_enter(&st, u->uid, groups, n))
			return buf;
		*p = '/';
	}
	return NULL;
}

static int
check_log(const struct config *cf, const char *what, const char *path,
    int line, const struct fsafe_user *u, master_warn_fn *warn, char *err,
    size_t errlen)
{
	char why[PATH_MAX + 256], dir[PATH_MAX];
	const char *blocked;

	if (fsafe_check(path, FSAFE_LOG, u, why, sizeof(why)) == -1)
		return at(cf, line, err, errlen, "%s %s", what, why);
	if (u->set && warn != NULL &&
	    (blocked = blocked_folder(path, u, dir, sizeof(dir))) != NULL) {
		at(cf, line, why, sizeof(why), "%s %s: the workers' user %s "
		    "cannot enter %s, so they cannot reopen the log after a "
		    "rotation (SIGUSR1)", what, path, u->name, blocked);
		warn(why);
	}
	return 0;
}

/* The errno of binding addr once, as start will (0: it binds). */
int
master_bind_error(const struct sockaddr_storage *addr, socklen_t addrlen)
{
	int fd, on = 1, e;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (addr->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	e = bind(fd, (const struct sockaddr *)addr, addrlen) == -1 ? errno : 0;
	close(fd);
	return e;
}

/*
 * With reuseport the master holds workers x addresses listening sockets
 * (and a reload that adds workers opens theirs beside them): they, and
 * what else it opens, must fit under its descriptor limit.
 */
static int
check_listen_fds(const struct config *cf, char *err, size_t errlen)
{
	size_t need = cf->nlisten * (size_t)cf->workers, spare;
	struct rlimit rl;

	if (!cf->reuseport || getrlimit(RLIMIT_NOFILE, &rl) == -1 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return 0;
	/* Logs, folders, the store, the memcached listener, stdio. */
	spare = cf->nservers + cf->ndirs + cf->memcached.nlisten + 64;
	if ((rlim_t)(need + spare) <= rl.rlim_cur)
		return 0;
	return at(cf, cf->lines.reuseport ? cf->lines.reuseport :
	    cf->lines.listen, err, errlen, "reuseport: %d workers on %zu "
	    "listen addresses need %zu sockets, and the descriptor limit is "
	    "%llu: raise it (ulimit -n) or set reuseport = off", cf->workers,
	    cf->nlisten, need, (unsigned long long)rl.rlim_cur);
}

/*
 * Binds each address once, as start will: an address that is not this
 * machine's, or a port the user may not bind, fails here.  An address in
 * use is not an error here: it may be ours, running.
 */
static int
check_listen(const struct config *cf, char *err, size_t errlen)
{
	int e;

	for (size_t i = 0; i < cf->nlisten; i++) {
		const struct config_listen *l = &cf->listen[i];

		e = master_bind_error(&l->addr, l->addrlen);
		if (e != 0 && e != EADDRINUSE)
			return at(cf, cf->lines.listen, err, errlen,
			    "listen \"%s\": %s", l->text, strerror(e));
	}
	return check_listen_fds(cf, err, errlen);
}

/*
 * The memcached listener's addresses: a TCP one as above; a unix socket's
 * folder must be one where start may remove a stale socket and make its
 * own (fsafe's rules for a file replaced as root), and the name must not
 * be a file of another kind, which start would refuse to remove.
 */
static int
check_mc_listen(const struct config *cf, char *err, size_t errlen)
{
	const struct config_memcached *m = &cf->memcached;
	char why[PATH_MAX + 256];
	struct stat st;
	int e;

	for (size_t i = 0; i < m->nlisten; i++) {
		const struct config_peer *p = &m->listen[i];
		const char *path =
		    ((const struct sockaddr_un *)&p->addr)->sun_path;

		if (p->addr.ss_family == AF_UNIX) {
			if (fsafe_check_replace(path, why, sizeof(why)) == -1)
				return at(cf, m->line, err, errlen,
				    "memcached listen %s", why);
			if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
				return at(cf, m->line, err, errlen,
				    "memcached listen \"%s\": a file that is "
				    "not a socket is there", p->text);
			continue;
		}
		e = master_bind_error(&p->addr, p->addrlen);
		if (e != 0 && e != EADDRINUSE)
			return at(cf, m->line, err, errlen,
			    "memcached listen \"%s\": %s", p->text,
			    strerror(e));
	}
	return 0;
}

int
master_preflight(const struct config *cf, master_warn_fn *warn, char *err,
    size_t errlen)
{
	char why[PATH_MAX + 256];
	struct fsafe_user u;

	if (master_user(cf, &u, err, errlen) == -1)
		return -1;
	if (cf->error_log != NULL && check_log(cf, "error_log",
	    cf->error_log, cf->lines.error_log, &u, warn, err, errlen) == -1)
		return -1;
	for (size_t i = 0; i < cf->nservers; i++) {
		const struct config_server *s = &cf->servers[i];

		if (s->access_log != NULL && check_log(cf, "access_log",
		    s->access_log, s->access_log_line, &u, warn, err,
		    errlen) == -1)
			return -1;
	}
	if (cf->pid_file != NULL &&
	    fsafe_check_replace(cf->pid_file, why, sizeof(why)) == -1)
		return at(cf, cf->lines.pid_file, err, errlen, "pid_file %s",
		    why);
	/* Made anew at each start (unlinked, then O_EXCL): a pid file's
	 * rules. */
	if (cf->stats_file != NULL &&
	    fsafe_check_replace(cf->stats_file, why, sizeof(why)) == -1)
		return at(cf, cf->stats_file_line, err, errlen,
		    "stats_file %s", why);
	if (cf->cache.size > 0 && cf->cache.path != NULL &&
	    fsafe_check(cf->cache.path, FSAFE_STORE, NULL, why,
	    sizeof(why)) == -1)
		return at(cf, cf->cache.path_line, err, errlen,
		    "cache path %s", why);
	/* The store's layout, with the words store_create() would use. */
	if (master_check_store(cf, err, errlen) == -1)
		return -1;
	if (check_listen(cf, err, errlen) == -1)
		return -1;
	return check_mc_listen(cf, err, errlen);
}

/*
 * The memcached listener's sockets (worker/mc_conn.c serves them): TCP
 * addresses and unix sockets, bound by the master like the HTTP ones and
 * handed over across a reload when their address stays.  Never UDP.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"

#define MC_BACKLOG	1024

static bool
same_peer(const struct config_peer *a, const struct config_peer *b)
{
	return a->addrlen == b->addrlen &&
	    memcmp(&a->addr, &b->addr, a->addrlen) == 0;
}

static int
adopt(const struct runtime *old, const struct config_peer *p)
{
	const struct config_memcached *m;

	if (old == NULL || old->mc_fds == NULL)
		return -1;
	m = &old->cf->memcached;
	for (size_t i = 0; i < m->nlisten; i++)
		if (old->mc_fds[i] != -1 && same_peer(&m->listen[i], p))
			return old->mc_fds[i];
	return -1;
}

/* A socket file left by a server that is gone is removed; a live one is
 * "in use", as a TCP port would be. */
static int
clear_unix_path(const struct config_peer *p)
{
	const struct sockaddr_un *un = (const struct sockaddr_un *)&p->addr;
	struct stat st;
	int fd, rc;

	if (lstat(un->sun_path, &st) == -1)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		log_crit("bind %s: a file that is not a socket is there",
		    p->text);
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	rc = connect(fd, (const struct sockaddr *)un, p->addrlen);
	close(fd);
	if (rc == 0) {
		log_crit("bind %s: %s", p->text, strerror(EADDRINUSE));
		return -1;
	}
	unlink(un->sun_path);
	return 0;
}

/*
 * A unix socket is bound and set up under a name of its own beside the
 * path, then renamed into place: the path appears only once it listens,
 * so a client that waits for it never finds it refusing.  False when
 * that name does not fit: then it is bound at the path itself.
 */
static bool
stage_name(const struct config_peer *p, struct sockaddr_un *tmp,
    socklen_t *len)
{
	const struct sockaddr_un *un = (const struct sockaddr_un *)&p->addr;
	struct stat st;
	int n;

	memset(tmp, 0, sizeof(*tmp));
	tmp->sun_family = AF_UNIX;
	n = snprintf(tmp->sun_path, sizeof(tmp->sun_path), "%s.%ld",
	    un->sun_path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp->sun_path))
		return false;
	/* Left by a master with our pid that died between bind and rename. */
	if (lstat(tmp->sun_path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(tmp->sun_path);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
	    (size_t)n + 1);
	return true;
}

static int
listen_peer(const struct runtime *rt, const struct config_peer *p)
{
	const char *path = ((const struct sockaddr_un *)&p->addr)->sun_path;
	const struct sockaddr *sa = (const struct sockaddr *)&p->addr;
	socklen_t salen = p->addrlen;
	struct sockaddr_un tmp;
	int fd, on = 1, rc;
	mode_t mask;
	bool un = p->addr.ss_family == AF_UNIX, staged = false;

	if (un && clear_unix_path(p) == -1)
		return -1;
	if (un && (staged = stage_name(p, &tmp, &salen))) {
		sa = (const struct sockaddr *)&tmp;
		path = tmp.sun_path;
	}
	fd = socket(p->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_at(L_CRIT, errno, "socket %s", p->text);
		return -1;
	}
	if (!un)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (p->addr.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	/*
	 * Writers of pages are the workers' user and its group only: the
	 * socket is made 0660 by the umask, and given to them without
	 * following a link that someone put in its place since (preflight
	 * refused a folder where others could).
	 */
	mask = umask(0117);
	rc = bind(fd, sa, salen);
	umask(mask);
	if (rc == -1) {
		log_at(L_CRIT, errno, "bind %s", p->text);
		close(fd);
		return -1;
	}
	if (un && rt->drop_privileges && fchownat(AT_FDCWD, path, rt->uid,
	    rt->gid, AT_SYMLINK_NOFOLLOW) == -1) {
		log_at(L_CRIT, errno, "chown %s", p->text);
		goto failed;
	}
	if (listen(fd, MC_BACKLOG) == -1) {
		log_at(L_CRIT, errno, "listen %s", p->text);
		goto failed;
	}
	if (staged && rename(path, ((const struct sockaddr_un *)&p->addr)->
	    sun_path) == -1) {
		log_at(L_CRIT, errno, "rename %s into place", path);
		goto failed;
	}
	return fd;

failed:
	if (un)
		unlink(path);
	close(fd);
	return -1;
}

int
mc_listen_open(struct runtime *rt, const struct runtime *old)
{
	const struct config_memcached *m = &rt->cf->memcached;
	size_t i;

	if (m->nlisten == 0)
		return 0;
	if ((rt->mc_fds = malloc(m->nlisten * sizeof(int))) == NULL)
		return -1;
	for (i = 0; i < m->nlisten; i++)
		rt->mc_fds[i] = -1;
	for (i = 0; i < m->nlisten; i++) {
		rt->mc_fds[i] = adopt(old, &m->listen[i]);
		if (rt->mc_fds[i] == -1)
			rt->mc_fds[i] = listen_peer(rt, &m->listen[i]);
		if (rt->mc_fds[i] == -1)
			return -1;
	}
	return 0;
}

void
mc_listen_close(struct runtime *rt, const struct runtime *keep)
{
	const struct config_memcached *m = &rt->cf->memcached;
	const struct config_memcached *k = keep ? &keep->cf->memcached : NULL;
	size_t i, j;
	bool kept;

	for (i = 0; rt->mc_fds != NULL && i < m->nlisten; i++) {
		if (rt->mc_fds[i] == -1)
			continue;
		kept = false;
		for (j = 0; k != NULL && keep->mc_fds != NULL &&
		    j < k->nlisten; j++)
			kept |= keep->mc_fds[j] == rt->mc_fds[i];
		if (!kept)
			close(rt->mc_fds[i]);
	}
}

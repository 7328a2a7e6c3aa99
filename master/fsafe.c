/*
 * Opening files as root without being tricked by other users' links (see
 * fsafe.h).  Every open goes through the folder's descriptor, so the
 * folder checked is the folder used.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "master/fsafe.h"

/* The folder a path names a file in, opened and looked at once. */
struct place {
	int dfd;
	char dir[PATH_MAX];
	const char *base;
	struct stat st;
	bool shared;		/* writable by someone besides root and us */
};

static int __attribute__((format(printf, 3, 4)))
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static bool
is_us(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

static const char *
user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd *pw = getpwuid(uid);

	if (pw != NULL)
		snprintf(buf, size, "%s", pw->pw_name);
	else
		snprintf(buf, size, "uid %u", (unsigned)uid);
	return buf;
}

/*
 * Writable only by root (or the user we run as): owned by one of them and
 * not writable by a group other than root's or by everyone.
 */
static bool
private_folder(const struct stat *st)
{
	return is_us(st->st_uid) && !(st->st_mode & S_IWOTH) &&
	    !((st->st_mode & S_IWGRP) && st->st_gid != 0);
}

static void
place_close(struct place *pl)
{
	if (pl->dfd != -1)
		close(pl->dfd);
	pl->dfd = -1;
}

static int
place_open(struct place *pl, const char *path, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	pl->dfd = -1;
	if (slash == NULL || slash[1] == '\0')
		return fail(err, errlen, "%s: not a file name", path);
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof(pl->dir))
		return fail(err, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
	memcpy(pl->dir, path, n);
	pl->dir[n] = '\0';
	pl->base = slash + 1;
	pl->dfd = open(pl->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pl->dfd == -1 || fstat(pl->dfd, &pl->st) == -1) {
		fail(err, errlen, "%s: folder %s: %s", path, pl->dir,
		    strerror(errno));
		place_close(pl);
		return -1;
	}
	pl->shared = !private_folder(&pl->st);
	/* Anyone could rename their own file over ours there. */
	if ((pl->st.st_mode & S_IWOTH) && !(pl->st.st_mode & S_ISVTX)) {
		fail(err, errlen, "%s: the folder %s can be written by every "
		    "user and has no sticky bit; corral opens no file there",
		    path, pl->dir);
		place_close(pl);
		return -1;
	}
	return 0;
}

/* A symlink is followed only where no one but root (or we) made it. */
static int
link_trusted(const struct place *pl, const char *path, char *err,
    size_t errlen)
{
	struct stat lst;

	if (fstatat(pl->dfd, pl->base, &lst, AT_SYMLINK_NOFOLLOW) == -1)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	if (!pl->shared && is_us(lst.st_uid))
		return 0;
	return fail(err, errlen, "%s: a symbolic link in a folder that "
	    "other users can write; corral does not follow it as root",
	    path);
}

/* What an opened (or existing) file must be. */
static int
file_ok(const struct place *pl, const struct stat *st, enum fsafe_how how,
    bool followed, const struct fsafe_user *u, const char *path, char *err,
    size_t errlen)
{
	char who[64];

	if (how == FSAFE_STORE && !S_ISREG(st->st_mode))
		return fail(err, errlen, "%s: not a regular file", path);
	if (!S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode) &&
	    !S_ISFIFO(st->st_mode))
		return fail(err, errlen, "%s: not a file, a device or a pipe",
		    path);
	if (!pl->shared || followed)
		return 0;
	if (!is_us(st->st_uid) && !(u != NULL && u->set &&
	    st->st_uid == u->uid))
		return fail(err, errlen, "%s: owned by %s, in a folder that "
		    "other users can write; only files of root%s%s are used "
		    "there", path, user_name(st->st_uid, who, sizeof(who)),
		    u != NULL && u->set ? " or " : "",
		    u != NULL && u->set ? u->name : "");
	if (S_ISREG(st->st_mode) && st->st_nlink != 1)
		return fail(err, errlen, "%s: has %lu hard links, in a folder "
		    "that other users can write", path,
		    (unsigned long)st->st_nlink);
	return 0;
}

int
fsafe_open(const char *path, enum fsafe_how how, const struct fsafe_user *u,
    char *err, size_t errlen)
{
	int flags = how == FSAFE_LOG ? O_WRONLY | O_APPEND | O_CREAT :
	    O_RDWR | O_CREAT;
	mode_t mode = how == FSAFE_LOG ? 0640 : 0600;
	bool followed = false;
	struct place pl;
	struct stat st;
	int fd;

	if (place_open(&pl, path, err, errlen) == -1)
		return -1;
	/* Not blocking on a pipe without a reader, nor taking a tty. */
	flags |= O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	fd = openat(pl.dfd, pl.base, flags | O_NOFOLLOW, mode);
	if (fd == -1 && errno == ELOOP) {
		if (link_trusted(&pl, path, err, errlen) == -1)
			goto failed;
		followed = true;
		fd = openat(pl.dfd, pl.base, flags, mode);
	}
	if (fd == -1) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		goto failed;
	}
	if (fstat(fd, &st) == -1) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		goto failed;
	}
	if (file_ok(&pl, &st, how, followed, u, path, err, errlen) == -1)
		goto failed;
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		goto failed;
	}
	/* Workers reopen logs by path after a rotation: theirs, then. */
	if (how == FSAFE_LOG && u != NULL && u->set && S_ISREG(st.st_mode) &&
	    (st.st_uid != u->uid || st.st_gid != u->gid) &&
	    fchown(fd, u->uid, u->gid) == -1) {
		fail(err, errlen, "%s: chown to %s: %s", path, u->name,
		    strerror(errno));
		goto failed;
	}
	place_close(&pl);
	return fd;

failed:
	if (fd != -1)
		close(fd);
	place_close(&pl);
	return -1;
}

int
fsafe_check(const char *path, enum fsafe_how how, const struct fsafe_user *u,
    char *err, size_t errlen)
{
	int amode = how == FSAFE_LOG ? W_OK : R_OK | W_OK;
	bool followed = false;
	struct place pl;
	struct stat st;
	int rc = -1;

	if (place_open(&pl, path, err, errlen) == -1)
		return -1;
	if (fstatat(pl.dfd, pl.base, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		if (errno != ENOENT)
			fail(err, errlen, "%s: %s", path, strerror(errno));
		else if (faccessat(AT_FDCWD, pl.dir, W_OK | X_OK,
		    AT_EACCESS) == -1)
			fail(err, errlen, "%s: cannot be created in %s: %s",
			    path, pl.dir, strerror(errno));
		else
			rc = 0;
		goto out;
	}
	if (S_ISLNK(st.st_mode)) {
		if (link_trusted(&pl, path, err, errlen) == -1)
			goto out;
		followed = true;
		if (fstatat(pl.dfd, pl.base, &st, 0) == -1) {
			/* A trusted link to a file not made yet. */
			if (errno != ENOENT)
				fail(err, errlen, "%s: %s", path,
				    strerror(errno));
			else
				rc = 0;
			goto out;
		}
	}
	if (file_ok(&pl, &st, how, followed, u, path, err, errlen) == -1)
		goto out;
	if (faccessat(pl.dfd, pl.base, amode, AT_EACCESS) == -1) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	place_close(&pl);
	return rc;
}

/* The folder of a file that root replaces by renaming. */
static int
replace_place(struct place *pl, const char *path, char *err, size_t errlen)
{
	if (place_open(pl, path, err, errlen) == -1)
		return -1;
	if (pl->shared && !(pl->st.st_mode & S_ISVTX)) {
		fail(err, errlen, "%s: the folder %s can be written by users "
		    "other than root and has no sticky bit; they could "
		    "replace the file", path, pl->dir);
		place_close(pl);
		return -1;
	}
	return 0;
}

int
fsafe_check_replace(const char *path, char *err, size_t errlen)
{
	struct place pl;
	int rc = 0;

	if (replace_place(&pl, path, err, errlen) == -1)
		return -1;
	if (faccessat(AT_FDCWD, pl.dir, W_OK | X_OK, AT_EACCESS) == -1)
		rc = fail(err, errlen, "%s: cannot be written in %s: %s",
		    path, pl.dir, strerror(errno));
	place_close(&pl);
	return rc;
}

int
fsafe_replace(const char *path, const void *data, size_t len, char *err,
    size_t errlen)
{
	char tmp[NAME_MAX + 1];
	struct place pl;
	uint64_t r;
	int fd = -1, i;

	if (replace_place(&pl, path, err, errlen) == -1)
		return -1;
	/* O_EXCL: a name someone made first is never ours to write. */
	for (i = 0; i < 16 && fd == -1; i++) {
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r = (uint64_t)getpid() * 2654435761u + (uint64_t)i;
		snprintf(tmp, sizeof(tmp), ".%.200s.%016llx", pl.base,
		    (unsigned long long)r);
		fd = openat(pl.dfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd == -1 && errno != EEXIST)
			break;
	}
	if (fd == -1) {
		fail(err, errlen, "%s: temporary file in %s: %s", path,
		    pl.dir, strerror(errno));
		place_close(&pl);
		return -1;
	}
	errno = EIO;	/* a short write sets none */
	i = write(fd, data, len) == (ssize_t)len;
	if (close(fd) == -1)
		i = 0;
	if (!i || renameat(pl.dfd, tmp, pl.dfd, pl.base) == -1) {
		fail(err, errlen, "%s: %s", path, strerror(errno));
		unlinkat(pl.dfd, tmp, 0);
		place_close(&pl);
		return -1;
	}
	place_close(&pl);
	return 0;
}

/*
 * Files the master opens as root by paths that other users may reach:
 * the logs, the pid file and the store file.  A symlink or a hard link
 * planted in a folder that someone else can write would make root append
 * to, truncate or hand over any file of the system (nginx's CVE-2016-1247
 * is this attack through its log folder).  So these opens:
 *
 * - never follow a symlink as the last part of the path unless only root
 *   (or the user corral runs as) could have made it: the link and its
 *   folder are theirs, and no one else can write the folder;
 * - in a folder that others can write, accept only a file owned by root
 *   or by the workers' user, with one link, and refuse a folder that
 *   everyone can write unless it has the sticky bit (/tmp), where no one
 *   can rename or remove another user's file;
 * - create temporary names with O_EXCL, and give files to the workers'
 *   user with fchown() on the descriptor, never chown() on a path.
 */
#ifndef CORRAL_FSAFE_H
#define CORRAL_FSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum fsafe_how {
	FSAFE_LOG,	/* append, create 0640, given to the workers' user */
	FSAFE_STORE,	/* read and write, create 0600, root's */
};

/* The workers' user: may own files in shared folders, and gets logs. */
struct fsafe_user {
	bool set;
	uid_t uid;
	gid_t gid;
	const char *name;
};

/* Opens path as described above; -1 with "path: why" in err. */
int fsafe_open(const char *path, enum fsafe_how how,
    const struct fsafe_user *u, char *err, size_t errlen);

/*
 * What fsafe_open() would refuse, without creating or changing anything
 * (corral -t); 0 when the file may be opened, -1 with "path: why" in err.
 */
int fsafe_check(const char *path, enum fsafe_how how,
    const struct fsafe_user *u, char *err, size_t errlen);

/*
 * Replaces path with len bytes of data: written to a temporary name made
 * with O_EXCL in the same folder, then renamed over it, so no reader sees
 * half a file.  The folder must be one that only root (and we) can change,
 * or be sticky.  -1 with "path: why" in err.
 */
int fsafe_replace(const char *path, const void *data, size_t len,
    char *err, size_t errlen);

/* The checks of fsafe_replace(), without writing (corral -t). */
int fsafe_check_replace(const char *path, char *err, size_t errlen);

#endif

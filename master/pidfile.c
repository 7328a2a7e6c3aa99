/*
 * The pid file, and detaching from the terminal: what the master does
 * once, at start, before it forks any worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "master/config.h"
#include "master/fsafe.h"
#include "master/log.h"
#include "master/master.h"

/* Returns the pid of a live process that holds the pid file, or 0. */
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
	if (pid <= 0 || pid == getpid() ||
	    (kill((pid_t)pid, 0) == -1 && errno == ESRCH))
		return 0;
	return (pid_t)pid;
}

/*
 * Written to a temporary name (O_EXCL) and renamed, so no reader sees it
 * half, in a folder only root can change (fsafe.h).
 */
int
master_pidfile_write(const char *path)
{
	char buf[32], err[PATH_MAX + 256];
	int n;

	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (fsafe_replace(path, buf, (size_t)n, err, sizeof(err)) == -1) {
		log_crit("pid file %s", err);
		return -1;
	}
	return 0;
}

/* Refuses to start over a live corral; a stale pid file is replaced. */
int
master_check_pidfile(const struct config *cf)
{
	pid_t pid;

	if (cf->pid_file == NULL)
		return 0;
	pid = pidfile_live(cf->pid_file);
	if (pid == 0)
		return 0;
	fprintf(stderr, "corral: %s: corral is already running as pid %d\n",
	    cf->pid_file, (int)pid);
	return -1;
}

void
master_daemonize(void)
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

/*
 * Error log.  Each line is formatted into one buffer and written with one
 * write(2) to a file opened O_APPEND, so lines from the master and all
 * workers never interleave.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "master/log.h"

int log_level_max = L_NOTICE;

static int log_fd = STDERR_FILENO;
static int log_tee;
static char log_role[32] = "master";

static const char *const level_names[] = {
	"crit", "error", "warn", "notice", "info", "debug"
};

int
log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
	    i++)
		if (strcmp(name, level_names[i]) == 0)
			return (int)i;
	return -1;
}

int
log_open(const char *path)
{
	int fd;

	if (path == NULL) {
		if (log_fd != STDERR_FILENO)
			close(log_fd);
		log_fd = STDERR_FILENO;
		return 0;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = fd;
	return 0;
}

void
log_use_fd(int fd)
{
	if (log_fd != STDERR_FILENO && log_fd != fd)
		close(log_fd);
	log_fd = fd == -1 ? STDERR_FILENO : fd;
}

void
log_tee_stderr(int on)
{
	log_tee = on;
}

void
log_set_role(const char *role)
{
	snprintf(log_role, sizeof(log_role), "%s", role);
}

static void
log_vwrite(int level, int err, const char *fmt, va_list ap)
{
	char line[2048];
	struct tm tm;
	time_t now;
	size_t n;
	int rc;

	now = time(NULL);
	localtime_r(&now, &tm);
	n = strftime(line, sizeof(line), "%Y/%m/%d %H:%M:%S", &tm);
	rc = snprintf(line + n, sizeof(line) - n, " [%s] %d %s: ",
	    level_names[level], (int)getpid(), log_role);
	if (rc > 0)
		n += (size_t)rc;
	rc = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	if (rc > 0)
		n += (size_t)rc;
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	if (err != 0) {
		rc = snprintf(line + n, sizeof(line) - n, ": %s",
		    strerror(err));
		if (rc > 0)
			n += (size_t)rc;
		if (n >= sizeof(line) - 1)
			n = sizeof(line) - 2;
	}
	line[n++] = '\n';
	/* A failed log write has nowhere to be reported. */
	if (write(log_fd, line, n) == -1)
		return;
	if (log_tee && log_fd != STDERR_FILENO &&
	    write(STDERR_FILENO, line, n) == -1)
		return;
}

void
log_write(int level, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(level, err, fmt, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(L_CRIT, err, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite(L_CRIT, 0, fmt, ap);
	va_end(ap);
	exit(1);
}

/*
 * Error log: level-tagged lines with time, pid and process role.
 *
 *   2026/11/30 08:00:00 [error] 1234 worker 0: open "/x": Permission denied
 *
 * The level is checked before anything is formatted, so a debug line that is
 * switched off costs one compare.
 */
#ifndef CORRAL_LOG_H
#define CORRAL_LOG_H

#include <errno.h>

enum log_level { L_CRIT, L_ERROR, L_WARN, L_NOTICE, L_INFO, L_DEBUG };

extern int log_level_max;

/* Parses "crit".."debug"; returns -1 for an unknown name. */
int log_level_parse(const char *name);

/* Opens (or reopens) the log file in append mode; NULL logs to stderr.
 * Returns 0, or -1 with errno set and the old log kept. */
int log_open(const char *path);

/* Makes fd the log, closing the previous file; -1 logs to stderr.  The
 * master opens its logs with fsafe_open() and hands them over here. */
void log_use_fd(int fd);

/* While on, lines also go to stderr (start-up, before detaching). */
void log_tee_stderr(int on);

/* Sets the role shown on each line ("master", "worker 3"). */
void log_set_role(const char *role);

/* Writes one line; err is an errno value appended as ": strerror", or 0. */
void log_write(int level, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_at(lvl, err, ...)                                           \
	do {                                                            \
		if ((lvl) <= log_level_max)                             \
			log_write((lvl), (err), __VA_ARGS__);           \
	} while (0)

#define log_crit(...)   log_at(L_CRIT, 0, __VA_ARGS__)
#define log_error(...)  log_at(L_ERROR, 0, __VA_ARGS__)
#define log_warn(...)   log_at(L_WARN, 0, __VA_ARGS__)
#define log_notice(...) log_at(L_NOTICE, 0, __VA_ARGS__)
#define log_info(...)   log_at(L_INFO, 0, __VA_ARGS__)
#define log_debug(...)  log_at(L_DEBUG, 0, __VA_ARGS__)

/* Start-up failures only: log at crit and exit(1). fatal() adds errno. */
void fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

#endif

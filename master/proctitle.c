/*
 * Linux shows /proc/PID/cmdline, which is the memory of argv.  To write a
 * longer title than the command line we also take the environment strings
 * that follow argv in memory, after moving environ to the heap.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/proctitle.h"

extern char **environ;

static char *title_start;
static size_t title_room;
/* Not static: the copy lives as long as the process, and a global keeps it
 * visibly reachable for leak checkers. */
char **proctitle_env;

void
proctitle_init(int argc, char **argv)
{
	char *end;
	size_t n;
	int i;

	if (argc == 0 || argv[0] == NULL)
		return;
	end = argv[0] + strlen(argv[0]) + 1;
	for (i = 1; i < argc && argv[i] == end; i++)
		end = argv[i] + strlen(argv[i]) + 1;
	for (n = 0; environ[n] != NULL; n++)
		;
	proctitle_env = calloc(n + 1, sizeof(char *));
	if (proctitle_env == NULL)
		return;
	for (i = 0; environ[i] != NULL; i++) {
		if (environ[i] == end)
			end = environ[i] + strlen(environ[i]) + 1;
		proctitle_env[i] = strdup(environ[i]);
		if (proctitle_env[i] == NULL)
			return;
	}
	environ = proctitle_env;
	title_start = argv[0];
	title_room = (size_t)(end - argv[0]);
}

void
proctitle_set(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (title_start == NULL || title_room < 2)
		return;
	va_start(ap, fmt);
	n = vsnprintf(title_start, title_room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < title_room)
		memset(title_start + n, '\0', title_room - (size_t)n);
}

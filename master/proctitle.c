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
static char **env_copy;

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
	env_copy = calloc(n + 1, sizeof(char *));
	if (env_copy == NULL)
		return;
	for (i = 0; environ[i] != NULL; i++) {
		if (environ[i] == end)
			end = environ[i] + strlen(environ[i]) + 1;
		env_copy[i] = strdup(environ[i]);
		if (env_copy[i] == NULL)
			return;
	}
	environ = env_copy;
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

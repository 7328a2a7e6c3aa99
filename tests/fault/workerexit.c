/*
 * A test-only LD_PRELOAD shim: a worker that dies as it starts, so the
 * tests can watch the master's respawn back-off.  Only workers make an
 * event base, so the first call to event_base_new() is where a worker
 * starts; the master never calls it.
 *
 *   CORRAL_WORKEREXIT_CODE=N   the worker exits with status N
 *   CORRAL_WORKEREXIT_SLOT=S   only the worker of slot S does (its
 *                              name, set before, ends in " wS")
 *
 * corral itself has no such hook.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct event_base;

struct event_base *event_base_new(void);

/* The worker's comm ("corral g1 w0") ends in " w" and slot. */
static int
is_slot(const char *slot)
{
	char comm[32], want[16];
	size_t n, w;
	FILE *f = fopen("/proc/self/comm", "r");

	if (f == NULL)
		return 0;
	n = fread(comm, 1, sizeof(comm) - 1, f);
	fclose(f);
	while (n > 0 && comm[n - 1] == '\n')
		n--;
	comm[n] = '\0';
	w = (size_t)snprintf(want, sizeof(want), " w%s", slot);
	return n >= w && strcmp(comm + n - w, want) == 0;
}

struct event_base *
event_base_new(void)
{
	struct event_base *(*real)(void);
	const char *code = getenv("CORRAL_WORKEREXIT_CODE");
	const char *slot = getenv("CORRAL_WORKEREXIT_SLOT");

	if (code != NULL && (slot == NULL || is_slot(slot)))
		_exit(atoi(code));
	real = (struct event_base *(*)(void))dlsym(RTLD_NEXT,
	    "event_base_new");
	return real != NULL ? real() : NULL;
}

/*
 * A test-only LD_PRELOAD shim: a worker that dies as it starts, so the
 * tests can watch the master's respawn back-off.  Only workers make an
 * event base, so the first call to event_base_new() is where a worker
 * starts; the master never calls it.
 *
 *   CORRAL_WORKEREXIT_CODE=N   the worker exits with status N
 *
 * corral itself has no such hook.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

struct event_base;

struct event_base *event_base_new(void);

struct event_base *
event_base_new(void)
{
	struct event_base *(*real)(void);
	const char *code = getenv("CORRAL_WORKEREXIT_CODE");

	if (code != NULL)
		_exit(atoi(code));
	real = (struct event_base *(*)(void))dlsym(RTLD_NEXT,
	    "event_base_new");
	return real != NULL ? real() : NULL;
}

/*
 * Helpers shared by the multi-process store tests: a clock that every
 * forked process sees, store creation, and waiting for children.
 */
#ifndef CORRAL_TEST_STORE_PROCS_H
#define CORRAL_TEST_STORE_PROCS_H

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "shm/store.h"

/* A clock that all processes share, so one of them can move time. */
static int64_t *shared_now;

static inline int64_t
shared_clock(void *arg)
{
	return __atomic_load_n(shared_now, __ATOMIC_RELAXED);
}

static inline struct store *
mk(size_t size, unsigned stripes, size_t max_object, unsigned slots)
{
	struct store_options o = {
		.size = size, .stripes = stripes, .max_object = max_object,
		.max_slots = slots,
	};
	char err[256];
	struct store *s = store_create(&o, err, sizeof(err));

	cr_assert_not_null(s, "store_create: %s", err);
	shared_now = mmap(NULL, sizeof(*shared_now), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(shared_now, MAP_FAILED);
	*shared_now = 1000000000;
	store_set_clock(s, shared_clock, NULL);
	return s;
}

/* fork(); the child dies with the test, so a timeout leaves no orphans. */
static inline pid_t
fork_child(void)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 ||
	    getppid() != parent))
		_exit(9);
	return pid;
}

static inline void
wait_ok(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child %d: status %#x", (int)pid, status);
}

static inline void
kill_wait(pid_t pid)
{
	int status;

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

#endif

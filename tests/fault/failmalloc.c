/*
 * A test-only LD_PRELOAD shim: fails every Nth allocation that corral's own
 * code makes in a worker process, so the tests can check that an
 * allocation failure costs one request or one connection and never the
 * worker.  Allocations made by libc, libevent and the rest are left alone,
 * as are the master's and a worker's start-up ones: counting begins at
 * the worker's first accept4(), so the count does not depend on how much
 * its start-up allocates.
 *
 *   CORRAL_FAILMALLOC_EVERY=N   fail one counted allocation in N, at
 *                               pseudo-random (a fixed sequence per process)
 *   CORRAL_FAILMALLOC_SKIP=K    count none of the first K after that
 *   CORRAL_FAILMALLOC_LOG=FILE  append one line per failure
 *
 * glibc's __libc_* entry points do the real work, so no dlsym() is needed
 * (dlsym itself allocates).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static long every = -1, skip;
static uintptr_t text_lo, text_hi;	/* the executable's code */
static unsigned long seen, failed;
static uint64_t rnd = 0x9e3779b97f4a7c15ULL;
static bool worker;
static bool accepting;		/* the worker's start-up is over */

static void
setup(void)
{
	const char *e = getenv("CORRAL_FAILMALLOC_EVERY");
	const char *s = getenv("CORRAL_FAILMALLOC_SKIP");

	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned long i, n = getauxval(AT_PHNUM);
	uintptr_t base = 0;

	every = e != NULL ? atol(e) : 0;
	skip = s != NULL ? atol(s) : 0;
	/* Where the executable (PIE or not) was loaded, from its headers. */
	for (i = 0; i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			base = (uintptr_t)ph - ph[i].p_vaddr;
	for (i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
			text_lo = base + ph[i].p_vaddr;
			text_hi = text_lo + ph[i].p_memsz;
		}
}

/* Workers are named "corral gG wN" right after fork (prctl). */
static bool
in_worker(void)
{
	char name[16] = "";

	if (worker)
		return true;
	if (prctl(PR_GET_NAME, name) == 0 && strncmp(name, "corral g", 8) == 0)
		worker = true;
	return worker;
}

static void
note(const char *what, size_t n)
{
	const char *path = getenv("CORRAL_FAILMALLOC_LOG");
	char line[96];
	int fd, len;

	if (path == NULL)
		return;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd == -1)
		return;
	len = snprintf(line, sizeof(line), "%d %s %zu\n", (int)getpid(), what,
	    n);
	if (write(fd, line, (size_t)len) < 0)
		len = 0;
	close(fd);
}

static bool
fail_now(void *caller, const char *what, size_t n)
{
	if (every == -1)
		setup();
	if (every <= 0 || !accepting || (uintptr_t)caller < text_lo ||
	    (uintptr_t)caller >= text_hi || !in_worker())
		return false;
	if (++seen <= (unsigned long)skip)
		return false;
	/* xorshift: failures land on every allocation site, not one. */
	rnd ^= rnd << 13;
	rnd ^= rnd >> 7;
	rnd ^= rnd << 17;
	if (rnd % (uint64_t)every != 0)
		return false;
	failed++;
	note(what, n);
	errno = ENOMEM;
	return true;
}

void *
malloc(size_t n)
{
	if (fail_now(__builtin_return_address(0), "malloc", n))
		return NULL;
	return __libc_malloc(n);
}

void *
calloc(size_t a, size_t b)
{
	if (fail_now(__builtin_return_address(0), "calloc", a * b))
		return NULL;
	return __libc_calloc(a, b);
}

void *
realloc(void *p, size_t n)
{
	if (fail_now(__builtin_return_address(0), "realloc", n))
		return NULL;
	return __libc_realloc(p, n);
}

/* The first accept4() ends the start-up: a worker accepts once it is
 * ready.  Made as a system call, so no libc symbol is needed. */
int
accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	accepting = true;
	return (int)syscall(SYS_accept4, fd, addr, len, flags);
}

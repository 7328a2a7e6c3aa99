/*
 * Steering new connections away from the sockets of slots that have no
 * worker (steer.h).  A socket's place in its reuseport group is the order
 * it joined in, which is its slot: the master opens an address's sockets
 * slot by slot, and a reload to fewer workers closes the last ones.  The
 * program takes a random number modulo the slots that are up, then skips
 * each slot that is down at or below it, in order, so it returns the
 * place of the n-th slot that is up: two instructions per slot down.
 */
#include <errno.h>
#include <linux/filter.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "master/steer.h"

#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF	68	/* Linux 5.3 */
#endif

static bool *applied;		/* the up[] last applied, or NULL */
static const struct runtime *applied_rt;
static int applied_n;

/* Back to the kernel's hash; an old kernel without detach gets a program
 * whose answer is no place, which means the same. */
static void
steer_off(int fd, const char *addr)
{
	struct sock_filter none[] = { BPF_STMT(BPF_RET | BPF_K, 0xffffffff) };
	struct sock_fprog prog = { 1, none };

	if (setsockopt(fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, NULL, 0) ==
	    0 || errno == ENOENT)
		return;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof(prog)) == -1)
		log_at(L_ERROR, errno, "reuseport steering off on %s", addr);
}

static void
steer_on(int fd, const char *addr, const bool *up, int n, int nup,
    struct sock_filter *code)
{
	struct sock_fprog prog;
	unsigned short len = 0;

	code[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	    (unsigned)SKF_AD_OFF + SKF_AD_RANDOM);
	code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_MOD | BPF_K,
	    (unsigned)nup);
	for (int s = 0; s < n; s++) {
		if (up[s])
			continue;
		code[len++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE |
		    BPF_K, (unsigned)s, 0, 1);
		code[len++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_ADD |
		    BPF_K, 1);
	}
	code[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
	prog.len = len;
	prog.filter = code;
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof(prog)) == -1)
		log_at(L_ERROR, errno, "reuseport steering on %s", addr);
}

void
steer_slots(const struct runtime *rt, const bool *up)
{
	int n = rt->nslots, nup = 0;
	struct sock_filter *code;
	bool *copy;

	if (n < 2)
		return;
	if (applied != NULL && applied_rt == rt && applied_n == n &&
	    memcmp(applied, up, (size_t)n * sizeof(*up)) == 0)
		return;
	for (int s = 0; s < n; s++)
		nup += up[s];
	code = calloc((size_t)(3 + 2 * (n - nup)), sizeof(*code));
	copy = malloc((size_t)n * sizeof(*up));
	if (code == NULL || copy == NULL) {
		/* Tried again on the next change or reload. */
		log_at(L_ERROR, errno, "reuseport steering");
		free(code);
		free(copy);
		return;
	}
	for (int s = 0; s < n; s++) {
		bool was = applied == NULL || applied_n != n || applied[s];

		if (was && !up[s])
			log_warn("worker %d is down: new connections go to the "
			    "other workers until it stays up", s);
		else if (!was && up[s])
			log_notice("worker %d is up: it takes new connections "
			    "again", s);
	}
	for (size_t i = 0; i < rt->cf->nlisten; i++) {
		int fd = runtime_listen_fd(rt, i, 0);

		if (nup == 0 || nup == n)
			steer_off(fd, rt->cf->listen[i].text);
		else
			steer_on(fd, rt->cf->listen[i].text, up, n, nup, code);
	}
	free(code);
	memcpy(copy, up, (size_t)n * sizeof(*up));
	free(applied);
	applied = copy;
	applied_rt = rt;
	applied_n = n;
}

void
steer_free(void)
{
	free(applied);
	applied = NULL;
	applied_rt = NULL;
}

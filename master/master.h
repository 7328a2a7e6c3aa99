/*
 * The master process: binds the listening sockets, forks the workers,
 * respawns them when they die and stops them on a signal.  It never serves
 * a request.
 */
#ifndef CORRAL_MASTER_H
#define CORRAL_MASTER_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct mime_table;

/*
 * What the master prepares from a config and every worker inherits across
 * fork: open sockets, document roots and logs.  Read-only in the workers.
 */
struct runtime {
	struct config *cf;
	struct mime_table *mime;
	int *listen_fds;		/* one per cf->listen */
	int *root_fds;			/* one per cf->servers, O_PATH dirs */
	int *access_fds;		/* one per cf->servers, -1 when off */
};

/*
 * Opens everything a config names and takes ownership of cf and mime; on
 * failure logs why, frees them and returns NULL.
 */
struct runtime *runtime_open(struct config *cf, struct mime_table *mime);

/* Frees a runtime and its config; descriptors are left to exit. */
void runtime_free(struct runtime *rt);

/* Runs the master loop until the server stops; returns the exit status. */
int master_run(struct runtime *rt, bool foreground);

#endif

/*
 * The master process: binds the listening sockets, forks the workers,
 * respawns them when they die, reloads the config and stops them on a
 * signal.  It never serves a request.
 */
#ifndef CORRAL_MASTER_H
#define CORRAL_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct config;
struct fsafe_user;
struct mime_table;
struct stats;
struct store;
struct tls_client;
struct tls_conf;
struct tls_keys;

/*
 * What the master prepares from a config and every worker inherits across
 * fork: open sockets, document roots and logs.  Read-only in the workers.
 */
struct runtime {
	struct config *cf;
	struct mime_table *mime;
	int *listen_fds;		/* [cf->listen][nslots]: see
					   runtime_listen_fd() */
	int nslots;			/* sockets per address: cf->workers
					   with reuseport, else 1 */
	int *dir_fds;			/* one per cf->dirs, O_PATH */
	int *access_fds;		/* one per cf->servers, -1 when off */
	int *mc_fds;			/* one per cf->memcached.listen */
	struct store *store;		/* shared by every generation; NULL
					   when cache.size is 0 */
	struct stats *stats;		/* the counters, always there */
	unsigned *server_row;		/* per cf->servers: its stats row */
	unsigned **peer_row;		/* [upstream][peer]: its stats row */
	struct tls_conf *tls;		/* NULL when no listen has "tls" */
	struct store *tls_store;	/* TLS sessions: the store, or a
					   mapping of their own when the
					   cache is off; may be NULL */
	struct tls_keys *tls_keys;	/* ticket keys, made by the master */
	struct tls_client *tls_up;	/* upstream groups over TLS; NULL
					   when none */
	bool drop_privileges;		/* started as root: workers switch */
	uid_t uid;
	gid_t gid;
	const char *user;		/* their name, for messages */
};

/* The socket of listen i that the worker in slot accepts from. */
static inline int
runtime_listen_fd(const struct runtime *rt, size_t i, int slot)
{
	return rt->listen_fds[i * (size_t)rt->nslots +
	    (size_t)(slot % rt->nslots)];
}

/* Receives one warning line ("FILE:LINE: what"). */
typedef void master_warn_fn(const char *msg);
/* One that writes it to the error log, at warn. */
master_warn_fn master_warn_log;

/*
 * What a config needs from the machine (preflight.c), checked without
 * changing anything: users, log files, the pid file's and the stats
 * file's folders, listening addresses, the store's file and layout.  corral -t runs it, and start and reload run
 * it first, so they agree.  Returns 0, or -1 with "FILE:LINE: why" in err;
 * warnings go to warn (may be NULL).
 */
int master_preflight(const struct config *cf, master_warn_fn *warn,
    char *err, size_t errlen);

/*
 * Loads the MIME types file cf names; NULL with "FILE:LINE: mime_types
 * why" in err.
 */
struct mime_table *master_mime(const struct config *cf, char *err,
    size_t errlen);

/*
 * The user the workers run as, when we are root (u->set); "FILE:LINE:
 * why" in err and -1 when it or the group does not exist.
 */
int master_user(const struct config *cf, struct fsafe_user *u, char *err,
    size_t errlen);

/*
 * Opens everything a config names, taking over the listening sockets of
 * old (may be NULL) whose address is unchanged, and takes ownership of cf
 * and mime.  On failure logs why, frees cf and mime, and returns NULL with
 * old untouched.
 */
struct runtime *runtime_open(struct config *cf, struct mime_table *mime,
    const struct runtime *old);

/* Binds a test socket to addr (SO_REUSEADDR only): 0 or the errno. */
int master_bind_error(const struct sockaddr_storage *addr, socklen_t addrlen);

/* The memcached listener's sockets (master/mc_listen.c), adopted from
 * old where the address stays; -1 after logging why. */
int mc_listen_open(struct runtime *rt, const struct runtime *old);
/* Closes them, except those that keep carries on. */
void mc_listen_close(struct runtime *rt, const struct runtime *keep);

/* Closes what old holds that new did not take over, and frees old. */
void runtime_retire(struct runtime *old, const struct runtime *new);

/* Frees a runtime and its config; descriptors are left to exit. */
void runtime_free(struct runtime *rt);

/* Opens a log for appending, owned by the workers' user; -1 on error. */
int runtime_open_log(const struct runtime *rt, const char *path);

/*
 * Opens cf's error log safely (fsafe.h) and makes it the log (stderr when
 * the config has none); -1 with "FILE:LINE: why" in err, the log kept.
 */
int master_error_log(const struct config *cf, char *err, size_t errlen);

/* Fails, saying why on stderr, when a live corral holds the pid file. */
int master_check_pidfile(const struct config *cf);
/* Writes our pid to path, atomically; -1 (logged) on failure. */
int master_pidfile_write(const char *path);
/* Detaches from the terminal (fork, setsid, stdio to /dev/null). */
void master_daemonize(void);

/*
 * Creates (or, with cache.persist, reopens) the shared-memory store before
 * anything forks; NULL with a message on stderr when it cannot be had.
 */
int master_open_store(struct runtime *rt);

/* What master_open_store() would refuse, for corral -t: 0, or -1 and
 * "FILE:LINE: cache: why" in err. */
int master_check_store(const struct config *cf, char *err, size_t errlen);

/*
 * Blocks the signals the master takes with sigtimedwait(); called before
 * the sockets are bound, so a signal that comes early waits for the loop.
 */
void master_block_signals(void);

/*
 * Makes the counters' mapping (shm/stats.h) before a socket listens, so
 * whoever can connect can read the counters (corral -s); -1 with a message
 * in the log when it cannot be had.  master_attach_stats() then gives the
 * first runtime's servers and peers their rows.
 */
int master_open_stats(const struct config *cf);
int master_attach_stats(struct runtime *rt);

/* corral -s: the counters from the stats (and cache) file; exit status. */
int monitor_stats(const struct config *cf, bool json);

/* corral -T: a summary every interval seconds, count times (0: forever). */
int monitor_summary(const struct config *cf, int interval, int count);

/* corral -P: purges a URL from the running server's cache; exit status. */
int monitor_purge(const struct config *cf, const char *url);

/*
 * Makes the ticket keys and, when the cache is off, the mapping for TLS
 * sessions; before anything forks, and again on reload.  0 or -1 logged.
 */
int master_open_tls(struct runtime *rt);

/* Runs the master loop until the server stops; returns the exit status. */
int master_run(struct runtime *rt, bool foreground);

#endif

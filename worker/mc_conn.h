/*
 * The memcached listener (memcached { listen = ... }): memcached's text
 * and meta protocols on the shared store, served by each worker's event
 * loop on the sockets the master bound (master/mc_listen.c).
 */
#ifndef CORRAL_MC_CONN_H
#define CORRAL_MC_CONN_H

/* Starts accepting on the listener's sockets, if any (worker start). */
void mc_listen_start(void);
/* Graceful stop: no new connections; idle ones close, busy ones after
 * their command. */
void mc_quit(void);
/* Closes every connection (worker exit). */
void mc_close_all(void);

#endif

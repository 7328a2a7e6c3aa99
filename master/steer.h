/*
 * With reuseport each worker slot has its own socket of each address, and
 * the kernel hashes a new connection to one of them.  A slot whose worker
 * keeps dying (the master backs its respawn off, up to 30 s) would take
 * its share of new connections and leave them waiting in its queue; so
 * while a slot is down, a small classic BPF program on each address's
 * socket group sends new connections only to the slots that are up.
 * What the slot's socket queued before stays there for its next worker.
 */
#ifndef CORRAL_STEER_H
#define CORRAL_STEER_H

#include <stdbool.h>

struct runtime;

/*
 * Makes new connections on rt's sockets go to the slots whose up[] is
 * true, spread at random; all of them again (the kernel's hash) when all
 * or none are up.  Does nothing when nothing changed since the last call
 * for the same runtime, or without reuseport.
 */
void steer_slots(const struct runtime *rt, const bool *up);

/* Frees what steer_slots() keeps; at exit. */
void steer_free(void);

#endif

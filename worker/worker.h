/*
 * A worker process: one libevent loop that accepts on the shared listening
 * sockets and serves HTTP until the master tells it to stop.
 */
#ifndef CORRAL_WORKER_H
#define CORRAL_WORKER_H

struct runtime;

/*
 * Runs worker number slot of generation gen, which uses store_slot in the
 * shared store and stats_slot for its counters; master_fd reads end of
 * file once the master is gone.  Never returns.
 */
void worker_main(const struct runtime *rt, int slot, unsigned gen,
    int store_slot, int stats_slot, int master_fd) __attribute__((noreturn));

#endif

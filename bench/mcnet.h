/*
 * The bench tools' side of a memcached connection (store_bench and
 * store_fill talk to a memcached on loopback).
 */
#ifndef CORRAL_BENCH_MCNET_H
#define CORRAL_BENCH_MCNET_H

#include <stddef.h>

/* A connection to 127.0.0.1:port with TCP_NODELAY, or -1. */
int mc_dial(int port);
/* Writes all of len bytes; -1 on an error. */
int write_all(int fd, const void *buf, size_t len);

#endif

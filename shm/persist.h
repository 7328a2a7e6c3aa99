/*
 * Private to shm/: the store's file (cache.path).  While corral runs, the
 * store lives in a sealed memfd and the file only says where (so that
 * corral -s can read the live counters); at a clean stop the master
 * writes the store into it, and with persist a restart reads it back,
 * checking every item.  A file cut short or damaged while the server
 * runs therefore harms nothing: it is only read at start.
 */
#ifndef CORRAL_PERSIST_H
#define CORRAL_PERSIST_H

#include <stddef.h>

struct store;
struct store_options;

/* What persist_open() would refuse about the path; 0 or -1 + err. */
int persist_check(const struct store_options *o, char *err, size_t errlen);
/* Opens and locks the file; loads it (persist) or starts empty. */
int persist_open(struct store *s, const struct store_options *o, char *err,
    size_t errlen);
/* The master's clean exit: writes the store (or its counters) out. */
void persist_save(struct store *s);

#endif

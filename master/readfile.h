/*
 * A whole file read into memory: the config file and its includes, and
 * the inputs the fuzz harnesses replay.
 */
#ifndef CORRAL_READFILE_H
#define CORRAL_READFILE_H

#include <stddef.h>

/* The bytes of path in a malloc'd buffer, *lenp of them; NULL and errno. */
char *readfile(const char *path, size_t *lenp);

#endif

/*
 * Process titles, so that ps shows each process's role:
 * "corral: master process /etc/corral/corral.conf", "corral: worker process".
 */
#ifndef CORRAL_PROCTITLE_H
#define CORRAL_PROCTITLE_H

/* Claims the argv and environ area for titles; call first thing in main. */
void proctitle_init(int argc, char **argv);

/* Sets the title that ps shows. */
void proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

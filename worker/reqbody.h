/*
 * A request body kept whole before it goes upstream (nginx's request
 * buffering): in memory up to client_body_buffer_size, then in an unnamed
 * file in client_body_temp_path (O_TMPFILE, or a name unlinked at once),
 * so nothing is left behind by a worker that dies.  FastCGI needs it for
 * a chunked body (CGI/1.1 wants CONTENT_LENGTH) and, with
 * fastcgi_request_buffering, for every body, so a slow client does not
 * hold an application process for the length of its upload.
 */
#ifndef CORRAL_REQBODY_H
#define CORRAL_REQBODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct reqbody;

/* An empty body; NULL when out of memory. */
struct reqbody *reqbody_new(void);

/* Appends len bytes; false (logged, with the client's name) when memory
 * or the temporary file fails: the request gets a 500. */
bool reqbody_add(struct reqbody *b, const char *p, size_t len,
    const char *client);

/* Bytes kept so far. */
uint64_t reqbody_size(const struct reqbody *b);

/*
 * The next piece of at most max bytes, from the start: a pointer valid
 * until the next call, with *n its length (0 at the end).  NULL when the
 * temporary file cannot be read (logged).
 */
const char *reqbody_next(struct reqbody *b, size_t max, size_t *n);

/* Whether every byte was handed out by reqbody_next(). */
bool reqbody_read_all(const struct reqbody *b);

void reqbody_free(struct reqbody *b);

#endif

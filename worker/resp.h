/*
 * Building a response on a connection: the status line, header lines and
 * body segments are queued, and leave together when the connection
 * writes.  Internal to worker/.
 */
#ifndef CORRAL_RESP_H
#define CORRAL_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct conn;
struct fentry;
struct http_request;
struct pin;
struct store_ref;

/* Starts a response: status line, Server and Date. */
void resp_status(struct conn *c, int status);

/* Starts a response with a ready-made status line and header lines. */
void resp_head(struct conn *c, int status, const char *head, size_t len);

/* Only the status line, with a reason phrase of len bytes (an upstream's). */
void resp_status_reason(struct conn *c, int status, const char *reason,
    size_t len);

/*
 * Writes "HTTP/1.1 <status> <reason>\r\n" at p (room for 15 + len bytes;
 * status has three digits) and returns its length.
 */
size_t resp_status_line(char *p, int status, const char *reason,
    size_t len);

/* Adds ready-made header lines ("Name: value\r\n..."). */
void resp_header(struct conn *c, const char *lines, size_t len);

/* Adds the line "<name><v>\r\n"; name has len bytes and ends in ": ". */
void resp_header_u64(struct conn *c, const char *name, size_t len,
    uint64_t v);

/* Adds one formatted header line; fmt has no CRLF. */
void resp_headerf(struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Ends the header block with Content-Length (when len >= 0) and the
 * Connection field.  For HEAD and 304 the caller pushes no body.
 */
void resp_end_headers(struct conn *c, int64_t len);

/*
 * A whole head from ready-made parts, in one copy: head (the status line
 * and fields), mid, then the add_header lines, tail (Content-Length, say)
 * and the end that resp_end_headers() writes.
 */
void resp_head_whole(struct conn *c, int status, const char *head,
    size_t hlen, const char *mid, size_t mlen, const char *tail,
    size_t tlen);

/* No memory to build the response: the connection is closed. */
void resp_fail(struct conn *c);

/* Queues body bytes; they must stay valid until ref is released. */
void resp_body_mem(struct conn *c, const void *p, size_t len,
    struct fentry *ref);

/* Queues part of an open file, sent with sendfile (or read+write). */
void resp_body_file(struct conn *c, struct fentry *ref, int fd, off_t off,
    off_t len);

/* Wraps a pinned store value so queued segments can share it. */
struct pin *pin_take(const struct store_ref *ref);

/* Drops one use of a pin; the last one releases the store value. */
void pin_put(struct pin *p);
/*
 * Unpins a value a response is done with, soon: under the lock of this
 * worker's next lookup in its stripe, or within 10 ms (store.h).
 */
void unpin_soon(struct store_ref *ref);
/* Drops the unpins left for later and their timer, at the worker's end. */
void unpin_end(void);

/* Queues bytes of a pinned store value; the pin is released once sent. */
void resp_body_pin(struct conn *c, struct pin *p, size_t off, size_t len);

/* Gives up on a response whose headers are queued: close after them. */
void resp_abort(struct conn *c);

/* Copies small body bytes into the output buffer. */
void resp_body_copy(struct conn *c, const void *p, size_t len);

/*
 * Queues body bytes that stay valid only until the next conn_flush() or
 * conn_send_lent(): they leave from where they are, with what is queued
 * before them, and only what the socket does not take is copied.
 */
void resp_body_lend(struct conn *c, const void *p, size_t len);

/* A representation that Range requests may address. */
#define RESP_RANGES_MAX	16	/* keeps a response within its segments */
struct resp_rep {
	const char *lines;		/* its header lines, Content-Type too */
	size_t len;
	const char *extra;		/* lines about this answer (Age) */
	size_t elen;
	const char *type;		/* its Content-Type, for the parts */
	size_t tlen;
	const char *etag;		/* quoted, for If-Range; or len 0 */
	size_t etag_len;
	time_t mtime;			/* Last-Modified, or -1 */
	uint64_t size;
	int max_ranges;
	/* Queues len bytes of the body from off. */
	void (*part)(struct conn *c, void *arg, uint64_t off, uint64_t len);
	void *arg;
};

/*
 * Answers the Range of r (its If-Range too) from rep: 206 with one part or
 * multipart/byteranges, or 416.  False when the answer is the whole
 * representation: no Range, neither GET nor HEAD, If-Range not matched, or
 * a Range that is to be ignored.
 */
bool resp_range(struct conn *c, const struct http_request *r,
    const struct resp_rep *rep);

/* A complete error response with a small HTML body. */
void resp_error(struct conn *c, int status);

/* The same, with extra ready-made header lines. */
void resp_error_hdr(struct conn *c, int status, const char *lines,
    size_t len);

/*
 * A whole 200 response kept for reuse (a small file's): the status line,
 * the common lines, the representation's lines, Content-Length and the
 * end of the head, then the body when it is small; valid for the second
 * of its Date line.  Zeroed: empty.
 */
struct resp_kept {
	char *buf;
	size_t head;			/* bytes of the head */
	size_t len;			/* of the head and the body kept */
	size_t size;			/* allocated */
	bool body;			/* built with the body */
	time_t at;			/* the second of its Date */
};

/* A body up to this long is kept with its head (it is copied beside the
 * head anyway, see resp.c). */
#define RESP_KEPT_BODY_MAX	512

/*
 * Queues the 200 kept in k, rebuilt first from lines and the body (NULL:
 * not kept, the caller queues it; HEAD: left out) of len bytes when its
 * Date is stale.  False, with nothing queued, when this response's head
 * is not the kept one (Connection: close, HTTP/1.0, add_header) or there
 * is no memory: build it piece by piece then.
 */
bool resp_kept_200(struct conn *c, struct resp_kept *k, const char *lines,
    size_t n, const void *body, uint64_t len);

/* Frees what k holds. */
void resp_kept_free(struct resp_kept *k);

/* Where a pin's value starts. */
const char *pin_bytes(const struct pin *p);

/* Records what the access log needs once the response is queued. */
void resp_done(struct conn *c, int status, uint64_t body_bytes);

#endif

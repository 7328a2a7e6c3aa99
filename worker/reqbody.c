/*
 * A request body kept whole (worker/reqbody.h).
 *
 * The bytes stay in one buffer while they fit client_body_buffer_size;
 * past it the buffer goes to a temporary file, the rest is appended to
 * the file, and the buffer becomes the one pieces are read back into.
 * The file has no name (O_TMPFILE; on a file system without it, a
 * mkstemp() name unlinked at once): the kernel frees it when the worker
 * closes it or dies.  Writes are blocking file writes, as nginx's
 * client_body_temp_path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn.h"
#include "worker/reqbody.h"

#define RB_MIN		4096		/* buffer, and a piece read back */

struct reqbody {
	char *buf;
	size_t cap;			/* allocated */
	size_t len;			/* in buf, while there is no file */
	int fd;				/* -1: all in buf */
	uint64_t size;			/* all bytes */
	uint64_t rpos;			/* handed out */
};

struct reqbody *
reqbody_new(void)
{
	struct reqbody *b = calloc(1, sizeof(*b));

	if (b != NULL)
		b->fd = -1;
	return b;
}

/* A file without a name in client_body_temp_path, or -1 (errno). */
static int
temp_open(const char *dir)
{
	char path[4096];
	int fd, n;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd != -1 || (errno != EOPNOTSUPP && errno != EISDIR &&
	    errno != EINVAL))
		return fd;
	n = snprintf(path, sizeof(path), "%s/corral-body-XXXXXX", dir);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((fd = mkostemp(path, O_CLOEXEC)) != -1)
		unlink(path);
	return fd;
}

static bool
write_all(int fd, const char *p, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ENOSPC;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

bool
reqbody_add(struct reqbody *b, const char *p, size_t len,
    const char *client)
{
	const struct config *cf = worker.cf;
	size_t limit = cf->client_body_buffer_size, cap;
	char *nb;

	if (len == 0)
		return true;
	if (b->fd == -1 && b->len + len > limit) {
		b->fd = temp_open(cf->client_body_temp_path);
		if (b->fd == -1) {
			log_error("client %s: cannot make a request body file "
			    "in %s: %s", client, cf->client_body_temp_path,
			    strerror(errno));
			return false;
		}
		if (!write_all(b->fd, b->buf, b->len))
			goto fail;
		b->len = 0;
	}
	if (b->fd != -1) {
		if (!write_all(b->fd, p, len))
			goto fail;
		b->size += len;
		return true;
	}
	if (b->len + len > b->cap) {
		cap = b->cap > 0 ? b->cap : RB_MIN;
		while (cap < b->len + len)
			cap *= 2;
		if ((nb = realloc(b->buf, cap)) == NULL) {
			log_error("client %s: out of memory for the request "
			    "body", client);
			return false;
		}
		b->buf = nb;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, len);
	b->len += len;
	b->size += len;
	return true;
fail:
	log_error("client %s: cannot write the request body file in %s: %s",
	    client, cf->client_body_temp_path, strerror(errno));
	return false;
}

uint64_t
reqbody_size(const struct reqbody *b)
{
	return b->size;
}

bool
reqbody_read_all(const struct reqbody *b)
{
	return b->rpos == b->size;
}

const char *
reqbody_next(struct reqbody *b, size_t max, size_t *n)
{
	uint64_t left = b->size - b->rpos;
	size_t want = left < max ? (size_t)left : max;
	const char *p;
	ssize_t got;
	char *nb;

	*n = 0;
	if (b->fd == -1) {
		p = b->buf != NULL ? b->buf + b->rpos : "";
		b->rpos += want;
		*n = want;
		return p;
	}
	if (b->cap < RB_MIN) {
		if ((nb = realloc(b->buf, RB_MIN)) == NULL) {
			log_error("out of memory reading a request body");
			return NULL;
		}
		b->buf = nb;
		b->cap = RB_MIN;
	}
	if (want > b->cap)
		want = b->cap;
	if (want == 0)
		return b->buf;
	do
		got = pread(b->fd, b->buf, want, (off_t)b->rpos);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		log_error("cannot read a request body file: %s",
		    got < 0 ? strerror(errno) : "cut short");
		return NULL;
	}
	b->rpos += (uint64_t)got;
	*n = (size_t)got;
	return b->buf;
}

void
reqbody_free(struct reqbody *b)
{
	if (b == NULL)
		return;
	if (b->fd != -1)
		close(b->fd);
	free(b->buf);
	free(b);
}

/*
 * The output queue of a connection: response headers in one growing
 * buffer, bodies as segments that point at cached bytes, pinned store
 * values, file ranges or bytes lent until the next write (a proxied body
 * in the upstream's read buffer).  Consecutive memory segments leave in one
 * sendmsg(); file segments go out with sendfile().  Over TLS the same
 * queue is gathered into record-sized writes (see out_flush_tls()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn_impl.h"
#include "worker/static.h"
#include "worker/tls.h"

/*
 * The output buffer starts as a pooled one of OBUF_INIT bytes.  A head
 * with a proxied body of a few KB beside it moves to a pooled one of
 * OBUF_BIG, so that such responses cost no malloc() and free() each;
 * past that it grows by realloc().
 */
static enum buf_kind
obuf_kind(size_t size)
{
	return size == OBUF_INIT ? BUF_OUT : size == OBUF_BIG ? BUF_OUT_BIG :
	    BUF_KINDS;
}

char *
obuf_grow(struct conn *c, size_t n)
{
	enum buf_kind kind;
	size_t size;
	char *p;

	if (c->olen + n <= c->osize)
		return c->obuf + c->olen;
	size = c->osize ? c->osize : OBUF_INIT;
	while (size < c->olen + n)
		size *= 2;
	if (size > OBUF_INIT && size < OBUF_BIG)
		size = OBUF_BIG;
	kind = obuf_kind(size);
	if (c->osize > OBUF_BIG)
		p = realloc(c->obuf, size);
	else {
		p = kind != BUF_KINDS ? buf_get(kind) : malloc(size);
		if (p != NULL && c->obuf != NULL) {
			memcpy(p, c->obuf, c->olen);
			buf_put(obuf_kind(c->osize), c->obuf);
		}
	}
	if (p == NULL)
		return NULL;
	c->obuf = p;
	c->osize = size;
	return c->obuf + c->olen;
}

void
out_release(struct conn *c)
{
	if (c->shead != c->stail || c->olen != 0)
		return;
	buf_put(BUF_SEGS, c->segs);
	c->segs = NULL;
	if (c->osize <= OBUF_BIG)
		buf_put(obuf_kind(c->osize), c->obuf);
	else
		free(c->obuf);
	c->obuf = NULL;
	c->osize = 0;
}

struct oseg *
seg_new(struct conn *c, enum seg_type type, size_t len)
{
	struct oseg *s;

	if (c->stail == OSEG_MAX)
		return NULL;
	if (c->segs == NULL && (c->segs = buf_get(BUF_SEGS)) == NULL)
		return NULL;
	s = &c->segs[c->stail++];
	memset(s, 0, sizeof(*s));
	s->type = (uint8_t)type;
	s->len = len;
	c->opending += len;
	return s;
}

struct oseg *
seg_mem(struct conn *c, const void *p, size_t len)
{
	struct oseg *s;

	if (len == 0)
		return NULL;
	s = seg_new(c, SEG_MEM, len);
	if (s == NULL) {
		c->broken = true;
		return NULL;
	}
	s->p = p;
	return s;
}

/* The n bytes at the end of the buffer start a new segment. */
void
obuf_seg(struct conn *c, size_t n)
{
	if (seg_new(c, SEG_OBUF, n) == NULL) {
		/* Cannot happen: the caller checked OSEG_RESERVE. */
		c->broken = true;
		return;
	}
	c->segs[c->stail - 1].off = c->olen;
	c->olen += n;
}

static void
seg_done(struct oseg *s)
{
	if (s->ref != NULL)
		fentry_release(s->ref);
	if (s->pin != NULL)
		pin_put(s->pin);
	s->ref = NULL;
	s->pin = NULL;
}

bool
out_keep_lent(struct conn *c)
{
	struct oseg *s, *prev;
	unsigned i, j;
	char *dst;

	/* Each joins the buffer's segment before it when that ends where
	 * its copy lands, so a slow client's queue stays one piece. */
	for (i = j = c->shead; i < c->stail; i++) {
		s = &c->segs[i];
		if (s->type == SEG_LENT) {
			if ((dst = obuf_reserve(c, s->len)) == NULL)
				return false;
			memcpy(dst, s->p, s->len);
			s->type = SEG_OBUF;
			s->p = NULL;
			s->off = c->olen;
			c->olen += s->len;
		}
		prev = j > c->shead ? &c->segs[j - 1] : NULL;
		if (prev != NULL && s->type == SEG_OBUF &&
		    prev->type == SEG_OBUF && prev->off + prev->len == s->off)
			prev->len += s->len;
		else
			c->segs[j++] = *s;
	}
	c->stail = (uint16_t)j;
	return true;
}

/* Consumes n written bytes from the head of the queue. */
static void
out_advance(struct conn *c, size_t n)
{
	c->opending -= n;
	while (n > 0 && c->shead < c->stail) {
		struct oseg *s = &c->segs[c->shead];
		size_t k = n < s->len ? n : s->len;

		s->len -= k;
		s->off += k;
		s->p += k;
		s->foff += (off_t)k;
		n -= k;
		if (s->len == 0) {
			seg_done(s);
			c->shead++;
		}
	}
}

void
out_reset(struct conn *c)
{
	while (c->shead < c->stail)
		seg_done(&c->segs[c->shead++]);
	c->shead = c->stail = 0;
	c->olen = 0;
	c->opending = 0;
}

/* Sends part of a file; returns bytes sent, 0 on EAGAIN, -1 to abort. */
static ssize_t
send_file(struct conn *c, struct oseg *s)
{
	static char buf[65536];
	size_t want = s->len > (1u << 30) ? (1u << 30) : s->len;
	off_t off = s->foff;
	ssize_t n;

	if (worker.cf->sendfile) {
		n = sendfile(c->fd, s->fd, &off, want);
	} else {
		if (want > sizeof(buf))
			want = sizeof(buf);
		n = pread(s->fd, buf, want, s->foff);
		if (n > 0)
			n = send(c->fd, buf, (size_t)n, MSG_NOSIGNAL);
	}
	if (n > 0)
		return n;
	if (n == 0) {
		/* The file shrank under us: the promised length cannot be
		 * kept, so the only honest thing is to abort. */
		log_warn("file shrank while sending to %s; aborting",
		    c->peer);
		return -1;
	}
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	if (errno != EPIPE && errno != ECONNRESET)
		log_at(L_INFO, errno, "send to %s", c->peer);
	return -1;
}

/* Sends consecutive memory segments with one sendmsg(), or send() when
 * there is one: no message header and vector for the kernel to copy in. */
static ssize_t
send_mem(struct conn *c)
{
	struct iovec iov[IOV_BATCH];
	struct msghdr msg;
	unsigned i, k = 0;
	int flags = MSG_NOSIGNAL;
	ssize_t n;

	for (i = c->shead; i < c->stail && k < IOV_BATCH; i++) {
		struct oseg *s = &c->segs[i];

		if (s->type == SEG_FILE) {
			flags |= MSG_MORE;	/* headers go out with the
						   file's first bytes */
			break;
		}
		iov[k].iov_base = s->type == SEG_OBUF ? c->obuf + s->off :
		    (void *)s->p;
		iov[k].iov_len = s->len;
		k++;
	}
	if (k == 1) {
		n = send(c->fd, iov[0].iov_base, iov[0].iov_len, flags);
	} else {
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = iov;
		msg.msg_iovlen = k;
		n = sendmsg(c->fd, &msg, flags);
	}
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	if (errno != EPIPE && errno != ECONNRESET)
		log_at(L_INFO, errno, "send to %s", c->peer);
	return -1;
}

/*
 * Copies the head of the queue, up to one TLS record, into buf: memory
 * segments and, without kernel TLS, file bytes.  A retried write rebuilds
 * the same bytes, since the head does not move until it succeeds.
 */
static ssize_t
tls_gather(struct conn *c, char *buf, size_t size)
{
	size_t k = 0, want;
	ssize_t n;

	for (unsigned i = c->shead; i < c->stail && k < size; i++) {
		struct oseg *s = &c->segs[i];

		want = s->len < size - k ? s->len : size - k;
		if (s->type != SEG_FILE) {
			memcpy(buf + k, s->type == SEG_OBUF ? c->obuf + s->off :
			    s->p, want);
			k += want;
			continue;
		}
		if (c->ktls)
			break;		/* SSL_sendfile takes it */
		n = pread(s->fd, buf + k, want, s->foff);
		if (n <= 0) {
			if (n == 0)
				log_warn("file shrank while sending to %s; "
				    "aborting", c->peer);
			else
				log_at(L_ERROR, errno, "read for %s", c->peer);
			return -1;
		}
		k += (size_t)n;
		if ((size_t)n < want)
			break;
	}
	return (ssize_t)k;
}

/*
 * The queue over TLS: one SSL_write per record's worth of segments, so
 * the headers and the start of a body share a record; with kernel TLS, a
 * file segment goes out with SSL_sendfile and is not read here at all.
 */
static int
out_flush_tls(struct conn *c)
{
	static char stage[TLS_STAGE];
	struct oseg *s;
	ssize_t n;

	while (c->shead < c->stail) {
		s = &c->segs[c->shead];
		if (s->type == SEG_FILE && c->ktls) {
			n = tls_sendfile(c->ssl, s->fd, s->foff, s->len,
			    c->peer);
		} else {
			n = tls_gather(c, stage, sizeof(stage));
			if (n > 0)
				n = tls_send(c->ssl, stage, (size_t)n,
				    c->peer);
		}
		if (n == TLS_WANT_READ) {
			c->tls_wwant_r = true;
			return 1;
		}
		if (n == TLS_WANT_WRITE)
			return 1;
		if (n <= 0)
			return -1;
		STATS_ADD(bytes_out, n);
		out_advance(c, (size_t)n);
	}
	out_reset(c);
	return 0;
}

int
out_flush(struct conn *c)
{
	ssize_t n;

	/* A response that could not be built whole is never sent in part:
	 * the connection closes instead. */
	if (c->broken)
		return -1;
	if (c->ssl != NULL)
		return out_flush_tls(c);
	while (c->shead < c->stail) {
		if (c->segs[c->shead].type == SEG_FILE)
			n = send_file(c, &c->segs[c->shead]);
		else
			n = send_mem(c);
		if (n < 0)
			return -1;
		if (n == 0)
			return 1;
		STATS_ADD(bytes_out, n);
		out_advance(c, (size_t)n);
	}
	out_reset(c);
	return 0;
}

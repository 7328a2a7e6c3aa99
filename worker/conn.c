/*
 * Client connections.
 *
 * A connection reads into one buffer, parses every complete request in it,
 * queues each response (headers in the output buffer, bodies as references
 * to cached bytes or file ranges) and only then writes, so responses to
 * pipelined requests leave together in one sendmsg().  While output is
 * pending the connection does not read: a client that never reads cannot
 * make us buffer without bound.
 *
 * Deadlines are absolute: a request header must arrive within
 * header_timeout of its first byte however slowly it trickles in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <event2/event_struct.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "worker/conn.h"
#include "worker/proxy.h"
#include "worker/static.h"
#include "shm/store.h"

#define IBUF_INIT	4096
#define OBUF_INIT	4096
#define OSEG_MAX	128
#define OSEG_RESERVE	40	/* room one response may need */
#define OUT_HIGH	(256 * 1024)
#define IOV_BATCH	64
#define ALOG_BUF	(32 * 1024)
#define QUIT_IDLE_GRACE_MS 1000

enum cstate {
	CS_HEADER,		/* waiting for or parsing a request header */
	CS_BODY,		/* reading a request body to discard it */
	CS_LINGER,		/* after an error: drain input, then close */
};

enum ctimer { T_NONE, T_IDLE, T_HEADER, T_BODY, T_SEND, T_LINGER };

enum seg_type { SEG_OBUF, SEG_MEM, SEG_FILE };

struct oseg {
	uint8_t type;
	int fd;			/* SEG_FILE */
	const char *p;		/* SEG_MEM */
	size_t off;		/* SEG_OBUF offset */
	off_t foff;		/* SEG_FILE offset */
	size_t len;
	struct fentry *ref;
	struct pin *pin;
};

/* A store value pinned while segments that point into it are queued. */
struct pin {
	struct store_ref ref;
	unsigned uses;
	struct pin *next;	/* free list */
};

struct conn {
	int fd;
	enum cstate state;
	enum ctimer timer;
	bool close_after;	/* close once the output is written */
	bool linger;		/* and drain the input first */
	bool keepalive;		/* the current request allows it */
	bool head;
	bool broken;		/* out of memory building a response */
	bool rpaused;		/* not reading: the proxy is full */
	unsigned nreq;
	struct event rev;
	struct event wev;
	struct event tev;
	struct conn *idle_prev, *idle_next;
	bool idle;
	uint64_t idle_since_ms;
	struct conn *all_prev, *all_next;	/* every connection, for exit */

	char *ibuf;
	size_t isize, ilen, ipos, scan;

	struct http_request req;
	size_t srv;
	uint64_t body_left;
	uint64_t body_seen;
	bool body_chunked;
	struct http_chunked chunk;
	struct proxy *px;	/* a proxied response is in flight */

	struct oseg segs[OSEG_MAX];
	unsigned shead, stail;
	char *obuf;
	size_t osize, olen;
	size_t opending;

	char peer[INET6_ADDRSTRLEN + 8];
	char ibuf_inline[IBUF_INIT];
};

struct alog {
	int fd;
	size_t len;
	char buf[ALOG_BUF];
};

static struct alog *alogs;
static struct conn *all_conns;
static struct pin *free_pins;


static const char allow[] = "Allow: GET, HEAD, OPTIONS\r\n";
static const char html[] = "Content-Type: text/html; charset=utf-8\r\n";

static void conn_close(struct conn *c);
static void conn_process(struct conn *c);
static void conn_write(struct conn *c);
static void req_forget(struct conn *c);

const struct http_request *
conn_req(const struct conn *c)
{
	return &c->req;
}

bool
resp_is_head(const struct conn *c)
{
	return c->head;
}

void
resp_no_keepalive(struct conn *c)
{
	c->keepalive = false;
}

const char *
conn_peer(const struct conn *c)
{
	return c->peer;
}

size_t
conn_out_buffered(const struct conn *c)
{
	return c->olen;
}

static size_t
save_span(struct span *s, char *buf, size_t size, size_t used)
{
	size_t n = s->len < size - used ? s->len : size - used;

	if (s->p == NULL)
		return used;
	memcpy(buf + used, s->p, n);
	s->p = buf + used;
	s->len = n;
	return used + n;
}

void
conn_save_request(struct conn *c, char *buf, size_t size,
    struct http_header *hdrs)
{
	static const char *const names[] = { "Referer", "User-Agent" };
	struct http_request *r = &c->req;
	struct span v;
	size_t used = 0, n = 0, i;

	for (i = 0; i < 2; i++) {
		v = http_header_get(r, names[i]);
		if (v.p == NULL)
			continue;
		hdrs[n].name.p = names[i];
		hdrs[n].name.len = strlen(names[i]);
		hdrs[n].value = v;
		n++;
	}
	used = save_span(&r->method_name, buf, size, used);
	used = save_span(&r->target, buf, size, used);
	for (i = 0; i < n; i++)
		used = save_span(&hdrs[i].value, buf, size, used);
	r->headers = hdrs;
	r->nheaders = n;
	memset(&r->path, 0, sizeof(r->path));
	memset(&r->query, 0, sizeof(r->query));
	memset(&r->host, 0, sizeof(r->host));
}

/* Reads from the client unless paused or blocked on output. */
static void
conn_read_on(struct conn *c)
{
	if (!c->rpaused && !event_pending(&c->wev, EV_WRITE, NULL))
		event_add(&c->rev, NULL);
}

/* Timers ------------------------------------------------------------ */

static void
conn_timer(struct conn *c, enum ctimer kind, int ms)
{
	struct timeval tv;

	if (c->timer == kind && kind != T_SEND)
		return;
	c->timer = kind;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(&c->tev, &tv);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	worker_update_time();
	switch (c->timer) {
	case T_HEADER:
		log_info("client %s timed out sending a request header",
		    c->peer);
		goto timeout408;
	case T_BODY:
		log_info("client %s timed out sending a request body",
		    c->peer);
		goto timeout408;
	case T_SEND:
		log_info("client %s timed out reading the response", c->peer);
		break;
	default:
		break;
	}
	conn_close(c);
	return;

timeout408:
	if (c->shead != c->stail || c->state == CS_BODY) {
		/* In a body, the response went out already. */
		conn_close(c);
		return;
	}
	req_forget(c);
	c->timer = T_NONE;
	c->keepalive = false;
	c->head = false;
	resp_error(c, 408);
	conn_write(c);
}

/*
 * Drops what the last request pointed at: the header array is scratch
 * shared by every connection of the worker, and the buffer has moved on.
 */
static void
req_forget(struct conn *c)
{
	memset(&c->req.method_name, 0, sizeof(c->req.method_name));
	c->req.headers = NULL;
	c->req.nheaders = 0;
}

/* Idle list, so a graceful stop can close idle keep-alive connections. */
static void
idle_set(struct conn *c, bool on)
{
	if (c->idle == on)
		return;
	c->idle = on;
	if (on) {
		c->idle_since_ms = worker.now_ms;
		c->idle_prev = NULL;
		c->idle_next = worker.idle_head;
		if (worker.idle_head != NULL)
			worker.idle_head->idle_prev = c;
		worker.idle_head = c;
		return;
	}
	if (c->idle_prev != NULL)
		c->idle_prev->idle_next = c->idle_next;
	else
		worker.idle_head = c->idle_next;
	if (c->idle_next != NULL)
		c->idle_next->idle_prev = c->idle_prev;
}

void
conn_quit_idle(void)
{
	struct conn *c, *next;
	struct timeval tv;
	uint64_t idle;

	for (c = worker.idle_head; c != NULL; c = next) {
		next = c->idle_next;
		idle = worker.now_ms - c->idle_since_ms;
		if (idle >= QUIT_IDLE_GRACE_MS) {
			conn_close(c);
			continue;
		}
		tv.tv_sec = 0;
		tv.tv_usec = (suseconds_t)(QUIT_IDLE_GRACE_MS - idle) * 1000;
		c->timer = T_IDLE;
		evtimer_add(&c->tev, &tv);
	}
}

/* Output queue ------------------------------------------------------ */

static char *
obuf_reserve(struct conn *c, size_t n)
{
	size_t size;
	char *p;

	if (c->olen + n <= c->osize)
		return c->obuf + c->olen;
	size = c->osize ? c->osize : OBUF_INIT;
	while (size < c->olen + n)
		size *= 2;
	p = realloc(c->obuf, size);
	if (p == NULL)
		return NULL;
	c->obuf = p;
	c->osize = size;
	return c->obuf + c->olen;
}

static struct oseg *
seg_new(struct conn *c, enum seg_type type, size_t len)
{
	struct oseg *s;

	if (c->stail == OSEG_MAX)
		return NULL;
	s = &c->segs[c->stail++];
	memset(s, 0, sizeof(*s));
	s->type = (uint8_t)type;
	s->len = len;
	c->opending += len;
	return s;
}

/* Queues len bytes at p; NULL when there is nothing to queue or no room. */
static struct oseg *
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

/* Appends to the output buffer, extending the last segment if it ends
 * there, so headers of pipelined responses stay one iovec. */
static void
obuf_commit(struct conn *c, size_t n)
{
	struct oseg *last;

	if (c->stail > c->shead) {
		last = &c->segs[c->stail - 1];
		if (last->type == SEG_OBUF && last->off + last->len == c->olen) {
			last->len += n;
			c->olen += n;
			c->opending += n;
			return;
		}
	}
	if (seg_new(c, SEG_OBUF, n) == NULL) {
		/* Cannot happen: the caller checked OSEG_RESERVE. */
		c->broken = true;
		return;
	}
	c->segs[c->stail - 1].off = c->olen;
	c->olen += n;
}

static void
obuf_add(struct conn *c, const void *p, size_t n)
{
	char *dst = obuf_reserve(c, n);

	if (dst == NULL) {
		c->broken = true;
		return;
	}
	memcpy(dst, p, n);
	obuf_commit(c, n);
}

void
resp_status(struct conn *c, int status)
{
	const char *r;
	size_t n;

	if ((r = http_status_line(status, &n)) != NULL) {
		obuf_add(c, r, n);
	} else {
		r = http_reason(status);
		resp_status_reason(c, status, r, strlen(r));
	}
	obuf_add(c, worker.common, worker.common_len);
}

void
resp_status_reason(struct conn *c, int status, const char *reason,
    size_t len)
{
	char *p;

	/* The status is three digits: the parsers and callers see to it. */
	if (status < 100 || status > 999 ||
	    (p = obuf_reserve(c, 9 + 3 + 1 + len + 2)) == NULL) {
		c->broken = true;
		return;
	}
	memcpy(p, "HTTP/1.1 ", 9);
	p[9] = (char)('0' + status / 100);
	p[10] = (char)('0' + status / 10 % 10);
	p[11] = (char)('0' + status % 10);
	p[12] = ' ';
	memcpy(p + 13, reason, len);
	memcpy(p + 13 + len, "\r\n", 2);
	obuf_commit(c, 13 + len + 2);
}

void
resp_header(struct conn *c, const char *lines, size_t len)
{
	obuf_add(c, lines, len);
}

void
resp_headerf(struct conn *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 2, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 3)
		n = sizeof(line) - 3;
	line[n++] = '\r';
	line[n++] = '\n';
	obuf_add(c, line, (size_t)n);
}

void
resp_header_u64(struct conn *c, const char *name, size_t len, uint64_t v)
{
	char *p = obuf_reserve(c, len + 20 + 2);
	size_t n;

	if (p == NULL) {
		c->broken = true;
		return;
	}
	memcpy(p, name, len);
	n = len + http_u64(p + len, v);
	memcpy(p + n, "\r\n", 2);
	obuf_commit(c, n + 2);
}

void
resp_end_headers(struct conn *c, int64_t len)
{
	static const char ka10[] = "Connection: keep-alive\r\n\r\n";
	static const char close[] = "Connection: close\r\n\r\n";

	if (len >= 0)
		resp_header_u64(c, "Content-Length: ", 16, (uint64_t)len);
	if (!c->keepalive) {
		c->close_after = true;
		obuf_add(c, close, sizeof(close) - 1);
	} else if (c->req.version == 10) {
		obuf_add(c, ka10, sizeof(ka10) - 1);
	} else {
		obuf_add(c, "\r\n", 2);
	}
}

void
resp_body_mem(struct conn *c, const void *p, size_t len,
    struct fentry *ref)
{
	struct oseg *s = seg_mem(c, p, len);

	if (s != NULL && ref != NULL) {
		s->ref = ref;
		fentry_ref(ref);
	}
}

void
resp_abort(struct conn *c)
{
	/* The promised length cannot be kept: the client sees a short body
	 * and a close, never a wrong one. */
	log_warn("client %s: response body unavailable; closing", c->peer);
	c->keepalive = false;
	c->close_after = true;
}

void
resp_body_copy(struct conn *c, const void *p, size_t len)
{
	obuf_add(c, p, len);
}

void
resp_body_file(struct conn *c, struct fentry *ref, int fd, off_t off,
    off_t len)
{
	struct oseg *s;

	if (len == 0)
		return;
	s = seg_new(c, SEG_FILE, (size_t)len);
	if (s == NULL) {
		c->broken = true;
		return;
	}
	s->fd = fd;
	s->foff = off;
	s->ref = ref;
	if (ref != NULL)
		fentry_ref(ref);
}

struct pin *
pin_take(const struct store_ref *ref)
{
	struct pin *p = free_pins;

	if (p != NULL)
		free_pins = p->next;
	else if ((p = malloc(sizeof(*p))) == NULL)
		return NULL;
	p->ref = *ref;
	p->uses = 1;
	return p;
}

void
pin_put(struct pin *p)
{
	if (--p->uses > 0)
		return;
	store_release(worker.store, &p->ref);
	p->next = free_pins;
	free_pins = p;
}

void
resp_body_pin(struct conn *c, struct pin *p, size_t off, size_t len)
{
	struct oseg *s = seg_mem(c, (const char *)p->ref.data + off, len);

	if (s != NULL) {
		s->pin = p;
		p->uses++;
	}
}

/* Statuses after which the rest of the input cannot be trusted. */
static bool
status_closes(int status)
{
	switch (status) {
	case 400: case 408: case 411: case 413: case 414: case 417:
	case 431: case 500: case 501: case 505:
		return true;
	}
	return false;
}

void
resp_error(struct conn *c, int status)
{
	resp_error_hdr(c, status, NULL, 0);
}

void
resp_error_hdr(struct conn *c, int status, const char *lines, size_t len)
{
	char body[512];
	int n;

	n = snprintf(body, sizeof(body),
	    "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n"
	    "<center><h1>%d %s</h1></center>\r\n"
	    "<hr><center>corral</center>\r\n</body>\r\n</html>\r\n",
	    status, http_reason(status), status, http_reason(status));
	if (status_closes(status)) {
		c->keepalive = false;
		c->linger = true;
	}
	resp_status(c, status);
	if (status == 405 || status == 501)
		resp_header(c, allow, sizeof(allow) - 1);
	if (lines != NULL)
		resp_header(c, lines, len);
	resp_header(c, html, sizeof(html) - 1);
	resp_end_headers(c, n);
	if (!c->head)
		resp_body_copy(c, body, (size_t)n);
	resp_done(c, status, c->head ? 0 : (uint64_t)n);
}

/* Access log -------------------------------------------------------- */

static size_t
alog_escape(char *dst, size_t room, struct span s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, n = 0;

	if (s.p == NULL || s.len == 0) {
		if (room > 0)
			dst[n++] = '-';
		return n;
	}
	for (i = 0; i < s.len && n + 4 < room; i++) {
		unsigned char ch = (unsigned char)s.p[i];

		if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f) {
			dst[n++] = '\\';
			dst[n++] = 'x';
			dst[n++] = hex[ch >> 4];
			dst[n++] = hex[ch & 15];
		} else {
			dst[n++] = (char)ch;
		}
	}
	return n;
}

static void
alog_write(struct alog *al)
{
	if (al->len > 0 && write(al->fd, al->buf, al->len) == -1)
		log_at(L_ERROR, errno, "write access log");
	al->len = 0;
}

void
access_log_flush(void)
{
	if (alogs == NULL)
		return;
	for (size_t i = 0; i < worker.cf->nservers; i++)
		if (alogs[i].fd != -1)
			alog_write(&alogs[i]);
}

void
access_log_reopen(void)
{
	const struct config *cf = worker.cf;
	int fd;

	for (size_t i = 0; i < cf->nservers; i++) {
		if (alogs[i].fd == -1)
			continue;
		alog_write(&alogs[i]);
		fd = open(cf->servers[i].access_log, O_WRONLY | O_APPEND |
		    O_CREAT | O_CLOEXEC, 0640);
		if (fd == -1) {
			log_at(L_ERROR, errno, "reopen %s",
			    cf->servers[i].access_log);
			continue;
		}
		close(alogs[i].fd);
		alogs[i].fd = fd;
	}
}

/* At worker start, where failing is allowed; requests never allocate. */
void
access_log_init(void)
{
	const struct config *cf = worker.cf;

	alogs = calloc(cf->nservers, sizeof(*alogs));
	if (alogs == NULL)
		fatal("calloc");
	for (size_t i = 0; i < cf->nservers; i++)
		alogs[i].fd = worker.rt->access_fds[i];
}

/* Combined log format, buffered and written in whole lines. */
void
resp_done(struct conn *c, int status, uint64_t body_bytes)
{
	struct http_request *r = &c->req;
	char line[4096];
	struct alog *al;
	size_t n;
	int rc;

	al = &alogs[c->srv];
	if (al->fd == -1)
		return;
	rc = snprintf(line, sizeof(line), "%s - - [%s] \"", c->peer,
	    worker.log_time);
	n = (size_t)rc;
	if (r->method_name.p != NULL) {
		n += alog_escape(line + n, sizeof(line) - n - 200,
		    r->method_name);
		line[n++] = ' ';
		n += alog_escape(line + n, sizeof(line) - n - 200, r->target);
		n += (size_t)snprintf(line + n, sizeof(line) - n,
		    " HTTP/1.%d", r->version == 10 ? 0 : 1);
	}
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\" %d %llu \"",
	    status, (unsigned long long)body_bytes);
	n += alog_escape(line + n, sizeof(line) - n - 100,
	    r->method_name.p ? http_header_get(r, "Referer") :
	    (struct span){ NULL, 0 });
	line[n++] = '"';
	line[n++] = ' ';
	line[n++] = '"';
	n += alog_escape(line + n, sizeof(line) - n - 4,
	    r->method_name.p ? http_header_get(r, "User-Agent") :
	    (struct span){ NULL, 0 });
	line[n++] = '"';
	line[n++] = '\n';
	if (al->len + n > sizeof(al->buf))
		alog_write(al);
	memcpy(al->buf + al->len, line, n);
	al->len += n;
}

/* Writing ----------------------------------------------------------- */

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

static void
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

/* Sends consecutive memory segments with one sendmsg(). */
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
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = k;
	n = sendmsg(c->fd, &msg, flags);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	if (errno != EPIPE && errno != ECONNRESET)
		log_at(L_INFO, errno, "send to %s", c->peer);
	return -1;
}

/* Returns 0 when everything is written, 1 when blocked, -1 on error. */
static int
out_flush(struct conn *c)
{
	ssize_t n;

	/* A response that could not be built whole is never sent in part:
	 * the connection closes instead. */
	if (c->broken)
		return -1;
	while (c->shead < c->stail) {
		if (c->segs[c->shead].type == SEG_FILE)
			n = send_file(c, &c->segs[c->shead]);
		else
			n = send_mem(c);
		if (n < 0)
			return -1;
		if (n == 0)
			return 1;
		out_advance(c, (size_t)n);
	}
	out_reset(c);
	return 0;
}

static void
conn_linger(struct conn *c)
{
	shutdown(c->fd, SHUT_WR);
	c->state = CS_LINGER;
	c->ilen = c->ipos = 0;
	event_del(&c->wev);
	event_add(&c->rev, NULL);
	conn_timer(c, T_LINGER, worker.cf->lingering_timeout_ms);
}

/* After the queue drained: go on reading, or close. */
static void
conn_drained(struct conn *c)
{
	event_del(&c->wev);
	if (c->px != NULL) {
		/* The proxied response goes on: its upstream times it. */
		if (c->state != CS_BODY) {
			evtimer_del(&c->tev);
			c->timer = T_NONE;
		}
		conn_read_on(c);
		proxy_drained(c->px);
		return;
	}
	if (c->close_after) {
		if (c->linger || c->ipos < c->ilen || c->state == CS_BODY)
			conn_linger(c);
		else
			conn_close(c);
		return;
	}
	event_add(&c->rev, NULL);
	if (c->ipos < c->ilen) {
		/* Requests that waited behind the full queue. */
		conn_process(c);
		return;
	}
	if (c->state == CS_HEADER) {
		conn_timer(c, T_IDLE, worker.cf->keepalive_timeout_ms);
		idle_set(c, true);
		if (worker.quitting)
			conn_close(c);
	}
}

static void
conn_write(struct conn *c)
{
	switch (out_flush(c)) {
	case 0:
		conn_drained(c);
		break;
	case 1:
		event_del(&c->rev);
		event_add(&c->wev, NULL);
		conn_timer(c, T_SEND, worker.cf->send_timeout_ms);
		break;
	default:
		conn_close(c);
		break;
	}
}

bool
conn_flush(struct conn *c)
{
	switch (out_flush(c)) {
	case 0:
		conn_drained(c);
		return true;
	case 1:
		event_del(&c->rev);
		event_add(&c->wev, NULL);
		conn_timer(c, T_SEND, worker.cf->send_timeout_ms);
		return true;
	default:
		conn_close(c);
		return false;
	}
}

void
conn_body_resume(struct conn *c)
{
	if (!c->rpaused)
		return;
	c->rpaused = false;
	conn_read_on(c);
	conn_process(c);
}

void
conn_proxy_done(struct conn *c)
{
	c->px = NULL;
	c->rpaused = false;
	req_forget(c);
	if (c->state == CS_BODY)
		conn_timer(c, T_BODY, worker.cf->body_timeout_ms);
	if (c->shead != c->stail)
		conn_write(c);
	else
		conn_drained(c);
}

void
conn_abort(struct conn *c)
{
	c->px = NULL;		/* the proxy let go of it already */
	conn_close(c);
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	worker_update_time();
	conn_write(arg);
}

/* Requests ---------------------------------------------------------- */

static bool
name_match(const char *name, struct span host)
{
	size_t n = strlen(name);

	if (name[0] == '*' && name[1] == '.') {
		/* "*.example.com" matches "a.example.com", not itself. */
		n -= 1;
		return host.len > n && strncasecmp(host.p + host.len - n,
		    name + 1, n) == 0;
	}
	return host.len == n && strncasecmp(host.p, name, n) == 0;
}

static size_t
select_server(struct span host)
{
	const struct config *cf = worker.cf;

	if (host.p == NULL || cf->nservers == 1)
		return 0;
	for (size_t i = 0; i < cf->nservers; i++)
		for (size_t j = 0; j < cf->servers[i].nnames; j++)
			if (name_match(cf->servers[i].names[j], host))
				return i;
	return 0;
}

static void
handle_options(struct conn *c)
{
	resp_status(c, 200);
	resp_header(c, allow, sizeof(allow) - 1);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
}

static void
handle_request(struct conn *c)
{
	struct http_request *r = &c->req;
	char path[PATH_MAX];
	ssize_t len;
	int status;

	switch (r->method) {
	case HTTP_M_GET:
	case HTTP_M_HEAD:
		break;
	case HTTP_M_OPTIONS:
		handle_options(c);
		return;
	case HTTP_M_UNKNOWN:
		log_info("client %s: unknown method \"%.*s\"", c->peer,
		    (int)r->method_name.len, r->method_name.p);
		resp_error(c, 501);
		return;
	default:
		resp_error(c, 405);
		return;
	}
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0) {
		log_info("client %s: bad path \"%.*s\"", c->peer,
		    (int)r->path.len, r->path.p);
		resp_error(c, status);
		return;
	}
	static_serve(c, c->srv, path, (size_t)len);
}

/* The proxied location the path falls in, or NULL for files. */
static const struct config_location *
route(struct conn *c)
{
	const struct config_server *s = &worker.cf->servers[c->srv];
	const struct config_location *l;
	struct http_request *r = &c->req;
	char path[PATH_MAX];
	ssize_t len;
	int status;

	if (s->nlocations == 0 || r->method == HTTP_M_CONNECT)
		return NULL;
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0)
		return NULL;
	for (l = s->locations; l < s->locations + s->nlocations; l++)
		if ((size_t)len >= l->prefix_len &&
		    memcmp(path, l->prefix, l->prefix_len) == 0)
			return l->upstream >= 0 ? l : NULL;
	return NULL;
}

/* Sets up reading (and discarding) the body that follows the header. */
static bool
body_begin(struct conn *c)
{
	struct http_request *r = &c->req;
	uint64_t max = worker.cf->max_body_size;

	c->body_seen = 0;
	c->body_chunked = r->chunked;
	c->body_left = r->content_length > 0 ? (uint64_t)r->content_length :
	    0;
	if (max > 0 && c->body_left > max) {
		log_info("client %s: body of %llu bytes is too large",
		    c->peer, (unsigned long long)c->body_left);
		resp_error(c, 413);
		return false;
	}
	if (c->body_chunked)
		http_chunked_init(&c->chunk);
	if (r->expect_continue && (c->body_left > 0 || c->body_chunked) &&
	    c->ipos == c->ilen)
		obuf_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	return true;
}

/*
 * Discards the body bytes in the buffer.  Returns 0 when the body is
 * complete, HTTP_AGAIN when more is to come, or the status for a bad one.
 */
static int
body_consume(struct conn *c)
{
	size_t avail = c->ilen - c->ipos, used, data, room;
	uint64_t max = worker.cf->max_body_size;
	char *p = c->ibuf + c->ipos;
	int rc;

	if (c->px != NULL) {
		/* Forwarded as it comes, no faster than the upstream takes
		 * it. */
		room = proxy_body_room(c->px);
		if (avail > room)
			avail = room;
	}
	if (!c->body_chunked) {
		used = avail < c->body_left ? avail : (size_t)c->body_left;
		c->body_left -= used;
		c->ipos += used;
		if (c->px != NULL && (used > 0 || c->body_left == 0))
			proxy_body(c->px, p, used, c->body_left == 0);
		return c->body_left == 0 ? 0 : HTTP_AGAIN;
	}
	used = avail;
	rc = http_chunked_decode(&c->chunk, p, &used, &data);
	c->ipos += used;
	if (c->px != NULL && rc != HTTP_ERROR && (data > 0 || rc == HTTP_OK))
		proxy_body(c->px, p, data, rc == HTTP_OK);
	c->body_seen += data;
	if (rc == HTTP_ERROR) {
		log_info("client %s: bad chunked body", c->peer);
		return 400;
	}
	if (max > 0 && c->body_seen > max) {
		log_info("client %s: chunked body is too large", c->peer);
		return 413;
	}
	return rc == HTTP_OK ? 0 : HTTP_AGAIN;
}

static bool
keepalive_allowed(const struct conn *c)
{
	const struct config *cf = worker.cf;

	if (!c->req.keepalive || worker.quitting ||
	    cf->keepalive_timeout_ms == 0)
		return false;
	return cf->keepalive_requests == 0 ||
	    c->nreq < (unsigned)cf->keepalive_requests;
}

/* Parses one request header; false when processing has to stop. */
static bool
parse_one(struct conn *c)
{
	const struct config_location *l;
	struct http_request *r = &c->req;
	bool has_body, answered = false;
	ssize_t n;
	int rc;

	n = http_parse_request(r, c->ibuf + c->ipos, c->ilen - c->ipos,
	    &c->scan, worker.headers, worker.cf->max_headers,
	    &worker.limits);
	if (n == HTTP_AGAIN) {
		idle_set(c, false);
		conn_timer(c, T_HEADER, worker.cf->header_timeout_ms);
		return false;
	}
	c->head = false;
	if (n == HTTP_ERROR) {
		log_info("client %s: %d: %s", c->peer, r->status,
		    r->error ? r->error : "bad request");
		c->keepalive = false;
		req_forget(c);
		resp_error(c, r->status);
		return false;
	}
	idle_set(c, false);
	c->nreq++;
	c->keepalive = keepalive_allowed(c);
	c->head = r->method == HTTP_M_HEAD;
	c->ipos += (size_t)n;
	c->scan = 0;
	c->srv = select_server(r->host);
	has_body = r->content_length > 0 || r->chunked;
	if (has_body && !body_begin(c))
		return false;
	if ((l = route(c)) != NULL) {
		rc = proxy_start(c, l, &c->px);
		if (rc < 0) {
			c->keepalive = false;
			resp_error(c, 502);
			return false;
		}
		answered = rc == 0;
	}
	if (has_body) {
		/* What already arrived is checked before answering, so a
		 * bad body gets its own status, as nginx does. */
		rc = body_consume(c);
		if (rc > 0) {
			if (c->px != NULL) {
				proxy_cancel(c->px);
				c->px = NULL;
			}
			resp_error(c, rc);
			return false;
		}
		if (rc == HTTP_AGAIN)
			c->state = CS_BODY;
	}
	if (c->px == NULL && !answered)
		handle_request(c);
	return true;
}

/* A bad body while proxying: answer it unless the response has begun. */
static void
body_failed(struct conn *c, int status)
{
	struct proxy *px = c->px;

	c->px = NULL;
	c->keepalive = false;
	c->linger = true;
	if (px != NULL && !proxy_cancel(px)) {
		resp_error(c, status);
		return;
	}
	/* The response went out already; all that is left is to stop
	 * reading. */
	c->close_after = true;
}

static void
conn_process(struct conn *c)
{
	int rc;

	while (!c->close_after || (c->px != NULL && c->state == CS_BODY)) {
		if (c->state == CS_BODY) {
			rc = body_consume(c);
			if (rc == HTTP_AGAIN && c->px != NULL &&
			    proxy_body_room(c->px) == 0) {
				/* The upstream's send timeout runs. */
				c->rpaused = true;
				event_del(&c->rev);
				evtimer_del(&c->tev);
				c->timer = T_NONE;
				break;
			}
			if (rc == HTTP_AGAIN) {
				conn_timer(c, T_BODY,
				    worker.cf->body_timeout_ms);
				break;
			}
			if (rc > 0) {
				body_failed(c, rc);
				break;
			}
			c->state = CS_HEADER;
			continue;
		}
		if (c->px != NULL || c->close_after)
			break;		/* pipelined requests wait */
		if (c->stail + OSEG_RESERVE > OSEG_MAX ||
		    c->opending > OUT_HIGH)
			break;
		if (c->ipos == c->ilen)
			break;
		if (!parse_one(c))
			break;
	}
	if (c->ipos == c->ilen)
		c->ipos = c->ilen = 0;
	if (c->shead != c->stail)
		conn_write(c);
	else if (c->close_after)
		conn_drained(c);
	else if (c->state == CS_HEADER && c->ilen == 0)
		conn_drained(c);
}

/* Makes room for more input: compact, then grow up to the header limit. */
static bool
ibuf_room(struct conn *c)
{
	size_t max = worker.cf->max_header_size + 1, size;
	char *p;

	if (c->ilen < c->isize)
		return true;
	if (c->ipos > 0) {
		memmove(c->ibuf, c->ibuf + c->ipos, c->ilen - c->ipos);
		c->ilen -= c->ipos;
		c->ipos = 0;
		return true;
	}
	if (c->isize >= max)
		return false;
	size = c->isize * 2 < max ? c->isize * 2 : max;
	if (c->ibuf == c->ibuf_inline) {
		p = malloc(size);
		if (p != NULL)
			memcpy(p, c->ibuf, c->ilen);
	} else {
		p = realloc(c->ibuf, size);
	}
	if (p == NULL) {
		log_at(L_ERROR, errno, "input buffer");
		return false;
	}
	c->ibuf = p;
	c->isize = size;
	return true;
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	ssize_t n;

	worker_update_time();
	if (c->state == CS_LINGER) {
		char junk[4096];

		n = recv(c->fd, junk, sizeof(junk), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	if (!ibuf_room(c) && c->px != NULL) {
		/* Requests pipelined behind a proxied one fill the buffer;
		 * they are read once the response is done. */
		c->rpaused = true;
		event_del(&c->rev);
		return;
	}
	if (c->isize - c->ilen == 0) {
		/* A full buffer always holds a complete header or is over
		 * the limit, which the parser reports; we never get here
		 * unless memory ran out. */
		conn_close(c);
		return;
	}
	n = recv(c->fd, c->ibuf + c->ilen, c->isize - c->ilen, 0);
	if (n > 0) {
		c->ilen += (size_t)n;
		conn_process(c);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0 && errno != ECONNRESET)
		log_at(L_INFO, errno, "recv from %s", c->peer);
	else if (n == 0 && c->ilen > c->ipos)
		log_info("client %s closed the connection mid-request",
		    c->peer);
	conn_close(c);
}

/* Accept and close -------------------------------------------------- */

static void
format_peer(struct conn *c, const struct sockaddr *sa)
{
	const void *addr;

	if (sa->sa_family == AF_INET6)
		addr = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		addr = &((const struct sockaddr_in *)sa)->sin_addr;
	if (inet_ntop(sa->sa_family, addr, c->peer, sizeof(c->peer)) == NULL)
		strcpy(c->peer, "?");
}

void
conn_accept(int fd, const struct sockaddr *sa, socklen_t salen,
    int listen_idx)
{
	struct conn *c;
	int on = 1;

	c = malloc(sizeof(*c));
	if (c == NULL) {
		log_at(L_ERROR, errno, "connection");
		close(fd);
		worker_conn_closed();
		return;
	}
	memset(c, 0, offsetof(struct conn, ibuf_inline));
	c->fd = fd;
	c->ibuf = c->ibuf_inline;
	c->isize = sizeof(c->ibuf_inline);
	format_peer(c, sa);
	c->all_next = all_conns;
	if (all_conns != NULL)
		all_conns->all_prev = c;
	all_conns = c;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	event_assign(&c->rev, worker.base, fd, EV_READ | EV_PERSIST, read_cb,
	    c);
	event_assign(&c->wev, worker.base, fd, EV_WRITE | EV_PERSIST,
	    write_cb, c);
	evtimer_assign(&c->tev, worker.base, timer_cb, c);
	log_debug("accept %s%s%s:%u on %s",
	    sa->sa_family == AF_INET6 ? "[" : "", c->peer,
	    sa->sa_family == AF_INET6 ? "]" : "",
	    ntohs(((const struct sockaddr_in *)sa)->sin_port),
	    worker.cf->listen[listen_idx].text);
	event_add(&c->rev, NULL);
	conn_timer(c, T_HEADER, worker.cf->header_timeout_ms);
	/* With TCP_DEFER_ACCEPT the request is usually here already. */
	read_cb(fd, EV_READ, c);
}

static void
conn_close(struct conn *c)
{
	struct proxy *px = c->px;

	c->px = NULL;
	if (px != NULL)
		proxy_cancel(px);
	idle_set(c, false);
	if (c->all_prev != NULL)
		c->all_prev->all_next = c->all_next;
	else
		all_conns = c->all_next;
	if (c->all_next != NULL)
		c->all_next->all_prev = c->all_prev;
	event_del(&c->rev);
	event_del(&c->wev);
	event_del(&c->tev);
	out_reset(c);
	close(c->fd);
	if (c->ibuf != c->ibuf_inline)
		free(c->ibuf);
	free(c->obuf);
	free(c);
	worker_conn_closed();
}

void
conn_close_all(void)
{
	struct pin *p;

	while (all_conns != NULL)
		conn_close(all_conns);
	proxy_free_all();
	while ((p = free_pins) != NULL) {
		free_pins = p->next;
		free(p);
	}
	access_log_flush();
	free(alogs);
	alogs = NULL;
}

/*
 * The reverse proxy.
 *
 * Each worker keeps, per upstream group, its peers' round-robin state and
 * failure counts and a LIFO pool of idle keep-alive connections.  A proxied
 * request builds its upstream request header once, then streams the
 * client's body behind it; the response header is checked and rewritten,
 * and the body is relayed with its framing as is (or decoded for HTTP/1.0
 * clients).  Nothing is buffered whole: the client is not read while the
 * upstream cannot take more, and the upstream is not read while the
 * client's output holds more than PX_OUT_HIGH.
 *
 * Timeouts ride on the events: with EV_PERSIST a timeout is restarted by
 * each activation, which is "between two reads" (or writes).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn.h"
#include "worker/http_response.h"
#include "worker/proxy.h"

#define PX_RBUF		(32 * 1024)	/* upstream reads, and a header that
					   fits (grown up to max_header_size) */
#define PX_WBUF		4096
#define PX_WBUF_HIGH	(64 * 1024)	/* request bytes waiting to be sent */
#define PX_OUT_HIGH	(256 * 1024)	/* response bytes waiting for the
					   client */
#define PX_LOGBUF	2048

struct peer {
	const struct config_peer *cf;
	int cur;			/* smooth weighted round-robin */
	unsigned fails;
	uint64_t first_fail_ms;
	uint64_t down_until_ms;
};

struct idle {
	int fd;
	struct peer *peer;
};

struct upstream {
	const struct config_upstream *cf;
	struct peer *peers;
	struct idle *pool;		/* cf->keepalive slots, newest last */
	unsigned nidle;
};

enum px_state { PX_CONNECT, PX_HEADER, PX_BODY };

struct proxy {
	struct conn *c;
	struct upstream *up;
	struct peer *peer;
	int fd;
	enum px_state state;
	bool reused;			/* the connection came from the pool */
	bool retried;
	bool idempotent;
	bool has_body;
	bool chunked;			/* the request body, to the upstream */
	bool body_done;			/* all of it was handed over */
	bool replayable;		/* wbuf still holds the whole request */
	bool got_bytes;			/* the upstream answered something */
	bool write_shut;		/* the upstream stopped taking bytes */
	bool paused;			/* not reading: the client is behind */
	int cerr;			/* connect() failed at once */
	int status;
	uint64_t sent;			/* body bytes to the client */

	struct event rev, wev;

	char *wbuf;
	size_t wsize, wlen, wpos;
	char *rbuf;
	size_t rsize, rlen, scan;

	struct http_response resp;
	struct http_body body;

	struct http_header loghdrs[2];
	char logbuf[PX_LOGBUF];
	struct proxy *next;		/* free list */
};

static struct upstream *ups;
static size_t nups;
static struct proxy *free_px;

static void px_read_cb(evutil_socket_t, short, void *);
static void px_write_cb(evutil_socket_t, short, void *);

static const char *const idempotent[] = {
	"GET", "HEAD", "OPTIONS", "PUT", "DELETE", NULL
};

/* Request fields never forwarded besides the hop-by-hop ones. */
static const char *const req_drop[] = {
	"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
	"Content-Length", "Expect", NULL
};

/* Response fields corral states itself. */
static const char *const resp_drop[] = {
	"Server", "Date", "Content-Length", NULL
};

static bool
name_in(struct span name, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strlen(*list) == name.len &&
		    strncasecmp(*list, name.p, name.len) == 0)
			return true;
	return false;
}

/* Per-worker state, made from the config on first use. */
static bool
ups_init(void)
{
	const struct config *cf = worker.cf;
	struct upstream *u;
	size_t i, j;

	if (ups != NULL)
		return true;
	if ((ups = calloc(cf->nupstreams, sizeof(*ups))) == NULL)
		return false;
	nups = cf->nupstreams;
	for (i = 0; i < nups; i++) {
		u = &ups[i];
		u->cf = &cf->upstreams[i];
		u->peers = calloc(u->cf->npeers, sizeof(*u->peers));
		u->pool = calloc(u->cf->keepalive + 1, sizeof(*u->pool));
		if (u->peers == NULL || u->pool == NULL)
			return false;
		for (j = 0; j < u->cf->npeers; j++)
			u->peers[j].cf = &u->cf->peers[j];
	}
	return true;
}

/* Peers ------------------------------------------------------------- */

static bool
peer_down(const struct peer *p)
{
	return p->down_until_ms > worker.now_ms;
}

/* Smooth weighted round-robin over the peers that are up (or all). */
static struct peer *
peer_pick(struct upstream *u)
{
	struct peer *p, *best = NULL, *end = u->peers + u->cf->npeers;
	bool any_up = false;
	int total = 0;

	for (p = u->peers; p < end; p++)
		any_up |= !peer_down(p);
	for (p = u->peers; p < end; p++) {
		if (any_up && peer_down(p))
			continue;
		p->cur += p->cf->weight;
		total += p->cf->weight;
		if (best == NULL || p->cur > best->cur)
			best = p;
	}
	best->cur -= total;
	return best;
}

static void
peer_failed(struct upstream *u, struct peer *p)
{
	const struct config_upstream *cf = u->cf;

	if (cf->max_fails == 0)
		return;
	if (p->fails > 0 &&
	    worker.now_ms - p->first_fail_ms >= (uint64_t)cf->fail_timeout_ms)
		p->fails = 0;
	if (p->fails++ == 0)
		p->first_fail_ms = worker.now_ms;
	if (p->fails < (unsigned)cf->max_fails)
		return;
	log_error("upstream \"%s\" server %s marked down for %d ms after "
	    "%u failures", cf->name, p->cf->text, cf->fail_timeout_ms,
	    p->fails);
	p->fails = 0;
	p->down_until_ms = worker.now_ms + (uint64_t)cf->fail_timeout_ms;
}

/* Pool -------------------------------------------------------------- */

/* True when an idle connection was not closed by the upstream. */
static bool
idle_alive(int fd)
{
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The newest idle connection to p that is still open, or -1. */
static int
pool_get(struct upstream *u, struct peer *p)
{
	unsigned i;
	int fd;

	for (i = u->nidle; i-- > 0;) {
		if (u->pool[i].peer != p)
			continue;
		fd = u->pool[i].fd;
		memmove(&u->pool[i], &u->pool[i + 1],
		    (u->nidle - i - 1) * sizeof(*u->pool));
		u->nidle--;
		if (idle_alive(fd))
			return fd;
		close(fd);
	}
	return -1;
}

static void
pool_put(struct upstream *u, struct peer *p, int fd)
{
	if (u->cf->keepalive == 0) {
		close(fd);
		return;
	}
	if (u->nidle == (unsigned)u->cf->keepalive) {
		/* The least recently used one goes. */
		close(u->pool[0].fd);
		memmove(&u->pool[0], &u->pool[1],
		    (u->nidle - 1) * sizeof(*u->pool));
		u->nidle--;
	}
	u->pool[u->nidle].fd = fd;
	u->pool[u->nidle].peer = p;
	u->nidle++;
}

/* Buffers ----------------------------------------------------------- */

static bool
wbuf_add(struct proxy *px, const void *p, size_t len)
{
	size_t size = px->wsize;
	char *n;

	if (px->wlen + len > size) {
		while (px->wlen + len > size)
			size *= 2;
		if ((n = realloc(px->wbuf, size)) == NULL)
			return false;
		px->wbuf = n;
		px->wsize = size;
	}
	memcpy(px->wbuf + px->wlen, p, len);
	px->wlen += len;
	return true;
}

static bool
wbuf_span(struct proxy *px, struct span s)
{
	return wbuf_add(px, s.p, s.len);
}

static bool
wbuf_str(struct proxy *px, const char *s)
{
	return wbuf_add(px, s, strlen(s));
}

static struct proxy *
px_alloc(void)
{
	struct proxy *px = free_px;

	if (px != NULL) {
		free_px = px->next;
		return px;
	}
	if ((px = calloc(1, sizeof(*px))) == NULL)
		return NULL;
	px->wbuf = malloc(PX_WBUF);
	px->rbuf = malloc(PX_RBUF);
	if (px->wbuf == NULL || px->rbuf == NULL) {
		free(px->wbuf);
		free(px->rbuf);
		free(px);
		return NULL;
	}
	px->wsize = PX_WBUF;
	px->rsize = PX_RBUF;
	return px;
}

/* Closes the upstream connection, or pools it when reusable. */
static void
px_detach(struct proxy *px, bool reuse)
{
	if (px->fd == -1)
		return;
	event_del(&px->rev);
	event_del(&px->wev);
	if (reuse)
		pool_put(px->up, px->peer, px->fd);
	else
		close(px->fd);
	px->fd = -1;
}

static void
px_release(struct proxy *px, bool reuse)
{
	px_detach(px, reuse);
	if (px->rsize > PX_RBUF) {
		/* A large header grew it; do not keep that around. */
		char *n = realloc(px->rbuf, PX_RBUF);

		if (n != NULL) {
			px->rbuf = n;
			px->rsize = PX_RBUF;
		}
	}
	px->c = NULL;
	px->next = free_px;
	free_px = px;
}

/* The request ------------------------------------------------------- */

static bool
build_request(struct proxy *px, const struct http_request *r)
{
	const struct http_header *h;
	struct span host = http_header_get(r, "Host");
	char line[96];
	bool ok;

	ok = wbuf_span(px, r->method_name) && wbuf_str(px, " ");
	if (r->absolute_form) {
		ok = ok && (r->path.len > 0 ? wbuf_span(px, r->path) :
		    wbuf_str(px, "/"));
		if (r->query.p != NULL)
			ok = ok && wbuf_str(px, "?") && wbuf_span(px, r->query);
	} else {
		ok = ok && wbuf_span(px, r->target);
	}
	ok = ok && wbuf_str(px, " HTTP/1.1\r\n");
	for (h = r->headers; ok && h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    name_in(h->name, req_drop))
			continue;
		ok = wbuf_span(px, h->name) && wbuf_str(px, ": ") &&
		    wbuf_span(px, h->value) && wbuf_str(px, "\r\n");
	}
	if (host.p == NULL) {
		/* HTTP/1.0 without Host: the upstream needs one. */
		ok = ok && wbuf_str(px, "Host: ") && (r->host.p != NULL ?
		    wbuf_span(px, r->host) :
		    wbuf_str(px, px->peer->cf->text)) &&
		    wbuf_str(px, "\r\n");
	}
	ok = ok && wbuf_str(px, "X-Forwarded-For: ") &&
	    wbuf_str(px, conn_peer(px->c)) &&
	    wbuf_str(px, "\r\nX-Forwarded-Proto: http\r\n");
	if (host.p != NULL)
		ok = ok && wbuf_str(px, "X-Forwarded-Host: ") &&
		    wbuf_span(px, host) && wbuf_str(px, "\r\n");
	if (r->chunked)
		ok = ok && wbuf_str(px, "Transfer-Encoding: chunked\r\n");
	else if (r->content_length >= 0) {
		snprintf(line, sizeof(line), "Content-Length: %lld\r\n",
		    (long long)r->content_length);
		ok = ok && wbuf_str(px, line);
	}
	return ok && wbuf_str(px, "\r\n");
}

/* Connecting -------------------------------------------------------- */

static void
px_events(struct proxy *px)
{
	event_assign(&px->rev, worker.base, px->fd, EV_READ | EV_PERSIST,
	    px_read_cb, px);
	event_assign(&px->wev, worker.base, px->fd, EV_WRITE | EV_PERSIST,
	    px_write_cb, px);
}

static void
ms_tv(struct timeval *tv, int ms)
{
	tv->tv_sec = ms / 1000;
	tv->tv_usec = (ms % 1000) * 1000;
}

static void
px_want_write(struct proxy *px)
{
	struct timeval tv;

	ms_tv(&tv, px->state == PX_CONNECT ? px->up->cf->connect_timeout_ms :
	    px->up->cf->send_timeout_ms);
	event_add(&px->wev, &tv);
}

/* Reads; the read timeout runs once the whole request is sent. */
static void
px_want_read(struct proxy *px)
{
	struct timeval tv;
	bool sent = px->body_done && px->wpos == px->wlen;

	if (px->paused || px->state == PX_CONNECT)
		return;
	ms_tv(&tv, px->up->cf->read_timeout_ms);
	event_add(&px->rev, sent ? &tv : NULL);
}

/* Starts a fresh connection; false when there is no socket. */
static bool
px_connect(struct proxy *px)
{
	const struct config_peer *p = px->peer->cf;
	int on = 1;

	px->state = PX_CONNECT;
	px->reused = false;
	px->cerr = 0;
	px->fd = socket(p->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (px->fd == -1) {
		log_at(L_ERROR, errno, "upstream %s: socket", p->text);
		return false;
	}
	setsockopt(px->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	if (connect(px->fd, (const struct sockaddr *)&p->addr,
	    p->addrlen) == -1 && errno != EINPROGRESS)
		px->cerr = errno;	/* reported by the write callback */
	px_events(px);
	px_want_write(px);
	return true;
}

/* A pooled connection to the chosen peer, or a new one. */
static bool
px_begin(struct proxy *px)
{
	px->fd = pool_get(px->up, px->peer);
	if (px->fd == -1)
		return px_connect(px);
	px->reused = true;
	px->state = PX_HEADER;
	px_events(px);
	px_want_write(px);
	px_want_read(px);
	return true;
}

struct proxy *
proxy_start(struct conn *c, int up)
{
	const struct http_request *r = conn_req(c);
	const char *const *m;
	struct proxy *px;

	if ((size_t)up >= worker.cf->nupstreams || !ups_init() ||
	    (px = px_alloc()) == NULL)
		return NULL;
	px->c = c;
	px->up = &ups[up];
	px->fd = -1;
	px->retried = false;
	px->idempotent = false;
	for (m = idempotent; *m != NULL; m++)
		if (strlen(*m) == r->method_name.len &&
		    memcmp(*m, r->method_name.p, r->method_name.len) == 0)
			px->idempotent = true;
	px->has_body = r->content_length > 0 || r->chunked;
	px->chunked = r->chunked;
	px->body_done = !px->has_body;
	px->replayable = true;
	px->got_bytes = false;
	px->write_shut = false;
	px->paused = false;
	px->status = 0;
	px->sent = 0;
	px->wlen = px->wpos = 0;
	px->rlen = px->scan = 0;
	px->peer = peer_pick(px->up);
	if (!build_request(px, r)) {
		px_release(px, false);
		return NULL;
	}
	conn_save_request(c, px->logbuf, sizeof(px->logbuf), px->loghdrs);
	if (!px_begin(px)) {
		px_release(px, false);
		return NULL;
	}
	return px;
}

size_t
proxy_body_room(const struct proxy *px)
{
	size_t queued = px->wlen - px->wpos;

	return queued >= PX_WBUF_HIGH ? 0 : PX_WBUF_HIGH - queued;
}

void
proxy_body(struct proxy *px, const char *p, size_t len, bool last)
{
	char size[24];
	bool ok = true;

	if (px->write_shut) {
		px->body_done = last;
		return;
	}
	if (px->chunked && len > 0) {
		snprintf(size, sizeof(size), "%zx\r\n", len);
		ok = wbuf_str(px, size) && wbuf_add(px, p, len) &&
		    wbuf_str(px, "\r\n");
	} else if (len > 0) {
		ok = wbuf_add(px, p, len);
	}
	if (last && px->chunked)
		ok = ok && wbuf_str(px, "0\r\n\r\n");
	if (!ok) {
		/* Out of memory: the upstream gets a short body and the
		 * connection is not reused. */
		log_error("upstream %s: out of memory for the request body",
		    px->peer->cf->text);
		px->write_shut = true;
	}
	px->body_done = last;
	if (px->state != PX_CONNECT && px->wpos < px->wlen)
		px_want_write(px);
}

/* Errors and the end -------------------------------------------------- */

/*
 * Ends the exchange: the upstream connection is pooled when reuse, the
 * access log gets its line, and the client connection goes on.
 */
static void
px_finish(struct proxy *px, bool reuse)
{
	struct conn *c = px->c;

	reuse = reuse && !px->resp.close && px->body_done && !px->write_shut &&
	    px->wpos == px->wlen;
	if (reuse)
		px->peer->fails = 0;
	resp_done(c, px->status, px->sent);
	px_release(px, reuse);
	conn_proxy_done(c);
}

static void __attribute__((format(printf, 4, 5)))
px_fail(struct proxy *px, int status, bool peer_fault, const char *fmt, ...)
{
	struct conn *c = px->c;
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("upstream %s: %s, client %s", px->peer->cf->text, msg,
	    conn_peer(c));
	if (peer_fault)
		peer_failed(px->up, px->peer);
	if (px->state == PX_BODY) {
		/* The header went out: the client sees the connection end
		 * before the body does. */
		resp_done(c, px->status, px->sent);
		px_release(px, false);
		conn_abort(c);
		return;
	}
	px_release(px, false);
	resp_error(c, status);
	conn_proxy_done(c);
}

/* Once, on a fresh connection, when a pooled one failed early. */
static bool
px_retry(struct proxy *px)
{
	if (!px->reused || px->retried || px->got_bytes || !px->idempotent ||
	    !px->replayable)
		return false;
	log_info("upstream %s: kept-alive connection failed; retrying on a "
	    "new one", px->peer->cf->text);
	px_detach(px, false);
	px->retried = true;
	px->wpos = 0;
	px->rlen = px->scan = 0;
	if (px_connect(px))
		return true;
	px_fail(px, 502, false, "cannot retry");
	return true;
}

bool
proxy_cancel(struct proxy *px)
{
	bool started = px->state == PX_BODY;

	px_release(px, false);
	return started;
}

void
proxy_drained(struct proxy *px)
{
	if (!px->paused)
		return;
	px->paused = false;
	px_want_read(px);
}

/* Writing ------------------------------------------------------------- */

static void
px_connected(struct proxy *px)
{
	int err = px->cerr;
	socklen_t len = sizeof(err);

	if (err == 0 &&
	    getsockopt(px->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		err = errno;
	if (err != 0) {
		px_fail(px, 502, true, "connect: %s", strerror(err));
		return;
	}
	px->state = PX_HEADER;
	px_want_read(px);
	px_want_write(px);
}

static void
px_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c = px->c;
	ssize_t n;

	worker_update_time();
	if (what & EV_TIMEOUT) {
		if (px->state == PX_CONNECT)
			px_fail(px, 504, true, "connect timed out");
		else
			px_fail(px, 504, false, "timed out sending the "
			    "request");
		return;
	}
	if (px->state == PX_CONNECT) {
		px_connected(px);
		return;
	}
	if (px->wpos < px->wlen && !px->write_shut) {
		n = send(px->fd, px->wbuf + px->wpos, px->wlen - px->wpos,
		    MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			if (px_retry(px))
				return;
			if (!px->got_bytes) {
				px_fail(px, 502, false, "send: %s",
				    strerror(errno));
				return;
			}
			/* It answered already; read what it says. */
			px->write_shut = true;
		} else {
			px->wpos += (size_t)n;
		}
	}
	if (px->wpos < px->wlen && !px->write_shut)
		return;
	event_del(&px->wev);
	if (px->has_body) {
		/* Body bytes leave the buffer: no replay from here on. */
		px->wpos = px->wlen = 0;
		px->replayable = false;
	}
	px_want_read(px);
	if (!px->body_done)
		conn_body_resume(c);
}

/* Reading ------------------------------------------------------------- */

/* Puts out the response header, rewritten for the client. */
static void
px_send_header(struct proxy *px)
{
	const struct http_response *r = &px->resp;
	const struct http_header *h;
	struct conn *c = px->c;
	char date[HTTP_DATE_LEN + 1];
	int64_t len = -1;
	bool decode = false;

	px->status = r->status;
	resp_headerf(c, "HTTP/1.1 %d %.*s", r->status,
	    (int)(r->reason.len > 0 ? r->reason.len :
	    strlen(http_reason(r->status))),
	    r->reason.len > 0 ? r->reason.p : http_reason(r->status));
	resp_header(c, worker.server_line, worker.server_line_len);
	if (r->date.p != NULL) {
		resp_header(c, "Date: ", 6);
		resp_header(c, r->date.p, r->date.len);
		resp_header(c, "\r\n", 2);
	} else {
		http_date_format(worker.now, date);
		resp_headerf(c, "Date: %s", date);
	}
	for (h = r->headers; h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    name_in(h->name, resp_drop))
			continue;
		resp_header(c, h->name.p, h->name.len);
		resp_header(c, ": ", 2);
		resp_header(c, h->value.p, h->value.len);
		resp_header(c, "\r\n", 2);
	}
	switch (r->framing) {
	case HTTP_BODY_NONE:
		if (r->status != 204 && r->status != 304)
			len = r->content_length;
		break;
	case HTTP_BODY_LENGTH:
		len = r->content_length;
		break;
	case HTTP_BODY_CHUNKED:
		if (conn_req(c)->version == 11)
			resp_header(c, "Transfer-Encoding: chunked\r\n", 28);
		else {
			decode = true;
			resp_no_keepalive(c);
		}
		break;
	default:
		resp_no_keepalive(c);
		break;
	}
	resp_end_headers(c, len);
	http_body_init(&px->body, r, decode);
	px->state = PX_BODY;
}

/*
 * Relays body bytes rbuf[0..n).  Returns 1 when the response is complete
 * (px is gone), -1 when it failed (px is gone), 0 for more.
 */
static int
px_relay(struct proxy *px, size_t n)
{
	size_t len = n, data, out;
	int rc;

	if (resp_is_head(px->c) && px->body.framing != HTTP_BODY_NONE)
		len = 0;
	rc = http_body_feed(&px->body, px->rbuf, &len, &data);
	if (rc == HTTP_ERROR) {
		px_fail(px, 502, true, "bad chunked framing in the response "
		    "body");
		return -1;
	}
	out = px->body.decode ? data : len;
	if (out > 0)
		resp_body_copy(px->c, px->rbuf, out);
	px->sent += out;
	if (rc != HTTP_OK)
		return 0;
	if (len < n)
		log_warn("upstream %s sent %zu bytes after the response; "
		    "closing it", px->peer->cf->text, n - len);
	px_finish(px, len == n);
	return 1;
}

/* Parses the response header in rbuf; 1 when done, 0 for more, -1 gone. */
static int
px_header(struct proxy *px)
{
	const struct config *cf = worker.cf;
	ssize_t n;
	char *grown;

	for (;;) {
		n = http_parse_response(&px->resp, px->rbuf, px->rlen,
		    &px->scan, worker.headers, cf->max_headers,
		    cf->max_header_size, resp_is_head(px->c));
		if (n == HTTP_AGAIN) {
			if (px->rlen < px->rsize)
				return 0;
			if (px->rsize >= cf->max_header_size + 4) {
				px_fail(px, 502, true, "response header too "
				    "large");
				return -1;
			}
			grown = realloc(px->rbuf, px->rsize * 2);
			if (grown == NULL) {
				px_fail(px, 502, false, "out of memory");
				return -1;
			}
			px->rbuf = grown;
			px->rsize *= 2;
			return 0;
		}
		if (n == HTTP_ERROR) {
			px_fail(px, 502, true, "invalid response header: %s",
			    px->resp.error ? px->resp.error : "?");
			return -1;
		}
		if (px->resp.status >= 200)
			break;
		/* 1xx: dropped; the final response follows. */
		px->rlen -= (size_t)n;
		memmove(px->rbuf, px->rbuf + n, px->rlen);
		px->scan = 0;
	}
	px->peer->fails = 0;
	px_send_header(px);
	px->rlen -= (size_t)n;
	memmove(px->rbuf, px->rbuf + n, px->rlen);
	return 1;
}

static void
px_eof(struct proxy *px, int err)
{
	if (px_retry(px))
		return;
	if (px->state != PX_BODY) {
		px_fail(px, 502, true, "%s before the response header",
		    err ? strerror(err) : "connection closed");
		return;
	}
	if (http_body_eof(&px->body) == HTTP_OK) {
		px_finish(px, false);
		return;
	}
	px_fail(px, 502, false, "connection %s after %llu body bytes",
	    err ? strerror(err) : "closed",
	    (unsigned long long)px->sent);
}

static void
px_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;
	struct conn *c = px->c;
	ssize_t n;

	worker_update_time();
	if (what & EV_TIMEOUT) {
		px_fail(px, 504, px->state != PX_BODY, "read timed out");
		return;
	}
	n = recv(px->fd, px->rbuf + px->rlen, px->rsize - px->rlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		px_eof(px, n < 0 ? errno : 0);
		return;
	}
	px->got_bytes = true;
	px->rlen += (size_t)n;
	if (px->state != PX_BODY && px_header(px) != 1)
		return;
	/* Also with no bytes after the header: an empty body is done. */
	n = (ssize_t)px->rlen;
	px->rlen = 0;
	if (px_relay(px, (size_t)n) != 0)
		return;
	if (conn_out_buffered(c) > PX_OUT_HIGH) {
		/* Resumed by proxy_drained() once the client caught up. */
		px->paused = true;
		event_del(&px->rev);
	}
	conn_flush(c);
}

void
proxy_free_all(void)
{
	struct proxy *px;
	size_t i;

	while ((px = free_px) != NULL) {
		free_px = px->next;
		free(px->wbuf);
		free(px->rbuf);
		free(px);
	}
	for (i = 0; ups != NULL && i < nups; i++) {
		while (ups[i].nidle > 0)
			close(ups[i].pool[--ups[i].nidle].fd);
		free(ups[i].peers);
		free(ups[i].pool);
	}
	free(ups);
	ups = NULL;
	nups = 0;
}

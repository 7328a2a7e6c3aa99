/*
 * The memcached listener's connections, in each worker's event loop: read
 * what the client sends, run every complete command in it (a pipeline
 * is answered with one write), copy data blocks straight into their
 * reservation in the store, write the replies.
 *
 * A data block must end with CRLF right after the announced length; if
 * not, memcached's "CLIENT_ERROR bad data chunk" is the answer and the
 * rest of that line is dropped, so bytes smuggled behind a value are
 * never run as a command.  A line of 2 KB without a newline (unless it
 * is a get of many keys), an HTTP request or a binary-protocol request
 * closes the connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "shm/stats.h"
#include "worker/conn.h"
#include "worker/mc_conn.h"
#include "worker/mc_impl.h"
#include "worker/mc_store.h"

#define IN_INIT		65536
#define IN_MAX		(1024 * 1024)	/* longest get line */
#define OUT_INIT	16384
#define OUT_HIGH	(4 * 1024 * 1024) /* stop reading commands above */
#define READS_MAX	16		/* full reads run before replying */

static struct mc_conn *conns;
static struct event **accept_evs;
static bool quitting;

static void mc_close(struct mc_conn *c);
static void mc_run(struct mc_conn *c);

size_t
mc_max_item(void)
{
	size_t max = mc_value_max(worker.store);
	uint64_t cf = worker.cf->memcached.max_item;

	return cf != 0 && cf < max ? (size_t)cf : max;
}

void
mc_out(struct mc_conn *c, const void *p, size_t n)
{
	size_t size;
	char *b;

	if (c->olen + n > c->osize) {
		size = c->osize ? c->osize : OUT_INIT;
		while (size < c->olen + n)
			size *= 2;
		if ((b = realloc(c->out, size)) == NULL) {
			log_at(L_ERROR, errno, "memcached output");
			c->state = MC_CLOSING;	/* what is queued still goes */
			return;
		}
		c->out = b;
		c->osize = size;
	}
	memcpy(c->out + c->olen, p, n);
	c->olen += n;
}

void
mc_outs(struct mc_conn *c, const char *s)
{
	mc_out(c, s, strlen(s));
}

void
mc_out_u64(struct mc_conn *c, uint64_t v)
{
	char buf[24], *p = buf + sizeof(buf);

	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	mc_out(c, p, (size_t)(buf + sizeof(buf) - p));
}

void
mc_out_i64(struct mc_conn *c, int64_t v)
{
	if (v < 0) {
		mc_out(c, "-", 1);
		mc_out_u64(c, (uint64_t)0 - (uint64_t)v);
	} else
		mc_out_u64(c, (uint64_t)v);
}

void
mc_reply(struct mc_conn *c, const char *s, bool noreply)
{
	if (noreply)
		return;
	mc_outs(c, s);
	mc_out(c, "\r\n", 2);
}

/* Writes what is queued; false when the connection is gone. */
static bool
out_flush(struct mc_conn *c)
{
	ssize_t n;

	while (c->opos < c->olen) {
		n = send(c->fd, c->out + c->opos, c->olen - c->opos,
		    MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			log_at(L_INFO, errno, "memcached send");
			mc_close(c);
			return false;
		}
		c->opos += (size_t)n;
		STATS_ADD(mc_bytes_written, n);
	}
	if (c->opos == c->olen)
		c->opos = c->olen = 0;
	return true;
}

static void
arm(struct mc_conn *c, bool write)
{
	if (c->writing == write)
		return;
	event_del(c->ev);
	event_assign(c->ev, worker.base, c->fd, (write ? EV_WRITE : EV_READ) |
	    EV_PERSIST, event_get_callback(c->ev), c);
	event_add(c->ev, NULL);
	c->writing = write;
}

/*
 * Between commands a connection may idle (idle_timeout, 0: for ever);
 * within one (a line or a data block under way, a reservation held in
 * the store) it must go on within body_timeout.
 */
static void
touch_timer(struct mc_conn *c)
{
	bool within = c->state == MC_DATA || c->state == MC_SWALLOW ||
	    c->ipos < c->ilen;
	int ms = within ? worker.cf->body_timeout_ms :
	    worker.cf->memcached.idle_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (ms > 0)
		evtimer_add(c->timer, &tv);
	else
		evtimer_del(c->timer);
}

/* Copies data bytes into the pending value; true when it is complete. */
static void
on_data(struct mc_conn *c)
{
	size_t n = c->ilen - c->ipos;
	const char *p;

	if (n > c->p.need)
		n = c->p.need;
	memcpy(c->p.dst, c->in + c->ipos, n);
	c->p.dst += n;
	c->p.need -= n;
	c->ipos += n;
	if (c->p.need > 0 || c->ilen - c->ipos < 2)
		return;
	p = c->in + c->ipos;
	c->ipos += 2;
	c->state = MC_CMD;
	if (p[0] == '\r' && p[1] == '\n') {
		mc_exec_store(c);
		return;
	}
	/* More bytes than announced: refuse, and drop the rest of the line
	 * rather than run it (memcached would). */
	mc_reply(c, "CLIENT_ERROR bad data chunk",
	    c->p.cmd.noreply && c->p.cmd.op != MC_MS);
	STATS_INC(mc_errors);
	mc_pending_free(c);
	if (p[1] != '\n')
		c->state = MC_SKIPLINE;
}

static void
on_swallow(struct mc_conn *c)
{
	size_t n = c->ilen - c->ipos;

	if (n > c->swallow)
		n = c->swallow;
	c->ipos += n;
	c->swallow -= n;
	if (c->swallow == 0)
		c->state = MC_CMD;
}

static void
on_skipline(struct mc_conn *c)
{
	const char *nl = memchr(c->in + c->ipos, '\n', c->ilen - c->ipos);

	if (nl == NULL) {
		c->ipos = c->ilen;
		return;
	}
	c->ipos = (size_t)(nl - c->in) + 1;
	c->state = MC_CMD;
}

/* Does the line end with an HTTP version, as a request line does? */
static bool
http_line(const char *p, size_t len)
{
	const char *sp;

	while (len > 0 && p[len - 1] == ' ')
		len--;
	sp = memrchr(p, ' ', len);
	return sp != NULL && (size_t)(p + len - sp - 1) >= 5 &&
	    memcmp(sp + 1, "HTTP/", 5) == 0;
}

/* One command line; false when nothing more can be done now. */
static bool
on_line(struct mc_conn *c)
{
	struct mc_cmd cmd;
	size_t len, used;

	switch (mc_line(c->in + c->ipos, c->ilen - c->ipos, IN_MAX, &len,
	    &used)) {
	case MC_LINE_MORE:
		return false;
	case MC_LINE_CLOSE:
		log_info("memcached: closing a connection that sent no "
		    "command line");
		c->ipos = c->ilen;
		c->state = MC_CLOSING;
		return false;
	default:
		break;
	}
	if (http_line(c->in + c->ipos, len)) {
		c->state = MC_CLOSING;	/* as memcached: not for us */
		c->ipos = c->ilen;
		return false;
	}
	if (!mc_exec_line(c, c->in + c->ipos, len, &cmd)) {
		c->state = MC_CLOSING;
		c->ipos = c->ilen;
		return false;
	}
	c->ipos += used;
	return true;
}

/* Runs everything complete in the input buffer. */
static void
mc_run(struct mc_conn *c)
{
	for (;;) {
		if (c->olen > OUT_HIGH || c->state == MC_CLOSING)
			return;
		if (c->ipos == c->ilen && c->state != MC_DATA)
			return;
		switch (c->state) {
		case MC_CMD:
			if (!on_line(c))
				return;
			break;
		case MC_DATA:
			on_data(c);
			if (c->state == MC_DATA)
				return;
			break;
		case MC_SWALLOW:
			on_swallow(c);
			break;
		case MC_SKIPLINE:
			on_skipline(c);
			break;
		default:
			return;
		}
	}
}

/* Room to read into; false when the buffer cannot grow. */
static bool
in_room(struct mc_conn *c)
{
	size_t size;
	char *b;

	if (c->ipos > 0) {
		memmove(c->in, c->in + c->ipos, c->ilen - c->ipos);
		c->ilen -= c->ipos;
		c->ipos = 0;
	}
	if (c->ilen < c->isize)
		return true;
	size = c->isize ? c->isize * 2 : IN_INIT;
	if (size > IN_MAX + 1024 || (b = realloc(c->in, size)) == NULL)
		return false;
	c->in = b;
	c->isize = size;
	return true;
}

/*
 * Reads and runs commands.  A read that fills the buffer says more is
 * waiting: it is read and run too before the replies go, so that a
 * pipelining client gets one write (and one wakeup) for a batch rather
 * than one per buffer.  Returns false when the connection is gone.
 */
static bool
on_readable(struct mc_conn *c)
{
	size_t room;
	ssize_t n;
	int i;

	for (i = 0; i < READS_MAX; i++) {
		if (!in_room(c)) {
			log_warn("memcached: a command line over %d bytes",
			    IN_MAX);
			mc_close(c);
			return false;
		}
		room = c->isize - c->ilen;
		n = recv(c->fd, c->in + c->ilen, room, 0);
		/* The end after a full read: the replies to what came before
		 * it go first (a half-closing client waits for them); the
		 * next event reads the end again and closes. */
		if (n == 0 && i > 0)
			break;
		if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
			mc_close(c);
			return false;
		}
		if (n == -1)
			break;
		c->ilen += (size_t)n;
		STATS_ADD(mc_bytes_read, n);
		mc_run(c);
		if ((size_t)n < room || c->state == MC_CLOSING ||
		    c->olen > OUT_HIGH)
			break;
	}
	return true;
}

static void
event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mc_conn *c = arg;

	worker_update_time();
	if (what & EV_WRITE) {
		if (!out_flush(c))
			return;
		if (c->olen > 0)
			return;
		if (c->state == MC_CLOSING) {
			mc_close(c);
			return;
		}
		arm(c, false);
		mc_run(c);
	} else if (!on_readable(c)) {
		return;
	}
	touch_timer(c);
	if (!out_flush(c))
		return;
	if (c->olen > 0)
		arm(c, true);
	else if (c->state == MC_CLOSING ||
	    (quitting && c->state == MC_CMD && c->ipos == c->ilen))
		mc_close(c);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mc_conn *c = arg;

	log_info("memcached: closing a connection %s",
	    c->state == MC_DATA || c->ipos < c->ilen ?
	    "stalled in a command" : "idle too long");
	mc_close(c);
}

static void
mc_close(struct mc_conn *c)
{
	mc_pending_free(c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	event_free(c->ev);
	event_free(c->timer);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	STATS_DEC(mc_conn_active);
	worker_conn_closed();
}

static void
accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct mc_conn *c;
	int fd, i, one = 1;

	worker_update_time();
	for (i = 0; i < 16; i++) {
		if (worker.nconns >= (unsigned)worker.cf->worker_connections)
			return;
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				log_at(L_ERROR, errno, "memcached accept");
			return;
		}
		if ((c = calloc(1, sizeof(*c))) == NULL ||
		    (c->ev = event_new(worker.base, fd, EV_READ | EV_PERSIST,
		    event_cb, c)) == NULL) {
			log_at(L_ERROR, errno, "memcached connection");
			free(c);
			close(fd);
			continue;
		}
		/* Replies are small and come as the commands do: no Nagle
		 * wait for them (memcached does the same). */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if ((c->timer = evtimer_new(worker.base, timer_cb, c)) ==
		    NULL) {
			event_free(c->ev);
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->next = conns;
		if (conns != NULL)
			conns->prev = c;
		conns = c;
		worker.nconns++;
		STATS_INC(mc_conn_accepted);
		STATS_INC(mc_conn_active);
		event_add(c->ev, NULL);
		touch_timer(c);
	}
}

void
mc_listen_start(void)
{
	const struct config_memcached *m = &worker.cf->memcached;

	if (m->nlisten == 0 || worker.store == NULL)
		return;
	if ((accept_evs = calloc(m->nlisten, sizeof(*accept_evs))) == NULL)
		fatal("memcached listener");
	for (size_t i = 0; i < m->nlisten; i++) {
		accept_evs[i] = event_new(worker.base, worker.rt->mc_fds[i],
		    EV_READ | EV_PERSIST, accept_cb, NULL);
		if (accept_evs[i] == NULL)
			fatalx("event_new failed");
		event_add(accept_evs[i], NULL);
	}
}

void
mc_quit(void)
{
	struct mc_conn *c, *next;

	quitting = true;
	for (size_t i = 0; accept_evs != NULL &&
	    i < worker.cf->memcached.nlisten; i++)
		event_del(accept_evs[i]);
	for (c = conns; c != NULL; c = next) {
		next = c->next;
		if (c->state == MC_CMD && c->ipos == c->ilen && c->olen == 0)
			mc_close(c);
	}
}

void
mc_close_all(void)
{
	while (conns != NULL)
		mc_close(conns);
	for (size_t i = 0; accept_evs != NULL &&
	    i < worker.cf->memcached.nlisten; i++)
		event_free(accept_evs[i]);
	free(accept_evs);
	accept_evs = NULL;
}

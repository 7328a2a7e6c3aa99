/*
 * The request body: framing by Content-Length or chunked, limits, the
 * timeout, and handing it to the proxy as it comes (no faster than the
 * upstream takes it); a body no handler wants is read and discarded.
 * Part of the connection layer (conn_impl.h).
 */
#include "master/config.h"
#include "master/log.h"
#include "worker/conn_impl.h"
#include "worker/proxy.h"

static uint64_t
body_max(const struct conn *c)
{
	return c->loc != NULL ? c->loc->max_body_size :
	    worker.cf->max_body_size;
}

/*
 * body_timeout runs from the last bytes of the body that came (nginx's
 * client_body_timeout), but a body must also come at body_min_rate on
 * average: it ends at most body_timeout after it began plus a second for
 * each body_min_rate bytes (Apache's mod_reqtimeout MinRate).  A body
 * trickling in a byte at a time is cut; an upload of any size at a usable
 * speed is not, however long it takes.
 */
uint64_t
body_due(const struct conn *c)
{
	const struct config *cf = worker.cf;
	const struct conn_rq *rq = c->rq;
	uint64_t due, cap;

	due = rq->body_last_ms + (uint64_t)cf->body_timeout_ms;
	if (cf->body_min_rate > 0) {
		cap = rq->body_start_ms + (uint64_t)cf->body_timeout_ms +
		    rq->body_got * 1000 / cf->body_min_rate;
		if (cap < due)
			due = cap;
	}
	return due;
}

/* The body waited for the upstream, not for the client (paused since
 * body_last_ms): its clocks move on by that long. */
void
body_resumed(struct conn *c)
{
	uint64_t now = dl_now();

	c->rq->body_start_ms += now - c->rq->body_last_ms;
	c->rq->body_last_ms = now;
}

/* Sets up reading (and discarding) the body that follows the header. */
bool
body_begin(struct conn *c)
{
	struct http_request *r = &c->rq->req;
	uint64_t max = body_max(c);

	c->rq->body_got = 0;
	c->rq->body_start_ms = c->rq->body_last_ms = dl_now();
	c->rq->body_seen = 0;
	c->rq->body_chunked = r->chunked;
	c->rq->body_left = r->content_length > 0 ? (uint64_t)r->content_length :
	    0;
	if (max > 0 && c->rq->body_left > max) {
		log_info("client %s: body of %llu bytes is too large",
		    c->peer, (unsigned long long)c->rq->body_left);
		resp_error(c, 413);
		return false;
	}
	if (c->rq->body_chunked)
		http_chunked_init(&c->rq->chunk);
	if (r->expect_continue && (c->rq->body_left > 0 || c->rq->body_chunked) &&
	    c->rq->ipos == c->rq->ilen)
		obuf_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	return true;
}

/* Bytes of the body came: body_due()'s clocks. */
static inline void
body_got(struct conn *c, size_t n)
{
	if (n == 0)
		return;
	c->rq->body_got += n;
	c->rq->body_last_ms = dl_now();
}

/*
 * Discards the body bytes in the buffer.  Returns 0 when the body is
 * complete, HTTP_AGAIN when more is to come, or the status for a bad one.
 */
int
body_consume(struct conn *c)
{
	size_t avail = c->rq->ilen - c->rq->ipos, used, data, room;
	uint64_t max = body_max(c);
	char *p = c->rq->ibuf + c->rq->ipos;
	int rc;

	if (c->rq->px != NULL) {
		/* Forwarded as it comes, no faster than the upstream takes
		 * it. */
		room = proxy_body_room(c->rq->px);
		if (avail > room)
			avail = room;
	}
	if (!c->rq->body_chunked) {
		used = avail < c->rq->body_left ? avail : (size_t)c->rq->body_left;
		body_got(c, used);
		c->rq->body_left -= used;
		c->rq->ipos += used;
		if (c->rq->px != NULL && (used > 0 || c->rq->body_left == 0))
			proxy_body(c->rq->px, p, used, c->rq->body_left == 0);
		return c->rq->body_left == 0 ? 0 : HTTP_AGAIN;
	}
	used = avail;
	rc = http_chunked_decode(&c->rq->chunk, p, &used, &data);
	body_got(c, used);
	c->rq->ipos += used;
	if (c->rq->px != NULL && rc != HTTP_ERROR &&
	    (data > 0 || rc == HTTP_OK))
		proxy_body(c->rq->px, p, data, rc == HTTP_OK);
	c->rq->body_seen += data;
	if (rc == HTTP_ERROR) {
		log_info("client %s: bad chunked body", c->peer);
		return 400;
	}
	if (max > 0 && c->rq->body_seen > max) {
		log_info("client %s: chunked body is too large", c->peer);
		return 413;
	}
	return rc == HTTP_OK ? 0 : HTTP_AGAIN;
}

/* A bad body while proxying: answer it unless the response has begun. */
void
body_failed(struct conn *c, int status)
{
	struct proxy *px = c->rq->px;

	c->rq->px = NULL;
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

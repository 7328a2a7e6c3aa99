/*
 * The reverse proxy's handler: one proxied request, from the cache lookup
 * to the last body byte relayed.
 *
 * The steps of a request are named once, in PX_STEPS, and px_run() goes
 * from one to the next (Varnish's cache_fetch.c: while the step is not
 * DONE, switch on it).  Three steps rest until an event moves them on:
 * WAIT (the waiting list wakes it, or its timer fires), RECV (the
 * upstream driver hands over the response head) and BODY (the driver
 * hands over body bytes as they come, relayed at once; the last ones lead
 * to FINISH).
 *
 * The request goes upstream through the header rules of the field table
 * (worker/http_field.h): hop-by-hop fields and Connection options never,
 * X-Forwarded-* and framing restated by corral, names with underscores
 * dropped unless the server allows them, preconditions kept back when the
 * cache answers them.  The response comes back without hop-by-hop fields
 * and with corral's Server, Date, framing and X-Cache.  Nothing is
 * buffered whole: the client is not read while the upstream cannot take
 * more, and the upstream is not read while the client's output holds more
 * than PX_OUT_HIGH.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/http_field.h"
#include "worker/mc_client.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"
#include "worker/fcgi_params.h"
#include "worker/proxy.h"
#include "worker/proxy_impl.h"
#include "worker/reqbody.h"
#include "worker/resp.h"
#include "worker/upstream.h"
#include "worker/upstream_proto.h"
#include "worker/vars.h"
#include "worker/waitlist.h"

static struct proxy *free_px;

static enum px_step px_run(struct proxy *, enum px_step);

static void px_kick_cb(evutil_socket_t, short, void *);

static struct proxy *
px_alloc(void)
{
	struct proxy *px = free_px;

	if (px != NULL) {
		free_px = px->next;
		return px;
	}
	if ((px = calloc(1, sizeof(*px))) != NULL)
		event_assign(&px->kick, worker.base, -1, 0, px_kick_cb, px);
	return px;
}

/* Lets go of the exchange, the cache's part and the waiting list. */
static void
px_release(struct proxy *px)
{
	waitlist_remove(&px->w);
	if (px->l2 != NULL)
		mc_client_cancel(px->l2);
	px->l2 = NULL;
	if (px->kicked) {
		event_del(&px->kick);
		px->kicked = false;
	}
	reqbody_free(px->rb);
	px->rb = NULL;
	if (px->uc != NULL)
		upstream_conn_close(px->uc);
	if (px->cr != NULL)
		cache_req_free(px->cr);
	px->uc = NULL;
	px->cr = NULL;
	px->c = NULL;
	px->next = free_px;
	free_px = px;
}

static void
px_done(struct proxy *px)
{
	struct conn *c = px->c;
	bool abort = px->abort, starting = px->starting;
	bool intercept = px->intercept;
	int status = px->status;

	px_release(px);
	if (starting)
		return;			/* proxy_start() says it is answered */
	if (abort)
		conn_abort(c);
	else if (intercept)
		conn_proxy_error(c, status);
	else
		conn_proxy_done(c);
}

/* Steps ------------------------------------------------------------- */

static void px_woken(struct waiter *, bool);

static enum px_step
px_verdict(struct proxy *px, enum cache_verdict v)
{
	switch (v) {
	case CACHE_ANSWERED:
		return PX_DONE;
	case CACHE_REFRESH:
		px->bg = true;
		return PX_FETCH;
	case CACHE_WAIT:
		waitlist_add(&px->w, cache_wait_token(px->cr),
		    px->loc->cache_lock_timeout_ms, px_woken);
		return PX_WAIT;
	default:
		return PX_FETCH;
	}
}

/* LOOKUP: after a wake-up, or when the lock timed out. */
static enum px_step
px_lookup(struct proxy *px)
{
	return px_verdict(px, cache_lookup(px->cr, px->timed_out));
}

static void
px_woken(struct waiter *w, bool timed_out)
{
	struct proxy *px = (struct proxy *)((char *)w -
	    offsetof(struct proxy, w));

	if (timed_out)
		log_info("client %s: cache lock timed out; fetching without "
		    "it", conn_peer(px->c));
	px->timed_out = timed_out;
	px_run(px, PX_LOOKUP);
}

static bool px_interim_cb(void *, const struct http_response *);
static bool px_head_cb(void *, const struct http_response *, bool *);
static bool px_body_cb(void *, char *, size_t, bool);
static void px_error_cb(void *, int);
static void px_sent_cb(void *);

static const struct upstream_handler px_handler = {
	.interim = px_interim_cb,
	.head = px_head_cb,
	.body = px_body_cb,
	.error = px_error_cb,
	.sent = px_sent_cb,
};

/* L2 answered: a hit is stored here and answered, else the origin. */
static void
px_l2_cb(void *arg, const struct mc_value *v, size_t n)
{
	struct proxy *px = arg;

	px->l2 = NULL;
	worker_update_time();
	if (cache_l2_fill(px->cr, v, n)) {
		px_run(px, PX_LOOKUP);
		return;
	}
	px->l2_asked = 2;		/* a miss there: the origin now */
	px_run(px, PX_FETCH);
}

/*
 * Hands the kept body to the exchange, as much as it takes now; the rest
 * goes from px_sent_cb().  False when the body file cannot be read.
 */
static bool
px_pump(struct proxy *px)
{
	const char *p;
	size_t room, n;

	while (!reqbody_read_all(px->rb) &&
	    (room = upstream_conn_body_room(px->uc)) > 0) {
		if ((p = reqbody_next(px->rb, room, &n)) == NULL)
			return false;
		upstream_conn_body(px->uc, p, n, reqbody_read_all(px->rb));
	}
	return true;
}

/* FETCH: builds the request and starts the exchange. */
static enum px_step
px_fetch(struct proxy *px)
{
	struct upstream_request rq;
	int status;

	if (px->spool)
		return PX_SPOOL;	/* px_kick_cb() comes back */
	if (px->spool_failed) {
		if (!px->bg)
			resp_error(px->c, 500);
		return PX_DONE;
	}
	/* A miss that fills asks the cache's cluster first: for the URL,
	 * and for its variant when the URL's answer was a Vary spec. */
	if (px->l2_asked < 2 && cache_l2_wanted(px->cr)) {
		px->l2_asked++;
		if ((px->l2 = cache_l2_get(px->cr, px_l2_cb, px)) != NULL)
			return PX_L2;
	}

	/* A HEAD miss fetches the GET, as nginx and Varnish do: it fills. */
	px->head_get = px->req->method == HTTP_M_HEAD &&
	    (cache_mediates(px->cr) || px->bg);
	px_request(px, &rq);
	px->uc = upstream_conn_open(px->up, upstream_proto_for(rq.up), &rq,
	    &px_handler, px, &status);
	if (px->uc != NULL && px->rb != NULL && !px_pump(px)) {
		px->status = 500;
		return PX_FAIL;
	}
	if (px->uc != NULL)
		return PX_RECV;
	if (status == 502)
		log_error("client %s: cannot start the upstream request",
		    conn_peer(px->c));
	if (!px->bg)
		resp_error(px->c, status);
	return PX_DONE;
}

/* Puts out the response head, rewritten for the client. */
static void
px_send_head(struct proxy *px, const struct http_response *r)
{
	const struct http_header *h;
	struct conn *c = px->c;
	int64_t len = -1;
	unsigned drop = HF_HOP | HF_RESP_DROP;
	bool v11 = conn_req(c)->version == 11, opts;
	size_t i = 0;

	if (cache_states_x_cache(px->cr))
		drop |= HF_CACHE_OWN;
	if (r->reason.len > 0)
		resp_status_reason(c, r->status, r->reason.p, r->reason.len);
	else
		resp_status_reason(c, r->status, http_reason(r->status),
		    strlen(http_reason(r->status)));
	if (r->date.p != NULL) {
		resp_header(c, worker.server_line, worker.server_line_len);
		resp_header(c, "Date: ", 6);
		resp_header(c, r->date.p, r->date.len);
		resp_header(c, "\r\n", 2);
	} else {
		/* Server and this second's Date, formatted once a second. */
		resp_header(c, worker.common, worker.common_len);
	}
	opts = http_response_header(r, "Connection", &i).p != NULL;
	for (h = r->headers; h < r->headers + r->nheaders; h++) {
		if ((http_field_flags(h->name) & drop) || (opts &&
		    http_field_connection_option(r->headers, r->nheaders,
		    h->name)))
			continue;
		resp_header(c, h->name.p, h->name.len);
		resp_header(c, ": ", 2);
		resp_header(c, h->value.p, h->value.len);
		resp_header(c, "\r\n", 2);
	}
	cache_head_lines(px->cr, c);
	px->out = OUT_AS_IS;
	*px->decode = true;
	switch (r->framing) {
	case HTTP_BODY_NONE:
		if (r->status != 204 && r->status != 304)
			len = r->content_length;
		break;
	case HTTP_BODY_LENGTH:
		len = r->content_length;
		break;
	case HTTP_BODY_CHUNKED:
	case HTTP_BODY_UNTIL_CLOSE:
		if (!v11 || (r->framing == HTTP_BODY_UNTIL_CLOSE &&
		    r->close)) {
			/* The body ends when the connection does. */
			resp_no_keepalive(c);
			break;
		}
		resp_header(c, "Transfer-Encoding: chunked\r\n", 28);
		/* As it came, unless it is stored (then decoded) or
		 * framed by a protocol other than HTTP. */
		if (r->framing == HTTP_BODY_CHUNKED &&
		    !cache_storing(px->cr) && !px->head_get)
			*px->decode = false;
		else
			px->out = OUT_CHUNK;
		break;
	}
	resp_end_headers(c, len);
}

/* HEAD: the cache may answer instead; else the head goes on. */
static enum px_step
px_head(struct proxy *px)
{
	const struct http_response *r = px->resp;

	if (px->cr != NULL &&
	    cache_intercept(px->cr, r, upstream_conn_peer_name(px->uc)))
		return PX_DONE;
	px->status = r->status;
	if (r->status == 404 && !px->bg &&
	    upstream_proto_for(upstream_config(px->up))->intercept_404) {
		/* Its body (none, for memcached) is read to the end, so the
		 * connection is kept; the client gets error_page's answer;
		 * nothing is stored (px_release() ends the fill's lease). */
		px->intercept = true;
		*px->decode = true;
		return PX_BODY;
	}
	if (px->cr != NULL)
		cache_decide(px->cr, r);
	if (px->bg) {
		/* Only the cache takes the body. */
		*px->decode = true;
		return cache_storing(px->cr) ? PX_BODY : PX_FINISH;
	}
	px_send_head(px, r);
	/* A HEAD whose GET will not be stored is answered already. */
	if (px->head_get && !cache_storing(px->cr))
		return PX_FINISH;
	return PX_BODY;
}

/* FINISH: the body is complete, or all the client will get. */
static enum px_step
px_finish(struct proxy *px)
{
	if (px->intercept)
		return PX_DONE;		/* px_done() hands it to error_page */
	if (px->bg) {
		cache_commit(px->cr);
		return PX_DONE;
	}
	if (px->cr != NULL)
		cache_commit(px->cr);
	resp_done(px->c, px->status, px->sent);
	return PX_DONE;
}

/* FAIL: the exchange failed with px->status, after being logged. */
static enum px_step
px_fail(struct proxy *px)
{
	struct conn *c = px->c;
	bool unsent;

	if (px->bg)
		return PX_DONE;		/* the client has its answer */
	/* An intercepted head never went out: this answers instead. */
	unsent = px->intercept;
	px->intercept = false;
	if (px->step != PX_BODY || unsent) {
		if (px->cr != NULL && cache_serve_stale(px->cr, px->status))
			return PX_DONE;
		resp_error(c, px->status);
		return PX_DONE;
	}
	/* The head went out. */
	if (px->head_get) {
		/* The HEAD's answer is whole: only the fill is lost. */
		resp_done(c, px->status, 0);
		return PX_DONE;
	}
	/* The client sees the connection end before the body does. */
	resp_done(c, px->status, px->sent);
	px->abort = true;
	return PX_DONE;
}

static enum px_step
px_run(struct proxy *px, enum px_step step)
{
	while (step != PX_DONE) {
		switch (step) {
		case PX_LOOKUP:
			step = px_lookup(px);
			break;
		case PX_FETCH:
			step = px_fetch(px);
			break;
		case PX_HEAD:
			step = px_head(px);
			break;
		case PX_FINISH:
			step = px_finish(px);
			break;
		case PX_FAIL:
			step = px_fail(px);
			break;
		case PX_WAIT:
		case PX_L2:
		case PX_SPOOL:
		case PX_RECV:
		case PX_BODY:
		default:
			/* Rests until an event moves it on. */
			px->step = step;
			return step;
		}
	}
	px_done(px);
	return PX_DONE;
}

/* What the upstream driver says ----------------------------------------- */

/*
 * An interim response (102 Processing, 103 Early Hints) goes on to an
 * HTTP/1.1 client at once, without its hop-by-hop fields, and is never
 * stored (RFC 9110 15.2, RFC 9111 3); a 100 Continue was for corral.
 */
static bool
px_interim_cb(void *arg, const struct http_response *r)
{
	struct proxy *px = arg;
	struct conn *c = px->c;
	const struct http_header *h;

	if (px->bg || r->status == 100 || conn_req(c)->version != 11)
		return true;
	if (r->reason.len > 0)
		resp_status_reason(c, r->status, r->reason.p, r->reason.len);
	else
		resp_status_reason(c, r->status, http_reason(r->status),
		    strlen(http_reason(r->status)));
	for (h = r->headers; h < r->headers + r->nheaders; h++) {
		if (http_hop_by_hop(r->headers, r->nheaders, h->name) ||
		    (http_field_flags(h->name) & (HF_HOP | HF_RESP_DROP)))
			continue;
		resp_header(c, h->name.p, h->name.len);
		resp_header(c, ": ", 2);
		resp_header(c, h->value.p, h->value.len);
		resp_header(c, "\r\n", 2);
	}
	resp_header(c, "\r\n", 2);
	return conn_flush(c);
}

static bool
px_head_cb(void *arg, const struct http_response *r, bool *decode)
{
	struct proxy *px = arg;

	px->resp = r;
	px->decode = decode;
	return px_run(px, PX_HEAD) != PX_DONE;
}

/*
 * Queues body bytes for the client, in the framing chosen at the head.
 * They are lent from the upstream's read buffer (with the framing's
 * constant bytes) until the next write: see px_body_cb().
 */
static void
px_out(struct proxy *px, const char *p, size_t len, bool last)
{
	char size[24];
	size_t n;

	if (px->out == OUT_CHUNK && len > 0) {
		n = http_chunk_line(size, len);
		resp_body_copy(px->c, size, n);
		resp_body_lend(px->c, p, len);
		resp_body_lend(px->c, "\r\n", 2);
		px->sent += n + 2;
	} else {
		resp_body_lend(px->c, p, len);
	}
	if (px->out == OUT_CHUNK && last) {
		resp_body_lend(px->c, "0\r\n\r\n", 5);
		px->sent += 5;
	}
	px->sent += len;
}

static bool
px_body_cb(void *arg, char *p, size_t len, bool last)
{
	struct proxy *px = arg;
	struct conn *c = px->c;

	if (cache_storing(px->cr))
		cache_copy(px->cr, p, len);
	if (px->bg) {
		if (last || !cache_storing(px->cr)) {
			px_run(px, PX_FINISH);
			return false;
		}
		return true;
	}
	if (px->intercept)
		len = 0;		/* error_page answers instead */
	if (px->head_get) {
		/* Stored, not sent; or too large to store after all. */
		if (!cache_storing(px->cr))
			last = true;
		len = 0;
	}
	if (!resp_is_head(c) && !px->intercept) {
		px_out(px, p, len, last);
		/* The exchange, and the buffer the bytes are lent from, end
		 * in FINISH: they go now, with the head when it waits. */
		if (last)
			conn_send_lent(c);
	}
	if (last) {
		px_run(px, PX_FINISH);
		return false;
	}
	/* Sent from where they are; what the client does not take yet is
	 * copied. */
	if (!conn_flush(c))
		return false;
	if (conn_out_buffered(c) > PX_OUT_HIGH)
		upstream_conn_pause(px->uc);	/* see proxy_drained() */
	return true;
}

static void
px_error_cb(void *arg, int status)
{
	struct proxy *px = arg;

	px->status = status;
	px_run(px, PX_FAIL);
}

static void
px_sent_cb(void *arg)
{
	struct proxy *px = arg;

	if (px->rb == NULL) {
		conn_body_resume(px->c);
		return;
	}
	if (!px_pump(px)) {
		px->status = 500;
		px_run(px, PX_FAIL);
	}
}

/* The whole body is in (or failed): the exchange may start. */
static void
px_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *px = arg;

	(void)fd;
	(void)what;
	px->kicked = false;
	worker_update_time();
	if (px->step == PX_SPOOL)
		px_run(px, PX_FETCH);
}

/* What the connection says ---------------------------------------------- */

int
proxy_start(struct conn *c, const struct config_location *l,
    struct proxy **pxp)
{
	const struct http_request *r = conn_req(c);
	struct vars_ctx x;
	struct span bad;
	struct proxy *px;
	enum px_step step;
	int status;

	*pxp = NULL;
	/* "Connection: Host" would strip Host (or the framing) on the way:
	 * refused, as Varnish does.  close and keep-alive name no such
	 * field: the parser says whether there are other options. */
	bad = r->conn_options ? http_field_bad_option(r->headers,
	    r->nheaders, HF_END_TO_END) : (struct span){ NULL, 0 };
	if (bad.p != NULL) {
		log_info("client %s: Connection names \"%.*s\"",
		    conn_peer(c), (int)bad.len, bad.p);
		resp_no_keepalive(c);
		resp_error(c, 400);
		return 0;
	}
	if (!upstream_init() || (px = px_alloc()) == NULL)
		return -1;
	px->c = c;
	px->loc = l;
	px->srv = conn_server(c);
	px->up = upstream_group((size_t)l->upstream);
	px->req = r;
	px->uc = NULL;
	px->cr = cache_req_new(c, l);
	px->status = 0;
	px->sent = 0;
	px->out = OUT_AS_IS;
	px->head_get = px->timed_out = px->abort = px->bg = false;
	px->intercept = false;
	px->l2 = NULL;
	px->l2_asked = 0;
	px->underscore_logged = false;
	px->conn_opts = r->connection;
	px->conn_other = r->conn_options;
	px->starting = true;
	px->step = PX_FETCH;
	/* CGI/1.1 wants CONTENT_LENGTH: a chunked body is read whole
	 * first, and so is any body with fastcgi_request_buffering. */
	px->spool = l->fastcgi != NULL && (r->chunked ||
	    (r->content_length > 0 && l->fastcgi->request_buffering));
	px->spool_failed = false;
	if (px->up == NULL || (l->cache && worker.store != NULL &&
	    px->cr == NULL) || (px->spool && (!px_save(px, r) ||
	    (px->rb = reqbody_new()) == NULL))) {
		px_release(px);
		return -1;
	}
	step = PX_FETCH;
	if (px->cr != NULL) {
		step = px_verdict(px, cache_start(px->cr, r));
		if (step == PX_DONE) {
			px_release(px);
			return 0;
		}
		/* The cache reads the fields later: they must outlive the
		 * client's buffer. */
		if (cache_fills(px->cr) && !px_save(px, r)) {
			px_release(px);
			return -1;
		}
		cache_request(px->cr, cache_fills(px->cr) ? px->req : NULL);
		if (step == PX_WAIT)
			px->step = PX_WAIT;
	}
	/* The route's $uri, $args and groups are taken now: the request may
	 * be built later (a body read whole, the cache's lock). */
	if (l->nproxy_headers > 0) {
		request_vars(c, &x);
		if (!px_expand_rules(px, &x)) {
			px_release(px);
			resp_error(c, 500);
			return 0;
		}
	}
	if (l->fastcgi != NULL) {
		request_vars(c, &x);
		if ((status = fcgi_params_prepare(&px->fp, c, l, &x)) != 0) {
			px_release(px);
			resp_error(c, status);
			return 0;
		}
	}
	/* The request is built before the access log's copy of it
	 * repoints the client's request. */
	if (step == PX_FETCH)
		step = px_run(px, PX_FETCH);
	if (step == PX_DONE)
		return 0;
	conn_save_request(c, px->logbuf, sizeof(px->logbuf), px->loghdrs);
	px->starting = false;
	*pxp = px;
	return 1;
}

size_t
proxy_body_room(const struct proxy *px)
{
	if (px->spool)
		return SIZE_MAX;	/* max_body_size bounds it */
	return px->uc != NULL ? upstream_conn_body_room(px->uc) : 0;
}

void
proxy_body(struct proxy *px, const char *p, size_t len, bool last)
{
	if (px->spool) {
		if (!px->spool_failed && !reqbody_add(px->rb, p, len,
		    conn_peer(px->c)))
			px->spool_failed = true;
		if (!last)
			return;
		/* Not from inside the client's read: the exchange (or its
		 * error answer) starts from the event loop. */
		px->spool = false;
		px->saved.content_length = (int64_t)reqbody_size(px->rb);
		px->saved.chunked = false;
		px->kicked = true;
		event_active(&px->kick, EV_TIMEOUT, 1);
		return;
	}
	if (px->uc != NULL)
		upstream_conn_body(px->uc, p, len, last);
}

void
proxy_drained(struct proxy *px)
{
	if (px->uc != NULL)
		upstream_conn_resume(px->uc);
}

bool
proxy_cancel(struct proxy *px)
{
	bool started = px->step == PX_BODY || px->bg;

	px_release(px);
	return started;
}

void
proxy_free_all(void)
{
	struct proxy *px;

	while ((px = free_px) != NULL) {
		free_px = px->next;
		free(px->sbuf);
		free(px->shdrs);
		fcgi_prep_free(px->fp);
		free(px->hbuf);
		free(px->hval);
		free(px->hadd);
		free(px);
	}
	cache_req_free_all();
	fcgi_params_free();
	upstream_conn_free_all();
	upstream_free_all();
	waitlist_free_all();
}

/*
 * Building responses: the status line and the common header lines, header
 * fields, bodies (copied, referenced, pinned or from a file) and the
 * error pages.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/access.h"
#include "worker/conn_impl.h"
#include "worker/static.h"

const char resp_allow[] = "Allow: GET, HEAD, OPTIONS\r\n";
const size_t resp_allow_len = sizeof(resp_allow) - 1;
static const char html[] = "Content-Type: text/html; charset=utf-8\r\n";

static struct pin *free_pins;
static struct event *unpin_ev;	/* drops the unpins left for later */
static bool unpin_armed;

#define UNPIN_DELAY_MS	10	/* longest an unpin is left for later */

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


void
resp_status(struct conn *c, int status)
{
	const char *r;
	size_t n;

	c->resp_status = status;
	if ((r = http_status_line(status, &n)) != NULL) {
		obuf_add(c, r, n);
	} else {
		r = http_reason(status);
		resp_status_reason(c, status, r, strlen(r));
	}
	obuf_add(c, worker.common, worker.common_len);
}

void
resp_head(struct conn *c, int status, const char *head, size_t len)
{
	c->resp_status = status;
	obuf_add(c, head, len);
}

void
resp_status_reason(struct conn *c, int status, const char *reason,
    size_t len)
{
	char *p;

	c->resp_status = status;
	/* The status is three digits: the parsers and callers see to it. */
	if (status < 100 || status > 999 ||
	    (p = obuf_reserve(c, 9 + 3 + 1 + len + 2)) == NULL) {
		c->broken = true;
		return;
	}
	obuf_commit(c, resp_status_line(p, status, reason, len));
}

size_t
resp_status_line(char *p, int status, const char *reason, size_t len)
{
	memcpy(p, "HTTP/1.1 ", 9);
	p[9] = (char)('0' + status / 100);
	p[10] = (char)('0' + status / 10 % 10);
	p[11] = (char)('0' + status % 10);
	p[12] = ' ';
	memcpy(p + 13, reason, len);
	memcpy(p + 13 + len, "\r\n", 2);
	return 13 + len + 2;
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

/* add_header: on success and redirects, or always with "always". */
static void
add_headers(struct conn *c)
{
	const struct config_location *l = c->loc;
	const struct config_header *h;
	bool ok;

	if (l == NULL || l->nheaders == 0)
		return;
	switch (c->resp_status) {
	case 200: case 201: case 204: case 206: case 301: case 302:
	case 303: case 304: case 307: case 308:
		ok = true;
		break;
	default:
		ok = false;
	}
	for (h = l->headers; h < l->headers + l->nheaders; h++)
		if (ok || h->always)
			obuf_add(c, h->line, h->len);
}

/* The end of a head: Connection when it must be said, and the empty line. */
static const char *
end_lines(struct conn *c, size_t *len)
{
	static const char ka10[] = "Connection: keep-alive\r\n\r\n";
	static const char close[] = "Connection: close\r\n\r\n";

	if (!c->keepalive) {
		c->close_after = true;
		*len = sizeof(close) - 1;
		return close;
	}
	if (c->rq->req.version == 10) {
		*len = sizeof(ka10) - 1;
		return ka10;
	}
	*len = 2;
	return "\r\n";
}

void
resp_end_headers(struct conn *c, int64_t len)
{
	const char *end;
	size_t n;

	add_headers(c);
	if (len >= 0)
		resp_header_u64(c, "Content-Length: ", 16, (uint64_t)len);
	end = end_lines(c, &n);
	obuf_add(c, end, n);
}

void
resp_head_whole(struct conn *c, int status, const char *head, size_t hlen,
    const char *mid, size_t mlen, const char *tail, size_t tlen)
{
	const char *end;
	size_t n;
	char *p;

	c->resp_status = status;
	if (c->loc != NULL && c->loc->nheaders != 0) {
		obuf_add(c, head, hlen);
		obuf_add(c, mid, mlen);
		add_headers(c);
		obuf_add(c, tail, tlen);
		end = end_lines(c, &n);
		obuf_add(c, end, n);
		return;
	}
	end = end_lines(c, &n);
	if ((p = obuf_reserve(c, hlen + mlen + tlen + n)) == NULL) {
		c->broken = true;
		return;
	}
	memcpy(p, head, hlen);
	memcpy(p + hlen, mid, mlen);
	memcpy(p + hlen + mlen, tail, tlen);
	memcpy(p + hlen + mlen + tlen, end, n);
	obuf_commit(c, hlen + mlen + tlen + n);
}

void
resp_fail(struct conn *c)
{
	c->broken = true;
}

/* Builds k's response as it is for this second. */
static bool
kept_build(struct resp_kept *k, const char *lines, size_t n,
    const void *body, uint64_t len)
{
	const char *sl;
	size_t sln, want, blen = body != NULL ? (size_t)len : 0;
	char *p;

	sl = http_status_line(200, &sln);
	want = sln + worker.common_len + n + 16 + 20 + 2 + 2 + blen;
	if (want > k->size) {
		if ((p = realloc(k->buf, want)) == NULL)
			return false;
		k->buf = p;
		k->size = want;
	}
	p = k->buf;
	memcpy(p, sl, sln);
	p += sln;
	memcpy(p, worker.common, worker.common_len);
	p += worker.common_len;
	memcpy(p, lines, n);
	p += n;
	memcpy(p, "Content-Length: ", 16);
	p += 16;
	p += http_u64(p, len);
	memcpy(p, "\r\n\r\n", 4);
	p += 4;
	k->head = (size_t)(p - k->buf);
	if (blen > 0)
		memcpy(p, body, blen);
	k->len = k->head + blen;
	k->body = body != NULL;
	k->at = worker.now;
	return true;
}

bool
resp_kept_200(struct conn *c, struct resp_kept *k, const char *lines,
    size_t n, const void *body, uint64_t len)
{
	size_t want;
	char *p;

	if (!c->keepalive || c->rq->req.version == 10 ||
	    (c->loc != NULL && c->loc->nheaders != 0))
		return false;
	if ((k->at != worker.now || k->body != (body != NULL)) &&
	    !kept_build(k, lines, n, body, len))
		return false;
	want = c->head ? k->head : k->len;
	if ((p = obuf_reserve(c, want)) == NULL)
		return false;
	memcpy(p, k->buf, want);
	obuf_commit(c, want);
	c->resp_status = 200;
	return true;
}

void
resp_kept_free(struct resp_kept *k)
{
	free(k->buf);
	k->buf = NULL;
	k->size = k->len = k->head = 0;
	k->at = 0;
}

/*
 * A small body that fits in the output buffer as it is goes beside its
 * header lines: pipelined responses then leave as one iovec, not two
 * per response, and the copy is cheaper than the segment it saves.
 */
#define BODY_COPY_MAX	512

static bool
body_copied(struct conn *c, const void *p, size_t len)
{
	if (len > BODY_COPY_MAX || c->olen + len > c->osize)
		return false;
	obuf_add(c, p, len);
	return true;
}

void
resp_body_mem(struct conn *c, const void *p, size_t len,
    struct fentry *ref)
{
	struct oseg *s;

	if (body_copied(c, p, len))
		return;
	s = seg_mem(c, p, len);

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
resp_body_lend(struct conn *c, const void *p, size_t len)
{
	struct oseg *s;

	if (len == 0)
		return;
	if ((s = seg_new(c, SEG_LENT, len)) == NULL) {
		c->broken = true;
		return;
	}
	s->p = p;
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

const char *
pin_bytes(const struct pin *p)
{
	return p->ref.data;
}

static void
unpin_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	unpin_armed = false;
	store_release_flush(worker.store);
}

void
unpin_soon(struct store_ref *ref)
{
	static const struct timeval soon = { 0, UNPIN_DELAY_MS * 1000 };

	if (!store_release_later(worker.store, ref) || unpin_armed)
		return;
	if (unpin_ev == NULL &&
	    (unpin_ev = evtimer_new(worker.base, unpin_cb, NULL)) == NULL) {
		store_release_flush(worker.store);
		return;
	}
	evtimer_add(unpin_ev, &soon);
	unpin_armed = true;
}

void
unpin_end(void)
{
	if (unpin_ev != NULL)
		event_free(unpin_ev);
	unpin_ev = NULL;
	unpin_armed = false;
	if (worker.store != NULL)
		store_release_flush(worker.store);
}

void
pin_put(struct pin *p)
{
	if (--p->uses > 0)
		return;
	unpin_soon(&p->ref);
	p->next = free_pins;
	free_pins = p;
}

void
resp_body_pin(struct conn *c, struct pin *p, size_t off, size_t len)
{
	struct oseg *s;

	if (body_copied(c, (const char *)p->ref.data + off, len))
		return;
	s = seg_mem(c, (const char *)p->ref.data + off, len);

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
	const char *chal;
	char body[512];
	size_t clen;
	int n;

	if (status_closes(status)) {
		c->keepalive = false;
		c->linger = true;
	}
	if (status == 401 && c->loc != NULL && c->loc->auth_realm != NULL) {
		chal = auth_challenge(c->loc, &clen);
		if (lines == NULL) {
			lines = chal;
			len = clen;
		}
	}
	if (lines == NULL && status >= 400 && request_error_page(c, status))
		return;
	n = snprintf(body, sizeof(body),
	    "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n"
	    "<center><h1>%d %s</h1></center>\r\n"
	    "<hr><center>%s</center>\r\n</body>\r\n</html>\r\n",
	    status, http_reason(status), status, http_reason(status),
	    worker.cf->server_tokens ? "corral/" PACKAGE_VERSION : "corral");
	resp_status(c, status);
	if (status == 405 || status == 501)
		resp_header(c, resp_allow, resp_allow_len);
	if (lines != NULL)
		resp_header(c, lines, len);
	resp_header(c, html, sizeof(html) - 1);
	resp_end_headers(c, n);
	if (!c->head)
		resp_body_copy(c, body, (size_t)n);
	resp_done(c, status, c->head ? 0 : (uint64_t)n);
}

void
pin_free_all(void)
{
	struct pin *p;

	while ((p = free_pins) != NULL) {
		free_pins = p->next;
		free(p);
	}
}

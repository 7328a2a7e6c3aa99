/*
 * What a proxied request sends upstream: the client's request through the
 * header rules of the field table (see the top of proxy.c), corral's
 * X-Forwarded-* fields and the location's proxy_set_header and
 * proxy_append_header, and the copy of the request kept when the cache or
 * a spooled body needs it after the client's buffer has moved on.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/cache.h"
#include "worker/conn.h"
#include "worker/http_field.h"
#include "worker/http_lex.h"
#include "worker/proxy_impl.h"
#include "worker/resp.h"
#include "worker/upstream.h"
#include "worker/upstream_proto.h"
#include "worker/vars.h"

static bool
span_copy(struct span *to, struct span from, char **at)
{
	if (from.p == NULL) {
		to->p = NULL;
		to->len = 0;
		return false;
	}
	memcpy(*at, from.p, from.len);
	to->p = *at;
	to->len = from.len;
	*at += from.len;
	return true;
}

/*
 * Copies what the exchange and the cache read later out of the client's
 * input buffer, which moves on when proxy_start() returns.
 */
bool
px_save(struct proxy *px, const struct http_request *r)
{
	struct http_request *s = &px->saved;
	size_t need = r->method_name.len + r->target.len + r->path.len +
	    r->query.len + r->host.len, i;
	char *at;

	for (i = 0; i < r->nheaders; i++)
		need += r->headers[i].name.len + r->headers[i].value.len;
	if (need > px->ssize) {
		free(px->sbuf);
		px->ssize = 0;
		if ((px->sbuf = malloc(need)) == NULL)
			return false;
		px->ssize = need;
	}
	if (r->nheaders > px->shdrs_cap) {
		free(px->shdrs);
		px->shdrs_cap = 0;
		if ((px->shdrs = calloc(r->nheaders,
		    sizeof(*px->shdrs))) == NULL)
			return false;
		px->shdrs_cap = r->nheaders;
	}
	memset(s, 0, sizeof(*s));
	s->method = r->method;
	s->version = r->version;
	s->absolute_form = r->absolute_form;
	s->content_length = r->content_length;
	s->chunked = r->chunked;
	s->keepalive = r->keepalive;
	at = px->sbuf;
	span_copy(&s->method_name, r->method_name, &at);
	span_copy(&s->target, r->target, &at);
	span_copy(&s->path, r->path, &at);
	span_copy(&s->query, r->query, &at);
	span_copy(&s->host, r->host, &at);
	for (i = 0; i < r->nheaders; i++) {
		span_copy(&px->shdrs[i].name, r->headers[i].name, &at);
		span_copy(&px->shdrs[i].value, r->headers[i].value, &at);
	}
	s->headers = px->shdrs;
	s->nheaders = r->nheaders;
	px->req = s;
	return true;
}

/* Whether a proxy_set_header of the location names field name. */
static bool
px_set_names(const struct proxy *px, struct span name)
{
	const struct config_location *l = px->loc;
	const char *n;
	size_t i;

	for (i = 0; i < l->nproxy_headers; i++) {
		n = l->proxy_headers[i].name;
		if (!l->proxy_headers[i].append && strlen(n) == name.len &&
		    strncasecmp(n, name.p, name.len) == 0)
			return true;
	}
	return false;
}

/*
 * Whether a Connection line names field name, which then is not passed
 * on (RFC 9110 7.6.1).  Lines that name only close and keep-alive (the
 * usual Connection: keep-alive) can name no other field: those lines are
 * read for no other, not once a field.
 */
static bool
px_conn_named(const struct proxy *px, const struct http_request *r,
    struct span name)
{
	if (!px->conn_opts)
		return false;
	if (!px->conn_other &&
	    !(name.len == 5 && http_ieq(name.p, "close", 5)) &&
	    !(name.len == 10 && http_ieq(name.p, "keep-alive", 10)))
		return false;
	return http_field_connection_option(r->headers, r->nheaders, name);
}

/* The header rules for a request field (see the top of the file). */
static bool
px_keep(const struct upstream_request *rq, const struct http_header *h)
{
	struct proxy *px = rq->arg;

	if (http_field_flags(h->name) & (HF_HOP | HF_REQ_DROP))
		return false;
	if (px->loc->nproxy_headers > 0 && px_set_names(px, h->name))
		return false;
	/* The target's authority replaces it (RFC 9112 3.2.2). */
	if (rq->r->absolute_form && http_span_ieq(h->name, "host"))
		return false;
	if (px_conn_named(px, rq->r, h->name))
		return false;
	if (!px->srv->underscores_in_headers &&
	    memchr(h->name.p, '_', h->name.len) != NULL) {
		/* A CGI-style origin maps '_' to '-': X_Forwarded_For
		 * would pass for the real one (nginx drops them too). */
		if (!px->underscore_logged)
			log_info("client %s: header \"%.*s\" not passed on "
			    "(underscores_in_headers is off)",
			    conn_peer(px->c), (int)h->name.len, h->name.p);
		px->underscore_logged = true;
		return false;
	}
	return !cache_hides_field(px->cr, h->name);
}

static void
px_field(struct proxy *px, size_t *n, const char *name, size_t nlen,
    const char *v, size_t len)
{
	/* A proxy_set_header of the same name replaces corral's. */
	if (px->loc->nproxy_headers > 0 &&
	    px_set_names(px, (struct span){ name, nlen }))
		return;
	px->add[*n].name.p = name;
	px->add[*n].name.len = nlen;
	px->add[*n].value.p = v;
	px->add[*n].value.len = len;
	(*n)++;
}

/*
 * X-Forwarded-For: the client, or, from a trusted proxy (real_ip_from),
 * the list it sent with that proxy appended, so the chain goes on.
 */
static struct span
px_xff(struct proxy *px)
{
	const struct http_request *r = px->req;
	const char *via = conn_via_trusted(px->c), *peer = conn_peer(px->c);
	size_t i, len = 0, vlen;

	if (via == NULL)
		return (struct span){ peer, strlen(peer) };
	vlen = strlen(via);
	for (i = 0; i < r->nheaders; i++) {
		const struct span v = r->headers[i].value;

		if (!http_span_ieq(r->headers[i].name, "x-forwarded-for") ||
		    v.len == 0)
			continue;
		if (len + v.len + 2 + vlen >= sizeof(px->xff))
			return (struct span){ peer, strlen(peer) };
		memcpy(px->xff + len, v.p, v.len);
		len += v.len;
		memcpy(px->xff + len, ", ", 2);
		len += 2;
	}
	memcpy(px->xff + len, via, vlen);
	return (struct span){ px->xff, len + vlen };
}

/*
 * Expands the location's proxy_set_header and proxy_append_header values
 * for the request; false when they do not fit (logged).
 */
bool
px_expand_rules(struct proxy *px, const struct vars_ctx *x)
{
	const struct config_location *l = px->loc;
	size_t i, room, size, *nv;
	ssize_t n;
	char *nb;

	if (l->nproxy_headers > px->nhval) {
		if ((nv = realloc(px->hval, 2 * l->nproxy_headers *
		    sizeof(*nv))) == NULL)
			return false;
		px->hval = nv;
		px->nhval = l->nproxy_headers;
	}
	px->hlen = 0;
	for (i = 0; i < l->nproxy_headers; i++) {
		for (room = 256;; room *= 2) {
			size = px->hsize > 0 ? px->hsize : 1024;
			while (size < px->hlen + room)
				size *= 2;
			if (size > PX_RULES_MAX) {
				log_error("client %s: proxy_set_header values "
				    "larger than %d bytes", conn_peer(px->c),
				    PX_RULES_MAX);
				return false;
			}
			if (size > px->hsize) {
				if ((nb = realloc(px->hbuf, size)) == NULL)
					return false;
				px->hbuf = nb;
				px->hsize = size;
			}
			n = vars_expand(l->proxy_headers[i].tmpl, px->c, x,
			    px->hbuf + px->hlen, px->hsize - px->hlen);
			if (n >= 0)
				break;
		}
		px->hval[2 * i] = px->hlen;
		px->hval[2 * i + 1] = (size_t)n;
		px->hlen += (size_t)n;
	}
	return true;
}

/* The added fields: corral's n, then the location's (an empty set
 * value removes the field).  False without memory. */
static bool
px_rules(struct proxy *px, size_t n)
{
	const struct config_location *l = px->loc;
	struct http_header *h;
	size_t i, k = n;

	if (n + l->nproxy_headers > px->hadd_cap) {
		if ((h = realloc(px->hadd, (n + l->nproxy_headers) *
		    sizeof(*h))) == NULL)
			return false;
		px->hadd = h;
		px->hadd_cap = n + l->nproxy_headers;
	}
	memcpy(px->hadd, px->add, n * sizeof(*px->hadd));
	for (i = 0; i < l->nproxy_headers; i++) {
		if (px->hval[2 * i + 1] == 0 && !l->proxy_headers[i].append)
			continue;
		h = &px->hadd[k++];
		h->name.p = l->proxy_headers[i].name;
		h->name.len = strlen(h->name.p);
		h->value.p = px->hbuf + px->hval[2 * i];
		h->value.len = px->hval[2 * i + 1];
	}
	px->nhadd = k;
	return true;
}

/* px_field() of a literal name. */
#define PX_FIELD(px, n, name, v, len) \
	px_field(px, n, name, sizeof(name) - 1, v, len)

/* What the upstream gets: the request after the rules, and ours. */
void
px_request(struct proxy *px, struct upstream_request *rq)
{
	const struct http_request *r = px->req;
	struct span host = http_request_authority(r);
	struct span proto = http_header_get(r, "X-Forwarded-Proto");
	struct span xff = px_xff(px);
	size_t n = 0;

	memset(rq, 0, sizeof(*rq));
	rq->r = r;
	rq->method = px->head_get ? (struct span){ "GET", 3 } :
	    r->method_name;
	rq->no_body = resp_is_head(px->c) && !px->head_get;
	rq->idempotent = r->method == HTTP_M_GET ||
	    r->method == HTTP_M_HEAD || r->method == HTTP_M_OPTIONS ||
	    r->method == HTTP_M_PUT || r->method == HTTP_M_DELETE;
	rq->keep = px_keep;
	rq->arg = px;
	if (r->absolute_form)
		PX_FIELD(px, &n, "Host", host.p, host.len);
	PX_FIELD(px, &n, "X-Forwarded-For", xff.p, xff.len);
	/* A trusted proxy knows the scheme its client used. */
	if (proto.p != NULL && proto.len > 0 && conn_via_trusted(px->c))
		PX_FIELD(px, &n, "X-Forwarded-Proto", proto.p, proto.len);
	else if (conn_tls(px->c))
		PX_FIELD(px, &n, "X-Forwarded-Proto", "https", 5);
	else
		PX_FIELD(px, &n, "X-Forwarded-Proto", "http", 4);
	if (host.p != NULL)
		PX_FIELD(px, &n, "X-Forwarded-Host", host.p, host.len);
	if (px->cr != NULL)
		n += cache_validators(px->cr, px->add + n, px->date,
		    sizeof(px->date));
	rq->add = px->add;
	rq->nadd = n;
	if (px->loc->nproxy_headers > 0 && px_rules(px, n))
		rq->add = px->hadd, rq->nadd = px->nhadd;
	rq->c = px->c;
	rq->loc = px->loc;
	rq->up = upstream_config(px->up);
	rq->fcgi = px->loc->fastcgi != NULL ? px->fp : NULL;
}

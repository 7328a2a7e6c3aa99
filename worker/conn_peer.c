/*
 * Who the client is: the connection's peer, the client a PROXY protocol
 * header names for a load balancer, or the one a trusted proxy names in
 * X-Forwarded-For or X-Real-IP (real_ip_from); and the address the
 * connection came in on.  Part of the connection layer (conn_impl.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn_impl.h"
#include "worker/http_lex.h"
#include "worker/proxy_protocol.h"
#include "worker/realip.h"

#define REALIP_LINES	8	/* X-Forwarded-For lines looked at, the last */

const char *
conn_peer(const struct conn *c)
{
	return c->peer;
}

unsigned
conn_peer_port(const struct conn *c)
{
	return c->peer_port;
}

const char *
conn_via_trusted(const struct conn *c)
{
	/* Asked for seldom (proxied requests through a trusted proxy):
	 * formatted then rather than held by every connection. */
	static char buf[INET6_ADDRSTRLEN];

	if (!c->via_trusted)
		return NULL;
	if (inet_ntop(c->conn_family, c->conn_addr, buf, sizeof(buf)) == NULL)
		strcpy(buf, "?");
	return buf;
}

bool
conn_local(const struct conn *c, char *addr, size_t size, unsigned *port)
{
	/* The last address formatted, and whose it is: a listen entry's
	 * own (every request on it), or a wildcard listen's connection (the
	 * requests that follow on it); so neither a system call nor
	 * inet_ntop per request. */
	static char text[INET6_ADDRSTRLEN];
	static size_t text_len;
	static unsigned text_port;
	static const struct config *text_cf;
	static int text_lidx = -1;
	static uint64_t text_serial;
	struct sockaddr_storage ss;
	const struct config_listen *l = &worker.cf->listen[c->lidx];
	const struct sockaddr *sa = (const struct sockaddr *)&l->addr;
	socklen_t len = sizeof(ss);
	bool wild;
	const void *a;

	/* A wildcard listen says nothing: ask the socket. */
	wild = (sa->sa_family == AF_INET &&
	    ((const struct sockaddr_in *)sa)->sin_addr.s_addr == INADDR_ANY) ||
	    (sa->sa_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(
	    &((const struct sockaddr_in6 *)sa)->sin6_addr));
	if (text_cf != worker.cf || text_lidx != c->lidx ||
	    (wild && text_serial != c->serial)) {
		text_cf = NULL;
		if (wild) {
			if (getsockname(c->fd, (struct sockaddr *)&ss,
			    &len) == -1)
				return false;
			sa = (const struct sockaddr *)&ss;
		}
		a = sa->sa_family == AF_INET6 ?
		    (const void *)&((const struct sockaddr_in6 *)sa)->
		    sin6_addr :
		    (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
		if (inet_ntop(sa->sa_family, a, text, sizeof(text)) == NULL)
			return false;
		text_len = strlen(text);
		text_port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
		text_cf = worker.cf;
		text_lidx = c->lidx;
		text_serial = c->serial;
	}
	if (text_len >= size)
		return false;
	memcpy(addr, text, text_len + 1);
	*port = text_port;
	return true;
}

void
conn_peer_set(struct conn *c, const struct sockaddr *sa)
{
	const void *addr;

	if (sa->sa_family == AF_INET6)
		addr = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		addr = &((const struct sockaddr_in *)sa)->sin_addr;
	if (inet_ntop(sa->sa_family, addr, c->peer, sizeof(c->peer)) == NULL)
		strcpy(c->peer, "?");
	/* sin_port and sin6_port share their place. */
	c->peer_port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	c->conn_family = sa->sa_family;
	memcpy(c->conn_addr, addr, sa->sa_family == AF_INET6 ? 16 : 4);
}

static bool
trusted(const struct sockaddr *sa, void *arg)
{
	const struct config *cf = arg;
	const void *a = sa->sa_family == AF_INET6 ?
	    (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr :
	    (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	return realip_cidr_match(cf->real_ip_from, cf->nreal_ip_from,
	    sa->sa_family, a);
}

/*
 * real_ip_from: a request that comes through a trusted proxy names its
 * client in X-Forwarded-For (or X-Real-IP); that address is the client's
 * for the logs, the access rules, the application and the upstream.
 * Each request of a kept-alive connection starts from the connection's
 * own peer again.
 */
void
conn_real_ip(struct conn *c)
{
	const struct config *cf = worker.cf;
	const struct http_request *r = &c->rq->req;
	const char *name;
	struct sockaddr_storage ss;
	struct span v[REALIP_LINES];
	const void *a;
	size_t i, n = 0;
	bool ok;

	if (c->peer_real) {
		if (inet_ntop(c->conn_family, c->conn_addr, c->peer,
		    sizeof(c->peer)) == NULL)
			strcpy(c->peer, "?");
		c->peer_real = false;
	}
	c->via_trusted = cf->nreal_ip_from > 0 &&
	    realip_cidr_match(cf->real_ip_from, cf->nreal_ip_from,
	    c->conn_family, c->conn_addr);
	if (!c->via_trusted)
		return;
	name = cf->real_ip_header == REAL_IP_XFF ? "x-forwarded-for" :
	    "x-real-ip";
	/* The last lines: a proxy that adds a line of its own (HAProxy)
	 * puts it after the client's, which may be any number. */
	for (i = r->nheaders; i-- > 0 && n < REALIP_LINES;)
		if (http_span_ieq(r->headers[i].name, name))
			v[REALIP_LINES - 1 - n++] = r->headers[i].value;
	if (n > 0 && n < REALIP_LINES)
		memmove(v, v + REALIP_LINES - n, n * sizeof(*v));
	if (cf->real_ip_header == REAL_IP_XFF)
		ok = realip_from_xff(v, n, cf->real_ip_recursive, trusted,
		    (void *)cf, &ss);
	else
		ok = n == 1 && realip_parse_addr(v[0].p, v[0].len, &ss);
	if (!ok)
		return;
	a = ss.ss_family == AF_INET6 ?
	    (const void *)&((const struct sockaddr_in6 *)&ss)->sin6_addr :
	    (const void *)&((const struct sockaddr_in *)&ss)->sin_addr;
	if (inet_ntop(ss.ss_family, a, c->peer, sizeof(c->peer)) == NULL)
		return;
	c->rq->peer_family = ss.ss_family;
	memset(c->rq->peer_addr, 0, sizeof(c->rq->peer_addr));
	memcpy(c->rq->peer_addr, a, ss.ss_family == AF_INET6 ? 16 : 4);
	c->peer_real = true;
}

/*
 * A PROXY protocol header (worker/proxy_protocol.h) names the client a
 * load balancer accepted, as nginx's "listen ... proxy_protocol": every
 * peer of such an address is trusted to say it (real_ip_from then applies
 * to the client it names).  The header is peeked, then only its bytes are
 * taken from the socket, so what follows (a request, or TLS) stays there;
 * a header split over reads is kept in the input buffer, all of it
 * header bytes (its first size holds the longest header we take).
 */
_Static_assert(PP_V2_MAX <= IBUF_INIT, "a PROXY header fits the buffer");
int
conn_pp_read(struct conn *c)
{
	struct pp_header h;
	const char *why = NULL;
	ssize_t n, hl;

	n = recv(c->fd, c->rq->ibuf + c->rq->ilen, PP_V2_MAX - c->rq->ilen,
	    MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (n < 0)
			log_at(L_INFO, errno, "recv from %s", c->peer);
		return -1;
	}
	hl = proxy_protocol_parse(c->rq->ibuf, c->rq->ilen + (size_t)n, &h,
	    &why);
	if (hl == PP_AGAIN && c->rq->ilen + (size_t)n == PP_V2_MAX)
		why = "header too long";
	if (hl < 0 || why != NULL) {
		log_info("client %s: bad PROXY protocol header on %s: %s",
		    c->peer, worker.cf->listen[c->lidx].text,
		    why != NULL ? why : "?");
		return -1;
	}
	/* Take the header's bytes (all of them so far, when incomplete). */
	n = hl == PP_AGAIN ? n : hl - (ssize_t)c->rq->ilen;
	if (recv(c->fd, c->rq->ibuf + c->rq->ilen, (size_t)n, 0) != n)
		return -1;
	c->rq->ilen += (size_t)n;
	if (hl == PP_AGAIN)
		return 0;
	c->rq->ilen = 0;
	if (!h.local && (h.src.ss_family == AF_INET ||
	    h.src.ss_family == AF_INET6)) {
		conn_peer_set(c, (const struct sockaddr *)&h.src);
		log_debug("PROXY protocol: the client is %s, port %u",
		    c->peer, c->peer_port);
	}
	return 1;
}

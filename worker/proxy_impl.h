/*
 * Inside the reverse proxy's handler, shared by proxy.c (the steps of a
 * proxied request) and proxy_request.c (what goes upstream: the saved
 * request, the header rules, X-Forwarded-*).  Nothing else includes it.
 */
#ifndef CORRAL_PROXY_IMPL_H
#define CORRAL_PROXY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "worker/http.h"
#include "worker/waitlist.h"

struct cache_req;
struct conn;
struct config_location;
struct config_server;
struct fcgi_prep;
struct mc_call;
struct reqbody;
struct upstream;
struct upstream_conn;
struct upstream_request;
struct vars_ctx;

#define PX_OUT_HIGH	(256 * 1024)	/* response bytes waiting for the
					   client */
#define PX_LOGBUF	2048
#define PX_XFF		1024		/* a longer X-Forwarded-For list from a
					   trusted proxy gives way to the client */
#define PX_ADD		6		/* fields added to a request */
#define PX_RULES_MAX	(64 * 1024)	/* proxy_set_header values, expanded */

/* name, whether it rests until an event, what happens */
#define PX_STEPS(X)							\
	X(LOOKUP, false, "look the URL up again in the cache")		\
	X(SPOOL,  true,  "read the request body whole first")		\
	X(WAIT,   true,  "wait until the fill of the key ends")		\
	X(L2,     true,  "wait for the cache's memcached cluster")	\
	X(FETCH,  false, "start the exchange with the upstream")	\
	X(RECV,   true,  "wait for the response head")			\
	X(HEAD,   false, "answer from the cache, or send the head on")	\
	X(BODY,   true,  "relay the body as it comes")			\
	X(FINISH, false, "store the body, log, end the exchange")	\
	X(FAIL,   false, "a stale copy, an error response or an abort")	\
	X(DONE,   true,  "the response is queued: let the request go")

enum px_step {
#define PX_STEP_ENUM(name, rests, what)	PX_##name,
	PX_STEPS(PX_STEP_ENUM)
#undef PX_STEP_ENUM
};

/* How body bytes go to the client. */
enum px_out {
	OUT_AS_IS,			/* with their framing, or none needed */
	OUT_CHUNK,			/* payload, chunked by corral */
};

struct proxy {
	struct conn *c;
	const struct config_location *loc;
	const struct config_server *srv;
	struct upstream *up;
	enum px_step step;
	struct upstream_conn *uc;
	struct cache_req *cr;		/* NULL: the location does not cache */
	struct waiter w;		/* in the waiting list during WAIT */
	struct mc_call *l2;		/* L2: the get from the cluster */
	unsigned l2_asked;		/* the URL's, then its variant's */
	const struct http_request *req;	/* the client's, or saved */

	const struct http_response *resp;	/* HEAD: the head */
	bool *decode;			/* HEAD: payload only, please */
	int status;			/* the response's, or the failure's */
	uint64_t sent;			/* body bytes to the client */
	enum px_out out;
	bool head_get;			/* a HEAD fetched as GET, to fill */
	bool bg;			/* the client has a stale copy: the
					   exchange refreshes the cache only */
	bool timed_out;			/* LOOKUP: the lock's timer fired */
	bool starting;			/* inside proxy_start() */
	bool abort;			/* DONE: the client sees a cut */
	bool intercept;			/* DONE: px->status goes to the
					   location's error_page */
	bool conn_opts;			/* the request has Connection */
	bool conn_other;		/* naming options other than close
					   and keep-alive */
	bool underscore_logged;

	/* A request body read whole before the exchange (reqbody.h). */
	struct reqbody *rb;
	bool spool;			/* the body goes through rb */
	bool spool_failed;		/* rb failed: 500 once it is read */
	struct event kick;		/* moves on once the body is in */
	bool kicked;			/* kick is active */
	struct fcgi_prep *fp;		/* FastCGI: the route's parameters */

	/* proxy_set_header and proxy_append_header, expanded when the
	 * request starts (the route is current then). */
	char *hbuf;
	size_t hsize, hlen;
	size_t *hval;			/* offset, length of each rule's */
	size_t nhval;
	struct http_header *hadd;	/* the added fields with them */
	size_t nhadd, hadd_cap;

	/* A copy of the request, when the cache will need it later. */
	struct http_request saved;
	struct http_header *shdrs;
	size_t shdrs_cap;
	char *sbuf;
	size_t ssize;

	struct http_header add[PX_ADD];
	char date[HTTP_DATE_LEN + 1];
	char xff[PX_XFF];		/* a trusted proxy's list, and it */
	struct http_header loghdrs[2];
	char logbuf[PX_LOGBUF];
	struct proxy *next;		/* free list */
};

/* proxy_request.c: copies the request out of the client's input buffer,
 * for a cache fill or a spooled body; false when out of memory. */
bool px_save(struct proxy *px, const struct http_request *r);

/* Expands the location's proxy_set_header and proxy_append_header values
 * (the route is current); false when they do not fit. */
bool px_expand_rules(struct proxy *px, const struct vars_ctx *x);

/* What the upstream gets: the request after the rules, and ours. */
void px_request(struct proxy *px, struct upstream_request *rq);

#endif

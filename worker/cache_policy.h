/*
 * What RFC 9111 decides for a shared cache, as pure functions of the
 * request, the response, the configuration and the time: may a response
 * be stored and for how long is it fresh (section 3, 4.2), how old is it
 * (4.2.3), may a stale copy still be served (4.2.4, RFC 5861), which
 * variant does a request select (4.1), how does a 304 update a stored
 * header (3.2, 4.3.4), and does an If-None-Match match a stored entity
 * tag.  No I/O, no store, no clock: the cache module applies the verdicts.
 *
 * Times are seconds since the epoch; durations are seconds, saturated at
 * HTTP_DELTA_MAX (2^31) as RFC 9111 section 1.2.2 asks.
 */
#ifndef CORRAL_CACHE_POLICY_H
#define CORRAL_CACHE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/http.h"
#include "worker/http_response.h"

/* A location's cache_valid entries (master/config.h): status 0 is "any",
 * ttl 0 keeps such responses out. */
struct config_valid;

/* What a location's configuration says to the policy. */
struct cp_conf {
	const struct config_valid *valid;	/* for responses silent on freshness */
	size_t nvalid;
	int64_t default_ttl;		/* cache_ttl: the same for every
					   heuristically cacheable status; 0:
					   none */
	int64_t heuristic_max;		/* cap of heuristic freshness */
	bool cdn_control;		/* obey CDN-Cache-Control, then
					   Surrogate-Control (RFC 9213) */
};

/* The default cap of heuristic freshness: a day, as Apache's. */
#define CP_HEURISTIC_MAX	86400

/* What of the request the policy needs. */
struct cp_req {
	int method;			/* HTTP_M_* */
	bool authorization;		/* it carried Authorization */
	bool cookie;			/* it carried Cookie */
	struct http_cache_control cc;	/* its Cache-Control */
};

/* When the exchange happened, by the cache's clock (section 4.2.3). */
struct cp_times {
	int64_t request;		/* the request went to the origin */
	int64_t response;		/* the response header arrived */
};

enum cp_verdict {
	CP_STORE,			/* store it */
	CP_SKIP,			/* not this response; the next may be */
	CP_PASS,			/* uncacheable for everyone: the key may
					   go hit-for-pass */
};

/* Where the freshness lifetime came from. */
enum cp_source {
	CP_SRC_NONE,
	CP_SRC_EXPLICIT,		/* s-maxage, max-age or Expires */
	CP_SRC_VALID,			/* cache_valid for its status */
	CP_SRC_TTL,			/* cache_ttl */
	CP_SRC_HEURISTIC,		/* a fraction of Last-Modified's age */
};

#define CP_F_REVALIDATE	0x1		/* never served stale without the
					   origin: must-revalidate,
					   proxy-revalidate, s-maxage */
#define CP_F_NO_CACHE	0x2		/* validated before every use */

/* The freshness of a stored response: what the cache keeps with it. */
struct cp_fresh {
	int64_t date;			/* its Date, or when it came */
	int64_t born;			/* when its age was 0 */
	int64_t lifetime;		/* fresh from born for this long */
	int64_t swr;			/* stale-while-revalidate, -1: none */
	int64_t sie;			/* stale-if-error, -1: none */
	unsigned flags;			/* CP_F_* */
	enum cp_source source;
};

/*
 * Judges a response to a GET or HEAD: CP_STORE with *f filled, or why not
 * in *why (static text for the log).  It takes the Cache-Control that
 * targets corral (see cp_response_cc), the status (final, 100-599, not
 * 206 or 304; must-understand needs a status corral understands), the
 * rules for Authorization (RFC 9111 3.5) and for Cookie (only what the
 * response allows shared caches), Set-Cookie and Vary: * (never stored),
 * and a freshness lifetime from, in order: the explicit one, cache_valid,
 * cache_ttl, heuristics (Last-Modified and a heuristically cacheable
 * status or "public": 10% of its age, capped).  A response with none is
 * not stored.  CP_PASS only for a response any client would get the same
 * way: a 2xx or 3xx to a request without credentials or cookies.
 */
enum cp_verdict cp_judge(const struct cp_conf *conf, const struct cp_req *rq,
    const struct http_response *r, const struct cp_times *t,
    struct cp_fresh *f, const char **why);

/*
 * The Cache-Control that governs a response for corral: with
 * conf->cdn_control, CDN-Cache-Control, else Surrogate-Control, when the
 * response has one (RFC 9213 section 2.2: Cache-Control and Expires are
 * then ignored for freshness); else Cache-Control.  Returns true when a
 * targeted field was used.
 */
bool cp_response_cc(const struct cp_conf *conf, const struct http_response *r,
    struct http_cache_control *cc);

/* Whether a response with no explicit freshness may be stored by status
 * (RFC 9110 15.1: heuristically cacheable). */
bool cp_status_heuristic(int status);

/* Whether corral implements the caching rules of a status (must-understand,
 * RFC 9111 5.2.2.3). */
bool cp_status_understood(int status);

/*
 * The Age field's value (RFC 9111 5.1): the first member of the first
 * line, 1*DIGIT, saturated at HTTP_DELTA_MAX; -1 when absent or invalid
 * (the field is then ignored).
 */
int64_t cp_age_value(struct span v);

/*
 * The corrected initial age of a response (RFC 9111 4.2.3): the larger of
 * its apparent age (by Date) and its Age plus the time the origin took.
 */
int64_t cp_initial_age(int64_t age_value, int64_t date,
    const struct cp_times *t);

/* The current age of a stored response, saturated. */
int64_t cp_age(const struct cp_fresh *f, int64_t now);

/* Heuristic freshness (RFC 9111 4.2.2): 10% of date - last_modified,
 * capped at max; 0 when Last-Modified is not in the past. */
int64_t cp_heuristic(int64_t date, int64_t last_modified, int64_t max);

/* Fresh at now for a request with these directives (NULL: none). */
bool cp_is_fresh(const struct cp_fresh *f, const struct http_cache_control *rq,
    int64_t now);

/* Why a stale copy would be served. */
enum cp_stale {
	CP_STALE_REVALIDATING,		/* another request revalidates it */
	CP_STALE_ERROR,			/* the origin failed or is down */
};

/*
 * How much staleness a copy may have to be served in that case: the
 * response's stale-while-revalidate or stale-if-error, widened by the
 * request's max-stale or stale-if-error (RFC 5861 section 4), at least
 * config (the location's cache_stale window, -1: none).  -1 when it may
 * not be served stale at all (must-revalidate, proxy-revalidate,
 * s-maxage, no-cache).
 */
int64_t cp_stale_window(const struct cp_fresh *f,
    const struct http_cache_control *rq, enum cp_stale why, int64_t config);

/* Whether the copy may be served at now in that case. */
bool cp_stale_ok(const struct cp_fresh *f, const struct http_cache_control *rq,
    enum cp_stale why, int64_t config, int64_t now);

/*
 * The value a Vary'd request field is keyed on, from all its lines:
 * Accept-Encoding as its codings with q > 0, lower case, sorted, without
 * duplicates (x-gzip is gzip), with "-coding" for each refused one, so
 * unknown codings key apart and "gzip;q=0" is not "gzip";
 * Accept-Language as its ranges in lower case with their weights, sorted
 * by weight then name; any other field (or one of those malformed) as
 * its lines joined by "," with the whitespace around commas dropped.
 * No line at all gives an empty value that no line gives ("\x01"), so an
 * absent field and an empty one differ.  Returns the length, or -1 when
 * it does not fit in size bytes.
 */
ssize_t cp_vary_value(struct span name, const struct span *lines, size_t n,
    char *out, size_t size);

/*
 * Updates stored header lines ("Name: value\r\n"...) with a 304 or a
 * HEAD's fields (RFC 9111 3.2): each field of r replaces the stored lines
 * of its name, the others stay.  Never taken from r: hop-by-hop fields,
 * Content-Length, Transfer-Encoding, Content-Encoding and Content-Range
 * (they describe the stored bytes), Set-Cookie, and the fields in skip
 * (NULL-terminated lower-case names, e.g. those corral states itself).
 * Writes to out, which needs cp_freshen_size() bytes; returns the length.
 */
size_t cp_freshen_size(size_t len, const struct http_response *r);
size_t cp_freshen(const char *lines, size_t len, const struct http_response *r,
    const char *const *skip, char *out);

/*
 * Whether an If-None-Match list matches a stored entity tag, by the weak
 * comparison (RFC 9110 13.1.2): "*", a member equal to it byte for byte
 * (so a malformed tag such as w/"x" or W\"x" matches itself, as nginx
 * and Varnish do), or a well-formed member whose opaque-tag equals the
 * stored one's.
 */
bool cp_etag_match(struct span inm, const char *etag, size_t len);

#endif

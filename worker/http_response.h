/*
 * HTTP/1.1 responses from an upstream server (RFC 9112, RFC 9111), with no
 * I/O: the status line and header block, body framing, hop-by-hop fields
 * and Cache-Control.
 *
 * The parser follows the request parser's conventions (worker/http.h):
 * zero-copy spans into the caller's buffer, an opaque *scan for
 * incremental parsing, HTTP_OK/HTTP_AGAIN/HTTP_ERROR, no allocation.  It is
 * strict: a response whose framing is in any doubt is an error, to be
 * answered with 502 and the upstream connection closed.
 */
#ifndef CORRAL_HTTP_RESPONSE_H
#define CORRAL_HTTP_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/http.h"

/* How the body of a response ends (RFC 9112 section 6.3). */
#define HTTP_BODY_NONE		0	/* 1xx, 204, 304, response to HEAD */
#define HTTP_BODY_LENGTH	1	/* Content-Length bytes */
#define HTTP_BODY_CHUNKED	2	/* Transfer-Encoding: chunked */
#define HTTP_BODY_UNTIL_CLOSE	3	/* neither: the body ends at EOF */

struct http_response {
	int version;			/* 10 or 11 (1.2 to 1.9 are 11) */
	int status;			/* 100..999 */
	struct span reason;		/* may be empty, never absent */

	struct http_header *headers;	/* caller's array (see parse) */
	size_t nheaders;

	int64_t content_length;		/* -1 when absent */
	bool chunked;			/* Transfer-Encoding: chunked */
	bool close;			/* the upstream connection cannot be
					   reused after this response */
	bool keepalive_10;		/* HTTP/1.0 that may be reused: it said
					   keep-alive, and !close */
	int framing;			/* HTTP_BODY_* */

	/*
	 * Fields the cache needs, found while parsing; p == NULL when
	 * absent.  Each is the first line with that name.  Cache-Control,
	 * Vary and Pragma are lists that may be split over several lines:
	 * use http_response_cache_control() and http_response_header() to
	 * see all of them.
	 */
	struct span cache_control;
	struct span expires;
	struct span etag;
	struct span last_modified;
	struct span vary;
	struct span set_cookie;
	struct span age;
	struct span date;
	struct span pragma;

	const char *error;		/* short reason for the log when
					   HTTP_ERROR is returned */
};

/*
 * Parses a status line and header block from buf[0..len).  The rules are
 * those of requests, plus:
 *
 * - The status line is "HTTP/1.x SP 3DIGIT SP reason CRLF" with a status
 *   from 100 to 999 (600 to 999: relayed, never stored).  The reason may
 *   be empty, but the SP before it is required (RFC 9112 section 4).  No empty line may come before it.
 * - max_header_size bounds the status line, the fields and the final CRLF;
 *   maxheaders bounds the number of field lines.
 * - Content-Length and Transfer-Encoding are checked whatever the status:
 *   both together, two Content-Length lines (even equal), a malformed or
 *   overflowing value, Transfer-Encoding in HTTP/1.0, or a transfer coding
 *   other than a single "chunked" are errors.  The last is stricter than
 *   RFC 9112 section 6.3, which reads such a body until close: we could
 *   neither decode it nor pass it on, as transfer codings are hop-by-hop.
 * - 1xx and 204 must not have Transfer-Encoding nor a Content-Length other
 *   than 0; 304 and responses to HEAD may have both, and have no body.
 * - 101 Switching Protocols is an error: corral never asks for an upgrade.
 * - Connection must be a list of tokens.
 *
 * A 1xx response (100 Continue, 103 Early Hints) is returned like any
 * other, with framing HTTP_BODY_NONE: the caller skips or relays it, then
 * parses the final response that follows it, with *scan set to 0 again.
 * Only the final response's close and keepalive_10 count.
 *
 * *scan is the parser's progress, relative to buf: set it to 0 for a new
 * response and keep it across calls while HTTP_AGAIN is returned.  Returns
 * the length of the header block (> 0), HTTP_AGAIN when more bytes are
 * needed, or HTTP_ERROR with r->error set.
 */
ssize_t http_parse_response(struct http_response *r, const char *buf,
    size_t len, size_t *scan, struct http_header *headers, size_t maxheaders,
    size_t max_header_size, bool head_request);

/*
 * Keeps h in r's span for it when h is one of the fields the cache reads
 * (Cache-Control, Expires, ETag ...) and the first of its name; for
 * parsers of other response formats (CGI) that fill a struct
 * http_response.
 */
void http_response_keep_field(struct http_response *r,
    const struct http_header *h);

/*
 * Finds the next header line named name (case-insensitive) from index *i,
 * which the caller sets to 0 first; p == NULL when there is no more.
 */
struct span http_response_header(const struct http_response *r,
    const char *name, size_t *i);

/* True when the comma-separated token list value has token, any case. */
bool http_connection_has_token(struct span value, struct span token);

/*
 * True when a proxy must not forward the field name: Connection,
 * Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade
 * and whatever a Connection line of headers[0..n) names (RFC 9110 section
 * 7.6.1).  Works for requests and responses alike.
 */
bool http_hop_by_hop(const struct http_header *headers, size_t n,
    struct span name);

/*
 * Follows the framing of a response body as its bytes arrive.  With decode
 * set, chunked framing is removed in place (for storing in the cache);
 * without it nothing is rewritten and the caller relays the raw bytes, for
 * which the tracker only checks the framing and counts the payload.
 */
struct http_body {
	int framing;			/* HTTP_BODY_* */
	bool decode;
	bool done;
	bool in_data;			/* within chunk data (no decode) */
	uint64_t left;			/* HTTP_BODY_LENGTH: bytes to come */
	struct http_chunked ch;
};

void http_body_init(struct http_body *b, const struct http_response *r,
    bool decode);

/*
 * Feeds body bytes buf[0..*len).  On return *len is how many of them
 * belong to the body (the rest, if any, came after it) and *data is how
 * many payload bytes they carried.  With decode and chunked framing, the
 * payload is moved to buf[0..*data); otherwise buf is not written to and
 * the payload is spread among the framing.
 *
 * Returns HTTP_OK when the body is complete (also at once for an empty
 * body, with *len 0), HTTP_AGAIN when more is needed, HTTP_ERROR on bad
 * chunked framing.  HTTP_BODY_UNTIL_CLOSE never completes here: see
 * http_body_eof().
 */
int http_body_feed(struct http_body *b, char *buf, size_t *len,
    size_t *data);

/*
 * Says what an EOF from upstream means: HTTP_OK when the body is complete
 * (or ends at close), HTTP_ERROR when it was truncated.
 */
int http_body_eof(const struct http_body *b);

/*
 * Cache-Control directives (RFC 9111 section 5.2): those of responses, and
 * the request ones a cache acts on (max_stale, min_fresh, only_if_cached;
 * no-cache, no-store and max-age are shared).
 */
struct http_cache_control {
	bool no_store;
	bool no_cache;			/* unqualified no-cache */
	bool has_no_cache_fields;	/* no-cache="field, ...": a cache that
					   does not remove those fields must
					   treat it like no_cache */
	bool private_;			/* qualified or not */
	bool public_;
	bool must_revalidate;
	bool proxy_revalidate;
	bool must_understand;
	bool no_transform;
	bool immutable;			/* RFC 8246 */
	int64_t max_age;		/* seconds, -1 when absent */
	int64_t s_maxage;
	int64_t stale_while_revalidate;	/* RFC 5861 */
	int64_t stale_if_error;
	int64_t max_stale;		/* without argument: HTTP_DELTA_MAX */
	int64_t min_fresh;
	bool only_if_cached;
};

/* The most that a delta-seconds value counts for (RFC 9111 1.2.2). */
#define HTTP_DELTA_MAX	((int64_t)1 << 31)

/*
 * Parses a Cache-Control value into cc, leniently as RFC 9111 asks:
 * unknown directives and stray bytes are skipped, arguments may be tokens
 * or quoted strings.  When a directive repeats, flags add up and the
 * smallest number wins, the most restrictive reading.  A max-age or
 * s-maxage that is not a number counts as 0 (stale, RFC 9111 section
 * 4.2.1); a bad stale-*, max-stale or min-fresh argument is ignored, and
 * max-stale without one means any staleness.  Numbers are clamped to
 * HTTP_DELTA_MAX.
 */
void http_cache_control_parse(struct span v, struct http_cache_control *cc);

/* The same over every Cache-Control line of a response. */
void http_response_cache_control(const struct http_response *r,
    struct http_cache_control *cc);

/*
 * The same over every line of another field with that syntax (e.g.
 * CDN-Cache-Control); false when the response has none.
 */
bool http_response_directives(const struct http_response *r,
    const char *name, struct http_cache_control *cc);

#endif

/*
 * HTTP/1.1 message syntax and semantics (RFC 9110, RFC 9112), with no I/O.
 *
 * The request parser is zero-copy: a parsed request holds spans that point
 * into the caller's buffer, which must not move until the request is done.
 * It is strict: whatever RFC 9112 allows a recipient to reject is rejected,
 * with the status code that names the problem.
 */
#ifndef CORRAL_HTTP_H
#define CORRAL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* Return codes shared by the parsers. */
#define HTTP_OK		0
#define HTTP_ERROR	(-1)
#define HTTP_AGAIN	(-2)

/* A byte range in someone else's buffer; p == NULL means "absent". */
struct span {
	const char *p;
	size_t len;
};

enum http_method {
	HTTP_M_UNKNOWN = 0,	/* a valid token that we do not know: 501 */
	HTTP_M_GET,
	HTTP_M_HEAD,
	HTTP_M_POST,
	HTTP_M_PUT,
	HTTP_M_DELETE,
	HTTP_M_CONNECT,
	HTTP_M_OPTIONS,
	HTTP_M_TRACE,
	HTTP_M_PATCH,
	HTTP_M_PURGE,
};

struct http_header {
	struct span name;
	struct span value;	/* leading and trailing whitespace removed */
};

struct http_limits {
	size_t max_request_line;	/* exceeded: 414 */
	size_t max_header_size;		/* request line + fields: 431 */
	size_t max_headers;		/* field lines: 431 */
};

struct http_request {
	enum http_method method;
	struct span method_name;
	struct span target;		/* the raw request-target */
	struct span path;		/* raw path, percent-encoded; "*" for
					   OPTIONS * */
	struct span query;		/* after '?', p == NULL when none */
	struct span host;		/* authority from the absolute-form
					   target or the Host field, without
					   the port */
	uint64_t host_id;		/* a number for the Host field's
					   bytes: in a process, two requests
					   with the same one had the same
					   bytes; 0: none */
	int version;			/* 10 or 11 */
	bool absolute_form;
	bool path_plain;		/* path is its own normal form (see
					   http_path_normalize()) */

	struct http_header *headers;	/* caller's array (see parse) */
	size_t nheaders;

	int64_t content_length;		/* -1 when absent */
	bool chunked;			/* Transfer-Encoding: chunked */
	bool keepalive;			/* after version and Connection */
	bool connection;		/* a Connection field is there */
	bool conn_options;		/* naming options other than close
					   and keep-alive */
	bool expect_continue;

	/* Fields the static handler needs, found while parsing. */
	struct span if_match;
	struct span if_none_match;
	struct span if_modified_since;
	struct span if_unmodified_since;
	struct span range;
	struct span if_range;

	/* Set when HTTP_ERROR is returned. */
	int status;			/* 400, 414, 431, 417, 501, 505 ... */
	const char *error;		/* short reason for the log */
};

/*
 * Parses a request line and header block from buf[0..len).
 *
 * headers/maxheaders is caller storage for the field lines.  *scan is the
 * parser's opaque progress, relative to buf: set it to 0 for a new request
 * and keep it across calls, so bytes already scanned while the block is
 * incomplete are not looked at again (it survives moving the unparsed bytes
 * to the start of a buffer).  Returns the length of the header block (> 0) when it
 * is complete and valid, HTTP_AGAIN when more bytes are needed, HTTP_ERROR
 * with r->status and r->error set when the request is bad or too large.
 */
ssize_t http_parse_request(struct http_request *r, const char *buf,
    size_t len, size_t *scan, struct http_header *headers, size_t maxheaders,
    const struct http_limits *lim);

/* Finds a header by case-insensitive name of n bytes; p == NULL when
 * absent. */
struct span http_header_getn(const struct http_request *r, const char *name,
    size_t n);

/* The same by a string: inline, so a literal's length costs no strlen(). */
static inline struct span
http_header_get(const struct http_request *r, const char *name)
{
	return http_header_getn(r, name, strlen(name));
}

/*
 * The authority the request names, port included, as the client wrote
 * it: an absolute-form target's (RFC 9112 3.2.2: it replaces Host), else
 * the Host field's value; p == NULL when there is neither.
 */
struct span http_request_authority(const struct http_request *r);

/* Incremental decoder for a chunked body (RFC 9112 section 7.1). */
struct http_chunked {
	int state;
	uint64_t remaining;		/* bytes left in the current chunk */
	size_t line;			/* bytes in the current size/trailer
					   line, bounded */
	size_t trailers;		/* trailer bytes seen, bounded */
};

void http_chunked_init(struct http_chunked *c);

/*
 * Decodes chunked framing in place.  On entry buf[0..*len) is input; on
 * return *len is how many input bytes were consumed and buf[0..*data) holds
 * the payload bytes they carried.  Returns HTTP_OK when the last chunk and
 * trailer section are complete (bytes after *len belong to the next
 * request), HTTP_AGAIN when all input was consumed and more is needed, or
 * HTTP_ERROR on malformed framing or a size that does not fit 63 bits.
 */
int http_chunked_decode(struct http_chunked *c, char *buf, size_t *len,
    size_t *data);

/*
 * Percent-decodes a raw path, removes dot segments and merges slashes into
 * dst, which gets a NUL terminator.  The trailing slash is kept.  Returns
 * the length, or -1 with *status 400 (bad escape, NUL or control byte,
 * invalid or overlong UTF-8, ".." above the root) or 414 (does not fit).
 */
ssize_t http_path_normalize(char *dst, size_t dstlen, const char *src,
    size_t srclen, int *status);

/*
 * Checks a Host value or an authority: reg-name, IPv4 or [IPv6] literal,
 * then an optional ":port".  Returns the length of the host without the
 * port, or -1 when it is not valid.
 */
ssize_t http_host_check(const char *p, size_t len);

/* Ranges (RFC 9110 section 14). */
struct http_range {
	uint64_t first;
	uint64_t last;			/* inclusive */
};

#define HTTP_RANGE_NONE		0	/* ignore the header: 200, whole */
#define HTTP_RANGE_OK		1	/* *n satisfiable ranges in out */
#define HTTP_RANGE_UNSATISFIABLE 2	/* 416 */

/*
 * Parses a Range value for a representation of size bytes into out, which
 * has room for max ranges; *n is 0 unless HTTP_RANGE_OK.  Syntax errors,
 * other units, more than max ranges or overlapping ranges give
 * HTTP_RANGE_NONE.
 */
int http_range_parse(const char *v, size_t len, uint64_t size,
    struct http_range *out, int max, int *n);

/* Formats an IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes + NUL. */
#define HTTP_DATE_LEN 29
void http_date_format(time_t t, char *out);

/* Parses IMF-fixdate, RFC 850 and asctime dates; -1 when invalid. */
time_t http_date_parse(const char *p, size_t len);

/* Whether the request has any precondition http_conditional() looks at. */
static inline bool
http_has_conditions(const struct http_request *r)
{
	return r->if_match.p != NULL || r->if_none_match.p != NULL ||
	    r->if_modified_since.p != NULL || r->if_unmodified_since.p != NULL;
}

/*
 * Evaluates the preconditions of RFC 9110 section 13.2.2 against a
 * representation with this strong etag (quoted) and mtime.  Returns 0 to go
 * on, 304 (GET and HEAD) or 412.
 */
int http_conditional(const struct http_request *r, const char *etag,
    size_t etaglen, time_t mtime);

/* True when If-Range is absent or matches, so Range applies. */
bool http_if_range(const struct http_request *r, const char *etag,
    size_t etaglen, time_t mtime);

/* Matches an entity-tag list ("*", or tags with optional W/). */
bool http_etag_match(const char *list, size_t len, const char *etag,
    size_t etaglen, bool weak);

/*
 * Whether an Accept-Encoding value accepts gzip (RFC 9110 section 12.5.3):
 * gzip or x-gzip, or "*", with a weight above 0.
 */
bool http_accepts_gzip(struct span v);

/* The encodings corral compresses into, best first when q-values tie. */
enum http_enc { ENC_BR, ENC_GZIP, ENC_COUNT };
/* Their tokens ("br", "gzip") and Content-Encoding lines, CRLF ended. */
extern const char *const http_enc_token[ENC_COUNT];
extern const char *const http_enc_field[ENC_COUNT];

/*
 * The content-coding an Accept-Encoding value v weighs highest among
 * names[i] for the bits i of offer (q-values; a tie goes to the lower
 * index; "*" covers the others; "x-gzip" is "gzip"), or -1 when none is
 * acceptable or identity weighs more.
 */
int http_encoding_pick(struct span v, const char *const *names, int n,
    unsigned offer);

/* The reason phrase for a status code, "Unknown" if none. */
const char *http_reason(int status);

/*
 * The whole line "HTTP/1.1 <status> <reason>\r\n" and its length in *len;
 * NULL for a status http_reason() does not know.
 */
const char *http_status_line(int status, size_t *len);

/* Writes v in decimal at dst, which has room for 20 digits; its length. */
size_t http_u64(char *dst, uint64_t v);

/* Writes a chunk's size line, len in hex and CRLF, at dst, which has room
 * for 18 bytes; its length. */
size_t http_chunk_line(char *dst, uint64_t len);

#endif

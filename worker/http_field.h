/*
 * The header fields corral treats specially, in one table (h2o's token
 * table is the model): each name once, with flags that say what the proxy,
 * the cache and the protocol modules do with it.  A field that is not in
 * the table has no flags: it is passed on and stored as it is.
 *
 * To treat a field specially, add a row (lower-case name) or a flag to a
 * row; the code asks http_field_flags() and never compares names itself.
 */
#ifndef CORRAL_HTTP_FIELD_H
#define CORRAL_HTTP_FIELD_H

#include <stdbool.h>
#include <stddef.h>

#include "worker/http.h"

#define HF_HOP		0x001	/* hop-by-hop (RFC 9110 7.6.1): never
				   forwarded either way */
#define HF_REQ_DROP	0x002	/* not forwarded from a client: corral
				   states it itself (X-Forwarded-*, framing) */
#define HF_RESP_DROP	0x004	/* not relayed from an upstream: corral
				   states it itself */
#define HF_NOT_STORED	0x008	/* not kept with a stored response: said
				   anew on each answer */
#define HF_CONDITIONAL	0x010	/* a precondition or Range: answered by the
				   cache, so a fill does not forward it */
#define HF_304_KEEP	0x020	/* repeated by a 304 from the cache (RFC
				   9110 15.4.5) */
#define HF_PLAIN_ONLY	0x040	/* describes the plain bytes: not put on a
				   compressed copy */
#define HF_END_TO_END	0x080	/* framing or Host: a Connection option may
				   not name it (the request is refused) */
#define HF_CACHE_OWN	0x100	/* corral's own cache status: an upstream's
				   is replaced */

/* id, lower-case name, flags */
#define HTTP_FIELDS(X)							\
	X(AGE,			"age",			HF_NOT_STORED)	\
	X(CACHE_CONTROL,	"cache-control",	HF_304_KEEP)	\
	X(CONNECTION,		"connection",		HF_HOP)		\
	X(CONTENT_DIGEST,	"content-digest",	HF_PLAIN_ONLY)	\
	X(CONTENT_LENGTH,	"content-length",	HF_REQ_DROP |	\
	    HF_RESP_DROP | HF_NOT_STORED | HF_END_TO_END)		\
	X(CONTENT_LOCATION,	"content-location",	HF_304_KEEP)	\
	X(CONTENT_MD5,		"content-md5",		HF_PLAIN_ONLY)	\
	X(DATE,			"date",			HF_RESP_DROP |	\
	    HF_NOT_STORED)						\
	X(DIGEST,		"digest",		HF_PLAIN_ONLY)	\
	X(ETAG,			"etag",			HF_304_KEEP |	\
	    HF_PLAIN_ONLY)						\
	X(EXPECT,		"expect",		HF_REQ_DROP)	\
	X(EXPIRES,		"expires",		HF_304_KEEP)	\
	X(HOST,			"host",			HF_END_TO_END)	\
	X(IF_MATCH,		"if-match",		HF_CONDITIONAL)	\
	X(IF_MODIFIED_SINCE,	"if-modified-since",	HF_CONDITIONAL)	\
	X(IF_NONE_MATCH,	"if-none-match",	HF_CONDITIONAL)	\
	X(IF_RANGE,		"if-range",		HF_CONDITIONAL)	\
	X(IF_UNMODIFIED_SINCE,	"if-unmodified-since",	HF_CONDITIONAL)	\
	X(KEEP_ALIVE,		"keep-alive",		HF_HOP)		\
	X(LAST_MODIFIED,	"last-modified",	HF_304_KEEP)	\
	X(PROXY,		"proxy",		HF_REQ_DROP)	\
	X(PROXY_CONNECTION,	"proxy-connection",	HF_HOP)		\
	X(RANGE,		"range",		HF_CONDITIONAL)	\
	X(REPR_DIGEST,		"repr-digest",		HF_PLAIN_ONLY)	\
	X(SERVER,		"server",		HF_RESP_DROP |	\
	    HF_NOT_STORED)						\
	X(TE,			"te",			HF_HOP)		\
	X(TRAILER,		"trailer",		HF_HOP)		\
	X(TRANSFER_ENCODING,	"transfer-encoding",	HF_HOP |	\
	    HF_END_TO_END)						\
	X(UPGRADE,		"upgrade",		HF_HOP)		\
	X(VARY,			"vary",			HF_304_KEEP)	\
	X(X_CACHE,		"x-cache",		HF_NOT_STORED |	\
	    HF_CACHE_OWN)						\
	X(X_FORWARDED_FOR,	"x-forwarded-for",	HF_REQ_DROP)	\
	X(X_FORWARDED_HOST,	"x-forwarded-host",	HF_REQ_DROP)	\
	X(X_FORWARDED_PROTO,	"x-forwarded-proto",	HF_REQ_DROP)

enum http_field_id {
	HF_NONE = 0,
#define HTTP_FIELD_ENUM(id, name, flags)	HF_##id,
	HTTP_FIELDS(HTTP_FIELD_ENUM)
#undef HTTP_FIELD_ENUM
	HF_COUNT
};

struct http_field {
	enum http_field_id id;
	const char *name;		/* lower case */
	size_t len;
	unsigned flags;			/* HF_* */
};

/* The row for a field name, any case; NULL when the table has none. */
const struct http_field *http_field_find(struct span name);

/* The flags of a field name; 0 for a name the table does not know. */
unsigned http_field_flags(struct span name);

/* The row of an id, for its canonical spelling. */
const struct http_field *http_field_row(enum http_field_id id);

/*
 * Whether a Connection line of headers[0..n) names name: a connection
 * option (RFC 9110 7.6.1), hop-by-hop for this message only.
 */
bool http_field_connection_option(const struct http_header *headers,
    size_t n, struct span name);

/*
 * The first connection option of headers[0..n) that names a field with
 * any of flags, or p == NULL: "Connection: Host" asks a proxy to remove
 * Host, which no request may ask.
 */
struct span http_field_bad_option(const struct http_header *headers,
    size_t n, unsigned flags);

#endif

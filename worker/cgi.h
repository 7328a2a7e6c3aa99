/*
 * CGI/1.1 responses (RFC 3875 section 6), with no I/O: the header block an
 * application writes at the start of its output (FastCGI STDOUT), read
 * into the same struct http_response as an HTTP upstream's response, so
 * the proxy's header rules and the cache treat both alike.
 *
 * Like the HTTP parsers (worker/http.h): zero-copy spans into the
 * caller's buffer, an opaque *scan for incremental parsing,
 * HTTP_OK/HTTP_AGAIN/HTTP_ERROR, no allocation.  Strict where the answer
 * would otherwise be a guess; an error is a 502 for the client.
 */
#ifndef CORRAL_CGI_H
#define CORRAL_CGI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "worker/http.h"
#include "worker/http_response.h"

/*
 * Parses a CGI header block from buf[0..len):
 *
 * - Lines end in LF or CRLF (the RFC allows both; nginx takes both); a CR
 *   anywhere else is an error.  An empty line ends the block.
 * - Field lines are "name: value" as in HTTP: a token, a colon, a value
 *   of visible characters, spaces and obs-text; no obs-fold.
 * - "Status: 404 Not Found" (or "Status: 404") sets the status, which
 *   must be 200 to 599 (1xx would break the framing), and the reason; it
 *   is not a header of the response.  Without Status, a Location field
 *   makes it 302 (nginx's reading of a local redirect) and otherwise 200.
 * - Content-Length is checked as in HTTP (one, a number) and gives
 *   HTTP_BODY_LENGTH framing.  Without it the body ends with the
 *   application's stream: HTTP_BODY_UNTIL_CLOSE, but close stays false,
 *   as the end is the protocol's (FastCGI END_REQUEST), not the
 *   connection's.  204, 304 and responses to HEAD have HTTP_BODY_NONE.
 * - Transfer-Encoding and Connection are kept as headers for the proxy's
 *   hop-by-hop rules to drop; they say nothing about the framing.
 * - max_header_size bounds the block and maxheaders the field lines.
 *
 * r->version is 11; the fields the cache reads are found as for HTTP.
 * Returns the length of the block (> 0), HTTP_AGAIN when more bytes are
 * needed, or HTTP_ERROR with r->error set.
 */
ssize_t cgi_parse_response(struct http_response *r, const char *buf,
    size_t len, size_t *scan, struct http_header *headers, size_t maxheaders,
    size_t max_header_size, bool head_request);

#endif

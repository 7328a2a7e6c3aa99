/*
 * The CGI/1.1 parameters (RFC 3875 section 4.1) of a FastCGI request, as
 * nginx's fastcgi_params file passes them: SCRIPT_FILENAME, QUERY_STRING,
 * REQUEST_METHOD, CONTENT_TYPE, CONTENT_LENGTH, SCRIPT_NAME, PATH_INFO,
 * REQUEST_URI, DOCUMENT_URI, DOCUMENT_ROOT, SERVER_PROTOCOL,
 * REQUEST_SCHEME, GATEWAY_INTERFACE, SERVER_SOFTWARE, REMOTE_ADDR,
 * REMOTE_PORT, SERVER_ADDR, SERVER_PORT, SERVER_NAME, REDIRECT_STATUS
 * (for PHP), then the location's fastcgi_param list, which replaces a
 * parameter of the same name, then every request field the handler's
 * rules pass on as HTTP_NAME (one parameter per name, repeated fields
 * joined with ", ", Cookie with "; "), never Proxy (httpoxy), and never
 * one that a fastcgi_param names.  Internal to worker/.
 */
#ifndef CORRAL_FCGI_PARAMS_H
#define CORRAL_FCGI_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

struct upstream_buf;
struct upstream_request;

/*
 * Appends BEGIN_REQUEST (with FCGI_KEEP_CONN when keep_conn) and the
 * PARAMS stream for the request to out.  First, unless the location says
 * otherwise, the script must be a file beneath the root.  Returns 0, or
 * the status to answer instead: 404 or 403 for the script, 400 for a path
 * that does not normalise, 502 when memory ran out.
 */
int fcgi_params_build(const struct upstream_request *rq, uint16_t id,
    bool keep_conn, struct upstream_buf *out);

/* Frees the scratch kept between requests; at exit. */
void fcgi_params_free(void);

#endif

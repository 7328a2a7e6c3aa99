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

struct conn;
struct config_location;
struct fcgi_prep;
struct upstream_buf;
struct upstream_request;
struct vars_ctx;

/*
 * Takes what the request's route says when the handler starts (its $uri
 * after try_files or rewrites, $args, regex groups: x), since the request
 * may be built later: SCRIPT_NAME and PATH_INFO ($fastcgi_script_name,
 * $fastcgi_path_info: fastcgi_split_path_info, then fastcgi_index for a
 * URI ending in '/'), the fastcgi_param values expanded, and, unless the
 * location says otherwise, the script checked to be a file beneath the
 * root.  *fp is made on first use and reused.  Returns 0, or the status
 * to answer instead: 404 or 403 for the script, 414, or 500.
 */
int fcgi_params_prepare(struct fcgi_prep **fp, const struct conn *c,
    const struct config_location *l, const struct vars_ctx *x);
void fcgi_prep_free(struct fcgi_prep *fp);

/*
 * Appends BEGIN_REQUEST (with FCGI_KEEP_CONN when keep_conn) and the
 * PARAMS stream for the request (rq->fcgi prepared) to out.  Returns 0,
 * or 500 / 502 when memory ran out.
 */
int fcgi_params_build(const struct upstream_request *rq, uint16_t id,
    bool keep_conn, struct upstream_buf *out);

/* Frees the scratch kept between requests; at exit. */
void fcgi_params_free(void);

#endif

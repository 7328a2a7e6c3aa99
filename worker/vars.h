/*
 * Variables in config strings, as nginx has them: "https://$host$uri",
 * "/app/$1", "${uri}.html".  A string is compiled once, when the config
 * is loaded, into literal pieces and variable references, so an unknown
 * name is a config error with its position; expanding it for a request
 * only copies bytes.  FastCGI parameters and log formats use the same
 * table.
 */
#ifndef CORRAL_VARS_H
#define CORRAL_VARS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct conn;

/* Every variable, written once: its name and what it is. */
#define VARS_TABLE(X)							\
	X(SCHEME,	"scheme",	"http or https")		\
	X(HOST,		"host",		"Host without port, or the server's first name") \
	X(REQUEST_URI,	"request_uri",	"the target as sent, with arguments") \
	X(URI,		"uri",		"the decoded, normalised path, after rewrites") \
	X(DOCUMENT_URI,	"document_uri",	"the same as $uri")		\
	X(ARGS,		"args",		"the query string")		\
	X(QUERY_STRING,	"query_string",	"the same as $args")		\
	X(IS_ARGS,	"is_args",	"\"?\" when there are arguments") \
	X(REMOTE_ADDR,	"remote_addr",	"the client's address")		\
	X(SERVER_NAME,	"server_name",	"the first name of the server") \
	X(SERVER_PORT,	"server_port",	"the port the request came in on") \
	X(REQUEST_METHOD, "request_method", "GET, POST ...")		\
	X(DOCUMENT_ROOT, "document_root", "root or alias of the location") \
	X(SERVER_PROTOCOL, "server_protocol", "HTTP/1.0 or HTTP/1.1")	\
	X(REMOTE_PORT,	"remote_port",	"the client's port")		\
	X(SERVER_ADDR,	"server_addr",	"the address the request came in on") \
	X(HTTPS,	"https",	"\"on\" over TLS, else empty")	\
	X(CONTENT_TYPE,	"content_type",	"the Content-Type request field") \
	X(CONTENT_LENGTH, "content_length", "the Content-Length request field") \
	X(FASTCGI_SCRIPT_NAME, "fastcgi_script_name",			\
	    "FastCGI: the script's URI (fastcgi_split_path_info, index)") \
	X(FASTCGI_PATH_INFO, "fastcgi_path_info",			\
	    "FastCGI: what follows the script (fastcgi_split_path_info)")

enum var_id {
#define VARS_ENUM(id, name, doc) VAR_##id,
	VARS_TABLE(VARS_ENUM)
#undef VARS_ENUM
	VAR_COUNT,
	VAR_HTTP,		/* $http_NAME: a request header */
	VAR_ARG,		/* $arg_NAME: a query-string argument */
	VAR_COOKIE,		/* $cookie_NAME: a cookie of the request */
	VAR_CAPTURE,		/* $1 .. $9 */
	VAR_LITERAL,
};

struct vars_tmpl;

/*
 * Compiles s.  Captures $1..$max_capture are allowed (0: none).  On error
 * returns NULL with "what, at offset N" in err.
 */
struct vars_tmpl *vars_compile(const char *s, int max_capture, char *err,
    size_t errlen);

void vars_free(struct vars_tmpl *t);

/* True when the template is one literal string (no variables). */
bool vars_is_literal(const struct vars_tmpl *t);

/* The highest $N the template uses, 0 if none. */
int vars_max_capture(const struct vars_tmpl *t);

/* What a request offers to expansion besides the connection itself. */
struct vars_ctx {
	const char *uri;		/* current $uri */
	size_t urilen;
	const char *args;		/* current $args, or NULL */
	size_t argslen;
	const char *subject;		/* what the last regex matched */
	const size_t *ovector;		/* its captures, pairs of offsets */
	int ncaptures;			/* pairs in ovector */
	const char *root;		/* $document_root, or NULL */
	const char *script_name;	/* $fastcgi_script_name, or NULL */
	size_t script_name_len;
	const char *path_info;		/* $fastcgi_path_info, or NULL */
	size_t path_info_len;
};

/*
 * Expands t for the request of c into out (NUL-terminated).  Returns the
 * length, or -1 when it does not fit.
 */
ssize_t vars_expand(const struct vars_tmpl *t, const struct conn *c,
    const struct vars_ctx *ctx, char *out, size_t outlen);

/* The current route's context for c ($uri, $args, captures, root), valid
 * until the next request is routed (worker/request.c). */
void request_vars(const struct conn *c, struct vars_ctx *x);

/* One variable's value for c, or a zero span when it has none. */
struct span;
bool vars_get(enum var_id id, const struct conn *c,
    const struct vars_ctx *ctx, const char **p, size_t *len);

#endif

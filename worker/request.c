/*
 * What answers a request: the server block chosen by Host, the location
 * chosen by path, and the handlers for files and the methods that need no
 * handler of their own.
 */
#include <limits.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "master/config.h"
#include "master/log.h"
#include "worker/conn_impl.h"
#include "worker/static.h"

static bool
name_match(const char *name, struct span host)
{
	size_t n = strlen(name);

	if (name[0] == '*' && name[1] == '.') {
		/* "*.example.com" matches "a.example.com", not itself. */
		n -= 1;
		return host.len > n && strncasecmp(host.p + host.len - n,
		    name + 1, n) == 0;
	}
	return host.len == n && strncasecmp(host.p, name, n) == 0;
}

size_t
request_server(struct span host)
{
	const struct config *cf = worker.cf;

	if (host.p == NULL || cf->nservers == 1)
		return 0;
	for (size_t i = 0; i < cf->nservers; i++)
		for (size_t j = 0; j < cf->servers[i].nnames; j++)
			if (name_match(cf->servers[i].names[j], host))
				return i;
	return 0;
}

static void
handle_options(struct conn *c)
{
	resp_status(c, 200);
	resp_header(c, resp_allow, resp_allow_len);
	resp_end_headers(c, 0);
	resp_done(c, 200, 0);
}

void
request_handle(struct conn *c)
{
	struct http_request *r = &c->req;
	char path[PATH_MAX];
	ssize_t len;
	int status;

	switch (r->method) {
	case HTTP_M_GET:
	case HTTP_M_HEAD:
		break;
	case HTTP_M_OPTIONS:
		handle_options(c);
		return;
	case HTTP_M_UNKNOWN:
		log_info("client %s: unknown method \"%.*s\"", c->peer,
		    (int)r->method_name.len, r->method_name.p);
		resp_error(c, 501);
		return;
	default:
		resp_error(c, 405);
		return;
	}
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0) {
		log_info("client %s: bad path \"%.*s\"", c->peer,
		    (int)r->path.len, r->path.p);
		resp_error(c, status);
		return;
	}
	static_serve(c, c->srv, path, (size_t)len);
}

const struct config_location *
request_location(struct conn *c)
{
	const struct config_server *s = &worker.cf->servers[c->srv];
	const struct config_location *l;
	struct http_request *r = &c->req;
	char path[PATH_MAX];
	ssize_t len;
	int status;

	if (s->nlocations == 0 || r->method == HTTP_M_CONNECT)
		return NULL;
	len = http_path_normalize(path, sizeof(path), r->path.p, r->path.len,
	    &status);
	if (len < 0)
		return NULL;
	for (l = s->locations; l < s->locations + s->nlocations; l++)
		if ((size_t)len >= l->prefix_len &&
		    memcmp(path, l->prefix, l->prefix_len) == 0)
			return l->upstream >= 0 || l->status ||
			    l->memcached_local ? l : NULL;
	return NULL;
}


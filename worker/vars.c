/*
 * Variables: compiling config strings into pieces, and expanding them for
 * a request.  Expansion never allocates; values point into the request,
 * the config or the caller's context.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/config.h"
#include "worker/conn_impl.h"
#include "worker/vars.h"

#define VARS_PIECES_MAX	64

struct piece {
	enum var_id id;
	int n;				/* capture number */
	const char *p;			/* literal bytes or header name */
	size_t len;
};

struct vars_tmpl {
	size_t npieces;
	int max_capture;
	char *text;			/* owned copy the pieces point into */
	struct piece pieces[];
};

static const struct {
	const char *name;
	size_t len;
} names[] = {
#define VARS_NAME(id, name, doc) { name, sizeof(name) - 1 },
	VARS_TABLE(VARS_NAME)
#undef VARS_NAME
};

static bool
name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || ch == '_';
}

/* Families of variables named by a prefix and what follows it. */
static const struct {
	const char *prefix;
	size_t len;
	enum var_id id;
} prefixed[] = {
	{ "http_", 5, VAR_HTTP },
	{ "arg_", 4, VAR_ARG },
	{ "cookie_", 7, VAR_COOKIE },
};

/* Resolves the name at p (len bytes) into a piece; false if unknown. */
static bool
resolve(const char *p, size_t len, struct piece *pc)
{
	size_t i;

	if (len == 1 && p[0] >= '1' && p[0] <= '9') {
		pc->id = VAR_CAPTURE;
		pc->n = p[0] - '0';
		return true;
	}
	for (i = 0; i < sizeof(prefixed) / sizeof(prefixed[0]); i++)
		if (len > prefixed[i].len &&
		    strncmp(p, prefixed[i].prefix, prefixed[i].len) == 0) {
			pc->id = prefixed[i].id;
			pc->p = p + prefixed[i].len;
			pc->len = len - prefixed[i].len;
			return true;
		}
	for (i = 0; i < VAR_COUNT; i++)
		if (names[i].len == len && memcmp(names[i].name, p, len) == 0) {
			pc->id = (enum var_id)i;
			return true;
		}
	return false;
}

struct vars_tmpl *
vars_compile(const char *s, int max_capture, char *err, size_t errlen)
{
	struct piece pcs[VARS_PIECES_MAX];
	struct vars_tmpl *t;
	size_t n = 0, i = 0, start, len, lit;
	char *text;
	bool brace;

	if ((text = strdup(s)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (text[i] != '\0') {
		if (n == VARS_PIECES_MAX) {
			snprintf(err, errlen, "more than %d pieces",
			    VARS_PIECES_MAX);
			goto fail;
		}
		memset(&pcs[n], 0, sizeof(pcs[n]));
		if (text[i] != '$') {
			lit = strcspn(text + i, "$");
			pcs[n].id = VAR_LITERAL;
			pcs[n].p = text + i;
			pcs[n++].len = lit;
			i += lit;
			continue;
		}
		start = i++;
		brace = text[i] == '{';
		i += brace;
		len = 0;
		if (text[i] >= '1' && text[i] <= '9')
			len = 1;
		else
			while (name_char(text[i + len]))
				len++;
		if (len == 0 || (brace && text[i + len] != '}')) {
			snprintf(err, errlen, "a '$' without a variable name, "
			    "at offset %zu", start);
			goto fail;
		}
		if (!resolve(text + i, len, &pcs[n])) {
			snprintf(err, errlen, "unknown variable \"$%.*s\", at "
			    "offset %zu", (int)len, text + i, start);
			goto fail;
		}
		if (pcs[n].id == VAR_CAPTURE && pcs[n].n > max_capture) {
			snprintf(err, errlen, "\"$%d\" at offset %zu: the "
			    "regular expression has %s", pcs[n].n, start,
			    max_capture == 0 ? "no captures here" :
			    "fewer captures");
			goto fail;
		}
		i += len + brace;
		n++;
	}
	t = calloc(1, sizeof(*t) + n * sizeof(struct piece));
	if (t == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	t->text = text;
	t->npieces = n;
	memcpy(t->pieces, pcs, n * sizeof(struct piece));
	for (i = 0; i < n; i++)
		if (pcs[i].id == VAR_CAPTURE && pcs[i].n > t->max_capture)
			t->max_capture = pcs[i].n;
	return t;
fail:
	free(text);
	return NULL;
}

void
vars_free(struct vars_tmpl *t)
{
	if (t == NULL)
		return;
	free(t->text);
	free(t);
}

bool
vars_is_literal(const struct vars_tmpl *t)
{
	return t->npieces == 0 ||
	    (t->npieces == 1 && t->pieces[0].id == VAR_LITERAL);
}

int
vars_max_capture(const struct vars_tmpl *t)
{
	return t->max_capture;
}

static bool
set(const char **p, size_t *len, const char *v, size_t n)
{
	*p = v;
	*len = n;
	return v != NULL;
}

bool
vars_get(enum var_id id, const struct conn *c, const struct vars_ctx *ctx,
    const char **p, size_t *len)
{
	const struct config *cf = worker.cf;
	const struct config_server *s = &cf->servers[c->srv];
	const struct http_request *r = &c->rq->req;
	/* Numbers and addresses formatted here are copied by the caller
	 * before the next call (one worker, one thread). */
	static char num[12], addr[INET6_ADDRSTRLEN];
	const char *port;
	unsigned lport;
	struct span sp;
	int n;

	switch (id) {
	case VAR_SCHEME:
		return c->ssl != NULL ? set(p, len, "https", 5) :
		    set(p, len, "http", 4);
	case VAR_HOST:
		if (r->host.p != NULL)
			return set(p, len, r->host.p, r->host.len);
		/* FALLTHROUGH */
	case VAR_SERVER_NAME:
		if (s->nnames == 0)
			return set(p, len, "", 0);
		return set(p, len, s->names[0], strlen(s->names[0]));
	case VAR_REQUEST_URI:
		return set(p, len, r->target.p, r->target.len);
	case VAR_URI:
	case VAR_DOCUMENT_URI:
		return set(p, len, ctx->uri, ctx->urilen);
	case VAR_ARGS:
	case VAR_QUERY_STRING:
		return set(p, len, ctx->args ? ctx->args : "",
		    ctx->args ? ctx->argslen : 0);
	case VAR_IS_ARGS:
		return set(p, len, "?", ctx->args && ctx->argslen ? 1 : 0);
	case VAR_REMOTE_ADDR:
		return set(p, len, c->peer, strlen(c->peer));
	case VAR_SERVER_PORT:
		port = strrchr(cf->listen[c->lidx].text, ':');
		port = port ? port + 1 : cf->listen[c->lidx].text;
		return set(p, len, port, strlen(port));
	case VAR_REQUEST_METHOD:
		return set(p, len, r->method_name.p, r->method_name.len);
	case VAR_DOCUMENT_ROOT:
		return set(p, len, ctx->root ? ctx->root : s->root,
		    strlen(ctx->root ? ctx->root : s->root));
	case VAR_SERVER_PROTOCOL:
		return set(p, len, r->version == 10 ? "HTTP/1.0" :
		    "HTTP/1.1", 8);
	case VAR_REMOTE_PORT:
		n = snprintf(num, sizeof(num), "%u", conn_peer_port(c));
		return set(p, len, num, (size_t)n);
	case VAR_SERVER_ADDR:
		if (!conn_local(c, addr, sizeof(addr), &lport))
			addr[0] = '\0';
		return set(p, len, addr, strlen(addr));
	case VAR_HTTPS:
		return set(p, len, "on", conn_tls(c) ? 2 : 0);
	case VAR_CONTENT_TYPE:
		sp = http_header_get(r, "Content-Type");
		return set(p, len, sp.p ? sp.p : "", sp.len);
	case VAR_CONTENT_LENGTH:
		sp = http_header_get(r, "Content-Length");
		return set(p, len, sp.p ? sp.p : "", sp.len);
	case VAR_FASTCGI_SCRIPT_NAME:
		return set(p, len, ctx->script_name ? ctx->script_name : "",
		    ctx->script_name ? ctx->script_name_len : 0);
	case VAR_FASTCGI_PATH_INFO:
		return set(p, len, ctx->path_info ? ctx->path_info : "",
		    ctx->path_info ? ctx->path_info_len : 0);
	default:
		return set(p, len, "", 0);
	}
}

/* $http_user_agent names the header User-Agent. */
static struct span
header_value(const struct http_request *r, const char *name, size_t len)
{
	char hname[64];
	size_t i;

	if (len >= sizeof(hname) || r->headers == NULL)
		return (struct span){ NULL, 0 };
	for (i = 0; i < len; i++)
		hname[i] = name[i] == '_' ? '-' : name[i];
	hname[len] = '\0';
	return http_header_get(r, hname);
}

/*
 * The value of "name" in a list of "name=value" items split by sep
 * (query strings by '&', Cookie by ';' and spaces), names compared
 * without case as nginx does; a zero span when it is not there.
 */
static struct span
item_value(const char *s, size_t slen, char sep, const char *name,
    size_t len)
{
	const char *end = s + slen, *item, *next, *eq;

	for (item = s; s != NULL && item < end; item = next + 1) {
		while (item < end && (*item == ' ' || *item == sep))
			item++;
		if ((next = memchr(item, sep, (size_t)(end - item))) == NULL)
			next = end;
		eq = memchr(item, '=', (size_t)(next - item));
		if (eq != NULL && (size_t)(eq - item) == len &&
		    strncasecmp(item, name, len) == 0)
			return (struct span){ eq + 1, (size_t)(next - eq - 1) };
		if (next == end)
			break;
	}
	return (struct span){ NULL, 0 };
}

ssize_t
vars_expand(const struct vars_tmpl *t, const struct conn *c,
    const struct vars_ctx *ctx, char *out, size_t outlen)
{
	const struct piece *pc;
	const char *p;
	size_t n = 0, len, i;
	struct span sp;
	int k;

	for (i = 0; i < t->npieces; i++) {
		pc = &t->pieces[i];
		p = NULL;
		len = 0;
		switch (pc->id) {
		case VAR_LITERAL:
			p = pc->p;
			len = pc->len;
			break;
		case VAR_CAPTURE:
			k = pc->n;
			if (ctx->ovector != NULL && k < ctx->ncaptures &&
			    ctx->ovector[2 * k] != (size_t)-1) {
				p = ctx->subject + ctx->ovector[2 * k];
				len = ctx->ovector[2 * k + 1] -
				    ctx->ovector[2 * k];
			}
			break;
		case VAR_HTTP:
			sp = header_value(&c->rq->req, pc->p, pc->len);
			p = sp.p;
			len = sp.len;
			break;
		case VAR_ARG:
			sp = item_value(ctx->args, ctx->args ? ctx->argslen : 0,
			    '&', pc->p, pc->len);
			p = sp.p;
			len = sp.len;
			break;
		case VAR_COOKIE:
			sp = header_value(&c->rq->req, "cookie", 6);
			sp = item_value(sp.p, sp.len, ';', pc->p, pc->len);
			p = sp.p;
			len = sp.len;
			break;
		default:
			vars_get(pc->id, c, ctx, &p, &len);
			break;
		}
		if (len >= outlen - n)
			return -1;
		if (len > 0)
			memcpy(out + n, p, len);
		n += len;
	}
	out[n] = '\0';
	return (ssize_t)n;
}

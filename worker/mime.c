/*
 * MIME types by file name extension, from an Apache-style mime.types file.
 *
 * Everything is allocated at load time; a lookup hashes the extension into
 * an open-addressing table with linear probing and never allocates.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/static.h"

/* etc/mime.types, made into C strings at build time (worker/include.am). */
static const char *const builtin[] = {
#include "worker/mime_builtin.h"
};

#define CHARSET		"; charset=utf-8"
#define MIN_SLOTS	64
#define QUOTE_MAX	64		/* bytes of a bad field to quote */

struct mime_slot {
	char *ext;			/* lower case; NULL when free */
	size_t extlen;
	const char *type;		/* points into types[] */
};

struct mime_table {
	struct mime_slot *slots;
	size_t mask;			/* slots - 1, a power of two */
	size_t used;
	char **types;			/* owned, with any charset appended */
	size_t ntypes;
	size_t maxext;			/* the longest extension */
};

struct loader {
	struct mime_table *mt;
	const char *path;
	size_t lineno;
	char *err;
	size_t errlen;
};

static char
lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

/* tchar of RFC 9110 section 5.6.2; '#' is not, as it starts a comment. */
static bool
is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!$%&'*+-.^_`|~", c) != NULL);
}

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' ||
	    c == '\v' || c == '\f';
}

static bool
ascii_caseeq(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

/* FNV-1a of the lower-cased bytes. */
static uint64_t
hash_ext(const char *p, size_t len)
{
	uint64_t h = 14695981039346656037ULL;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)lower(p[i]);
		h *= 1099511628211ULL;
	}
	return h;
}

static void
load_error(struct loader *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
load_error(struct loader *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->err == NULL || l->errlen == 0)
		return;
	if (l->lineno > 0)
		n = snprintf(l->err, l->errlen, "%s:%zu: ", l->path,
		    l->lineno);
	else
		n = snprintf(l->err, l->errlen, "%s: ", l->path);
	if (n < 0 || (size_t)n >= l->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(l->err + n, l->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/*
 * Text types get a charset so that browsers do not guess one; this is
 * decided here, once, so that a lookup returns a finished value.
 */
static bool
wants_charset(const char *t, size_t len)
{
	static const char *const exact[] = {
		"application/javascript", "application/json",
		"application/xml",
	};
	size_t i;

	if (len > 5 && ascii_caseeq(t, "text/", 5))
		return true;
	for (i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (len == strlen(exact[i]) && ascii_caseeq(t, exact[i], len))
			return true;
	return (len > 4 && ascii_caseeq(t + len - 4, "+xml", 4)) ||
	    (len > 5 && ascii_caseeq(t + len - 5, "+json", 5));
}

/* type "/" subtype, both tokens. */
static bool
valid_type(const char *t, size_t len)
{
	size_t i, slash = 0, slashes = 0;

	for (i = 0; i < len; i++) {
		if (t[i] == '/') {
			slash = i;
			slashes++;
		} else if (!is_tchar(t[i]))
			return false;
	}
	return slashes == 1 && slash > 0 && slash < len - 1;
}

static bool
valid_ext(const char *e, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!is_tchar(e[i]))
			return false;
	return true;
}

static struct mime_slot *
find_slot(struct mime_slot *slots, size_t mask, const char *ext,
    size_t len)
{
	size_t i = (size_t)hash_ext(ext, len) & mask;

	while (slots[i].ext != NULL && (slots[i].extlen != len ||
	    !ascii_caseeq(slots[i].ext, ext, len)))
		i = (i + 1) & mask;
	return &slots[i];
}

/* Doubles the table, keeping it at most half full. */
static bool
grow(struct mime_table *mt)
{
	struct mime_slot *slots, *s;
	size_t n = (mt->mask + 1) * 2, i;

	if ((slots = calloc(n, sizeof(*slots))) == NULL)
		return false;
	for (i = 0; i <= mt->mask; i++) {
		if (mt->slots[i].ext == NULL)
			continue;
		s = find_slot(slots, n - 1, mt->slots[i].ext,
		    mt->slots[i].extlen);
		*s = mt->slots[i];
	}
	free(mt->slots);
	mt->slots = slots;
	mt->mask = n - 1;
	return true;
}

/* A later line wins over an earlier one, so appended lines override. */
static bool
add_ext(struct mime_table *mt, const char *ext, size_t len,
    const char *type)
{
	struct mime_slot *s;
	size_t i;

	if ((mt->used + 1) * 2 > mt->mask + 1 && !grow(mt))
		return false;
	s = find_slot(mt->slots, mt->mask, ext, len);
	if (s->ext == NULL) {
		if ((s->ext = malloc(len + 1)) == NULL)
			return false;
		for (i = 0; i < len; i++)
			s->ext[i] = lower(ext[i]);
		s->ext[len] = '\0';
		s->extlen = len;
		mt->used++;
	}
	s->type = type;
	if (len > mt->maxext)
		mt->maxext = len;
	return true;
}

static char *
keep_type(struct mime_table *mt, const char *t, size_t len)
{
	char **types, *s;
	size_t extra = wants_charset(t, len) ? sizeof(CHARSET) - 1 : 0;

	types = realloc(mt->types, (mt->ntypes + 1) * sizeof(*types));
	if (types == NULL)
		return NULL;
	mt->types = types;
	if ((s = malloc(len + extra + 1)) == NULL)
		return NULL;
	memcpy(s, t, len);
	memcpy(s + len, CHARSET, extra);
	s[len + extra] = '\0';
	mt->types[mt->ntypes++] = s;
	return s;
}

static const char *
next_field(const char *p, const char *end, const char **field)
{
	while (p < end && is_space(*p))
		p++;
	*field = p;
	while (p < end && !is_space(*p))
		p++;
	return p;
}

/*
 * Extensions with a dot ("tar.gz") are accepted for compatibility with
 * distribution files but skipped: a lookup only sees the last extension.
 */
static bool
parse_line(struct loader *l, const char *line, size_t len)
{
	const char *end, *p, *t, *e;
	const char *type = NULL;
	size_t tlen;

	if ((end = memchr(line, '#', len)) == NULL)
		end = line + len;
	if (memchr(line, '\0', (size_t)(end - line)) != NULL) {
		load_error(l, "NUL byte");
		return false;
	}
	p = next_field(line, end, &t);
	if ((tlen = (size_t)(p - t)) == 0)
		return true;
	if (!valid_type(t, tlen)) {
		load_error(l, "'%.*s' is not a valid type/subtype",
		    (int)(tlen < QUOTE_MAX ? tlen : QUOTE_MAX), t);
		return false;
	}
	for (;;) {
		p = next_field(p, end, &e);
		if (p == e)
			return true;
		if (!valid_ext(e, (size_t)(p - e))) {
			load_error(l, "'%.*s' is not a valid extension",
			    (int)(p - e < QUOTE_MAX ? p - e : QUOTE_MAX), e);
			return false;
		}
		if (memchr(e, '.', (size_t)(p - e)) != NULL)
			continue;
		if ((type == NULL && (type = keep_type(l->mt, t, tlen)) ==
		    NULL) || !add_ext(l->mt, e, (size_t)(p - e), type)) {
			load_error(l, "%s", strerror(ENOMEM));
			return false;
		}
	}
}

static struct mime_table *
table_new(struct loader *l)
{
	if ((l->mt = calloc(1, sizeof(*l->mt))) == NULL ||
	    (l->mt->slots = calloc(MIN_SLOTS, sizeof(*l->mt->slots))) ==
	    NULL) {
		load_error(l, "%s", strerror(ENOMEM));
		mime_free(l->mt);
		return l->mt = NULL;
	}
	l->mt->mask = MIN_SLOTS - 1;
	return l->mt;
}

/* The table corral ships, for a config without mime_types. */
static struct mime_table *
mime_builtin(char *err, size_t errlen)
{
	struct loader l = { NULL, "built-in MIME types", 0, err, errlen };
	size_t i;

	if (table_new(&l) == NULL)
		return NULL;
	for (i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
		l.lineno = i + 1;
		if (!parse_line(&l, builtin[i], strlen(builtin[i]))) {
			mime_free(l.mt);
			return NULL;
		}
	}
	return l.mt;
}

struct mime_table *
mime_load(const char *path, char *err, size_t errlen)
{
	struct loader l = { NULL, path, 0, err, errlen };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool ok = true;
	FILE *f;

	if (path == NULL)
		return mime_builtin(err, errlen);
	if ((f = fopen(path, "r")) == NULL) {
		load_error(&l, "%s", strerror(errno));
		return NULL;
	}
	if (table_new(&l) == NULL)
		ok = false;

	while (ok && (n = getline(&line, &cap, f)) != -1) {
		l.lineno++;
		ok = parse_line(&l, line, (size_t)n);
	}
	if (ok && ferror(f)) {
		load_error(&l, "%s", strerror(errno));
		ok = false;
	}
	free(line);
	fclose(f);
	if (!ok) {
		mime_free(l.mt);
		return NULL;
	}
	return l.mt;
}

/*
 * The extension is what follows the last dot of the last path segment; the
 * leading dots of a name like ".htaccess" do not start one.
 */
const char *
mime_lookup(const struct mime_table *mt, const char *path, size_t len)
{
	const char *end = path + len, *p, *dot = NULL, *name;
	const struct mime_slot *s;

	if (mt == NULL)
		return NULL;
	for (p = end; p > path && p[-1] != '/'; p--)
		if (p[-1] == '.' && dot == NULL)
			dot = p - 1;
	for (name = p; name < end && *name == '.'; name++)
		;
	if (dot == NULL || dot < name || end - (dot + 1) == 0 ||
	    (size_t)(end - (dot + 1)) > mt->maxext)
		return NULL;
	s = find_slot(mt->slots, mt->mask, dot + 1, (size_t)(end - (dot + 1)));
	return s->type;
}

void
mime_free(struct mime_table *mt)
{
	size_t i;

	if (mt == NULL)
		return;
	if (mt->slots != NULL)
		for (i = 0; i <= mt->mask; i++)
			free(mt->slots[i].ext);
	for (i = 0; i < mt->ntypes; i++)
		free(mt->types[i]);
	free(mt->types);
	free(mt->slots);
	free(mt);
}

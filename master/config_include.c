/*
 * include("conf.d/NAME.conf"): the files a glob names, relative to the file
 * that includes them, in sorted order, are put in the place of the call
 * before libconfuse sees the text, with their comments blanked out.  A map
 * from each line of the result to its file and line lets every error name
 * the file where the mistake is, included or not.
 */
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"
#include "master/log.h"
#include "master/readfile.h"

struct out {
	char *buf;
	size_t len, size;
	bool bol;			/* at the start of a line */
};

/*
 * libconfuse 3.3 counts two lines too many for each '#' or '//' comment
 * and one for each block comment, rejects comments inside lists, and takes
 * the end of the file as the end of an open section.  So the text is handed
 * over with its comments blanked out (newlines stay, and with them true
 * line numbers) after its braces are checked.  As in libconfuse's lexer, a
 * comment starts only where a token may start.  Returns the line of a
 * problem and sets why, or returns 0.
 */
static int
prepare_text(char *s, size_t len, const char **why)
{
	char *end = s + len, *p = s, quote;
	int line = 1, start, brace = 0, depth = 0;

	while (p < end) {
		if (*p == '"' || *p == '\'') {
			for (quote = *p++; p < end && *p != quote; p++) {
				if (*p == '\\' && p + 1 < end)
					p++;
				line += *p == '\n';
			}
			if (p < end)
				p++;
		} else if (*p == '#' || (*p == '/' && p + 1 < end &&
		    p[1] == '/')) {
			while (p < end && *p != '\n')
				*p++ = ' ';
		} else if (*p == '/' && p + 1 < end && p[1] == '*') {
			start = line;
			p[0] = p[1] = ' ';
			for (p += 2; p + 1 < end; p++) {
				if (p[0] == '*' && p[1] == '/')
					break;
				if (*p == '\n')
					line++;
				else
					*p = ' ';
			}
			if (p + 1 >= end) {
				*why = "unterminated /* comment";
				return start;
			}
			p[0] = p[1] = ' ';
			p += 2;
		} else if (strchr(" \t\r\n={}()+,*", *p) != NULL) {
			if (*p == '{' && depth++ == 0)
				brace = line;
			else if (*p == '}' && depth > 0)
				depth--;
			line += *p++ == '\n';
		} else {
			while (p < end &&
			    strchr(" \t\r\n#\"'={}()+,*", *p) == NULL)
				p++;
		}
	}
	if (depth > 0) {
		*why = "this '{' is never closed";
		return brace;
	}
	return 0;
}

/* An error in a file being read, with its own name and line. */
static void __attribute__((format(printf, 3, 4)))
fail_in(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (loading->failed)
		return;
	loading->failed = true;
	if (loading->errlen == 0)
		return;
	n = line > 0 ? snprintf(loading->err, loading->errlen, "%s:%d: ", file, line) :
	    snprintf(loading->err, loading->errlen, "%s: ", file);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < loading->errlen)
		vsnprintf(loading->err + n, loading->errlen - n, fmt, ap);
	va_end(ap);
}

static bool
out_put(struct out *o, char ch, int file, int line)
{
	struct config_src *m;
	char *nb;

	if (o->bol) {
		if (loading->nmap % 256 == 0) {
			m = realloc(loading->map, (loading->nmap + 256) * sizeof(*m));
			if (m == NULL)
				return false;
			loading->map = m;
		}
		loading->map[loading->nmap].file = file;
		loading->map[loading->nmap++].line = line;
		o->bol = false;
	}
	if (o->len == o->size) {
		o->size = o->size ? o->size * 2 : 8192;
		if ((nb = realloc(o->buf, o->size)) == NULL)
			return false;
		o->buf = nb;
	}
	o->buf[o->len++] = ch;
	if (ch == '\n')
		o->bol = true;
	return true;
}

static int add_file(const char *path);
static bool expand_file(struct out *o, int file, int depth);

/* The folder of a file, for globs relative to it. */
static void
dir_of(int file, char *dir, size_t len)
{
	const char *path = loading->files[file], *slash = strrchr(path, '/');

	if (file == 0 || slash == NULL)
		snprintf(dir, len, "%s", loading->dir);
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* A folder of the pattern that does not exist just matches nothing. */
static int
glob_err(const char *path, int err)
{
	return err == ENOENT || err == ENOTDIR ? 0 : 1;
}

/* Expands one include("pattern") of file at line. */
static bool
expand_include(struct out *o, int file, int line, const char *pattern,
    int depth)
{
	char dir[PATH_MAX], full[PATH_MAX];
	glob_t g;
	size_t i;
	int rc, f;

	if (depth >= INCLUDE_DEPTH) {
		fail_in(loading->files[file], line, "include \"%s\": includes nested "
		    "more than %d deep (does a file include itself?)", pattern,
		    INCLUDE_DEPTH);
		return false;
	}
	dir_of(file, dir, sizeof(dir));
	if (pattern[0] == '\0' ||
	    join_path(full, sizeof(full), dir, pattern) == -1) {
		fail_in(loading->files[file], line, "include \"%s\": bad path",
		    pattern);
		return false;
	}
	rc = glob(full, 0, glob_err, &g);
	if (rc == GLOB_NOMATCH) {
		if (strpbrk(pattern, "*?[") == NULL) {
			fail_in(loading->files[file], line, "include \"%s\": %s",
			    full, strerror(ENOENT));
			return false;
		}
		log_warn("%s:%d: include \"%s\" matches no file",
		    loading->files[file], line, full);
		return true;
	}
	if (rc != 0) {
		fail_in(loading->files[file], line, "include \"%s\": cannot read "
		    "the folder", full);
		return false;
	}
	/* glob() sorts the names; each file's text begins on a line of its
	 * own. */
	for (i = 0; i < g.gl_pathc; i++) {
		if ((f = add_file(g.gl_pathv[i])) < 0 ||
		    (!o->bol && !out_put(o, '\n', file, line)) ||
		    !expand_file(o, f, depth + 1) ||
		    (!o->bol && !out_put(o, '\n', f, 0))) {
			globfree(&g);
			if (!loading->failed)
				fail_in(loading->files[file], line, "out of memory");
			return false;
		}
	}
	globfree(&g);
	return true;
}

static int
add_file(const char *path)
{
	char **v;

	if (loading->nfiles % 16 == 0) {
		v = realloc(loading->files, (loading->nfiles + 16) * sizeof(*v));
		if (v == NULL)
			return -1;
		loading->files = v;
	}
	if ((loading->files[loading->nfiles] = strdup(path)) == NULL)
		return -1;
	return (int)loading->nfiles++;
}

/* At p: "include" "(" quoted ")" ?  Sets the pattern and the end. */
static bool
is_include(const char *p, const char *end, char *pat, size_t patlen,
    const char **after)
{
	const char *q;
	size_t n = 0;
	char quote;

	if ((size_t)(end - p) < 8 || strncmp(p, "include", 7) != 0)
		return false;
	for (q = p + 7; q < end && strchr(" \t", *q); q++)
		;
	if (q == end || *q++ != '(')
		return false;
	while (q < end && strchr(" \t", *q))
		q++;
	if (q == end || (*q != '"' && *q != '\''))
		return false;
	for (quote = *q++; q < end && *q != quote && *q != '\n'; q++) {
		if (*q == '\\' && q + 1 < end)
			q++;
		if (n + 1 < patlen)
			pat[n++] = *q;
	}
	pat[n] = '\0';
	if (q == end || *q++ != quote)
		return false;
	while (q < end && strchr(" \t", *q))
		q++;
	if (q == end || *q != ')')
		return false;
	*after = q + 1;
	return true;
}

static bool
expand_file(struct out *o, int file, int depth)
{
	const char *why, *p, *end, *after;
	char *text, pat[PATH_MAX];
	size_t len;
	int line = 1, bad;
	char quote;

	if ((text = readfile(loading->files[file], &len)) == NULL) {
		fail_in(loading->files[file], 0, "%s", strerror(errno));
		return false;
	}
	if ((bad = prepare_text(text, len, &why)) > 0) {
		fail_in(loading->files[file], bad, "%s", why);
		free(text);
		return false;
	}
	for (p = text, end = text + len; p < end; ) {
		if (*p == '"' || *p == '\'') {
			/* Strings are copied whole: no include inside. */
			quote = *p;
			if (!out_put(o, *p++, file, line))
				goto oom;
			while (p < end && *p != quote) {
				if (*p == '\\' && p + 1 < end &&
				    !out_put(o, *p++, file, line))
					goto oom;
				line += *p == '\n';
				if (!out_put(o, *p++, file, line))
					goto oom;
			}
			if (p < end && !out_put(o, *p++, file, line))
				goto oom;
			continue;
		}
		if ((p == text || strchr(" \t\r\n{}", p[-1])) &&
		    is_include(p, end, pat, sizeof(pat), &after)) {
			if (!expand_include(o, file, line, pat, depth)) {
				free(text);
				return false;
			}
			p = after;
			continue;
		}
		if (!out_put(o, *p, file, line))
			goto oom;
		line += *p++ == '\n';
	}
	free(text);
	return true;
oom:
	free(text);
	fail_in(loading->files[file], 0, "out of memory");
	return false;
}

char *
include_expand(const char *path, size_t *lenp)
{
	struct out o = { .bol = true };

	if (add_file(path) != 0) {
		cf_fail(0, "out of memory");
		return NULL;
	}
	if (!expand_file(&o, 0, 0)) {
		free(o.buf);
		return NULL;
	}
	if (o.buf == NULL && (o.buf = malloc(1)) == NULL) {
		cf_fail(0, "out of memory");
		return NULL;
	}
	*lenp = o.len;
	return o.buf;
}

void
include_free(void)
{
	size_t i;

	for (i = 0; i < loading->nfiles; i++)
		free(loading->files[i]);
	free(loading->files);
	free(loading->map);
	loading->files = NULL;
	loading->map = NULL;
	loading->nfiles = loading->nmap = 0;
}

/* Values all sections use: sizes, times, counts, paths, names, media types. */
#include <sys/stat.h>

#include <confuse.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config_impl.h"
#include "master/log.h"

#define NAME_MAX_LEN	253		/* a DNS name, without the dot */
#define LABEL_MAX_LEN	63
#define HOST_CHARS	"abcdefghijklmnopqrstuvwxyz" \
			"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"

struct suffix {
	const char *name;
	uint64_t mult;
};

/* For printing, the last spelling of each multiplier wins. */
static const struct suffix size_suffixes[] = {
	{ "", 1 },
	{ "K", KB }, { "k", KB },
	{ "M", MB }, { "m", MB },
	{ "G", GB }, { "g", GB },
	{ NULL, 0 }
};

static const struct suffix time_suffixes[] = {
	{ "ms", 1 },
	{ "", SEC }, { "s", SEC },
	{ "m", MIN },
	{ "h", HOUR },
	{ "d", DAY },
	{ NULL, 0 }
};

static const struct suffix count_suffixes[] = {
	{ "", 1 },
	{ NULL, 0 }
};

/* Digits and one suffix from tab; anything else is an error. */
static int
parse_scaled(const char *s, const struct suffix *tab, uint64_t *out)
{
	uint64_t n = 0;
	const char *p;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	for (p = s; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - (*p - '0')) / 10)
			return -1;
		n = n * 10 + (*p - '0');
	}
	for (; tab->name != NULL; tab++) {
		if (strcmp(p, tab->name) != 0)
			continue;
		if (n > UINT64_MAX / tab->mult)
			return -1;
		*out = n * tab->mult;
		return 0;
	}
	return -1;
}

int
parse_scaled_size(const char *s, uint64_t *out)
{
	return parse_scaled(s, size_suffixes, out);
}

int
parse_scaled_time(const char *s, uint64_t *out)
{
	return parse_scaled(s, time_suffixes, out);
}

int
parse_scaled_count(const char *s, uint64_t *out)
{
	return parse_scaled(s, count_suffixes, out);
}

int
config_parse_size(const char *s, uint64_t *out)
{
	return parse_scaled(s, size_suffixes, out);
}

int
config_parse_time_ms(const char *s, int64_t *out)
{
	uint64_t v;

	if (parse_scaled(s, time_suffixes, &v) == -1 || v > INT64_MAX)
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* Prints v in the largest unit that divides it: 1048576 bytes as "1m". */
const char *
format_value(char *buf, size_t len, enum unit unit, long v)
{
	const struct suffix *tab, *end;

	tab = unit == U_SIZE ? size_suffixes :
	    unit == U_TIME ? time_suffixes : count_suffixes;
	for (end = tab; end->name != NULL; end++)
		;
	while (v != 0 && --end >= tab) {
		if ((uint64_t)v % end->mult == 0) {
			snprintf(buf, len, "%llu%s",
			    (unsigned long long)((uint64_t)v / end->mult),
			    end->name);
			return buf;
		}
	}
	snprintf(buf, len, "%ld", v);
	return buf;
}

int
online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		return 1;
	return n > WORKERS_MAX ? WORKERS_MAX : (int)n;
}

static int
parse_long(cfg_t *cfg, cfg_opt_t *opt, const char *value, long *result,
    const struct suffix *tab, const char *what)
{
	uint64_t v;

	if (parse_scaled(value, tab, &v) == -1 || v > LONG_MAX) {
		cfg_error(cfg, "invalid %s \"%s\" for %s", what, value,
		    opt->name);
		return -1;
	}
	*result = (long)v;
	return 0;
}

int
cb_count(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	return parse_long(cfg, opt, value, result, count_suffixes,
	    "number (digits only)");
}

int
cb_workers(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	if (strcmp(value, "auto") == 0) {
		*(long *)result = online_cpus();
		return 0;
	}
	return parse_long(cfg, opt, value, result, count_suffixes,
	    "number (\"auto\" or digits)");
}

int
cb_size(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	return parse_long(cfg, opt, value, result, size_suffixes,
	    "size (a number with an optional k, m or g)");
}

int
cb_time(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	return parse_long(cfg, opt, value, result, time_suffixes,
	    "time (a number with an optional ms, s, m, h or d)");
}

int
cb_log_level(cfg_t *cfg, cfg_opt_t *opt, const char *value, void *result)
{
	int level = log_level_parse(value);

	if (level < 0) {
		cfg_error(cfg, "unknown log_level \"%s\" (crit, error, warn, "
		    "notice, info or debug)", value);
		return -1;
	}
	*(long *)result = level;
	return 0;
}

int
join_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n;

	if (name[0] == '/')
		n = snprintf(buf, len, "%s", name);
	else if (strcmp(dir, "/") == 0)
		n = snprintf(buf, len, "/%s", name);
	else
		n = snprintf(buf, len, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int
validate_nonempty(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *s = cfg_opt_getnstr(opt, 0);

	note_line(cfg, opt);
	if (s != NULL && s[0] != '\0')
		return 0;
	cfg_error(cfg, "%s must not be empty", opt->name);
	return -1;
}

/* A directory that exists, given as an absolute path. */
int
validate_dir(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *s = cfg_opt_getnstr(opt, 0);
	struct stat st;

	note_line(cfg, opt);
	if (s == NULL || s[0] != '/') {
		cfg_error(cfg, "%s must be an absolute path", opt->name);
		return -1;
	}
	if (stat(s, &st) == -1) {
		cfg_error(cfg, "%s \"%s\": %s", opt->name, s,
		    strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		cfg_error(cfg, "%s \"%s\" is not a directory", opt->name, s);
		return -1;
	}
	return 0;
}

/*
 * A media type as Content-Type carries it (RFC 9110 8.3.1): type/subtype
 * and any parameters, "text/html; charset=utf-8".
 */
static bool
media_type_ok(const char *s)
{
	size_t n = strspn(s, TOKEN_CHARS);

	if (n == 0 || s[n] != '/' || (n = strspn(s += n + 1, TOKEN_CHARS)) == 0)
		return false;
	for (s += n; *s != '\0'; ) {
		s += strspn(s, " \t");
		if (*s++ != ';')
			return false;
		s += strspn(s, " \t");
		if ((n = strspn(s, TOKEN_CHARS)) == 0 || s[n] != '=')
			return false;
		s += n + 1;
		if (*s == '"') {
			/* qdtext or quoted-pair; never a line end */
			for (s++; *s != '"'; s++)
				if ((*s == '\\' && *++s == '\0') ||
				    ((unsigned char)*s < 0x20 && *s != '\t') ||
				    *s == 0x7f)
					return false;
			s++;
		} else if ((n = strspn(s, TOKEN_CHARS)) == 0)
			return false;
		else
			s += n;
		s += strspn(s, " \t");
	}
	return true;
}

int
validate_mime_type(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *s = cfg_opt_getnstr(opt, 0);

	if (media_type_ok(s))
		return 0;
	cfg_error(cfg, "%s \"%s\" is not a media type like "
	    "\"application/octet-stream\" or \"text/html; charset=utf-8\"",
	    opt->name, s);
	return -1;
}

int
validate_mime_types(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *s;
	size_t i, n;

	for (i = 0; i < cfg_opt_size(opt); i++) {
		s = cfg_opt_getnstr(opt, (unsigned)i);
		n = strspn(s, TOKEN_CHARS);
		if (n == 0 || s[n] != '/' || s[n + 1] == '\0' ||
		    strspn(s + n + 1, TOKEN_CHARS) != strlen(s + n + 1)) {
			cfg_error(cfg, "%s \"%s\" is not a media type like "
			    "\"text/html\"", opt->name, s);
			return -1;
		}
	}
	return 0;
}

char *
cf_copy(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		loading->oom = true;
	return d;
}

/* An absolute path, or NULL when s is the word that means "none". */
char *
copy_path(const char *s, const char *none)
{
	if (none != NULL && strcmp(s, none) == 0)
		return NULL;
	if (join_path(loading->tmp, sizeof(loading->tmp), loading->dir, s) == -1) {
		cf_fail(0, "path too long: %s", s);
		return NULL;
	}
	return cf_copy(loading->tmp);
}

char **
copy_list(cfg_t *sec, const char *name, size_t *np)
{
	size_t i, n = cfg_size(sec, name);
	char **v;

	*np = 0;
	if (n == 0)
		return NULL;
	if ((v = calloc(n, sizeof(*v))) == NULL) {
		loading->oom = true;
		return NULL;
	}
	for (*np = n, i = 0; i < n; i++)
		v[i] = cf_copy(cfg_getnstr(sec, name, i));
	return v;
}

bool
valid_host_name(const char *s)
{
	size_t n;

	if (strcmp(s, "_") == 0)
		return true;
	if (s[0] == '*' && s[1] == '.')
		s += 2;
	if (strlen(s) > NAME_MAX_LEN)
		return false;
	for (;;) {
		n = strspn(s, HOST_CHARS);
		if (n == 0 || n > LABEL_MAX_LEN)
			return false;
		s += n;
		if (*s == '\0')
			return true;
		if (*s++ != '.')
			return false;
	}
}

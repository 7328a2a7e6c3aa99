/*
 * What a server and its locations may set, as an nginx administrator
 * expects it: locations matched exactly, by prefix or by regular
 * expression; rewrite and return; try_files; error_page; headers (allow
 * and deny, auth_basic and limits are config_access.c's).  Each value is
 * checked where libconfuse reads it, so a mistake is reported with its
 * file and line; regular expressions and variables are compiled once
 * here, never per request.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"
#include "master/log.h"
#include "worker/vars.h"

#define EXPIRES_MAX	(10LL * 365 * 86400)

/* Regular expressions ------------------------------------------------- */

/* Compiles and JIT-compiles re; NULL with the reason and offset in err. */
static pcre2_code *
regex_compile(const char *re, bool caseless, char *err, size_t errlen)
{
	PCRE2_UCHAR msg[256];
	PCRE2_SIZE off;
	pcre2_code *code;
	int rc;

	code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
	    caseless ? PCRE2_CASELESS : 0, &rc, &off, NULL);
	if (code == NULL) {
		pcre2_get_error_message(rc, msg, sizeof(msg));
		snprintf(err, errlen, "bad regular expression \"%s\" at "
		    "offset %zu: %s", re, (size_t)off, (char *)msg);
		return NULL;
	}
	/* Without JIT (some architectures) the interpreter still works. */
	(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
	return code;
}

/* For the other parts of the config (fastcgi_split_path_info). */
void *
config_regex(const char *re, int *captures, char *err, size_t errlen)
{
	pcre2_code *code = regex_compile(re, false, err, errlen);
	uint32_t n = 0;

	if (code != NULL)
		pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &n);
	*captures = (int)n;
	return code;
}

void
config_regex_free(void *re)
{
	pcre2_code_free(re);
}

static int
regex_captures(const pcre2_code *code)
{
	uint32_t n = 0;

	pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &n);
	return n > 9 ? 9 : (int)n;
}

/* Splits a location title into how it matches and what. */
static int
parse_title(const char *title, const char **what, bool *caseless)
{
	*caseless = false;
	if (strncmp(title, "= ", 2) == 0)
		*what = title + 2;
	else if (strncmp(title, "^~ ", 3) == 0)
		*what = title + 3;
	else if (strncmp(title, "~* ", 3) == 0)
		*what = title + 3, *caseless = true;
	else if (strncmp(title, "~ ", 2) == 0)
		*what = title + 2;
	else
		*what = title;
	while (**what == ' ')
		(*what)++;
	switch (title[0]) {
	case '@':
		return LOC_NAMED;
	case '=':
		return LOC_EXACT;
	case '^':
		return LOC_PREFIX_STOP;
	case '~':
		return LOC_REGEX;
	default:
		return LOC_PREFIX;
	}
}

/* Captures a string set in sec may use: those of its location's regex. */
static int
scope_captures(cfg_t *sec)
{
	const char *what;
	pcre2_code *code;
	char err[512];
	bool ci;
	int n;

	if (sec == NULL || strcmp(sec->name, "location") != 0 ||
	    parse_title(cfg_title(sec), &what, &ci) != LOC_REGEX)
		return 0;
	if ((code = regex_compile(what, ci, err, sizeof(err))) == NULL)
		return 0;
	n = regex_captures(code);
	pcre2_code_free(code);
	return n;
}

static int
validate_location(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *sec = cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1);
	const char *title = cfg_title(sec), *what;
	pcre2_code *code;
	char err[512];
	bool ci;
	int m = parse_title(title, &what, &ci);

	if (m == LOC_REGEX) {
		if ((code = regex_compile(what, ci, err, sizeof(err))) ==
		    NULL) {
			cfg_error(cfg, "location \"%s\": %s", title, err);
			return -1;
		}
		pcre2_code_free(code);
	} else if (m == LOC_NAMED ? what[1] == '\0' || strchr(what, ' ') :
	    what[0] != '/') {
		cfg_error(cfg, "location \"%s\" must start with '/' (or '= /',"
		    " '^~ /', '~ ' or '~* ' and a regular expression, or be a "
		    "name such as '@app')", title);
		return -1;
	}
	if (cfg_getbool(sec, "status") && cfg_getstr(sec, "proxy") != NULL) {
		cfg_error(cfg, "location \"%s\" ending here has both proxy "
		    "and status; it can be one of them", title);
		return -1;
	}
	if (cfg_size(sec, "root") > 0 && cfg_size(sec, "alias") > 0) {
		cfg_error(cfg, "location \"%s\" has both root and alias",
		    title);
		return -1;
	}
	if (cfg_size(sec, "alias") > 0 && m != LOC_REGEX &&
	    strchr(cfg_getstr(sec, "alias"), '$') != NULL) {
		cfg_error(cfg, "location \"%s\": only a regex location's alias "
		    "may use captures", title);
		return -1;
	}
	opt_line_note(sec, "location", cfg->line);
	return 0;
}

/* Templates ----------------------------------------------------------- */

static struct vars_tmpl *
compile(cfg_t *cfg, const char *what, const char *s, int captures)
{
	struct vars_tmpl *t;
	char err[512];

	if ((t = vars_compile(s, captures, err, sizeof(err))) == NULL)
		cfg_error(cfg, "%s \"%s\": %s", what, s, err);
	return t;
}

/* Checks that s compiles; used where the value is built later. */
int
cf_check_tmpl(cfg_t *cfg, const char *what, const char *s, int captures)
{
	struct vars_tmpl *t = compile(cfg, what, s, captures);

	vars_free(t);
	return t == NULL ? -1 : 0;
}

/* return ---------------------------------------------------------------- */

static bool
is_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0
	    || s[0] == '$';
}

static bool
is_redirect(int status)
{
	return status == 301 || status == 302 || status == 303 ||
	    status == 307 || status == 308;
}

/* "301 https://$host$request_uri", "403", "200 text", or a bare URL. */
static int
parse_return(const char *v, int *status, const char **text)
{
	char *end;
	long n;

	if (is_url(v)) {
		*status = 302;
		*text = v;
		return 0;
	}
	n = strtol(v, &end, 10);
	if (end == v || n < 200 || n > 599 || (*end != ' ' && *end != '\0'))
		return -1;
	while (*end == ' ')
		end++;
	*status = (int)n;
	*text = *end != '\0' ? end : NULL;
	return is_redirect(*status) && *text == NULL ? -1 : 0;
}

static int
validate_return(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *v = cfg_opt_getnstr(opt, 0), *text;
	int status;

	if (parse_return(v, &status, &text) == -1) {
		cfg_error(cfg, "invalid return \"%s\" (a status from 200 to 599"
		    " and an optional text, a redirect status and a URL, or "
		    "a URL)", v);
		return -1;
	}
	return text ? cf_check_tmpl(cfg, "return", text, scope_captures(cfg)) :
	    0;
}

/* rewrite --------------------------------------------------------------- */

static const char *const rewrite_flags[] = {
	[REWRITE_NEXT] = "", [REWRITE_LAST] = "last",
	[REWRITE_BREAK] = "break", [REWRITE_REDIRECT] = "redirect",
	[REWRITE_PERMANENT] = "permanent",
};

/*
 * "REGEX REPLACEMENT [FLAG]", split at spaces; the regex may be quoted
 * with single quotes when it has spaces.  The pieces are written into
 * buf.
 */
static int
split_rewrite(const char *v, char *buf, size_t len, char **re, char **to,
    int *flag)
{
	char *p, *sp;
	size_t i;

	if (strlen(v) >= len)
		return -1;
	strcpy(buf, v);
	p = buf;
	while (*p == ' ')
		p++;
	*re = p;
	if (*p == '\'') {
		*re = ++p;
		if ((p = strchr(p, '\'')) == NULL)
			return -1;
		*p++ = '\0';
	} else {
		p += strcspn(p, " ");
		if (*p != '\0')
			*p++ = '\0';
	}
	while (*p == ' ')
		p++;
	*to = p;
	p += strcspn(p, " ");
	sp = p;
	while (*p == ' ')
		p++;
	*sp = '\0';
	*flag = REWRITE_NEXT;
	for (i = 1; *p != '\0' && i < nitems(rewrite_flags); i++)
		if (strcmp(p, rewrite_flags[i]) == 0)
			*flag = (int)i;
	if ((*p != '\0' && *flag == REWRITE_NEXT) || **re == '\0' ||
	    **to == '\0')
		return -1;
	return 0;
}

static int
validate_rewrite(cfg_t *cfg, cfg_opt_t *opt)
{
	char buf[2048], err[512], *re, *to;
	pcre2_code *code;
	unsigned int i;
	int flag, rc;

	for (i = 0; i < cfg_opt_size(opt); i++) {
		const char *v = cfg_opt_getnstr(opt, i);

		if (split_rewrite(v, buf, sizeof(buf), &re, &to, &flag) ==
		    -1) {
			cfg_error(cfg, "invalid rewrite \"%s\" (a regular "
			    "expression, a replacement, and last, break, "
			    "redirect or permanent)", v);
			return -1;
		}
		if ((code = regex_compile(re, false, err, sizeof(err))) ==
		    NULL) {
			cfg_error(cfg, "rewrite: %s", err);
			return -1;
		}
		rc = cf_check_tmpl(cfg, "rewrite", to, regex_captures(code));
		pcre2_code_free(code);
		if (rc == -1)
			return -1;
	}
	return 0;
}

/* try_files -------------------------------------------------------------- */

/* Runs for each value as it is read; the count is checked after. */
static int
validate_try_files(cfg_t *cfg, cfg_opt_t *opt)
{
	unsigned int i, n = cfg_opt_size(opt);
	const char *v;
	char *end;
	long code;

	opt_line_note(cfg, opt->name, cfg->line);
	for (i = 0; i < n; i++) {
		v = cfg_opt_getnstr(opt, i);
		if (v[0] == '=') {
			code = strtol(v + 1, &end, 10);
			if (end == v + 1 || *end != '\0' || code < 200 ||
			    code > 599) {
				cfg_error(cfg, "try_files: invalid \"%s\" (=404 "
				    "or another status)", v);
				return -1;
			}
			continue;
		}
		if (v[0] == '@' && i + 1 == n && v[1] != '\0')
			continue;
		if (v[0] != '/' && v[0] != '$') {
			cfg_error(cfg, "try_files: \"%s\" must start with '/' "
			    "or a variable (or be a named location, last)", v);
			return -1;
		}
		if (cf_check_tmpl(cfg, "try_files", v, scope_captures(cfg)) == -1)
			return -1;
	}
	return 0;
}

/* error_page -------------------------------------------------------------- */

/* "404 /404.html", "500 502 503 504 /50x.html", "404 =200 /empty". */
static int
parse_error_page(const char *v, int *codes, size_t max, size_t *ncodes,
    int *answer, const char **uri)
{
	const char *p = v;
	char *end;
	long n;

	*ncodes = 0;
	*answer = 0;
	for (;;) {
		while (*p == ' ')
			p++;
		if (*p == '=' && p[1] == ' ') {
			*answer = -1;		/* the status of the target */
			p++;
			continue;
		}
		if (*p == '=') {
			n = strtol(p + 1, &end, 10);
			if (end == p + 1 || *end != ' ' || n < 200 || n > 599)
				return -1;
			*answer = (int)n;
			p = end;
			continue;
		}
		if (*p < '0' || *p > '9')
			break;
		n = strtol(p, &end, 10);
		if (n < 300 || n > 599 || *end != ' ' || *ncodes == max ||
		    *answer != 0)
			return -1;
		codes[(*ncodes)++] = (int)n;
		p = end;
	}
	*uri = p;
	if (*ncodes == 0 || (p[0] != '/' && p[0] != '@' && !is_url(p)) ||
	    strchr(p, ' ') != NULL || (*answer == -1 && p[0] != '@'))
		return -1;
	return 0;
}

static int
validate_error_page(cfg_t *cfg, cfg_opt_t *opt)
{
	int codes[32], answer;
	const char *uri;
	size_t n;
	unsigned int i;

	opt_line_note(cfg, opt->name, cfg->line);
	for (i = 0; i < cfg_opt_size(opt); i++)
		if (parse_error_page(cfg_opt_getnstr(opt, i), codes,
		    nitems(codes), &n, &answer, &uri) == -1) {
			cfg_error(cfg, "invalid error_page \"%s\" (statuses "
			    "from 300 to 599, an optional =STATUS, and a URI "
			    "starting with '/', a URL, or a named location "
			    "such as \"= @app\")",
			    cfg_opt_getnstr(opt, i));
			return -1;
		}
	return 0;
}

/* Headers ---------------------------------------------------------------- */

/* "Name: value [always]" */
static int
parse_header(const char *v, char *line, size_t len, bool *always)
{
	size_t n = strspn(v, TOKEN_CHARS), vl;
	const char *val;

	if (n == 0 || v[n] != ':')
		return -1;
	val = v + n + 1;
	while (*val == ' ')
		val++;
	vl = strlen(val);
	*always = vl >= 7 && strcmp(val + vl - 7, " always") == 0;
	if (*always)
		vl -= 7;
	while (vl > 0 && val[vl - 1] == ' ')
		vl--;
	for (size_t i = 0; i < vl; i++)
		if ((unsigned char)val[i] < 0x20 || val[i] == 0x7f)
			return -1;
	if (n + 2 + vl + 3 > len)
		return -1;
	snprintf(line, len, "%.*s: %.*s\r\n", (int)n, v, (int)vl, val);
	return 0;
}

static int
validate_add_header(cfg_t *cfg, cfg_opt_t *opt)
{
	char line[2048];
	bool always;

	for (unsigned int i = 0; i < cfg_opt_size(opt); i++)
		if (parse_header(cfg_opt_getnstr(opt, i), line, sizeof(line),
		    &always) == -1) {
			cfg_error(cfg, "invalid add_header \"%s\" (\"Name: "
			    "value\", then optional \" always\")",
			    cfg_opt_getnstr(opt, i));
			return -1;
		}
	return 0;
}

static int
parse_expires(const char *v, int64_t *out)
{
	uint64_t ms;

	if (strcmp(v, "off") == 0) {
		*out = EXPIRES_OFF;
		return 0;
	}
	if (strcmp(v, "max") == 0) {
		*out = EXPIRES_MAX;
		return 0;
	}
	if (parse_scaled_time(v, &ms) == -1 || ms / 1000 > EXPIRES_MAX)
		return -1;
	*out = (int64_t)(ms / 1000);
	return 0;
}

static int
validate_expires(cfg_t *cfg, cfg_opt_t *opt)
{
	int64_t v;

	if (parse_expires(cfg_opt_getnstr(opt, 0), &v) == -1) {
		cfg_error(cfg, "invalid expires \"%s\" (a time like 30d or "
		    "1h, \"max\" or \"off\")", cfg_opt_getnstr(opt, 0));
		return -1;
	}
	return 0;
}

static int
validate_charset(cfg_t *cfg, cfg_opt_t *opt)
{
	const char *v = cfg_opt_getnstr(opt, 0);

	if (v[0] == '\0' || strspn(v, TOKEN_CHARS) != strlen(v)) {
		cfg_error(cfg, "invalid charset \"%s\" (like utf-8, or off)",
		    v);
		return -1;
	}
	return 0;
}

static const struct {
	const char *name;
	cfg_validate_callback_t fn;
} validators[] = {
	{ "return",		validate_return },
	{ "rewrite",		validate_rewrite },
	{ "try_files",		validate_try_files },
	{ "error_page",		validate_error_page },
	{ "allow",		validate_acl },
	{ "deny",		validate_acl },
	{ "auth_basic",		validate_auth },
	{ "auth_basic_user_file", validate_user_file },
	{ "max_body_size",	validate_body_size },
	{ "limit_req",		validate_limit_req },
	{ "limit_conn",		validate_limit_conn },
	{ "add_header",		validate_add_header },
	{ "expires",		validate_expires },
	{ "charset",		validate_charset },
};

void
site_set_validators(cfg_t *cfg)
{
	char name[64];
	size_t i;

	for (i = 0; i < nitems(validators); i++) {
		snprintf(name, sizeof(name), "server|%s", validators[i].name);
		cfg_set_validate_func(cfg, name, validators[i].fn);
		snprintf(name, sizeof(name), "server|location|%s",
		    validators[i].name);
		cfg_set_validate_func(cfg, name, validators[i].fn);
	}
	cfg_set_validate_func(cfg, "server|location", validate_location);
	cfg_set_validate_func(cfg, "limit_zone", validate_zone);
}

/* Checks after parsing ---------------------------------------------------- */

/* Whether server srv has a location titled name ("@app"). */
static bool
has_named(cfg_t *srv, const char *name)
{
	for (unsigned int i = 0; i < cfg_size(srv, "location"); i++)
		if (strcmp(cfg_title(cfg_getnsec(srv, "location", i)),
		    name) == 0)
			return true;
	return false;
}

static void
check_scope(cfg_t *cfg, cfg_t *sec, cfg_t *srv)
{
	char zone[128];
	int burst, max, codes[32], answer;
	const char *v;
	size_t nc;
	unsigned int n;
	bool nodelay;

	if (cfg_size(sec, "limit_req") > 0) {
		parse_limit_req(cfg_getstr(sec, "limit_req"), zone,
		    sizeof(zone), &burst, &nodelay);
		if (cf_find_zone(cfg, zone) < 0)
			cf_fail(opt_line(sec, "limit_req"), "limit_req: no "
			    "limit_zone is named \"%s\"", zone);
	}
	if (cfg_size(sec, "limit_conn") > 0) {
		parse_limit_conn(cfg_getstr(sec, "limit_conn"), zone,
		    sizeof(zone), &max);
		if (zone[0] == '\0' && cfg_size(sec, "limit_req") == 0 &&
		    (srv == NULL || cfg_size(srv, "limit_req") == 0))
			cf_fail(opt_line(sec, "limit_conn"), "limit_conn: name "
			    "the limit_zone (\"api %d\"), or set limit_req",
			    max);
		else if (zone[0] != '\0' && cf_find_zone(cfg, zone) < 0)
			cf_fail(opt_line(sec, "limit_conn"), "limit_conn: no "
			    "limit_zone is named \"%s\"", zone);
	}
	if (cfg_size(sec, "try_files") == 1 || (cfg_size(sec, "try_files") > 1 &&
	    strchr(cfg_getnstr(sec, "try_files", 0), '=') ==
	    cfg_getnstr(sec, "try_files", 0)))
		cf_fail(opt_line(sec, "try_files"), "try_files needs what to try, "
		    "then the fallback URI or =CODE last");
	for (unsigned int i = 1; i + 1 < cfg_size(sec, "try_files"); i++)
		if (cfg_getnstr(sec, "try_files", i)[0] == '=')
			cf_fail(opt_line(sec, "try_files"), "try_files: =CODE "
			    "can only be last");
	n = cfg_size(sec, "try_files");
	if (n > 0 && (v = cfg_getnstr(sec, "try_files", n - 1))[0] == '@' &&
	    !has_named(srv != NULL ? srv : sec, v))
		cf_fail(opt_line(sec, "try_files"), "try_files: no location "
		    "is named \"%s\" in this server", v);
	for (unsigned int i = 0; i < cfg_size(sec, "error_page"); i++)
		if (parse_error_page(cfg_getnstr(sec, "error_page", i), codes,
		    nitems(codes), &nc, &answer, &v) == 0 && v[0] == '@' &&
		    !has_named(srv != NULL ? srv : sec, v))
			cf_fail(opt_line(sec, "error_page"), "error_page: no "
			    "location is named \"%s\" in this server", v);
	if (cfg_size(sec, "auth_basic") > 0 &&
	    strcmp(cfg_getstr(sec, "auth_basic"), "off") != 0 &&
	    cfg_size(sec, "auth_basic_user_file") == 0 &&
	    (srv == NULL || cfg_size(srv, "auth_basic_user_file") == 0))
		cf_fail(opt_line(sec, "auth_basic"), "auth_basic needs "
		    "auth_basic_user_file");
}

void
site_check(cfg_t *cfg)
{
	cfg_t *srv;
	unsigned int i, j;
	bool zones = cfg_size(cfg, "limit_zone") > 0;

	for (i = 0; i < cfg_size(cfg, "server") && !loading->failed; i++) {
		srv = cfg_getnsec(cfg, "server", i);
		check_scope(cfg, srv, NULL);
		for (j = 0; j < cfg_size(srv, "location") && !loading->failed; j++)
			check_scope(cfg, cfg_getnsec(srv, "location", j), srv);
	}
	if (!loading->failed && zones &&
	    cfg_getint(cfg_getsec(cfg, "cache"), "size") == 0)
		cf_fail(0, "limit_zone keeps its counts in the shared store: "
		    "cache.size must not be 0");
}

/* Building ------------------------------------------------------------ */

/* The value set in the location, else in the server, else NULL. */
cfg_opt_t *
cf_inherited(cfg_t *ls, cfg_t *srv, const char *name)
{
	if (ls != NULL && cfg_size(ls, name) > 0)
		return cfg_getopt(ls, name);
	if (srv != NULL && cfg_size(srv, name) > 0)
		return cfg_getopt(srv, name);
	return NULL;
}

/* Which scope set name: ls, srv, or NULL. */
cfg_t *
cf_setter(cfg_t *ls, cfg_t *srv, const char *name)
{
	if (ls != NULL && cfg_size(ls, name) > 0)
		return ls;
	if (srv != NULL && cfg_size(srv, name) > 0)
		return srv;
	return NULL;
}

static int
dir_index(struct config *cf, const char *path)
{
	char **v;
	size_t i;

	for (i = 0; i < cf->ndirs; i++)
		if (strcmp(cf->dirs[i], path) == 0)
			return (int)i;
	if ((v = realloc(cf->dirs, (cf->ndirs + 1) * sizeof(*v))) == NULL) {
		loading->oom = true;
		return 0;
	}
	cf->dirs = v;
	if ((v[cf->ndirs] = cf_copy(path)) == NULL)
		return 0;
	return (int)cf->ndirs++;
}

static void
build_files(cfg_t *ls, cfg_t *srv, struct config *cf,
    struct config_location *l, const struct config_server *s)
{
	cfg_opt_t *o;
	const char *alias;
	char err[256];
	int caps = l->re ? regex_captures(l->re) : 0;

	l->dir = l->match == LOC_NONE ? dir_index(cf, s->root) : s->base.dir;
	if (ls != NULL && cfg_size(ls, "root") > 0)
		l->dir = dir_index(cf, cfg_getstr(ls, "root"));
	if (ls != NULL && cfg_size(ls, "alias") > 0) {
		alias = cfg_getstr(ls, "alias");
		l->alias = true;
		if (strchr(alias, '$') != NULL) {
			/* The fixed folder, and the rest to expand. */
			const char *slash = strchr(alias + 1, '$');

			while (slash > alias && *slash != '/')
				slash--;
			snprintf(loading->tmp, sizeof(loading->tmp), "%.*s",
			    (int)(slash - alias), alias);
			l->dir = dir_index(cf, loading->tmp[0] ? loading->tmp : "/");
			l->alias_tmpl = vars_compile(slash, caps, err,
			    sizeof(err));
			if (l->alias_tmpl == NULL)
				cf_fail(l->line, "alias \"%s\": %s", alias, err);
		} else
			l->dir = dir_index(cf, alias);
	}
	if (l->match == LOC_NONE)
		l->index = s->index, l->nindex = s->nindex;
	else if (ls != NULL && cfg_size(ls, "index") > 0) {
		l->nindex = cfg_size(ls, "index");
		if ((l->index = calloc(l->nindex, sizeof(char *))) == NULL)
			loading->oom = true;
		for (size_t i = 0; l->index && i < l->nindex; i++)
			l->index[i] = cf_copy(cfg_getnstr(ls, "index", i));
	} else
		l->index = s->index, l->nindex = s->nindex;
	if ((o = cf_inherited(ls, srv, "try_files")) != NULL) {
		l->ntry_files = cfg_opt_size(o);
		l->try_files = calloc(l->ntry_files, sizeof(*l->try_files));
		if (l->try_files == NULL)
			loading->oom = true;
		for (size_t i = 0; l->try_files && i < l->ntry_files; i++)
			l->try_files[i] = vars_compile(cfg_opt_getnstr(o,
			    (unsigned)i), caps, err, sizeof(err));
	}
	l->dotfiles = (o = cf_inherited(ls, srv, "dotfiles")) ?
	    cfg_opt_getnbool(o, 0) : false;
	l->gzip_static = (o = cf_inherited(ls, srv, "gzip_static")) ?
	    cfg_opt_getnbool(o, 0) : false;
	if ((o = cf_inherited(ls, srv, "charset")) != NULL &&
	    strcmp(cfg_opt_getnstr(o, 0), "off") != 0)
		l->charset = cf_copy(cfg_opt_getnstr(o, 0));
	if ((o = cf_inherited(ls, srv, "default_type")) != NULL)
		l->default_type = cf_copy(cfg_opt_getnstr(o, 0));
}

static void
build_rewrites(cfg_t *ls, cfg_t *srv, struct config_location *l)
{
	char buf[2048], err[512], *re, *to;
	const char *text;
	cfg_opt_t *o;
	pcre2_code *code;
	int flag;

	/* The server's rewrites run before a location is chosen; a
	 * location has only its own. */
	if ((o = cf_inherited(ls, ls ? NULL : srv, "rewrite")) != NULL) {
		l->nrewrites = cfg_opt_size(o);
		l->rewrites = calloc(l->nrewrites, sizeof(*l->rewrites));
		if (l->rewrites == NULL) {
			loading->oom = true;
			l->nrewrites = 0;
		}
		for (size_t i = 0; i < l->nrewrites; i++) {
			split_rewrite(cfg_opt_getnstr(o, (unsigned)i), buf,
			    sizeof(buf), &re, &to, &flag);
			code = regex_compile(re, false, err, sizeof(err));
			l->rewrites[i].re = code;
			l->rewrites[i].flag = flag;
			if (code != NULL)
				l->rewrites[i].to = vars_compile(to,
				    regex_captures(code), err, sizeof(err));
			if (code == NULL || l->rewrites[i].to == NULL)
				loading->oom = true;
		}
	}
	if ((o = cf_inherited(ls, ls ? NULL : srv, "return")) != NULL &&
	    parse_return(cfg_opt_getnstr(o, 0), &l->return_status, &text) ==
	    0 && text != NULL) {
		l->return_text = vars_compile(text, l->re ?
		    regex_captures(l->re) : 0, err, sizeof(err));
		if (l->return_text == NULL)
			loading->oom = true;
	}
}

static void
build_responses(cfg_t *ls, cfg_t *srv, struct config_location *l)
{
	int codes[32], answer;
	const char *uri;
	char line[2048];
	cfg_opt_t *o;
	size_t n, i, j, k = 0;

	if ((o = cf_inherited(ls, srv, "error_page")) != NULL) {
		for (i = 0; i < cfg_opt_size(o); i++) {
			parse_error_page(cfg_opt_getnstr(o, (unsigned)i),
			    codes, nitems(codes), &n, &answer, &uri);
			l->nerror_pages += n;
		}
		l->error_pages = calloc(l->nerror_pages,
		    sizeof(*l->error_pages));
		if (l->error_pages == NULL)
			loading->oom = true;
		for (i = 0; l->error_pages && i < cfg_opt_size(o); i++) {
			parse_error_page(cfg_opt_getnstr(o, (unsigned)i),
			    codes, nitems(codes), &n, &answer, &uri);
			for (j = 0; j < n; j++, k++) {
				l->error_pages[k].status = codes[j];
				l->error_pages[k].answer = answer;
				l->error_pages[k].uri = cf_copy(uri);
			}
		}
	}
	if ((o = cf_inherited(ls, srv, "add_header")) != NULL) {
		l->nheaders = cfg_opt_size(o);
		l->headers = calloc(l->nheaders, sizeof(*l->headers));
		if (l->headers == NULL)
			loading->oom = true;
		for (i = 0; l->headers && i < l->nheaders; i++) {
			parse_header(cfg_opt_getnstr(o, (unsigned)i), line,
			    sizeof(line), &l->headers[i].always);
			l->headers[i].line = cf_copy(line);
			l->headers[i].len = strlen(line);
		}
	}
	l->expires = EXPIRES_OFF;
	if ((o = cf_inherited(ls, srv, "expires")) != NULL)
		parse_expires(cfg_opt_getnstr(o, 0), &l->expires);
}

static void
build_scope(cfg_t *cfg, cfg_t *ls, cfg_t *srv, struct config *cf,
    struct config_location *l, const struct config_server *s)
{
	build_files(ls, srv, cf, l, s);
	build_rewrites(ls, srv, l);
	build_access(cfg, ls, srv, cf, l);
	build_responses(ls, srv, l);
}

void
site_build_server(cfg_t *cfg, cfg_t *sec, struct config *cf,
    struct config_server *s)
{
	struct config_location *l;
	const char *what;
	char err[512];
	bool ci;
	size_t i;

	s->base.match = LOC_NONE;
	s->base.upstream = -1;
	s->base.prefix = cf_copy("");
	build_scope(cfg, NULL, sec, cf, &s->base, s);
	for (i = 0; i < s->nlocations; i++) {
		cfg_t *ls = cfg_getnsec(sec, "location", (unsigned)i);

		l = &s->locations[i];
		l->match = parse_title(cfg_title(ls), &what, &ci);
		l->line = opt_line(ls, "location");
		free(l->prefix);
		l->prefix = cf_copy(what);
		l->prefix_len = l->prefix ? strlen(l->prefix) : 0;
		if (l->match == LOC_REGEX &&
		    (l->re = regex_compile(what, ci, err, sizeof(err))) == NULL)
			loading->oom = true;
		build_scope(cfg, ls, sec, cf, l, s);
	}
}

void
site_free_location(struct config_location *l)
{
	size_t i;

	pcre2_code_free(l->re);
	vars_free(l->alias_tmpl);
	for (i = 0; l->try_files != NULL && i < l->ntry_files; i++)
		vars_free(l->try_files[i]);
	free(l->try_files);
	free(l->charset);
	free(l->default_type);
	for (i = 0; l->rewrites != NULL && i < l->nrewrites; i++) {
		pcre2_code_free(l->rewrites[i].re);
		vars_free(l->rewrites[i].to);
	}
	free(l->rewrites);
	vars_free(l->return_text);
	free(l->acl);
	free(l->auth_realm);
	for (i = 0; l->error_pages != NULL && i < l->nerror_pages; i++)
		free(l->error_pages[i].uri);
	free(l->error_pages);
	for (i = 0; l->headers != NULL && i < l->nheaders; i++)
		free(l->headers[i].line);
	free(l->headers);
}

void
site_free(struct config *cf)
{
	size_t i;

	for (i = 0; cf->dirs != NULL && i < cf->ndirs; i++)
		free(cf->dirs[i]);
	free(cf->dirs);
	for (i = 0; cf->htpasswd != NULL && i < cf->nhtpasswd; i++)
		htpasswd_free(&cf->htpasswd[i]);
	free(cf->htpasswd);
	for (i = 0; cf->limit_zones != NULL && i < cf->nlimit_zones; i++) {
		free(cf->limit_zones[i].name);
		vars_free(cf->limit_zones[i].key);
	}
	free(cf->limit_zones);
}

/* log_format sections: checked, named by servers, compiled once. */
#include <confuse.h>
#include <stdlib.h>
#include <string.h>

#include "master/config_impl.h"
#include "worker/log_format.h"

static int
escape_of(const char *word)
{
	return strcmp(word, "default") == 0 ? LOG_ESC_DEFAULT :
	    strcmp(word, "json") == 0 ? LOG_ESC_JSON :
	    strcmp(word, "none") == 0 ? LOG_ESC_NONE : -1;
}

/* A log_format compiles, and does not redefine a built-in one. */
int
validate_log_format(cfg_t *cfg, cfg_opt_t *opt)
{
	cfg_t *sec = cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1);
	const char *src = cfg_getstr(sec, "format");
	struct log_format *f;
	char err[160];
	int esc;

	for (size_t i = 0; i < log_format_nbuiltins; i++)
		if (strcmp(cfg_title(sec), log_format_builtins[i].name) == 0) {
			cfg_error(cfg, "log_format \"%s\" ending here is "
			    "built in and cannot be redefined",
			    cfg_title(sec));
			return -1;
		}
	if (src == NULL) {
		cfg_error(cfg, "log_format \"%s\" ending here has no format",
		    cfg_title(sec));
		return -1;
	}
	if ((esc = escape_of(cfg_getstr(sec, "escape"))) < 0) {
		cfg_error(cfg, "log_format \"%s\": escape must be default, "
		    "json or none", cfg_title(sec));
		return -1;
	}
	if ((f = log_format_compile(src, esc, err, sizeof(err))) == NULL) {
		cfg_error(cfg, "log_format \"%s\" ending here: %s",
		    cfg_title(sec), err);
		return -1;
	}
	log_format_free(f);
	return 0;
}

/* The index of a log format: built-in ones first, then the file's. */
int
find_log_format(cfg_t *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < log_format_nbuiltins; i++)
		if (strcmp(log_format_builtins[i].name, name) == 0)
			return (int)i;
	for (i = 0; i < cfg_size(cfg, "log_format"); i++)
		if (strcmp(cfg_title(cfg_getnsec(cfg, "log_format", i)),
		    name) == 0)
			return (int)(log_format_nbuiltins + i);
	return -1;
}

/* Every access_log_format names a format, defined anywhere in the file. */
void
check_log_formats(cfg_t *cfg)
{
	const char *name;
	cfg_t *sec;

	for (size_t i = 0; i < cfg_size(cfg, "server") && !loading->failed; i++) {
		sec = cfg_getnsec(cfg, "server", i);
		name = cfg_getstr(sec, "access_log_format");
		if (find_log_format(cfg, name) < 0)
			cf_fail(sec->line, "access_log_format \"%s\": no "
			    "log_format has that name (built in: combined, "
			    "common, timed, json)", name);
	}
}

/* Built-in formats, then the file's, each compiled once for the workers. */
void
build_log_formats(cfg_t *cfg, struct config *cf)
{
	size_t i, n = log_format_nbuiltins + cfg_size(cfg, "log_format");
	struct config_log_format *f;
	char err[160];
	cfg_t *sec;

	cf->log_flush_ms = cfg_getint(cfg, "log_flush");
	if ((cf->log_formats = calloc(n, sizeof(*cf->log_formats))) == NULL) {
		loading->oom = true;
		return;
	}
	cf->nlog_formats = n;
	for (i = 0; i < n; i++) {
		f = &cf->log_formats[i];
		if (i < log_format_nbuiltins) {
			f->name = cf_copy(log_format_builtins[i].name);
			f->fmt = log_format_compile(log_format_builtins[i].src,
			    log_format_builtins[i].esc, err, sizeof(err));
		} else {
			sec = cfg_getnsec(cfg, "log_format",
			    i - log_format_nbuiltins);
			f->name = cf_copy(cfg_title(sec));
			f->fmt = log_format_compile(cfg_getstr(sec, "format"),
			    escape_of(cfg_getstr(sec, "escape")), err,
			    sizeof(err));
		}
		if (f->fmt == NULL)
			loading->oom = true;	/* validated: only memory fails */
	}
}

/* Errors and warnings with the file and line they come from. */
#include <confuse.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "master/config_impl.h"
#include "master/log.h"

/* The file and line of a line of the expanded text (see include_expand). */
static const char *
source_of(int line, int *src)
{
	const struct config_src *m;

	*src = line;
	if (line <= 0 || (size_t)line > loading->nmap)
		return loading->path;
	m = &loading->map[line - 1];
	*src = m->line;
	return m->file == 0 ? loading->path : loading->files[m->file];
}

static void
vfail(int line, const char *fmt, va_list ap)
{
	const char *file;
	int n, src;

	if (loading->failed)
		return;
	loading->failed = true;
	if (loading->errlen == 0)
		return;
	file = source_of(line, &src);
	if (src > 0)
		n = snprintf(loading->err, loading->errlen, "%s:%d: ", file, src);
	else
		n = snprintf(loading->err, loading->errlen, "%s: ", file);
	if (n >= 0 && (size_t)n < loading->errlen)
		vsnprintf(loading->err + n, loading->errlen - n, fmt, ap);
}

/* Errors found after parsing, formatted like libconfuse's own. */
void
cf_fail(int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(line, fmt, ap);
	va_end(ap);
}

void
warn_at(int line, const char *fmt, ...)
{
	char msg[1024];
	const char *file;
	va_list ap;
	int src;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	file = source_of(line, &src);
	if (src > 0)
		log_warn("%s:%d: %s", file, src, msg);
	else
		log_warn("%s: %s", file, msg);
}

void
on_cfg_error(cfg_t *cfg, const char *fmt, va_list ap)
{
	vfail(cfg->line, fmt, ap);
}

void
opt_line_note(cfg_t *sec, const char *name, int line)
{
	size_t i;

	for (i = 0; i < loading->nopt_lines; i++)
		if (loading->opt_lines[i].sec == sec &&
		    strcmp(loading->opt_lines[i].name, name) == 0)
			break;
	if (i == nitems(loading->opt_lines))
		return;
	loading->opt_lines[i].sec = sec;
	loading->opt_lines[i].name = name;
	loading->opt_lines[i].line = line;
	if (i == loading->nopt_lines)
		loading->nopt_lines++;
}

int
opt_line(cfg_t *sec, const char *name)
{
	for (size_t i = 0; i < loading->nopt_lines; i++)
		if (loading->opt_lines[i].sec == sec &&
		    strcmp(loading->opt_lines[i].name, name) == 0)
			return loading->opt_lines[i].line;
	return 0;
}

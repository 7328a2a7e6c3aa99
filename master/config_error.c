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
	if (line <= 0 || (size_t)line > ld->nmap)
		return ld->path;
	m = &ld->map[line - 1];
	*src = m->line;
	return m->file == 0 ? ld->path : ld->files[m->file];
}

static void
vfail(int line, const char *fmt, va_list ap)
{
	const char *file;
	int n, src;

	if (ld->failed)
		return;
	ld->failed = true;
	if (ld->errlen == 0)
		return;
	file = source_of(line, &src);
	if (src > 0)
		n = snprintf(ld->err, ld->errlen, "%s:%d: ", file, src);
	else
		n = snprintf(ld->err, ld->errlen, "%s: ", file);
	if (n >= 0 && (size_t)n < ld->errlen)
		vsnprintf(ld->err + n, ld->errlen - n, fmt, ap);
}

/* Errors found after parsing, formatted like libconfuse's own. */
void
fail(int line, const char *fmt, ...)
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

	for (i = 0; i < ld->nopt_lines; i++)
		if (ld->opt_lines[i].sec == sec &&
		    strcmp(ld->opt_lines[i].name, name) == 0)
			break;
	if (i == nitems(ld->opt_lines))
		return;
	ld->opt_lines[i].sec = sec;
	ld->opt_lines[i].name = name;
	ld->opt_lines[i].line = line;
	if (i == ld->nopt_lines)
		ld->nopt_lines++;
}

int
opt_line(cfg_t *sec, const char *name)
{
	for (size_t i = 0; i < ld->nopt_lines; i++)
		if (ld->opt_lines[i].sec == sec &&
		    strcmp(ld->opt_lines[i].name, name) == 0)
			return ld->opt_lines[i].line;
	return 0;
}

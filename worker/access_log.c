/*
 * The access log: one buffer per server block, filled with whole lines in
 * the combined format and written when full or once a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "worker/conn_impl.h"
#include "worker/status.h"

#define ALOG_BUF	(32 * 1024)

struct alog {
	int fd;
	size_t len;
	char buf[ALOG_BUF];
};

static struct alog *alogs;

static size_t
alog_escape(char *dst, size_t room, struct span s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, n = 0;

	if (s.p == NULL || s.len == 0) {
		if (room > 0)
			dst[n++] = '-';
		return n;
	}
	for (i = 0; i < s.len && n + 4 < room; i++) {
		unsigned char ch = (unsigned char)s.p[i];

		if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f) {
			dst[n++] = '\\';
			dst[n++] = 'x';
			dst[n++] = hex[ch >> 4];
			dst[n++] = hex[ch & 15];
		} else {
			dst[n++] = (char)ch;
		}
	}
	return n;
}

static void
alog_write(struct alog *al)
{
	if (al->len > 0 && write(al->fd, al->buf, al->len) == -1)
		log_at(L_ERROR, errno, "write access log");
	al->len = 0;
}

void
access_log_flush(void)
{
	if (alogs == NULL)
		return;
	for (size_t i = 0; i < worker.cf->nservers; i++)
		if (alogs[i].fd != -1)
			alog_write(&alogs[i]);
}

void
access_log_reopen(void)
{
	const struct config *cf = worker.cf;
	int fd;

	for (size_t i = 0; i < cf->nservers; i++) {
		if (alogs[i].fd == -1)
			continue;
		alog_write(&alogs[i]);
		fd = open(cf->servers[i].access_log, O_WRONLY | O_APPEND |
		    O_CREAT | O_CLOEXEC, 0640);
		if (fd == -1) {
			log_at(L_ERROR, errno, "reopen %s",
			    cf->servers[i].access_log);
			continue;
		}
		close(alogs[i].fd);
		alogs[i].fd = fd;
	}
}

/* At worker start, where failing is allowed; requests never allocate. */
void
access_log_init(void)
{
	const struct config *cf = worker.cf;

	alogs = calloc(cf->nservers, sizeof(*alogs));
	if (alogs == NULL)
		fatal("calloc");
	for (size_t i = 0; i < cf->nservers; i++)
		alogs[i].fd = worker.rt->access_fds[i];
}

/* Combined log format, buffered and written in whole lines. */
void
resp_done(struct conn *c, int status, uint64_t body_bytes)
{
	struct http_request *r = &c->req;
	char line[4096];
	struct alog *al;
	size_t n;
	int rc;

	status_count(c, status, body_bytes);
	al = &alogs[c->srv];
	if (al->fd == -1)
		return;
	rc = snprintf(line, sizeof(line), "%s - - [%s] \"", c->peer,
	    worker.log_time);
	n = (size_t)rc;
	if (r->method_name.p != NULL) {
		n += alog_escape(line + n, sizeof(line) - n - 200,
		    r->method_name);
		line[n++] = ' ';
		n += alog_escape(line + n, sizeof(line) - n - 200, r->target);
		n += (size_t)snprintf(line + n, sizeof(line) - n,
		    " HTTP/1.%d", r->version == 10 ? 0 : 1);
	}
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\" %d %llu \"",
	    status, (unsigned long long)body_bytes);
	n += alog_escape(line + n, sizeof(line) - n - 100,
	    r->method_name.p ? http_header_get(r, "Referer") :
	    (struct span){ NULL, 0 });
	line[n++] = '"';
	line[n++] = ' ';
	line[n++] = '"';
	n += alog_escape(line + n, sizeof(line) - n - 4,
	    r->method_name.p ? http_header_get(r, "User-Agent") :
	    (struct span){ NULL, 0 });
	line[n++] = '"';
	line[n++] = '\n';
	if (al->len + n > sizeof(al->buf))
		alog_write(al);
	memcpy(al->buf + al->len, line, n);
	al->len += n;
}

/* Writes what is buffered and frees the buffers; at exit. */
void
access_log_close(void)
{
	access_log_flush();
	free(alogs);
	alogs = NULL;
}

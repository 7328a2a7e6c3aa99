/*
 * CGI/1.1 response headers (RFC 3875 section 6).  As in the HTTP parsers,
 * the block is found first (only line ends are looked at while it is
 * incomplete), then checked and split in one pass.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "worker/cgi.h"
#include "worker/http.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"

static int
fail(struct http_response *r, const char *why)
{
	r->error = why;
	return HTTP_ERROR;
}

/*
 * Whether the line from the last LF to the LF at end is empty (or a lone
 * CR).  Scanning may have stopped in it, after a CR or more: the bytes
 * before pos say where it began.
 */
static bool
empty_line(const char *buf, size_t pos, size_t end)
{
	size_t start = pos;

	if (start > 0 && buf[start - 1] == '\r')
		start--;
	if (start > 0 && buf[start - 1] != '\n')
		return false;
	return end == start || (end == start + 1 && buf[start] == '\r');
}

/*
 * Looks for the empty line that ends the block, from where the last call
 * stopped.  Nothing past max bytes is looked at, so the answer does not
 * depend on how the bytes came.
 */
static ssize_t
find_end(struct http_response *r, const char *buf, size_t len, size_t *scan,
    size_t max)
{
	size_t pos = *scan, stop = len < max ? len : max;
	ssize_t end;

	while (pos < stop) {
		if ((end = http_line_end(buf, pos, stop)) < 0)
			return fail(r, "bare CR in CGI header");
		if ((size_t)end == stop) {
			pos = stop;
			break;
		}
		if (empty_line(buf, pos, (size_t)end)) {
			*scan = (size_t)end;
			return end + 1;
		}
		pos = (size_t)end + 1;
	}
	*scan = pos;
	if (len < max)
		return HTTP_AGAIN;
	return fail(r, "CGI header block too large");
}

/* "Status: 3DIGIT [SP reason]". */
static int
status(struct http_response *r, struct span v)
{
	const char *p = v.p;

	if (r->status != 0)
		return fail(r, "duplicate Status in CGI header");
	if (v.len < 3 || !IS(p[0], C_DIGIT) || !IS(p[1], C_DIGIT) ||
	    !IS(p[2], C_DIGIT) || (v.len > 3 && p[3] != ' '))
		return fail(r, "invalid Status in CGI header");
	r->status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	if (r->status < 200 || r->status > 599)
		return fail(r, "CGI Status out of range");
	r->reason.p = p + (v.len > 3 ? 4 : 3);
	r->reason.len = v.len > 3 ? v.len - 4 : 0;
	return HTTP_OK;
}

/* One field: Status is taken out, Content-Length checked, others kept. */
static int
field(struct http_response *r, const struct http_header *h, bool *location,
    size_t maxheaders)
{
	const char *why;

	if (h->name.len == 6 && http_ieq(h->name.p, "status", 6))
		return status(r, h->value);
	if (r->nheaders == maxheaders)
		return fail(r, "too many CGI header fields");
	r->headers[r->nheaders++] = *h;
	if (h->name.len == 8 && http_ieq(h->name.p, "location", 8))
		*location = true;
	else if (h->name.len == 14 && http_ieq(h->name.p, "content-length",
	    14)) {
		why = http_content_length(h->value, &r->content_length);
		if (why != NULL)
			return fail(r, why);
	} else {
		http_response_keep_field(r, h);
	}
	return HTTP_OK;
}

static int
parse_block(struct http_response *r, const char *buf, size_t maxheaders,
    bool head)
{
	const char *p = buf, *why;
	struct http_header h;
	bool location = false;

	while (*p != '\n' && !(p[0] == '\r' && p[1] == '\n')) {
		if ((why = http_field_line_lf(&p, &h)) != NULL)
			return fail(r, why);
		if (field(r, &h, &location, maxheaders) == HTTP_ERROR)
			return HTTP_ERROR;
	}
	if (r->status == 0) {
		r->status = location ? 302 : 200;
		r->reason.p = buf;
		r->reason.len = 0;
	}
	if (r->status == 204 && r->content_length > 0)
		return fail(r, "Content-Length in a CGI 204");
	if (r->status == 204 || r->status == 304 || head)
		r->framing = HTTP_BODY_NONE;
	else if (r->content_length != -1)
		r->framing = HTTP_BODY_LENGTH;
	else
		r->framing = HTTP_BODY_UNTIL_CLOSE;
	return HTTP_OK;
}

ssize_t
cgi_parse_response(struct http_response *r, const char *buf, size_t len,
    size_t *scan, struct http_header *headers, size_t maxheaders,
    size_t max_header_size, bool head_request)
{
	ssize_t n;

	n = find_end(r, buf, len, scan, max_header_size);
	if (n < 0)
		return n;
	memset(r, 0, sizeof(*r));
	r->version = 11;
	r->headers = headers;
	r->content_length = -1;
	if (parse_block(r, buf, maxheaders, head_request) == HTTP_ERROR)
		return HTTP_ERROR;
	return n;
}

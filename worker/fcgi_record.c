/*
 * FastCGI records: the writers of the web server's records and the parser
 * of the application's.  See fcgi_record.h.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "worker/fcgi_record.h"

#define MIN(a, b)	((a) < (b) ? (a) : (b))

#define FCGI_RESPONDER		1
#define FCGI_KEEP_CONN		1
#define FCGI_END_BODY_LEN	8

static const char *const type_names[] = {
#define X(name, n)	[n] = #name,
	FCGI_TYPES(X)
#undef X
};

/* Why a record of each type is refused: the application may not send it. */
static const char *const type_unexpected[] = {
#define X(name, n)	[n] = "unexpected " #name " record",
	FCGI_TYPES(X)
#undef X
};

const char *
fcgi_type_name(unsigned type)
{
	return type >= 1 && type <= FCGI_MAXTYPE ? type_names[type] : NULL;
}

void
fcgi_header(char *out, enum fcgi_type type, uint16_t id, size_t clen)
{
	unsigned char *h = (unsigned char *)out;

	h[0] = FCGI_VERSION_1;
	h[1] = (unsigned char)type;
	h[2] = (unsigned char)(id >> 8);
	h[3] = (unsigned char)id;
	h[4] = (unsigned char)(clen >> 8);
	h[5] = (unsigned char)clen;
	h[6] = 0;			/* padding: none */
	h[7] = 0;
}

void
fcgi_begin_request(char *out, uint16_t id, bool keep_conn)
{
	unsigned char *b = (unsigned char *)out + FCGI_HEADER_LEN;

	fcgi_header(out, FCGI_BEGIN_REQUEST, id, 8);
	b[0] = 0;
	b[1] = FCGI_RESPONDER;
	b[2] = keep_conn ? FCGI_KEEP_CONN : 0;
	memset(b + 3, 0, 5);
}

size_t
fcgi_stdin_header(char *out, uint16_t id, size_t len)
{
	size_t n = MIN(len, FCGI_MAX_CONTENT);

	fcgi_header(out, FCGI_STDIN, id, n);
	return n;
}

/* PARAMS ------------------------------------------------------------- */

void
fcgi_params_init(struct fcgi_params *w, char *out, uint16_t id)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->cap = SIZE_MAX;
	w->id = id;
}

/* Whether n more bytes can be written at len; past the room, never. */
static bool
room(struct fcgi_params *w, size_t n)
{
	if (w->out != NULL && (w->len > w->cap || n > w->cap - w->len))
		w->out = NULL;
	return w->out != NULL;
}

static void
close_record(struct fcgi_params *w)
{
	if (w->out != NULL)
		fcgi_header(w->out + w->rec, FCGI_PARAMS, w->id, w->clen);
	w->open = false;
}

static void
open_record(struct fcgi_params *w)
{
	if (w->open)
		close_record(w);
	w->rec = w->len;
	w->len += FCGI_HEADER_LEN;
	w->clen = 0;
	w->open = true;
}

/* Appends stream bytes, opening a new record whenever one is full. */
static void
put(struct fcgi_params *w, const char *p, size_t n, bool cgi_name)
{
	size_t k;

	while (n > 0) {
		if (!w->open || w->clen == FCGI_MAX_CONTENT)
			open_record(w);
		k = MIN(n, FCGI_MAX_CONTENT - w->clen);
		if (room(w, k) && cgi_name)
			fcgi_cgi_name(w->out + w->len, p, k);
		else if (w->out != NULL)
			memcpy(w->out + w->len, p, k);
		w->len += k;
		w->clen += k;
		p += k;
		n -= k;
	}
}

/* Writes a pair length, in 1 or 4 bytes, at out; returns how many. */
static size_t
pair_len(unsigned char *out, size_t n)
{
	if (n < 128) {
		out[0] = (unsigned char)n;
		return 1;
	}
	out[0] = (unsigned char)(n >> 24 | 0x80);
	out[1] = (unsigned char)(n >> 16);
	out[2] = (unsigned char)(n >> 8);
	out[3] = (unsigned char)n;
	return 4;
}

/*
 * The usual case, a pair inside the open record: one copy of each piece
 * and nothing when only counting (the caller moves the lengths).
 */
static void
add_whole(struct fcgi_params *w, const unsigned char *lens, size_t size,
    bool http, const char *name, size_t nlen, const struct span *value,
    size_t nv, size_t total)
{
	char *d;
	size_t i;

	if (!room(w, total))
		return;
	d = w->out + w->len;
	memcpy(d, lens, size);
	d += size;
	if (http) {
		memcpy(d, "HTTP_", 5);
		fcgi_cgi_name(d + 5, name, nlen);
		d += 5 + nlen;
	} else if (nlen > 0) {
		memcpy(d, name, nlen);
		d += nlen;
	}
	for (i = 0; i < nv; i++)
		if (value[i].len > 0) {
			memcpy(d, value[i].p, value[i].len);
			d += value[i].len;
		}
}

bool
fcgi_params_add_any(struct fcgi_params *w, const char *name, size_t nlen,
    bool http, const struct span *value, size_t nv)
{
	unsigned char lens[8];
	size_t i, vlen = 0, flen = nlen + (http ? 5 : 0), size;

	for (i = 0; i < nv; i++) {
		if (value[i].len > FCGI_PAIR_MAX - vlen)
			return false;
		vlen += value[i].len;
	}
	if (nlen > FCGI_PAIR_MAX - 5)
		return false;
	size = pair_len(lens, flen);
	size += pair_len(lens + size, vlen);

	/* A pair that fits in a record of its own starts one if needed. */
	if (size + flen + vlen <= FCGI_MAX_CONTENT) {
		if (!w->open ||
		    w->clen + size + flen + vlen > FCGI_MAX_CONTENT)
			open_record(w);
		add_whole(w, lens, size, http, name, nlen, value, nv,
		    size + flen + vlen);
		w->len += size + flen + vlen;
		w->clen += size + flen + vlen;
		return true;
	}
	put(w, (const char *)lens, size, false);
	if (http)
		put(w, "HTTP_", 5, false);
	put(w, name, nlen, http);
	for (i = 0; i < nv; i++)
		put(w, value[i].p, value[i].len, false);
	return true;
}

bool
fcgi_params_str(struct fcgi_params *w, const char *name, const char *value)
{
	struct span v = { value, strlen(value) };

	return fcgi_params_add(w, name, strlen(name), false, &v, 1);
}

size_t
fcgi_params_end(struct fcgi_params *w)
{
	if (w->open)
		close_record(w);
	if (room(w, FCGI_HEADER_LEN))
		fcgi_header(w->out + w->len, FCGI_PARAMS, w->id, 0);
	w->len += FCGI_HEADER_LEN;
	return w->len;
}

/* The parser --------------------------------------------------------- */

enum { P_HEADER, P_CONTENT, P_END, P_PAD, P_DONE, P_ERROR };

void
fcgi_parser_init(struct fcgi_parser *p, uint16_t id)
{
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->state = P_HEADER;
}

static int
fail(struct fcgi_parser *p, const char *why)
{
	p->error = why;
	p->state = P_ERROR;
	return FCGI_R_ERROR;
}

/* A stream record: empty, it closes the stream; else content follows. */
static int
stream_header(struct fcgi_parser *p, bool *closed)
{
	if (*closed)
		return fail(p, p->type == FCGI_STDOUT ?
		    "STDOUT record after the end of STDOUT" :
		    "STDERR record after the end of STDERR");
	if (p->left == 0) {
		*closed = true;
		p->state = p->pad > 0 ? P_PAD : P_HEADER;
	} else {
		p->state = P_CONTENT;
	}
	return FCGI_R_AGAIN;
}

/* Checks the header in p->buf and sets the state that reads the rest. */
static int
header(struct fcgi_parser *p)
{
	const uint8_t *h = p->buf;
	unsigned id = (unsigned)h[2] << 8 | h[3];

	if (h[0] != FCGI_VERSION_1)
		return fail(p, "unsupported FastCGI version");
	p->type = h[1];
	p->left = (uint16_t)(h[4] << 8 | h[5]);
	p->pad = h[6];
	if (p->type < 1 || p->type > FCGI_MAXTYPE)
		return fail(p, "unknown record type");
	if (id != p->id)
		return fail(p, id == 0 ? "management record during a request" :
		    "record for another request id");
	switch (p->type) {
	case FCGI_STDOUT:
		return stream_header(p, &p->stdout_closed);
	case FCGI_STDERR:
		return stream_header(p, &p->stderr_closed);
	case FCGI_END_REQUEST:
		if (p->left != FCGI_END_BODY_LEN)
			return fail(p, "END_REQUEST record of a wrong length");
		p->state = P_END;
		return FCGI_R_AGAIN;
	default:
		return fail(p, type_unexpected[p->type]);
	}
}

/* Reads END_REQUEST's body in p->buf. */
static int
end_body(struct fcgi_parser *p)
{
	const uint8_t *b = p->buf;

	p->app_status = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	    (uint32_t)b[2] << 8 | b[3];
	switch (b[4]) {
	case 0:				/* FCGI_REQUEST_COMPLETE */
		break;
	case 1:
		return fail(p, "application cannot multiplex connections");
	case 2:
		return fail(p, "application overloaded");
	case 3:
		return fail(p, "application does not know the responder role");
	default:
		return fail(p, "unknown protocol status in END_REQUEST");
	}
	p->left = 0;
	if (p->pad > 0) {
		p->state = P_PAD;
		return FCGI_R_AGAIN;
	}
	p->state = P_DONE;
	return FCGI_R_END;
}

/* Gathers up to 8 bytes into p->buf; true when it has them all. */
static bool
gather(struct fcgi_parser *p, const char *buf, size_t len, size_t *pos)
{
	size_t n = MIN(len - *pos, (size_t)FCGI_HEADER_LEN - p->have);

	memcpy(p->buf + p->have, buf + *pos, n);
	p->have += (uint8_t)n;
	*pos += n;
	if (p->have < FCGI_HEADER_LEN)
		return false;
	p->have = 0;
	return true;
}

int
fcgi_parse(struct fcgi_parser *p, const char *buf, size_t len, size_t *used,
    struct span *data)
{
	size_t pos = 0, n;
	int rc = FCGI_R_AGAIN;

	while (rc == FCGI_R_AGAIN) {
		switch (p->state) {
		case P_HEADER:
			if (pos == len)
				goto again;
			if (gather(p, buf, len, &pos))
				rc = header(p);
			break;
		case P_END:
			if (pos == len)
				goto again;
			if (gather(p, buf, len, &pos))
				rc = end_body(p);
			break;
		case P_CONTENT:
			if (pos == len)
				goto again;
			n = MIN(len - pos, (size_t)p->left);
			data->p = buf + pos;
			data->len = n;
			pos += n;
			p->left = (uint16_t)(p->left - n);
			if (p->left == 0)
				p->state = p->pad > 0 ? P_PAD : P_HEADER;
			rc = p->type == FCGI_STDOUT ? FCGI_R_STDOUT :
			    FCGI_R_STDERR;
			break;
		case P_PAD:
			if (pos == len)
				goto again;
			n = MIN(len - pos, (size_t)p->pad);
			p->pad = (uint8_t)(p->pad - n);
			pos += n;
			if (p->pad > 0)
				break;
			if (p->type == FCGI_END_REQUEST) {
				p->state = P_DONE;
				rc = FCGI_R_END;
			} else {
				p->state = P_HEADER;
			}
			break;
		case P_DONE:
			if (pos < len)
				rc = fail(p, "data after END_REQUEST");
			else
				goto again;
			break;
		default:
			rc = FCGI_R_ERROR;
			break;
		}
	}
	*used = pos;
	return rc;
again:
	*used = pos;
	return FCGI_R_AGAIN;
}

void
fcgi_parse_unread(struct fcgi_parser *p, size_t n)
{
	if (n == 0)
		return;
	/* Nothing was read after that piece but, at most, its padding
	 * state: the record is in its content again. */
	p->left = (uint16_t)(p->left + n);
	p->state = P_CONTENT;
}

/* The look-ahead from any state: a copy of the parser runs on. */
static bool
ahead_parse(const struct fcgi_parser *p, const char *buf, size_t len,
    uint64_t *out)
{
	struct fcgi_parser copy = *p;
	struct span data;
	size_t pos = 0, used;
	int rc;

	*out = 0;
	for (;;) {
		rc = fcgi_parse(&copy, buf + pos, len - pos, &used, &data);
		pos += used;
		if (rc == FCGI_R_STDOUT)
			*out += data.len;
		else if (rc == FCGI_R_END)
			return true;
		else if (rc != FCGI_R_STDERR)
			return false;	/* more to come, or an error */
	}
}

/*
 * Within a record's content or between records (where a response's head
 * ends) it walks the record headers, with the parser's checks; from
 * anywhere else, a copy of the parser runs on.
 */
bool
fcgi_parse_ahead(const struct fcgi_parser *p, const char *buf, size_t len,
    uint64_t *out)
{
	const uint8_t *h;
	bool out_closed = p->stdout_closed, err_closed = p->stderr_closed;
	size_t pos, clen;

	*out = 0;
	if (p->state == P_CONTENT) {
		if (p->type == FCGI_STDOUT)
			*out = p->left;
		pos = (size_t)p->left + p->pad;
	} else if (p->state == P_HEADER && p->have == 0) {
		pos = 0;
	} else {
		return ahead_parse(p, buf, len, out);
	}
	while (pos <= len && len - pos >= FCGI_HEADER_LEN) {
		h = (const uint8_t *)buf + pos;
		if (h[0] != FCGI_VERSION_1 ||
		    ((unsigned)h[2] << 8 | h[3]) != p->id)
			return false;
		clen = (size_t)h[4] << 8 | h[5];
		pos += FCGI_HEADER_LEN;
		switch (h[1]) {
		case FCGI_STDOUT:
			if (out_closed)
				return false;
			out_closed = clen == 0;
			*out += clen;
			break;
		case FCGI_STDERR:
			if (err_closed)
				return false;
			err_closed = clen == 0;
			break;
		case FCGI_END_REQUEST:
			/* Whole with its padding, and complete. */
			return clen == FCGI_END_BODY_LEN &&
			    len - pos >= clen + h[6] && buf[pos + 4] == 0;
		default:
			return false;
		}
		pos += clen + h[6];
	}
	return false;
}

bool
fcgi_parse_done(const struct fcgi_parser *p)
{
	return p->state == P_DONE;
}

const char *
fcgi_parse_eof(const struct fcgi_parser *p)
{
	switch (p->state) {
	case P_DONE:
		return NULL;
	case P_ERROR:
		return p->error;
	case P_HEADER:
		if (p->have == 0)
			return "connection closed before END_REQUEST";
		/* FALLTHROUGH */
	default:
		return "connection closed in the middle of a record";
	}
}

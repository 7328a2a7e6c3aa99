/*
 * The table of header fields corral treats specially.
 *
 * A lookup goes by length first: rows of one length are few (four at
 * most), so a name costs a handful of length compares and at most a few
 * byte-by-byte ones.
 */
#include <string.h>

#include "worker/http_field.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"

#define NAME_MAX_LEN	24		/* longer than any row */
#define PER_LEN		6		/* rows of one length, at most */

static const struct http_field rows[HF_COUNT] = {
	{ HF_NONE, "", 0, 0 },
#define HTTP_FIELD_ROW(id, name, flags)	\
	{ HF_##id, name, sizeof(name) - 1, flags },
	HTTP_FIELDS(HTTP_FIELD_ROW)
#undef HTTP_FIELD_ROW
};

/* by_len[n]: the ids of the rows n bytes long, 0-terminated. */
static unsigned char by_len[NAME_MAX_LEN + 1][PER_LEN + 1];

static void
index_rows(void)
{
	size_t i, k;

	for (i = 1; i < HF_COUNT; i++) {
		for (k = 0; by_len[rows[i].len][k] != 0; k++)
			;
		by_len[rows[i].len][k] = (unsigned char)i;
	}
}

const struct http_field *
http_field_find(struct span name)
{
	static bool indexed;
	const unsigned char *id;

	if (!indexed) {
		index_rows();
		indexed = true;
	}
	if (name.len > NAME_MAX_LEN)
		return NULL;
	for (id = by_len[name.len]; *id != 0; id++)
		if (http_name_eq(name.p, rows[*id].name, name.len))
			return &rows[*id];
	return NULL;
}

unsigned
http_field_flags(struct span name)
{
	const struct http_field *f = http_field_find(name);

	return f != NULL ? f->flags : 0;
}

const struct http_field *
http_field_row(enum http_field_id id)
{
	return &rows[id < HF_COUNT ? id : HF_NONE];
}

bool
http_field_connection_option(const struct http_header *headers, size_t n,
    struct span name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (http_span_ieq(headers[i].name, "connection") &&
		    http_connection_has_token(headers[i].value, name))
			return true;
	return false;
}

struct span
http_field_bad_option(const struct http_header *headers, size_t n,
    unsigned flags)
{
	struct span none = { NULL, 0 }, e;
	const char *p, *end;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!http_span_ieq(headers[i].name, "connection"))
			continue;
		p = headers[i].value.p;
		end = p + headers[i].value.len;
		while (http_list_next(&p, end, &e))
			if (http_field_flags(e) & flags)
				return e;
	}
	return none;
}

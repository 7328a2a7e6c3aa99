/*
 * FastCGI records, both ways.
 *
 * Mode 0: the application's records through the parser as the FastCGI
 * upstream reads them, in pieces, and again in one call: how the stream
 * was cut must not change the STDOUT and STDERR bytes, the end, or the
 * error.  Mode 1: the input as name-value pairs through the PARAMS
 * writer, counted then written (the two must agree), and decoded back.
 *
 * Input: one byte of options (bit 0: mode), two bytes that seed the split
 * points, then the stream (mode 0) or the pairs (mode 1: a name length
 * byte, a value length byte times 300, the name and value bytes).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/fcgi_record.h"

struct result {
	char *out, *err;
	size_t outlen, errlen;
	bool end;
	const char *error;		/* at the error or at EOF */
};

static void
run(const char *s, size_t n, struct fuzz_split *split, struct result *r)
{
	struct fcgi_parser p;
	struct span data;
	size_t pos = 0, avail, used;
	char *buf;
	uint64_t ahead;
	size_t outlen;
	bool whole, was_end;
	int rc = FCGI_R_AGAIN;

	memset(r, 0, sizeof(*r));
	r->out = malloc(n + 1);
	r->err = malloc(n + 1);
	FUZZ_CHECK(r->out != NULL && r->err != NULL);
	fcgi_parser_init(&p, 1);
	while (pos < n && rc != FCGI_R_ERROR) {
		avail = split != NULL ? fuzz_split_next(split, n - pos) :
		    n - pos;
		buf = fuzz_dup(s + pos, avail);
		/* What the look-ahead says of this piece, the parse does. */
		whole = fcgi_parse_ahead(&p, buf, avail, &ahead);
		outlen = r->outlen;
		was_end = r->end;
		while (avail > 0) {
			rc = fcgi_parse(&p, buf, avail, &used, &data);
			FUZZ_CHECK(used <= avail);
			if (rc == FCGI_R_STDOUT || rc == FCGI_R_STDERR) {
				FUZZ_CHECK(data.len > 0 && data.p >= buf &&
				    data.p + data.len <= buf + used);
				memcpy(rc == FCGI_R_STDOUT ?
				    r->out + r->outlen : r->err + r->errlen,
				    data.p, data.len);
				*(rc == FCGI_R_STDOUT ? &r->outlen :
				    &r->errlen) += data.len;
			}
			if (rc == FCGI_R_END) {
				FUZZ_CHECK(!r->end);
				FUZZ_CHECK(fcgi_parse_done(&p));
				r->end = true;
			}
			if (rc == FCGI_R_AGAIN)
				FUZZ_CHECK(used == avail);
			if (rc == FCGI_R_ERROR) {
				FUZZ_CHECK(p.error != NULL);
				FUZZ_CHECK(!fcgi_parse_done(&p));
				break;
			}
			memmove(buf, buf + used, avail - used);
			avail -= used;
			pos += used;
		}
		FUZZ_CHECK(whole == (!was_end && r->end));
		if (whole)
			FUZZ_CHECK(r->outlen - outlen == ahead);
		free(buf);
	}
	FUZZ_CHECK(r->outlen + r->errlen <= n);
	r->error = fcgi_parse_eof(&p);
	FUZZ_CHECK((r->error == NULL) == fcgi_parse_done(&p));
	if (r->end && rc != FCGI_R_ERROR)
		FUZZ_CHECK(r->error == NULL);
}

static void
records(const char *s, size_t n, struct fuzz_split *split)
{
	struct result a, b;

	run(s, n, split, &a);
	run(s, n, NULL, &b);
	FUZZ_CHECK(a.outlen == b.outlen && a.errlen == b.errlen);
	FUZZ_CHECK(memcmp(a.out, b.out, a.outlen) == 0);
	FUZZ_CHECK(memcmp(a.err, b.err, a.errlen) == 0);
	FUZZ_CHECK(a.end == b.end);
	FUZZ_CHECK((a.error == NULL) == (b.error == NULL));
	if (a.error != NULL)
		FUZZ_CHECK(strcmp(a.error, b.error) == 0);
	free(a.out);
	free(a.err);
	free(b.out);
	free(b.err);
}

/* Mode 1 ---------------------------------------------------------------- */

struct pairs {
	const char *name[64], *value[64];
	size_t nlen[64], vlen[64];
	size_t n;
};

static void
write_pairs(struct fcgi_params *w, const struct pairs *ps, bool http)
{
	struct span v;
	size_t i;

	for (i = 0; i < ps->n; i++) {
		v.p = ps->value[i];
		v.len = ps->vlen[i];
		FUZZ_CHECK(fcgi_params_add(w, ps->name[i], ps->nlen[i],
		    http && (i & 1), &v, 1));
	}
}

static size_t
get_len(const unsigned char *s, size_t *pos)
{
	size_t n;

	if (s[*pos] < 128)
		return s[(*pos)++];
	n = (size_t)(s[*pos] & 0x7f) << 24 | (size_t)s[*pos + 1] << 16 |
	    (size_t)s[*pos + 2] << 8 | s[*pos + 3];
	*pos += 4;
	return n;
}

/* Joins the records' contents and checks every header on the way. */
static size_t
join(const unsigned char *b, size_t len, unsigned char *stream)
{
	size_t pos = 0, clen, slen = 0;
	bool ended = false;

	while (pos < len) {
		FUZZ_CHECK(!ended && pos + 8 <= len);
		FUZZ_CHECK(b[pos] == 1 && b[pos + 1] == FCGI_PARAMS);
		FUZZ_CHECK(b[pos + 2] == 0 && b[pos + 3] == 7);
		FUZZ_CHECK(b[pos + 6] == 0 && b[pos + 7] == 0);
		clen = (size_t)b[pos + 4] << 8 | b[pos + 5];
		pos += 8;
		FUZZ_CHECK(pos + clen <= len);
		ended = clen == 0;
		memcpy(stream + slen, b + pos, clen);
		slen += clen;
		pos += clen;
	}
	FUZZ_CHECK(ended);
	return slen;
}

static void
decode_check(const struct pairs *ps, const unsigned char *stream,
    size_t slen, bool http)
{
	size_t pos = 0, i, j, nl, vl;
	unsigned char c;

	for (i = 0; i < ps->n; i++) {
		FUZZ_CHECK(pos < slen);
		nl = get_len(stream, &pos);
		vl = get_len(stream, &pos);
		FUZZ_CHECK(vl == ps->vlen[i] && pos + nl + vl <= slen);
		if (http && (i & 1)) {
			FUZZ_CHECK(nl == ps->nlen[i] + 5);
			FUZZ_CHECK(memcmp(stream + pos, "HTTP_", 5) == 0);
			for (j = 0; j < ps->nlen[i]; j++) {
				c = (unsigned char)ps->name[i][j];
				FUZZ_CHECK(stream[pos + 5 + j] ==
				    (c == '-' ? '_' : c >= 'a' && c <= 'z' ?
				    c - 32 : c));
			}
		} else {
			FUZZ_CHECK(nl == ps->nlen[i]);
			FUZZ_CHECK(memcmp(stream + pos, ps->name[i], nl) == 0);
		}
		FUZZ_CHECK(memcmp(stream + pos + nl, ps->value[i], vl) == 0);
		pos += nl + vl;
	}
	FUZZ_CHECK(pos == slen);
}

static void
params(const char *s, size_t n, bool http)
{
	const unsigned char *u = (const unsigned char *)s;
	struct fcgi_params w;
	struct pairs ps;
	size_t pos = 0, len, len2, slen;
	unsigned char *stream;
	char *out;

	ps.n = 0;
	while (ps.n < 64 && pos + 2 <= n) {
		ps.nlen[ps.n] = u[pos];
		ps.vlen[ps.n] = (size_t)u[pos + 1] * 300;
		pos += 2;
		if (ps.nlen[ps.n] > n - pos)
			ps.nlen[ps.n] = n - pos;
		ps.name[ps.n] = s + pos;
		pos += ps.nlen[ps.n];
		if (ps.vlen[ps.n] > n - pos)
			ps.vlen[ps.n] = n - pos;
		ps.value[ps.n] = s + pos;
		pos += ps.vlen[ps.n];
		ps.n++;
	}
	fcgi_params_init(&w, NULL, 7);
	write_pairs(&w, &ps, http);
	len = fcgi_params_end(&w);
	out = malloc(len);
	stream = malloc(len);
	FUZZ_CHECK(out != NULL && stream != NULL);
	fcgi_params_init(&w, out, 7);
	write_pairs(&w, &ps, http);
	len2 = fcgi_params_end(&w);
	FUZZ_CHECK(len2 == len);
	slen = join((const unsigned char *)out, len, stream);
	decode_check(&ps, stream, slen, http);
	free(out);
	free(stream);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_split split;

	if (size < 3)
		return 0;
	fuzz_split_init(&split, data[1], data[2]);
	if (data[0] & 1)
		params((const char *)data + 3, size - 3, data[0] & 2);
	else
		records((const char *)data + 3, size - 3, &split);
	return 0;
}

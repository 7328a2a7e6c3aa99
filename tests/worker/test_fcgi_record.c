/*
 * FastCGI records: the bytes of BEGIN_REQUEST, PARAMS and STDIN, and the
 * parser of STDOUT, STDERR and END_REQUEST, whole and a byte at a time.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/fcgi_record.h"

#define ID	1

/* A string literal with its length, NUL bytes included. */
#define LIT(s)	(s), sizeof(s) - 1

/* Record builders for the parser's input. */
#define HDR(type, id, len, pad)						\
	"\x01" type "\x00" id "\x00" len pad "\x00"
#define STDOUT_REC	"\x06"
#define STDERR_REC	"\x07"
#define END_REC		"\x03"
#define END_OK		HDR(END_REC, "\x01", "\x08", "\x00")		\
	"\x00\x00\x00\x00\x00\x00\x00\x00"

Test(fcgi, type_names)
{
	cr_assert_str_eq(fcgi_type_name(FCGI_STDOUT), "STDOUT");
	cr_assert_str_eq(fcgi_type_name(FCGI_GET_VALUES_RESULT),
	    "GET_VALUES_RESULT");
	cr_assert_null(fcgi_type_name(0));
	cr_assert_null(fcgi_type_name(12));
}

Test(fcgi, begin_request)
{
	char out[FCGI_BEGIN_LEN];

	fcgi_begin_request(out, 0x1234, true);
	cr_assert_eq(memcmp(out, "\x01\x01\x12\x34\x00\x08\x00\x00"
	    "\x00\x01\x01\x00\x00\x00\x00\x00", 16), 0);
	fcgi_begin_request(out, 1, false);
	cr_assert_eq(memcmp(out, "\x01\x01\x00\x01\x00\x08\x00\x00"
	    "\x00\x01\x00\x00\x00\x00\x00\x00", 16), 0);
}

Test(fcgi, stdin_records)
{
	char out[FCGI_HEADER_LEN];

	cr_assert_eq(fcgi_stdin_header(out, 7, 100000), 65535);
	cr_assert_eq(memcmp(out, "\x01\x05\x00\x07\xff\xff\x00\x00", 8), 0);
	cr_assert_eq(fcgi_stdin_header(out, 7, 300), 300);
	cr_assert_eq(memcmp(out, "\x01\x05\x00\x07\x01\x2c\x00\x00", 8), 0);
	cr_assert_eq(fcgi_stdin_header(out, 7, 0), 0);
	cr_assert_eq(memcmp(out, "\x01\x05\x00\x07\x00\x00\x00\x00", 8), 0);
}

/* A decoded PARAMS stream: its pairs and where each began. */
struct pair {
	char *name, *value;
	size_t nlen, vlen;
	int first_rec, last_rec;	/* records it lies in */
};

struct decoded {
	struct pair pairs[64];
	int npairs;
	int nrecs;			/* with content */
	bool ended;			/* the empty record came last */
};

/* Reads a pair length from the stream at *pos. */
static size_t
read_len(const unsigned char *s, size_t *pos)
{
	size_t n;

	if (s[*pos] < 128)
		return s[(*pos)++];
	n = (size_t)(s[*pos] & 0x7f) << 24 | (size_t)s[*pos + 1] << 16 |
	    (size_t)s[*pos + 2] << 8 | s[*pos + 3];
	*pos += 4;
	return n;
}

/* Splits PARAMS records, checks their headers, and decodes the pairs. */
static void
decode_params(const char *buf, size_t len, struct decoded *d)
{
	const unsigned char *b = (const unsigned char *)buf;
	unsigned char *stream = malloc(len);
	int *rec_of = malloc(len * sizeof(int));
	size_t pos = 0, slen = 0, clen, i, s;

	memset(d, 0, sizeof(*d));
	while (pos < len) {
		cr_assert(!d->ended, "a record after the empty one");
		cr_assert_leq(pos + 8, len);
		cr_assert_eq(b[pos], 1);
		cr_assert_eq(b[pos + 1], FCGI_PARAMS);
		cr_assert_eq(b[pos + 2] << 8 | b[pos + 3], ID);
		clen = (size_t)b[pos + 4] << 8 | b[pos + 5];
		cr_assert_eq(b[pos + 6], 0);
		pos += 8;
		cr_assert_leq(pos + clen, len);
		if (clen == 0)
			d->ended = true;
		for (i = 0; i < clen; i++) {
			rec_of[slen] = d->nrecs;
			stream[slen++] = b[pos + i];
		}
		if (clen > 0)
			d->nrecs++;
		pos += clen;
	}
	for (s = 0; s < slen; ) {
		struct pair *p = &d->pairs[d->npairs++];
		size_t start = s;

		cr_assert_leq(d->npairs, 64);
		p->nlen = read_len(stream, &s);
		p->vlen = read_len(stream, &s);
		cr_assert_leq(s + p->nlen + p->vlen, slen);
		p->name = malloc(p->nlen + 1);
		p->value = malloc(p->vlen + 1);
		memcpy(p->name, stream + s, p->nlen);
		p->name[p->nlen] = '\0';
		memcpy(p->value, stream + s + p->nlen, p->vlen);
		p->value[p->vlen] = '\0';
		s += p->nlen + p->vlen;
		p->first_rec = rec_of[start];
		p->last_rec = rec_of[s - 1];
	}
	free(stream);
	free(rec_of);
}

static void
free_decoded(struct decoded *d)
{
	int i;

	for (i = 0; i < d->npairs; i++) {
		free(d->pairs[i].name);
		free(d->pairs[i].value);
	}
}

/* Runs the same calls counting, then writing; both must agree. */
typedef void (*params_fn)(struct fcgi_params *);

static char *
build_params(params_fn fn, size_t *lenp)
{
	struct fcgi_params w;
	size_t n;
	char *out;

	fcgi_params_init(&w, NULL, ID);
	fn(&w);
	n = fcgi_params_end(&w);
	out = malloc(n);
	fcgi_params_init(&w, out, ID);
	fn(&w);
	cr_assert_eq(fcgi_params_end(&w), n, "counted and written differ");
	*lenp = n;
	return out;
}

static void
few_pairs(struct fcgi_params *w)
{
	struct span pieces[] = { { "/var/www", 8 }, { "/index.php", 10 } };
	struct span ua = { "curl/8", 6 };

	cr_assert(fcgi_params_str(w, "REQUEST_METHOD", "GET"));
	cr_assert(fcgi_params_add(w, "SCRIPT_FILENAME", 15, false, pieces, 2));
	cr_assert(fcgi_params_add(w, "User-Agent", 10, true, &ua, 1));
	cr_assert(fcgi_params_str(w, "CONTENT_LENGTH", ""));
}

Test(fcgi, params_few)
{
	struct decoded d;
	size_t len;
	char *buf = build_params(few_pairs, &len);

	decode_params(buf, len, &d);
	cr_assert(d.ended);
	cr_assert_eq(d.nrecs, 1);
	cr_assert_eq(d.npairs, 4);
	cr_assert_str_eq(d.pairs[0].name, "REQUEST_METHOD");
	cr_assert_str_eq(d.pairs[0].value, "GET");
	cr_assert_str_eq(d.pairs[1].name, "SCRIPT_FILENAME");
	cr_assert_str_eq(d.pairs[1].value, "/var/www/index.php");
	cr_assert_str_eq(d.pairs[2].name, "HTTP_USER_AGENT");
	cr_assert_str_eq(d.pairs[2].value, "curl/8");
	cr_assert_str_eq(d.pairs[3].name, "CONTENT_LENGTH");
	cr_assert_str_eq(d.pairs[3].value, "");
	/* One byte lengths: 14, 3, then the name. */
	cr_assert_eq(memcmp(buf + 8, "\x0e\x03REQUEST_METHODGET", 19), 0);
	free_decoded(&d);
	free(buf);
}

Test(fcgi, params_empty_stream)
{
	struct fcgi_params w;
	char out[8];

	fcgi_params_init(&w, out, ID);
	cr_assert_eq(fcgi_params_end(&w), 8);
	cr_assert_eq(memcmp(out, "\x01\x04\x00\x01\x00\x00\x00\x00", 8), 0);
}

static char big[200000];

static void
long_lengths(struct fcgi_params *w)
{
	struct span v = { big, 128 }, v2 = { big, 127 };

	cr_assert(fcgi_params_add(w, big, 200, false, &v, 1));
	cr_assert(fcgi_params_add(w, "N", 1, false, &v2, 1));
}

Test(fcgi, params_four_byte_lengths)
{
	struct decoded d;
	size_t len;
	char *buf;

	memset(big, 'x', sizeof(big));
	buf = build_params(long_lengths, &len);
	/* 200 and 128 take four bytes each, 1 and 127 one each. */
	cr_assert_eq(memcmp(buf + 8, "\x80\x00\x00\xc8\x80\x00\x00\x80", 8),
	    0);
	decode_params(buf, len, &d);
	cr_assert_eq(d.npairs, 2);
	cr_assert_eq(d.pairs[0].nlen, 200);
	cr_assert_eq(d.pairs[0].vlen, 128);
	cr_assert_eq(d.pairs[1].vlen, 127);
	cr_assert_eq(len, 8 + 8 + 200 + 128 + 2 + 1 + 127 + 8);
	free_decoded(&d);
	free(buf);
}

/* Ten pairs of 10,000 bytes: records close before a pair would split. */
static void
many_pairs(struct fcgi_params *w)
{
	struct span v = { big, 10000 };
	char name[16];
	int i;

	for (i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "P%d", i);
		cr_assert(fcgi_params_add(w, name, strlen(name), false, &v,
		    1));
	}
}

Test(fcgi, params_pairs_stay_whole)
{
	struct decoded d;
	size_t len;
	char *buf;
	int i;

	memset(big, 'y', sizeof(big));
	buf = build_params(many_pairs, &len);
	decode_params(buf, len, &d);
	cr_assert(d.ended);
	cr_assert_eq(d.npairs, 10);
	cr_assert_eq(d.nrecs, 2);
	for (i = 0; i < 10; i++) {
		cr_assert_eq(d.pairs[i].first_rec, d.pairs[i].last_rec,
		    "pair %d split between records", i);
		cr_assert_eq(d.pairs[i].vlen, 10000);
	}
	free_decoded(&d);
	free(buf);
}

/* One pair larger than a record must spread over several. */
static void
huge_pair(struct fcgi_params *w)
{
	struct span v = { big, 150000 }, s = { "v", 1 };

	cr_assert(fcgi_params_add(w, "A", 1, false, &s, 1));
	cr_assert(fcgi_params_add(w, "HUGE", 4, false, &v, 1));
	cr_assert(fcgi_params_add(w, "B", 1, false, &s, 1));
}

Test(fcgi, params_huge_pair)
{
	struct decoded d;
	size_t len;
	char *buf;

	memset(big, 'z', sizeof(big));
	buf = build_params(huge_pair, &len);
	decode_params(buf, len, &d);
	cr_assert_eq(d.npairs, 3);
	cr_assert_eq(d.nrecs, 3);
	cr_assert_str_eq(d.pairs[1].name, "HUGE");
	cr_assert_eq(d.pairs[1].vlen, 150000);
	cr_assert_eq(d.pairs[1].value[149999], 'z');
	cr_assert_str_eq(d.pairs[2].name, "B");
	free_decoded(&d);
	free(buf);
}

/*
 * A writer with less room than the list counts it all the same and
 * writes nothing past its room; with room enough it writes what an
 * unbounded writer does (fcgi_params_build writes once into its room).
 */
static void
check_room(params_fn fn, size_t cap)
{
	struct fcgi_params w;
	size_t n, full;
	char *ref = build_params(fn, &full), *out = malloc(full + 64);

	memset(out, 0x5a, full + 64);
	fcgi_params_init(&w, out, ID);
	w.cap = cap;
	fn(&w);
	n = fcgi_params_end(&w);
	cr_assert_eq(n, full, "room %zu: counted %zu, not %zu", cap, n, full);
	for (size_t i = cap; i < full + 64; i++)
		cr_assert_eq(out[i], 0x5a, "room %zu: byte %zu written", cap,
		    i);
	if (cap >= full)
		cr_assert_eq(memcmp(out, ref, full), 0);
	free(out);
	free(ref);
}

/* A short pair next to a record filled to 65530 bytes: one that fits
 * the 5 bytes left goes in it, a longer one starts the next record. */
static size_t tail_len;

static void
near_full(struct fcgi_params *w)
{
	struct span v = { big, 65524 }, t = { "xyz", tail_len };

	cr_assert(fcgi_params_add(w, "A", 1, false, &v, 1));
	cr_assert(fcgi_params_add(w, "B", 1, false, &t, 1));
}

Test(fcgi, params_short_pair_at_a_record_end)
{
	struct decoded d;
	size_t len;
	char *buf;

	memset(big, 'y', sizeof(big));
	for (tail_len = 2; tail_len <= 3; tail_len++) {
		buf = build_params(near_full, &len);
		decode_params(buf, len, &d);
		cr_assert(d.ended);
		cr_assert_eq(d.npairs, 2);
		cr_assert_eq(d.nrecs, tail_len == 2 ? 1 : 2);
		cr_assert_eq(d.pairs[1].first_rec, d.pairs[1].last_rec);
		cr_assert_eq(d.pairs[1].vlen, tail_len);
		cr_assert_eq(memcmp(d.pairs[1].value, "xyz", tail_len), 0);
		free_decoded(&d);
		free(buf);
	}
}

Test(fcgi, params_room)
{
	size_t full;
	char *ref = build_params(few_pairs, &full);

	free(ref);
	for (size_t cap = 0; cap <= full + 8; cap++)
		check_room(few_pairs, cap);
	memset(big, 'y', sizeof(big));
	check_room(many_pairs, 0);
	check_room(many_pairs, 65000);
	check_room(many_pairs, 200000);
}

Test(fcgi, params_http_names)
{
	struct fcgi_params w;
	struct span v = { "1", 1 };
	char out[64];
	size_t n;

	fcgi_params_init(&w, out, ID);
	cr_assert(fcgi_params_add(&w, "x-Forwarded-for", 15, true, &v, 1));
	n = fcgi_params_end(&w);
	cr_assert_eq(n, 8 + 2 + 20 + 1 + 8);
	cr_assert_eq(memcmp(out + 10, "HTTP_X_FORWARDED_FOR1", 21), 0);
}

/* Every byte value at every place of names of 1 to 24 bytes, as the byte
 * rule says: the word-at-a-time copy (eight bytes on) agrees with it. */
Test(fcgi, cgi_name_every_byte)
{
	char src[24], dst[32], want;
	size_t n, at, i;
	int b;

	for (n = 1; n <= sizeof(src); n++)
		for (at = 0; at < n; at++)
			for (b = 0; b < 256; b++) {
				for (i = 0; i < n; i++)
					src[i] = "aZ-_9.~zA`{@["[(i * 5 + n) % 13];
				src[at] = (char)b;
				memset(dst, '#', sizeof(dst));
				fcgi_cgi_name(dst, src, n);
				for (i = 0; i < n; i++) {
					want = src[i] >= 'a' && src[i] <= 'z' ?
					    (char)(src[i] - 32) :
					    src[i] == '-' ? '_' : src[i];
					cr_assert_eq(dst[i], want, "n %zu, byte "
					    "%d at %zu: %zu is %d", n, b, at, i,
					    dst[i]);
				}
				cr_assert_eq(dst[n], '#', "wrote past %zu", n);
			}
}

Test(fcgi, params_length_limit)
{
	struct fcgi_params w;
	struct span v[2] = { { big, 0x7ffffff0u }, { big, 0x10 } };

	fcgi_params_init(&w, NULL, ID);
	cr_assert_not(fcgi_params_add(&w, "N", 1, false, v, 2));
	cr_assert_eq(w.len, 0);
	v[1].len = 0xf;
	cr_assert(fcgi_params_add(&w, "N", 1, false, v, 2));
}

/* The parser ---------------------------------------------------------- */

struct outcome {
	char out[256];
	size_t outlen;
	char err[256];
	size_t errlen;
	int end;			/* END events */
	const char *error;
	size_t consumed;
};

/* Appends a piece of a stream (counted whole, kept while it fits). */
static void
keep(char *dst, size_t size, size_t *len, struct span data)
{
	cr_assert_gt(data.len, 0);
	if (*len + data.len <= size)
		memcpy(dst + *len, data.p, data.len);
	*len += data.len;
}

/*
 * Feeds input in pieces of step bytes (0: all at once), each in a buffer
 * of exactly its size, until END, an error or the end of input.
 */
static void
feed(const char *in, size_t len, size_t step, struct outcome *o)
{
	struct fcgi_parser p;
	struct span data;
	size_t pos = 0, n, used;
	char *piece;
	int rc;

	memset(o, 0, sizeof(*o));
	fcgi_parser_init(&p, ID);
	while (pos < len) {
		n = step == 0 || len - pos < step ? len - pos : step;
		piece = malloc(n);
		memcpy(piece, in + pos, n);
		do {
			rc = fcgi_parse(&p, piece, n, &used, &data);
			cr_assert_leq(used, n);
			if (rc == FCGI_R_STDOUT) {
				keep(o->out, sizeof(o->out), &o->outlen, data);
			} else if (rc == FCGI_R_STDERR) {
				keep(o->err, sizeof(o->err), &o->errlen, data);
			} else if (rc == FCGI_R_END) {
				o->end++;
			}
			memmove(piece, piece + used, n - used);
			pos += used;
			o->consumed += used;
			n -= used;
		} while (rc > 0 && rc != FCGI_R_END && n > 0);
		free(piece);
		if (rc == FCGI_R_ERROR) {
			o->error = p.error;
			cr_assert_not_null(fcgi_parse_eof(&p));
			return;
		}
		if (rc == FCGI_R_END) {
			cr_assert(fcgi_parse_done(&p));
			cr_assert_null(fcgi_parse_eof(&p));
			if (pos < len) {
				/* Whatever follows END_REQUEST is an error. */
				rc = fcgi_parse(&p, in + pos, len - pos,
				    &used, &data);
				cr_assert_eq(rc, FCGI_R_ERROR);
				o->error = p.error;
			}
			return;
		}
	}
	if (!fcgi_parse_done(&p))
		o->error = fcgi_parse_eof(&p);
}

/* The outcome must not depend on how the input was cut. */
static void
parse_all_ways(const char *in, size_t len, struct outcome *o)
{
	static const size_t steps[] = { 1, 2, 3, 7, 8, 9, 16 };
	struct outcome o2;
	size_t i;

	feed(in, len, 0, o);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		feed(in, len, steps[i], &o2);
		cr_assert_eq(o2.outlen, o->outlen);
		cr_assert_eq(memcmp(o2.out, o->out, o->outlen), 0);
		cr_assert_eq(o2.errlen, o->errlen);
		cr_assert_eq(memcmp(o2.err, o->err, o->errlen), 0);
		cr_assert_eq(o2.end, o->end);
		cr_assert_eq(o2.error == NULL, o->error == NULL,
		    "step %zu: %s / %s", steps[i], o2.error, o->error);
		if (o->error != NULL)
			cr_assert_str_eq(o2.error, o->error);
	}
}

struct good {
	const char *name;
	const char *in;
	size_t len;
	const char *out;
	const char *err;
	size_t outlen;			/* 0: strlen(out) */
};

static const struct good goods[] = {
	{ "STDOUT, empty STDOUT, END",
	  LIT(HDR(STDOUT_REC, "\x01", "\x05", "\x00") "hello"
	      HDR(STDOUT_REC, "\x01", "\x00", "\x00") END_OK),
	  "hello", "", 0 },
	{ "END without the empty STDOUT",
	  LIT(HDR(STDOUT_REC, "\x01", "\x02", "\x00") "hi" END_OK),
	  "hi", "", 0 },
	{ "STDERR between STDOUT records",
	  LIT(HDR(STDOUT_REC, "\x01", "\x03", "\x00") "abc"
	      HDR(STDERR_REC, "\x01", "\x04", "\x00") "oops"
	      HDR(STDOUT_REC, "\x01", "\x03", "\x00") "def"
	      HDR(STDERR_REC, "\x01", "\x00", "\x00")
	      HDR(STDOUT_REC, "\x01", "\x00", "\x00") END_OK),
	  "abcdef", "oops", 0 },
	{ "padding skipped",
	  LIT(HDR(STDOUT_REC, "\x01", "\x03", "\x05") "abc\0\0\0\0\0"
	      HDR(STDOUT_REC, "\x01", "\x00", "\x07") "PPPPPPP"
	      HDR(END_REC, "\x01", "\x08", "\x08")
	      "\x00\x00\x00\x00\x00\x00\x00\x00" "PADPADPA"),
	  "abc", "", 0 },
	{ "END with an application status",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00")
	      "\x00\x00\x00\xff\x00\x00\x00\x00"),
	  "", "", 0 },
	{ "NUL bytes in STDOUT",
	  LIT(HDR(STDOUT_REC, "\x01", "\x03", "\x00") "\0x\0" END_OK),
	  "\0x\0", "", 3 },
};

Test(fcgi, parse_good)
{
	const struct good *g;
	struct outcome o;
	size_t outlen;

	for (g = goods; g < goods + sizeof(goods) / sizeof(goods[0]); g++) {
		outlen = g->outlen > 0 ? g->outlen : strlen(g->out);
		parse_all_ways(g->in, g->len, &o);
		cr_assert_null(o.error, "%s: %s", g->name, o.error);
		cr_assert_eq(o.end, 1, "%s", g->name);
		cr_assert_eq(o.consumed, g->len, "%s", g->name);
		cr_assert_eq(o.outlen, outlen, "%s", g->name);
		cr_assert_eq(memcmp(o.out, g->out, outlen), 0, "%s", g->name);
		cr_assert_eq(o.errlen, strlen(g->err), "%s", g->name);
		cr_assert_eq(memcmp(o.err, g->err, o.errlen), 0, "%s",
		    g->name);
	}
}

Test(fcgi, parse_status)
{
	struct fcgi_parser p;
	struct span data;
	size_t used;
	static const char in[] = HDR(END_REC, "\x01", "\x08", "\x00")
	    "\x12\x34\x56\x78\x00\x00\x00\x00";

	fcgi_parser_init(&p, ID);
	cr_assert_eq(fcgi_parse(&p, in, 16, &used, &data), FCGI_R_END);
	cr_assert_eq(used, 16);
	cr_assert_eq(p.app_status, 0x12345678u);
	/* Nothing more: AGAIN, and the connection may be reused. */
	cr_assert_eq(fcgi_parse(&p, in, 0, &used, &data), FCGI_R_AGAIN);
	cr_assert(fcgi_parse_done(&p));
}

struct bad {
	const char *name;
	const char *in;
	size_t len;
	const char *error;
};

#define EXPECT(t)	"unexpected " t " record"

static const struct bad bads[] = {
	{ "version 0", LIT("\x00\x06\x00\x01\x00\x01\x00\x00x"),
	  "unsupported FastCGI version" },
	{ "version 2", LIT("\x02\x06\x00\x01\x00\x01\x00\x00x"),
	  "unsupported FastCGI version" },
	{ "type 0", LIT("\x01\x00\x00\x01\x00\x00\x00\x00"),
	  "unknown record type" },
	{ "type 12", LIT("\x01\x0c\x00\x01\x00\x00\x00\x00"),
	  "unknown record type" },
	{ "type 255", LIT("\x01\xff\x00\x01\x00\x00\x00\x00"),
	  "unknown record type" },
	{ "BEGIN_REQUEST", LIT(HDR("\x01", "\x01", "\x08", "\x00")),
	  EXPECT("BEGIN_REQUEST") },
	{ "ABORT_REQUEST", LIT(HDR("\x02", "\x01", "\x00", "\x00")),
	  EXPECT("ABORT_REQUEST") },
	{ "PARAMS", LIT(HDR("\x04", "\x01", "\x00", "\x00")),
	  EXPECT("PARAMS") },
	{ "STDIN", LIT(HDR("\x05", "\x01", "\x00", "\x00")),
	  EXPECT("STDIN") },
	{ "DATA", LIT(HDR("\x08", "\x01", "\x00", "\x00")), EXPECT("DATA") },
	{ "GET_VALUES", LIT(HDR("\x09", "\x01", "\x00", "\x00")),
	  EXPECT("GET_VALUES") },
	{ "GET_VALUES_RESULT", LIT(HDR("\x0a", "\x01", "\x00", "\x00")),
	  EXPECT("GET_VALUES_RESULT") },
	{ "UNKNOWN_TYPE", LIT(HDR("\x0b", "\x01", "\x08", "\x00")),
	  EXPECT("UNKNOWN_TYPE") },
	{ "another request id",
	  LIT(HDR(STDOUT_REC, "\x02", "\x01", "\x00") "x"),
	  "record for another request id" },
	{ "request id 256 + 1",
	  LIT("\x01\x06\x01\x01\x00\x01\x00\x00x"),
	  "record for another request id" },
	{ "a management record",
	  LIT(HDR("\x0b", "\x00", "\x08", "\x00")),
	  "management record during a request" },
	{ "END_REQUEST of 7 bytes",
	  LIT(HDR(END_REC, "\x01", "\x07", "\x00") "\0\0\0\0\0\0\0"),
	  "END_REQUEST record of a wrong length" },
	{ "END_REQUEST of 9 bytes",
	  LIT(HDR(END_REC, "\x01", "\x09", "\x00") "\0\0\0\0\0\0\0\0\0"),
	  "END_REQUEST record of a wrong length" },
	{ "END_REQUEST of 0 bytes",
	  LIT(HDR(END_REC, "\x01", "\x00", "\x00")),
	  "END_REQUEST record of a wrong length" },
	{ "CANT_MPX_CONN",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00") "\0\0\0\0\x01\0\0\0"),
	  "application cannot multiplex connections" },
	{ "OVERLOADED",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00") "\0\0\0\0\x02\0\0\0"),
	  "application overloaded" },
	{ "UNKNOWN_ROLE",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00") "\0\0\0\0\x03\0\0\0"),
	  "application does not know the responder role" },
	{ "protocol status 4",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00") "\0\0\0\0\x04\0\0\0"),
	  "unknown protocol status in END_REQUEST" },
	{ "STDOUT after the empty STDOUT",
	  LIT(HDR(STDOUT_REC, "\x01", "\x00", "\x00")
	      HDR(STDOUT_REC, "\x01", "\x01", "\x00") "x"),
	  "STDOUT record after the end of STDOUT" },
	{ "two empty STDOUT records",
	  LIT(HDR(STDOUT_REC, "\x01", "\x00", "\x00")
	      HDR(STDOUT_REC, "\x01", "\x00", "\x00")),
	  "STDOUT record after the end of STDOUT" },
	{ "STDERR after the empty STDERR",
	  LIT(HDR(STDERR_REC, "\x01", "\x00", "\x00")
	      HDR(STDERR_REC, "\x01", "\x01", "\x00") "x"),
	  "STDERR record after the end of STDERR" },
	{ "STDOUT after END_REQUEST",
	  LIT(END_OK HDR(STDOUT_REC, "\x01", "\x01", "\x00") "x"),
	  "data after END_REQUEST" },
	{ "one byte after END_REQUEST",
	  LIT(END_OK "\x01"), "data after END_REQUEST" },
	{ "closed before any record", LIT(""),
	  "connection closed before END_REQUEST" },
	{ "closed after STDOUT",
	  LIT(HDR(STDOUT_REC, "\x01", "\x01", "\x00") "x"),
	  "connection closed before END_REQUEST" },
	{ "closed in a header", LIT("\x01\x06\x00"),
	  "connection closed in the middle of a record" },
	{ "content length past the end",
	  LIT(HDR(STDOUT_REC, "\x01", "\x10", "\x00") "short"),
	  "connection closed in the middle of a record" },
	{ "padding past the end",
	  LIT(HDR(STDOUT_REC, "\x01", "\x01", "\x10") "x" "\0\0"),
	  "connection closed in the middle of a record" },
	{ "END_REQUEST cut short",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x00") "\0\0\0"),
	  "connection closed in the middle of a record" },
	{ "END_REQUEST padding cut short",
	  LIT(HDR(END_REC, "\x01", "\x08", "\x04") "\0\0\0\0\0\0\0\0\0"),
	  "connection closed in the middle of a record" },
};

Test(fcgi, parse_bad)
{
	const struct bad *b;
	struct outcome o;

	for (b = bads; b < bads + sizeof(bads) / sizeof(bads[0]); b++) {
		parse_all_ways(b->in, b->len, &o);
		cr_assert_not_null(o.error, "%s: no error", b->name);
		cr_assert_str_eq(o.error, b->error, "%s", b->name);
	}
}

Test(fcgi, error_is_sticky)
{
	struct fcgi_parser p;
	struct span data;
	size_t used;

	fcgi_parser_init(&p, ID);
	cr_assert_eq(fcgi_parse(&p, "\x02\x06\x00\x01\x00\x00\x00\x00", 8,
	    &used, &data), FCGI_R_ERROR);
	cr_assert_eq(fcgi_parse(&p, LIT(HDR(STDOUT_REC, "\x01", "\x00",
	    "\x00")), &used, &data), FCGI_R_ERROR);
	cr_assert_eq(used, 0);
	cr_assert_str_eq(fcgi_parse_eof(&p), "unsupported FastCGI version");
}

/* What the writer makes for STDIN is what a parser of its kind reads. */
Test(fcgi, stdout_in_large_records)
{
	static char in[2 * (8 + 65535) + 16];
	struct outcome o;
	size_t pos = 0;
	int i;

	for (i = 0; i < 2; i++) {
		fcgi_header(in + pos, FCGI_STDOUT, ID, 65535);
		pos += 8;
		memset(in + pos, 'a' + i, 65535);
		pos += 65535;
	}
	memcpy(in + pos, END_OK, 16);
	pos += 16;
	feed(in, pos, 0, &o);
	cr_assert_null(o.error);
	cr_assert_eq(o.end, 1);
	cr_assert_eq(o.consumed, pos);
	cr_assert_eq(o.outlen, 2 * 65535);
}

/* A piece given back comes again, padding and all that follows intact. */
Test(fcgi, unread)
{
	static const char in[] = HDR(STDOUT_REC, "\x01", "\x06", "\x02")
	    "headbo" "PP" HDR(STDOUT_REC, "\x01", "\x02", "\x00") "dy"
	    END_OK;
	struct fcgi_parser p;
	struct span data;
	size_t used, pos = 0;
	int rc;

	fcgi_parser_init(&p, ID);
	rc = fcgi_parse(&p, in, sizeof(in) - 1, &used, &data);
	cr_assert_eq(rc, FCGI_R_STDOUT);
	cr_assert_eq(data.len, 6);
	/* "head" was the caller's; "bo" goes back. */
	fcgi_parse_unread(&p, 2);
	pos = used - 2;
	rc = fcgi_parse(&p, in + pos, sizeof(in) - 1 - pos, &used, &data);
	cr_assert_eq(rc, FCGI_R_STDOUT);
	cr_assert_eq(data.len, 2);
	cr_assert_eq(memcmp(data.p, "bo", 2), 0);
	pos += used;
	rc = fcgi_parse(&p, in + pos, sizeof(in) - 1 - pos, &used, &data);
	cr_assert_eq(rc, FCGI_R_STDOUT);
	cr_assert_eq(memcmp(data.p, "dy", 2), 0);
	pos += used;
	rc = fcgi_parse(&p, in + pos, sizeof(in) - 1 - pos, &used, &data);
	cr_assert_eq(rc, FCGI_R_END);
	cr_assert_eq(pos + used, sizeof(in) - 1);
}

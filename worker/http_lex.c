/*
 * The lexical pieces shared by the request and response parsers.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "worker/http_lex.h"

/* The combinations that occur, short enough for a 16-column table. */
#define NO	0				/* CTL, DEL */
#define WS	(C_VALUE | C_WS)		/* SP, HTAB */
#define OB	C_VALUE				/* obs-text */
#define HS	(C_TCHAR | C_VALUE)		/* '#' */
#define PS	(C_TARGET | C_VALUE)		/* / ? */
#define DL	(PS | C_PATH)			/* other delimiters */
#define SD	(DL | C_HOST)			/* ( ) , ; = */
#define PC	(C_TCHAR | C_TARGET | C_VALUE)	/* % */
#define TO	(PC | C_PATH)			/* ^ ` | */
#define TH	(TO | C_HOST)			/* letters ! - . */
#define HX	(TH | C_HEX)			/* A-F a-f */
#define DG	(HX | C_DIGIT)			/* 0-9 */

const uint8_t http_cls[256] = {
	/* 0x00 */
	NO, NO, NO, NO, NO, NO, NO, NO, NO, WS, NO, NO, NO, NO, NO, NO,
	/* 0x10 */
	NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO, NO,
	/* SP !  "  #  $  %  &  '  (  )  *  +  ,  -  .  / */
	WS, TH, DL, HS, TH, PC, TH, TH, SD, SD, TH, TH, SD, TH, TH, PS,
	/* 0  1  2  3  4  5  6  7  8  9  :  ;  <  =  >  ? */
	DG, DG, DG, DG, DG, DG, DG, DG, DG, DG, DL, SD, DL, SD, DL, PS,
	/* @  A  B  C  D  E  F  G  H  I  J  K  L  M  N  O */
	DL, HX, HX, HX, HX, HX, HX, TH, TH, TH, TH, TH, TH, TH, TH, TH,
	/* P  Q  R  S  T  U  V  W  X  Y  Z  [  \  ]  ^  _ */
	TH, TH, TH, TH, TH, TH, TH, TH, TH, TH, TH, DL, DL, DL, TO, TH,
	/* `  a  b  c  d  e  f  g  h  i  j  k  l  m  n  o */
	TO, HX, HX, HX, HX, HX, HX, TH, TH, TH, TH, TH, TH, TH, TH, TH,
	/* p  q  r  s  t  u  v  w  x  y  z  {  |  }  ~  DEL */
	TH, TH, TH, TH, TH, TH, TH, TH, TH, TH, TH, DL, TO, DL, TH, NO,
	/* 0x80-0xff: obs-text */
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
	OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB, OB,
};

#undef NO
#undef WS
#undef OB
#undef HS
#undef PS
#undef DL
#undef PC
#undef SD
#undef TO
#undef TH
#undef HX
#undef DG

bool
http_span_ieq(struct span s, const char *lc)
{
	size_t n = strlen(lc);

	return s.len == n && http_ieq(s.p, lc, n);
}

bool
http_list_next(const char **pp, const char *end, struct span *e)
{
	const char *p = *pp, *s;

	while (p < end && (*p == ',' || IS(*p, C_WS)))
		p++;
	if (p == end)
		return false;
	s = p;
	while (p < end && *p != ',')
		p++;
	*pp = p;
	while (IS(p[-1], C_WS))
		p--;
	e->p = s;
	e->len = (size_t)(p - s);
	return true;
}

size_t
http_token_len(struct span s)
{
	size_t i;

	for (i = 0; i < s.len && IS(s.p[i], C_TCHAR); i++)
		;
	return i;
}

/* Counted first, then written from the end two digits at a time: no
 * copy (a port, a length: a few per request). */
size_t
http_u64(char *dst, uint64_t v)
{
	static const char two[200] =
	    "0001020304050607080910111213141516171819"
	    "2021222324252627282930313233343536373839"
	    "4041424344454647484950515253545556575859"
	    "6061626364656667686970717273747576777879"
	    "8081828384858687888990919293949596979899";
	static const uint64_t pow10[19] = {
		10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
		10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
		100000000000ULL, 1000000000000ULL, 10000000000000ULL,
		100000000000000ULL, 1000000000000000ULL,
		10000000000000000ULL, 100000000000000000ULL,
		1000000000000000000ULL, 10000000000000000000ULL
	};
	size_t n = 1, i;
	char *p;

	while (n < 20 && v >= pow10[n - 1])
		n++;
	p = dst + n;
	while (v >= 100) {
		i = (size_t)(v % 100) * 2;
		v /= 100;
		p -= 2;
		p[0] = two[i];
		p[1] = two[i + 1];
	}
	if (v >= 10) {
		p[-2] = two[v * 2];
		p[-1] = two[v * 2 + 1];
	} else {
		p[-1] = (char)('0' + v);
	}
	return n;
}

size_t
http_chunk_line(char *dst, uint64_t len)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[16], *p = tmp + sizeof(tmp);
	size_t n;

	do
		*--p = hex[len & 15];
	while ((len >>= 4) != 0);
	n = (size_t)(tmp + sizeof(tmp) - p);
	memcpy(dst, p, n);
	dst[n] = '\r';
	dst[n + 1] = '\n';
	return n + 2;
}

int
http_decimal(struct span v, int64_t *out)
{
	int64_t n = 0;
	size_t i;
	int d;

	if (v.len == 0)
		return -1;
	for (i = 0; i < v.len; i++) {
		if (!IS(v.p[i], C_DIGIT))
			return -1;
		d = v.p[i] - '0';
		if (n > (INT64_MAX - d) / 10)
			return -2;
		n = n * 10 + d;
	}
	*out = n;
	return 0;
}

const char *
http_content_length(struct span v, int64_t *cl)
{
	int64_t n;

	if (*cl != -1)
		return "duplicate Content-Length";
	if (v.len == 0)
		return "empty Content-Length";
	switch (http_decimal(v, &n)) {
	case -1:
		return "invalid Content-Length";
	case -2:
		return "Content-Length too large";
	}
	*cl = n;
	return NULL;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define VALUE_WORDS	1
/*
 * How many of the eight bytes at p, up to the first that is not, are
 * field-value bytes other than HTAB: not below 0x20 and not 0x7f.  A
 * byte below n sets its top bit in x - n*0x01..01 and not in x; a borrow
 * runs up only from a byte that is itself below n, so the lowest bit set
 * is the first such byte, exactly (the same for the zero bytes of
 * x ^ 0x7f..7f, the DELs).
 */
static inline size_t
value_run8(const char *p)
{
	const uint64_t ones = 0x0101010101010101u, tops = ones << 7;
	uint64_t x, d, m;

	memcpy(&x, p, 8);
	d = x ^ ones * 0x7f;
	m = (((x - ones * 0x20) & ~x) | ((d - ones) & ~d)) & tops;
	return m == 0 ? 8 : (size_t)__builtin_ctzll(m) / 8;
}
#else
#define VALUE_WORDS	0
#endif

/*
 * One field line; with lf, a bare LF may end it as well as CRLF (CGI);
 * end, when not NULL, bounds the block for the word-wide scan.  Inlined
 * into its callers, so each keeps only its own tests.
 */
static inline const char *
field_line(const char **pp, const char *end, struct http_header *h, bool lf)
{
	const char *p = *pp, *v, *e;
#if VALUE_WORDS
	size_t n;
#endif

	if (IS(*p, C_WS))
		return "obs-fold in header";
	h->name.p = p;
	while (IS(*p, C_TCHAR))
		p++;
	h->name.len = (size_t)(p - h->name.p);
	if (*p != ':') {
		if (IS(*p, C_WS))
			return "whitespace before colon";
		if (*p == '\r' || (lf && *p == '\n'))
			return "missing colon in header";
		return "invalid character in field name";
	}
	if (h->name.len == 0)
		return "empty field name";

	p++;
	while (IS(*p, C_WS))
		p++;
	v = p;
	/* Values are the longest runs a request has: a word at a time
	 * where the block has one, then four bytes at a time. */
#if VALUE_WORDS
	while (end != NULL && end - p >= 8) {
		n = value_run8(p);
		p += n;
		if (n < 8)
			break;
	}
#endif
	while (IS(p[0], C_VALUE) && IS(p[1], C_VALUE) &&
	    IS(p[2], C_VALUE) && IS(p[3], C_VALUE))
		p += 4;
	while (IS(*p, C_VALUE))
		p++;
	e = p;
	if (*p == '\r')
		p++;
	else if (!lf || *p != '\n')
		return "invalid character in field value";
	for (; e > v && IS(e[-1], C_WS); e--)
		;
	h->value.p = v;
	h->value.len = (size_t)(e - v);
	*pp = p + 1;
	return NULL;
}

const char *
http_field_line(const char **pp, struct http_header *h)
{
	return field_line(pp, NULL, h, false);
}

const char *
http_field_line_in(const char **pp, const char *end, struct http_header *h)
{
	return field_line(pp, end, h, false);
}

const char *
http_field_line_lf(const char **pp, struct http_header *h)
{
	return field_line(pp, NULL, h, true);
}

const char *
http_connection(struct span v, bool *close, bool *keepalive, bool *other)
{
	const char *p = v.p, *end = v.p + v.len;
	struct span e;

	while (http_list_next(&p, end, &e)) {
		if (http_token_len(e) != e.len)
			return "invalid Connection";
		if (http_span_ieq(e, "close"))
			*close = true;
		else if (http_span_ieq(e, "keep-alive"))
			*keepalive = true;
		else
			*other = true;
	}
	return NULL;
}

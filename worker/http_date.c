/*
 * HTTP dates (RFC 9110 section 5.6.7), entity-tags (section 8.8.3) and the
 * conditional requests built on them (section 13).
 *
 * Dates are converted with our own civil calendar arithmetic, so nothing
 * here depends on the locale, on TZ or on timegm().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "worker/http.h"
#include "worker/http_lex.h"

#define SECS_PER_DAY	86400

/* Formatting is total: times outside years 0000-9999 are clamped. */
#define DATE_MIN	(-62167219200LL)	/* 0000-01-01T00:00:00Z */
#define DATE_MAX	253402300799LL		/* 9999-12-31T23:59:59Z */

/* Day 0 of the internal calendar is 0000-03-01, 719468 days before 1970. */
#define DAYS_0000_03_01	719468
#define DAYS_PER_ERA	146097		/* 400 Gregorian years */

static const char *const short_days[7] = {
	"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"
};
static const char *const long_days[7] = {
	"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
	"Saturday"
};
static const char *const months[12] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec"
};

static int64_t
floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static bool
is_leap(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

static int
days_in_month(int64_t y, int m)
{
	static const unsigned char mdays[12] = {
		31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
	};

	return m == 2 && is_leap(y) ? 29 : mdays[m - 1];
}

/*
 * Counting years from March puts the leap day at the end of the year, so
 * the day of the year depends on the month alone: the month lengths from
 * March repeat 31 30 31 30 31, which (153 * m + 2) / 5 reproduces.
 */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	if (m <= 2)
		y--;
	era = floor_div(y, 400);
	yoe = y - era * 400;
	doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * DAYS_PER_ERA + doe - DAYS_0000_03_01;
}

/* The inverse of days_from_civil(). */
static void
civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t z, era, doe, yoe, doy, mp;

	z = days + DAYS_0000_03_01;
	era = floor_div(z, DAYS_PER_ERA);
	doe = z - era * DAYS_PER_ERA;
	/* Undo the leap days of the 4, 100 and 400 year cycles. */
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (yoe * 365 + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static void
put_digits(char *p, int64_t v, int n)
{
	while (n-- > 0) {
		p[n] = (char)('0' + v % 10);
		v /= 10;
	}
}

void
http_date_format(time_t t, char *out)
{
	int64_t v = t, days, secs, y;
	int m, d;

	if (v < DATE_MIN)
		v = DATE_MIN;
	if (v > DATE_MAX)
		v = DATE_MAX;
	days = floor_div(v, SECS_PER_DAY);
	secs = v - days * SECS_PER_DAY;
	civil_from_days(days, &y, &m, &d);

	/* 1970-01-01 was a Thursday; days % 7 is negative before it. */
	memcpy(out, short_days[(days % 7 + 11) % 7], 3);
	memcpy(out + 3, ", ", 2);
	put_digits(out + 5, d, 2);
	out[7] = ' ';
	memcpy(out + 8, months[m - 1], 3);
	out[11] = ' ';
	put_digits(out + 12, y, 4);
	out[16] = ' ';
	put_digits(out + 17, secs / 3600, 2);
	out[19] = ':';
	put_digits(out + 20, secs / 60 % 60, 2);
	out[22] = ':';
	put_digits(out + 23, secs % 60, 2);
	memcpy(out + 25, " GMT", 5);
}

/* The fields a date pattern fills in. */
enum { F_YEAR, F_MON, F_DAY, F_HOUR, F_MIN, F_SEC, F_WDAY, F_COUNT };

/*
 * The three formats of RFC 9110 section 5.6.7, in a little pattern
 * language: %a and %A are short and long day names, %b a month name, %d
 * two digits of day, %e a day as two digits or a space and one digit, %Y a
 * four digit year, %y a two digit year, %H %M %S two digits of time.  Any
 * other character must match itself.
 */
static const char *const date_patterns[] = {
	"%a, %d %b %Y %H:%M:%S GMT",	/* IMF-fixdate */
	"%A, %d-%b-%y %H:%M:%S GMT",	/* obsolete RFC 850 */
	"%a %b %e %H:%M:%S %Y",		/* obsolete asctime() */
};

/* Names are case-sensitive, as the grammar of RFC 9110 requires. */
static const char *
scan_name(const char *p, const char *end, const char *const *names,
    int count, int *out)
{
	size_t n;
	int i;

	for (i = 0; i < count; i++) {
		n = strlen(names[i]);
		if ((size_t)(end - p) >= n && memcmp(p, names[i], n) == 0) {
			*out = i;
			return p + n;
		}
	}
	return NULL;
}

static const char *
scan_digits(const char *p, const char *end, int count, int *out)
{
	int v = 0;

	if (end - p < count)
		return NULL;
	for (; count > 0; count--, p++) {
		if (*p < '0' || *p > '9')
			return NULL;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return p;
}

/* Matches one conversion of a date pattern; NULL when it does not. */
static const char *
scan_conversion(const char *p, const char *end, char conv, int *f)
{
	switch (conv) {
	case 'a':
		return scan_name(p, end, short_days, 7, &f[F_WDAY]);
	case 'A':
		return scan_name(p, end, long_days, 7, &f[F_WDAY]);
	case 'b':
		return scan_name(p, end, months, 12, &f[F_MON]);
	case 'd':
		return scan_digits(p, end, 2, &f[F_DAY]);
	case 'e':
		if (p < end && *p == ' ')
			return scan_digits(p + 1, end, 1, &f[F_DAY]);
		return scan_digits(p, end, 2, &f[F_DAY]);
	case 'Y':
		return scan_digits(p, end, 4, &f[F_YEAR]);
	case 'y':
		return scan_digits(p, end, 2, &f[F_YEAR]);
	case 'H':
		return scan_digits(p, end, 2, &f[F_HOUR]);
	case 'M':
		return scan_digits(p, end, 2, &f[F_MIN]);
	case 'S':
		return scan_digits(p, end, 2, &f[F_SEC]);
	}
	return NULL;
}

/* True when all of p..end matches the pattern. */
static bool
scan_date(const char *p, const char *end, const char *pat, int *f)
{
	for (; *pat != '\0' && p != NULL; pat++) {
		if (*pat == '%')
			p = scan_conversion(p, end, *++pat, f);
		else if (p < end && *p == *pat)
			p++;
		else
			p = NULL;
	}
	return p == end;
}

/*
 * RFC 9110 section 5.6.7: a two digit year more than 50 years in the future
 * is the most recent past year with those digits.  We take the one year
 * with those digits within [now - 49, now + 50].
 */
static int64_t
expand_year(int yy)
{
	int64_t days, y, now;
	int m, d;

	days = floor_div((int64_t)time(NULL), SECS_PER_DAY);
	civil_from_days(days, &now, &m, &d);
	y = now - now % 100 + yy;
	if (y > now + 50)
		y -= 100;
	else if (y <= now - 50)
		y += 100;
	return y;
}

/*
 * The day name is checked for spelling but not against the date, as most
 * servers do.  Dates before 1970 are rejected, since -1 means "invalid".
 */
time_t
http_date_parse(const char *p, size_t len)
{
	int f[F_COUNT] = { 0 };
	int64_t y, v;
	size_t i;

	for (i = 0; i < sizeof(date_patterns) / sizeof(date_patterns[0]); i++)
		if (scan_date(p, p + len, date_patterns[i], f))
			break;
	if (i == sizeof(date_patterns) / sizeof(date_patterns[0]))
		return -1;

	y = i == 1 ? expand_year(f[F_YEAR]) : f[F_YEAR];
	f[F_MON]++;
	if (y < 1970 || f[F_DAY] < 1 ||
	    f[F_DAY] > days_in_month(y, f[F_MON]) ||
	    f[F_HOUR] > 23 || f[F_MIN] > 59 || f[F_SEC] > 60)
		return -1;

	v = days_from_civil(y, f[F_MON], f[F_DAY]) * SECS_PER_DAY +
	    f[F_HOUR] * 3600 + f[F_MIN] * 60 + f[F_SEC];
	if ((int64_t)(time_t)v != v)
		return -1;
	return (time_t)v;
}


static const char *
trim_ows(const char *p, const char *end)
{
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return end;
}

/* etagc: %x21 / %x23-7E / obs-text. */
static bool
is_etagc(unsigned char c)
{
	return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

/*
 * Reads one entity-tag at p.  Returns its end, or NULL when it is
 * malformed; *tag is the opaque-tag with its quotes.
 */
static const char *
read_etag(const char *p, const char *end, struct span *tag, bool *weak)
{
	const char *start;

	*weak = end - p >= 2 && p[0] == 'W' && p[1] == '/';
	if (*weak)
		p += 2;
	if (p == end || *p != '"')
		return NULL;
	start = p++;
	while (p < end && is_etagc((unsigned char)*p))
		p++;
	if (p == end || *p != '"')
		return NULL;
	p++;
	tag->p = start;
	tag->len = (size_t)(p - start);
	return p;
}

static bool
span_eq(struct span a, struct span b)
{
	return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

/*
 * The whole list is parsed even after a match, so that a malformed list
 * never matches, whatever its order.
 */
bool
http_etag_match(const char *list, size_t len, const char *etag,
    size_t etaglen, bool weak)
{
	const char *p, *end;
	struct span mine = { NULL, 0 }, theirs;
	bool mine_weak = false, theirs_weak, have, found = false;

	if (list == NULL)
		return false;
	p = http_skip_ows(list, list + len);
	end = trim_ows(p, list + len);
	if (end - p == 1 && *p == '*')
		return true;

	have = etag != NULL &&
	    read_etag(etag, etag + etaglen, &mine, &mine_weak) ==
	    etag + etaglen;
	for (;;) {
		p = http_skip_ows(p, end);
		if (p < end && *p != ',') {
			p = read_etag(p, end, &theirs, &theirs_weak);
			if (p == NULL)
				return false;
			if (have && span_eq(mine, theirs) &&
			    (weak || (!mine_weak && !theirs_weak)))
				found = true;
			p = http_skip_ows(p, end);
		}
		if (p == end)
			break;
		if (*p++ != ',')
			return false;
	}
	return found;
}

static time_t
span_date(struct span s)
{
	const char *end = trim_ows(s.p, s.p + s.len);
	const char *p = http_skip_ows(s.p, end);

	return http_date_parse(p, (size_t)(end - p));
}

static bool
is_get_or_head(const struct http_request *r)
{
	return r->method == HTTP_M_GET || r->method == HTTP_M_HEAD;
}

/* The order of RFC 9110 section 13.2.2 matters: each step can decide. */
int
http_conditional(const struct http_request *r, const char *etag,
    size_t etaglen, time_t mtime)
{
	time_t t;

	if (r->if_match.p != NULL) {
		if (!http_etag_match(r->if_match.p, r->if_match.len, etag,
		    etaglen, false))
			return 412;
	} else if (r->if_unmodified_since.p != NULL) {
		t = span_date(r->if_unmodified_since);
		if (t != -1 && mtime > t)
			return 412;
	}

	if (r->if_none_match.p != NULL) {
		if (http_etag_match(r->if_none_match.p, r->if_none_match.len,
		    etag, etaglen, true))
			return is_get_or_head(r) ? 304 : 412;
	} else if (r->if_modified_since.p != NULL && is_get_or_head(r)) {
		t = span_date(r->if_modified_since);
		if (t != -1 && mtime <= t)
			return 304;
	}
	return 0;
}

/*
 * If-Range holds one entity-tag, compared strongly, or a date that must be
 * exactly the Last-Modified time (RFC 9110 section 13.1.5).
 */
bool
http_if_range(const struct http_request *r, const char *etag,
    size_t etaglen, time_t mtime)
{
	const char *p, *end;
	struct span tag;
	bool weak;
	time_t t;

	if (r->if_range.p == NULL)
		return true;
	end = trim_ows(r->if_range.p, r->if_range.p + r->if_range.len);
	p = http_skip_ows(r->if_range.p, end);

	/* A date starts with a day name, perhaps "Wed", but never "W/". */
	if (p < end && (*p == '"' || (end - p >= 2 && p[0] == 'W' &&
	    p[1] == '/'))) {
		if (read_etag(p, end, &tag, &weak) != end || weak)
			return false;
		return http_etag_match(p, (size_t)(end - p), etag, etaglen,
		    false);
	}
	t = http_date_parse(p, (size_t)(end - p));
	return t != -1 && t == mtime;
}

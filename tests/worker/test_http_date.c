/*
 * HTTP dates, entity-tags, conditional requests (http_date.c) and MIME
 * types (mime.c): what the static handler will answer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker/http.h"
#include "worker/static.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* 1994-11-06T08:49:37Z, the example of RFC 9110 section 5.6.7. */
#define T1994		784111777
#define D1994		"Sun, 06 Nov 1994 08:49:37 GMT"
#define D1994_BEFORE	"Sun, 06 Nov 1994 08:49:36 GMT"
#define D1994_AFTER	"Sun, 06 Nov 1994 08:49:38 GMT"

static time_t
parse(const char *s)
{
	return http_date_parse(s, strlen(s));
}

/* Formatting. */

static const struct {
	int64_t t;
	const char *s;
} format_cases[] = {
	{ 0, "Thu, 01 Jan 1970 00:00:00 GMT" },
	{ T1994, D1994 },
	{ 951782400, "Tue, 29 Feb 2000 00:00:00 GMT" },
	{ 951868800, "Wed, 01 Mar 2000 00:00:00 GMT" },
	{ 1078056000, "Sun, 29 Feb 2004 12:00:00 GMT" },
	{ 1709251199, "Thu, 29 Feb 2024 23:59:59 GMT" },
	{ 2147483647, "Tue, 19 Jan 2038 03:14:07 GMT" },
	{ 2147483648LL, "Tue, 19 Jan 2038 03:14:08 GMT" },
	{ 4107542399LL, "Sun, 28 Feb 2100 23:59:59 GMT" },
	{ 4107542400LL, "Mon, 01 Mar 2100 00:00:00 GMT" },
	{ 4294967296LL, "Sun, 07 Feb 2106 06:28:16 GMT" },
	{ 253402300799LL, "Fri, 31 Dec 9999 23:59:59 GMT" },
	{ -1, "Wed, 31 Dec 1969 23:59:59 GMT" },
	{ -2208988800LL, "Mon, 01 Jan 1900 00:00:00 GMT" },
	/* Outside years 0000-9999 the output is clamped. */
	{ 253402300800LL, "Fri, 31 Dec 9999 23:59:59 GMT" },
	{ INT64_MAX, "Fri, 31 Dec 9999 23:59:59 GMT" },
	{ -62167219200LL, "Sat, 01 Jan 0000 00:00:00 GMT" },
	{ INT64_MIN, "Sat, 01 Jan 0000 00:00:00 GMT" },
};

Test(http_date, format_known)
{
	char out[HTTP_DATE_LEN + 1];
	size_t i;

	cr_assert_eq(sizeof(time_t), 8, "these tests assume a 64-bit time_t");
	for (i = 0; i < NELEM(format_cases); i++) {
		memset(out, 'x', sizeof(out));
		http_date_format((time_t)format_cases[i].t, out);
		cr_expect_str_eq(out, format_cases[i].s, "%lld",
		    (long long)format_cases[i].t);
		cr_expect_eq(strlen(out), HTTP_DATE_LEN);
	}
}

/* The C library, in the C locale, is the reference for every second. */
Test(http_date, format_matches_libc)
{
	char out[HTTP_DATE_LEN + 1], ref[64];
	struct tm tm;
	int64_t t;
	time_t tt;

	for (t = -2208988800LL; t <= 253402300799LL; t += 9876543) {
		tt = (time_t)t;
		cr_assert_not_null(gmtime_r(&tt, &tm));
		strftime(ref, sizeof(ref), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		http_date_format(tt, out);
		cr_assert_str_eq(out, ref, "%lld", (long long)t);
	}
}

Test(http_date, round_trip)
{
	char out[HTTP_DATE_LEN + 1];
	int64_t t;

	for (t = 0; t <= 253402300799LL; t += 7654321) {
		http_date_format((time_t)t, out);
		cr_assert_eq(parse(out), (time_t)t, "%s", out);
	}
	/* Every second of a leap day and around the turn of a year. */
	for (t = 951782400 - 3; t < 951868800 + 3; t++) {
		http_date_format((time_t)t, out);
		cr_assert_eq(parse(out), (time_t)t, "%s", out);
	}
	for (t = 946684800 - 100; t < 946684800 + 100; t++) {
		http_date_format((time_t)t, out);
		cr_assert_eq(parse(out), (time_t)t, "%s", out);
	}
}

/* Parsing. */

static const struct {
	const char *s;
	int64_t t;			/* -1: invalid */
} parse_cases[] = {
	/* The three formats. */
	{ D1994, T1994 },
	{ "Sun Nov  6 08:49:37 1994", T1994 },
	{ "Sun Nov 06 08:49:37 1994", T1994 },
	{ "Wed Nov 16 08:49:37 1994", T1994 + 10 * 86400 },
	{ "Thu, 01 Jan 1970 00:00:00 GMT", 0 },
	{ "Tue, 29 Feb 2000 00:00:00 GMT", 951782400 },
	{ "Tue, 19 Jan 2038 03:14:08 GMT", 2147483648LL },
	{ "Fri, 31 Dec 9999 23:59:59 GMT", 253402300799LL },
	{ "Thu Feb 29 12:00:00 2024", 1709208000 },
	/* A leap second is the first second of the next minute. */
	{ "Sun, 06 Nov 1994 08:49:60 GMT", T1994 + 23 },
	/* The day name is not checked against the date. */
	{ "Mon, 06 Nov 1994 08:49:37 GMT", T1994 },

	/* Out of range fields. */
	{ "Sun, 00 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 32 Oct 1994 08:49:37 GMT", -1 },
	{ "Sun, 31 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 31 Apr 1994 08:49:37 GMT", -1 },
	{ "Sun, 29 Feb 2021 08:49:37 GMT", -1 },
	{ "Mon, 29 Feb 2100 00:00:00 GMT", -1 },
	{ "Sun, 06 Nov 1994 24:00:00 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:60:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:49:61 GMT", -1 },
	{ "Thu Feb 30 12:00:00 2024", -1 },
	{ "Sun Nov  0 08:49:37 1994", -1 },
	/* Before 1970, since -1 is the error value. */
	{ "Wed, 31 Dec 1969 23:59:59 GMT", -1 },
	{ "Mon, 01 Jan 1900 00:00:00 GMT", -1 },

	/* Names are case-sensitive. */
	{ "sun, 06 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 NOV 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:49:37 gmt", -1 },
	{ "Xyz, 06 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 Now 1994 08:49:37 GMT", -1 },

	/* Each format, exactly. */
	{ "Sunday, 06 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06-Nov-94 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 94 08:49:37 GMT", -1 },
	{ "Sun, 6 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun,06 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun,  06 Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 8:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:49 GMT", -1 },
	{ "Sun, 06 Nov 01994 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:49:37 UTC", -1 },
	{ "Sun, 06 Nov 1994 08:49:37 +0000", -1 },
	{ "Sun, 06 Nov 1994 08:49:37", -1 },
	{ "Sun Nov 6 08:49:37 1994", -1 },
	{ "Sun Nov  6 08:49:37 94", -1 },
	{ "Sun Nov  6 08:49:37 1994 GMT", -1 },
	{ "Sun, 0a Nov 1994 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 19a4 08:49:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:-9:37 GMT", -1 },
	{ "Sun, 06 Nov 1994 08:49:+7 GMT", -1 },
	{ "2024-02-29T12:00:00Z", -1 },
	{ "784111777", -1 },
	{ "", -1 },

	/* Trailing or leading garbage. */
	{ D1994 " ", -1 },
	{ " " D1994, -1 },
	{ D1994 ",", -1 },
	{ D1994 "x", -1 },
	{ D1994 ", " D1994, -1 },
	{ "Sun Nov  6 08:49:37 19945", -1 },
};

Test(http_date, parse_table)
{
	size_t i;

	for (i = 0; i < NELEM(parse_cases); i++)
		cr_expect_eq(parse(parse_cases[i].s), (time_t)parse_cases[i].t,
		    "\"%s\": %lld, expected %lld", parse_cases[i].s,
		    (long long)parse(parse_cases[i].s),
		    (long long)parse_cases[i].t);
}

Test(http_date, parse_uses_length)
{
	const char v[] = D1994 "\0garbage";

	cr_expect_eq(http_date_parse(v, strlen(D1994)), T1994);
	cr_expect_eq(http_date_parse(v, strlen(D1994) - 1), -1);
	cr_expect_eq(http_date_parse(v, sizeof(v) - 1), -1);
	cr_expect_eq(http_date_parse(NULL, 0), -1);
}

/*
 * RFC 850 years have two digits: RFC 9110 section 5.6.7 takes a year more
 * than 50 years ahead as the most recent past year with those digits.  The
 * margins keep the test right across a New Year's midnight.
 */
Test(http_date, rfc850_two_digit_year)
{
	static const int offsets[] = { 0, -10, -48, 10, 48, 52, 70 };
	char s[64], fix[64];
	time_t now = time(NULL);
	struct tm tm;
	int i, year, expect;

	cr_assert_not_null(gmtime_r(&now, &tm));
	year = tm.tm_year + 1900;
	for (i = 0; i < (int)NELEM(offsets); i++) {
		expect = year + offsets[i];
		if (offsets[i] > 50)
			expect -= 100;
		snprintf(s, sizeof(s), "Sunday, 02-Mar-%02d 10:20:30 GMT",
		    (year + offsets[i]) % 100);
		snprintf(fix, sizeof(fix), "Sun, 02 Mar %04d 10:20:30 GMT",
		    expect);
		cr_expect_neq(parse(fix), -1, "%s", fix);
		cr_expect_eq(parse(s), parse(fix), "\"%s\" should be %d", s,
		    expect);
	}
	snprintf(s, sizeof(s), "Sunday, 06-Nov-%02d 08:49:37 GMT",
	    (year - 1) % 100);
	cr_expect_neq(parse(s), -1);
	cr_expect_eq(parse("Sunday, 06-Nov-1994 08:49:37 GMT"), -1);
	cr_expect_eq(parse("Sunday, 06-nov-94 08:49:37 GMT"), -1);
	cr_expect_eq(parse("Sunday, 6-Nov-94 08:49:37 GMT"), -1);
	cr_expect_eq(parse("Sunday, 31-Nov-94 08:49:37 GMT"), -1);
	cr_expect_eq(parse("Sundae, 06-Nov-94 08:49:37 GMT"), -1);
	cr_expect_eq(parse("Sunday, 06-Nov-94 08:49:37 GMT "), -1);
}

/* Entity-tag lists. */

static const struct {
	const char *list;
	const char *etag;		/* NULL: the resource has none */
	bool strong;			/* expected, strong comparison */
	bool weak;			/* expected, weak comparison */
} etag_cases[] = {
	{ "\"abc\"", "\"abc\"", true, true },
	{ "W/\"abc\"", "\"abc\"", false, true },
	{ "\"abc\"", "W/\"abc\"", false, true },
	{ "W/\"abc\"", "W/\"abc\"", false, true },
	{ "\"xyz\"", "\"abc\"", false, false },
	{ "\"ABC\"", "\"abc\"", false, false },
	{ "\"ab\"", "\"abc\"", false, false },
	{ "\"abcd\"", "\"abc\"", false, false },
	{ "\"\"", "\"\"", true, true },
	{ "\"\xc3\xa9\"", "\"\xc3\xa9\"", true, true },

	/* Lists. */
	{ "\"xyz\", \"abc\"", "\"abc\"", true, true },
	{ "\"xyz\" ,\t\"abc\"", "\"abc\"", true, true },
	{ "\"xyz\",,\"abc\"", "\"abc\"", true, true },
	{ ",\"abc\",", "\"abc\"", true, true },
	{ "\"abc\",\"xyz\"", "\"abc\"", true, true },
	{ "\"xyz\", W/\"abc\"", "\"abc\"", false, true },
	{ "W/\"xyz\", W/\"abc\", \"abc\"", "\"abc\"", true, true },
	{ " \"abc\" ", "\"abc\"", true, true },

	/* "*" matches any current representation. */
	{ "*", "\"abc\"", true, true },
	{ " * ", "\"abc\"", true, true },
	{ "*", NULL, true, true },

	/* A malformed list never matches, even after a match. */
	{ "", "\"abc\"", false, false },
	{ ",,", "\"abc\"", false, false },
	{ "*, \"abc\"", "\"abc\"", false, false },
	{ "\"abc\", *", "\"abc\"", false, false },
	{ "**", "\"abc\"", false, false },
	{ "abc", "\"abc\"", false, false },
	{ "\"abc", "\"abc\"", false, false },
	{ "abc\"", "\"abc\"", false, false },
	{ "\"abc\", xyz", "\"abc\"", false, false },
	{ "xyz, \"abc\"", "\"abc\"", false, false },
	{ "\"abc\"\"xyz\"", "\"abc\"", false, false },
	{ "\"abc\" \"xyz\"", "\"abc\"", false, false },
	{ "\"abc\";", "\"abc\"", false, false },
	{ "\"a c\"", "\"a c\"", false, false },
	{ "\"a\"c\"", "\"a\"c\"", false, false },
	{ "\"a\x7f\"", "\"a\x7f\"", false, false },
	{ "w/\"abc\"", "\"abc\"", false, false },
	{ "W/ \"abc\"", "\"abc\"", false, false },
	{ "W\"abc\"", "\"abc\"", false, false },

	/* Our own tag must be valid to match anything but "*". */
	{ "\"abc\"", NULL, false, false },
	{ "\"abc\"", "abc", false, false },
	{ "\"abc\"", "", false, false },
};

Test(http_etag, match_table)
{
	const char *l, *e;
	size_t i, elen;
	bool got;

	for (i = 0; i < NELEM(etag_cases); i++) {
		l = etag_cases[i].list;
		e = etag_cases[i].etag;
		elen = e != NULL ? strlen(e) : 0;
		got = http_etag_match(l, strlen(l), e, elen, false);
		cr_expect_eq(got, etag_cases[i].strong,
		    "strong: [%s] against %s", l, e != NULL ? e : "(none)");
		got = http_etag_match(l, strlen(l), e, elen, true);
		cr_expect_eq(got, etag_cases[i].weak,
		    "weak: [%s] against %s", l, e != NULL ? e : "(none)");
	}
}

/* Conditional requests, RFC 9110 section 13.2.2. */

static struct span
sp(const char *s)
{
	struct span v = { s, s != NULL ? strlen(s) : 0 };

	return v;
}

#define ETAG		"\"abc\""
#define GET		HTTP_M_GET
#define HEAD		HTTP_M_HEAD
#define POST		HTTP_M_POST
#define PUT		HTTP_M_PUT
#define DELETE		HTTP_M_DELETE

static const struct {
	enum http_method method;
	const char *if_match;
	const char *if_unmodified_since;
	const char *if_none_match;
	const char *if_modified_since;
	int status;
} cond_cases[] = {
	{ GET, NULL, NULL, NULL, NULL, 0 },

	/* Step 1: If-Match, strong comparison. */
	{ GET, ETAG, NULL, NULL, NULL, 0 },
	{ GET, "\"xyz\"", NULL, NULL, NULL, 412 },
	{ GET, "*", NULL, NULL, NULL, 0 },
	{ GET, "W/" ETAG, NULL, NULL, NULL, 412 },
	{ GET, "\"xyz\", " ETAG, NULL, NULL, NULL, 0 },
	{ GET, "abc", NULL, NULL, NULL, 412 },
	{ GET, "", NULL, NULL, NULL, 412 },
	{ PUT, "\"xyz\"", NULL, NULL, NULL, 412 },

	/* Step 2: If-Unmodified-Since, only without If-Match. */
	{ GET, NULL, D1994, NULL, NULL, 0 },
	{ GET, NULL, D1994_AFTER, NULL, NULL, 0 },
	{ GET, NULL, D1994_BEFORE, NULL, NULL, 412 },
	{ GET, NULL, "Sun Nov  6 08:49:36 1994", NULL, NULL, 412 },
	{ GET, NULL, "yesterday", NULL, NULL, 0 },
	{ GET, NULL, D1994_BEFORE "x", NULL, NULL, 0 },
	{ GET, ETAG, D1994_BEFORE, NULL, NULL, 0 },
	{ GET, "\"xyz\"", D1994_AFTER, NULL, NULL, 412 },

	/* Step 3: If-None-Match, weak comparison. */
	{ GET, NULL, NULL, ETAG, NULL, 304 },
	{ HEAD, NULL, NULL, ETAG, NULL, 304 },
	{ GET, NULL, NULL, "W/" ETAG, NULL, 304 },
	{ GET, NULL, NULL, "\"xyz\", W/" ETAG, NULL, 304 },
	{ GET, NULL, NULL, "*", NULL, 304 },
	{ GET, NULL, NULL, "\"xyz\"", NULL, 0 },
	{ GET, NULL, NULL, "abc", NULL, 0 },
	{ POST, NULL, NULL, ETAG, NULL, 412 },
	{ PUT, NULL, NULL, "*", NULL, 412 },
	{ DELETE, NULL, NULL, ETAG, NULL, 412 },
	{ POST, NULL, NULL, "\"xyz\"", NULL, 0 },

	/* Steps 1 and 2 come before 3. */
	{ GET, "\"xyz\"", NULL, ETAG, NULL, 412 },
	{ GET, ETAG, NULL, ETAG, NULL, 304 },
	{ GET, NULL, D1994_BEFORE, ETAG, NULL, 412 },
	{ GET, NULL, D1994_AFTER, ETAG, NULL, 304 },
	{ GET, NULL, "yesterday", ETAG, NULL, 304 },

	/* Step 4: If-Modified-Since, for GET and HEAD without INM. */
	{ GET, NULL, NULL, NULL, D1994, 304 },
	{ HEAD, NULL, NULL, NULL, D1994, 304 },
	{ GET, NULL, NULL, NULL, D1994_AFTER, 304 },
	{ GET, NULL, NULL, NULL, D1994_BEFORE, 0 },
	{ GET, NULL, NULL, NULL, "Sunday, 06-Nov-94 08:49:37 GMT", 304 },
	{ GET, NULL, NULL, NULL, "Sun Nov  6 08:49:37 1994", 304 },
	{ GET, NULL, NULL, NULL, " " D1994 " ", 304 },
	{ GET, NULL, NULL, NULL, "yesterday", 0 },
	{ GET, NULL, NULL, NULL, D1994 ", " D1994, 0 },
	{ GET, NULL, NULL, NULL, "", 0 },
	{ POST, NULL, NULL, NULL, D1994, 0 },
	{ PUT, NULL, NULL, NULL, D1994_AFTER, 0 },
	{ GET, NULL, NULL, "\"xyz\"", D1994, 0 },
	{ GET, NULL, NULL, "abc", D1994, 0 },
	{ GET, ETAG, NULL, NULL, D1994, 304 },
	{ GET, NULL, D1994, NULL, D1994, 304 },
	{ GET, NULL, D1994_BEFORE, NULL, D1994, 412 },
};

Test(http_conditional, table)
{
	struct http_request r;
	size_t i;
	int got;

	for (i = 0; i < NELEM(cond_cases); i++) {
		memset(&r, 0, sizeof(r));
		r.method = cond_cases[i].method;
		r.if_match = sp(cond_cases[i].if_match);
		r.if_unmodified_since = sp(cond_cases[i].if_unmodified_since);
		r.if_none_match = sp(cond_cases[i].if_none_match);
		r.if_modified_since = sp(cond_cases[i].if_modified_since);
		got = http_conditional(&r, ETAG, strlen(ETAG), T1994);
		cr_expect_eq(got, cond_cases[i].status,
		    "row %zu: method %d If-Match [%s] If-Unmodified-Since [%s] "
		    "If-None-Match [%s] If-Modified-Since [%s]: %d, "
		    "expected %d", i, cond_cases[i].method,
		    cond_cases[i].if_match, cond_cases[i].if_unmodified_since,
		    cond_cases[i].if_none_match,
		    cond_cases[i].if_modified_since, got,
		    cond_cases[i].status);
	}
}

/* A span that is present but points at an empty value is not "absent". */
Test(http_conditional, empty_value_is_present)
{
	struct http_request r;

	memset(&r, 0, sizeof(r));
	r.method = HTTP_M_GET;
	r.if_match.p = "";
	cr_expect_eq(http_conditional(&r, ETAG, strlen(ETAG), T1994), 412);
}

/* If-Range. */

static const struct {
	const char *if_range;		/* NULL: absent */
	const char *etag;
	int64_t mtime;
	bool range_applies;
} if_range_cases[] = {
	{ NULL, ETAG, T1994, true },
	{ ETAG, ETAG, T1994, true },
	{ " " ETAG " ", ETAG, T1994, true },
	{ "\"xyz\"", ETAG, T1994, false },
	{ "W/" ETAG, ETAG, T1994, false },
	{ "W/" ETAG, "W/" ETAG, T1994, false },
	{ ETAG, "W/" ETAG, T1994, false },
	{ ETAG ", \"xyz\"", ETAG, T1994, false },
	{ "*", ETAG, T1994, false },
	{ "\"abc", ETAG, T1994, false },
	{ ETAG, NULL, T1994, false },
	{ D1994, ETAG, T1994, true },
	{ "Sunday, 06-Nov-94 08:49:37 GMT", ETAG, T1994, true },
	{ "Sun Nov  6 08:49:37 1994", ETAG, T1994, true },
	{ D1994_BEFORE, ETAG, T1994, false },
	{ D1994_AFTER, ETAG, T1994, false },
	{ "Wed, 09 Nov 1994 08:49:37 GMT", ETAG, T1994 + 3 * 86400, true },
	{ "Wednesday, 09-Nov-94 08:49:37 GMT", ETAG, T1994 + 3 * 86400,
	    true },
	{ "Wed Nov  9 08:49:37 1994", ETAG, T1994 + 3 * 86400, true },
	{ "yesterday", ETAG, T1994, false },
	{ "", ETAG, T1994, false },
	{ "Wed, 31 Dec 1969 23:59:59 GMT", ETAG, -1, false },
};

Test(http_if_range, table)
{
	struct http_request r;
	const char *e;
	size_t i;

	for (i = 0; i < NELEM(if_range_cases); i++) {
		memset(&r, 0, sizeof(r));
		r.method = HTTP_M_GET;
		r.if_range = sp(if_range_cases[i].if_range);
		e = if_range_cases[i].etag;
		cr_expect_eq(http_if_range(&r, e, e != NULL ? strlen(e) : 0,
		    (time_t)if_range_cases[i].mtime),
		    if_range_cases[i].range_applies,
		    "If-Range [%s] with etag %s",
		    if_range_cases[i].if_range != NULL ?
		    if_range_cases[i].if_range : "(absent)",
		    e != NULL ? e : "(none)");
	}
}

/* MIME types. */

static char tmp_path[64];

static const char *
write_tmp_len(const char *text, size_t len)
{
	FILE *f;
	int fd;

	strcpy(tmp_path, "/tmp/corral-mime-XXXXXX");
	fd = mkstemp(tmp_path);
	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	return tmp_path;
}

static const char *
write_tmp(const char *text)
{
	return write_tmp_len(text, strlen(text));
}

static void
remove_tmp(void)
{
	if (tmp_path[0] != '\0')
		unlink(tmp_path);
}

static const char *
lookup(const struct mime_table *mt, const char *path)
{
	return mime_lookup(mt, path, strlen(path));
}

static const char sample[] =
    "# A sample file\n"
    "\n"
    "text/html\thtml htm\n"
    "   image/png   PNG  # upper case in the file\n"
    "image/svg+xml svg\r\n"
    "application/json json\n"
    "application/pdf pdf\n"
    "application/x-empty\n"
    "application/gzip gz tar.gz\n"
    "text/x-old foo\n"
    "text/x-new foo\n"
    "application/vnd.api+json jsonapi\n"
    "application/javascript js\n"
    "application/xml xml\n"
    "image/x-icon ico\n"
    "\t\n"
    "# the end\n";

Test(mime, lookups, .fini = remove_tmp)
{
	struct mime_table *mt;
	char err[256] = "";
	char longname[300];

	mt = mime_load(write_tmp(sample), err, sizeof(err));
	cr_assert_not_null(mt, "%s", err);

	cr_expect_str_eq(lookup(mt, "/index.html"),
	    "text/html; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "/a/b/INDEX.HTM"),
	    "text/html; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "x.Png"), "image/png");
	cr_expect_str_eq(lookup(mt, "/img/logo.png"), "image/png");
	cr_expect_str_eq(lookup(mt, "logo.svg"),
	    "image/svg+xml; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "data.json"),
	    "application/json; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "api.jsonapi"),
	    "application/vnd.api+json; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "app.js"),
	    "application/javascript; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "feed.xml"),
	    "application/xml; charset=utf-8");
	cr_expect_str_eq(lookup(mt, "doc.pdf"), "application/pdf");
	cr_expect_str_eq(lookup(mt, "favicon.ico"), "image/x-icon");
	cr_expect_str_eq(lookup(mt, "/dist/a.tar.gz"), "application/gzip");
	cr_expect_str_eq(lookup(mt, "a.foo"), "text/x-new; charset=utf-8",
	    "a later line wins");

	/* What is not an extension. */
	cr_expect_null(lookup(mt, "README"));
	cr_expect_null(lookup(mt, "/html"));
	cr_expect_null(lookup(mt, "/dir.html/file"));
	cr_expect_null(lookup(mt, "/dir.html/"));
	cr_expect_null(lookup(mt, "/.html"));
	cr_expect_null(lookup(mt, "/a/..html"));
	cr_expect_null(lookup(mt, "file."));
	cr_expect_null(lookup(mt, "file.html."));
	cr_expect_null(lookup(mt, ""));
	cr_expect_null(lookup(mt, "/"));
	cr_expect_null(lookup(mt, "."));
	cr_expect_null(lookup(mt, "file.htmlx"));
	cr_expect_null(lookup(mt, "file.ht"));
	cr_expect_null(lookup(mt, "file.gz.bak"));
	cr_expect_null(lookup(mt, "x.x-empty"));

	/* The length bounds the path. */
	cr_expect_str_eq(mime_lookup(mt, "index.html.bak", 10),
	    "text/html; charset=utf-8");
	cr_expect_null(mime_lookup(mt, "index.html", 8));

	memset(longname, 'h', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	longname[0] = 'x';
	longname[1] = '.';
	cr_expect_null(lookup(mt, longname));
	mime_free(mt);
}

Test(mime, empty_file, .fini = remove_tmp)
{
	struct mime_table *mt;
	char err[256];

	mt = mime_load(write_tmp("# nothing\n\n"), err, sizeof(err));
	cr_assert_not_null(mt, "%s", err);
	cr_expect_null(lookup(mt, "index.html"));
	mime_free(mt);
	mime_free(NULL);
}

#define TEXT(s)	s, sizeof(s) - 1

static const struct {
	const char *text;
	size_t len;
	int line;
	const char *what;
} bad_files[] = {
	{ TEXT("text/html html\n# comment\n\ntexthtml html\n"), 4,
	    "'texthtml' is not a valid type/subtype" },
	{ TEXT("text/html/x html\n"), 1, "not a valid type/subtype" },
	{ TEXT("text/ html\n"), 1, "'text/' is not a valid type/subtype" },
	{ TEXT("/html html\n"), 1, "not a valid type/subtype" },
	{ TEXT("text/h(tml html\n"), 1, "not a valid type/subtype" },
	{ TEXT("text/html htm\xc3\xa9\n"), 1, "is not a valid extension" },
	{ TEXT("text/html ok\ntext/css a/b\n"), 2,
	    "'a/b' is not a valid extension" },
	{ TEXT("text/html ht\"ml\n"), 1, "is not a valid extension" },
	{ TEXT("\n\n\n\ntext/html html\n\n\nnot-a-type\n"), 8,
	    "not-a-type" },
	{ TEXT("text/html html\ntext/plain t\0xt\n"), 2, "NUL byte" },
	{ TEXT("text/html html\r\nbad\r\n"), 2, "'bad'" },
};

Test(mime, bad_lines, .fini = remove_tmp)
{
	char err[256], prefix[128];
	const char *path;
	size_t i;

	for (i = 0; i < NELEM(bad_files); i++) {
		path = write_tmp_len(bad_files[i].text, bad_files[i].len);
		err[0] = '\0';
		cr_expect_null(mime_load(path, err, sizeof(err)), "file %zu",
		    i);
		snprintf(prefix, sizeof(prefix), "%s:%d: ", path,
		    bad_files[i].line);
		cr_expect(strncmp(err, prefix, strlen(prefix)) == 0,
		    "file %zu: \"%s\" should start with \"%s\"", i, err,
		    prefix);
		cr_expect(strstr(err, bad_files[i].what) != NULL,
		    "file %zu: \"%s\" should say \"%s\"", i, err,
		    bad_files[i].what);
		unlink(path);
	}
}

Test(mime, missing_file)
{
	char err[256] = "";

	cr_expect_null(mime_load("/nonexistent/mime.types", err,
	    sizeof(err)));
	cr_expect_str_eq(err,
	    "/nonexistent/mime.types: No such file or directory");
	cr_expect_null(mime_load("/nonexistent/mime.types", NULL, 0));
}

/* A short buffer gets a truncated message, never an overflow. */
Test(mime, short_error_buffer, .fini = remove_tmp)
{
	char err[8];

	cr_expect_null(mime_load(write_tmp("bad\n"), err, sizeof(err)));
	cr_expect_eq(strlen(err), sizeof(err) - 1);
}

/* The file we ship covers what a web server is asked for. */
Test(mime, shipped_file)
{
	static const struct {
		const char *name;
		const char *type;
	} expect[] = {
		{ "index.html", "text/html; charset=utf-8" },
		{ "a.htm", "text/html; charset=utf-8" },
		{ "a.shtml", "text/html; charset=utf-8" },
		{ "a.css", "text/css; charset=utf-8" },
		{ "a.js", "text/javascript; charset=utf-8" },
		{ "a.mjs", "text/javascript; charset=utf-8" },
		{ "a.json", "application/json; charset=utf-8" },
		{ "a.xml", "application/xml; charset=utf-8" },
		{ "a.txt", "text/plain; charset=utf-8" },
		{ "a.svg", "image/svg+xml; charset=utf-8" },
		{ "a.webmanifest",
		    "application/manifest+json; charset=utf-8" },
		{ "a.png", "image/png" },
		{ "a.JPG", "image/jpeg" },
		{ "a.jpeg", "image/jpeg" },
		{ "a.webp", "image/webp" },
		{ "a.avif", "image/avif" },
		{ "a.woff2", "font/woff2" },
		{ "a.wasm", "application/wasm" },
		{ "a.pdf", "application/pdf" },
		{ "a.mp4", "video/mp4" },
		{ "a.webm", "video/webm" },
		{ "a.mp3", "audio/mpeg" },
		{ "a.gz", "application/gzip" },
		{ "a.zip", "application/zip" },
		{ "a.bin", "application/octet-stream" },
	};
	static const char *const exts[] = {
		"html", "htm", "shtml", "css", "js", "mjs", "json", "xml",
		"txt", "csv", "md", "svg", "svgz", "png", "jpg", "jpeg",
		"gif", "webp", "avif", "ico", "bmp", "tiff", "woff", "woff2",
		"ttf", "otf", "eot", "pdf", "zip", "gz", "tar", "bz2", "xz",
		"7z", "wasm", "mp3", "ogg", "oga", "opus", "wav", "flac",
		"m4a", "mp4", "m4v", "webm", "ogv", "mov", "avi", "mkv",
		"mpeg", "mpg", "ts", "webmanifest", "atom", "rss", "ics",
		"epub", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt",
		"ods", "odp", "rtf", "apk", "deb", "rpm", "iso", "dmg", "exe",
		"msi", "bin", "jar", "swf",
	};
	const char *srcdir = getenv("CORRAL_SRCDIR");
	char path[4096], err[512], name[64];
	struct mime_table *mt;
	const char *t;
	size_t i;

	snprintf(path, sizeof(path), "%s%setc/mime.types",
	    srcdir != NULL ? srcdir : "", srcdir != NULL ? "/" : "");
	mt = mime_load(path, err, sizeof(err));
	cr_assert_not_null(mt, "%s (set CORRAL_SRCDIR or run from the "
	    "source tree)", err);
	for (i = 0; i < NELEM(expect); i++) {
		t = lookup(mt, expect[i].name);
		cr_expect(t != NULL && strcmp(t, expect[i].type) == 0,
		    "%s: %s, expected %s", expect[i].name,
		    t != NULL ? t : "(none)", expect[i].type);
	}
	for (i = 0; i < NELEM(exts); i++) {
		snprintf(name, sizeof(name), "/f.%s", exts[i]);
		cr_expect_not_null(lookup(mt, name), "no type for .%s",
		    exts[i]);
	}
	mime_free(mt);
}

/*
 * The RFC 9111 policy: storable, lifetime, age, stale windows, Vary
 * values, freshening from a 304, entity-tag matching.  Responses are
 * parsed from text by the real response parser; no sockets, no clock.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/config.h"
#include "worker/cache_policy.h"
#include "worker/http.h"
#include "worker/http_response.h"

#define NOW	1700000000
#define NHDR	64

static struct http_header hdrs[NHDR];
static char text[8192];

/* Parses "HTTP/1.1 ..." header lines (CRLF added) into *r. */
static void
parse(struct http_response *r, const char *head)
{
	size_t scan = 0;
	ssize_t n;

	snprintf(text, sizeof(text), "%s\r\n\r\n", head);
	memset(r, 0, sizeof(*r));
	n = http_parse_response(r, text, strlen(text), &scan, hdrs, NHDR,
	    sizeof(text), false);
	cr_assert_gt(n, 0, "%s: %s", head, r->error ? r->error : "?");
}

static const struct cp_conf plain = { .heuristic_max = CP_HEURISTIC_MAX };
static const struct cp_times at_now = { NOW, NOW };

static struct cp_req
get(void)
{
	struct cp_req rq;

	memset(&rq, 0, sizeof(rq));
	rq.method = HTTP_M_GET;
	http_cache_control_parse((struct span){ NULL, 0 }, &rq.cc);
	return rq;
}

/* cp_judge on a response given as text, with the plain config. */
static enum cp_verdict
judge_with(const struct cp_conf *conf, const struct cp_req *rq,
    const char *head, struct cp_fresh *f)
{
	struct http_response r;
	const char *why;

	parse(&r, head);
	return cp_judge(conf, rq, &r, &at_now, f, &why);
}

static enum cp_verdict
judge(const char *head, struct cp_fresh *f)
{
	struct cp_req rq = get();

	return judge_with(&plain, &rq, head, f);
}

static const char *
date(int64_t t)
{
	static char buf[4][HTTP_DATE_LEN + 1];
	static int i;

	i = (i + 1) % 4;
	http_date_format((time_t)t, buf[i]);
	return buf[i];
}

/* Storable and lifetime ------------------------------------------------- */

Test(policy, silent_response_is_not_stored)
{
	struct cp_fresh f;

	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nContent-Length: 0", &f),
	    CP_SKIP);
	cr_expect_eq(f.source, CP_SRC_NONE);
}

Test(policy, max_age_s_maxage_expires_in_order)
{
	struct cp_fresh f;
	char h[256];

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=60",
	    &f), CP_STORE);
	cr_expect_eq(f.lifetime, 60);
	cr_expect_eq(f.source, CP_SRC_EXPLICIT);
	cr_expect_eq(f.flags & CP_F_REVALIDATE, 0);

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=60, "
	    "s-maxage=5", &f), CP_STORE);
	cr_expect_eq(f.lifetime, 5);
	cr_expect(f.flags & CP_F_REVALIDATE, "s-maxage: proxy-revalidate");

	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\nExpires: %s",
	    date(NOW), date(NOW + 100));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(f.lifetime, 100);

	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\nExpires: %s"
	    "\r\nCache-Control: max-age=7", date(NOW), date(NOW + 100));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(f.lifetime, 7, "max-age beats Expires");
}

Test(policy, invalid_expires_is_in_the_past)
{
	struct cp_fresh f;

	/* Stale at once, but an ETag lets it be revalidated. */
	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nExpires: 0\r\nETag: \"a\"",
	    &f), CP_STORE);
	cr_expect_eq(f.lifetime, 0);
	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nExpires: soon", &f), CP_SKIP,
	    "stale at once, no validator: not worth storing");
}

Test(policy, dates_in_any_case)
{
	static const char *const exp[] = {
		"THU, 18 Aug 2050 02:01:18 GMT",
		"Thu, 18 AUG 2050 02:01:18 GMT",
		"Thu, 18 Aug 2050 02:01:18 gMT",
		"thursday, 18-aug-50 02:01:18 gmt",
	};
	struct cp_fresh f;
	char h[256];
	size_t i;

	for (i = 0; i < sizeof(exp) / sizeof(exp[0]); i++) {
		snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\n"
		    "Expires: %s", date(NOW), exp[i]);
		cr_assert_eq(judge(h, &f), CP_STORE, "%s", exp[i]);
		cr_expect_gt(f.lifetime, 365 * 86400, "%s", exp[i]);
	}
	/* Still a date: other words or zones are not. */
	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\nExpires: "
	    "Thu, 18 Aug 2050 02:01:18 UTC\r\nETag: \"a\"", date(NOW));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(f.lifetime, 0);
}

Test(policy, heuristic_needs_last_modified_and_status_or_public)
{
	struct cp_fresh f;
	char h[256];

	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\n"
	    "Last-Modified: %s", date(NOW), date(NOW - 1000));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(f.source, CP_SRC_HEURISTIC);
	cr_expect_eq(f.lifetime, 100, "10%% of the age of Last-Modified");

	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\n"
	    "Last-Modified: %s", date(NOW), date(NOW - 100 * 86400));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(f.lifetime, CP_HEURISTIC_MAX, "capped");

	snprintf(h, sizeof(h), "HTTP/1.1 302 Found\r\nDate: %s\r\n"
	    "Last-Modified: %s", date(NOW), date(NOW - 1000));
	cr_expect_eq(judge(h, &f), CP_SKIP, "302 is not heuristic");

	snprintf(h, sizeof(h), "HTTP/1.1 599 Whatever\r\nDate: %s\r\n"
	    "Last-Modified: %s\r\nCache-Control: public", date(NOW),
	    date(NOW - 1000));
	cr_expect_eq(judge(h, &f), CP_STORE, "public allows heuristics");
	cr_expect_eq(f.lifetime, 100);
}

Test(policy, heuristic_statuses)
{
	static const int yes[] = { 200, 203, 204, 206, 300, 301, 308, 404,
	    405, 410, 414, 501 };
	static const int no[] = { 201, 202, 302, 303, 307, 400, 403, 500,
	    502, 503, 504, 599 };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect(cp_status_heuristic(yes[i]), "%d", yes[i]);
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect(!cp_status_heuristic(no[i]), "%d", no[i]);
}

Test(policy, explicit_freshness_stores_any_final_status)
{
	struct cp_fresh f;

	cr_expect_eq(judge("HTTP/1.1 599 Whatever\r\nCache-Control: "
	    "max-age=60", &f), CP_STORE);
	cr_expect_eq(judge("HTTP/1.1 302 Found\r\nLocation: /x\r\n"
	    "Cache-Control: max-age=60", &f), CP_STORE);
	cr_expect_eq(judge("HTTP/1.1 206 Partial Content\r\nContent-Range: "
	    "bytes 0-1/2\r\nCache-Control: max-age=60", &f), CP_SKIP);
	cr_expect_eq(judge("HTTP/1.1 304 Not Modified\r\nCache-Control: "
	    "max-age=60", &f), CP_SKIP);
}

Test(policy, must_understand)
{
	struct cp_fresh f;

	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=60, "
	    "no-store, must-understand", &f), CP_STORE,
	    "a known status overrides no-store");
	cr_expect_eq(judge("HTTP/1.1 599 Whatever\r\nCache-Control: "
	    "max-age=60, no-store, must-understand", &f), CP_SKIP);
	cr_expect(cp_status_understood(404));
	cr_expect(!cp_status_understood(599));
}

Test(policy, configured_validity_for_silent_responses)
{
	static const struct config_valid v[] = { { 200, 600 }, { 404, 60 },
	    { 0, 5 } };
	struct cp_conf conf = plain;
	struct cp_req rq = get();
	struct cp_fresh f;

	conf.valid = v;
	conf.nvalid = 3;
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK", &f), CP_STORE);
	cr_expect_eq(f.lifetime, 600);
	cr_expect_eq(f.source, CP_SRC_VALID);
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 404 Not Found", &f),
	    CP_STORE);
	cr_expect_eq(f.lifetime, 60);
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 500 Oops\r\nETag: "
	    "\"e\"", &f), CP_STORE);
	cr_expect_eq(f.lifetime, 5, "any");
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=3", &f), CP_STORE);
	cr_expect_eq(f.lifetime, 3, "the origin's word beats the config");
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: no-store", &f), CP_PASS);
}

Test(policy, cache_ttl_for_heuristic_statuses_only)
{
	struct cp_conf conf = plain;
	struct cp_req rq = get();
	struct cp_fresh f;

	conf.default_ttl = 60;
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK", &f), CP_STORE);
	cr_expect_eq(f.lifetime, 60);
	cr_expect_eq(f.source, CP_SRC_TTL);
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 405 Method Not Allowed",
	    &f), CP_STORE);
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 400 Bad Request", &f),
	    CP_SKIP);
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 503 Busy", &f),
	    CP_SKIP);
}

Test(policy, never_stored_and_who_may_make_a_key_pass)
{
	struct cp_req rq = get();
	struct cp_fresh f;

	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: no-store", &f),
	    CP_PASS);
	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: private, "
	    "max-age=60", &f), CP_PASS);
	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nSet-Cookie: a=b\r\n"
	    "Cache-Control: max-age=60", &f), CP_PASS);
	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nVary: a, *\r\n"
	    "Cache-Control: max-age=60", &f), CP_PASS);
	/* A client can provoke an error: it must not lock the key for all. */
	cr_expect_eq(judge("HTTP/1.1 400 Bad Request\r\nCache-Control: "
	    "no-store", &f), CP_SKIP);
	cr_expect_eq(judge("HTTP/1.1 431 Too Large\r\nCache-Control: "
	    "private", &f), CP_SKIP);
	cr_expect_eq(judge("HTTP/1.1 400 Bad Request", &f), CP_SKIP);
	rq.cookie = true;
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: private, max-age=60", &f), CP_SKIP,
	    "a personal response is no verdict for everyone");
	rq = get();
	rq.method = HTTP_M_POST;
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60", &f), CP_SKIP);
	rq = get();
	http_cache_control_parse((struct span){ "no-store", 8 }, &rq.cc);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60", &f), CP_SKIP);
}

Test(policy, authorization_and_cookie_need_shared_permission)
{
	struct cp_req rq = get();
	struct cp_fresh f;

	rq.authorization = true;
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60", &f), CP_SKIP);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60, public", &f), CP_STORE);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: s-maxage=60", &f), CP_STORE);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60, must-revalidate", &f), CP_STORE);
	rq = get();
	rq.cookie = true;
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60", &f), CP_SKIP);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: max-age=60, must-revalidate", &f), CP_SKIP);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: public, max-age=60", &f), CP_STORE);
	cr_expect_eq(judge_with(&plain, &rq, "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: s-maxage=60", &f), CP_STORE);
}

Test(policy, no_cache_stores_but_validates_each_use)
{
	struct cp_fresh f;

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: no-cache, "
	    "max-age=60\r\nETag: \"x\"", &f), CP_STORE);
	cr_expect(f.flags & CP_F_NO_CACHE);
	cr_expect(!cp_is_fresh(&f, NULL, NOW));
	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: "
	    "no-cache=\"set-foo\", max-age=60\r\nETag: \"x\"", &f),
	    CP_STORE);
	cr_expect(f.flags & CP_F_NO_CACHE, "qualified: treated as no-cache");
	cr_expect_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: no-cache", &f),
	    CP_SKIP, "nothing to validate it by");
}

Test(policy, cdn_cache_control_targets_corral_when_asked)
{
	struct cp_conf conf = plain;
	struct cp_req rq = get();
	struct cp_fresh f;
	const char *h = "HTTP/1.1 200 OK\r\nCDN-Cache-Control: max-age=600\r\n"
	    "Cache-Control: no-store";

	cr_expect_eq(judge_with(&conf, &rq, h, &f), CP_PASS, "off: ignored");
	conf.cdn_control = true;
	cr_assert_eq(judge_with(&conf, &rq, h, &f), CP_STORE);
	cr_expect_eq(f.lifetime, 600);
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK\r\n"
	    "CDN-Cache-Control: no-store\r\nCache-Control: max-age=60", &f),
	    CP_PASS);
	cr_expect_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK\r\n"
	    "CDN-Cache-Control: max-age=0\r\nCache-Control: max-age=60", &f),
	    CP_SKIP);
	cr_assert_eq(judge_with(&conf, &rq, "HTTP/1.1 200 OK\r\n"
	    "Surrogate-Control: max-age=30\r\nCache-Control: max-age=60", &f),
	    CP_STORE);
	cr_expect_eq(f.lifetime, 30);
}

/* Age ------------------------------------------------------------------- */

Test(policy, age_value_parsing)
{
	static const struct {
		const char *v;
		int64_t want;
	} rows[] = {
		{ "0", 0 }, { "3600", 3600 }, { " 12 ", 12 },
		{ "0, 7200", 0 }, { "7200, 0", 7200 },
		{ "2147483647", 2147483647 }, { "2147483648", HTTP_DELTA_MAX },
		{ "2147483649", HTTP_DELTA_MAX },
		{ "99999999999999999999999", HTTP_DELTA_MAX },
		{ "abc", -1 }, { "-5", -1 }, { "7200.0", -1 }, { "", -1 },
		{ "1;a=b", -1 },
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		cr_expect_eq(cp_age_value((struct span){ rows[i].v,
		    strlen(rows[i].v) }), rows[i].want, "%s", rows[i].v);
	cr_expect_eq(cp_age_value((struct span){ NULL, 0 }), -1);
}

Test(policy, huge_age_saturates_and_is_stale)
{
	struct cp_fresh f;

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=3600"
	    "\r\nAge: 2147483649", &f), CP_STORE);
	cr_expect(!cp_is_fresh(&f, NULL, NOW), "never wraps to fresh");
	cr_expect_eq(cp_age(&f, NOW), HTTP_DELTA_MAX);
	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=3600"
	    "\r\nAge: 7200.0", &f), CP_STORE);
	cr_expect(cp_is_fresh(&f, NULL, NOW), "an invalid Age is ignored");
}

Test(policy, initial_age_of_4_2_3)
{
	struct cp_times t = { NOW - 2, NOW };

	cr_expect_eq(cp_initial_age(10, NOW, &t), 12, "Age + delay");
	cr_expect_eq(cp_initial_age(-1, NOW - 30, &t), 30, "apparent age");
	cr_expect_eq(cp_initial_age(0, NOW + 30, &t), 2, "Date ahead");
	cr_expect_eq(cp_initial_age(HTTP_DELTA_MAX, NOW, &t),
	    HTTP_DELTA_MAX);
}

Test(policy, freshness_uses_date_and_age)
{
	struct cp_fresh f;
	char h[256];

	snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nDate: %s\r\n"
	    "Cache-Control: max-age=60", date(NOW - 50));
	cr_assert_eq(judge(h, &f), CP_STORE);
	cr_expect_eq(cp_age(&f, NOW), 50);
	cr_expect(cp_is_fresh(&f, NULL, NOW + 9));
	cr_expect(!cp_is_fresh(&f, NULL, NOW + 10));
	cr_expect_eq(f.date, NOW - 50, "the Date to state on hits");

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=60",
	    &f), CP_STORE);
	cr_expect_eq(f.date, NOW, "no Date: when it came");
}

Test(policy, heuristic_helper)
{
	cr_expect_eq(cp_heuristic(NOW, NOW - 600, 86400), 60);
	cr_expect_eq(cp_heuristic(NOW, NOW + 5, 86400), 0);
	cr_expect_eq(cp_heuristic(NOW, -1, 86400), 0);
	cr_expect_eq(cp_heuristic(NOW, 0, 86400), 86400);
}

Test(policy, request_directives)
{
	struct cp_fresh f;
	struct http_cache_control rq;

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=100",
	    &f), CP_STORE);
	http_cache_control_parse((struct span){ "max-age=10", 10 }, &rq);
	cr_expect(cp_is_fresh(&f, &rq, NOW + 10));
	cr_expect(!cp_is_fresh(&f, &rq, NOW + 11));
	http_cache_control_parse((struct span){ "min-fresh=50", 12 }, &rq);
	cr_expect(cp_is_fresh(&f, &rq, NOW + 49));
	cr_expect(!cp_is_fresh(&f, &rq, NOW + 50));
	http_cache_control_parse((struct span){ "no-cache", 8 }, &rq);
	cr_expect(!cp_is_fresh(&f, &rq, NOW));
}

/* Stale ----------------------------------------------------------------- */

Test(policy, stale_while_revalidate_window)
{
	struct cp_fresh f;

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=1, "
	    "stale-while-revalidate=4\r\nETag: \"a\"", &f), CP_STORE);
	cr_expect_eq(cp_stale_window(&f, NULL, CP_STALE_REVALIDATING, -1), 4);
	cr_expect(cp_stale_ok(&f, NULL, CP_STALE_REVALIDATING, -1, NOW + 4));
	cr_expect(!cp_stale_ok(&f, NULL, CP_STALE_REVALIDATING, -1, NOW + 5));
	cr_expect(!cp_stale_ok(&f, NULL, CP_STALE_ERROR, -1, NOW + 2),
	    "swr is no licence on errors");
	cr_expect(cp_stale_ok(&f, NULL, CP_STALE_ERROR, 3600, NOW + 2),
	    "the location's cache_stale widens it");
}

Test(policy, stale_if_error_from_response_and_request)
{
	struct cp_fresh f;
	struct http_cache_control rq;

	cr_assert_eq(judge("HTTP/1.1 200 OK\r\nCache-Control: max-age=1, "
	    "stale-if-error=10\r\nETag: \"a\"", &f), CP_STORE);
	cr_expect(cp_stale_ok(&f, NULL, CP_STALE_ERROR, -1, NOW + 10));
	cr_expect(!cp_stale_ok(&f, NULL, CP_STALE_ERROR, -1, NOW + 11));
	cr_expect(!cp_stale_ok(&f, NULL, CP_STALE_REVALIDATING, -1, NOW + 2));
	http_cache_control_parse((struct span){ "stale-if-error=100", 18 },
	    &rq);
	cr_expect(cp_stale_ok(&f, &rq, CP_STALE_ERROR, -1, NOW + 50));
	http_cache_control_parse((struct span){ "max-stale", 9 }, &rq);
	cr_expect(cp_stale_ok(&f, &rq, CP_STALE_REVALIDATING, -1,
	    NOW + 100000));
}

Test(policy, revalidate_forbids_stale)
{
	static const char *const cc[] = {
		"max-age=1, stale-if-error=10, must-revalidate",
		"max-age=1, stale-if-error=10, proxy-revalidate",
		"s-maxage=1, stale-if-error=10",
	};
	struct cp_fresh f;
	char h[256];
	size_t i;

	for (i = 0; i < 3; i++) {
		snprintf(h, sizeof(h), "HTTP/1.1 200 OK\r\nETag: \"a\"\r\n"
		    "Cache-Control: %s", cc[i]);
		cr_assert_eq(judge(h, &f), CP_STORE);
		cr_expect_eq(cp_stale_window(&f, NULL, CP_STALE_ERROR, 3600),
		    -1, "%s", cc[i]);
	}
}

/* Vary ------------------------------------------------------------------ */

static const char *
vary(const char *name, const char *a, const char *b)
{
	static char out[256];
	struct span lines[2];
	size_t n = 0;
	ssize_t len;

	if (a != NULL)
		lines[n++] = (struct span){ a, strlen(a) };
	if (b != NULL)
		lines[n++] = (struct span){ b, strlen(b) };
	len = cp_vary_value((struct span){ name, strlen(name) }, lines, n,
	    out, sizeof(out) - 1);
	cr_assert_geq(len, 0);
	out[len] = '\0';
	return out;
}

Test(policy, vary_accept_encoding_parsed)
{
	cr_expect_str_eq(vary("Accept-Encoding", "gzip, deflate, br", NULL),
	    "br,deflate,gzip");
	cr_expect_str_eq(vary("accept-encoding", "br;q=1.0, GZIP", NULL),
	    "br,gzip");
	cr_expect_str_eq(vary("Accept-Encoding", "gzip;q=0", NULL), "-gzip",
	    "refusing gzip is not taking it");
	cr_expect_str_eq(vary("Accept-Encoding", "gzip; q=0.000, br", NULL),
	    "-gzip,br");
	cr_expect_str_eq(vary("Accept-Encoding", "gzip;q=0.001", NULL),
	    "gzip");
	cr_expect_str_eq(vary("Accept-Encoding", "x-gzip", NULL), "gzip");
	cr_expect_str_eq(vary("Accept-Encoding", "x-gzipper", NULL),
	    "x-gzipper", "unknown codings key apart");
	cr_expect_str_eq(vary("Accept-Encoding", "gzip", "br"), "br,gzip",
	    "every line counts");
	cr_expect_str_eq(vary("Accept-Encoding", "gzip", "gzip"), "gzip");
	cr_expect_str_eq(vary("Accept-Encoding", "", NULL), "");
	cr_expect_str_eq(vary("Accept-Encoding", NULL, NULL), "\x01",
	    "absent differs from empty");
}

Test(policy, vary_other_fields_whole)
{
	cr_expect_str_eq(vary("X-Lang", "en", NULL), "en");
	cr_expect_str_eq(vary("X-Lang", "en", "evil"), "en,evil",
	    "a repeated field is not its first line");
	cr_expect_str_eq(vary("X-Case", "Abc", NULL), "Abc");
}

Test(policy, vary_accept_language_as_weighted_set)
{
	cr_expect_str_eq(vary("Accept-Language", "en ,  de", NULL), "de,en");
	cr_expect_str_eq(vary("Accept-Language", "de, en", NULL), "de,en",
	    "the order of one weight does not select");
	cr_expect_str_eq(vary("Accept-Language", "eN, De", NULL), "de,en",
	    "tags are case-insensitive");
	cr_expect_str_eq(vary("Accept-Language", "fr;q=0.5, en-GB", NULL),
	    "en-gb,fr;q=500");
	cr_expect_str_eq(vary("Accept-Language", "en;q=0.5, fr", NULL),
	    "fr,en;q=500", "weights select: kept");
	cr_expect_str_eq(vary("Accept-Language", "en; q=1.0", "en"), "en");
	cr_expect_str_eq(vary("Accept-Language", "en;q=2", NULL), "en;q=2",
	    "malformed: the field as sent");
}

Test(policy, vary_value_too_long)
{
	char out[4];
	struct span l = { "abcdefgh", 8 };

	cr_expect_eq(cp_vary_value((struct span){ "x", 1 }, &l, 1, out,
	    sizeof(out)), -1);
}

/* Freshening ------------------------------------------------------------ */

Test(policy, freshen_from_304)
{
	static const char stored[] =
	    "Content-Type: text/plain\r\n"
	    "Test-Header: old\r\n"
	    "Cache-Control: max-age=1\r\n"
	    "ETag: \"a\"\r\n"
	    "Content-Encoding: gzip\r\n";
	static const char *const skip[] = { "date", "server", NULL };
	struct http_response r;
	char *out;
	size_t n;

	parse(&r, "HTTP/1.1 304 Not Modified\r\n"
	    "Test-Header: new\r\n"
	    "Cache-Control: max-age=3600\r\n"
	    "Content-Length: 99\r\n"
	    "Content-Encoding: br\r\n"
	    "Set-Cookie: a=b\r\n"
	    "Connection: x-hop\r\n"
	    "X-Hop: 1\r\n"
	    "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
	    "X-New: yes");
	out = malloc(cp_freshen_size(sizeof(stored) - 1, &r));
	n = cp_freshen(stored, sizeof(stored) - 1, &r, skip, out);
	cr_expect(n <= cp_freshen_size(sizeof(stored) - 1, &r));
	out[n] = '\0';	/* the bound leaves room: the 304 had more fields */
	cr_expect_str_eq(out,
	    "Content-Type: text/plain\r\n"
	    "ETag: \"a\"\r\n"
	    "Content-Encoding: gzip\r\n"
	    "Test-Header: new\r\n"
	    "Cache-Control: max-age=3600\r\n"
	    "X-New: yes\r\n");
	free(out);
}

Test(policy, freshen_replaces_every_line_of_a_name)
{
	static const char stored[] = "Link: <a>\r\nLink: <b>\r\nX: 1\r\n";
	struct http_response r;
	char out[256];
	size_t n;

	parse(&r, "HTTP/1.1 304 Not Modified\r\nLink: <c>");
	cr_assert_leq(cp_freshen_size(sizeof(stored) - 1, &r), sizeof(out));
	n = cp_freshen(stored, sizeof(stored) - 1, &r, NULL, out);
	out[n] = '\0';
	cr_expect_str_eq(out, "X: 1\r\nLink: <c>\r\n");
}

/* Entity tags ----------------------------------------------------------- */

static bool
inm(const char *list, const char *etag)
{
	return cp_etag_match((struct span){ list, strlen(list) }, etag,
	    strlen(etag));
}

Test(policy, etag_weak_comparison)
{
	cr_expect(inm("\"abc\"", "\"abc\""));
	cr_expect(inm("W/\"abc\"", "\"abc\""));
	cr_expect(inm("\"abc\"", "W/\"abc\""));
	cr_expect(inm("\"x\", \"abc\"", "\"abc\""));
	cr_expect(inm("*", "\"abc\""));
	cr_expect(!inm("\"abd\"", "\"abc\""));
	cr_expect(inm("\"a,b\", \"c\"", "\"c\""), "a comma inside quotes");
	cr_expect(!inm("\"a,b\"", "\"a\""));
	cr_expect(inm("\"abcdef\xc3\xbc\"", "\"abcdef\xc3\xbc\""),
	    "obs-text");
}

Test(policy, etag_malformed_match_themselves)
{
	cr_expect(inm("w/\"abcdef\"", "w/\"abcdef\""), "lower-case w/");
	cr_expect(inm("W\\\"abcdef\"", "W\\\"abcdef\""), "backslash");
	cr_expect(inm("W\"abcdef\"", "W\"abcdef\""), "no slash");
	cr_expect(inm("abcdef", "abcdef"), "unquoted");
	cr_expect(!inm("abcdef", "\"abcdef\""));
	cr_expect(!inm("w/\"abcdef\"", "\"abcdef\""),
	    "a malformed tag is no weak tag");
}

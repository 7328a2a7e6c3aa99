/*
 * Access log formats: compiling, every variable, the three escapes, and
 * lines cut to the buffer without breaking the literal text.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "worker/log_format.h"

static struct span
S(const char *s)
{
	return (struct span){ s, s ? strlen(s) : 0 };
}

static struct log_values
sample(void)
{
	struct log_values v;

	memset(&v, 0, sizeof(v));
	v.remote_addr = S("192.0.2.7");
	v.method = S("GET");
	v.target = S("/a/b.txt?x=1&y=2");
	v.referer = S("http://ref.example/");
	v.user_agent = S("curl/8.0");
	v.host = S("www.example.com");
	v.server_name = "example.com";
	v.version = 11;
	v.status = 200;
	v.body_bytes = 1234;
	v.request_time_us = 1234567;
	v.time_local = "30/Nov/2026:08:00:00 +0000";
	v.time_iso8601 = "2026-11-30T08:00:00+00:00";
	v.now_ms = 1796000000123ULL;
	v.upstream_addr = S("127.0.0.1:9000");
	v.cache_status = S("HIT");
	v.ssl_protocol = S("TLSv1.3");
	v.upstream_status = 201;
	v.upstream_connect_us = 1500;
	v.upstream_response_us = 20000;
	strcpy(v.request_id, "0123456789abcdef0123456789abcdef");
	v.connection = 42;
	v.connection_requests = 3;
	v.pid = 999;
	return v;
}

static char line[8192];

static const char *
render(const char *src, enum log_escape esc, const struct log_values *v)
{
	char err[128];
	struct log_format *f = log_format_compile(src, esc, err, sizeof(err));
	size_t n;

	cr_assert_not_null(f, "%s: %s", src, err);
	n = log_format_render(f, v, line, sizeof(line));
	line[n] = '\0';
	log_format_free(f);
	return line;
}

Test(log_format, every_variable)
{
	static const struct {
		const char *src, *want;
	} cases[] = {
		{ "$remote_addr", "192.0.2.7" },
		{ "$remote_user", "-" },
		{ "$time_local", "30/Nov/2026:08:00:00 +0000" },
		{ "$time_iso8601", "2026-11-30T08:00:00+00:00" },
		{ "$msec", "1796000000.123" },
		{ "$request", "GET /a/b.txt?x=1&y=2 HTTP/1.1" },
		{ "$request_method", "GET" },
		{ "$request_uri", "/a/b.txt?x=1&y=2" },
		{ "$uri", "/a/b.txt" },
		{ "$args", "x=1&y=2" },
		{ "$server_protocol", "HTTP/1.1" },
		{ "$status", "200" },
		{ "$body_bytes_sent", "1234" },
		{ "$request_time", "1.234" },
		{ "$http_referer", "http://ref.example/" },
		{ "$http_user_agent", "curl/8.0" },
		{ "$host", "www.example.com" },
		{ "$server_name", "example.com" },
		{ "$upstream_addr", "127.0.0.1:9000" },
		{ "$upstream_status", "201" },
		{ "$upstream_connect_time", "0.001" },
		{ "$upstream_response_time", "0.020" },
		{ "$upstream_cache_status", "HIT" },
		{ "$ssl_protocol", "TLSv1.3" },
		{ "$request_id", "0123456789abcdef0123456789abcdef" },
		{ "$connection", "42" },
		{ "$connection_requests", "3" },
		{ "$pid", "999" },
		{ "${status}x", "200x" },
		{ "a $status b", "a 200 b" },
	};
	struct log_values v = sample();
	char want[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(want, sizeof(want), "%s\n", cases[i].want);
		cr_expect_str_eq(render(cases[i].src, LOG_ESC_DEFAULT, &v),
		    want, "%s", cases[i].src);
	}
	cr_assert_eq(LOG_NVARS, 28, "a new variable needs a case above");
}

Test(log_format, missing_values)
{
	struct log_values v = sample();

	v.upstream_addr = S(NULL);
	v.upstream_status = 0;
	v.upstream_connect_us = -1;
	v.upstream_response_us = -1;
	v.cache_status = S(NULL);
	v.host = S(NULL);
	v.target = S("/plain");
	cr_expect_str_eq(render("$upstream_addr $upstream_status "
	    "$upstream_connect_time $upstream_response_time "
	    "$upstream_cache_status $args $host", LOG_ESC_DEFAULT, &v),
	    "- - - - - - example.com\n");
	cr_expect_str_eq(render("\"$upstream_addr\" \"$args\"", LOG_ESC_JSON,
	    &v), "\"\" \"\"\n");
	v.method = S(NULL);
	v.version = 0;
	cr_expect_str_eq(render("\"$request\" $server_protocol",
	    LOG_ESC_DEFAULT, &v), "\"\" -\n");
}

Test(log_format, escapes)
{
	struct log_values v = sample();

	v.user_agent = S("a\"b\\c\x01\xc3\xa9");
	cr_expect_str_eq(render("$http_user_agent", LOG_ESC_DEFAULT, &v),
	    "a\\x22b\\x5Cc\\x01\\xC3\\xA9\n");
	cr_expect_str_eq(render("$http_user_agent", LOG_ESC_JSON, &v),
	    "a\\\"b\\\\c\\u0001\\u00c3\\u00a9\n");
	cr_expect_str_eq(render("$http_user_agent", LOG_ESC_NONE, &v),
	    "a\"b\\c\x01\xc3\xa9\n");
}

Test(log_format, bad_formats)
{
	char err[128];

	cr_expect_null(log_format_compile("$nope", LOG_ESC_DEFAULT, err,
	    sizeof(err)));
	cr_expect_str_eq(err, "unknown variable \"$nope\"");
	cr_expect_null(log_format_compile("a $ b", LOG_ESC_DEFAULT, err,
	    sizeof(err)));
	cr_expect_null(log_format_compile("${status", LOG_ESC_DEFAULT, err,
	    sizeof(err)));
	cr_expect_null(log_format_compile("$Status", LOG_ESC_DEFAULT, err,
	    sizeof(err)));
}

Test(log_format, long_values_are_cut_not_the_text)
{
	static char big[20000];
	struct log_values v = sample();
	char err[128], out[200];
	struct log_format *f;
	size_t n;

	memset(big, 'x', sizeof(big) - 1);
	v.user_agent = S(big);
	f = log_format_compile("{\"ua\":\"$http_user_agent\",\"s\":$status}",
	    LOG_ESC_JSON, err, sizeof(err));
	cr_assert_not_null(f);
	n = log_format_render(f, &v, out, sizeof(out));
	cr_assert(n <= sizeof(out) && n > sizeof(out) - 30, "%zu", n);
	cr_expect_eq(memcmp(out + n - 11, "\",\"s\":200}\n", 11), 0,
	    "%.*s", (int)n, out);
	cr_expect_eq(memcmp(out, "{\"ua\":\"xxx", 10), 0);
	log_format_free(f);
}

Test(log_format, builtins_compile)
{
	char err[128];

	for (size_t i = 0; i < log_format_nbuiltins; i++) {
		struct log_format *f = log_format_compile(
		    log_format_builtins[i].src, log_format_builtins[i].esc,
		    err, sizeof(err));

		cr_expect_not_null(f, "%s: %s", log_format_builtins[i].name,
		    err);
		log_format_free(f);
	}
}

Test(log_format, every_server_tried)
{
	struct log_values v = sample();
	const struct log_try tries[] = {
		{ "127.0.0.1:9001", 502, -1, 300 },
		{ "unix:/run/a \"b\".sock", 504, 1000, 300000 },
	};
	char err[128], out[60];
	struct log_format *f;
	size_t n;

	v.tries = tries;
	v.ntries = 2;
	cr_expect_str_eq(render("$upstream_addr|$upstream_status|"
	    "$upstream_connect_time|$upstream_response_time|$status",
	    LOG_ESC_DEFAULT, &v),
	    "127.0.0.1:9001, unix:/run/a \\x22b\\x22.sock, 127.0.0.1:9000|"
	    "502, 504, 201|-, 0.001, 0.001|0.000, 0.300, 0.020|200\n");
	/* Cut to the buffer, the literal text after it still whole. */
	f = log_format_compile("[$upstream_addr] $status", LOG_ESC_DEFAULT,
	    err, sizeof(err));
	cr_assert_not_null(f);
	n = log_format_render(f, &v, out, sizeof(out));
	cr_assert(n <= sizeof(out), "%zu", n);
	cr_expect_eq(memcmp(out + n - 6, "] 200\n", 6), 0, "%.*s", (int)n,
	    out);
	log_format_free(f);
}

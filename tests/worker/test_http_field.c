/*
 * The table of header fields treated specially: lookups in any case, the
 * flags each rule of the proxy and the cache relies on, Connection
 * options, and the options no request may name.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "worker/http.h"
#include "worker/http_field.h"
#include "worker/http_lex.h"
#include "worker/http_response.h"

static struct span
S(const char *s)
{
	return (struct span){ s, strlen(s) };
}

static struct http_header
H(const char *name, const char *value)
{
	return (struct http_header){ S(name), S(value) };
}

Test(http_field, every_row_is_found_by_its_name_in_any_case)
{
	enum http_field_id id;
	char upper[64];
	size_t i;

	for (id = HF_NONE + 1; id < HF_COUNT; id++) {
		const struct http_field *f = http_field_row(id);

		cr_assert_eq(f->id, id);
		cr_assert_eq(f->len, strlen(f->name));
		cr_expect_eq(http_field_find(S(f->name)), f, "%s", f->name);
		for (i = 0; i <= f->len; i++)
			upper[i] = (char)(f->name[i] >= 'a' &&
			    f->name[i] <= 'z' ? f->name[i] - 32 : f->name[i]);
		cr_expect_eq(http_field_find(S(upper)), f, "%s", upper);
	}
}

Test(http_field, unknown_names_have_no_flags)
{
	const char *names[] = { "", "x", "hos", "hostx", "x-cached",
	    "content-lengt", "content-length ", "x-forwarded-for-",
	    "a-very-long-field-name-beyond-any-row" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		cr_expect_null(http_field_find(S(names[i])), "%s", names[i]);
		cr_expect_eq(http_field_flags(S(names[i])), 0, "%s",
		    names[i]);
	}
	cr_expect_eq(http_field_row(HF_COUNT)->id, HF_NONE);
}

/* What http_name_eq() relies on to compare a word at a time. */
Test(http_field, rows_are_lower_case_letters_digits_and_dashes)
{
	enum http_field_id id;
	const char *p;

	for (id = HF_NONE + 1; id < HF_COUNT; id++)
		for (p = http_field_row(id)->name; *p != '\0'; p++)
			cr_expect((*p >= 'a' && *p <= 'z') ||
			    (*p >= '0' && *p <= '9') || *p == '-', "%s",
			    http_field_row(id)->name);
}

/* Every token byte but the row's own (in either case), at every place. */
Test(http_field, a_name_one_byte_off_is_not_found)
{
	const char *other = "!#$%&'*+-.^_`|~09azAZ@[{";
	enum http_field_id id;
	char name[64];
	size_t i;
	const char *o;

	for (id = HF_NONE + 1; id < HF_COUNT; id++) {
		const struct http_field *f = http_field_row(id);

		for (i = 0; i < f->len; i++) {
			for (o = other; *o != '\0'; o++) {
				if (http_lower((unsigned char)*o) ==
				    (unsigned char)f->name[i])
					continue;
				memcpy(name, f->name, f->len + 1);
				name[i] = *o;
				cr_expect_neq(http_field_find(S(name)), f,
				    "%s", name);
			}
		}
	}
}

Test(http_field, no_name_is_listed_twice)
{
	enum http_field_id a, b;

	for (a = HF_NONE + 1; a < HF_COUNT; a++)
		for (b = a + 1; b < HF_COUNT; b++)
			cr_expect_str_neq(http_field_row(a)->name,
			    http_field_row(b)->name);
}

/* The rules that used to be seven lists, one per line. */
Test(http_field, flags_of_the_rules)
{
	const struct {
		const char *name;
		unsigned flags;
	} want[] = {
		{ "Connection", HF_HOP },
		{ "Keep-Alive", HF_HOP },
		{ "Proxy-Connection", HF_HOP },
		{ "TE", HF_HOP },
		{ "Trailer", HF_HOP },
		{ "Transfer-Encoding", HF_HOP | HF_END_TO_END },
		{ "Upgrade", HF_HOP },
		{ "Host", HF_END_TO_END },
		{ "Content-Length", HF_REQ_DROP | HF_RESP_DROP |
		    HF_NOT_STORED | HF_END_TO_END },
		{ "Expect", HF_REQ_DROP },
		{ "X-Forwarded-For", HF_REQ_DROP },
		{ "X-Forwarded-Proto", HF_REQ_DROP },
		{ "X-Forwarded-Host", HF_REQ_DROP },
		{ "Server", HF_RESP_DROP | HF_NOT_STORED },
		{ "Date", HF_RESP_DROP | HF_NOT_STORED },
		{ "Age", HF_NOT_STORED },
		{ "X-Cache", HF_NOT_STORED | HF_CACHE_OWN },
		{ "If-None-Match", HF_CONDITIONAL },
		{ "If-Modified-Since", HF_CONDITIONAL },
		{ "If-Match", HF_CONDITIONAL },
		{ "If-Unmodified-Since", HF_CONDITIONAL },
		{ "If-Range", HF_CONDITIONAL },
		{ "Range", HF_CONDITIONAL },
		{ "ETag", HF_304_KEEP | HF_PLAIN_ONLY },
		{ "Vary", HF_304_KEEP },
		{ "Cache-Control", HF_304_KEEP },
		{ "Expires", HF_304_KEEP },
		{ "Content-Location", HF_304_KEEP },
		{ "Last-Modified", HF_304_KEEP },
		{ "Content-MD5", HF_PLAIN_ONLY },
		{ "Digest", HF_PLAIN_ONLY },
		{ "Content-Digest", HF_PLAIN_ONLY },
		{ "Repr-Digest", HF_PLAIN_ONLY },
		{ "Content-Type", 0 },
		{ "Cookie", 0 },
		{ "X_Forwarded_For", 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect_eq(http_field_flags(S(want[i].name)), want[i].flags,
		    "%s: %#x", want[i].name, http_field_flags(S(want[i].name)));
}

Test(http_field, connection_options)
{
	struct http_header h[] = {
		H("Host", "a"),
		H("Connection", "keep-alive, X-Secret"),
		H("connection", "x-other"),
		H("X-Secret", "1"),
	};

	cr_expect(http_field_connection_option(h, 4, S("x-secret")));
	cr_expect(http_field_connection_option(h, 4, S("X-OTHER")));
	cr_expect(http_field_connection_option(h, 4, S("Keep-Alive")));
	cr_expect_not(http_field_connection_option(h, 4, S("Host")));
	cr_expect_not(http_field_connection_option(h, 1, S("x-secret")));
	/* The hop-by-hop test of responses goes through the same table. */
	cr_expect(http_hop_by_hop(h, 4, S("X-Secret")));
	cr_expect(http_hop_by_hop(h, 0, S("Upgrade")));
	cr_expect_not(http_hop_by_hop(h, 4, S("Host")));
}

Test(http_field, options_that_name_framing_or_host)
{
	struct http_header ok[] = {
		H("Connection", "close, X-Foo, keep-alive"),
	};
	struct http_header bad[][2] = {
		{ H("Connection", "Host"), H("Host", "a") },
		{ H("Connection", "close"), H("Connection", " CONTENT-LENGTH") },
		{ H("connection", "x, transfer-encoding ,y"), H("X", "1") },
	};
	const char *named[] = { "Host", "CONTENT-LENGTH",
	    "transfer-encoding" };
	struct span s;
	size_t i;

	cr_expect_null(http_field_bad_option(ok, 1, HF_END_TO_END).p);
	for (i = 0; i < 3; i++) {
		s = http_field_bad_option(bad[i], 2, HF_END_TO_END);
		cr_assert_not_null(s.p, "%zu", i);
		cr_expect_eq(s.len, strlen(named[i]));
		cr_expect(strncmp(s.p, named[i], s.len) == 0, "%zu", i);
	}
}

/*
 * Path normalisation: one table of raw paths and what they become, run
 * with a roomy buffer and with every smaller one, each allocated to its
 * exact size so that ASan catches a write past dstlen.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http.h"

struct row {
	const char *in;
	const char *out;		/* NULL: fails with status */
	int status;
};

#define OK(in, out)	{ (in), (out), 0 }
#define BAD(in, st)	{ (in), NULL, (st) }

static const struct row rows[] = {
	/* Dot segments and slashes. */
	OK("/", "/"),
	OK("/a/b", "/a/b"),
	OK("/a/b/", "/a/b/"),
	OK("/a/b/../c", "/a/c"),
	OK("/a/b/..", "/a/"),
	OK("/a/b/../", "/a/"),
	OK("/a/./b", "/a/b"),
	OK("/a/.", "/a/"),
	OK("/a/..", "/"),
	OK("/.", "/"),
	OK("/./", "/"),
	OK("/./.", "/"),
	OK("//a///b", "/a/b"),
	OK("//", "/"),
	OK("/a//../b", "/b"),
	OK("/a/b/../../c/./d/", "/c/d/"),
	OK("/...", "/..."),
	OK("/..a/a..", "/..a/a.."),
	OK("/.a/", "/.a/"),
	OK("/a/.b/../c", "/a/c"),
	BAD("/..", 400),
	BAD("/../", 400),
	BAD("/../a", 400),
	BAD("/a/../..", 400),
	BAD("/a/../../b", 400),
	BAD("/./..", 400),

	/* Escapes. */
	OK("/%41%62%7e", "/Ab~"),
	OK("/%7E%7e", "/~~"),
	OK("/%20x", "/ x"),
	OK("/a%3Fb", "/a?b"),
	OK("/a%25b", "/a%b"),
	OK("/a%2Fb", "/a/b"),
	OK("/a%2fb%2F", "/a/b/"),
	OK("/a%2F%2Fb", "/a/b"),
	OK("/a%2F..%2Fb", "/b"),
	OK("/a/%2e%2E/b", "/b"),
	OK("/a/%2e/b", "/a/b"),
	OK("/a/.%2e", "/"),
	BAD("/%2e%2e/", 400),
	BAD("/%2e%2e", 400),
	BAD("/%2e%2e%2fetc%2fpasswd", 400),
	BAD("/%G1", 400),
	BAD("/%1G", 400),
	BAD("/%4", 400),
	BAD("/a%", 400),
	BAD("/%%41", 400),
	BAD("/%00", 400),
	BAD("/a%00.html", 400),
	BAD("/%01", 400),
	BAD("/%0a", 400),
	BAD("/%0D", 400),
	BAD("/%1f", 400),
	BAD("/%7F", 400),
	BAD("/a\x01", 400),
	BAD("/a\tb", 400),

	/* UTF-8. */
	OK("/caf%C3%A9", "/caf\xc3\xa9"),
	OK("/caf\xc3\xa9", "/caf\xc3\xa9"),
	OK("/%C2%80", "/\xc2\x80"),
	OK("/%DF%BF", "/\xdf\xbf"),
	OK("/%E2%82%AC", "/\xe2\x82\xac"),
	OK("/%E0%A0%80", "/\xe0\xa0\x80"),
	OK("/%ED%9F%BF", "/\xed\x9f\xbf"),
	OK("/%EE%80%80", "/\xee\x80\x80"),
	OK("/%EF%BF%BF", "/\xef\xbf\xbf"),
	OK("/%F0%90%80%80", "/\xf0\x90\x80\x80"),
	OK("/%F0%9F%98%80", "/\xf0\x9f\x98\x80"),
	OK("/%F4%8F%BF%BF", "/\xf4\x8f\xbf\xbf"),
	BAD("/%C0%AF", 400),
	BAD("/%C0%AE%C0%AE/", 400),
	BAD("/%C1%BF", 400),
	BAD("/\xc0\xaf", 400),
	BAD("/%E0%80%AF", 400),
	BAD("/%E0%9F%BF", 400),
	BAD("/%ED%A0%80", 400),
	BAD("/%ED%BF%BF", 400),
	BAD("/%F0%80%80%AF", 400),
	BAD("/%F0%8F%BF%BF", 400),
	BAD("/%F4%90%80%80", 400),
	BAD("/%F5%80%80%80", 400),
	BAD("/%F8%88%80%80%80", 400),
	BAD("/%FE", 400),
	BAD("/%FF", 400),
	BAD("/%80", 400),
	BAD("/a%BF", 400),
	BAD("/%C3", 400),
	BAD("/%C3/x", 400),
	BAD("/%C3%2F", 400),
	BAD("/%E2%82", 400),
	BAD("/%F0%9F%98", 400),
	BAD("/%C3%A9%A9", 400),
	BAD("/%C3%C3%A9", 400),
	BAD("/x/%C3/../y", 400),

	/* Not a path. */
	BAD("", 400),
	BAD("a/b", 400),
	BAD("*", 400),
};

static ssize_t
normalize(const char *in, size_t dstlen, char **dst, int *status)
{
	*dst = malloc(dstlen ? dstlen : 1);
	cr_assert(*dst != NULL);
	*status = -7;
	return http_path_normalize(*dst, dstlen, in, strlen(in), status);
}

Test(path, table)
{
	size_t i, inlen;
	ssize_t n;
	int status;
	char *dst;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		inlen = strlen(rows[i].in);
		/* The output is never longer than the input. */
		n = normalize(rows[i].in, inlen + 1, &dst, &status);
		if (rows[i].out == NULL) {
			cr_expect_eq(n, -1, "'%s': %zd", rows[i].in, n);
			cr_expect_eq(status, rows[i].status,
			    "'%s': status %d, want %d", rows[i].in, status,
			    rows[i].status);
		} else {
			cr_expect_eq(n, (ssize_t)strlen(rows[i].out),
			    "'%s': %zd (status %d)", rows[i].in, n, status);
			if (n >= 0)
				cr_expect_str_eq(dst, rows[i].out,
				    "'%s': got '%s', want '%s'", rows[i].in,
				    dst, rows[i].out);
		}
		free(dst);
	}
}

/* Any smaller buffer gives the same answer or 414, and is not overrun. */
Test(path, small_buffers)
{
	size_t i, len;
	ssize_t n;
	int status;
	char *dst;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (len = 0; len <= strlen(rows[i].in); len++) {
			n = normalize(rows[i].in, len, &dst, &status);
			if (n >= 0) {
				cr_expect(rows[i].out != NULL &&
				    strcmp(dst, rows[i].out) == 0,
				    "'%s' in %zu: '%s'", rows[i].in, len, dst);
				cr_expect_lt((size_t)n, len);
			} else
				cr_expect(status == 414 ||
				    status == rows[i].status,
				    "'%s' in %zu: status %d", rows[i].in, len,
				    status);
			free(dst);
		}
	}
}

Test(path, exact_fit)
{
	int status;
	ssize_t n;
	char *dst;

	/* "/abc" and its NUL need 5 bytes. */
	n = normalize("/abc", 5, &dst, &status);
	cr_expect_eq(n, 4);
	cr_expect_str_eq(dst, "/abc");
	free(dst);
	n = normalize("/abc", 4, &dst, &status);
	cr_expect_eq(n, -1);
	cr_expect_eq(status, 414);
	free(dst);

	/* A kept trailing slash needs its byte too. */
	n = normalize("/ab/", 5, &dst, &status);
	cr_expect_eq(n, 4);
	cr_expect_str_eq(dst, "/ab/");
	free(dst);
	n = normalize("/ab/", 4, &dst, &status);
	cr_expect_eq(n, -1);
	cr_expect_eq(status, 414);
	free(dst);

	/* Decoding shrinks: "%41" is one byte. */
	n = normalize("/%41%42", 4, &dst, &status);
	cr_expect_eq(n, 3);
	cr_expect_str_eq(dst, "/AB");
	free(dst);

	/* The status is left alone on success. */
	n = normalize("/", 2, &dst, &status);
	cr_expect_eq(n, 1);
	cr_expect_eq(status, -7);
	free(dst);
}

/* A path with an embedded NUL stops being a C string: length counts. */
Test(path, raw_nul)
{
	char dst[16];
	int status = 0;

	cr_expect_eq(http_path_normalize(dst, sizeof(dst), "/a\0b", 4,
	    &status), -1);
	cr_expect_eq(status, 400);
}

/*
 * Request parser, chunked decoder, Host check and reason phrases.
 *
 * Every request row is parsed twice: all at once, and fed one byte at a
 * time with a fresh buffer of exactly the bytes received so far, so that
 * ASan catches a read past them.  Both must give the same answer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http.h"

#define NHDR	64

/* A string literal with its length, NUL bytes included. */
#define RAW(s)	.raw = (s), .len = sizeof(s) - 1
#define OUT(s)	.out = (s), .outlen = sizeof(s) - 1
#define CL(n)	.has_cl = true, .cl = (n)

static const struct http_limits lim = { 1024, 4096, 32 };

/* Rows that must parse; NULL strings mean "absent". */
struct good {
	const char *name;
	const char *raw;
	size_t len;
	size_t reqlen;			/* 0: the whole input */
	enum http_method method;
	int version;
	const char *path;
	const char *query;
	const char *host;
	bool close;			/* keepalive is false */
	bool chunked;
	bool expect;
	bool has_cl;
	int64_t cl;
	size_t nheaders;
};

static const struct good goods[] = {
	{ "simple GET",
	  RAW("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "example.com", .nheaders = 1 },
	{ "query",
	  RAW("GET /a/b?x=1&y=/2? HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/a/b",
	  .query = "x=1&y=/2?", .host = "a", .nheaders = 1 },
	{ "empty query",
	  RAW("GET /a? HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/a", .query = "",
	  .host = "a", .nheaders = 1 },
	{ "HEAD with headers",
	  RAW("HEAD /index.html HTTP/1.1\r\n"
	      "Host: www.example.com:8080\r\n"
	      "User-Agent: curl/8.0\r\n"
	      "Accept: */*\r\n"
	      "X-Empty:\r\n"
	      "X-Trim: \t v a l \t\r\n\r\n"),
	  .method = HTTP_M_HEAD, .version = 11, .path = "/index.html",
	  .host = "www.example.com", .nheaders = 5 },
	{ "absolute-form",
	  RAW("GET http://Example.COM:8080/p?q HTTP/1.1\r\n"
	      "Host: other\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/p", .query = "q",
	  .host = "Example.COM", .nheaders = 1 },
	{ "absolute-form https, no path",
	  RAW("GET HTTPS://h.example HTTP/1.1\r\nHost: h.example\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "h.example", .nheaders = 1 },
	{ "absolute-form, query without path",
	  RAW("GET http://h?x HTTP/1.1\r\nHost: h\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .query = "x",
	  .host = "h", .nheaders = 1 },
	{ "absolute-form ignores a bad Host",
	  RAW("GET http://[::1]:80/ HTTP/1.1\r\nHost: not a host\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "[::1]", .nheaders = 1 },
	{ "absolute-form with empty Host",
	  RAW("GET http://h/ HTTP/1.1\r\nHost:\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "h", .nheaders = 1 },
	{ "OPTIONS *",
	  RAW("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_OPTIONS, .version = 11, .path = "*",
	  .host = "a", .nheaders = 1 },
	{ "CONNECT authority-form",
	  RAW("CONNECT example.com:443 HTTP/1.1\r\n"
	      "Host: example.com:443\r\n\r\n"),
	  .method = HTTP_M_CONNECT, .version = 11, .path = "",
	  .host = "example.com", .nheaders = 1 },
	{ "HTTP/1.0 keep-alive",
	  RAW("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 10, .path = "/", .nheaders = 1 },
	{ "HTTP/1.0 closes by default",
	  RAW("GET / HTTP/1.0\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 10, .path = "/", .close = true },
	{ "HTTP/1.0 with Host",
	  RAW("GET / HTTP/1.0\r\nHost: a.b:81\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 10, .path = "/", .host = "a.b",
	  .close = true, .nheaders = 1 },
	{ "HTTP/1.0 keep-alive and close",
	  RAW("GET / HTTP/1.0\r\nConnection: keep-alive\r\n"
	      "Connection: close\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 10, .path = "/", .close = true,
	  .nheaders = 2 },
	{ "HTTP/1.1 Connection: close",
	  RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .close = true, .nheaders = 2 },
	{ "HTTP/1.1 close in a list",
	  RAW("GET / HTTP/1.1\r\nHost: a\r\n"
	      "Connection: keep-alive,, close \r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .close = true, .nheaders = 2 },
	{ "HTTP/1.1 other Connection tokens",
	  RAW("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, TE\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 2 },
	{ "HTTP/1.2 is 1.1",
	  RAW("GET / HTTP/1.2\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 1 },
	{ "HTTP/1.9 is 1.1",
	  RAW("GET / HTTP/1.9\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 1 },
	{ "pipelined: the first request only",
	  RAW("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
	      "GET /2 HTTP/1.1\r\nHost: b\r\n\r\n"),
	  .reqlen = 28, .method = HTTP_M_GET, .version = 11, .path = "/1",
	  .host = "a", .nheaders = 1 },
	{ "body after the block",
	  RAW("POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"
	      "hello"),
	  .reqlen = 48, .method = HTTP_M_POST, .version = 11, .path = "/f",
	  .host = "a", CL(5), .nheaders = 2 },
	{ "Content-Length: 0",
	  RAW("PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length:0\r\n\r\n"),
	  .method = HTTP_M_PUT, .version = 11, .path = "/f", .host = "a",
	  CL(0), .nheaders = 2 },
	{ "Content-Length with leading zeros",
	  RAW("PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n"),
	  .method = HTTP_M_PUT, .version = 11, .path = "/f", .host = "a",
	  CL(7), .nheaders = 2 },
	{ "Content-Length 2^63-1",
	  RAW("PUT /f HTTP/1.1\r\nHost: a\r\n"
	      "Content-Length: 9223372036854775807\r\n\r\n"),
	  .method = HTTP_M_PUT, .version = 11, .path = "/f", .host = "a",
	  CL(INT64_MAX), .nheaders = 2 },
	{ "chunked",
	  RAW("POST / HTTP/1.1\r\nHost: a\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n"),
	  .method = HTTP_M_POST, .version = 11, .path = "/", .host = "a",
	  .chunked = true, .nheaders = 2 },
	{ "chunked with spaces and case",
	  RAW("POST / HTTP/1.1\r\nHost: a\r\n"
	      "Transfer-Encoding: \t Chunked  \r\n\r\n"),
	  .method = HTTP_M_POST, .version = 11, .path = "/", .host = "a",
	  .chunked = true, .nheaders = 2 },
	{ "chunked with empty list elements",
	  RAW("POST / HTTP/1.1\r\nHost: a\r\n"
	      "Transfer-Encoding: , CHUNKED ,\r\n\r\n"),
	  .method = HTTP_M_POST, .version = 11, .path = "/", .host = "a",
	  .chunked = true, .nheaders = 2 },
	{ "Transfer-Encoding lines form one list",
	  RAW("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n"),
	  .method = HTTP_M_POST, .version = 11, .path = "/", .host = "a",
	  .chunked = true, .nheaders = 3 },
	{ "leading empty lines",
	  RAW("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 1 },
	{ "unknown method",
	  RAW("BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_UNKNOWN, .version = 11, .path = "/pot",
	  .host = "a", .nheaders = 1 },
	{ "methods are case-sensitive",
	  RAW("get / HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_UNKNOWN, .version = 11, .path = "/", .host = "a",
	  .nheaders = 1 },
	{ "DELETE",
	  RAW("DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_DELETE, .version = 11, .path = "/x", .host = "a",
	  .nheaders = 1 },
	{ "PATCH",
	  RAW("PATCH /x HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_PATCH, .version = 11, .path = "/x", .host = "a",
	  .nheaders = 1 },
	{ "PURGE",
	  RAW("PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_PURGE, .version = 11, .path = "/x", .host = "a",
	  .nheaders = 1 },
	{ "TRACE",
	  RAW("TRACE /x HTTP/1.1\r\nHost: a\r\n\r\n"),
	  .method = HTTP_M_TRACE, .version = 11, .path = "/x", .host = "a",
	  .nheaders = 1 },
	{ "Expect: 100-continue",
	  RAW("PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
	      "Content-Length: 1\r\n\r\n"),
	  .method = HTTP_M_PUT, .version = 11, .path = "/x", .host = "a",
	  .expect = true, CL(1), .nheaders = 3 },
	{ "HTTP/1.0 ignores Expect",
	  RAW("PUT /x HTTP/1.0\r\nExpect: 100-continue\r\n"
	      "Expect: something-else\r\n\r\n"),
	  .method = HTTP_M_PUT, .version = 10, .path = "/x", .close = true,
	  .nheaders = 2 },
	{ "empty Expect",
	  RAW("GET /x HTTP/1.1\r\nHost: a\r\nExpect:\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/x", .host = "a",
	  .nheaders = 2 },
	{ "Host IPv6 literal",
	  RAW("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "[2001:db8::1]", .nheaders = 1 },
	{ "Host IPv4",
	  RAW("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/",
	  .host = "127.0.0.1", .nheaders = 1 },
	{ "Host with empty port",
	  RAW("GET / HTTP/1.1\r\nhOsT:\ta:\t\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 1 },
	{ "every tchar in a name, obs-text in a value",
	  RAW("GET / HTTP/1.1\r\nHost: a\r\n"
	      "!#$%&'*+-.^_`|~09AZaz: caf\xc3\xa9 \x80\xff\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 2 },
	{ "conditional fields",
	  RAW("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n"
	      "If-Match: *\r\nIf-Modified-Since: d1\r\n"
	      "If-Unmodified-Since: d2\r\nRange: bytes=0-1\r\n"
	      "If-Range: \"y\"\r\n\r\n"),
	  .method = HTTP_M_GET, .version = 11, .path = "/", .host = "a",
	  .nheaders = 7 },
};

/* Rows that must fail with this status, and a word of the reason. */
struct bad {
	const char *name;
	const char *raw;
	size_t len;
	int status;
	const char *why;
};

#define H11	"GET / HTTP/1.1\r\nHost: a\r\n"
#define P11	"POST / HTTP/1.1\r\nHost: a\r\n"

static const struct bad bads[] = {
	/* Framing and request smuggling. */
	{ "CL and TE", RAW(P11 "Content-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), 400,
	  "both Transfer-Encoding and Content-Length" },
	{ "TE and CL", RAW(P11 "Transfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n"), 400,
	  "both Transfer-Encoding and Content-Length" },
	{ "TE gzip and CL", RAW(P11 "Transfer-Encoding: gzip\r\n"
	    "Content-Length: 5\r\n\r\n"), 400 },
	{ "duplicate CL, same value", RAW(P11 "Content-Length: 5\r\n"
	    "Content-Length: 5\r\n\r\n"), 400, "duplicate Content-Length" },
	{ "CL list", RAW(P11 "Content-Length: 5, 5\r\n\r\n"), 400 },
	{ "CL plus sign", RAW(P11 "Content-Length: +5\r\n\r\n"), 400 },
	{ "CL minus sign", RAW(P11 "Content-Length: -1\r\n\r\n"), 400 },
	{ "CL space inside", RAW(P11 "Content-Length: 1 2\r\n\r\n"), 400 },
	{ "CL hex", RAW(P11 "Content-Length: 0x5\r\n\r\n"), 400 },
	{ "CL empty", RAW(P11 "Content-Length:\r\n\r\n"), 400 },
	{ "CL 2^63", RAW(P11 "Content-Length: 9223372036854775808\r\n\r\n"),
	  400 },
	{ "CL 20 digits", RAW(P11
	    "Content-Length: 99999999999999999999\r\n\r\n"), 400 },
	{ "TE gzip", RAW(P11 "Transfer-Encoding: gzip\r\n\r\n"), 501,
	  "unsupported transfer coding" },
	{ "TE identity", RAW(P11 "Transfer-Encoding: identity\r\n\r\n"),
	  501 },
	{ "TE gzip, chunked", RAW(P11
	    "Transfer-Encoding: gzip, chunked\r\n\r\n"), 501 },
	{ "TE chunked, gzip", RAW(P11
	    "Transfer-Encoding: chunked, gzip\r\n\r\n"), 501 },
	{ "TE gzip then chunked lines", RAW(P11 "Transfer-Encoding: gzip\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), 501 },
	{ "TE chunked with a parameter", RAW(P11
	    "Transfer-Encoding: chunked;q=1\r\n\r\n"), 501 },
	{ "TE chunked, chunked", RAW(P11
	    "Transfer-Encoding: chunked, chunked\r\n\r\n"), 400,
	  "chunked applied twice" },
	{ "TE chunked on two lines", RAW(P11 "Transfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), 400,
	  "chunked applied twice" },
	{ "TE in HTTP/1.0", RAW("POST / HTTP/1.0\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), 400, "HTTP/1.0" },
	{ "TE empty", RAW(P11 "Transfer-Encoding: \r\n\r\n"), 400 },
	{ "TE not a list", RAW(P11 "Transfer-Encoding: chunked x\r\n\r\n"),
	  400 },
	{ "TE quoted", RAW(P11 "Transfer-Encoding: \"chunked\"\r\n\r\n"),
	  400 },

	/* Request line. */
	{ "control byte in target",
	  RAW("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "DEL in target", RAW("GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "8-bit byte in target",
	  RAW("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "NUL in target", RAW("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "fragment in target", RAW("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "tab after method", RAW("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "tab before version", RAW("GET /\tHTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "two spaces after method", RAW("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "two spaces before version",
	  RAW("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "space after version", RAW("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"),
	  400 },
	{ "leading space", RAW(" GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "missing version", RAW("GET /\r\n\r\n"), 400,
	  "missing HTTP version" },
	{ "missing target", RAW("GET\r\n\r\n"), 400 },
	{ "lowercase http", RAW("GET / http/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "version HTTP/1.10", RAW("GET / HTTP/1.10\r\nHost: a\r\n\r\n"), 400 },
	{ "version HTTP/11", RAW("GET / HTTP/11\r\nHost: a\r\n\r\n"), 400 },
	{ "version HTTP/1.", RAW("GET / HTTP/1.\r\nHost: a\r\n\r\n"), 400 },
	{ "version HTTP/a.1", RAW("GET / HTTP/a.1\r\nHost: a\r\n\r\n"), 400 },
	{ "version HTTP/1.1x", RAW("GET / HTTP/1.1x\r\nHost: a\r\n\r\n"), 400 },
	{ "short version", RAW("GET / H\r\n\r\n"), 400 },
	{ "bad method char", RAW("GE(T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "bad method byte", RAW("G\x80T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "asterisk with GET", RAW("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	  "asterisk" },
	{ "asterisk and more", RAW("OPTIONS *x HTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "authority-form with GET",
	  RAW("GET a.example:80 HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "CONNECT without port",
	  RAW("CONNECT a.example HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "CONNECT with empty port",
	  RAW("CONNECT a.example: HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "CONNECT with empty port after a dot",
	  RAW("CONNECT a.example.: HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "CONNECT without port after a dot",
	  RAW("CONNECT a.example. HTTP/1.1\r\nHost: a\r\n\r\n"), 400 },
	{ "CONNECT origin-form", RAW("CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "target starts with ?", RAW("GET ?a HTTP/1.1\r\nHost: a\r\n\r\n"),
	  400 },
	{ "userinfo", RAW("GET http://u:p@h/ HTTP/1.1\r\nHost: h\r\n\r\n"),
	  400, "userinfo" },
	{ "empty authority", RAW("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n"),
	  400 },
	{ "scheme only", RAW("GET http:// HTTP/1.1\r\nHost: h\r\n\r\n"), 400 },
	{ "ftp scheme", RAW("GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400 },
	{ "bad port in target",
	  RAW("GET http://h:99999/ HTTP/1.1\r\nHost: h\r\n\r\n"), 400 },
	{ "bare CR in request line",
	  RAW("GET / HTTP/1.1\rHost: a\r\n\r\n"), 400,
	  "bare CR in request line" },
	{ "bare LF in request line",
	  RAW("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400,
	  "bare LF in request line" },

	/* Header fields. */
	{ "bare CR in a value", RAW(H11 "X: a\rb\r\n\r\n"), 400,
	  "bare CR in header" },
	{ "bare LF after a field", RAW(H11 "X: a\nY: b\r\n\r\n"), 400,
	  "bare LF in header" },
	{ "bare LF ends the block", RAW(H11 "\n"), 400 },
	{ "LF LF", RAW("GET / HTTP/1.1\n\n"), 400 },
	{ "obs-fold", RAW(H11 "X: a\r\n b\r\n\r\n"), 400, "obs-fold" },
	{ "obs-fold with tab", RAW(H11 "X: a\r\n\tb\r\n\r\n"), 400,
	  "obs-fold" },
	{ "space before the first field",
	  RAW("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400 },
	{ "space before colon", RAW("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400,
	  "whitespace before colon" },
	{ "tab before colon", RAW(H11 "X\t: a\r\n\r\n"), 400 },
	{ "empty name", RAW(H11 ": a\r\n\r\n"), 400, "empty field name" },
	{ "no colon", RAW(H11 "X a\r\n\r\n"), 400 },
	{ "no colon, name only", RAW(H11 "X\r\n\r\n"), 400 },
	{ "bad name char", RAW(H11 "X(y): a\r\n\r\n"), 400 },
	{ "8-bit name", RAW(H11 "X\xe9: a\r\n\r\n"), 400 },
	{ "NUL in value", RAW(H11 "X: a\0b\r\n\r\n"), 400, "field value" },
	{ "control in value", RAW(H11 "X: a\x01" "b\r\n\r\n"), 400 },
	{ "ESC in value", RAW(H11 "X: \x1b[0m\r\n\r\n"), 400 },
	{ "DEL in value", RAW(H11 "X: a\x7f\r\n\r\n"), 400 },
	{ "duplicate Range", RAW(H11 "Range: bytes=0-1\r\n"
	    "range: bytes=2-3\r\n\r\n"), 400, "duplicate Range" },
	{ "duplicate If-Range", RAW(H11 "If-Range: \"a\"\r\n"
	    "If-Range: \"a\"\r\n\r\n"), 400 },
	{ "duplicate If-Modified-Since", RAW(H11 "If-Modified-Since: x\r\n"
	    "If-Modified-Since: x\r\n\r\n"), 400 },
	{ "duplicate If-Unmodified-Since", RAW(H11
	    "If-Unmodified-Since: x\r\nIF-UNMODIFIED-SINCE: y\r\n\r\n"), 400 },
	{ "Connection not a token", RAW(H11 "Connection: close, \"x\"\r\n\r\n"),
	  400 },

	/* Host. */
	{ "missing Host in 1.1", RAW("GET / HTTP/1.1\r\nX: a\r\n\r\n"), 400,
	  "missing Host" },
	{ "missing Host, absolute-form",
	  RAW("GET http://h/ HTTP/1.1\r\n\r\n"), 400 },
	{ "duplicate Host", RAW(H11 "Host: a\r\n\r\n"), 400, "duplicate Host" },
	{ "empty Host", RAW("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 400 },
	{ "Host with a space", RAW("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400,
	  "invalid Host" },
	{ "Host with a slash", RAW("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"),
	  400 },
	{ "Host with userinfo", RAW("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"),
	  400 },
	{ "Host port too big", RAW("GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n"),
	  400 },
	{ "Host port not a number",
	  RAW("GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n"), 400 },
	{ "Host IPv6 unclosed", RAW("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"),
	  400 },
	{ "Host IPv6 bad", RAW("GET / HTTP/1.1\r\nHost: [1::2::3]\r\n\r\n"),
	  400 },
	{ "bad Host in 1.0", RAW("GET / HTTP/1.0\r\nHost: a,b:x\r\n\r\n"),
	  400 },

	/* Versions. */
	{ "HTTP/2.0", RAW("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505,
	  "version" },
	{ "HTTP/3.0", RAW("GET / HTTP/3.0\r\nHost: a\r\n\r\n"), 505 },
	{ "HTTP/0.9", RAW("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 505 },
	{ "HTTP/9.9", RAW("GET / HTTP/9.9\r\n\r\n"), 505 },

	/* Expect. */
	{ "Expect: foo", RAW(H11 "Expect: foo\r\n\r\n"), 417, "expectation" },
	{ "Expect: 100-continue, foo",
	  RAW(H11 "Expect: 100-continue, foo\r\n\r\n"), 417 },
	{ "Expect: 100-continuex", RAW(H11 "Expect: 100-continuex\r\n\r\n"),
	  417 },
	{ "Expect with parameter",
	  RAW(H11 "Expect: 100-continue;a=b\r\n\r\n"), 417 },
};

static void *
copy(const char *p, size_t n)
{
	void *b = malloc(n ? n : 1);

	cr_assert(b != NULL);
	memcpy(b, p, n);
	return b;
}

/* Parses raw in one call from a buffer of exactly len bytes. */
static ssize_t
parse_once(const char *raw, size_t len, char **buf, struct http_request *r,
    struct http_header *h, const struct http_limits *l)
{
	size_t scan = 0;

	*buf = copy(raw, len);
	return http_parse_request(r, *buf, len, &scan, h, NHDR, l);
}

/*
 * Feeds raw one byte at a time, each call with a new buffer holding only
 * what has arrived, and checks that *scan only grows while the block is
 * incomplete.  Returns the first answer that is not AGAIN; *at is the
 * number of bytes it was given.
 */
static ssize_t
parse_bytewise(const char *raw, size_t len, char **buf, size_t *at,
    struct http_request *r, struct http_header *h,
    const struct http_limits *l, const char *name)
{
	size_t scan = 0, prev = 0, k;
	ssize_t rc = HTTP_AGAIN;

	*buf = NULL;
	for (k = 1; k <= len && rc == HTTP_AGAIN; k++) {
		free(*buf);
		*buf = copy(raw, k);
		rc = http_parse_request(r, *buf, k, &scan, h, NHDR, l);
		if (rc == HTTP_AGAIN)
			cr_expect(scan >= prev, "%s: scan went back at %zu",
			    name, k);
		prev = scan;
		*at = k;
	}
	return rc;
}

static bool
span_is(struct span s, const char *want)
{
	if (want == NULL)
		return s.p == NULL;
	return s.p != NULL && s.len == strlen(want) &&
	    memcmp(s.p, want, s.len) == 0;
}

static void
check_good(const struct good *t, const char *how, ssize_t rc,
    const char *buf, const struct http_request *r)
{
	size_t want = t->reqlen ? t->reqlen : t->len;

	cr_expect_eq(rc, (ssize_t)want, "%s (%s): returned %zd, want %zu"
	    " (%d %s)", t->name, how, rc, want, r->status,
	    rc == HTTP_ERROR ? r->error : "");
	if (rc != (ssize_t)want)
		return;
	cr_expect_eq(r->method, t->method, "%s (%s): method", t->name, how);
	cr_expect_eq(r->version, t->version, "%s (%s): version %d", t->name,
	    how, r->version);
	cr_expect(span_is(r->path, t->path), "%s (%s): path '%.*s'",
	    t->name, how, (int)r->path.len, r->path.p ? r->path.p : "");
	cr_expect(span_is(r->query, t->query), "%s (%s): query '%.*s'",
	    t->name, how, (int)r->query.len, r->query.p ? r->query.p : "");
	cr_expect(span_is(r->host, t->host), "%s (%s): host '%.*s'",
	    t->name, how, (int)r->host.len, r->host.p ? r->host.p : "");
	cr_expect_eq(r->keepalive, !t->close, "%s (%s): keepalive",
	    t->name, how);
	cr_expect_eq(r->chunked, t->chunked, "%s (%s): chunked", t->name,
	    how);
	cr_expect_eq(r->expect_continue, t->expect, "%s (%s): expect",
	    t->name, how);
	cr_expect_eq(r->content_length, t->has_cl ? t->cl : -1,
	    "%s (%s): content_length %lld", t->name, how,
	    (long long)r->content_length);
	cr_expect_eq(r->nheaders, t->nheaders, "%s (%s): %zu headers",
	    t->name, how, r->nheaders);
	/* Zero-copy: the spans point into the buffer. */
	cr_expect(r->method_name.p == buf + (t->raw[0] == '\r' ? 4 : 0),
	    "%s (%s): method span", t->name, how);
	cr_expect(r->target.p > buf && r->target.p < buf + want,
	    "%s (%s): target span", t->name, how);
}

Test(parse, good_requests)
{
	struct http_header h[NHDR];
	struct http_request r;
	size_t i, at;
	ssize_t rc;
	char *buf;

	for (i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
		memset(&r, 0xa5, sizeof(r));
		rc = parse_once(goods[i].raw, goods[i].len, &buf, &r, h, &lim);
		check_good(&goods[i], "at once", rc, buf, &r);
		free(buf);

		memset(&r, 0x5a, sizeof(r));
		rc = parse_bytewise(goods[i].raw, goods[i].len, &buf, &at, &r,
		    h, &lim, goods[i].name);
		check_good(&goods[i], "byte by byte", rc, buf, &r);
		free(buf);
	}
}

Test(parse, bad_requests)
{
	struct http_header h[NHDR];
	struct http_request r;
	size_t i, at;
	ssize_t rc;
	char *buf;

	for (i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		memset(&r, 0, sizeof(r));
		rc = parse_once(bads[i].raw, bads[i].len, &buf, &r, h, &lim);
		cr_expect_eq(rc, HTTP_ERROR, "%s: returned %zd", bads[i].name,
		    rc);
		cr_expect_eq(r.status, bads[i].status, "%s: status %d, want %d"
		    " (%s)", bads[i].name, r.status, bads[i].status,
		    rc == HTTP_ERROR ? r.error : "");
		if (rc == HTTP_ERROR && bads[i].why != NULL)
			cr_expect(strstr(r.error, bads[i].why) != NULL,
			    "%s: error '%s', want '%s'", bads[i].name,
			    r.error, bads[i].why);
		else if (rc == HTTP_ERROR)
			cr_expect(r.error != NULL && r.error[0] != '\0',
			    "%s: no error text", bads[i].name);
		free(buf);

		rc = parse_bytewise(bads[i].raw, bads[i].len, &buf, &at, &r,
		    h, &lim, bads[i].name);
		cr_expect_eq(rc, HTTP_ERROR, "%s: byte by byte returned %zd",
		    bads[i].name, rc);
		cr_expect_eq(r.status, bads[i].status, "%s: byte by byte "
		    "status %d, want %d", bads[i].name, r.status,
		    bads[i].status);
		free(buf);
	}
}

Test(parse, header_values_and_lookup)
{
	static const char raw[] = "GET / HTTP/1.1\r\nHost: a\r\n"
	    "X-Trim: \t v a l \t\r\nX-Empty:\r\nx-dup: 1\r\nX-Dup: 2\r\n"
	    "If-None-Match: \"a\"\r\nIf-None-Match: \"b\"\r\n"
	    "If-Match: \"c\"\r\nif-match: \"d\"\r\n"
	    "Range: bytes=1-2\r\nIf-Range: \"e\"\r\n"
	    "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
	    "If-Unmodified-Since: x\r\n\r\n";
	struct http_header h[NHDR];
	struct http_request r;
	size_t scan = 0;
	ssize_t rc;

	rc = http_parse_request(&r, raw, sizeof(raw) - 1, &scan, h, NHDR,
	    &lim);
	cr_assert_eq(rc, (ssize_t)sizeof(raw) - 1, "%d %s", r.status,
	    r.error);
	cr_assert_eq(r.nheaders, 13);
	cr_expect(r.headers == h);
	cr_expect(span_is(h[0].name, "Host") && span_is(h[0].value, "a"));
	cr_expect(span_is(http_header_get(&r, "x-trim"), "v a l"));
	cr_expect(span_is(http_header_get(&r, "X-EMPTY"), ""));
	cr_expect(span_is(http_header_get(&r, "X-Dup"), "1"),
	    "the first of several lines is found");
	cr_expect(span_is(http_header_get(&r, "Host"), "a"));
	cr_expect(http_header_get(&r, "X-Missing").p == NULL);
	cr_expect(http_header_get(&r, "X-Trim2").p == NULL);
	cr_expect(http_header_get(&r, "X-Tri").p == NULL);

	/* If-Match and If-None-Match keep their first line. */
	cr_expect(span_is(r.if_none_match, "\"a\""));
	cr_expect(span_is(r.if_match, "\"c\""));
	cr_expect(span_is(r.range, "bytes=1-2"));
	cr_expect(span_is(r.if_range, "\"e\""));
	cr_expect(span_is(r.if_modified_since,
	    "Sun, 06 Nov 1994 08:49:37 GMT"));
	cr_expect(span_is(r.if_unmodified_since, "x"));
	cr_expect(!r.absolute_form);
}

Test(parse, absent_fields)
{
	static const char raw[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	struct http_header h[NHDR];
	struct http_request r;
	size_t scan = 0;

	cr_assert_gt(http_parse_request(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, &lim), 0);
	cr_expect(r.query.p == NULL);
	cr_expect(r.if_match.p == NULL && r.if_none_match.p == NULL);
	cr_expect(r.range.p == NULL && r.if_range.p == NULL);
	cr_expect(r.if_modified_since.p == NULL);
	cr_expect(r.if_unmodified_since.p == NULL);
	cr_expect_eq(r.content_length, -1);
	cr_expect(!r.chunked && !r.expect_continue && r.keepalive);
	cr_expect(span_is(r.method_name, "GET"));
	cr_expect(span_is(r.target, "/"));
}

/* What proxy_start() learns of Connection without scanning the fields. */
Test(parse, connection_options)
{
	static const struct {
		const char *raw;
		bool connection, options;
	} t[] = {
		{ "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, false },
		{ "GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive\r\n"
		    "\r\n", true, false },
		{ "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, "
		    "keep-alive\r\n\r\n", true, false },
		{ "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
		    "Connection: X-Opt\r\n\r\n", true, true },
		{ "GET / HTTP/1.1\r\nHost: a\r\nConnection: Host\r\n\r\n",
		    true, true },
	};
	struct http_header h[NHDR];
	struct http_request r;
	size_t i, scan;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		scan = 0;
		cr_assert_gt(http_parse_request(&r, t[i].raw, strlen(t[i].raw),
		    &scan, h, NHDR, &lim), 0, "%s", t[i].raw);
		cr_expect_eq(r.connection, t[i].connection, "%s", t[i].raw);
		cr_expect_eq(r.conn_options, t[i].options, "%s", t[i].raw);
	}
}

Test(parse, absolute_form_target)
{
	static const char raw[] = "GET http://h.example/a?b HTTP/1.1\r\n"
	    "Host: h.example\r\n\r\n";
	struct http_header h[NHDR];
	struct http_request r;
	size_t scan = 0;

	cr_assert_gt(http_parse_request(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, &lim), 0);
	cr_expect(r.absolute_form);
	cr_expect(span_is(r.target, "http://h.example/a?b"));
	cr_expect(span_is(r.path, "/a"));
	cr_expect(r.host.p == raw + 11, "host points into the target");
}

/* The parser says whether the path is its own normal form, as
 * http_path_normalize() would find it. */
Test(parse, plain_path)
{
	static const struct {
		const char *target;
		bool plain;
	} t[] = {
		{ "/", true }, { "/100b.bin", true }, { "/a/b/c.txt", true },
		{ "/a/b?x=/../y//z%41", true }, { "/a/?", true },
		{ "/a.b/c.", true }, { "/a//b", false }, { "/a/./b", false },
		{ "/a/../b", false }, { "/.env", false }, { "/a/.", false },
		{ "/%41", false }, { "/a%2Fb?q", false }, { "//", false },
		{ "http://h/a", false }, { "*", false },
	};
	struct http_header h[NHDR];
	struct http_request r;
	char raw[256], norm[256];
	size_t i, scan;
	ssize_t n, len;
	int status;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		n = snprintf(raw, sizeof(raw), "%s %s HTTP/1.1\r\nHost: h\r\n"
		    "\r\n", t[i].target[0] == '*' ? "OPTIONS" : "GET",
		    t[i].target);
		scan = 0;
		cr_assert_eq(http_parse_request(&r, raw, (size_t)n, &scan, h,
		    NHDR, &lim), n, "%s: %s", t[i].target, r.error);
		cr_expect_eq(r.path_plain, t[i].plain, "%s: plain %d",
		    t[i].target, r.path_plain);
		if (!r.path_plain)
			continue;
		len = http_path_normalize(norm, sizeof(norm), r.path.p,
		    r.path.len, &status);
		cr_expect(len == (ssize_t)r.path.len &&
		    memcmp(norm, r.path.p, r.path.len) == 0,
		    "%s: normalised to %s", t[i].target, norm);
	}
}

/*
 * Pipelined requests in one buffer: each complete one is parsed in one
 * pass, and what follows it is judged as if it came alone.
 */
Test(parse, pipelined_in_one_buffer)
{
	static const char one[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
	static const struct {
		const char *next;
		ssize_t rc;
		int status;
	} t[] = {
		{ "GET /b HTTP/1.1\r\nHost: h\r\n\r\n", 28, 0 },
		{ "GET /b HTTP/1.1\r\nHo", HTTP_AGAIN, 0 },
		{ "GET /b HTTP/1.1\r\nHost: h\r\n\r", HTTP_AGAIN, 0 },
		{ "GET /b HTTP/1.1\r\nHost: h\rx\r\n\r\n", HTTP_ERROR, 400 },
		{ "GET /b HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", HTTP_ERROR,
		  400 },
		{ "GET /b HTTP/1.1\r\nHost: h\r\n\n", HTTP_ERROR, 400 },
		{ "GET /b HTTP/1.1\r\nHost: h\r\n\rX", HTTP_ERROR, 400 },
		{ "GET /b HTTP/1.1\n\r\n", HTTP_ERROR, 400 },
		{ "\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n", 30, 0 },
		{ "\r\rGET /b HTTP/1.1\r\nHost: h\r\n\r\n", HTTP_ERROR, 400 },
		{ "GET /b HTTP/1.1\r\n\r\n", HTTP_ERROR, 400 },
	};
	struct http_header h[NHDR];
	struct http_request r;
	char buf[256];
	size_t i, n, scan;
	ssize_t rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		n = (size_t)snprintf(buf, sizeof(buf), "%s%s", one,
		    t[i].next);
		scan = 0;
		rc = http_parse_request(&r, buf, n, &scan, h, NHDR, &lim);
		cr_assert_eq(rc, (ssize_t)sizeof(one) - 1, "%zu: first %zd",
		    i, rc);
		cr_expect(span_is(r.path, "/a"));
		scan = 0;
		rc = http_parse_request(&r, buf + rc, n - (size_t)rc, &scan,
		    h, NHDR, &lim);
		cr_expect_eq(rc, t[i].rc, "%zu: %zd, want %zd", i, rc,
		    t[i].rc);
		if (rc == HTTP_ERROR)
			cr_expect_eq(r.status, t[i].status, "%zu: status %d",
			    i, r.status);
		else if (rc > 0)
			cr_expect(span_is(r.path, "/b") && r.keepalive);
	}
}

/*
 * Field values are scanned a word at a time where the block has eight
 * bytes left: random values of every length around a word, of bytes that
 * are allowed (obs-text too) or not (CTLs, DEL, CR, LF), must parse or
 * fail exactly as the byte classes say.
 */
Test(parse, field_values_word_at_a_time)
{
	static const unsigned char good[] = "aZ0 \t~!\"\x80\xff:;";
	static const unsigned char bad[] = { 0x00, 0x01, 0x08, 0x0a, 0x0b,
	    0x0d, 0x1f, 0x7f };
	struct http_header h[NHDR];
	struct http_request r;
	unsigned char val[64];
	char buf[256];
	size_t i, k, len, n, scan, a, b;
	unsigned seed = 12345;
	bool ok;
	ssize_t rc;

	for (i = 0; i < 50000; i++) {
		seed = seed * 1103515245u + 12345u;
		len = (seed >> 16) % 40;
		ok = true;
		for (k = 0; k < len; k++) {
			seed = seed * 1103515245u + 12345u;
			if ((seed >> 16) % 64 == 0) {
				val[k] = bad[(seed >> 8) % sizeof(bad)];
				ok = false;
			} else
				val[k] = good[(seed >> 8) % (sizeof(good) - 1)];
		}
		n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n"
		    "Host: a\r\nX: ");
		memcpy(buf + n, val, len);
		n += len;
		memcpy(buf + n, "\r\nY: z\r\n\r\n", 10);
		n += 10;
		scan = 0;
		rc = http_parse_request(&r, buf, n, &scan, h, NHDR, &lim);
		if (!ok) {
			cr_assert_eq(rc, HTTP_ERROR, "%zu: %zd", i, rc);
			cr_assert_eq(r.status, 400);
			continue;
		}
		cr_assert_eq(rc, (ssize_t)n, "%zu: %zd %s", i, rc,
		    rc == HTTP_ERROR ? r.error : "");
		for (a = 0; a < len && (val[a] == ' ' || val[a] == '\t'); a++)
			;
		for (b = len; b > a && (val[b - 1] == ' ' ||
		    val[b - 1] == '\t'); b--)
			;
		cr_assert_eq(r.nheaders, 3);
		cr_assert(h[1].value.len == b - a && memcmp(h[1].value.p,
		    val + a, b - a) == 0, "%zu: value of %zu bytes", i,
		    h[1].value.len);
		cr_assert(span_is(h[2].value, "z"));
	}
}

/* host_id: a number shared only by the same Host bytes (the parser
 * numbers the last value it keeps), 0 when there is none to keep. */
Test(parse, host_id)
{
	static const char *const hosts[] = { "a.example", "a.example",
	    "b.example", "a.example:80", "a.example", "A.example",
	    "longer-name.example1", "longer-name.example2",
	    "longer-name.example2", "longer-nbme.example2", "x", "y", "y",
	    "a.exampld", "a.example" };
	const size_t nh = sizeof(hosts) / sizeof(hosts[0]);
	struct http_header h[NHDR];
	struct http_request r;
	uint64_t ids[sizeof(hosts) / sizeof(hosts[0])];
	char raw[256];
	size_t i, j, scan;
	int n;

	for (i = 0; i < nh; i++) {
		n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: %s"
		    "\r\n\r\n", hosts[i]);
		scan = 0;
		cr_assert_eq(http_parse_request(&r, raw, (size_t)n, &scan, h,
		    NHDR, &lim), n);
		ids[i] = r.host_id;
		cr_expect_neq(ids[i], 0, "%s", hosts[i]);
	}
	for (i = 0; i < nh; i++)
		for (j = 0; j < i; j++)
			cr_expect_eq(ids[i] == ids[j],
			    strcmp(hosts[i], hosts[j]) == 0 && j + 1 == i,
			    "%s (%zu) and %s (%zu)", hosts[i], i, hosts[j], j);

	/* Too long to keep, from the target, or no Host at all. */
	n = snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: %0100d"
	    "\r\n\r\n", 1);
	scan = 0;
	cr_assert_eq(http_parse_request(&r, raw, (size_t)n, &scan, h, NHDR,
	    &lim), n);
	cr_expect_eq(r.host_id, 0);
	n = snprintf(raw, sizeof(raw), "GET http://a.example/ HTTP/1.1\r\n"
	    "Host: a.example\r\n\r\n");
	scan = 0;
	cr_assert_eq(http_parse_request(&r, raw, (size_t)n, &scan, h, NHDR,
	    &lim), n);
	cr_expect_eq(r.host_id, 0);
	n = snprintf(raw, sizeof(raw), "GET / HTTP/1.0\r\n\r\n");
	scan = 0;
	cr_assert_eq(http_parse_request(&r, raw, (size_t)n, &scan, h, NHDR,
	    &lim), n);
	cr_expect_eq(r.host_id, 0);
}

/* The same buffer growing in place, as a connection reads into it. */
Test(parse, incremental_in_one_buffer)
{
	static const char raw[] = "GET /x HTTP/1.1\r\nHost: a\r\n"
	    "User-Agent: test\r\n\r\n";
	size_t n = sizeof(raw) - 1, k, scan = 0, last = 0;
	struct http_header h[NHDR];
	struct http_request r;
	char buf[sizeof(raw)];
	ssize_t rc;

	for (k = 0; k < n; k++) {
		buf[k] = raw[k];
		rc = http_parse_request(&r, buf, k + 1, &scan, h, NHDR, &lim);
		if (k + 1 < n) {
			cr_assert_eq(rc, HTTP_AGAIN, "at %zu: %zd", k + 1, rc);
			/*
			 * The next call starts after everything seen (the
			 * parser keeps a flag in the top bit of *scan).
			 */
			cr_expect_eq(scan & (SIZE_MAX >> 1), k + 1,
			    "at %zu: scan offset %zu", k + 1,
			    scan & (SIZE_MAX >> 1));
			cr_expect(scan >= last);
			last = scan;
		} else
			cr_assert_eq(rc, (ssize_t)n);
	}
	cr_expect(span_is(r.path, "/x"));
	cr_expect_eq(r.nheaders, 2);

	/* A call after the end gives the same answer again. */
	rc = http_parse_request(&r, buf, n, &scan, h, NHDR, &lim);
	cr_expect_eq(rc, (ssize_t)n);
}

Test(parse, bad_line_endings_fail_at_once)
{
	struct http_header h[NHDR];
	struct http_request r;
	size_t scan;

	/* No end of block in sight, but the error is already certain. */
	scan = 0;
	cr_expect_eq(http_parse_request(&r, "GET / HTTP/1.1\nHo", 17, &scan,
	    h, NHDR, &lim), HTTP_ERROR);
	cr_expect_eq(r.status, 400);
	scan = 0;
	cr_expect_eq(http_parse_request(&r, "GET / HTTP/1.1\rH", 16, &scan,
	    h, NHDR, &lim), HTTP_ERROR);
	cr_expect_eq(r.status, 400);
	scan = 0;
	cr_expect_eq(http_parse_request(&r, "GET / HTTP/1.1\r\nX: a\rb", 22,
	    &scan, h, NHDR, &lim), HTTP_ERROR);
	cr_expect_eq(r.status, 400);

	/* A CR last in the buffer waits for its LF. */
	scan = 0;
	cr_expect_eq(http_parse_request(&r, "GET / HTTP/1.1\r", 15, &scan, h,
	    NHDR, &lim), HTTP_AGAIN);
	cr_expect_eq(http_parse_request(&r, "GET / HTTP/1.1\rX", 16, &scan, h,
	    NHDR, &lim), HTTP_ERROR);
	cr_expect_eq(r.status, 400);
}

/* Builds "GET /aaa... HTTP/1.1\r\n" of exactly n bytes into buf. */
static size_t
long_line(char *buf, size_t n)
{
	size_t t = n - strlen("GET  HTTP/1.1\r\n");

	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', t - 1);
	memcpy(buf + 4 + t, " HTTP/1.1\r\n", 11);
	return n;
}

static ssize_t
parse_lim(const char *raw, size_t len, const struct http_limits *l,
    size_t maxh, struct http_request *r)
{
	struct http_header h[NHDR];
	char *buf = copy(raw, len);
	size_t scan = 0;
	ssize_t rc;

	rc = http_parse_request(r, buf, len, &scan, h, maxh, l);
	free(buf);
	return rc;
}

Test(parse, request_line_limit)
{
	const struct http_limits l = { 100, 1000, 10 };
	struct http_request r;
	char buf[400];
	size_t n;

	/* 100 bytes with the CRLF is fine. */
	n = long_line(buf, 100);
	memcpy(buf + n, "Host: a\r\n\r\n", 11);
	cr_expect_eq(parse_lim(buf, n + 11, &l, NHDR, &r), (ssize_t)n + 11);

	/* 101 is not. */
	n = long_line(buf, 101);
	memcpy(buf + n, "Host: a\r\n\r\n", 11);
	cr_expect_eq(parse_lim(buf, n + 11, &l, NHDR, &r), HTTP_ERROR);
	cr_expect_eq(r.status, 414);

	/* 414 as soon as 100 bytes have come without an LF. */
	cr_expect_eq(parse_lim(buf, 99, &l, NHDR, &r), HTTP_AGAIN);
	cr_expect_eq(parse_lim(buf, 100, &l, NHDR, &r), HTTP_ERROR);
	cr_expect_eq(r.status, 414);

	/* Leading empty lines count against the limit. */
	memcpy(buf, "\r\n", 2);
	long_line(buf + 2, 99);
	memcpy(buf + 101, "Host: a\r\n\r\n", 11);
	cr_expect_eq(parse_lim(buf, 112, &l, NHDR, &r), HTTP_ERROR);
	cr_expect_eq(r.status, 414);

	/* A bare LF past the limit is not looked at. */
	n = long_line(buf, 200);
	buf[150] = '\n';
	cr_expect_eq(parse_lim(buf, n, &l, NHDR, &r), HTTP_ERROR);
	cr_expect_eq(r.status, 414);
}

/* Builds a request of exactly n bytes with one long header field. */
static size_t
long_block(char *buf, size_t n)
{
	static const char head[] = "GET / HTTP/1.1\r\nHost: a\r\nX: ";
	size_t hl = sizeof(head) - 1;

	memcpy(buf, head, hl);
	memset(buf + hl, 'v', n - hl - 4);
	memcpy(buf + n - 4, "\r\n\r\n", 4);
	return n;
}

Test(parse, header_block_limit)
{
	const struct http_limits l = { 100, 1000, 10 };
	struct http_request r;
	char buf[2000];

	cr_expect_eq(parse_lim(buf, long_block(buf, 1000), &l, NHDR, &r),
	    1000);
	cr_expect_eq(parse_lim(buf, long_block(buf, 1001), &l, NHDR, &r),
	    HTTP_ERROR);
	cr_expect_eq(r.status, 431);

	/* 431 once the limit is reached, without waiting for the end. */
	long_block(buf, 2000);
	cr_expect_eq(parse_lim(buf, 999, &l, NHDR, &r), HTTP_AGAIN);
	cr_expect_eq(parse_lim(buf, 1000, &l, NHDR, &r), HTTP_ERROR);
	cr_expect_eq(r.status, 431);
}

Test(parse, header_count_limit)
{
	static const char four[] = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n"
	    "B: 2\r\nC: 3\r\n\r\n";
	static const char five[] = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n"
	    "B: 2\r\nC: 3\r\nD: 4\r\n\r\n";
	const struct http_limits l = { 100, 1000, 4 };
	struct http_request r;

	cr_expect_eq(parse_lim(four, sizeof(four) - 1, &l, NHDR, &r),
	    (ssize_t)sizeof(four) - 1);
	cr_expect_eq(r.nheaders, 4);
	cr_expect_eq(parse_lim(five, sizeof(five) - 1, &l, NHDR, &r),
	    HTTP_ERROR);
	cr_expect_eq(r.status, 431);

	/* The caller's array is a limit too. */
	cr_expect_eq(parse_lim(four, sizeof(four) - 1, &lim, 3, &r),
	    HTTP_ERROR);
	cr_expect_eq(r.status, 431);
	cr_expect_eq(parse_lim(four, sizeof(four) - 1, &lim, 4, &r),
	    (ssize_t)sizeof(four) - 1);
}

Test(parse, host_check)
{
	static const struct {
		const char *in;
		ssize_t want;
	} t[] = {
		{ "example.com", 11 }, { "example.com:80", 11 }, { "a", 1 },
		{ "a:", 1 }, { "a:65535", 1 }, { "a:00080", 1 },
		{ "a:65536", -1 }, { "a:123456", -1 }, { "a:8x", -1 },
		{ "a:-1", -1 }, { "", -1 }, { ":80", -1 }, { "a b", -1 },
		{ "a/b", -1 }, { "a@b", -1 }, { "a?", -1 }, { "a#", -1 },
		{ "127.0.0.1", 9 }, { "127.0.0.1:8080", 9 }, { "a.b.", 3 },
		{ "a.b.:80", 3 }, { "A.B.", 3 }, { ".", -1 }, { ".a", -1 },
		{ "a..b", -1 }, { "a..", -1 }, { "a..:80", -1 }, { "1.2.3.4.", 7 },
		{ "a_b-c~d.e", 9 }, { "!$&'()*+,;=", 11 }, { "%41b", 4 },
		{ "%4", -1 }, { "%zz", -1 }, { "a%", -1 },
		{ "[::1]", 5 }, { "[::1]:443", 5 }, { "[::1]:", 5 },
		{ "[::]", 4 }, { "[1::]", 5 }, { "[1:2:3:4:5:6:7:8]", 17 },
		{ "[1:2:3:4:5:6::8]", 16 }, { "[2001:DB8::aB:1]", 16 },
		{ "[::ffff:192.0.2.1]", 18 }, { "[1:2:3:4:5:6:1.2.3.4]", 21 },
		{ "[1:2:3:4:5:6:7]", -1 }, { "[1:2:3:4:5:6:7:8:9]", -1 },
		{ "[1:2:3:4:5:6:7::8]", -1 }, { "[1:2:3:4:5:6:7:1.2.3.4]", -1 },
		{ "[1::2::3]", -1 }, { "[:::1]", -1 }, { "[1:]", -1 },
		{ "[:1]", -1 }, { "[]", -1 }, { "[12345::1]", -1 },
		{ "[::g]", -1 }, { "[::1", -1 }, { "[::1]x", -1 },
		{ "[::1]:99999", -1 }, { "[fe80::1%25eth0]", -1 },
		{ "[v1.x]", -1 }, { "[::ffff:192.0.2.256]", -1 },
		{ "[::ffff:192.0.2]", -1 }, { "[::ffff:01.0.2.1]", -1 },
		{ "[::ffff:1.2.3.4.5]", -1 }, { "[::1.2..4]", -1 },
		{ "[1.2.3.4]", -1 }, { "[::1]]", -1 },
	};
	size_t i;
	ssize_t got;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		got = http_host_check(t[i].in, strlen(t[i].in));
		cr_expect_eq(got, t[i].want, "'%s': %zd, want %zd", t[i].in,
		    got, t[i].want);
	}
}

Test(parse, reason)
{
	cr_expect_str_eq(http_reason(200), "OK");
	cr_expect_str_eq(http_reason(206), "Partial Content");
	cr_expect_str_eq(http_reason(304), "Not Modified");
	cr_expect_str_eq(http_reason(400), "Bad Request");
	cr_expect_str_eq(http_reason(414), "URI Too Long");
	cr_expect_str_eq(http_reason(416), "Range Not Satisfiable");
	cr_expect_str_eq(http_reason(417), "Expectation Failed");
	cr_expect_str_eq(http_reason(431),
	    "Request Header Fields Too Large");
	cr_expect_str_eq(http_reason(505), "HTTP Version Not Supported");
	cr_expect_str_eq(http_reason(299), "Unknown");
	cr_expect_str_eq(http_reason(0), "Unknown");
	cr_expect_str_eq(http_reason(-1), "Unknown");
}

Test(parse, accepts_gzip)
{
	static const struct {
		const char *v;
		bool want;
	} t[] = {
		{ "gzip", true },
		{ "GZip", true },
		{ "x-gzip", true },
		{ "deflate, gzip;q=1.0, *;q=0.5", true },
		{ "gzip;q=0.001", true },
		{ "gzip ; q=0.5", true },
		{ "br, gzip", true },
		{ "*", true },
		{ "identity", false },
		{ "", false },
		{ "gzip;q=0", false },
		{ "gzip;q=0.0", false },
		{ "gzip;q=0.000", false },
		{ "gzip; q=0 , deflate", false },
		{ "*;q=0", false },
		{ "*, gzip;q=0", false },
		{ "gzip;q=0, *", false },
		{ "*;q=0.1, identity", true },
		{ "gzipx", false },
		{ "deflate", false },
		{ "identity;q=1, *;q=0", false },
	};
	struct span v;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v.p = t[i].v;
		v.len = strlen(t[i].v);
		cr_expect_eq(http_accepts_gzip(v), t[i].want, "'%s'", t[i].v);
	}
	v.p = NULL;
	v.len = 0;
	cr_expect_not(http_accepts_gzip(v));
}

/* Every status line agrees with http_reason; unknown codes have none. */
Test(parse, status_line)
{
	char want[128];
	const char *line;
	size_t len;
	int n;

	for (int status = 0; status < 1000; status++) {
		len = 12345;
		line = http_status_line(status, &len);
		if (strcmp(http_reason(status), "Unknown") == 0) {
			cr_expect_null(line, "%d has a line", status);
			cr_expect_eq(len, 12345);
			continue;
		}
		n = snprintf(want, sizeof(want), "HTTP/1.1 %d %s\r\n", status,
		    http_reason(status));
		cr_assert_not_null(line, "%d has no line", status);
		cr_expect_eq(len, (size_t)n, "%d: length %zu", status, len);
		cr_expect_str_eq(line, want);
	}
}

Test(parse, u64)
{
	static const uint64_t t[] = {
		0, 1, 9, 10, 99, 100, 4000, 65535, 1000000007ULL,
		9223372036854775807ULL, 18446744073709551615ULL
	};
	char got[21], want[32];
	size_t n;

	uint64_t p = 1;

	/* Each length's first and last number. */
	for (int k = 1; k < 20; k++) {
		p *= 10;
		for (uint64_t v = p - 1; v <= p; v++) {
			n = http_u64(got, v);
			snprintf(want, sizeof(want), "%llu",
			    (unsigned long long)v);
			cr_expect_eq(n, strlen(want), "%s: length %zu", want,
			    n);
			cr_expect_eq(memcmp(got, want, n), 0, "%s", want);
		}
	}
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(got, 'x', sizeof(got));
		n = http_u64(got, t[i]);
		snprintf(want, sizeof(want), "%llu", (unsigned long long)t[i]);
		cr_expect_eq(n, strlen(want), "%s: length %zu", want, n);
		cr_expect_eq(memcmp(got, want, n), 0, "%s: %.*s", want,
		    (int)n, got);
		cr_expect_eq(got[n], 'x', "%s: wrote past its length", want);
	}
}

Test(parse, chunk_line)
{
	const uint64_t t[] = { 0, 1, 9, 10, 15, 16, 255, 4096, 65535,
	    0xabcdef, 0x7fffffff, UINT64_MAX };
	char got[24], want[24];
	size_t n;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(got, 'x', sizeof(got));
		n = http_chunk_line(got, t[i]);
		snprintf(want, sizeof(want), "%llx\r\n",
		    (unsigned long long)t[i]);
		cr_expect_eq(n, strlen(want), "%s: length %zu", want, n);
		cr_expect_eq(memcmp(got, want, n), 0, "%s: %.*s", want,
		    (int)n, got);
		cr_expect_eq(got[n], 'x', "%s: wrote past its length", want);
	}
}

/* Chunked bodies. */
struct chunk_row {
	const char *name;
	const char *raw;
	size_t len;
	int rc;				/* HTTP_OK or HTTP_ERROR */
	const char *out;		/* the payload when HTTP_OK */
	size_t outlen;
	size_t used;			/* input consumed; 0 means all */
};

static const struct chunk_row chunks[] = {
	{ "one chunk", RAW("5\r\nhello\r\n0\r\n\r\n"), HTTP_OK, OUT("hello") },
	{ "empty body", RAW("0\r\n\r\n"), HTTP_OK, OUT("") },
	{ "two chunks", RAW("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
	  HTTP_OK, OUT("hello world") },
	{ "hex sizes", RAW("a\r\n0123456789\r\nB\r\nabcdefghijk\r\n"
	    "0\r\n\r\n"), HTTP_OK, OUT("0123456789abcdefghijk") },
	{ "leading zeros", RAW("0005\r\nhello\r\n000\r\n\r\n"), HTTP_OK,
	  OUT("hello") },
	{ "16 digits", RAW("0000000000000005\r\nhello\r\n0\r\n\r\n"),
	  HTTP_OK, OUT("hello") },
	{ "CRLF in data", RAW("4\r\n\r\n\r\n\r\n0\r\n\r\n"), HTTP_OK,
	  OUT("\r\n\r\n") },
	{ "NUL in data", RAW("3\r\na\0b\r\n0\r\n\r\n"), HTTP_OK, OUT("a\0b") },
	{ "extensions", RAW("5;name=value;x=\"q s\"\r\nhello\r\n"
	    "0;last\r\n\r\n"), HTTP_OK, OUT("hello") },
	{ "BWS before extension", RAW("5 \t;x\r\nhello\r\n0\r\n\r\n"), HTTP_OK,
	  OUT("hello") },
	{ "trailers", RAW("5\r\nhello\r\n0\r\nX-Sum: 1\r\nY:\r\n\r\n"),
	  HTTP_OK, OUT("hello") },
	{ "next request follows", RAW("1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\n"),
	  HTTP_OK, OUT("x"), .used = 11 },
	{ "0x prefix", RAW("0x5\r\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "leading space", RAW(" 5\r\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "trailing space", RAW("5 \r\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "sign", RAW("+5\r\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "empty size", RAW("\r\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "not hex", RAW("g\r\n"), HTTP_ERROR },
	{ "17 digits", RAW("00000000000000005\r\nhello\r\n0\r\n\r\n"),
	  HTTP_ERROR },
	{ "2^63", RAW("8000000000000000\r\n"), HTTP_ERROR },
	{ "2^64-1", RAW("ffffffffffffffff\r\n"), HTTP_ERROR },
	{ "bare LF after size", RAW("5\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "CR CR after size", RAW("5\r\rhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "data too long", RAW("5\r\nhelloX\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "data too short", RAW("5\r\nhell\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "bare LF after data", RAW("5\r\nhello\n0\r\n\r\n"), HTTP_ERROR },
	{ "CR without LF after data", RAW("5\r\nhello\rx"), HTTP_ERROR },
	{ "control in extension", RAW("5;a\x01\r\nhello\r\n0\r\n\r\n"),
	  HTTP_ERROR },
	{ "bare LF in extension", RAW("5;a\nhello\r\n0\r\n\r\n"), HTTP_ERROR },
	{ "trailer obs-fold", RAW("0\r\nX: 1\r\n y\r\n\r\n"), HTTP_ERROR },
	{ "trailer space before colon", RAW("0\r\nX : 1\r\n\r\n"),
	  HTTP_ERROR },
	{ "trailer without colon", RAW("0\r\nfoo\r\n\r\n"), HTTP_ERROR },
	{ "trailer empty name", RAW("0\r\n: v\r\n\r\n"), HTTP_ERROR },
	{ "trailer NUL", RAW("0\r\nX: a\0\r\n\r\n"), HTTP_ERROR },
	{ "trailer bare LF", RAW("0\r\nX: a\n\r\n"), HTTP_ERROR },
	{ "bare LF at the end", RAW("0\r\n\n"), HTTP_ERROR },
	{ "CR x at the end", RAW("0\r\n\rx"), HTTP_ERROR },
};

/*
 * Decodes raw in pieces: first bytes, then step bytes at a time, each
 * piece in its own buffer of exactly its size.  Collects the payload in
 * out and returns the result of the last call.
 */
static int
decode_pieces(const char *raw, size_t len, size_t first, size_t step,
    char *out, size_t *outlen, size_t *used)
{
	struct http_chunked c;
	size_t off = 0, n, data;
	int rc = HTTP_AGAIN;
	char *piece;

	http_chunked_init(&c);
	*outlen = 0;
	*used = 0;
	while (off < len && rc == HTTP_AGAIN) {
		n = off == 0 ? first : step;
		if (n > len - off)
			n = len - off;
		piece = copy(raw + off, n);
		rc = http_chunked_decode(&c, piece, &n, &data);
		memcpy(out + *outlen, piece, data);
		*outlen += data;
		*used += n;
		off += n;
		free(piece);
	}
	return rc;
}

static void
check_chunks(const struct chunk_row *t, size_t first, size_t step)
{
	char out[256];
	size_t outlen, used, want;
	int rc;

	rc = decode_pieces(t->raw, t->len, first, step, out, &outlen, &used);
	cr_expect_eq(rc, t->rc, "%s (%zu, %zu): rc %d, want %d", t->name,
	    first, step, rc, t->rc);
	if (t->rc != HTTP_OK || rc != HTTP_OK)
		return;
	want = t->used ? t->used : t->len;
	cr_expect_eq(used, want, "%s (%zu, %zu): used %zu, want %zu",
	    t->name, first, step, used, want);
	cr_expect(outlen == t->outlen && memcmp(out, t->out, outlen) == 0,
	    "%s (%zu, %zu): payload '%.*s'", t->name, first, step,
	    (int)outlen, out);
}

Test(chunked, table_at_once_bytewise_and_every_split)
{
	size_t i, k;

	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		check_chunks(&chunks[i], chunks[i].len, 1);
		check_chunks(&chunks[i], 1, 1);
		for (k = 1; k < chunks[i].len; k++)
			check_chunks(&chunks[i], k, chunks[i].len);
	}
}

Test(chunked, largest_size)
{
	static const char raw[] = "7fffffffffffffff\r\nabc";
	struct http_chunked c;
	char buf[sizeof(raw)];
	size_t len = sizeof(raw) - 1, data;

	memcpy(buf, raw, sizeof(raw));
	http_chunked_init(&c);
	cr_expect_eq(http_chunked_decode(&c, buf, &len, &data), HTTP_AGAIN);
	cr_expect_eq(len, sizeof(raw) - 1);
	cr_expect_eq(data, 3);
	cr_expect(memcmp(buf, "abc", 3) == 0);
	cr_expect_eq(c.remaining, (uint64_t)INT64_MAX - 3);
}

Test(chunked, done_stays_done)
{
	char buf[] = "1\r\nx\r\n0\r\n\r\nrest";
	struct http_chunked c;
	size_t len = sizeof(buf) - 1, data;

	http_chunked_init(&c);
	cr_expect_eq(http_chunked_decode(&c, buf, &len, &data), HTTP_OK);
	cr_expect_eq(len, 11);
	cr_expect_eq(data, 1);
	cr_expect_eq(buf[0], 'x');
	cr_expect(memcmp(buf + 11, "rest", 4) == 0, "later bytes untouched");
	len = 4;
	cr_expect_eq(http_chunked_decode(&c, buf + 11, &len, &data), HTTP_OK);
	cr_expect_eq(len, 0);
	cr_expect_eq(data, 0);
}

static int
decode_string(const char *s, size_t n)
{
	struct http_chunked c;
	char *buf = copy(s, n);
	size_t data;
	int rc;

	http_chunked_init(&c);
	rc = http_chunked_decode(&c, buf, &n, &data);
	free(buf);
	return rc;
}

Test(chunked, bounds)
{
	static char buf[12000];
	size_t n;

	/* A size line with a 4000-byte extension is fine, 5000 is not. */
	memcpy(buf, "1;", 2);
	memset(buf + 2, 'e', 4000);
	memcpy(buf + 4002, "\r\nx\r\n0\r\n\r\n", 10);
	cr_expect_eq(decode_string(buf, 4012), HTTP_OK);
	memset(buf + 2, 'e', 5000);
	memcpy(buf + 5002, "\r\nx\r\n0\r\n\r\n", 10);
	cr_expect_eq(decode_string(buf, 5012), HTTP_ERROR);

	/* Trailers: 8192 bytes with the final CRLF, then one more. */
	memcpy(buf, "0\r\nX: ", 6);
	n = 8192 - 7;
	memset(buf + 6, 'v', n);
	memcpy(buf + 6 + n, "\r\n\r\n", 4);
	cr_expect_eq(decode_string(buf, 6 + n + 4), HTTP_OK);
	memset(buf + 6, 'v', n + 1);
	memcpy(buf + 6 + n + 1, "\r\n\r\n", 4);
	cr_expect_eq(decode_string(buf, 6 + n + 5), HTTP_ERROR);
}

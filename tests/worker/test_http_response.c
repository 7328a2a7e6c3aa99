/*
 * Upstream response parser, body framing tracker, hop-by-hop fields and
 * Cache-Control.
 *
 * Every response row is parsed twice: all at once, and fed one byte at a
 * time with a fresh buffer of exactly the bytes received so far, so that
 * ASan catches a read past them.  Both must give the same answer.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http.h"
#include "worker/http_response.h"

#define NHDR	64
#define MAXHDR	4096

/* A string literal with its length, NUL bytes included. */
#define RAW(s)	.raw = (s), .len = sizeof(s) - 1
#define CL(n)	.has_cl = true, .cl = (n)

#define NONE	HTTP_BODY_NONE
#define LENGTH	HTTP_BODY_LENGTH
#define CHUNKED	HTTP_BODY_CHUNKED
#define UNTIL	HTTP_BODY_UNTIL_CLOSE

/* Rows that must parse. */
struct good {
	const char *name;
	const char *raw;
	size_t len;
	size_t resplen;			/* 0: the whole input */
	bool head;			/* the request was HEAD */
	int version;
	int status;
	const char *reason;
	int framing;
	bool close;
	bool ka10;			/* keepalive_10 */
	bool chunked;
	bool has_cl;
	int64_t cl;
	size_t nheaders;
};

static const struct good goods[] = {
	{ "200 with Content-Length",
	  RAW("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
	  .resplen = 38, .version = 11, .status = 200, .reason = "OK",
	  .framing = LENGTH, CL(5), .nheaders = 1 },
	{ "200 chunked",
	  RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = CHUNKED,
	  .chunked = true, .nheaders = 1 },
	{ "chunked with spaces, case and empty elements",
	  RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: , \tChunked ,\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = CHUNKED,
	  .chunked = true, .nheaders = 1 },
	{ "Transfer-Encoding lines form one list",
	  RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = CHUNKED,
	  .chunked = true, .nheaders = 2 },
	{ "600 to 999 relayed as nginx and Varnish do",
	  RAW("HTTP/1.1 999 304 Not Generated\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 999, .reason = "304 Not Generated",
	  .framing = LENGTH, CL(0), .nheaders = 1 },
	{ "status 600", RAW("HTTP/1.1 600 X\r\nServer: x\r\n\r\n"),
	  .version = 11, .status = 600, .reason = "X", .framing = UNTIL,
	  .close = true, .nheaders = 1 },
	{ "200 until close",
	  RAW("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = UNTIL,
	  .close = true, .nheaders = 1 },
	{ "200 without any field",
	  RAW("HTTP/1.1 200 OK\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = UNTIL,
	  .close = true },
	{ "Content-Length: 0",
	  RAW("HTTP/1.1 200 OK\r\nContent-Length:0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(0), .nheaders = 1 },
	{ "Content-Length with leading zeros",
	  RAW("HTTP/1.1 200 OK\r\nContent-Length: 007 \r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(7), .nheaders = 1 },
	{ "Content-Length 2^63-1",
	  RAW("HTTP/1.1 200 OK\r\n"
	      "Content-Length: 9223372036854775807\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(INT64_MAX), .nheaders = 1 },
	{ "404 with a body",
	  RAW("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n"),
	  .version = 11, .status = 404, .reason = "Not Found",
	  .framing = LENGTH, CL(9), .nheaders = 1 },
	{ "204",
	  RAW("HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n"),
	  .version = 11, .status = 204, .reason = "No Content",
	  .framing = NONE, .nheaders = 1 },
	{ "204 with Content-Length: 0",
	  RAW("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 204, .reason = "No Content",
	  .framing = NONE, CL(0), .nheaders = 1 },
	{ "304 with Content-Length",
	  RAW("HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n"
	      "ETag: \"x\"\r\n\r\n"),
	  .version = 11, .status = 304, .reason = "Not Modified",
	  .framing = NONE, CL(1234), .nheaders = 2 },
	{ "304 with Transfer-Encoding",
	  RAW("HTTP/1.1 304 Not Modified\r\n"
	      "Transfer-Encoding: chunked\r\n\r\n"),
	  .version = 11, .status = 304, .reason = "Not Modified",
	  .framing = NONE, .chunked = true, .nheaders = 1 },
	{ "304 without length does not close",
	  RAW("HTTP/1.1 304 Not Modified\r\n\r\n"),
	  .version = 11, .status = 304, .reason = "Not Modified",
	  .framing = NONE },
	{ "HEAD: 200 with Content-Length",
	  RAW("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"),
	  .head = true, .version = 11, .status = 200, .reason = "OK",
	  .framing = NONE, CL(1000), .nheaders = 1 },
	{ "HEAD: 200 chunked",
	  RAW("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
	  .head = true, .version = 11, .status = 200, .reason = "OK",
	  .framing = NONE, .chunked = true, .nheaders = 1 },
	{ "HEAD: 200 without length does not close",
	  RAW("HTTP/1.1 200 OK\r\n\r\n"),
	  .head = true, .version = 11, .status = 200, .reason = "OK",
	  .framing = NONE },
	{ "HEAD: 404",
	  RAW("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n"),
	  .head = true, .version = 11, .status = 404, .reason = "Not Found",
	  .framing = NONE, CL(9), .nheaders = 1 },
	{ "HEAD: 100 is still interim",
	  RAW("HTTP/1.1 100 Continue\r\n\r\n"),
	  .head = true, .version = 11, .status = 100, .reason = "Continue",
	  .framing = NONE },
	{ "HTTP/1.0 closes by default",
	  RAW("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n"),
	  .version = 10, .status = 200, .reason = "OK", .framing = LENGTH,
	  .close = true, CL(2), .nheaders = 1 },
	{ "HTTP/1.0 keep-alive",
	  RAW("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n"
	      "Keep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n"),
	  .version = 10, .status = 200, .reason = "OK", .framing = LENGTH,
	  .ka10 = true, CL(2), .nheaders = 3 },
	{ "HTTP/1.0 keep-alive without length",
	  RAW("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"),
	  .version = 10, .status = 200, .reason = "OK", .framing = UNTIL,
	  .close = true, .nheaders = 1 },
	{ "HTTP/1.0 keep-alive and close",
	  RAW("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
	      "Connection: close\r\nContent-Length: 2\r\n\r\n"),
	  .version = 10, .status = 200, .reason = "OK", .framing = LENGTH,
	  .close = true, CL(2), .nheaders = 3 },
	{ "HTTP/1.0 304 keep-alive",
	  RAW("HTTP/1.0 304 Not Modified\r\nConnection: keep-alive\r\n\r\n"),
	  .version = 10, .status = 304, .reason = "Not Modified",
	  .framing = NONE, .ka10 = true, .nheaders = 1 },
	{ "HTTP/1.1 Connection: close",
	  RAW("HTTP/1.1 200 OK\r\nConnection: CLOSE\r\n"
	      "Content-Length: 2\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  .close = true, CL(2), .nheaders = 2 },
	{ "HTTP/1.1 close in a list",
	  RAW("HTTP/1.1 200 OK\r\nConnection: keep-alive,, close \r\n"
	      "Content-Length: 2\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  .close = true, CL(2), .nheaders = 2 },
	{ "HTTP/1.1 other Connection tokens",
	  RAW("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, X-Foo\r\n"
	      "Content-Length: 2\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(2), .nheaders = 2 },
	{ "HTTP/1.2 is 1.1",
	  RAW("HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(0), .nheaders = 1 },
	{ "100 Continue, then 200 in the same buffer",
	  RAW("HTTP/1.1 100 Continue\r\n\r\n"
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	  .resplen = 25, .version = 11, .status = 100, .reason = "Continue",
	  .framing = NONE },
	{ "103 Early Hints",
	  RAW("HTTP/1.1 103 Early Hints\r\n"
	      "Link: </style.css>; rel=preload; as=style\r\n"
	      "Link: </script.js>; rel=preload; as=script\r\n\r\n"),
	  .version = 11, .status = 103, .reason = "Early Hints",
	  .framing = NONE, .nheaders = 2 },
	{ "100 with Content-Length: 0",
	  RAW("HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 100, .reason = "Continue",
	  .framing = NONE, CL(0), .nheaders = 1 },
	{ "reason with spaces",
	  RAW("HTTP/1.1 200 Very  Good\tIndeed \r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "Very  Good\tIndeed ",
	  .framing = LENGTH, CL(0), .nheaders = 1 },
	{ "reason with obs-text",
	  RAW("HTTP/1.1 200 Tr\xe8s bien \xc3\xa7" "a\r\n"
	      "Content-Length: 0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "Tr\xe8s bien \xc3\xa7" "a",
	  .framing = LENGTH, CL(0), .nheaders = 1 },
	{ "empty reason",
	  RAW("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "", .framing = LENGTH,
	  CL(0), .nheaders = 1 },
	{ "reason starting with a space",
	  RAW("HTTP/1.1 404  Not Found\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 404, .reason = " Not Found",
	  .framing = LENGTH, CL(0), .nheaders = 1 },
	{ "reason that looks like a header",
	  RAW("HTTP/1.1 500 X: y\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 500, .reason = "X: y", .framing = LENGTH,
	  CL(0), .nheaders = 1 },
	{ "status 599",
	  RAW("HTTP/1.1 599 Whatever\r\nContent-Length: 0\r\n\r\n"),
	  .version = 11, .status = 599, .reason = "Whatever",
	  .framing = LENGTH, CL(0), .nheaders = 1 },
	{ "status 199 is interim",
	  RAW("HTTP/1.1 199 Hm\r\n\r\n"),
	  .version = 11, .status = 199, .reason = "Hm", .framing = NONE },
	{ "every tchar in a name, obs-text in a value",
	  RAW("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	      "!#$%&'*+-.^_`|~09AZaz: caf\xc3\xa9 \x80\xff\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(0), .nheaders = 2 },
	{ "cache fields do not change framing",
	  RAW("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
	      "ETag: \"a\"\r\nVary: Accept\r\nSet-Cookie: a=b\r\n"
	      "Content-Length: 0\r\n\r\n"),
	  .version = 11, .status = 200, .reason = "OK", .framing = LENGTH,
	  CL(0), .nheaders = 5 },
};

/* Rows that must fail, with a word of the reason (NULL: any reason). */
struct bad {
	const char *name;
	const char *raw;
	size_t len;
	bool head;
	const char *why;
};

#define R200	"HTTP/1.1 200 OK\r\n"

static const struct bad bads[] = {
	/* Framing and response splitting. */
	{ "CL and TE", RAW(R200 "Content-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .why =
	    "both Transfer-Encoding and Content-Length" },
	{ "TE and CL", RAW(R200 "Transfer-Encoding: chunked\r\n"
	    "Content-Length: 5\r\n\r\n"), .why =
	    "both Transfer-Encoding and Content-Length" },
	{ "CL and TE on a 304", RAW("HTTP/1.1 304 Not Modified\r\n"
	    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
	  .why = "both" },
	{ "CL and TE to HEAD", RAW(R200 "Content-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .head = true,
	  .why = "both" },
	{ "duplicate CL, same value", RAW(R200 "Content-Length: 5\r\n"
	    "Content-Length: 5\r\n\r\n"), .why = "duplicate Content-Length" },
	{ "duplicate CL on a 304", RAW("HTTP/1.1 304 Not Modified\r\n"
	    "Content-Length: 5\r\nContent-Length: 6\r\n\r\n"),
	  .why = "duplicate Content-Length" },
	{ "CL list", RAW(R200 "Content-Length: 5, 5\r\n\r\n"),
	  .why = "invalid Content-Length" },
	{ "CL plus sign", RAW(R200 "Content-Length: +5\r\n\r\n") },
	{ "CL minus sign", RAW(R200 "Content-Length: -1\r\n\r\n") },
	{ "CL space inside", RAW(R200 "Content-Length: 1 2\r\n\r\n") },
	{ "CL hex", RAW(R200 "Content-Length: 0x5\r\n\r\n") },
	{ "CL empty", RAW(R200 "Content-Length:\r\n\r\n"),
	  .why = "empty Content-Length" },
	{ "CL 2^63", RAW(R200 "Content-Length: 9223372036854775808\r\n\r\n"),
	  .why = "too large" },
	{ "CL 20 digits", RAW(R200
	    "Content-Length: 99999999999999999999\r\n\r\n"), .why =
	    "too large" },
	{ "bad CL on a HEAD response", RAW(R200 "Content-Length: x\r\n\r\n"),
	  .head = true, .why = "invalid Content-Length" },
	{ "TE gzip", RAW(R200 "Transfer-Encoding: gzip\r\n\r\n"),
	  .why = "unsupported transfer coding" },
	{ "TE identity", RAW(R200 "Transfer-Encoding: identity\r\n\r\n") },
	{ "TE gzip, chunked", RAW(R200
	    "Transfer-Encoding: gzip, chunked\r\n\r\n"), .why =
	    "unsupported transfer coding" },
	{ "TE chunked, gzip", RAW(R200
	    "Transfer-Encoding: chunked, gzip\r\n\r\n") },
	{ "TE gzip then chunked lines", RAW(R200 "Transfer-Encoding: gzip\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n") },
	{ "TE chunked with a parameter", RAW(R200
	    "Transfer-Encoding: chunked;q=1\r\n\r\n") },
	{ "TE quoted", RAW(R200 "Transfer-Encoding: \"chunked\"\r\n\r\n") },
	{ "TE chunked, chunked", RAW(R200
	    "Transfer-Encoding: chunked, chunked\r\n\r\n"), .why =
	    "chunked applied twice" },
	{ "TE chunked on two lines", RAW(R200 "Transfer-Encoding: chunked\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .why =
	    "chunked applied twice" },
	{ "TE empty", RAW(R200 "Transfer-Encoding: \r\n\r\n"),
	  .why = "empty Transfer-Encoding" },
	{ "TE in HTTP/1.0", RAW("HTTP/1.0 200 OK\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .why = "HTTP/1.0" },
	{ "TE gzip on a 304", RAW("HTTP/1.1 304 Not Modified\r\n"
	    "Transfer-Encoding: gzip\r\n\r\n") },
	{ "204 with TE", RAW("HTTP/1.1 204 No Content\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .why = "1xx or 204" },
	{ "204 with CL 5", RAW("HTTP/1.1 204 No Content\r\n"
	    "Content-Length: 5\r\n\r\n"), .why = "1xx or 204" },
	{ "100 with TE", RAW("HTTP/1.1 100 Continue\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"), .why = "1xx or 204" },
	{ "103 with CL 1", RAW("HTTP/1.1 103 Early Hints\r\n"
	    "Content-Length: 1\r\n\r\n"), .why = "1xx or 204" },
	{ "Connection not a token", RAW(R200
	    "Connection: close, \"x\"\r\n\r\n"), .why = "invalid Connection" },

	/* Status line. */
	{ "status 099", RAW("HTTP/1.1 099 X\r\n\r\n"),
	  .why = "invalid status code" },
	{ "status 99", RAW("HTTP/1.1 99 X\r\n\r\n"),
	  .why = "invalid status code" },
	{ "status 000", RAW("HTTP/1.1 000 X\r\n\r\n") },
	{ "status abc", RAW("HTTP/1.1 abc X\r\n\r\n"),
	  .why = "invalid status code" },
	{ "status 2OO", RAW("HTTP/1.1 2OO OK\r\n\r\n") },
	{ "status 2000", RAW("HTTP/1.1 2000 OK\r\n\r\n"),
	  .why = "missing SP after status code" },
	{ "status +20", RAW("HTTP/1.1 +20 OK\r\n\r\n") },
	{ "status then CRLF, no SP", RAW("HTTP/1.1 200\r\n"
	    "Content-Length: 0\r\n\r\n"), .why = "missing SP" },
	{ "status then tab", RAW("HTTP/1.1 200\tOK\r\n\r\n"),
	  .why = "missing SP" },
	{ "missing status", RAW("HTTP/1.1\r\n\r\n") },
	{ "missing status, SP only", RAW("HTTP/1.1 \r\n\r\n") },
	{ "two spaces before status", RAW("HTTP/1.1  200 OK\r\n\r\n") },
	{ "tab before status", RAW("HTTP/1.1\t200 OK\r\n\r\n") },
	{ "101 Switching Protocols", RAW("HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
	  .why = "101" },
	{ "HTTP/2", RAW("HTTP/2 200\r\n\r\n"), .why = "invalid status line" },
	{ "HTTP/2.0", RAW("HTTP/2.0 200 OK\r\n\r\n"),
	  .why = "unsupported HTTP version" },
	{ "HTTP/0.9", RAW("HTTP/0.9 200 OK\r\n\r\n"),
	  .why = "unsupported HTTP version" },
	{ "HTTP/3.0", RAW("HTTP/3.0 200 OK\r\n\r\n") },
	{ "HTTP/1.10", RAW("HTTP/1.10 200 OK\r\n\r\n") },
	{ "HTTP/11", RAW("HTTP/11 200 OK\r\n\r\n") },
	{ "HTTP/1.", RAW("HTTP/1. 200 OK\r\n\r\n") },
	{ "lowercase http", RAW("http/1.1 200 OK\r\n\r\n") },
	{ "ICY", RAW("ICY 200 OK\r\n\r\n") },
	{ "HTTP/0.9 body", RAW("<html>\r\n\r\n") },
	{ "short line", RAW("H\r\n\r\n") },
	{ "leading space", RAW(" HTTP/1.1 200 OK\r\n\r\n") },
	{ "empty line first", RAW("\r\nHTTP/1.1 200 OK\r\n\r\n"),
	  .why = "empty line before status line" },
	{ "empty block", RAW("\r\n\r\n") },
	{ "control in reason", RAW("HTTP/1.1 200 O\x01K\r\n\r\n"),
	  .why = "reason phrase" },
	{ "NUL in reason", RAW("HTTP/1.1 200 O\0K\r\n\r\n") },
	{ "DEL in reason", RAW("HTTP/1.1 200 OK\x7f\r\n\r\n") },
	{ "bare CR in status line", RAW("HTTP/1.1 200 OK\rX: y\r\n\r\n"),
	  .why = "bare CR" },
	{ "bare LF in status line", RAW("HTTP/1.1 200 OK\nX: y\r\n\r\n"),
	  .why = "bare LF" },

	/* Header fields. */
	{ "bare CR in a value", RAW(R200 "X: a\rb\r\n\r\n"), .why = "bare CR" },
	{ "bare LF after a field", RAW(R200 "X: a\nY: b\r\n\r\n"),
	  .why = "bare LF" },
	{ "bare LF ends the block", RAW(R200 "\n") },
	{ "LF LF", RAW("HTTP/1.1 200 OK\n\n") },
	{ "CR CR LF", RAW(R200 "\r\r\n") },
	{ "obs-fold", RAW(R200 "X: a\r\n b\r\n\r\n"), .why = "obs-fold" },
	{ "obs-fold with tab", RAW(R200 "X: a\r\n\tb\r\n\r\n"),
	  .why = "obs-fold" },
	{ "space before colon", RAW(R200 "Content-Length : 5\r\n\r\n"),
	  .why = "whitespace before colon" },
	{ "tab before colon", RAW(R200 "X\t: a\r\n\r\n") },
	{ "empty name", RAW(R200 ": a\r\n\r\n"), .why = "empty field name" },
	{ "no colon", RAW(R200 "X a\r\n\r\n") },
	{ "no colon, name only", RAW(R200 "X\r\n\r\n"),
	  .why = "missing colon" },
	{ "bad name char", RAW(R200 "X(y): a\r\n\r\n"),
	  .why = "field name" },
	{ "8-bit name", RAW(R200 "X\xe9: a\r\n\r\n") },
	{ "NUL in value", RAW(R200 "X: a\0b\r\n\r\n"), .why = "field value" },
	{ "control in value", RAW(R200 "X: a\x01" "b\r\n\r\n") },
	{ "ESC in value", RAW(R200 "X: \x1b[0m\r\n\r\n") },
	{ "DEL in value", RAW(R200 "X: a\x7f\r\n\r\n") },
	{ "VT in value", RAW(R200 "X: a\x0b" "b\r\n\r\n") },
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
parse_once(const char *raw, size_t len, bool head, char **buf,
    struct http_response *r, struct http_header *h)
{
	size_t scan = 0;

	*buf = copy(raw, len);
	return http_parse_response(r, *buf, len, &scan, h, NHDR, MAXHDR,
	    head);
}

/*
 * Feeds raw one byte at a time, each call with a new buffer holding only
 * what has arrived, and checks that *scan only grows and stays within the
 * bytes given.  Returns the first answer that is not AGAIN.
 */
static ssize_t
parse_bytewise(const char *raw, size_t len, bool head, char **buf,
    struct http_response *r, struct http_header *h, const char *name)
{
	size_t scan = 0, prev = 0, k;
	ssize_t rc = HTTP_AGAIN;

	*buf = NULL;
	for (k = 1; k <= len && rc == HTTP_AGAIN; k++) {
		free(*buf);
		*buf = copy(raw, k);
		rc = http_parse_response(r, *buf, k, &scan, h, NHDR, MAXHDR,
		    head);
		if (rc == HTTP_AGAIN) {
			cr_expect(scan >= prev && scan <= k,
			    "%s: scan %zu at %zu", name, scan, k);
			prev = scan;
		}
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
    const char *buf, const struct http_response *r)
{
	size_t want = t->resplen ? t->resplen : t->len;

	cr_expect_eq(rc, (ssize_t)want, "%s (%s): returned %zd, want %zu"
	    " (%s)", t->name, how, rc, want,
	    rc == HTTP_ERROR ? r->error : "");
	if (rc != (ssize_t)want)
		return;
	cr_expect_eq(r->version, t->version, "%s (%s): version %d", t->name,
	    how, r->version);
	cr_expect_eq(r->status, t->status, "%s (%s): status %d", t->name,
	    how, r->status);
	cr_expect(span_is(r->reason, t->reason), "%s (%s): reason '%.*s'",
	    t->name, how, (int)r->reason.len, r->reason.p);
	cr_expect(r->reason.p == buf + 13, "%s (%s): reason points into the"
	    " buffer", t->name, how);
	cr_expect_eq(r->framing, t->framing, "%s (%s): framing %d, want %d",
	    t->name, how, r->framing, t->framing);
	cr_expect_eq(r->close, t->close, "%s (%s): close", t->name, how);
	cr_expect_eq(r->keepalive_10, t->ka10, "%s (%s): keepalive_10",
	    t->name, how);
	cr_expect_eq(r->chunked, t->chunked, "%s (%s): chunked", t->name,
	    how);
	cr_expect_eq(r->content_length, t->has_cl ? t->cl : -1,
	    "%s (%s): content_length %lld", t->name, how,
	    (long long)r->content_length);
	cr_expect_eq(r->nheaders, t->nheaders, "%s (%s): %zu headers",
	    t->name, how, r->nheaders);
	cr_expect(r->error == NULL, "%s (%s): error set", t->name, how);
}

Test(response, good)
{
	struct http_header h[NHDR];
	struct http_response r;
	const struct good *t;
	size_t i;
	ssize_t rc;
	char *buf;

	for (i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
		t = &goods[i];
		memset(&r, 0xa5, sizeof(r));
		rc = parse_once(t->raw, t->len, t->head, &buf, &r, h);
		check_good(t, "at once", rc, buf, &r);
		free(buf);

		memset(&r, 0x5a, sizeof(r));
		rc = parse_bytewise(t->raw, t->len, t->head, &buf, &r, h,
		    t->name);
		check_good(t, "byte by byte", rc, buf, &r);
		free(buf);
	}
}

Test(response, bad)
{
	struct http_header h[NHDR];
	struct http_response r;
	const struct bad *t;
	const char *why;
	size_t i;
	ssize_t rc;
	char *buf;

	for (i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		t = &bads[i];
		memset(&r, 0, sizeof(r));
		rc = parse_once(t->raw, t->len, t->head, &buf, &r, h);
		free(buf);
		cr_expect_eq(rc, HTTP_ERROR, "%s: returned %zd", t->name, rc);
		if (rc != HTTP_ERROR)
			continue;
		cr_expect(r.error != NULL && r.error[0] != '\0',
		    "%s: no error text", t->name);
		if (t->why != NULL)
			cr_expect(strstr(r.error, t->why) != NULL,
			    "%s: error '%s', want '%s'", t->name, r.error,
			    t->why);
		why = r.error;

		memset(&r, 0, sizeof(r));
		rc = parse_bytewise(t->raw, t->len, t->head, &buf, &r, h,
		    t->name);
		free(buf);
		cr_expect_eq(rc, HTTP_ERROR, "%s: byte by byte returned %zd",
		    t->name, rc);
		cr_expect(rc != HTTP_ERROR || strcmp(r.error, why) == 0,
		    "%s: byte by byte error '%s', at once '%s'", t->name,
		    r.error, why);
	}
}

/* The caller's loop: skip interim responses, then read the final one. */
Test(response, interim_then_final)
{
	static const char raw[] = "HTTP/1.1 100 Continue\r\n\r\n"
	    "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
	    "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n"
	    "Location: /x\r\n\r\nok";
	struct http_header h[NHDR];
	struct http_response r;
	size_t off = 0, scan, n = sizeof(raw) - 1;
	int interim = 0;
	ssize_t rc;

	for (;;) {
		scan = 0;
		rc = http_parse_response(&r, raw + off, n - off, &scan, h,
		    NHDR, MAXHDR, false);
		cr_assert_gt(rc, 0, "at %zu: %zd %s", off, rc,
		    rc == HTTP_ERROR ? r.error : "");
		off += (size_t)rc;
		if (r.status >= 200)
			break;
		cr_expect_eq(r.framing, HTTP_BODY_NONE);
		interim++;
	}
	cr_expect_eq(interim, 2);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(r.framing, HTTP_BODY_LENGTH);
	cr_expect_eq(r.content_length, 2);
	cr_expect_eq(r.nheaders, 2);
	cr_expect(span_is(r.reason, "Created"));
	cr_expect(span_is(h[1].value, "/x"));
	cr_expect_eq(n - off, 2, "the body follows");
	cr_expect(memcmp(raw + off, "ok", 2) == 0);
}

/* The same buffer growing in place, as a connection reads into it. */
Test(response, incremental_in_one_buffer)
{
	static const char raw[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
	    "Server: test\r\n\r\n";
	size_t n = sizeof(raw) - 1, k, scan = 0;
	struct http_header h[NHDR];
	struct http_response r;
	char buf[sizeof(raw)];
	ssize_t rc;

	for (k = 0; k < n; k++) {
		buf[k] = raw[k];
		rc = http_parse_response(&r, buf, k + 1, &scan, h, NHDR,
		    MAXHDR, false);
		if (k + 1 < n) {
			cr_assert_eq(rc, HTTP_AGAIN, "at %zu: %zd", k + 1, rc);
			/* The next call starts after everything seen. */
			cr_expect_eq(scan, k + 1, "at %zu: scan %zu", k + 1,
			    scan);
		} else
			cr_assert_eq(rc, (ssize_t)n);
	}
	cr_expect_eq(r.content_length, 3);
	cr_expect_eq(r.nheaders, 2);

	/* A call after the end gives the same answer again. */
	rc = http_parse_response(&r, buf, n, &scan, h, NHDR, MAXHDR, false);
	cr_expect_eq(rc, (ssize_t)n);
}

Test(response, bad_line_endings_fail_at_once)
{
	struct http_header h[NHDR];
	struct http_response r;
	size_t scan;

	/* No end of block in sight, but the error is already certain. */
	scan = 0;
	cr_expect_eq(http_parse_response(&r, "HTTP/1.1 200 OK\nX", 17, &scan,
	    h, NHDR, MAXHDR, false), HTTP_ERROR);
	scan = 0;
	cr_expect_eq(http_parse_response(&r, "HTTP/1.1 200 OK\rX", 17, &scan,
	    h, NHDR, MAXHDR, false), HTTP_ERROR);
	scan = 0;
	cr_expect_eq(http_parse_response(&r, "\r\n", 2, &scan, h, NHDR,
	    MAXHDR, false), HTTP_ERROR);

	/* A CR last in the buffer waits for its LF. */
	scan = 0;
	cr_expect_eq(http_parse_response(&r, "HTTP/1.1 200 OK\r", 16, &scan,
	    h, NHDR, MAXHDR, false), HTTP_AGAIN);
	cr_expect_eq(http_parse_response(&r, "HTTP/1.1 200 OK\rX", 17, &scan,
	    h, NHDR, MAXHDR, false), HTTP_ERROR);
	cr_expect(strstr(r.error, "bare CR") != NULL);
}

/* Builds a response of exactly n bytes with one long header field. */
static size_t
long_block(char *buf, size_t n)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	    "X: ";
	size_t hl = sizeof(head) - 1;

	memcpy(buf, head, hl);
	memset(buf + hl, 'v', n - hl - 4);
	memcpy(buf + n - 4, "\r\n\r\n", 4);
	return n;
}

static ssize_t
parse_lim(const char *raw, size_t len, size_t maxh, size_t maxsize,
    struct http_response *r)
{
	struct http_header h[NHDR];
	char *buf = copy(raw, len);
	size_t scan = 0;
	ssize_t rc;

	rc = http_parse_response(r, buf, len, &scan, h, maxh, maxsize, false);
	free(buf);
	return rc;
}

Test(response, header_block_limit)
{
	struct http_header h[NHDR];
	struct http_response r;
	char buf[2000];
	size_t k, scan;
	ssize_t rc = HTTP_AGAIN;

	cr_expect_eq(parse_lim(buf, long_block(buf, 1000), NHDR, 1000, &r),
	    1000);
	cr_expect_eq(parse_lim(buf, long_block(buf, 1001), NHDR, 1000, &r),
	    HTTP_ERROR);
	cr_expect(strstr(r.error, "too large") != NULL, "%s", r.error);

	/* An error once the limit is reached, without waiting for the end. */
	long_block(buf, 2000);
	cr_expect_eq(parse_lim(buf, 999, NHDR, 1000, &r), HTTP_AGAIN);
	cr_expect_eq(parse_lim(buf, 1000, NHDR, 1000, &r), HTTP_ERROR);

	/* The same byte by byte. */
	scan = 0;
	for (k = 1; k <= 2000 && rc == HTTP_AGAIN; k++)
		rc = http_parse_response(&r, buf, k, &scan, h, NHDR, 1000,
		    false);
	cr_expect_eq(rc, HTTP_ERROR);
	cr_expect_eq(k - 1, 1000, "failed at %zu bytes", k - 1);

	/* A bare LF past the limit is not looked at. */
	buf[1500] = '\n';
	cr_expect_eq(parse_lim(buf, 2000, NHDR, 1000, &r), HTTP_ERROR);
	cr_expect(strstr(r.error, "too large") != NULL, "%s", r.error);
}

Test(response, header_count_limit)
{
	static const char four[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	    "A: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	struct http_response r;

	cr_expect_eq(parse_lim(four, sizeof(four) - 1, 4, MAXHDR, &r),
	    (ssize_t)sizeof(four) - 1);
	cr_expect_eq(r.nheaders, 4);
	cr_expect_eq(parse_lim(four, sizeof(four) - 1, 3, MAXHDR, &r),
	    HTTP_ERROR);
	cr_expect(strstr(r.error, "too many header fields") != NULL, "%s",
	    r.error);
	cr_expect_eq(parse_lim(four, sizeof(four) - 1, 0, MAXHDR, &r),
	    HTTP_ERROR);
}

Test(response, cache_fields_and_lookup)
{
	static const char raw[] = "HTTP/1.1 200 OK\r\n"
	    "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
	    "Cache-Control: max-age=60\r\n"
	    "cache-control: private\r\n"
	    "Expires: Sun, 06 Nov 1994 09:49:37 GMT\r\n"
	    "ETag: \"abc\"\r\n"
	    "ETag: \"second\"\r\n"
	    "Last-Modified: Sat, 05 Nov 1994 08:49:37 GMT\r\n"
	    "Vary: Accept-Encoding\r\n"
	    "VARY: Accept-Language \r\n"
	    "Set-Cookie: a=1\r\n"
	    "Set-Cookie: b=2\r\n"
	    "Age: 12\r\n"
	    "Pragma: no-cache\r\n"
	    "Content-Length: 0\r\n\r\n";
	struct http_header h[NHDR];
	struct http_cache_control cc;
	struct http_response r;
	size_t scan = 0, i;
	struct span v;

	cr_assert_eq(http_parse_response(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, MAXHDR, false), (ssize_t)sizeof(raw) - 1);
	cr_expect(r.headers == h);
	cr_expect(span_is(r.date, "Sun, 06 Nov 1994 08:49:37 GMT"));
	cr_expect(span_is(r.cache_control, "max-age=60"));
	cr_expect(span_is(r.expires, "Sun, 06 Nov 1994 09:49:37 GMT"));
	cr_expect(span_is(r.etag, "\"abc\""), "the first ETag");
	cr_expect(span_is(r.last_modified, "Sat, 05 Nov 1994 08:49:37 GMT"));
	cr_expect(span_is(r.vary, "Accept-Encoding"));
	cr_expect(span_is(r.set_cookie, "a=1"));
	cr_expect(span_is(r.age, "12"));
	cr_expect(span_is(r.pragma, "no-cache"));
	cr_expect(r.etag.p > raw && r.etag.p < raw + sizeof(raw),
	    "zero-copy");

	/* Every Vary line, in order. */
	i = 0;
	v = http_response_header(&r, "vary", &i);
	cr_expect(span_is(v, "Accept-Encoding"));
	v = http_response_header(&r, "vary", &i);
	cr_expect(span_is(v, "Accept-Language"));
	v = http_response_header(&r, "vary", &i);
	cr_expect(v.p == NULL);
	i = 0;
	cr_expect(http_response_header(&r, "X-Missing", &i).p == NULL);
	i = 0;
	cr_expect(http_response_header(&r, "Var", &i).p == NULL);

	/* The second Cache-Control line is not forgotten. */
	http_response_cache_control(&r, &cc);
	cr_expect_eq(cc.max_age, 60);
	cr_expect(cc.private_, "private from the second line");
}

Test(response, absent_fields)
{
	static const char raw[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
	    "\r\n";
	struct http_header h[NHDR];
	struct http_cache_control cc;
	struct http_response r;
	size_t scan = 0;

	memset(&r, 0xa5, sizeof(r));
	cr_assert_gt(http_parse_response(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, MAXHDR, false), 0);
	cr_expect(r.cache_control.p == NULL && r.expires.p == NULL);
	cr_expect(r.etag.p == NULL && r.last_modified.p == NULL);
	cr_expect(r.vary.p == NULL && r.set_cookie.p == NULL);
	cr_expect(r.age.p == NULL && r.date.p == NULL && r.pragma.p == NULL);
	http_response_cache_control(&r, &cc);
	cr_expect(!cc.no_store && !cc.no_cache && !cc.private_);
	cr_expect_eq(cc.max_age, -1);
	cr_expect_eq(cc.s_maxage, -1);
}

Test(hop, connection_has_token)
{
	static const struct {
		const char *value;
		const char *token;
		bool want;
	} t[] = {
		{ "close", "close", true },
		{ "Close", "close", true },
		{ "close", "CLOSE", true },
		{ "keep-alive, close", "close", true },
		{ " , ,close ,", "close", true },
		{ "x-foo,\tX-Bar", "x-bar", true },
		{ "closed", "close", false },
		{ "x-close", "close", false },
		{ "clo", "close", false },
		{ "", "close", false },
		{ ",,", "close", false },
		{ "a, b", "a, b", false },
	};
	struct span v, tok;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v.p = t[i].value;
		v.len = strlen(t[i].value);
		tok.p = t[i].token;
		tok.len = strlen(t[i].token);
		cr_expect_eq(http_connection_has_token(v, tok), t[i].want,
		    "'%s' has '%s'", t[i].value, t[i].token);
	}
	v.p = NULL;
	v.len = 0;
	tok.p = "close";
	tok.len = 5;
	cr_expect(!http_connection_has_token(v, tok), "absent value");
}

Test(hop, hop_by_hop)
{
	static const char raw[] = "HTTP/1.1 200 OK\r\n"
	    "Connection: X-Foo, close\r\n"
	    "Keep-Alive: timeout=5\r\n"
	    "connection: x-bar\r\n"
	    "X-Foo: 1\r\nX-Bar: 2\r\nX-Baz: 3\r\n"
	    "Content-Length: 0\r\n\r\n";
	static const struct {
		const char *name;
		bool want;
	} t[] = {
		{ "Connection", true }, { "connection", true },
		{ "Keep-Alive", true }, { "Proxy-Connection", true },
		{ "TE", true }, { "te", true }, { "Trailer", true },
		{ "Transfer-Encoding", true }, { "Upgrade", true },
		{ "X-Foo", true }, { "x-bar", true }, { "close", true },
		{ "X-Baz", false }, { "Content-Length", false },
		{ "Content-Type", false }, { "Trailers", false },
		{ "T", false }, { "X-Fo", false }, { "Set-Cookie", false },
		{ "Cache-Control", false }, { "Proxy-Authenticate", false },
	};
	struct http_header h[NHDR];
	struct http_response r;
	size_t scan = 0, i;
	struct span name;

	cr_assert_gt(http_parse_response(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, MAXHDR, false), 0);
	cr_expect(r.close);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		name.p = t[i].name;
		name.len = strlen(t[i].name);
		cr_expect_eq(http_hop_by_hop(r.headers, r.nheaders, name),
		    t[i].want, "%s", t[i].name);
	}

	/* With no Connection line, only the fixed names. */
	name.p = "X-Foo";
	name.len = 5;
	cr_expect(!http_hop_by_hop(h, 0, name));
	name.p = "Upgrade";
	name.len = 7;
	cr_expect(http_hop_by_hop(NULL, 0, name));
}

/* Bodies: a response header to frame them, the bytes, the outcome. */
struct body_row {
	const char *name;
	const char *resp;		/* the header block */
	bool head;
	const char *raw;
	size_t len;
	int rc;				/* after all bytes were fed */
	size_t used;			/* body bytes, or ALL */
	const char *payload;		/* when rc is not HTTP_ERROR */
	size_t plen;
	int eof;			/* http_body_eof() afterwards */
};

#define CL5	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
#define CL0	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
#define CHK	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
#define EOFR	"HTTP/1.1 200 OK\r\n\r\n"
#define R204	"HTTP/1.1 204 No Content\r\n\r\n"
#define PAY(s)	(s), sizeof(s) - 1
#define ALL	SIZE_MAX

static const struct body_row bodies[] = {
	{ "length", CL5, false, RAW("hello"),
	  HTTP_OK, ALL, PAY("hello"), HTTP_OK },
	{ "length, next bytes after it", CL5, false, RAW("helloHTTP/1.1"),
	  HTTP_OK, 5, PAY("hello"), HTTP_OK },
	{ "length, truncated", CL5, false, RAW("hel"),
	  HTTP_AGAIN, ALL, PAY("hel"), HTTP_ERROR },
	{ "length, nothing came", CL5, false, RAW(""),
	  HTTP_AGAIN, ALL, PAY(""), HTTP_ERROR },
	{ "length 0", CL0, false, RAW(""),
	  HTTP_OK, 0, PAY(""), HTTP_OK },
	{ "length 0, bytes after it", CL0, false, RAW("junk"),
	  HTTP_OK, 0, PAY(""), HTTP_OK },
	{ "chunked", CHK, false,
	  RAW("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
	  HTTP_OK, ALL, PAY("hello world"), HTTP_OK },
	{ "chunked, extensions and trailers", CHK, false,
	  RAW("5;a=b\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n"),
	  HTTP_OK, ALL, PAY("hello"), HTTP_OK },
	{ "chunked, CRLF and NUL in data", CHK, false,
	  RAW("4\r\n\r\n\0\n\r\n0\r\n\r\n"),
	  HTTP_OK, ALL, PAY("\r\n\0\n"), HTTP_OK },
	{ "chunked, empty", CHK, false, RAW("0\r\n\r\n"),
	  HTTP_OK, ALL, PAY(""), HTTP_OK },
	{ "chunked, next bytes after it", CHK, false,
	  RAW("1\r\nx\r\n0\r\n\r\nHTTP/1.1 200"),
	  HTTP_OK, 11, PAY("x"), HTTP_OK },
	{ "chunked, truncated in data", CHK, false, RAW("5\r\nhel"),
	  HTTP_AGAIN, ALL, PAY("hel"), HTTP_ERROR },
	{ "chunked, truncated in a size", CHK, false, RAW("5\r\nhello\r\n1"),
	  HTTP_AGAIN, ALL, PAY("hello"), HTTP_ERROR },
	{ "chunked, last CRLF missing", CHK, false,
	  RAW("5\r\nhello\r\n0\r\n"),
	  HTTP_AGAIN, ALL, PAY("hello"), HTTP_ERROR },
	{ "chunked, data too long", CHK, false, RAW("5\r\nhelloX\r\n"),
	  HTTP_ERROR, ALL, NULL, 0, HTTP_ERROR },
	{ "chunked, bad size", CHK, false, RAW("zz\r\n"),
	  HTTP_ERROR, ALL, NULL, 0, HTTP_ERROR },
	{ "chunked, bare LF", CHK, false, RAW("5\nhello\r\n0\r\n\r\n"),
	  HTTP_ERROR, ALL, NULL, 0, HTTP_ERROR },
	{ "until close", EOFR, false, RAW("anything at all\r\n\r\n"),
	  HTTP_AGAIN, ALL, PAY("anything at all\r\n\r\n"), HTTP_OK },
	{ "until close, nothing came", EOFR, false, RAW(""),
	  HTTP_AGAIN, ALL, PAY(""), HTTP_OK },
	{ "204 has none", R204, false, RAW("junk"),
	  HTTP_OK, 0, PAY(""), HTTP_OK },
	{ "HEAD has none", CL5, true, RAW("hello"),
	  HTTP_OK, 0, PAY(""), HTTP_OK },
	{ "HEAD chunked has none", CHK, true, RAW("0\r\n\r\n"),
	  HTTP_OK, 0, PAY(""), HTTP_OK },
};

/*
 * Feeds raw to a new tracker in pieces: first bytes, then step bytes at a
 * time, each piece in its own buffer of exactly its size, as long as the
 * tracker asks for more.  Collects the payload (when decoding), checks
 * that a tracker that does not decode leaves the bytes alone, and returns
 * the result of the last call.
 */
static int
feed_pieces(const struct http_response *r, bool decode, const char *raw,
    size_t len, size_t first, size_t step, char *out, size_t *outlen,
    size_t *used, struct http_body *b)
{
	size_t off = 0, n, data;
	int rc = HTTP_AGAIN;
	char *piece;

	http_body_init(b, r, decode);
	*outlen = 0;
	*used = 0;
	do {
		n = off == 0 ? first : step;
		if (n > len - off)
			n = len - off;
		piece = copy(raw + off, n);
		rc = http_body_feed(b, piece, &n, &data);
		cr_assert(n <= len - off && data <= n);
		if (decode)
			memcpy(out + *outlen, piece, data);
		else {
			cr_expect(memcmp(piece, raw + off, n) == 0,
			    "bytes rewritten without decode");
			memcpy(out + *outlen, piece, n);
		}
		*outlen += decode ? data : n;
		*used += n;
		off += n;
		free(piece);
	} while (off < len && rc == HTTP_AGAIN);
	return rc;
}

static void
check_body(const struct body_row *t, const struct http_response *r,
    bool decode, size_t first, size_t step)
{
	size_t outlen, used, want;
	struct http_body b;
	char out[256];
	int rc;

	rc = feed_pieces(r, decode, t->raw, t->len, first, step, out, &outlen,
	    &used, &b);
	cr_expect_eq(rc, t->rc, "%s (%s, %zu, %zu): rc %d, want %d", t->name,
	    decode ? "decode" : "check", first, step, rc, t->rc);
	cr_expect_eq(http_body_eof(&b), t->eof, "%s (%s, %zu, %zu): eof",
	    t->name, decode ? "decode" : "check", first, step);
	if (t->rc == HTTP_ERROR || rc != t->rc)
		return;
	want = t->used == ALL ? t->len : t->used;
	cr_expect_eq(used, want, "%s (%s, %zu, %zu): used %zu, want %zu",
	    t->name, decode ? "decode" : "check", first, step, used, want);
	if (!decode) {
		/* The raw bytes are relayed as they came. */
		cr_expect(outlen == used && memcmp(out, t->raw, used) == 0,
		    "%s (check): raw bytes", t->name);
		return;
	}
	cr_expect(outlen == t->plen && memcmp(out, t->payload, t->plen) == 0,
	    "%s (%zu, %zu): payload '%.*s'", t->name, first, step,
	    (int)outlen, out);
}

Test(body, table_at_once_bytewise_and_every_split)
{
	struct http_header h[NHDR];
	struct http_response r;
	const struct body_row *t;
	size_t i, k, scan;
	int mode;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		t = &bodies[i];
		scan = 0;
		cr_assert_gt(http_parse_response(&r, t->resp, strlen(t->resp),
		    &scan, h, NHDR, MAXHDR, t->head), 0, "%s", t->name);
		for (mode = 0; mode < 2; mode++) {
			check_body(t, &r, mode, t->len, 1);
			check_body(t, &r, mode, 1, 1);
			for (k = 1; k < t->len; k++)
				check_body(t, &r, mode, k, t->len);
		}
	}
}

/* The payload count of the checking mode equals the decoded length. */
Test(body, check_counts_payload)
{
	static const char raw[] = "3\r\nabc\r\n10\r\n0123456789abcdef\r\n"
	    "1;x\r\nz\r\n0\r\n\r\n";
	struct http_header h[NHDR];
	struct http_response r;
	struct http_body b;
	size_t scan = 0, len, data, k, total = 0, used = 0;
	char buf[sizeof(raw)];
	int rc = HTTP_AGAIN;

	cr_assert_gt(http_parse_response(&r, CHK, strlen(CHK), &scan, h,
	    NHDR, MAXHDR, false), 0);
	http_body_init(&b, &r, false);
	memcpy(buf, raw, sizeof(raw));
	len = sizeof(raw) - 1;
	cr_expect_eq(http_body_feed(&b, buf, &len, &data), HTTP_OK);
	cr_expect_eq(len, sizeof(raw) - 1);
	cr_expect_eq(data, 3 + 16 + 1);
	cr_expect(memcmp(buf, raw, sizeof(raw)) == 0);

	/* Byte by byte, the same counts. */
	http_body_init(&b, &r, false);
	for (k = 0; k < sizeof(raw) - 1 && rc == HTTP_AGAIN; k++) {
		len = 1;
		rc = http_body_feed(&b, buf + k, &len, &data);
		total += data;
		used += len;
	}
	cr_expect_eq(rc, HTTP_OK);
	cr_expect_eq(used, sizeof(raw) - 1);
	cr_expect_eq(total, 20);
}

/* A chunk larger than any piece, in both modes. */
Test(body, large_chunk)
{
	static char raw[70000], copyb[70000];
	struct http_header h[NHDR];
	struct http_response r;
	struct http_body b;
	size_t scan = 0, n, len, data, off, total;
	int rc, mode, i;

	n = (size_t)snprintf(raw, sizeof(raw), "%x\r\n", 65536);
	for (i = 0; i < 65536; i++)
		raw[n + (size_t)i] = (char)('a' + i % 26);
	n += 65536;
	memcpy(raw + n, "\r\n0\r\n\r\n", 7);
	n += 7;
	cr_assert_gt(http_parse_response(&r, CHK, strlen(CHK), &scan, h,
	    NHDR, MAXHDR, false), 0);

	for (mode = 0; mode < 2; mode++) {
		memcpy(copyb, raw, n);
		http_body_init(&b, &r, mode);
		rc = HTTP_AGAIN;
		total = 0;
		for (off = 0; off < n && rc == HTTP_AGAIN; off += len) {
			len = n - off < 1000 ? n - off : 1000;
			rc = http_body_feed(&b, copyb + off, &len, &data);
			if (mode == 1)
				cr_assert(data == 0 || copyb[off] ==
				    (char)('a' + total % 26), "decoded data");
			total += data;
		}
		cr_expect_eq(rc, HTTP_OK, "mode %d", mode);
		cr_expect_eq(off, n);
		cr_expect_eq(total, 65536);
		if (mode == 0)
			cr_expect(memcmp(copyb, raw, n) == 0,
			    "nothing rewritten");
	}
}

Test(body, done_and_error_stay)
{
	struct http_header h[NHDR];
	struct http_response r;
	struct http_body b;
	size_t scan = 0, len, data;
	char buf[] = "0\r\n\r\nmore", bad[] = "x\r\n";
	int mode;

	cr_assert_gt(http_parse_response(&r, CHK, strlen(CHK), &scan, h,
	    NHDR, MAXHDR, false), 0);
	for (mode = 0; mode < 2; mode++) {
		http_body_init(&b, &r, mode);
		len = sizeof(buf) - 1;
		cr_expect_eq(http_body_feed(&b, buf, &len, &data), HTTP_OK);
		cr_expect_eq(len, 5);
		len = 4;
		cr_expect_eq(http_body_feed(&b, buf + 5, &len, &data),
		    HTTP_OK);
		cr_expect_eq(len, 0);
		cr_expect_eq(data, 0);
		cr_expect_eq(http_body_eof(&b), HTTP_OK);

		http_body_init(&b, &r, mode);
		len = sizeof(bad) - 1;
		cr_expect_eq(http_body_feed(&b, bad, &len, &data),
		    HTTP_ERROR);
		len = 5;
		cr_expect_eq(http_body_feed(&b, buf, &len, &data), HTTP_ERROR,
		    "an error stays an error");
		cr_expect_eq(http_body_eof(&b), HTTP_ERROR);
	}
}

/* Cache-Control: a value and the fields it must give; -1 is absent. */
#define NS	0x001		/* no-store */
#define NC	0x002		/* no-cache */
#define NCF	0x004		/* no-cache="fields" */
#define PRV	0x008
#define PUB	0x010
#define MR	0x020		/* must-revalidate */
#define PR	0x040		/* proxy-revalidate */
#define MU	0x080		/* must-understand */
#define NT	0x100		/* no-transform */
#define IM	0x200		/* immutable */
#define BIG	HTTP_DELTA_MAX

struct cc_row {
	const char *value;
	unsigned flags;
	int64_t max_age, s_maxage, swr, sie;
};

static const struct cc_row ccs[] = {
	{ "", 0, -1, -1, -1, -1 },
	{ "max-age=60", 0, 60, -1, -1, -1 },
	{ "MAX-AGE=60", 0, 60, -1, -1, -1 },
	{ "max-age=\"60\"", 0, 60, -1, -1, -1 },
	{ "max-age=0", 0, 0, -1, -1, -1 },
	{ "max-age=007", 0, 7, -1, -1, -1 },
	{ "max-age = 5", 0, 5, -1, -1, -1 },
	{ "max-age=60, max-age=30", 0, 30, -1, -1, -1 },
	{ "max-age=30, max-age=60", 0, 30, -1, -1, -1 },
	{ "max-age=abc", 0, 0, -1, -1, -1 },
	{ "max-age", 0, 0, -1, -1, -1 },
	{ "max-age=", 0, 0, -1, -1, -1 },
	{ "max-age=-1", 0, 0, -1, -1, -1 },
	{ "max-age=1.5", 0, 0, -1, -1, -1 },
	{ "max-age=\"\"", 0, 0, -1, -1, -1 },
	{ "max-age=60, max-age=x", 0, 0, -1, -1, -1 },
	{ "max-age=2147483647", 0, 2147483647, -1, -1, -1 },
	{ "max-age=2147483648", 0, BIG, -1, -1, -1 },
	{ "max-age=99999999999999999999999999", 0, BIG, -1, -1, -1 },
	{ "max-ages=5", 0, -1, -1, -1, -1 },
	{ "xmax-age=5", 0, -1, -1, -1, -1 },
	{ "s-maxage=10, max-age=20", 0, 20, 10, -1, -1 },
	{ "s-maxage=x", 0, -1, 0, -1, -1 },
	{ "no-store", NS, -1, -1, -1, -1 },
	{ "No-Store", NS, -1, -1, -1, -1 },
	{ "no-store=1", NS, -1, -1, -1, -1 },
	{ "no-cache", NC, -1, -1, -1, -1 },
	{ "no-cache=\"Set-Cookie, X-Foo\"", NCF, -1, -1, -1, -1 },
	{ "no-cache=Set-Cookie", NCF, -1, -1, -1, -1 },
	{ "no-cache, no-cache=\"a\"", NC | NCF, -1, -1, -1, -1 },
	{ "private", PRV, -1, -1, -1, -1 },
	{ "private=\"Set-Cookie\"", PRV, -1, -1, -1, -1 },
	{ "public, max-age=3600", PUB, 3600, -1, -1, -1 },
	{ "must-revalidate, proxy-revalidate, no-transform, immutable, "
	  "must-understand", MR | PR | NT | IM | MU, -1, -1, -1, -1 },
	{ "stale-while-revalidate=30, stale-if-error=600", 0, -1, -1, 30,
	  600 },
	{ "stale-while-revalidate=x, stale-if-error", 0, -1, -1, -1, -1 },
	{ "stale-if-error=600, stale-if-error=60", 0, -1, -1, -1, 60 },
	{ "foo, bar=baz, max-age=5", 0, 5, -1, -1, -1 },
	{ "foo=\"a, no-store, max-age=1\", max-age=5", 0, 5, -1, -1, -1 },
	{ "ext=\"a\\\", no-store\", public", PUB, -1, -1, -1, -1 },
	{ " ,, max-age=5 ,, public ,", PUB, 5, -1, -1, -1 },
	{ "max-age=5 junk, private", PRV, 5, -1, -1, -1 },
	{ "\"stray\", no-store", NS, -1, -1, -1, -1 },
	{ "=, no-store", NS, -1, -1, -1, -1 },
	{ "no-cache=\"a, max-age=5", NCF, -1, -1, -1, -1 },
	{ "private,no-store,max-age=0", PRV | NS, 0, -1, -1, -1 },
};

static unsigned
cc_flags(const struct http_cache_control *cc)
{
	return (cc->no_store ? NS : 0) | (cc->no_cache ? NC : 0) |
	    (cc->has_no_cache_fields ? NCF : 0) | (cc->private_ ? PRV : 0) |
	    (cc->public_ ? PUB : 0) | (cc->must_revalidate ? MR : 0) |
	    (cc->proxy_revalidate ? PR : 0) | (cc->must_understand ? MU : 0) |
	    (cc->no_transform ? NT : 0) | (cc->immutable ? IM : 0);
}

static void
check_cc(const struct cc_row *t, const struct http_cache_control *cc)
{
	cr_expect_eq(cc_flags(cc), t->flags, "'%s': flags %#x, want %#x",
	    t->value, cc_flags(cc), t->flags);
	cr_expect(cc->max_age == t->max_age && cc->s_maxage == t->s_maxage &&
	    cc->stale_while_revalidate == t->swr &&
	    cc->stale_if_error == t->sie,
	    "'%s': max-age %lld s-maxage %lld swr %lld sie %lld", t->value,
	    (long long)cc->max_age, (long long)cc->s_maxage,
	    (long long)cc->stale_while_revalidate,
	    (long long)cc->stale_if_error);
}

Test(cache_control, table)
{
	struct http_cache_control cc;
	struct span v;
	size_t i;
	char *buf;

	for (i = 0; i < sizeof(ccs) / sizeof(ccs[0]); i++) {
		v.len = strlen(ccs[i].value);
		buf = copy(ccs[i].value, v.len);
		v.p = buf;
		memset(&cc, 0xa5, sizeof(cc));
		http_cache_control_parse(v, &cc);
		check_cc(&ccs[i], &cc);
		free(buf);
	}

	/* An absent value leaves everything absent. */
	v.p = NULL;
	v.len = 0;
	memset(&cc, 0xa5, sizeof(cc));
	http_cache_control_parse(v, &cc);
	check_cc(&ccs[0], &cc);
}

Test(cache_control, several_lines_combine)
{
	static const char raw[] = "HTTP/1.1 200 OK\r\n"
	    "Cache-Control: public, max-age=600\r\n"
	    "X-Other: no-store\r\n"
	    "CACHE-CONTROL: s-maxage=60, max-age=300\r\n"
	    "Cache-Control: no-cache=\"Set-Cookie\"\r\n"
	    "Content-Length: 0\r\n\r\n";
	struct http_header h[NHDR];
	struct http_cache_control cc;
	struct http_response r;
	size_t scan = 0;

	cr_assert_gt(http_parse_response(&r, raw, sizeof(raw) - 1, &scan, h,
	    NHDR, MAXHDR, false), 0);
	http_response_cache_control(&r, &cc);
	cr_expect(cc.public_);
	cr_expect_eq(cc.max_age, 300);
	cr_expect_eq(cc.s_maxage, 60);
	cr_expect(cc.has_no_cache_fields);
	cr_expect(!cc.no_store, "X-Other is not Cache-Control");
	cr_expect(!cc.no_cache);
}

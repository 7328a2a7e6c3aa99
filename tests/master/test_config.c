/*
 * config_load(): each test writes a config into a fresh folder (with an
 * htdocs/ inside to serve) and checks what corral would run with, or the
 * exact "FILE:LINE: message" it would stop with.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* nftw() */
#endif

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"

/* Three lines: the least a config needs besides its defaults. */
#define SERVER	"server {\n\troot = \"htdocs\"\n}\n"

static char dir[PATH_MAX];		/* real path of this test's folder */
static char conf[PATH_MAX + 16];	/* dir/corral.conf */
static char err[1024];

static void
setup(void)
{
	char tmpl[] = "/tmp/corral-config-XXXXXX";
	char docroot[PATH_MAX + 16];

	cr_assert_not_null(mkdtemp(tmpl));
	cr_assert_not_null(realpath(tmpl, dir));
	snprintf(conf, sizeof(conf), "%s/corral.conf", dir);
	snprintf(docroot, sizeof(docroot), "%s/htdocs", dir);
	cr_assert_eq(mkdir(docroot, 0755), 0);
}

static int
remove_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	return remove(path);
}

static void
teardown(void)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(config, .init = setup, .fini = teardown);

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
	fputs(text, fp);
	cr_assert_eq(fclose(fp), 0);
}

/* dir/name, in a buffer that the next call reuses. */
static const char *
in_dir(const char *name)
{
	static char buf[PATH_MAX + 64];

	snprintf(buf, sizeof(buf), "%s/%s", dir, name);
	return buf;
}

static struct config *
load(const char *text)
{
	write_file(conf, text);
	err[0] = '\0';
	return config_load(conf, err, sizeof(err));
}

static struct config *
load_ok(const char *text)
{
	struct config *cf = load(text);

	cr_assert_not_null(cf, "refused (%s):\n%s", err, text);
	return cf;
}

/* text must be refused at line (0: no line) with a message holding what. */
static void
expect_error(const char *text, int line, const char *what)
{
	struct config *cf = load(text);
	char prefix[sizeof(conf) + 32];

	if (line > 0)
		snprintf(prefix, sizeof(prefix), "%s:%d: ", conf, line);
	else
		snprintf(prefix, sizeof(prefix), "%s: ", conf);
	cr_expect_null(cf, "accepted:\n%s", text);
	config_free(cf);
	cr_expect(strncmp(err, prefix, strlen(prefix)) == 0,
	    "error \"%s\" does not start with \"%s\", for:\n%s", err, prefix,
	    text);
	cr_expect(strstr(err, what) != NULL,
	    "error \"%s\" does not mention \"%s\", for:\n%s", err, what, text);
}

static void
expect_listen(const struct config_listen *l, const char *text, int family,
    const char *addr, int port)
{
	char buf[INET6_ADDRSTRLEN];
	const void *a;
	int p;

	cr_expect_str_eq(l->text, text);
	cr_assert_eq(l->addr.ss_family, family, "%s: family", text);
	if (family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)&l->addr;

		cr_expect_eq(l->addrlen, sizeof(*sin));
		a = &sin->sin_addr;
		p = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *sin6 = (const void *)&l->addr;

		cr_expect_eq(l->addrlen, sizeof(*sin6));
		a = &sin6->sin6_addr;
		p = ntohs(sin6->sin6_port);
	}
	cr_assert_not_null(inet_ntop(family, a, buf, sizeof(buf)));
	cr_expect_str_eq(buf, addr, "%s: address %s", text, buf);
	cr_expect_eq(p, port, "%s: port %d", text, p);
}

static int
cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

Test(config, minimal_config_gets_every_default)
{
	struct config *cf = load_ok(SERVER);
	const struct config_server *s = &cf->servers[0];

	cr_expect_str_eq(cf->file, conf);
	cr_expect_eq(cf->workers, cpus());
	cr_expect_eq(cf->worker_connections, 4096);
	cr_expect_null(cf->error_log);
	cr_expect_eq(cf->log_level, L_NOTICE);
	cr_expect_null(cf->pid_file);
	cr_expect_null(cf->user);
	cr_expect_null(cf->group);
	cr_assert_eq(cf->nlisten, 1);
	expect_listen(&cf->listen[0], "127.0.0.1:8080", AF_INET, "127.0.0.1",
	    8080);
	cr_expect_eq(cf->max_request_line, 8192);
	cr_expect_eq(cf->max_header_size, 32768);
	cr_expect_eq(cf->max_headers, 100);
	cr_expect_eq(cf->max_body_size, 1048576);
	cr_expect_eq(cf->keepalive_requests, 1000);
	cr_expect_eq(cf->keepalive_timeout_ms, 75000);
	cr_expect_eq(cf->header_timeout_ms, 30000);
	cr_expect_eq(cf->body_timeout_ms, 60000);
	cr_expect_eq(cf->send_timeout_ms, 60000);
	cr_expect_eq(cf->lingering_timeout_ms, 5000);
	cr_expect(cf->server_tokens);
	cr_expect(cf->sendfile);
	cr_expect_null(cf->mime_types, "the built-in table by default");
	cr_expect_str_eq(cf->default_type, "application/octet-stream");
	cr_expect_eq(cf->max_ranges, 16);
	cr_expect_eq(cf->file_cache_entries, 1024);
	cr_expect_eq(cf->file_cache_valid_ms, 1000);
	cr_expect_eq(cf->file_cache_inactive_ms, 60000);
	cr_expect_eq(cf->file_cache_max_size, 65536);
	cr_expect_not(cf->gzip);
	cr_assert_eq(cf->ngzip_types, 9);
	cr_expect_str_eq(cf->gzip_types[0], "text/html");
	cr_expect_str_eq(cf->gzip_types[8], "image/svg+xml");
	cr_expect_eq(cf->gzip_min_length, 256);
	cr_expect_eq(cf->gzip_comp_level, 6);

	cr_assert_eq(cf->nservers, 1);
	cr_assert_eq(s->nnames, 1);
	cr_expect_str_eq(s->names[0], "localhost");
	cr_expect_str_eq(s->root, in_dir("htdocs"));
	cr_assert_eq(s->nindex, 1);
	cr_expect_str_eq(s->index[0], "index.html");
	cr_expect_null(s->access_log);
	config_free(cf);
}

Test(config, every_directive_is_read)
{
	struct config *cf = load_ok(
	    "workers = 3\n"
	    "worker_connections = 100\n"
	    "error_log = /var/log/corral/error.log\n"
	    "log_level = debug\n"
	    "pid_file = \"/run/corral.pid\"\n"
	    "user = nobody\n"
	    "group = nogroup\n"
	    "listen = {\"127.0.0.1:81\", \"[::1]:82\"}\n"
	    "max_request_line = 4k\n"
	    "max_header_size = 16k\n"
	    "max_headers = 50\n"
	    "max_body_size = 2g\n"
	    "keepalive_requests = 0\n"
	    "keepalive_timeout = 0\n"
	    "header_timeout = 10s\n"
	    "body_timeout = 2m\n"
	    "send_timeout = 1h\n"
	    "lingering_timeout = 250ms\n"
	    "server_tokens = off\n"
	    "sendfile = no\n"
	    "mime_types = /etc/mime.types\n"
	    "default_type = text/plain\n"
	    "max_ranges = 1\n"
	    "file_cache_entries = 0\n"
	    "file_cache_valid = 0\n"
	    "file_cache_inactive = 5s\n"
	    "file_cache_max_size = 1m\n"
	    "gzip = on\n"
	    "gzip_types = {text/css, \"application/wasm\"}\n"
	    "gzip_min_length = 1k\n"
	    "gzip_comp_level = 9\n"
	    "server {\n"
	    "\tnames = {example.com, www.example.com}\n"
	    "\troot = htdocs\n"
	    "\tindex = {index.htm, default.html}\n"
	    "\taccess_log = /var/log/corral/access.log\n"
	    "}\n");
	const struct config_server *s = &cf->servers[0];

	cr_expect_eq(cf->workers, 3);
	cr_expect_eq(cf->worker_connections, 100);
	cr_expect_str_eq(cf->error_log, "/var/log/corral/error.log");
	cr_expect_eq(cf->log_level, L_DEBUG);
	cr_expect_str_eq(cf->pid_file, "/run/corral.pid");
	cr_expect_str_eq(cf->user, "nobody");
	cr_expect_str_eq(cf->group, "nogroup");
	cr_assert_eq(cf->nlisten, 2);
	expect_listen(&cf->listen[0], "127.0.0.1:81", AF_INET, "127.0.0.1",
	    81);
	expect_listen(&cf->listen[1], "[::1]:82", AF_INET6, "::1", 82);
	cr_expect_eq(cf->max_request_line, 4096);
	cr_expect_eq(cf->max_header_size, 16384);
	cr_expect_eq(cf->max_headers, 50);
	cr_expect_eq(cf->max_body_size, 2147483648ULL);
	cr_expect_eq(cf->keepalive_requests, 0);
	cr_expect_eq(cf->keepalive_timeout_ms, 0);
	cr_expect_eq(cf->header_timeout_ms, 10000);
	cr_expect_eq(cf->body_timeout_ms, 120000);
	cr_expect_eq(cf->send_timeout_ms, 3600000);
	cr_expect_eq(cf->lingering_timeout_ms, 250);
	cr_expect_not(cf->server_tokens);
	cr_expect_not(cf->sendfile);
	cr_expect_str_eq(cf->mime_types, "/etc/mime.types");
	cr_expect_str_eq(cf->default_type, "text/plain");
	cr_expect_eq(cf->max_ranges, 1);
	cr_expect_eq(cf->file_cache_entries, 0);
	cr_expect_eq(cf->file_cache_valid_ms, 0);
	cr_expect_eq(cf->file_cache_inactive_ms, 5000);
	cr_expect_eq(cf->file_cache_max_size, 1048576);
	cr_expect(cf->gzip);
	cr_assert_eq(cf->ngzip_types, 2);
	cr_expect_str_eq(cf->gzip_types[0], "text/css");
	cr_expect_str_eq(cf->gzip_types[1], "application/wasm");
	cr_expect_eq(cf->gzip_min_length, 1024);
	cr_expect_eq(cf->gzip_comp_level, 9);
	cr_assert_eq(s->nnames, 2);
	cr_expect_str_eq(s->names[0], "example.com");
	cr_expect_str_eq(s->names[1], "www.example.com");
	cr_expect_str_eq(s->root, in_dir("htdocs"));
	cr_assert_eq(s->nindex, 2);
	cr_expect_str_eq(s->index[0], "index.htm");
	cr_expect_str_eq(s->index[1], "default.html");
	cr_expect_str_eq(s->access_log, "/var/log/corral/access.log");
	config_free(cf);
}

Test(config, size_units)
{
	static const struct {
		const char *s;
		uint64_t v;
	} t[] = {
		{ "0", 0 }, { "1", 1 }, { "256", 256 }, { "007", 7 },
		{ "1k", 1024 }, { "8K", 8192 }, { "1m", 1048576 },
		{ "3M", 3145728 }, { "1g", 1073741824 }, { "2G", 2147483648 },
		{ "18446744073709551615", UINT64_MAX },
		{ "17179869183g", 17179869183ULL << 30 },
	};
	size_t i;
	uint64_t v;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = 12345;
		cr_expect_eq(config_parse_size(t[i].s, &v), 0, "%s", t[i].s);
		cr_expect_eq(v, t[i].v, "%s gave %llu", t[i].s,
		    (unsigned long long)v);
	}
}

Test(config, size_rejects_garbage)
{
	static const char *const bad[] = {
		"", "k", "-1", "+1", " 1", "1 ", "10 k", "1.5m", "10kb", "1kk",
		"1t", "1b", "0x10", "1e3", "18446744073709551616",
		"17179869184g", "99999999999999999999k",
	};
	size_t i;
	uint64_t v = 12345;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(config_parse_size(bad[i], &v), -1, "\"%s\"",
		    bad[i]);
	cr_expect_eq(v, 12345, "a refused size was stored");
	cr_expect_eq(config_parse_size(NULL, &v), -1);
}

Test(config, time_units)
{
	static const struct {
		const char *s;
		int64_t ms;
	} t[] = {
		{ "0", 0 }, { "0s", 0 }, { "1", 1000 }, { "75", 75000 },
		{ "500ms", 500 }, { "1s", 1000 }, { "2m", 120000 },
		{ "1h", 3600000 }, { "1d", 86400000 }, { "90s", 90000 },
		{ "9223372036854775807ms", INT64_MAX },
	};
	size_t i;
	int64_t v;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		v = 12345;
		cr_expect_eq(config_parse_time_ms(t[i].s, &v), 0, "%s", t[i].s);
		cr_expect_eq(v, t[i].ms, "%s gave %lld", t[i].s,
		    (long long)v);
	}
}

Test(config, time_rejects_garbage)
{
	static const char *const bad[] = {
		"", "s", "-1", "+1", " 1", "1 s", "1.5s", "10sec", "1ms2",
		"1M", "1S", "1w", "1y", "1us", "9223372036854775808ms",
		"9223372036854775807s",
	};
	size_t i;
	int64_t v = 12345;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(config_parse_time_ms(bad[i], &v), -1, "\"%s\"",
		    bad[i]);
	cr_expect_eq(v, 12345, "a refused time was stored");
	cr_expect_eq(config_parse_time_ms(NULL, &v), -1);
}

Test(config, units_quoted_or_not)
{
	struct config *cf = load_ok(
	    "max_request_line = 2k\n"
	    "max_header_size = \"1M\"\n"
	    "max_body_size = 0\n"
	    "file_cache_max_size = 64m\n"
	    "keepalive_timeout = \"1500ms\"\n"
	    "header_timeout = 1\n"
	    "body_timeout = 1d\n"
	    SERVER);

	cr_expect_eq(cf->max_request_line, 2048);
	cr_expect_eq(cf->max_header_size, 1048576);
	cr_expect_eq(cf->max_body_size, 0);
	cr_expect_eq(cf->file_cache_max_size, 64 << 20);
	cr_expect_eq(cf->keepalive_timeout_ms, 1500);
	cr_expect_eq(cf->header_timeout_ms, 1000);
	cr_expect_eq(cf->body_timeout_ms, 86400000);
	config_free(cf);
}

Test(config, bad_units_name_the_line)
{
	expect_error("workers = 2\nmax_body_size = 10kb\n" SERVER, 2,
	    "max_body_size");
	expect_error("max_body_size = \"10 k\"\n" SERVER, 1, "10 k");
	expect_error("max_request_line = 1.5m\n" SERVER, 1, "1.5m");
	expect_error("send_timeout = 10sec\n" SERVER, 1, "send_timeout");
	expect_error("body_timeout = \"-5s\"\n" SERVER, 1, "body_timeout");
	expect_error("max_body_size = 99999999999g\n" SERVER, 1,
	    "max_body_size");
	expect_error("max_headers = 1k\n" SERVER, 1, "max_headers");
	expect_error("worker_connections = 0x100\n" SERVER, 1,
	    "worker_connections");
	expect_error("workers = many\n" SERVER, 1, "workers");
}

/* Each directive at its bounds is taken; one step past them is refused. */
Test(config, ranges_at_and_past_bounds)
{
	static const struct {
		const char *name, *min, *max, *below, *above, *extra;
	} t[] = {
		{ "workers", "1", "1024", "0", "1025", "" },
		{ "worker_connections", "16", "1048576", "15", "1048577", "" },
		{ "max_request_line", "256", "1m", "255", "1048577",
		    "max_header_size = 1m\n" },
		{ "max_header_size", "1k", "1m", "1023", "1025k",
		    "max_request_line = 256\n" },
		{ "file_cache_max_size", "0", "64m", "-1", "67108865", "" },
		{ "max_headers", "1", "1000", "0", "1001", "" },
		{ "keepalive_requests", "0", "1000000000", "-1",
		    "1000000001", "" },
		{ "max_ranges", "1", "1000", "0", "1001", "" },
		{ "file_cache_entries", "0", "1000000", "-1", "1000001", "" },
		{ "keepalive_timeout", "0", "1d", "-1", "86401", "" },
		{ "header_timeout", "1ms", "24h", "0", "86400001ms", "" },
		{ "body_timeout", "1ms", "1440m", "0", "86401s", "" },
		{ "send_timeout", "1ms", "86400", "0ms", "2d", "" },
		{ "lingering_timeout", "1ms", "86400000ms", "0", "25h", "" },
		{ "file_cache_valid", "0", "1d", "-1", "86401", "" },
	};
	char text[512];
	struct config *cf;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(text, sizeof(text), "%s = %s\n%s" SERVER, t[i].name,
		    t[i].min, t[i].extra);
		cf = load_ok(text);
		config_free(cf);
		snprintf(text, sizeof(text), "%s = %s\n%s" SERVER, t[i].name,
		    t[i].max, t[i].extra);
		cf = load_ok(text);
		config_free(cf);
		snprintf(text, sizeof(text), "%s = %s\n%s" SERVER, t[i].name,
		    t[i].below, t[i].extra);
		expect_error(text, 1, t[i].name);
		snprintf(text, sizeof(text), "%s = %s\n%s" SERVER, t[i].name,
		    t[i].above, t[i].extra);
		expect_error(text, 1, t[i].name);
	}
}

Test(config, range_error_shows_the_bounds)
{
	expect_error("max_request_line = 2m\nmax_header_size = 1m\n" SERVER,
	    1, "max_request_line must be between 256 and 1m");
	expect_error("header_timeout = 0\n" SERVER, 1,
	    "header_timeout must be between 1ms and 1d");
	expect_error("worker_connections = 8\n" SERVER, 1,
	    "worker_connections must be between 16 and 1048576");
}

Test(config, bounds_reach_the_struct)
{
	struct config *cf = load_ok(
	    "workers = 1024\n"
	    "worker_connections = 1048576\n"
	    "keepalive_requests = 1000000000\n"
	    "file_cache_entries = 1000000\n"
	    "lingering_timeout = 1d\n"
	    SERVER);

	cr_expect_eq(cf->workers, 1024);
	cr_expect_eq(cf->worker_connections, 1048576);
	cr_expect_eq(cf->keepalive_requests, 1000000000);
	cr_expect_eq(cf->file_cache_entries, 1000000);
	cr_expect_eq(cf->lingering_timeout_ms, 86400000);
	config_free(cf);
}

Test(config, unknown_directive_names_itself_and_its_line)
{
	expect_error("workers = 2\n\n\nbogus_thing = 1\n" SERVER, 4,
	    "bogus_thing");
	expect_error(SERVER "server {\n\troot = htdocs\n\tlocation = /x\n}\n",
	    6, "location");
	expect_error("Workers = 2\n" SERVER, 1, "Workers");
}

/* libconfuse 3.3 by itself would put this error 11 lines further down. */
Test(config, comments_do_not_shift_line_numbers)
{
	expect_error(
	    "# a comment\n"
	    "## another one\n"
	    "// C++ style\n"
	    "/* a block\n"
	    "   over two lines */\n"
	    "workers = 2 # trailing\n"
	    "worker_connections = 64 // trailing\n"
	    "error_log = \"a # b // c /* d\"\n"
	    "max_headers = 10\n"
	    "typo = 1\n"
	    SERVER, 10, "typo");
}

Test(config, comments_inside_lists_and_strings)
{
	struct config *cf = load_ok(
	    "listen = {\n"
	    "\t\"127.0.0.1:8081\",	# loopback\n"
	    "\t/* the other one */ \"[::1]:8082\"	// v6\n"
	    "}\n"
	    "error_log = \"logs/#1//x\"\n"
	    "pid_file = run//corral.pid\n"
	    SERVER);

	cr_assert_eq(cf->nlisten, 2);
	expect_listen(&cf->listen[0], "127.0.0.1:8081", AF_INET, "127.0.0.1",
	    8081);
	expect_listen(&cf->listen[1], "[::1]:8082", AF_INET6, "::1", 8082);
	cr_expect_str_eq(cf->error_log, in_dir("logs/#1//x"));
	cr_expect_str_eq(cf->pid_file, in_dir("run//corral.pid"));
	config_free(cf);
}

Test(config, unterminated_block_comment)
{
	expect_error("workers = 2\n" SERVER "\n/* never\nclosed\n", 6,
	    "unterminated");
}

Test(config, syntax_errors)
{
	expect_error("workers 2\n" SERVER, 1, "workers");
	expect_error(SERVER "}\n", 4, "brace");
	expect_error(SERVER "error_log = \"x\n", 5, "end of file");
	/* An open string takes in the lines up to the next quote. */
	expect_error("error_log = \"x\n" SERVER, 3, "'htdocs'");
}

Test(config, unclosed_braces)
{
	expect_error("workers = 1\n" SERVER "server {\n\troot = htdocs\n", 5,
	    "never closed");
	expect_error("listen = {8080,\n8081\n" SERVER, 1, "never closed");
	expect_error("\nserver {\n/* a\n */ root = htdocs # }\n", 2,
	    "never closed");
}

Test(config, missing_root_names_the_server)
{
	expect_error(SERVER "\nserver {\n\tnames = {a.example}\n}\n", 7,
	    "no root");
	expect_error("server {}\n", 1, "no root");
}

Test(config, root_must_be_a_directory)
{
	write_file(in_dir("notadir"), "x");
	expect_error("workers = 1\nserver {\n\troot = notadir\n}\n", 3,
	    "not a directory");
	expect_error("server {\n\troot = \"nosuchdir\"\n}\n", 2,
	    "No such file or directory");
	expect_error("server {\n\troot = \"\"\n}\n", 2, "root");
}

Test(config, root_is_canonical)
{
	char other[PATH_MAX + 16];
	struct config *cf;

	snprintf(other, sizeof(other), "%s/site", dir);
	cr_assert_eq(mkdir(other, 0755), 0);
	cr_assert_eq(symlink("site", in_dir("link")), 0);
	cf = load_ok("server {\n\troot = \"./htdocs/../link/\"\n}\n");
	cr_expect_str_eq(cf->servers[0].root, other);
	config_free(cf);
}

Test(config, relative_paths_use_the_config_folder)
{
	struct config *cf;

	write_file(conf, "error_log = logs/error.log\n"
	    "pid_file = \"run/corral.pid\"\n"
	    "mime_types = conf/mime.types\n"
	    "server {\n"
	    "\troot = htdocs\n"
	    "\taccess_log = logs/access.log\n"
	    "}\n");
	cr_assert_eq(chdir("/"), 0);
	cf = config_load(conf, err, sizeof(err));
	cr_assert_not_null(cf, "%s", err);
	cr_expect_str_eq(cf->error_log, in_dir("logs/error.log"));
	cr_expect_str_eq(cf->pid_file, in_dir("run/corral.pid"));
	cr_expect_str_eq(cf->mime_types, in_dir("conf/mime.types"));
	cr_expect_str_eq(cf->servers[0].root, in_dir("htdocs"));
	cr_expect_str_eq(cf->servers[0].access_log, in_dir("logs/access.log"));
	config_free(cf);
}

Test(config, config_given_by_a_relative_path)
{
	struct config *cf;
	char sub[PATH_MAX + 16];

	write_file(conf, "mime_types = types\n" SERVER);
	snprintf(sub, sizeof(sub), "%s/htdocs", dir);
	cr_assert_eq(chdir(sub), 0);
	cf = config_load("../corral.conf", err, sizeof(err));
	cr_assert_not_null(cf, "%s", err);
	cr_expect_str_eq(cf->file, conf);
	cr_expect_str_eq(cf->mime_types, in_dir("types"));
	cr_expect_str_eq(cf->servers[0].root, in_dir("htdocs"));
	config_free(cf);

	cr_assert_eq(chdir(dir), 0);
	cf = config_load("corral.conf", err, sizeof(err));
	cr_assert_not_null(cf, "%s", err);
	cr_expect_str_eq(cf->file, conf);
	config_free(cf);

	/* Messages name the file as the caller wrote it. */
	write_file(conf, "nope = 1\n" SERVER);
	cr_expect_null(config_load("corral.conf", err, sizeof(err)));
	cr_expect_str_eq(err, "corral.conf:1: no such option 'nope'");
}

Test(config, off_and_stderr_mean_none)
{
	struct config *cf = load_ok(
	    "error_log = stderr\n"
	    "pid_file = off\n"
	    "server {\n\troot = htdocs\n\taccess_log = off\n}\n");

	cr_expect_null(cf->error_log);
	cr_expect_null(cf->pid_file);
	cr_expect_null(cf->servers[0].access_log);
	config_free(cf);
}

Test(config, empty_values_are_refused)
{
	expect_error("error_log = \"\"\n" SERVER, 1, "error_log");
	expect_error("\npid_file = \"\"\n" SERVER, 2, "pid_file");
	expect_error("mime_types = ''\n" SERVER, 1, "mime_types");
	expect_error("user = \"\"\n" SERVER, 1, "user");
	expect_error("server {\n\troot = htdocs\n\taccess_log = \"\"\n}\n", 3,
	    "access_log");
}

Test(config, listen_forms)
{
	struct config *cf = load_ok(
	    "listen = {\n"
	    "\t10.1.2.3:8080,\n"
	    "\t\"[::1]:8443\",\n"
	    "\t\"[2001:db8::7]:443\",\n"
	    "\t\"*:80\",\n"
	    "\t8081,\n"
	    "\t\"0.0.0.0:65535\",\n"
	    "\t\"127.0.0.1:1\"\n"
	    "}\n"
	    SERVER);

	cr_assert_eq(cf->nlisten, 7);
	expect_listen(&cf->listen[0], "10.1.2.3:8080", AF_INET, "10.1.2.3",
	    8080);
	expect_listen(&cf->listen[1], "[::1]:8443", AF_INET6, "::1", 8443);
	expect_listen(&cf->listen[2], "[2001:db8::7]:443", AF_INET6,
	    "2001:db8::7", 443);
	expect_listen(&cf->listen[3], "*:80", AF_INET, "0.0.0.0", 80);
	expect_listen(&cf->listen[4], "8081", AF_INET, "0.0.0.0", 8081);
	expect_listen(&cf->listen[5], "0.0.0.0:65535", AF_INET, "0.0.0.0",
	    65535);
	expect_listen(&cf->listen[6], "127.0.0.1:1", AF_INET, "127.0.0.1", 1);
	config_free(cf);
}

Test(config, listen_append_and_replace)
{
	struct config *cf = load_ok("listen += \"[::1]:8080\"\n" SERVER);

	cr_assert_eq(cf->nlisten, 2);
	expect_listen(&cf->listen[0], "127.0.0.1:8080", AF_INET, "127.0.0.1",
	    8080);
	expect_listen(&cf->listen[1], "[::1]:8080", AF_INET6, "::1", 8080);
	config_free(cf);

	cf = load_ok("listen = 9000\n" SERVER);
	cr_assert_eq(cf->nlisten, 1);
	expect_listen(&cf->listen[0], "9000", AF_INET, "0.0.0.0", 9000);
	config_free(cf);
}

Test(config, listen_bad_addresses)
{
	static const char *const bad[] = {
		"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", "127.0.0.1",
		"0", "65536", "127.0.0.1:80x", "127.0.0.1:-1", "127.0.0.1:+80",
		"127.1:80", "1.2.3.4.5:80", "256.0.0.1:80", "localhost:80",
		"example.com:80", "::1:80", "[::1]", "[::1]8080", "[::1:80",
		"[127.0.0.1]:80", "[zz::1]:80", ":80", "*", "", "**:80",
		"1234567890123456789012345678901234567890123456789012345:80",
	};
	char text[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "workers = 1\nlisten = \"%s\"\n"
		    SERVER, bad[i]);
		expect_error(text, 2, "listen");
	}
}

Test(config, listen_duplicates_are_refused)
{
	expect_error("listen = {\n\t\"*:8080\",\n\t8080\n}\n" SERVER, 3,
	    "\"8080\" is the same address as \"*:8080\"");
	expect_error("listen = {\"[::1]:80\", \"[0:0::1]:80\"}\n" SERVER, 1,
	    "same address");
	expect_error("listen += 127.0.0.1:8080\n" SERVER, 1, "same address");
}

Test(config, listen_needs_an_address)
{
	expect_error("listen = {}\n" SERVER, 0, "listen");
}

Test(config, workers_auto_is_the_cpu_count)
{
	struct config *cf = load_ok("workers = auto\n" SERVER);

	cr_expect_eq(cf->workers, cpus());
	config_free(cf);
	cf = load_ok("workers = \"auto\"\n" SERVER);
	cr_expect_eq(cf->workers, cpus());
	config_free(cf);
	expect_error("workers = AUTO\n" SERVER, 1, "workers");
}

Test(config, server_names_are_lower_cased)
{
	struct config *cf = load_ok(
	    "server {\n"
	    "\tnames = {\"WWW.Example.COM\", \"*.Example.org\", _, "
	    "\"xn--bcher-kva.example\", 127.0.0.1}\n"
	    "\troot = htdocs\n"
	    "}\n");
	const struct config_server *s = &cf->servers[0];

	cr_assert_eq(s->nnames, 5);
	cr_expect_str_eq(s->names[0], "www.example.com");
	cr_expect_str_eq(s->names[1], "*.example.org");
	cr_expect_str_eq(s->names[2], "_");
	cr_expect_str_eq(s->names[3], "xn--bcher-kva.example");
	cr_expect_str_eq(s->names[4], "127.0.0.1");
	config_free(cf);
}

Test(config, server_names_must_be_host_names)
{
	const char *bad[] = {
		"", "*", "*.", "a..b", ".a", "a.", "a_b.com", "exa mple.com",
		"a.*.com", "www.*", "**.a", "a:80", "[::1]", "caf\xc3\xa9.fr",
		"__", NULL,
	};
	char text[256], label[65];
	struct config *cf;
	size_t i;

	memset(label, 'a', 64);
	label[64] = '\0';
	bad[sizeof(bad) / sizeof(bad[0]) - 1] = label;	/* 64 > 63 */

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "server {\n\troot = htdocs\n"
		    "\tnames = {ok.example, \"%s\"}\n}\n", bad[i]);
		expect_error(text, 3, "server name");
	}
	label[63] = '\0';
	snprintf(text, sizeof(text), "server {\n\troot = htdocs\n"
	    "\tnames = {%s.example}\n}\n", label);
	cf = load_ok(text);
	config_free(cf);
}

Test(config, server_name_in_two_servers)
{
	expect_error(
	    "server {\n"
	    "\tnames = {a.example, B.example}\n"
	    "\troot = htdocs\n"
	    "}\n"
	    "server {\n"
	    "\tnames = {c.example, b.EXAMPLE}\n"
	    "\troot = htdocs\n"
	    "}\n", 8, "\"b.example\" is already used by the server section "
	    "ending on line 4");
	expect_error(SERVER SERVER, 6, "\"localhost\"");
	expect_error("server {\n\tnames = {x.example, X.Example}\n"
	    "\troot = htdocs\n}\n", 4, "listed twice");
}

Test(config, servers_keep_their_order)
{
	struct config *cf = load_ok(
	    "server {\n\tnames = {first.example}\n\troot = htdocs\n}\n"
	    SERVER
	    "server {\n\tnames = {\"*.third.example\", _}\n\troot = .\n}\n");

	cr_assert_eq(cf->nservers, 3);
	cr_expect_str_eq(cf->servers[0].names[0], "first.example");
	cr_expect_str_eq(cf->servers[1].names[0], "localhost");
	cr_expect_str_eq(cf->servers[2].names[0], "*.third.example");
	cr_expect_str_eq(cf->servers[2].names[1], "_");
	cr_expect_str_eq(cf->servers[2].root, dir);
	config_free(cf);
}

Test(config, index_entries_are_file_names)
{
	struct config *cf = load_ok(
	    "server {\n\troot = htdocs\n\tindex = {}\n}\n");

	cr_expect_eq(cf->servers[0].nindex, 0);
	config_free(cf);
	expect_error("server {\n\troot = htdocs\n\tindex = {a.html, "
	    "\"sub/b.html\"}\n}\n", 3, "sub/b.html");
	expect_error("server {\n\troot = htdocs\n\tindex = \"..\"\n}\n", 3,
	    "index");
	expect_error("server {\n\troot = htdocs\n\tindex = \"\"\n}\n", 3,
	    "index");
}

Test(config, booleans)
{
	static const struct {
		const char *text;
		bool value;
	} t[] = {
		{ "on", true }, { "off", false }, { "true", true },
		{ "false", false }, { "yes", true }, { "no", false },
		{ "\"On\"", true }, { "NO", false },
	};
	char text[256];
	struct config *cf;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(text, sizeof(text), "server_tokens = %s\n"
		    "sendfile = %s\n" SERVER, t[i].text, t[i].text);
		cf = load_ok(text);
		cr_expect_eq(cf->server_tokens, t[i].value, "%s", t[i].text);
		cr_expect_eq(cf->sendfile, t[i].value, "%s", t[i].text);
		config_free(cf);
	}
	expect_error("workers = 1\nsendfile = maybe\n" SERVER, 2, "sendfile");
	expect_error("server_tokens = 1\n" SERVER, 1, "server_tokens");
}

Test(config, log_levels)
{
	static const char *const names[] = {
		"crit", "error", "warn", "notice", "info", "debug"
	};
	char text[256];
	struct config *cf;
	int i;

	for (i = 0; i < 6; i++) {
		snprintf(text, sizeof(text), "log_level = %s\n" SERVER,
		    names[i]);
		cf = load_ok(text);
		cr_expect_eq(cf->log_level, i, "%s", names[i]);
		config_free(cf);
	}
	expect_error("log_level = verbose\n" SERVER, 1, "verbose");
	expect_error("log_level = 3\n" SERVER, 1, "log_level");
}

Test(config, default_type_is_a_media_type)
{
	struct config *cf = load_ok("default_type = \"application/ld+json\"\n"
	    SERVER);

	cr_expect_str_eq(cf->default_type, "application/ld+json");
	config_free(cf);
	expect_error("default_type = octet-stream\n" SERVER, 1,
	    "default_type");
	expect_error("default_type = \"text/\"\n" SERVER, 1, "default_type");
	expect_error("default_type = \"/plain\"\n" SERVER, 1, "default_type");
	expect_error("default_type = \"text/plain/x\"\n" SERVER, 1,
	    "default_type");
	expect_error("default_type = \"text/plain;\"\n" SERVER, 1,
	    "default_type");
	expect_error("default_type = \"text/plain; charset\"\n" SERVER, 1,
	    "default_type");
	/* A line end in a quoted parameter: the error is where it ends. */
	expect_error("default_type = \"text/plain; a=\\\"x\ny\\\"\"\n" SERVER,
	    2, "default_type");
	/* With parameters, as Content-Type carries them. */
	cf = load_ok("default_type = \"text/plain; charset=utf-8\"\n" SERVER);
	cr_expect_str_eq(cf->default_type, "text/plain; charset=utf-8");
	config_free(cf);
	cf = load_ok("default_type = \"text/x; a=\\\"b c\\\" ;d=e\"\n" SERVER);
	config_free(cf);
}

/* A server's and a location's own, as nginx's default_type. */
Test(config, default_type_in_a_location)
{
	struct config *cf = load_ok("server {\n\troot = htdocs\n"
	    "\tdefault_type = \"text/plain\"\n"
	    "\tlocation \"/a/\" {\n"
	    "\t\tdefault_type = \"text/html; charset=utf-8\"\n\t}\n"
	    "\tlocation \"/b/\" {\n\t}\n}\n");

	cr_expect_str_eq(cf->default_type, "application/octet-stream");
	cr_expect_str_eq(cf->servers[0].locations[0].default_type,
	    "text/html; charset=utf-8");
	cr_expect_str_eq(cf->servers[0].locations[1].default_type,
	    "text/plain");
	config_free(cf);
	cf = load_ok(SERVER);
	cr_expect_null(cf->servers[0].base.default_type);
	config_free(cf);
	expect_error("server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tdefault_type = html\n\t}\n}\n", 4, "default_type");
}

Test(config, group_needs_user)
{
	struct config *cf = load_ok("user = www\ngroup = web\n" SERVER);

	cr_expect_str_eq(cf->user, "www");
	cr_expect_str_eq(cf->group, "web");
	config_free(cf);
	cf = load_ok("user = www\n" SERVER);
	cr_expect_null(cf->group);
	config_free(cf);
	expect_error("workers = 1\n\ngroup = web\n" SERVER, 3, "user");
}

Test(config, header_size_covers_the_request_line)
{
	struct config *cf = load_ok("max_request_line = 16k\n"
	    "max_header_size = 16k\n" SERVER);

	cr_expect_eq(cf->max_request_line, 16384);
	cr_expect_eq(cf->max_header_size, 16384);
	config_free(cf);
	/* Reported where the later of the two is set, in either order. */
	expect_error("max_request_line = 64k\n" SERVER, 1,
	    "max_header_size (32k) must be at least max_request_line (64k)");
	expect_error("max_header_size = 4k\n\nmax_request_line = 8k\n" SERVER,
	    3, "max_header_size");
	expect_error("max_request_line = 8k\nmax_header_size = 4k\n" SERVER,
	    2, "max_header_size");
}

Test(config, a_server_section_is_required)
{
	expect_error("workers = 1\n", 0, "server");
	expect_error("", 0, "server");
}

Test(config, unreadable_config_files)
{
	char small[16], want[PATH_MAX + 128];

	cr_expect_null(config_load(in_dir("missing.conf"), err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: %s", in_dir("missing.conf"),
	    strerror(ENOENT));
	cr_expect_str_eq(err, want);

	cr_expect_null(config_load(dir, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: not a regular file", dir);
	cr_expect_str_eq(err, want);

	/* A short buffer gets a cut, terminated message; none gets none. */
	write_file(conf, "bogus = 1\n" SERVER);
	cr_expect_null(config_load(conf, small, sizeof(small)));
	cr_expect_eq(strlen(small), sizeof(small) - 1);
	cr_expect(strncmp(small, conf, sizeof(small) - 1) == 0, "%s", small);
	cr_expect_null(config_load(conf, NULL, 0));
}

/* The master loads again on reload, after whatever went wrong before. */
Test(config, loads_again_after_errors)
{
	struct config *cf;

	expect_error("error_log = \"bad \\9 escape\"\n" SERVER, 1, "escape");
	expect_error(SERVER "error_log = \"open string\n", 5, "end of file");
	expect_error(SERVER "/* open comment\n", 4, "comment");
	expect_error("listen = {\"*:80\", 80}\n" SERVER, 1, "same address");
	cf = load_ok("workers = 2\n" SERVER);
	cr_expect_eq(cf->workers, 2);
	cr_expect_str_eq(cf->servers[0].root, in_dir("htdocs"));
	config_free(cf);
}

Test(config, free_null)
{
	config_free(NULL);
}

/* The config shipped in etc/ must load as it is, from the source tree. */
Test(config, shipped_config_loads)
{
	const char *srcdir = getenv("CORRAL_SRCDIR");
	char path[PATH_MAX], etc[PATH_MAX], docroot[PATH_MAX + 16];
	char real[PATH_MAX];
	struct config *cf, *def;
	struct stat st;

	if (srcdir != NULL)
		snprintf(path, sizeof(path), "%s/etc/corral.conf", srcdir);
	else
		snprintf(path, sizeof(path), "etc/corral.conf");
	cr_assert_eq(access(path, R_OK), 0, "%s: %s", path, strerror(errno));
	cr_assert_not_null(realpath(path, real));
	snprintf(etc, sizeof(etc), "%s", real);
	*strrchr(etc, '/') = '\0';
	snprintf(docroot, sizeof(docroot), "%s/../htdocs", etc);
	if (stat(docroot, &st) == -1 || !S_ISDIR(st.st_mode))
		cr_skip_test("%s does not exist yet", docroot);

	cf = config_load(path, err, sizeof(err));
	cr_assert_not_null(cf, "%s", err);
	cr_expect_str_eq(cf->file, real);
	cr_assert_eq(cf->nlisten, 1);
	expect_listen(&cf->listen[0], "127.0.0.1:8080", AF_INET, "127.0.0.1",
	    8080);
	cr_expect_null(cf->error_log);
	cr_expect_null(cf->pid_file);
	cr_assert_eq(cf->nservers, 1);
	cr_assert_not_null(realpath(docroot, real));
	cr_expect_str_eq(cf->servers[0].root, real);
	cr_expect_null(cf->servers[0].access_log);
	snprintf(docroot, sizeof(docroot), "%s/mime.types", etc);
	cr_expect_str_eq(cf->mime_types, docroot);

	/* It promises to spell out the defaults. */
	def = load_ok(SERVER);
	cr_expect_eq(cf->workers, def->workers);
	cr_expect_eq(cf->worker_connections, def->worker_connections);
	cr_expect_eq(cf->log_level, def->log_level);
	cr_expect_eq(cf->max_request_line, def->max_request_line);
	cr_expect_eq(cf->max_header_size, def->max_header_size);
	cr_expect_eq(cf->max_headers, def->max_headers);
	cr_expect_eq(cf->max_body_size, def->max_body_size);
	cr_expect_eq(cf->keepalive_requests, def->keepalive_requests);
	cr_expect_eq(cf->keepalive_timeout_ms, def->keepalive_timeout_ms);
	cr_expect_eq(cf->header_timeout_ms, def->header_timeout_ms);
	cr_expect_eq(cf->body_timeout_ms, def->body_timeout_ms);
	cr_expect_eq(cf->send_timeout_ms, def->send_timeout_ms);
	cr_expect_eq(cf->lingering_timeout_ms, def->lingering_timeout_ms);
	cr_expect_eq(cf->server_tokens, def->server_tokens);
	cr_expect_eq(cf->sendfile, def->sendfile);
	cr_expect_str_eq(cf->default_type, def->default_type);
	cr_expect_eq(cf->max_ranges, def->max_ranges);
	cr_expect_eq(cf->file_cache_entries, def->file_cache_entries);
	cr_expect_eq(cf->file_cache_valid_ms, def->file_cache_valid_ms);
	cr_expect_eq(cf->file_cache_max_size, def->file_cache_max_size);
	cr_expect_str_eq(cf->servers[0].names[0], def->servers[0].names[0]);
	cr_expect_str_eq(cf->servers[0].index[0], def->servers[0].index[0]);
	config_free(def);
	config_free(cf);
}

Test(config, upstream_unix_socket_peers)
{
	struct config *cf = load_ok(SERVER
	    "upstream \"php\" {\n"
	    "\tservers = {\"unix:/run/php/fpm.sock\", \"unix:sock/app.sock "
	    "weight=3\", \"127.0.0.1:9000\"}\n"
	    "}\n");
	const struct config_upstream *u = &cf->upstreams[0];
	const struct sockaddr_un *un;
	char want[PATH_MAX + 128];

	cr_assert_eq(u->npeers, 3);
	un = (const void *)&u->peers[0].addr;
	cr_expect_eq(un->sun_family, AF_UNIX);
	cr_expect_str_eq(un->sun_path, "/run/php/fpm.sock");
	cr_expect_str_eq(u->peers[0].text, "unix:/run/php/fpm.sock");
	cr_expect_eq(u->peers[0].weight, 1);
	cr_expect_eq(u->peers[0].addrlen,
	    offsetof(struct sockaddr_un, sun_path) + 18);
	/* A relative path is taken from the config's folder. */
	un = (const void *)&u->peers[1].addr;
	cr_expect_str_eq(un->sun_path, in_dir("sock/app.sock"));
	snprintf(want, sizeof(want), "unix:%s", in_dir("sock/app.sock"));
	cr_expect_str_eq(u->peers[1].text, want);
	cr_expect_eq(u->peers[1].weight, 3);
	cr_expect_eq(u->peers[2].addr.ss_family, AF_INET);
	config_free(cf);
}

Test(config, upstream_bad_unix_peers)
{
	char text[1024], path[200];

	expect_error(SERVER "upstream \"u\" {\n\tservers = {\"unix:\"}\n}\n",
	    5, "expected unix:/path/to/socket");
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	snprintf(text, sizeof(text), SERVER "upstream \"u\" {\n"
	    "\tservers = {\"unix:/%s\"}\n}\n", path);
	expect_error(text, 5, "socket path is too long");
	expect_error(SERVER "upstream \"u\" {\n"
	    "\tservers = {\"unix:/a.sock weight=0\"}\n}\n", 5,
	    "weight=N, N from 1 to 100");
	expect_error(SERVER "upstream \"u\" {\n\tservers = {\"app.sock\"}\n}\n",
	    5, "expected address:port or unix:/path");
}

/* TLS --------------------------------------------------------------- */

#define TLS_SERVER "server {\n\troot = \"htdocs\"\n" \
	"\ttls_certificate = \"a.crt\"\n\ttls_certificate_key = \"a.key\"\n}\n"

/* The words after a server's listen address, in any order. */
Test(config, listen_flags_in_any_order)
{
	struct config *cf = load_ok("server {\n\troot = \"htdocs\"\n"
	    "\ttls_certificate = \"a.crt\"\n"
	    "\ttls_certificate_key = \"a.key\"\n"
	    "\tlisten = {\"127.0.0.1:8443 default_server ssl\", "
	    "\"127.0.0.1:8080  default_server\"}\n}\n"
	    "server {\n\troot = \"htdocs\"\n\tnames = {\"b.example\"}\n"
	    "\tlisten = {\"127.0.0.1:8080\"}\n}\n");

	cr_assert_eq(cf->nlisten, 2);
	cr_expect(cf->listen[0].tls);
	cr_expect_not(cf->listen[1].tls);
	cr_assert_eq(cf->servers[0].nlisten, 2);
	cr_expect(cf->servers[0].default_for[0]);
	cr_expect(cf->servers[0].default_for[1]);
	cr_expect_not(cf->servers[1].default_for[1]);
	config_free(cf);
	expect_error("server {\n\troot = \"htdocs\"\n"
	    "\tlisten = {\"127.0.0.1:8080 default_server tlsx\"}\n}\n", 3,
	    "the options are \"tls\", \"default_server\" and "
	    "\"proxy_protocol\"");
}

Test(config, tls_defaults_and_listen_flag)
{
	struct config *cf = load_ok("listen = {\"127.0.0.1:8080\", "
	    "\"127.0.0.1:8443 tls\", \"[::1]:8443 ssl\"}\n" TLS_SERVER);
	const struct config_tls *t = &cf->tls;

	cr_assert_eq(cf->nlisten, 3);
	cr_expect_not(cf->listen[0].tls);
	cr_expect(cf->listen[1].tls);
	cr_expect(cf->listen[2].tls);
	expect_listen(&cf->listen[1], "127.0.0.1:8443", AF_INET, "127.0.0.1",
	    8443);
	cr_expect(cf->any_tls);
	cr_expect_eq(t->protocols, TLS_PROTO_12 | TLS_PROTO_13);
	cr_expect(t->session_cache);
	cr_expect_eq(t->session_cache_size, 10 * 1024 * 1024);
	cr_expect_eq(t->session_timeout_ms, 300000);
	cr_expect(t->session_tickets);
	cr_expect_eq(t->ticket_key_rotate_ms, 3600000);
	cr_expect_eq(t->handshake_timeout_ms, 10000);
	cr_expect(t->ktls);
	cr_expect_not_null(strstr(t->ciphers, "ECDHE-ECDSA-AES128-GCM-SHA256"));
	cr_expect_str_eq(cf->servers[0].tls_certificate, in_dir("a.crt"));
	cr_expect_str_eq(cf->servers[0].tls_certificate_key, in_dir("a.key"));
	cr_expect_eq(cf->servers[0].tls_certificate_line, 4);
	cr_expect_eq(cf->servers[0].tls_certificate_key_line, 5);
	config_free(cf);
}

Test(config, tls_section)
{
	struct config *cf = load_ok("listen = {\"8443 tls\"}\n"
	    "tls {\n\tprotocols = {\"TLSv1.3\"}\n\tsession_timeout = 1h\n"
	    "\tsession_tickets = off\n\tktls = off\n}\n" TLS_SERVER);

	cr_expect_eq(cf->tls.protocols, TLS_PROTO_13);
	cr_expect_eq(cf->tls.session_timeout_ms, 3600000);
	cr_expect_not(cf->tls.session_tickets);
	cr_expect_not(cf->tls.ktls);
	config_free(cf);
}

/* nginx's "listen ... proxy_protocol", with the other words in any order. */
Test(config, listen_proxy_protocol)
{
	struct config *cf = load_ok("listen = {\"127.0.0.1:8080\", "
	    "\"127.0.0.1:8081 proxy_protocol\"}\n" SERVER);

	cr_expect_not(cf->listen[0].proxy_protocol);
	cr_expect(cf->listen[1].proxy_protocol);
	cr_expect_not(cf->listen[1].tls);
	config_free(cf);
}

Test(config, tls_errors)
{
	expect_error("listen = {\"8443 tls\"}\n" SERVER, 1,
	    "listen with \"tls\" needs a server with tls_certificate");
	expect_error("listen = {\"8443 http2\"}\n" SERVER, 1,
	    "the options are \"tls\", \"default_server\" and "
	    "\"proxy_protocol\"");
	expect_error("tls {\n\tprotocols = {\"TLSv1.1\"}\n}\n" SERVER, 2,
	    "obsolete and insecure");
	expect_error("tls {\n\tprotocols = {\"TLSv9\"}\n}\n" SERVER, 2,
	    "unknown protocol");
	expect_error("tls {\n\tsession_timeout = 0\n}\n" SERVER, 2,
	    "session_timeout must be between");
	expect_error("server {\n\troot = \"htdocs\"\n"
	    "\ttls_certificate = \"a.crt\"\n}\n", 3,
	    "tls_certificate needs tls_certificate_key");
	expect_error("server {\n\troot = \"htdocs\"\n"
	    "\ttls_certificate_key = \"a.key\"\n}\n", 3,
	    "tls_certificate_key needs tls_certificate");
}

Test(config, underscores_in_headers_per_server)
{
	struct config *cf = load_ok(SERVER
	    "server {\n\tnames = {\"b\"}\n\troot = \"htdocs\"\n"
	    "\tunderscores_in_headers = on\n}\n");

	cr_expect_not(cf->servers[0].underscores_in_headers);
	cr_expect(cf->servers[1].underscores_in_headers);
	config_free(cf);
	expect_error(SERVER "server {\n\tnames = {\"b\"}\n\troot = \"htdocs\"\n"
	    "\tunderscores_in_headers = maybe\n}\n", 7, "");
}

/* memcached: the listener, a cluster upstream, l2 and the locations. */
#define MC_UPSTREAM(proto, hash)					\
	"upstream \"mc\" {\n\tservers = {\"127.0.0.1:11211\", "		\
	"\"127.0.0.1:11212\"}\n\tprotocol = " proto "\n" hash "}\n"

Test(config, memcached)
{
	struct config *cf = load_ok("memcached {\n"
	    "\tlisten = {\"127.0.0.1:11311\", \"unix:/tmp/corral-mc.sock\"}\n"
	    "\tmax_item = 64k\n\tallow_flush = on\n}\n"
	    MC_UPSTREAM("memcached", "\thash = ketama\n")
	    "cache {\n\tl2 = \"mc\"\n\tl2_timeout = 50ms\n}\n"
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/pages/\" {\n\t\tmemcached = \"mc\"\n"
	    "\t\tmemcached_key = \"$request_uri\"\n\t}\n"
	    "\tlocation \"/articles/\" {\n\t\tmemcached_key = \"$uri\"\n"
	    "\t\tmemcached_gzip_flag = 2\n\t}\n}\n");
	const struct config_memcached *m = &cf->memcached;
	const struct config_location *l;

	cr_assert_eq(m->nlisten, 2);
	cr_expect_str_eq(m->listen[0].text, "127.0.0.1:11311");
	cr_expect_eq(m->listen[0].addr.ss_family, AF_INET);
	cr_expect_eq(m->listen[1].addr.ss_family, AF_UNIX);
	cr_expect_eq(m->max_item, 64 * 1024);
	cr_expect(m->allow_flush);
	cr_expect_eq(cf->upstreams[0].protocol, PROTO_MEMCACHED);
	cr_expect_eq(cf->upstreams[0].hash, HASH_KETAMA);
	cr_expect_eq(cf->cache.l2, 0);
	cr_expect_eq(cf->cache.l2_timeout_ms, 50);
	l = &cf->servers[0].locations[1];
	cr_assert_str_eq(l->prefix, "/articles/");	/* in the order written */
	cr_expect(l->memcached_local);
	cr_expect_not(l->memcached_request_uri);
	cr_expect_null(l->memcached_key);	/* "$uri": the path itself */
	cr_expect_eq(l->memcached_gzip_flag, 2);
	l = &cf->servers[0].locations[0];
	cr_expect_not(l->memcached_local);
	cr_expect(l->memcached_request_uri);
	cr_expect_eq(l->upstream, 0);
	config_free(cf);

	/* Any variables of the request itself. */
	cf = load_ok("memcached {\n}\nserver {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n"
	    "\t\tmemcached_key = \"$host:$uri$is_args$args\"\n\t}\n}\n");
	cr_expect_not_null(cf->servers[0].locations[0].memcached_key);
	config_free(cf);

	/* No section: no listener; l2 off. */
	cf = load_ok(SERVER);
	cr_expect_eq(cf->memcached.nlisten, 0);
	cr_expect_lt(cf->cache.l2, 0);
	config_free(cf);
}

Test(config, memcached_errors)
{
	expect_error("memcached {\n\tlisten = {\"udp:127.0.0.1:11211\"}\n}\n"
	    SERVER, 2, "invalid memcached listen \"udp:127.0.0.1:11211\"");
	expect_error("memcached {\n}\nmemcached {\n}\n" SERVER, 4,
	    "only one memcached section is allowed");
	expect_error("memcached {\n\tlisten = {}\n}\n" SERVER, 3,
	    "memcached listen needs at least one address");
	expect_error("memcached {\n\tmax_item = 2g\n}\n" SERVER, 2,
	    "max_item");
	expect_error(MC_UPSTREAM("http", "\thash = ketama\n") SERVER, 5,
	    "hash = ketama needs protocol = memcached");
	expect_error(MC_UPSTREAM("memcached", "\thash = modula\n") SERVER, 4,
	    "unknown hash \"modula\" (ketama or round_robin)");
	expect_error(MC_UPSTREAM("http", "")
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tmemcached = \"mc\"\n\t}\n}\n", 8,
	    "memcached \"mc\": that upstream's protocol is not memcached");
	expect_error("server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tmemcached = \"none\"\n\t}\n}\n", 4,
	    "memcached \"none\": no upstream has that name");
	expect_error("server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tmemcached_key = \"$nosuch\"\n\t}\n}\n",
	    4, "memcached_key \"$nosuch\": unknown variable \"$nosuch\"");
	expect_error("server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tmemcached_key = \"$uri$1\"\n\t}\n}\n",
	    4, "memcached_key \"$uri$1\": ");
	expect_error(MC_UPSTREAM("http", "")
	    "cache {\n\tl2 = \"mc\"\n}\n" SERVER, 7,
	    "cache l2 \"mc\": that upstream's protocol is not memcached");
	expect_error("cache {\n\tl2 = \"none\"\n}\n" SERVER, 3,
	    "cache l2 \"none\": no upstream has that name");
	expect_error("cache {\n\tsize = 0\n}\nmemcached {\n}\n" SERVER, 5,
	    "memcached keeps its items in the cache");
}

/* FastCGI: the upstream's protocol, the location's fastcgi and params. */
#define PHP_UPSTREAM(proto)						\
	"upstream \"php\" {\n\tservers = {\"unix:/run/php.sock\"}\n"	\
	"\tprotocol = " proto "\n}\n"

Test(config, fastcgi_location)
{
	struct config *cf = load_ok(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/app/\" {\n\t\tfastcgi = \"php\"\n"
	    "\t\tfastcgi_param = {\"APP_ENV prod\", \"EMPTY \","
	    " \"MAYBE  if_not_empty\", \"SCRIPT_FILENAME /srv/index.php\"}\n"
	    "\t\tfastcgi_index = \"main.php\"\n"
	    "\t\tfastcgi_script_check = off\n\t}\n"
	    "\tlocation \"/files/\" {\n\t}\n}\n");
	const struct config_location *l = &cf->servers[0].locations[1];
	const struct config_fastcgi *f = l->fastcgi;

	cr_assert_eq(cf->upstreams[0].protocol, PROTO_FASTCGI);
	cr_assert_str_eq(l->prefix, "/files/");	/* in the order written */
	cr_assert_null(l->fastcgi);
	l = &cf->servers[0].locations[0];
	f = l->fastcgi;
	cr_assert_not_null(f);
	cr_expect_eq(l->upstream, 0);
	cr_assert_eq(f->nparams, 4);
	cr_expect_str_eq(f->params[0].name, "APP_ENV");
	cr_expect_str_eq(f->params[0].value, "prod");
	cr_expect_not(f->params[0].if_not_empty);
	cr_expect_str_eq(f->params[1].name, "EMPTY");
	cr_expect_str_eq(f->params[1].value, "");
	cr_expect_str_eq(f->params[2].name, "MAYBE");
	cr_expect_str_eq(f->params[2].value, "");
	cr_expect(f->params[2].if_not_empty);
	cr_expect_str_eq(f->params[3].value, "/srv/index.php");
	cr_expect_str_eq(f->index, "main.php");
	cr_expect_not(f->script_check);
	config_free(cf);

	cf = load_ok(PHP_UPSTREAM("http") SERVER);
	cr_expect_eq(cf->upstreams[0].protocol, PROTO_HTTP);
	config_free(cf);
}

Test(config, fastcgi_defaults)
{
	struct config *cf = load_ok(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tfastcgi = php\n\t}\n}\n");
	const struct config_fastcgi *f = cf->servers[0].locations[0].fastcgi;

	cr_assert_not_null(f);
	cr_expect_eq(f->nparams, 0);
	cr_expect_str_eq(f->index, "index.php");
	cr_expect(f->script_check);
	cr_expect(f->request_buffering);
	cr_expect_null(f->split_re);
	cr_expect_eq(cf->client_body_buffer_size, 16 * 1024);
	cr_expect_str_eq(cf->client_body_temp_path, "/tmp");
	config_free(cf);
}

/* nginx's client_body_buffer_size, client_body_temp_path and
 * fastcgi_request_buffering. */
Test(config, request_buffering)
{
	struct config *cf = load_ok(PHP_UPSTREAM("fastcgi")
	    "client_body_buffer_size = 64k\n"
	    "client_body_temp_path = \"/var/tmp\"\n"
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tfastcgi = php\n"
	    "\t\tfastcgi_request_buffering = off\n\t}\n}\n");

	cr_expect_eq(cf->client_body_buffer_size, 64 * 1024);
	cr_expect_str_eq(cf->client_body_temp_path, "/var/tmp");
	cr_expect_not(cf->servers[0].locations[0].fastcgi->request_buffering);
	config_free(cf);
	expect_error("client_body_temp_path = \"/nonexistent/body\"\n"
	    SERVER, 1, "client_body_temp_path \"/nonexistent/body\": No such "
	    "file or directory");
	expect_error("client_body_temp_path = \"/etc/passwd\"\n" SERVER, 1,
	    "\"/etc/passwd\" is not a directory");
	expect_error("client_body_temp_path = \"tmp\"\n" SERVER, 1,
	    "client_body_temp_path must be an absolute path");
	expect_error("client_body_buffer_size = 100\n" SERVER, 1,
	    "client_body_buffer_size must be between");
}

Test(config, fastcgi_errors)
{
	expect_error(PHP_UPSTREAM("gopher") SERVER, 3,
	    "unknown protocol \"gopher\" (http, fastcgi or memcached)");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tproxy = \"php\"\n\t}\n}\n", 8,
	    "proxy \"php\": that upstream's protocol is not http (use "
	    "fastcgi = for a FastCGI upstream)");
	expect_error(PHP_UPSTREAM("http")
	    "server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tfastcgi = \"php\"\n\t}\n}\n", 8,
	    "fastcgi \"php\": that upstream's protocol is not fastcgi (set "
	    "protocol = fastcgi in it)");
	expect_error("server {\n\troot = htdocs\n"
	    "\tlocation \"/\" {\n\t\tfastcgi = \"none\"\n\t}\n}\n", 4,
	    "fastcgi \"none\": no upstream has that name");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n\t\tproxy = \"php\"\n\t}\n}\n", 9,
	    "a location has one of proxy, fastcgi and memcached");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n\t\tfastcgi_param = {\"BAD-NAME x\"}\n"
	    "\t}\n}\n", 9, "fastcgi_param \"BAD-NAME x\": expected");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n\t\tfastcgi_param = {\"X $nope\"}\n"
	    "\t}\n}\n", 9, "fastcgi_param \"X $nope\": unknown variable "
	    "\"$nope\"");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n"
	    "\t\tfastcgi_split_path_info = \"^(.+\\\\.php)/.*$\"\n"
	    "\t}\n}\n", 9, "needs two groups, the script and the path info "
	    "(it has 1)");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n"
	    "\t\tfastcgi_split_path_info = \"^(.+\"\n"
	    "\t}\n}\n", 9, "fastcgi_split_path_info: bad regular expression");
	expect_error(PHP_UPSTREAM("fastcgi")
	    "server {\n\troot = htdocs\n\tlocation \"/\" {\n"
	    "\t\tfastcgi = \"php\"\n\t\tfastcgi_param = {\"\"}\n"
	    "\t}\n}\n", 9, "fastcgi_param \"\": expected");
}

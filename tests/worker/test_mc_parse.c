/*
 * memcached's text protocol parser: each command as clients send it, and
 * each bad line with the reply memcached 1.6 itself gives (the integration
 * test compares them with a running memcached too).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "worker/mc_parse.h"

static struct mc_cmd cmd;

static const char *
parse(const char *line)
{
	return mc_parse(line, strlen(line), &cmd);
}

#define OK(line)	cr_assert_null(parse(line), "%s: %s", line, \
			    parse(line))
#define BAD(line, reply) cr_assert_str_eq(parse(line) ? parse(line) : \
			    "(ok)", reply, "%s", line)

Test(mc_parse, storage_commands)
{
	OK("set k 5 100 3");
	cr_assert_eq(cmd.op, MC_SET);
	cr_assert_eq(cmd.klen, 1);
	cr_assert_eq(cmd.flags, 5);
	cr_assert_eq(cmd.exptime, 100);
	cr_assert_eq(cmd.vlen, 3);
	cr_assert(!cmd.noreply);
	OK("add  k  0  0  0  noreply");
	cr_assert_eq(cmd.op, MC_ADD);
	cr_assert(cmd.noreply);
	OK("cas k 0 -1 2 77");
	cr_assert_eq(cmd.cas, 77);
	cr_assert_eq(cmd.exptime, -1);
	OK("set k 4294967296 0 1");
	cr_assert_eq(cmd.flags, 0, "memcached keeps the low 32 bits");
	OK("set k +1 0 01");
	cr_assert_eq(cmd.vlen, 1);
}

Test(mc_parse, bad_storage_lines)
{
	char line[400];

	BAD("set k 0 0", "ERROR");
	BAD("set k 0 0 1 noreply extra", "ERROR");
	BAD("set k 0 0 -1", "CLIENT_ERROR bad command line format");
	BAD("set k 0 0 abc", "CLIENT_ERROR bad command line format");
	BAD("set k -1 0 1", "CLIENT_ERROR bad command line format");
	BAD("set k 1x 0 1", "CLIENT_ERROR bad command line format");
	BAD("set k 18446744073709551616 0 1",
	    "CLIENT_ERROR bad command line format");
	BAD("set k 0 0 2147483647", "CLIENT_ERROR bad command line format");
	BAD("cas k 0 0 1", "ERROR");
	BAD("cas k 0 0 1 abc", "CLIENT_ERROR bad command line format");
	snprintf(line, sizeof(line), "set %0251d 0 0 1 noreply", 0);
	BAD(line, "CLIENT_ERROR bad command line format");
	cr_assert(cmd.noreply, "noreply is read before the key");
	snprintf(line, sizeof(line), "set %0250d 0 0 1", 0);
	OK(line);
}

Test(mc_parse, retrieval)
{
	const char *p, *end, *key;
	size_t klen, n = 0;

	OK("get a bb ccc");
	cr_assert_eq(cmd.op, MC_GET);
	p = cmd.keys;
	end = cmd.keys + cmd.keys_len;
	while (mc_next_key(&p, end, &key, &klen))
		cr_assert_eq(klen, ++n);
	cr_assert_eq(n, 3);
	OK("gat 100 a b");
	cr_assert_eq(cmd.exptime, 100);
	cr_assert_eq(cmd.klen, 1);
	BAD("get", "ERROR");
	BAD("gets", "ERROR");
	OK("gat 10");
	cr_assert_eq(cmd.keys_len, 0, "no key: END, as memcached");
	BAD("gat", "ERROR");
	BAD("gat abc k", "CLIENT_ERROR invalid exptime argument");
	BAD("get \0k", "ERROR");
}

Test(mc_parse, get_checks_every_key)
{
	char line[600];

	snprintf(line, sizeof(line), "get a %0251d b", 0);
	BAD(line, "CLIENT_ERROR bad command line format");
}

Test(mc_parse, other_commands)
{
	OK("delete k");
	OK("delete k 0");
	OK("delete k noreply");
	cr_assert(cmd.noreply);
	OK("delete k 0 noreply");
	BAD("delete k 5", "CLIENT_ERROR bad command line format.  "
	    "Usage: delete <key> [noreply]");
	BAD("delete", "ERROR");
	OK("incr k 18446744073709551615");
	cr_assert_eq(cmd.delta, UINT64_MAX);
	BAD("incr k -1", "CLIENT_ERROR invalid numeric delta argument");
	BAD("incr k 18446744073709551616",
	    "CLIENT_ERROR invalid numeric delta argument");
	BAD("incr k", "ERROR");
	OK("touch k 10 noreply");
	cr_assert(cmd.noreply);
	BAD("touch k abc", "CLIENT_ERROR invalid exptime argument");
	OK("flush_all");
	cr_assert(!cmd.has_arg);
	OK("flush_all 0 noreply");
	cr_assert(cmd.has_arg && cmd.noreply);
	OK("flush_all noreply");
	cr_assert(!cmd.has_arg);
	BAD("flush_all abc", "CLIENT_ERROR invalid exptime argument");
	BAD("flush_all 1 2 3", "ERROR");
	OK("verbosity 1");
	BAD("verbosity", "ERROR");
	BAD("verbosity abc", "CLIENT_ERROR bad command line format");
	OK("version x");
	OK("stats settings");
	cr_assert_eq(cmd.sub_len, 8);
	BAD("STATS", "ERROR");
	BAD("bogus", "ERROR");
	BAD("", "ERROR");
}

Test(mc_parse, meta)
{
	OK("mg k s v f t c k O123 q");
	cr_assert_eq(cmd.op, MC_MG);
	cr_assert(cmd.meta.has & MC_F('v'));
	cr_assert(cmd.meta.has & MC_F('O'));
	cr_assert(!(cmd.meta.has & MC_F('T')));
	cr_assert(cmd.noreply);
	cr_assert_eq(cmd.meta.flags_len, strlen("s v f t c k O123 q"));
	OK("ms k 2 T100 F5 c MA");
	cr_assert_eq(cmd.vlen, 2);
	cr_assert_eq(cmd.meta.ttl, 100);
	cr_assert_eq(cmd.meta.client_flags, 5);
	cr_assert_eq(cmd.meta.mode, 'A');
	OK("ma cnt N0 J10 MD D3 v");
	cr_assert_eq(cmd.meta.initial, 10);
	cr_assert_eq(cmd.meta.delta, 3);
	OK("mg a2V5 b v");
	cr_assert_eq(cmd.klen, 3);
	cr_assert(memcmp(cmd.key, "key", 3) == 0);
	OK("mn");
	OK("me k");
	BAD("me", "CLIENT_ERROR bad command line format");
	BAD("mg", "ERROR");
	BAD("mg k zz", "CLIENT_ERROR invalid flag");
	BAD("mg k v T", "CLIENT_ERROR bad token in command line format");
	BAD("mg k k v O1 O2", "CLIENT_ERROR duplicate flag");
	BAD("mg k v b", "CLIENT_ERROR error decoding key");
	BAD("mg k v O123456789012345678901234567890123",
	    "CLIENT_ERROR opaque token too long");
	BAD("ms k 2 Mx", "CLIENT_ERROR invalid mode for ms M token");
	cr_assert(cmd.swallow && cmd.vlen == 2);
	BAD("ms k S2", "CLIENT_ERROR bad command line format");
	cr_assert(!cmd.swallow);
	BAD("ms k", "CLIENT_ERROR bad command line format");
	BAD("ms k 2 F-1", "CLIENT_ERROR bad command line format");
	BAD("ma k MX", "CLIENT_ERROR invalid mode for ma M token");
	BAD("ma k Dabc", "CLIENT_ERROR invalid or duplicate flag");
	BAD("md k zz", "CLIENT_ERROR invalid or duplicate flag");
}

Test(mc_parse, base64_round_trip)
{
	char out[8];

	cr_assert_eq(mc_base64_encode("key", 3, out), 4);
	cr_assert(memcmp(out, "a2V5", 4) == 0);
	cr_assert_eq(mc_base64_encode("ke", 2, out), 4);
	cr_assert(memcmp(out, "a2U=", 4) == 0);
	OK("mg a2U= b");
	cr_assert_eq(cmd.klen, 2);
}

Test(mc_parse, lines)
{
	char big[3000];
	size_t len, used;

	cr_assert_eq(mc_line("get k\r\nx", 8, 65536, &len, &used),
	    MC_LINE_OK);
	cr_assert_eq(len, 5);
	cr_assert_eq(used, 7);
	cr_assert_eq(mc_line("get k\nx", 7, 65536, &len, &used), MC_LINE_OK);
	cr_assert_eq(len, 5);
	cr_assert_eq(mc_line("get k", 5, 65536, &len, &used), MC_LINE_MORE);
	memset(big, 'x', sizeof(big));
	cr_assert_eq(mc_line(big, sizeof(big), 65536, &len, &used),
	    MC_LINE_CLOSE, "2 KB without a newline");
	memcpy(big, "get ", 4);
	cr_assert_eq(mc_line(big, sizeof(big), 65536, &len, &used),
	    MC_LINE_MORE, "a get of many keys may be longer");
	cr_assert_eq(mc_line(big, sizeof(big), 2500, &len, &used),
	    MC_LINE_CLOSE, "but not without end");
	cr_assert_eq(mc_line("\x80\x01", 2, 65536, &len, &used),
	    MC_LINE_CLOSE, "the binary protocol");
}

/*
 * memcached's text protocol parser on arbitrary bytes: a line is found
 * and parsed the way the connection does; every key it hands back lies
 * inside the line (or the decoded key buffer) and is at most 250 bytes,
 * and a value length never exceeds what a reservation can take.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "worker/mc_parse.h"

static void
check_key(const char *line, size_t len, const struct mc_cmd *cmd,
    const char *key, size_t klen)
{
	FUZZ_CHECK(klen <= MC_KEY_MAX);
	FUZZ_CHECK((key >= line && key + klen <= line + len) ||
	    (key >= cmd->keybuf && key + klen <= cmd->keybuf +
	    sizeof(cmd->keybuf)));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = fuzz_dup(data, size);
	struct mc_cmd cmd;
	const char *why, *p, *end, *key;
	size_t len, used, off = 0, klen;

	while (off < size && mc_line(buf + off, size - off, 65536, &len,
	    &used) == MC_LINE_OK) {
		why = mc_parse(buf + off, len, &cmd);
		if (why == NULL) {
			FUZZ_CHECK(cmd.op < MC_NOPS);
			FUZZ_CHECK(cmd.vlen <= MC_VALUE_MAX);
			if (cmd.key != NULL)
				check_key(buf + off, len, &cmd, cmd.key,
				    cmd.klen);
			if (cmd.keys != NULL) {
				p = cmd.keys;
				end = cmd.keys + cmd.keys_len;
				FUZZ_CHECK(end <= buf + off + len);
				while (mc_next_key(&p, end, &key, &klen))
					check_key(buf + off, len, &cmd, key,
					    klen);
			}
		} else
			FUZZ_CHECK(strncmp(why, "ERROR", 5) == 0 ||
			    strncmp(why, "CLIENT_ERROR ", 13) == 0);
		off += used;
	}
	free(buf);
	return 0;
}

/*
 * The config parser: the input is the text of a config file, written into
 * a folder made once (in $TMPDIR, else /dev/shm, else /tmp) with an
 * htdocs/ inside, so that "root = htdocs" can be valid.  Either a config
 * comes back that the master could run with, or NULL and one message that
 * names the file.  Nothing may leak either way: LeakSanitizer checks each
 * input under libFuzzer, and at exit under the replay driver.
 */
#include <sys/stat.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "tests/fuzz/fuzz.h"

static char dir[PATH_MAX];
static char conf[PATH_MAX + 16];
static char docroot[PATH_MAX + 16];

static void
cleanup(void)
{
	unlink(conf);
	rmdir(docroot);
	rmdir(dir);
}

static void
setup(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[PATH_MAX];
	struct stat st;

	if (base == NULL || base[0] == '\0') {
		base = "/tmp";
		if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
		    access("/dev/shm", W_OK) == 0)
			base = "/dev/shm";
	}
	snprintf(tmpl, sizeof(tmpl), "%s/corral-fuzz-XXXXXX", base);
	FUZZ_CHECK(mkdtemp(tmpl) != NULL);
	/* config_load() resolves the folder: compare with the real path. */
	FUZZ_CHECK(realpath(tmpl, dir) != NULL);
	snprintf(conf, sizeof(conf), "%s/corral.conf", dir);
	snprintf(docroot, sizeof(docroot), "%s/htdocs", dir);
	FUZZ_CHECK(mkdir(docroot, 0755) == 0);
	atexit(cleanup);
}

static void
write_conf(const uint8_t *data, size_t size)
{
	FILE *fp = fopen(conf, "wb");

	FUZZ_CHECK(fp != NULL);
	FUZZ_CHECK(fwrite(data, 1, size, fp) == size);
	FUZZ_CHECK(fclose(fp) == 0);
}

/* What the master relies on in a config that loaded. */
static void
check_config(const struct config *cf)
{
	size_t i, j;

	FUZZ_CHECK(cf->file != NULL && strcmp(cf->file, conf) == 0);
	FUZZ_CHECK(cf->workers >= 1 && cf->workers <= 1024);
	FUZZ_CHECK(cf->worker_connections >= 16);
	FUZZ_CHECK(cf->nlisten >= 1 && cf->listen != NULL);
	for (i = 0; i < cf->nlisten; i++)
		FUZZ_CHECK(cf->listen[i].addrlen > 0 &&
		    memchr(cf->listen[i].text, '\0',
		    sizeof(cf->listen[i].text)) != NULL);
	FUZZ_CHECK(cf->max_request_line <= cf->max_header_size);
	FUZZ_CHECK(cf->max_headers >= 1);
	FUZZ_CHECK(cf->header_timeout_ms >= 1 && cf->body_timeout_ms >= 1 &&
	    cf->send_timeout_ms >= 1);
	FUZZ_CHECK(cf->max_ranges >= 1);
	FUZZ_CHECK(cf->mime_types == NULL || cf->mime_types[0] == '/');
	FUZZ_CHECK(cf->error_log == NULL || cf->error_log[0] == '/');
	FUZZ_CHECK(cf->pid_file == NULL || cf->pid_file[0] == '/');
	FUZZ_CHECK(cf->nservers >= 1 && cf->servers != NULL);
	for (i = 0; i < cf->nservers; i++) {
		const struct config_server *s = &cf->servers[i];

		FUZZ_CHECK(s->root != NULL && s->root[0] == '/');
		FUZZ_CHECK(s->access_log == NULL || s->access_log[0] == '/');
		for (j = 0; j < s->nnames; j++)
			FUZZ_CHECK(s->names[j] != NULL);
		for (j = 0; j < s->nindex; j++)
			FUZZ_CHECK(s->index[j] != NULL);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct config *cf;
	size_t errlen;
	char *err;

	if (!ready) {
		setup();
		ready = true;
	}
	write_conf(data, size);
	/* Now and then a short buffer: the message must be cut, not run
	 * past its end. */
	errlen = size % 7 == 3 ? 24 : 1024;
	err = malloc(errlen);
	FUZZ_CHECK(err != NULL);
	memset(err, 'x', errlen);
	cf = config_load(conf, err, errlen);
	FUZZ_CHECK(memchr(err, '\0', errlen) != NULL);
	if (cf == NULL) {
		FUZZ_CHECK(err[0] != '\0');
		if (errlen > strlen(conf) + 1)
			FUZZ_CHECK(strncmp(err, conf, strlen(conf)) == 0 &&
			    err[strlen(conf)] == ':');
	} else {
		FUZZ_CHECK(err[0] == '\0');
		check_config(cf);
		config_free(cf);
	}
	free(err);
	return 0;
}

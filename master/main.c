/*
 * corral: a prefork HTTP/1.1 server with a shared-memory cache.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/config.h"
#include "master/log.h"
#include "master/master.h"
#include "master/proctitle.h"
#include "shm/store.h"
#include "worker/static.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

static void
usage(FILE *out)
{
	fprintf(out,
	    "usage: corral [-c FILE] [-t] [-f] [-q KEY] [-s [-j]] [-V] [-h]\n"
	    "  -c FILE  configuration file (default %s/corral.conf)\n"
	    "  -t       check the configuration and exit\n"
	    "  -f       stay in the foreground\n"
	    "  -q KEY   print a setting (pid_file, error_log, listen, workers,\n"
	    "           user) as corral resolves it, and exit\n"
	    "  -s       print the shared cache's counters (needs cache.path)\n"
	    "  -j       with -s, print them as JSON\n"
	    "  -V       print the version and exit\n"
	    "  -h       print this help and exit\n", SYSCONFDIR);
}

/* Loads the config and the MIME types it names; both are config errors. */
static struct config *
load(const char *path, struct mime_table **mime)
{
	struct config *cf;
	char err[1024];

	cf = config_load(path, err, sizeof(err));
	if (cf == NULL) {
		fprintf(stderr, "corral: %s\n", err);
		return NULL;
	}
	*mime = mime_load(cf->mime_types, err, sizeof(err));
	if (*mime == NULL) {
		fprintf(stderr, "corral: %s\n", err);
		config_free(cf);
		return NULL;
	}
	return cf;
}

/* Prints one resolved setting, for corralctl and scripts. */
static int
query(const struct config *cf, const char *key)
{
	if (strcmp(key, "pid_file") == 0)
		printf("%s\n", cf->pid_file ? cf->pid_file : "");
	else if (strcmp(key, "error_log") == 0)
		printf("%s\n", cf->error_log ? cf->error_log : "stderr");
	else if (strcmp(key, "workers") == 0)
		printf("%d\n", cf->workers);
	else if (strcmp(key, "user") == 0)
		printf("%s\n", cf->user ? cf->user : "");
	else if (strcmp(key, "listen") == 0)
		for (size_t i = 0; i < cf->nlisten; i++)
			printf("%s\n", cf->listen[i].text);
	else {
		fprintf(stderr, "corral: -q: unknown key \"%s\"\n", key);
		return 1;
	}
	return 0;
}

/* Reads the counters straight from the cache file, like varnishstat. */
static int
print_stats(const struct config *cf, bool json)
{
	struct store_stats st;
	char err[512];

	if (cf->cache.size == 0 || cf->cache.path == NULL) {
		fprintf(stderr, "corral: %s: the cache has no file (cache.path)"
		    "; its counters cannot be read from outside\n", cf->file);
		return 1;
	}
	if (store_stats_read_file(cf->cache.path, &st, err, sizeof(err))
	    == -1) {
		fprintf(stderr, "corral: %s: %s\n", cf->cache.path, err);
		return 1;
	}
	for (size_t i = 0; i < store_counter_count; i++) {
		const struct store_counter_info *ci = &store_counter_table[i];
		uint64_t v;

		memcpy(&v, (const char *)&st + ci->offset, sizeof(v));
		if (json)
			printf("%s\"%s\": %llu%s", i == 0 ? "{" : "",
			    ci->name, (unsigned long long)v,
			    i + 1 == store_counter_count ? "}\n" : ", ");
		else
			printf("%s %llu\n", ci->name, (unsigned long long)v);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *path = SYSCONFDIR "/corral.conf", *key = NULL;
	bool test = false, foreground = false, stats = false, json = false;
	struct mime_table *mime;
	struct runtime *rt;
	struct config *cf;
	int ch, rc;

	proctitle_init(argc, argv);
	while ((ch = getopt(argc, argv, "c:tfq:sjVh")) != -1) {
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test = true;
			break;
		case 'f':
			foreground = true;
			break;
		case 'q':
			key = optarg;
			break;
		case 's':
			stats = true;
			break;
		case 'j':
			json = true;
			break;
		case 'V':
			printf("corral/" PACKAGE_VERSION "\n");
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}

	cf = load(path, &mime);
	if (cf == NULL)
		return 1;
	if (key != NULL || stats) {
		rc = stats ? print_stats(cf, json) : query(cf, key);
		mime_free(mime);
		config_free(cf);
		return rc;
	}
	if (test) {
		printf("corral: %s: syntax is ok, test is successful\n",
		    cf->file);
		mime_free(mime);
		config_free(cf);
		return 0;
	}

	master_block_signals();
	proctitle_set("corral: master process %s", cf->file);
	if (master_check_pidfile(cf) == -1) {
		mime_free(mime);
		config_free(cf);
		return 1;
	}
	log_level_max = cf->log_level;
	log_tee_stderr(1);
	if (log_open(cf->error_log) == -1) {
		fprintf(stderr, "corral: open %s: %s\n", cf->error_log,
		    strerror(errno));
		mime_free(mime);
		config_free(cf);
		return 1;
	}
	rt = runtime_open(cf, mime, NULL);
	if (rt == NULL)
		return 1;
	if (master_open_store(rt) == -1) {
		runtime_free(rt);
		return 1;
	}
	return master_run(rt, foreground);
}

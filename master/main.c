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
#include "master/tls_client.h"
#include "master/tls_conf.h"
#include "shm/store.h"
#include "worker/static.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

static void
usage(FILE *out)
{
	fprintf(out,
	    "usage: corral [-c FILE] [-t] [-f] [-q KEY] [-s [-j]] "
	    "[-T [-i SECS] [-n COUNT]] [-P URL] [-V] [-h]\n"
	    "  -c FILE  configuration file (default %s/corral.conf)\n"
	    "  -t       check the configuration and exit\n"
	    "  -f       stay in the foreground\n"
	    "  -q KEY   print a setting (pid_file, stats_file, error_log, listen,\n"
	    "           workers, user) as corral resolves it, and exit\n"
	    "  -s       print the counters from stats_file (and cache.path)\n"
	    "  -j       with -s, print them as JSON\n"
	    "  -T       print a summary of the counters\n"
	    "  -i SECS  with -T, print it again every SECS seconds\n"
	    "  -n COUNT with -i, that many times (default: until stopped)\n"
	    "  -P URL   drop URL (http://host/path or /path) from the running\n"
	    "           server's cache\n"
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
	*mime = master_mime(cf, err, sizeof(err));
	if (*mime == NULL) {
		fprintf(stderr, "corral: %s\n", err);
		config_free(cf);
		return NULL;
	}
	return cf;
}

static void
warn_stderr(const char *msg)
{
	fprintf(stderr, "corral: warning: %s\n", msg);
}

/* -t loads certificates and keys as the start would, then drops them. */
static int
check_tls(const struct config *cf)
{
	char err[1024];
	bool failed;

	tls_conf_free(tls_conf_load(cf, warn_stderr, err, sizeof(err),
	    &failed));
	if (!failed)
		tls_client_free(tls_client_load(cf, err, sizeof(err),
		    &failed));
	if (!failed)
		return 0;
	fprintf(stderr, "corral: %s\n", err);
	return -1;
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
	else if (strcmp(key, "stats_file") == 0)
		printf("%s\n", cf->stats_file ? cf->stats_file : "");
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

int
main(int argc, char **argv)
{
	const char *path = SYSCONFDIR "/corral.conf", *key = NULL;
	const char *purge = NULL;
	bool test = false, foreground = false, stats = false, json = false;
	bool top = false;
	int interval = 0, count = 0;
	struct mime_table *mime;
	struct runtime *rt;
	struct config *cf;
	char err[1024];
	int ch, rc;

	proctitle_init(argc, argv);
	while ((ch = getopt(argc, argv, "c:tfq:sjTi:n:P:Vh")) != -1) {
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
		case 'T':
			top = true;
			break;
		case 'P':
			purge = optarg;
			break;
		case 'i':
		case 'n':
			if (ch == 'i')
				interval = atoi(optarg);
			else
				count = atoi(optarg);
			if (atoi(optarg) <= 0) {
				fprintf(stderr, "corral: -%c needs a positive "
				    "number\n", ch);
				return 1;
			}
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
	if (key != NULL || stats || top || purge != NULL) {
		rc = purge ? monitor_purge(cf, purge) :
		    top ? monitor_summary(cf, interval, count) :
		    stats ? monitor_stats(cf, json) : query(cf, key);
		mime_free(mime);
		config_free(cf);
		return rc;
	}
	if (test && check_tls(cf) == -1) {
		mime_free(mime);
		config_free(cf);
		return 1;
	}
	if (test) {
		/* The checks start makes before it opens anything. */
		rc = master_preflight(cf, warn_stderr, err, sizeof(err));
		if (rc == -1)
			fprintf(stderr, "corral: %s\n", err);
		else
			printf("corral: %s: syntax is ok, test is successful\n",
			    cf->file);
		mime_free(mime);
		config_free(cf);
		return rc == -1 ? 1 : 0;
	}

	master_block_signals();
	proctitle_set("corral: master process %s", cf->file);
	if (master_check_pidfile(cf) == -1)
		goto failed;
	log_level_max = cf->log_level;
	log_tee_stderr(1);
	if (master_error_log(cf, err, sizeof(err)) == -1) {
		fprintf(stderr, "corral: %s\n", err);
		goto failed;
	}
	if (master_preflight(cf, master_warn_log, err, sizeof(err)) == -1) {
		log_crit("%s", err);
		goto failed;
	}
	if (master_open_stats(cf) == -1)
		goto failed;
	rt = runtime_open(cf, mime, NULL);
	if (rt == NULL)
		return 1;
	if (master_attach_stats(rt) == -1 || master_open_store(rt) == -1 ||
	    master_open_tls(rt) == -1) {
		runtime_free(rt);
		return 1;
	}
	return master_run(rt, foreground);

failed:
	mime_free(mime);
	config_free(cf);
	return 1;
}

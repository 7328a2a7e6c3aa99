/*
 * main() for the fuzz harnesses in builds without libFuzzer: runs each
 * file named on the command line, and each file in a named folder, once
 * through LLVMFuzzerTestOneInput().  A broken invariant aborts, so a
 * corpus replayed this way is a regression test.
 *
 *   fuzz_NAME FILE|DIR...
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/readfile.h"
#include "tests/fuzz/fuzz.h"

static const char *prog;
static unsigned nrun;

/* Reads a whole file into a buffer of exactly its size, so that ASan
 * sees a read past its end. */
static char *
slurp(const char *path, size_t *lenp)
{
	char *buf, *exact;

	if ((buf = readfile(path, lenp)) == NULL)
		return NULL;
	exact = fuzz_dup(buf, *lenp);
	free(buf);
	return exact;
}

static int
run_file(const char *path)
{
	size_t len;
	char *buf;

	if ((buf = slurp(path, &len)) == NULL) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	/* Named first, as libFuzzer does, so a failure shows its input. */
	fprintf(stderr, "Running: %s\n", path);
	LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	free(buf);
	nrun++;
	return 0;
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int
skip_dot(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Runs the regular files of a folder in name order. */
static int
run_dir(const char *dir)
{
	char path[PATH_MAX];
	struct dirent **names;
	struct stat st;
	int i, n, rc = 0;

	if ((n = scandir(dir, &names, skip_dot, by_name)) == -1) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			rc = run_file(path);
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char **argv)
{
	struct stat st;
	int i, rc = 0;

	prog = argv[0];
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", prog);
		return 2;
	}
	for (i = 1; i < argc && rc == 0; i++) {
		if (stat(argv[i], &st) == -1) {
			fprintf(stderr, "%s: %s: %s\n", prog, argv[i],
			    strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode))
			rc = run_dir(argv[i]);
		else
			rc = run_file(argv[i]);
	}
	if (rc == 0 && nrun == 0) {
		fprintf(stderr, "%s: no input to run\n", prog);
		rc = -1;
	}
	if (rc != 0)
		return 1;
	printf("%s: %u inputs ran, every check held\n", prog, nrun);
	return 0;
}

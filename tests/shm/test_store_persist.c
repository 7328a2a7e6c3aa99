/*
 * The store's file: a clean stop saves the store and a restart with
 * persist checks every item before it keeps it; a crash, a damaged or a
 * cut file starts empty or drops what is damaged, never serves it; the
 * live counters are readable through the file; the file can be cut while
 * the store runs; a full disk is refused at start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* unshare() */
#endif
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include "shm/store.h"
#include "shm/store_test.h"
#include "tests/shm/single.h"

/* A fresh directory for store files. */
static char *
tmpdir(void)
{
	static char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/store-test-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	return dir;
}

static void
cleanup(const char *dir, const char *path)
{
	unlink(path);
	rmdir(dir);
}

static struct store *
mk_file(const char *path, size_t size, unsigned stripes, bool persist,
    char *err, size_t errlen)
{
	struct store_options o = {
		.path = path, .size = size, .stripes = stripes,
		.max_object = 64 << 10, .persist = persist, .max_slots = 4,
	};
	struct store *s = store_create(&o, err, errlen);

	cr_assert_not_null(s, "store_create: %s", err);
	store_set_clock(s, fake_clock, NULL);
	cr_assert_eq(store_attach(s, 0), 0);
	return s;
}

Test(store_persist, warm_restart_keeps_contents)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;
	struct store_stats st;
	uint64_t cas;
	struct store_ref ref;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: new file");
	set_str(s, "a", "apple", 0);
	set_str(s, "b", "banana", 0);
	set_str(s, "gone", "x", 0);
	store_delete(s, "gone", 4);
	cr_assert_eq(store_get(s, "a", 1, &ref), STORE_HIT);
	cas = ref.cas;
	store_release(s, &ref);
	store_destroy(s);

	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "kept 2 items; 0 damaged dropped");
	cr_assert_str_eq(store_note(s), err);
	expect(s, "a", "apple");
	expect(s, "b", "banana");
	expect(s, "gone", NULL);
	cr_assert_eq(store_get(s, "a", 1, &ref), STORE_HIT);
	cr_assert_eq(ref.cas, cas, "versions survive too");
	store_release(s, &ref);
	set_str(s, "c", "cherry", 0);
	cr_assert_eq(store_get(s, "c", 1, &ref), STORE_HIT);
	cr_assert_gt(ref.cas, cas, "and new ones stay new");
	store_release(s, &ref);
	store_stats(s, &st);
	cr_assert_eq(st.items, 3);
	cr_assert_eq(st.sets, 4);	/* counters survive too */
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_destroy(s);

	/* Without persist the same file starts empty. */
	s = mk_file(path, 4 << 20, 4, false, err, sizeof(err));
	expect(s, "a", NULL);
	store_destroy(s);
	/* ... and then holds only counters: nothing to load. */
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: it holds only counters "
	    "(persist was off)");
	store_destroy(s);
	cleanup(dir, path);
}

/* A value of len bytes that says which key it is. */
static void
fill_val(char *buf, size_t len, int i)
{
	size_t k;

	for (k = 0; k < len; k++)
		buf[k] = (char)(i * 31 + k * 13 + k / 4096);
}

/*
 * A stop writes what the store holds, not its size (issue 14: a 64 MB
 * store written whole with two fdatasync made SIGTERM take over 10 s
 * under load): a big store with a few items saves a small file, and
 * what it holds (slab chunks, big items in runs with holes between
 * them) all comes back.
 */
Test(store_persist, stop_writes_only_used_pages, .timeout = 60)
{
	char *dir = tmpdir(), path[128], err[256], key[16];
	static char val[40000], got[40000];
	struct store_options o = {
		.size = 64 << 20, .stripes = 8, .max_object = 1 << 20,
		.persist = true, .max_slots = 4,
	};
	struct store *s;
	struct store_ref ref;
	struct store_stats st;
	struct stat sb;
	size_t len;
	int i;

	snprintf(path, sizeof(path), "%s/cache", dir);
	o.path = path;
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	cr_assert_eq(store_attach(s, 0), 0);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_geq(sb.st_size, 60 << 20, "the room is reserved at start");
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		len = i % 2 ? 100 + (size_t)i : 9000 + (size_t)i * 700;
		fill_val(val, len, i);
		cr_assert_eq(store_set(s, key, strlen(key), val, len, 0, 7),
		    STORE_OK);
	}
	/* Holes between the runs that stay. */
	for (i = 0; i < 40; i += 4) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(store_delete(s, key, strlen(key)), STORE_OK);
	}
	store_destroy(s);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_lt(sb.st_size, 4 << 20, "saved %jd bytes for 30 items",
	    (intmax_t)sb.st_size);

	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	cr_assert_str_eq(err, "kept 30 items; 0 damaged dropped");
	cr_assert_eq(store_attach(s, 0), 0);
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		if (i % 4 == 0) {
			expect(s, key, NULL);
			continue;
		}
		len = i % 2 ? 100 + (size_t)i : 9000 + (size_t)i * 700;
		fill_val(val, len, i);
		cr_assert_eq(store_get(s, key, strlen(key), &ref), STORE_HIT,
		    "%s", key);
		cr_assert_eq(ref.len, len, "%s", key);
		memcpy(got, ref.data, len);
		cr_assert_arr_eq(got, val, len, "%s", key);
		store_release(s, &ref);
	}
	cr_assert_eq(store_test_check(s, err, sizeof(err)), 0, "%s", err);
	store_stats(s, &st);
	cr_assert_eq(st.items, 30);
	/* The restart reserved the room again: a full store still fits. */
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_geq(sb.st_size, 60 << 20);
	store_destroy(s);

	/* A file cut inside its pages starts empty, and says so. */
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(truncate(path, sb.st_size - 4096), 0);
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	cr_assert_str_eq(err, "started empty: file cut short");
	store_destroy(s);
	cleanup(dir, path);
}

Test(store_persist, different_layout_starts_empty)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	set_str(s, "a", "apple", 0);
	store_destroy(s);
	s = mk_file(path, 8 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: file size 4194304, want "
	    "8388608");
	expect(s, "a", NULL);
	set_str(s, "a", "again", 0);
	store_destroy(s);
	s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
	cr_assert(strstr(err, "started empty: stripes") == err, "%s", err);
	expect(s, "a", NULL);
	store_destroy(s);
	cleanup(dir, path);
}

static void
die_in_lock(void *arg)
{
	raise(SIGKILL);
}

/* The whole server dies (here: while a lock is held): nothing was saved,
 * so the next start is empty rather than trusting a store that may hold
 * values deleted since the last save. */
Test(store_persist, crash_starts_empty)
{
	char *dir = tmpdir(), path[128], err[256], key[16];
	struct store *s;
	int status, i;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
	set_str(s, "saved", "v", 0);
	store_destroy(s);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
		for (i = 0; i < 64; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			set_str(s, key, "v", 0);
		}
		store_delete(s, "saved", 5);
		store_test_set_hook(s, STORE_HOOK_COMMIT, die_in_lock, NULL);
		set_str(s, "k0", "never", 0);
		_exit(1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	s = mk_file(path, 8 << 20, 8, true, err, sizeof(err));
	cr_assert_str_eq(err, "started empty: the last run did not stop "
	    "cleanly");
	expect(s, "saved", NULL);
	expect(s, "k1", NULL);
	store_destroy(s);
	cleanup(dir, path);
}

/* Values whose bytes say which key and how long they are. */
static size_t
mk_val(char *buf, int i)
{
	size_t len = 200 + (size_t)i * 97 % 3000, k;

	for (k = 0; k < len; k++)
		buf[k] = (char)(i * 131 + k * 7);
	return len;
}

static bool
val_ok(const struct store_ref *ref, int i)
{
	char buf[4096];
	size_t len = mk_val(buf, i);

	return ref->len == len && memcmp(ref->data, buf, len) == 0;
}

/*
 * Random bytes of a saved file flipped between runs (issue 14): the
 * restart never serves a damaged value and never crashes; what fails its
 * checksums is dropped and counted.
 */
Test(store_persist, flipped_bytes_are_never_served, .timeout = 60)
{
	char *dir = tmpdir(), path[128], err[256], key[16], buf[4096];
	struct store *s;
	struct store_ref ref;
	struct store_stats st;
	struct stat sb;
	uint64_t rng = 0x1234567;
	int fd, i, round, flip, hits, bad;

	snprintf(path, sizeof(path), "%s/cache", dir);
	for (round = 0; round < 12; round++) {
		s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
		for (i = 0; i < 200; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			if (store_get(s, key, strlen(key), &ref) == STORE_HIT)
				store_release(s, &ref);
			else
				store_set(s, key, strlen(key), buf,
				    mk_val(buf, i), 0, 7);
		}
		store_destroy(s);
		/* Flip bytes anywhere: header, pool, index, items. */
		fd = open(path, O_RDWR);
		cr_assert_geq(fd, 0);
		cr_assert_eq(fstat(fd, &sb), 0);
		for (flip = 0; flip < 20; flip++) {
			unsigned char c;
			off_t off;

			rng = rng * 6364136223846793005ULL + 1;
			/* Mostly the arena, where the values are. */
			off = (off_t)((rng >> 16) % (uint64_t)sb.st_size);
			if (flip < 3)
				off = (off_t)((rng >> 16) % 65536);
			cr_assert_eq(pread(fd, &c, 1, off), 1);
			c ^= (unsigned char)(1u << (rng >> 60 & 7));
			cr_assert_eq(pwrite(fd, &c, 1, off), 1);
		}
		close(fd);
		s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
		hits = bad = 0;
		for (i = 0; i < 200; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			if (store_get(s, key, strlen(key), &ref) != STORE_HIT)
				continue;
			hits++;
			bad += !val_ok(&ref, i);
			store_release(s, &ref);
		}
		cr_assert_eq(bad, 0, "round %d: %d damaged values served "
		    "(%s)", round, bad, err);
		cr_assert_eq(store_test_check(s, err, sizeof(err)), 0,
		    "round %d: %s", round, err);
		store_stats(s, &st);
		cr_assert_eq(st.items, (uint64_t)hits);
		store_destroy(s);
	}
	cleanup(dir, path);
}

/* One flipped byte in one value: exactly that value goes. */
Test(store_persist, one_flipped_value_is_dropped_and_counted)
{
	char *dir = tmpdir(), path[128], err[256];
	char val[1000];
	struct store *s;
	struct store_stats st;
	int fd;
	off_t off;
	char c;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	memset(val, 'v', sizeof(val));
	memcpy(val, "MARKER", 6);
	cr_assert_eq(store_set(s, "victim", 6, val, sizeof(val), 0, 7),
	    STORE_OK);
	cr_assert_eq(set_str(s, "other", "fine", 0), STORE_OK);
	store_destroy(s);
	fd = open(path, O_RDWR);
	for (off = 0; pread(fd, &c, 1, off) == 1; off++)
		if (c == 'M' && pread(fd, val, 6, off) == 6 &&
		    memcmp(val, "MARKER", 6) == 0)
			break;
	cr_assert_eq(pwrite(fd, "m", 1, off + 100), 1);
	close(fd);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "kept 1 items; 1 damaged dropped");
	expect(s, "victim", NULL);
	expect(s, "other", "fine");
	store_stats(s, &st);
	cr_assert_eq(st.corruptions, 1);
	store_destroy(s);
	cleanup(dir, path);
}

/* Truncating the file while the store runs harms nothing (issue 14): the
 * store is not in it. */
Test(store_persist, file_cut_while_running)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;
	struct store_stats st;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_eq(store_watch_file(s, err, sizeof(err)), 0);
	set_str(s, "a", "apple", 0);
	cr_assert_eq(truncate(path, 0), 0);
	set_str(s, "b", "banana", 0);
	expect(s, "a", "apple");
	expect(s, "b", "banana");
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	/* The master's next look finds it, says so, and mends the file. */
	cr_assert_eq(store_watch_file(s, err, sizeof(err)), 1);
	cr_assert(strstr(err, "was cut to 0 bytes while corral runs; the "
	    "store is in memory and unharmed, and the file was made whole "
	    "again") != NULL, "%s", err);
	cr_assert_eq(store_watch_file(s, err, sizeof(err)), 0);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st.items, 2);
	store_destroy(s);
	/* The clean stop wrote it again, whole. */
	s = mk_file(path, 4 << 20, 4, true, err, sizeof(err));
	cr_assert_str_eq(err, "kept 2 items; 0 damaged dropped");
	expect(s, "b", "banana");
	store_destroy(s);
	cleanup(dir, path);
}

Test(store_persist, stats_read_file)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store *s;
	struct store_stats st;
	int fd;

	snprintf(path, sizeof(path), "%s/cache", dir);
	s = mk_file(path, 4 << 20, 4, false, err, sizeof(err));
	set_str(s, "a", "1", 0);
	set_str(s, "b", "2", 0);
	expect(s, "a", "1");
	expect(s, "z", NULL);
	/* Live: through the running store. */
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st.sets, 2);
	cr_assert_eq(st.gets, 2);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.items, 2);
	set_str(s, "c", "3", 0);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st.sets, 3);
	store_destroy(s);
	/* Stopped: the counters saved at the stop. */
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st.sets, 3);
	cr_assert_eq(st.items, 3);

	/* A damaged header is an error, never a guess. */
	fd = open(path, O_RDWR);
	cr_assert_eq(pwrite(fd, "\x01", 1, 4096 + 16), 1);
	close(fd);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	cr_assert(strstr(err, "header") != NULL, "%s", err);
	fd = open(path, O_RDWR);
	cr_assert_eq(pwrite(fd, "X", 1, 0), 1);
	close(fd);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a store file") != NULL, "%s", err);
	cr_assert_eq(store_stats_read_file("/nonexistent", &st, err,
	    sizeof(err)), -1);
	cleanup(dir, path);
}

/* The master that wrote LIVE is gone: -s says so instead of guessing. */
Test(store_persist, stats_of_a_dead_server)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store_stats st;
	int status;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/cache", dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		mk_file(path, 4 << 20, 4, false, err, sizeof(err));
		raise(SIGKILL);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(store_stats_read_file(path, &st, err, sizeof(err)), -1);
	cr_assert(strstr(err, "gone") != NULL, "%s", err);
	cleanup(dir, path);
}

Test(store_persist, second_master_refused)
{
	char *dir = tmpdir(), path[128], err[256];
	struct store_options o = {
		.path = NULL, .size = 4 << 20, .stripes = 4,
		.max_object = 4096, .max_slots = 4,
	};
	struct store *s;

	snprintf(path, sizeof(path), "%s/cache", dir);
	o.path = path;
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert(strstr(err, "in use") != NULL, "%s", err);
	store_destroy(s);
	cleanup(dir, path);
}

/* A symbolic link planted at the path is never followed. */
Test(store_persist, symlink_refused)
{
	char *dir = tmpdir(), path[128], target[128], err[256];
	struct store_options o = {
		.path = path, .size = 4 << 20, .stripes = 4,
		.max_object = 4096, .max_slots = 4,
	};
	struct stat sb;

	snprintf(path, sizeof(path), "%s/cache", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	cr_assert_eq(close(open(target, O_CREAT | O_WRONLY, 0600)), 0);
	cr_assert_eq(symlink(target, path), 0);
	cr_assert_eq(store_check(&o, err, sizeof(err)), -1);
	cr_assert(strstr(err, "not a regular file") != NULL, "%s", err);
	cr_assert_null(store_create(&o, err, sizeof(err)));
	cr_assert_eq(stat(target, &sb), 0);
	cr_assert_eq(sb.st_size, 0, "the link's target was written");
	unlink(target);
	cleanup(dir, path);
}

/* A 1 MiB tmpfs in a private mount namespace stands in for a full disk:
 * store_check() (corral -t) and store_create() say the same. */
Test(store_persist, no_room_is_an_error)
{
	char *dir = tmpdir(), path[128], err[256], err2[256];
	struct store_options o = {
		.path = path, .size = 4 << 20, .stripes = 4,
		.max_object = 4096, .max_slots = 4, .persist = true,
	};
	struct store *s;

	if (unshare(CLONE_NEWNS) == -1 &&
	    unshare(CLONE_NEWUSER | CLONE_NEWNS) == -1)
		cr_skip_test("cannot make a mount namespace: %s",
		    strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=1m") == -1)
		cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/cache", dir);
	cr_assert_eq(store_check(&o, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no room for the store file: it needs ") !=
	    NULL, "%s", err);
	cr_assert_null(store_create(&o, err2, sizeof(err2)));
	cr_assert_str_eq(err, err2);
	/* Without persist the file holds only the counters: it fits. */
	o.persist = false;
	cr_assert_eq(store_check(&o, err, sizeof(err)), 0, "%s", err);
	s = store_create(&o, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	store_destroy(s);
	umount(dir);
	rmdir(dir);
}

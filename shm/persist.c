/*
 * The store's file (see persist.h).  Its first PERSIST_HDR bytes say what
 * the rest is:
 *
 *   LIVE     a master is running with the store in its memfd: pid, fd
 *            number and start time tell corral -s where to read it
 *   WRITING  a save began and did not finish: nothing to trust
 *   SAVED    an image of the store follows: all of it (persist) or only
 *            the part that holds the counters
 *
 * A start with persist loads a whole SAVED image, then marks the file
 * LIVE at once, so a crash later never brings back values that were
 * deleted or purged meanwhile.
 *
 * A persist image holds only what a restart needs, so that a stop
 * writes (and syncs) what the store holds, not its size:
 *
 *   header .. stripes   bytes [0, slot_off) of the store (the counters)
 *   buckets .. ptab     bytes [bucket_off, arena_off): slots are not
 *                       saved, a restart clears them anyway
 *   index               runs (first page, pages) of the arena in use
 *   pages               those runs' pages, in index order
 *
 * The room for the largest image is reserved at start (a full disk
 * fails there); the save writes in place behind the WRITING mark, cuts
 * the file to the image, syncs, and only then says SAVED, so a crash at
 * any point leaves a file that starts empty, never half an image.
 */
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "shm/persist.h"
#include "shm/store_impl.h"

#define PERSIST_MAGIC	0x324c4946534c5243ULL	/* "CRLSFIL2" */
#define PERSIST_HDR	4096
#define IO_CHUNK	(1 << 20)

enum { F_LIVE = 1, F_WRITING, F_SAVED };

struct file_hdr {
	uint64_t magic;
	uint64_t state;
	uint64_t size;		/* of the store */
	uint64_t image;		/* bytes of it that follow (SAVED) */
	int64_t pid;		/* LIVE: the master */
	int64_t fd;		/* LIVE: its memfd */
	uint64_t started;	/* LIVE: the master's start, clock ticks */
	uint64_t full;		/* SAVED: a persist image, not counters */
	uint64_t runs;		/* SAVED full: entries of the index */
	uint64_t icsum;		/* SAVED full: of the index */
	uint64_t csum;		/* of the fields above */
};

/* An entry of a persist image's index: a run of arena pages saved. */
struct run_ent {
	uint32_t first, pages;
};

static uint64_t
hdr_csum(const struct file_hdr *h)
{
	return XXH3_64bits(h, offsetof(struct file_hdr, csum));
}

/* The bytes of an image that hold the header, pool and stripes. */
static uint64_t
counters_part(const struct layout *l)
{
	return l->slot_off;
}

/* The store's bytes a persist image holds before its index. */
static uint64_t
meta_part(const struct layout *l)
{
	return l->slot_off + (l->arena_off - l->bucket_off);
}

/* The most an image can take: the room reserved in the file. */
static uint64_t
reserve_part(const struct layout *l, bool persist)
{
	return persist ? meta_part(l) + l->npages *
	    (sizeof(struct run_ent) + PAGE) : counters_part(l);
}

/* Field 22 of /proc/PID/stat: when the process started. */
static uint64_t
proc_started(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return 0;
	for (i = 2; i < 22 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &v) != 1)
		return 0;
	return v;
}

/* All of len bytes at off, written (out) or read; 0 or -1. */
static int
io_all(int fd, void *buf, size_t len, off_t off, bool out)
{
	char *p = buf;
	size_t part;
	ssize_t n;

	while (len > 0) {
		part = len < IO_CHUNK ? len : IO_CHUNK;
		n = out ? pwrite(fd, p, part, off) : pread(fd, p, part, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
write_all(int fd, const void *buf, size_t len, off_t off)
{
	return io_all(fd, (void *)(uintptr_t)buf, len, off, true);
}

static int
read_all(int fd, void *buf, size_t len, off_t off)
{
	return io_all(fd, buf, len, off, false);
}

static int
write_hdr(int fd, struct file_hdr *h)
{
	char block[PERSIST_HDR] = { 0 };

	h->magic = PERSIST_MAGIC;
	h->csum = hdr_csum(h);
	memcpy(block, h, sizeof(*h));
	return write_all(fd, block, sizeof(block), 0);
}

static int
read_hdr(int fd, struct file_hdr *h)
{
	if (read_all(fd, h, sizeof(*h), 0) == -1 ||
	    h->magic != PERSIST_MAGIC || h->csum != hdr_csum(h))
		return -1;
	return 0;
}

int
persist_check(const struct store_options *o, char *err, size_t errlen)
{
	char dir[PATH_MAX], a[32], b[32];
	struct layout l;
	struct statvfs vfs;
	struct stat sb;
	uint64_t need, have, old = 0;

	if (layout_compute(&l, o, err, errlen) == -1)
		return -1;
	if (strlen(o->path) >= sizeof(dir))
		return store_fail(err, errlen, "%s: path too long", o->path);
	snprintf(dir, sizeof(dir), "%s", o->path);
	dirname(dir);
	if (stat(dir, &sb) == -1)
		return store_fail(err, errlen, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return store_fail(err, errlen, "%s: not a directory", dir);
	if (lstat(o->path, &sb) == 0) {
		if (!S_ISREG(sb.st_mode))
			return store_fail(err, errlen, "%s: not a regular "
			    "file", o->path);
		if (access(o->path, R_OK | W_OK) == -1)
			return store_fail(err, errlen, "%s: %s", o->path,
			    strerror(errno));
		old = (uint64_t)sb.st_blocks * 512;
	} else if (errno != ENOENT) {
		return store_fail(err, errlen, "%s: %s", o->path,
		    strerror(errno));
	} else if (access(dir, W_OK | X_OK) == -1) {
		return store_fail(err, errlen, "%s: %s", dir,
		    strerror(errno));
	}
	need = PERSIST_HDR + reserve_part(&l, o->persist);
	if (statvfs(dir, &vfs) == 0) {
		have = (uint64_t)vfs.f_bavail * vfs.f_frsize + old;
		if (need > have)
			return store_fail(err, errlen, "%s: no room for the "
			    "store file: it needs %s, the filesystem has %s",
			    o->path, store_fmt_size(a, sizeof(a), need),
			    store_fmt_size(b, sizeof(b), have));
	}
	return 0;
}

/*
 * Checks a saved index against the arena: runs in order, apart, inside
 * it, and as many pages as the image holds.
 */
static bool
index_valid(const struct layout *l, const struct run_ent *ix, uint64_t n,
    uint64_t pages)
{
	uint64_t i, next = 0, sum = 0;

	for (i = 0; i < n; i++) {
		if (ix[i].pages == 0 || ix[i].first < next ||
		    (uint64_t)ix[i].first + ix[i].pages > l->npages)
			return false;
		next = (uint64_t)ix[i].first + ix[i].pages;
		sum += ix[i].pages;
	}
	return sum == pages;
}

/* Reads a persist image's parts into the fresh memfd; NULL or why not. */
static const char *
load_parts(struct store *s, int fd, const struct file_hdr *fh)
{
	const struct layout *l = &s->l;
	struct run_ent *ix;
	uint64_t meta = meta_part(l), ilen, i;
	off_t off = PERSIST_HDR;
	const char *why = NULL;

	if (fh->runs > l->npages)
		return "damaged index";
	ilen = fh->runs * sizeof(*ix);
	if (fh->image < meta + ilen || (fh->image - meta - ilen) % PAGE != 0)
		return "damaged index";
	if (read_all(fd, s->base, l->slot_off, off) == -1 ||
	    read_all(fd, s->base + l->bucket_off, l->arena_off -
	    l->bucket_off, off + (off_t)l->slot_off) == -1)
		return "file cut short";
	off += (off_t)meta;
	if ((ix = malloc(ilen + 1)) == NULL)
		return "out of memory";
	if (read_all(fd, ix, ilen, off) == -1)
		why = "file cut short";
	else if (XXH3_64bits(ix, ilen) != fh->icsum ||
	    !index_valid(l, ix, fh->runs, (fh->image - meta - ilen) / PAGE))
		why = "damaged index";
	off += (off_t)ilen;
	for (i = 0; why == NULL && i < fh->runs; i++) {
		if (read_all(fd, s->base + l->arena_off + (uint64_t)
		    ix[i].first * PAGE, (size_t)ix[i].pages * PAGE, off) == -1)
			why = "file cut short";
		off += (off_t)ix[i].pages * PAGE;
	}
	free(ix);
	return why;
}

/* Reads a whole saved image into the memfd; false (and why) if none. */
static bool
load_image(struct store *s, int fd)
{
	struct file_hdr fh;
	struct stat sb;
	const char *why;
	size_t kept, dropped;

	if (fstat(fd, &sb) == -1 || sb.st_size == 0) {
		snprintf(s->note, sizeof(s->note), "started empty: new file");
		return false;
	}
	why = "not a store file";
	if (read_hdr(fd, &fh) == -1)
		goto empty;
	why = "the last run did not stop cleanly";
	if (fh.state != F_SAVED)
		goto empty;
	why = "it holds only counters (persist was off)";
	if (fh.size == s->l.size && !fh.full)
		goto empty;
	if (fh.size != s->l.size) {
		snprintf(s->note, sizeof(s->note), "started empty: file "
		    "size %" PRIu64 ", want %" PRIu64, fh.size, s->l.size);
		return false;
	}
	why = "file cut short";
	if ((uint64_t)sb.st_size < PERSIST_HDR + fh.image)
		goto empty;
	if (read_all(fd, s->base, HDR_SIZE, PERSIST_HDR) == -1)
		goto empty;
	/* Other options place the parts elsewhere: say which differ. */
	if ((why = store_header_mismatch(s->h, &s->l)) != NULL ||
	    (why = load_parts(s, fd, &fh)) != NULL)
		goto empty;
	store_adopt_image(s, &kept, &dropped);
	snprintf(s->note, sizeof(s->note), "kept %zu items; %zu damaged "
	    "dropped", kept, dropped);
	return true;
empty:
	snprintf(s->note, sizeof(s->note), "started empty: %s", why);
	return false;
}

/* Says in the file where the live store is, for corral -s. */
static int
mark_live(struct store *s)
{
	struct file_hdr fh;

	memset(&fh, 0, sizeof(fh));
	fh.state = F_LIVE;
	fh.size = s->l.size;
	fh.pid = getpid();
	fh.fd = s->memfd;
	fh.started = proc_started((long)fh.pid);
	return write_hdr(s->fd, &fh);
}

int
store_moved(struct store *s)
{
	/* The master forked to detach: it now keeps and saves the file. */
	if (s->creator == 0)
		return 0;
	s->creator = getpid();
	return s->fd == -1 ? 0 : mark_live(s);
}

int
persist_open(struct store *s, const struct store_options *o, char *err,
    size_t errlen)
{
	uint64_t want;
	struct stat sb;
	int r;

	if ((s->path = strdup(o->path)) == NULL)
		return store_fail(err, errlen, "out of memory");
	if (o->open_file != NULL) {
		if ((s->fd = o->open_file(o->path, err, errlen)) == -1)
			return -1;
	} else if ((s->fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0600)) == -1) {
		return store_fail(err, errlen, "%s: %s", o->path,
		    strerror(errno));
	}
	if (fstat(s->fd, &sb) == -1 || !S_ISREG(sb.st_mode))
		return store_fail(err, errlen, "%s: not a regular file",
		    o->path);
	/* Two masters on one file would overwrite each other's copy. */
	if (flock(s->fd, LOCK_EX | LOCK_NB) == -1)
		return store_fail(err, errlen, "%s: in use by another process",
		    o->path);
	if (!(s->persist && load_image(s, s->fd)) &&
	    store_init_fresh(s, err, errlen) == -1)
		return -1;
	/* Reserve the blocks now: a full disk fails here, not at the stop. */
	want = PERSIST_HDR + reserve_part(&s->l, s->persist);
	if (ftruncate(s->fd, (off_t)want) == -1)
		return store_fail(err, errlen, "%s: %s", o->path,
		    strerror(errno));
	if ((r = posix_fallocate(s->fd, 0, (off_t)want)) != 0)
		return store_fail(err, errlen, "%s: cannot reserve %" PRIu64
		    " bytes: %s", o->path, want, strerror(r));
	if (mark_live(s) == -1)
		return store_fail(err, errlen, "%s: %s", o->path,
		    strerror(errno));
	return 0;
}

int
store_watch_file(struct store *s, char *msg, size_t msglen)
{
	struct stat sb;
	uint64_t want;
	int r;

	if (s->fd == -1 || s->creator != getpid() || fstat(s->fd, &sb) == -1)
		return 0;
	want = PERSIST_HDR + reserve_part(&s->l, s->persist);
	if ((uint64_t)sb.st_size >= want && sb.st_nlink > 0)
		return 0;
	if (sb.st_nlink == 0) {
		if (s->file_gone)
			return 0;
		s->file_gone = true;
		snprintf(msg, msglen, "%s was removed while corral runs; the "
		    "store is in memory and unharmed, but corral -s cannot "
		    "find it and the copy at the stop is lost", s->path);
		return 1;
	}
	r = ftruncate(s->fd, (off_t)want) == 0 ?
	    posix_fallocate(s->fd, 0, (off_t)want) : errno;
	if (r == 0 && mark_live(s) == 0)
		snprintf(msg, msglen, "%s was cut to %jd bytes while corral "
		    "runs; the store is in memory and unharmed, and the file "
		    "was made whole again", s->path, (intmax_t)sb.st_size);
	else
		snprintf(msg, msglen, "%s was cut to %jd bytes while corral "
		    "runs; the store is in memory and unharmed, but the file "
		    "cannot be restored: %s", s->path, (intmax_t)sb.st_size,
		    strerror(r != 0 ? r : errno));
	return 1;
}

/*
 * The runs of the arena that hold items (a slab or a big item), merged
 * when they touch: the pool rebuilt at load needs no other page.  The
 * master calls this at its stop, with no worker left to change them.
 */
static struct run_ent *
used_runs(const struct store *s, uint64_t *nruns, uint64_t *npages)
{
	const uint64_t *pt = ptab_at(s);
	struct run_ent *ix;
	uint64_t pg = 0, e, len, n = 0;
	unsigned k;

	*npages = 0;
	/* Used runs are apart or merged: at most one per two pages. */
	if ((ix = malloc((s->l.npages / 2 + 1) * sizeof(*ix))) == NULL)
		return NULL;
	while (pg < s->l.npages) {
		e = pt[pg];
		k = PT_KIND(e);
		len = PT_LEN(e);
		if ((k != PT_SLAB && k != PT_BIG) || len == 0 ||
		    len > s->l.npages - pg) {
			pg++;
			continue;
		}
		if (n > 0 && ix[n - 1].first + ix[n - 1].pages == pg)
			ix[n - 1].pages += (uint32_t)len;
		else
			ix[n++] = (struct run_ent){ (uint32_t)pg,
			    (uint32_t)len };
		*npages += len;
		pg += len;
	}
	*nruns = n;
	return ix;
}

/* A persist image's parts after the file header; fh says what they are. */
static int
write_parts(struct store *s, struct file_hdr *fh)
{
	const struct layout *l = &s->l;
	struct run_ent *ix;
	uint64_t n, pages, i, ilen;
	off_t off = PERSIST_HDR;
	int r = -1;

	if ((ix = used_runs(s, &n, &pages)) == NULL)
		return -1;
	ilen = n * sizeof(*ix);
	if (write_all(s->fd, s->base, l->slot_off, off) == -1 ||
	    write_all(s->fd, s->base + l->bucket_off, l->arena_off -
	    l->bucket_off, off + (off_t)l->slot_off) == -1)
		goto out;
	off += (off_t)meta_part(l);
	if (write_all(s->fd, ix, ilen, off) == -1)
		goto out;
	off += (off_t)ilen;
	for (i = 0; i < n; i++) {
		if (write_all(s->fd, s->base + l->arena_off + (uint64_t)
		    ix[i].first * PAGE, (size_t)ix[i].pages * PAGE, off) == -1)
			goto out;
		off += (off_t)ix[i].pages * PAGE;
	}
	fh->full = 1;
	fh->runs = n;
	fh->icsum = XXH3_64bits(ix, ilen);
	fh->image = meta_part(l) + ilen + pages * PAGE;
	r = 0;
out:
	free(ix);
	return r;
}

void
persist_save(struct store *s)
{
	struct file_hdr fh;

	memset(&fh, 0, sizeof(fh));
	fh.size = s->l.size;
	fh.state = F_WRITING;
	if (write_hdr(s->fd, &fh) == -1)
		return;
	if (s->persist) {
		if (write_parts(s, &fh) == -1)
			return;
	} else {
		fh.image = counters_part(&s->l);
		if (write_all(s->fd, s->base, fh.image, PERSIST_HDR) == -1)
			return;
	}
	/* Give back the reserved room the image does not use. */
	if (ftruncate(s->fd, (off_t)(PERSIST_HDR + fh.image)) == -1 ||
	    fdatasync(s->fd) == -1)
		return;
	fh.state = F_SAVED;
	if (write_hdr(s->fd, &fh) == 0)
		fdatasync(s->fd);
}

/* Checks a header read from outside against the layout its options imply. */
static int
layout_valid(const struct header *h, uint64_t size, char *err,
    size_t errlen)
{
	struct store_options o;
	struct layout l, hl;

	if (h->magic != STORE_MAGIC)
		return store_fail(err, errlen, "not a store file (bad magic)");
	if (h->version != STORE_VERSION)
		return store_fail(err, errlen, "store version %" PRIu64
		    ", want %d", h->version, STORE_VERSION);
	memcpy(&hl, &h->l, sizeof(hl));
	if (hl.size != size || hl.size > SIZE_MAX ||
	    hl.stripes > UINT32_MAX || hl.max_slots > UINT32_MAX ||
	    hl.max_refs > UINT32_MAX || hl.lease_timeout > UINT32_MAX)
		return store_fail(err, errlen, "header size fields are wrong");
	memset(&o, 0, sizeof(o));
	o.size = hl.size;
	o.stripes = (unsigned)hl.stripes;
	o.max_object = hl.max_object;
	o.max_slots = (unsigned)hl.max_slots;
	o.max_refs = (unsigned)hl.max_refs;
	o.lease_timeout = (unsigned)hl.lease_timeout;
	if (layout_compute(&l, &o, err, errlen) == -1)
		return -1;
	if (memcmp(&hl, &l, sizeof(l)) != 0)
		return store_fail(err, errlen, "header does not match its "
		    "layout");
	return 0;
}

/* The running master's store, through its memfd. */
static int
read_live(const struct file_hdr *fh, struct store_stats *out, char *err,
    size_t errlen)
{
	char path[64];
	struct stat sb;
	void *p;
	int fd, r;

	if (fh->pid <= 0 || fh->fd < 0 || fh->started == 0 ||
	    proc_started((long)fh->pid) != fh->started)
		return store_fail(err, errlen, "the server that used it is "
		    "gone and did not stop cleanly");
	snprintf(path, sizeof(path), "/proc/%" PRId64 "/fd/%" PRId64,
	    fh->pid, fh->fd);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return store_fail(err, errlen, "cannot read the running "
		    "server's store (pid %" PRId64 "): %s", fh->pid,
		    strerror(errno));
	if (fstat(fd, &sb) == -1 || (uint64_t)sb.st_size != fh->size) {
		close(fd);
		return store_fail(err, errlen, "the running server's store "
		    "has the wrong size");
	}
	p = mmap(NULL, fh->size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return store_fail(err, errlen, "mmap: %s", strerror(errno));
	r = layout_valid(p, fh->size, err, errlen);
	if (r == 0)
		store_sum_stats(p, &((const struct header *)p)->l, out);
	munmap(p, fh->size);
	return r;
}

/* A saved image's counters, from the part of it that holds them. */
static int
read_saved(int fd, const struct file_hdr *fh, struct store_stats *out,
    char *err, size_t errlen)
{
	struct header h;
	char *buf;
	uint64_t part;
	int r = -1;

	if (fh->image < sizeof(h) ||
	    read_all(fd, &h, sizeof(h), PERSIST_HDR) == -1)
		return store_fail(err, errlen, "not a store file");
	if (layout_valid(&h, fh->size, err, errlen) == -1)
		return -1;
	part = counters_part(&h.l);
	if (fh->image < part || (buf = malloc(part)) == NULL)
		return store_fail(err, errlen, "not a store file");
	if (read_all(fd, buf, part, PERSIST_HDR) == 0) {
		store_sum_stats(buf, &h.l, out);
		r = 0;
	} else {
		store_fail(err, errlen, "file cut short");
	}
	free(buf);
	return r;
}

int
store_stats_read_file(const char *path, struct store_stats *out,
    char *err, size_t errlen)
{
	struct file_hdr fh;
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return store_fail(err, errlen, "%s: %s", path,
		    strerror(errno));
	if (read_hdr(fd, &fh) == -1)
		r = store_fail(err, errlen, "not a store file");
	else if (fh.state == F_LIVE)
		r = read_live(&fh, out, err, errlen);
	else if (fh.state == F_SAVED)
		r = read_saved(fd, &fh, out, err, errlen);
	else
		r = store_fail(err, errlen, "the last save did not finish");
	close(fd);
	return r;
}

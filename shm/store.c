/*
 * The mapping itself: its layout, creation by the master (fresh or reused
 * from a file), attaching a forked child, reaping a dead child's slot,
 * counters, and the read-only stats reader.  Lock rules: see slab.c.
 */
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/store_impl.h"

static int
fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static bool
pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static uint64_t
pow2_ceil(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* Chunk sizes from CHUNK_MIN growing by 1.25; the last is a whole page. */
static void
layout_classes(struct layout *l)
{
	uint64_t c = CHUNK_MIN, n = 0;

	while (c < l->page_size && n < MAX_CLASSES - 1) {
		l->chunk[n++] = c;
		c = ALIGN(c + c / 4, 8);
	}
	l->chunk[n++] = l->page_size;
	l->nclasses = n;
}

static int
layout_check(const struct store_options *o, char *err, size_t errlen)
{
	if (!pow2(o->stripes) || o->stripes > 65536)
		return fail(err, errlen, "stripes must be a power of two "
		    "up to 65536, not %u", o->stripes);
	if (o->max_object == 0 || o->max_object > (1U << 30))
		return fail(err, errlen, "max_object must be 1 byte to 1 GiB");
	if (o->max_slots == 0 || o->max_slots > MAX_SLOTS)
		return fail(err, errlen, "max_slots must be 1 to %d",
		    MAX_SLOTS);
	if (o->max_refs > (1U << 20))
		return fail(err, errlen, "max_refs must be at most 1048576");
	return 0;
}

/* Places the per-stripe region: buckets, page table, waiters, arena. */
static void
layout_region(struct layout *l)
{
	uint64_t npages0 = l->region_size / l->page_size;

	l->nbuckets = pow2_ceil(npages0 * l->page_size / 512);
	if (l->nbuckets < 64)
		l->nbuckets = 64;
	l->bucket_rel = 0;
	l->ptab_rel = l->nbuckets * sizeof(uint64_t);
	l->wait_rel = ALIGN(l->ptab_rel + npages0 * sizeof(uint32_t), 64);
	l->arena_rel = ALIGN(l->wait_rel + l->wait_words * 8, 4096);
	l->npages = l->region_size > l->arena_rel ?
	    (l->region_size - l->arena_rel) / l->page_size : 0;
}

/* The whole layout follows from the options; the same options, the same. */
int
layout_compute(struct layout *l, const struct store_options *o, char *err,
    size_t errlen)
{
	memset(l, 0, sizeof(*l));
	if (layout_check(o, err, errlen) == -1)
		return -1;
	l->size = o->size;
	l->stripes = o->stripes;
	l->max_object = o->max_object;
	l->max_slots = o->max_slots;
	l->max_refs = o->max_refs != 0 ? o->max_refs : 1024;
	l->lease_timeout = o->lease_timeout != 0 ? o->lease_timeout : 10;
	l->page_size = ALIGN(ITEM_HDR + STORE_KEY_MAX + l->max_object, 4096);
	if (l->page_size < PAGE_MIN)
		l->page_size = PAGE_MIN;
	layout_classes(l);
	l->wait_words = (l->max_slots + 63) / 64;
	l->stripe_off = HDR_SIZE;
	l->stripe_size = sizeof(struct stripe);
	l->slot_off = ALIGN(l->stripe_off + l->stripes * l->stripe_size, 64);
	l->slot_size = ALIGN(sizeof(struct slot) + 8 * l->max_refs, 64);
	l->region_off = ALIGN(l->slot_off + l->max_slots * l->slot_size,
	    4096);
	if (l->region_off < l->size)
		l->region_size = (l->size - l->region_off) / l->stripes /
		    4096 * 4096;
	layout_region(l);
	if (l->npages < 2)
		return fail(err, errlen, "size %zu too small: each of %u "
		    "stripes needs 2 pages of %" PRIu64 " bytes plus %" PRIu64
		    " for its index", o->size, o->stripes, l->page_size,
		    l->arena_rel);
	return 0;
}

static int64_t
clock_real(void *arg)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return ts.tv_sec;
}

int64_t
store_now(const struct store *s)
{
	return s->clock(s->clock_arg);
}

static int
get_secret(uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = getrandom(buf, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writes a new header and empty stripes; the magic goes in last. */
static int
init_fresh(struct store *s, char *err, size_t errlen)
{
	struct header *h = s->h;
	unsigned i;

	if (get_secret(h->secret, SECRET_SIZE) == -1)
		return fail(err, errlen, "getrandom: %s", strerror(errno));
	memcpy(s->secret, h->secret, SECRET_SIZE);
	h->version = STORE_VERSION;
	h->l = s->l;
	h->clean = 0;
	h->sweep_pos = 0;
	memset(s->base + s->l.slot_off, 0, s->l.max_slots * s->l.slot_size);
	for (i = 0; i < s->l.stripes; i++)
		stripe_init(s, i);
	memset(s->wake, 0, s->l.wait_words * 8);
	s->wake_any = false;
	__atomic_store_n(&h->magic, STORE_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* Why the header at h does not fit layout l, or NULL if it does. */
static const char *
header_mismatch(const struct header *h, const struct layout *l)
{
	if (h->magic != STORE_MAGIC)
		return "not a store file (bad magic)";
	if (h->version != STORE_VERSION)
		return "layout version differs";
	if (h->l.size != l->size)
		return "size differs";
	if (memcmp(&h->l, l, sizeof(*l)) != 0)
		return "stripes, max_object, max_slots or max_refs differ";
	return NULL;
}

/* A stripe found by a restart: kept if it looks whole, else wiped. */
static bool
reuse_stripe(struct store *s, unsigned i)
{
	struct stripe *st = stripe_at(s, i);
	bool good = st->busy == 0 &&
	    (!s->h->clean || st->ptab_csum == ptab_checksum(s, i));

	/* Never trust a mutex from an earlier run: its owner may be gone. */
	stripe_mutex_init(st);
	memset(waiters_at(s, i), 0, s->l.wait_words * 8);
	if (good)
		do_stripe_rebuild(s, i, true);
	else
		do_stripe_wipe(s, i);
	return good;
}

/* Maps an existing file whose header matches; false (and why) if not. */
static bool
reuse_file(struct store *s)
{
	struct header h;
	struct stat sb;
	struct store_stats ss;
	const char *why;
	unsigned i, wiped = 0;
	void *p;

	if (fstat(s->fd, &sb) == -1)
		sb.st_size = 0;
	if (sb.st_size == 0) {
		snprintf(s->note, sizeof(s->note), "started empty: new file");
		return false;
	}
	if ((uint64_t)sb.st_size != s->l.size) {
		snprintf(s->note, sizeof(s->note), "started empty: file "
		    "size %jd, want %" PRIu64, (intmax_t)sb.st_size, s->l.size);
		return false;
	}
	why = "cannot read the header";
	if (pread(s->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    (why = header_mismatch(&h, &s->l)) != NULL) {
		snprintf(s->note, sizeof(s->note), "started empty: %s", why);
		return false;
	}
	p = mmap(NULL, s->l.size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (p == MAP_FAILED) {
		snprintf(s->note, sizeof(s->note), "started empty: mmap: %s",
		    strerror(errno));
		return false;
	}
	s->base = p;
	s->h = p;
	memcpy(s->secret, s->h->secret, SECRET_SIZE);
	memset(s->base + s->l.slot_off, 0, s->l.max_slots * s->l.slot_size);
	for (i = 0; i < s->l.stripes; i++)
		wiped += !reuse_stripe(s, i);
	memset(s->wake, 0, s->l.wait_words * 8);
	s->wake_any = false;
	s->h->clean = 0;
	store_stats(s, &ss);
	snprintf(s->note, sizeof(s->note), "kept %" PRIu64 " items; %u of "
	    "%" PRIu64 " stripes wiped", ss.items, wiped, s->l.stripes);
	return true;
}

static int
map_file(struct store *s, const struct store_options *o, char *err,
    size_t errlen)
{
	int r;
	void *p;

	s->fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->fd == -1)
		return fail(err, errlen, "%s: %s", o->path, strerror(errno));
	/* Two masters on one file would corrupt each other's locks. */
	if (flock(s->fd, LOCK_EX | LOCK_NB) == -1)
		return fail(err, errlen, "%s: in use by another process",
		    o->path);
	if (o->persist && reuse_file(s))
		return 0;
	if (ftruncate(s->fd, 0) == -1)
		return fail(err, errlen, "%s: %s", o->path, strerror(errno));
	/* Reserve every block now: a full disk fails here, not as SIGBUS. */
	if ((r = posix_fallocate(s->fd, 0, (off_t)s->l.size)) != 0)
		return fail(err, errlen, "%s: cannot reserve %" PRIu64
		    " bytes: %s", o->path, s->l.size, strerror(r));
	p = mmap(NULL, s->l.size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (p == MAP_FAILED)
		return fail(err, errlen, "mmap %s: %s", o->path,
		    strerror(errno));
	s->base = p;
	s->h = p;
	return init_fresh(s, err, errlen);
}

static int
map_anon(struct store *s, char *err, size_t errlen)
{
	void *p;

	p = mmap(NULL, s->l.size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return fail(err, errlen, "mmap %" PRIu64 " bytes: %s",
		    s->l.size, strerror(errno));
	s->base = p;
	s->h = p;
	return init_fresh(s, err, errlen);
}

/* One eventfd a slot, made before fork so every process has them all. */
static int
make_eventfds(struct store *s, char *err, size_t errlen)
{
	uint64_t i;

	for (i = 0; i < s->l.max_slots; i++)
		if ((s->efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
			return fail(err, errlen, "eventfd: %s",
			    strerror(errno));
	return 0;
}

struct store *
store_create(const struct store_options *o, char *err, size_t errlen)
{
	struct store *s;
	struct layout l;
	uint64_t i;
	int r;

	if (errlen > 0)
		err[0] = '\0';
	if (layout_compute(&l, o, err, errlen) == -1)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->fd = -1;
	s->l = l;
	s->slot = -1;
	s->creator = getpid();
	s->persist = o->persist && o->path != NULL;
	s->clock = clock_real;
	s->wake = calloc(l.wait_words, sizeof(uint64_t));
	s->efd = malloc(l.max_slots * sizeof(int));
	if (s->wake == NULL || s->efd == NULL) {
		store_destroy(s);
		return NULL;
	}
	for (i = 0; i < l.max_slots; i++)
		s->efd[i] = -1;
	r = o->path != NULL ? map_file(s, o, err, errlen) :
	    map_anon(s, err, errlen);
	if (r == -1 || make_eventfds(s, err, errlen) == -1) {
		s->persist = false;
		store_destroy(s);
		return NULL;
	}
	if (errlen > 0)
		snprintf(err, errlen, "%s", s->note);
	return s;
}

int
store_attach(struct store *s, unsigned slot)
{
	struct slot *sl;
	uint64_t k;

	if (slot >= s->l.max_slots || header_mismatch(s->h, &s->l) != NULL) {
		errno = EINVAL;
		return -1;
	}
	sl = slot_at(s, slot);
	for (k = 0; k < s->l.max_refs; k++)
		if (__atomic_load_n(&sl->rec[k], __ATOMIC_RELAXED) != 0) {
			store_reap_slot(s, slot);
			break;
		}
	s->slot = (int)slot;
	s->pid = getpid();
	s->rec_hint = 0;
	__atomic_store_n(&sl->pid, (int32_t)s->pid, __ATOMIC_RELAXED);
	return 0;
}

int
store_wake_fd(const struct store *s, unsigned slot)
{
	return slot < s->l.max_slots ? s->efd[slot] : -1;
}

const char *
store_note(const struct store *s)
{
	return s->note;
}

/* One record of a dead slot, under the lock of the stripe it points in. */
static void
do_reap_record(struct store *s, unsigned si, unsigned slot, uint32_t k,
    uint64_t v)
{
	struct item *it = item_at(s, si, REC_OFF(v));

	if (it != NULL && REC_KIND(v) == REC_LEASE) {
		if (it->lease_slot == slot && it->lease_rec == k)
			do_lease_end(s, si, it);
	} else if (it != NULL && (REC_KIND(v) == REC_PIN ||
	    REC_KIND(v) == REC_RESV)) {
		do_item_unpin(s, si, it);
	}
	rec_clear(s, slot, k, v);
}

void
store_reap_slot(struct store *s, unsigned slot)
{
	struct slot *sl;
	uint64_t v;
	uint32_t k;
	int si;

	if (slot >= s->l.max_slots)
		return;
	sl = slot_at(s, slot);
	for (k = 0; k < s->l.max_refs; k++) {
		v = __atomic_load_n(&sl->rec[k], __ATOMIC_ACQUIRE);
		if (v == 0)
			continue;
		if ((si = stripe_of_off(s, REC_OFF(v))) < 0) {
			rec_clear(s, slot, k, v);
			continue;
		}
		if (stripe_lock(s, (unsigned)si) == -1)
			continue;
		/* A recovery may have dropped it meanwhile. */
		if (__atomic_load_n(&sl->rec[k], __ATOMIC_ACQUIRE) == v)
			do_reap_record(s, (unsigned)si, slot, k, v);
		stripe_unlock(s, (unsigned)si);
	}
	__atomic_store_n(&sl->pid, 0, __ATOMIC_RELAXED);
}

static void
sum_stats(const char *base, const struct layout *l, struct store_stats *o)
{
	const struct stripe *st;
	const struct counters *c;
	uint64_t i;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < l->stripes; i++) {
		st = (const struct stripe *)(base + l->stripe_off +
		    i * l->stripe_size);
		c = &st->c;
#define STORE_X_SUM(f, kind, help) \
		o->f += __atomic_load_n(&c->f, __ATOMIC_RELAXED);
		STORE_COUNTERS(STORE_X_SUM)
#undef STORE_X_SUM
	}
	o->bytes_total = l->stripes * l->npages * l->page_size;
}

void
store_stats(const struct store *s, struct store_stats *out)
{
	sum_stats(s->base, &s->l, out);
}

/* Checks a mapped file's header against the layout its options imply. */
static int
check_file_header(const struct header *h, uint64_t fsize, char *err,
    size_t errlen)
{
	struct store_options o;
	struct layout l, hl;
	const char *why;

	if (h->magic != STORE_MAGIC)
		return fail(err, errlen, "not a store file (bad magic)");
	if (h->version != STORE_VERSION)
		return fail(err, errlen, "store version %" PRIu64 ", want %d",
		    h->version, STORE_VERSION);
	memcpy(&hl, &h->l, sizeof(hl));
	if (hl.size != fsize || hl.size > SIZE_MAX ||
	    hl.stripes > UINT32_MAX || hl.max_slots > UINT32_MAX ||
	    hl.max_refs > UINT32_MAX || hl.lease_timeout > UINT32_MAX)
		return fail(err, errlen, "header size fields are wrong");
	memset(&o, 0, sizeof(o));
	o.size = hl.size;
	o.stripes = (unsigned)hl.stripes;
	o.max_object = hl.max_object;
	o.max_slots = (unsigned)hl.max_slots;
	o.max_refs = (unsigned)hl.max_refs;
	o.lease_timeout = (unsigned)hl.lease_timeout;
	if (layout_compute(&l, &o, err, errlen) == -1)
		return -1;
	if ((why = header_mismatch(h, &l)) != NULL ||
	    memcmp(&hl, &l, sizeof(l)) != 0)
		return fail(err, errlen, "header does not match its layout");
	return 0;
}

int
store_stats_read_file(const char *path, struct store_stats *out,
    char *err, size_t errlen)
{
	struct header h;
	struct stat sb;
	void *p;
	int fd, r = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) == -1 || sb.st_size < HDR_SIZE ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		close(fd);
		return fail(err, errlen, "%s: not a store file", path);
	}
	if (check_file_header(&h, (uint64_t)sb.st_size, err, errlen) == 0) {
		p = mmap(NULL, h.l.size, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			fail(err, errlen, "mmap %s: %s", path,
			    strerror(errno));
		} else {
			sum_stats(p, &h.l, out);
			munmap(p, h.l.size);
			r = 0;
		}
	}
	close(fd);
	return r;
}

void
store_destroy(struct store *s)
{
	uint64_t i;

	if (s == NULL)
		return;
	if (s->base != NULL) {
		if (s->persist && s->creator == getpid()) {
			for (i = 0; i < s->l.stripes; i++)
				stripe_at(s, (unsigned)i)->ptab_csum =
				    ptab_checksum(s, (unsigned)i);
			s->h->clean = 1;
			msync(s->base, s->l.size, MS_SYNC);
		}
		munmap(s->base, s->l.size);
	}
	if (s->fd != -1)
		close(s->fd);
	for (i = 0; s->efd != NULL && i < s->l.max_slots; i++)
		if (s->efd[i] != -1)
			close(s->efd[i]);
	free(s->efd);
	free(s->wake);
	free(s);
}

void
store_set_clock(struct store *s, int64_t (*now)(void *), void *arg)
{
	s->clock = now != NULL ? now : clock_real;
	s->clock_arg = arg;
}

size_t
store_max_object(const struct store *s)
{
	return (size_t)s->l.max_object;
}

void
store_count_too_large(struct store *s, const void *key, size_t klen)
{
	unsigned si = klen > 0 && klen <= STORE_KEY_MAX ?
	    stripe_of_hash(s, key_hash(s, key, klen)) : 0;

	/* The only counter bumped without the lock. */
	__atomic_fetch_add(&stripe_at(s, si)->c.too_large, 1,
	    __ATOMIC_RELAXED);
}

#define KIND_NAME_COUNTER	"counter"
#define KIND_NAME_GAUGE		"gauge"
#define STORE_X_ROW(name, kind, help) \
	{ #name, KIND_NAME_##kind, help, offsetof(struct store_stats, name) },
const struct store_counter_info store_counter_table[] = {
	STORE_COUNTERS(STORE_X_ROW)
};
#undef STORE_X_ROW
const size_t store_counter_count = sizeof(store_counter_table) /
    sizeof(store_counter_table[0]);

#ifdef CORRAL_TEST_HOOKS
void
store_test_set_hash(struct store *s, uint64_t (*hash)(const void *, size_t))
{
	s->hashfn = hash;
}

void
store_test_set_hook(struct store *s, enum store_hook_point point,
    void (*hook)(void *), void *arg)
{
	s->hook[point] = hook;
	s->hook_arg[point] = arg;
}
#endif

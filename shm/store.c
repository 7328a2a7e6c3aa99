/*
 * The mapping itself: its layout, creation by the master, attaching a
 * forked child, reaping a dead child's slot, and the counters.  The
 * mapping is a sealed memfd, so nothing outside can shrink it under the
 * workers; a cache.path file only keeps a copy between runs and tells
 * corral -s where the live store is (persist.c).  Lock rules: see
 * stripe.c and pool.c.
 */
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/store_impl.h"
#include "shm/persist.h"

int
store_fail(char *err, size_t errlen, const char *fmt, ...)
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

/* A size as the config writes it: 64m, 1g, 4096. */
const char *
store_fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char unit[] = "kmgt";
	int u = -1;

	while (v >= 1024 && v % 1024 == 0 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "%" PRIu64 "%c", v, unit[u]);
	return buf;
}

/* Pages of a slab of chunk bytes: the length that wastes the least. */
static uint64_t
slab_pages_for(uint64_t chunk)
{
	uint64_t p, best = SLAB_BYTES_MIN / PAGE, lo = best;
	uint64_t waste, best_waste = UINT64_MAX;

	for (p = lo; p <= 2 * lo; p++) {
		waste = (p * PAGE % chunk) * 1000 / (p * PAGE);
		if (waste < best_waste) {
			best_waste = waste;
			best = p;
		}
	}
	return best;
}

/* Chunk sizes from CHUNK_MIN growing by 1.25 up to SLAB_MAX; then the
 * placeholders' class, and the big one, a run of pages per item. */
static void
layout_classes(struct layout *l)
{
	uint64_t c = CHUNK_MIN, n = 0;

	while (c < SLAB_MAX && n < MAX_CLASSES - 3) {
		l->chunk[n] = c;
		l->slab_pages[n++] = slab_pages_for(c);
		c = ALIGN(c + c / 4, 8);
	}
	l->chunk[n] = SLAB_MAX;
	l->slab_pages[n++] = slab_pages_for(SLAB_MAX);
	l->lease_class = n;
	l->chunk[n] = ALIGN(ITEM_HDR + STORE_KEY_MAX, 8);
	l->slab_pages[n] = slab_pages_for(l->chunk[n]);
	n++;
	l->big_class = n;
	l->nclasses = n + 1;
}

static int
layout_check(const struct store_options *o, char *err, size_t errlen)
{
	if (!pow2(o->stripes) || o->stripes > 65536)
		return store_fail(err, errlen, "stripes must be a power of two "
		    "up to 65536, not %u", o->stripes);
	if (o->max_object == 0 || o->max_object > (1U << 30))
		return store_fail(err, errlen,
		    "max_object must be 1 byte to 1 GiB");
	if (o->max_slots == 0 || o->max_slots > MAX_SLOTS)
		return store_fail(err, errlen, "max_slots must be 1 to %d",
		    MAX_SLOTS);
	if (o->max_refs > (1U << 20))
		return store_fail(err, errlen,
		    "max_refs must be at most 1048576");
	return 0;
}

/* The fewest pages that hold two of the largest item. */
static uint64_t
min_pages(uint64_t max_object)
{
	uint64_t n = 2 * big_pages(ITEM_HDR + STORE_KEY_MAX + max_object);

	return n > 64 ? n : 64;
}

/* Places everything after the slots: buckets, waiters, table, arena. */
static void
layout_tail(struct layout *l)
{
	uint64_t rest, npages;

	rest = l->size > l->bucket_off ? l->size - l->bucket_off : 0;
	/* One bucket for every KiB of memory: short chains for small
	 * values, little index for big ones. */
	l->stripe_buckets = pow2_ceil(rest / 1024 / l->stripes);
	if (l->stripe_buckets < 16)
		l->stripe_buckets = 16;
	l->nbuckets = l->stripe_buckets * l->stripes;
	l->waitbits_off = ALIGN(l->bucket_off + l->nbuckets * 8, 64);
	l->ptab_off = ALIGN(l->waitbits_off + l->stripes * l->wait_words * 8,
	    64);
	rest = l->size > l->ptab_off + PAGE ? l->size - l->ptab_off - PAGE :
	    0;
	npages = rest / (PAGE + 8);
	if (npages > PT_MAX_PAGES)
		npages = PT_MAX_PAGES;
	while (npages > 0 && ALIGN(l->ptab_off + npages * 8, PAGE) +
	    npages * PAGE > l->size)
		npages--;
	l->npages = npages;
	l->arena_off = ALIGN(l->ptab_off + npages * 8, PAGE);
}

static int
layout_place(struct layout *l, const struct store_options *o)
{
	memset(l, 0, sizeof(*l));
	l->size = o->size;
	l->stripes = o->stripes;
	l->max_object = o->max_object;
	l->max_slots = o->max_slots;
	l->max_refs = o->max_refs != 0 ? o->max_refs : 1024;
	l->lease_timeout = o->lease_timeout != 0 ? o->lease_timeout : 10;
	layout_classes(l);
	l->wait_words = (l->max_slots + 63) / 64;
	l->pool_off = HDR_SIZE;
	l->stripe_off = ALIGN(l->pool_off + sizeof(struct pool), 64);
	l->stripe_size = sizeof(struct stripe);
	l->slot_off = ALIGN(l->stripe_off + l->stripes * l->stripe_size, 64);
	l->slot_size = ALIGN(sizeof(struct slot) + 8 * l->max_refs, 64);
	l->bucket_off = ALIGN(l->slot_off + l->max_slots * l->slot_size, 64);
	layout_tail(l);
	return l->npages >= min_pages(l->max_object) ? 0 : -1;
}

/* The least size that works with the other options, for the message. */
static uint64_t
least_size(const struct store_options *o)
{
	struct store_options t = *o;
	struct layout l;
	uint64_t lo = o->size, hi = (uint64_t)1 << 40;

	while (lo + 1 < hi) {
		t.size = (size_t)(lo + (hi - lo) / 2);
		if (layout_place(&l, &t) == 0)
			hi = t.size;
		else
			lo = t.size;
	}
	/* Round up to what a config would say. */
	return ALIGN(hi, hi >= (1 << 20) ? (1 << 20) : (64 << 10));
}

/* The whole layout follows from the options; the same options, the same. */
int
layout_compute(struct layout *l, const struct store_options *o, char *err,
    size_t errlen)
{
	char a[32], b[32], c[32];

	memset(l, 0, sizeof(*l));
	if (layout_check(o, err, errlen) == -1)
		return -1;
	if (layout_place(l, o) == -1)
		return store_fail(err, errlen, "size %s is too small for "
		    "max_object %s with %u stripes and %u worker slots: "
		    "at least %s", store_fmt_size(a, sizeof(a), o->size),
		    store_fmt_size(b, sizeof(b), o->max_object), o->stripes,
		    o->max_slots, store_fmt_size(c, sizeof(c),
		    least_size(o)));
	return 0;
}

/*
 * What store_create() would refuse, checked without making anything:
 * corral -t and the start-up call this same function, so they agree.
 */
int
store_check(const struct store_options *o, char *err, size_t errlen)
{
	struct layout l;
	struct sysinfo si;
	char a[32], b[32];

	if (layout_compute(&l, o, err, errlen) == -1)
		return -1;
	if (sysinfo(&si) == 0 && (uint64_t)o->size >
	    ((uint64_t)si.totalram + si.totalswap) * si.mem_unit)
		return store_fail(err, errlen, "size %s is more than the "
		    "memory of this machine (%s)", store_fmt_size(a,
		    sizeof(a), o->size), store_fmt_size(b, sizeof(b),
		    ((uint64_t)si.totalram + si.totalswap) * si.mem_unit));
	if (o->path != NULL)
		return persist_check(o, err, errlen);
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

/* Writes a new header, an empty pool and stripes; the magic goes last. */
int
store_init_fresh(struct store *s, char *err, size_t errlen)
{
	struct header *h = s->h;
	unsigned i;

	memset(h, 0, sizeof(*h));
	if (get_secret(h->secret, SECRET_SIZE) == -1)
		return store_fail(err, errlen, "getrandom: %s",
		    strerror(errno));
	memcpy(s->secret, h->secret, SECRET_SIZE);
	h->version = STORE_VERSION;
	h->l = s->l;
	h->cas_next = 1;
	memset(s->base + s->l.slot_off, 0, s->l.max_slots * s->l.slot_size);
	for (i = 0; i < s->l.stripes; i++)
		stripe_init(s, i);
	memset(pool_at(s), 0, sizeof(struct pool));
	pool_init(s);
	memset(s->wake, 0, s->l.wait_words * 8);
	s->wake_any = false;
	__atomic_store_n(&h->magic, STORE_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* Why the header at h does not fit layout l, or NULL if it does. */
const char *
store_header_mismatch(const struct header *h, const struct layout *l)
{
	if (h->magic != STORE_MAGIC)
		return "not a store (bad magic)";
	if (h->version != STORE_VERSION)
		return "layout version differs";
	if (h->l.size != l->size)
		return "size differs";
	if (memcmp(&h->l, l, sizeof(*l)) != 0)
		return "stripes, max_object, max_slots or max_refs differ";
	return NULL;
}

/*
 * Takes a mapping that holds a store image (a persisted copy): fresh
 * locks, no slots, and every item checked again before it is kept.
 */
void
store_adopt_image(struct store *s, size_t *kept, size_t *dropped)
{
	struct store_stats ss;
	unsigned i;

	memcpy(s->secret, s->h->secret, SECRET_SIZE);
	memset(s->base + s->l.slot_off, 0, s->l.max_slots * s->l.slot_size);
	pool_mutex_init(pool_at(s));
	for (i = 0; i < s->l.stripes; i++) {
		stripe_mutex_init(stripe_at(s, i));
		memset(stripe_at(s, i)->waiters, 0,
		    sizeof(stripe_at(s, i)->waiters));
		memset(waitbits_at(s, i), 0, s->l.wait_words * 8);
	}
	*dropped = store_rebuild_all(s, true);
	store_stats(s, &ss);
	*kept = (size_t)ss.items;
	memset(s->wake, 0, s->l.wait_words * 8);
	s->wake_any = false;
}

/* The memory of the store: a memfd that cannot shrink or grow. */
static int
map_memfd(struct store *s, char *err, size_t errlen)
{
	void *p;

	s->memfd = memfd_create("corral-store", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING);
	if (s->memfd == -1)
		return store_fail(err, errlen, "memfd_create: %s",
		    strerror(errno));
	if (ftruncate(s->memfd, (off_t)s->l.size) == -1)
		return store_fail(err, errlen, "cannot size the store to "
		    "%" PRIu64 " bytes: %s", s->l.size, strerror(errno));
	/* Truncating it would make every process that uses it crash with
	 * SIGBUS: nobody may, not even us. */
	if (fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_SEAL) == -1)
		return store_fail(err, errlen, "sealing the store: %s",
		    strerror(errno));
	p = mmap(NULL, s->l.size, PROT_READ | PROT_WRITE, MAP_SHARED,
	    s->memfd, 0);
	if (p == MAP_FAILED)
		return store_fail(err, errlen, "mmap %" PRIu64 " bytes: %s",
		    s->l.size, strerror(errno));
	s->base = p;
	s->h = p;
	return 0;
}

/* One eventfd a slot, made before fork so every process has them all. */
static int
make_eventfds(struct store *s, char *err, size_t errlen)
{
	uint64_t i;

	for (i = 0; i < s->l.max_slots; i++)
		if ((s->efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
			return store_fail(err, errlen, "eventfd: %s",
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
	if (store_check(o, err, errlen) == -1 ||
	    layout_compute(&l, o, err, errlen) == -1)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->fd = -1;
	s->memfd = -1;
	s->l = l;
	chunk_div_init(s);
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
	r = map_memfd(s, err, errlen);
	if (r == 0)
		r = o->path != NULL ? persist_open(s, o, err, errlen) :
		    store_init_fresh(s, err, errlen);
	if (r == -1 || make_eventfds(s, err, errlen) == -1) {
		s->persist = false;
		s->creator = 0;		/* nothing to save */
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

	if (slot >= s->l.max_slots ||
	    store_header_mismatch(s->h, &s->l) != NULL) {
		errno = EINVAL;
		return -1;
	}
	/* The master alone keeps the file (and its lock). */
	if (s->fd != -1 && getpid() != s->creator) {
		close(s->fd);
		s->fd = -1;
	}
	sl = slot_at(s, slot);
	for (k = 0; k < s->l.max_refs; k++)
		if (__atomic_load_n(&sl->rec[k], __ATOMIC_RELAXED) != 0) {
			store_reap_slot(s, slot);
			break;
		}
	wake_slot_reset(s, slot);
	s->slot = (int)slot;
	s->pid = getpid();
	s->rec_hint = 0;
	s->sample = slot * 7919;
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
	struct item *it = item_at(s, REC_OFF(v));

	if (it != NULL && REC_KIND(v) == REC_LEASE) {
		if (it->lease_slot == slot && it->lease_rec == k)
			do_lease_end(s, si, it);
	} else if (it != NULL && (REC_KIND(v) == REC_PIN ||
	    REC_KIND(v) == REC_RESV)) {
		do_item_unpin(s, it);
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
	/* A death inside the pool lock is repaired first: its rebuild drops
	 * reservation records that never got their chunk. */
	if (pool_lock(s) == 0)
		pool_unlock(s);
	sl = slot_at(s, slot);
	for (k = 0; k < s->l.max_refs; k++) {
		v = __atomic_load_n(&sl->rec[k], __ATOMIC_ACQUIRE);
		if (v == 0)
			continue;
		if ((si = item_stripe_lock(s, REC_OFF(v))) < 0) {
			rec_clear(s, slot, k, v);
			continue;
		}
		/* A repair may have dropped it meanwhile. */
		if (__atomic_load_n(&sl->rec[k], __ATOMIC_ACQUIRE) == v)
			do_reap_record(s, (unsigned)si, slot, k, v);
		stripe_unlock(s, (unsigned)si);
	}
	__atomic_store_n(&sl->pid, 0, __ATOMIC_RELAXED);
}

/* Adds up the counters of a mapping (or its image) with layout l. */
void
store_sum_stats(const char *base, const struct layout *l,
    struct store_stats *o)
{
	const struct stripe *st;
	const struct counters *c;
	const struct pool *p = (const struct pool *)(base + l->pool_off);
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
	o->lock_recoveries += __atomic_load_n(&p->lock_recoveries,
	    __ATOMIC_RELAXED);
	o->corruptions += __atomic_load_n(&p->corruptions, __ATOMIC_RELAXED);
	o->bytes_total = l->npages * PAGE;
}

void
store_stats(const struct store *s, struct store_stats *out)
{
	store_sum_stats(s->base, &s->l, out);
}

void
store_destroy(struct store *s)
{
	uint64_t i;

	if (s == NULL)
		return;
	if (s->base != NULL) {
		if (s->fd != -1 && s->creator == getpid())
			persist_save(s);
		munmap(s->base, s->l.size);
	}
	if (s->fd != -1)
		close(s->fd);
	if (s->memfd != -1)
		close(s->memfd);
	for (i = 0; s->efd != NULL && i < s->l.max_slots; i++)
		if (s->efd[i] != -1)
			close(s->efd[i]);
	free(s->efd);
	free(s->wake);
	free(s->path);
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

	CNT_ATOMIC(stripe_at(s, si), too_large);
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

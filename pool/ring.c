/* ring.c - shared-memory regions, the batch ring's layout, futex wait/wake.
 *
 * The mechanics under the worker pool (pool.c) and the service
 * (service): mapping a region (a memfd for forked workers, or named
 * through shm_open with mode 0600 so other processes can attach; either way
 * every page reserved at creation), computing the ring's layout from three
 * numbers (slots, positions per slot, sample bytes) with overflow checks,
 * validating a header found in a mapping before trusting any offset in it,
 * pointers into a slot, sleeping/waking on a 32-bit word of shared memory
 * with the Linux futex call (no pthread objects live in the region, so a
 * process that dies holds no lock that others would inherit), and process
 * liveness by pid and start time; a service's batch mix recorded in the
 * header (sp__ring_mix: the spec, the class count of its soft targets).
 * The layout itself is documented in ring_internal.h.
 */
#include "pool/ring_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_num_classes() */
#include "seedpipe/targets.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <linux/memfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(sp__slot_hdr) == 64, "slot header is one cache line");
_Static_assert(sizeof(sp__worker_rec) == 64, "worker record is one cache line");
_Static_assert(offsetof(sp__ring_hdr, workers) == offsetof(sp__ring_hdr, released) + 64,
               "the consumer's words fill one cache line (pd_want sits in its padding)");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
               "atomics have plain sizes");

/* ---- regions --------------------------------------------------------------- */

int sp__region_name_check(const char *name, sp_error *err) {
    size_t n = strlen(name);
    if (n == 0 || n > 200)
        return sp_error_set(err, SP_EINVAL, "region name must be 1..200 characters");
    if (strspn(name, ".") == n)
        return sp_error_set(err, SP_EINVAL, "region name \"%s\": not only dots", name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return sp_error_set(err, SP_EINVAL,
                                "region name \"%s\": only letters, digits, '-', '_', '.'",
                                name);
    }
    return SP_OK;
}

static void mb_text(char *buf, size_t n, uint64_t bytes) {
    snprintf(buf, n, "%.1f MB", (double)bytes / 1e6);
}

/* The message for a reservation that failed with errno e: the sizes and
 * what to change (the pool's own ring: name NULL). */
static int reserve_error(int e, const char *name, size_t size, sp_error *err) {
    char need[32], avail[32], total[32];
    mb_text(need, sizeof need, size);
    if (!name)
        return sp_error_set(err, SP_ENOMEM,
                            "worker pool ring: cannot reserve %s of shared memory (%s); lower "
                            "--ring or the batch size, or raise the memory limit", need,
                            strerror(e));
    struct statvfs vfs;
    if ((e == ENOSPC || e == ENOMEM) && statvfs("/dev/shm", &vfs) == 0) {
        mb_text(avail, sizeof avail, (uint64_t)vfs.f_bavail * vfs.f_frsize);
        mb_text(total, sizeof total, (uint64_t)vfs.f_blocks * vfs.f_frsize);
        return sp_error_set(err, SP_ENOMEM,
                            "region %s: /dev/shm is too small: the region needs %s, /dev/shm "
                            "has %s free of %s; lower --ring or the batch size, or give "
                            "/dev/shm more room (docker run --shm-size=..., or mount -o "
                            "remount,size=... /dev/shm)", name, need, avail, total);
    }
    return sp_error_set(err, SP_EIO, "region %s: cannot reserve %s in /dev/shm: %s", name, need,
                        strerror(e));
}

/* Reserve every page of a region now (posix_fallocate), so that a region
 * its filesystem cannot hold fails here, before `ready`, with the sizes
 * and what to change, instead of as SIGBUS in a worker later: ftruncate on
 * tmpfs reserves nothing (Docker's /dev/shm is 64 MB by default). */
static int region_reserve(int fd, const char *name, size_t size, sp_error *err) {
    int e = posix_fallocate(fd, 0, (off_t)size);
    return e == 0 ? SP_OK : reserve_error(e, name, size, err);
}

int sp__region_create(sp__region *r, const char *name, size_t size, sp_error *err) {
    memset(r, 0, sizeof *r);
    if (size == 0) return sp_error_set(err, SP_EINVAL, "region: zero size");
    int fd, rc;
    if (!name || !name[0]) {
        /* The worker pool's own ring: a memfd, inherited by the forked
         * workers through the mapping (the creator keeps the descriptor,
         * close-on-exec, for sp__region_intact()). */
        name = NULL;
        fd = (int)syscall(SYS_memfd_create, "seedpipe-ring", MFD_CLOEXEC);
        if (fd < 0)
            return sp_error_set(err, SP_EIO, "worker pool ring: memfd_create: %s",
                                strerror(errno));
    } else {
        rc = sp__region_name_check(name, err);
        if (rc != 0) return rc;
        snprintf(r->name, sizeof r->name, "/%s", name);
        fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0) {
            int e = errno;
            r->name[0] = '\0';
            return sp_error_set(err, SP_EIO, "region %s: %s", name,
                                e == EEXIST ? "exists (a live service, or a stale one to clean up)"
                                            : strerror(e));
        }
    }
    const char *what = name ? name : "(worker pool ring)";
    rc = SP_OK;
    if (ftruncate(fd, (off_t)size) != 0)
        rc = sp_error_set(err, SP_EIO, "region %s: ftruncate: %s", what, strerror(errno));
    /* A named region is reserved now; the pool's own ring by the pool,
     * once its workers run (sp__region_reserve()). */
    if (rc == SP_OK && name) rc = region_reserve(fd, name, size, err);
    void *p = MAP_FAILED;
    if (rc == SP_OK) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = sp_error_set(err, SP_EIO, "region %s: mmap: %s", what, strerror(errno));
    }
    if (rc != SP_OK) {
        close(fd);
        if (name) shm_unlink(r->name);
        r->name[0] = '\0';
        r->fd = -1;
        return rc;
    }
    r->base = p;
    r->size = size;
    r->owner = 1;
    r->fd = fd;   /* kept (close-on-exec) for sp__region_intact() */
    return SP_OK;
}

#define RESERVE_STEP (8ull << 20)

int sp__region_reserve(const sp__region *r, sp_error *err) {
    if (!r->owner || r->fd < 0) return sp_error_set(err, SP_EINVAL, "region: not the creator");
    /* From the end backwards: the workers start at slot 0 and map (and so
     * allocate) its pages themselves meanwhile (sp__map_populate()). */
    for (uint64_t end = r->size; end > 0;) {
        uint64_t n = end < RESERVE_STEP ? end : RESERVE_STEP;
        int e = posix_fallocate(r->fd, (off_t)(end - n), (off_t)n);
        if (e != 0) return reserve_error(e, r->name[0] ? r->name + 1 : NULL, r->size, err);
        end -= n;
    }
    return SP_OK;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

int sp__map_populate(void *p, size_t n) {
    if (!p || n == 0) return -1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p & ~(page - 1), b = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    return madvise((void *)a, b - a, MADV_POPULATE_WRITE) == 0 ? 0 : -1;
}

void sp__ring_map_slot(const sp__ring_hdr *h, uint32_t s, uint32_t k, uint32_t n) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), size = h->slot_size;
    uint64_t share = n > 1 ? (size / n + page - 1) / page * page : size;
    uint64_t off = n > 1 ? (uint64_t)k * share : 0;
    if (off >= size) return;
    sp__map_populate((uint8_t *)sp__slot(h, s) + off, off + share <= size ? share : size - off);
}

int sp__region_intact(const sp__region *r) {
    struct stat st;
    if (!r->owner || r->fd < 0 || fstat(r->fd, &st) != 0) return 0;
    return st.st_size >= 0 && (uint64_t)st.st_size >= (uint64_t)r->size;
}

int sp__region_open(const char *path, int flags, struct stat *st, sp_error *err) {
    /* O_NONBLOCK: a FIFO planted under the name must not block the open
     * (shm_open passes the flag on to open(2)); then only a regular file,
     * which is what a POSIX shared-memory object is on Linux, is read. */
    int fd = shm_open(path, flags | O_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        sp_error_set(err, SP_EIO, "region %s: %s", path + 1,
                     e == ENOENT ? "no such region (is the service running?)" : strerror(e));
        errno = e;   /* callers tell "absent" apart */
        return SP_EIO;
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        sp_error_set(err, SP_EIO, "region %s: fstat: %s", path + 1, strerror(e));
        errno = e;
        return SP_EIO;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        sp_error_set(err, SP_EIO, "region %s: not a shared-memory object (%s, owned by uid %u): "
                     "refused", path + 1,
                     S_ISFIFO(st->st_mode)  ? "a FIFO"
                     : S_ISDIR(st->st_mode) ? "a directory"
                                            : "not a regular file",
                     (unsigned)st->st_uid);
        errno = EINVAL;   /* never ENOENT: the name is taken */
        return SP_EIO;
    }
    return fd;
}

int sp__region_attach(sp__region *r, const char *name, int readonly, struct stat *stp,
                      sp_error *err) {
    memset(r, 0, sizeof *r);
    int rc = sp__region_name_check(name, err);
    if (rc != 0) return rc;
    snprintf(r->name, sizeof r->name, "/%s", name);
    struct stat st;
    int fd = sp__region_open(r->name, readonly ? O_RDONLY : O_RDWR, &st, err);
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        return fd;
    }
    if (stp) *stp = st;
    if (st.st_size < (off_t)sizeof(sp__ring_hdr)) {
        close(fd);
        memset(r, 0, sizeof *r);
        return sp_error_set(err, SP_EFORMAT,
                            "region %s: truncated (%lld bytes, smaller than a header)", name,
                            (long long)st.st_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, readonly ? PROT_READ : PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        memset(r, 0, sizeof *r);
        return sp_error_set(err, SP_EIO, "region %s: mmap: %s", name, strerror(e));
    }
    r->base = p;
    r->size = (size_t)st.st_size;
    return SP_OK;
}

void sp__region_close(sp__region *r) {
    if (!r) return;
    if (r->base) munmap(r->base, r->size);
    if (r->owner && r->name[0]) shm_unlink(r->name);
    if (r->owner && r->fd >= 0) close(r->fd);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

/* ---- layout ---------------------------------------------------------------- */

static int add_ok(uint64_t *acc, uint64_t n) {
    if (*acc > UINT64_MAX - n) return 0;
    *acc += n;
    return 1;
}
static int mul_ok(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

/* Offsets of one slot's arrays, from (cap, nranks, sample_bytes); 0 on
 * overflow. off[7] is the rank table, off[8] the images. */
static int slot_layout(uint32_t cap, uint32_t nranks, uint64_t sample_bytes, uint32_t mix_k,
                       uint64_t off[10], uint64_t *size) {
    const uint64_t elem[8] = {8, 4, sizeof(sp__item), 8, 4, 8, 16, sizeof(sp__rank_slice)};
    uint64_t acc = sizeof(sp__slot_hdr);
    for (int i = 0; i < 8; i++) {
        uint64_t n;
        acc = align64(acc);
        off[i] = acc;
        if (!mul_ok(elem[i], i == 7 ? nranks : cap, &n) || !add_ok(&acc, n)) return 0;
    }
    uint64_t img, mix;
    if (acc > UINT64_MAX - 64) return 0;
    acc = align64(acc);
    off[8] = acc;
    if (!mul_ok(sample_bytes, cap, &img) || !add_ok(&acc, img) || acc > UINT64_MAX - 64)
        return 0;
    acc = align64(acc);
    off[9] = acc;   /* the soft targets of a batch mix (0 bytes without one) */
    if (!mul_ok((uint64_t)mix_k * 4, cap, &mix) || !add_ok(&acc, mix) || acc > UINT64_MAX - 64)
        return 0;
    *size = align64(acc);
    return 1;
}

int sp__ring_layout(sp__ring_hdr *h, sp_error *err) {
    if (h->nranks == 0) h->nranks = 1;
    if (h->nranks > SP__RING_MAX_RANKS || h->cap % h->nranks != 0)
        return sp_error_set(err, SP_EINVAL, "ring: %u ranks for %u positions per slot",
                            h->nranks, h->cap);
    if (h->nslots == 0 || h->nslots > SP__RING_MAX_SLOTS)
        return sp_error_set(err, SP_EINVAL, "ring: %u slots (1..%u)", h->nslots,
                            SP__RING_MAX_SLOTS);
    if (h->cap == 0 || h->cap > SP__RING_MAX_CAP)
        return sp_error_set(err, SP_EINVAL, "ring: %u positions per slot (1..%u)", h->cap,
                            SP__RING_MAX_CAP);
    if (h->sample_bytes == 0 || h->sample_bytes > (1ull << 34))
        return sp_error_set(err, SP_EINVAL, "ring: sample of %llu bytes",
                            (unsigned long long)h->sample_bytes);
    if (h->mix_classes > 65536)
        return sp_error_set(err, SP_EINVAL, "ring: %u classes of soft targets", h->mix_classes);
    uint64_t off[10], slot;
    if (!slot_layout(h->cap, h->nranks, h->sample_bytes, h->mix_classes, off, &slot))
        return sp_error_set(err, SP_ELIMIT, "ring: slot size overflows");
    uint64_t total;
    h->hdr_size = (uint32_t)align64(sizeof(sp__ring_hdr));
    h->slots_offset = h->hdr_size;
    if (!mul_ok(slot, h->nslots, &total) || !add_ok(&total, h->slots_offset) ||
        total > (1ull << 46))
        return sp_error_set(err, SP_ELIMIT, "ring: %u slots of %llu bytes is too large",
                            h->nslots, (unsigned long long)slot);
    h->slot_size = slot;
    h->off_state = off[0];
    h->off_crash = off[1];
    h->off_items = off[2];
    h->off_indices = off[3];
    h->off_labels = off[4];
    h->off_skipped = off[5];
    h->off_subst = off[6];
    h->off_ranks = off[7];
    h->off_images = off[8];
    h->off_mix = off[9];
    h->rank_cap = h->cap / h->nranks;
    h->region_size = total;
    return SP_OK;
}

/* A service's batch mix into the header copy hh (before its layout): the
 * spec and the class count; the samples must be what the mix mixes. */
int sp__ring_mix(const sp_loader *ld, const sp_batch_mix_spec *mix, sp__ring_hdr *hh,
                      sp_error *err) {
    if (!mix) return SP_OK;
    const sp_loader_config *lc = sp__loader_config_of(ld);
    if (lc->dtype != SP_DTYPE_FLOAT32 || lc->layout != SP_LAYOUT_NCHW ||
        (sp__loader_pipeline(ld) && sp_pipeline_targets(sp__loader_pipeline(ld), NULL)))
        return sp_error_set(err, SP_EINVAL, "service: a batch mix needs float32 NCHW images "
                            "without targets (the mix is torch's float32 arithmetic on "
                            "(B, C, H, W) batches, its targets the labels' one-hot rows)");
    if (mix->n < 1 || mix->n > SP_BATCH_MIX_MAX_OPS || mix->classes < 0 || mix->classes > 65536)
        return sp_error_set(err, SP_EINVAL, "service: batch mix of %d ops, %d classes", mix->n,
                            mix->classes);
    int k = mix->classes ? mix->classes : (int)sp__dataset_num_classes(sp__loader_dataset(ld));
    if (k < 1 || k > 65536)
        return sp_error_set(err, SP_EINVAL, "service: batch mix: the dataset has %d classes; "
                            "give classes=K (1..65536)", k);
    hh->mix_n = (uint32_t)mix->n;
    hh->mix_classes = (uint32_t)k;
    hh->mix_choice = (uint32_t)(mix->choice != 0);
    for (int i = 0; i < mix->n; i++) {
        hh->mix_op[i] = mix->op[i];
        hh->mix_alpha[i] = mix->alpha[i];
        hh->mix_p[i] = mix->p[i];
    }
    return SP_OK;
}

int sp__ring_validate(const sp__ring_hdr *h, size_t mapped, sp_error *err) {
    if (mapped < sizeof *h) return sp_error_set(err, SP_EFORMAT, "ring: region truncated");
    if (h->magic != SP__RING_MAGIC)
        return sp_error_set(err, SP_EFORMAT, "ring: not a seedpipe region (bad magic)");
    if (h->version != SP__RING_VERSION)
        return sp_error_set(err, SP_EFORMAT, "ring: layout version %u, this build reads %u",
                            h->version, SP__RING_VERSION);
    sp__ring_hdr c;
    memset(&c, 0, sizeof c);
    c.nslots = h->nslots;
    c.cap = h->cap;
    c.sample_bytes = h->sample_bytes;
    c.nranks = h->nranks;
    c.mix_classes = h->mix_classes;
    if (h->nranks == 0)
        return sp_error_set(err, SP_EFORMAT, "ring: hostile header: 0 ranks");
    sp_error le;
    sp_error_clear(&le);
    if (sp__ring_layout(&c, &le) != 0)
        return sp_error_set(err, SP_EFORMAT, "ring: hostile header: %s", le.msg + 6);
    if (c.hdr_size != h->hdr_size || c.slots_offset != h->slots_offset ||
        c.slot_size != h->slot_size || c.region_size != h->region_size ||
        c.off_state != h->off_state || c.off_crash != h->off_crash ||
        c.off_items != h->off_items || c.off_indices != h->off_indices ||
        c.off_labels != h->off_labels || c.off_skipped != h->off_skipped ||
        c.off_subst != h->off_subst || c.off_images != h->off_images ||
        c.off_ranks != h->off_ranks || c.off_mix != h->off_mix || c.rank_cap != h->rank_cap)
        return sp_error_set(err, SP_EFORMAT, "ring: header offsets disagree with its sizes");
    if (h->region_size > mapped)
        return sp_error_set(err, SP_EFORMAT, "ring: header says %llu bytes, region has %zu",
                            (unsigned long long)h->region_size, mapped);
    if (h->nworkers > SP__RING_MAX_WORKERS)
        return sp_error_set(err, SP_EFORMAT, "ring: %u workers", h->nworkers);
    return SP_OK;
}

#define SLOT_BASE(h, s) ((uint8_t *)(h) + (h)->slots_offset + (uint64_t)(s) * (h)->slot_size)
sp__slot_hdr *sp__slot(const sp__ring_hdr *h, uint32_t s) { return (sp__slot_hdr *)SLOT_BASE(h, s); }
_Atomic uint64_t *sp__slot_state(const sp__ring_hdr *h, uint32_t s) {
    return (_Atomic uint64_t *)(SLOT_BASE(h, s) + h->off_state);
}
_Atomic uint32_t *sp__slot_crash(const sp__ring_hdr *h, uint32_t s) {
    return (_Atomic uint32_t *)(SLOT_BASE(h, s) + h->off_crash);
}
sp__item *sp__slot_items(const sp__ring_hdr *h, uint32_t s) {
    return (sp__item *)(SLOT_BASE(h, s) + h->off_items);
}
uint64_t *sp__slot_indices(const sp__ring_hdr *h, uint32_t s) {
    return (uint64_t *)(SLOT_BASE(h, s) + h->off_indices);
}
int32_t *sp__slot_labels(const sp__ring_hdr *h, uint32_t s) {
    return (int32_t *)(SLOT_BASE(h, s) + h->off_labels);
}
uint64_t *sp__slot_skipped(const sp__ring_hdr *h, uint32_t s) {
    return (uint64_t *)(SLOT_BASE(h, s) + h->off_skipped);
}
uint64_t *sp__slot_subst(const sp__ring_hdr *h, uint32_t s) {
    return (uint64_t *)(SLOT_BASE(h, s) + h->off_subst);
}
uint8_t *sp__slot_images(const sp__ring_hdr *h, uint32_t s) { return SLOT_BASE(h, s) + h->off_images; }
sp__rank_slice *sp__slot_ranks(const sp__ring_hdr *h, uint32_t s) {
    return (sp__rank_slice *)(SLOT_BASE(h, s) + h->off_ranks);
}

/* ---- futex ----------------------------------------------------------------- */

int sp__futex_wait(_Atomic uint32_t *addr, uint32_t expected, uint64_t timeout_ns) {
    struct timespec ts, *tp = NULL;
    if (timeout_ns) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tp = &ts;
    }
    /* FUTEX_WAIT (not _PRIVATE): the word is in a shared mapping. */
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expected, tp, NULL, 0);
    return (r == -1 && errno == ETIMEDOUT) ? 1 : 0;
}

void sp__futex_wake(_Atomic uint32_t *addr, int n) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

uint64_t sp__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- processes ------------------------------------------------------------- */

uint64_t sp__proc_start(int pid) {
    if (pid <= 0) return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return 0;
    p += 2;
    if (*p == 'Z' || *p == 'X') return 0;   /* dead, not yet reaped */
    /* p is field 3 (state); the start time is field 22. */
    for (int f = 3; f < 22; f++) {
        p = strchr(p, ' ');
        if (!p) return 0;
        p++;
    }
    unsigned long long v = strtoull(p, NULL, 10);
    return v ? (uint64_t)v : 1;
}

int sp__proc_alive(int pid, uint64_t start) {
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 0;
    uint64_t s = sp__proc_start(pid);
    if (s == 0) return 0;
    return start == 0 || s == start;
}

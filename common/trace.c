/* trace.c - the trace recorder (trace.h, trace_internal.h): spans appended
 * by every process of a run to its own part file, merged into one Chrome
 * trace-event JSON file when the recording process stops.
 *
 * HOW IT WORKS
 *
 * sp_trace_start(path) creates the parts directory `path`.parts-PID and
 * this process's part, PID.bin, and sets the process-wide flag sp__trace_on
 * that every span's start tests (trace_internal.h). A part is a 4 KiB
 * header (magic, pid, process name, clock origin, dropped count) followed
 * by 48-byte records (sp__trace_rec). Records are written through a shared
 * mapping of one window of the file (65,536 records, 3 MiB): when the
 * window is full the file is extended and the next window mapped, so a
 * process holds 3 MiB of trace whatever the run's
 * length, and what it wrote is in the file (the page cache) the moment it
 * is stored: a worker SIGKILLed by sp__pool_destroy() loses nothing. A
 * record's kind is stored last; a record whose kind is 0 (never written, or
 * cut by a kill mid-record) ends the part.
 *
 * Full disks. A store into a shared mapping of a file whose blocks the
 * file system cannot provide is a SIGBUS, so no page is mapped before its
 * blocks are reserved (posix_fallocate of the header and of each window,
 * never a sparse ftruncate). sp_trace_start() reserves the header and the
 * first window of its own part: a disk without 3 MiB free is a named
 * error at start (ENOSPC and the parts directory). A window that cannot be
 * reserved later (or a worker's part) drops the process's spans from then
 * on, counted in its header with the errno; sp_trace_stop() writes the
 * trace of what was recorded and reports the truncation as a warning in
 * err->msg (its return still 0).
 *
 * Forks. pthread_atfork handlers hold the recorder's mutex across fork()
 * (so no child inherits a half-appended record) and, in every child, stop
 * recording and drop the parent's mapping without writing to it: a child
 * never writes into its parent's part. A pool worker then calls
 * sp__trace_child("worker 3"), which, when the parent was recording,
 * creates the child's own part in the same directory, with the same clock
 * origin. Any other child (a Python subprocess, a shell) records nothing.
 *
 * sp_trace_stop() in the process that started: stops recording, closes its
 * part, reads every part of the directory (each through a read-only
 * mapping), writes the JSON through an atomic publish (common.h) and
 * removes the parts and the directory. Timestamps are microseconds since
 * the origin (the CLOCK_MONOTONIC time of sp_trace_start()), which the
 * file's otherData also gives in nanoseconds, so another process reading
 * the same clock can place the trace in its own time.
 *
 * LIMITATIONS
 * - A worker still running when the stop reads the parts may add records
 *   after they were read: stop after the pool is destroyed.
 * - A run that dies before sp_trace_stop() leaves its parts directory
 *   behind (the CLI stops the trace at exit, also on errors).
 */
#include "common/json_write_internal.h"
#include "common/trace_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common/common_internal.h"

#define PART_MAGIC 0x3130525450535053ull   /* "SPSPTR01" little-endian */
#define HDR_BYTES 4096u
#define REC_PER_WIN 65536u

typedef struct sp__trace_rec {
    uint64_t ts, dur;       /* CLOCK_MONOTONIC ns */
    uint16_t kind, pad;     /* sp_trace_kind; 0: the end of the part */
    uint32_t tid;
    uint32_t epoch, pos;    /* UINT32_MAX: none */
    uint64_t batch, sample; /* UINT64_MAX: none */
} sp__trace_rec;
_Static_assert(sizeof(sp__trace_rec) == 48, "trace record is 48 bytes");

typedef struct part_hdr {
    uint64_t magic;
    int32_t pid;
    uint32_t rec_size;
    uint64_t origin;
    uint64_t dropped;
    char name[32];
    int32_t nospace;        /* the errno of a reservation that failed (spans dropped), or 0 */
} part_hdr;

#define WIN_BYTES ((size_t)REC_PER_WIN * sizeof(sp__trace_rec))

_Atomic int sp__trace_on = 0;

/* The process's recorder; every field under mu. */
static struct {
    int fd;                /* this process's part (-1: none) */
    part_hdr *hdr;         /* its mapped header */
    sp__trace_rec *win;    /* its mapped window */
    uint64_t win_index;    /* which one */
    uint64_t n;            /* records written */
    uint64_t origin;       /* the clock at sp_trace_start() */
    int owner;             /* pid that started (0: none); only it stops and merges */
    int inherited;         /* a child of a recording process (sp__trace_child may record) */
    char path[4096];       /* the trace file */
    char dir[4200];        /* the parts directory */
} T = {.fd = -1};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Thread-local, in the static TLS block (initial-exec: no lazy allocation
 * under the loader's lock, see trace_internal.h), touched only while
 * recording. */
#define SP__TLS __attribute__((tls_model("initial-exec")))
static _Thread_local SP__TLS uint32_t t_tid;
static _Thread_local SP__TLS struct {
    uint32_t epoch, pos;
    uint64_t batch, sample;
} t_ctx = {SP__TRACE_NONE32, SP__TRACE_NONE32, SP__TRACE_NONE64, SP__TRACE_NONE64};

static const char *const kind_names[SP_TRACE_KIND_END] = {
    "?",         "sample",     "read",        "decode",      "augment", "write",
    "wait work", "wait slot",  "cache read",  "cache write", "next",    "digest",
    "open",      "spawn",      "publish",     "step",        "user",    "batch",
    "ring",      "map"};

const char *sp__trace_kind_name(int kind) {
    return kind > 0 && kind < SP_TRACE_KIND_END ? kind_names[kind] : "?";
}

uint64_t sp__trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the part: open, window, close (under mu) ------------------------------ */

static void part_close_locked(void) {
    if (T.win) munmap(T.win, WIN_BYTES);
    if (T.hdr) munmap(T.hdr, HDR_BYTES);
    if (T.fd >= 0) close(T.fd);
    T.win = NULL;
    T.hdr = NULL;
    T.fd = -1;
    T.n = 0;
}

static int window_locked(uint64_t w);

/* The errno's name where a full disk is the likely reason. */
static const char *nospace_name(int e) {
    return e == ENOSPC ? " (ENOSPC)" : e == EDQUOT ? " (EDQUOT)" : e == EFBIG ? " (EFBIG)" : "";
}

/* Reserve [off, off + len) of fd (the blocks allocated, the file extended):
 * 0, or the errno. A mapping of reserved blocks never faults. */
static int reserve(int fd, off_t off, off_t len) {
    int e;
    do e = posix_fallocate(fd, off, len);
    while (e == EINTR);
    return e;
}

/* This process's part; a child's may exist already (its parent wrote
 * the header: sp__trace_spawned()), so only the first creates it. The
 * header and the first window are reserved before either is mapped; the
 * part of the process that starts the trace (`start`) fails without them,
 * a worker's keeps its header and drops its spans (nospace). */
static int part_open_locked(const char *name, int excl, int start, sp_error *err) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%d.bin", T.dir, (int)getpid());
    int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (excl ? O_EXCL : 0), 0600);
    if (fd < 0) return sp_error_set(err, SP_EIO, "trace: %s: %s", p, strerror(errno));
    void *h = MAP_FAILED;
    int e = reserve(fd, 0, HDR_BYTES);
    if (e == 0) {
        h = mmap(NULL, HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h == MAP_FAILED) e = errno;
    }
    if (h == MAP_FAILED) {
        close(fd);
        unlink(p);
        return sp_error_set(err, SP_EIO, "trace: %s: %s%s", p, strerror(e), nospace_name(e));
    }
    T.fd = fd;
    T.hdr = h;
    T.hdr->pid = (int32_t)getpid();
    T.hdr->rec_size = sizeof(sp__trace_rec);
    T.hdr->origin = T.origin;
    snprintf(T.hdr->name, sizeof T.hdr->name, "%s", name);
    T.hdr->magic = PART_MAGIC;
    T.win = NULL;
    T.n = 0;
    if (window_locked(0) != 0) {
        e = T.hdr->nospace;
        if (start) {
            part_close_locked();
            unlink(p);
            return sp_error_set(err, SP_EIO, "trace: %s: cannot reserve %zu bytes for the "
                                "trace's first window: %s%s", T.dir, (size_t)WIN_BYTES,
                                strerror(e), nospace_name(e));
        }
    }
    return SP_OK;
}

/* Map window w (its blocks reserved first: the file extended to its end).
 * A failure is kept in the header (nospace): the spans from then on drop. */
static int window_locked(uint64_t w) {
    if (T.win) munmap(T.win, WIN_BYTES);
    T.win = NULL;
    if (T.hdr->nospace) return -1;   /* the disk was full: do not try each span */
    off_t off = (off_t)HDR_BYTES + (off_t)w * (off_t)WIN_BYTES;
    int e = reserve(T.fd, off, (off_t)WIN_BYTES);
    if (e != 0) {
        T.hdr->nospace = e;
        return -1;
    }
    void *p = mmap(NULL, WIN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, T.fd, off);
    if (p == MAP_FAILED) {
        T.hdr->nospace = errno ? errno : ENOMEM;
        return -1;
    }
    T.win = p;
    T.win_index = w;
    return 0;
}

static void append(int kind, uint64_t t0, uint64_t t1, uint32_t epoch, uint64_t batch,
                   uint32_t pos, uint64_t sample) {
    if (!t_tid) t_tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&mu);
    if (T.fd < 0) {   /* stopped meanwhile */
        pthread_mutex_unlock(&mu);
        return;
    }
    uint64_t w = T.n / REC_PER_WIN;
    if (T.n >= SP_TRACE_MAX_EVENTS || ((!T.win || w != T.win_index) && window_locked(w) != 0)) {
        T.hdr->dropped++;
        pthread_mutex_unlock(&mu);
        return;
    }
    sp__trace_rec *r = &T.win[T.n % REC_PER_WIN];
    r->ts = t0;
    r->dur = t1 > t0 ? t1 - t0 : 0;
    r->tid = t_tid;
    r->epoch = epoch;
    r->pos = pos;
    r->batch = batch;
    r->sample = sample;
    atomic_signal_fence(memory_order_release);   /* the kind last: a cut record reads as the end */
    r->kind = (uint16_t)kind;
    T.n++;
    pthread_mutex_unlock(&mu);
}

void sp__trace_record(int kind, uint64_t t0, uint32_t epoch, uint64_t batch, uint32_t pos,
                      uint64_t sample) {
    if (!t0 || !atomic_load_explicit(&sp__trace_on, memory_order_relaxed)) return;
    append(kind, t0, sp__trace_now(), epoch, batch, pos, sample);
}

void sp__trace_emit(int kind, uint64_t t0) {
    sp__trace_record(kind, t0, t_ctx.epoch, t_ctx.batch, t_ctx.pos, t_ctx.sample);
}

void sp__trace_ctx_set(uint32_t epoch, uint64_t batch, uint32_t pos, uint64_t sample) {
    t_ctx.epoch = epoch;
    t_ctx.batch = batch;
    t_ctx.pos = pos;
    t_ctx.sample = sample;
}

void sp__trace_ctx_sample_set(uint64_t sample) { t_ctx.sample = sample; }

/* ---- fork ---------------------------------------------------------------------- */

static void atfork_prepare(void) { pthread_mutex_lock(&mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&mu); }
static void atfork_child(void) {
    /* The child is single-threaded and holds mu (prepare). The parent's
     * mappings are dropped unwritten; only a pool worker records again. */
    if (T.fd >= 0) {
        T.inherited = 1;
        atomic_store(&sp__trace_on, 0);
        part_close_locked();
    }
    T.owner = 0;
    pthread_mutex_unlock(&mu);
}
static void atfork_register(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

void sp__trace_child(const char *fmt, ...) {
    if (!T.inherited) return;
    char name[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&mu);
    t_tid = 0;   /* a new process: a new thread id */
    t_ctx.epoch = t_ctx.pos = SP__TRACE_NONE32;
    t_ctx.batch = t_ctx.sample = SP__TRACE_NONE64;
    T.inherited = 0;
    sp_error e;
    if (part_open_locked(name, 0, 0, &e) == 0) atomic_store(&sp__trace_on, 1);
    pthread_mutex_unlock(&mu);
}

void sp__trace_spawned(int pid, const char *fmt, ...) {
    if (!atomic_load_explicit(&sp__trace_on, memory_order_relaxed)) return;
    part_hdr h;
    memset(&h, 0, sizeof h);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h.name, sizeof h.name, fmt, ap);
    va_end(ap);
    h.pid = pid;
    h.rec_size = sizeof(sp__trace_rec);
    pthread_mutex_lock(&mu);
    h.origin = T.origin;
    h.magic = PART_MAGIC;
    char p[4300];
    snprintf(p, sizeof p, "%s/%d.bin", T.dir, pid);
    /* The child may have created it first: then it wrote this header. A
     * pwrite never truncates what the child has appended. */
    int fd = T.fd >= 0 ? open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    pthread_mutex_unlock(&mu);
    if (fd < 0) return;
    if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        /* nothing to do: the child's own header, or no track for it */
    }
    close(fd);
}

/* ---- start, stop ------------------------------------------------------------- */

int sp_trace_active(void) { return atomic_load(&sp__trace_on); }

uint64_t sp_trace_clock(void) { return sp__trace_t0(); }

void sp_trace_span(int kind, uint64_t t0, uint32_t epoch, uint64_t batch) {
    if (kind <= 0 || kind >= SP_TRACE_KIND_END) return;
    sp__trace_record(kind, t0, epoch, batch, SP__TRACE_NONE32, SP__TRACE_NONE64);
}

int sp_trace_start(const char *path, sp_error *err) {
    if (!path || !path[0]) return sp_error_set(err, SP_EINVAL, "trace: empty path");
    if (strlen(path) >= sizeof T.path)
        return sp_error_set(err, SP_EINVAL, "trace: path too long");
    pthread_once(&atfork_once, atfork_register);
    pthread_mutex_lock(&mu);
    if (T.fd >= 0 || T.owner) {
        pthread_mutex_unlock(&mu);
        return sp_error_set(err, SP_EINVAL, "trace: this process already records a trace (%s)",
                            T.path);
    }
    snprintf(T.path, sizeof T.path, "%s", path);
    snprintf(T.dir, sizeof T.dir, "%s.parts-%d", path, (int)getpid());
    if (mkdir(T.dir, 0700) != 0) {
        int e = errno;
        pthread_mutex_unlock(&mu);
        return sp_error_set(err, SP_EIO, "trace: %s: %s", T.dir, strerror(e));
    }
    T.origin = sp__trace_now();
    int rc = part_open_locked("consumer", 1, 1, err);
    if (rc != 0) {
        rmdir(T.dir);
    } else {
        T.owner = (int)getpid();
        T.inherited = 0;
        atomic_store(&sp__trace_on, 1);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* The event's text is put together by hand (a few hundred thousand
 * events at the end of a run: snprintf's parsing was most of the merge). */
static char *put_str(char *q, const char *s) {
    size_t n = strlen(s);
    memcpy(q, s, n);
    return q + n;
}

static char *put_u64(char *q, uint64_t v) {
    char d[20];
    int n = 0;
    do d[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n) *q++ = d[--n];
    return q;
}

/* Integer nanoseconds as microseconds with three decimals. */
static char *put_us(char *q, uint64_t ns) {
    q = put_u64(q, ns / 1000);
    unsigned f = (unsigned)(ns % 1000);
    q[0] = '.';
    q[1] = (char)('0' + f / 100);
    q[2] = (char)('0' + f / 10 % 10);
    q[3] = (char)('0' + f % 10);
    return q + 4;
}

/* A metadata event up to its argument's value:
 * {"name":NAME,"ph":"M","pid":PID,"tid":PID,"args":{"ARG": */
static void meta(sp__jw *w, const char *name, int pid, const char *arg) {
    *w = sp__jw_file(w->f);   /* a new value after the raw text between */
    sp__jw_obj(w);
    sp__jw_kstr(w, "name", name);
    sp__jw_kstr(w, "ph", "M");
    sp__jw_key(w, "pid");
    sp__jw_i64(w, pid);
    sp__jw_key(w, "tid");
    sp__jw_i64(w, pid);
    sp__jw_key(w, "args");
    sp__jw_obj(w);
    sp__jw_key(w, arg);
}

/* Write one part's metadata and events (its records up to the first
 * kind 0). @return the events written. */
static uint64_t merge_part(FILE *f, const uint8_t *p, size_t len, uint64_t origin, int *first,
                           uint64_t *dropped, int *nospace) {
    const part_hdr *h = (const part_hdr *)p;
    if (len < sizeof *h || h->magic != PART_MAGIC || h->rec_size != sizeof(sp__trace_rec))
        return 0;   /* a header only: a child killed before it recorded (written by its parent) */
    char name[33];
    memcpy(name, h->name, 32);
    name[32] = '\0';
    for (char *c = name; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
    int consumer = strcmp(name, "consumer") == 0;
    int sort = consumer ? 0 : 1 + (strncmp(name, "worker ", 7) == 0 ? atoi(name + 7) : 1000);
    sp__jw w = sp__jw_file(f);
    sp__jw_raw(&w, *first ? "\n" : ",\n");
    meta(&w, "process_name", h->pid, "name");
    sp__jw_str(&w, name);
    sp__jw_raw(&w, "}},\n");
    meta(&w, "process_sort_index", h->pid, "sort_index");
    sp__jw_i64(&w, sort);
    sp__jw_raw(&w, "}}");
    *first = 0;
    *dropped += h->dropped;
    if (h->nospace && !*nospace) *nospace = h->nospace;
    const sp__trace_rec *r = (const sp__trace_rec *)(p + HDR_BYTES);
    size_t n = len > HDR_BYTES ? (len - HDR_BYTES) / sizeof *r : 0;
    uint64_t k = 0;
    for (; k < n && r[k].kind; k++) {
        const sp__trace_rec *e = &r[k];
        uint64_t ts = e->ts > origin ? e->ts - origin : 0;
        int kind = e->kind < SP_TRACE_KIND_END ? e->kind : 0;
        int wait = kind == SP_TRACE_WAIT_WORK || kind == SP_TRACE_WAIT_SLOT ||
                   kind == SP_TRACE_NEXT;
        char line[400], *q = line;
        q = put_str(q, ",\n{\"name\":\"");
        q = put_str(q, kind_names[kind]);
        q = put_str(q, wait ? "\",\"cat\":\"wait\",\"ph\":\"X\",\"ts\":"
                            : "\",\"cat\":\"work\",\"ph\":\"X\",\"ts\":");
        q = put_us(q, ts);
        q = put_str(q, ",\"dur\":");
        q = put_us(q, e->dur);
        q = put_str(q, ",\"pid\":");
        q = put_u64(q, (uint64_t)(uint32_t)h->pid);
        q = put_str(q, ",\"tid\":");
        q = put_u64(q, e->tid);
        q = put_str(q, ",\"args\":{");
        const char *sep = "";
        if (e->epoch != SP__TRACE_NONE32) {
            q = put_u64(put_str(q, "\"epoch\":"), e->epoch);
            sep = ",";
        }
        if (e->batch != SP__TRACE_NONE64) {
            q = put_u64(put_str(put_str(q, sep), "\"batch\":"), e->batch);
            sep = ",";
        }
        if (e->pos != SP__TRACE_NONE32) {
            q = put_u64(put_str(put_str(q, sep), "\"pos\":"), e->pos);
            sep = ",";
        }
        if (e->sample != SP__TRACE_NONE64)
            q = put_u64(put_str(put_str(q, sep), "\"sample\":"), e->sample);
        q = put_str(q, "}}");
        fwrite(line, 1, (size_t)(q - line), f);
    }
    return k;
}

/* Merge every part of T.dir into f, removing them; *nospace: the first
 * errno of a part that could not grow (its spans dropped), or 0. */
static int merge_parts(FILE *f, uint64_t *dropped_out, int *nospace, sp_error *err) {
    DIR *d = opendir(T.dir);
    if (!d) return sp_error_set(err, SP_EIO, "trace: %s: %s", T.dir, strerror(errno));
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    int first = 1, rc = SP_OK;
    uint64_t dropped = 0, events = 0, parts = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl < 5 || strcmp(de->d_name + nl - 4, ".bin") != 0) continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size >= (off_t)sizeof(part_hdr)) {
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                events += merge_part(f, p, (size_t)st.st_size, T.origin, &first, &dropped,
                                     nospace);
                parts++;
                munmap(p, (size_t)st.st_size);
            } else if (rc == SP_OK) {
                rc = sp_error_set(err, SP_EIO, "trace: %s/%s: %s", T.dir, de->d_name,
                                  strerror(errno));
            }
        }
        if (fd >= 0) close(fd);
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    sp__jw w = sp__jw_file(f);
    sp__jw_raw(&w, "\n],\"otherData\":{");
    sp__jw_inside(&w);
    sp__jw_kstr(&w, "producer", sp_version_string());
    sp__jw_ku64(&w, "origin_monotonic_ns", T.origin);
    sp__jw_ku64(&w, "processes", parts);
    sp__jw_ku64(&w, "events", events);
    sp__jw_ku64(&w, "dropped", dropped);
    sp__jw_raw(&w, "}}\n");
    *dropped_out = dropped;
    return rc;
}

int sp_trace_stop(sp_error *err) {
    pthread_mutex_lock(&mu);
    if (T.owner != (int)getpid()) {   /* not recording, or a worker: close its part */
        atomic_store(&sp__trace_on, 0);
        part_close_locked();
        pthread_mutex_unlock(&mu);
        return SP_OK;
    }
    atomic_store(&sp__trace_on, 0);
    part_close_locked();
    T.owner = 0;
    pthread_mutex_unlock(&mu);
    sp_publish *pub = NULL;
    int rc = sp__publish_begin(T.path, &pub, err);
    FILE *f = NULL;
    if (rc == 0) {
        int fd = dup(sp__publish_fd(pub));
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f) setvbuf(f, NULL, _IOFBF, 1 << 20);
        if (!f) {
            if (fd >= 0) close(fd);
            rc = sp_error_set(err, SP_EIO, "trace: %s: %s", T.path, strerror(errno));
        }
    }
    uint64_t dropped = 0;
    int nospace = 0;
    if (rc == 0) {
        rc = merge_parts(f, &dropped, &nospace, err);
        if (fclose(f) != 0 && rc == 0)
            rc = sp_error_set(err, SP_EIO, "trace: %s: write failed: %s", T.path,
                              strerror(errno));
    } else {   /* still remove the parts */
        DIR *d = opendir(T.dir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (de->d_name[0] != '.') unlinkat(dirfd(d), de->d_name, 0);
        if (d) closedir(d);
    }
    rmdir(T.dir);
    if (rc == 0) rc = sp__publish_commit(pub, 0, err);
    else sp__publish_abort(pub);
    if (rc == 0 && nospace && err) {   /* written, but truncated: a warning, rc stays 0 */
        sp_error_set(err, SP_EIO, "trace %s: truncated: %llu spans dropped, a part could not "
                     "grow in %s: %s%s", T.path, (unsigned long long)dropped, T.dir,
                     strerror(nospace), nospace_name(nospace));
        err->code = SP_OK;
    }
    return rc;
}

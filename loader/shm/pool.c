/* pool.c - the worker pool (include/seedpipe/pool.h): forked workers filling a
 * shared-memory ring of batch slots, a consumer taking them in order, and
 * recovery from dead workers.
 *
 * HOW IT WORKS
 *
 * The stream is numbered: batch q = 0, 1, ..., total-1 is batch
 * (start + q) mod nb of epoch (start + q) / nb, where start = epoch * nb +
 * batch of the resume state. Slot q mod R holds batch q. The work unit is
 * one position p of one batch: item t = q * cap + p (cap = B / world, the
 * loader's slice; the service's span of m ranks: m * B / world).
 *
 * Claiming. A shared counter `hint` hands out items: a worker takes
 * t = fetch_add(hint, 1). The counter only distributes work; ownership is
 * decided by a compare-and-swap on the position's 64-bit state word, which
 * names the batch (ring_internal.h): FREE(q) -> CLAIMED(q, w) -> DONE(q).
 * A worker whose item is in a batch that has no slot yet (q >= released +
 * R: the ring is full) sleeps on the futex `wake` until the consumer
 * releases a slot: backpressure. Items p >= count(q) (a short last batch)
 * are skipped. Because the state word carries q, a CAS can only succeed on
 * the batch the worker computed its parameters for: a slow worker can
 * never write into a later batch that reuses the slot. Every parameter of
 * a position (epoch, epoch position, sample index) is recomputed by the
 * worker from q and p alone, never read from the slot, so a half-written
 * slot left by a dead worker misleads nobody.
 *
 * Writing. The worker runs sp__loader_sample() (the loader's own
 * per-position step, on-error policy included) with the destination being
 * the position's place in the slot's image array, fills the slot's
 * indices/labels/item outcome, then stores DONE(q) with release order. It
 * then bumps the slot's `done` counter, tagged with q ((q << 24) | n) and
 * updated by CAS so a late bump can't leak into the slot's next batch; the
 * worker that makes it reach count stamps ready_ns, bumps the region's
 * consumer word `cwake` and, if the consumer sleeps there (`csleep`),
 * wakes it.
 *
 * Taking. sp_pool_next(q) waits until the `done` counter says count, or,
 * when woken by its 10 ms timeout, until a scan of the state words finds
 * every position DONE(q) (the scan is the ground truth: a worker killed
 * between its DONE store and its counter bump leaves the counter short
 * forever). It then assembles the batch in place with sp__batch_finalize()
 * (the loader's: first FAILED position's error, skipped positions compacted
 * out, substitutes listed) and returns a view into the slot. The consumer
 * releases batches in order; releasing batch r initialises slot r mod R for
 * batch r + R (states FREE(r + R), counters) and only then publishes
 * released = r + 1 (release order), so a worker that sees the new value
 * sees an initialised slot.
 *
 * Recovery. On every timeout (and while waiting) the consumer polls its
 * workers with waitpid(pid, WNOHANG). When worker w is gone (reaped, so it
 * can no longer write), the consumer walks the live slots and turns every
 * CLAIMED(q, w) back into FREE(q), counting a crash against the position
 * (the sample bytes it may have half-written are simply overwritten by the
 * redo). It bumps scan_gen, forks a replacement with the same id w and
 * wakes everyone. Items are also orphaned when a worker dies between its
 * fetch_add and its CAS (FREE, but the counter has passed them); so every
 * worker, after seeing scan_gen change, and, once any death has happened,
 * whenever `released` moves (a slot becomes live), scans the live slots and
 * claims any FREE position by the same CAS. Nothing is lost (every FREE
 * position in a live slot is eventually claimed by a scan or the counter),
 * nothing is duplicated (one CAS wins FREE -> CLAIMED, and only DONE
 * positions enter a batch), and the bytes are those of any other run,
 * since they depend on (q, p) only. A position that two workers died on
 * is not tried a third time: it fails with "worker died ... while
 * computing it", deterministically for a deterministic crash, and
 * cfg.on_error applies.
 *
 * Cache (pool.h, cache.h). With a cache directory each slot has a record in
 * a second shared mapping (slot_cache, below): a mode, set by the consumer
 * when it activates the slot from its epoch's lookup (READ: the entry's
 * key and the manifest line of the batch; FILL: the staging directory;
 * NONE), and a state the workers report through. READ: only position 0 is
 * claimed; its holder reads the batch file into the slot, marks every
 * position DONE (position 0 last, so a death before that leaves position
 * 0 CLAIMED, to be freed and redone like any other) and adds count to the
 * completion counter. If the file is unusable it records why (FALLBACK),
 * turns the slot into NONE and bumps scan_gen: the other workers' orphan
 * scans then claim positions 1.. as usual. FILL: a worker about to make
 * the completion counter reach count (every other position is DONE) first
 * wins the record (EMPTY -> BUSY by CAS), encodes and writes the file, and
 * records the result (OK with its manifest line, FAILED, or CONSUMER when
 * the batch has failed samples), then bumps. If a bump was lost (a worker
 * died between DONE and its bump) nobody writes: the consumer, finding the
 * batch complete by its scan, takes the record (EMPTY -> CONSUMER) and
 * writes the batch itself; the CAS decides between it and a late last
 * worker. The consumer never takes a FILL batch whose record is BUSY;
 * check_workers() turns the BUSY record of a dead worker into CONSUMER
 * (marked partial): the batch is in the slot, so the consumer removes the
 * half-written file and writes the batch itself. A write that fails
 * (FAILED: full disk) spoils the entry: the epoch goes on uncached, and
 * the staging directory is removed once the epoch's last batch is taken
 * (no worker can be writing into it then).
 *
 * The service (service.c) is a consumer too: it takes batches with
 * sp__pool_poll() (the same take, without the wait and without the
 * finalising, which it does per rank slice), from a pool whose region is
 * named and carries a per-slot rank table (sp__pool_create_ex()), and it
 * sleeps on the same `cwake` word, which its clients also bump. Its loader
 * computes only the positions of the ranks it serves: one rank of a
 * smaller world when they line up (ranks 2-3 of world 4 are rank 1 of
 * world 2), else a span of consecutive ranks (sp__loader_set_span()).
 *
 * Sync primitive. Futexes on 32-bit words of the shared mapping plus C11
 * atomics: no process-shared mutex, so a worker killed at any instruction
 * holds no lock. A hand-off costs one FUTEX_WAKE from the last worker and
 * one wake-up of the consumer (bench/pool_scaling.sh measures p50/p99).
 *
 * LIMITATIONS
 * - Workers are forked from the consumer: they share its loader (dataset
 *   index, parsed pipeline) copy-on-write; a consumer with other threads
 *   must not hold locks the workers need (seedpipe's loader holds none
 *   between calls).
 * - A crash that only happens when a worker computes two particular
 *   samples in a row is charged to the second.
 * - The per-worker rng mode counter restarts at 0 in a respawned worker
 *   (as PyTorch's would); that mode is a demonstration only.
 */
#include "seedpipe/pool.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader/cache/cache_internal.h"
#include "loader/loader_internal.h"
#include "loader/shm/ring_internal.h"

#define CONSUMER_TIMEOUT_NS 10000000ull   /* liveness poll while waiting */
#define WORKER_TIMEOUT_NS 100000000ull    /* safety net for lost wake-ups */
#define SPIN_NS 20000ull                  /* consumer spin before sleeping */
#define DONE_SHIFT 24

/* Wake the consumer (sleeping on cwake) if it sleeps: a bump, and a
 * FUTEX_WAKE only when csleep says someone waits (seq_cst on both sides:
 * either the sleeper sees the bump or the waker sees csleep). */
static void consumer_wake(sp__ring_hdr *h) {
    atomic_fetch_add(&h->cwake, 1);
    if (atomic_load(&h->csleep)) sp__futex_wake(&h->cwake, 1);
}

/* ---- the cache's shared records ---------------------------------------------- */

/* Slot cache modes, decided per epoch by the consumer when a batch is
 * activated; READ turns into NONE when the worker can't use the file. */
enum { CM_NONE = 0, CM_READ = 1, CM_FILL = 2 };
/* Record states: BUSY carries the worker id in bits 8..15. */
enum { CR_EMPTY = 0, CR_BUSY = 1, CR_OK = 2, CR_FAILED = 3, CR_CONSUMER = 4, CR_FALLBACK = 5 };

typedef struct slot_cache {
    _Atomic uint32_t mode;       /* CM_* */
    _Atomic uint32_t state;      /* CR_* | worker << 8 */
    int32_t code, enoent;        /* FAILED / FALLBACK: the problem (code 0: none to report) */
    int32_t filter;              /* FILL: the writer's image filter */
    int32_t partial;             /* FILL: its writer died: a partial file may be there */
    sp_digest key;               /* the entry key */
    sp__cm_batch line;           /* READ: the manifest's line; FILL: the file written */
    char name[128];              /* READ: the entry key; FILL: the staging dir under .tmp */
    char msg[SP_ERROR_MSG_MAX];
} slot_cache;

/* The consumer's per-epoch cache state, oldest epoch first. */
typedef struct epoch_cache {
    uint32_t epoch, mode;
    sp_cache_reader *rd;
    sp_cache_writer *wr;
} epoch_cache;

struct sp_pool {
    sp_loader *ld;
    sp__region region;
    sp__ring_hdr *h;
    int nworkers;
    uint32_t R, cap;
    uint64_t total, start_abs, nb;
    uint64_t taken, released;          /* consumer's counters */
    pid_t pids[SP_POOL_MAX_WORKERS];
    pid_t parent;
    uint64_t deaths, redone, respawn_limit;
    uint64_t last_ready_ns, last_taken_ns;
    uint64_t last_check_ns;            /* last liveness poll */
    uint64_t crash_sample;             /* test hook, UINT64_MAX: none */
    uint64_t crash_cache_write;        /* test hook, UINT64_MAX: none */
    int sticky;                        /* a stream error: returned again */
    sp_error sticky_err;
    /* The epoch cache (NULL: none); see CACHE below. */
    sp_cache *cache;
    slot_cache *sc;                    /* R records, shared with the workers */
    uint32_t *smode;                   /* per slot: the mode it was activated with */
    epoch_cache *ec;                   /* FIFO of the epochs in the ring */
    uint32_t ec_cap, ec_head, ec_n;
    int warned_unsupp;
};

/* ---- the stream's geometry (pure functions of q) -------------------------- */

typedef struct batch_geo {
    uint32_t epoch, count;
    uint64_t index, pos0;
} batch_geo;

static batch_geo geo_of(const sp_pool *pool, uint64_t q) {
    batch_geo g;
    uint64_t abs = pool->start_abs + q;
    g.epoch = (uint32_t)(abs / pool->nb);
    g.index = abs % pool->nb;
    sp__loader_slice(pool->ld, g.index, &g.pos0, &g.count);
    return g;
}

/* ---- workers ------------------------------------------------------------------ */

typedef struct worker_ctx {
    sp_pool *pool;
    uint32_t w;
    sp_key key;             /* K_worker(w): per-worker rng mode, never otherwise */
    uint32_t counter;       /* per-worker mode: samples this process computed */
    uint32_t seen_scan;
    uint64_t seen_released;
    sp__cb_io io;           /* cache reads and writes */
} worker_ctx;

static void wake_workers_h(sp__ring_hdr *h) {
    atomic_fetch_add(&h->wake, 1);
    sp__futex_wake(&h->wake, 1 << 30);
}

/* The slot's arrays as a batch of `count` (capacity cap). */
static sp_batch slot_view(const sp_pool *pool, uint32_t s, const batch_geo *g) {
    sp__ring_hdr *h = pool->h;
    sp_batch b;
    memset(&b, 0, sizeof b);
    b.capacity = pool->cap;
    b.count = g->count;
    b.epoch = g->epoch;
    b.index = g->index;
    b.images = sp__slot_images(h, s);
    b.labels = sp__slot_labels(h, s);
    b.indices = sp__slot_indices(h, s);
    b.skipped = sp__slot_skipped(h, s);
    b.substituted = sp__slot_subst(h, s);
    b.flags = SP_BATCH_VIEW;
    return b;
}

/* Add n to batch q's tagged completion counter; the one that completes the
 * batch stamps it and wakes the consumer. */
static void done_add(sp_pool *pool, uint64_t q, uint32_t s, uint32_t n, uint32_t count) {
    sp__ring_hdr *h = pool->h;
    sp__slot_hdr *sh = sp__slot(h, s);
    uint64_t v = atomic_load(&sh->done);
    for (;;) {
        if ((v >> DONE_SHIFT) != (q & ((1ull << 40) - 1))) return;   /* stale */
        if (atomic_compare_exchange_weak(&sh->done, &v, v + n)) break;
    }
    if ((uint32_t)((v + n) & ((1u << DONE_SHIFT) - 1)) == count) {
        atomic_store(&sh->ready_ns, sp__now_ns());
        consumer_wake(h);
    }
}

/* CM_READ: the holder of position 0 reads the whole batch file into the
 * slot. @return 1 (every position is DONE) or 0: compute instead (the slot
 * is CM_NONE now and the other workers are told to scan for its positions). */
static int cache_read_slot(worker_ctx *wc, uint64_t q, uint32_t s, const batch_geo *g,
                           uint32_t crash) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    slot_cache *sc = &pool->sc[s];
    atomic_store(&sc->state, CR_BUSY | (wc->w << 8));
    sp_error e;
    sp_error_clear(&e);
    int enoent = 0, rc = -1;
    sp_batch v = slot_view(pool, s, g);
    if (crash & 0xff) {   /* a worker died reading it: no second try */
        e.code = 0;
    } else {
        char dir[PATH_CAP + 160], name[32];
        snprintf(dir, sizeof dir, "%s/%s", sp_cache_dir(pool->cache), sc->name);
        snprintf(name, sizeof name, "b%08" PRIu64, g->index);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            enoent = errno == ENOENT;
            rc = sp_error_set(&e, SP_EFORMAT, "%s: %s", dir, strerror(errno));
        } else {
            sp__cb_header hd;
            rc = sp__cb_read(dfd, dir, name, sc->key, g->epoch, g->index, h->sample_bytes,
                             pool->cap, &sc->line, &wc->io, &v, &hd, &enoent, &e);
            close(dfd);
            if (rc == 0 && (v.count != g->count || hd.nskipped || hd.nsubstituted ||
                            hd.nfailures)) {
                rc = -1;   /* sound, but its failure log lines are the consumer's to write */
                e.code = 0;
            }
        }
    }
    if (rc != 0) {
        sc->code = e.code;
        sc->enoent = enoent;
        memcpy(sc->msg, e.msg, sizeof sc->msg);
        atomic_store(&sc->state, CR_FALLBACK);
        atomic_store(&sc->mode, CM_NONE);
        atomic_fetch_add(&h->scan_gen, 1);   /* the others claim positions 1.. by a scan */
        wake_workers_h(h);
        return 0;
    }
    sp__item *it = sp__slot_items(h, s);
    _Atomic uint64_t *st = sp__slot_state(h, s);
    for (uint32_t p = 0; p < g->count; p++) {
        it[p].status = SP__ITEM_OK;
        it[p].code = 0;
        it[p].failed = 0;
        it[p].msg[0] = '\0';
    }
    atomic_store(&sc->state, CR_OK);
    /* Position 0 (ours, CLAIMED) last: if we die before it, the consumer
     * frees it and another worker redoes the whole read. */
    for (uint32_t p = g->count; p-- > 0;)
        atomic_store_explicit(&st[p], sp__st(q, SP__ST_DONE, wc->w), memory_order_release);
    atomic_fetch_add_explicit(&h->workers[wc->w].samples, g->count, memory_order_relaxed);
    done_add(pool, q, s, g->count, g->count);
    return 1;
}

/* CM_FILL: the worker completing a batch writes its file into the entry's
 * staging directory, unless the consumer took the job (a lost counter bump)
 * or the batch has failed samples (then the consumer writes it: the failure
 * log is its). */
static void cache_write_slot(worker_ctx *wc, uint32_t s, const batch_geo *g) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    slot_cache *sc = &pool->sc[s];
    uint32_t expect = CR_EMPTY;
    if (!atomic_compare_exchange_strong(&sc->state, &expect, CR_BUSY | (wc->w << 8))) return;
    const sp__item *it = sp__slot_items(h, s);
    for (uint32_t p = 0; p < g->count; p++)
        if (it[p].status != SP__ITEM_OK) {
            atomic_store(&sc->state, CR_CONSUMER);
            return;
        }
    sp_batch b = slot_view(pool, s, g);
    const sp_cache_opts *o = sp__cache_opts(pool->cache);
    char dir[PATH_CAP + 160];
    snprintf(dir, sizeof dir, "%s/.tmp/%s", sp_cache_dir(pool->cache), sc->name);
    sp_error e;
    sp_error_clear(&e);
    int rc, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        rc = sp_error_set(&e, SP_EIO, "%s: %s", dir, strerror(errno));
    } else {
        rc = sp__cb_write(dfd, dir, sc->key, &b, h->sample_bytes, sc->filter, o->level,
                          o->no_fsync, pool->ld, &wc->io, &sc->line, &e);
        close(dfd);
    }
    if (g->index == pool->crash_cache_write) {   /* test hook: die with the file written */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    if (rc != 0) {
        sc->code = e.code;
        memcpy(sc->msg, e.msg, sizeof sc->msg);
    }
    atomic_store(&sc->state, rc == 0 ? CR_OK : CR_FAILED);
}

/* Compute position p of batch q if we win its CAS. */
static void work_item(worker_ctx *wc, uint64_t q, uint32_t p) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    batch_geo g = geo_of(pool, q);
    if (p >= g.count) return;
    uint32_t s = (uint32_t)(q % pool->R);
    /* A batch read from the cache is one work unit: position 0's. */
    uint32_t mode = pool->sc ? atomic_load(&pool->sc[s].mode) : CM_NONE;
    if (mode == CM_READ && p != 0) return;
    _Atomic uint64_t *st = &sp__slot_state(h, s)[p];
    uint64_t expect = sp__st(q, SP__ST_FREE, 0);
    if (!atomic_compare_exchange_strong(st, &expect, sp__st(q, SP__ST_CLAIMED, wc->w))) return;
    sp__worker_rec *rec = &h->workers[wc->w];
    atomic_store_explicit(&rec->busy, 1, memory_order_relaxed);

    uint32_t crash = atomic_load(&sp__slot_crash(h, s)[p]);
    if (mode == CM_READ && cache_read_slot(wc, q, s, &g, crash)) {
        atomic_store_explicit(&rec->busy, 0, memory_order_relaxed);
        return;
    }
    char forced[96];
    const char *why = NULL;
    if ((crash & 0xff) >= 2) {
        snprintf(forced, sizeof forced,
                 "worker process died %u times while computing it (last: signal %u)",
                 crash & 0xff, crash >> 8);
        why = forced;
    }
    sp__rng rng = sp__loader_rng(pool->ld, 0);
    if (rng.mode == SP_RNG_PER_WORKER) {
        rng.key = wc->key;
        rng.counter = wc->counter++;
    }
    if (pool->crash_sample != UINT64_MAX && !why) {   /* test hook: a decoder crash */
        sp_perm perm;
        sp_perm_init(&perm, sp__loader_batching(pool->ld)->n,
                     sp_stream_key(sp_loader_config_of(pool->ld)->seed, SP_STREAM_SHUFFLE), g.epoch);
        if (sp_perm_at(&perm, g.pos0 + p) == pool->crash_sample) {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
    }
    uint8_t *dst = sp__slot_images(h, s) + (size_t)p * h->sample_bytes;
    sp__loader_sample(pool->ld, g.epoch, g.pos0 + p, rng, why, dst, &sp__slot_items(h, s)[p],
                      &sp__slot_indices(h, s)[p], &sp__slot_labels(h, s)[p]);
    atomic_store_explicit(st, sp__st(q, SP__ST_DONE, wc->w), memory_order_release);
    atomic_store_explicit(&rec->busy, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&rec->samples, 1, memory_order_relaxed);

    /* Tagged completion counter; the one that completes the batch wakes,
     * after writing its cache file (every other position is DONE then). */
    if (mode == CM_FILL) {
        uint64_t v = atomic_load(&sp__slot(h, s)->done);
        if ((v >> DONE_SHIFT) == (q & ((1ull << 40) - 1)) &&
            (uint32_t)(v & ((1u << DONE_SHIFT) - 1)) + 1 == g.count)
            cache_write_slot(wc, s, &g);
    }
    done_add(pool, q, s, 1, g.count);
}

/* Claim every FREE position of the live slots (orphans of a dead worker). */
static void orphan_scan(worker_ctx *wc) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    uint64_t rel = atomic_load_explicit(&h->released, memory_order_acquire);
    for (uint64_t q = rel; q < rel + pool->R && q < pool->total; q++) {
        batch_geo g = geo_of(pool, q);
        _Atomic uint64_t *st = sp__slot_state(h, (uint32_t)(q % pool->R));
        for (uint32_t p = 0; p < g.count; p++)
            if (atomic_load_explicit(&st[p], memory_order_relaxed) == sp__st(q, SP__ST_FREE, 0))
                work_item(wc, q, p);
        if (atomic_load(&h->stop)) return;
    }
}

/* Housekeeping between items: exit on stop or parent death, scan if needed. */
static void worker_poll(worker_ctx *wc) {
    sp__ring_hdr *h = wc->pool->h;
    if (atomic_load(&h->stop) || getppid() != wc->pool->parent) _exit(0);
    uint32_t sg = atomic_load(&h->scan_gen);
    uint64_t rel = atomic_load(&h->released);
    if (sg != wc->seen_scan || (sg != 0 && rel != wc->seen_released)) {
        wc->seen_scan = sg;
        wc->seen_released = rel;
        orphan_scan(wc);
    }
}

static _Noreturn void worker_main(sp_pool *pool, uint32_t w) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != pool->parent) _exit(0);
    sp__ring_hdr *h = pool->h;
    worker_ctx wc;
    memset(&wc, 0, sizeof wc);
    wc.pool = pool;
    wc.w = w;
    wc.key = sp__loader_worker_key(pool->ld, w);
    wc.seen_scan = atomic_load(&h->scan_gen) - 1;   /* a new worker scans first */
    wc.seen_released = UINT64_MAX;
    uint64_t end = pool->total * pool->cap;
    for (;;) {
        worker_poll(&wc);
        uint64_t t = atomic_fetch_add(&h->hint, 1);
        if (t >= end) {   /* no new work: stay for orphans until stopped */
            for (;;) {
                uint32_t wv = atomic_load(&h->wake);
                worker_poll(&wc);
                sp__futex_wait(&h->wake, wv, WORKER_TIMEOUT_NS);
            }
        }
        uint64_t q = t / pool->cap;
        uint32_t p = (uint32_t)(t % pool->cap);
        for (;;) {   /* wait for batch q's slot (backpressure) */
            uint32_t wv = atomic_load(&h->wake);
            if (q < atomic_load_explicit(&h->released, memory_order_acquire) + pool->R) break;
            worker_poll(&wc);
            sp__futex_wait(&h->wake, wv, WORKER_TIMEOUT_NS);
        }
        work_item(&wc, q, p);
    }
}

static int spawn(sp_pool *pool, uint32_t w, sp_error *err) {
    pid_t pid = fork();
    if (pid < 0) return sp_error_set(err, SP_EIO, "pool: fork: %s", strerror(errno));
    if (pid == 0) worker_main(pool, w);
    pool->pids[w] = pid;
    atomic_store(&pool->h->workers[w].pid, (int32_t)pid);
    atomic_fetch_add(&pool->h->workers[w].gen, 1);
    return SP_OK;
}

/* ---- consumer side -------------------------------------------------------- */

/* CACHE, the consumer's part. Epochs enter the ring in order and leave it
 * (their last batch taken) in order: pool->ec is a FIFO of their reader or
 * writer, opened when an epoch's first batch is activated and committed or
 * closed when its last batch is taken. Each activated slot gets the
 * epoch's mode and what its worker needs (entry key or staging directory,
 * the manifest line); taking a batch reads back what the worker did. */

static void cwarn(sp_pool *pool, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void cwarn(sp_pool *pool, const char *fmt, ...) {
    char msg[SP_ERROR_MSG_MAX + 160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp__cache_warn(pool->cache, msg);
}

static epoch_cache *ec_tail(sp_pool *pool) {
    return pool->ec_n ? &pool->ec[(pool->ec_head + pool->ec_n - 1) % pool->ec_cap] : NULL;
}

/* Look up epoch e, whose first batch in this stream is `index`. */
static void ec_open(sp_pool *pool, uint32_t epoch, uint64_t index) {
    epoch_cache *ec = &pool->ec[(pool->ec_head + pool->ec_n) % pool->ec_cap];
    pool->ec_n++;
    memset(ec, 0, sizeof *ec);
    ec->epoch = epoch;
    ec->mode = CM_NONE;
    sp_error e;
    sp_error_clear(&e);
    if (sp_loader_config_of(pool->ld)->rng_mode == SP_RNG_PER_WORKER) {
        if (!pool->warned_unsupp++)
            cwarn(pool, "%s: per-worker rng mode is not cacheable (its bytes depend on the "
                  "order batches are computed in); the stream runs uncached",
                  sp_cache_dir(pool->cache));
        return;
    }
    int rc = sp_cache_reader_open(pool->cache, pool->ld, epoch, &ec->rd, &e);
    if (rc == 0) {
        ec->mode = CM_READ;
        return;
    }
    if (e.code) cwarn(pool, "%s", e.msg);
    if (index != 0) return;   /* a resumed epoch is not filled: it lacks its start */
    sp_error_clear(&e);
    rc = sp_cache_writer_open(pool->cache, pool->ld, epoch, &ec->wr, &e);
    if (rc == 0) ec->mode = CM_FILL;
    else if (rc != SP_CACHE_SKIP) cwarn(pool, "%s", e.msg);
}

/* The oldest epoch's last batch was taken: commit or close, pop. */
static void ec_close(sp_pool *pool) {
    epoch_cache *ec = &pool->ec[pool->ec_head];
    if (ec->wr) {
        sp_error e;
        sp_error_clear(&e);
        if (!sp_cache_writer_complete(ec->wr)) sp_cache_writer_abort(ec->wr);
        else if (sp_cache_writer_commit(ec->wr, &e) != 0)
            cwarn(pool, "%s; epoch %u was not cached", e.msg, ec->epoch);
    }
    sp_cache_reader_close(ec->rd);
    memset(ec, 0, sizeof *ec);
    pool->ec_head = (pool->ec_head + 1) % pool->ec_cap;
    pool->ec_n--;
}

/* The epoch's entry cannot be completed: spoil its writer. It is aborted
 * (its staging directory removed) only at ec_close(), when every batch of
 * the epoch has been taken: until then a worker may still be writing
 * another of its batches there, and removing the directory under it would
 * leave it behind. */
static void ec_drop_writer(sp_pool *pool, epoch_cache *ec, const char *msg) {
    if (msg) cwarn(pool, "%s; epoch %u goes on uncached", msg, ec->epoch);
    sp__cache_writer_spoil(ec->wr);
    ec->mode = CM_NONE;
}

/* Give slot s (batch g) its cache mode and what its worker needs. */
static void cache_activate(sp_pool *pool, uint32_t s, const batch_geo *g) {
    epoch_cache *t = ec_tail(pool);
    if (!t || t->epoch != g->epoch) {
        ec_open(pool, g->epoch, g->index);
        t = ec_tail(pool);
    }
    slot_cache *sc = &pool->sc[s];
    sc->code = sc->enoent = sc->partial = 0;
    sc->msg[0] = '\0';
    memset(&sc->line, 0, sizeof sc->line);
    uint32_t mode = t->mode;
    if (mode == CM_READ) {
        const sp__cm_batch *l = sp__cache_reader_line(t->rd, g->index);
        if (l) {
            sc->line = *l;
            snprintf(sc->name, sizeof sc->name, "%s", sp__cache_reader_key(t->rd));
            sp_digest_parse(sc->name, &sc->key);
        } else {
            mode = CM_NONE;
        }
    } else if (mode == CM_FILL) {
        snprintf(sc->name, sizeof sc->name, "%s", sp__cache_writer_stage(t->wr));
        sc->key = sp__cache_writer_key(t->wr);
        sc->filter = sp__cache_writer_filter(t->wr);
    }
    pool->smode[s] = mode;
    atomic_store(&sc->state, CR_EMPTY);
    atomic_store(&sc->mode, mode);
}

/* A batch with failed samples, one whose counter bump was lost, or one
 * whose writer died: the consumer writes it (finalised, with its
 * failure-log lines) from a copy, leaving the slot as it is. */
static void consumer_put(sp_pool *pool, epoch_cache *ec, uint32_t s, const batch_geo *g) {
    sp_batch b;
    sp_error e;
    sp_error_clear(&e);
    size_t sb = sp_loader_sample_bytes(pool->ld);
    sp__item *items = malloc(((size_t)g->count + 1) * sizeof *items);   /* +1: count 0 */
    if (!items || sp_batch_alloc(pool->ld, &b) != 0) {
        free(items);
        ec_drop_writer(pool, ec, "cache: out of memory");
        return;
    }
    sp_batch v = slot_view(pool, s, g);
    memcpy(items, sp__slot_items(pool->h, s), (size_t)g->count * sizeof *items);
    memcpy(b.images, v.images, (size_t)g->count * sb);
    memcpy(b.indices, v.indices, (size_t)g->count * sizeof *b.indices);
    memcpy(b.labels, v.labels, (size_t)g->count * sizeof *b.labels);
    b.count = g->count;
    b.epoch = g->epoch;
    b.index = g->index;
    if (pool->sc[s].partial) sp__cache_writer_discard(ec->wr, g->index);
    if (sp__batch_finalize(pool->ld, &b, items, &e) != 0)
        ec_drop_writer(pool, ec, NULL);   /* the stream fails here (on_error fail) */
    else if (sp_cache_writer_put(ec->wr, &b, &e) != 0)
        ec_drop_writer(pool, ec, e.msg);
    sp_batch_free(&b);
    free(items);
}

/* FILL: 1 once the slot's write is settled (done, failed, or the
 * consumer's to do); a worker that is still writing holds the batch back. */
static int fill_settled(sp_pool *pool, uint32_t s) {
    slot_cache *sc = &pool->sc[s];
    uint32_t expect = CR_EMPTY;
    if (atomic_compare_exchange_strong(&sc->state, &expect, CR_CONSUMER)) return 1;
    return (expect & 0xff) != CR_BUSY;
}

/* Batch q (slot s) is being taken: account for what its worker did. */
static void cache_take(sp_pool *pool, uint64_t q, uint32_t s) {
    batch_geo g = geo_of(pool, q);
    epoch_cache *ec = &pool->ec[pool->ec_head];
    slot_cache *sc = &pool->sc[s];
    sp_cache_stats *cst = &pool->cache->st;
    uint32_t st = atomic_load(&sc->state) & 0xff;
    if (pool->smode[s] == CM_READ && (st == CR_OK || g.count == 0)) {
        /* (An empty batch, a rank's slice past the data, has nothing to read.) */
        sp__cache_reader_count(ec->rd, g.index);
    } else {
        cst->batches_computed++;
        if (pool->smode[s] == CM_READ && sc->code && ec->mode == CM_READ) {
            sp_error e;
            e.code = sc->code;
            memcpy(e.msg, sc->msg, sizeof e.msg);
            sp__cache_reader_failed(ec->rd, sc->enoent, &e);
            cwarn(pool, "%s; batch recomputed", e.msg);
            ec->mode = CM_NONE;   /* one report per entry; the rest is computed */
        } else if (pool->smode[s] == CM_FILL && ec->mode == CM_FILL) {
            if (st == CR_OK) {
                sp_batch b;
                memset(&b, 0, sizeof b);
                b.epoch = g.epoch;
                b.index = g.index;
                b.count = g.count;
                b.capacity = pool->cap;
                sp_error e;
                if (sp__cache_writer_record(ec->wr, &b, &sc->line, &e) != 0)
                    ec_drop_writer(pool, ec, e.msg);
            } else if (st == CR_FAILED) {
                ec_drop_writer(pool, ec, sc->msg);
            } else {
                consumer_put(pool, ec, s, &g);
            }
        }
    }
    if (g.index + 1 == pool->nb || q + 1 == pool->total) ec_close(pool);
}

static void activate(sp_pool *pool, uint64_t q) {
    sp__ring_hdr *h = pool->h;
    uint32_t s = (uint32_t)(q % pool->R);
    batch_geo g = geo_of(pool, q);
    sp__slot_hdr *sh = sp__slot(h, s);
    _Atomic uint64_t *st = sp__slot_state(h, s);
    _Atomic uint32_t *cr = sp__slot_crash(h, s);
    for (uint32_t p = 0; p < pool->cap; p++) {
        atomic_store_explicit(&st[p], sp__st(q, SP__ST_FREE, 0), memory_order_relaxed);
        atomic_store_explicit(&cr[p], 0, memory_order_relaxed);
    }
    sh->count = g.count;
    sh->epoch = g.epoch;
    sh->index = g.index;
    atomic_store(&sh->ready_ns, 0);
    atomic_store(&sh->done, (q & ((1ull << 40) - 1)) << DONE_SHIFT);
    if (pool->cache) cache_activate(pool, s, &g);
    atomic_store_explicit(&sh->q, q, memory_order_release);
}

static void wake_workers(sp_pool *pool) { wake_workers_h(pool->h); }

/* Reap dead workers, put their positions back, respawn. */
static int check_workers(sp_pool *pool, sp_error *err) {
    sp__ring_hdr *h = pool->h;
    for (int w = 0; w < pool->nworkers; w++) {
        int status;
        if (pool->pids[w] <= 0) continue;
        pid_t r = waitpid(pool->pids[w], &status, WNOHANG);
        if (r == 0) continue;
        if (r < 0 && errno == EINTR) {
            w--;
            continue;
        }
        /* Gone (or reaped by someone else: treat it as gone). */
        unsigned sig = (r > 0 && WIFSIGNALED(status)) ? (unsigned)WTERMSIG(status) : 0;
        pool->pids[w] = 0;
        atomic_store(&h->workers[w].pid, 0);
        atomic_store(&h->workers[w].busy, 0);
        pool->deaths++;
        atomic_fetch_add(&h->deaths, 1);
        if (sig == SIGBUS) {
            /* Not the sample's fault: the ring's memory could not be backed
             * (it is reserved at creation, so something shrank or evicted
             * it). Retrying would loop; stop with the reason. */
            wake_workers(pool);
            return sp_error_set(err, SP_EIO,
                                "pool: worker %d died of SIGBUS (bus error): the shared memory "
                                "of the ring is gone or could not be backed; not retried", w);
        }
        for (uint64_t q = pool->released; q < pool->released + pool->R && q < pool->total; q++) {
            uint32_t s = (uint32_t)(q % pool->R);
            _Atomic uint64_t *st = sp__slot_state(h, s);
            _Atomic uint32_t *cr = sp__slot_crash(h, s);
            for (uint32_t p = 0; p < pool->cap; p++) {
                uint64_t v = sp__st(q, SP__ST_CLAIMED, (unsigned)w);
                if (atomic_load(&st[p]) != v) continue;
                uint32_t c = atomic_load(&cr[p]);
                atomic_store(&cr[p], ((c & 0xff) + 1) | (sig << 8));
                if (atomic_compare_exchange_strong(&st[p], &v, sp__st(q, SP__ST_FREE, 0)))
                    pool->redone++;
            }
            /* A worker that died writing a batch file: the batch is in the
             * slot (every position DONE), so the consumer writes it again. */
            uint32_t busy = CR_BUSY | ((uint32_t)w << 8);
            if (pool->sc && pool->smode[s] == CM_FILL &&
                atomic_load(&pool->sc[s].state) == busy) {
                pool->sc[s].partial = 1;
                atomic_compare_exchange_strong(&pool->sc[s].state, &busy, CR_CONSUMER);
            }
        }
        atomic_fetch_add(&h->scan_gen, 1);
        if (pool->deaths > pool->respawn_limit) {
            wake_workers(pool);
            return sp_error_set(err, SP_EIO, "pool: workers keep dying (%llu deaths); giving up",
                                (unsigned long long)pool->deaths);
        }
        int rc = spawn(pool, (uint32_t)w, err);
        wake_workers(pool);
        if (rc != 0) return rc;
    }
    return SP_OK;
}

static int fail_sticky(sp_pool *pool, int rc, const sp_error *e, sp_error *err) {
    pool->sticky = rc;
    pool->sticky_err = *e;
    if (err) *err = *e;
    return rc;
}

/* A liveness poll (check_workers) when the last one is CONSUMER_TIMEOUT_NS
 * old. @return 0 (*polled: whether it ran) or the sticky error. */
static int poll_due(sp_pool *pool, int *polled, sp_error *err) {
    uint64_t now = sp__now_ns();
    *polled = now - pool->last_check_ns >= CONSUMER_TIMEOUT_NS;
    if (!*polled) return SP_OK;
    pool->last_check_ns = now;
    sp_error e;
    sp_error_clear(&e);
    int rc = check_workers(pool, &e);
    return rc != 0 ? fail_sticky(pool, rc, &e, err) : SP_OK;
}

static int slot_complete(const sp_pool *pool, uint64_t q, uint32_t count) {
    _Atomic uint64_t *st = sp__slot_state(pool->h, (uint32_t)(q % pool->R));
    for (uint32_t p = 0; p < count; p++) {
        uint64_t v = atomic_load_explicit(&st[p], memory_order_acquire);
        if (sp__st_kind(v) != SP__ST_DONE || sp__st_q(v) != q) return 0;
    }
    return 1;
}

static uint64_t done_want(const sp_pool *pool, uint64_t q) {
    return ((q & ((1ull << 40) - 1)) << DONE_SHIFT) | sp__slot(pool->h, (uint32_t)(q % pool->R))->count;
}

/* Sleep on cwake while it still reads wv (at most timeout_ns). */
static void consumer_sleep(sp__ring_hdr *h, uint32_t wv, uint64_t timeout_ns) {
    atomic_store(&h->csleep, 1);
    if (atomic_load(&h->cwake) == wv) sp__futex_wait(&h->cwake, wv, timeout_ns);
    atomic_store(&h->csleep, 0);
}

int sp__pool_poll(sp_pool *pool, uint32_t *slot, uint64_t *qout, sp_error *err) {
    if (pool->sticky) {
        if (err) *err = pool->sticky_err;
        return pool->sticky;
    }
    if (pool->taken >= pool->total) {
        /* Count any death that the stream did not need to wait for. */
        sp_error e;
        sp_error_clear(&e);
        int rc = check_workers(pool, &e);
        if (rc != 0) return fail_sticky(pool, rc, &e, err);
        return SP_POOL_END;
    }
    if (pool->taken - pool->released >= pool->R)
        return sp_error_set(err, SP_EINVAL, "pool: all %u slots are held; release one first",
                            pool->R);
    uint64_t q = pool->taken;
    uint32_t s = (uint32_t)(q % pool->R);
    sp__ring_hdr *h = pool->h;
    sp__slot_hdr *sh = sp__slot(h, s);
    if (atomic_load_explicit(&sh->done, memory_order_acquire) != done_want(pool, q)) {
        int polled, rc = poll_due(pool, &polled, err);
        if (rc != 0) return rc;
        if (!polled || !slot_complete(pool, q, sh->count)) return SP__POOL_AGAIN;
    }
    if (pool->sc && pool->smode[s] == CM_FILL && !fill_settled(pool, s)) {
        int polled, rc = poll_due(pool, &polled, err);   /* a worker writes it: watch it */
        return rc != 0 ? rc : SP__POOL_AGAIN;
    }
    atomic_thread_fence(memory_order_acquire);
    if (pool->cache) cache_take(pool, q, s);
    pool->last_ready_ns = atomic_load(&sh->ready_ns);
    pool->last_taken_ns = sp__now_ns();
    pool->taken++;
    *slot = s;
    *qout = q;
    return SP_OK;
}

int sp_pool_next(sp_pool *pool, sp_batch *view, sp_error *err) {
    sp__ring_hdr *h = pool->h;
    uint32_t s = 0;
    uint64_t q = 0;
    int rc, spun = 0;
    for (;;) {
        uint32_t wv = atomic_load(&h->cwake);
        rc = sp__pool_poll(pool, &s, &q, err);
        if (rc != SP__POOL_AGAIN) break;
        if (!spun) {   /* a short spin first: a batch that is nearly done is
                          taken without a sleep/wake-up round trip */
            spun = 1;
            sp__slot_hdr *sh = sp__slot(h, (uint32_t)(pool->taken % pool->R));
            uint64_t want = done_want(pool, pool->taken), t0 = sp__now_ns();
            while (atomic_load_explicit(&sh->done, memory_order_acquire) != want &&
                   sp__now_ns() - t0 < SPIN_NS) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            }
            continue;
        }
        consumer_sleep(h, wv, CONSUMER_TIMEOUT_NS);
    }
    if (rc != 0) return rc;
    batch_geo g = geo_of(pool, q);
    *view = slot_view(pool, s, &g);
    sp_error e;
    sp_error_clear(&e);
    rc = sp__batch_finalize(pool->ld, view, sp__slot_items(h, s), &e);
    if (rc != 0) {
        pool->taken--;   /* the state names the failing batch */
        return fail_sticky(pool, rc, &e, err);
    }
    return SP_OK;
}

int sp_pool_release(sp_pool *pool, sp_error *err) {
    if (pool->released >= pool->taken)
        return sp_error_set(err, SP_EINVAL, "pool: no batch is held");
    uint64_t next = pool->released + pool->R;
    if (next < pool->total) activate(pool, next);
    pool->released++;
    atomic_store_explicit(&pool->h->released, pool->released, memory_order_release);
    wake_workers(pool);
    /* A liveness poll at most every 10 ms even when batches are always
     * ready (a dead worker's claims would stall a later batch). */
    int polled;
    return poll_due(pool, &polled, err);
}

void sp_pool_state(const sp_pool *pool, sp_loader_state *st) {
    uint64_t abs = pool->start_abs + pool->taken;
    sp_loader_state_at(pool->ld, (uint32_t)(abs / pool->nb), abs % pool->nb, st);
}

sp_loader *sp_pool_loader(sp_pool *pool) { return pool->ld; }
sp_cache *sp_pool_cache(sp_pool *pool) { return pool->cache; }

int sp_pool_worker_pid(const sp_pool *pool, int w) {
    return (w >= 0 && w < pool->nworkers) ? (int)pool->pids[w] : 0;
}

void sp_pool_stats_get(const sp_pool *pool, sp_pool_stats *st) {
    memset(st, 0, sizeof *st);
    st->workers = pool->nworkers;
    st->ring_slots = (int)pool->R;
    st->batches_taken = pool->taken;
    st->batches_total = pool->total;
    st->worker_deaths = pool->deaths;
    st->positions_redone = pool->redone;
    st->last_ready_ns = pool->last_ready_ns;
    st->last_taken_ns = pool->last_taken_ns;
}

sp__ring_hdr *sp__pool_hdr(sp_pool *pool) { return pool->h; }
uint64_t sp__pool_taken(const sp_pool *pool) { return pool->taken; }
uint64_t sp__pool_released(const sp_pool *pool) { return pool->released; }
uint64_t sp__pool_total(const sp_pool *pool) { return pool->total; }

int sp_pool_create(const sp_loader_config *lcfg, const sp_pool_config *pcfg, sp_pool **out,
                   sp_error *err) {
    *out = NULL;
    if (pcfg && pcfg->region_name && pcfg->region_name[0])
        return sp_error_set(err, SP_EUNSUPP,
                            "pool: a named region is the service's (service.h)");
    return sp__pool_create_ex(lcfg, pcfg, 1, 1, out, err);
}

int sp__pool_create_ex(const sp_loader_config *lcfg, const sp_pool_config *pcfg, uint32_t nranks,
                       uint32_t span, sp_pool **out, sp_error *err) {
    *out = NULL;
    if (!lcfg || !pcfg) return sp_error_set(err, SP_EINVAL, "pool: missing config");
    if (pcfg->workers < 1 || pcfg->workers > SP_POOL_MAX_WORKERS)
        return sp_error_set(err, SP_EINVAL, "pool: %d workers (1..%d; 0 is the in-process loader)",
                            pcfg->workers, SP_POOL_MAX_WORKERS);
    int R = pcfg->ring_slots ? pcfg->ring_slots : (pcfg->workers * 2 > 2 ? pcfg->workers * 2 : 2);
    if (R < 1 || R > SP__RING_MAX_SLOTS)
        return sp_error_set(err, SP_EINVAL, "pool: %d ring slots (1..%d)", R, SP__RING_MAX_SLOTS);
    if (pcfg->epochs == 0) return sp_error_set(err, SP_EINVAL, "pool: epochs must be >= 1");
    sp_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return sp_error_set(err, SP_ENOMEM, "pool: out of memory");
    int rc = sp_loader_create(lcfg, &pool->ld, err);
    if (rc != 0) {
        free(pool);
        return rc;
    }
    if (span != 1 && (rc = sp__loader_set_span(pool->ld, span, err)) != 0) goto fail;
    if (span != 1 && pcfg->cache_dir) {
        /* A cache entry is one rank's stream (its key names rank and world):
         * a span's batches are no rank's. */
        rc = sp_error_set(err, SP_EUNSUPP, "pool: the epoch cache holds one rank's stream; a "
                          "span of %u ranks is not one", span);
        goto fail;
    }
    pool->nworkers = pcfg->workers;
    pool->R = (uint32_t)R;
    pool->nb = sp_loader_batches_per_epoch(pool->ld);
    pool->cap = sp__loader_capacity(pool->ld);
    if (pcfg->resume) {
        rc = sp_loader_state_check(pool->ld, pcfg->resume, err);
        if (rc != 0) goto fail;
        pool->start_abs = (uint64_t)pcfg->resume->epoch * pool->nb + pcfg->resume->batch;
    }
    uint64_t end = (uint64_t)pcfg->epochs * pool->nb;
    pool->total = end > pool->start_abs ? end - pool->start_abs : 0;
    if (pool->total >= (1ull << 40)) {
        rc = sp_error_set(err, SP_ELIMIT, "pool: stream of %llu batches is too long",
                          (unsigned long long)pool->total);
        goto fail;
    }
    if (pcfg->cache_dir) {
        rc = sp_cache_open(pcfg->cache_dir, pcfg->cache_opts, &pool->cache, err);
        if (rc != 0) goto fail;
        void *m = mmap(NULL, (size_t)pool->R * sizeof *pool->sc, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        pool->ec_cap = pool->R + 2;   /* epochs in the ring: at most R + 1 */
        pool->smode = calloc(pool->R, sizeof *pool->smode);
        pool->ec = calloc(pool->ec_cap, sizeof *pool->ec);
        if (m == MAP_FAILED || !pool->smode || !pool->ec) {
            if (m != MAP_FAILED) munmap(m, (size_t)pool->R * sizeof *pool->sc);
            rc = sp_error_set(err, SP_ENOMEM, "pool: out of memory for the cache records");
            goto fail;
        }
        pool->sc = m;
    }
    pool->respawn_limit = 100 + 16 * (uint64_t)pcfg->workers;
    const char *crash = getenv("SEEDPIPE_TEST_CRASH_SAMPLE");
    pool->crash_sample = crash && *crash ? strtoull(crash, NULL, 10) : UINT64_MAX;
    crash = getenv("SEEDPIPE_TEST_CRASH_CACHE_WRITE");
    pool->crash_cache_write = crash && *crash ? strtoull(crash, NULL, 10) : UINT64_MAX;

    sp__ring_hdr hh;
    memset(&hh, 0, sizeof hh);
    hh.nslots = pool->R;
    hh.cap = pool->cap;
    hh.sample_bytes = sp_loader_sample_bytes(pool->ld);
    hh.nranks = nranks;
    rc = sp__ring_layout(&hh, err);
    if (rc != 0) goto fail;
    rc = sp__region_create(&pool->region, pcfg->region_name, hh.region_size, err);
    if (rc != 0) goto fail;
    sp__ring_hdr *h = (sp__ring_hdr *)pool->region.base;
    pool->h = h;
    /* Copy the immutable part; the atomics start at zero (fresh mapping). */
    memcpy(h, &hh, offsetof(sp__ring_hdr, hint));
    h->magic = SP__RING_MAGIC;
    h->version = SP__RING_VERSION;
    sp_digest fp = sp_loader_fingerprint(pool->ld);
    h->fp_hi = fp.hi;
    h->fp_lo = fp.lo;
    h->owner_pid = (int32_t)getpid();
    h->nworkers = (uint32_t)pool->nworkers;
    h->start_abs = pool->start_abs;
    h->total = pool->total;
    h->batches_per_epoch = pool->nb;
    for (uint64_t q = 0; q < pool->R && q < pool->total; q++) activate(pool, q);
    atomic_store(&h->released, 0);
    pool->parent = getpid();
    for (int w = 0; w < pool->nworkers; w++) {
        rc = spawn(pool, (uint32_t)w, err);
        if (rc != 0) goto fail;
    }
    *out = pool;
    return SP_OK;
fail:
    sp_pool_destroy(pool);
    return rc;
}

void sp_pool_destroy(sp_pool *pool) {
    if (!pool) return;
    if (pool->h) atomic_store(&pool->h->stop, 1);
    for (int w = 0; w < pool->nworkers; w++)
        if (pool->pids[w] > 0) kill(pool->pids[w], SIGKILL);
    for (int w = 0; w < pool->nworkers; w++)
        if (pool->pids[w] > 0) {
            while (waitpid(pool->pids[w], NULL, 0) < 0 && errno == EINTR) {
            }
            pool->pids[w] = 0;
        }
    sp__region_close(&pool->region);
    while (pool->ec_n) {   /* unfinished epochs: nothing is committed */
        epoch_cache *ec = &pool->ec[pool->ec_head];
        sp_cache_writer_abort(ec->wr);
        ec->wr = NULL;
        ec_close(pool);
    }
    if (pool->sc) munmap(pool->sc, (size_t)pool->R * sizeof *pool->sc);
    free(pool->smode);
    free(pool->ec);
    sp_cache_close(pool->cache);
    sp_loader_destroy(pool->ld);
    free(pool);
}

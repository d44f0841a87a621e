/* pool_worker.c - the worker pool's forked worker process (pool.c forks it
 * with sp__pool_spawn()): claiming positions of the ring, computing each
 * into its place in a slot, reading or writing a batch's cache file
 * (pool_cache.c), hashing the batch digest (pool_digest.c), and waiting
 * for a slot (backpressure) or for orphans of a dead worker.
 *
 * Called by pool.c only (pool_shared.h); it calls down into pool_cache.c,
 * pool_digest.c, pool_death.c and the loader, never back into pool.c: what
 * both sides need of a slot is inline in pool_shared.h. The consumer's
 * side, deaths and recovery are pool.c's HOW IT WORKS.
 *
 * HOW IT WORKS
 *
 * Claiming. A shared counter `hint` hands out items: a worker takes
 * t = fetch_add(hint, 1) (for a remote dataset a run of c items,
 * fetch_add(hint, c), c = sp__loader_prefetch_chunk(): it takes its next
 * run and starts reading that run's samples before computing this one's,
 * so the network works while the worker decodes; prefetch_items()). The counter only distributes work; ownership is
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
 * Writing. A worker's first item in a slot maps the whole slot into its
 * page table in one call (sp__ring_map_slot(): a fault per 4 KiB
 * page costs several times more, and every worker would take them all,
 * once per slot, since the slots' positions go to whoever claims them; the
 * trace's "map" spans). On the first pass over the ring (q < R) with W > 1
 * workers, whose pages nobody has allocated yet, each maps (allocates) only
 * its 1/W share, not all of them the same pages one behind the other, and
 * the rest on its next pass. The worker runs sp__loader_sample() (the loader's own
 * per-position step, on-error policy included) with the destination being
 * the position's place in the slot's image array, fills the slot's
 * indices/labels/item outcome, then stores DONE(q) with release order. It
 * then bumps the slot's `done` counter, tagged with q ((q << 24) | n) and
 * updated by CAS so a late bump can't leak into the slot's next batch; the
 * worker that makes it reach count stamps ready_ns, bumps the region's
 * consumer word `cwake` and, if the consumer sleeps there (`csleep`),
 * wakes it.
 *
 * Orphans. After a death (scan_gen changed) and, once any death happened,
 * whenever `released` moves, a worker scans the live slots and claims any
 * FREE position by the same CAS (orphan_scan(): pool.c's "Recovery").
 */
#include "pool/pool_shared.h"
#include "common/trace_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define WORKER_TIMEOUT_NS 100000000ull    /* safety net for lost wake-ups */


/* The forced failure of a position whose computation crashed its worker
 * SP__CRASH_BUDGET times ("Deaths", pool.c): the reason, in buf; NULL while
 * it is within its budget (kills from outside are never counted). */
static const char *crash_reason(uint32_t crash, char *buf, size_t n) {
    if (sp__crash_count(crash) < SP__CRASH_BUDGET) return NULL;
    snprintf(buf, n, "worker process died %u times while computing it (last: %s %u)",
             sp__crash_count(crash), (crash & SP__CRASH_EXITED) ? "exit status" : "signal",
             (crash >> 16) & 0xff);
    return buf;
}

/* SP__SCM_READ: the batch read whole from its cache file by the holder of
 * position 0, hashed as it is decompressed (pool_digest.c). @return 1 when
 * it was (every position DONE, the counter bumped), 0: compute instead. */
static int read_cached(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g,
                       uint32_t crash) {
    sp_pool *pool = wc->pool;
    uint64_t tc = sp__trace_t0();
    struct sp__hash *dg = pool->wd ? sp__pool_digest_claim(wc, q, s, g) : NULL;
    int hit = sp__pool_cache_read(wc, q, s, g, crash, dg);
    if (dg) sp__pool_digest_unclaim(wc, s, g->count, hit);
    sp__trace_end(SP_TRACE_CACHE_READ, tc);
    if (!hit) return 0;
    atomic_store_explicit(&pool->h->workers[wc->w].busy, 0, memory_order_relaxed);
    sp__pool_done_add(pool, q, s, g->count, g->count);
    return 1;
}

/* SP__SCM_FILL: the worker about to complete batch q (every other position
 * is DONE) writes its cache file before the bump that wakes the consumer. */
static void fill_if_last(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g) {
    uint64_t v = atomic_load(&sp__slot(wc->pool->h, s)->done);
    if ((v >> SP__POOL_DONE_SHIFT) != (q & ((1ull << 40) - 1)) ||
        (uint32_t)(v & ((1u << SP__POOL_DONE_SHIFT) - 1)) + 1 != g->count)
        return;
    uint64_t tc = sp__trace_t0();
    sp__pool_cache_write(wc, s, g);
    sp__trace_end(SP_TRACE_CACHE_WRITE, tc);
}

/* Map slot s into this process's page table on the worker's first item in
 * it ("Writing"): on the first pass (q < R) with W > 1 workers only its
 * 1/W share, the rest on its next pass. */
static void map_slot(sp__worker_ctx *wc, uint64_t q, uint32_t s) {
    sp_pool *pool = wc->pool;
    if (wc->mapped[s] >= 2 || (wc->mapped[s] != 0 && q < pool->R)) return;
    wc->mapped[s] = q < pool->R && pool->nworkers > 1 ? 1 : 2;   /* 1: its share */
    uint64_t tm = sp__trace_t0();
    sp__ring_map_slot(pool->h, s, wc->w, wc->mapped[s] == 1 ? (uint32_t)pool->nworkers : 1);
    sp__trace_end(SP_TRACE_MAP, tm);
}

/* Compute position p of batch q if we win its CAS. */
static void work_item(sp__worker_ctx *wc, uint64_t q, uint32_t p) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    if (p >= g.count) return;
    uint32_t s = (uint32_t)(q % pool->R);
    /* A batch read from the cache is one work unit: position 0's. */
    uint32_t mode = sp__pool_cache_mode(pool->cc, s);
    if (mode == SP__SCM_READ && p != 0) return;
    _Atomic uint64_t *st = &sp__slot_state(h, s)[p];
    uint64_t expect = sp__st(q, SP__ST_FREE, 0);
    if (!atomic_compare_exchange_strong(st, &expect, sp__st(q, SP__ST_CLAIMED, wc->w))) return;
    sp__worker_rec *rec = &h->workers[wc->w];
    atomic_store_explicit(&rec->busy, 1, memory_order_relaxed);
    sp__trace_ctx(g.epoch, g.index, p, SP__TRACE_NONE64);
    map_slot(wc, q, s);
    uint64_t t0 = sp__trace_t0();
    uint32_t crash = atomic_load(&sp__slot_crash(h, s)[p]);
    if (mode == SP__SCM_READ && read_cached(wc, q, s, &g, crash)) return;
    char forced[96];
    const char *why = crash_reason(crash, forced, sizeof forced);
    sp__rng rng = sp__loader_rng(pool->ld, 0);
    if (rng.mode == SP_RNG_PER_WORKER) {
        rng.key = wc->key;
        rng.counter = wc->counter++;
    }
#ifdef SEEDPIPE_TEST_HOOKS
    /* Test hook: a decoder crash (SIGSEGV), or a kill (SIGKILL) modelled by
     * raising it, while the position has seen fewer than crash_times deaths. */
    if (pool->crash_sample != UINT64_MAX && !why &&
        sp__crash_count(crash) + sp__crash_kills(crash) < pool->crash_times) {
        if (sp__loader_index_at(pool->ld, g.epoch, g.pos0 + p) == pool->crash_sample)
            sp__pool_test_crash(pool->crash_signal, pool->crash_from);
    }
#endif
    uint8_t *dst = sp__slot_images(h, s) + (size_t)p * h->sample_bytes;
    sp__loader_sample(pool->ld, g.epoch, g.pos0 + p, rng, why, dst, &sp__slot_items(h, s)[p],
                      &sp__slot_indices(h, s)[p], &sp__slot_labels(h, s)[p]);
    sp__trace_end(SP_TRACE_SAMPLE, t0);
    atomic_store_explicit(st, sp__st(q, SP__ST_DONE, wc->w), memory_order_release);
    atomic_store_explicit(&rec->busy, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&rec->samples, 1, memory_order_relaxed);
    if (pool->wd) sp__pool_digest_work(wc, q, s, &g);   /* before the batch can be taken */
    /* Tagged completion counter; the one that completes the batch wakes,
     * after writing its cache file (every other position is DONE then). */
    if (mode == SP__SCM_FILL) fill_if_last(wc, q, s, &g);
    sp__pool_done_add(pool, q, s, 1, g.count);
    /* The consumer hashing the batch as it fills waits for this position
     * (pool_digest.c; when the workers hash, pd_want stays 0): seq_cst
     * against its store of pd_want and load of this DONE. */
    if (pool->wd) return;
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->pd_want, memory_order_relaxed) == sp__pool_pd_want(q, p))
        sp__pool_consumer_wake(h);
}

/* Claim every FREE position of the live slots (orphans of a dead worker). */
static void orphan_scan(sp__worker_ctx *wc) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    uint64_t rel = atomic_load_explicit(&h->released, memory_order_acquire);
    for (uint64_t q = rel; q < rel + pool->R && q < pool->total; q++) {
        sp__batch_geo g = sp__pool_geo_of(pool, q);
        _Atomic uint64_t *st = sp__slot_state(h, (uint32_t)(q % pool->R));
        for (uint32_t p = 0; p < g.count; p++)
            if (atomic_load_explicit(&st[p], memory_order_relaxed) == sp__st(q, SP__ST_FREE, 0))
                work_item(wc, q, p);
        if (atomic_load(&h->stop)) return;
    }
}

/* Housekeeping between items: exit on stop or parent death, scan if needed. */
static void worker_poll(sp__worker_ctx *wc) {
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

/* Start reading the samples of items [t, t + n) (remote datasets): those of
 * live slots that are not cache reads, and of batches not yet live. */
static void prefetch_items(sp_pool *pool, uint64_t t, uint32_t n) {
    uint64_t idx[256];
    size_t m = 0;
    uint64_t rel = atomic_load_explicit(&pool->h->released, memory_order_acquire);
    for (uint64_t u = t; u < t + n && m < 256; u++) {
        uint64_t q = u / pool->cap;
        uint32_t p = (uint32_t)(u % pool->cap);
        if (q >= pool->total) break;
        sp__batch_geo g = sp__pool_geo_of(pool, q);
        if (p >= g.count) continue;
        if (q < rel + pool->R &&
            sp__pool_cache_mode(pool->cc, (uint32_t)(q % pool->R)) == SP__SCM_READ)
            continue;
        idx[m++] = sp__loader_index_at(pool->ld, g.epoch, g.pos0 + p);
    }
    sp__loader_prefetch(pool->ld, idx, m);
}

/* Item t once its batch has a slot (backpressure). */
static void work_when_live(sp__worker_ctx *wc, uint64_t t) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    uint64_t q = t / pool->cap;
    uint32_t p = (uint32_t)(t % pool->cap);
    for (;;) {   /* wait for batch q's slot (backpressure) */
        uint32_t wv = atomic_load(&h->wake);
        if (q < atomic_load_explicit(&h->released, memory_order_acquire) + pool->R) break;
        worker_poll(wc);
        uint64_t t0 = sp__trace_t0();
        sp__futex_wait(&h->wake, wv, WORKER_TIMEOUT_NS);
        if (t0) sp__trace_record(SP_TRACE_WAIT_SLOT, t0, SP__TRACE_NONE32, q, p, SP__TRACE_NONE64);
    }
    work_item(wc, q, p);
}

/* Claims of one item, or for a remote dataset of c items (its prefetch
 * chunk): then the next claim is taken, and its samples started, before
 * this one's items are computed. Claims are contiguous and taken in order,
 * so a worker waiting for a slot holds only items of that batch or later
 * ones: every live batch's items are computed by workers not waiting. */
static _Noreturn void worker_main(sp_pool *pool, uint32_t w) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != pool->parent) _exit(0);
    sp__ring_hdr *h = pool->h;
    sp__pool_death_arm(h, w);   /* "Deaths": a crash signal sent from outside is told */
    sp__trace_child("worker %u", w);
    sp__worker_ctx wc;
    memset(&wc, 0, sizeof wc);
    wc.pool = pool;
    wc.w = w;
    wc.key = sp__loader_worker_key(pool->ld, w);
    wc.seen_scan = atomic_load(&h->scan_gen) - 1;   /* a new worker scans first */
    wc.seen_released = UINT64_MAX;
    uint64_t end = pool->total * pool->cap;
    uint32_t c = sp__loader_prefetch_chunk(pool->ld);
    /* Before any death nothing is orphaned: a first worker's scan would
     * only take positions the others have claimed and are reading ahead. */
    if (c > 1 && atomic_load(&h->scan_gen) == 0) wc.seen_scan = 0;
    uint64_t cur = UINT64_MAX;
    for (;;) {
        worker_poll(&wc);
        if (c <= 1) {   /* one item a claim, taken when the last is done */
            cur = atomic_fetch_add(&h->hint, 1);
        } else if (cur == UINT64_MAX) {
            cur = atomic_fetch_add(&h->hint, c);
            if (cur < end) prefetch_items(pool, cur, c);
        }
        if (cur >= end) {   /* no new work: stay for orphans until stopped */
            for (;;) {
                uint32_t wv = atomic_load(&h->wake);
                worker_poll(&wc);
                uint64_t t0 = sp__trace_t0();
                sp__futex_wait(&h->wake, wv, WORKER_TIMEOUT_NS);
                if (t0) sp__trace_record(SP_TRACE_WAIT_WORK, t0, SP__TRACE_NONE32,
                                         SP__TRACE_NONE64, SP__TRACE_NONE32, SP__TRACE_NONE64);
            }
        }
        if (c <= 1) {
            work_when_live(&wc, cur);
            continue;
        }
        uint64_t nxt = atomic_fetch_add(&h->hint, c);
        if (nxt < end) prefetch_items(pool, nxt, c);
        for (uint64_t t = cur; t < cur + c && t < end; t++) {
            if (t > cur) worker_poll(&wc);
            work_when_live(&wc, t);
        }
        cur = nxt;
    }
}

/* Fork worker w (at creation, or as a dead one's replacement). */
int sp__pool_spawn(sp_pool *pool, uint32_t w, sp_error *err) {
    pid_t pid = fork();
    if (pid < 0) return sp_error_set(err, SP_EIO, "pool: fork: %s", strerror(errno));
    if (pid == 0) worker_main(pool, w);
    sp__trace_spawned((int)pid, "worker %u", w);
    pool->pids[w] = pid;
    atomic_store(&pool->h->workers[w].pid, (int32_t)pid);
    atomic_fetch_add(&pool->h->workers[w].gen, 1);
    return SP_OK;
}

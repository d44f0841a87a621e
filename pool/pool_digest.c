/* pool_digest.c - a pool batch's digest, hashed while the batch is being
 * computed (pool.h: sp_pool_digest).
 *
 * HOW IT WORKS
 *
 * The batch digest (loader.h, sp_batch_digest) is XXH3-128 over the batch's
 * count and sample geometry, its indices, its labels, then its images in
 * order. Hashed after the batch is taken, the images (38.5 MB for 64
 * float32 224x224 crops) come back from memory; hashed sample by sample a
 * moment after a worker wrote each, they are still in the caches, and the
 * same digest costs a fraction of the time (bench/RESULTS.md). Once the
 * caller has asked for a digest (the first sp_pool_digest()), every later
 * batch is hashed so, by one of two hashers chosen when the pool is
 * created:
 *
 *  - The consumer (a core is free for it: fewer workers than the CPUs this
 *    process may run on). While sp__pool_next() waits for batch q, it
 *    computes what the batch should hold (its count, and each position's
 *    sample index and label from the epoch order: what a batch without
 *    failures holds), hashes that head (sp__batch_digest_begin), then the
 *    images of positions 0, 1, 2, ... in order, each as soon as its state
 *    word is DONE(q) (pool.c: a DONE position is final until the slot is
 *    released). Before it sleeps it names the position it waits for in the
 *    ring's pd_want word, and the worker that stores that position's DONE
 *    wakes it (otherwise workers wake the consumer only when a batch
 *    completes), so each sample is hashed right after it was written.
 *  - The workers (every CPU runs a worker: the consumer's hashing, and its
 *    wake-up per sample, would take a worker's core, and the samples it
 *    hashes were written on another core). Each slot has a record in a
 *    mapping shared with the workers (made before they are forked): a lock
 *    word, the batch it holds the state of, the positions hashed, and the
 *    XXH3 state. A worker that has just stored DONE(q) for a position takes
 *    the lock if it is free (never waits for it), begins the record for q
 *    if it holds an older batch (the head, from the epoch order as above),
 *    hashes every position from the record's next one while it is DONE(q),
 *    and lets go; then it looks again at the next position, since a worker
 *    that completed it meanwhile found the lock taken and left it. So the
 *    worker that wrote a sample usually hashes it, from its own caches,
 *    before it bumps the batch's completion counter: when the consumer
 *    takes a batch its images are hashed already. A batch read from the
 *    epoch cache is hashed by the worker that reads it, its record held
 *    for the read, each piece of the file as it is decompressed and
 *    expanded, while it is in the caches (sp__pool_digest_claim(),
 *    cache_file.c's sp__cb_decode_digest()). A worker killed while it
 *    holds a lock is reaped before its record is touched again: the
 *    consumer frees the lock and drops the record (pool.c's put_back), and
 *    the batch is hashed from the view.
 *
 * sp_pool_digest() of the batch just taken then hashes the positions that
 * were not hashed yet and finishes, but only when the delivered batch is
 * the one that was hashed: same slot, same count, no skipped and no
 * substituted sample, the same indices and labels (compared whole). Any
 * other batch (a failure in it, a cached batch with its own lists, a view
 * that is not the last one taken, a record a worker still holds) is hashed
 * from the view, as sp_batch_digest() does. The bytes hashed and their
 * order are the same either way (XXH3 streams: test_hash.c), so the digest
 * is sp_batch_digest()'s of the batch as it was delivered, whoever hashed.
 *
 * SEEDPIPE_POOL_DIGEST=consumer or =workers chooses the hasher instead of
 * the CPU count (tests, and bench/pool_scaling.py's comparison of both).
 */
#define _GNU_SOURCE
#include "pool/pool_shared.h"
#include "common/hash_internal.h"
#include "common/trace_internal.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The consumer's own state (both hashers). */
struct sp__pool_pd {
    uint64_t q;          /* the batch being hashed; UINT64_MAX: none */
    uint32_t next;       /* positions hashed */
    uint32_t count;      /* positions expected */
    uint64_t *idx;       /* cap: expected sample indices */
    int32_t *lab;        /* cap: expected labels */
    uint64_t by[3];      /* digests from the workers' record, the consumer's, the view */
    sp__hash h;
};

/* The workers' records, shared (one anonymous mapping). */
#define WD_CONSUMER UINT32_MAX   /* lock value while the consumer holds it; worker w: w + 1 */
typedef struct wd_rec {
    _Atomic uint32_t lock;   /* 0: free */
    uint32_t next;           /* positions of batch q1 - 1 hashed into h */
    uint64_t q1;             /* q + 1 of the batch h belongs to; 0: none */
    sp__hash h;              /* 64-aligned: the words above have a line to themselves */
} wd_rec;
struct sp__pool_wd {         /* R records (pool->R) */
    _Atomic uint32_t on;     /* sp_pool_digest() was called: workers hash */
#ifdef SEEDPIPE_TEST_HOOKS
    _Atomic uint32_t test_killed;
    uint64_t test_kill_q1;   /* q + 1 of the batch whose hasher is killed */
#endif
    wd_rec rec[];
};
static size_t wd_size(const sp_pool *pool) {
    return sizeof(struct sp__pool_wd) + (size_t)pool->R * sizeof(wd_rec);
}
/* How long the consumer lets a worker finish hashing a batch it takes
 * (the batch was complete to a scan before that worker's counter bump). */
#define WD_WAIT_NS 20000000ull

/* The workers hash when every CPU this process may run on has a worker. */
static int by_workers(int nworkers) {
    const char *e = getenv("SEEDPIPE_POOL_DIGEST");
    if (e && strcmp(e, "workers") == 0) return 1;
    if (e && strcmp(e, "consumer") == 0) return 0;
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 && nworkers >= cpus;
}

void sp__pool_digest_open(sp_pool *pool) {
    if (!by_workers(pool->nworkers)) return;
    void *m = mmap(NULL, wd_size(pool), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return;   /* the consumer hashes */
    pool->wd = m;
#ifdef SEEDPIPE_TEST_HOOKS
    /* A worker SIGKILLs itself holding batch N's record (tests/test_pool_digest.c). */
    const char *k = getenv("SEEDPIPE_TEST_DIGEST_KILL");
    if (k && *k) pool->wd->test_kill_q1 = strtoull(k, NULL, 10) + 1;
#endif
}

/* What batch q should hold (its samples' indices and labels, without
 * failures) into idx and lab; @return its count. */
static uint32_t expect(const sp_pool *pool, uint64_t q, uint64_t *idx, int32_t *lab) {
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    for (uint32_t p = 0; p < g.count; p++) {
        idx[p] = sp__loader_index_at(pool->ld, g.epoch, g.pos0 + p);
        lab[p] = sp__loader_label(pool->ld, idx[p]);
    }
    return g.count;
}

/* ---- the workers' hasher -------------------------------------------------- */

/* Under the lock: the record holds batch q from its start (the head
 * hashed, no position). @return 0, or -1 when the worker's arrays could
 * not be allocated (the record is left alone: the consumer hashes). */
static int wd_begin(sp__worker_ctx *wc, wd_rec *r, uint64_t q, const sp__batch_geo *g) {
    sp_pool *pool = wc->pool;
    if (!wc->pd_idx) {
        wc->pd_idx = malloc(pool->cap * sizeof *wc->pd_idx);
        wc->pd_lab = malloc(pool->cap * sizeof *wc->pd_lab);
        if (!wc->pd_idx || !wc->pd_lab) return -1;
    }
    expect(pool, q, wc->pd_idx, wc->pd_lab);
    sp__batch_digest_begin(pool->ld, &r->h, g->count, wc->pd_idx, wc->pd_lab);
    r->q1 = q + 1;
    r->next = 0;
    return 0;
}

/* Under the lock: begin the record for q unless it holds q (or a later
 * batch: then leave it), and hash the DONE(q) positions from its next.
 * @return the next position not hashed, or UINT32_MAX: the record is not
 * q's or it is complete. */
static uint32_t wd_advance(sp__worker_ctx *wc, wd_rec *r, uint64_t q, uint32_t s,
                           const sp__batch_geo *g, uint32_t *hashed) {
    sp_pool *pool = wc->pool;
    if (r->q1 > q + 1) return UINT32_MAX;
    if (r->q1 != q + 1 && wd_begin(wc, r, q, g) != 0) return UINT32_MAX;
    _Atomic uint64_t *st = sp__slot_state(pool->h, s);
    const uint8_t *img = sp__slot_images(pool->h, s);
    size_t sb = pool->h->sample_bytes;
    while (r->next < g->count) {
        uint64_t v = atomic_load_explicit(&st[r->next], memory_order_acquire);
        if (sp__st_kind(v) != SP__ST_DONE || sp__st_q(v) != q) return r->next;
        sp__hash_bytes(&r->h, img + (size_t)r->next * sb, sb);
        r->next++;
        ++*hashed;
    }
    return UINT32_MAX;
}

void sp__pool_digest_work(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g) {
    struct sp__pool_wd *wd = wc->pool->wd;
    if (!atomic_load_explicit(&wd->on, memory_order_relaxed)) return;
    wd_rec *r = &wd->rec[s];
    _Atomic uint64_t *st = sp__slot_state(wc->pool->h, s);
    uint64_t t0 = sp__trace_t0();
    uint32_t hashed = 0;
    for (;;) {
        uint32_t free_ = 0;
        if (!atomic_compare_exchange_strong(&r->lock, &free_, wc->w + 1)) break;
        uint32_t next = wd_advance(wc, r, q, s, g, &hashed);
#ifdef SEEDPIPE_TEST_HOOKS
        if (hashed && wd->test_kill_q1 == q + 1 && !atomic_exchange(&wd->test_killed, 1))
            raise(SIGKILL);   /* the lock held, the record half-made */
#endif
        atomic_store(&r->lock, 0);
        if (next == UINT32_MAX) break;
        /* seq_cst against the DONE store and CAS of the worker that wrote
         * `next`: it found the lock free after this, or we see its DONE. */
        uint64_t v = atomic_load(&st[next]);
        if (sp__st_kind(v) != SP__ST_DONE || sp__st_q(v) != q) break;
    }
    if (hashed) sp__trace_end(SP_TRACE_DIGEST, t0);
}

sp__hash *sp__pool_digest_claim(sp__worker_ctx *wc, uint64_t q, uint32_t s,
                                const sp__batch_geo *g) {
    struct sp__pool_wd *wd = wc->pool->wd;
    if (!atomic_load_explicit(&wd->on, memory_order_relaxed)) return NULL;
    wd_rec *r = &wd->rec[s];
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong(&r->lock, &free_, wc->w + 1)) return NULL;
    if (r->q1 > q + 1 || wd_begin(wc, r, q, g) != 0) {
        atomic_store(&r->lock, 0);
        return NULL;
    }
    return &r->h;
}

void sp__pool_digest_unclaim(sp__worker_ctx *wc, uint32_t s, uint32_t count, int ok) {
    wd_rec *r = &wc->pool->wd->rec[s];
    if (ok) r->next = count;
    else r->q1 = 0;
    atomic_store(&r->lock, 0);
}

void sp__pool_digest_worker_died(sp_pool *pool, uint32_t w) {
    struct sp__pool_wd *wd = pool->wd;
    if (!wd) return;
    for (uint32_t s = 0; s < pool->R; s++)
        if (atomic_load(&wd->rec[s].lock) == w + 1) {   /* reaped: it writes no more */
            wd->rec[s].q1 = 0;
            atomic_store(&wd->rec[s].lock, 0);
        }
}

/* ---- the consumer's hasher ------------------------------------------------ */

static void pd_begin(sp_pool *pool, sp__pool_pd *pd, uint64_t q) {
    pd->count = expect(pool, q, pd->idx, pd->lab);
    sp__batch_digest_begin(pool->ld, &pd->h, pd->count, pd->idx, pd->lab);
    pd->q = q;
    pd->next = 0;
}

int sp__pool_digest_advance(sp_pool *pool) {
    sp__pool_pd *pd = pool->pd;
    uint64_t q = pool->taken;
    if (!pd || pool->wd || q >= pool->total) return 0;
    if (pd->q != q) pd_begin(pool, pd, q);
    sp__ring_hdr *h = pool->h;
    if (atomic_load_explicit(&h->pd_want, memory_order_relaxed))
        atomic_store_explicit(&h->pd_want, 0, memory_order_relaxed);
    uint32_t s = (uint32_t)(q % pool->R), from = pd->next;
    _Atomic uint64_t *st = sp__slot_state(h, s);
    const uint8_t *img = sp__slot_images(h, s);
    uint64_t t0 = sp__trace_t0();
    while (pd->next < pd->count) {
        uint64_t v = atomic_load_explicit(&st[pd->next], memory_order_acquire);
        if (sp__st_kind(v) != SP__ST_DONE || sp__st_q(v) != q) break;
        sp__hash_bytes(&pd->h, img + (size_t)pd->next * h->sample_bytes, h->sample_bytes);
        pd->next++;
    }
    if (t0 && pd->next != from) {
        sp__batch_geo g = sp__pool_geo_of(pool, q);
        sp__trace_record(SP_TRACE_DIGEST, t0, g.epoch, g.index, SP__TRACE_NONE32,
                         SP__TRACE_NONE64);
    }
    return pd->next != from;
}

int sp__pool_digest_want(sp_pool *pool) {
    sp__pool_pd *pd = pool->pd;
    uint64_t q = pool->taken;
    if (!pd || pool->wd || pd->q != q || pd->next >= pd->count) return 0;
    _Atomic uint64_t *st = &sp__slot_state(pool->h, (uint32_t)(q % pool->R))[pd->next];
    /* seq_cst on both sides (pool_worker.c's work_item: DONE, fence, pd_want):
     * either the worker sees the word and wakes us, or we see DONE. */
    atomic_store(&pool->h->pd_want, sp__pool_pd_want(q, pd->next));
    uint64_t v = atomic_load(st);
    return sp__st_kind(v) == SP__ST_DONE && sp__st_q(v) == q;
}

/* ---- the digest ------------------------------------------------------------ */

/* The view is the last batch taken, as it was expected to be (the
 * consumer's hasher: pd holds that batch; the workers': computed now). */
static int pd_matches(sp_pool *pool, sp__pool_pd *pd, const sp_batch *view) {
    if (pool->taken == 0) return 0;
    uint64_t q = pool->taken - 1;
    if (pool->wd) {
        pd->count = expect(pool, q, pd->idx, pd->lab);
        pd->q = q;
    }
    if (pd->q != q) return 0;
    uint32_t s = (uint32_t)(q % pool->R);
    return view->images == sp__slot_images(pool->h, s) && view->count == pd->count &&
           view->nskipped == 0 && view->nsubstituted == 0 && view->indices && view->labels &&
           memcmp(view->indices, pd->idx, (size_t)pd->count * sizeof *pd->idx) == 0 &&
           memcmp(view->labels, pd->lab, (size_t)pd->count * sizeof *pd->lab) == 0;
}

/* The workers' record of the last batch taken, its state copied into pd->h
 * and pd->next; 0: none (hash from the view). A worker may still hold it
 * for a moment when a scan found the batch complete before that worker's
 * counter bump: it is let finish (a dead one's lock is freed when it is
 * reaped; after WD_WAIT_NS the batch is hashed from the view). */
static int wd_take(sp_pool *pool, sp__pool_pd *pd) {
    uint64_t q = pool->taken - 1, t0 = 0;
    wd_rec *r = &pool->wd->rec[q % pool->R];
    for (;;) {
        uint32_t free_ = 0;
        if (atomic_compare_exchange_strong(&r->lock, &free_, WD_CONSUMER)) break;
        if (!t0) t0 = sp__now_ns();
        else if (sp__now_ns() - t0 > WD_WAIT_NS) return 0;
        sched_yield();
    }
    int ok = r->q1 == q + 1;
    if (ok) {
        memcpy(&pd->h, &r->h, sizeof pd->h);
        pd->next = r->next;
    }
    atomic_store(&r->lock, 0);
    return ok;
}

static void pd_free(sp_pool *pool) {
    if (!pool->pd) return;
    free(pool->pd->idx);
    free(pool->pd->lab);
    free(pool->pd);
    pool->pd = NULL;
}

sp_digest sp_pool_digest(sp_pool *pool, const sp_batch *view) {
    size_t pdsz = (sizeof *pool->pd + 63) & ~(size_t)63;   /* sp__hash is 64-aligned */
    if (!pool->pd && (pool->pd = aligned_alloc(64, pdsz)) != NULL) {
        memset(pool->pd, 0, pdsz);
        pool->pd->idx = calloc(pool->cap, sizeof *pool->pd->idx);
        pool->pd->lab = calloc(pool->cap, sizeof *pool->pd->lab);
        pool->pd->q = UINT64_MAX;
        if (!pool->pd->idx || !pool->pd->lab) pd_free(pool);   /* plain hashing */
        else if (pool->wd) atomic_store(&pool->wd->on, 1);
    }
    if (!view) return (sp_digest){0, 0};   /* only asked */
    sp__pool_pd *pd = pool->pd;
    if (!pd || !pd_matches(pool, pd, view) || (pool->wd && !wd_take(pool, pd))) {
        if (pd) {
            pd->q = UINT64_MAX;
            pd->by[2]++;
        }
        return sp_batch_digest(pool->ld, view);
    }
    pd->by[pool->wd ? 0 : 1]++;
    uint64_t t0 = sp__trace_t0();
    size_t sb = pool->h->sample_bytes;
    for (uint32_t p = pd->next; p < pd->count; p++)
        sp__hash_bytes(&pd->h, view->images + (size_t)p * sb, sb);
    sp_digest d = sp__hash_digest(&pd->h);
    pd->q = UINT64_MAX;
    if (t0) sp__trace_record(SP_TRACE_DIGEST, t0, view->epoch, view->index, SP__TRACE_NONE32,
                             SP__TRACE_NONE64);
    return d;
}

void sp__pool_digest_counts(const sp_pool *pool, uint64_t by[3]) {
    for (int i = 0; i < 3; i++) by[i] = pool->pd ? pool->pd->by[i] : 0;
}

void sp__pool_digest_free(sp_pool *pool) {
    pd_free(pool);
    if (pool->wd) {
        munmap(pool->wd, wd_size(pool));
        pool->wd = NULL;
    }
}

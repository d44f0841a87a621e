/* pool_digest.c - a pool batch's digest, hashed while the consumer waits for
 * the batch (pool.h: sp_pool_digest).
 *
 * HOW IT WORKS
 *
 * The batch digest (loader.h, sp_batch_digest) is XXH3-128 over the batch's
 * count and sample geometry, its indices, its labels, then its images in
 * order. Hashed after the batch is taken, the images (38.5 MB for 64
 * float32 224x224 crops) come back from memory; hashed sample by sample a
 * moment after a worker wrote each, they are still in the caches, and the
 * same digest costs a fraction of the time (bench/RESULTS.md). With two
 * workers on two cores the consumer's hashing takes its CPU from them, so
 * this is where a 2-worker run's speed-up was lost.
 *
 * Once the caller has asked for a digest (the first sp_pool_digest()), the
 * consumer, while sp_pool_next() waits for batch q, computes what the batch
 * should hold (its count, and each position's sample index and label from
 * the epoch order: what a batch without failures holds), hashes that head
 * (sp__batch_digest_begin), then the images of positions 0, 1, 2, ... in
 * order, each as soon as its state word is DONE(q) (pool.c: a DONE
 * position is final until the slot is released). Before it sleeps it
 * names the position it waits for in the ring's pd_want word, and the
 * worker that stores that position's DONE wakes it (otherwise workers
 * wake the consumer only when a batch completes), so each sample is hashed
 * right after it was written, usually on the core that wrote it.
 * sp_pool_digest() of the batch just taken then hashes the positions that
 * were not done yet and finishes, but only when the delivered batch is the
 * one that was hashed: same slot, same count, no skipped and no
 * substituted sample, the same indices and labels (compared whole). Any
 * other batch (a failure in it, a cached batch with its own lists, a view
 * that is not the last one taken, a batch taken without waiting) is hashed
 * from the view, as sp_batch_digest() does. The bytes hashed and their
 * order are the same either way (XXH3 streams: test_hash.c), so the digest
 * is sp_batch_digest()'s of the batch as it was delivered.
 */
#include "pool/pool_shared.h"
#include "common/hash_internal.h"
#include "common/trace_internal.h"

#include <stdlib.h>
#include <string.h>

struct sp__pool_pd {
    uint64_t q;          /* the batch being hashed; UINT64_MAX: none */
    uint32_t next;       /* positions hashed */
    uint32_t count;      /* positions expected */
    uint64_t *idx;       /* cap: expected sample indices */
    int32_t *lab;        /* cap: expected labels */
    sp__hash h;
};

static void pd_begin(sp_pool *pool, sp__pool_pd *pd, uint64_t q) {
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    const sp_dataset *ds = sp_loader_dataset(pool->ld);
    for (uint32_t p = 0; p < g.count; p++) {
        pd->idx[p] = sp__loader_index_at(pool->ld, g.epoch, g.pos0 + p);
        pd->lab[p] = sp_dataset_label(ds, pd->idx[p]);
    }
    sp__batch_digest_begin(pool->ld, &pd->h, g.count, pd->idx, pd->lab);
    pd->q = q;
    pd->next = 0;
    pd->count = g.count;
}

int sp__pool_digest_advance(sp_pool *pool) {
    sp__pool_pd *pd = pool->pd;
    uint64_t q = pool->taken;
    if (!pd || q >= pool->total) return 0;
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
    if (!pd || pd->q != q || pd->next >= pd->count) return 0;
    _Atomic uint64_t *st = &sp__slot_state(pool->h, (uint32_t)(q % pool->R))[pd->next];
    /* seq_cst on both sides (pool.c's work_item: DONE, fence, pd_want):
     * either the worker sees the word and wakes us, or we see DONE. */
    atomic_store(&pool->h->pd_want, sp__pool_pd_want(q, pd->next));
    uint64_t v = atomic_load(st);
    return sp__st_kind(v) == SP__ST_DONE && sp__st_q(v) == q;
}

/* The view is the batch pd hashed, as it was expected to be. */
static int pd_matches(const sp_pool *pool, const sp__pool_pd *pd, const sp_batch *view) {
    if (pool->taken == 0 || pd->q != pool->taken - 1) return 0;
    uint32_t s = (uint32_t)(pd->q % pool->R);
    return view->images == sp__slot_images(pool->h, s) && view->count == pd->count &&
           view->nskipped == 0 && view->nsubstituted == 0 && view->indices && view->labels &&
           memcmp(view->indices, pd->idx, (size_t)pd->count * sizeof *pd->idx) == 0 &&
           memcmp(view->labels, pd->lab, (size_t)pd->count * sizeof *pd->lab) == 0;
}

sp_digest sp_pool_digest(sp_pool *pool, const sp_batch *view) {
    size_t pdsz = (sizeof *pool->pd + 63) & ~(size_t)63;   /* sp__hash is 64-aligned */
    if (!pool->pd && (pool->pd = aligned_alloc(64, pdsz)) != NULL) {
        memset(pool->pd, 0, pdsz);
        pool->pd->idx = calloc(pool->cap, sizeof *pool->pd->idx);
        pool->pd->lab = calloc(pool->cap, sizeof *pool->pd->lab);
        pool->pd->q = UINT64_MAX;
        if (!pool->pd->idx || !pool->pd->lab) sp__pool_digest_free(pool);   /* plain hashing */
    }
    sp__pool_pd *pd = pool->pd;
    if (!pd || !pd_matches(pool, pd, view)) {
        if (pd) pd->q = UINT64_MAX;
        return sp_batch_digest(pool->ld, view);
    }
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

void sp__pool_digest_free(sp_pool *pool) {
    if (!pool->pd) return;
    free(pool->pd->idx);
    free(pool->pd->lab);
    free(pool->pd);
    pool->pd = NULL;
}

/* sampler_block.c - the block:K order: shards permuted, then the samples
 * of each block of K consecutive shards permuted within the block
 * (include/seedpipe/sampler.h, docs/determinism.md section 6a, recomputed
 * by tests/philox_ref.py's BlockPerm).
 *
 * Guarantees: sp_block_perm_at() is a pure function of the table and the
 * position (no allocation, no I/O, no floating point), so it is thread- and
 * fork-safe; the table is a pure function of (sizes, k, key, epoch).
 *
 * HOW IT WORKS
 * The table holds, for the epoch, the permuted shards sigma(t) and the
 * first position start(t) of each place t (prefix sums of the permuted
 * shard sizes, start(S) = n). Position p lies at the last place t with
 * start(t) <= p (a binary search; an empty shard's place has start(t) =
 * start(t + 1), so it is never chosen), in block j = t / K, whose
 * positions are [b0, b1) = [start(jK), start(min(jK + K, S))). Its offset
 * q = p - b0 goes through the keyed Feistel order of m_j = b1 - b0 values
 * (sp_perm_at(), key K_b[1 + j], the same epoch) to u; b0 + u is then
 * located among the block's places the same way, and the sample is that
 * shard's first sample plus the offset into it. Each block's positions
 * are a bijection onto the block's samples (the Feistel order is one), and
 * the blocks partition both the positions and the samples, so the whole is
 * a bijection of [0, n).
 *
 * LIMITATIONS
 * At most 2^32 - 1 shards (a block number j + 1 is a 32-bit key word). The
 * order is as random as the Feistel order within a block and over the
 * shards, no more: samples of different blocks never mix (that is the
 * point), so an epoch's first positions come from K shards only. With
 * K >= S there is one block: a uniform-looking order of all samples, but
 * not the global order's (other keys).
 */
#include "seedpipe/sampler.h"

#include <stdlib.h>
#include "loader/sampler_internal.h"

struct sp_block_perm {
    uint64_t n;           /* samples: the sizes' sum */
    uint32_t nshards, k, epoch;
    sp_key key;           /* K_b */
    uint32_t *shard;      /* [nshards] sigma(t): the shard at place t */
    uint64_t *start;      /* [nshards + 1] first position of place t; start[S] = n */
    uint64_t *first;      /* [nshards] first sample (canonical) of shard s */
};

void sp_block_perm_destroy(sp_block_perm *bp) {
    if (!bp) return;
    free(bp->shard);
    free(bp->start);
    free(bp->first);
    free(bp);
}

int sp_block_perm_create(const uint64_t *sizes, uint32_t nshards, uint32_t k, sp_key k_block,
                         uint32_t epoch, sp_block_perm **out, sp_error *err) {
    *out = NULL;
    if (k == 0) return sp_error_set(err, SP_EINVAL, "block order: K (shards a block) is 0; need >= 1");
    if (nshards == 0 || !sizes)
        return sp_error_set(err, SP_EINVAL, "block order: no shards");
    uint64_t n = 0;
    for (uint32_t s = 0; s < nshards; s++) {
        if (sizes[s] > (UINT64_C(1) << 62) - n)
            return sp_error_set(err, SP_EINVAL, "block order: more than 2^62 samples");
        n += sizes[s];
    }
    if (n == 0) return sp_error_set(err, SP_EINVAL, "block order: the shards hold no sample");
    sp_block_perm *bp = calloc(1, sizeof *bp);
    if (bp) {
        bp->shard = malloc((size_t)nshards * sizeof *bp->shard);
        bp->start = malloc(((size_t)nshards + 1) * sizeof *bp->start);
        bp->first = malloc((size_t)nshards * sizeof *bp->first);
    }
    if (!bp || !bp->shard || !bp->start || !bp->first) {
        sp_block_perm_destroy(bp);
        return sp_error_set(err, SP_ENOMEM, "block order: out of memory (%u shards)", nshards);
    }
    bp->n = n;
    bp->nshards = nshards;
    bp->k = k;
    bp->epoch = epoch;
    bp->key = k_block;
    uint64_t o = 0;
    for (uint32_t s = 0; s < nshards; s++) {
        bp->first[s] = o;
        o += sizes[s];
    }
    sp_perm shards;
    sp_perm_init(&shards, nshards, sp_key_derive(k_block, 0), epoch);
    uint64_t pos = 0;
    for (uint32_t t = 0; t < nshards; t++) {
        uint32_t s = (uint32_t)sp_perm_at(&shards, t);
        bp->shard[t] = s;
        bp->start[t] = pos;
        pos += sizes[s];
    }
    bp->start[nshards] = pos;
    *out = bp;
    return SP_OK;
}

/* The last place t in [lo, hi) with start[t] <= x (start[lo] <= x). */
static uint32_t place_of(const sp_block_perm *bp, uint32_t lo, uint32_t hi, uint64_t x) {
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (bp->start[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

uint64_t sp_block_perm_at(const sp_block_perm *bp, uint64_t pos) {
    if (!bp || pos >= bp->n) return UINT64_MAX;
    uint32_t t = place_of(bp, 0, bp->nshards, pos);
    uint32_t j = t / bp->k;
    uint32_t p0 = j * bp->k;
    uint32_t p1 = bp->nshards - p0 > bp->k ? p0 + bp->k : bp->nshards;
    uint64_t b0 = bp->start[p0], b1 = bp->start[p1];
    sp_perm inner;
    sp_perm_init(&inner, b1 - b0, sp_key_derive(bp->key, j + 1), bp->epoch);
    uint64_t u = b0 + sp_perm_at(&inner, pos - b0);
    uint32_t t2 = place_of(bp, p0, p1, u);
    return bp->first[bp->shard[t2]] + (u - bp->start[t2]);
}

uint64_t sp_block_perm_size(const sp_block_perm *bp) { return bp ? bp->n : 0; }
uint32_t sp__block_perm_epoch(const sp_block_perm *bp) { return bp ? bp->epoch : 0; }

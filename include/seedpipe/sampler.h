/* seedpipe/sampler.h - batching and rank slicing of the epoch order (perm.h).
 *
 * Epoch order: the keyed permutation of perm.h (sp_perm_init(),
 * sp_perm_at()), which this header includes; the block order (sp_block_*
 * below) permutes shards, then the samples within blocks of K shards.
 *
 * Batches: global batch b of epoch e is the positions [b*B, min((b+1)*B, N))
 * of the epoch order; a last partial batch is kept unless drop_last. With
 * `world` ranks (B % world == 0) rank r takes the r-th contiguous slice of
 * B/world positions of each global batch (a slice of a partial last batch may
 * be shorter or empty); the ranks' slices concatenated in rank order are the
 * global batch. A span of consecutive ranks r .. r+m-1 (what one data
 * service per node computes for its local ranks) is one contiguous range of
 * positions too: their slices concatenated (sp__batch_span()).
 *
 * Padded tail (pad_tail, torch's DistributedSampler): the N positions are
 * padded to N' = ceil(N / world) * world, position N + i being position
 * i mod N of the same epoch order; batches are cut from the N' positions
 * (drop_last drops a partial last batch of N'), and the last global batch
 * of cnt = N' - (nb - 1) * B positions is split evenly, cnt / world per
 * rank, so no rank ever gets an empty or a shorter batch than another.
 * world 1: N' = N, nothing changes.
 *
 * Strided layout (strided, the sequential order's, torch's
 * DistributedSampler(shuffle=False) + DataLoader(batch_size=B/world)):
 * rank r's part of global batch b is the positions b*B + r + world*j,
 * j = 0, 1, ... (below b*B + cnt): the global batch dealt out round-robin.
 * Without pad_tail the first cnt % world ranks of a short last batch get
 * one position more than the others.
 *
 * Slots. What sp__batch_span() returns is a range of SLOTS: the positions of
 * global batch b renumbered rank by rank (rank 0's in order, then rank
 * 1's, ...), [b*B, b*B + cnt). In the contiguous layout a slot is its
 * position; sp_batch_position() maps a slot to its epoch position in [0, N)
 * in every layout (padding wrapped). Rank r's slots are
 * [b*B + off(r), b*B + off(r+1)) with off(r) = min(r*B/world, cnt) in the
 * default layout and off(r) = r*a + min(r, m) (cnt = a*world + m) with
 * pad_tail or strided.
 *
 * Pure functions; thread- and fork-safe.
 */
#ifndef SEEDPIPE_SAMPLER_H
#define SEEDPIPE_SAMPLER_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version. loader.h, the front door's, includes it for its types, so it
 * carries no SEEDPIPE_ADVANCED_API fence. */

#include "seedpipe/common.h"
#include "seedpipe/perm.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the block order (docs/determinism.md section 6a) ----------------------------
 * block:K over a dataset of S shards, shard s holding c_s samples numbered
 * shard by shard (shard s: samples [o_s, o_s + c_s), o_s = c_0 + .. +
 * c_{s-1}). With K_b = sp_rng_key(seed, SP_RNG_BLOCK) and its
 * sub-keys K_b[u] = sp_key_derive(K_b, u):
 *   1. the shards are permuted: place t holds shard sigma(t), the order of
 *      this epoch over S under K_b[0] (sp_perm_at());
 *   2. places are grouped into blocks of K consecutive places (block j:
 *      places jK .. min(jK + K, S) - 1, the last block may be smaller), and
 *      the positions of the epoch are laid out place by place: place t
 *      holds the c_sigma(t) positions from start(t) = c_sigma(0) + .. +
 *      c_sigma(t-1); block j holds m_j positions from start(jK);
 *   3. position p of block j (q = p - start(jK)) holds the u-th sample of
 *      the block, u = the order of this epoch over m_j under K_b[1 + j],
 *      the block's samples counted place by place (each shard's in its
 *      canonical order).
 * A bijection of [0, n) like sp_perm_at(), random access, O(log S) per
 * position after an O(S) table per epoch (never O(n)); consecutive
 * positions inside one block read at most K shards. */
typedef struct sp_block_perm sp_block_perm;

/*! sp_block_perm_create() : the block:k order of epoch `epoch` over the
 *  shards of sizes[0 .. nshards-1] samples (zero-sized shards allowed)
 *  under k_block = sp_rng_key(seed, SP_RNG_BLOCK). Computes the
 *  epoch's shard table: O(nshards) time and memory.
 *  @return 0, SP_EINVAL (k 0, no shard, no sample, more than 2^62
 *  samples: naming which), SP_ENOMEM. On failure *out is NULL. */
SP_API int sp_block_perm_create(const uint64_t *sizes, uint32_t nshards, uint32_t k,
                                sp_key k_block, uint32_t epoch, sp_block_perm **out,
                                sp_error *err);
SP_API void sp_block_perm_destroy(sp_block_perm *bp);   /* accepts NULL */
/*! sp_block_perm_at() : the sample at position pos (< n, the sizes' sum);
 *  UINT64_MAX when pos >= n. Pure, thread-safe on a created table. */
SP_API uint64_t sp_block_perm_at(const sp_block_perm *bp, uint64_t pos);
/*! sp_block_perm_size() / _epoch() : n, and the epoch it was created for. */
SP_API uint64_t sp_block_perm_size(const sp_block_perm *bp);

typedef struct sp_batching {
    uint64_t n;           /* dataset size */
    uint32_t batch_size;  /* global batch size B */
    int drop_last;
    uint32_t rank, world; /* world >= 1, rank < world, B % world == 0 */
    int pad_tail;         /* pad N to ceil(N / world) * world (see above); 0: no */
    int strided;          /* ranks take strided positions (see above); 0: contiguous */
} sp_batching;

/*! sp_batching_check() : @return 0 or SP_EINVAL naming the bad field
 *  (n == 0 or n > 2^62, batch_size == 0, world == 0, rank >= world,
 *  batch_size % world != 0). drop_last with n < B is valid: 0 batches. */
SP_API int sp_batching_check(const sp_batching *bt, sp_error *err);
/*! sp_batching_padded() : N', the positions batches are cut from: n, or
 *  with pad_tail ceil(n / world) * world. */
SP_API uint64_t sp_batching_padded(const sp_batching *bt);
/*! sp_batches_per_epoch() : floor or ceil of N' / B per drop_last (N' =
 *  sp_batching_padded(); padding never adds a batch unless drop_last). */
SP_API uint64_t sp_batches_per_epoch(const sp_batching *bt);
/*! sp_batch_slice() : this rank's slots of global batch b:
 *  [*pos, *pos + *count) (positions in the default contiguous layout; map
 *  each through sp_batch_position() in general). count may be 0 for a
 *  short last batch (never with pad_tail), and is 0 for b >=
 *  sp_batches_per_epoch() (then *pos is meaningless). */
SP_API void sp_batch_slice(const sp_batching *bt, uint64_t b, uint64_t *pos, uint32_t *count);
/*! sp_batch_position() : the epoch position (in [0, n)) of slot `slot`:
 *  the slot itself in the contiguous layout, the strided position b*B + r +
 *  world*j of rank r's j-th slot otherwise, and a padded position p >= n
 *  wrapped to p mod n. UINT64_MAX for a slot >= N' (or n == 0). */
SP_API uint64_t sp_batch_position(const sp_batching *bt, uint64_t slot);

#ifdef __cplusplus
}
#endif
#endif

/* seedpipe/sampler.h - the epoch order (keyed Feistel permutation) and batching.
 *
 * Epoch order: a bijection on [0, N) computed one position at a time, O(1)
 * memory, random access, so any worker or rank computes position p of epoch
 * e without building the permutation. It is a balanced Feistel network on
 * the smallest even bit width 2h with 2^(2h) >= N, whose round function is
 * Philox under K_shuffle with counter (right_half, round, epoch, 0), and
 * cycle-walking brings values >= N back into [0, N). docs/determinism.md has
 * the exact spec (HOW IT WORKS).
 *
 * Batches: global batch b of epoch e is the positions [b*B, min((b+1)*B, N))
 * of the epoch order; a last partial batch is kept unless drop_last. With
 * `world` ranks (B % world == 0) rank r takes the r-th contiguous slice of
 * B/world positions of each global batch (a slice of a partial last batch may
 * be shorter or empty); the ranks' slices concatenated in rank order are the
 * global batch.
 *
 * Pure functions; thread- and fork-safe.
 */
#ifndef SEEDPIPE_SAMPLER_H
#define SEEDPIPE_SAMPLER_H

#include "seedpipe/common.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_perm {
    uint64_t n;
    sp_key key;        /* K_shuffle */
    uint32_t epoch;
    unsigned half_bits;
    uint64_t half_mask;
} sp_perm;

/*! sp_perm_init() : the order of epoch `epoch` over n samples (n >= 1,
 *  n <= 2^62) under k_shuffle = sp_stream_key(seed, SP_STREAM_SHUFFLE). */
void sp_perm_init(sp_perm *p, uint64_t n, sp_key k_shuffle, uint32_t epoch);
/*! sp_perm_at() : the sample index at position pos (< n) of the order. */
uint64_t sp_perm_at(const sp_perm *p, uint64_t pos);

typedef struct sp_batching {
    uint64_t n;           /* dataset size */
    uint32_t batch_size;  /* global batch size B */
    int drop_last;
    uint32_t rank, world; /* world >= 1, rank < world, B % world == 0 */
} sp_batching;

/*! sp_batching_check() : @return 0 or SP_EINVAL naming the bad field. */
int sp_batching_check(const sp_batching *bt, sp_error *err);
/*! sp_batches_per_epoch() : floor or ceil of n / B per drop_last. */
uint64_t sp_batches_per_epoch(const sp_batching *bt);
/*! sp_batch_slice() : this rank's positions of global batch b:
 *  [*pos, *pos + *count). count may be 0 for a short last batch. */
void sp_batch_slice(const sp_batching *bt, uint64_t b, uint64_t *pos, uint32_t *count);

#ifdef __cplusplus
}
#endif
#endif

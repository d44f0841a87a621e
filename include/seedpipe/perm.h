/* seedpipe/perm.h - the epoch order: a keyed permutation of [0, n).
 *
 * A bijection on [0, N) computed one position at a time, O(1) memory,
 * random access, so any worker or rank computes position p of epoch e
 * without building the permutation. It is a balanced Feistel network on
 * the smallest even bit width 2h (h >= 1) with 2^(2h) >= N: x splits into
 * L = x >> h and R = x & (2^h - 1); 8 rounds r = 0..7 each do
 *     f = philox4x32_10((R, r, epoch, 0), K_shuffle)[0] & (2^h - 1)
 *     (L, R) = (R, L ^ f)
 * giving (L << h) | R; then cycle-walking (apply again while the value is
 * >= N) brings it back into [0, N). docs/determinism.md section 6 has the
 * exact spec, common/perm.c the HOW IT WORKS and LIMITATIONS, and
 * tests/philox_ref.py recomputes it. The sampler (sampler.h) cuts it into
 * batches and ranks; a mixture (dataset.h) draws its sources' orders with it.
 *
 * Pure functions; thread- and fork-safe.
 */
#ifndef SEEDPIPE_PERM_H
#define SEEDPIPE_PERM_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version. loader.h, the front door's, includes it (through sampler.h) for
 * its types, so it carries no SEEDPIPE_ADVANCED_API fence. */

#include "seedpipe/common.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest order sp_perm_init() takes: 2^62 keeps the Feistel halves
 * within 31 bits. */
#define SP_PERM_MAX_N (UINT64_C(1) << 62)

typedef struct sp_perm {
    uint64_t n;
    sp_key key;        /* K_shuffle */
    uint32_t epoch;
    unsigned half_bits;
    uint64_t half_mask;
} sp_perm;

/*! sp_perm_init() : the order of epoch `epoch` over n samples (n >= 1,
 *  n <= 2^62) under k_shuffle = sp_rng_key(seed, SP_RNG_SHUFFLE).
 *  For n outside [1, 2^62] every sp_perm_at() returns UINT64_MAX. */
SP_API void sp_perm_init(sp_perm *p, uint64_t n, sp_key k_shuffle, uint32_t epoch);
/*! sp_perm_at() : the sample index at position pos (< n) of the order;
 *  UINT64_MAX when pos >= n. At most 4 Feistel passes per position on
 *  average over an epoch (cycle-walking). */
SP_API uint64_t sp_perm_at(const sp_perm *p, uint64_t pos);

#ifdef __cplusplus
}
#endif
#endif

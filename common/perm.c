/* perm.c - the epoch order: a keyed Feistel permutation with cycle-walking
 * (sp_perm_init(), sp_perm_at(); include/seedpipe/perm.h).
 * The sampler (loader/sampler.c) cuts it into batches and ranks; the
 * mixture schedule (dataset/dataset_mix.c) draws with it.
 *
 * Guarantees: both functions are pure functions of their arguments (no
 * state, no allocation, no I/O, no floating point), so they are thread- and
 * fork-safe and gives the same answer on every platform. For 1 <= n <= 2^62
 * the order of an epoch is a bijection on [0, n); position p is computed in
 * O(1) memory without building the permutation. docs/determinism.md section
 * "Epoch order" is the normative spec and tests/philox_ref.py recomputes it.
 *
 * HOW IT WORKS
 * Let h >= 1 be the smallest integer with 4^h >= n, i.e. the domain is the
 * smallest even bit width 2h (at least 2 bits) that holds n values. A value
 * x < 2^(2h) is split into a left half L = x >> h and a right half
 * R = x & (2^h - 1). One Feistel round r (r = 0 .. SP_FEISTEL_ROUNDS-1) is
 *
 *     f      = philox4x32_10((R, r, epoch, 0), K_shuffle)[0] & (2^h - 1)
 *     (L, R) = (R, L ^ f)
 *
 * and after the last round x' = (L << h) | R. Each round is invertible
 * whatever f is (from (L', R') = (R, L ^ f(R)) follow R = L' and
 * L = R' ^ f(L')), so the whole network is a permutation E of [0, 2^(2h)).
 * Because h <= 31, R always fits in one 32-bit counter word, so the fourth
 * counter word is always 0.
 *
 * Cycle-walking restricts E to [0, n): starting at x = pos, apply E at least
 * once and keep applying it while x >= n. The walk stays on the cycle of E
 * through pos, which contains pos itself (< n), so it always stops, and two
 * different positions can never stop at the same value (E is injective and
 * each walk ends at the first in-range element after its start). The walks
 * of all n positions partition the cycles that touch [0, n), so the total
 * number of E evaluations over a whole epoch is at most 2^(2h) < 4n (for
 * n >= 2): on average fewer than 4 Feistel evaluations (32 Philox calls)
 * per position, although one unlucky position may walk longer.
 *
 * LIMITATIONS
 * The order is pseudo-random, not an exactly uniform choice among the n!
 * orders. An 8-round Feistel reaches only a subset of them (for n = 4^h with
 * h >= 2 only even permutations occur), and for very small n the orders are
 * measurably if mildly unequal: even with ideal round functions the 24
 * orders of n = 4 differ by 2.4% in probability, and a 24,000-epoch sample
 * of n = 5 gave chi-square/dof 2.6 over its 120 orders. Where each sample
 * lands (position vs sample) is uniform within sampling noise. Orders of
 * two sizes with the same h are related (the walk just skips different
 * values); the key and the epoch, not n, make orders independent. One
 * position may walk longer than 4 passes; only the epoch average is bounded.
 */
#include "seedpipe/perm.h"

/* The Feistel round count; part of the spec (changing it changes every
 * data order, so it is a format change). */
#define SP_FEISTEL_ROUNDS 8u

void sp_perm_init(sp_perm *p, uint64_t n, sp_key k_shuffle, uint32_t epoch) {
    p->n = n;
    p->key = k_shuffle;
    p->epoch = epoch;
    if (n == 0 || n > SP_PERM_MAX_N) {
        /* Outside the contract: mark invalid; sp_perm_at returns UINT64_MAX. */
        p->half_bits = 0;
        p->half_mask = 0;
        return;
    }
    unsigned h = 1;
    while (h < 31 && (UINT64_C(1) << (2 * h)) < n) h++;
    p->half_bits = h;
    p->half_mask = (UINT64_C(1) << h) - 1;
}

/* One pass of the Feistel network E over [0, 2^(2h)). */
static uint64_t feistel(const sp_perm *p, uint64_t x) {
    const unsigned h = p->half_bits;
    const uint32_t mask = (uint32_t)p->half_mask;
    uint32_t left = (uint32_t)(x >> h);
    uint32_t right = (uint32_t)x & mask;
    for (uint32_t r = 0; r < SP_FEISTEL_ROUNDS; r++) {
        sp_ctr c = {{right, r, p->epoch, 0}};
        uint32_t f = sp_philox4x32_10(c, p->key).c[0] & mask;
        uint32_t next = left ^ f;
        left = right;
        right = next;
    }
    return ((uint64_t)left << h) | right;
}

uint64_t sp_perm_at(const sp_perm *p, uint64_t pos) {
    if (p->half_bits == 0 || pos >= p->n) return UINT64_MAX;
    uint64_t x = pos;
    do {
        x = feistel(p, x);
    } while (x >= p->n);
    return x;
}

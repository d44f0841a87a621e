/* sampler.c - the epoch order (a keyed Feistel permutation with
 * cycle-walking) and batching / rank slicing, one rank or a span of
 * consecutive ranks (include/seedpipe/sampler.h).
 *
 * Guarantees: every function here is a pure function of its arguments (no
 * state, no allocation, no I/O, no floating point), so it is thread- and
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
 * SLOTS, PADDING, STRIDES (docs/determinism.md section 7a)
 * Batches are cut from N' positions (N, or with pad_tail the next multiple
 * of world; position p >= N is p mod N). A batch of cnt positions is handed
 * out as slots: rank 0's positions first, then rank 1's, ..., so a rank or a
 * span of consecutive ranks is always one contiguous range of slots
 * (sp_batch_span()), whatever the layout; rank r's slots start at
 * off(r) = min(r*B/world, cnt) (the default) or r*a + min(r, m) with
 * cnt = a*world + m (pad_tail, strided). sp_batch_position() inverts the
 * numbering: a contiguous slot is its position; strided slot k of batch b
 * is rank r's j-th (r, j from k, a and m), i.e. position b*B + r + world*j.
 * The default layout gives the offsets section 7 always gave, so every
 * existing order, slice and digest is unchanged.
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
#include "seedpipe/sampler.h"

/* The Feistel round count; part of the spec (changing it changes every
 * data order, so it is a format change). */
#define SP_FEISTEL_ROUNDS 8u

/* The largest supported dataset size: 2^62 keeps h <= 31. */
#define SP_PERM_MAX_N (UINT64_C(1) << 62)

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

int sp_batching_check(const sp_batching *bt, sp_error *err) {
    if (!bt) return sp_error_set(err, SP_EINVAL, "batching: NULL batching");
    if (bt->n == 0)
        return sp_error_set(err, SP_EINVAL, "batching: n (dataset size) is 0; need >= 1");
    if (bt->n > SP_PERM_MAX_N)
        return sp_error_set(err, SP_EINVAL, "batching: n (dataset size) %llu exceeds 2^62",
                            (unsigned long long)bt->n);
    if (bt->batch_size == 0)
        return sp_error_set(err, SP_EINVAL, "batching: batch_size is 0; need >= 1");
    if (bt->world == 0)
        return sp_error_set(err, SP_EINVAL, "batching: world is 0; need >= 1");
    if (bt->rank >= bt->world)
        return sp_error_set(err, SP_EINVAL, "batching: rank %u must be < world %u",
                            bt->rank, bt->world);
    if (bt->batch_size % bt->world != 0)
        return sp_error_set(err, SP_EINVAL,
                            "batching: batch_size %u is not divisible by world %u",
                            bt->batch_size, bt->world);
    return SP_OK;
}

uint64_t sp_batching_padded(const sp_batching *bt) {
    if (!bt->pad_tail || bt->world <= 1) return bt->n;
    return (bt->n + bt->world - 1) / bt->world * bt->world;
}

uint64_t sp_batches_per_epoch(const sp_batching *bt) {
    if (bt->batch_size == 0) return 0;
    uint64_t n = sp_batching_padded(bt);
    uint64_t full = n / bt->batch_size;
    return full + (!bt->drop_last && n % bt->batch_size != 0);
}

/* Positions in global batch b (< batches per epoch): B, or a short last. */
static uint64_t batch_count(const sp_batching *bt, uint64_t b) {
    uint64_t first = b * bt->batch_size, np = sp_batching_padded(bt);
    return np - first < bt->batch_size ? np - first : bt->batch_size;
}

/* off(r): where rank r's slots start within a global batch of cnt
 * positions (the "Slots" rule of sampler.h); off(world) = cnt. */
static uint64_t rank_offset(const sp_batching *bt, uint64_t cnt, uint64_t r) {
    if (!bt->pad_tail && !bt->strided) {
        uint64_t o = r * (bt->batch_size / bt->world);
        return o < cnt ? o : cnt;
    }
    uint64_t a = cnt / bt->world, m = cnt % bt->world;
    return r * a + (r < m ? r : m);
}

void sp_batch_slice(const sp_batching *bt, uint64_t b, uint64_t *pos, uint32_t *count) {
    sp_batch_span(bt, b, 1, pos, count);
}

void sp_batch_span(const sp_batching *bt, uint64_t b, uint32_t nranks, uint64_t *pos,
                   uint32_t *count) {
    *pos = bt->n;
    *count = 0;
    if (bt->batch_size == 0 || bt->world == 0 || nranks == 0 ||
        (uint64_t)bt->rank + nranks > bt->world)
        return;
    if (b >= sp_batches_per_epoch(bt)) return;
    /* b < batches <= N' / B + 1, so b * B < N' + B: no overflow for n <= 2^62. */
    uint64_t cnt = batch_count(bt, b);
    uint64_t first = b * bt->batch_size + rank_offset(bt, cnt, bt->rank);
    uint64_t end = b * bt->batch_size + rank_offset(bt, cnt, (uint64_t)bt->rank + nranks);
    *pos = first;
    *count = (uint32_t)(end - first);
}

uint64_t sp_batch_position(const sp_batching *bt, uint64_t slot) {
    uint64_t np = sp_batching_padded(bt);
    if (bt->n == 0 || bt->batch_size == 0 || bt->world == 0 || slot >= np) return UINT64_MAX;
    uint64_t p = slot;
    if (bt->strided) {
        /* Invert the rank-major numbering: slot k of the batch is rank r's
         * j-th, ranks r < m holding a + 1 slots and the others a. */
        uint64_t b = slot / bt->batch_size, g = b * bt->batch_size, k = slot - g;
        uint64_t cnt = batch_count(bt, b), a = cnt / bt->world, m = cnt % bt->world;
        uint64_t r, j;
        if (k < m * (a + 1)) {
            r = k / (a + 1);
            j = k % (a + 1);
        } else {
            r = m + (k - m * (a + 1)) / a;   /* a >= 1 here: k < cnt */
            j = (k - m * (a + 1)) % a;
        }
        p = g + r + bt->world * j;
    }
    return p % bt->n;
}

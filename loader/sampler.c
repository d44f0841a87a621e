/* sampler.c - batching and rank slicing of the epoch order, one rank or a
 * span of consecutive ranks (include/seedpipe/sampler.h). The order itself,
 * a keyed Feistel permutation, is common/perm.c (the mixture schedule of
 * dataset/ uses it too).
 *
 * Guarantees: every function here is a pure function of its arguments (no
 * state, no allocation, no I/O, no floating point), so it is thread- and
 * fork-safe and gives the same answer on every platform.
 *
 * SLOTS, PADDING, STRIDES (docs/determinism.md section 7a)
 * Batches are cut from N' positions (N, or with pad_tail the next multiple
 * of world; position p >= N is p mod N). A batch of cnt positions is handed
 * out as slots: rank 0's positions first, then rank 1's, ..., so a rank or a
 * span of consecutive ranks is always one contiguous range of slots
 * (sp__batch_span()), whatever the layout; rank r's slots start at
 * off(r) = min(r*B/world, cnt) (the default) or r*a + min(r, m) with
 * cnt = a*world + m (pad_tail, strided). sp_batch_position() inverts the
 * numbering: a contiguous slot is its position; strided slot k of batch b
 * is rank r's j-th (r, j from k, a and m), i.e. position b*B + r + world*j.
 * The default layout gives the offsets section 7 always gave, so every
 * existing order, slice and digest is unchanged.
 */
#include "seedpipe/sampler.h"
#include "loader/sampler_internal.h"

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
    sp__batch_span(bt, b, 1, pos, count);
}

void sp__batch_span(const sp_batching *bt, uint64_t b, uint32_t nranks, uint64_t *pos,
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

/* samplers_wor.c - the weighted draws' arithmetic (docs/determinism.md section
 * 13): an exactly uniform integer below S from a position's Philox blocks,
 * and the epochs of weighted draws without replacement
 * (WeightedRandomSampler(replacement=False)).
 *
 * HOW IT WORKS
 * sp__draw_below() is Lemire's multiply-shift with rejection on 64-bit
 * words (two per Philox block, blocks j = 0, 1, ... of the position's
 * counter): exact, integer only. Without replacement position p depends on
 * the draws before it (a drawn sample's weight is removed), so an epoch is
 * computed whole, in order, the first time one of its positions is asked
 * for: a Fenwick tree over the quantized weights gives the first sample
 * whose prefix sum exceeds the draw and removes its weight, both in
 * O(log n); the epoch's M indices are kept (the last few epochs, as
 * loader_order.c keeps its shard tables: a batch, and a pool crossing an
 * epoch's end, asks for at most two epochs at a time).
 *
 * Thread safety: sp__wor_at() takes the object's lock (an epoch's first
 * call computes it under the lock). Fork-safe as the loader is: no lock is
 * held between calls; a forked worker computes the epochs it needs itself,
 * the same indices, since they are a pure function of (weights, key,
 * epoch).
 */
#include "loader/loader_internal.h"

#include <pthread.h>
#include <stdlib.h>

#define WOR_EPOCHS 4   /* epochs' draws kept */

/* hi:lo = a * b, 64 x 64 -> 128 bits. */
static void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo) {
    uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *lo = (mid << 32) | (uint32_t)p00;
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

uint64_t sp__draw_below(sp_key key, uint32_t epoch, uint64_t pos, uint64_t S) {
    uint64_t t = (0 - S) % S;   /* 2^64 mod S */
    for (uint32_t j = 0;; j++) {
        sp_ctr ctr = {{(uint32_t)pos, (uint32_t)(pos >> 32), epoch, j}};
        sp_ctr x = sp_philox4x32_10(ctr, key);
        for (int h = 0; h < 4; h += 2) {
            uint64_t u = (uint64_t)x.c[h] | (uint64_t)x.c[h + 1] << 32, hi, lo;
            mul64(u, S, &hi, &lo);
            if (lo >= t) return hi;   /* else rejected: the next word */
        }
    }
}

struct sp__wor {
    uint64_t *q;         /* [n] the quantized weights Q_i */
    uint64_t n, m;
    sp_key key;
    pthread_mutex_t lock;
    uint64_t *tree;      /* [n + 1] scratch Fenwick tree, under the lock */
    uint32_t *draws[WOR_EPOCHS];
    uint32_t epoch[WOR_EPOCHS];
    uint64_t used[WOR_EPOCHS], tick;
};

void sp__wor_destroy(sp__wor *w) {
    if (!w) return;
    for (int i = 0; i < WOR_EPOCHS; i++) free(w->draws[i]);
    pthread_mutex_destroy(&w->lock);
    free(w->tree);
    free(w->q);
    free(w);
}

int sp__wor_create(const uint64_t *cum, uint64_t n, uint64_t m, sp_key key, const char *what,
                   sp__wor **out, sp_error *err) {
    *out = NULL;
    uint64_t positive = 0;
    for (uint64_t i = 0; i < n; i++) positive += cum[i] != (i ? cum[i - 1] : 0);
    if (m > positive)
        return sp_error_set(err, SP_EINVAL, "%s: num_samples %llu without replacement, but only "
                            "%llu samples have a weight above 0 (after quantizing: "
                            "docs/determinism.md section 13)", what, (unsigned long long)m,
                            (unsigned long long)positive);
    sp__wor *w = calloc(1, sizeof *w);
    if (!w) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    pthread_mutex_init(&w->lock, NULL);
    w->n = n;
    w->m = m;
    w->key = key;
    w->q = malloc((size_t)n * sizeof *w->q);
    w->tree = malloc((size_t)(n + 1) * sizeof *w->tree);
    if (!w->q || !w->tree) {
        sp__wor_destroy(w);
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    }
    for (uint64_t i = 0; i < n; i++) w->q[i] = cum[i] - (i ? cum[i - 1] : 0);
    *out = w;
    return SP_OK;
}

/* The epoch's m draws into out: position p draws r below the remaining
 * weights' sum, takes the first sample whose prefix sum exceeds r, and
 * removes its weight. Under the lock (the tree is shared scratch). */
static void draw_epoch(sp__wor *w, uint32_t epoch, uint32_t *out) {
    uint64_t n = w->n, *t = w->tree, total = 0, top = 1;
    for (uint64_t i = 1; i <= n; i++) t[i] = w->q[i - 1];
    for (uint64_t i = 1; i <= n; i++) {   /* O(n) Fenwick build */
        uint64_t up = i + (i & (0 - i));
        if (up <= n) t[up] += t[i];
        total += w->q[i - 1];
    }
    while (top * 2 <= n) top *= 2;
    for (uint64_t p = 0; p < w->m; p++) {
        uint64_t r = sp__draw_below(w->key, epoch, p, total), at = 0;
        for (uint64_t step = top; step; step >>= 1)   /* the last `at` with prefix(at) <= r */
            if (at + step <= n && t[at + step] <= r) {
                at += step;
                r -= t[at];
            }
        out[p] = (uint32_t)at;   /* sample `at`: prefix(at) <= r < prefix(at + 1) */
        uint64_t q = w->q[at];
        total -= q;
        for (uint64_t i = at + 1; i <= n; i += i & (0 - i)) t[i] -= q;
    }
}

uint64_t sp__wor_at(sp__wor *w, uint32_t epoch, uint64_t pos) {
    pthread_mutex_lock(&w->lock);
    int k = -1, victim = 0;
    for (int i = 0; i < WOR_EPOCHS && k < 0; i++) {
        if (w->draws[i] && w->epoch[i] == epoch) k = i;
        else if (!w->draws[i] || (w->draws[victim] && w->used[i] < w->used[victim])) victim = i;
    }
    if (k < 0) {
        free(w->draws[victim]);
        w->draws[victim] = malloc((size_t)(w->m ? w->m : 1) * sizeof(uint32_t));
        if (w->draws[victim]) {
            draw_epoch(w, epoch, w->draws[victim]);
            w->epoch[victim] = epoch;
            k = victim;
        }
    }
    uint64_t j = UINT64_MAX;
    if (k >= 0) {
        w->used[k] = ++w->tick;
        j = w->draws[k][pos];
    }
    pthread_mutex_unlock(&w->lock);
    return j;
}

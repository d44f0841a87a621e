/* tokens_shuffle.c - the keyed Fisher-Yates shuffle of a token corpus's
 * documents (concat's order, tokens.c) and pieces (docs' classes,
 * tokens_docs.c): docs/determinism.md section 12, tokens_internal.h.
 *
 * One Philox block a step, i = n-1 down to 1: j = (x (i + 1)) >> 64 for the
 * block's low 64 bits x, then a[i] and a[j] swap. A pure function of (a, n,
 * key, epoch, stream); O(n) time, in place.
 */
#include "loader/tokens_internal.h"

/* j for step i (1 <= i < n). */
static inline uint64_t pick(uint64_t i, sp_key k, uint32_t epoch, uint32_t stream) {
    sp_ctr c = {{(uint32_t)i, epoch, stream, 0}};
    sp_ctr o = sp_philox4x32_10(c, k);
    uint64_t x = (uint64_t)o.c[0] | (uint64_t)o.c[1] << 32;
    return (uint64_t)(((unsigned __int128)x * (i + 1)) >> 64);
}

/* The picks are computed AHEAD steps early and their elements prefetched:
 * a large array's swaps are cache misses, and a step's pick depends on i
 * alone, so the misses overlap (3x faster at 10 million). */
#define AHEAD 16

void sp__tokl_shuffle(uint32_t *a, uint64_t n, sp_key k, uint32_t epoch, uint32_t stream) {
    uint64_t js[AHEAD];
    for (uint64_t i = n, m = 0; i-- > 1 && m < AHEAD; m++) {
        js[i % AHEAD] = pick(i, k, epoch, stream);
        __builtin_prefetch(&a[js[i % AHEAD]], 1);
    }
    for (uint64_t i = n; i-- > 1;) {
        uint64_t j = js[i % AHEAD];
        if (i > AHEAD) {   /* step i - AHEAD's pick, into the place step i's leaves */
            uint64_t jn = pick(i - AHEAD, k, epoch, stream);
            js[(i - AHEAD) % AHEAD] = jn;
            __builtin_prefetch(&a[jn], 1);
        }
        uint32_t s = a[i];
        a[i] = a[j];
        a[j] = s;
    }
}

/* tokens_shuffle.c - the keyed Fisher-Yates shuffle of a token corpus's
 * documents (concat's order, tokens.c) and pieces (docs' classes,
 * tokens_docs.c): docs/determinism.md section 12, tokens_internal.h.
 *
 * One Philox block a step, i = n-1 down to 1: j = (x (i + 1)) >> 64 for the
 * block's low 64 bits x, then a[i] and a[j] swap. A pure function of (a, n,
 * key, epoch, stream); O(n) time, in place.
 */
#include "loader/tokens_internal.h"

void sp__tokl_shuffle(uint32_t *a, uint64_t n, sp_key k, uint32_t epoch, uint32_t stream) {
    for (uint64_t i = n; i-- > 1;) {
        sp_ctr c = {{(uint32_t)i, epoch, stream, 0}};
        sp_ctr o = sp_philox4x32_10(c, k);
        uint64_t x = (uint64_t)o.c[0] | (uint64_t)o.c[1] << 32;
        uint64_t j = (uint64_t)(((unsigned __int128)x * (i + 1)) >> 64);
        uint32_t s = a[i];
        a[i] = a[j];
        a[j] = s;
    }
}

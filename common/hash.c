/* hash.c - XXH3-128 streaming on a caller's state (common/hash_internal.h).
 *
 * xxHash is compiled in here (XXH_INLINE_ALL before <xxhash.h>: its public
 * API, made static), so XXH3_state_t is the layout of the header at hand and
 * may live in the caller's sp__hash; the sizes are checked at compile time.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/hash_internal.h"
#include "common/le_internal.h"

#include <string.h>

_Static_assert(sizeof(XXH3_state_t) <= SP__HASH_STATE_BYTES,
               "sp__hash is too small for this xxHash's XXH3_state_t");
_Static_assert(_Alignof(XXH3_state_t) <= 64, "XXH3_state_t wants more than 64-byte alignment");

static XXH3_state_t *state(sp__hash *h) { return (XXH3_state_t *)(void *)h->opaque; }

void sp__hash_init(sp__hash *h) {
    XXH3_state_t *s = state(h);
#ifdef XXH3_INITSTATE
    XXH3_INITSTATE(s);
#endif
    XXH3_128bits_reset(s);
}

void sp__hash_bytes(sp__hash *h, const void *p, size_t n) {
    if (n) XXH3_128bits_update(state(h), p, n);
}

void sp__hash_u64(sp__hash *h, uint64_t v) {
    uint8_t b[8];
    sp__le_put64(b, v);
    XXH3_128bits_update(state(h), b, 8);
}

void sp__hash_str(sp__hash *h, const char *s) {
    size_t n = strlen(s);
    sp__hash_u64(h, n);
    sp__hash_bytes(h, s, n);
}

sp_digest sp__hash_digest(const sp__hash *h) {
    XXH128_hash_t x = XXH3_128bits_digest((const XXH3_state_t *)(const void *)h->opaque);
    sp_digest d = {x.high64, x.low64};
    return d;
}

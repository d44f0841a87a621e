/* hash.c - XXH3-128 (and XXH3-64) streaming on a caller's state
 * (common/hash_internal.h).
 *
 * xxHash is compiled in here (XXH_INLINE_ALL before <xxhash.h>: its public
 * API, made static), so XXH3_state_t is the layout of the header at hand and
 * may live in the caller's sp__hash; the sizes are checked at compile time.
 * This file is built for baseline x86-64 (xxHash's SSE2 loop); a long input
 * (16 KiB or more: a batch's images, 38.5 MB for 64 float32 224x224
 * crops) goes to xxHash's AVX-512 or AVX2 loop where the CPU has them
 * (hash_avx512.c, hash_avx2.c; about 1.3x faster on that batch), through
 * the same state: XXH3 is one function whichever loop computes it.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/cpu_internal.h"
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

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define SP__HASH_X86 1
#endif

int sp__hash_isa(void) { return sp__cpu_level(SP__CPU_AVX512F); }

/* Either width's update at level isa (lowered to what the CPU has). */
static void update(sp__hash *h, const void *p, size_t n, int isa, int w64) {
    if (!n) return;
#ifdef SP__HASH_X86
    if (isa >= 2 && sp__cpu_has(SP__CPU_AVX512F)) {
        sp__hash_update_avx512(h, p, n, w64);
        return;
    }
    if (isa >= 1 && sp__cpu_has(SP__CPU_AVX2)) {
        sp__hash_update_avx2(h, p, n, w64);
        return;
    }
#endif
    (void)isa;
    (void)(w64 ? XXH3_64bits_update(state(h), p, n) : XXH3_128bits_update(state(h), p, n));
}

void sp__hash_bytes_isa(sp__hash *h, const void *p, size_t n, int isa) {
    update(h, p, n, isa, 0);
}

void sp__hash_bytes(sp__hash *h, const void *p, size_t n) {
    if (n >= (16u << 10)) sp__hash_bytes_isa(h, p, n, sp__hash_isa());
    else if (n) XXH3_128bits_update(state(h), p, n);
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

void sp__hash64_init(sp__hash *h) {
    XXH3_state_t *s = state(h);
#ifdef XXH3_INITSTATE
    XXH3_INITSTATE(s);
#endif
    XXH3_64bits_reset(s);
}

void sp__hash64_bytes_isa(sp__hash *h, const void *p, size_t n, int isa) {
    update(h, p, n, isa, 1);
}

uint64_t sp__hash64_digest(const sp__hash *h) {
    return XXH3_64bits_digest((const XXH3_state_t *)(const void *)h->opaque);
}

sp_digest sp__hash_digest(const sp__hash *h) {
    XXH128_hash_t x = XXH3_128bits_digest((const XXH3_state_t *)(const void *)h->opaque);
    sp_digest d = {x.high64, x.low64};
    return d;
}

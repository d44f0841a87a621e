/* hash_avx512.c - XXH3's streaming updates (128 and 64 bits) with xxHash's
 * AVX-512 loop, for the long inputs of common/hash.c (a batch's images: the
 * batch digest; the cache's checksums).
 *
 * The library is built for baseline x86-64; this one file is compiled with
 * -mavx512f (CMakeLists.txt) and xxHash compiled in with its documented
 * tuning macro XXH_VECTOR = XXH_AVX512, through the public API only. Every
 * function xxHash defines here is static (XXH_INLINE_ALL), so no AVX-512 code
 * is reachable but through the function below, which hash.c calls only
 * after its run-time CPU check found AVX-512F (SEEDPIPE_ISA caps it). XXH3 is
 * one function whichever loop computes it, and the state is the same
 * struct (one header): tests/test_hash.c compares every level.
 */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#ifndef __AVX512F__
#error "common/hash_avx512.c must be compiled with -mavx512f (see CMakeLists.txt)"
#endif
#define XXH_VECTOR XXH_AVX512
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/hash_internal.h"

void sp__hash_update_avx512(sp__hash *h, const void *p, size_t n, int w64) {
    XXH3_state_t *s = (XXH3_state_t *)(void *)h->opaque;
    (void)(w64 ? XXH3_64bits_update(s, p, n) : XXH3_128bits_update(s, p, n));
}
#else
typedef int sp__hash_avx512_unused;   /* not x86-64: nothing here */
#endif

/* cache_hash_avx2.c - XXH3's streaming update with its AVX2 loop, for the
 * cache's checksums (cache/cache_hash.h).
 *
 * The library is built for baseline x86-64; this one file is compiled with
 * -mavx2 (CMakeLists.txt) and xxHash compiled in with its documented
 * tuning macro XXH_VECTOR = XXH_AVX2, through the public API only
 * (XXH3_64bits_update, XXH3_128bits_update). Everything xxHash defines here
 * is static (XXH_INLINE_ALL), so no AVX2 code is reachable from elsewhere
 * but through the two functions below, and cache_file.c calls them only
 * after its run-time CPU check found AVX2 (cf_isa() >= 1; SEEDPIPE_ISA
 * caps it). XXH3 is one function whichever loop computes it: the digests
 * are the baseline build's (tests/test_cache_file.c checks every level).
 */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#ifndef __AVX2__
#error "cache/cache_hash_avx2.c must be compiled with -mavx2 (see CMakeLists.txt)"
#endif
#define XXH_VECTOR XXH_AVX2
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cache/cache_hash.h"

#ifdef SP__CACHE_HASH_AVX2
void sp__cache_hash64_update_avx2(XXH3_state_t *st, const void *p, size_t n) {
    (void)XXH3_64bits_update(st, p, n);
}

void sp__cache_hash128_update_avx2(XXH3_state_t *st, const void *p, size_t n) {
    (void)XXH3_128bits_update(st, p, n);
}
#endif

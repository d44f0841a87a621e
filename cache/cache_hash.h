/* cache_hash.h - XXH3's streaming update built for AVX2, for the cache's
 * checksums (cache/cache_hash_avx2.c; used by cache/cache_file.c).
 *
 * Not a public header. Both translation units that include it compile
 * xxHash in (XXH_INLINE_ALL before <xxhash.h>), so XXH3_state_t names the
 * same type in both (XXH_INLINE_ALL renames it) and a state made and reset
 * in cache_file.c is updated in cache_hash_avx2.c. The state's layout does
 * not depend on the vector width (its members have fixed alignments).
 * Only xxHash's public API is used, and XXH_VECTOR, a documented tuning
 * macro.
 */
#ifndef SEEDPIPE_CACHE_HASH_H
#define SEEDPIPE_CACHE_HASH_H

#include <stddef.h>

#ifndef XXH_INLINE_ALL
#error "cache/cache_hash.h: define XXH_INLINE_ALL and include <xxhash.h> first"
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define SP__CACHE_HASH_AVX2 1
/*! sp__cache_hash64_update_avx2(), sp__cache_hash128_update_avx2() :
 *  XXH3_64bits_update() and XXH3_128bits_update() of xxHash compiled with
 *  -mavx2 and XXH_VECTOR XXH_AVX2: the same state, the same digest as the
 *  baseline build's, faster. Call them only when the CPU has AVX2 (the
 *  run-time check in cache_file.c, capped by SEEDPIPE_ISA). */
void sp__cache_hash64_update_avx2(XXH3_state_t *st, const void *p, size_t n);
void sp__cache_hash128_update_avx2(XXH3_state_t *st, const void *p, size_t n);
#endif

#endif

/* hash_internal.h - the library's one set of XXH3 feeding helpers.
 *
 * Every fingerprint, key and digest that combines several fields (dataset
 * and loader fingerprints, batch digests, the stream digest, cache keys, the
 * index's path) streams its bytes through these: integers as 8
 * little-endian bytes, strings as their length (8 bytes) then their bytes.
 * The hash of one buffer alone (a file's or member's content, an IDX image
 * plane, the canonical pipeline text) is XXH3_128bits() of that buffer,
 * called where it is needed. The cache's checksums (cache/cache_file.c)
 * stream through the same state: XXH3-128 (its raw hash) and XXH3-64 (its
 * file hash, sp__hash64_*), at the SIMD level the caller chose. The state
 * lives in the caller's sp__hash (on the stack), so hashing never
 * allocates and no digest can fail or come back as zeros.
 *
 * Not installed, not part of the API. xxHash is compiled into hash.c
 * (XXH_INLINE_ALL, public API only), so the state's layout is that of the
 * header the library was built with, whatever libxxhash is loaded.
 */
#ifndef SEEDPIPE_HASH_INTERNAL_H
#define SEEDPIPE_HASH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"

#define SP__HASH_STATE_BYTES 1024   /* >= sizeof(XXH3_state_t), checked in hash.c */

typedef struct sp__hash {
    _Alignas(64) unsigned char opaque[SP__HASH_STATE_BYTES];
} sp__hash;

void sp__hash_init(sp__hash *h);
void sp__hash_bytes(sp__hash *h, const void *p, size_t n);
void sp__hash_u64(sp__hash *h, uint64_t v);      /* 8 bytes, little-endian */
void sp__hash_str(sp__hash *h, const char *s);   /* sp__hash_u64(strlen), then the bytes */
sp_digest sp__hash_digest(const sp__hash *h);    /* XXH3-128: hi = high64, lo = low64 */

/* sp__hash_bytes() with the SIMD level chosen by the caller (0 baseline,
 * 1 AVX2, 2 AVX-512; a level the CPU lacks is lowered to one it has):
 * sp__hash_bytes() is this at sp__hash_isa(), for inputs of 16 KiB or more.
 * Every level gives the same state (tests/test_hash.c). */
void sp__hash_bytes_isa(sp__hash *h, const void *p, size_t n, int isa);
/* The best level this CPU has, capped by SEEDPIPE_ISA (sp_isa_cap). */
int sp__hash_isa(void);
/* XXH3-64 streaming on an sp__hash (the cache's file hash): reset, feed
 * (the SIMD level as for sp__hash_bytes_isa()), digest. */
void sp__hash64_init(sp__hash *h);
void sp__hash64_bytes_isa(sp__hash *h, const void *p, size_t n, int isa);
uint64_t sp__hash64_digest(const sp__hash *h);
/* hash_avx2.c / hash_avx512.c (x86-64): xxHash's loops for that level
 * (XXH3_128bits_update, or with w64 XXH3_64bits_update); called only
 * through sp__hash_bytes_isa() and sp__hash64_bytes_isa(). */
void sp__hash_update_avx2(sp__hash *h, const void *p, size_t n, int w64);
void sp__hash_update_avx512(sp__hash *h, const void *p, size_t n, int w64);

#endif

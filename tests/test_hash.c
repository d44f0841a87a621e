/* test_hash.c - the library's streaming XXH3-128 and -64 (common/hash_internal.h)
 * gives the same digest at every SIMD level.
 *
 * Long inputs (16 KiB or more: a batch's images) go to xxHash's AVX-512 or
 * AVX2 loop where the CPU has them (common/hash_avx512.c, hash_avx2.c), the
 * rest to the baseline loop, all on one state. Every digest and fingerprint
 * the library has published depends on these being one function:
 *  - test_levels_agree: buffers of many lengths (0 to 3 MiB, around the
 *    16 KiB switch, the stripe and block sizes), fed whole and in random
 *    pieces, mixed with sp__hash_u64 fields, at levels 0, 1 and 2
 *    (sp__hash_bytes_isa) and through sp__hash_bytes: every digest equals
 *    the system libxxhash's one-shot XXH3_128bits of the same bytes (an
 *    implementation built apart from the library's);
 *    and the XXH3-64 of the cache's file hash (sp__hash64_*) the same way
 *    against XXH3_64bits;
 *  - test_isa_cap: SEEDPIPE_ISA=sse2 caps sp__hash_isa() at 0, avx2 at 1
 *    at most.
 * Levels the CPU lacks are lowered to one it has (the test says which).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "check.h"
#include "runner.h"
#include "common/hash_internal.h"

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {   /* splitmix64: the test's own, fixed sequence */
    uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The digest of buf[0, n) fed in pieces (cuts: 0 = whole) at level isa
 * (-1: sp__hash_bytes), after an 8-byte field. */
static sp_digest feed(const uint8_t *buf, size_t n, int cuts, int isa) {
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_u64(&h, n);
    size_t at = 0;
    uint64_t seed = n * 7919u + (uint64_t)cuts;
    for (int c = 0; c < cuts && at < n; c++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = (size_t)((seed >> 33) % (n - at + 1));
        if (isa < 0) sp__hash_bytes(&h, buf + at, k);
        else sp__hash_bytes_isa(&h, buf + at, k, isa);
        at += k;
    }
    if (isa < 0) sp__hash_bytes(&h, buf + at, n - at);
    else sp__hash_bytes_isa(&h, buf + at, n - at, isa);
    return sp__hash_digest(&h);
}

/* XXH3-64 (the cache's file hash) of buf[0, n) in pieces at level isa. */
static uint64_t feed64(const uint8_t *buf, size_t n, int cuts, int isa) {
    sp__hash h;
    sp__hash64_init(&h);
    size_t at = 0;
    uint64_t seed = n * 104729u + (uint64_t)cuts;
    for (int c = 0; c < cuts && at < n; c++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = (size_t)((seed >> 33) % (n - at + 1));
        sp__hash64_bytes_isa(&h, buf + at, k, isa);
        at += k;
    }
    sp__hash64_bytes_isa(&h, buf + at, n - at, isa);
    return sp__hash64_digest(&h);
}

static void test_levels_agree(void) {
    size_t cap = 3u << 20;
    uint8_t *buf = malloc(cap + 8);
    CHECK(buf != NULL);
    for (size_t i = 0; i < cap + 8; i++) buf[i] = (uint8_t)(rnd() >> 56);
    const size_t fixed[] = {0,     1,     7,     16,    63,    64,      65,      128,
                            240,   241,   1023,  1024,  1025,  16383,   16384,   16385,
                            65536, 99999, 1u << 20, (1u << 20) + 13, 3u << 20};
    size_t lens[64];
    int nl = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) lens[nl++] = fixed[i];
    while (nl < 64) lens[nl++] = (size_t)(rnd() % (cap + 1));
    printf("  this CPU: best level %d (0 baseline, 1 AVX2, 2 AVX-512)\n", sp__hash_isa());
    int checked = 0;
    for (int i = 0; i < nl; i++) {
        size_t n = lens[i];
        uint8_t *p = buf + (i % 8);   /* unaligned starts too */
        /* The reference: the 8-byte field then the bytes, one-shot. */
        uint8_t *ref = malloc(n + 8);
        CHECK(ref != NULL);
        for (int k = 0; k < 8; k++) ref[k] = (uint8_t)((uint64_t)n >> (8 * k));
        memcpy(ref + 8, p, n);
        XXH128_hash_t x = XXH3_128bits(ref, n + 8);
        free(ref);
        uint64_t x64 = XXH3_64bits(p, n);
        for (int cuts = 0; cuts <= 5; cuts += 5)
            for (int isa = 0; isa <= 2; isa++) {
                uint64_t d = feed64(p, n, cuts, isa);
                CHECK_MSG(d == x64, "XXH3-64, length %zu, %d cuts, level %d: %016llx, one-shot "
                          "%016llx", n, cuts, isa, (unsigned long long)d,
                          (unsigned long long)x64);
                checked++;
            }
        for (int cuts = 0; cuts <= 5; cuts += 5)
            for (int isa = -1; isa <= 2; isa++) {
                sp_digest d = feed(p, n, cuts, isa);
                CHECK_MSG(d.hi == x.high64 && d.lo == x.low64,
                          "length %zu, %d cuts, level %d: %016llx%016llx, one-shot "
                          "%016llx%016llx", n, cuts, isa, (unsigned long long)d.hi,
                          (unsigned long long)d.lo, (unsigned long long)x.high64,
                          (unsigned long long)x.low64);
                checked++;
            }
    }
    printf("  %d digests equal the one-shot XXH3-128 or XXH3-64\n", checked);
    free(buf);
}

static void test_isa_cap(void) {
    setenv("SEEDPIPE_ISA", "sse2", 1);
    CHECK(sp__hash_isa() == 0);
    setenv("SEEDPIPE_ISA", "avx2", 1);
    CHECK(sp__hash_isa() <= 1);
    unsetenv("SEEDPIPE_ISA");
}

static const sp_case cases[] = {
    SP_CASE(test_levels_agree),
    SP_CASE(test_isa_cap),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

/* test_resize_isa.c - the resize gives the same bytes at every x86 SIMD
 * level and in the portable scalar code.
 *
 * augment/resize.c picks SSE2, AVX2 or AVX-512BW loops at run time; the
 * determinism contract says the instruction set must never change a byte.
 * For 400 random geometries (sizes 1..700, 1 and 3 channels, up- and
 * downscale, windows of the output), each resized with the bilinear and
 * the bicubic filter (whose negative weights make both passes clamp), the
 * output is computed with SEEDPIPE_ISA capped at each level the CPU has,
 * and the digests compared; the SSE2 bilinear outputs also stay within the
 * source's value range (that filter's weights are non-negative). The
 * scalar code (-DSP_NO_SIMD, what non-x86 targets run) is a second copy of
 * augment/resize.c linked into this test with its entry points renamed
 * sp_scalar_* (tests/CMakeLists.txt). Closeness to a float reference is
 * test_ops.c's and test_resize_bicubic.c's job. Levels the CPU lacks are
 * reported and not run.
 * Cases (each its own process): test_sse2_within_source_range (the range
 * bound on the SSE2 pass), test_levels_equal_sse2 (its own SSE2 pass,
 * then AVX2, AVX-512BW and the default dispatch, SEEDPIPE_ISA unset) and
 * test_levels_equal_scalar (every level against the scalar copy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/philox.h"
#include "augment/ops_internal.h"
#include "common/common_internal.h"

static uint32_t next_word(uint32_t *ctr) {
    sp_ctr c = {{(*ctr)++, 0x5a5a, 0, 0}};
    sp_key k = {{1, 2}};
    return sp_philox4x32_10(c, k).c[0];
}

/* The scalar copy of sp__image_resize_filter (tests/CMakeLists.txt). */
int sp_scalar_image_resize_filter(const sp_image *src, int out_w, int out_h, int filter,
                                  sp_image *out);

typedef int (*resize_fn)(const sp_image *, int, int, int, sp_image *);

/* One pass of all geometries and both filters with `fn`; returns the
 * XXH3-64 of all outputs. */
static uint64_t run_all(int check_ref, resize_fn fn) {
    uint32_t ctr = 0;
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (int t = 0; t < 400; t++) {
        int ch = (next_word(&ctr) & 1) ? 3 : 1;
        int sw = 1 + (int)sp_uniform_int(next_word(&ctr), 700);
        int sh = 1 + (int)sp_uniform_int(next_word(&ctr), 500);
        int ow = 1 + (int)sp_uniform_int(next_word(&ctr), 400);
        int oh = 1 + (int)sp_uniform_int(next_word(&ctr), 400);
        sp_image src, out;
        CHECK(sp__image_alloc(&src, sw, sh, ch) == 0);
        /* smooth content plus noise, so both paths and rounding matter */
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < sw * ch; x++)
                src.data[(size_t)y * src.stride + x] =
                    (uint8_t)((x * 7 + y * 3 + (next_word(&ctr) & 31)) & 255);
        sp_image cub;
        CHECK(fn(&src, ow, oh, SP_RESAMPLE_BILINEAR, &out) == 0);
        CHECK(fn(&src, ow, oh, SP_RESAMPLE_BICUBIC, &cub) == 0);
        CHECK(out.width == ow && out.height == oh && out.channels == ch);
        CHECK(cub.width == ow && cub.height == oh && cub.channels == ch);
        for (int y = 0; y < oh; y++) {
            XXH3_64bits_update(st, out.data + (size_t)y * out.stride, (size_t)ow * ch);
            XXH3_64bits_update(st, cub.data + (size_t)y * cub.stride, (size_t)ow * ch);
        }
        sp_image_free(&cub);
        if (check_ref && t % 20 == 0 && sw * sh < 40000) {
            /* independent float reference of the same separable triangle
             * filter is in test_ops.c; here a cheap sanity bound: output
             * values lie within the source's min..max */
            uint8_t lo = 255, hi = 0;
            for (int y = 0; y < sh; y++)
                for (int x = 0; x < sw * ch; x++) {
                    uint8_t v = src.data[(size_t)y * src.stride + x];
                    lo = v < lo ? v : lo;
                    hi = v > hi ? v : hi;
                }
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow * ch; x++) {
                    uint8_t v = out.data[(size_t)y * out.stride + x];
                    CHECK(v >= lo && v <= hi);
                }
        }
        sp_image_free(&src);
        sp_image_free(&out);
    }
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* The bytes of one pass at ISA level `name` (SEEDPIPE_ISA; NULL: unset, the
 * default dispatch). */
static uint64_t run_at(const char *name, int check_ref) {
    if (name) setenv("SEEDPIPE_ISA", name, 1);
    else unsetenv("SEEDPIPE_ISA");
    uint64_t h = run_all(check_ref, sp__image_resize_filter);
    unsetenv("SEEDPIPE_ISA");
    return h;
}

/* 1 when the CPU has level i (0 sse2, 1 avx2, 2 avx512bw). */
static int cpu_has(int i) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return i == 0 ? __builtin_cpu_supports("sse2")
         : i == 1 ? __builtin_cpu_supports("avx2") : __builtin_cpu_supports("avx512bw");
#else
    return i == 0;
#endif
}

/* The SSE2 pass, with the source-range bound on its outputs. */
static void test_sse2_within_source_range(void) {
    if (!cpu_has(0)) {
        printf("level sse2: not on this CPU, not run\n");
        return;
    }
    uint64_t h = run_at("sse2", 1);
    printf("level sse2: outputs digest %016llx\n", (unsigned long long)h);
}

/* Every level the CPU has, and the default dispatch (SEEDPIPE_ISA unset),
 * against the SSE2 pass, computed here (each case is its own process). A
 * level the CPU lacks is reported and not run (the case passes, as before). */
static void test_levels_equal_sse2(void) {
    static const char *const levels[] = {"sse2", "avx2", "avx512"};
    uint64_t ref = 0;
    int ran = 0;
    for (int i = 0; i < 3; i++) {
        if (!cpu_has(i)) {
            printf("level %s: not on this CPU, not run\n", levels[i]);
            continue;
        }
        uint64_t h = run_at(levels[i], 0);
        printf("level %s: outputs digest %016llx\n", levels[i], (unsigned long long)h);
        if (ran == 0) ref = h;
        CHECK_MSG(h == ref, "level %s gives other bytes than sse2", levels[i]);
        ran++;
    }
    uint64_t h = run_at(NULL, 0);
    printf("default dispatch: outputs digest %016llx\n", (unsigned long long)h);
    CHECK(h == ref);
    printf("resize: %d SIMD level(s) give identical bytes\n", ran);
}

/* Every level the CPU has, and the default dispatch, against the scalar
 * code built from the same source. */
static void test_levels_equal_scalar(void) {
    static const char *const levels[] = {"sse2", "avx2", "avx512"};
    uint64_t ref = run_all(0, sp_scalar_image_resize_filter);
    printf("scalar: outputs digest %016llx\n", (unsigned long long)ref);
    for (int i = 0; i < 3; i++) {
        if (!cpu_has(i)) {
            printf("level %s: not on this CPU, not run\n", levels[i]);
            continue;
        }
        uint64_t h = run_at(levels[i], 0);
        CHECK_MSG(h == ref, "level %s gives other bytes than the scalar code", levels[i]);
    }
    CHECK(run_at(NULL, 0) == ref);
}

static const sp_case cases[] = {
    SP_CASE(test_sse2_within_source_range),
    SP_CASE(test_levels_equal_sse2),
    SP_CASE(test_levels_equal_scalar),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

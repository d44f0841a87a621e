/* test_write_output.c - the float32, bfloat16 and float16 output writer
 * gives the tables' bytes on every path (augment/pipeline_write.c).
 *
 * The writer turns a sample's 8-bit pixels into float32 values
 * ((v / 255 - mean) / std, each step rounded to float, or v / 255 without
 * normalize; the 16-bit kinds round those to nearest even), read from
 * per-channel tables or, on CPUs with AVX-512F or AVX2, computed 16 or 8
 * pixels at a time with reciprocal products corrected by fused
 * multiply-adds (augment/write_kernels.c), a path
 * the pipeline takes only after checking, when it is built, that it gives
 * all 256 values of each table. These cases hold the output to a reference
 * computed here, value by value, from the formula (not from the library's
 * tables; the 16-bit roundings are the library's sp__to_bf16() and
 * sp__to_f16(), which test_pipeline checks against a rounding in double),
 * over random means and stds, widths 1 to 80 and 224, both layouts, with
 * and without a pending flip, outputs at every alignment within a cache
 * line (the writer aligns its stores and writes the columns outside whole
 * blocks from the tables) and samples large enough for the non-temporal
 * stores:
 *   test_checked_path_taken   the check passes for ImageNet's normalize and
 *                             for v / 255, every kind, at each kernel
 *                             level the CPU has (the others are named);
 *   test_default_matches_reference   the default dispatch, every value;
 *   test_avx2_matches_reference      the same with SEEDPIPE_ISA=avx2 (the
 *                                    AVX2 kernel where the CPU has it);
 *   test_tables_match_reference      the same with SEEDPIPE_ISA=sse2 (the
 *                                    table path on every x86-64).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/philox.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"
#include "augment/write_kernels_internal.h"

static uint32_t next_word(uint32_t *ctr) {
    sp_ctr c = {{(*ctr)++, 0x77, 0, 0}};
    sp_key k = {{3, 4}};
    return sp_philox4x32_10(c, k).c[0];
}

/* The reference value of byte v on a channel with mean m and std s. */
static float ref_value(int v, int norm, float m, float s) {
    float x = (float)v / 255.0f;
    if (!norm) return x;
    x = x - m;
    x = x / s;
    return x;
}

static sp_pipeline *parse(const char *spec) {
    sp_pipeline *p = NULL;
    sp_error err;
    if (sp_pipeline_parse(spec, &p, &err) != 0) {
        fprintf(stderr, "%s: %s\n", spec, err.msg);
        CHECK(0);
    }
    return p;
}

static void test_checked_path_taken(void) {
    unsetenv("SEEDPIPE_ISA");
    sp_pipeline *p = parse("normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225");
    int level = sp__write_kernel_level();
    if (level == 0)
        printf("no AVX2 (with FMA, F16C) or AVX-512F here: the tables are the only path\n");
    for (int l = 1; l <= 2; l++) {
        if (l > level) {
            printf("kernel level %d: not on this CPU, not checked\n", l);
            CHECK(!p->out_simd[l][0] && !p->out_simd[l][1]);
            continue;
        }
        CHECK(p->out_simd[l][0] == 7);   /* normalize: float32, bfloat16, float16 computed */
        CHECK(p->out_simd[l][1] == 7);   /* v / 255 (no normalize, or skip_normalize) */
        printf("kernel level %d: gives every table value, each kind\n", l);
    }
    sp_pipeline_destroy(p);
}

/* One pass over random cases; returns the number of values compared. */
static size_t run_cases(void) {
    uint32_t ctr = 0;
    size_t compared = 0;
    for (int t = 0; t < 120; t++) {
        float mean[3], sd[3];
        for (int c = 0; c < 3; c++) {
            mean[c] = (float)((double)(next_word(&ctr) % 20001) / 10000.0 - 0.5);
            /* std from 1e-3 to about 3, log-spread */
            sd[c] = (float)(0.001 * (double)(1u << (next_word(&ctr) % 12)) *
                            (1.0 + (double)(next_word(&ctr) % 1000) / 1000.0));
        }
        if (t == 0) {   /* ImageNet's */
            const float m0[3] = {0.485f, 0.456f, 0.406f}, s0[3] = {0.229f, 0.224f, 0.225f};
            memcpy(mean, m0, sizeof mean);
            memcpy(sd, s0, sizeof sd);
        }
        char spec[256];
        snprintf(spec, sizeof spec, "normalize mean=%.9g,%.9g,%.9g std=%.9g,%.9g,%.9g",
                 (double)mean[0], (double)mean[1], (double)mean[2], (double)sd[0],
                 (double)sd[1], (double)sd[2]);
        sp_pipeline *pn = parse(spec);
        /* the values the parser keeps (printed with 9 digits: the same floats) */
        int W = t % 5 == 4 ? 224 : 1 + (int)(next_word(&ctr) % 80);
        int H = t % 5 == 4 ? 224 : 1 + (int)(next_word(&ctr) % 5);
        sp_image im;
        CHECK(sp__image_alloc(&im, W, H, 3) == 0);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < 3 * W; x++)
                im.data[(size_t)y * im.stride + (size_t)x] = (uint8_t)next_word(&ctr);
        size_t n = (size_t)W * (size_t)H * 3;
        size_t cap = ((n + 16) * 4 + 63) & ~(size_t)63;   /* aligned_alloc: a multiple */
        uint8_t *buf = aligned_alloc(64, cap);
        CHECK(buf != NULL);
        for (int variant = 0; variant < 24; variant++) {
            int flip = variant & 1, nhwc = (variant >> 1) & 1, norm = !((variant >> 2) & 1);
            static const sp_dtype kinds[3] = {SP_DTYPE_FLOAT32, SP_DTYPE_BFLOAT16,
                                              SP_DTYPE_FLOAT16};
            sp_dtype dt = kinds[variant >> 3];
            size_t es = dt == SP_DTYPE_FLOAT32 ? 4 : 2;
            int off = (int)(next_word(&ctr) % 16);   /* elements past a cache line's start */
            uint8_t *out = buf + (size_t)off * es;
            sp_run_opts o = {dt, nhwc ? SP_LAYOUT_NHWC : SP_LAYOUT_NCHW, !norm, NULL};
            memset(buf, 0xff, (n + 16) * 4);
            sp__write_output(pn, &im, flip, &o, out);
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int c = 0; c < 3; c++) {
                        int sx = flip ? W - 1 - x : x;
                        float want = ref_value(im.data[(size_t)y * im.stride + 3 * (size_t)sx +
                                                       (size_t)c],
                                               norm, mean[c], sd[c]);
                        size_t e = nhwc ? ((size_t)y * (size_t)W + (size_t)x) * 3 + (size_t)c
                                        : ((size_t)c * (size_t)H + (size_t)y) * (size_t)W +
                                              (size_t)x;
                        uint32_t got = 0, exp = 0;
                        if (es == 4) {
                            memcpy(&got, out + e * 4, 4);
                            memcpy(&exp, &want, 4);
                        } else {
                            uint16_t g16;
                            memcpy(&g16, out + e * 2, 2);
                            got = g16;
                            exp = dt == SP_DTYPE_BFLOAT16 ? sp__to_bf16(want) : sp__to_f16(want);
                        }
                        if (got != exp) {
                            fprintf(stderr,
                                    "case %d (%dx%d, dtype %d, flip %d, %s, %s, offset %d): "
                                    "value (%d,%d,%d) is %08x, want %08x (%.9g)\n",
                                    t, W, H, (int)dt, flip, nhwc ? "NHWC" : "NCHW",
                                    norm ? "normalize" : "v/255", off, x, y, c, got, exp,
                                    (double)want);
                            CHECK(0);
                        }
                        compared++;
                    }
            /* nothing written outside the sample */
            for (size_t i = 0; i < (size_t)off * es; i++) CHECK(buf[i] == 0xff);
            for (size_t i = ((size_t)off + n) * es; i < (n + 16) * 4; i++) CHECK(buf[i] == 0xff);
        }
        free(buf);
        sp_image_free(&im);
        sp_pipeline_destroy(pn);
    }
    return compared;
}

static void test_default_matches_reference(void) {
    unsetenv("SEEDPIPE_ISA");
    size_t n = run_cases();
    printf("default dispatch (kernel level %d): %zu values equal the reference\n",
           sp__write_kernel_level(), n);
}

static void test_avx2_matches_reference(void) {
    setenv("SEEDPIPE_ISA", "avx2", 1);
    if (sp__write_kernel_level() < 1) {
        unsetenv("SEEDPIPE_ISA");
        printf("no AVX2 with FMA and F16C here: not run\n");
        return;
    }
    size_t n = run_cases();
    unsetenv("SEEDPIPE_ISA");
    printf("AVX2 kernel (SEEDPIPE_ISA=avx2): %zu values equal the reference\n", n);
}

static void test_tables_match_reference(void) {
    setenv("SEEDPIPE_ISA", "sse2", 1);
    size_t n = run_cases();
    unsetenv("SEEDPIPE_ISA");
    printf("tables (SEEDPIPE_ISA=sse2): %zu values equal the reference\n", n);
}

static const sp_case cases[] = {
    SP_CASE(test_checked_path_taken),
    SP_CASE(test_default_matches_reference),
    SP_CASE(test_avx2_matches_reference),
    SP_CASE(test_tables_match_reference),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

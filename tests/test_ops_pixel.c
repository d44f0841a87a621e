/* test_ops_pixel.c - the pixel-value ops (ops.h: invert, posterize,
 * solarize, autocontrast, equalize, sharpness, hue) and their pipeline ops.
 * Cases: test_luts (invert, posterize, solarize against closed forms, on
 * views and on 1 and 3 channels), test_equalize_autocontrast (reference
 * loops written from torchvision's formulas, and torchvision's own output
 * on a fixed image), test_sharpness (a double-precision reference
 * convolution, torchvision's output), test_hue (torchvision's output),
 * test_pipeline_ops (spec, canonical form, errors, the keyed draws, p=0 and
 * p=1), test_jitter_hue (the 24 orders and the hue draw), test_random_apply
 * (the span, nesting, refusals), test_explain.
 * The torchvision outputs were computed once with torchvision 0.14's
 * functional API on a uint8 tensor (the image below, CHW -> HWC here);
 * bindings/python/tests/test_pixel_ops_parity.py compares on real photos.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "image_check.h"
#include "pipeline_check.h"
#include "runner.h"
#include "seedpipe/pipeline.h"
#include "augment/ops_internal.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"

/* The 4x6 RGB image (HWC) the torchvision outputs below were computed on. */
static const uint8_t TV_IN[72] = {
    10, 10, 10, 255, 0, 0, 0, 0, 255, 200, 200, 10, 67, 250, 227, 211, 6, 195, 151, 19, 72,
    103, 188, 83, 92, 44, 176, 185, 191, 1, 142, 69, 192, 23, 56, 144, 72, 152, 118, 89, 183,
    159, 110, 181, 93, 42, 112, 172, 218, 251, 92, 136, 189, 252, 167, 192, 71, 230, 34, 23,
    68, 56, 10, 176, 201, 233, 127, 206, 35, 135, 38, 192};
/* The same with R // 3 + 40 and G // 2 + 7 (an image whose range is not full). */
static const uint8_t TV_IN2[72] = {
    43, 12, 10, 125, 7, 0, 40, 7, 255, 106, 107, 10, 62, 132, 227, 110, 10, 195, 90, 16, 72,
    74, 101, 83, 70, 29, 176, 101, 102, 1, 87, 41, 192, 47, 35, 144, 64, 83, 118, 69, 98, 159,
    76, 97, 93, 54, 63, 172, 112, 132, 92, 85, 101, 252, 95, 103, 71, 116, 24, 23, 62, 35, 10,
    98, 107, 233, 82, 110, 35, 85, 26, 192};
static const uint8_t TV_HUE_P01[72] = {   /* F.adjust_hue(TV_IN, 0.1) */
    10, 10, 10, 255, 153, 0, 153, 0, 255, 86, 200, 10, 67, 163, 250, 211, 5, 71, 151, 45, 18,
    82, 188, 126, 171, 44, 176, 71, 191, 1, 192, 69, 168, 62, 22, 144, 72, 137, 152, 89, 150,
    183, 93, 181, 128, 50, 42, 172, 122, 251, 91, 152, 136, 252, 94, 192, 71, 230, 158, 22, 45,
    68, 9, 185, 176, 233, 35, 206, 45, 192, 37, 156};
static const uint8_t TV_HUE_M037[72] = {   /* F.adjust_hue(TV_IN, -0.37) */
    10, 10, 10, 0, 56, 255, 56, 255, 0, 158, 10, 200, 250, 186, 67, 5, 211, 181, 18, 101, 151,
    188, 82, 126, 44, 176, 62, 155, 1, 191, 69, 192, 114, 82, 144, 22, 152, 100, 72, 183, 138,
    89, 181, 93, 129, 140, 172, 42, 249, 91, 251, 214, 252, 136, 190, 71, 192, 22, 57, 230, 43,
    9, 68, 213, 233, 176, 206, 35, 164, 37, 192, 101};
static const uint8_t TV_SHARP_17[72] = {   /* F.adjust_sharpness(TV_IN, 1.7) */
    10, 10, 10, 255, 0, 0, 0, 0, 255, 200, 200, 10, 67, 250, 227, 211, 6, 195, 151, 19, 72,
    105, 237, 71, 78, 6, 210, 217, 213, 0, 144, 31, 215, 23, 56, 144, 72, 152, 118, 73, 215,
    192, 104, 204, 86, 0, 95, 201, 255, 255, 66, 136, 189, 252, 167, 192, 71, 230, 34, 23, 68,
    56, 10, 176, 201, 233, 127, 206, 35, 135, 38, 192};
static const uint8_t TV_AUTO2[72] = {   /* F.autocontrast(TV_IN2) */
    9, 10, 10, 255, 0, 0, 0, 0, 255, 198, 204, 10, 66, 255, 227, 210, 6, 195, 150, 18, 72, 102,
    191, 83, 90, 44, 176, 183, 193, 1, 141, 69, 192, 21, 57, 144, 72, 155, 118, 87, 185, 159,
    108, 183, 93, 42, 114, 172, 216, 255, 92, 135, 191, 252, 165, 195, 71, 228, 34, 23, 66, 57,
    10, 174, 204, 233, 126, 210, 35, 135, 38, 192};

static sp_image tv_image(const uint8_t *hwc) {
    sp_image im;
    CHECK(sp__image_alloc(&im, 6, 4, 3) == 0);
    for (int y = 0; y < 4; y++) memcpy(im.data + (size_t)y * im.stride, hwc + y * 18, 18);
    return im;
}

static int equals_hwc(const sp_image *im, const uint8_t *hwc) {
    for (int y = 0; y < im->height; y++)
        if (memcmp(im->data + (size_t)y * im->stride, hwc + (size_t)y * (size_t)im->width * 3,
                   (size_t)im->width * 3))
            return 0;
    return 1;
}

static void test_luts(void) {
    for (int c = 1; c <= 3; c += 2) {
        sp_image a = make_image(37, 11, c), b;
        CHECK(sp__image_copy(&a, &b) == 0);
        sp__image_invert(&b);
        for (int y = 0; y < 11; y++)
            for (int x = 0; x < 37; x++)
                for (int k = 0; k < c; k++) CHECK(px(&b, x, y, k) == 255 - px(&a, x, y, k));
        /* in place on a view: the columns beyond its width are never touched */
        uint8_t pad = a.data[37 * c];
        sp__image_invert(&a);
        sp__image_invert(&a);
        CHECK(a.data[37 * c] == pad && same_pixels(&a, &a));
        for (int bits = 0; bits <= 8; bits++) {
            sp_image_free(&b);
            CHECK(sp__image_copy(&a, &b) == 0);
            sp__image_posterize(&b, bits);
            for (int y = 0; y < 11; y++)
                for (int x = 0; x < 37; x++) {
                    int v = px(&a, x, y, 0), q = bits == 0 ? 0 : (v >> (8 - bits)) << (8 - bits);
                    CHECK(px(&b, x, y, 0) == q);
                }
        }
        static const double thr[] = {0, 1, 100.5, 128, 254.9999999, 255};
        for (int t = 0; t < 6; t++) {
            sp_image_free(&b);
            CHECK(sp__image_copy(&a, &b) == 0);
            sp__image_solarize(&b, thr[t]);
            for (int y = 0; y < 11; y++)
                for (int x = 0; x < 37; x++) {
                    int v = px(&a, x, y, c - 1);
                    /* 254.9999999 is 255 in float32, as torch compares */
                    int inv = t == 4 ? v >= 255 : v >= thr[t];
                    CHECK(px(&b, x, y, c - 1) == (inv ? 255 - v : v));
                }
        }
        sp_image_free(&b);
        sp_image_free(&a);
    }
}

/* torchvision's _scale_channel, written from its source (int64 tensors). */
static void ref_equalize(const sp_image *src, sp_image *dst, int k) {
    int64_t hist[256] = {0}, n = 0;
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++, n++) hist[px(src, x, y, k)]++;
    int64_t last = 0;
    for (int v = 0; v < 256; v++)
        if (hist[v]) last = hist[v];
    int64_t step = (n - last) / 255, lut[256], cum = 0;
    for (int v = 0; v < 256; v++) {
        lut[v] = step ? (cum + step / 2) / step : v;
        if (lut[v] > 255) lut[v] = 255;
        cum += hist[v];
    }
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++)
            dst->data[(size_t)y * dst->stride + (size_t)x * (size_t)dst->channels + (size_t)k] =
                (uint8_t)lut[px(src, x, y, k)];
}

static void test_equalize_autocontrast(void) {
    for (int c = 1; c <= 3; c += 2) {
        sp_image a = make_image(301, 47, c), b, r;
        /* squeeze the values so that the histogram is uneven and the range short */
        for (int y = 0; y < a.height; y++)
            for (int i = 0; i < a.width * c; i++) {
                uint8_t *p = a.data + (size_t)y * a.stride + i;
                *p = (uint8_t)(30 + (*p * *p) / 400);
            }
        CHECK(sp__image_copy(&a, &b) == 0 && sp__image_copy(&a, &r) == 0);
        sp__image_equalize(&b);
        for (int k = 0; k < c; k++) ref_equalize(&a, &r, k);
        CHECK(same_pixels(&b, &r));
        sp_image_free(&b);
        CHECK(sp__image_copy(&a, &b) == 0);
        sp__image_autocontrast(&b);
        int lo = 255, hi = 0;
        for (int y = 0; y < a.height; y++)
            for (int x = 0; x < a.width; x++) {
                int v = px(&a, x, y, 0);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        for (int y = 0; y < a.height; y++)
            for (int x = 0; x < a.width; x++) {   /* within one of the exact value */
                double e = (px(&a, x, y, 0) - lo) * 255.0 / (hi - lo);
                CHECK(fabs(px(&b, x, y, 0) - floor(e)) <= 1 && px(&b, x, y, 0) <= e + 1e-9);
            }
        sp_image_free(&a);
        sp_image_free(&b);
        sp_image_free(&r);
    }
    sp_image t = tv_image(TV_IN2);
    sp__image_autocontrast(&t);
    CHECK(equals_hwc(&t, TV_AUTO2));
    sp__image_equalize(&t);   /* 24 pixels: step 0, unchanged (torchvision too) */
    CHECK(equals_hwc(&t, TV_AUTO2));
    memset(t.data, 77, t.stride * 4);   /* one value: autocontrast keeps it */
    sp__image_autocontrast(&t);
    CHECK(t.data[0] == 77 && t.data[17] == 77);
    sp_image_free(&t);
}

static void test_sharpness(void) {
    static const double factors[] = {0.0, 0.3, 1.0, 1.7, 2.0, 9.5};
    for (int c = 1; c <= 3; c += 2)
        for (int f = 0; f < 6; f++) {
            sp_image a = make_image(29, 13, c), b;
            CHECK(sp__image_copy(&a, &b) == 0);
            CHECK(sp__image_sharpness(&b, factors[f]) == 0);
            for (int y = 0; y < 13; y++)
                for (int x = 0; x < 29; x++)
                    for (int k = 0; k < c; k++) {
                        double d = px(&a, x, y, k);
                        if (x > 0 && y > 0 && x < 28 && y < 12) {
                            double s = 4 * d;   /* 5 v + 8 neighbours - v */
                            for (int dy = -1; dy <= 1; dy++)
                                for (int dx = -1; dx <= 1; dx++) s += px(&a, x + dx, y + dy, k);
                            d = rint(s / 13.0);
                        }
                        double e = factors[f] * px(&a, x, y, k) + (1 - factors[f]) * d;
                        e = e < 0 ? 0 : e > 255 ? 255 : e;
                        /* the float32 blend truncates: within one below the exact value */
                        int o = px(&b, x, y, k);
                        CHECK_MSG(o <= e + 1e-3 && o >= floor(e) - 1, "f=%g x=%d y=%d: %d vs %g",
                                  factors[f], x, y, o, e);
                        if (factors[f] == 1.0 || factors[f] == 2.0 || factors[f] == 0.0)
                            CHECK(o == (int)floor(e));   /* exact in float32 */
                    }
            sp_image_free(&a);
            sp_image_free(&b);
        }
    sp_image t = tv_image(TV_IN);
    CHECK(sp__image_sharpness(&t, 1.7) == 0);
    CHECK(equals_hwc(&t, TV_SHARP_17));
    sp_image_free(&t);
    sp_image s = make_image(2, 9, 3), s0;   /* 2 wide: unchanged, as torchvision */
    CHECK(sp__image_copy(&s, &s0) == 0);
    CHECK(sp__image_sharpness(&s, 3.0) == 0);
    CHECK(same_pixels(&s, &s0));
    sp_image_free(&s);
    sp_image_free(&s0);
}

static void test_hue(void) {
    sp_image t = tv_image(TV_IN);
    sp__adjust_hue(&t, 0.1f);
    CHECK(equals_hwc(&t, TV_HUE_P01));
    sp_image_free(&t);
    t = tv_image(TV_IN);
    sp__adjust_hue(&t, (float)-0.37);
    CHECK(equals_hwc(&t, TV_HUE_M037));
    sp_image_free(&t);
    sp_image g = make_image(9, 5, 1), g0;   /* gray: unchanged */
    CHECK(sp__image_copy(&g, &g0) == 0);
    sp__adjust_hue(&g, 0.25f);
    CHECK(same_pixels(&g, &g0));
    sp_image_free(&g);
    sp_image_free(&g0);
    /* a full turn and back stays within one level of the input */
    sp_image a = make_image(40, 7, 3), b;
    CHECK(sp__image_copy(&a, &b) == 0);
    sp__adjust_hue(&b, 0.5f);
    sp__adjust_hue(&b, -0.5f);
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 40 * 3; x++)
            CHECK(abs(px(&a, x / 3, y, x % 3) - px(&b, x / 3, y, x % 3)) <= 2);
    sp_image_free(&a);
    sp_image_free(&b);
}

/* ---- the pipeline ops ------------------------------------------------------ */

static sp_sample_ctx ctx_for(uint64_t seed, uint32_t epoch, uint32_t sample) {
    sp_sample_ctx c = {sp_rng_key(seed, SP_RNG_AUGMENT), epoch, sample};
    return c;
}

/* Run p on raw pixels into a packed HWC image (same size as the input). */
static sp_image run_raw(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_image *raw) {
    sp_image out;
    CHECK(sp__image_alloc(&out, raw->width, raw->height, raw->channels) == 0);
    sp_sample_src src = {"raw", NULL, 0, raw};
    sp_run_opts o = {SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 0, NULL};
    sp_error err;
    sp_error_clear(&err);
    size_t n = (size_t)raw->width * (size_t)raw->height * (size_t)raw->channels;
    CHECK(out.stride == (size_t)raw->width * (size_t)raw->channels);
    CHECK_OK(sp__pipeline_run_checked(p, ctx, &src, &o, out.data, n, &err), &err);
    return out;
}

/* Op i of test_pipeline_ops' specs[], called directly on e. */
static void apply_op(int i, sp_image *e) {
    switch (i) {
    case 0: sp__image_invert(e); break;
    case 1: sp__image_posterize(e, 2); break;
    case 2: sp__image_solarize(e, 99); break;
    case 3: sp__image_autocontrast(e); break;
    case 4: sp__image_equalize(e); break;
    default: CHECK(sp__image_sharpness(e, 2.5) == 0); break;
    }
}

static void test_pipeline_ops(void) {
    expect_canonical("invert | posterize bits=3 | solarize threshold=128 | autocontrast p=1 | "
                     "equalize p=0.25 | sharpness factor=1.5",
                     "invert p=0.5 | posterize bits=3 p=0.5 | solarize threshold=128 p=0.5 | "
                     "autocontrast p=1 | equalize p=0.25 | sharpness factor=1.5 p=0.5");
    expect_canonical("color_jitter hue=0.1", "color_jitter brightness=1,1 contrast=1,1 "
                     "saturation=1,1 hue=-0.1,0.1");
    expect_canonical("color_jitter hue=-0,0.2", "color_jitter brightness=1,1 contrast=1,1 "
                     "saturation=1,1 hue=0,0.2");
    expect_canonical("color_jitter hue=0", "color_jitter brightness=1,1 contrast=1,1 "
                     "saturation=1,1");   /* as before: hue=0 is no hue */
    expect_spec_error("posterize", "missing required key \"bits\"");
    expect_spec_error("posterize bits=9", "[0, 8]");
    expect_spec_error("posterize bits=2.5", "[0, 8]");
    expect_spec_error("solarize threshold=256", "[0, 255]");
    expect_spec_error("solarize p=1", "missing required key \"threshold\"");
    expect_spec_error("sharpness factor=-1", "\"-1\"");
    expect_spec_error("invert p=2", "[0, 1]");
    expect_spec_error("equalize bits=2", "unknown key \"bits\" (known: p)");
    expect_spec_error("color_jitter hue=0.6", "hue");
    expect_spec_error("color_jitter hue=0.3,0.2", "hue");
    expect_spec_error("color_jitter hue=-0.7,0.2", "hue");

    /* p=0: identity; p=1: the function; otherwise block 0's c[0] of op k decides */
    static const char *const specs[] = {"invert", "posterize bits=2", "solarize threshold=99",
                                        "autocontrast", "equalize", "sharpness factor=2.5"};
    sp_image img = make_image(33, 21, 3);
    for (int i = 0; i < 6; i++) {
        char spec[128];
        snprintf(spec, sizeof spec, "hflip p=0 | %s p=0", specs[i]);
        sp_pipeline *p = parse_ok(spec);
        sp_sample_ctx ctx = ctx_for(3, 0, 7);
        sp_image o = run_raw(p, &ctx, &img);
        CHECK(same_pixels(&o, &img));
        sp_image_free(&o);
        sp_pipeline_destroy(p);
        snprintf(spec, sizeof spec, "hflip p=0 | %s p=0.5", specs[i]);
        p = parse_ok(spec);
        int applied = 0;
        for (uint32_t s = 0; s < 40; s++) {
            ctx = ctx_for(3, 1, s);
            o = run_raw(p, &ctx, &img);
            sp_image e;
            CHECK(sp__image_copy(&img, &e) == 0);
            sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, s, 1);
            if (sp_u01d(d.c[0]) < 0.5) {
                applied++;
                apply_op(i, &e);
            }
            CHECK_MSG(same_pixels(&o, &e), "%s sample %u", specs[i], s);
            sp_image_free(&o);
            sp_image_free(&e);
        }
        CHECK(applied > 5 && applied < 35);
        sp_pipeline_destroy(p);
        /* a pending (deferred) horizontal flip commutes with each of them */
        snprintf(spec, sizeof spec, "hflip p=1 | %s p=1", specs[i]);
        p = parse_ok(spec);
        sp_pipeline *f = parse_ok("hflip p=1");
        ctx = ctx_for(3, 0, 1);
        sp_image flipped = run_raw(f, &ctx, &img), e;
        o = run_raw(p, &ctx, &img);
        CHECK(sp__image_copy(&flipped, &e) == 0);
        apply_op(i, &e);
        CHECK_MSG(same_pixels(&o, &e), "hflip then %s", specs[i]);
        sp_image_free(&o);
        sp_image_free(&e);
        sp_image_free(&flipped);
        sp_pipeline_destroy(f);
        sp_pipeline_destroy(p);
    }
    sp_image_free(&img);
}

/* The permutation number r of (0, 1, 2, 3), lexicographic (test's own). */
static void nth_perm(int r, int out[4]) {
    int n = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    if (a == b || a == c || a == d || b == c || b == d || c == d) continue;
                    if (n++ == r) { out[0] = a; out[1] = b; out[2] = c; out[3] = d; return; }
                }
}

static void test_jitter_hue(void) {
    sp_image img = make_image(31, 17, 3);
    sp_pipeline *p = parse_ok("color_jitter brightness=0.4 contrast=0.4 saturation=0.4 hue=0.3");
    int seen[24] = {0};
    for (uint32_t s = 0; s < 400; s++) {
        sp_sample_ctx ctx = ctx_for(11, 2, s);
        sp_image o = run_raw(p, &ctx, &img), e;
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 0, s, 2);
        sp_ctr h = sp_sample_draw(ctx.k_augment, 1, 0, s, 2);
        int r = (int)(((uint64_t)d.c[0] * 24) >> 32), order[4];
        seen[r]++;
        nth_perm(r, order);
        float hue = (float)(-0.3 + 0.6 * sp_u01d(h.c[0]));
        CHECK(sp__image_copy(&img, &e) == 0);
        for (int t = 0; t < 4; t++) {
            int fn = order[t];
            if (fn == 3) { sp__adjust_hue(&e, hue); continue; }
            int32_t fq = sp__factor_q12(0.6 + 0.8 * sp_u01d(d.c[1 + fn]));
            if (fn == 0) sp__adjust_brightness(&e, fq);
            else if (fn == 1) sp__adjust_contrast(&e, fq);
            else sp__adjust_saturation(&e, fq);
        }
        CHECK_MSG(same_pixels(&o, &e), "sample %u order %d", s, r);
        sp_image_free(&o);
        sp_image_free(&e);
    }
    for (int r = 0; r < 24; r++) CHECK(seen[r] > 3);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static void test_random_apply(void) {
    expect_canonical("random_apply ops=2 | invert p=1 | grayscale p=1",
                     "random_apply ops=2 p=0.5 | invert p=1 | grayscale p=1");
    expect_spec_error("random_apply p=0.5", "missing required key \"ops\"");
    expect_spec_error("random_apply ops=0 | invert", "[1, 63]");
    expect_spec_error("random_apply ops=2 | invert", "past the last op");
    expect_spec_error("random_apply ops=1 | resize size=8,8", "crop or resize");
    expect_spec_error("random_apply ops=1 | normalize mean=0 std=1", "normalize");
    expect_spec_error("random_apply ops=2 | random_apply ops=2 | invert | equalize",
                 "end after");
    /* applied iff u01(block 0 of op 1) < p: then ops 2 and 3 run, else neither */
    sp_pipeline *p = parse_ok("hflip p=0 | random_apply ops=3 p=0.6 | solarize threshold=50 p=1 "
                              "| random_apply ops=1 p=0.5 | invert p=1 | posterize bits=2 p=1");
    sp_image img = make_image(19, 12, 3);
    int seen[3] = {0};
    for (uint32_t s = 0; s < 64; s++) {
        sp_sample_ctx ctx = ctx_for(8, 0, s);
        sp_image o = run_raw(p, &ctx, &img), e;
        CHECK(sp__image_copy(&img, &e) == 0);
        int outer = sp_u01d(sp_sample_draw(ctx.k_augment, 0, 1, s, 0).c[0]) < 0.6;
        int inner = sp_u01d(sp_sample_draw(ctx.k_augment, 0, 3, s, 0).c[0]) < 0.5;
        if (outer) {
            sp__image_solarize(&e, 50);
            if (inner) sp__image_invert(&e);
        }
        sp__image_posterize(&e, 2);   /* op 5: after both spans, always */
        seen[outer + (outer && inner)]++;
        CHECK_MSG(same_pixels(&o, &e), "sample %u outer %d inner %d", s, outer, inner);
        sp_image_free(&o);
        sp_image_free(&e);
    }
    CHECK(seen[0] > 5 && seen[1] > 5 && seen[2] > 5);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static void test_explain(void) {
    sp_pipeline *p = parse_ok("posterize bits=4 p=1 | sharpness factor=2 p=0 | "
                              "color_jitter hue=0.2,0.2");
    sp_sample_ctx ctx = ctx_for(1, 0, 0);
    char buf[1024];
    sp__pipeline_explain(p, &ctx, 64, 48, SP_FORMAT_PNG, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "0 posterize bits=4: applied (u=") &&
              strstr(buf, "1 sharpness factor=2: not applied") &&
              strstr(buf, "2 color_jitter: brightness 1.0000 contrast 1.0000 saturation 1.0000 "
                          "hue 0.200000, order "),
              "%s", buf);
    sp_pipeline_destroy(p);
    p = parse_ok("random_apply ops=1 p=0 | invert p=1 | random_apply ops=1 p=1 | equalize p=1");
    sp__pipeline_explain(p, &ctx, 64, 48, SP_FORMAT_PNG, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "0 random_apply: ops 1..1 skipped (u=") &&
              strstr(buf, "1: skipped (random_apply 0)") &&
              strstr(buf, "2 random_apply: ops 3..3 applied (u=") &&
              strstr(buf, "3 equalize: applied") && !strstr(buf, "1 invert"),
              "%s", buf);
    sp_pipeline_destroy(p);
}

static const sp_case cases[] = {
    SP_CASE(test_luts),
    SP_CASE(test_equalize_autocontrast),
    SP_CASE(test_sharpness),
    SP_CASE(test_hue),
    SP_CASE(test_pipeline_ops),
    SP_CASE(test_jitter_hue),
    SP_CASE(test_random_apply),
    SP_CASE(test_explain),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

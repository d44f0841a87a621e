/* test_ops.c - the pixel ops (ops.h) and detmath (detmath.h) against
 * independent expectations: reference loops, closed-form values, a
 * floating-point reference resampler, and libm (allowed in tests only).
 * Cases: test_detmath, test_detmath_vectors, test_crop_flip, test_gray, test_color, test_resize,
 * test_resample_window, test_center_offset, test_rrc; each is its own
 * process, so each draws its random inputs from the same fixed start of
 * rnd()'s sequence.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "image_check.h"
#include "runner.h"
#include "seedpipe/detmath.h"
#include "augment/detmath_internal.h"
#include "augment/ops_internal.h"
#include "common/common_internal.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;   /* every case starts here */
static uint64_t rnd(void) {   /* xorshift64*, test-local */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double rnd01(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

static int64_t ulp_key(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? INT64_MIN - i : i;
}
static int64_t ulp_diff(double a, double b) {
    int64_t d = ulp_key(a) - ulp_key(b);
    return d < 0 ? -d : d;
}

static void test_detmath(void) {
    int64_t worst_log = 0, worst_exp = 0;
    for (int i = 0; i < 400000; i++) {
        double x;
        switch (i % 4) {
        case 0: x = exp((rnd01() - 0.5) * 1400.0); break;        /* all magnitudes */
        case 1: x = 0.5 + 1.5 * rnd01(); break;                    /* near 1 */
        case 2: x = 1.0 + (rnd01() - 0.5) * 1e-6; break;           /* very near 1 */
        default: x = rnd01() * 1e-308; break;                      /* subnormal range */
        }
        if (x <= 0) continue;
        int64_t d = ulp_diff(sp_det_log(x), log(x));
        if (d > worst_log) worst_log = d;
        CHECK_MSG(d <= 1, "log(%.17g): det %.17g libm %.17g", x, sp_det_log(x), log(x));
    }
    for (int i = 0; i < 400000; i++) {
        double x;
        switch (i % 3) {
        case 0: x = -745.0 + 1454.0 * rnd01(); break;
        case 1: x = (rnd01() - 0.5) * 2.0; break;
        default: x = (rnd01() - 0.5) * 1e-7; break;
        }
        int64_t d = ulp_diff(sp_det_exp(x), exp(x));
        if (d > worst_exp) worst_exp = d;
        CHECK_MSG(d <= 1, "exp(%.17g): det %.17g libm %.17g", x, sp_det_exp(x), exp(x));
    }
    printf("detmath: worst ulp log %lld exp %lld\n", (long long)worst_log, (long long)worst_exp);
    CHECK(sp_det_log(1.0) == 0.0);
    CHECK(sp_det_exp(0.0) == 1.0);
    CHECK(isinf(sp_det_log(0.0)) && sp_det_log(0.0) < 0);
    CHECK(isnan(sp_det_log(-1.0)));
    CHECK(isinf(sp_det_log(INFINITY)));
    CHECK(isnan(sp_det_log(NAN)) && isnan(sp_det_exp(NAN)));
    CHECK(sp_det_exp(1000.0) == INFINITY && sp_det_exp(-1000.0) == 0.0);
    CHECK(sp_det_exp(-INFINITY) == 0.0 && sp_det_exp(INFINITY) == INFINITY);
    CHECK(ulp_diff(sp_det_exp(sp_det_log(4.0 / 3.0)), 4.0 / 3.0) <= 1);
    /* Python's round(): ties to even. */
    static const double in[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999999999999996, 3.7, -3.7, 7.0};
    static const double ex[] = {0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 4.0, -4.0, 7.0};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK_MSG(sp__det_round_half_even(in[i]) == ex[i], "round(%g)", in[i]);
    for (int i = 0; i < 100000; i++) {
        double x = (rnd01() - 0.5) * 1e6;
        if (i % 2) x = floor(x) + 0.5;
        CHECK(sp__det_round_half_even(x) == rint(x));   /* default mode: ties to even */
    }
}

/* det_log / det_exp bit for bit: the test vectors of docs/determinism.md
 * section 5a, and the FNV-1a digest of the results on a seeded input
 * sequence (splitmix64) that tests/test_detmath_ref.py recomputes with the
 * independent Python reference (tests/detmath_ref.py) and compares with the
 * same two constants. Any NaN result hashes as 7ff8000000000000. */
static uint64_t dm_bits(double x) { uint64_t u; memcpy(&u, &x, sizeof u); return u; }
static double dm_double(uint64_t u) { double x; memcpy(&x, &u, sizeof x); return x; }
static uint64_t dm_result(double y) { return y != y ? 0x7ff8000000000000ull : dm_bits(y); }

static uint64_t dm_sm_state;
static uint64_t dm_splitmix(void) {
    uint64_t z = (dm_sm_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t dm_fnv(uint64_t h, uint64_t b) {
    for (int i = 0; i < 8; i++) {
        h ^= (b >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static double dm_log_input(int i) {   /* as log_inputs() in test_detmath_ref.py */
    uint64_t r = dm_splitmix();
    double u = (double)(r >> 11) * 0x1p-53;
    switch (i % 5) {
    case 0: return dm_double(r >> 1);
    case 1: return 0.05 + 19.95 * u;
    case 2: return 1.0 + (u - 0.5) * 0x1p-17;
    case 3: return ldexp(1.35 + 0.1 * u, (int)(r & 63) - 32);
    default: return dm_double(r);
    }
}

static double dm_exp_input(int i) {   /* as exp_inputs() in test_detmath_ref.py */
    uint64_t r = dm_splitmix();
    double u = (double)(r >> 11) * 0x1p-53;
    switch (i % 5) {
    case 0: return -750.0 + 1462.0 * u;
    case 1: return (u - 0.5) * 2.0;
    case 2: {
        double x = ldexp(1.0 + u, (int)(r & 63) - 50);
        return ((r >> 6) & 1) ? -x : x;
    }
    case 3: {
        int k = (int)((r & 4095) % 2100) - 1076;
        return ((double)k + 0.5) * 0.6931471805599453 + (u - 0.5) * 1e-9;
    }
    default:
        switch (r & 3) {
        case 0: return 0x1.62e42fefa39efp+9 + (u - 0.5) * 1e-11;
        case 1: return -0x1.74910d52d3051p+9 + (u - 0.5) * 1e-11;
        case 2: return -708.0 - 37.0 * u;
        default: return dm_double(r);
        }
    }
}

#define DM_ANY_NAN 0xffffffffffffffffull

static void test_detmath_vectors(void) {
    /* {x bits, result bits}; DM_ANY_NAN means any NaN. docs/determinism.md 5a. */
    static const uint64_t log_v[][2] = {
        {0x3ff0000000000000ull, 0x0000000000000000ull}, {0x4000000000000000ull, 0x3fe62e42fefa39efull},
        {0x3fe0000000000000ull, 0xbfe62e42fefa39efull}, {0x3fe8000000000000ull, 0xbfd269621134db92ull},
        {0x3ff55555547044b7ull, 0x3fd269620e85a9b7ull}, {0x4024000000000000ull, 0x40026bb1bbb55516ull},
        {0x3ff0000000000001ull, 0x3cafffffffffffffull}, {0x3fefffff00000000ull, 0xbea0000040000155ull},
        {0x3ff68f5c28f5c28full, 0x3fd5fd5fabe64084ull}, {0x3ff6a09e667f3bcdull, 0x3fd62e42fefa39f0ull},
        {0x00003739a252b281ull, 0xc086459f44103e87ull}, {0x0000000000000001ull, 0xc0874385446d71c3ull},
        {0x7fefffffffffffffull, 0x40862e42fefa39efull}, {0x0000000000000000ull, 0xfff0000000000000ull},
        {0x8000000000000000ull, 0xfff0000000000000ull}, {0xbff0000000000000ull, DM_ANY_NAN},
        {0x7ff0000000000000ull, 0x7ff0000000000000ull}, {0x7ff8000000000000ull, DM_ANY_NAN},
    };
    static const uint64_t exp_v[][2] = {
        {0x0000000000000000ull, 0x3ff0000000000000ull}, {0x3ff0000000000000ull, 0x4005bf0a8b14576aull},
        {0xbff0000000000000ull, 0x3fd78b56362cef38ull}, {0x3fd0000000000000ull, 0x3ff48b5e3c3e8186ull},
        {0x3fe0000000000000ull, 0x3ffa61298e1e069cull}, {0xbfe0000000000000ull, 0x3fe368b2fc6f960aull},
        {0xbfd269621134db92ull, 0x3fe8000000000000ull}, {0x3fd269620e85a9b7ull, 0x3ff55555547044b7ull},
        {0x3e112e0be826d695ull, 0x3ff000000044b830ull}, {0x3ddb7cdfd9d7bdbbull, 0x3ff000000006df38ull},
        {0x4024000000000000ull, 0x40d5829dcf950560ull}, {0xc034800000000000ull, 0x3e157a3afeed00abull},
        {0x40862e42fefa39efull, 0x7fefffffffffff2aull}, {0x40862e51eb851eb8ull, 0x7ff0000000000000ull},
        {0xc086240000000000ull, 0x000e6cf6d08897acull}, {0xc087490a3d70a3d7ull, 0x0000000000000001ull},
        {0xc087500000000000ull, 0x0000000000000000ull}, {0x7ff0000000000000ull, 0x7ff0000000000000ull},
        {0xfff0000000000000ull, 0x0000000000000000ull}, {0x7ff8000000000000ull, DM_ANY_NAN},
    };
    for (size_t i = 0; i < sizeof log_v / sizeof log_v[0]; i++) {
        double y = sp_det_log(dm_double(log_v[i][0]));
        if (log_v[i][1] == DM_ANY_NAN) CHECK_MSG(y != y, "det_log(%016llx) is not NaN", (unsigned long long)log_v[i][0]);
        else CHECK_MSG(dm_bits(y) == log_v[i][1], "det_log(%016llx) = %016llx, spec %016llx",
                       (unsigned long long)log_v[i][0], (unsigned long long)dm_bits(y),
                       (unsigned long long)log_v[i][1]);
    }
    for (size_t i = 0; i < sizeof exp_v / sizeof exp_v[0]; i++) {
        double y = sp_det_exp(dm_double(exp_v[i][0]));
        if (exp_v[i][1] == DM_ANY_NAN) CHECK_MSG(y != y, "det_exp(%016llx) is not NaN", (unsigned long long)exp_v[i][0]);
        else CHECK_MSG(dm_bits(y) == exp_v[i][1], "det_exp(%016llx) = %016llx, spec %016llx",
                       (unsigned long long)exp_v[i][0], (unsigned long long)dm_bits(y),
                       (unsigned long long)exp_v[i][1]);
    }
    /* The seeded sequence: 20,000 inputs per function. */
    uint64_t hl = 0xcbf29ce484222325ull, he = 0xcbf29ce484222325ull;
    dm_sm_state = 0x5EED0001;
    for (int i = 0; i < 20000; i++) hl = dm_fnv(hl, dm_result(sp_det_log(dm_log_input(i))));
    dm_sm_state = 0x5EED0002;
    for (int i = 0; i < 20000; i++) he = dm_fnv(he, dm_result(sp_det_exp(dm_exp_input(i))));
    printf("detmath vectors: det_log digest %016llx det_exp digest %016llx\n",
           (unsigned long long)hl, (unsigned long long)he);
    CHECK_MSG(hl == 0x4be06560f10e4bc4ull, "det_log digest %016llx (test_detmath_ref.py: 4be06560f10e4bc4)",
              (unsigned long long)hl);
    CHECK_MSG(he == 0x00a88dcc7e852f25ull, "det_exp digest %016llx (test_detmath_ref.py: 00a88dcc7e852f25)",
              (unsigned long long)he);
}

static void fill_random(sp_image *im) {
    for (int y = 0; y < im->height; y++)
        for (size_t i = 0; i < (size_t)im->width * (size_t)im->channels; i++)
            im->data[(size_t)y * im->stride + i] = (uint8_t)rnd();
}

static void test_crop_flip(void) {
    for (int c = 1; c <= 3; c += 2) {
        sp_image big, ref, view;
        CHECK(sp__image_alloc(&big, 23, 17, c) == 0);
        fill_random(&big);
        CHECK(sp__image_crop(&big, 3, 2, 11, 9, &view) == 0);   /* a strided view */
        CHECK(view.width == 11 && view.height == 9 && px(&view, 0, 0, 0) == px(&big, 3, 2, 0));
        CHECK(px(&view, 10, 8, c - 1) == px(&big, 13, 10, c - 1));
        CHECK(sp__image_crop(&big, 20, 0, 4, 1, &view) == SP_EINVAL);
        CHECK(sp__image_crop(&big, 0, 0, 0, 1, &view) == SP_EINVAL);
        CHECK(sp__image_crop(&big, 3, 2, 11, 9, &view) == 0);
        CHECK(sp__image_copy(&view, &ref) == 0);
        sp__image_hflip(&view);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 11; x++)
                for (int k = 0; k < c; k++) CHECK(px(&view, x, y, k) == px(&ref, 10 - x, y, k));
        sp__image_hflip(&view);
        CHECK(same_pixels(&view, &ref));
        sp__image_vflip(&view);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 11; x++)
                for (int k = 0; k < c; k++) CHECK(px(&view, x, y, k) == px(&ref, x, 8 - y, k));
        sp__image_vflip(&view);
        CHECK(same_pixels(&view, &ref));
        /* pixels outside the view are untouched */
        CHECK(sp__image_crop(&big, 0, 0, 3, 17, &view) == 0);
        sp_image_free(&ref);
        sp_image_free(&big);
    }
}

static void test_gray(void) {
    sp_image a, g1, g3;
    CHECK(sp__image_alloc(&a, 16, 16, 3) == 0);
    fill_random(&a);
    CHECK(sp__image_alloc(&g1, 16, 16, 1) == 0 && sp__image_alloc(&g3, 16, 16, 3) == 0);
    CHECK(sp__image_to_gray(&a, &g1) == 0 && sp__image_to_gray(&a, &g3) == 0);
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 16; x++) {
            uint32_t r = px(&a, x, y, 0), g = px(&a, x, y, 1), b = px(&a, x, y, 2);
            uint8_t l = (uint8_t)((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
            CHECK(px(&g1, x, y, 0) == l);
            CHECK(px(&g3, x, y, 0) == l && px(&g3, x, y, 1) == l && px(&g3, x, y, 2) == l);
        }
    CHECK(sp__image_to_gray(&a, &a) == 0);      /* in place, 3 -> 3 */
    CHECK(same_pixels(&a, &g3));
    CHECK(sp_luma601(255, 255, 255) == 255 && sp_luma601(0, 0, 0) == 0);
    sp_image_free(&a);
    sp_image_free(&g1);
    sp_image_free(&g3);
}

static void test_color(void) {
    CHECK(sp__factor_q12(1.0) == 4096 && sp__factor_q12(0.5) == 2048);
    CHECK(sp__factor_q12(0.2) == 819 && sp__factor_q12(1.4) == 5734 && sp__factor_q12(0.0) == 0);
    /* The blend equals floor(f v + (1 - f) o), clamped (PIL's truncation):
     * every term is a short dyadic rational, so double evaluates it exactly. */
    for (int i = 0; i < 200000; i++) {
        int32_t fq = (int32_t)(rnd() % (4096 * 3));
        uint32_t v = (uint32_t)(rnd() % 256);
        int64_t o8 = (int64_t)(rnd() % (256 * 256));
        double f = fq / 4096.0;
        double e = floor(f * v + (1.0 - f) * (o8 / 256.0));
        e = e < 0 ? 0 : e > 255 ? 255 : e;
        CHECK_MSG(sp__blend_q12(v, o8, fq) == (uint8_t)e, "fq %d v %u o8 %lld", fq, v,
                  (long long)o8);
    }
    sp_image a, b, g;
    CHECK(sp__image_alloc(&a, 13, 7, 3) == 0 && sp__image_alloc(&g, 13, 7, 3) == 0);
    fill_random(&a);
    CHECK(sp__image_copy(&a, &b) == 0);
    sp__adjust_brightness(&b, 4096);
    sp__adjust_contrast(&b, 4096);
    sp__adjust_saturation(&b, 4096);
    CHECK(same_pixels(&a, &b));                         /* factor 1: identity */
    sp__adjust_saturation(&b, 0);                       /* factor 0: grayscale */
    CHECK(sp__image_to_gray(&a, &g) == 0 && same_pixels(&b, &g));
    sp_image_free(&b);
    CHECK(sp__image_copy(&a, &b) == 0);
    sp__adjust_brightness(&b, 0);                       /* factor 0: black */
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 13; x++) CHECK(px(&b, x, y, 0) == 0 && px(&b, x, y, 2) == 0);
    sp_image_free(&b);
    CHECK(sp__image_copy(&a, &b) == 0);
    sp__adjust_brightness(&b, 8192);                    /* factor 2: doubled, clamped */
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 13; x++) {
            int e = 2 * px(&a, x, y, 1);
            CHECK(px(&b, x, y, 1) == (e > 255 ? 255 : e));
        }
    sp_image_free(&b);
    CHECK(sp__image_copy(&a, &b) == 0);
    sp__adjust_contrast(&b, 0);                          /* factor 0: the mean luma */
    uint64_t sum = 0;
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 13; x++) sum += sp_luma601(px(&a, x, y, 0), px(&a, x, y, 1), px(&a, x, y, 2));
    int mean = (int)floor((double)sum / 91.0 + 0.5);
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 13; x++)
            for (int k = 0; k < 3; k++) CHECK(px(&b, x, y, k) == mean);
    sp_image_free(&a);
    sp_image_free(&b);
    sp_image_free(&g);
}

/* Independent floating-point reference of the antialiased triangle-filter
 * resize (no quantisation, no intermediate rounding). */
static double ref_resize_px(const sp_image *s, int ow, int oh, int x, int y, int c) {
    double sum = 0.0, wsum = 0.0;
    double sx = (double)s->width / ow, sy = (double)s->height / oh;
    double fx = sx > 1 ? sx : 1, fy = sy > 1 ? sy : 1;
    double cx = (x + 0.5) * sx, cy = (y + 0.5) * sy;
    for (int j = 0; j < s->height; j++) {
        double wy = 1.0 - fabs((j + 0.5 - cy) / fy);
        if (wy <= 0 || j < (int)(cy - fy + 0.5) || j >= (int)(cy + fy + 0.5)) continue;
        for (int i = 0; i < s->width; i++) {
            double wx = 1.0 - fabs((i + 0.5 - cx) / fx);
            if (wx <= 0 || i < (int)(cx - fx + 0.5) || i >= (int)(cx + fx + 0.5)) continue;
            sum += wx * wy * px(s, i, j, c);
            wsum += wx * wy;
        }
    }
    return sum / wsum;
}

static void test_resize(void) {
    static const int sizes[][4] = {{40, 30, 40, 30}, {40, 30, 20, 15}, {40, 30, 7, 11},
                                   {17, 9, 50, 31}, {64, 64, 48, 48}, {5, 3, 1, 1},
                                   {100, 8, 13, 8}, {3, 200, 3, 27}};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        int W = sizes[t][0], H = sizes[t][1], ow = sizes[t][2], oh = sizes[t][3];
        for (int c = 1; c <= 3; c += 2) {
            sp_image s, o;
            CHECK(sp__image_alloc(&s, W, H, c) == 0);
            /* constant image stays constant */
            memset(s.data, 173, s.stride * (size_t)H);
            CHECK(sp__image_resize(&s, ow, oh, &o) == 0);
            CHECK(o.width == ow && o.height == oh && o.channels == c);
            for (size_t i = 0; i < o.stride * (size_t)oh; i++) CHECK(o.data[i] == 173);
            sp_image_free(&o);
            /* horizontal ramp: every output row non-decreasing */
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    for (int k = 0; k < c; k++)
                        s.data[(size_t)y * s.stride + (size_t)(x * c + k)] = (uint8_t)(x * 255 / (W - 1 ? W - 1 : 1));
            CHECK(sp__image_resize(&s, ow, oh, &o) == 0);
            for (int y = 0; y < oh; y++)
                for (int x = 1; x < ow; x++)
                    for (int k = 0; k < c; k++) CHECK(px(&o, x, y, k) >= px(&o, x - 1, y, k));
            sp_image_free(&o);
            /* random image: within 1 of the floating-point reference */
            /* random image: close to the floating-point reference (two
             * 8-bit roundings and Q14 weights: at most ~1.06 apart) */
            fill_random(&s);
            CHECK(sp__image_resize(&s, ow, oh, &o) == 0);
            double abs_err = 0;
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow; x++)
                    for (int k = 0; k < c; k++) {
                        double r = ref_resize_px(&s, ow, oh, x, y, k);
                        abs_err += fabs(px(&o, x, y, k) - r);
                        CHECK_MSG(fabs(px(&o, x, y, k) - r) <= 1.1, "%dx%d->%dx%d (%d,%d): %d vs %.3f",
                                  W, H, ow, oh, x, y, px(&o, x, y, k), r);
                    }
            CHECK_MSG(abs_err / (ow * oh * c) < 0.5, "mean error %.3f", abs_err / (ow * oh * c));
            sp_image_free(&o);
            /* same size: identity */
            CHECK(sp__image_resize(&s, W, H, &o) == 0 && same_pixels(&s, &o));
            sp_image_free(&o);
            sp_image_free(&s);
        }
    }
    /* checkerboard downscaled by 2 averages to gray */
    sp_image s, o;
    CHECK(sp__image_alloc(&s, 64, 48, 1) == 0);
    for (int y = 0; y < 48; y++)
        for (int x = 0; x < 64; x++) s.data[y * 64 + x] = ((x + y) & 1) ? 255 : 0;
    CHECK(sp__image_resize(&s, 32, 24, &o) == 0);
    double mean = 0;
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 32; x++) {
            mean += px(&o, x, y, 0);
            if (x > 0 && y > 0 && x < 31 && y < 23) CHECK(px(&o, x, y, 0) >= 127 && px(&o, x, y, 0) <= 128);
        }
    mean /= 32 * 24;
    CHECK_MSG(fabs(mean - 127.5) < 3.0, "checkerboard mean %.2f", mean);
    sp_image_free(&o);
    sp_image_free(&s);
}

/* A window of the result equals the same window of the full result, and
 * the source may be handed in as a sub-rectangle of the plane. */
static void test_resample_window(void) {
    sp_image s, full, win;
    CHECK(sp__image_alloc(&s, 91, 67, 3) == 0);
    fill_random(&s);
    sp_resample_geom g = {91, 67, 3.25, 1.5, 80.75, 66.0, 37, 29, 0, 0, 37, 29, 0};
    CHECK(sp__image_alloc(&full, 37, 29, 3) == 0);
    CHECK(sp__resample(&s, 0, 0, &g, &full) == 0);
    g.win_x = 5; g.win_y = 7; g.win_w = 20; g.win_h = 13;
    int x0, y0, x1, y1;
    CHECK(sp__resample_span(&g, &x0, &y0, &x1, &y1) == 0);
    CHECK(x0 >= 0 && y0 >= 0 && x1 <= 91 && y1 <= 67 && x0 < x1 && y0 < y1);
    sp_image sub, fw;
    CHECK(sp__image_crop(&s, x0, y0, x1 - x0, y1 - y0, &sub) == 0);
    CHECK(sp__image_alloc(&win, 20, 13, 3) == 0);
    CHECK(sp__resample(&sub, x0, y0, &g, &win) == 0);
    CHECK(sp__image_crop(&full, 5, 7, 20, 13, &fw) == 0);
    CHECK(same_pixels(&win, &fw));
    /* a source that misses a needed pixel is refused */
    CHECK(sp__image_crop(&s, x0 + 1, y0, x1 - x0 - 1, y1 - y0, &sub) == 0);
    CHECK(sp__resample(&sub, x0 + 1, y0, &g, &win) == SP_EINVAL);
    g.bx1 = 92.0;   /* box outside the plane */
    CHECK(sp__resample_span(&g, &x0, &y0, &x1, &y1) == SP_EINVAL);
    sp_image_free(&s);
    sp_image_free(&full);
    sp_image_free(&win);
}

static void test_center_offset(void) {
    CHECK(sp__center_crop_offset(10, 10) == 0);
    CHECK(sp__center_crop_offset(6, 2) == 2);
    CHECK(sp__center_crop_offset(5, 2) == 2);    /* round(1.5) = 2 */
    CHECK(sp__center_crop_offset(7, 2) == 2);    /* round(2.5) = 2 */
    CHECK(sp__center_crop_offset(9, 2) == 4);    /* round(3.5) = 4 */
    CHECK(sp__center_crop_offset(256, 224) == 16);
    CHECK(sp__center_crop_offset(3, 5) == -1);
    CHECK(sp__center_crop_offset(3, 6) == -1);
    CHECK(sp__center_crop_offset(2, 7) == -2);
}

/* RandomResizedCrop parameters recomputed here from the spec (libm log/exp,
 * rint for Python's round) and compared with the library. */
static int ref_rrc(int W, int H, double s0, double s1, double r0, double r1, sp_key key,
                   uint32_t op, uint32_t sample, uint32_t epoch, sp_crop_box *b) {
    double area = (double)W * H;
    for (uint32_t t = 0; t < 10; t++) {
        sp_ctr c = {{t, op, sample, epoch}};
        sp_ctr d = sp_philox4x32_10(c, key);
        double u0 = (d.c[0] >> 8) / 16777216.0, u1 = (d.c[1] >> 8) / 16777216.0;
        double ta = area * (s0 + (s1 - s0) * u0);
        double ar = exp(log(r0) + (log(r1) - log(r0)) * u1);
        double w = rint(sqrt(ta * ar)), h = rint(sqrt(ta / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            b->w = (int)w;
            b->h = (int)h;
            b->y = (int)(((uint64_t)d.c[2] * (uint64_t)(H - (int)h + 1)) >> 32);
            b->x = (int)(((uint64_t)d.c[3] * (uint64_t)(W - (int)w + 1)) >> 32);
            return (int)t + 1;
        }
    }
    double in = (double)W / H;
    int w = W, h = H;
    if (in < r0) h = (int)rint(w / r0);
    else if (in > r1) w = (int)rint(h * r1);
    b->w = w;
    b->h = h;
    b->x = (W - w) / 2;
    b->y = (H - h) / 2;
    return 0;
}

static void test_rrc(void) {
    sp_key key = sp_rng_key(1234, SP_RNG_AUGMENT);
    int fallbacks = 0, late = 0;
    for (uint32_t i = 0; i < 20000; i++) {
        int W = 1 + (int)(rnd() % 600), H = 1 + (int)(rnd() % 600);
        double s0 = 0.08, s1 = 1.0, r0 = 0.75, r1 = 4.0 / 3.0;
        if (i % 5 == 4) { s0 = 0.9; s1 = 3.0; }          /* forces rejections */
        sp_crop_box a, b;
        int ta = sp__rrc_sample(W, H, s0, s1, r0, r1, key, 3, i, i % 7, &a);
        int tb = ref_rrc(W, H, s0, s1, r0, r1, key, 3, i, i % 7, &b);
        CHECK_MSG(ta == tb && a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h,
                  "sample %u %dx%d: lib (%d,%d %dx%d try %d) ref (%d,%d %dx%d try %d)", i, W, H,
                  a.x, a.y, a.w, a.h, ta, b.x, b.y, b.w, b.h, tb);
        CHECK(a.x >= 0 && a.y >= 0 && a.w >= 1 && a.h >= 1 && a.x + a.w <= W && a.y + a.h <= H);
        fallbacks += ta == 0;
        late += ta > 1;
    }
    CHECK(fallbacks > 0 && late > 0);
    /* the fallback clamps the ratio: 100x10 with ratio <= 4/3 -> 13x10 centred */
    sp_crop_box b;
    CHECK(sp__rrc_sample(100, 10, 5.0, 6.0, 0.75, 4.0 / 3.0, key, 0, 0, 0, &b) == 0);
    CHECK(b.w == 13 && b.h == 10 && b.x == 43 && b.y == 0);
    CHECK(sp__rrc_sample(10, 100, 5.0, 6.0, 0.75, 4.0 / 3.0, key, 0, 0, 0, &b) == 0);
    CHECK(b.w == 10 && b.h == 13 && b.x == 0 && b.y == 43);
}

static const sp_case cases[] = {
    SP_CASE(test_detmath),
    SP_CASE(test_detmath_vectors),
    SP_CASE(test_crop_flip),
    SP_CASE(test_gray),
    SP_CASE(test_color),
    SP_CASE(test_resize),
    SP_CASE(test_resample_window),
    SP_CASE(test_center_offset),
    SP_CASE(test_rrc),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

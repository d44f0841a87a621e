/* test_resize_bicubic.c - the bicubic resize (augment/resize.c) against a
 * float64 reference of PIL's algorithm, and its spec key.
 *
 * Cases (each its own process):
 *  test_kernels_sum_and_match_reference: for 300 random axes (plane 1..900,
 *    source boxes inside it, 1..600 outputs: up- and downscale) and both
 *    filters, every kernel's Q14 weights sum to exactly 16384, its end
 *    weights are not zero, its taps lie in the plane, and each weight is
 *    within 0.5 of the float64 reference weight * 16384 (the one that took
 *    the rounding residual within n/2 + 0.5); upscaled bicubic kernels have
 *    negative lobes and downscaled ones widen with the scale.
 *  test_pixels_match_reference: random and step-edge images resized with
 *    bicubic against the float64 reference (vertical pass, clamp to
 *    [0, 255], horizontal pass, clamp; no rounding): each value within
 *    0.5 + 0.5 * L + 0.05 where L is the largest sum of |weights| of a
 *    horizontal kernel (the intermediate's rounding, amplified by that
 *    kernel) - and the clamp acts: a step edge upscaled has reference
 *    values beyond 0..255 whose outputs are exactly 0 or 255.
 *  test_constant_and_identity: a constant image stays constant (the
 *    weights sum to 16384) and the same size is a copy.
 *  test_spec_key: interpolation=bilinear is the default and leaves the
 *    canonical form unchanged; bicubic round-trips; another value is an
 *    error naming the key.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/resize_internal.h"
#include "check.h"
#include "runner.h"
#include "seedpipe/philox.h"
#include "seedpipe/pipeline.h"
#include "augment/ops_internal.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"

static uint32_t next_word(uint32_t *ctr) {
    sp_ctr c = {{(*ctr)++, 0xb1c, 0, 0}};
    sp_key k = {{3, 4}};
    return sp_philox4x32_10(c, k).c[0];
}

static double ref_filter(int bicubic, double t) {
    t = fabs(t);
    if (!bicubic) return t < 1.0 ? 1.0 - t : 0.0;
    if (t < 1.0) return (1.5 * t - 2.5) * t * t + 1.0;
    if (t < 2.0) return -0.5 * (((t - 5.0) * t + 8.0) * t - 4.0);
    return 0.0;
}

/* PIL's precompute_coeffs for output i of an axis, normalised, in double:
 * taps [*xmin, *xmin + n) into w; returns n. */
static int ref_kernel(int bicubic, int plane, double b0, double b1, int n_out, int i, int *xmin,
                      double *w) {
    double scale = (b1 - b0) / n_out, fs = scale > 1.0 ? scale : 1.0;
    double support = (bicubic ? 2.0 : 1.0) * fs;
    double center = b0 + (i + 0.5) * scale;
    int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > plane) hi = plane;
    double sum = 0;
    for (int x = lo; x < hi; x++) sum += (w[x - lo] = ref_filter(bicubic, (x - center + 0.5) / fs));
    for (int x = lo; x < hi; x++) w[x - lo] /= sum;
    *xmin = lo;
    return hi - lo;
}

static void test_kernels_sum_and_match_reference(void) {
    uint32_t ctr = 0;
    enum { CAP = 4096 };
    static int32_t q[CAP];
    static double r[CAP];
    int negative_seen = 0, wide_seen = 0;
    for (int t = 0; t < 300; t++) {
        int plane = 1 + (int)sp_uniform_int(next_word(&ctr), 900);
        int a = (int)sp_uniform_int(next_word(&ctr), (uint32_t)plane);
        int b = a + 1 + (int)sp_uniform_int(next_word(&ctr), (uint32_t)(plane - a));
        double b0 = a + (next_word(&ctr) & 1 ? 0.25 : 0.0), b1 = b;
        if (b1 <= b0) b0 = a;
        int n_out = 1 + (int)sp_uniform_int(next_word(&ctr), 600);
        for (int f = 0; f < 2; f++) {
            sp_resample_geom g = {plane, 1, b0, 0.0, b1, 1.0, n_out, 1, 0, 0, n_out, 1, f};
            for (int i = 0; i < n_out; i++) {
                int start, n, xmin;
                CHECK(sp__resample_kernel(&g, 0, i, &start, &n, q, CAP) == 0);
                int rn = ref_kernel(f, plane, b0, b1, n_out, i, &xmin, r);
                CHECK(n >= 1 && start >= xmin && start + n <= xmin + rn && start + n <= plane);
                int32_t sum = 0;
                int off = 0;
                for (int k = 0; k < n; k++) {
                    sum += q[k];
                    double d = fabs(q[k] - r[start - xmin + k] * 16384.0);
                    if (d > 0.5 + 1e-9) off++;
                    CHECK_MSG(d <= n / 2.0 + 0.5, "filter %d plane %d box %g,%g -> %d, i %d tap %d: "
                              "%d vs %.3f", f, plane, b0, b1, n_out, i, k, q[k],
                              r[start - xmin + k] * 16384.0);
                    if (q[k] < 0) negative_seen |= f == 1 && (b1 - b0) < n_out;
                }
                CHECK_MSG(sum == 16384, "filter %d: kernel %d sums to %d", f, i, sum);
                CHECK(off <= 1);   /* only the weight that took the residual */
                CHECK(q[0] != 0 && q[n - 1] != 0);
                /* every reference tap dropped is one that rounds to 0 */
                for (int k = 0; k < rn; k++)
                    if (xmin + k < start || xmin + k >= start + n)
                        CHECK(fabs(r[k] * 16384.0) < 0.5 + 1e-9);
                if (f == 1 && (b1 - b0) / n_out > 3.0 && n >= 4 * (int)((b1 - b0) / n_out)) wide_seen = 1;
            }
        }
    }
    CHECK_MSG(negative_seen, "no negative bicubic weight on upscale");
    CHECK_MSG(wide_seen, "no bicubic kernel widened on downscale");
}

/* The float64 reference of one bicubic resize (vertical pass, clamp,
 * horizontal pass, clamp), into ref[oh][ow][c]; *lmax: the largest
 * sum of |w| of a horizontal kernel. */
static void ref_resize(const sp_image *s, int ow, int oh, double *ref, double *lmax) {
    int W = s->width, H = s->height, c = s->channels;
    double *mid = malloc(sizeof(double) * (size_t)W * (size_t)oh * (size_t)c);
    double *w = malloc(sizeof(double) * (size_t)(4 * (W > H ? W : H) + 8));
    CHECK(mid && w);
    for (int y = 0; y < oh; y++) {
        int y0, n = ref_kernel(1, H, 0, H, oh, y, &y0, w);
        for (int x = 0; x < W * c; x++) {
            double v = 0;
            for (int k = 0; k < n; k++) v += w[k] * s->data[(size_t)(y0 + k) * s->stride + (size_t)x];
            mid[(size_t)y * (size_t)(W * c) + (size_t)x] = v < 0 ? 0 : v > 255 ? 255 : v;
        }
    }
    *lmax = 0;
    for (int x = 0; x < ow; x++) {
        int x0, n = ref_kernel(1, W, 0, W, ow, x, &x0, w);
        double l = 0;
        for (int k = 0; k < n; k++) l += fabs(w[k]);
        if (l > *lmax) *lmax = l;
        for (int y = 0; y < oh; y++)
            for (int ch = 0; ch < c; ch++) {
                double v = 0;
                for (int k = 0; k < n; k++)
                    v += w[k] * mid[(size_t)y * (size_t)(W * c) + (size_t)((x0 + k) * c + ch)];
                ref[((size_t)y * (size_t)ow + (size_t)x) * (size_t)c + (size_t)ch] =
                    v < 0 ? 0 : v > 255 ? 255 : v;
            }
    }
    free(mid);
    free(w);
}

static void test_pixels_match_reference(void) {
    static const int sizes[][4] = {{40, 30, 40, 30}, {40, 30, 20, 15}, {40, 30, 7, 11},
                                   {17, 9, 50, 31}, {64, 64, 48, 48}, {5, 3, 1, 1},
                                   {100, 8, 13, 8}, {3, 200, 3, 27}, {37, 41, 111, 97}};
    uint32_t ctr = 0;
    int clamped = 0;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++)
        for (int c = 1; c <= 3; c += 2)
            for (int pattern = 0; pattern < 2; pattern++) {
                int W = sizes[t][0], H = sizes[t][1], ow = sizes[t][2], oh = sizes[t][3];
                sp_image s, o;
                CHECK(sp__image_alloc(&s, W, H, c) == 0);
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W * c; x++)
                        s.data[(size_t)y * s.stride + (size_t)x] =
                            pattern ? (uint8_t)(((x / c) * 4 / W + y * 3 / H) & 1 ? 255 : 0)
                                    : (uint8_t)next_word(&ctr);
                CHECK(sp__image_resize_filter(&s, ow, oh, SP_RESAMPLE_BICUBIC, &o) == 0);
                double *ref = malloc(sizeof(double) * (size_t)ow * (size_t)oh * (size_t)c);
                double lmax;
                CHECK(ref != NULL);
                ref_resize(&s, ow, oh, ref, &lmax);
                double bound = 0.5 + 0.5 * lmax + 0.05;
                for (int y = 0; y < oh; y++)
                    for (int x = 0; x < ow * c; x++) {
                        double rv = ref[(size_t)y * (size_t)(ow * c) + (size_t)x];
                        int v = o.data[(size_t)y * o.stride + (size_t)x];
                        CHECK_MSG(fabs(v - rv) <= bound, "%dx%d->%dx%d c%d (%d,%d): %d vs %.3f",
                                  W, H, ow, oh, c, x, y, v, rv);
                    }
                /* the clamp acts: the unclamped horizontal pass of a
                 * clamped row overshoots at a step edge; count outputs
                 * pinned at 0 or 255 next to a differing neighbour */
                if (pattern && ow > W)
                    for (int y = 0; y < oh; y++)
                        for (int x = 1; x < ow * c; x++) {
                            int v = o.data[(size_t)y * o.stride + (size_t)x];
                            clamped += (v == 0 || v == 255) &&
                                       v != o.data[(size_t)y * o.stride + (size_t)x - 1];
                        }
                free(ref);
                sp_image_free(&o);
                sp_image_free(&s);
            }
    CHECK(clamped > 0);
}

static void test_constant_and_identity(void) {
    static const int sizes[][4] = {{40, 30, 7, 11}, {17, 9, 50, 31}, {300, 200, 224, 224},
                                   {1, 1, 5, 5}, {9, 2, 1, 1}};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++)
        for (int v = 0; v < 256; v += 85) {
            sp_image s, o;
            CHECK(sp__image_alloc(&s, sizes[t][0], sizes[t][1], 3) == 0);
            memset(s.data, v, s.stride * (size_t)s.height);
            CHECK(sp__image_resize_filter(&s, sizes[t][2], sizes[t][3], SP_RESAMPLE_BICUBIC,
                                          &o) == 0);
            for (int y = 0; y < o.height; y++)
                for (int x = 0; x < o.width * 3; x++) CHECK(o.data[(size_t)y * o.stride + (size_t)x] == v);
            sp_image_free(&o);
            for (size_t i = 0; i < s.stride * (size_t)s.height; i++) s.data[i] = (uint8_t)(i * 37);
            CHECK(sp__image_resize_filter(&s, s.width, s.height, SP_RESAMPLE_BICUBIC, &o) == 0);
            for (int y = 0; y < o.height; y++)
                CHECK(memcmp(o.data + (size_t)y * o.stride, s.data + (size_t)y * s.stride,
                             (size_t)s.width * 3) == 0);
            sp_image_free(&o);
            sp_image_free(&s);
        }
    sp_image s, o;
    CHECK(sp__image_alloc(&s, 4, 4, 1) == 0);
    CHECK(sp__image_resize_filter(&s, 2, 2, 2, &o) == SP_EINVAL);   /* no such filter */
    sp_image_free(&s);
}

static void canon_is(const char *spec, const char *want) {
    sp_pipeline *p = NULL;
    sp_error err = {0};
    CHECK_MSG(sp_pipeline_parse(spec, &p, &err) == 0, "%s: %s", spec, err.msg);
    CHECK_MSG(strcmp(sp__pipeline_canonical(p), want) == 0, "%s -> %s", spec,
              sp__pipeline_canonical(p));
    sp_pipeline *q = NULL;
    CHECK(sp_pipeline_parse(sp__pipeline_canonical(p), &q, &err) == 0);
    CHECK(strcmp(sp__pipeline_canonical(q), want) == 0);
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(q);
}

static void test_spec_key(void) {
    canon_is("resize size=256 interpolation=bilinear | center_crop size=224",
             "resize size=256 | center_crop size=224,224");
    canon_is("resize size=256,300 interpolation=bicubic",
             "resize size=256,300 interpolation=bicubic");
    canon_is("random_resized_crop size=224 interpolation=bilinear",
             "random_resized_crop size=224,224 scale=0.08,1 ratio=0.75,1.33333333");
    canon_is("random_resized_crop size=224 interpolation=bicubic scale=0.5,1",
             "random_resized_crop size=224,224 scale=0.5,1 ratio=0.75,1.33333333 "
             "interpolation=bicubic");
    sp_pipeline *p = NULL;
    sp_error err = {0};
    CHECK(sp_pipeline_parse("resize size=256 interpolation=lanczos", &p, &err) == SP_ESPEC);
    CHECK_MSG(strstr(err.msg, "\"resize\"") && strstr(err.msg, "lanczos") &&
              strstr(err.msg, "interpolation") && strstr(err.msg, "bilinear or bicubic"),
              "%s", err.msg);
}

static const sp_case cases[] = {
    SP_CASE(test_kernels_sum_and_match_reference),
    SP_CASE(test_pixels_match_reference),
    SP_CASE(test_constant_and_identity),
    SP_CASE(test_spec_key),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

/* test_ops_geom.c - the geometric ops of issue 39 (ops.h: RandomCrop's
 * padding and crop; pipeline op random_crop).
 * Cases: test_crop_reference (sp__random_crop_map + sp__image_remap against
 * a reference that builds torchvision's padded images, pad then
 * pad_if_needed, and crops them, for every mode, 1 and 3 channels, views),
 * test_crop_sample (the draw words, the refusals), test_random_crop_pipeline
 * (spec, canonical form, errors, the output against the reference for the
 * sample's own draws, output size, refused inside random_apply),
 * test_random_crop_explain, test_blur_kernel (the binary32 steps),
 * test_blur_reference (a 2D double convolution with reflect indexing: at
 * most 1 apart, nearly all equal), test_blur_pipeline (spec, sigma draw,
 * the pending flip applied first, refusals, explain), test_erasing_sample
 * (the tries' formula, the rejections), test_erasing_normals (moments),
 * test_erasing_pipeline (after normalize, every dtype and layout, the
 * order rules, explain), test_rotate (theta against libm, quarter turns
 * as pure index maps, the fill outside, bilinear at 0 degrees is the
 * identity), test_rotate_pipeline (spec, angle draw, the pending flip
 * applied first, explain).
 * bindings/python/tests/test_geom_ops_parity.py compares with torchvision
 * itself on real photos.
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
#include "seedpipe/detmath.h"
#include "seedpipe/pipeline.h"
#include "augment/detmath_internal.h"
#include "augment/ops_internal.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"

/* torchvision's F.pad on a uint8 tensor, written plainly: a new image of
 * (W + l + r) x (H + t + b), each pixel taken from the source by the mode's
 * rule (constant: fill; edge: clamped; reflect: mirrored without the edge). */
static sp_image ref_pad(const sp_image *src, int l, int t, int r, int b, int mode,
                        const uint8_t fill[3]) {
    sp_image out;
    int W = src->width, H = src->height, C = src->channels;
    CHECK(sp__image_alloc(&out, W + l + r, H + t + b, C) == 0);
    for (int y = 0; y < out.height; y++)
        for (int x = 0; x < out.width; x++) {
            int u = x - l, v = y - t, in = u >= 0 && u < W && v >= 0 && v < H;
            if (mode == SP_PAD_EDGE) {
                u = u < 0 ? 0 : u >= W ? W - 1 : u;
                v = v < 0 ? 0 : v >= H ? H - 1 : v;
            } else if (mode == SP_PAD_REFLECT) {
                u = u < 0 ? -u : u >= W ? 2 * W - 2 - u : u;
                v = v < 0 ? -v : v >= H ? 2 * H - 2 - v : v;
            }
            for (int c = 0; c < C; c++)
                out.data[(size_t)y * out.stride + (size_t)x * C + c] =
                    mode == SP_PAD_CONSTANT && !in ? fill[c] : px(src, u, v, c);
        }
    return out;
}

/* RandomCrop.forward: pad, pad_if_needed (width, then height), crop. */
static sp_image ref_random_crop(const sp_image *src, const int pad[4], int pad_if_needed, int mode,
                                const uint8_t fill[3], int cx, int cy, int cw, int ch) {
    sp_image a = ref_pad(src, pad[0], pad[1], pad[2], pad[3], mode, fill);
    if (pad_if_needed && a.width < cw) {
        int dx = cw - a.width;
        sp_image b = ref_pad(&a, dx, 0, dx, 0, mode, fill);
        sp_image_free(&a);
        a = b;
    }
    if (pad_if_needed && a.height < ch) {
        int dy = ch - a.height;
        sp_image b = ref_pad(&a, 0, dy, 0, dy, mode, fill);
        sp_image_free(&a);
        a = b;
    }
    sp_image view, out;
    CHECK(sp__image_crop(&a, cx, cy, cw, ch, &view) == 0);
    CHECK(sp__image_copy(&view, &out) == 0);
    sp_image_free(&a);
    return out;
}

static void test_crop_reference(void) {
    const uint8_t fill[3] = {7, 200, 31};
    for (int iter = 0; iter < 600; iter++) {
        int C = iter % 2 ? 3 : 1, W = 1 + (int)(rnd32() % 9), H = 1 + (int)(rnd32() % 9);
        int mode = iter % 3, pad[4];
        for (int i = 0; i < 4; i++) {
            int lim = mode == SP_PAD_REFLECT ? (i % 2 ? H : W) : 6;
            pad[i] = (int)(rnd32() % (uint32_t)lim);
        }
        int pin = (iter / 3) % 2, cw = 1 + (int)(rnd32() % 14), ch = 1 + (int)(rnd32() % 14);
        sp_image src = make_image(W, H, C);
        sp_random_crop_geom g;
        sp_key key = sp_rng_key((uint64_t)iter, SP_RNG_AUGMENT);
        if (sp__random_crop_sample(W, H, ch, cw, pad, pin, mode, key, 1, 2, 3, &g)) {
            /* refused: the padded image is too small, or a reflect pad too large */
            int pw = W + pad[0] + pad[2], ph = H + pad[1] + pad[3];
            int ok = pin ? !(mode == SP_PAD_REFLECT && ((pw < cw && cw - pw >= pw) ||
                                                         (ph < ch && ch - ph >= ph)))
                         : pw >= cw && ph >= ch;
            CHECK_MSG(!ok, "refused %dx%d pad %d,%d,%d,%d mode %d pin %d crop %dx%d", W, H,
                      pad[0], pad[1], pad[2], pad[3], mode, pin, cw, ch);
            sp_image_free(&src);
            continue;
        }
        int32_t xmap[16], ymap[16];
        sp__random_crop_map(W, pad[0], pad[2], g.extra_x, mode, g.x, cw, xmap);
        sp__random_crop_map(H, pad[1], pad[3], g.extra_y, mode, g.y, ch, ymap);
        sp_image got, ref = ref_random_crop(&src, pad, pin, mode, fill, g.x, g.y, cw, ch);
        CHECK(sp__image_alloc(&got, cw, ch, C) == 0);
        sp__image_remap(&src, xmap, ymap, fill, &got);
        CHECK_MSG(same_pixels(&got, &ref), "%dx%dx%d pad %d,%d,%d,%d mode %d pin %d crop %dx%d",
                  W, H, C, pad[0], pad[1], pad[2], pad[3], mode, pin, cw, ch);
        sp_image_free(&got);
        sp_image_free(&ref);
        sp_image_free(&src);
    }
}

static void test_crop_sample(void) {
    sp_key key = sp_rng_key(11, SP_RNG_AUGMENT);
    const int pad4[4] = {4, 4, 4, 4}, none[4] = {0, 0, 0, 0};
    sp_random_crop_geom g;
    for (uint32_t i = 0; i < 50; i++) {
        CHECK(sp__random_crop_sample(32, 32, 32, 32, pad4, 0, SP_PAD_CONSTANT, key, 3, i, 1,
                                     &g) == 0);
        sp_ctr d = sp_sample_draw(key, 0, 3, i, 1);
        CHECK(g.pw == 40 && g.ph == 40);
        CHECK(g.y == (int)sp_uniform_int(d.c[0], 9) && g.x == (int)sp_uniform_int(d.c[1], 9));
    }
    CHECK(sp__random_crop_sample(32, 32, 32, 32, none, 0, SP_PAD_REFLECT, key, 0, 0, 0, &g) == 0);
    CHECK(g.x == 0 && g.y == 0);
    CHECK(sp__random_crop_sample(31, 32, 32, 32, none, 0, SP_PAD_EDGE, key, 0, 0, 0,
                                 &g) == SP_EINVAL);
    /* pad_if_needed pads each side by the whole deficit: 30 -> 34 for 32 */
    CHECK(sp__random_crop_sample(30, 32, 32, 32, none, 1, SP_PAD_EDGE, key, 0, 0, 0, &g) == 0);
    CHECK(g.extra_x == 2 && g.extra_y == 0 && g.pw == 34 && g.ph == 32);
    const int big[4] = {5, 0, 0, 0};
    CHECK(sp__random_crop_sample(5, 5, 2, 2, big, 0, SP_PAD_REFLECT, key, 0, 0, 0,
                                 &g) == SP_EINVAL);
    CHECK(sp__random_crop_sample(5, 5, 2, 2, big, 0, SP_PAD_EDGE, key, 0, 0, 0, &g) == 0);
    CHECK(sp__random_crop_sample(2, 2, 5, 5, none, 1, SP_PAD_REFLECT, key, 0, 0, 0,
                                 &g) == SP_EINVAL);
}

/* Run p on raw pixels into a packed HWC image of w x h. */
static int run_raw(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_image *raw, int w,
                   int h, sp_image *out, sp_error *err) {
    CHECK(sp__image_alloc(out, w, h, raw->channels) == 0);
    sp_sample_src src = {"raw", NULL, 0, raw};
    sp_run_opts o = {SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 0, NULL};
    size_t n = (size_t)w * (size_t)h * (size_t)raw->channels;
    return sp__pipeline_run_checked(p, ctx, &src, &o, out->data, n, err);
}

static void test_random_crop_pipeline(void) {
    expect_canonical("random_crop size=32 padding=4",
                     "random_crop size=32,32 padding=4,4,4,4 pad_mode=constant fill=0 pad_if_needed=0");
    expect_canonical("random_crop size=8,6 padding=1,2 pad_mode=reflect fill=1,2,3 pad_if_needed=1",
                     "random_crop size=8,6 padding=1,2,1,2 pad_mode=reflect fill=1,2,3 pad_if_needed=1");
    expect_canonical("random_crop size=5 padding=1,2,3,4 pad_mode=edge fill=9",
                     "random_crop size=5,5 padding=1,2,3,4 pad_mode=edge fill=9 pad_if_needed=0");
    expect_spec_error("random_crop padding=4", "missing required key \"size\"");
    expect_spec_error("random_crop size=4 padding=1,2,3", "bad value \"1,2,3\" for padding");
    expect_spec_error("random_crop size=4 padding=-1", "for padding");
    expect_spec_error("random_crop size=4 pad_mode=symmetric", "for pad_mode");
    expect_spec_error("random_crop size=4 fill=256", "for fill");
    expect_spec_error("random_crop size=4 fill=1,2", "for fill");
    expect_spec_error("decode mode=gray | random_crop size=4 fill=1,2,3", "gray pipeline");
    expect_spec_error("random_crop size=4 pad_if_needed=2", "for pad_if_needed");
    expect_spec_error("random_apply ops=1 | random_crop size=4", "inside random_apply");

    sp_pipeline *p = parse_ok("random_crop size=12,10 padding=3,1,2,4 pad_mode=reflect");
    int oh, ow, oc;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__pipeline_output_dims(p, 0, 0, &oh, &ow, &oc, &err), &err);
    CHECK(oh == 12 && ow == 10 && oc == 3);
    sp_image src = make_image(9, 11, 3);
    const int pad[4] = {3, 1, 2, 4};
    const uint8_t zero[3] = {0, 0, 0};
    int seen_x = 0;
    for (uint32_t i = 0; i < 40; i++) {
        sp_sample_ctx ctx = {sp_rng_key(5, SP_RNG_AUGMENT), 2, i};
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 0, i, 2);
        int y = (int)sp_uniform_int(d.c[0], 16 - 12 + 1), x = (int)sp_uniform_int(d.c[1], 14 - 10 + 1);
        seen_x |= 1 << x;
        sp_image got, ref = ref_random_crop(&src, pad, 0, SP_PAD_REFLECT, zero, x, y, 10, 12);
        CHECK_OK(run_raw(p, &ctx, &src, 10, 12, &got, &err), &err);
        CHECK_MSG(same_pixels(&got, &ref), "sample %u", i);
        sp_image_free(&got);
        sp_image_free(&ref);
    }
    CHECK(seen_x == 0x1f);   /* every offset 0..4 drawn */
    sp_pipeline_destroy(p);
    /* too small without pad_if_needed: a per-sample error naming the op */
    p = parse_ok("random_crop size=12");
    sp_sample_ctx ctx = {sp_rng_key(5, SP_RNG_AUGMENT), 0, 0};
    sp_image got;
    CHECK(run_raw(p, &ctx, &src, 12, 12, &got, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "random_crop") && strstr(err.msg, "raw"), "%s", err.msg);
    sp_image_free(&got);
    sp_pipeline_destroy(p);
    /* pad_if_needed with a fill: the constant border as torchvision's */
    p = parse_ok("random_crop size=14,13 pad_if_needed=1 fill=1,2,3");
    const uint8_t f[3] = {1, 2, 3};
    sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 0, 0, 0);
    int y = (int)sp_uniform_int(d.c[0], 11 + 2 * 3 - 14 + 1), x = (int)sp_uniform_int(d.c[1], 9 + 2 * 4 - 13 + 1);
    sp_image ref = ref_random_crop(&src, (const int[4]){0, 0, 0, 0}, 1, SP_PAD_CONSTANT, f, x, y, 13, 14);
    CHECK_OK(run_raw(p, &ctx, &src, 13, 14, &got, &err), &err);
    CHECK(same_pixels(&got, &ref));
    sp_image_free(&got);
    sp_image_free(&ref);
    sp_pipeline_destroy(p);
    sp_image_free(&src);
}

static void test_random_crop_explain(void) {
    sp_pipeline *p = parse_ok("random_crop size=32 padding=4 | hflip");
    sp_sample_ctx ctx = {sp_rng_key(1, SP_RNG_AUGMENT), 0, 0};
    sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 0, 0, 0);
    char buf[512], want[160];
    sp__pipeline_explain(p, &ctx, 32, 32, SP_FORMAT_PNG, buf, sizeof buf);
    snprintf(want, sizeof want, "0 random_crop: offset x=%u y=%u of 40x40 (32x32 padded 4,4,4,4 "
             "constant, then 0,0 each side) -> 32x32\n1 hflip",
             sp_uniform_int(d.c[1], 9), sp_uniform_int(d.c[0], 9));
    CHECK_MSG(strstr(buf, want), "%s", buf);
    sp__pipeline_explain(p, &ctx, 20, 32, SP_FORMAT_PNG, buf, sizeof buf);
    CHECK_MSG(strstr(buf, "does not fit 20x32"), "%s", buf);
    sp_pipeline_destroy(p);
}

static void test_blur_kernel(void) {
    float k[7];
    sp__gaussian_kernel1d(7, 1.5f, k);
    float e[7], sum = 0.0f;
    for (int i = 0; i < 7; i++) {
        float t = (float)(i - 3) / 1.5f;
        t = t * t;
        e[i] = expf(-0.5f * t);
        sum += e[i];
    }
    for (int i = 0; i < 7; i++) CHECK(k[i] == e[i] / sum);
    for (int i = 0; i < 3; i++) CHECK(k[i] == k[6 - i]);
    sp__gaussian_kernel1d(1, 0.3f, k);
    CHECK(k[0] == 1.0f);
}

/* Blur by the 2D kernel ky (x) kx in double, reflect indexing. */
static int ref_blur_px(const sp_image *im, int x, int y, int c, int kx, int ky, float sg) {
    float wx[32], wy[32];
    sp__gaussian_kernel1d(kx, sg, wx);
    sp__gaussian_kernel1d(ky, sg, wy);
    double acc = 0.0;
    for (int i = 0; i < ky; i++)
        for (int j = 0; j < kx; j++) {
            int u = x + j - kx / 2, v = y + i - ky / 2;
            u = u < 0 ? -u : u >= im->width ? 2 * im->width - 2 - u : u;
            v = v < 0 ? -v : v >= im->height ? 2 * im->height - 2 - v : v;
            acc += (double)wy[i] * wx[j] * px(im, u, v, c);
        }
    return (int)rint(acc);
}

static void test_blur_reference(void) {
    static const int ks[][2] = {{3, 3}, {5, 5}, {1, 7}, {9, 3}, {1, 1}, {11, 11}};
    long n = 0, differ = 0;
    for (int t = 0; t < 6; t++)
        for (int C = 1; C <= 3; C += 2) {
            sp_image im = make_image(13, 11, C), out;
            CHECK(sp__image_copy(&im, &out) == 0);
            float sg = 0.3f + 0.4f * (float)t;
            CHECK(sp__image_gaussian_blur(&out, ks[t][0], ks[t][1], sg, sg) == 0);
            for (int y = 0; y < 11; y++)
                for (int x = 0; x < 13; x++)
                    for (int c = 0; c < C; c++) {
                        int r = ref_blur_px(&im, x, y, c, ks[t][0], ks[t][1], sg);
                        int d = abs(r - px(&out, x, y, c));
                        CHECK_MSG(d <= 1, "kernel %dx%d at %d,%d: %d vs %d", ks[t][0], ks[t][1],
                                  x, y, px(&out, x, y, c), r);
                        n++;
                        differ += d != 0;
                    }
            sp_image_free(&im);
            sp_image_free(&out);
        }
    CHECK_MSG(differ * 1000 <= n, "%ld of %ld differ", differ, n);
    sp_image im = make_image(4, 3, 3);
    CHECK(sp__image_gaussian_blur(&im, 9, 3, 1.0f, 1.0f) == SP_EINVAL);   /* pad 4 >= 4 */
    CHECK(sp__image_gaussian_blur(&im, 3, 7, 1.0f, 1.0f) == SP_EINVAL);   /* pad 3 >= 3 */
    CHECK(sp__image_gaussian_blur(&im, 4, 3, 1.0f, 1.0f) == SP_EINVAL);
    CHECK(sp__image_gaussian_blur(&im, 7, 5, 1.0f, 1.0f) == 0);
    sp_image_free(&im);
}

static void test_blur_pipeline(void) {
    expect_canonical("gaussian_blur kernel=5", "gaussian_blur kernel=5,5 sigma=0.1,2");
    expect_canonical("gaussian_blur kernel=3,7 sigma=0.5", "gaussian_blur kernel=3,7 sigma=0.5,0.5");
    expect_canonical("random_apply ops=1 | gaussian_blur kernel=9 sigma=0.1,2.0",
                     "random_apply ops=1 p=0.5 | gaussian_blur kernel=9,9 sigma=0.1,2");
    expect_spec_error("gaussian_blur sigma=1", "missing required key \"kernel\"");
    expect_spec_error("gaussian_blur kernel=4", "for kernel");
    expect_spec_error("gaussian_blur kernel=3,4", "for kernel");
    expect_spec_error("gaussian_blur kernel=1025", "for kernel");
    expect_spec_error("gaussian_blur kernel=3 sigma=0", "for sigma");
    expect_spec_error("gaussian_blur kernel=3 sigma=2,1", "for sigma");
    sp_pipeline *p = parse_ok("hflip p=1 | gaussian_blur kernel=5,3 sigma=0.5,3");
    sp_image src = make_image(10, 8, 3);
    sp_error err;
    sp_error_clear(&err);
    for (uint32_t i = 0; i < 8; i++) {
        sp_sample_ctx ctx = {sp_rng_key(9, SP_RNG_AUGMENT), 1, i};
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, i, 1);
        float sg = (float)(0.5 + 2.5 * sp_u01d(d.c[0]));
        sp_image got, ref;
        CHECK(sp__image_copy(&src, &ref) == 0);
        sp__image_hflip(&ref);   /* torchvision's order: the flip, then the blur */
        CHECK(sp__image_gaussian_blur(&ref, 5, 3, sg, sg) == 0);
        CHECK_OK(run_raw(p, &ctx, &src, 10, 8, &got, &err), &err);
        CHECK_MSG(same_pixels(&got, &ref), "sample %u", i);
        char buf[256], want[96];
        sp__pipeline_explain(p, &ctx, 10, 8, SP_FORMAT_UNKNOWN, buf, sizeof buf);
        snprintf(want, sizeof want, "1 gaussian_blur: kernel 5x3 sigma %.9g\n", (double)sg);
        CHECK_MSG(strstr(buf, want), "%s", buf);
        sp_image_free(&got);
        sp_image_free(&ref);
    }
    sp_pipeline_destroy(p);
    p = parse_ok("gaussian_blur kernel=21");
    sp_sample_ctx ctx = {sp_rng_key(9, SP_RNG_AUGMENT), 0, 0};
    sp_image got;
    CHECK(run_raw(p, &ctx, &src, 10, 8, &got, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "gaussian_blur: a 21x21 kernel on a 10x8 image"), "%s", err.msg);
    sp_image_free(&got);
    sp_pipeline_destroy(p);
    sp_image_free(&src);
}

static void test_erasing_sample(void) {
    sp_key key = sp_rng_key(3, SP_RNG_AUGMENT);
    int accepted = 0;
    for (uint32_t i = 0; i < 200; i++) {
        sp_crop_box b;
        int t = sp__erasing_sample(40, 30, 0.02, 0.33, 0.3, 3.3, key, 2, i, 0, &b);
        /* the reference: torchvision's get_params with the spec's draws */
        int want = 0;
        for (uint32_t k = 0; k < 10 && !want; k++) {
            sp_ctr d = sp_sample_draw(key, 1 + k, 2, i, 0);
            double area = 1200.0 * (0.02 + (0.33 - 0.02) * sp_u01d(d.c[0]));
            double lr0 = sp_det_log(0.3), lr1 = sp_det_log(3.3);
            double ar = sp_det_exp(lr0 + (lr1 - lr0) * sp_u01d(d.c[1]));
            int h = (int)sp__det_round_half_even(sqrt(area * ar));
            int w = (int)sp__det_round_half_even(sqrt(area / ar));
            if (h < 30 && w < 40) {
                want = (int)k + 1;
                CHECK(b.h == h && b.w == w);
                CHECK(b.y == (int)sp_uniform_int(d.c[2], (uint64_t)(30 - h + 1)));
                CHECK(b.x == (int)sp_uniform_int(d.c[3], (uint64_t)(40 - w + 1)));
            }
        }
        CHECK(t == want);
        accepted += t > 0;
    }
    CHECK(accepted > 190);
    sp_crop_box b;
    CHECK(sp__erasing_sample(40, 30, 1, 1, 1, 1, key, 0, 0, 0, &b) == 0);   /* 35x35 never fits */
    CHECK(b.w == 0 && b.h == 0);
}

static void test_erasing_normals(void) {
    enum { N = 200001 };
    float *v = malloc(N * sizeof *v), *w = malloc(N * sizeof *w);
    sp_key key = sp_rng_key(4, SP_RNG_AUGMENT);
    sp__erasing_normals(key, 1, 7, 2, N, v);
    sp__erasing_normals(key, 1, 7, 2, 10, w);
    CHECK(memcmp(v, w, 10 * sizeof *v) == 0);   /* a prefix of the same stream */
    double m = 0, q = 0, m4 = 0;
    for (int i = 0; i < N; i++) {
        m += v[i];
        q += (double)v[i] * v[i];
        m4 += (double)v[i] * v[i] * v[i] * v[i];
    }
    m /= N;
    q /= N;
    m4 /= N;
    CHECK_MSG(fabs(m) < 0.01 && fabs(q - 1) < 0.02 && fabs(m4 - 3) < 0.1, "%g %g %g", m, q, m4);
    free(v);
    free(w);
}

/* Run p on raw pixels into out (w x h x c elements of dtype / layout). */
static void run_any(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_image *raw,
                    sp_dtype t, sp_layout l, void *out, size_t n) {
    sp_sample_src src = {"raw", NULL, 0, raw};
    sp_run_opts o = {t, l, 0, NULL};
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__pipeline_run_checked(p, ctx, &src, &o, out, n, &err), &err);
}

static void test_erasing_pipeline(void) {
    expect_canonical("random_erasing", "random_erasing p=0.5 scale=0.02,0.33 ratio=0.3,3.3 value=0");
    expect_canonical("normalize mean=0.5 std=0.2 | random_erasing p=1 value=random | "
                     "random_erasing value=0.1,0.2,-3",
                     "normalize mean=0.5,0.5,0.5 std=0.2,0.2,0.2 | random_erasing p=1 "
                     "scale=0.02,0.33 ratio=0.3,3.3 value=random | random_erasing p=0.5 "
                     "scale=0.02,0.33 ratio=0.3,3.3 value=0.1,0.2,-3");
    expect_spec_error("random_erasing | hflip", "no op but random_erasing may follow random_erasing");
    expect_spec_error("normalize mean=0 std=1 | hflip", "no op but random_erasing may follow normalize");
    expect_spec_error("random_apply ops=1 | random_erasing", "a random_erasing inside random_apply");
    expect_spec_error("decode mode=gray | random_erasing value=1,2,3", "gray pipeline");
    expect_spec_error("random_erasing value=1,2", "for value");
    expect_spec_error("random_erasing value=1e7", "for value");
    expect_spec_error("random_erasing scale=0.5,1.5", "for scale");
    expect_spec_error("random_erasing ratio=0,1", "for ratio");
    sp_pipeline *p = parse_ok("center_crop size=30,40 | normalize mean=0.4 std=0.25 | "
                              "random_erasing p=1 value=0.5,-1,2.25");
    sp_pipeline *q = parse_ok("center_crop size=30,40 | normalize mean=0.4 std=0.25");
    sp_image src = make_image(40, 30, 3);
    const size_t n = 30 * 40 * 3;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    const float val[3] = {0.5f, -1.0f, 2.25f};
    for (uint32_t i = 0; i < 20; i++) {
        sp_sample_ctx ctx = {sp_rng_key(8, SP_RNG_AUGMENT), 0, i};
        sp_crop_box bx;
        CHECK(sp__erasing_sample(40, 30, 0.02, 0.33, 0.3, 3.3, ctx.k_augment, 2, i, 0, &bx) > 0);
        run_any(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, a, n * 4);
        run_any(q, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, b, n * 4);
        run_any(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NHWC, c, n * 4);
        run_any(p, &ctx, &src, SP_DTYPE_BFLOAT16, SP_LAYOUT_NCHW, h, n * 2);
        for (int k = 0; k < 3; k++)
            for (int y = 0; y < 30; y++)
                for (int x = 0; x < 40; x++) {
                    size_t e = ((size_t)k * 30 + y) * 40 + x, f = ((size_t)y * 40 + x) * 3 + k;
                    int in = x >= bx.x && x < bx.x + bx.w && y >= bx.y && y < bx.y + bx.h;
                    CHECK(a[e] == (in ? val[k] : b[e]));
                    CHECK(c[f] == a[e]);
                    uint32_t u;
                    memcpy(&u, &a[e], 4);
                    if (in) CHECK(h[e] == (uint16_t)(u >> 16));   /* exact in bfloat16 */
                }
    }
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(q);
    /* uint8 output: the value truncated and clamped; value=random: the normals */
    p = parse_ok("center_crop size=30,40 | random_erasing p=1 value=7.9,300,-2");
    sp_sample_ctx ctx = {sp_rng_key(8, SP_RNG_AUGMENT), 0, 3};
    sp_crop_box bx;
    sp__erasing_sample(40, 30, 0.02, 0.33, 0.3, 3.3, ctx.k_augment, 1, 3, 0, &bx);
    uint8_t *u8 = malloc(n);
    run_any(p, &ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, u8, n);
    size_t e = ((size_t)bx.y * 40 + bx.x) * 3;
    CHECK(u8[e] == 7 && u8[e + 1] == 255 && u8[e + 2] == 0);
    sp_pipeline_destroy(p);
    p = parse_ok("center_crop size=30,40 | random_erasing p=1 value=random");
    run_any(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, a, n * 4);
    float *nv = malloc((size_t)bx.w * bx.h * 3 * 4);
    sp__erasing_normals(ctx.k_augment, 1, 3, 0, (size_t)bx.w * bx.h * 3, nv);
    CHECK(a[((size_t)2 * 30 + bx.y + bx.h - 1) * 40 + bx.x + bx.w - 1] ==
          nv[(size_t)bx.w * bx.h * 3 - 1]);   /* (c, y, x) order */
    CHECK(a[(size_t)bx.y * 40 + bx.x + 1] == nv[1]);
    char buf[256], want[128];
    sp__pipeline_explain(p, &ctx, 40, 30, SP_FORMAT_UNKNOWN, buf, sizeof buf);
    snprintf(want, sizeof want, "1 random_erasing: box x=%d y=%d w=%d h=%d of 40x30 (try ",
             bx.x, bx.y, bx.w, bx.h);
    CHECK_MSG(strstr(buf, want), "%s", buf);
    sp_pipeline_destroy(p);
    free(nv);
    free(u8);
    free(a);
    free(b);
    free(c);
    free(h);
    sp_image_free(&src);
}

static void test_rotate(void) {
    static const float angles[] = {0.0f, 10.0f, -33.3f, 45.0f, 90.0f, 179.9f, -271.5f, 1000.25f};
    for (int i = 0; i < 8; i++) {
        float th[6];
        sp__rotation_theta(angles[i], th);
        double r = -(double)angles[i] * (3.14159265358979323846 / 180.0);
        CHECK_MSG(fabs(th[0] - cos(r)) < 1e-7 && fabs(th[1] - sin(r)) < 1e-7 && th[3] == -th[1] &&
                  th[4] == th[0] && th[2] == 0 && th[5] == 0, "angle %g", angles[i]);
    }
    /* quarter turns of a square image are index maps (counter-clockwise) */
    const float fill[3] = {1, 2, 3};
    for (int C = 1; C <= 3; C += 2)
        for (int bil = 0; bil < 2; bil++) {
            sp_image src = make_image(6, 6, C), out;
            CHECK(sp__image_alloc(&out, 6, 6, C) == 0);
            CHECK(sp__image_rotate(&src, 90.0f, bil, fill, &out) == 0);
            for (int y = 0; y < 6; y++)
                for (int x = 0; x < 6; x++)
                    for (int c = 0; c < C; c++)
                        CHECK(px(&out, x, y, c) == px(&src, 5 - y, x, c));
            CHECK(sp__image_rotate(&src, 0.0f, bil, fill, &out) == 0);
            CHECK(same_pixels(&out, &src));
            CHECK(sp__image_rotate(&src, 45.0f, bil, fill, &out) == 0);
            for (int c = 0; c < C; c++) CHECK(px(&out, 0, 0, c) == fill[c]);   /* a corner */
            sp_image_free(&src);
            sp_image_free(&out);
        }
}

static void test_rotate_pipeline(void) {
    expect_canonical("rotate degrees=30", "rotate degrees=-30,30 interpolation=nearest fill=0");
    expect_canonical("rotate degrees=0 interpolation=bilinear fill=1,2,3",
                     "rotate degrees=0,0 interpolation=bilinear fill=1,2,3");
    expect_canonical("random_apply ops=1 | rotate degrees=10,20 fill=7.5",
                     "random_apply ops=1 p=0.5 | rotate degrees=10,20 interpolation=nearest fill=7.5");
    expect_spec_error("rotate", "missing required key \"degrees\"");
    expect_spec_error("rotate degrees=-5", "for degrees");
    expect_spec_error("rotate degrees=5,1", "for degrees");
    expect_spec_error("rotate degrees=5 interpolation=bicubic", "for interpolation");
    expect_spec_error("rotate degrees=5 fill=256", "for fill");
    expect_spec_error("decode mode=gray | rotate degrees=5 fill=1,2,3", "gray pipeline");
    sp_pipeline *p = parse_ok("hflip p=1 | rotate degrees=-40,40 interpolation=bilinear fill=9");
    sp_image src = make_image(11, 7, 3);
    sp_error err;
    sp_error_clear(&err);
    const float fill[3] = {9, 9, 9};
    for (uint32_t i = 0; i < 8; i++) {
        sp_sample_ctx ctx = {sp_rng_key(12, SP_RNG_AUGMENT), 0, i};
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, i, 0);
        float a = (float)(-40.0 + 80.0 * sp_u01d(d.c[0]));
        sp_image flipped, ref, got;
        CHECK(sp__image_copy(&src, &flipped) == 0);
        sp__image_hflip(&flipped);   /* torchvision's order: the flip, then the rotation */
        CHECK(sp__image_alloc(&ref, 11, 7, 3) == 0);
        CHECK(sp__image_rotate(&flipped, a, 1, fill, &ref) == 0);
        CHECK_OK(run_raw(p, &ctx, &src, 11, 7, &got, &err), &err);
        CHECK_MSG(same_pixels(&got, &ref), "sample %u", i);
        char buf[256], want[96];
        sp__pipeline_explain(p, &ctx, 11, 7, SP_FORMAT_UNKNOWN, buf, sizeof buf);
        snprintf(want, sizeof want, "1 rotate: angle %.9g (bilinear)\n", (double)a);
        CHECK_MSG(strstr(buf, want), "%s", buf);
        sp_image_free(&flipped);
        sp_image_free(&ref);
        sp_image_free(&got);
    }
    sp_pipeline_destroy(p);
    sp_image_free(&src);
}

static const sp_case cases[] = {
    SP_CASE(test_crop_reference),
    SP_CASE(test_crop_sample),
    SP_CASE(test_random_crop_pipeline),
    SP_CASE(test_random_crop_explain),
    SP_CASE(test_blur_kernel),
    SP_CASE(test_blur_reference),
    SP_CASE(test_blur_pipeline),
    SP_CASE(test_erasing_sample),
    SP_CASE(test_erasing_normals),
    SP_CASE(test_erasing_pipeline),
    SP_CASE(test_rotate),
    SP_CASE(test_rotate_pipeline),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

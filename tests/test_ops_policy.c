/* test_ops_policy.c - affine and the policy ops (ops.h: sp__affine_rss,
 * sp__affine_theta, sp__image_affine, sp__aug_apply, sp_tensor_*,
 * sp__linspace_f32; pipeline ops affine, auto_augment, rand_augment,
 * trivial_augment_wide).
 * Cases: test_linspace (endpoints exact, monotonic, within an ulp or two
 * of the double formula), test_aug_identities (each sub-op at its neutral
 * magnitude leaves the image, TranslateX/Y by t pixels is a shift with
 * zeros, Invert twice, ShearX about the top-left corner keeps row 0, the
 * tensor blends against a plain float reference), test_affine_is_rotate
 * (affine degrees=a,a gives rotate degrees=-a,-a's bytes; an identity
 * affine is the input), test_policy_pipeline (canonical forms, refusals,
 * the explain lines follow the draws, a pending flip applied first, each
 * sample the same whatever else ran).
 * bindings/python/tests/test_policy_parity.py compares with torchvision
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
#include "seedpipe/pipeline.h"
#include "augment/ops_internal.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"

static sp_image copy_of(const sp_image *a) {
    sp_image c;
    CHECK(sp__image_copy(a, &c) == 0);
    return c;
}

static void test_linspace(void) {
    const float ends[][2] = {{0.0f, 0.3f}, {0.0f, 0.99f}, {0.0f, 135.0f}, {255.0f, 0.0f},
                             {0.0f, 145.015106f}};
    for (int e = 0; e < 5; e++)
        for (int n = 2; n <= 70; n++) {
            float a = ends[e][0], b = ends[e][1];
            CHECK(sp__linspace_f32(a, b, n, 0) == a && sp__linspace_f32(a, b, n, n - 1) == b);
            for (int i = 0; i < n; i++) {
                double want = a + (b - (double)a) * i / (n - 1);
                float got = sp__linspace_f32(a, b, n, i);
                CHECK_MSG(fabs(got - want) <= 4 * fabs((double)b - a) * 1.2e-7, "%d/%d: %.9g %.9g",
                          i, n, (double)got, want);
                if (i) CHECK((got - sp__linspace_f32(a, b, n, i - 1)) * (b - a) > 0);
            }
        }
}

/* The tensor path's blend against a plain float reference. */
static uint8_t ref_blend(float f, int v, float o) {
    float r = f * (float)v;
    float t = (float)(1.0 - (double)f) * o;
    r = r + t;
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

static void test_aug_identities(void) {
    sp_image src = make_image(13, 9, 3);
    struct { int op; double m; } neutral[] = {
        {SP_AUG_IDENTITY, 0}, {SP_AUG_SHEAR_X, 0}, {SP_AUG_SHEAR_Y, 0}, {SP_AUG_TRANSLATE_X, 0.9},
        {SP_AUG_TRANSLATE_Y, -0.7}, {SP_AUG_ROTATE, 0}, {SP_AUG_BRIGHTNESS, 0}, {SP_AUG_COLOR, 0},
        {SP_AUG_CONTRAST, 0}, {SP_AUG_SHARPNESS, 0}, {SP_AUG_POSTERIZE, 8}, {SP_AUG_SOLARIZE, 256}};
    for (size_t i = 0; i < sizeof neutral / sizeof neutral[0]; i++)
        for (int bil = 0; bil < 2; bil++) {
            sp_image a = copy_of(&src);
            CHECK(sp__aug_apply(&a, neutral[i].op, neutral[i].m, bil, NULL) == 0);
            CHECK_MSG(same_pixels(&a, &src), "%s bilinear %d", sp__aug_name(neutral[i].op), bil);
            sp_image_free(&a);
        }
    for (int t = -4; t <= 4; t++) {   /* translate: out(x) = in(x - t), zeros outside */
        sp_image a = copy_of(&src), b = copy_of(&src);
        CHECK(sp__aug_apply(&a, SP_AUG_TRANSLATE_X, t, 1, NULL) == 0);
        CHECK(sp__aug_apply(&b, SP_AUG_TRANSLATE_Y, t, 0, NULL) == 0);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 13; x++)
                for (int k = 0; k < 3; k++) {
                    int sx = x - t, sy = y - t;
                    CHECK(px(&a, x, y, k) == (sx >= 0 && sx < 13 ? px(&src, sx, y, k) : 0));
                    CHECK(px(&b, x, y, k) == (sy >= 0 && sy < 9 ? px(&src, x, sy, k) : 0));
                }
        sp_image_free(&a);
        sp_image_free(&b);
    }
    sp_image a = copy_of(&src);   /* ShearX about the top-left corner: row 0 stays */
    const float fill[3] = {1, 2, 3};
    CHECK(sp__aug_apply(&a, SP_AUG_SHEAR_X, 0.3, 0, fill) == 0);
    CHECK(memcmp(a.data, src.data, 13 * 3) == 0 && !same_pixels(&a, &src));
    sp_image_free(&a);
    a = copy_of(&src);
    CHECK(sp__aug_apply(&a, SP_AUG_INVERT, 0, 0, NULL) == 0);
    CHECK(px(&a, 3, 4, 1) == 255 - px(&src, 3, 4, 1));
    CHECK(sp__aug_apply(&a, SP_AUG_INVERT, 0, 0, NULL) == 0 && same_pixels(&a, &src));
    CHECK(sp__aug_apply(&a, SP_AUG_COUNT, 0, 0, NULL) == SP_EINVAL);
    for (int t = 0; t < 3; t++) {
        float f = t == 0 ? 0.01f : t == 1 ? 1.37f : 1.99f;
        sp_image b = copy_of(&src), c = copy_of(&src);
        sp__tensor_brightness(&b, f);
        sp__tensor_saturation(&c, f);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 13; x++) {
                const uint8_t *p = src.data + (size_t)y * src.stride + (size_t)x * 3;
                float g = 0.2989f * p[0] + 0.587f * p[1];   /* -ffp-contract=off */
                g = g + 0.114f * p[2];
                for (int k = 0; k < 3; k++) {
                    CHECK(px(&b, x, y, k) == ref_blend(f, p[k], 0.0f));
                    CHECK(px(&c, x, y, k) == ref_blend(f, p[k], (float)(uint8_t)g));
                }
            }
        sp_image_free(&b);
        sp_image_free(&c);
    }
    sp_image_free(&a);
    sp_image_free(&src);
}

static int run_raw(const sp_pipeline *p, uint32_t i, const sp_image *raw, sp_image *out) {
    sp_sample_ctx ctx = {sp_rng_key(21, SP_RNG_AUGMENT), 3, i};
    CHECK(sp__image_alloc(out, raw->width, raw->height, raw->channels) == 0);
    sp_sample_src src = {"raw", NULL, 0, raw};
    sp_run_opts o = {SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 0, NULL};
    sp_error err;
    sp_error_clear(&err);
    size_t n = (size_t)raw->width * (size_t)raw->height * (size_t)raw->channels;
    int rc = sp__pipeline_run_checked(p, &ctx, &src, &o, out->data, n, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    return rc;
}

static void test_affine_is_rotate(void) {
    sp_image src = make_image(17, 12, 3);
    const char *pairs[][2] = {
        {"affine degrees=33.5,33.5 interpolation=bilinear fill=4,5,6",
         "rotate degrees=-33.5,-33.5 interpolation=bilinear fill=4,5,6"},
        {"affine degrees=-120,-120", "rotate degrees=120,120"},
        {"affine degrees=0 interpolation=bilinear", "hflip p=0"},
        {"affine degrees=0 scale=1,1 shear=0 translate=0,0", "vflip p=0"}};
    for (int t = 0; t < 4; t++) {
        sp_pipeline *a = parse_ok(pairs[t][0]), *b = parse_ok(pairs[t][1]);
        for (uint32_t i = 0; i < 4; i++) {
            sp_image x, y;
            run_raw(a, i, &src, &x);
            run_raw(b, i, &src, &y);
            CHECK_MSG(same_pixels(&x, &y), "%s", pairs[t][0]);
            sp_image_free(&x);
            sp_image_free(&y);
        }
        sp_pipeline_destroy(a);
        sp_pipeline_destroy(b);
    }
    double rss[4];   /* the pure shear of _apply_op: tan(shear) = m */
    sp__affine_rss(0.0, 16.69924423, 0.0, rss);
    CHECK(rss[0] == 1.0 && fabs(rss[1] + 0.3) < 1e-9 && rss[2] == 0.0 && rss[3] == 1.0);
    sp_image_free(&src);
}

static void test_policy_pipeline(void) {
    expect_canonical("affine degrees=10", "affine degrees=-10,10 translate=0,0 scale=1,1 "
                     "shear=0,0,0,0 interpolation=nearest fill=0");
    expect_canonical("affine degrees=1,2 translate=0.1,0.2 scale=0.5,2 shear=5 fill=1,2,3",
                     "affine degrees=1,2 translate=0.1,0.2 scale=0.5,2 shear=-5,5,0,0 "
                     "interpolation=nearest fill=1,2,3");
    expect_canonical("affine degrees=0 shear=-1,2,-3,4 interpolation=bilinear",
                     "affine degrees=0,0 translate=0,0 scale=1,1 shear=-1,2,-3,4 "
                     "interpolation=bilinear fill=0");
    expect_canonical("auto_augment",
                     "auto_augment policy=imagenet interpolation=nearest fill=none");
    expect_canonical("auto_augment policy=svhn fill=7", "auto_augment policy=svhn "
                     "interpolation=nearest fill=7");
    expect_canonical("rand_augment", "rand_augment num_ops=2 magnitude=9 num_magnitude_bins=31 "
                     "interpolation=nearest fill=none");
    expect_canonical("trivial_augment_wide interpolation=bilinear fill=none",
                     "trivial_augment_wide num_magnitude_bins=31 interpolation=bilinear fill=none");
    expect_canonical("random_apply ops=1 | trivial_augment_wide num_magnitude_bins=5",
                     "random_apply ops=1 p=0.5 | trivial_augment_wide num_magnitude_bins=5 "
                     "interpolation=nearest fill=none");
    expect_spec_error("affine", "missing required key \"degrees\"");
    expect_spec_error("affine degrees=5 translate=0.5", "for translate");
    expect_spec_error("affine degrees=5 scale=0,1", "for scale");
    expect_spec_error("affine degrees=5 shear=90", "for shear");
    expect_spec_error("affine degrees=5 shear=1,2,3", "for shear");
    expect_spec_error("affine degrees=5 fill=none", "for fill");
    expect_spec_error("auto_augment policy=imagenette", "for policy");
    expect_spec_error("rand_augment magnitude=31", "for magnitude");
    expect_spec_error("rand_augment num_magnitude_bins=5 magnitude=5", "for magnitude");
    expect_spec_error("rand_augment num_ops=17", "for num_ops");
    expect_spec_error("trivial_augment_wide num_magnitude_bins=1", "for num_magnitude_bins");
    expect_spec_error("trivial_augment_wide interpolation=bicubic", "for interpolation");
    expect_spec_error("decode mode=gray | auto_augment fill=1,2,3", "gray pipeline");
    /* the pending flip first; the draws as explain says */
    sp_pipeline *p = parse_ok("hflip p=1 | trivial_augment_wide interpolation=bilinear");
    sp_pipeline *q = parse_ok("hflip p=0 | trivial_augment_wide interpolation=bilinear");
    sp_image src = make_image(15, 11, 3);
    static const char *const NAMES[14] = {
        "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
        "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize"};
    for (uint32_t i = 0; i < 24; i++) {
        sp_image flipped = copy_of(&src), got, ref;
        sp__image_hflip(&flipped);
        run_raw(p, i, &src, &got);
        run_raw(q, i, &flipped, &ref);
        CHECK_MSG(same_pixels(&got, &ref), "sample %u", i);
        sp_sample_ctx ctx = {sp_rng_key(21, SP_RNG_AUGMENT), 3, i};
        char buf[512], want[64];
        sp__pipeline_explain(p, &ctx, 15, 11, SP_FORMAT_UNKNOWN, buf, sizeof buf);
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, i, 3);
        snprintf(want, sizeof want, "1 trivial_augment_wide: [%s ",
                 NAMES[sp_uniform_int(d.c[0], 14)]);
        CHECK_MSG(strstr(buf, want), "%s lacks %s", buf, want);
        snprintf(want, sizeof want, "bin %u of 31", (unsigned)sp_uniform_int(d.c[1], 31));
        CHECK_MSG(strstr(buf, want), "%s lacks %s", buf, want);
        sp_image_free(&flipped);
        sp_image_free(&got);
        sp_image_free(&ref);
    }
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(q);
    sp_image_free(&src);
}

static const sp_case cases[] = {
    SP_CASE(test_linspace),
    SP_CASE(test_aug_identities),
    SP_CASE(test_affine_is_rotate),
    SP_CASE(test_policy_pipeline),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

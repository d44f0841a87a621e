/* test_pipeline.c - the pipeline spec language and sp__pipeline_run.
 *
 * Parser: presets, canonical form and its round trip, @file, errors that
 * quote the offending word. Run: randomness recomputed here from the spec
 * (Philox draws, libm in the test), determinism across repeats, layouts and
 * dtypes, the normalize table against its formula, the fusions (resize +
 * center_crop window; decode + crop region at DCT scale) against the
 * unfused path.
 * Cases: test_parse; test_rrc_and_flip, test_jitter,
 * test_layouts_and_normalize, test_variation_and_channels,
 * test_center_crop_and_fusion, test_edges; encoded inputs
 * (test_encoded_320x240 with the DCT-vs-full closeness bound,
 * test_encoded_odd_sizes); test_explain; test_half (bf16/f16 rounding);
 * test_op_registry (every op's descriptor: complete, found by its name,
 * and covered by a spec here whose canonical form round-trips).
 */
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <png.h>
#include <turbojpeg.h>

#include "check.h"
#include "pipeline_check.h"
#include "runner.h"
#include "seedpipe/decode.h"
#include "seedpipe/pipeline.h"
#include "augment/pipeline_internal.h"
#include "augment/decode_internal.h"
#include "augment/ops_internal.h"
#include "common/common_internal.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint8_t rnd8(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(rng_state >> 56);
}

static void expect_error(const char *spec, const char *needle1, const char *needle2) {
    sp_pipeline *p = NULL;
    sp_error err;
    sp_error_clear(&err);
    int rc = sp_pipeline_parse(spec, &p, &err);
    CHECK_MSG(rc == SP_ESPEC && p == NULL, "spec \"%s\" gave %d", spec, rc);
    CHECK_MSG(strstr(err.msg, needle1) && (!needle2 || strstr(err.msg, needle2)),
              "spec \"%s\": message \"%s\" lacks \"%s\" / \"%s\"", spec, err.msg, needle1,
              needle2 ? needle2 : "");
}

static void check_roundtrip(const char *spec) {
    sp_pipeline *a = parse_ok(spec);
    sp_pipeline *b = parse_ok(sp__pipeline_canonical(a));
    CHECK_MSG(strcmp(sp__pipeline_canonical(a), sp__pipeline_canonical(b)) == 0, "%s -> %s -> %s",
              spec, sp__pipeline_canonical(a), sp__pipeline_canonical(b));
    sp_pipeline_destroy(a);
    sp_pipeline_destroy(b);
}

static void test_parse(void) {
    sp_pipeline *p = parse_ok("imagenet-train");
    CHECK(strcmp(sp__pipeline_canonical(p),
                 "random_resized_crop size=224,224 scale=0.08,1 ratio=0.75,1.33333333 | hflip "
                 "p=0.5 | normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225") == 0);
    CHECK(sp_pipeline_has_normalize(p));
    sp_pipeline_destroy(p);
    p = parse_ok("  random_resized_crop size=224  |hflip\n| normalize mean=0.485,0.456,0.406 "
                 "std=0.229,0.224,0.225 ");
    CHECK(strstr(sp__pipeline_canonical(p), "ratio=0.75,1.33333333 | hflip p=0.5 |"));
    sp_pipeline_destroy(p);
    p = parse_ok("color_jitter brightness=0.4 contrast=0.5,1.5 | grayscale | vflip p=0.25");
    CHECK(strcmp(sp__pipeline_canonical(p),
                 "color_jitter brightness=0.6,1.4 contrast=0.5,1.5 saturation=1,1 | grayscale "
                 "p=0.1 | vflip p=0.25") == 0);
    CHECK(!sp_pipeline_has_normalize(p));
    sp_pipeline_destroy(p);
    p = parse_ok("mnist");
    CHECK(strcmp(sp__pipeline_canonical(p),
                 "decode mode=gray dct=off | normalize mean=0.1307 std=0.3081") == 0);
    sp_pipeline_destroy(p);
    p = parse_ok("normalize mean=0.5 std=0.25");   /* one value for all channels */
    CHECK(strcmp(sp__pipeline_canonical(p), "normalize mean=0.5,0.5,0.5 std=0.25,0.25,0.25") == 0);
    sp_pipeline_destroy(p);

    for (const char *const *n = sp__pipeline_presets(); *n; n++) check_roundtrip(*n);
    check_roundtrip("decode mode=rgb dct=off | resize size=37 | center_crop size=30,31");
    check_roundtrip("random_resized_crop size=10,20 scale=0.1234567891234,0.9 ratio=0.3,3");
    check_roundtrip("color_jitter brightness=0.1 contrast=0.2 saturation=0.33333333333333 hue=0");
    check_roundtrip("hflip p=0.3333333333333333 | normalize mean=-1e-5,2,3 std=1e3,2,3");

    /* errors quote the word and the op */
    expect_error("hflip | flipp p=0.5", "op 1 \"flipp\"", "unknown op");
    expect_error("hflip q=0.5", "op 0 \"hflip\"", "unknown key \"q\" (known: p)");
    expect_error("resize size=224 | hflip p=abc", "op 1 \"hflip\"", "\"abc\"");
    expect_error("hflip p=1.5", "\"1.5\"", "[0, 1]");
    expect_error("hflip p=nan", "\"nan\"", NULL);
    expect_error("random_resized_crop scale=0.08,1", "op 0 \"random_resized_crop\"",
                 "missing required key \"size\"");
    expect_error("random_resized_crop size=224 ratio=2,1", "\"2,1\"", "ratio");
    expect_error("center_crop size=0", "\"0\"", "size");
    expect_error("center_crop size=3.5", "\"3.5\"", NULL);
    expect_error("resize size=1,2,3", "\"1,2,3\"", NULL);
    expect_error("color_jitter hue=0.6", "op 0 \"color_jitter\"", "hue");
    expect_error("hflip | decode mode=gray", "op 1 \"decode\"", "first");
    expect_error("decode mode=cmyk", "\"cmyk\"", "rgb or gray");
    expect_error("normalize mean=0.5 std=0.5 | hflip", "op 1 \"hflip\"", "normalize");
    expect_error("normalize mean=0.5,0.5 std=1", "\"0.5,0.5\"", "mean");
    expect_error("normalize mean=0.5", "missing required key \"std\"", NULL);
    expect_error("normalize mean=0.5 std=0", "\"0\"", "std");
    expect_error("decode mode=gray | normalize mean=1,2,3 std=1", "\"1,2,3\"", NULL);
    expect_error("hflip p=0.5 p=0.2", "given twice", NULL);
    expect_error("hflip || vflip", "op 1", "empty op");
    expect_error("hflip 0.5", "expected key=value, got \"0.5\"", NULL);
    expect_error("   ", "empty", NULL);
    expect_error("imagenet-train | hflip", "\"imagenet-train\"", "unknown op");

    /* @file, with comments */
    char path[] = "/tmp/sp_test_pipeline_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *text = "# eval pipeline\nresize size=256   # shorter side\n| center_crop size=224\n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    char at[64];
    snprintf(at, sizeof at, "@%s", path);
    p = parse_ok(at);
    CHECK(strcmp(sp__pipeline_canonical(p), "resize size=256 | center_crop size=224,224") == 0);
    sp_pipeline_destroy(p);
    unlink(path);
    /* a file holding a preset name after a comment */
    strcpy(path, "/tmp/sp_test_pipeline_XXXXXX");
    fd = mkstemp(path);
    CHECK(fd >= 0);
    text = "# the standard eval transform\n  imagenet-eval  \n";
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    snprintf(at, sizeof at, "@%s", path);
    p = parse_ok(at);
    sp_pipeline *q = parse_ok("imagenet-eval");
    CHECK(strcmp(sp__pipeline_canonical(p), sp__pipeline_canonical(q)) == 0);
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(q);
    unlink(path);
    /* numbers are read and written in the C locale whatever LC_NUMERIC says */
    if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
        p = parse_ok("hflip p=0.25");
        CHECK(strcmp(sp__pipeline_canonical(p), "hflip p=0.25") == 0);
        sp_pipeline_destroy(p);
        setlocale(LC_NUMERIC, "C");
    }
    sp_error err;
    CHECK(sp_pipeline_parse("@/nonexistent/spec.txt", &p, &err) == SP_EIO);
    CHECK(strstr(err.msg, "/nonexistent/spec.txt"));

    /* output dims */
    int h, w, c;
    p = parse_ok("imagenet-eval");
    CHECK(sp__pipeline_output_dims(p, 0, 0, &h, &w, &c, &err) == 0 &&
          h == 224 && w == 224 && c == 3);
    sp_pipeline_destroy(p);
    p = parse_ok("resize size=256");
    CHECK(sp__pipeline_output_dims(p, 0, 0, &h, &w, &c, &err) == SP_ESPEC);
    CHECK(sp__pipeline_output_dims(p, 300, 200, &h, &w, &c, &err) == 0 && h == 256 && w == 384);
    CHECK(sp__pipeline_output_dims(p, 200, 333, &h, &w, &c, &err) == 0 && h == 426 && w == 256);
    sp_pipeline_destroy(p);
    p = parse_ok("mnist");
    CHECK(sp__pipeline_output_dims(p, 28, 28, &h, &w, &c, &err) == 0 &&
          h == 28 && w == 28 && c == 1);
    CHECK(sp__pipeline_output_dims(p, 0, 0, &h, &w, &c, &err) == SP_ESPEC);
    sp_pipeline_destroy(p);

    sp_dtype dt;
    sp_layout lay;
    CHECK(sp_dtype_parse("float32", &dt, &err) == 0 && dt == SP_DTYPE_FLOAT32);
    CHECK(sp_dtype_parse("f16", &dt, &err) == SP_EINVAL && strstr(err.msg, "\"f16\""));
    CHECK(sp_layout_parse("nhwc", &lay, &err) == 0 && lay == SP_LAYOUT_NHWC);
    CHECK(sp_layout_parse("hwc", &lay, &err) == SP_EINVAL && strstr(err.msg, "\"hwc\""));
    CHECK(sp__dtype_size(SP_DTYPE_FLOAT32) == 4 && sp__dtype_size(SP_DTYPE_UINT8) == 1);
}

/* ---- running ----------------------------------------------------------------- */

static sp_image make_image(int w, int h, int c) {
    sp_image im;
    CHECK(sp__image_alloc(&im, w, h, c) == 0);
    for (size_t i = 0; i < im.stride * (size_t)h; i++) im.data[i] = rnd8();
    return im;
}

/* Smooth content compresses like a photo (JPEG tests). */
static sp_image make_smooth(int w, int h) {
    sp_image im;
    CHECK(sp__image_alloc(&im, w, h, 3) == 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im.data + (size_t)y * im.stride + 3 * (size_t)x;
            p[0] = (uint8_t)(x * 255 / w);
            p[1] = (uint8_t)(y * 255 / h);
            p[2] = (uint8_t)(((x / 16 + y / 16) & 1) ? 200 : 40);
        }
    return im;
}

static sp_sample_ctx ctx_for(uint64_t seed, uint32_t epoch, uint32_t sample) {
    sp_sample_ctx c = {sp_rng_key(seed, SP_RNG_AUGMENT), epoch, sample};
    return c;
}

/* Run and return a malloc'd output of (h, w, c) = the pipeline's dims. */
static void *run(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_sample_src *src,
                 sp_dtype dt, sp_layout lay, int in_w, int in_h, int *oh, int *ow, int *oc) {
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__pipeline_output_dims(p, in_w, in_h, oh, ow, oc, &err), &err);
    size_t n = (size_t)*oh * (size_t)*ow * (size_t)*oc * sp__dtype_size(dt);
    void *out = malloc(n);
    sp_run_opts o = {dt, lay, 0, NULL};
    CHECK_OK(sp__pipeline_run_checked(p, ctx, src, &o, out, n, &err), &err);
    return out;
}

static uint8_t *run_u8(const sp_pipeline *p, const sp_sample_ctx *ctx, const sp_image *raw,
                       int *oh, int *ow, int *oc) {
    sp_sample_src src = {"raw", NULL, 0, raw};
    return run(p, ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, raw->width, raw->height, oh, ow, oc);
}

static int image_equals(const sp_image *im, const uint8_t *hwc) {
    for (int y = 0; y < im->height; y++)
        if (memcmp(im->data + (size_t)y * im->stride,
                   hwc + (size_t)y * (size_t)im->width * (size_t)im->channels,
                   (size_t)im->width * (size_t)im->channels))
            return 0;
    return 1;
}

/* RRC parameters recomputed from the spec with libm (test only). */
static void ref_rrc(int W, int H, double s0, double s1, double r0, double r1,
                    const sp_sample_ctx *c, uint32_t op, sp_crop_box *b) {
    for (uint32_t t = 0; t < 10; t++) {
        sp_ctr d = sp_sample_draw(c->k_augment, t, op, c->sample, c->epoch);
        double ta = (double)W * H * (s0 + (s1 - s0) * sp_u01d(d.c[0]));
        double ar = exp(log(r0) + (log(r1) - log(r0)) * sp_u01d(d.c[1]));
        double w = rint(sqrt(ta * ar)), h = rint(sqrt(ta / ar));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            *b = (sp_crop_box){(int)sp_uniform_int(d.c[3], (uint64_t)(W - (int)w + 1)),
                               (int)sp_uniform_int(d.c[2], (uint64_t)(H - (int)h + 1)), (int)w, (int)h};
            return;
        }
    }
    CHECK(!"no fallback expected in this test");
}

static void test_rrc_and_flip(void) {
    sp_image img = make_image(97, 61, 3);
    sp_pipeline *p = parse_ok("random_resized_crop size=32,40 scale=0.08,1 ratio=0.75,1.3333333 "
                              "| hflip p=0.5");
    int flipped = 0;
    for (uint32_t i = 0; i < 200; i++) {
        sp_sample_ctx ctx = ctx_for(77, i % 3, i);
        int oh, ow, oc;
        uint8_t *out = run_u8(p, &ctx, &img, &oh, &ow, &oc);
        CHECK(oh == 32 && ow == 40 && oc == 3);
        sp_crop_box b;
        ref_rrc(97, 61, 0.08, 1.0, 0.75, 1.3333333, &ctx, 0, &b);
        sp_image view, exp_img;
        CHECK(sp__image_crop(&img, b.x, b.y, b.w, b.h, &view) == 0);
        CHECK(sp__image_resize(&view, 40, 32, &exp_img) == 0);
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, ctx.sample, ctx.epoch);
        if ((d.c[0] >> 8) * (1.0 / 16777216.0) < 0.5) {
            sp__image_hflip(&exp_img);
            flipped++;
        }
        CHECK_MSG(image_equals(&exp_img, out), "sample %u", i);
        sp_image_free(&exp_img);
        free(out);
    }
    CHECK(flipped > 70 && flipped < 130);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static void test_jitter(void) {
    sp_image img = make_image(23, 19, 3);
    sp_pipeline *p = parse_ok("grayscale p=0 | color_jitter brightness=0.4 contrast=0.4 saturation=0.4");
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    int seen[6] = {0};
    for (uint32_t i = 0; i < 120; i++) {
        sp_sample_ctx ctx = ctx_for(5, 1, i);
        int oh, ow, oc;
        uint8_t *out = run_u8(p, &ctx, &img, &oh, &ow, &oc);
        sp_ctr d = sp_sample_draw(ctx.k_augment, 0, 1, ctx.sample, ctx.epoch);
        int perm = (int)(((uint64_t)d.c[0] * 6) >> 32);
        seen[perm]++;
        sp_image e;
        CHECK(sp__image_copy(&img, &e) == 0);
        for (int t = 0; t < 3; t++) {
            int fn = orders[perm][t];
            double f = 0.6 + 0.8 * sp_u01d(d.c[1 + fn]);
            int32_t fq = (int32_t)(f * 4096.0 + 0.5);
            if (fn == 0) sp__adjust_brightness(&e, fq);
            else if (fn == 1) sp__adjust_contrast(&e, fq);
            else sp__adjust_saturation(&e, fq);
        }
        CHECK_MSG(image_equals(&e, out), "sample %u", i);
        sp_image_free(&e);
        free(out);
    }
    for (int k = 0; k < 6; k++) CHECK(seen[k] > 0);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static void test_layouts_and_normalize(void) {
    sp_image img = make_image(16, 16, 3);
    for (int v = 0; v < 256; v++) img.data[3 * v] = (uint8_t)v;   /* every value in channel 0 */
    const char *spec = "hflip | vflip | color_jitter brightness=0.3 saturation=0.2 | "
                       "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225";
    sp_pipeline *p = parse_ok(spec);
    const double mean[3] = {0.485, 0.456, 0.406}, stdv[3] = {0.229, 0.224, 0.225};
    sp_sample_src src = {"raw", NULL, 0, &img};
    sp_sample_ctx ctx = ctx_for(9, 0, 4);
    int oh, ow, oc;
    float *chw = run(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, 16, 16, &oh, &ow, &oc);
    float *hwc = run(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NHWC, 16, 16, &oh, &ow, &oc);
    float *again = run(p, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, 16, 16, &oh, &ow, &oc);
    CHECK(memcmp(chw, again, (size_t)oh * ow * oc * 4) == 0);
    /* uint8 preview of the same sample, then the table formula */
    sp_run_opts o8 = {SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 1, NULL};
    uint8_t *u8 = malloc((size_t)oh * ow * oc);
    sp_error err;
    CHECK_OK(sp__pipeline_run(p, &ctx, &src, &o8, u8, &err), &err);
    o8.skip_normalize = 0;
    CHECK(sp__pipeline_run(p, &ctx, &src, &o8, u8, &err) == SP_EINVAL &&
          strstr(err.msg, "float32"));
    o8.skip_normalize = 1;
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) {
                uint8_t v = u8[(y * ow + x) * 3 + c];
                float e = (float)v / 255.0f;
                e = e - (float)mean[c];
                e = e / (float)stdv[c];
                CHECK(memcmp(&hwc[(y * ow + x) * 3 + c], &e, 4) == 0);
                CHECK(memcmp(&chw[(c * oh + y) * ow + x], &e, 4) == 0);
            }
    free(chw);
    free(hwc);
    free(again);
    /* without normalize: v / 255, and uint8 NCHW is NHWC permuted */
    sp_pipeline *q = parse_ok("hflip | vflip | color_jitter brightness=0.3 saturation=0.2");
    float *f = run(q, &ctx, &src, SP_DTYPE_FLOAT32, SP_LAYOUT_NHWC, 16, 16, &oh, &ow, &oc);
    uint8_t *u8c = run(q, &ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NCHW, 16, 16, &oh, &ow, &oc);
    for (int i = 0; i < oh * ow * 3; i++) {
        float e = (float)u8[i] / 255.0f;
        CHECK(memcmp(&f[i], &e, 4) == 0);
        int c = i % 3, x = (i / 3) % ow, y = i / 3 / ow;
        CHECK(u8c[(c * oh + y) * ow + x] == u8[i]);
    }
    free(f);
    free(u8c);
    free(u8);
    /* too small a buffer is refused, nothing written */
    uint8_t small[10];
    CHECK(sp__pipeline_run_checked(q, &ctx, &src, &o8, small, sizeof small, &err) == SP_ERANGE);
    sp_pipeline_destroy(q);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static void test_variation_and_channels(void) {
    sp_image img = make_image(80, 60, 3);
    sp_pipeline *p = parse_ok("shapes-train");
    int oh, ow, oc;
    uint8_t *outs[8];
    for (uint32_t i = 0; i < 8; i++) {
        sp_sample_ctx ctx = ctx_for(1, 0, i);
        outs[i] = run_u8(p, &ctx, &img, &oh, &ow, &oc);
        CHECK(oh == 48 && ow == 48 && oc == 3);
        for (uint32_t j = 0; j < i; j++) CHECK(memcmp(outs[i], outs[j], 48 * 48 * 3) != 0);
    }
    sp_sample_ctx e1 = ctx_for(1, 1, 0), s2 = ctx_for(2, 0, 0);
    uint8_t *a = run_u8(p, &e1, &img, &oh, &ow, &oc), *b = run_u8(p, &s2, &img, &oh, &ow, &oc);
    CHECK(memcmp(a, outs[0], 48 * 48 * 3) != 0 && memcmp(b, outs[0], 48 * 48 * 3) != 0);
    free(a);
    free(b);
    for (int i = 0; i < 8; i++) free(outs[i]);
    sp_pipeline_destroy(p);
    /* channel conversion of raw input */
    sp_pipeline *g = parse_ok("decode mode=gray");
    sp_pipeline *r = parse_ok("decode mode=rgb");
    sp_sample_ctx ctx = ctx_for(1, 0, 0);
    uint8_t *gray = run_u8(g, &ctx, &img, &oh, &ow, &oc);
    CHECK(oc == 1);
    for (int y = 0; y < 60; y++)
        for (int x = 0; x < 80; x++) {
            const uint8_t *q = img.data + (size_t)y * img.stride + 3 * x;
            CHECK(gray[y * 80 + x] == sp_luma601(q[0], q[1], q[2]));
        }
    sp_image gimg = {80, 60, 1, 80, gray};
    uint8_t *rgb = run_u8(r, &ctx, &gimg, &oh, &ow, &oc);
    CHECK(oc == 3);
    for (int i = 0; i < 80 * 60; i++)
        CHECK(rgb[3 * i] == gray[i] && rgb[3 * i + 1] == gray[i] && rgb[3 * i + 2] == gray[i]);
    free(rgb);
    free(gray);
    sp_pipeline_destroy(g);
    sp_pipeline_destroy(r);
    sp_image_free(&img);
}

static void test_center_crop_and_fusion(void) {
    sp_image img = make_image(10, 6, 3);
    sp_pipeline *p = parse_ok("center_crop size=8,12");   /* pads rows, crops columns */
    sp_sample_ctx ctx = ctx_for(3, 0, 0);
    int oh, ow, oc;
    uint8_t *o = run_u8(p, &ctx, &img, &oh, &ow, &oc);
    CHECK(oh == 8 && ow == 12);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 12; x++)
            for (int c = 0; c < 3; c++) {
                int sy = y - 1, sx = x - 1;   /* pad (12-10)/2 = 1, (8-6)/2 = 1 */
                uint8_t e = (sy >= 0 && sy < 6 && sx >= 0 && sx < 10)
                                ? img.data[(size_t)sy * img.stride + 3 * sx + c] : 0;
                CHECK(o[(y * 12 + x) * 3 + c] == e);
            }
    free(o);
    sp_pipeline_destroy(p);
    sp_image_free(&img);
    /* resize + center_crop computes only the window: equal to the unfused run */
    img = make_image(71, 53, 3);
    sp_pipeline *fused = parse_ok("resize size=40 | center_crop size=31,37");
    sp_pipeline *plain = parse_ok("resize size=40 | hflip p=0 | center_crop size=31,37");
    uint8_t *a = run_u8(fused, &ctx, &img, &oh, &ow, &oc);
    uint8_t *b = run_u8(plain, &ctx, &img, &oh, &ow, &oc);
    CHECK(oh == 31 && ow == 37 && memcmp(a, b, 31 * 37 * 3) == 0);
    free(a);
    free(b);
    sp_pipeline_destroy(fused);
    sp_pipeline_destroy(plain);
    sp_image_free(&img);
}

/* Tiny and extreme inputs through every op; random specs through the
 * parser (must parse and round-trip, or fail with SP_ESPEC). */
static void test_edges(void) {
    static const int dims[][2] = {{1, 1}, {1, 7}, {7, 1}, {3, 2}, {2, 300}, {300, 2}};
    static const char *const specs[] = {
        ("random_resized_crop size=5,9 | hflip | vflip | grayscale p=0.5 | color_jitter "
         "brightness=0.5 contrast=0.5 saturation=0.5"),
        "resize size=4 | center_crop size=6,3 | color_jitter contrast=0.9",
        "resize size=3,2 | random_resized_crop size=2 scale=1,1 ratio=0.01,100",
        "decode mode=gray | center_crop size=2 | resize size=17,5",
    };
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int c = 1; c <= 3; c += 2)
            for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
                sp_image img = make_image(dims[d][0], dims[d][1], c);
                sp_pipeline *p = parse_ok(specs[s]);
                for (uint32_t i = 0; i < 5; i++) {
                    sp_sample_ctx ctx = ctx_for(8, 0, i);
                    int oh, ow, oc;
                    free(run_u8(p, &ctx, &img, &oh, &ow, &oc));
                }
                sp_pipeline_destroy(p);
                sp_image_free(&img);
            }
    /* a shorter-side resize of a sliver is refused, not allocated */
    sp_image img = make_image(1, 2000, 1);
    sp_pipeline *p = parse_ok("resize size=256");
    sp_sample_src src = {"sliver", NULL, 0, &img};
    sp_sample_ctx ctx = ctx_for(1, 0, 0);
    sp_error err;
    uint8_t buf[16];
    CHECK(sp__pipeline_run(p, &ctx, &src, NULL, buf, &err) == SP_ELIMIT &&
          strstr(err.msg, "sliver"));
    sp_pipeline_destroy(p);
    sp_image_free(&img);

    static const char *const words[] = {
        "hflip", "vflip", "resize", "center_crop", "random_resized_crop", "color_jitter",
        "grayscale", "normalize", "decode", "p=0.5", "p=", "=", "size=3", "size=3,4",
        "size=0", "scale=0.1,1", "ratio=1,1", "mode=gray", "dct=off", "mean=0.5", "std=2",
        "brightness=0.3", "hue=0", "|", "|", "#", "\n", "1e309", "-", ",", "x=y", "@",
        "imagenet-train", "mnist", "invert", "posterize", "bits=3", "solarize", "threshold=9",
        "autocontrast", "equalize", "sharpness", "factor=2", "hue=0.1", "hue=-0.2,0.3"};
    uint64_t st = 99;
    for (int it = 0; it < 20000; it++) {
        char spec[512] = "";
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        int n = 1 + (int)((st >> 33) % 9);
        for (int k = 0; k < n; k++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            strcat(spec, words[(st >> 33) % (sizeof words / sizeof words[0])]);
            strcat(spec, (st >> 60) & 1 ? " " : "");
        }
        sp_pipeline *q = NULL;
        int rc = sp_pipeline_parse(spec, &q, &err);
        CHECK_MSG(rc == 0 || rc == SP_ESPEC || (rc == SP_EIO && strchr(spec, '@')),
                  "spec \"%s\": %d %s", spec, rc, err.msg);
        if (rc == 0) {
            sp_pipeline *r = parse_ok(sp__pipeline_canonical(q));
            CHECK(strcmp(sp__pipeline_canonical(q), sp__pipeline_canonical(r)) == 0);
            if (it % 8 == 0) {   /* and it runs, on a small raw image */
                sp_image small = make_image(6, 5, 3);
                sp_sample_ctx sc = ctx_for(4, 1, (uint32_t)it);
                sp_sample_src ss = {"small", NULL, 0, &small};
                int oh, ow, oc;
                free(run(q, &sc, &ss, SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, 6, 5, &oh, &ow, &oc));
                sp_image_free(&small);
            }
            sp_pipeline_destroy(r);
            sp_pipeline_destroy(q);
        } else {
            CHECK(q == NULL && err.msg[0]);
        }
    }
}

/* ---- encoded input: fused decode + crop ------------------------------------------ */

static void encode_jpeg(const sp_image *im, uint8_t **buf, size_t *len) {
    tjhandle h = tjInitCompress();
    unsigned long n = 0;
    *buf = NULL;
    CHECK(tjCompress2(h, im->data, im->width, (int)im->stride, im->height, TJPF_RGB, buf, &n,
                      TJSAMP_420, 90, 0) == 0);
    tjDestroy(h);
    *len = n;
}

static void encode_png(const sp_image *im, uint8_t **buf, size_t *len) {
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)im->width;
    pi.height = (png_uint_32)im->height;
    pi.format = PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    CHECK(png_image_write_to_memory(&pi, NULL, &n, 0, im->data, (png_int_32)im->stride, NULL));
    *buf = malloc(n);
    CHECK(png_image_write_to_memory(&pi, *buf, &n, 0, im->data, (png_int_32)im->stride, NULL));
    *len = n;
}

static void test_encoded_size(int W, int H, int check_close) {
    sp_image img = make_smooth(W, H);
    uint8_t *jpg, *png;
    size_t jlen, plen;
    encode_jpeg(&img, &jpg, &jlen);
    encode_png(&img, &png, &plen);
    sp_error err;
    sp_image full;
    sp_decode_req whole = {3, 0, 0, 0, 0, 1};
    CHECK_OK(sp__image_decode(jpg, jlen, "t.jpg", &whole, NULL, &full, &err), &err);
    static const char *const specs[] = {
        "decode mode=rgb dct=%s | random_resized_crop size=32 scale=0.3,1 | hflip",
        "decode mode=rgb dct=%s | random_resized_crop size=100,90 scale=0.05,1",
        "decode mode=rgb dct=%s | resize size=64 | center_crop size=56",
        "decode mode=rgb dct=%s | resize size=100,150 | vflip",
        "decode mode=rgb dct=%s | center_crop size=200,100",
        "decode mode=gray dct=%s | random_resized_crop size=24 scale=0.5,1",
    };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        char on[256], off[256];
        snprintf(on, sizeof on, specs[s], "auto");
        snprintf(off, sizeof off, specs[s], "off");
        sp_pipeline *pa = parse_ok(on), *po = parse_ok(off);
        double diff_sum = 0;
        size_t diff_n = 0;
        for (uint32_t i = 0; i < 12; i++) {
            sp_sample_ctx ctx = ctx_for(11, 2, i);
            sp_sample_src js = {"t.jpg", jpg, jlen, NULL}, ps = {"t.png", png, plen, NULL};
            sp_sample_src rs = {"raw", NULL, 0, &full}, ri = {"raw", NULL, 0, &img};
            int oh, ow, oc, h2, w2, c2;
            uint8_t *a1 = run(pa, &ctx, &js, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &oh, &ow, &oc);
            uint8_t *a2 = run(pa, &ctx, &js, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &h2, &w2, &c2);
            size_t n = (size_t)oh * ow * oc;
            CHECK(memcmp(a1, a2, n) == 0);              /* deterministic */
            /* dct=off: region decode == full decode then the ops */
            uint8_t *b = run(po, &ctx, &js, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &h2, &w2, &c2);
            uint8_t *r = run(po, &ctx, &rs, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &h2, &w2, &c2);
            CHECK_MSG(h2 == oh && w2 == ow && c2 == oc && memcmp(b, r, n) == 0, "%s sample %u", off, i);
            /* PNG (always scale 1) == the raw pixels it encodes */
            uint8_t *pp = run(po, &ctx, &ps, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &h2, &w2, &c2);
            uint8_t *pr = run(po, &ctx, &ri, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, W, H, &h2, &w2, &c2);
            CHECK_MSG(memcmp(pp, pr, n) == 0, "%s png sample %u", off, i);
            /* the DCT-scaled path approximates the full-resolution one */
            for (size_t k = 0; k < n; k++) diff_sum += abs((int)a1[k] - (int)b[k]);
            diff_n += n;
            free(a1); free(a2); free(b); free(r); free(pp); free(pr);
        }
        if (check_close) {
            printf("encoded %dx%d %s: mean |dct - full| = %.2f\n", W, H, on, diff_sum / diff_n);
            CHECK(diff_sum / diff_n < 6.0);
        }
        sp_pipeline_destroy(pa);
        sp_pipeline_destroy(po);
    }
    if (check_close) {   /* a corrupt file reports the decoder's error with the path */
        sp_pipeline *p = parse_ok("imagenet-train");
        sp_sample_ctx ctx = ctx_for(1, 0, 0);
        sp_sample_src bad = {"bad.jpg", jpg, 100, NULL};
        float *out = malloc(224 * 224 * 3 * 4);
        sp_run_opts o = {SP_DTYPE_FLOAT32, SP_LAYOUT_NCHW, 0, NULL};
        CHECK(sp__pipeline_run(p, &ctx, &bad, &o, out, &err) != 0 && strstr(err.msg, "bad.jpg"));
        free(out);
        sp_pipeline_destroy(p);
    }
    sp_image_free(&full);
    tjFree(jpg);
    free(png);
    sp_image_free(&img);
}

static void test_encoded_320x240(void) { test_encoded_size(320, 240, 1); }

static void test_encoded_odd_sizes(void) {
    static const int odd[][2] = {{1, 1}, {17, 9}, {250, 7}, {7, 250}, {1000, 24}, {97, 613}};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) test_encoded_size(odd[i][0], odd[i][1], 0);
}

/* sp__pipeline_explain() agrees with the bytes: its box, cut from the full
 * decode and resized (sp__image_resize), flipped when it says so, is the
 * pipeline's output, for a JPEG (DCT scaling off) and a PNG, over many
 * samples and epochs; and a color_jitter line names three factors and an
 * order. */
static void test_explain(void) {
    sp_image img = make_smooth(157, 101);
    uint8_t *bufs[2];
    size_t lens[2];
    encode_jpeg(&img, &bufs[0], &lens[0]);
    encode_png(&img, &bufs[1], &lens[1]);
    sp_pipeline *p = parse_ok("decode dct=off | random_resized_crop size=40,24 | hflip p=0.5");
    sp_pipeline *pj = parse_ok("random_resized_crop size=40 | color_jitter brightness=0.4 "
                               "contrast=0.4 saturation=0.4");
    int checked = 0, flipped = 0;
    for (int f = 0; f < 2; f++) {
        sp_error err;
        sp_image full;
        sp_decode_req rq = {3, 0, 0, 0, 0, 1};
        CHECK_OK(sp__image_decode(bufs[f], lens[f], "x", &rq, NULL, &full, &err), &err);
        for (uint32_t e = 0; e < 3; e++)
            for (uint32_t i = 0; i < 20; i++) {
                sp_sample_ctx ctx = ctx_for(77, e, i);
                char text[1024];
                size_t need = sp__pipeline_explain(p, &ctx, 157, 101,
                                                   f ? SP_FORMAT_PNG : SP_FORMAT_JPEG, text,
                                                   sizeof text);
                CHECK(need == strlen(text));
                int x, y, w, h;
                const char *l = strstr(text, "random_resized_crop: box");
                CHECK_MSG(l && sscanf(l, "random_resized_crop: box x=%d y=%d w=%d h=%d", &x, &y,
                                      &w, &h) == 4, "%s", text);
                int flip = strstr(text, "hflip: flipped") != NULL;
                CHECK(flip || strstr(text, "hflip: not applied"));
                sp_sample_src src = {"x", bufs[f], lens[f], NULL};
                int oh, ow, oc;
                uint8_t *got = run(p, &ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 157, 101, &oh,
                                   &ow, &oc);
                CHECK(oh == 40 && ow == 24 && oc == 3);   /* size=H,W as torchvision */
                /* a fixed crop of the full decode (a view), then a resize of it */
                CHECK(x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= 157 && y + h <= 101);
                sp_image crop = full, want;
                crop.data = full.data + (size_t)y * full.stride + (size_t)x * 3;
                crop.width = w;
                crop.height = h;
                CHECK(sp__image_resize(&crop, ow, oh, &want) == 0);
                if (flip) sp__image_hflip(&want);
                CHECK_MSG(image_equals(&want, got), "explain's box %d,%d %dx%d%s does not "
                          "reproduce sample %u epoch %u (%s)", x, y, w, h, flip ? " flipped" : "",
                          i, e, f ? "PNG" : "JPEG");
                free(got);
                sp_image_free(&want);
                checked++;
                flipped += flip;
            }
        sp_image_free(&full);
    }
    CHECK(flipped > 10 && flipped < checked - 10);
    sp_sample_ctx ctx = ctx_for(5, 1, 3);
    char text[1024];
    sp__pipeline_explain(pj, &ctx, 640, 480, SP_FORMAT_JPEG, text, sizeof text);
    double fb, fc, fs;
    char o1[16], o2[16], o3[16];
    const char *l = strstr(text, "color_jitter:");
    CHECK_MSG(l && sscanf(l, "color_jitter: brightness %lf contrast %lf saturation %lf, order "
                             "%15[a-z], %15[a-z], %15s", &fb, &fc, &fs, o1, o2, o3) == 6,
              "%s", text);
    CHECK(fb >= 0.6 && fb <= 1.4 && fc >= 0.6 && fc <= 1.4 && fs >= 0.6 && fs <= 1.4);
    CHECK(strstr(text, "(decoded at 1/"));
    char small[8];
    CHECK(sp__pipeline_explain(pj, &ctx, 640, 480, SP_FORMAT_JPEG, small, sizeof small) >
          sizeof small && strlen(small) == sizeof small - 1);
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(pj);
    sp_image_free(&img);
    free(bufs[0]);
    free(bufs[1]);
    printf("explain: %d boxes reproduce their samples (%d flipped), jitter line parsed\n",
           checked, flipped);
}

/* Reference roundings, independent of the library's: the two neighbours of
 * x in the format, found in double, the nearer taken, ties to the even one. */
/* explain's "decoded at 1/d" is the run's: only the op right after decode
 * reads the file at a DCT scale, so a resize after a flip says 1/1 and runs
 * as with dct=off, while the same resize first says 1/8 and runs on the
 * scaled decode (its bytes differ from dct=off's). */
static void test_explain_scale(void) {
    sp_image img = make_smooth(640, 480);
    uint8_t *jpg;
    size_t len;
    encode_jpeg(&img, &jpg, &len);
    sp_sample_src src = {"x", jpg, len, NULL};
    sp_sample_ctx ctx = ctx_for(3, 0, 1);
    static const struct { const char *spec, *off, *want; int same; } cases[] = {
        {"decode dct=auto | resize size=20", "decode dct=off | resize size=20",
         "(decoded at 1/8)", 0},
        {"decode dct=auto | hflip | resize size=20", "decode dct=off | hflip | resize size=20",
         "(decoded at 1/1)", 1},
        {"decode dct=auto | grayscale | resize size=20",
         "decode dct=off | grayscale | resize size=20", "(decoded at 1/1)", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp_pipeline *p = parse_ok(cases[i].spec), *q = parse_ok(cases[i].off);
        char text[1024];
        sp__pipeline_explain(p, &ctx, 640, 480, SP_FORMAT_JPEG, text, sizeof text);
        const char *l = strstr(text, "resize:");
        CHECK_MSG(l && strstr(l, cases[i].want), "%s explains:\n%s", cases[i].spec, text);
        int oh, ow, oc, qh, qw, qc;
        uint8_t *a = run(p, &ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 640, 480, &oh, &ow, &oc);
        uint8_t *b = run(q, &ctx, &src, SP_DTYPE_UINT8, SP_LAYOUT_NHWC, 640, 480, &qh, &qw, &qc);
        CHECK(oh == qh && ow == qw && oc == qc);
        int same = memcmp(a, b, (size_t)oh * (size_t)ow * (size_t)oc) == 0;
        CHECK_MSG(same == cases[i].same, "%s: output %s dct=off's", cases[i].spec,
                  same ? "equals" : "differs from");
        free(a);
        free(b);
        sp_pipeline_destroy(p);
        sp_pipeline_destroy(q);
    }
    free(jpg);
    sp_image_free(&img);
}

static double bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}
static uint16_t nearest_even(double x, double (*val)(uint16_t), uint16_t lo) {
    /* lo: a code at or below |x| with the same sign; try lo and lo + 1 */
    double a = fabs(val(lo)), b = fabs(val((uint16_t)(lo + 1))), ax = fabs(x);
    if (ax - a < b - ax) return lo;
    if (ax - a > b - ax) return (uint16_t)(lo + 1);
    return (lo & 1) ? (uint16_t)(lo + 1) : lo;
}
static uint16_t ref_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return nearest_even(f, bf16_value, (uint16_t)(u >> 16));
}
static uint16_t ref_f16(float f) {
    uint16_t sign = f < 0 ? 0x8000 : 0;
    unsigned lo = 0, hi = 0x7bff;   /* the largest finite code whose value <= |f| */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (f16_value((uint16_t)mid) <= fabs(f)) lo = mid;
        else hi = mid - 1;
    }
    return (uint16_t)(sign | nearest_even(f, f16_value, (uint16_t)lo));
}

/* bfloat16 / float16 outputs equal the float32 output rounded to nearest
 * even, element for element, in both layouts, with and without normalize,
 * flipped or not. */
static void test_half(void) {
    const char *specs[] = {
        ("random_resized_crop size=20,24 | hflip p=0.5 | "
         "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225"),
        "resize size=18 | center_crop size=16",
        "decode mode=gray | resize size=12,10 | normalize mean=0.3 std=0.02",
    };
    sp_image img = make_smooth(61, 47);
    uint8_t *png;
    size_t plen;
    encode_png(&img, &png, &plen);
    sp_sample_src src = {"x.png", png, plen, NULL};
    long n16 = 0;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        sp_pipeline *p = parse_ok(specs[k]);
        for (int lay = 0; lay < 2; lay++)
            for (uint32_t i = 0; i < 6; i++) {
                sp_sample_ctx ctx = ctx_for(9, 0, i);
                sp_layout L = lay ? SP_LAYOUT_NHWC : SP_LAYOUT_NCHW;
                int oh, ow, oc;
                float *f = run(p, &ctx, &src, SP_DTYPE_FLOAT32, L, 61, 47, &oh, &ow, &oc);
                uint16_t *b = run(p, &ctx, &src, SP_DTYPE_BFLOAT16, L, 61, 47, &oh, &ow, &oc);
                uint16_t *h = run(p, &ctx, &src, SP_DTYPE_FLOAT16, L, 61, 47, &oh, &ow, &oc);
                for (size_t e = 0; e < (size_t)oh * ow * oc; e++, n16++) {
                    CHECK_MSG(b[e] == ref_bf16(f[e]), "%s: bfloat16 %04x for %.9g (want %04x)",
                              specs[k], b[e], f[e], ref_bf16(f[e]));
                    CHECK_MSG(h[e] == ref_f16(f[e]), "%s: float16 %04x for %.9g (want %04x)",
                              specs[k], h[e], f[e], ref_f16(f[e]));
                }
                free(f);
                free(b);
                free(h);
            }
        sp_pipeline_destroy(p);
    }
    CHECK(sp__dtype_size(SP_DTYPE_BFLOAT16) == 2 && sp__dtype_size(SP_DTYPE_FLOAT16) == 2);
    sp_dtype d;
    CHECK(sp_dtype_parse("bfloat16", &d, NULL) == 0 && d == SP_DTYPE_BFLOAT16);
    CHECK(strcmp(sp_dtype_name(SP_DTYPE_FLOAT16), "float16") == 0);
    sp_image_free(&img);
    free(png);
    printf("half outputs: %ld bfloat16 and float16 elements equal float32 rounded to nearest "
           "even\n", n16);
}

/* Every op in the registry (augment/pipeline_ops.c): a complete
 * descriptor, the one sp__op_find() returns for its name, and a spec below
 * that starts with it and whose canonical form parses back to itself. An
 * op added without a line here fails, naming it. */
static void test_op_registry(void) {
    static const char *const SPECS[] = {
        "decode mode=gray", "random_resized_crop size=8", "resize size=8", "center_crop size=8",
        "hflip", "vflip", "color_jitter brightness=0.2 hue=0.1", "grayscale",
        "normalize mean=0.5 std=0.2", "invert", "posterize bits=3", "solarize threshold=9",
        "autocontrast", "equalize", "sharpness factor=2", "random_apply ops=1 | invert",
        "random_crop size=8 padding=1", "gaussian_blur kernel=3", "random_erasing",
        "rotate degrees=5", "affine degrees=5", "auto_augment", "rand_augment",
        "trivial_augment_wide", "targets", "random_zoom_out | resize size=8,8",
        "random_iou_crop | resize size=8,8 | targets"};
    const int nspecs = (int)(sizeof SPECS / sizeof SPECS[0]);
    const sp__op_desc *d;
    int n = 0;
    for (int i = 0; (d = sp__op_at(i)); i++, n++) {
        CHECK(d->name && d->parse && d->canon && d->explain);
        CHECK(sp__op_find(d->name) == d);
        int nkeys = 0;
        while (nkeys < SP__OP_MAX_KEYS && d->keys[nkeys]) nkeys++;
        CHECK(nkeys < SP__OP_MAX_KEYS && (!d->required || nkeys > 0));
        CHECK(!(d->flags & SP__OP_REGION) || (d->run && d->shape));
        const char *spec = NULL;
        size_t len = strlen(d->name);
        for (int j = 0; j < nspecs && !spec; j++)
            if (strncmp(SPECS[j], d->name, len) == 0 && (SPECS[j][len] == ' ' || !SPECS[j][len]))
                spec = SPECS[j];
        if (!spec) printf("op %s: no spec in test_op_registry\n", d->name);
        CHECK(spec != NULL);
        sp_pipeline *p = NULL, *q = NULL;
        sp_error err;
        CHECK_OK(sp_pipeline_parse(spec, &p, &err), &err);
        const char *canon = sp__pipeline_canonical(p);
        CHECK(strncmp(canon, d->name, len) == 0 && canon[len] == ' ');
        CHECK_OK(sp_pipeline_parse(canon, &q, &err), &err);
        CHECK(strcmp(sp__pipeline_canonical(q), canon) == 0);
        sp_pipeline_destroy(p);
        sp_pipeline_destroy(q);
    }
    CHECK(n == nspecs && !sp__op_find("no_such_op") && !sp__op_at(-1));
    printf("op registry: %d ops, each complete, found by name, canonical form round-trips\n", n);
}

static const sp_case cases[] = {
    SP_CASE(test_parse),
    SP_CASE(test_rrc_and_flip),
    SP_CASE(test_jitter),
    SP_CASE(test_layouts_and_normalize),
    SP_CASE(test_variation_and_channels),
    SP_CASE(test_center_crop_and_fusion),
    SP_CASE(test_edges),
    SP_CASE(test_encoded_320x240),
    SP_CASE(test_encoded_odd_sizes),
    SP_CASE(test_explain),
    SP_CASE(test_explain_scale),
    SP_CASE(test_half),
    SP_CASE(test_op_registry),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

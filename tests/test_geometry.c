/* test_geometry.c - every op's output geometry, for every size relation.
 *
 * A property test over a grid of input sizes and op parameters: for each
 * pipeline the output's height, width and channels are computed here by a
 * plain reference written from docs/pipeline.md (not by the library), and
 * must equal sp__pipeline_output_dims() and the shape the run produces;
 * the run goes through sp__pipeline_run_shaped() with the declared shape
 * into a buffer filled with 0x00 and again with 0xff, and both outputs
 * must be equal (every byte of the sample is written, none is left from
 * the buffer). center_crop's bytes (crop and zero padding, every size
 * relation: fits, +1, +2, ..., on either or both axes) are compared with
 * the reference's; the same pipelines from encoded PNG bytes (the op fused
 * with decoding) must give the raw input's bytes. Last, a slot of another
 * geometry is refused with SP_ERANGE and not a byte written.
 *
 * Cases: test_center_crop_grid, test_resize_geometry, test_rrc_geometry,
 * test_fused_resize_crop, test_pixel_ops_keep_geometry, test_shape_refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pipeline_check.h"
#include "runner.h"
#include "seedpipe/imageio.h"
#include "augment/imageio_internal.h"
#include "augment/ops_internal.h"
#include "seedpipe/pipeline.h"
#include "augment/pipeline_internal.h"
#include "common/common_internal.h"

static const int SIZES[] = {1, 2, 3, 4, 5, 7, 8, 10, 11, 16, 17, 33};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(rng_state >> 56);
}

static sp_image make_image(int w, int h, int c) {
    sp_image im;
    CHECK(sp__image_alloc(&im, w, h, c) == 0);
    for (size_t i = 0; i < im.stride * (size_t)h; i++) im.data[i] = rnd8();
    return im;
}

/* ---- the plain reference (docs/pipeline.md section 3) -------------------------- */

/* round_even((n - c) / 2) for c <= n. */
static int ref_offset(int n, int c) {
    int d = n - c, q = d / 2;
    if (d % 2 == 1 && q % 2 == 1) q++;
    return q;
}

/* CenterCrop along one axis: source index of output index i, or -1 for a
 * zero-padded position ((c - n) // 2 zeros before the image). */
static int ref_crop_src(int n, int c, int i) {
    if (c <= n) return ref_offset(n, c) + i;
    int s = i - (c - n) / 2;
    return s >= 0 && s < n ? s : -1;
}

/* Resize size=S: the shorter side S, the longer floor(S * long / short). */
static void ref_resize_short(int W, int H, int S, int *ow, int *oh) {
    if (W <= H) {
        *ow = S;
        *oh = (int)((int64_t)S * H / W);
    } else {
        *oh = S;
        *ow = (int)((int64_t)S * W / H);
    }
}

/* ---- running ------------------------------------------------------------------- */

/* Run p on src into a buffer of the declared shape (eh x ew x ec, which
 * must be sp__pipeline_output_dims' too), twice: prefilled 0x00 and 0xff.
 * Returns the output (malloc'd) after checking the two runs agree. */
static uint8_t *run_both(const sp_pipeline *p, const sp_sample_src *src, int in_w, int in_h,
                         int eh, int ew, int ec, sp_dtype dt, const char *what) {
    sp_error err;
    sp_error_clear(&err);
    int oh = 0, ow = 0, oc = 0;
    CHECK_OK(sp__pipeline_output_dims(p, in_w, in_h, &oh, &ow, &oc, &err), &err);
    CHECK_MSG(oh == eh && ow == ew && oc == ec, "%s on %dx%d: declared %dx%dx%d, reference %dx%dx%d",
              what, in_w, in_h, oh, ow, oc, eh, ew, ec);
    size_t n = (size_t)eh * (size_t)ew * (size_t)ec * sp__dtype_size(dt);
    uint8_t *a = malloc(n), *b = malloc(n);
    CHECK(a && b);
    memset(a, 0x00, n);
    memset(b, 0xff, n);
    sp_sample_ctx ctx = {sp_rng_key(7, SP_RNG_AUGMENT), 3, (uint32_t)(in_w * 131 + in_h)};
    sp_run_opts o = {dt, SP_LAYOUT_NCHW, 0, NULL};
    sp_out_shape shape = {eh, ew, ec};
    CHECK_OK(sp__pipeline_run_shaped(p, &ctx, src, &o, &shape, a, n, &err), &err);
    CHECK_OK(sp__pipeline_run_shaped(p, &ctx, src, &o, &shape, b, n, &err), &err);
    CHECK_MSG(memcmp(a, b, n) == 0, "%s on %dx%d -> %dx%d: bytes depend on what the buffer held",
              what, in_w, in_h, ew, eh);
    free(b);
    return a;
}

static uint8_t *run_raw(const sp_pipeline *p, const sp_image *img, int eh, int ew, sp_dtype dt,
                        const char *what) {
    sp_sample_src src = {"raw", NULL, 0, img};
    return run_both(p, &src, img->width, img->height, eh, ew, img->channels, dt, what);
}

static uint8_t *run_png(const sp_pipeline *p, const sp_image *img, int eh, int ew,
                        const char *what) {
    uint8_t *png = NULL;
    size_t len = 0;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp__png_encode(img, &png, &len, &err), &err);
    sp_sample_src src = {"grid.png", png, len, NULL};
    uint8_t *out = run_both(p, &src, img->width, img->height, eh, ew, img->channels,
                            SP_DTYPE_UINT8, what);
    free(png);
    return out;
}

/* ---- cases --------------------------------------------------------------------- */

/* Every relation of crop to image on each axis: smaller by 0..2, equal,
 * larger by 1, 2, 3 and 7; raw and encoded input; uint8 and float32. */
static void test_center_crop_grid(void) {
    static const int DELTA[] = {-2, -1, 0, 1, 2, 3, 7};
    const int nd = (int)(sizeof DELTA / sizeof DELTA[0]);
    long checked = 0;
    for (int a = 0; a < NSIZES; a++)
        for (int b = 0; b < NSIZES; b += 2) {
            int W = SIZES[a], H = SIZES[b];
            sp_image img = make_image(W, H, 3);
            for (int i = 0; i < nd; i++)
                for (int j = 0; j < nd; j++) {
                    int cw = W + DELTA[i], ch = H + DELTA[j];
                    if (cw < 1 || ch < 1) continue;
                    char spec[64], what[96];
                    snprintf(spec, sizeof spec, "center_crop size=%d,%d", ch, cw);
                    snprintf(what, sizeof what, "\"%s\"", spec);
                    sp_pipeline *p = parse_ok(spec);
                    uint8_t *o = run_raw(p, &img, ch, cw, SP_DTYPE_UINT8, what);
                    for (int c = 0; c < 3; c++)
                        for (int y = 0; y < ch; y++)
                            for (int x = 0; x < cw; x++) {
                                int sy = ref_crop_src(H, ch, y), sx = ref_crop_src(W, cw, x);
                                uint8_t e = sy < 0 || sx < 0 ? 0
                                    : img.data[(size_t)sy * img.stride + 3 * (size_t)sx + c];
                                uint8_t g = o[((size_t)c * ch + y) * cw + x];
                                CHECK_MSG(g == e, "%s on %dx%d: (c%d, y%d, x%d) is %u, want %u",
                                          what, W, H, c, y, x, g, e);
                            }
                    uint8_t *e = run_png(p, &img, ch, cw, what);
                    CHECK_MSG(memcmp(o, e, (size_t)3 * ch * cw) == 0,
                              "%s on %dx%d: encoded input differs from raw", what, W, H);
                    free(e);
                    free(run_raw(p, &img, ch, cw, SP_DTYPE_FLOAT32, what));
                    free(o);
                    sp_pipeline_destroy(p);
                    checked++;
                }
            sp_image_free(&img);
        }
    printf("center_crop: %ld size relations, bytes equal to the reference, raw and PNG\n",
           checked);
}

static void test_resize_geometry(void) {
    static const int TARGETS[] = {1, 2, 3, 5, 8, 13};
    long checked = 0;
    for (int a = 0; a < NSIZES; a++)
        for (int b = 0; b < NSIZES; b++) {
            int W = SIZES[a], H = SIZES[b];
            sp_image img = make_image(W, H, 3);
            for (int t = 0; t < 6; t++) {
                char spec[64];
                int S = TARGETS[t], ow, oh;
                snprintf(spec, sizeof spec, "resize size=%d", S);
                sp_pipeline *p = parse_ok(spec);
                ref_resize_short(W, H, S, &ow, &oh);
                free(run_raw(p, &img, oh, ow, SP_DTYPE_UINT8, spec));
                free(run_png(p, &img, oh, ow, spec));
                sp_pipeline_destroy(p);
                snprintf(spec, sizeof spec, "resize size=%d,%d", S, TARGETS[5 - t]);
                p = parse_ok(spec);
                free(run_raw(p, &img, S, TARGETS[5 - t], SP_DTYPE_UINT8, spec));
                sp_pipeline_destroy(p);
                checked += 2;
            }
            sp_image_free(&img);
        }
    printf("resize: %ld (image, size) pairs of the declared geometry\n", checked);
}

static void test_rrc_geometry(void) {
    static const char *const SPECS[] = {
        "random_resized_crop size=5,9", "random_resized_crop size=12 scale=1,1 ratio=1,1",
        "random_resized_crop size=3,1 scale=0.01,0.02 ratio=0.1,10",
        "random_resized_crop size=17,2 scale=0.5,1 ratio=3,4 | hflip p=1"};
    static const int DIMS[4][2] = {{5, 9}, {12, 12}, {3, 1}, {17, 2}};
    for (int k = 0; k < 4; k++) {
        sp_pipeline *p = parse_ok(SPECS[k]);
        for (int a = 0; a < NSIZES; a++)
            for (int b = 0; b < NSIZES; b++) {
                sp_image img = make_image(SIZES[a], SIZES[b], 3);
                free(run_raw(p, &img, DIMS[k][0], DIMS[k][1], SP_DTYPE_FLOAT32, SPECS[k]));
                sp_image_free(&img);
            }
        sp_pipeline_destroy(p);
    }
}

/* resize size=S | center_crop: fused when the crop fits the resized image,
 * padded when it does not (by 1 on either axis too), portrait and landscape. */
static void test_fused_resize_crop(void) {
    static const int IMG[][2] = {{10, 20}, {20, 10}, {7, 7}, {3, 11}, {33, 4}};
    static const int S[] = {4, 6, 9};
    for (int i = 0; i < 5; i++) {
        int W = IMG[i][0], H = IMG[i][1];
        sp_image img = make_image(W, H, 3);
        for (int s = 0; s < 3; s++) {
            int rw, rh;
            ref_resize_short(W, H, S[s], &rw, &rh);
            for (int dy = -1; dy <= 2; dy++)
                for (int dx = -1; dx <= 2; dx++) {
                    int ch = rh + dy, cw = rw + dx;
                    if (ch < 1 || cw < 1) continue;
                    char spec[96], alone[64];
                    snprintf(spec, sizeof spec, "resize size=%d | center_crop size=%d,%d", S[s],
                             ch, cw);
                    snprintf(alone, sizeof alone, "resize size=%d", S[s]);
                    sp_pipeline *p = parse_ok(spec), *r = parse_ok(alone);
                    uint8_t *fused = run_raw(p, &img, ch, cw, SP_DTYPE_UINT8, spec);
                    uint8_t *enc = run_png(p, &img, ch, cw, spec);
                    uint8_t *res = run_raw(r, &img, rh, rw, SP_DTYPE_UINT8, alone);
                    CHECK(memcmp(fused, enc, (size_t)3 * ch * cw) == 0);
                    /* The unfused reference: crop the resize's output. */
                    for (int cc = 0; cc < 3; cc++)
                        for (int y = 0; y < ch; y++)
                            for (int x = 0; x < cw; x++) {
                                int sy = ref_crop_src(rh, ch, y), sx = ref_crop_src(rw, cw, x);
                                uint8_t e = sy < 0 || sx < 0 ? 0
                                    : res[((size_t)cc * rh + sy) * rw + sx];
                                CHECK_MSG(fused[((size_t)cc * ch + y) * cw + x] == e,
                                          "%s on %dx%d: (c%d, y%d, x%d)", spec, W, H, cc, y, x);
                            }
                    free(fused);
                    free(enc);
                    free(res);
                    sp_pipeline_destroy(p);
                    sp_pipeline_destroy(r);
                }
        }
        sp_image_free(&img);
    }
}

/* Ops that do not change the geometry keep it, on gray and RGB. */
static void test_pixel_ops_keep_geometry(void) {
    static const char *const SPECS[] = {
        "hflip p=1", "vflip p=1", "grayscale p=1",
        "color_jitter brightness=0.5 contrast=0.5 saturation=0.5",
        "hflip p=1 | normalize mean=0.5 std=0.25", "decode mode=gray | hflip p=1 | vflip p=1"};
    for (int k = 0; k < 6; k++) {
        sp_pipeline *p = parse_ok(SPECS[k]);
        int c = strstr(SPECS[k], "gray |") ? 1 : 3;
        for (int a = 0; a < NSIZES; a += 3)
            for (int b = 0; b < NSIZES; b += 2) {
                sp_image img = make_image(SIZES[a], SIZES[b], c);
                free(run_raw(p, &img, SIZES[b], SIZES[a], SP_DTYPE_FLOAT32, SPECS[k]));
                sp_image_free(&img);
            }
        sp_pipeline_destroy(p);
    }
}

/* A slot of another geometry (same byte count, other stride) is refused
 * before a byte is written. */
static void test_shape_refused(void) {
    sp_image img = make_image(10, 10, 3);
    sp_pipeline *p = parse_ok("center_crop size=11");
    uint8_t buf[363];
    memset(buf, 0xa5, sizeof buf);
    sp_sample_src src = {"ten.png", NULL, 0, &img};
    sp_sample_ctx ctx = {sp_rng_key(1, SP_RNG_AUGMENT), 0, 0};
    sp_out_shape other = {33, 11, 1}, wrong = {11, 11, 1};
    sp_error err;
    sp_error_clear(&err);
    CHECK(sp__pipeline_run_shaped(p, &ctx, &src, NULL, &other, buf, sizeof buf, &err) == SP_ERANGE);
    CHECK_MSG(strstr(err.msg, "ten.png") && strstr(err.msg, "11x11x3") && strstr(err.msg, "33x11x1"),
              "message: %s", err.msg);
    CHECK(sp__pipeline_run_shaped(p, &ctx, &src, NULL, &wrong, buf, sizeof buf, &err) == SP_ERANGE);
    for (size_t i = 0; i < sizeof buf; i++) CHECK(buf[i] == 0xa5);
    CHECK(sp__pipeline_run_shaped(p, &ctx, &src, NULL, NULL, buf, sizeof buf, &err) == SP_EINVAL);
    sp_out_shape right = {11, 11, 3};
    CHECK_OK(sp__pipeline_run_shaped(p, &ctx, &src, NULL, &right, buf, sizeof buf, &err), &err);
    CHECK(buf[(0 * 11 + 10) * 11 + 10] == 0 && buf[10] == 0);   /* the padded column and row */
    sp_pipeline_destroy(p);
    sp_image_free(&img);
}

static const sp_case cases[] = {
    SP_CASE(test_center_crop_grid),
    SP_CASE(test_resize_geometry),
    SP_CASE(test_rrc_geometry),
    SP_CASE(test_fused_resize_crop),
    SP_CASE(test_pixel_ops_keep_geometry),
    SP_CASE(test_shape_refused),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

/* test_targets.c - targets.h: the geometry log and the target arithmetic.
 * Cases: test_run_geom_same_bytes (sp__pipeline_run_geom writes the bytes
 * of sp__pipeline_run_shaped for pipelines of every geometric op, with and
 * without the targets op, and logs one step per op that moved pixels, in
 * op order: the deferred hflip at its place, a fused resize + center_crop
 * as two steps), test_apply_by_hand (boxes and keypoints through hand-made
 * logs against values worked out here: crop, resize, flips, a quarter
 * rotation, the rules and their counts, clip=0, zero rows after the kept
 * boxes), test_apply_refusals (more boxes than max_boxes, another K),
 * test_targets_spec (defaults, canonical round trip, bad values, last op,
 * not inside random_apply, the record size), test_flip_pairs (flip_pairs=
 * parsed, canonical, refused; keypoints swapped at hflip, vflip and a
 * mirroring affine step, not at a rotation, back at a second flip).
 * The bit-exact reference over real photos is
 * bindings/python/tests/test_targets.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pipeline_check.h"
#include "runner.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/targets.h"
#include "augment/ops_internal.h"
#include "augment/pipeline_internal.h"
#include "augment/targets_internal.h"
#include "common/common_internal.h"

static sp_image test_image(int w, int h) {
    sp_image im;
    CHECK(sp__image_alloc(&im, w, h, 3) == 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++)
            im.data[(size_t)y * im.stride + x] = (uint8_t)(x * 7 + y * 13);
    return im;
}

static void test_run_geom_same_bytes(void) {
    static const char *const SPECS[] = {
        "random_resized_crop size=24,32 | hflip p=1 | color_jitter brightness=0.3",
        "resize size=20 | center_crop size=16 | vflip p=1",
        "center_crop size=60,30 | rotate degrees=40",
        "random_crop size=30 padding=3 pad_if_needed=1 | hflip p=1 | gaussian_blur kernel=3",
        "hflip p=1 | affine degrees=20 translate=0.1,0.1 scale=0.8,1.2 shear=10",
        "rand_augment num_ops=4 magnitude=20 | trivial_augment_wide | auto_augment",
    };
    sp_image im = test_image(50, 40);
    sp_sample_src src = {"(test)", NULL, 0, &im};
    for (int t = 0; t < 6; t++) {
        char spec[256];
        for (int with = 0; with < 2; with++) {
            snprintf(spec, sizeof spec, "%s%s", SPECS[t], with ? " | targets" : "");
            sp_pipeline *p = parse_ok(spec);
            int h, w, c;
            sp_error err;
            CHECK_OK(sp__pipeline_output_dims(p, 50, 40, &h, &w, &c, &err), &err);
            size_t n = (size_t)h * w * c;
            uint8_t *a = malloc(n), *b = malloc(n);
            sp_out_shape shape = {h, w, c};
            sp_geom_log log;
            for (uint32_t s = 0; s < 8; s++) {
                sp_sample_ctx ctx = {sp_rng_key(3, SP_RNG_AUGMENT), 1, s};
                CHECK_OK(sp__pipeline_run_shaped(p, &ctx, &src, NULL, &shape, a, n, &err), &err);
                CHECK_OK(sp__pipeline_run_geom(p, &ctx, &src, NULL, &shape, b, n, &log, &err),
                         &err);
                CHECK(memcmp(a, b, n) == 0);
                CHECK(log.src_w == 50 && log.src_h == 40);
                CHECK(log.n == 0 ? w == 50 && h == 40 : log.step[log.n - 1].out_w == w &&
                      log.step[log.n - 1].out_h == h);
                for (int i = 1; i < log.n; i++) {   /* a chain, in op order (a policy op: */
                    CHECK(log.step[i].in_w == log.step[i - 1].out_w);   /* one per sub-op) */
                    CHECK(log.step[i].op >= log.step[i - 1].op);
                }
            }
            if (t == 1) {   /* resize (op 0) + center_crop (op 1) fused, then vflip (op 2) */
                CHECK(log.n == 3 && log.step[0].op == 0 && log.step[1].op == 1);
                CHECK(log.step[0].out_w == 25 && log.step[0].out_h == 20 &&
                      log.step[0].sx == 25.0 / 50 && log.step[0].sy == 20.0 / 40);
                CHECK(log.step[1].x0 == sp__center_crop_offset(25, 16) && log.step[1].y0 == 2 &&
                      log.step[1].sx == 1);
                CHECK(log.step[2].kind == SP_GEOM_VFLIP && log.step[2].in_h == 16);
            }
            if (t == 4)     /* the flip, then affine's forward matrix */
                CHECK(log.n == 2 && log.step[0].kind == SP_GEOM_HFLIP &&
                      log.step[1].kind == SP_GEOM_AFFINE && log.step[1].op == 1 &&
                      log.step[1].m[0] != 0);
            if (t == 0)     /* the deferred hflip is logged at its op */
                CHECK(log.n == 2 && log.step[1].kind == SP_GEOM_HFLIP && log.step[1].op == 1 &&
                      log.step[1].in_w == 32);
            free(a);
            free(b);
            sp_pipeline_destroy(p);
        }
    }
    sp_image_free(&im);
}

static sp_geom_step axis(int in_w, int in_h, int ow, int oh, double x0, double y0, double sx,
                         double sy) {
    sp_geom_step g = {SP_GEOM_AXIS, 0, in_w, in_h, ow, oh, x0, y0, sx, sy, 0, 0, {0}, {0}};
    return g;
}

typedef struct rec {
    float boxes[8][4];
    float kps[8][2][3];
    int32_t labels[8];
    int32_t counts[4];
} rec;

static void test_apply_by_hand(void) {
    sp_targets_rules r = {8, 1, 2, 4.0, 0.5, 0, 0, 0, 0, 0, 0, {0}};
    CHECK(sp__targets_record_bytes(&r) == sizeof(rec));
    /* five boxes on a 100 x 80 image */
    const float boxes[5][4] = {
        {10, 10, 30, 20},     /* inside the crop: kept, moved */
        {-20, 5, 20, 25},     /* half outside the source: whole = [0,5,20,25] */
        {90, 70, 99, 79},     /* outside the crop: empty */
        {59, 10, 70, 11},     /* 1 row, 1 column left by the crop: area 2 < 4 */
        {50, 40, 70, 60},     /* 1/4 left after the crop: visibility 0.25 < 0.5 */
    };
    const int32_t labels[5] = {1, 2, 3, 4, 5};
    const float kps[5][2][3] = {{{12, 12, 2}, {70, 70, 1}}, {{0, 0, 0}, {5, 6, 2}},
                                {{0}}, {{0}}, {{0}}};
    sp_targets t = {5, 2, &boxes[0][0], labels, &kps[0][0][0], NULL};
    sp_geom_log log;
    memset(&log, 0, sizeof log);
    log.src_w = 100;
    log.src_h = 80;
    log.n = 3;
    log.step[0] = axis(100, 80, 60, 50, 0, 0, 1, 1);                 /* crop [0,60] x [0,50] */
    log.step[1] = axis(60, 50, 120, 50, 0, 0, 2, 1);                 /* resize x by 2 */
    log.step[2] = (sp_geom_step){SP_GEOM_HFLIP, 2, 120, 50, 120, 50, 0, 0, 1, 1, 0, 0, {0}, {0}};
    rec out;
    memset(&out, 0xAB, sizeof out);
    sp_targets_stats st;
    char fates[2048];
    sp_error err;
    CHECK_OK(sp__targets_apply(&r, &log, &t, &out, &st, fates, sizeof fates, "x", &err), &err);
    CHECK(st.kept == 2 && st.dropped_empty == 1 && st.dropped_area == 1 &&
          st.dropped_visibility == 1);
    CHECK(out.counts[0] == 2 && out.counts[1] == 1 && out.counts[2] == 1 && out.counts[3] == 1);
    /* box 0: x in [20, 60] after resize, flipped: [60, 100] */
    CHECK(out.boxes[0][0] == 60 && out.boxes[0][1] == 10 && out.boxes[0][2] == 100 &&
          out.boxes[0][3] == 20 && out.labels[0] == 1);
    CHECK(out.kps[0][0][0] == 120 - 24 && out.kps[0][0][1] == 12 && out.kps[0][0][2] == 2);
    CHECK(out.kps[0][1][2] == 0 && out.kps[0][1][0] == 120 - 140);   /* left, kept coords */
    /* box 1: clipped at the source to [0, 20]: [0, 40] -> [80, 120] */
    CHECK(out.boxes[1][0] == 80 && out.boxes[1][2] == 120 && out.labels[1] == 2);
    CHECK(out.kps[1][0][2] == 0 && out.kps[1][1][2] == 2 && out.kps[1][1][0] == 110);
    for (int i = 2; i < 8; i++)   /* zero rows after the kept boxes */
        CHECK(out.boxes[i][0] == 0 && out.boxes[i][3] == 0 && out.labels[i] == 0 &&
              out.kps[i][1][2] == 0);
    CHECK(strstr(fates, "box 2 cat 3: dropped (empty") && strstr(fates, "box 3 cat 4: dropped "
          "(min_area)") && strstr(fates, "box 4 cat 5: dropped (min_visibility)"));
    CHECK(strstr(fates, "visible 0.2500"));
    /* clip=0: box 4 kept as its whole rectangle (x [100, 140] -> flipped [-20, 20]) */
    r.clip = 0;
    r.min_visibility = 0.2;
    CHECK_OK(sp__targets_apply(&r, &log, &t, &out, &st, NULL, 0, "x", &err), &err);
    CHECK(st.kept == 3 && out.boxes[2][0] == -20 && out.boxes[2][2] == 20 &&
          out.boxes[2][1] == 40 && out.boxes[2][3] == 60);
    /* a quarter turn of a 40 x 40 canvas: (x, y) -> (y, 40 - x) with c = 0, s = -1 */
    sp_geom_log rot;
    memset(&rot, 0, sizeof rot);
    rot.src_w = rot.src_h = 40;
    rot.n = 1;
    rot.step[0] = (sp_geom_step){SP_GEOM_ROTATE, 0, 40, 40, 40, 40, 0, 0, 1, 1, 0, -1, {0}, {0}};
    const float b2[4] = {5, 10, 15, 30};
    const int32_t l2 = 9;
    sp_targets t2 = {1, 0, b2, &l2, NULL, NULL};
    sp_targets_rules r2 = {8, 1, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, {0}};
    float o2[64];
    CHECK_OK(sp__targets_apply(&r2, &rot, &t2, o2, &st, NULL, 0, "x", &err), &err);
    CHECK(st.kept == 1 && o2[0] == 10 && o2[1] == 25 && o2[2] == 30 && o2[3] == 35);
    /* an affine step: x' = x + 0.5 y - 4, y' = y + 2 (a shear and a shift);
     * the corners of [5, 10, 15, 30] go to x in [6, 26], y in [12, 32] */
    rot.step[0] = (sp_geom_step){SP_GEOM_AFFINE, 0, 40, 40, 40, 40, 0, 0, 1, 1, 0, 0,
                                 {1, 0.5, -4, 0, 1, 2}, {0}};
    CHECK_OK(sp__targets_apply(&r2, &rot, &t2, o2, &st, NULL, 0, "x", &err), &err);
    CHECK(st.kept == 1 && o2[0] == 6 && o2[1] == 12 && o2[2] == 26 && o2[3] == 32);
    /* shifted over the border: x [30, 50] clipped to [30, 40]; further: empty */
    rot.step[0].m[2] = 20;
    CHECK_OK(sp__targets_apply(&r2, &rot, &t2, o2, &st, NULL, 0, "x", &err), &err);
    CHECK(st.kept == 1 && o2[0] == 30 && o2[1] == 12 && o2[2] == 40 && o2[3] == 32);
    rot.step[0].m[2] = 30;
    CHECK_OK(sp__targets_apply(&r2, &rot, &t2, o2, &st, NULL, 0, "x", &err), &err);
    CHECK(st.kept == 0 && st.dropped_empty == 1);
}

static void test_apply_refusals(void) {
    sp_targets_rules r = {1, 1, 2, 0.0, 0.0, 0, 0, 0, 0, 0, 0, {0}};
    const float boxes[8] = {0, 0, 1, 1, 0, 0, 2, 2};
    const int32_t labels[2] = {1, 2};
    const float kps[9] = {0};
    sp_geom_log log;
    memset(&log, 0, sizeof log);
    log.src_w = log.src_h = 4;
    static uint8_t out[4096];
    sp_error err;
    sp_targets t = {2, 0, boxes, labels, NULL, NULL};
    CHECK(sp__targets_apply(&r, &log, &t, out, NULL, NULL, 0, "s.png", &err) == SP_ERANGE);
    CHECK(strstr(err.msg, "s.png: 2 boxes, more than the pipeline's max_boxes=1"));
    sp_targets t3 = {1, 3, boxes, labels, kps, NULL};
    CHECK(sp__targets_apply(&r, &log, &t3, out, NULL, NULL, 0, "s.png", &err) == SP_ERANGE);
    CHECK(strstr(err.msg, "3 keypoints per box") && strstr(err.msg, "keypoints=2"));
}

static void test_targets_spec(void) {
    sp_pipeline *p = parse_ok("resize size=8,8 | normalize mean=0.5 std=0.5 | targets");
    CHECK(strcmp(sp__pipeline_canonical(p), "resize size=8,8 | normalize mean=0.5,0.5,0.5 "
                 "std=0.5,0.5,0.5 | "
                 "targets max_boxes=100 clip=1 min_area=1 min_visibility=0 keypoints=0") == 0);
    sp_targets_rules r;
    CHECK(sp_pipeline_targets(p, &r) == 1 && r.max_boxes == 100 && r.clip == 1 &&
          r.min_area == 1 && r.keypoints == 0);
    sp_pipeline_destroy(p);
    p = parse_ok("center_crop size=4 | targets max_boxes=3 clip=0 min_area=0.25 "
                 "min_visibility=0.333333333333 keypoints=17");
    sp_pipeline *q = parse_ok(sp__pipeline_canonical(p));
    CHECK(strcmp(sp__pipeline_canonical(p), sp__pipeline_canonical(q)) == 0);
    CHECK(sp_pipeline_targets(q, &r) == 1 && r.max_boxes == 3 && r.clip == 0 &&
          r.keypoints == 17 && r.min_visibility == 0.333333333);
    CHECK(sp__targets_record_bytes(&r) == (size_t)((4 * (12 + 3 * 3 * 17 + 3 + 4) + 7) / 8 * 8));
    CHECK(sp__targets_image_span(13) == 16 && sp__targets_image_span(16) == 16);
    sp_pipeline_destroy(p);
    sp_pipeline_destroy(q);
    p = parse_ok("center_crop size=4");
    CHECK(sp_pipeline_targets(p, NULL) == 0);
    sp_pipeline_destroy(p);
    expect_spec_error("targets | hflip", "no op may follow targets");
    expect_spec_error("resize size=4,4 | random_apply ops=1 | targets",
                      "may not be random-applied");
    expect_spec_error("resize size=4,4 | targets max_boxes=5000", "max_boxes");
    expect_spec_error("resize size=4,4 | targets clip=2", "clip");
    expect_spec_error("resize size=4,4 | targets min_area=-1", "min_area");
    expect_spec_error("resize size=4,4 | targets min_visibility=1.5", "min_visibility");
    expect_spec_error("resize size=4,4 | targets keypoints=1.5", "keypoints");
    expect_spec_error("resize size=4,4 | targets colour=1", "unknown key");
}

/* random_iou_crop needs the sample's boxes: refused without a targets op
 * (at parse) and without a geometry log (at run); a log without targets
 * is a sample without boxes (the keep option or the fallback: no crop). */
static void test_iou_crop_needs_boxes(void) {
    expect_spec_error("random_iou_crop | resize size=4,4", "\"random_iou_crop\": it decides by "
                      "the sample's boxes");
    expect_spec_error("resize size=8,8 | random_apply ops=1 | random_zoom_out | resize size=4,4",
                      "inside random_apply");
    /* 9 x rand_augment num_ops=16 could log 144 steps: more than a log holds */
    char spec[512] = "";
    for (int i = 0; i < 9; i++) strcat(spec, "rand_augment num_ops=16 | ");
    strcat(spec, "targets");
    expect_spec_error(spec, "geometric steps");
    sp_pipeline *p = parse_ok("random_iou_crop sampler_options=0.5 trials=2 attempts=3 | "
                              "resize size=8,8 | targets");
    sp_image im = test_image(40, 30);
    sp_sample_src src = {"(t)", NULL, 0, &im};
    sp_sample_ctx ctx = {sp_rng_key(1, SP_RNG_AUGMENT), 0, 0};
    uint8_t out[8 * 8 * 3];
    sp_error err;
    CHECK(sp__pipeline_run(p, &ctx, &src, NULL, out, &err) == SP_EINVAL);
    CHECK(strstr(err.msg, "(t): random_iou_crop decides by the sample's boxes"));
    sp_geom_log log;
    memset(&log, 0, sizeof log);
    CHECK_OK(sp__pipeline_run_geom(p, &ctx, &src, NULL, NULL, out, sizeof out, &log, &err), &err);
    CHECK(log.n == 2 && log.step[0].out_w == 40 && log.step[0].out_h == 30 &&
          log.step[0].x0 == 0 && log.step[0].sx == 1);   /* no boxes: the fallback, no crop */
    /* a box filling the image: option 0.5 is reached by the first trial whose
     * crop keeps its centre and half its area */
    const float box[4] = {0, 0, 40, 30};
    const int32_t lab = 1;
    sp_targets t = {1, 0, box, &lab, NULL, NULL};
    log.targets = &t;
    CHECK_OK(sp__pipeline_run_geom(p, &ctx, &src, NULL, NULL, out, sizeof out, &log, &err), &err);
    CHECK(log.n == 2 && log.step[0].kind == SP_GEOM_AXIS &&
          (double)log.step[0].out_w * log.step[0].out_h >= 0.5 * 40 * 30 &&
          log.step[0].x0 + log.step[0].out_w <= 40 && log.step[0].y0 + log.step[0].out_h <= 30);
    sp_pipeline_destroy(p);
    sp_image_free(&im);
}

/* flip_pairs=: parsed, canonical (each pair by its smaller index; coco
 * expanded), refused when malformed; applied at every mirroring step. */
static void test_flip_pairs(void) {
    sp_pipeline *p = parse_ok("resize size=8,8 | targets keypoints=17 flip_pairs=coco");
    CHECK(strstr(sp__pipeline_canonical(p), "keypoints=17 flip_pairs=1-2,3-4,5-6,7-8,9-10,11-12,"
                 "13-14,15-16") != NULL);
    sp_targets_rules r;
    CHECK(sp_pipeline_targets(p, &r) == 1 && r.flip_pairs == 8 && r.flip[0] == 0 &&
          r.flip[1] == 2 && r.flip[2] == 1 && r.flip[16] == 15);
    sp_pipeline_destroy(p);
    p = parse_ok("resize size=8,8 | targets keypoints=4 flip_pairs=3-0");
    CHECK(strstr(sp__pipeline_canonical(p), "keypoints=4 flip_pairs=0-3") != NULL);
    sp_pipeline_destroy(p);
    const char *bad[] = {"keypoints=4 flip_pairs=0-0", "keypoints=4 flip_pairs=0-4",
                         "keypoints=4 flip_pairs=0-1,1-2", "keypoints=4 flip_pairs=1-",
                         "keypoints=4 flip_pairs=0-1,", "keypoints=4 flip_pairs=-1-2"};
    char spec[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(spec, sizeof spec, "resize size=4,4 | targets %s", bad[i]);
        expect_spec_error(spec, "for flip_pairs");
    }
    expect_spec_error("resize size=4,4 | targets keypoints=3 flip_pairs=coco", "17 keypoints");
    expect_spec_error("resize size=4,4 | targets flip_pairs=0-1", "needs keypoints=K");
    /* two keypoints swapped at an hflip, not at a rotation, back at a second flip */
    sp_targets_rules rr = {8, 1, 2, 0.0, 0.0, 0, 0, 0, 0, 0, 1, {1, 0}};
    const float box[4] = {2, 2, 8, 8};
    const int32_t lab = 1;
    const float kps[6] = {3, 4, 2, 7, 5, 1};
    sp_targets t = {1, 2, box, &lab, kps, NULL};
    sp_geom_log log;
    memset(&log, 0, sizeof log);
    log.src_w = log.src_h = 10;
    log.n = 1;
    log.step[0] = (sp_geom_step){SP_GEOM_HFLIP, 0, 10, 10, 10, 10, 0, 0, 1, 1, 0, 0, {0}, {0}};
    rec out;
    sp_error err;
    CHECK_OK(sp__targets_apply(&rr, &log, &t, &out, NULL, NULL, 0, "x", &err), &err);
    CHECK(out.kps[0][0][0] == 3 && out.kps[0][0][1] == 5 && out.kps[0][0][2] == 1);
    CHECK(out.kps[0][1][0] == 7 && out.kps[0][1][1] == 4 && out.kps[0][1][2] == 2);
    log.step[0].kind = SP_GEOM_VFLIP;   /* a vflip mirrors too */
    CHECK_OK(sp__targets_apply(&rr, &log, &t, &out, NULL, NULL, 0, "x", &err), &err);
    CHECK(out.kps[0][0][0] == 7 && out.kps[0][0][1] == 5 && out.kps[0][1][1] == 6);
    log.step[0] = (sp_geom_step){SP_GEOM_ROTATE, 0, 10, 10, 10, 10, 0, 0, 1, 1, 1, 0, {0}, {0}};
    CHECK_OK(sp__targets_apply(&rr, &log, &t, &out, NULL, NULL, 0, "x", &err), &err);
    CHECK(out.kps[0][0][0] == 3 && out.kps[0][0][1] == 4 && out.kps[0][1][0] == 7);
    log.n = 2;
    log.step[0] = log.step[1] =
        (sp_geom_step){SP_GEOM_HFLIP, 0, 10, 10, 10, 10, 0, 0, 1, 1, 0, 0, {0}, {0}};
    CHECK_OK(sp__targets_apply(&rr, &log, &t, &out, NULL, NULL, 0, "x", &err), &err);
    CHECK(out.kps[0][0][0] == 3 && out.kps[0][0][1] == 4 && out.kps[0][0][2] == 2);
    log.n = 1;   /* an affine step with a negative determinant mirrors */
    log.step[0] = (sp_geom_step){SP_GEOM_AFFINE, 0, 10, 10, 10, 10, 0, 0, 1, 1, 0, 0,
                                 {-1, 0, 10, 0, 1, 0}, {0}};
    CHECK_OK(sp__targets_apply(&rr, &log, &t, &out, NULL, NULL, 0, "x", &err), &err);
    CHECK(out.kps[0][0][0] == 3 && out.kps[0][0][1] == 5 && out.kps[0][1][0] == 7);
}

static const sp_case cases[] = {
    SP_CASE(test_iou_crop_needs_boxes),
    SP_CASE(test_run_geom_same_bytes),
    SP_CASE(test_apply_by_hand),
    SP_CASE(test_apply_refusals),
    SP_CASE(test_targets_spec),
    SP_CASE(test_flip_pairs),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

/* seedpipe/targets.h - boxes and keypoints that ride the augmentation
 * pipeline (DESIGN.md section 15; docs/targets.md, docs/pipeline.md
 * "Targets").
 *
 * A sample may carry targets: boxes (xyxy, float32, in pixels of the
 * decoded image, each with an int32 category) and K keypoints per box
 * (x, y, visibility 0/1/2 as COCO). A pipeline that declares them ends with
 *
 *   targets max_boxes=N clip=0|1 min_area=A min_visibility=V keypoints=K
 *           masks=none|instance|semantic mask_fill=F protect=R flip_pairs=a-b,..|coco
 *
 * (the last op; part of the canonical spec, hence of the fingerprint). The
 * run records, for each geometric op it runs on the sample, the exact
 * parameters it used in a geometry log (sp_geom_log); sp__targets_apply()
 * moves the boxes and keypoints through the log, in float64 in a fixed
 * order, rounded to float32 once at the end (docs/pipeline.md gives each
 * formula, so a reference re-implements it bit for bit), and applies the
 * declared rules:
 *   - at every step each box keeps two rectangles: the whole box (never
 *     clipped) and its visible part (clipped to the canvas after the step);
 *   - a box is dropped when its visible part is empty ("empty"), else when
 *     the visible area < min_area ("min_area"), else when visible area /
 *     whole area < min_visibility ("min_visibility"), in that order of
 *     precedence; each drop is counted under its rule;
 *   - a kept box is written as its visible part (clip=1) or its whole box
 *     (clip=0, coordinates may leave the image);
 *   - a keypoint that leaves the canvas [0, W] x [0, H] after any step gets
 *     visibility 0 (its coordinates are still moved and kept); keypoints of
 *     a dropped box go with it; at a step that mirrors (hflip, vflip) the
 *     keypoints of each flip pair swap places (left and right identities);
 *
 * The sample record (what the loader writes per sample, in the ring, the
 * cache and the digest) is the image, zero padding to a multiple of 8
 * bytes, then the target fields (each zero past the kept boxes):
 *   boxes      N x 4 float32   (x0, y0, x1, y1)
 *   keypoints  N x K x 3 float32 (absent when K = 0)
 *   labels     N int32
 *   counts     4 int32: kept boxes, dropped empty, dropped min_area,
 *              dropped min_visibility
 * then zero padding to a multiple of 8 bytes; with masks=instance then
 *   masks      N x H x W uint8 (the kept boxes' masks, zero after them;
 *              H x W the output size), zero padding to 8 bytes (masks.h);
 *   with masks=semantic instead: semantic H x W uint8 (the label map),
 *              zero padding to 8 bytes.
 *
 * Thread safety: everything here is reentrant.
 */
#ifndef SEEDPIPE_TARGETS_H
#define SEEDPIPE_TARGETS_H

#include "seedpipe/common.h"
#include "seedpipe/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_TARGETS_MAX_BOXES 4096   /* the largest max_boxes= */
#define SP_TARGETS_MAX_KEYPOINTS 256 /* the largest keypoints= */
#define SP_TARGETS_MAX_PROTECT 1000  /* the largest protect= */

/* The rules a pipeline's `targets` op declares. */
typedef struct sp_targets_rules {
    int max_boxes;          /* N: boxes per sample (an annotation with more is an error) */
    int clip;               /* 1: kept boxes are clipped to the image */
    int keypoints;          /* K per box; 0: no keypoints */
    double min_area;        /* drop a box whose visible area is smaller */
    double min_visibility;  /* drop a box whose visible fraction is smaller */
    int masks;              /* SP_MASKS_NONE / _INSTANCE / _SEMANTIC (masks.h) */
    int mask_fill;          /* the value of mask pixels outside the source (0..255) */
    int mask_w, mask_h;     /* the masks' size: the loader's output size (0: no masks) */
    int protect;            /* redraws of a random crop that would lose a box (0: none) */
    int flip_pairs;         /* keypoint pairs swapped at a mirroring step (0: none) */
    uint8_t flip[SP_TARGETS_MAX_KEYPOINTS]; /* keypoint j's partner (j: none) */
} sp_targets_rules;

enum { SP_MASKS_NONE = 0, SP_MASKS_INSTANCE = 1, SP_MASKS_SEMANTIC = 2 };
#define SP_TARGETS_MAX_MASK_BYTES ((size_t)1 << 28) /* N x H x W of one sample's masks */

/* One sample's targets as the dataset gives them (source image pixels). */
typedef struct sp_targets {
    uint32_t n;               /* boxes */
    uint32_t k;               /* keypoints per box (0: none given) */
    const float *boxes;       /* n x 4, xyxy */
    const int32_t *labels;    /* n */
    const float *keypoints;   /* n x k x 3, or NULL when k == 0 */
    uint32_t *kept;           /* NULL, or n slots: sp__targets_apply() writes the
                               * input index of each kept box, in output order */
} sp_targets;

/* The geometry one run applied to its sample, step by step. */
typedef enum {
    SP_GEOM_AXIS = 0,   /* x' = (x - x0) * sx, y' = (y - y0) * sy (crop, pad, resize) */
    SP_GEOM_HFLIP = 1,  /* x' = W - x (W: the width before the step) */
    SP_GEOM_VFLIP = 2,  /* y' = H - y */
    SP_GEOM_ROTATE = 3, /* about (W/2, H/2) by rotate's matrix (c, s) */
    SP_GEOM_AFFINE = 4  /* x' = (m0 x + m1 y) + m2, y' = (m3 x + m4 y) + m5 (affine, shear,
                         * translate: the forward matrix, in pixels of the canvas) */
} sp_geom_kind;

typedef struct sp_geom_step {
    int kind;             /* sp_geom_kind */
    int op;               /* the op's index in the spec */
    int in_w, in_h;       /* the canvas before the step */
    int out_w, out_h;     /* the canvas after it */
    double x0, y0;        /* AXIS: the source point that maps to (0, 0) */
    double sx, sy;        /* AXIS: out / source extent (1 for a crop) */
    double c, s;          /* ROTATE: rotate's theta[0], theta[1] (float32 values) */
    double m[6];          /* AFFINE: the forward matrix (docs/pipeline.md "affine") */
    float th[6];          /* AFFINE: the image's binary32 inverse matrix (theta), which
                           * masks are sampled through (masks.h) */
} sp_geom_step;

#define SP_GEOM_LOG_MAX 128
typedef struct sp_geom_log {
    const sp_targets *targets; /* in: the sample's targets, set by the caller before the run
                                * (random_iou_crop decides by its boxes; NULL: none) */
    int n;                /* steps */
    int src_w, src_h;     /* the decoded (or raw) source image */
    sp_geom_step step[SP_GEOM_LOG_MAX];
} sp_geom_log;

/* What sp__targets_apply() did to one sample's boxes. */
typedef struct sp_targets_stats {
    uint32_t kept, dropped_empty, dropped_area, dropped_visibility;
} sp_targets_stats;

/*! sp_pipeline_targets() : 1 and *r (may be NULL) if p ends with a
 *  `targets` op, else 0. */
SP_API int sp_pipeline_targets(const sp_pipeline *p, sp_targets_rules *r);

#ifdef __cplusplus
}
#endif
#endif

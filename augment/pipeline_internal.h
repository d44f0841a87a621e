/* pipeline_internal.h - the parsed form of a pipeline spec, shared by
 * pipeline_spec.c (parse, canonical form, presets, output size) and
 * pipeline_run.c (running one sample). Not a public header.
 *
 * All doubles stored here have been normalised through the canonical
 * number format ("%.9g" then strtod), so the behaviour of a parsed pipeline
 * is a function of its canonical string alone.
 */
#ifndef SEEDPIPE_AUGMENT_PIPELINE_INTERNAL_H
#define SEEDPIPE_AUGMENT_PIPELINE_INTERNAL_H

#include "seedpipe/ops.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/targets.h"
#include "common/sbuf_internal.h"

typedef enum {
    SP_OP_DECODE = 0,
    SP_OP_RRC,
    SP_OP_RESIZE,
    SP_OP_CENTER_CROP,
    SP_OP_HFLIP,
    SP_OP_VFLIP,
    SP_OP_COLOR_JITTER,
    SP_OP_GRAYSCALE,
    SP_OP_NORMALIZE,
    SP_OP_INVERT,
    SP_OP_POSTERIZE,
    SP_OP_SOLARIZE,
    SP_OP_AUTOCONTRAST,
    SP_OP_EQUALIZE,
    SP_OP_SHARPNESS,
    SP_OP_RANDOM_APPLY,
    SP_OP_RANDOM_CROP,           /* pipeline_geom.c */
    SP_OP_GAUSSIAN_BLUR,         /* pipeline_geom.c */
    SP_OP_RANDOM_ERASING,        /* pipeline_geom.c; runs on the output (pipeline_write.c) */
    SP_OP_ROTATE,                /* pipeline_geom.c */
    SP_OP_AFFINE,                /* pipeline_policy.c, as the three below */
    SP_OP_AUTO_AUGMENT,
    SP_OP_RAND_AUGMENT,
    SP_OP_TRIVIAL_AUGMENT,
    SP_OP_TARGETS,               /* targets_spec.c: the declared target rules (last op) */
    SP_OP_RANDOM_ZOOM_OUT,       /* pipeline_detcrop.c */
    SP_OP_RANDOM_IOU_CROP        /* pipeline_detcrop.c: decided by the sample's boxes */
} sp_op_kind;

#define SP_SPEC_MAX_SIZE 16384   /* largest size= accepted */
#define SP_SPEC_MAX_OPS 64
#define SP_BLUR_MAX_KERNEL 1023  /* largest gaussian_blur kernel size */

typedef struct sp_op {
    sp_op_kind kind;
    int h, w;                  /* size; resize with w == 0: shorter side = h */
    double scale[2];           /* random_resized_crop */
    double ratio[2];           /* random_resized_crop */
    double p;                  /* hflip, vflip, grayscale and the pixel-value ops */
    double jitter[3][2];       /* color_jitter [brightness, contrast, saturation] */
    double hue[2];             /* color_jitter hue range; 0,0: no hue (6 orders) */
    int bits;                  /* posterize */
    double level;              /* solarize threshold, sharpness factor */
    int span;                  /* random_apply: the number of ops it governs */
    int nmean;                 /* normalize: channel count of mean/std */
    double mean[3], std[3];
    int channels, dct;         /* decode */
    int pad[4];                /* random_crop padding: left, top, right, bottom */
    int pad_mode;              /* random_crop: sp_pad_mode */
    int pad_if_needed;         /* random_crop */
    int nfill;                 /* random_crop: 1 or 3 fill values */
    uint8_t fill[3];           /* random_crop (per channel; nfill == 1: all equal) */
    int ksize[2];              /* gaussian_blur kernel: x (width), y */
    double sigma[2];           /* gaussian_blur sigma range */
    int erase_random;          /* random_erasing value=random (else value[]) */
    int nvalue;                /* random_erasing / rotate: 1 or 3 values */
    double value[3];           /* random_erasing value, rotate fill (per channel) */
    double degrees[2];         /* rotate: the angle range */
    int bilinear;              /* rotate, affine, policies: interpolation=bilinear */
    int filter;                /* resize, random_resized_crop: SP_RESAMPLE_* */
    double translate[2];       /* affine: fractions of W and H */
    double shear[4];           /* affine: x range, y range (degrees) */
    int nofill;                /* policies: fill=none (torchvision's None) */
    int policy;                /* auto_augment: 0 imagenet, 1 cifar10, 2 svhn */
    int num_ops, magnitude;    /* rand_augment */
    int bins;                  /* rand_augment, trivial_augment_wide: num_magnitude_bins */
    int tmax, tclip, tkpts;    /* targets: max_boxes, clip, keypoints */
    double tmin_area, tmin_vis; /* targets: min_area, min_visibility */
    int tmasks, tmask_fill;    /* targets: masks (SP_MASKS_*), mask_fill */
    int tprotect;              /* targets: protect (redraws of a random crop that loses a box) */
    int tnflip;                /* targets: flip_pairs, the number of pairs */
    uint8_t tflip[SP_TARGETS_MAX_KEYPOINTS]; /* targets: keypoint j's flip partner (j: none) */
    double iou_opts[16];       /* random_iou_crop: sampler_options */
    int niou, trials, attempts; /* random_iou_crop */
} sp_op;

struct sp_pipeline {
    int nops;
    sp_op ops[SP_SPEC_MAX_OPS];
    int channels;              /* 1 or 3 (decode mode) */
    int dct;                   /* JPEG DCT-domain downscaling allowed */
    int has_decode;            /* a decode op was written (it is op 0) */
    int has_normalize;         /* a normalize op (last but trailing random_erasing ops) */
    int has_erasing;           /* a random_erasing op (only such ops follow it) */
    float unit_table[256];     /* v / 255 */
    float norm_table[3][256];  /* ((v / 255) - mean) / std, in float */
    /* The float tables rounded to nearest even: [0] bfloat16, [1] float16;
     * [k][0..2] norm_table per channel, [k][3] unit_table. */
    uint16_t half_table[2][4][256];
    char *canonical;
};

/* Is this op geometric (changes the size / reads a region)? */
static inline int sp__op_is_geometric(sp_op_kind k) {
    return k == SP_OP_RRC || k == SP_OP_RESIZE || k == SP_OP_CENTER_CROP || k == SP_OP_RANDOM_CROP;
}

/* Is this one of the pixel-value ops (invert .. sharpness: p= and a
 * per-image lookup or filter)? */
static inline int sp__op_is_pixel(sp_op_kind k) {
    return k >= SP_OP_INVERT && k <= SP_OP_SHARPNESS;
}

/* Output size of a resize op for a W x H input (torchvision Resize). */
void sp__resize_dims(const sp_op *op, int W, int H, int *ow, int *oh);

/* Numbers (spec_num.c): v through "%.9g" and back; a strict decimal
 * number (finite), normalised; 1..max comma-separated numbers. The parsers
 * return 1 on success, 0 on a malformed value. */
double sp__canon_num(double v);
int sp__parse_num(const char *s, double *out);
int sp__parse_list(const char *s, double *vals, int max, int *n);

/* ---- the ops of pipeline_geom.c (random_crop, gaussian_blur,
 * random_erasing, rotate) ---- */

/* Parse op->kind's values (vals[i] is the value of the op's key i, or
 * NULL), with p->channels known; SP_ESPEC naming op idx `name`. */
int sp__geom_parse(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                   const char *const *vals, sp_error *err);
/* Append op's canonical form. */
void sp__geom_canon(sp__sbuf *b, const sp_op *op);

/* random_crop on a W x H image: the geometry, the source box its pixels
 * come from (bw or bh 0: none, all fill) and the maps into that box
 * (xmap: op->w entries, ymap: op->h, -1 = fill; one allocation at xmap,
 * freed by sp__crop_plan_free). */
typedef struct sp__crop_plan {
    sp_random_crop_geom g;
    int bx, by, bw, bh;
    int32_t *xmap, *ymap;
} sp__crop_plan;
int sp__random_crop_plan(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                         uint32_t attempt, sp__crop_plan *pl, const char *path, sp_error *err);
/* random_crop's geometry on a W x H image for attempt a of protect= (a 0:
 * sp_random_crop_sample(); a > 0: its offset redrawn from block a << 16,
 * the same words); 0 or SP_EINVAL. */
int sp__random_crop_geom(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                         uint32_t a, sp_random_crop_geom *g);
void sp__crop_plan_free(sp__crop_plan *pl);

/* gaussian_blur's sigma for the sample: block 0, (float)(lo + (hi - lo) *
 * u01(c[0])). */
float sp__blur_sigma(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx);

/* rotate's angle for the sample: block 0, (float)(lo + (hi - lo) * u01(c[0])). */
float sp__rotate_angle(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx);

/* One line of sp_pipeline_explain() for op k of pipeline_geom.c; updates
 * the tracked size *W x *H. */
void sp__geom_explain(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx,
                      uint32_t attempt, int *W, int *H);   /* attempt: random_crop's protect= */

/* ---- the ops of pipeline_policy.c (affine, auto_augment, rand_augment,
 * trivial_augment_wide): as the pipeline_geom.c functions above. ---- */
int sp__policy_parse(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                     const char *const *vals, sp_error *err);
void sp__policy_canon(sp__sbuf *b, const sp_op *op);
void sp__policy_explain(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx, int W,
                        int H);
/* Run op k on the writable image img in place (its size is kept); each
 * geometric step it applies is appended to log (may be NULL).
 * @return 0, SP_ENOMEM. */
int sp__policy_run(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, sp_image *img,
                   sp_geom_log *log);
/* pipeline_jitter.c: color_jitter's draw (its factors fq, hue and order;
 * returns the number of entries of order, 3 or 4). */
int sp__jitter_draw(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int32_t fq[3],
                    float *hue, uint8_t order[4]);
/* pipeline_detcrop.c: random_zoom_out and random_iou_crop (torchvision
 * v2's RandomZoomOut, RandomIoUCrop): values, canonical form, their run on
 * the current image (*made: out holds the new image; the step is logged;
 * random_iou_crop reads the boxes at this point from log->targets moved
 * through the steps so far, and refuses a run without a log), and their
 * explain lines (log: the sample's run, for random_iou_crop's attempts;
 * NULL: it names what it cannot know). */
int sp__detcrop_parse(const sp_pipeline *p, sp_op *op, int idx, const char *name,
                      const char *const *vals, sp_error *err);
void sp__detcrop_canon(sp__sbuf *b, const sp_op *op);
int sp__detcrop_run(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, const sp_image *cur,
                    sp_geom_log *log, sp_image *out, int *made, const char *path, sp_error *err);
void sp__detcrop_explain(sp__fbuf *e, const sp_op *op, int k, const sp_sample_ctx *ctx,
                         const sp_geom_log *log, int *W, int *H);
/* sp_pipeline_explain() with the sample's run (log, may be NULL). */
size_t sp__pipeline_explain_log(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                                sp_format format, const sp_geom_log *log, char *buf, size_t n);
/* targets.c: each box of t (n x 4 into vis) as its visible rectangle after
 * steps [0, upto) of log (the rules' clipping after every step; an empty
 * one as 0, 0, 0, 0). @return t->n. */
int sp__targets_visible(const sp_geom_log *log, int upto, const sp_targets *t, double *vis);
/* targets.c: how many of log->targets' boxes step g (appended after steps
 * [0, upto)) loses: boxes the rules keep after steps [0, upto) and not
 * after g; *first (-1: none) the first of them, *why its fate (1 empty,
 * 2 min_area, 3 min_visibility). */
int sp__targets_lost(const sp_targets_rules *r, const sp_geom_log *log, int upto,
                     const sp_geom_step *g, int *first, int *why);
/* ops.c: sp_rrc_sample() with try t drawing block base | t (attempt a of
 * protect=: base a << 16; sp_rrc_sample() is base 0). */
int sp__rrc_sample_at(int W, int H, double s0, double s1, double r0, double r1,
                      sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                      uint32_t base, sp_crop_box *box);
/* pipeline_protect.c: protect= of the targets op (docs/pipeline.md
 * "protect"). sp__protect_step(): the step attempt a of random crop op k
 * (random_resized_crop or random_crop) would log on a W x H image (its RRC
 * box in *b, or its random_crop geometry in *g; either may be NULL); 0, or
 * 1 when random_crop cannot crop (its run names the error).
 * sp__protect_attempt(): the attempt op k keeps with the boxes after steps
 * [0, upto) of log (0 without protect, a log or boxes); e (may be NULL)
 * gets one line per attempt. */
int sp__protect_step(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                     uint32_t a, sp_geom_step *step, sp_crop_box *b, sp_random_crop_geom *g);
uint32_t sp__protect_attempt(const sp_pipeline *p, const sp_op *op, uint32_t k,
                             const sp_sample_ctx *ctx, int W, int H, const sp_geom_log *log,
                             int upto, sp__fbuf *e);
/* The attempt op k kept in the sample's run (log: its steps; NULL: 0). */
uint32_t sp__protect_explained(const sp_pipeline *p, const sp_op *op, int k,
                               const sp_sample_ctx *ctx, int W, int H, const sp_geom_log *log,
                               sp__fbuf *e);
/* random_crop's explain lines (op k of p): the attempt that ran, then the
 * attempts (sp__geom_explain() and the lines above). */
void sp__protect_explain_crop(sp__fbuf *e, const sp_pipeline *p, int k, const sp_sample_ctx *ctx,
                              const sp_geom_log *log, int *W, int *H);
/* geom_affine.c: the geometry of affine and the policy's geometric
 * sub-ops for targets. sp__affine_forward(): torchvision's forward matrix
 * (_get_inverse_affine_matrix, inverted=False) in pixels, centre (cx, cy).
 * sp__aug_geom_step(): the step of sub-op aug with magnitude mag on a W x H
 * image (op index k); 0 when the sub-op is not geometric.
 * sp__geom_push(): append g to log (NULL: nothing) while it has room. */
void sp__affine_forward(const double rss[4], double scale, double cx, double cy, double tx,
                        double ty, double m[6]);
int sp__aug_geom_step(int aug, double mag, int W, int H, int k, sp_geom_step *g);
/* ops_policy.c: the binary32 inverse matrix (theta) the image of policy
 * sub-op aug (ShearX/Y, TranslateX/Y, Rotate) with magnitude m on a W x H
 * image is sampled through (F.affine's for _apply_op). */
void sp__aug_theta(int aug, double m, int W, int H, float th[6]);
void sp__geom_push(sp_geom_log *log, const sp_geom_step *g);
/* geom_affine.c: *g zeroed, then the fields of a step (kind, op, sizes and
 * the axis map x0, y0, sx, sy). */
void sp__geom_step_set(sp_geom_step *g, int kind, int op, int in_w, int in_h, int out_w,
                       int out_h, double x0, double y0, double sx, double sy);
/* The `targets` op (targets_spec.c): its values (vals: max_boxes, clip,
 * min_area, min_visibility, keypoints), canonical form, and the check that
 * it is last and every other op can move targets (SP_ESPEC). */
int sp__targets_parse(sp_op *op, int idx, const char *const *vals, sp_error *err);
void sp__targets_canon(sp__sbuf *b, const sp_op *op);
int sp__targets_check(const sp_pipeline *p, sp_error *err);
int sp__targets_moves(sp_op_kind k);   /* 1 if op kind k moves targets (logs its geometry) */

/* float32 -> bfloat16 / IEEE binary16 words, round to nearest even
 * (pipeline_write.c). */
uint16_t sp__to_bf16(float f);
uint16_t sp__to_f16(float f);

/* The random_erasing ops of p (the last ones) on one sample's written
 * output: W x H x C elements of o's dtype and layout at out
 * (pipeline_write.c). SP_ENOMEM (value=random) or 0. */
int sp__erase_output(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H, int C,
                     const sp_run_opts *o, void *out);

/* Write the final image im of one sample to out in o's dtype and layout,
 * mirrored when flip (pipeline_write.c). */
/*! sp__pipeline_run_flags() : sp_pipeline_run_shaped() (shape may be NULL)
 *  with sp__image_decode_ex() flags for the encoded input's decode
 *  (SP__DECODE_VALIDATED, from the loader: the dataset's verdict) and the
 *  geometry log of sp_pipeline_run_geom() (log may be NULL). */
int sp__pipeline_run_flags(const sp_pipeline *p, const sp_sample_ctx *ctx,
                           const sp_sample_src *src, const sp_run_opts *opts,
                           const sp_out_shape *shape, void *out, size_t out_bytes, int dflags,
                           sp_geom_log *log, sp_error *err);

void sp__write_output(const sp_pipeline *p, const sp_image *im, int flip, const sp_run_opts *o,
                      void *out);

#endif

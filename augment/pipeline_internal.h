/* pipeline_internal.h - the parsed form of a pipeline spec and the op
 * descriptor, shared by pipeline_spec.c (parse, canonical form, presets,
 * output size), pipeline_run.c (running one sample, explain), the ops'
 * files (pipeline_<family>.c: one sp__op_desc per op, listed in
 * pipeline_ops.c) and pipeline_state.c (what they share while a sample
 * runs). Not a public header.
 *
 * All doubles stored here have been normalised through the canonical
 * number format ("%.9g" then strtod), so the behaviour of a parsed pipeline
 * is a function of its canonical string alone.
 */
#ifndef SEEDPIPE_AUGMENT_PIPELINE_INTERNAL_H
#define SEEDPIPE_AUGMENT_PIPELINE_INTERNAL_H

#include "augment/ops_internal.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/targets.h"
#include "common/sbuf_internal.h"
#include "augment/decode_internal.h"   /* sp__decode_hint */

typedef struct sp__op_desc sp__op_desc;   /* one op of the language (below) */

#define SP_SPEC_MAX_SIZE 16384   /* largest size= accepted */
#define SP_SPEC_MAX_OPS 64
#define SP_BLUR_MAX_KERNEL 1023  /* largest gaussian_blur kernel size */

/* One parsed op: its descriptor and its values. The fields are the
 * values of the ops written before the descriptors (each says whose it
 * is); an op of its own keeps its values in priv (a struct of its own
 * that its file casts to; SP__OP_PRIV(op, type) checks the size). */
typedef struct sp_op {
    const sp__op_desc *desc;
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
    union { double d[8]; int64_t i[8]; unsigned char b[64]; } priv;   /* an op's own values */
} sp_op;

#define SP__OP_PRIV(op, type) \
    ((void)sizeof(char[sizeof(type) <= sizeof((op)->priv) ? 1 : -1]), (type *)(void *)(op)->priv.b)

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
    /* Output values by arithmetic (pipeline_write.c, write_kernels.c):
     * norm_table's mean and std per channel (0 and 1 without normalize);
     * bit 0, 1, 2 of out_simd[level][k] is set when the kernel of that
     * level (1 AVX2, 2 AVX-512F) gave the 256 values of norm_table (k 0)
     * or unit_table (k 1) bit for bit as float32, bfloat16, float16,
     * checked when the pipeline was built (else the tables are read). */
    float norm_mean[3], norm_std[3];
    int out_simd[3][2];
    char *canonical;
};

/* ---- the op descriptor: the extension point -------------------------------
 *
 * Each op of the spec language is one const sp__op_desc, defined at the end
 * of the file that holds its code (pipeline_<family>.c, targets_spec.c) and
 * listed once in pipeline_ops.c. The parser and the canonical form
 * (pipeline_spec.c), the output size, the run and explain (pipeline_run.c)
 * walk the descriptors; no switch over the ops is left, and nothing else
 * names an op but the three declared below. docs/pipeline.md "Adding an
 * op" has the recipe. */

#define SP__OP_MAX_KEYS 10   /* keys of one op, at most (vals[] below) */

enum {
    SP__OP_FIRST = 1 << 0,         /* must be op 0 (decode) */
    SP__OP_LAST = 1 << 1,          /* no op may follow it (targets) */
    SP__OP_AFTER_OUTPUT = 1 << 2,  /* may follow normalize / random_erasing */
    SP__OP_REGION = 1 << 3,        /* reads a region of its input: its run gets a source (the
                                    * encoded file when it is the first op after decode, so it
                                    * is fused with decoding) and a pending flip is applied */
    SP__OP_NEW_SIZE = 1 << 4,      /* draws the size of a new image (random_zoom_out, ...) */
    SP__OP_ON_OUTPUT = 1 << 5,     /* works on the output values: never random-applied */
    SP__OP_MOVES_TARGETS = 1 << 6, /* may run with targets: logs its geometry, or keeps
                                    * every pixel where it is (an op without it is refused
                                    * in a pipeline with targets) */
    SP__OP_NEEDS_TARGETS = 1 << 7  /* decides by the boxes: needs a targets op */
};

/* The running sample (pipeline_state.c): an owned buffer (hold) and the
 * current image (that buffer, a view into it, or a view into the caller's
 * raw image); a pending horizontal flip (applied on output, or by an op
 * that needs the pixels in place); the geometry log for targets (or NULL). */
typedef struct sp__run_state {
    sp_image hold;
    sp_image cur;
    int writable;      /* cur points into hold */
    int hflip;
    sp_geom_log *log;
} sp__run_state;

/* Where a region op reads pixels: the encoded file (src) or an image. */
typedef struct sp__source {
    int W, H;
    const sp_sample_src *src;     /* encoded input, or NULL */
    const sp_decode_limits *lim;
    sp_format format;
    int channels, dct;
    const sp_image *img;          /* image input (when src is NULL) */
    sp__decode_hint hint;         /* the encoded input's decode flags and checkpoints */
} sp__source;

/* One op's run (pipeline_run.c fills it). */
typedef struct sp__op_run {
    const sp_pipeline *p;
    const sp_sample_ctx *ctx;
    sp__run_state *st;
    const sp__source *src;   /* SP__OP_REGION ops: where they read */
    int next;                /* the op that runs next: k + 1 unless the op moves it */
    const char *path;        /* the sample's name, for errors */
    sp_error *err;
} sp__op_run;

/* One op's explain lines (sp__pipeline_explain()). */
typedef struct sp__op_explain {
    sp__fbuf *e;
    const sp_pipeline *p;
    const sp_sample_ctx *ctx;
    const sp_geom_log *log;     /* the sample's run, or NULL */
    const sp__source *src;      /* format, dct, and the file when the op would read it */
    int W, H;                   /* the size before the op; the op sets the size after it */
} sp__op_explain;

struct sp__op_desc {
    const char *name;
    const char *keys[SP__OP_MAX_KEYS];   /* NULL-terminated; vals[i] is keys[i]'s value */
    int required;                        /* keys[0] must be given */
    unsigned flags;                      /* SP__OP_* */
    /* The values (vals[i]: keys[i]'s text, or NULL), normalised
     * (sp__canon_num); p->channels is the decode mode. SP_ESPEC naming op
     * idx and the key (sp__op_bad()). */
    int (*parse)(sp_pipeline *p, sp_op *op, int idx, const char *const *vals, sp_error *err);
    /* Append the canonical form: every value explicit, numbers "%.9g". */
    void (*canon)(sp__sbuf *b, const sp_op *op);
    /* The size after the op from the size before (0 x 0: not known);
     * NULL: kept. */
    void (*shape)(const sp_op *op, int *w, int *h);
    /* Run op k on r->st; an error sets r->err (sp__op_fail()). NULL:
     * nothing to do on the image (decode, normalize, random_erasing and
     * targets act on the input or the output). */
    int (*run)(sp__op_run *r, const sp_op *op, int k);
    /* Op k's line(s); returns the last op they cover (k, or more when the
     * op explains the ops it governs). */
    int (*explain)(sp__op_explain *x, const sp_op *op, int k);
    /* The most geometric steps the op logs (targets.h sp_geom_log); NULL: 1. */
    int (*steps)(const sp_op *op);
};

/* pipeline_ops.c: the registry. The op named name (NULL: none); the i-th
 * op (NULL past the last). */
const sp__op_desc *sp__op_find(const char *name);
const sp__op_desc *sp__op_at(int i);

/* The ops other code names: normalize (the output tables, pipeline_spec.c),
 * random_erasing (on the output, pipeline_write.c), targets (its rules). */
extern const sp__op_desc sp__op_normalize, sp__op_random_erasing, sp__op_targets;

/* Helpers for the ops (pipeline_state.c). sp__op_bad(): the SP_ESPEC of a
 * bad value, `pipeline op IDX "NAME": bad value "VAL" for KEY (expected
 * EXPECT)`. sp__op_prob(): p= (a probability; *p keeps its default when v
 * is NULL). sp__op_fail(): the run error "PATH: reason" of rc. */
int sp__op_bad(sp_error *err, int idx, const sp_op *op, const char *key, const char *val,
               const char *expect);
int sp__op_prob(sp_error *err, int idx, const sp_op *op, const char *v, double *p);
int sp__op_fail(const sp__op_run *r, int rc);

/* The state: take owned pixels; make cur writable; apply a pending flip
 * (0 or SP_ENOMEM); log one geometric step (the log has room for one step
 * per op, and a fused resize + center_crop logs two). */
void sp__st_take(sp__run_state *s, sp_image *owned);
int sp__st_writable(sp__run_state *s);
int sp__st_unflip(sp__run_state *s);
void sp__st_log(sp__run_state *s, int kind, int op, int in_w, int in_h, int out_w, int out_h,
                double x0, double y0, double sx, double sy);
/* The source: the DCT scale for reading a cw x ch box resampled to ow x oh
 * (the largest d in 8, 4, 2 with cw >= d * ow and ch >= d * oh, for JPEG
 * with dct=auto; else 1); full-resolution region (x, y, w, h) read at
 * scale 1/d (*owned: out is decoded, else a view into the source image). */
int sp__source_scale(const sp__source *s, int cw, int ch, int ow, int oh);
int sp__source_region(const sp__source *s, int x, int y, int w, int h, int d, sp_image *out,
                      int *owned, const char *path, sp_error *err);

/* Block 0, c[0] as u01 (the p= ops: applied iff u < p). */
static inline double sp__op_u(uint32_t k, const sp_sample_ctx *ctx) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    return sp_u01d(d.c[0]);
}

/* Numbers (spec_num.c): v through "%.9g" and back; a strict decimal
 * number (finite), normalised; 1..max comma-separated numbers; 1..max (at
 * most 4) comma-separated integers in [lo, hi]. The parsers return 1 on
 * success, 0 on a malformed value. */
double sp__canon_num(double v);
int sp__parse_num(const char *s, double *out);
int sp__parse_list(const char *s, double *vals, int max, int *n);
int sp__parse_ints(const char *v, int *out, int max, int lo, int hi, int *n);


/* sp__pipeline_explain() with the sample's run (log, may be NULL). */
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
/* ops.c: sp__rrc_sample() with try t drawing block base | t (attempt a of
 * protect=: base a << 16; sp__rrc_sample() is base 0). */
int sp__rrc_sample_at(int W, int H, double s0, double s1, double r0, double r1,
                      sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                      uint32_t base, sp_crop_box *box);
/* pipeline_protect.c: protect= of the targets op (docs/pipeline.md
 * "protect"). A random crop op gives its step function: the step attempt a
 * would log on a W x H image (0, or 1 when it cannot crop: its run names
 * the error) and, when what is not NULL, its words for explain ("box
 * x=.. y=.. w=.. h=.."). sp__protect_attempt(): the attempt op k keeps with
 * the boxes after steps [0, upto) of log (0 without protect, a log or
 * boxes); e (may be NULL) gets one line per attempt.
 * sp__protect_explained(): the attempt op k kept in the sample's run (log:
 * its steps; NULL: 0). */
typedef int (*sp__protect_step_fn)(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W,
                                   int H, uint32_t a, sp_geom_step *step, char *what,
                                   size_t n);
uint32_t sp__protect_attempt(const sp_pipeline *p, const sp_op *op, sp__protect_step_fn step,
                             uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                             const sp_geom_log *log, int upto, sp__fbuf *e);
uint32_t sp__protect_explained(const sp_pipeline *p, const sp_op *op, sp__protect_step_fn step,
                               int k, const sp_sample_ctx *ctx, int W, int H,
                               const sp_geom_log *log, sp__fbuf *e);
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
/* targets_spec.c: the checks that a pipeline with targets ends with it,
 * logs no more steps than a log holds, and random-applies none of it; and
 * that an op that needs targets has them (SP_ESPEC). */
int sp__targets_check(const sp_pipeline *p, sp_error *err);

/* float32 -> bfloat16 / IEEE binary16 words, round to nearest even
 * (pipeline_write.c). */
uint16_t sp__to_bf16(float f);
uint16_t sp__to_f16(float f);

/* The random_erasing ops of p (the last ones) on one sample's written
 * output: W x H x C elements of o's dtype and layout at out
 * (pipeline_write.c). SP_ENOMEM (value=random) or 0. */
int sp__erase_output(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H, int C,
                     const sp_run_opts *o, void *out);

/*! sp__pipeline_run_hint() : sp__pipeline_run_shaped() (shape may be NULL)
 *  with a hint for the encoded input's decode (NULL: none; from the
 *  loader: the dataset's verdict, SP__DECODE_VALIDATED, and the file's
 *  entropy checkpoints) and the geometry log of sp__pipeline_run_geom()
 *  (log may be NULL). */
int sp__pipeline_run_hint(const sp_pipeline *p, const sp_sample_ctx *ctx,
                          const sp_sample_src *src, const sp_run_opts *opts,
                          const sp_out_shape *shape, void *out, size_t out_bytes,
                          const sp__decode_hint *hint, sp_geom_log *log, sp_error *err);

/* Write the final image im of one sample to out in o's dtype and layout,
 * mirrored when flip (pipeline_write.c). */
void sp__write_output(const sp_pipeline *p, const sp_image *im, int flip, const sp_run_opts *o,
                      void *out);

/* Set p->out_simd once its tables and norm_mean / norm_std are filled:
 * whether each kernel this CPU runs (write_kernels.c) gives each table's
 * 256 values bit for bit (pipeline_write.c; called by the parser). */
void sp__write_prepare(sp_pipeline *p);

/* ---- Internal to the library: once seedpipe/pipeline.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__dtype_size() : bytes of one element: 1, 2, 4 or 8. */
size_t sp__dtype_size(sp_dtype t);

/*! sp__pipeline_canonical() : the canonical spec string (owned by p). */
const char *sp__pipeline_canonical(const sp_pipeline *p);

/*! sp__pipeline_explain() : what each op of p draws for the sample of ctx
 *  (the per-sample mode, as sp__pipeline_run()), given the source image's
 *  size W x H and format (SP_FORMAT_JPEG lets a DCT scale be chosen; raw
 *  pixels are SP_FORMAT_UNKNOWN). One line per op into buf, e.g.
 *      1 random_resized_crop: box x=17 y=4 w=120 h=96 of 160x120 -> 64x64 (decoded at 1/1)
 *      2 hflip: flipped (u=0.2135 < p=0.5)
 *      3 color_jitter: brightness 1.1733 contrast 0.8152 saturation 1.0000, order contrast, brightness, saturation
 *  The box is in source pixels: cropping it from the full decode and
 *  resizing the crop (sp__image_resize) gives the op's output when it is
 *  decoded at 1/1.
 *  Always NUL-terminated (truncated if n is too small).
 *  @return the length the whole text needs (excluding the NUL). */
size_t sp__pipeline_explain(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H,
                            sp_format format, char *buf, size_t n);

/*! sp__pipeline_output_dims() : the output size of one sample.
 *  The last of random_resized_crop / center_crop / random_crop / resize size=H,W fixes
 *  the size; resize size=S (shorter side) after that, or with none before
 *  it, depends on the input size; with no such op the input size is kept.
 *  Where the size depends on the input, in_w/in_h (all samples must share
 *  them, e.g. IDX datasets) are used; pass 0 if unknown.
 *  @return 0, or SP_ESPEC "pipeline has no fixed output size". */
int sp__pipeline_output_dims(const sp_pipeline *p, int in_w, int in_h,
                             int *out_h, int *out_w, int *out_c, sp_error *err);

/*! sp__pipeline_presets() : NULL-terminated list of preset names. */
const char *const *sp__pipeline_presets(void);

/*! sp__pipeline_run() : decode (if src->bytes) and augment one sample, and
 *  write H*W*C elements of opts->dtype in opts->layout to `out`, where
 *  (H, W, C) = sp__pipeline_output_dims(p, raw or decoded size).
 *  The bytes written are a pure function of (pipeline canonical form, ctx,
 *  src contents, dtype, layout). A raw image with the other channel count
 *  is converted first (RGB -> gray by the 601 luma, gray -> RGB
 *  replicated). opts == NULL means uint8, NCHW, default limits.
 *  @return 0, or the decoder's error / SP_EINVAL / SP_ELIMIT (a resize
 *  beyond 65535 per side or 2^28 pixels) / SP_ENOMEM, with the sample's
 *  path in the message. */
int sp__pipeline_run(const sp_pipeline *p, const sp_sample_ctx *ctx,
                     const sp_sample_src *src, const sp_run_opts *opts,
                     void *out, sp_error *err);

/*! sp__pipeline_run_checked() : sp__pipeline_run() that first checks that the
 *  sample's output fits in out_bytes (it may not, for a pipeline without a
 *  fixed output size fed images of different sizes).
 *  @return as sp__pipeline_run(), or SP_ERANGE (nothing written). */
int sp__pipeline_run_checked(const sp_pipeline *p, const sp_sample_ctx *ctx,
                             const sp_sample_src *src, const sp_run_opts *opts,
                             void *out, size_t out_bytes, sp_error *err);

/*! sp__pipeline_run_shaped() : sp__pipeline_run_checked() that also refuses,
 *  before writing a byte, an output whose height, width or channel count
 *  differs from *shape, the sample slot's declared geometry. The loader,
 *  the worker pool and the service write every sample through it, so a
 *  sample is either exactly its slot's geometry or an error (SP_ERANGE,
 *  naming both shapes), never bytes at another stride or a partial write.
 *  @return as sp__pipeline_run_checked(); SP_EINVAL if shape is NULL. */
int sp__pipeline_run_shaped(const sp_pipeline *p, const sp_sample_ctx *ctx,
                            const sp_sample_src *src, const sp_run_opts *opts,
                            const sp_out_shape *shape, void *out, size_t out_bytes,
                            sp_error *err);

#ifdef __cplusplus
}
#endif

#endif

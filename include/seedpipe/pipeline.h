/* seedpipe/pipeline.h - the augmentation pipeline: spec, canonical form, run.
 *
 * A pipeline is written as ops separated by '|', each `name key=value ...`:
 *
 *   random_resized_crop size=224 scale=0.08,1 ratio=0.75,1.3333 | hflip p=0.5
 *   | color_jitter brightness=0.4 contrast=0.4 saturation=0.4
 *   | normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225
 *
 * or a preset name (imagenet-train, imagenet-eval, shapes-train,
 * shapes-eval, mnist), or "@path" to read the spec from a file ('#' starts
 * a comment). An optional first op `decode mode=rgb|gray dct=auto|off`
 * picks the decoded channel count (default rgb) and whether JPEG DCT-domain
 * downscaling may be used (default off). docs/pipeline.md section 3
 * lists every op with its keys and its torchvision counterpart (crops and
 * resizes, flips, color and pixel-value ops, blur, rotate, affine, the
 * policy ops, the detection crops, random_apply, normalize,
 * random_erasing, targets); an unknown name's error lists them too. Order
 * rules: decode first; random_apply's N ops may not change the size;
 * normalize last but for random_erasing, which works on the output values
 * after every other op; targets (the rules for the boxes and keypoints
 * that ride the pipeline; targets.h, docs/targets.md) last of all.
 * Ops follow torchvision's semantics (RandomResizedCrop with 10 tries and
 * the centre-crop fallback, Resize with antialiasing on downscale, ...)
 * but compute pixels in integer / fixed-point arithmetic (ops.h), and take
 * all randomness from the per-sample Philox stream: draw block j of op k
 * (k = the op's position in the spec, counting from 0, `decode` included
 * when written) is sp_sample_draw(K_augment, j, k, sample, epoch).
 * docs/pipeline.md gives every formula and which draw word does what.
 *
 * The canonical form (every parameter explicit, numbers as "%.9g", ops
 * joined by " | "; a decode op appears iff it was written, since it shifts
 * the op numbering) is part of the loader fingerprint. Parsed numbers are
 * normalised through that format, so two specs with the same canonical
 * form produce the same bytes, and parse(canonical(p)) has p's canonical
 * form.
 *
 * Encoded input: when the first op after decode is random_resized_crop,
 * resize, center_crop or random_crop, it is fused with decoding: the header gives
 * W x H, the op's parameters are drawn from W x H, and only the region it
 * reads is decoded, for JPEG at scale 1/d with d the largest of 8, 4, 2
 * such that the crop (or image, for resize) is still at least d times the
 * output size in both axes (else 1; PNG always 1). With d = 1 the bytes
 * equal full decode followed by the op; with d > 1 they are a different,
 * equally deterministic function of (file, parameters). `dct=off` forces
 * d = 1.
 *
 * Output of one sample: H x W x C elements, uint8 or float32, CHW or HWC.
 * float32 without normalize is v / 255; `normalize` maps each uint8 value
 * through a per-channel 256-entry float table ((v / 255) - mean) / std
 * computed in IEEE single precision (as torchvision's ToTensor +
 * Normalize), so it is exact everywhere.
 * `normalize` requires float32 output (sp__pipeline_run refuses uint8
 * unless skip_normalize).
 *
 * Thread safety: a parsed sp_pipeline is immutable; sp__pipeline_run may be
 * called concurrently from any number of threads and forked processes.
 * Parsing is reentrant too.
 */
#ifndef SEEDPIPE_PIPELINE_H
#define SEEDPIPE_PIPELINE_H

#include "seedpipe/common.h"
#include "seedpipe/decode.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output element types. The half-precision ones are 16-bit words (host
 * byte order): each element is the float32 output rounded to nearest, ties
 * to even (bfloat16: the top 16 bits of the float32 after rounding;
 * float16: IEEE binary16), so a half batch equals its float32 batch
 * rounded, element for element, at half the bytes. */
typedef enum {
    SP_DTYPE_UINT8 = 0,
    SP_DTYPE_FLOAT32 = 1,
    SP_DTYPE_BFLOAT16 = 2,
    SP_DTYPE_FLOAT16 = 3,
    /* ABI 5: the tokens of a token corpus (loader.h, docs/tokens.md);
     * image pipelines refuse them */
    SP_DTYPE_INT32 = 4,
    SP_DTYPE_INT64 = 5
} sp_dtype;
typedef enum { SP_LAYOUT_NCHW = 0, SP_LAYOUT_NHWC = 1 } sp_layout;

/*! sp_dtype_parse() / sp_layout_parse() : "uint8", "float32", "bfloat16",
 *  "float16", "int32", "int64" (the last two for token corpora);
 *  "nchw"/"nhwc".
 *  @return 0 or SP_EINVAL with a message naming the word. */
SP_API int sp_dtype_parse(const char *s, sp_dtype *out, sp_error *err);
SP_API int sp_layout_parse(const char *s, sp_layout *out, sp_error *err);
SP_API const char *sp_dtype_name(sp_dtype t);
SP_API const char *sp_layout_name(sp_layout l);

typedef struct sp_pipeline sp_pipeline;

/*! sp_pipeline_parse() : parse a spec string, a preset name or "@file".
 *  @return 0 or SP_ESPEC with a message that quotes the offending word and
 *  its op, e.g. `pipeline op 2 "hflip": unknown key "q" (known: p)`. */
SP_API int sp_pipeline_parse(const char *spec, sp_pipeline **out, sp_error *err);
SP_API void sp_pipeline_destroy(sp_pipeline *p);   /* accepts NULL */

/*! sp_pipeline_has_normalize() : 1 if the pipeline normalizes. */
SP_API int sp_pipeline_has_normalize(const sp_pipeline *p);

/* Identity of one sample's randomness. */
typedef struct sp_sample_ctx {
    sp_key k_augment;    /* sp_rng_key(seed, SP_RNG_AUGMENT) */
    uint32_t epoch;
    uint32_t sample;     /* global dataset index of the sample */
} sp_sample_ctx;

/* Options for one run. skip_normalize makes a uint8 preview of a
 * normalizing pipeline (used by `seedpipe dump`). */
typedef struct sp_run_opts {
    sp_dtype dtype;
    sp_layout layout;
    int skip_normalize;
    const sp_decode_limits *limits;   /* NULL = defaults */
} sp_run_opts;

/* The declared geometry of one sample's output (sp__pipeline_output_dims). */
typedef struct sp_out_shape {
    int height, width, channels;
} sp_out_shape;

#ifdef __cplusplus
}
#endif
#endif

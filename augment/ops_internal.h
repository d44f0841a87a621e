/* augment/ops_internal.h - integer / fixed-point pixel operations on sp_image
 * (internal to the library: the augment layer's building blocks, called by
 * the pipeline's ops; C tests and benches reach them through the static
 * library).
 *
 * The building blocks of the augmentation pipeline (pipeline.h): crop (a
 * view), antialiased resize, flips, grayscale, and torchvision's colour
 * adjustments, all on 8-bit interleaved images (common.h) with 1 or 3
 * channels. Every result is defined by integer arithmetic (the resize
 * weights are computed once per call in double from + - * / only, then
 * quantised), so the bytes are the same on every compiler, ISA, SIMD width
 * and on the GPU. docs/pipeline.md states each formula.
 *
 * Conventions: `src` is never modified unless the function says "in place";
 * destination images are caller-allocated (sp__image_alloc) unless the
 * function says it allocates. Functions that cannot fail return void.
 * Thread safety: reentrant, no global state.
 */
#ifndef SEEDPIPE_AUGMENT_OPS_INTERNAL_H
#define SEEDPIPE_AUGMENT_OPS_INTERNAL_H

#include "seedpipe/common.h"
#include "seedpipe/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- crop, copy, flips --------------------------------------------------- */

/*! sp__image_crop() : make `view` the w x h sub-image of `src` at (x, y);
 *  it shares src's data (free the parent, never the view).
 *  @return 0 or SP_EINVAL if the rectangle is empty or not inside src. */
int sp__image_crop(const sp_image *src, int x, int y, int w, int h, sp_image *view);

/*! sp__image_copy() : allocate `dst` (tightly packed) and copy src into it.
 *  @return 0 or SP_ENOMEM / SP_EINVAL. */
int sp__image_copy(const sp_image *src, sp_image *dst);

/*! sp__image_hflip() / sp__image_vflip() : mirror left-right / top-bottom,
 *  in place (views included). */
void sp__image_hflip(sp_image *img);
void sp__image_vflip(sp_image *img);

/* ---- grayscale ------------------------------------------------------------- */

/*! sp_luma601() : ITU-R 601 luma in fixed point, as decode.h:
 *  (19595 R + 38470 G + 7471 B + 32768) >> 16. */
static inline uint8_t sp_luma601(uint32_t r, uint32_t g, uint32_t b) {
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

/*! sp__image_to_gray() : write the luma of src into dst, which has src's
 *  size and dst->channels = 1 or 3 (3: luma replicated, as torchvision's
 *  rgb_to_grayscale(num_output_channels=3)). A 1-channel src is copied /
 *  replicated. dst may be src itself when the channel counts are equal.
 *  @return 0 or SP_EINVAL (size or channel mismatch). */
int sp__image_to_gray(const sp_image *src, sp_image *dst);

/*! sp__image_gray_to_rgb() : replicate a 1-channel src into a 3-channel dst
 *  of the same size. @return 0 or SP_EINVAL. */
int sp__image_gray_to_rgb(const sp_image *src, sp_image *dst);

/* ---- colour adjustments (torchvision adjust_*, fixed point) --------------
 *
 * A factor f >= 0 is used in Q12: fq = (int32)(f * 4096 + 0.5) evaluated in
 * double (sp__factor_q12). Every adjustment is the blend
 *     out = clamp(floor((fq * v * 256 + (4096 - fq) * o8) / 2^20), 0, 255)
 * of the pixel value v with an "other" value o8 given in Q8 (1/256 units):
 *   brightness: o8 = 0                          (blend with black)
 *   contrast:   o8 = 256 * round-half-up(mean of the image's luma), the mean
 *               as (sum + N/2) / N in integers (luma = sp_luma601 for RGB,
 *               the value for gray)
 *   saturation: o8 = 256 * luma of the same pixel (identity on gray images)
 * i.e. floor(o + f (v - o)), then clamp: what torchvision's ColorJitter
 * does on PIL images (PIL's ImageEnhance blends in float and truncates, and
 * rounds the contrast mean to an integer), up to the factor's Q12 rounding.
 * (Before cache format 2 / loader v2 the blend rounded half up, on average
 * 0.3 grey levels above PIL per adjustment.) */
#define SP_FACTOR_ONE 4096
#define SP_FACTOR_MAX 255.0   /* largest factor accepted */

/*! sp__factor_q12() : (int32)(f * 4096 + 0.5) for 0 <= f <= SP_FACTOR_MAX. */
int32_t sp__factor_q12(double f);
/*! sp__blend_q12() : the blend above for one value (reference form). */
uint8_t sp__blend_q12(uint32_t v, int64_t o8, int32_t fq);

void sp__adjust_brightness(sp_image *img, int32_t fq);   /* in place */
void sp__adjust_contrast(sp_image *img, int32_t fq);     /* in place */
void sp__adjust_saturation(sp_image *img, int32_t fq);   /* in place */

/* ---- pixel-value ops (torchvision.transforms.functional on uint8 tensors) --
 *
 * In place, 1 or 3 channels, per channel where torchvision is. Values are
 * torchvision's exactly (ops_pixel.c; docs/pipeline.md has the formulas):
 *   invert:       255 - v
 *   posterize:    v & (0xff << (8 - bits)) & 0xff, bits in [0, 8]
 *   solarize:     255 - v if (float)v >= (float)threshold, else v
 *   autocontrast: per channel, lo/hi = min/max; if hi > lo,
 *                 trunc(min(255, (v - lo) * ((1.0f / (hi - lo)) * 255.0f))) in
 *                 binary32, else unchanged
 *   equalize:     per channel, torchvision's _scale_channel (PIL's
 *                 ImageOps.equalize): step = (N - count of the largest value
 *                 present) // 255; if step > 0,
 *                 lut[v] = min(255, (count below v + step // 2) // step)
 *   sharpness:    blurred d = round((8-neighbour sum + 5 v) / 13) inside,
 *                 d = v on the border rows/columns; then in binary32
 *                 trunc(clamp((float)f * v + (float)(1 - f) * d, 0, 255));
 *                 images at most 2 pixels wide or high are unchanged. SP_ENOMEM
 *                 (two rows of scratch) or 0.
 *   hue:          torchvision's adjust_hue in binary32 (rgb -> hsv, h + hue
 *                 mod 1, hsv -> rgb, trunc(x * 255)); identity on gray. */
void sp__image_invert(sp_image *img);
void sp__image_posterize(sp_image *img, int bits);
void sp__image_solarize(sp_image *img, double threshold);
void sp__image_autocontrast(sp_image *img);
void sp__image_equalize(sp_image *img);
int sp__image_sharpness(sp_image *img, double factor);
void sp__adjust_hue(sp_image *img, float hue);

/* ---- resize --------------------------------------------------------------
 *
 * Separable resampling with the triangle (bilinear) or the bicubic filter,
 * antialiased on downscale exactly like PIL's / torchvision's
 * antialias=True: along an axis with source box [b0, b1) and n_out outputs,
 *     scale = (b1 - b0) / n_out,  fs = max(scale, 1),  support = r * fs
 *     output i: center = b0 + (i + 0.5) * scale
 *               xmin = max((int)(center - support + 0.5), 0)
 *               xmax = min((int)(center + support + 0.5), plane size)
 *               w(x) = f((x - center + 0.5) / fs)
 * with bilinear: r = 1, f(t) = max(0, 1 - |t|); bicubic: r = 2 and PIL's
 * cubic (a = -0.5): f(t) = ((a + 2)|t| - (a + 3))|t|^2 + 1 for |t| < 1,
 * (((|t| - 5)|t| + 8)|t| - 4) a for 1 <= |t| < 2, else 0
 * (double, + - * / only, fixed order), normalised by their sum, quantised
 * to Q14 by rounding half away from zero ((int)(w * 16384 +- 0.5)), and
 * the rounding residual added to the first largest weight so the weights
 * sum to exactly 16384; zero weights at either end are dropped. The
 * vertical pass runs first, then the horizontal one; each pass rounds and
 * clamps to 8 bits:
 *     out = clamp((sum_k q_k * v_k + 8192) >> 14, 0, 255)
 * (bilinear weights are >= 0, so there the clamp never acts; bicubic's
 * negative lobes can overshoot, and the clamp is PIL's clip8). A pass
 * whose kernels are all single taps (same size, integer offset) is a copy.
 *
 * Kernels never reach outside the source *plane* [0, plane_w) x
 * [0, plane_h): there they are truncated and renormalised (PIL's edge rule).
 * The plane may be larger than the pixels handed in (`src` covers the
 * sub-rectangle at (src_x, src_y)); then every tap must lie inside src
 * (sp__resample_span says which pixels are needed). Only the window
 * [win_x, win_x + out->width) x [win_y, win_y + out->height) of the full
 * out_w x out_h result is computed; its bytes equal the same window of the
 * full result. */

#define SP_RESIZE_BITS 14

/* sp_resample_geom.filter (stable values). */
#define SP_RESAMPLE_BILINEAR 0
#define SP_RESAMPLE_BICUBIC 1

typedef struct sp_resample_geom {
    int plane_w, plane_h;        /* kernels are clamped to this plane */
    double bx0, by0, bx1, by1;   /* source box in plane coordinates */
    int out_w, out_h;            /* size of the full resized result */
    int win_x, win_y;            /* top-left of the computed window */
    int win_w, win_h;            /* window size (= out->width/height) */
    int filter;                  /* SP_RESAMPLE_BILINEAR (0) or _BICUBIC */
} sp_resample_geom;

/*! sp__resample_span() : the plane pixels [*x0, *x1) x [*y0, *y1) that the
 *  window reads. @return 0 or SP_EINVAL (bad geometry: empty box, box not
 *  inside the plane, window not inside the output). */
int sp__resample_span(const sp_resample_geom *g, int *x0, int *y0, int *x1, int *y1);

/*! sp__resample() : compute the window of g into `out` (caller-allocated,
 *  win_w x win_h, src->channels). src holds plane pixels starting at
 *  (src_x, src_y). @return 0, SP_EINVAL (bad geometry, a tap outside src,
 *  channel mismatch) or SP_ENOMEM (scratch). */
int sp__resample(const sp_image *src, int src_x, int src_y,
                 const sp_resample_geom *g, sp_image *out);

/*! sp__image_resize() : resize the whole of src to out_w x out_h into a
 *  newly allocated `out` (box = plane = src), bilinear. @return as
 *  sp__resample. */
int sp__image_resize(const sp_image *src, int out_w, int out_h, sp_image *out);

/*! sp__image_resize_filter() : sp__image_resize with the filter named
 *  (SP_RESAMPLE_BILINEAR or SP_RESAMPLE_BICUBIC; another value: SP_EINVAL). */
int sp__image_resize_filter(const sp_image *src, int out_w, int out_h, int filter,
                            sp_image *out);

/* ---- padding and random crop (ops_geom.c) --------------------------------
 *
 * torchvision's RandomCrop: F.pad with `padding` (left, top, right, bottom),
 * then, with pad_if_needed, F.pad again by the width deficit on both the
 * left and the right and by the height deficit on both the top and the
 * bottom (torchvision pads each side by the whole deficit), then a crop at
 * a uniform offset. Pure indexing: each output pixel is one source pixel
 * or the fill. Along one axis of size n, padded index u maps to
 *   constant: u if 0 <= u < n, else fill;
 *   edge:     clamp(u, 0, n - 1);
 *   reflect:  -u if u < 0, 2 (n - 1) - u if u >= n (torch's reflection
 *             pad; it needs every pad < n, as torch does).
 * The two padding stages are composed, not merged: reflect of a reflected
 * border is not the reflect of the image by the sum. */
typedef enum { SP_PAD_CONSTANT = 0, SP_PAD_EDGE = 1, SP_PAD_REFLECT = 2 } sp_pad_mode;

typedef struct sp_random_crop_geom {
    int pad[4];             /* padding=: left, top, right, bottom */
    int extra_x, extra_y;   /* pad_if_needed: added on both sides of the axis */
    int pw, ph;             /* the padded image */
    int x, y;               /* the crop's offset in the padded image */
} sp_random_crop_geom;

/*! sp__random_crop_sample() : RandomCrop's geometry for a W x H image and an
 *  h x w crop, with the draws of op `op` of the sample (k_augment, sample,
 *  epoch): block 0,
 *    c[0]: y = sp_uniform_int(c[0], ph - h + 1)
 *    c[1]: x = sp_uniform_int(c[1], pw - w + 1)
 *  (c[2], c[3] unused; the draw is made even when the crop is the whole
 *  padded image, where both are 0, as torchvision's).
 *  @return 0, or SP_EINVAL when the padded image is smaller than the crop
 *  (torchvision's "Required crop size ... is larger than input image
 *  size") or a reflect pad is not smaller than the size it reflects. */
int sp__random_crop_sample(int W, int H, int h, int w, const int pad[4], int pad_if_needed,
                           sp_pad_mode mode, sp_key k_augment, uint32_t op, uint32_t sample,
                           uint32_t epoch, sp_random_crop_geom *g);

/*! sp__random_crop_map() : along one axis of size n with padding lo / hi,
 *  then `extra` on both sides, the source index (0..n-1, or -1 for the
 *  fill) of crop positions off .. off + len - 1, into map[0 .. len). */
void sp__random_crop_map(int n, int lo, int hi, int extra, sp_pad_mode mode, int off,
                         int len, int32_t *map);

/*! sp__image_remap() : out(x, y) = src(xmap[x], ymap[y]) where both are
 *  >= 0, else fill[c] (per channel); out is width(xmap) x height(ymap),
 *  allocated by the caller with src's channel count. */
void sp__image_remap(const sp_image *src, const int32_t *xmap, const int32_t *ymap,
                     const uint8_t fill[3], sp_image *out);

/* ---- gaussian blur (ops_blur.c) -------------------------------------------
 *
 * torchvision's GaussianBlur / F.gaussian_blur on a uint8 tensor: a kx x ky
 * kernel (odd sizes; kx along the width), reflect padding (kx / 2 and
 * ky / 2, each smaller than its side, as torch requires), the kernel as
 * torchvision computes it in binary32, the result rounded to nearest even. */

/*! sp__gaussian_kernel1d() : torchvision's _get_gaussian_kernel1d(k, sigma)
 *  in binary32, step for step: x = i - (k - 1) / 2, e = expf(-0.5f *
 *  ((x / sigma) * (x / sigma))), out[i] = e / sum(e) (summed left to
 *  right). */
void sp__gaussian_kernel1d(int k, float sigma, float *out);

/*! sp__image_gaussian_blur() : in place, 1 or 3 channels: a vertical then a
 *  horizontal pass in double with the binary32 weights, rint, clamp.
 *  @return 0, SP_EINVAL (an even or non-positive size, a pad not smaller
 *  than its side, sigma <= 0) with the image unchanged, or SP_ENOMEM. */
int sp__image_gaussian_blur(sp_image *img, int kx, int ky, float sigma_x, float sigma_y);

/* ---- rotation (ops_rotate.c) ------------------------------------------------
 *
 * torchvision's F.rotate on a uint8 tensor with expand=False and the centre
 * of the image (RandomRotation's defaults), nearest or bilinear, with a
 * per-channel fill; the steps are in ops_rotate.c and docs/pipeline.md. */

/*! sp__rotation_theta() : torchvision's inverse matrix for rotate(angle)
 *  (degrees, counter-clockwise), [[cos r, sin r, 0], [-sin r, cos r, 0]],
 *  r = -angle in radians, in binary32 (deterministic sine and cosine). */
void sp__rotation_theta(float angle, float theta[6]);

/*! sp__image_rotate() : out (allocated by the caller, src's size and
 *  channels) = src rotated by angle degrees about its centre; bilinear 0:
 *  nearest. fill[c] where the source is outside (torchvision's mask).
 *  @return 0, or SP_EINVAL when out's geometry is not src's. */
int sp__image_rotate(const sp_image *src, float angle, int bilinear, const float fill[3],
                     sp_image *out);

/*! sp__affine_rss() : torchvision's rotate-scale-shear entries [a, b, c, d]
 *  of _get_inverse_affine_matrix for angle, shear_x, shear_y (degrees), in
 *  double: a = cos(r - sy) / cos(sy), b = -cos(r - sy) tan(sx) / cos(sy) -
 *  sin(r), c = sin(r - sy) / cos(sy), d = -sin(r - sy) tan(sx) / cos(sy) +
 *  cos(r), with seedpipe's sine and cosine (r - sy taken in degrees) and
 *  tan = sin / cos. */
void sp__affine_rss(double angle, double shear_x, double shear_y, double rss[4]);

/*! sp__affine_theta() : the rest of _get_inverse_affine_matrix (inverted),
 *  in double in torchvision's order: m = [d, -b, 0, -c, a, 0] / scale,
 *  m2 += m0 (-cx - tx) + m1 (-cy - ty), m5 likewise, m2 += cx, m5 += cy;
 *  then rounded to binary32. (cx, cy) is the centre relative to the image
 *  centre (the tensor path's center_f: 0, 0 for the image centre). */
void sp__affine_theta(const double rss[4], double scale, double cx, double cy, double tx,
                      double ty, float theta[6]);

/*! sp__image_affine() : F.affine / F.rotate's grid and sampling (the steps
 *  of sp__image_rotate) for the binary32 inverse matrix theta; fill NULL is
 *  torchvision's fill=None (zeros outside, no mask blend).
 *  @return 0, or SP_EINVAL when out's geometry is not src's. */
int sp__image_affine(const sp_image *src, const float theta[6], int bilinear,
                     const float *fill, sp_image *out);

/* ---- the policy ops' sub-ops (ops_policy.c) --------------------------------
 *
 * torchvision 0.14's autoaugment._apply_op on a uint8 tensor, in place, for
 * one sub-op and its signed magnitude (as torchvision computes it: a
 * binary32 value, negated or not): ShearX/Y F.affine about the top-left
 * corner with shear atan(m) (tan taken as m), TranslateX/Y by int(m)
 * pixels, Rotate by m degrees, Brightness / Color / Contrast / Sharpness
 * with factor 1 + m on the tensor path (binary32, truncated), Posterize
 * int(m) bits, Solarize at m, AutoContrast, Equalize, Invert. */
typedef enum {
    SP_AUG_IDENTITY = 0, SP_AUG_SHEAR_X, SP_AUG_SHEAR_Y, SP_AUG_TRANSLATE_X,
    SP_AUG_TRANSLATE_Y, SP_AUG_ROTATE, SP_AUG_BRIGHTNESS, SP_AUG_COLOR, SP_AUG_CONTRAST,
    SP_AUG_SHARPNESS, SP_AUG_POSTERIZE, SP_AUG_SOLARIZE, SP_AUG_AUTOCONTRAST, SP_AUG_EQUALIZE,
    SP_AUG_INVERT, SP_AUG_COUNT
} sp_aug_op;

/*! sp__aug_name() : torchvision's name of a sub-op ("ShearX", ...). */
const char *sp__aug_name(int op);

/*! sp__aug_apply() : apply sub-op `op` with magnitude m (fill NULL:
 *  torchvision's fill=None). @return 0, SP_ENOMEM or SP_EINVAL. */
int sp__aug_apply(sp_image *img, int op, double m, int bilinear, const float *fill);

/*! sp__tensor_brightness() / _contrast() / _saturation() : torchvision's
 *  adjust_* on a uint8 tensor, in place: _blend(img, other, f) =
 *  trunc(clamp((float)f * v + (float)(1 - f) * o, 0, 255)) in binary32,
 *  other = 0 (brightness), the mean of the image's grey (contrast; grey =
 *  trunc(0.2989f r + 0.587f g + 0.114f b) for RGB, the sum exact, then
 *  (float)sum / (float)N), the pixel's grey (saturation; identity on 1
 *  channel). */
void sp__tensor_brightness(sp_image *img, double f);
void sp__tensor_contrast(sp_image *img, double f);
void sp__tensor_saturation(sp_image *img, double f);

/*! sp__linspace_f32() : element i of torch.linspace(start, end, steps) in
 *  binary32 as torch 1.13's CPU kernel computes it with its AVX2 code (the
 *  default on x86-64 with AVX2): step = (end - start) / (steps - 1); the
 *  first 16 * floor(steps / 16) elements in vectors of 8 from a base
 *  fmaf(step, i0, start) (i0 < steps / 2) or fmaf(-step, steps - i0 - 1,
 *  end), element i0 + j = base + j * step (unfused); the rest fmaf(step, i,
 *  start) or fmaf(-step, steps - i - 1, end) by the same halfway rule. */
float sp__linspace_f32(float start, float end, int steps, int i);

/* ---- random parameters ---------------------------------------------------- */

typedef struct sp_crop_box { int x, y, w, h; } sp_crop_box;

/*! sp__rrc_sample() : torchvision RandomResizedCrop.get_params for a W x H
 *  image, scale [s0, s1], ratio [r0, r1] (0 < r0 <= r1), with the draws of
 *  op `op` of the sample `ctx`-style identity (k_augment, sample, epoch).
 *  Try t (0..9) uses draw block t, words:
 *    c[0]: target_area = W*H * (s0 + (s1 - s0) * u01(c[0]))
 *    c[1]: aspect = det_exp(lr0 + (lr1 - lr0) * u01(c[1])),
 *          lr = sp_det_log(r)
 *    w = round(sqrt(target_area * aspect)), h = round(sqrt(target_area / aspect))
 *          (round = ties to even, Python's round)
 *    accepted if 0 < w <= W and 0 < h <= H; then
 *    c[2]: y = sp_uniform_int(c[2], H - h + 1)
 *    c[3]: x = sp_uniform_int(c[3], W - w + 1)
 *  After 10 rejected tries, the centre crop of the largest box whose aspect
 *  is clamped to [r0, r1] (torchvision's fallback; w or h at least 1).
 *  @return the number of the accepted try plus one (1..10), or 0 for the
 *  fallback. */
int sp__rrc_sample(int W, int H, double s0, double s1, double r0, double r1,
                   sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                   sp_crop_box *box);

/* ---- random erasing (ops_erase.c) ------------------------------------------
 *
 * torchvision's RandomErasing.get_params on an H x W output, with the draws
 * of op `op` of the sample. Try t (0..9) uses block 1 + t:
 *   c[0]: erase_area = H*W * (s0 + (s1 - s0) * u01(c[0]))
 *   c[1]: aspect = sp_det_exp(lr0 + (lr1 - lr0) * u01(c[1])), lr = sp_det_log(r)
 *   h = round_even(sqrt(erase_area * aspect)), w = round_even(sqrt(erase_area / aspect))
 *   accepted iff h < H and w < W (h or w may be 0: nothing erased); then
 *   c[2]: y = sp_uniform_int(c[2], H - h + 1)
 *   c[3]: x = sp_uniform_int(c[3], W - w + 1)
 * (block 0 is the op's p decision, taken by the pipeline.)
 * @return the accepted try plus one (1..10), or 0 (10 rejections: nothing
 * erased, box all 0). */
int sp__erasing_sample(int W, int H, double s0, double s1, double r0, double r1,
                       sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                       sp_crop_box *box);

/*! sp__erasing_normals() : n standard normal values (value=random) by
 *  Marsaglia's polar method from blocks 11, 12, ... of op `op`: each block
 *  gives the pairs (c[0], c[1]) and (c[2], c[3]); a pair is
 *  u = (a >> 8) * 2^-23 - 1, v likewise, s = u*u + v*v, rejected if s >= 1
 *  or s == 0, else f = sqrt(-2 * sp_det_log(s) / s) and the values
 *  (float)(u * f), (float)(v * f) in that order (all in double). */
void sp__erasing_normals(sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                         size_t n, float *out);

/*! sp__center_crop_offset() : torchvision CenterCrop's offset along one axis:
 *  round((size - crop) / 2) with ties to even when crop <= size; when
 *  crop > size the image is zero-padded by (crop - size) / 2 (floor) before
 *  it, returned as a negative offset -((crop - size) / 2). That is 0 for
 *  crop = size + 1 (the one zero column or row goes after the image): test
 *  crop > size, never the offset's sign, to know whether an axis pads. */
int sp__center_crop_offset(int size, int crop);

#ifdef __cplusplus
}
#endif
#endif

/* ops.c - crop, copy, flips, grayscale, colour adjustments and the random
 * parameter samplers of the augmentation ops (include/seedpipe/ops.h).
 *
 * All pixel arithmetic is integer. The only floating point here is in
 * sp__rrc_sample (torchvision's RandomResizedCrop parameters: + - * /, sqrt
 * and the project's own sp_det_log/sp_det_exp, in a fixed order), and in
 * sp__factor_q12 (one multiply-add by a power of two). Resize lives in
 * resize.c.
 */

#include <math.h>      /* sqrt only (correctly rounded, DESIGN.md section 1) */
#include <stdlib.h>
#include <string.h>

#include "seedpipe/detmath.h"
#include "augment/pipeline_internal.h"   /* sp__rrc_sample_at() */
#include "augment/detmath_internal.h"
#include "augment/ops_internal.h"
#include "common/common_internal.h"

/* ---- crop, copy, flips --------------------------------------------------- */

int sp__image_crop(const sp_image *src, int x, int y, int w, int h, sp_image *view) {
    if (!src || !view || w <= 0 || h <= 0 || x < 0 || y < 0 || x > src->width - w ||
        y > src->height - h)
        return SP_EINVAL;
    sp_image v = *src;
    v.data = src->data + (size_t)y * src->stride + (size_t)x * (size_t)src->channels;
    v.width = w;
    v.height = h;
    *view = v;
    return SP_OK;
}

int sp__image_copy(const sp_image *src, sp_image *dst) {
    int rc = sp__image_alloc(dst, src->width, src->height, src->channels);
    if (rc) return rc;
    size_t row = (size_t)src->width * (size_t)src->channels;
    for (int y = 0; y < src->height; y++)
        memcpy(dst->data + (size_t)y * dst->stride, src->data + (size_t)y * src->stride, row);
    return SP_OK;
}

void sp__image_hflip(sp_image *img) {
    int c = img->channels, w = img->width;
    for (int y = 0; y < img->height; y++) {
        uint8_t *row = img->data + (size_t)y * img->stride;
        uint8_t *a = row, *b = row + (size_t)(w - 1) * (size_t)c;
        if (c == 3) {
            for (; a < b; a += 3, b -= 3) {
                uint8_t t0 = a[0], t1 = a[1], t2 = a[2];
                a[0] = b[0]; a[1] = b[1]; a[2] = b[2];
                b[0] = t0; b[1] = t1; b[2] = t2;
            }
        } else if (c == 1) {
            for (; a < b; a++, b--) { uint8_t t = *a; *a = *b; *b = t; }
        } else {
            for (; a < b; a += c, b -= c)
                for (int k = 0; k < c; k++) { uint8_t t = a[k]; a[k] = b[k]; b[k] = t; }
        }
    }
}

void sp__image_vflip(sp_image *img) {
    size_t row = (size_t)img->width * (size_t)img->channels;
    uint8_t tmp[1024];
    for (int y = 0, z = img->height - 1; y < z; y++, z--) {
        uint8_t *a = img->data + (size_t)y * img->stride;
        uint8_t *b = img->data + (size_t)z * img->stride;
        for (size_t off = 0; off < row; off += sizeof tmp) {
            size_t n = row - off < sizeof tmp ? row - off : sizeof tmp;
            memcpy(tmp, a + off, n);
            memcpy(a + off, b + off, n);
            memcpy(b + off, tmp, n);
        }
    }
}

/* ---- grayscale ------------------------------------------------------------- */

int sp__image_to_gray(const sp_image *src, sp_image *dst) {
    if (src->width != dst->width || src->height != dst->height ||
        (dst->channels != 1 && dst->channels != 3) || (src->channels != 1 && src->channels != 3))
        return SP_EINVAL;
    int w = src->width, dc = dst->channels;
    for (int y = 0; y < src->height; y++) {
        const uint8_t *s = src->data + (size_t)y * src->stride;
        uint8_t *d = dst->data + (size_t)y * dst->stride;
        for (int x = 0; x < w; x++) {
            uint8_t l = src->channels == 3 ? sp_luma601(s[3 * x], s[3 * x + 1], s[3 * x + 2])
                                           : s[x];
            if (dc == 3) { d[3 * x] = l; d[3 * x + 1] = l; d[3 * x + 2] = l; }
            else d[x] = l;
        }
    }
    return SP_OK;
}

int sp__image_gray_to_rgb(const sp_image *src, sp_image *dst) {
    if (src->channels != 1 || dst->channels != 3) return SP_EINVAL;
    return sp__image_to_gray(src, dst);
}

/* ---- colour adjustments ------------------------------------------------------ */

int32_t sp__factor_q12(double f) {
    if (!(f >= 0.0)) return 0;
    if (f > SP_FACTOR_MAX) f = SP_FACTOR_MAX;
    return (int32_t)(f * 4096.0 + 0.5);
}

uint8_t sp__blend_q12(uint32_t v, int64_t o8, int32_t fq) {
    int64_t num = (int64_t)fq * (int64_t)v * 256 + (int64_t)(SP_FACTOR_ONE - fq) * o8;
    if (num < 0) return 0;
    num >>= 20;
    return (uint8_t)(num > 255 ? 255 : num);
}

static void apply_lut(sp_image *img, const uint8_t lut[256]) {
    size_t row = (size_t)img->width * (size_t)img->channels;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (size_t i = 0; i < row; i++) p[i] = lut[p[i]];
    }
}

void sp__adjust_brightness(sp_image *img, int32_t fq) {
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = sp__blend_q12((uint32_t)v, 0, fq);
    apply_lut(img, lut);
}

void sp__adjust_contrast(sp_image *img, int32_t fq) {
    uint64_t sum = 0, n = (uint64_t)img->width * (uint64_t)img->height;
    for (int y = 0; y < img->height; y++) {
        const uint8_t *p = img->data + (size_t)y * img->stride;
        if (img->channels == 3)
            for (int x = 0; x < img->width; x++)
                sum += sp_luma601(p[3 * x], p[3 * x + 1], p[3 * x + 2]);
        else
            for (int x = 0; x < img->width; x++) sum += p[x];
    }
    int64_t mean8 = 256 * (int64_t)((sum + n / 2) / n);   /* PIL: int(mean + 0.5) */
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = sp__blend_q12((uint32_t)v, mean8, fq);
    apply_lut(img, lut);
}

void sp__adjust_saturation(sp_image *img, int32_t fq) {
    if (img->channels != 3) return;   /* torchvision: identity on 1 channel */
    /* The Q20 blend with o8 = 256 g equals the Q12 form
     * floor((fq v + (4096 - fq) g) / 4096), which fits in int32 for
     * fq <= 255 * 4096. */
    int32_t a[256], b[256];
    for (int v = 0; v < 256; v++) {
        a[v] = fq * v;
        b[v] = (SP_FACTOR_ONE - fq) * v;
    }
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->width; x++, p += 3) {
            int32_t bg = b[sp_luma601(p[0], p[1], p[2])];
            for (int k = 0; k < 3; k++) {
                int32_t s = a[p[k]] + bg;
                p[k] = (uint8_t)(s < 0 ? 0 : (s >> 12) > 255 ? 255 : (s >> 12));
            }
        }
    }
}

/* ---- random parameters ---------------------------------------------------- */

int sp__rrc_sample(int W, int H, double s0, double s1, double r0, double r1,
                   sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                   sp_crop_box *box) {
    return sp__rrc_sample_at(W, H, s0, s1, r0, r1, k_augment, op, sample, epoch, 0, box);
}

int sp__rrc_sample_at(int W, int H, double s0, double s1, double r0, double r1,
                      sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                      uint32_t base, sp_crop_box *box) {
    double area = (double)H * (double)W;
    double lr0 = sp_det_log(r0), lr1 = sp_det_log(r1);
    for (uint32_t t = 0; t < 10; t++) {
        sp_ctr d = sp_sample_draw(k_augment, base | t, op, sample, epoch);
        double target = area * (s0 + (s1 - s0) * sp_u01d(d.c[0]));
        double aspect = sp_det_exp(lr0 + (lr1 - lr0) * sp_u01d(d.c[1]));
        double wf = sp__det_round_half_even(sqrt(target * aspect));
        double hf = sp__det_round_half_even(sqrt(target / aspect));
        if (wf > 0 && wf <= W && hf > 0 && hf <= H) {
            int w = (int)wf, h = (int)hf;
            box->w = w;
            box->h = h;
            box->y = (int)sp_uniform_int(d.c[2], (uint64_t)(H - h + 1));
            box->x = (int)sp_uniform_int(d.c[3], (uint64_t)(W - w + 1));
            return (int)t + 1;
        }
    }
    /* Fallback: centre crop with the aspect ratio clamped into [r0, r1]. */
    double in_ratio = (double)W / (double)H;
    int w = W, h = H;
    if (in_ratio < r0) {
        h = (int)sp__det_round_half_even((double)w / r0);
    } else if (in_ratio > r1) {
        w = (int)sp__det_round_half_even((double)h * r1);
    }
    if (w < 1) w = 1;
    if (h < 1) h = 1;
    if (w > W) w = W;
    if (h > H) h = H;
    box->w = w;
    box->h = h;
    box->y = (H - h) / 2;
    box->x = (W - w) / 2;
    return 0;
}

int sp__center_crop_offset(int size, int crop) {
    if (crop > size) return -((crop - size) / 2);
    int d = size - crop, q = d / 2;
    if ((d & 1) && (q & 1)) q++;   /* round(d / 2), ties to even */
    return q;
}

/* ops_policy.c - the sub-ops of torchvision's AutoAugment, RandAugment and
 * TrivialAugmentWide (autoaugment._apply_op, torchvision 0.14) on uint8
 * images, the tensor-path colour blends they use, and torch.linspace in
 * binary32 for their magnitude tables (include/seedpipe/ops.h).
 *
 * HOW IT WORKS: each sub-op is one of the existing ops with the argument
 * torchvision derives from the magnitude: ShearX/Y and TranslateX/Y are
 * sp__image_affine() with the matrix F.affine builds (shear about the
 * top-left corner, center=[0, 0]; translation int(m), truncated), Rotate
 * is sp__image_rotate(); Posterize, Solarize, AutoContrast, Equalize,
 * Invert and Sharpness are the pixel-value ops of ops_pixel.c; Brightness,
 * Color and Contrast are torchvision's tensor adjust_* (below), not the
 * Q12 blends of color_jitter (those follow PIL): the policy ops follow the
 * uint8 tensor path throughout, every value a binary32 expression
 * evaluated in torch's order (the build uses -ffp-contract=off; fmaf is
 * written where torch's AVX2 kernel fuses).
 * LIMITATIONS: torch.mean sums in binary32 in its own order; here the sum
 * of the grey values is exact (integers), then rounded once, so the
 * contrast mean may differ from torch's in its last bit on large images
 * (docs/pipeline.md gives the measured agreement).
 */
#include "augment/pipeline_internal.h"   /* sp__aug_theta() */

#include <math.h>      /* fmaf: correctly rounded */
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

float sp__linspace_f32(float start, float end, int steps, int i) {
    if (steps <= 1) return start;
    float step = (end - start) / (float)(steps - 1);
    int half = steps / 2, vec_end = steps / 16 * 16, j = 0;
    if (i < vec_end) {   /* a vector of 8 from its first element */
        j = i % 8;
        i -= j;
    }
    float base = i < half ? fmaf(step, (float)i, start) : fmaf(-step, (float)(steps - i - 1), end);
    if (j == 0) return base;
    float d = (float)j * step;
    return base + d;
}

static const char *const AUG_NAMES[SP_AUG_COUNT] = {
    "Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"};

const char *sp__aug_name(int op) {
    return op >= 0 && op < SP_AUG_COUNT ? AUG_NAMES[op] : "?";
}

/* ---- the tensor path's colour blends ---------------------------------------- */

/* _blend's truncation of a binary32 value clamped to [0, 255]. */
static uint8_t trunc_u8(float f) {
    return (uint8_t)(f < 0.0f ? 0.0f : f > 255.0f ? 255.0f : f);
}

/* rgb_to_grayscale(...).to(uint8): (0.2989f r + 0.587f g) + 0.114f b, truncated. */
static uint8_t grey_u8(const uint8_t *p) {
    float l = 0.2989f * (float)p[0] + 0.587f * (float)p[1];
    l = l + 0.114f * (float)p[2];
    return (uint8_t)l;
}

/* out = trunc(clamp(a[v] + other)) with a[v] = (float)f * v; o the blended
 * other value already multiplied by (float)(1 - f). */
void sp__tensor_brightness(sp_image *img, double f) {
    float fa = (float)f, a[256];
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        a[v] = fa * (float)v;
        lut[v] = trunc_u8(a[v]);   /* + (1 - f) * 0: adding a zero changes nothing */
    }
    size_t row = (size_t)img->width * (size_t)img->channels;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (size_t i = 0; i < row; i++) p[i] = lut[p[i]];
    }
}

void sp__tensor_contrast(sp_image *img, double f) {
    const int C = img->channels;
    uint64_t sum = 0;
    for (int y = 0; y < img->height; y++) {
        const uint8_t *p = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->width; x++, p += C) sum += C == 3 ? grey_u8(p) : p[0];
    }
    float n = (float)((uint64_t)img->width * (uint64_t)img->height);
    float mean = (float)sum / n, fa = (float)f, fb = (float)(1.0 - f);
    float o = fb * mean;
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) {
        float av = fa * (float)v;
        lut[v] = trunc_u8(av + o);
    }
    size_t row = (size_t)img->width * (size_t)C;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (size_t i = 0; i < row; i++) p[i] = lut[p[i]];
    }
}

void sp__tensor_saturation(sp_image *img, double f) {
    if (img->channels != 3) return;   /* torchvision: identity on 1 channel */
    float fa = (float)f, fb = (float)(1.0 - f), a[256], b[256];
    for (int v = 0; v < 256; v++) {
        a[v] = fa * (float)v;
        b[v] = fb * (float)v;
    }
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->width; x++, p += 3) {
            float o = b[grey_u8(p)];
            for (int c = 0; c < 3; c++) p[c] = trunc_u8(a[p[c]] + o);
        }
    }
}

/* ---- the sub-ops ------------------------------------------------------------ */

/* F.affine / F.rotate with theta into a new image, copied back into img. */
static int affine_in_place(sp_image *img, const float th[6], int bilinear, const float *fill) {
    sp_image out;
    int rc = sp__image_alloc(&out, img->width, img->height, img->channels);
    if (rc) return rc;
    rc = sp__image_affine(img, th, bilinear, fill, &out);
    size_t row = (size_t)img->width * (size_t)img->channels;
    for (int y = 0; !rc && y < img->height; y++)
        memcpy(img->data + (size_t)y * img->stride, out.data + (size_t)y * out.stride, row);
    sp_image_free(&out);
    return rc;
}

/* The geometric sub-ops: theta as F.affine builds it for _apply_op. */
static int aug_geometric(sp_image *img, int op, double m, int bilinear, const float *fill) {
    float th[6];
    sp__aug_theta(op, m, img->width, img->height, th);
    return affine_in_place(img, th, bilinear, fill);
}

void sp__aug_theta(int op, double m, int W, int H, float th[6]) {
    if (op == SP_AUG_ROTATE) {
        sp__rotation_theta((float)m, th);
        return;
    }
    /* angle 0, shear 0: a = 1, b = -0, c = 0, d = 1 */
    double rss[4] = {1.0, -0.0, 0.0, 1.0}, cx = 0.0, cy = 0.0, tx = 0.0, ty = 0.0;
    if (op == SP_AUG_SHEAR_X || op == SP_AUG_SHEAR_Y) {
        /* shear = degrees(atan(m)) on one axis: tan(shear) = m; about the
         * top-left corner (center=[0, 0]: relative to the centre -W/2, -H/2) */
        if (op == SP_AUG_SHEAR_X) rss[1] = -m;
        else rss[2] = -m;
        cx = 0.0 - (double)W * 0.5;
        cy = 0.0 - (double)H * 0.5;
    } else if (op == SP_AUG_TRANSLATE_X) {
        tx = (double)(long long)m;   /* int(magnitude): toward zero */
    } else {
        ty = (double)(long long)m;
    }
    sp__affine_theta(rss, 1.0, cx, cy, tx, ty, th);
}

int sp__aug_apply(sp_image *img, int op, double m, int bilinear, const float *fill) {
    switch (op) {
    case SP_AUG_IDENTITY: return SP_OK;
    case SP_AUG_SHEAR_X:
    case SP_AUG_SHEAR_Y:
    case SP_AUG_TRANSLATE_X:
    case SP_AUG_TRANSLATE_Y:
    case SP_AUG_ROTATE: return aug_geometric(img, op, m, bilinear, fill);
    case SP_AUG_BRIGHTNESS: sp__tensor_brightness(img, 1.0 + m); return SP_OK;
    case SP_AUG_COLOR: sp__tensor_saturation(img, 1.0 + m); return SP_OK;
    case SP_AUG_CONTRAST: sp__tensor_contrast(img, 1.0 + m); return SP_OK;
    case SP_AUG_SHARPNESS: return sp__image_sharpness(img, 1.0 + m);
    case SP_AUG_POSTERIZE: sp__image_posterize(img, (int)m); return SP_OK;
    case SP_AUG_SOLARIZE: sp__image_solarize(img, m); return SP_OK;
    case SP_AUG_AUTOCONTRAST: sp__image_autocontrast(img); return SP_OK;
    case SP_AUG_EQUALIZE: sp__image_equalize(img); return SP_OK;
    case SP_AUG_INVERT: sp__image_invert(img); return SP_OK;
    default: return SP_EINVAL;
    }
}

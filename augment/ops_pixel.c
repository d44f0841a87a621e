/* ops_pixel.c - the pixel-value ops of torchvision's RandAugment family
 * (include/seedpipe/ops.h): invert, posterize, solarize, autocontrast,
 * equalize, sharpness, and the hue shift of ColorJitter.
 *
 * Each follows torchvision.transforms.functional on a uint8 tensor, value
 * for value:
 * - invert, posterize, solarize and equalize are integer lookup tables
 *   (equalize's from the channel's histogram, torchvision's _scale_channel);
 * - sharpness's blurred image is round((sum of the 8 neighbours + 5 c) / 13)
 *   in integers (never a tie: 13 is odd, so torchvision's float convolution
 *   rounds to the same value), the border rows and columns kept;
 * - autocontrast, the blend of sharpness and the hue shift are computed in
 *   IEEE binary32 exactly as torchvision writes them: every + - * / is one
 *   float operation rounded to nearest even (the build uses
 *   -ffp-contract=off, so nothing is fused), fmodf and floorf are exact,
 *   and a float becomes uint8 by truncation, as torch's .to(torch.uint8).
 *   That is the same on every IEEE machine; docs/pipeline.md states the
 *   formulas.
 * All functions work in place on 1- or 3-channel images (views included).
 */

#include <math.h>      /* floorf, fmodf: exact */
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"

static void lut_apply(sp_image *img, const uint8_t lut[256]) {
    size_t row = (size_t)img->width * (size_t)img->channels;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (size_t i = 0; i < row; i++) p[i] = lut[p[i]];
    }
}

/* One lookup table per channel. */
static void lut_apply_channels(sp_image *img, uint8_t lut[][256]) {
    int c = img->channels;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->width; x++, p += c)
            for (int k = 0; k < c; k++) p[k] = lut[k][p[k]];
    }
}

void sp__image_invert(sp_image *img) {
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(255 - v);
    lut_apply(img, lut);
}

void sp__image_posterize(sp_image *img, int bits) {
    if (bits < 0) bits = 0;
    if (bits > 8) bits = 8;
    uint8_t mask = (uint8_t)(0xff00u >> bits), lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(v & mask);
    lut_apply(img, lut);
}

void sp__image_solarize(sp_image *img, double threshold) {
    /* torch compares the uint8 tensor with the threshold in float32 */
    float t = (float)threshold;
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (float)v >= t ? (uint8_t)(255 - v) : (uint8_t)v;
    lut_apply(img, lut);
}

static void histograms(const sp_image *img, uint64_t hist[][256]) {
    int c = img->channels;
    memset(hist, 0, sizeof(uint64_t) * 256 * (size_t)c);
    for (int y = 0; y < img->height; y++) {
        const uint8_t *p = img->data + (size_t)y * img->stride;
        for (int x = 0; x < img->width; x++, p += c)
            for (int k = 0; k < c; k++) hist[k][p[k]]++;
    }
}

void sp__image_autocontrast(sp_image *img) {
    uint64_t hist[3][256];
    uint8_t lut[3][256];
    histograms(img, hist);
    for (int k = 0; k < img->channels; k++) {
        int lo = 0, hi = 255;
        while (lo < 255 && !hist[k][lo]) lo++;
        while (hi > 0 && !hist[k][hi]) hi--;
        for (int v = 0; v < 256; v++) lut[k][v] = (uint8_t)v;
        if (hi <= lo) continue;   /* one value: scale = inf, torchvision keeps it */
        /* bound / (max - min): torch's __rtruediv__ is reciprocal() * bound */
        float scale = (1.0f / (float)(hi - lo)) * 255.0f;
        for (int v = lo; v <= hi; v++) {
            float f = (float)(v - lo) * scale;
            lut[k][v] = (uint8_t)(f > 255.0f ? 255.0f : f);
        }
    }
    lut_apply_channels(img, lut);
}

void sp__image_equalize(sp_image *img) {
    uint64_t hist[3][256];
    uint8_t lut[3][256];
    histograms(img, hist);
    for (int k = 0; k < img->channels; k++) {
        uint64_t total = 0, last = 0;
        for (int v = 0; v < 256; v++) {
            total += hist[k][v];
            if (hist[k][v]) last = hist[k][v];
        }
        uint64_t step = (total - last) / 255, cum = 0;
        for (int v = 0; v < 256; v++) {
            if (step == 0) { lut[k][v] = (uint8_t)v; continue; }
            uint64_t l = (cum + step / 2) / step;   /* cum: the values below v */
            lut[k][v] = (uint8_t)(l > 255 ? 255 : l);
            cum += hist[k][v];
        }
    }
    lut_apply_channels(img, lut);
}

/* ---- sharpness ------------------------------------------------------------ */

/* One output row of sharpness: `up`, `mid`, `down` are the original rows
 * y-1, y, y+1 (all NULL-free; mid only on border rows). */
static void sharp_row(uint8_t *out, const uint8_t *up, const uint8_t *mid, const uint8_t *down,
                      int w, int c, const float a[256], const float b[256]) {
    for (int x = 0; x < w; x++)
        for (int k = 0; k < c; k++) {
            int i = x * c + k, v = mid[i], d = v;
            if (up && x > 0 && x < w - 1) {
                int s = up[i - c] + up[i] + up[i + c] + mid[i - c] + mid[i + c] + down[i - c] +
                        down[i] + down[i + c];
                d = (2 * (s + 5 * v) + 13) / 26;   /* round((s + 5 v) / 13), never a tie */
            }
            float f = a[v] + b[d];
            out[i] = (uint8_t)(f < 0.0f ? 0.0f : f > 255.0f ? 255.0f : f);
        }
}

int sp__image_sharpness(sp_image *img, double factor) {
    int w = img->width, h = img->height, c = img->channels;
    if (w <= 2 || h <= 2) return SP_OK;   /* torchvision: unchanged */
    float fa = (float)factor, fb = (float)(1.0 - factor), a[256], b[256];
    for (int v = 0; v < 256; v++) {
        a[v] = fa * (float)v;   /* ratio * img1 */
        b[v] = fb * (float)v;   /* (1.0 - ratio) * img2 */
    }
    size_t row = (size_t)w * (size_t)c;
    uint8_t *keep = malloc(2 * row);   /* the original rows y-1 and y */
    if (!keep) return SP_ENOMEM;
    uint8_t *up = keep, *mid = keep + row;
    memcpy(mid, img->data, row);
    sharp_row(img->data, NULL, mid, NULL, w, c, a, b);
    for (int y = 1; y < h; y++) {
        uint8_t *t = up;
        up = mid;
        mid = t;
        uint8_t *p = img->data + (size_t)y * img->stride;
        memcpy(mid, p, row);
        const uint8_t *down = y + 1 < h ? p + img->stride : NULL;
        sharp_row(p, down ? up : NULL, mid, down, w, c, a, b);
    }
    free(keep);
    return SP_OK;
}

/* ---- hue ------------------------------------------------------------------ */

/* torchvision's _rgb2hsv, the shift, _hsv2rgb, for one pixel, in float;
 * unit[v] = (float)v / 255.0f (the same division, done once). */
static void hue_pixel(uint8_t *px, float hue, const float unit[256]) {
    float r = unit[px[0]], g = unit[px[1]], b = unit[px[2]];
    float maxc = r > g ? r : g, minc = r < g ? r : g;
    maxc = maxc > b ? maxc : b;
    minc = minc < b ? minc : b;
    int eqc = maxc == minc;
    float cr = maxc - minc;
    float s = cr / (eqc ? 1.0f : maxc), crd = eqc ? 1.0f : cr;
    float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
    float hr = maxc == r ? bc - gc : 0.0f;
    float hg = maxc == g && maxc != r ? (2.0f + rc) - bc : 0.0f;
    float hb = maxc != g && maxc != r ? (4.0f + gc) - rc : 0.0f;
    float hh = fmodf((hr + hg + hb) / 6.0f + 1.0f, 1.0f);
    hh = hh + hue;                     /* (h + hue_factor) % 1.0: torch.remainder */
    float m = fmodf(hh, 1.0f);
    if (m != 0.0f && m < 0.0f) m = m + 1.0f;
    float h6 = m * 6.0f, i = floorf(h6), f = h6 - i, v = maxc;
    float p = v * (1.0f - s), q = v * (1.0f - s * f), t = v * (1.0f - s * (1.0f - f));
    p = p < 0.0f ? 0.0f : p > 1.0f ? 1.0f : p;
    q = q < 0.0f ? 0.0f : q > 1.0f ? 1.0f : q;
    t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
    float o[3];
    switch ((int)i % 6) {
    case 0: o[0] = v; o[1] = t; o[2] = p; break;
    case 1: o[0] = q; o[1] = v; o[2] = p; break;
    case 2: o[0] = p; o[1] = v; o[2] = t; break;
    case 3: o[0] = p; o[1] = q; o[2] = v; break;
    case 4: o[0] = t; o[1] = p; o[2] = v; break;
    default: o[0] = v; o[1] = p; o[2] = q; break;
    }
    for (int k = 0; k < 3; k++) px[k] = (uint8_t)(o[k] * 255.0f);
}

void sp__adjust_hue(sp_image *img, float hue) {
    if (img->channels != 3) return;   /* torchvision: identity on 1 channel */
    float unit[256];
    for (int v = 0; v < 256; v++) unit[v] = (float)v / 255.0f;
    for (int y = 0; y < img->height; y++) {
        uint8_t *p = img->data + (size_t)y * img->stride;
        uint8_t in[3] = {0, 0, 0}, out[3] = {0, 0, 0};
        for (int x = 0; x < img->width; x++, p += 3) {
            /* a pixel equal to the one before it gets its result (a pure
             * function of the pixel): photos repeat colours along a row */
            if (x > 0 && p[0] == in[0] && p[1] == in[1] && p[2] == in[2]) {
                memcpy(p, out, 3);
                continue;
            }
            memcpy(in, p, 3);
            hue_pixel(p, hue, unit);
            memcpy(out, p, 3);
        }
    }
}

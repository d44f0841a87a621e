/* augment/decode_shared.c - what every codec file shares (declared in
 * augment/decode_internal.h): default and resolved limits, the check of a
 * header-declared size against them, request validation and output
 * geometry, and the pixel conversions (alpha drop, gray <-> RGB,
 * CMYK -> RGB).
 *
 * The bottom of augment/'s decoders: decode.c dispatches to decode_png.c
 * and decode_jpeg.c, which call down into this file, never back up.
 *
 * Guarantees: the conversions are integer arithmetic fixed by decode.h, so a
 * pixel converts to the same bytes whichever codec produced it and on every
 * machine; limits are checked against header-declared sizes before the
 * codecs allocate anything that grows with the image. No global state:
 * reentrant.
 */
#include "augment/decode_internal.h"

#include <stdio.h>
#include <string.h>

#define SP_DEFAULT_MAX_DIM    16384u
#define SP_DEFAULT_MAX_PIXELS (64ull << 20)    /* 64 Mi pixels */
#define SP_DEFAULT_MAX_BYTES  (256ull << 20)   /* 256 MiB */

/* ---- limits ----------------------------------------------------------- */

void sp__decode_limits_default(sp_decode_limits *lim) {
    if (!lim) return;
    lim->max_width = SP_DEFAULT_MAX_DIM;
    lim->max_height = SP_DEFAULT_MAX_DIM;
    lim->max_pixels = SP_DEFAULT_MAX_PIXELS;
    lim->max_bytes = SP_DEFAULT_MAX_BYTES;
}

void sp__decode_limits_resolve(const sp_decode_limits *in, sp_decode_limits *out) {
    sp__decode_limits_default(out);
    if (!in) return;
    if (in->max_width) out->max_width = in->max_width;
    if (in->max_height) out->max_height = in->max_height;
    if (in->max_pixels) out->max_pixels = in->max_pixels;
    if (in->max_bytes) out->max_bytes = in->max_bytes;
}

int sp__decode_check_limits(const char *path, const char *fmt, uint64_t width,
                            uint64_t height, const sp_decode_limits *lim,
                            sp_error *err) {
    /* width, height < 2^32 (both codecs' headers), so the products below
     * fit in 64 bits: w * h < 2^64 is not guaranteed, so compare by division. */
    if (width > lim->max_width)
        return sp_error_set(err, SP_ELIMIT, "%s: %s: width %llu exceeds the limit %lu",
                            path, fmt, (unsigned long long)width,
                            (unsigned long)lim->max_width);
    if (height > lim->max_height)
        return sp_error_set(err, SP_ELIMIT, "%s: %s: height %llu exceeds the limit %lu",
                            path, fmt, (unsigned long long)height,
                            (unsigned long)lim->max_height);
    if (width != 0 && height > lim->max_pixels / width)
        return sp_error_set(err, SP_ELIMIT,
                            "%s: %s: %llux%llu pixels exceed the limit of %llu pixels",
                            path, fmt, (unsigned long long)width,
                            (unsigned long long)height,
                            (unsigned long long)lim->max_pixels);
    uint64_t pixels = width * height;  /* <= max_pixels, no overflow */
    if (pixels > lim->max_bytes / 3)
        return sp_error_set(err, SP_ELIMIT,
                            "%s: %s: %llux%llu decodes to more than the limit of %llu bytes",
                            path, fmt, (unsigned long long)width,
                            (unsigned long long)height,
                            (unsigned long long)lim->max_bytes);
    return SP_OK;
}

/* ---- request validation and output geometry ----------------------------- */

int sp__decode_window(const char *path, const char *fmt, int width, int height,
                      const sp_decode_req *req, sp__window *win, sp_error *err) {
    int d = req->scale_denom;
    if (d != 1 && d != 2 && d != 4 && d != 8)
        return sp_error_set(err, SP_EINVAL, "%s: %s: scale_denom %d is not 1, 2, 4 or 8",
                            path, fmt, d);
    int64_t x = req->x, y = req->y, w = req->w, h = req->h;
    if (w < 0 || h < 0)
        return sp_error_set(err, SP_EINVAL, "%s: %s: negative region size %lldx%lld",
                            path, fmt, (long long)w, (long long)h);
    if (w == 0 || h == 0) {  /* the whole image */
        x = 0; y = 0; w = width; h = height;
    } else if (x < 0 || y < 0 || x + w > width || y + h > height) {
        return sp_error_set(err, SP_EINVAL,
                            "%s: %s: region %lld,%lld %lldx%lld is outside the %dx%d image",
                            path, fmt, (long long)x, (long long)y, (long long)w,
                            (long long)h, width, height);
    }
    win->scaled_w = (int)(((int64_t)width + d - 1) / d);
    win->scaled_h = (int)(((int64_t)height + d - 1) / d);
    win->x0 = (int)(x / d);
    win->y0 = (int)(y / d);
    int64_t x1 = (x + w + d - 1) / d, y1 = (y + h + d - 1) / d;
    win->x1 = (int)(x1 < win->scaled_w ? x1 : win->scaled_w);
    win->y1 = (int)(y1 < win->scaled_h ? y1 : win->scaled_h);
    return SP_OK;
}

/* ---- pixel conversion ------------------------------------------------- */

int sp__pixfmt_bytes(sp__pixfmt fmt) {
    switch (fmt) {
    case SP__PIX_GRAY: return 1;
    case SP__PIX_GRAY_ALPHA: return 2;
    case SP__PIX_RGB: return 3;
    default: return 4;
    }
}

static inline uint8_t luma(unsigned r, unsigned g, unsigned b) {
    return (uint8_t)((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

/* round(a * b / 255) for a, b in 0..255; never a tie (255 is odd). */
static inline unsigned mul255(unsigned a, unsigned b) {
    return (a * b + 127u) / 255u;
}

void sp__convert_row(const uint8_t *src, sp__pixfmt fmt, uint8_t *dst,
                     int dst_channels, size_t n) {
    size_t i;
    switch (fmt) {
    case SP__PIX_GRAY:
    case SP__PIX_GRAY_ALPHA: {
        size_t step = (fmt == SP__PIX_GRAY) ? 1 : 2;
        if (dst_channels == 1) {
            if (step == 1) { memcpy(dst, src, n); break; }
            for (i = 0; i < n; i++) dst[i] = src[i * step];
        } else {
            for (i = 0; i < n; i++) {
                uint8_t v = src[i * step];
                dst[3 * i] = v; dst[3 * i + 1] = v; dst[3 * i + 2] = v;
            }
        }
        break;
    }
    case SP__PIX_RGB:
    case SP__PIX_RGBA: {
        size_t step = (fmt == SP__PIX_RGB) ? 3 : 4;
        if (dst_channels == 1) {
            for (i = 0; i < n; i++) {
                const uint8_t *p = src + i * step;
                dst[i] = luma(p[0], p[1], p[2]);
            }
        } else if (step == 3) {
            memcpy(dst, src, n * 3);
        } else {
            for (i = 0; i < n; i++) {
                dst[3 * i] = src[4 * i];
                dst[3 * i + 1] = src[4 * i + 1];
                dst[3 * i + 2] = src[4 * i + 2];
            }
        }
        break;
    }
    case SP__PIX_CMYK:
    case SP__PIX_CMYK_INVERTED: {
        unsigned flip = (fmt == SP__PIX_CMYK) ? 255u : 0u;
        for (i = 0; i < n; i++) {
            const uint8_t *p = src + 4 * i;
            unsigned k = p[3] ^ flip;  /* 255 - v when flip == 255 */
            unsigned r = mul255(p[0] ^ flip, k);
            unsigned g = mul255(p[1] ^ flip, k);
            unsigned b = mul255(p[2] ^ flip, k);
            if (dst_channels == 1) {
                dst[i] = luma(r, g, b);
            } else {
                dst[3 * i] = (uint8_t)r;
                dst[3 * i + 1] = (uint8_t)g;
                dst[3 * i + 2] = (uint8_t)b;
            }
        }
        break;
    }
    }
}

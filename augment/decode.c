/* augment/decode.c - the format dispatch of include/seedpipe/decode.h:
 * format sniffing and probe/decode dispatch to the codec files
 * (decode_png.c, decode_jpeg.c, decode_bmp.c, decode_webp.c, decode_tiff.c). Limits, request geometry and the pixel
 * conversions they share are in decode_shared.c, below both.
 *
 * Guarantees: a buffer of no known format fails with SP_EFORMAT
 * and "path: reason"; a failed decode leaves *out zeroed. No global state:
 * reentrant.
 */
#include "augment/decode_internal.h"
#include "augment/jpeg_ckpt_internal.h"

#include <string.h>

/* ---- sniff, probe, decode --------------------------------------------- */

sp_format sp__format_sniff(const uint8_t *buf, size_t len) {
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (!buf) return SP_FORMAT_UNKNOWN;
    if (len >= 8 && memcmp(buf, png_sig, 8) == 0) return SP_FORMAT_PNG;
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        return SP_FORMAT_JPEG;
    if (len >= 2 && buf[0] == 'B' && buf[1] == 'M') return SP_FORMAT_BMP;
    if (len >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0)
        return SP_FORMAT_WEBP;
    if (len >= 4 && ((memcmp(buf, "II", 2) == 0 && (buf[2] == 42 || buf[2] == 43) && !buf[3]) ||
                     (memcmp(buf, "MM", 2) == 0 && !buf[2] && (buf[3] == 42 || buf[3] == 43))))
        return SP_FORMAT_TIFF;   /* 42: TIFF, 43: BigTIFF */
    return SP_FORMAT_UNKNOWN;
}

static int unknown_format(const uint8_t *buf, size_t len, const char *path,
                              sp_error *err) {
    if (!buf || len == 0)
        return sp_error_set(err, SP_EFORMAT, "%s: empty input", path);
    return sp_error_set(err, SP_EFORMAT,
                        "%s: not a PNG, JPEG, BMP, WebP or TIFF file (unrecognised signature)", path);
}

int sp__image_probe(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    sp_decode_limits L;
    sp_image_info tmp;
    if (!path) path = "(memory)";
    if (!info) info = &tmp;
    memset(info, 0, sizeof *info);
    sp__decode_limits_resolve(lim, &L);
    switch (sp__format_sniff(buf, len)) {
    case SP_FORMAT_PNG: return sp__png_probe(buf, len, path, &L, info, err);
    case SP_FORMAT_JPEG: return sp__jpeg_probe(buf, len, path, &L, info, err);
    case SP_FORMAT_BMP: return sp__bmp_probe(buf, len, path, &L, info, err);
    case SP_FORMAT_WEBP: return sp__webp_probe(buf, len, path, &L, info, err);
    case SP_FORMAT_TIFF: return sp__tiff_probe(buf, len, path, &L, info, err);
    default: return unknown_format(buf, len, path, err);
    }
}

int sp__image_decode(const uint8_t *buf, size_t len, const char *path,
                     const sp_decode_req *req, const sp_decode_limits *lim,
                     sp_image *out, sp_error *err) {
    return sp__image_decode_ex(buf, len, path, req, lim, 0, out, err);
}

int sp__image_decode_ex(const uint8_t *buf, size_t len, const char *path,
                        const sp_decode_req *req, const sp_decode_limits *lim, int flags,
                        sp_image *out, sp_error *err) {
    sp__decode_hint h = {flags, NULL, 0};
    return sp__image_decode_hint(buf, len, path, req, lim, &h, out, err);
}

int sp__image_decode_hint(const uint8_t *buf, size_t len, const char *path,
                          const sp_decode_req *req, const sp_decode_limits *lim,
                          const sp__decode_hint *hint, sp_image *out, sp_error *err) {
    sp_decode_limits L;
    if (!path) path = "(memory)";
    if (!out)
        return sp_error_set(err, SP_EINVAL, "%s: no output image", path);
    memset(out, 0, sizeof *out);
    if (!req)
        return sp_error_set(err, SP_EINVAL, "%s: no decode request", path);
    if (req->channels != 1 && req->channels != 3)
        return sp_error_set(err, SP_EINVAL, "%s: requested %d channels (must be 1 or 3)",
                            path, req->channels);
    sp__decode_limits_resolve(lim, &L);
    int rc;
    switch (sp__format_sniff(buf, len)) {
    case SP_FORMAT_PNG: rc = sp__png_decode(buf, len, path, req, &L, out, err); break;
    case SP_FORMAT_JPEG: rc = sp__jpeg_decode(buf, len, path, req, &L, hint, out, err); break;
    case SP_FORMAT_BMP: rc = sp__bmp_decode(buf, len, path, req, &L, out, err); break;
    case SP_FORMAT_WEBP: rc = sp__webp_decode(buf, len, path, req, &L, out, err); break;
    case SP_FORMAT_TIFF: rc = sp__tiff_decode(buf, len, path, req, &L, out, err); break;
    default: rc = unknown_format(buf, len, path, err); break;
    }
    if (rc != SP_OK) sp_image_free(out);  /* codecs already do; keep the promise */
    return rc;
}

int sp__image_check(const uint8_t *buf, size_t len, uint8_t **ckpt, size_t *ckpt_len) {
    if (ckpt) {
        *ckpt = NULL;
        *ckpt_len = 0;
    }
    if (sp__format_sniff(buf, len) != SP_FORMAT_JPEG) return 0;
    sp_decode_req whole = {3, 0, 0, 0, 0, 1};
    sp_image img;
    int rc = sp__image_decode_ex(buf, len, "(check)", &whole, NULL, 0, &img, NULL);
    sp_image_free(&img);
    if (rc == SP_OK && ckpt) sp__jpeg_ckpt_make(buf, len, ckpt, ckpt_len);
    return rc == SP_OK;
}

/* augment/decode_webp.c - WebP probe and decode for include/seedpipe/decode.h,
 * through libwebp's advanced decoding API (WebPGetFeatures, WebPDecode)
 * reading from memory.
 *
 * Lossy and lossless still images, with or without alpha; alpha is dropped
 * by the shared converter (as the PNG path drops it). The pixels are
 * libwebp's own (default options: fancy upsampling, no dithering), which
 * are Pillow's, since Pillow calls the same library. Animated files are
 * refused by name (SP_EUNSUPP).
 *
 * HOW IT WORKS: a probe is WebPGetFeatures (the RIFF and VP8/VP8L/VP8X
 * headers only) and the limits. A decode checks the same, then decodes the
 * whole file into a buffer of ours (width * height * 3 or 4 bytes, bounded
 * by the limits; libwebp writes into it as external memory) and converts
 * the region's rows. libwebp has no warnings: every problem is a status
 * (a truncated file is VP8_STATUS_NOT_ENOUGH_DATA), each an SP_EFORMAT
 * naming the file. The whole file is decoded whatever the region, so damage
 * anywhere fails every request. Reentrant: libwebp keeps no global state
 * per decode.
 */
#include "augment/decode_internal.h"

#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include "common/common_internal.h"

static const char *wd_status(VP8StatusCode s) {
    switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error (corrupt file)";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "decoding suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data (truncated)";
    default: return "unknown error";
    }
}

/* The headers and the limits; *f is written. */
static int wd_features(const uint8_t *buf, size_t len, const char *path,
                       const sp_decode_limits *lim, WebPBitstreamFeatures *f,
                       sp_error *err) {
    VP8StatusCode s = WebPGetFeatures(buf, len, f);
    if (s != VP8_STATUS_OK)
        return sp_error_set(err, SP_EFORMAT, "%s: WebP: headers: %s", path, wd_status(s));
    if (f->has_animation)
        return sp_error_set(err, SP_EUNSUPP, "%s: WebP: animated files are not supported",
                            path);
    if (f->width <= 0 || f->height <= 0)
        return sp_error_set(err, SP_EFORMAT, "%s: WebP: invalid size %dx%d", path, f->width,
                            f->height);
    return sp__decode_check_limits(path, "WebP", (uint64_t)f->width, (uint64_t)f->height,
                                   lim, err);
}

int sp__webp_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err) {
    WebPBitstreamFeatures f;
    int rc = wd_features(buf, len, path, lim, &f, err);
    if (rc != SP_OK) return rc;
    info->format = SP_FORMAT_WEBP;
    info->width = f.width;
    info->height = f.height;
    info->channels = 3;
    return SP_OK;
}

int sp__webp_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    sp_image *out, sp_error *err) {
    WebPDecoderConfig cfg;
    sp__window win;
    if (!WebPInitDecoderConfig(&cfg))
        return sp_error_set(err, SP_EFORMAT, "%s: WebP: library version mismatch", path);
    int rc = wd_features(buf, len, path, lim, &cfg.input, err);
    if (rc != SP_OK) return rc;
    if (req->scale_denom != 1)
        return sp_error_set(err, SP_EINVAL, "%s: WebP: scale_denom %d (WebP decodes only at "
                            "scale 1)", path, req->scale_denom);
    int w = cfg.input.width, h = cfg.input.height;
    rc = sp__decode_window(path, "WebP", w, h, req, &win, err);
    if (rc != SP_OK) return rc;

    int bpp = cfg.input.has_alpha ? 4 : 3;
    size_t stride = (size_t)w * (size_t)bpp, size = stride * (size_t)h;  /* within limits */
    uint8_t *pix = malloc(size);
    if (!pix) return sp_error_set(err, SP_ENOMEM, "%s: WebP: out of memory", path);
    cfg.output.colorspace = cfg.input.has_alpha ? MODE_RGBA : MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = pix;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = size;
    VP8StatusCode s = WebPDecode(buf, len, &cfg);
    WebPFreeDecBuffer(&cfg.output);   /* nothing of ours: external memory */
    if (s != VP8_STATUS_OK) {
        free(pix);
        return sp_error_set(err, SP_EFORMAT, "%s: WebP: %s", path, wd_status(s));
    }
    rc = sp__image_alloc(out, win.x1 - win.x0, win.y1 - win.y0, req->channels);
    if (rc != SP_OK) {
        free(pix);
        return sp_error_set(err, rc, "%s: WebP: cannot allocate the %dx%d output", path,
                            win.x1 - win.x0, win.y1 - win.y0);
    }
    for (int y = win.y0; y < win.y1; y++)
        sp__convert_row(pix + (size_t)y * stride + (size_t)win.x0 * (size_t)bpp,
                        bpp == 4 ? SP__PIX_RGBA : SP__PIX_RGB,
                        out->data + (size_t)(y - win.y0) * out->stride, out->channels,
                        (size_t)out->width);
    free(pix);
    return SP_OK;
}

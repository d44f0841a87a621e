/* seedpipe/decode.h - PNG and JPEG decoding to 8-bit gray or RGB, with limits.
 *
 * PNG goes through libpng's low-level API: every colour type and bit depth,
 * palette, tRNS, 16-bit, Adam7 interlace; no gamma correction. Alpha is
 * dropped (not composited). 16-bit samples are reduced to 8 bits by
 * v8 = (v16 * 255 + 32895) >> 16 (round to nearest, libpng's
 * png_set_scale_16 rule). Gray-to-RGB replicates; RGB-to-gray uses the
 * ITU-R 601 luma in fixed point: (19595 R + 38470 G + 7471 B + 32768) >> 16.
 *
 * JPEG goes through libjpeg-turbo with the accurate integer IDCT
 * (JDCT_ISLOW): baseline and progressive; gray, YCbCr, RGB, CMYK and YCCK
 * (CMYK/YCCK are converted to RGB here as R = C*K/255 with rounding, Adobe
 * inverted CMYK handled). A region request decodes only the rows and
 * iMCU columns the region needs (jpeg_crop_scanline / jpeg_skip_scanlines)
 * and may use DCT-domain downscaling by 1/2, 1/4, 1/8; the output is a pure
 * function of (file bytes, request), so callers may choose the request from
 * sampled parameters and stay deterministic.
 *
 * Every failure returns an SP_E* code and fills err with "path: reason";
 * hostile input never crashes (libpng/libjpeg errors are caught with
 * setjmp/longjmp, all allocations are bounded by the limits first).
 * Thread safety: all functions are reentrant; no global state.
 */
#ifndef SEEDPIPE_DECODE_H
#define SEEDPIPE_DECODE_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SP_FORMAT_UNKNOWN = 0, SP_FORMAT_PNG = 1, SP_FORMAT_JPEG = 2 } sp_format;

/* Limits checked against the declared header values before any large
 * allocation (decompression bombs). A zero field means "use the default". */
typedef struct sp_decode_limits {
    uint32_t max_width;    /* default 16384 */
    uint32_t max_height;   /* default 16384 */
    uint64_t max_pixels;   /* default 64 Mi pixels (w * h of the full image) */
    uint64_t max_bytes;    /* decoded bytes, default 256 MiB */
} sp_decode_limits;

/*! sp_decode_limits_default() : fill with the defaults above. */
void sp_decode_limits_default(sp_decode_limits *lim);

typedef struct sp_image_info {
    sp_format format;
    int width, height;   /* full-resolution size */
    int channels;        /* natural channel count after conversion: 1 or 3 */
} sp_image_info;

/*! sp_image_probe() : read the header only (cheap) and check the limits.
 *  @return 0, SP_EFORMAT (not PNG/JPEG, or a broken header) or SP_ELIMIT. */
int sp_image_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err);

/* What to decode. Region (x, y, w, h) is in full-resolution pixel
 * coordinates; w == 0 (or h == 0) means the whole image. scale_denom is
 * 1, 2, 4 or 8 (DCT-domain downscaling, JPEG only; PNG requires 1).
 *
 * Output geometry with d = scale_denom: the scaled image is
 * Ws = ceil(W / d) by Hs = ceil(H / d) (libjpeg's rule); the output is its
 * columns [floor(x / d), min(Ws, ceil((x + w) / d))) and rows
 * [floor(y / d), min(Hs, ceil((y + h) / d))). For d == 1 that is exactly
 * the region. */
typedef struct sp_decode_req {
    int channels;   /* 1 (gray) or 3 (RGB) */
    int x, y, w, h;
    int scale_denom;
} sp_decode_req;

/*! sp_image_decode() : decode `buf` per `req` into a newly allocated,
 *  tightly packed image (free with sp_image_free()).
 *  @return 0, SP_EFORMAT (corrupt/truncated/unsupported), SP_ELIMIT,
 *  SP_EINVAL (bad request: region outside the image, bad scale) or
 *  SP_ENOMEM. On failure *out is left zeroed. Warnings from libjpeg on a
 *  truncated-but-decodable file are treated as errors (a training sample
 *  must be exact or refused). */
int sp_image_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    sp_image *out, sp_error *err);

/*! sp_format_sniff() : PNG / JPEG by magic bytes, else SP_FORMAT_UNKNOWN. */
sp_format sp_format_sniff(const uint8_t *buf, size_t len);

/*! sp_read_file() : read a whole file into a malloc'd buffer (max_bytes
 *  bound, 0 = 1 GiB). @return 0, SP_EIO (with strerror) or SP_ELIMIT. */
int sp_read_file(const char *path, uint64_t max_bytes, uint8_t **data,
                 size_t *len, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif

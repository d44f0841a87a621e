/* seedpipe/decode.h - PNG, JPEG, BMP, WebP and TIFF decoding to 8-bit gray or
 * RGB, with limits.
 *
 * PNG goes through libpng's low-level API: every colour type and bit depth,
 * palette, tRNS, 16-bit, Adam7 interlace; no gamma correction. Alpha is
 * dropped (not composited). 16-bit samples are reduced to 8 bits by
 * v8 = (v16 * 255 + 32895) >> 16 (round to nearest, libpng's
 * png_set_scale_16 rule). Gray-to-RGB replicates; RGB-to-gray uses the
 * ITU-R 601 luma in fixed point: (19595 R + 38470 G + 7471 B + 32768) >> 16.
 *
 * JPEG goes through libjpeg-turbo's libjpeg API with the accurate integer
 * IDCT (JDCT_ISLOW), fancy upsampling and no block smoothing: baseline and
 * progressive; gray, YCbCr, RGB, CMYK and YCCK. CMYK/YCCK are converted to
 * RGB here as R = (C*K + 127) / 255 (likewise G from M, B from Y), where C
 * and K are the inverted values Adobe files store (a file with an Adobe
 * APP14 marker; a file without one stores ink amounts, which are inverted
 * first). Gray output of a colour JPEG is the luma (rule above) of its RGB
 * output. A region request decodes only the rows and iMCU columns the region
 * needs (jpeg_crop_scanline / jpeg_skip_scanlines) and may use DCT-domain
 * downscaling by 1/2, 1/4, 1/8; a region decode equals, byte for byte, the
 * same crop of the full decode at the same scale, and the output is a pure
 * function of (file bytes, request), so callers may choose the request from
 * sampled parameters and stay deterministic.
 *
 * BMP is read here, without a library: 1/4/8-bit palette images (grey ones
 * included), 24-bit and 32-bit (BI_RGB, or BI_BITFIELDS with the standard
 * masks; the fourth byte is dropped like alpha), bottom-up or top-down; the
 * pixels are those Pillow's convert("RGB") gives. RLE, embedded JPEG/PNG,
 * 16-bit pixels and other masks are SP_EUNSUPP, named. A palette index past
 * the palette is an error (as for PNG); a file shorter than its header's
 * rows is truncated (SP_EFORMAT). BMP, like PNG, decodes only at scale 1.
 *
 * WebP goes through libwebp (WebPDecode, default options: the pixels Pillow
 * gives, since it calls the same library): lossy and lossless still images;
 * alpha is dropped; animated files are SP_EUNSUPP; the whole image is
 * decoded into a buffer (w * h * 4 bytes with alpha, within max_pixels) and
 * the region copied out. WebP decodes only at scale 1.
 *
 * TIFF goes through libtiff (the first image of the file): 8-bit unsigned
 * interleaved grey or RGB, each with or without an unassociated alpha (dropped),
 * strips or tiles, any compression libtiff has (none, LZW, deflate, ...);
 * the samples are read as stored (TIFFReadEncodedStrip/Tile), as Pillow
 * reads them. Other depths, palette, YCbCr, CMYK, MINISWHITE, planar files
 * and premultiplied alpha are SP_EUNSUPP, named. Every libtiff error or
 * warning fails the sample; libtiff prints nothing (per-file handlers).
 * TIFF decodes only at scale 1.
 *
 * Every failure returns an SP_E* code and fills err with "path: reason"
 * (e.g. "a/b.jpg: JPEG: Premature end of JPEG file"; path NULL reads
 * "(memory)"; err may be NULL); hostile input never crashes (libpng/libjpeg
 * errors are caught with setjmp/longjmp, all allocations are bounded by the
 * limits first, a JPEG with more than 500 scans is SP_ELIMIT).
 * Thread safety: all functions are reentrant; no global state.
 */
#ifndef SEEDPIPE_DECODE_H
#define SEEDPIPE_DECODE_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version. loader.h, the front door's, includes it for its types, so it
 * carries no SEEDPIPE_ADVANCED_API fence. */

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SP_FORMAT_UNKNOWN = 0,
    SP_FORMAT_PNG = 1,
    SP_FORMAT_JPEG = 2,
    SP_FORMAT_BMP = 3,
    SP_FORMAT_WEBP = 4,
    SP_FORMAT_TIFF = 5
} sp_format;

/* Limits checked against the declared header values before any large
 * allocation (decompression bombs), identically by probe and decode, so a
 * file that probes fine never fails decode for its declared size. A zero field
 * means "use the default"; a NULL limits pointer means all defaults. */
typedef struct sp_decode_limits {
    uint32_t max_width;    /* default 16384 */
    uint32_t max_height;   /* default 16384 */
    uint64_t max_pixels;   /* default 64 Mi pixels (w * h of the full image) */
    uint64_t max_bytes;    /* decoded bytes: w * h * 3 of the full image
                            * must fit; default 256 MiB. libjpeg's
                            * whole-image coefficient buffers (progressive
                            * and multi-scan files) are capped at
                            * 4 * max_bytes (else SP_ELIMIT). WebP with
                            * alpha and TIFF with 2 or 4 samples hold the
                            * whole image at its own sample count while
                            * decoding (at most 4/3 of this); libtiff's
                            * own allocations are capped at max_bytes. */
} sp_decode_limits;

typedef struct sp_image_info {
    sp_format format;
    int width, height;   /* full-resolution size */
    int channels;        /* natural channel count after conversion: 1 for
                          * gray and gray+alpha PNG, gray JPEG, BMP with a
                          * grey palette, gray (+alpha) TIFF; else 3 */
} sp_image_info;

/* What to decode. Region (x, y, w, h) is in full-resolution pixel
 * coordinates and must lie inside the image; w == 0 (or h == 0) means the
 * whole image (x and y are then ignored). scale_denom is 1, 2, 4 or 8
 * (DCT-domain downscaling, JPEG only; PNG requires 1).
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


#ifdef __cplusplus
}
#endif
#endif

/* augment/decode_internal.h - what decode.c shares with decode_png.c and
 * decode_jpeg.c (internal to the library; not installed).
 *
 * decode.c owns everything that does not depend on a codec: limits, request
 * validation and output geometry, and the pixel conversions (alpha drop,
 * gray <-> RGB, CMYK -> RGB). The codec files own their library's setjmp
 * context and call back into these helpers, so every format converts pixels
 * with the same arithmetic. All functions are reentrant.
 */
#ifndef SEEDPIPE_AUGMENT_DECODE_INTERNAL_H
#define SEEDPIPE_AUGMENT_DECODE_INTERNAL_H

#include "seedpipe/decode.h"

/* Limits with every zero field replaced by its default. */
void sp__decode_limits_resolve(const sp_decode_limits *in, sp_decode_limits *out);

/*! sp__decode_check_limits() : check a header-declared size against the
 *  (resolved) limits: width, height, width * height and the bytes of the
 *  full-resolution image decoded to RGB (width * height * 3).
 *  @return 0, or SP_ELIMIT with "path: FMT: ..." in err. */
int sp__decode_check_limits(const char *path, const char *fmt, uint64_t width,
                            uint64_t height, const sp_decode_limits *lim,
                            sp_error *err);

/* The output window of a request, in scaled-image coordinates
 * (decode.h: columns [x0, x1), rows [y0, y1) of the Ws x Hs scaled image). */
typedef struct sp__window {
    int scaled_w, scaled_h;   /* Ws, Hs */
    int x0, x1, y0, y1;
} sp__window;

/*! sp__decode_window() : validate the region and scale of `req` against a
 *  W x H image and compute the output window.
 *  @return 0, or SP_EINVAL with "path: FMT: ..." in err. */
int sp__decode_window(const char *path, const char *fmt, int width, int height,
                      const sp_decode_req *req, sp__window *win, sp_error *err);

/* Pixel layouts a codec hands to the converter (8 bits per sample). */
typedef enum {
    SP__PIX_GRAY = 1,      /* Y */
    SP__PIX_GRAY_ALPHA,    /* Y A: alpha dropped */
    SP__PIX_RGB,           /* R G B */
    SP__PIX_RGBA,          /* R G B A: alpha dropped */
    SP__PIX_CMYK,          /* C M Y K, ink amounts (0 = no ink) */
    SP__PIX_CMYK_INVERTED  /* C M Y K as Adobe stores them (255 = no ink) */
} sp__pixfmt;

/*! sp__pixfmt_bytes() : bytes per pixel of a layout. */
int sp__pixfmt_bytes(sp__pixfmt fmt);

/*! sp__convert_row() : convert n pixels from `src` (layout fmt) to `dst`
 *  with 1 (gray) or 3 (RGB) channels, by the rules in decode.h:
 *  gray -> RGB replicates; RGB -> gray is (19595 R + 38470 G + 7471 B +
 *  32768) >> 16; alpha is dropped; CMYK goes to RGB first as
 *  R = round(C' * K' / 255) with C', K' the inverted (Adobe) values. */
void sp__convert_row(const uint8_t *src, sp__pixfmt fmt, uint8_t *dst,
                     int dst_channels, size_t n);

/* Codec entry points (buf has the codec's magic; path is never NULL;
 * lim is resolved; req and out are non-NULL; *out is zeroed on entry and
 * is left zeroed on failure). */
int sp__png_probe(const uint8_t *buf, size_t len, const char *path,
                  const sp_decode_limits *lim, sp_image_info *info, sp_error *err);
int sp__png_decode(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_req *req, const sp_decode_limits *lim,
                   sp_image *out, sp_error *err);
/* A PNG label map (grey or palette, <= 8 bits): the stored values, one
 * byte a pixel, never scaled or looked up (decode_png.c). */
int sp__png_decode_labels(const uint8_t *buf, size_t len, const char *path,
                          sp_image *out, sp_error *err);
int sp__jpeg_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err);
struct sp__decode_hint;
int sp__jpeg_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    const struct sp__decode_hint *hint, sp_image *out, sp_error *err);

int sp__bmp_probe(const uint8_t *buf, size_t len, const char *path,
                  const sp_decode_limits *lim, sp_image_info *info, sp_error *err);
int sp__bmp_decode(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_req *req, const sp_decode_limits *lim,
                   sp_image *out, sp_error *err);
int sp__webp_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err);
int sp__webp_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    sp_image *out, sp_error *err);
int sp__tiff_probe(const uint8_t *buf, size_t len, const char *path,
                   const sp_decode_limits *lim, sp_image_info *info, sp_error *err);
int sp__tiff_decode(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_req *req, const sp_decode_limits *lim,
                    sp_image *out, sp_error *err);

/* sp__image_decode_ex() flags. SP__DECODE_WIDE: the result may have a
 * stride wider than width * channels (JPEG: libjpeg writes its widened
 * crop rows straight into the image, which is then a window of them, so
 * no row is copied); the pixels are those of sp__image_decode() and the
 * image is freed with sp_image_free() as usual. */
#define SP__DECODE_WIDE 1
/* SP__DECODE_VALIDATED: the caller vouches that these exact bytes passed
 * sp__image_check() (a full decode without error, kept by the dataset
 * index with their content hash): a JPEG region decode then stops after
 * the region's last row instead of reading to EOI. Same pixels. */
#define SP__DECODE_VALIDATED 2

/* What the caller knows of the bytes it decodes: SP__DECODE_* flags and,
 * for a validated JPEG, the entropy checkpoint table sp__image_check()
 * made of these same bytes (jpeg_ckpt_internal.h; NULL: none). With both,
 * a crop at scale 1 starts decoding at the last checkpoint above it
 * instead of at the scan's start. Same pixels. */
typedef struct sp__decode_hint {
    int flags;
    const uint8_t *ckpt;
    size_t ckpt_len;
} sp__decode_hint;

/*! sp__image_check() : 1 if buf is a JPEG whose full decode (3 channels,
 *  scale 1, default limits) succeeds, else 0 (damaged, over the default
 *  limits, or not a JPEG: only JPEG decodes use the verdict). With ckpt
 *  non-NULL, a clean file's checkpoint table goes to a malloc'd *ckpt of
 *  *ckpt_len bytes (NULL, 0: the file has none, or memory ran out: only
 *  the speed differs). */
int sp__image_check(const uint8_t *buf, size_t len, uint8_t **ckpt, size_t *ckpt_len);

/*! sp__image_decode_ex() : sp__image_decode() with flags. */
int sp__image_decode_ex(const uint8_t *buf, size_t len, const char *path,
                        const sp_decode_req *req, const sp_decode_limits *lim, int flags,
                        sp_image *out, sp_error *err);

/*! sp__image_decode_hint() : sp__image_decode() with a hint (NULL: none). */
int sp__image_decode_hint(const uint8_t *buf, size_t len, const char *path,
                          const sp_decode_req *req, const sp_decode_limits *lim,
                          const sp__decode_hint *hint, sp_image *out, sp_error *err);

/* ---- Internal to the library: once seedpipe/decode.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__decode_limits_default() : fill with the defaults above. */
void sp__decode_limits_default(sp_decode_limits *lim);

/*! sp__format_sniff() : PNG / JPEG / BMP ("BM") / WebP ("RIFF" size "WEBP") /
 *  TIFF ("II*\0", "MM\0*", BigTIFF's "II+\0", "MM\0+") by magic bytes, else
 *  SP_FORMAT_UNKNOWN. */
sp_format sp__format_sniff(const uint8_t *buf, size_t len);

/*! sp__image_decode() : decode `buf` per `req` into a newly allocated,
 *  tightly packed image (free with sp_image_free()).
 *  @return 0, SP_EFORMAT (corrupt/truncated), SP_EUNSUPP (a layout of
 *  BMP, WebP or TIFF not read, as for sp__image_probe()), SP_ELIMIT,
 *  SP_EINVAL (bad request: region outside the image, bad scale) or
 *  SP_ENOMEM. On failure *out is left zeroed. Every warning of the decoder
 *  library (libjpeg warnings such as a premature end or corrupt data,
 *  libpng warnings and benign errors, a palette index past the PLTE) is an
 *  error: a training sample must be exact or refused. The whole file is
 *  read to its end (IEND / EOI) whatever the region, so damage anywhere in
 *  it fails every request; the rows outside the region are decoded (PNG)
 *  or entropy-decoded only (JPEG) and thrown away. docs/security.md,
 *  "Decoder warnings", has the policy. */
int sp__image_decode(const uint8_t *buf, size_t len, const char *path,
                     const sp_decode_req *req, const sp_decode_limits *lim,
                     sp_image *out, sp_error *err);

/*! sp__image_probe() : read the header only (cheap) and check the limits.
 *  PNG: the IHDR is parsed and CRC-checked; JPEG: libjpeg reads the markers
 *  up to the first scan. info may be NULL (then only the checks are made).
 *  BMP: the headers and the palette, every size checked against the file.
 *  WebP: WebPGetFeatures (the RIFF and bitstream headers). TIFF: libtiff
 *  reads the first directory (IFD).
 *  @return 0, SP_EFORMAT (not a known format, or a broken header),
 *  SP_EUNSUPP (a BMP variant not read: RLE, 16-bit, odd masks; an
 *  animated WebP; a TIFF layout not read) or
 *  SP_ELIMIT. */
int sp__image_probe(const uint8_t *buf, size_t len, const char *path,
                    const sp_decode_limits *lim, sp_image_info *info, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif

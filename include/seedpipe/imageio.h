/* seedpipe/imageio.h - writing images: PNG, JPEG, and contact sheets.
 *
 * Used by `make-shapes` (the built-in dataset), `dump` (a picture of a
 * batch) and the tests. Encoding is through libpng and TurboJPEG; for fixed
 * input and library versions the output files are byte-identical run to run.
 * Reentrant; no global state.
 */
#ifndef SEEDPIPE_IMAGEIO_H
#define SEEDPIPE_IMAGEIO_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_png_write() : write img (1 or 3 channels) as an 8-bit PNG.
 *  @return 0 or SP_EIO naming the path. */
int sp_png_write(const char *path, const sp_image *img, sp_error *err);
/*! sp_png_encode() : encode to a malloc'd buffer. */
int sp_png_encode(const sp_image *img, uint8_t **buf, size_t *len, sp_error *err);

/*! sp_jpeg_write() / sp_jpeg_encode() : baseline JPEG, quality 1..100,
 *  4:2:0 for RGB, through TurboJPEG. */
int sp_jpeg_write(const char *path, const sp_image *img, int quality, sp_error *err);
int sp_jpeg_encode(const sp_image *img, int quality, uint8_t **buf, size_t *len,
                   sp_error *err);

/*! sp_contact_sheet() : tile `count` images of h x w x c (uint8 HWC, packed
 *  one after another in `pixels`) into a grid with `cols` columns and a
 *  2-pixel gap, into a newly allocated RGB image. */
int sp_contact_sheet(const uint8_t *pixels, int count, int h, int w, int c,
                     int cols, sp_image *out, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif

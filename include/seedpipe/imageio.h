/* seedpipe/imageio.h - writing images: PNG, JPEG, and contact sheets.
 *
 * Used by `make-shapes` (the built-in dataset), `dump` (a picture of a
 * batch) and the tests. Encoding is through libpng and TurboJPEG; for fixed
 * input and library versions the output files are byte-identical run to run.
 * Reentrant; no global state.
 */
#ifndef SEEDPIPE_IMAGEIO_H
#define SEEDPIPE_IMAGEIO_H

/* The advanced API (README.md "The C API"): it may change in any 0.x minor
 * version, and a program opts in by defining SEEDPIPE_ADVANCED_API; the
 * front door is seedpipe/stream.h. */
#ifndef SEEDPIPE_ADVANCED_API
#error "seedpipe/imageio.h is the advanced API: #define SEEDPIPE_ADVANCED_API before including it (README.md: The C API); the front door is seedpipe/stream.h"
#endif

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp_image_write() : write img (1 or 3 channels, any stride >= width *
 *  channels) to path, published atomically (a reader never sees half a
 *  file; a symlink at the name is replaced, never written through).
 *  format: SP_IMAGE_PNG, SP_IMAGE_JPEG, or SP_IMAGE_BY_NAME (the path's
 *  extension, any case: .png; .jpg or .jpeg).
 *    PNG:  8-bit gray or RGB, not interlaced, zlib level 6, no time/text
 *          chunks; quality is not used.
 *    JPEG: baseline, quality 1..100, 4:2:0 for RGB (gray for 1 channel),
 *          accurate integer forward DCT (TurboJPEG); at most 65535 x 65535.
 *  For fixed input and library versions the file is byte-identical run to
 *  run. @return 0; SP_EINVAL (bad image, quality, or a path whose
 *  extension names no format; encoder refused), SP_ENOMEM, SP_EIO; every
 *  message names the path. */
typedef enum sp_image_format {
    SP_IMAGE_BY_NAME = 0,
    SP_IMAGE_PNG = 1,
    SP_IMAGE_JPEG = 2,
} sp_image_format;
SP_API int sp_image_write(const char *path, const sp_image *img, sp_image_format format,
                          int quality, sp_error *err);

/* Contact-sheet geometry: SP_CONTACT_GAP pixels of SP_CONTACT_BG gray
 * between the tiles and around the border. */
#define SP_CONTACT_GAP 2
#define SP_CONTACT_BG 64

/*! sp_contact_sheet() : tile `count` images of h x w x c (uint8 HWC, packed
 *  one after another in `pixels`; c = 1 or 3, gray is replicated) into a
 *  grid with `cols` columns (clamped to count) and a 2-pixel gap, into a
 *  newly allocated RGB image (free with sp_image_free()):
 *      rows = ceil(count / cols)
 *      width  = cols * (w + 2) + 2,  height = rows * (h + 2) + 2
 *      image k at x = 2 + (k % cols) * (w + 2), y = 2 + (k / cols) * (h + 2)
 *  Empty cells and gaps are SP_CONTACT_BG. @return 0, SP_EINVAL, SP_ELIMIT
 *  (more than 2^32 pixels), SP_ENOMEM. */
SP_API int sp_contact_sheet(const uint8_t *pixels, int count, int h, int w, int c,
                            int cols, sp_image *out, sp_error *err);

#ifdef __cplusplus
}
#endif
#endif

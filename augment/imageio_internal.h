/* augment/imageio_internal.h - the image encoders behind sp_image_write()
 * (internal; not installed). seedpipe/imageio.h says what the bytes are.
 *
 * Each encodes img (1 or 3 channels, any stride >= width * channels) into
 * a malloc'd buffer (free() it): *buf and *len, or NULL and 0 on failure.
 * @return 0; SP_EINVAL (bad image or quality; the encoder refused),
 * SP_ENOMEM. Messages start "PNG encode: " / "JPEG encode: ".
 * Reentrant; no global state.
 */
#ifndef SEEDPIPE_AUGMENT_IMAGEIO_INTERNAL_H
#define SEEDPIPE_AUGMENT_IMAGEIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"

/* PNG: 8-bit gray or RGB, not interlaced, zlib level 6, no time/text chunks. */
int sp__png_encode(const sp_image *img, uint8_t **buf, size_t *len, sp_error *err);
/* JPEG: baseline, quality 1..100, 4:2:0 for RGB, accurate integer DCT. */
int sp__jpeg_encode(const sp_image *img, int quality, uint8_t **buf, size_t *len, sp_error *err);

#endif

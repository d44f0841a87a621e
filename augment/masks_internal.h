/* augment/masks_internal.h - the library-internal part of seedpipe/masks.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/masks.h.
 */
#ifndef SEEDPIPE_AUGMENT_MASKS_INTERNAL_H
#define SEEDPIPE_AUGMENT_MASKS_INTERNAL_H

#include "seedpipe/masks.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__mask_polygons() : OR the union of npoly polygons into mask (h x w,
 *  row-major; the caller zeroes it). Polygon i has npts[i] points, its
 *  coordinates x, y, x, y, ... follow those of polygon i - 1 in xy.
 *  @return 0, or SP_EFORMAT / SP_ELIMIT (fewer than 3 points, a
 *  coordinate not finite or beyond 2^24, a bound above), naming `what`. */
int sp__mask_polygons(const double *xy, const uint32_t *npts, uint32_t npoly, int h, int w,
                      uint8_t *mask, const char *what, sp_error *err);

/*! sp__mask_rle() : write the h x w mask that the column-major counts
 *  decode to (they must add up to h * w exactly). */
int sp__mask_rle(const uint32_t *counts, size_t m, int h, int w, uint8_t *mask,
                 const char *what, sp_error *err);

/*! sp__mask_warp() : move src (log->src_w x log->src_h, row-major) through
 *  every step of log into out (the last step's output size, or the source
 *  size when the log is empty). fill: the value of pixels whose source is
 *  outside the canvas. @return 0, SP_ENOMEM, or SP_EINVAL (an unknown
 *  step, a step whose input size is not the previous step's output, a
 *  flip, rotation or affine step that changes the size, a scale that is not
 *  positive). */
int sp__mask_warp(const sp_geom_log *log, const uint8_t *src, uint8_t fill, uint8_t *out,
                  sp_error *err);

#ifdef __cplusplus
}
#endif

#endif

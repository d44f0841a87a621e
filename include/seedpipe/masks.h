/* seedpipe/masks.h - instance masks: COCO segmentations rasterised as
 * pycocotools rasterises them, and masks moved through a sample's geometry
 * log by nearest-neighbour resampling (DESIGN.md section 15;
 * docs/targets.md "Masks", docs/pipeline.md "Moving a mask").
 *
 * A mask is H x W uint8, row-major (one byte per pixel, 0 or 1 for an
 * instance, any label for a semantic map).
 *
 * Rasterising (sp_mask_polygons, sp_mask_rle, sp_mask_rle_string) follows
 * pycocotools 2.0's maskApi.c: a polygon is upsampled by 5 (each
 * coordinate to (int)(5 * v + 0.5), C truncation), its boundary walked
 * pixel by pixel, the column crossings brought back to the pixel grid, and
 * the mask is what the column-major run-length encoding of those crossings
 * decodes to; an annotation's polygons are united (maskUtils.merge). RLE
 * counts are column-major runs starting with zeros; the compressed string
 * is pycocotools' 6-bit form (characters 48-111, deltas from the count two
 * before from the fourth count on).
 *
 * Moving (sp_mask_warp): each logged step in order (docs/pipeline.md):
 *   axis (crop / pad / resize / resized crop), source extent
 *   e = round(W' / sx) (W' the output width) from source column x0:
 *     src_x = x0 + nearest(dst_x, e, W'), nearest(d, in, out) =
 *     d when in == out, d >> 1 when out == 2 in, else
 *     min((int)floorf((float)d * ((float)in / (float)out)), in - 1)
 *     (PyTorch's `nearest`, float32), rows likewise; a source outside the
 *     canvas gives `fill`;
 *   hflip / vflip: mirrored;
 *   rotate: torchvision's F.rotate(NEAREST, fill) grid (sp_image_affine
 *     with bilinear = 0), outside: `fill`;
 *   affine (affine, the policy ops' shears and translations): F.affine's
 *     (NEAREST, fill) grid through the step's th, the image's own binary32
 *     theta (sp_image_affine with bilinear = 0), outside: `fill`.
 *
 * Thread safety: everything here is reentrant.
 */
#ifndef SEEDPIPE_MASKS_H
#define SEEDPIPE_MASKS_H

#include "seedpipe/common.h"
#include "seedpipe/targets.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_MASK_MAX_POINTS 65536      /* points per polygon */
#define SP_MASK_MAX_POLYGONS 1024     /* polygons per annotation */
#define SP_MASK_MAX_COUNTS (1u << 24) /* RLE counts per annotation */
#define SP_MASK_MAX_COORD 16777216.0  /* |polygon coordinate| <= 2^24 */
#define SP_MASK_MAX_BOUNDARY (1u << 28) /* upsampled boundary steps per annotation */
#define SP_MASK_MAX_PIXELS (1u << 28) /* H x W of one mask */

/*! sp_mask_polygons() : OR the union of npoly polygons into mask (h x w,
 *  row-major; the caller zeroes it). Polygon i has npts[i] points, its
 *  coordinates x, y, x, y, ... follow those of polygon i - 1 in xy.
 *  @return 0, or SP_EFORMAT / SP_ELIMIT (fewer than 3 points, a
 *  coordinate not finite or beyond 2^24, a bound above), naming `what`. */
SP_API int sp_mask_polygons(const double *xy, const uint32_t *npts, uint32_t npoly, int h, int w,
                            uint8_t *mask, const char *what, sp_error *err);

/*! sp_mask_rle() : write the h x w mask that the column-major counts
 *  decode to (they must add up to h * w exactly). */
SP_API int sp_mask_rle(const uint32_t *counts, size_t m, int h, int w, uint8_t *mask,
                       const char *what, sp_error *err);

/*! sp_mask_rle_string() : decode pycocotools' compressed counts string
 *  (len bytes) into counts (at most max; *m gets how many). */
SP_API int sp_mask_rle_string(const char *s, size_t len, uint32_t *counts, size_t max, size_t *m,
                              const char *what, sp_error *err);

/*! sp_mask_warp() : move src (log->src_w x log->src_h, row-major) through
 *  every step of log into out (the last step's output size, or the source
 *  size when the log is empty). fill: the value of pixels whose source is
 *  outside the canvas. @return 0, SP_ENOMEM, or SP_EINVAL (an unknown
 *  step, a step whose input size is not the previous step's output, a
 *  flip, rotation or affine step that changes the size, a scale that is not
 *  positive). */
SP_API int sp_mask_warp(const sp_geom_log *log, const uint8_t *src, uint8_t fill, uint8_t *out,
                        sp_error *err);

#ifdef __cplusplus
}
#endif
#endif

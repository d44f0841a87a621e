/* seedpipe/masks.h - instance masks: COCO segmentations rasterised as
 * pycocotools rasterises them, and masks moved through a sample's geometry
 * log by nearest-neighbour resampling (DESIGN.md section 15;
 * docs/targets.md "Masks", docs/pipeline.md "Moving a mask").
 *
 * A mask is H x W uint8, row-major (one byte per pixel, 0 or 1 for an
 * instance, any label for a semantic map).
 *
 * Rasterising (sp__mask_polygons, sp__mask_rle, sp__mask_rle_string) follows
 * pycocotools 2.0's maskApi.c: a polygon is upsampled by 5 (each
 * coordinate to (int)(5 * v + 0.5), C truncation), its boundary walked
 * pixel by pixel, the column crossings brought back to the pixel grid, and
 * the mask is what the column-major run-length encoding of those crossings
 * decodes to; an annotation's polygons are united (maskUtils.merge). RLE
 * counts are column-major runs starting with zeros; the compressed string
 * is pycocotools' 6-bit form (characters 48-111, deltas from the count two
 * before from the fourth count on).
 *
 * Moving (sp__mask_warp): each logged step in order (docs/pipeline.md):
 *   axis (crop / pad / resize / resized crop), source extent
 *   e = round(W' / sx) (W' the output width) from source column x0:
 *     src_x = x0 + nearest(dst_x, e, W'), nearest(d, in, out) =
 *     d when in == out, d >> 1 when out == 2 in, else
 *     min((int)floorf((float)d * ((float)in / (float)out)), in - 1)
 *     (PyTorch's `nearest`, float32), rows likewise; a source outside the
 *     canvas gives `fill`;
 *   hflip / vflip: mirrored;
 *   rotate: torchvision's F.rotate(NEAREST, fill) grid (sp__image_affine
 *     with bilinear = 0), outside: `fill`;
 *   affine (affine, the policy ops' shears and translations): F.affine's
 *     (NEAREST, fill) grid through the step's th, the image's own binary32
 *     theta (sp__image_affine with bilinear = 0), outside: `fill`.
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

#ifdef __cplusplus
}
#endif
#endif

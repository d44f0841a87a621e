/* dataset_coco_mask.h - the `segmentation` of COCO annotations, read by
 * dataset_coco.c into a compact store and rasterised on demand at the
 * decoded image's size (dataset_coco_mask.c reads; loader/loader_masks.c
 * rasterises with include/seedpipe/masks.h). Not a public header.
 *
 * Accepted (pycocotools' forms): a list of polygons [[x, y, x, y, ...],
 * ...] (each 3 to 65536 points, at most 1024 polygons, coordinates finite
 * within 2^24), or an RLE object {"size": [h, w], "counts": [...]} (runs,
 * column-major, zeros first) or {"size": [h, w], "counts": "..."}
 * (pycocotools' compressed string), at most 2^24 counts. Anything else is
 * an SP_EFORMAT / SP_ELIMIT error naming the file and the annotation.
 */
#ifndef SEEDPIPE_DATASET_COCO_MASK_H
#define SEEDPIPE_DATASET_COCO_MASK_H

#include "common/json_internal.h"
#include "seedpipe/common.h"

/* A growing store of segmentations (doubles): polygons as
 * [1, npoly, (npts, x, y, ...) per polygon], RLE as [2, h, w, m, counts]. */
typedef struct sp__coco_seg { double *v; size_t n, cap; } sp__coco_seg;

#define SP__COCO_NO_SEG UINT64_MAX
#define SP__COCO_NOT_KEPT (UINT64_MAX - 1)   /* checked, not kept (dataset_coco.c) */

/*! sp__coco_seg_read() : append annotation ann's segmentation (token tok;
 *  < 0: none, *at = SP__COCO_NO_SEG) and set *at to its place. */
int sp__coco_seg_read(sp__coco_seg *s, const sp__json *j, long tok, const char *path, size_t ann,
                      uint64_t *at, sp_error *err);


#endif

/* masks_internal.h - a loader's instance masks (loader_masks.c), called by
 * loader_targets.c. Not a public header.
 */
#ifndef SEEDPIPE_LOADER_MASKS_INTERNAL_H
#define SEEDPIPE_LOADER_MASKS_INTERNAL_H

#include "dataset/dataset_coco.h"
#include "seedpipe/targets.h"
#include "common/hash_internal.h"

/*! sp__ldm_open() : with masks declared, check that every box has a
 *  segmentation and that N x h x w (the output size) is within
 *  SP_TARGETS_MAX_MASK_BYTES, and set r's mask size. */
int sp__ldm_open(sp_targets_rules *r, const sp_coco *coco, const sp_dataset *ds, int h, int w,
                 const char *annotations, sp_error *err);

/*! sp__ldm_identity() : masks=semantic: every label map's path, size and
 *  modification time into h (the loader's fingerprint). @return 0, or
 *  SP_EIO naming a missing map, SP_ELIMIT. */
int sp__ldm_identity(const sp_dataset *ds, sp__hash *h, sp_error *err);
/*! sp__ldm_rasterise() : the mask (h x w, written whole) of a segmentation
 *  in dataset_coco_mask.h's store form (sp__coco_segmentation()); an RLE of
 *  another size than h x w is an error naming `what`. */
int sp__ldm_rasterise(const double *seg, int h, int w, uint8_t *mask, const char *what,
                      sp_error *err);

/*! sp__ldm_write() : the masks of sample idx's kept boxes (kept: their
 *  indices, in output order) into out (N x H x W, zeroed by the caller);
 *  masks=semantic: its label map (H x W). */
int sp__ldm_write(const sp_targets_rules *r, const sp_coco *coco, const sp_dataset *ds,
                  uint64_t idx,
                  const sp_geom_log *log, const uint32_t *kept, uint32_t nkept, uint8_t *out,
                  const char *path, sp_error *err);

#endif

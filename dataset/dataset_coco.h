/* dataset_coco.h - a COCO-style instances JSON beside a dataset: each
 * sample's boxes, categories and keypoints (targets.h sp_targets), for
 * the loader's `annotations` (docs/targets.md). Not a public header.
 *
 * The file is streamed (dataset_coco_stream.h: never held whole; each
 * image, annotation or other top-level value tokenized alone, at most
 * max_element bytes and max_tokens tokens, depth 16 in all); every error
 * is SP_EFORMAT or SP_ELIMIT naming the file and the JSON offset, the
 * image index or the annotation index, and the reason. Memory per kept
 * annotation: 76 bytes while read (48 + the grouped 28: box, label,
 * segmentation place) + 24 per keypoint, then 28 + 12 per keypoint; its
 * segmentation when kept: 8 bytes per coordinate, + 8 per polygon + 8
 * (RLE: 8 per count + 32). Per image 16 bytes, per sample 17.
 *
 * Rules (stated in docs/targets.md):
 *  - images[i].file_name (a relative path) is matched byte for byte to the
 *    dataset's sample paths (sp_dataset_path); an image that matches no
 *    sample is ignored, as are its annotations; a sample no image names
 *    has no boxes. Two images with one id, or one file_name, are errors.
 *  - annotations[j]: image_id must be an image's id; bbox [x, y, w, h]
 *    (finite, |value| <= 2^24, w and h >= 0) becomes [x, y, x + w, y + h]
 *    computed in float64 then rounded to float32; category_id (any int32)
 *    is kept as given; iscrowd = 1 annotations are left out (counted);
 *    keypoints, when present, are 3K numbers (x, y, v with v 0, 1 or 2),
 *    the same K in every annotation that has them (K <= 256); an
 *    annotation without keypoints gets K (0, 0, 0).
 *  - segmentation (polygons or RLE, dataset_coco_mask.h) is read and
 *    checked for every annotation that becomes a box; masks are made from
 *    it at the decoded size by the loader (loader_masks.c).
 *  - a sample's boxes keep the file's annotation order.
 */
#ifndef SEEDPIPE_DATASET_COCO_H
#define SEEDPIPE_DATASET_COCO_H

#include "seedpipe/dataset.h"
#include "dataset/dataset_api_internal.h"   /* the accessors */
#include "seedpipe/targets.h"

typedef struct sp_coco sp_coco;

/* The loader's `annotations` value that reads each WebDataset sample's
 * KEY.json member (sp__coco_open_members()) instead of a file. */
#define SP_ANNOTATIONS_MEMBERS "@json"

typedef struct sp_coco_limits {
    uint64_t max_bytes;    /* the file; default 2^36 (64 GiB) */
    size_t max_tokens;     /* JSON tokens of one element; default 2^24 (40 bytes each) */
    uint64_t max_element;  /* bytes of one element; default 2^28 (256 MiB) */
    int keep_segmentations; /* 0: checked, not kept (sp__coco_segmentation() NULL) */
    int keep_raw;           /* 1: where each sample's annotations lie (sp__coco_raw()) */
} sp_coco_limits;

/* The defaults above (segmentations kept). */
sp_coco_limits sp__coco_default_limits(void);

/*! sp__coco_open() : parse `path` against ds's samples (lim NULL: defaults).
 *  @return 0 or an error naming path (see above). */
int sp__coco_open(const char *path, const sp_dataset *ds, const sp_coco_limits *lim,
                  sp_coco **out, sp_error *err);
void sp__coco_close(sp_coco *c);   /* accepts NULL */

/* Sample i's own annotation bytes (*bytes malloc'd, the caller frees;
 * NULL: none), or an error naming it; bytes declared longer than max (the
 * limits' max_element) are refused (SP_ELIMIT) before they are read. */
typedef int (*sp_coco_fetch)(void *arg, const sp_dataset *ds, uint64_t i, uint64_t max,
                             uint8_t **bytes, size_t *len, sp_error *err);

/*! sp__coco_open_fetch() : the targets of every sample from its own bytes
 *  (WebDataset: its KEY.json member, sp__coco_open_members()), each a JSON
 *  array of annotation objects as in an instances file (image_id, id and
 *  other keys not read), or an object whose "annotations" is that array,
 *  at most max_element bytes and max_tokens tokens; the same rules and
 *  errors as sp__coco_open(), the annotation index counted within the
 *  member and the message naming ROOT/shard/KEY.json. A sample without
 *  bytes has no boxes. Fingerprint: XXH3-128 of "seedpipe-coco-members-v1"
 *  and, per sample, its length (UINT64_MAX: none) and bytes. */
int sp__coco_open_fetch(const sp_dataset *ds, sp_coco_fetch fetch, void *arg,
                        const sp_coco_limits *lim, sp_coco **out, sp_error *err);
/* The same over a WebDataset's KEY.json members (local shards: pread; remote
 * ones: ranged GETs, sp__ds_remote_json()). */
int sp__coco_open_members(const sp_dataset *ds, const sp_coco_limits *lim, sp_coco **out,
                          sp_error *err);

/* Sample i's targets (views into c; n = 0 for a sample without boxes). */
void sp__coco_get(const sp_coco *c, uint64_t i, sp_targets *t);
/* XXH3-128 of the file's bytes: part of the loader's fingerprint. */
sp_digest sp__coco_fingerprint(const sp_coco *c);
/* The most boxes one sample has, and (*which) that sample. */
uint32_t sp__coco_max_boxes(const sp_coco *c, uint64_t *which);
/* Keypoints per box (0: none in the file); iscrowd annotations left out;
 * annotations of images that matched no sample. */
uint32_t sp__coco_keypoints(const sp_coco *c);
uint64_t sp__coco_crowd(const sp_coco *c);
uint64_t sp__coco_unmatched(const sp_coco *c);
/* Box `box` of sample i: its segmentation in dataset_coco_mask.h's store
 * form, or NULL (none). */
const double *sp__coco_segmentation(const sp_coco *c, uint64_t i, uint32_t box);
/* keep_raw: sample i's annotations (iscrowd ones too), in file order: the
 * file offset and length of each one's JSON text; their count. */
uint32_t sp__coco_raw(const sp_coco *c, uint64_t i, const uint64_t **off, const uint64_t **len);
/* Boxes without a segmentation, and (*first) the first one's annotation. */
uint64_t sp__coco_unsegmented(const sp_coco *c, size_t *first);

#endif

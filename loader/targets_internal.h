/* targets_internal.h - a loader's targets (loader_targets.c): the
 * annotations matched to its dataset and the pipeline's rules, and the
 * per-sample step that writes the image then its target fields
 * (targets.h: the sample record). Not a public header.
 */
#ifndef SEEDPIPE_LOADER_TARGETS_INTERNAL_H
#define SEEDPIPE_LOADER_TARGETS_INTERNAL_H

#include "seedpipe/dataset.h"
#include "seedpipe/targets.h"

typedef struct sp__ldt sp__ldt;
struct sp__hash;
struct sp__decode_hint;   /* augment/decode_internal.h */

/*! sp__ldt_open() : the targets of a loader: annotations (NULL: none) for
 *  dataset ds and pipeline pl (NULL: a token corpus). *out stays NULL when
 *  neither the pipeline declares targets nor annotations are given.
 *  @return 0, or SP_EINVAL (one without the other, a mixture or a token
 *  corpus with annotations, more boxes than max_boxes, another K; with
 *  masks, h x w is the output size: loader_masks.c), or the
 *  annotation file's error. */
int sp__ldt_open(const char *annotations, const sp_pipeline *pl, const sp_dataset *ds, int mix,
                 int tokens, int h, int w, sp__ldt **out, sp_error *err);
void sp__ldt_close(sp__ldt *t);   /* accepts NULL */

/* Bytes of the target fields (after the image's 8-byte aligned span). */
size_t sp__ldt_bytes(const sp__ldt *t);
/* The annotations' identity, into the loader's fingerprint. */
void sp__ldt_hash(const sp__ldt *t, struct sp__hash *h);

/*! sp__ldt_run() : without targets (t NULL) sp__pipeline_run_shaped();
 *  else sample idx: the image (image_bytes, then zeros to the
 *  8-byte span) and its target fields into dst (sample_bytes). hint:
 *  the decode's flags (SP__DECODE_VALIDATED: the dataset's verdict) and
 *  the file's entropy checkpoints, or NULL.
 *  sp__ldt_explain() is the same run with each box's fate as text. */
int sp__ldt_run(const sp__ldt *t, const sp_pipeline *pl, const sp_sample_ctx *ctx,
                const sp_sample_src *src, const sp_run_opts *opts, const sp_out_shape *shape,
                uint64_t idx, void *dst, size_t image_bytes, size_t sample_bytes,
                const struct sp__decode_hint *hint, sp_error *err);

/*! sp__ldt_explain() : sp__pipeline_explain()'s lines for sample idx (W x H,
 *  format fmt) with what only its run knows (random_iou_crop's attempts
 *  and crop, from the run's geometry log), then each box's fate, into buf
 *  (n bytes). *rc: 0 or the run's error (then the lines alone). @return
 *  the length written. */
size_t sp__ldt_explain(const sp__ldt *t, const sp_pipeline *pl, const sp_sample_ctx *ctx,
                       const sp_sample_src *src, const sp_run_opts *opts,
                       const sp_out_shape *shape, uint64_t idx, size_t image_bytes,
                       size_t sample_bytes, int W, int H, sp_format fmt, char *buf, size_t n,
                       int *rc, sp_error *err);

#endif

/* augment/targets_internal.h - the library-internal part of seedpipe/targets.h: functions the
 * layers call one another through, with no caller outside libseedpipe
 * (not exported; tests and benches reach them through the static
 * library). The types stay in seedpipe/targets.h.
 */
#ifndef SEEDPIPE_AUGMENT_TARGETS_INTERNAL_H
#define SEEDPIPE_AUGMENT_TARGETS_INTERNAL_H

#include "seedpipe/targets.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__pipeline_run_geom() : sp__pipeline_run_shaped() (shape may be NULL:
 *  sp__pipeline_run_checked()) that also fills *log (may be NULL) with the
 *  geometry it applied. The image bytes are those of the other entry
 *  points. */
int sp__pipeline_run_geom(const sp_pipeline *p, const sp_sample_ctx *ctx,
                          const sp_sample_src *src, const sp_run_opts *opts,
                          const sp_out_shape *shape, void *out, size_t out_bytes,
                          sp_geom_log *log, sp_error *err);

/*! sp__targets_apply() : move t through log under rules r and write the
 *  target fields (sp_targets_record_bytes(r) bytes) at out; *st (may be
 *  NULL) gets the counts. If fates is not NULL, one line per box is
 *  appended to it (at most fates_n bytes, NUL-terminated):
 *      box 3 cat 18: kept [12.5 4 80 61.25] visible 0.8123 area 3020.5
 *  @return 0, or SP_ERANGE (t has more boxes than max_boxes, or keypoints
 *  of another K than r->keypoints), naming `path`. */
int sp__targets_apply(const sp_targets_rules *r, const sp_geom_log *log,
                      const sp_targets *t, void *out, sp_targets_stats *st,
                      char *fates, size_t fates_n, const char *path, sp_error *err);

/*! sp__targets_image_span() : image_bytes rounded up to a multiple of 8: the
 *  offset of the target fields in a sample record. */
size_t sp__targets_image_span(size_t image_bytes);

/*! sp__targets_record_bytes() : bytes of the target fields of one sample
 *  (a multiple of 8), for rules r. */
size_t sp__targets_record_bytes(const sp_targets_rules *r);

#ifdef __cplusplus
}
#endif

#endif

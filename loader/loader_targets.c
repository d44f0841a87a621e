/* loader_targets.c - a loader's targets (targets_internal.h): the
 * annotation file opened against the dataset (dataset/dataset_coco.c), or
 * with "@json" each WebDataset sample's KEY.json member,
 * the pipeline's rules (its `targets` op), and the per-sample step: the
 * image through sp__pipeline_run_geom() with its geometry log, then the
 * boxes and keypoints through sp__targets_apply() into the record after the
 * image (targets.h). The record is part of the sample's bytes, so the
 * ring, the cache, the batch digest, states and verify carry the targets
 * without knowing them. docs/targets.md.
 */
#include "loader/targets_internal.h"
#include "augment/pipeline_internal.h"
#include "common/hash_internal.h"
#include "dataset/dataset_coco.h"
#include "loader/masks_internal.h"

#include <stdlib.h>
#include <string.h>
#include "augment/targets_internal.h"

struct sp__ldt {
    sp_coco *coco;          /* NULL: masks=semantic without annotations */
    const sp_dataset *ds;
    sp_targets_rules rules;
    sp_digest labels;       /* masks=semantic: the label maps' identity (loader_masks.c) */
};

int sp__ldt_open(const char *annotations, const sp_pipeline *pl, const sp_dataset *ds, int mix,
                 int tokens, int h, int w, sp__ldt **out, sp_error *err) {
    *out = NULL;
    sp_targets_rules r;
    int declared = pl && sp_pipeline_targets(pl, &r);
    if (!annotations && !declared) return SP_OK;
    if (tokens || mix)
        return sp_error_set(err, SP_EINVAL, "annotations: a %s has no boxes (annotations go "
                            "with an image dataset)", tokens ? "token corpus" : "mixture");
    if (!annotations && r.masks != SP_MASKS_SEMANTIC)
        return sp_error_set(err, SP_EINVAL, "pipeline: a targets op needs annotations "
                            "(--annotations FILE, or annotations= in Python)");
    if (!declared)
        return sp_error_set(err, SP_EINVAL, "%s: annotations need a pipeline that ends with a "
                            "targets op (e.g. \"... | targets max_boxes=100\"; docs/targets.md)",
                            annotations);
    sp__ldt *t = calloc(1, sizeof *t);
    if (!t) return sp_error_set(err, SP_ENOMEM, "annotations: out of memory");
    t->rules = r;
    t->ds = ds;
    sp_coco_limits lim = sp__coco_default_limits();
    lim.keep_segmentations = r.masks == SP_MASKS_INSTANCE;   /* else checked only */
    int rc = !annotations ? SP_OK
             : strcmp(annotations, SP_ANNOTATIONS_MEMBERS) == 0   /* KEY.json in the shards */
                 ? sp__coco_open_members(ds, &lim, &t->coco, err)
                 : sp__coco_open(annotations, ds, &lim, &t->coco, err);
    uint64_t which = 0;
    uint32_t most = rc || !t->coco ? 0 : sp__coco_max_boxes(t->coco, &which);
    uint32_t k = rc || !t->coco ? 0 : sp__coco_keypoints(t->coco);
    if (!rc && most > (uint32_t)r.max_boxes)
        rc = sp_error_set(err, SP_EINVAL, "%s: sample %llu (%s) has %u boxes, more than the "
                          "targets op's max_boxes=%d", annotations, (unsigned long long)which,
                          sp_dataset_path(ds, which), most, r.max_boxes);
    else if (!rc && r.keypoints && k && k != (uint32_t)r.keypoints)
        rc = sp_error_set(err, SP_EINVAL, "%s: %u keypoints per box, the targets op says "
                          "keypoints=%d", annotations, k, r.keypoints);
    if (!rc) rc = sp__ldm_open(&t->rules, t->coco, ds, h, w, annotations, err);
    if (!rc && r.masks == SP_MASKS_SEMANTIC) {
        sp__hash hs;
        sp__hash_init(&hs);
        rc = sp__ldm_identity(ds, &hs, err);
        t->labels = sp__hash_digest(&hs);
    }
    if (rc) {
        sp__ldt_close(t);
        return rc;
    }
    *out = t;
    return SP_OK;
}

void sp__ldt_close(sp__ldt *t) {
    if (!t) return;
    sp__coco_close(t->coco);
    free(t);
}

size_t sp__ldt_bytes(const sp__ldt *t) { return sp__targets_record_bytes(&t->rules); }

void sp__ldt_hash(const sp__ldt *t, struct sp__hash *h) {
    if (t->rules.masks == SP_MASKS_SEMANTIC) {   /* the label maps, by their stat */
        sp__hash_str(h, "label maps");
        sp__hash_u64(h, t->labels.hi);
        sp__hash_u64(h, t->labels.lo);
    }
    if (!t->coco) {   /* semantic masks alone */
        sp__hash_str(h, "no annotations");
        return;
    }
    sp_digest d = sp__coco_fingerprint(t->coco);
    sp__hash_str(h, "annotations");
    sp__hash_u64(h, d.hi);
    sp__hash_u64(h, d.lo);
}

/* The sample through the pipeline with its geometry log (log->targets =
 * tg: its boxes, which random_iou_crop reads), then its targets into the
 * record; fates as sp__targets_apply(). */
static int run_logged(const sp__ldt *t, const sp_pipeline *pl, const sp_sample_ctx *ctx,
                      const sp_sample_src *src, const sp_run_opts *opts,
                      const sp_out_shape *shape, uint64_t idx, void *dst, size_t image_bytes,
                      const sp__decode_hint *hint, sp_geom_log *log, sp_targets *tg, char *fates,
                      size_t fates_n,
                      sp_error *err) {
    size_t span = sp__targets_image_span(image_bytes);
    if (t->coco) sp__coco_get(t->coco, idx, tg);
    else memset(tg, 0, sizeof *tg);      /* masks=semantic alone: no boxes */
    if (!t->rules.keypoints) tg->k = 0;   /* keypoints=0: not carried */
    log->targets = tg;
    int rc = sp__pipeline_run_hint(pl, ctx, src, opts, shape, dst, image_bytes, hint, log, err);
    if (rc == 0) {
        memset((uint8_t *)dst + image_bytes, 0, span - image_bytes);
        uint32_t kept[SP_TARGETS_MAX_BOXES];
        tg->kept = kept;
        sp_targets_stats st;
        const char *path = src->path ? src->path : "(sample)";
        rc = sp__targets_apply(&t->rules, log, tg, (uint8_t *)dst + span, &st, fates, fates_n,
                               path, err);
        sp_targets_rules boxes_only = t->rules;   /* the masks follow the box fields */
        boxes_only.masks = SP_MASKS_NONE;
        if (rc == 0)
            rc = sp__ldm_write(&t->rules, t->coco, t->ds, idx, log, kept, st.kept,
                               (uint8_t *)dst + span + sp__targets_record_bytes(&boxes_only), path,
                               err);
        tg->kept = NULL;
    }
    return rc;   /* log->targets stays: explain reads the boxes through it */
}

int sp__ldt_run(const sp__ldt *t, const sp_pipeline *pl, const sp_sample_ctx *ctx,
                const sp_sample_src *src, const sp_run_opts *opts, const sp_out_shape *shape,
                uint64_t idx, void *dst, size_t image_bytes, size_t sample_bytes,
                const sp__decode_hint *hint, sp_error *err) {
    if (!t)
        return sp__pipeline_run_hint(pl, ctx, src, opts, shape, dst, sample_bytes, hint, NULL,
                                     err);
    sp_geom_log *log = malloc(sizeof *log);   /* ~16 KB: not on a worker thread's stack */
    if (!log) return sp_error_set(err, SP_ENOMEM, "targets: out of memory");
    sp_targets tg;
    int rc = run_logged(t, pl, ctx, src, opts, shape, idx, dst, image_bytes, hint, log, &tg,
                        NULL, 0, err);
    free(log);
    return rc;
}

size_t sp__ldt_explain(const sp__ldt *t, const sp_pipeline *pl, const sp_sample_ctx *ctx,
                       const sp_sample_src *src, const sp_run_opts *opts,
                       const sp_out_shape *shape, uint64_t idx, size_t image_bytes,
                       size_t sample_bytes, int W, int H, sp_format fmt, char *buf, size_t n,
                       int *rc, sp_error *err) {
    sp_geom_log *log = malloc(sizeof *log);
    void *tmp = malloc(sample_bytes);
    char *fates = malloc(n ? n : 1);
    sp_targets tg;
    *rc = !log || !tmp || !fates ? sp_error_set(err, SP_ENOMEM, "explain: out of memory") : 0;
    if (!*rc)
        *rc = run_logged(t, pl, ctx, src, opts, shape, idx, tmp, image_bytes, NULL, log, &tg, fates,
                         n, err);
    size_t len = sp__pipeline_explain_log(pl, ctx, W, H, fmt, *rc ? NULL : log, buf, n);
    if (!*rc && len + 1 < n) {
        size_t f = strlen(fates);
        if (f > n - len - 1) f = n - len - 1;
        memcpy(buf + len, fates, f);
        len += f;
        buf[len] = '\0';
    }
    free(fates);
    free(tmp);
    free(log);
    return len;
}

/* targets_spec.c - the `targets` op of a pipeline spec (targets.h): its
 * values, its canonical form, its descriptor, the checks that the
 * pipeline can move targets, and the record size it implies. targets.c
 * (the arithmetic), pipeline_protect.c and the loader read the parsed
 * rules. docs/pipeline.md "targets" and docs/targets.md document the op.
 *
 *   targets max_boxes=N clip=0|1 min_area=A min_visibility=V keypoints=K
 *           masks=none|instance|semantic mask_fill=F protect=R
 *           flip_pairs=a-b,c-d,...|coco
 *
 * Defaults: max_boxes=100 clip=1 min_area=1 min_visibility=0 keypoints=0
 * masks=none mask_fill=0 protect=0 (pipeline_protect.c redraws the random
 * crops that would lose a box, at most R times).
 * It must be the last op (it draws nothing, so the other ops keep their
 * numbers and draws) and it may follow normalize and random_erasing.
 */
#include "augment/pipeline_internal.h"
#include "seedpipe/targets.h"

#include <stdlib.h>
#include <string.h>
#include "augment/targets_internal.h"

static int bad(sp_error *err, int idx, const char *key, const char *val, const char *expect) {
    return sp_error_set(err, SP_ESPEC, "pipeline op %d \"targets\": bad value \"%s\" for %s "
                        "(expected %s)", idx, val, key, expect);
}

static int int_in(const char *v, int lo, int hi, int *out) {
    double d;
    if (!sp__parse_num(v, &d) || !(d >= lo && d <= hi) || d != (double)(int)d) return 0;
    *out = (int)d;
    return 1;
}

/* The pairs of keypoints (0-based) whose identities a mirror swaps (COCO
 * person's left_eye/right_eye ...); "coco": COCO person's 17 keypoints. */
static int parse_flip(sp_op *op, int idx, const char *v, sp_error *err) {
    static const char COCO[] = "1-2,3-4,5-6,7-8,9-10,11-12,13-14,15-16";
    const char *s = strcmp(v, "coco") == 0 ? COCO : v;
    for (int j = 0; j < SP_TARGETS_MAX_KEYPOINTS; j++) op->tflip[j] = (uint8_t)j;
    op->tnflip = 0;
    if (s == COCO && op->tkpts != 17)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"targets\": flip_pairs=coco is COCO "
                            "person's 17 keypoints, and the op says keypoints=%d", idx, op->tkpts);
    if (!op->tkpts)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"targets\": flip_pairs needs "
                            "keypoints=K (the op carries none)", idx);
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = -1;
        if (end != s && *end == '-' && end[1] >= '0' && end[1] <= '9') b = strtol(end + 1, &end, 10);
        if (b < 0 || a < 0 || a >= op->tkpts || b >= op->tkpts || a == b ||
            op->tflip[a] != a || op->tflip[b] != b || (*end && (*end != ',' || !end[1])))
            return bad(err, idx, "flip_pairs", v, "coco, or pairs a-b of keypoint indices below "
                       "keypoints=K, comma-separated, each index in one pair at most");
        op->tflip[a] = (uint8_t)b;
        op->tflip[b] = (uint8_t)a;
        op->tnflip++;
        s = *end ? end + 1 : end;
    }
    return SP_OK;
}

/* vals: max_boxes, clip, min_area, min_visibility, keypoints, masks,
 * mask_fill, protect, flip_pairs (NULL: default). */
static int parse_rules(sp_op *op, int idx, const char *const *vals, sp_error *err) {
    op->tmax = 100;
    op->tclip = 1;
    op->tmin_area = 1.0;
    op->tmin_vis = 0.0;
    op->tkpts = 0;
    if (vals[0] && !int_in(vals[0], 1, SP_TARGETS_MAX_BOXES, &op->tmax))
        return bad(err, idx, "max_boxes", vals[0], "an integer in [1, 4096]");
    if (vals[1] && !int_in(vals[1], 0, 1, &op->tclip))
        return bad(err, idx, "clip", vals[1], "0 or 1");
    if (vals[2] && (!sp__parse_num(vals[2], &op->tmin_area) || !(op->tmin_area >= 0) ||
                    op->tmin_area > 1e12))
        return bad(err, idx, "min_area", vals[2], "a number in [0, 1e12] (pixels^2)");
    if (vals[3] && (!sp__parse_num(vals[3], &op->tmin_vis) || !(op->tmin_vis >= 0) ||
                    op->tmin_vis > 1))
        return bad(err, idx, "min_visibility", vals[3], "a number in [0, 1]");
    if (vals[4] && !int_in(vals[4], 0, SP_TARGETS_MAX_KEYPOINTS, &op->tkpts))
        return bad(err, idx, "keypoints", vals[4], "an integer in [0, 256]");
    op->tmasks = SP_MASKS_NONE;
    op->tmask_fill = 0;
    if (vals[5] && strcmp(vals[5], "none") != 0 && strcmp(vals[5], "instance") != 0 &&
        strcmp(vals[5], "semantic") != 0)
        return bad(err, idx, "masks", vals[5], "none, instance or semantic");
    if (vals[5] && strcmp(vals[5], "instance") == 0) op->tmasks = SP_MASKS_INSTANCE;
    if (vals[5] && strcmp(vals[5], "semantic") == 0) op->tmasks = SP_MASKS_SEMANTIC;
    if (vals[6] && !int_in(vals[6], 0, 255, &op->tmask_fill))
        return bad(err, idx, "mask_fill", vals[6], "an integer in [0, 255]");
    op->tprotect = 0;
    if (vals[7] && !int_in(vals[7], 0, SP_TARGETS_MAX_PROTECT, &op->tprotect))
        return bad(err, idx, "protect", vals[7], "an integer in [0, 1000] (redraws)");
    for (int j = 0; j < SP_TARGETS_MAX_KEYPOINTS; j++) op->tflip[j] = (uint8_t)j;
    op->tnflip = 0;
    return vals[8] ? parse_flip(op, idx, vals[8], err) : SP_OK;
}

static void canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "targets max_boxes=%d clip=%d min_area=%.9g min_visibility=%.9g "
                    "keypoints=%d", op->tmax, op->tclip, op->tmin_area, op->tmin_vis, op->tkpts);
    if (op->tmasks)   /* absent without masks: the spec (and fingerprint) of boxes alone stays */
        sp__sbuf_printf(b, " masks=%s mask_fill=%d",
                        op->tmasks == SP_MASKS_SEMANTIC ? "semantic" : "instance", op->tmask_fill);
    if (op->tprotect) sp__sbuf_printf(b, " protect=%d", op->tprotect);   /* absent at 0, as masks */
    for (int j = 0, n = 0; j < op->tkpts; j++)   /* each pair once, by its smaller index */
        if (op->tflip[j] > j)
            sp__sbuf_printf(b, "%s%d-%d", n++ ? "," : " flip_pairs=", j, op->tflip[j]);
}

/* The rules, then the ops before it: each must move targets (log its
 * geometry, or keep every pixel where it is; SP__OP_MOVES_TARGETS). An op
 * added without it is refused here, by name, until it does. */
static int parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals, sp_error *err) {
    int rc = parse_rules(op, idx, vals, err);
    for (int j = 0; !rc && j < idx; j++)
        if (!(p->ops[j].desc->flags & SP__OP_MOVES_TARGETS))
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": it cannot move "
                                "boxes and keypoints yet, so a pipeline with targets "
                                "refuses it", j, p->ops[j].desc->name);
    return rc;
}

static int explain(sp__op_explain *x, const sp_op *op, int k) {
    (void)op;
    sp__fbuf_printf(x->e, "%d targets: rules (no draw; the boxes' fates follow)\n", k);
    return k;
}

const sp__op_desc sp__op_targets = {   /* applied by the loader (targets.c) */
    "targets",
    {"max_boxes", "clip", "min_area", "min_visibility", "keypoints", "masks", "mask_fill",
     "protect", "flip_pairs", NULL},
    0, SP__OP_LAST | SP__OP_AFTER_OUTPUT | SP__OP_MOVES_TARGETS,
    parse, canon, NULL, NULL, explain, NULL};

int sp__targets_check(const sp_pipeline *p, sp_error *err) {
    int t = -1, steps = 0;
    for (int i = 0; i < p->nops; i++) {
        const sp_op *op = &p->ops[i];
        if (op->desc == &sp__op_targets) t = i;
        steps += op->desc->steps ? op->desc->steps(op) : 1;
    }
    for (int i = 0; t < 0 && i < p->nops; i++)
        if (p->ops[i].desc->flags & SP__OP_NEEDS_TARGETS)
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": it decides by the "
                                "sample's boxes, so the pipeline must end with a targets op (and "
                                "be given annotations; docs/targets.md)", i,
                                p->ops[i].desc->name);
    if (t < 0) return SP_OK;
    if (steps > SP_GEOM_LOG_MAX)
        return sp_error_set(err, SP_ESPEC, "pipeline: with targets, its ops may log up to %d "
                            "geometric steps, more than the %d a sample's log holds", steps,
                            SP_GEOM_LOG_MAX);
    if (t != p->nops - 1)
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"targets\": it must be the last op",
                            t);
    for (int i = 0; i < t; i++) {   /* the ops that cannot move targets: parse() above */
        const sp_op *op = &p->ops[i];
        if (op->span && i + op->span >= t)   /* random_apply's ops= */
            return sp_error_set(err, SP_ESPEC, "pipeline op %d \"random_apply\": targets may "
                                "not be random-applied", i);
    }
    return SP_OK;
}

int sp_pipeline_targets(const sp_pipeline *p, sp_targets_rules *r) {
    if (!p || p->nops == 0 || p->ops[p->nops - 1].desc != &sp__op_targets) return 0;
    const sp_op *op = &p->ops[p->nops - 1];
    if (r) {
        r->max_boxes = op->tmax;
        r->clip = op->tclip;
        r->keypoints = op->tkpts;
        r->min_area = op->tmin_area;
        r->min_visibility = op->tmin_vis;
        r->masks = op->tmasks;
        r->mask_fill = op->tmask_fill;
        r->protect = op->tprotect;
        r->flip_pairs = op->tnflip;
        memcpy(r->flip, op->tflip, sizeof r->flip);
        r->mask_w = r->mask_h = 0;   /* the loader sets the output size */
    }
    return 1;
}

size_t sp__targets_image_span(size_t image_bytes) { return (image_bytes + 7) & ~(size_t)7; }

size_t sp__targets_record_bytes(const sp_targets_rules *r) {
    size_t n = (size_t)r->max_boxes, k = (size_t)r->keypoints;
    size_t bytes = (4 * (n * 4 + n * k * 3 + n + 4) + 7) & ~(size_t)7;
    if (r->masks == SP_MASKS_INSTANCE)
        bytes += (n * (size_t)r->mask_w * (size_t)r->mask_h + 7) & ~(size_t)7;
    else if (r->masks == SP_MASKS_SEMANTIC)
        bytes += ((size_t)r->mask_w * (size_t)r->mask_h + 7) & ~(size_t)7;
    return bytes;
}

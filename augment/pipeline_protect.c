/* pipeline_protect.c - `protect=R` of the targets op: a random crop
 * (random_resized_crop, random_crop) that would lose a box is redrawn, at
 * most R times, from counters of its own (docs/pipeline.md "protect",
 * docs/targets.md). The crop ops (pipeline_resize.c, pipeline_random_crop.c)
 * ask which attempt to run (and explain which attempt ran, with the reason
 * each earlier one was rejected), giving their step function.
 *
 * HOW IT WORKS: attempt 0 is the op's draw without protect (same blocks,
 * same words), so a pipeline with protect=0 keeps every byte. Attempt a
 * >= 1 draws from block base a << 16: random_resized_crop's try t reads
 * block (a << 16) | t, random_crop's offset block a << 16 (its padding is
 * not drawn). For each attempt the crop's step is appended, in thought, to
 * the steps logged so far, and each box the rules keep before the crop
 * (sp__targets_lost(): empty, min_area, min_visibility, judged as the
 * targets op judges them at the end, against the box's whole rectangle)
 * is judged again after it; an attempt that keeps all of them is run.
 * When all R + 1 attempts lose a box, attempt 0 is run (the fallback: the
 * draw the op makes without protect). Boxes are judged at the crop: a later
 * op (another crop, a rotation) may still lose a box.
 */
#include "augment/pipeline_internal.h"

#include <string.h>

uint32_t sp__protect_attempt(const sp_pipeline *p, const sp_op *op, sp__protect_step_fn step,
                             uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                             const sp_geom_log *log, int upto, sp__fbuf *e) {
    static const char *const WHY[] = {"kept", "empty", "min_area", "min_visibility"};
    sp_targets_rules r;
    if (!log || !log->targets || !log->targets->n || !sp_pipeline_targets(p, &r) || !r.protect)
        return 0;
    for (uint32_t a = 0; a <= (uint32_t)r.protect; a++) {
        sp_geom_step s;
        char what[96];
        if (step(op, k, ctx, W, H, a, &s, e ? what : NULL, sizeof what)) return 0;
        int first, why, lost = sp__targets_lost(&r, log, upto, &s, &first, &why);
        if (e) sp__fbuf_printf(e, "    protect attempt %u: %s", a, what);
        if (!lost) {
            if (e) sp__fbuf_printf(e, ": loses no box (kept)\n");
            return a;
        }
        if (e)
            sp__fbuf_printf(e, ": loses %d box%s (box %d: %s), rejected\n", lost,
                            lost == 1 ? "" : "es", first, WHY[why]);
    }
    if (e)
        sp__fbuf_printf(e, "    protect fallback: all %d attempts lose a box; attempt 0 is "
                        "kept\n", r.protect + 1);
    return 0;
}

uint32_t sp__protect_explained(const sp_pipeline *p, const sp_op *op, sp__protect_step_fn step,
                               int k, const sp_sample_ctx *ctx, int W, int H,
                               const sp_geom_log *log, sp__fbuf *e) {
    for (int i = 0; log && i < log->n; i++)
        if (log->step[i].op == k)
            return sp__protect_attempt(p, op, step, (uint32_t)k, ctx, W, H, log, i, e);
    return 0;
}

/* pipeline_protect.c - `protect=R` of the targets op: a random crop
 * (random_resized_crop, random_crop) that would lose a box is redrawn, at
 * most R times, from counters of its own (docs/pipeline.md "protect",
 * docs/targets.md). pipeline_run.c asks which attempt to run (and explain
 * which attempt ran, with the reason each earlier one was rejected).
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

static void axis_step(sp_geom_step *s, uint32_t k, int W, int H, int ow, int oh, double x0,
                      double y0, double sx, double sy) {
    sp__geom_step_set(s, SP_GEOM_AXIS, (int)k, W, H, ow, oh, x0, y0, sx, sy);
}

int sp__protect_step(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                     uint32_t a, sp_geom_step *step, sp_crop_box *b, sp_random_crop_geom *g) {
    if (op->kind == SP_OP_RRC) {
        sp_crop_box bx;
        sp__rrc_sample_at(W, H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                          ctx->k_augment, k, ctx->sample, ctx->epoch, a << 16, &bx);
        if (b) *b = bx;
        axis_step(step, k, W, H, op->w, op->h, bx.x, bx.y, (double)op->w / bx.w,
                  (double)op->h / bx.h);
        return 0;
    }
    sp_random_crop_geom rg;
    if (sp__random_crop_geom(op, W, H, ctx, k, a, &rg)) return 1;
    if (g) *g = rg;
    axis_step(step, k, W, H, op->w, op->h, rg.x - rg.pad[0] - rg.extra_x,
              rg.y - rg.pad[1] - rg.extra_y, 1.0, 1.0);
    return 0;
}

static void attempt_line(sp__fbuf *e, const sp_op *op, uint32_t a, const sp_crop_box *b,
                         const sp_random_crop_geom *g) {
    sp__fbuf_printf(e, "    protect attempt %u: ", a);
    if (op->kind == SP_OP_RRC)
        sp__fbuf_printf(e, "box x=%d y=%d w=%d h=%d", b->x, b->y, b->w, b->h);
    else
        sp__fbuf_printf(e, "offset x=%d y=%d", g->x, g->y);
}

uint32_t sp__protect_attempt(const sp_pipeline *p, const sp_op *op, uint32_t k,
                             const sp_sample_ctx *ctx, int W, int H, const sp_geom_log *log,
                             int upto, sp__fbuf *e) {
    static const char *const WHY[] = {"kept", "empty", "min_area", "min_visibility"};
    sp_targets_rules r;
    if (!log || !log->targets || !log->targets->n || !sp_pipeline_targets(p, &r) || !r.protect)
        return 0;
    for (uint32_t a = 0; a <= (uint32_t)r.protect; a++) {
        sp_geom_step s;
        sp_crop_box b = {0, 0, 0, 0};
        sp_random_crop_geom g;
        memset(&g, 0, sizeof g);
        if (sp__protect_step(op, k, ctx, W, H, a, &s, &b, &g)) return 0;
        int first, why, lost = sp__targets_lost(&r, log, upto, &s, &first, &why);
        if (e) attempt_line(e, op, a, &b, &g);
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

uint32_t sp__protect_explained(const sp_pipeline *p, const sp_op *op, int k,
                               const sp_sample_ctx *ctx, int W, int H, const sp_geom_log *log,
                               sp__fbuf *e) {
    for (int i = 0; log && i < log->n; i++)
        if (log->step[i].op == k)
            return sp__protect_attempt(p, op, (uint32_t)k, ctx, W, H, log, i, e);
    return 0;
}

void sp__protect_explain_crop(sp__fbuf *e, const sp_pipeline *p, int k, const sp_sample_ctx *ctx,
                              const sp_geom_log *log, int *W, int *H) {
    const sp_op *op = &p->ops[k];
    int w0 = *W, h0 = *H;
    sp__geom_explain(e, op, k, ctx, sp__protect_explained(p, op, k, ctx, w0, h0, log, NULL), W,
                     H);
    sp__protect_explained(p, op, k, ctx, w0, h0, log, e);
}

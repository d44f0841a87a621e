/* pipeline_random_crop.c - the op random_crop (torchvision's RandomCrop):
 * its values, canonical form, output size, its draw (the offset, and with
 * protect= the redraws, pipeline_protect.c), its plan (the source box its
 * pixels come from and the index maps into it: padding is never built),
 * its run and its explain lines. A region op: as the first op after decode
 * only the box it shows is decoded (at 1/1). The index maps and the draw
 * are ops_geom.c's; docs/pipeline.md documents the op.
 *
 *   random_crop size=H[,W] padding=P|LR,TB|L,T,R,B pad_mode=constant|edge|reflect
 *               fill=V|R,G,B pad_if_needed=0|1
 */
#include "augment/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

static const char *const PAD_MODES[] = {"constant", "edge", "reflect"};

static int parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals, sp_error *err) {
    int s[4] = {0}, n = 0;
    if (!sp__parse_ints(vals[0], s, 2, 1, SP_SPEC_MAX_SIZE, &n))
        return sp__op_bad(err, idx, op, "size", vals[0], "H or H,W: integers in [1, 16384]");
    op->h = s[0];
    op->w = n == 2 ? s[1] : s[0];
    if (vals[1]) {
        if (!sp__parse_ints(vals[1], s, 4, 0, SP_SPEC_MAX_SIZE, &n) || n == 3)
            return sp__op_bad(err, idx, op, "padding", vals[1], "P, LR,TB or L,T,R,B: integers "
                              "in [0, 16384] (torchvision's order)");
        int l = s[0], t = n >= 2 ? s[1] : s[0];
        op->pad[0] = l;
        op->pad[1] = t;
        op->pad[2] = n == 4 ? s[2] : l;
        op->pad[3] = n == 4 ? s[3] : t;
    }
    op->pad_mode = SP_PAD_CONSTANT;
    if (vals[2]) {
        op->pad_mode = -1;
        for (int m = 0; m < 3; m++)
            if (strcmp(vals[2], PAD_MODES[m]) == 0) op->pad_mode = m;
        if (op->pad_mode < 0)
            return sp__op_bad(err, idx, op, "pad_mode", vals[2], "constant, edge or reflect");
    }
    op->nfill = 1;
    if (vals[3]) {
        int c = p->channels;
        if (!sp__parse_ints(vals[3], s, 3, 0, 255, &n) || n == 2 || (n == 3 && c == 1))
            return sp__op_bad(err, idx, op, "fill", vals[3], c == 3 ? "V or R,G,B: integers in "
                              "[0, 255]" : "V: an integer in [0, 255] (gray pipeline)");
        op->nfill = n;
        for (int i = 0; i < 3; i++) op->fill[i] = (uint8_t)s[n == 3 ? i : 0];
    }
    if (vals[4]) {
        if (strcmp(vals[4], "0") && strcmp(vals[4], "1"))
            return sp__op_bad(err, idx, op, "pad_if_needed", vals[4], "0 or 1");
        op->pad_if_needed = vals[4][0] == '1';
    }
    return SP_OK;
}

static void canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_crop size=%d,%d padding=%d,%d,%d,%d pad_mode=%s fill=%d", op->h,
                    op->w, op->pad[0], op->pad[1], op->pad[2], op->pad[3],
                    PAD_MODES[op->pad_mode], op->fill[0]);
    if (op->nfill == 3) sp__sbuf_printf(b, ",%d,%d", op->fill[1], op->fill[2]);
    sp__sbuf_printf(b, " pad_if_needed=%d", op->pad_if_needed);
}

static void shape(const sp_op *op, int *w, int *h) {
    *w = op->w;
    *h = op->h;
}

/* The geometry on a W x H image for attempt a of protect= (a 0:
 * sp__random_crop_sample(); a > 0: its offset redrawn from block a << 16,
 * the same words); 0 or SP_EINVAL. */
static int crop_geom(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                     uint32_t a, sp_random_crop_geom *g) {
    if (sp__random_crop_sample(W, H, op->h, op->w, op->pad, op->pad_if_needed, op->pad_mode,
                              ctx->k_augment, k, ctx->sample, ctx->epoch, g))
        return SP_EINVAL;
    if (a) {   /* protect=: attempt a's offset, block a << 16, the same words */
        sp_ctr d = sp_sample_draw(ctx->k_augment, a << 16, k, ctx->sample, ctx->epoch);
        g->y = (int)sp_uniform_int(d.c[0], (uint64_t)(g->ph - op->h + 1));
        g->x = (int)sp_uniform_int(d.c[1], (uint64_t)(g->pw - op->w + 1));
    }
    return SP_OK;
}

/* The step attempt a logs (protect=, pipeline_protect.c). */
static int step(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H, uint32_t a,
                sp_geom_step *s, char *what, size_t n) {
    sp_random_crop_geom g;
    if (crop_geom(op, W, H, ctx, k, a, &g)) return 1;
    sp__geom_step_set(s, SP_GEOM_AXIS, (int)k, W, H, op->w, op->h, g.x - g.pad[0] - g.extra_x,
                      g.y - g.pad[1] - g.extra_y, 1.0, 1.0);
    if (what) snprintf(what, n, "offset x=%d y=%d", g.x, g.y);
    return 0;
}

/* The plan on a W x H image: the geometry, the source box its pixels come
 * from (bw or bh 0: none, all fill) and the maps into that box (xmap:
 * op->w entries, ymap: op->h, -1 = fill; one allocation at xmap). */
typedef struct plan {
    sp_random_crop_geom g;
    int bx, by, bw, bh;
    int32_t *xmap, *ymap;
} plan;

/* The smallest [lo, hi] of the non-negative entries of map; rebased to lo. */
static int map_span(int32_t *map, int len, int *lo) {
    int a = -1, b = -1;
    for (int i = 0; i < len; i++)
        if (map[i] >= 0) {
            if (a < 0 || map[i] < a) a = map[i];
            if (map[i] > b) b = map[i];
        }
    for (int i = 0; a >= 0 && i < len; i++)
        if (map[i] >= 0) map[i] -= a;
    *lo = a < 0 ? 0 : a;
    return a < 0 ? 0 : b - a + 1;
}

static int make_plan(const sp_op *op, int W, int H, const sp_sample_ctx *ctx, uint32_t k,
                     uint32_t attempt, plan *pl, const char *path, sp_error *err) {
    memset(pl, 0, sizeof *pl);
    sp_random_crop_geom *g = &pl->g;
    if (crop_geom(op, W, H, ctx, k, attempt, g))
        return sp_error_set(err, SP_EINVAL, "%s: random_crop: a %dx%d crop of the %dx%d image "
                            "padded %d,%d,%d,%d (%s%s) is not possible: the padded image is "
                            "smaller than the crop, or a reflect pad is not smaller than the "
                            "side it reflects (as torchvision)", path, op->w, op->h, W, H,
                            op->pad[0], op->pad[1], op->pad[2], op->pad[3],
                            PAD_MODES[op->pad_mode], op->pad_if_needed ? ", pad_if_needed" : "");
    pl->xmap = malloc(((size_t)op->w + (size_t)op->h) * sizeof *pl->xmap);
    if (!pl->xmap) return sp_error_set(err, SP_ENOMEM, "%s: random_crop: out of memory", path);
    pl->ymap = pl->xmap + op->w;
    sp__random_crop_map(W, g->pad[0], g->pad[2], g->extra_x, op->pad_mode, g->x, op->w, pl->xmap);
    sp__random_crop_map(H, g->pad[1], g->pad[3], g->extra_y, op->pad_mode, g->y, op->h, pl->ymap);
    pl->bw = map_span(pl->xmap, op->w, &pl->bx);
    pl->bh = map_span(pl->ymap, op->h, &pl->by);
    if (!pl->bw || !pl->bh) pl->bw = pl->bh = 0;   /* every pixel is the fill */
    return SP_OK;
}

/* The pixels the crop shows are read (for encoded input, only that box is
 * decoded, at 1/1), then copied through the index maps. */
static int run(sp__op_run *r, const sp_op *op, int k) {
    const sp__source *s = r->src;
    sp__run_state *st = r->st;
    plan pl;
    uint32_t a = sp__protect_attempt(r->p, op, step, (uint32_t)k, r->ctx, s->W, s->H, st->log,
                                     st->log ? st->log->n : 0, NULL);
    int rc = make_plan(op, s->W, s->H, r->ctx, (uint32_t)k, a, &pl, r->path, r->err);
    if (rc) {
        free(pl.xmap);
        return rc;
    }
    sp__st_log(st, SP_GEOM_AXIS, k, s->W, s->H, op->w, op->h,
               pl.g.x - pl.g.pad[0] - pl.g.extra_x, pl.g.y - pl.g.pad[1] - pl.g.extra_y, 1, 1);
    sp_image reg, out;
    int owned = 0, all_fill = !pl.bw;   /* then a 1x1 read still checks the file */
    rc = sp__source_region(s, pl.bx, pl.by, all_fill ? 1 : pl.bw, all_fill ? 1 : pl.bh, 1, &reg,
                           &owned, r->path, r->err);
    if (!rc && (rc = sp__image_alloc(&out, op->w, op->h, reg.channels)))
        sp_error_set(r->err, rc, "%s: random_crop: %s", r->path, sp_strerror(rc));
    if (!rc) {
        sp__image_remap(&reg, pl.xmap, pl.ymap, op->fill, &out);
        sp__st_take(st, &out);
    }
    if (owned) sp_image_free(&reg);
    free(pl.xmap);
    return rc;
}

/* The attempt that ran (protect=), then the attempts' lines. */
static int explain(sp__op_explain *x, const sp_op *op, int k) {
    int W = x->W, H = x->H;
    uint32_t a = sp__protect_explained(x->p, op, step, k, x->ctx, W, H, x->log, NULL);
    sp_random_crop_geom g;
    if (crop_geom(op, W, H, x->ctx, (uint32_t)k, a, &g))
        sp__fbuf_printf(x->e, "%d random_crop: %dx%d does not fit %dx%d padded (error)\n", k,
                        op->w, op->h, W, H);
    else
        sp__fbuf_printf(x->e, "%d random_crop: offset x=%d y=%d of %dx%d (%dx%d padded "
                        "%d,%d,%d,%d %s, then %d,%d each side) -> %dx%d\n", k, g.x, g.y, g.pw,
                        g.ph, W, H, g.pad[0], g.pad[1], g.pad[2], g.pad[3],
                        PAD_MODES[op->pad_mode], g.extra_x, g.extra_y, op->w, op->h);
    sp__protect_explained(x->p, op, step, k, x->ctx, W, H, x->log, x->e);
    x->W = op->w;
    x->H = op->h;
    return k;
}

const sp__op_desc sp__op_random_crop = {
    "random_crop", {"size", "padding", "pad_mode", "fill", "pad_if_needed", NULL}, 1,
    SP__OP_REGION | SP__OP_MOVES_TARGETS, parse, canon, shape, run, explain, NULL};

/* pipeline_policy.c - the pipeline side of affine (torchvision's
 * RandomAffine) and the policy ops auto_augment, rand_augment and
 * trivial_augment_wide (torchvision 0.14's AutoAugment, RandAugment,
 * TrivialAugmentWide): their values in the spec, canonical form, draws,
 * magnitude tables, the AutoAugment policies, their run on a sample and
 * their line of `seedpipe explain`, and their descriptors. The pixels are
 * ops_rotate.c's and ops_policy.c's. docs/pipeline.md documents the ops and
 * which draw word decides what.
 */
#include "augment/pipeline_internal.h"

#include <math.h>      /* rintf: exact */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

static const char *const POLICIES[] = {"imagenet", "cifar10", "svhn"};

extern const sp__op_desc sp__op_auto_augment, sp__op_trivial_augment_wide;

/* ---- AutoAugment's policies (torchvision's _get_policies, in order) ------- */

enum { I_ = SP_AUG_IDENTITY, SX = SP_AUG_SHEAR_X, SY = SP_AUG_SHEAR_Y, TX = SP_AUG_TRANSLATE_X,
       TY = SP_AUG_TRANSLATE_Y, RO = SP_AUG_ROTATE, BR = SP_AUG_BRIGHTNESS, CO = SP_AUG_COLOR,
       CT = SP_AUG_CONTRAST, SH = SP_AUG_SHARPNESS, PO = SP_AUG_POSTERIZE, SO = SP_AUG_SOLARIZE,
       AC = SP_AUG_AUTOCONTRAST, EQ = SP_AUG_EQUALIZE, IN = SP_AUG_INVERT };

/* One sub-policy: (op, p, magnitude bin; -1 = None) twice. */
typedef struct { signed char op; float p10; signed char bin; } sub_op;
typedef struct { sub_op s[2]; } sub_policy;
#define N_SUB 25

static const sub_policy POLICY[3][N_SUB] = {
    {{{{PO, 4, 8}, {RO, 6, 9}}}, {{{SO, 6, 5}, {AC, 6, -1}}}, {{{EQ, 8, -1}, {EQ, 6, -1}}},
     {{{PO, 6, 7}, {PO, 6, 6}}}, {{{EQ, 4, -1}, {SO, 2, 4}}}, {{{EQ, 4, -1}, {RO, 8, 8}}},
     {{{SO, 6, 3}, {EQ, 6, -1}}}, {{{PO, 8, 5}, {EQ, 10, -1}}}, {{{RO, 2, 3}, {SO, 6, 8}}},
     {{{EQ, 6, -1}, {PO, 4, 6}}}, {{{RO, 8, 8}, {CO, 4, 0}}}, {{{RO, 4, 9}, {EQ, 6, -1}}},
     {{{EQ, 0, -1}, {EQ, 8, -1}}}, {{{IN, 6, -1}, {EQ, 10, -1}}}, {{{CO, 6, 4}, {CT, 10, 8}}},
     {{{RO, 8, 8}, {CO, 10, 2}}}, {{{CO, 8, 8}, {SO, 8, 7}}}, {{{SH, 4, 7}, {IN, 6, -1}}},
     {{{SX, 6, 5}, {EQ, 10, -1}}}, {{{CO, 4, 0}, {EQ, 6, -1}}}, {{{EQ, 4, -1}, {SO, 2, 4}}},
     {{{SO, 6, 5}, {AC, 6, -1}}}, {{{IN, 6, -1}, {EQ, 10, -1}}}, {{{CO, 6, 4}, {CT, 10, 8}}},
     {{{EQ, 8, -1}, {EQ, 6, -1}}}},
    {{{{IN, 1, -1}, {CT, 2, 6}}}, {{{RO, 7, 2}, {TX, 3, 9}}}, {{{SH, 8, 1}, {SH, 9, 3}}},
     {{{SY, 5, 8}, {TY, 7, 9}}}, {{{AC, 5, -1}, {EQ, 9, -1}}}, {{{SY, 2, 7}, {PO, 3, 7}}},
     {{{CO, 4, 3}, {BR, 6, 7}}}, {{{SH, 3, 9}, {BR, 7, 9}}}, {{{EQ, 6, -1}, {EQ, 5, -1}}},
     {{{CT, 6, 7}, {SH, 6, 5}}}, {{{CO, 7, 7}, {TX, 5, 8}}}, {{{EQ, 3, -1}, {AC, 4, -1}}},
     {{{TY, 4, 3}, {SH, 2, 6}}}, {{{BR, 9, 6}, {CO, 2, 8}}}, {{{SO, 5, 2}, {IN, 0, -1}}},
     {{{EQ, 2, -1}, {AC, 6, -1}}}, {{{EQ, 2, -1}, {EQ, 6, -1}}}, {{{CO, 9, 9}, {EQ, 6, -1}}},
     {{{AC, 8, -1}, {SO, 2, 8}}}, {{{BR, 1, 3}, {CO, 7, 0}}}, {{{SO, 4, 5}, {AC, 9, -1}}},
     {{{TY, 9, 9}, {TY, 7, 9}}}, {{{AC, 9, -1}, {SO, 8, 3}}}, {{{EQ, 8, -1}, {IN, 1, -1}}},
     {{{TY, 7, 9}, {AC, 9, -1}}}},
    {{{{SX, 9, 4}, {IN, 2, -1}}}, {{{SY, 9, 8}, {IN, 7, -1}}}, {{{EQ, 6, -1}, {SO, 6, 6}}},
     {{{IN, 9, -1}, {EQ, 6, -1}}}, {{{EQ, 6, -1}, {RO, 9, 3}}}, {{{SX, 9, 4}, {AC, 8, -1}}},
     {{{SY, 9, 8}, {IN, 4, -1}}}, {{{SY, 9, 5}, {SO, 2, 6}}}, {{{IN, 9, -1}, {AC, 8, -1}}},
     {{{EQ, 6, -1}, {RO, 9, 3}}}, {{{SX, 9, 4}, {SO, 3, 3}}}, {{{SY, 8, 8}, {IN, 7, -1}}},
     {{{EQ, 9, -1}, {TY, 6, 6}}}, {{{IN, 9, -1}, {EQ, 6, -1}}}, {{{CT, 3, 3}, {RO, 8, 4}}},
     {{{IN, 8, -1}, {TY, 0, 2}}}, {{{SY, 7, 6}, {SO, 4, 8}}}, {{{IN, 6, -1}, {RO, 8, 4}}},
     {{{SY, 3, 7}, {TX, 9, 3}}}, {{{SX, 1, 6}, {IN, 6, -1}}}, {{{SO, 7, 2}, {TY, 6, 7}}},
     {{{SY, 8, 4}, {IN, 8, -1}}}, {{{SX, 7, 9}, {TY, 8, 3}}}, {{{SY, 8, 5}, {AC, 7, -1}}},
     {{{SX, 7, 2}, {IN, 1, -1}}}}};

/* ---- magnitudes (torchvision's _augmentation_space) ------------------------ */

static int aug_signed(int op) { return op >= SP_AUG_SHEAR_X && op <= SP_AUG_SHARPNESS; }

/* Bin `bin` of num_bins of sub-op `op` on a W x H image: `wide` is
 * TrivialAugmentWide's space, else AutoAugment's / RandAugment's. */
static double aug_magnitude(int op, int wide, int bins, int bin, int W, int H) {
    float hi = 0.0f;
    switch (op) {
    case SP_AUG_SHEAR_X:
    case SP_AUG_SHEAR_Y: hi = wide ? 0.99f : 0.3f; break;
    case SP_AUG_TRANSLATE_X: hi = wide ? 32.0f : (float)(150.0 / 331.0 * W); break;
    case SP_AUG_TRANSLATE_Y: hi = wide ? 32.0f : (float)(150.0 / 331.0 * H); break;
    case SP_AUG_ROTATE: hi = wide ? 135.0f : 30.0f; break;
    case SP_AUG_BRIGHTNESS:
    case SP_AUG_COLOR:
    case SP_AUG_CONTRAST:
    case SP_AUG_SHARPNESS: hi = wide ? 0.99f : 0.9f; break;
    case SP_AUG_POSTERIZE: {   /* 8 - round(arange(bins) / ((bins - 1) / 4 or 6)) */
        float q = (float)(bins - 1) / (wide ? 6.0 : 4.0), t = (float)bin / (float)q;
        return 8.0 - (double)rintf(t);   /* (float)((bins-1)/d) first: it is a double */
    }
    case SP_AUG_SOLARIZE: return (double)sp__linspace_f32(255.0f, 0.0f, bins, bin);
    default: return 0.0;
    }
    return (double)sp__linspace_f32(0.0f, hi, bins, bin);
}

/* ---- parsing ---------------------------------------------------------------- */

/* interpolation= and fill= (keys at vals[ki], vals[ki + 1]); fill=none
 * allowed when allow_none (the policy ops' default). */
static int parse_interp_fill(const sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                             int ki, int allow_none, sp_error *err) {
    const char *v = vals[ki];
    if (v && strcmp(v, "nearest") && strcmp(v, "bilinear"))
        return sp__op_bad(err, idx, op, "interpolation", v, "nearest or bilinear");
    op->bilinear = v && strcmp(v, "bilinear") == 0;
    op->nvalue = 1;
    op->nofill = allow_none;
    if (!(v = vals[ki + 1]) || (allow_none && strcmp(v, "none") == 0)) return SP_OK;
    double s[3];
    int n, ok = sp__parse_list(v, s, 3, &n) && n != 2 && (n == 1 || p->channels == 3);
    for (int i = 0; ok && i < n; i++) ok = s[i] >= 0 && s[i] <= 255;
    if (!ok)
        return sp__op_bad(err, idx, op, "fill", v, p->channels == 3 ? (allow_none ? "none, V or R,G,B "
                   "in [0, 255]" : "V or R,G,B in [0, 255]") : (allow_none ? "none or V in "
                   "[0, 255] (gray pipeline)" : "V in [0, 255] (gray pipeline)"));
    op->nofill = 0;
    op->nvalue = n;
    for (int i = 0; i < 3; i++) op->value[i] = s[i < n ? i : 0];
    return SP_OK;
}

/* D (-> -D, D, D >= 0) or lo,hi within [-lim, lim] (exclusive when open). */
static int sym_range(const char *v, double lim, int open, double out[2]) {
    double s[2];
    int n;
    if (!sp__parse_list(v, s, 2, &n)) return 0;
    double lo = n == 1 ? -s[0] : s[0], hi = n == 1 ? s[0] : s[1];
    int inside = open ? lo > -lim && hi < lim : lo >= -lim && hi <= lim;
    if ((n == 1 && s[0] < 0) || !(lo <= hi) || !inside) return 0;
    out[0] = lo == 0 ? 0.0 : sp__canon_num(lo);   /* no "-0" */
    out[1] = hi == 0 ? 0.0 : hi;
    return 1;
}

/* affine degrees= translate=a,b scale=lo,hi shear=S|lo,hi|xlo,xhi,ylo,yhi
 * interpolation= fill= (RandomAffine's arguments and defaults). */
static int affine_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                        sp_error *err) {
    if (!sym_range(vals[0], 1e6, 0, op->degrees))
        return sp__op_bad(err, idx, op, "degrees", vals[0], "D in [0, 1e6] (angle in [-D, D]) or "
                   "lo,hi with -1e6 <= lo <= hi <= 1e6");
    double s[4];
    int n;
    if (vals[1] && (!sp__parse_list(vals[1], s, 2, &n) || n != 2 || !(s[0] >= 0 && s[0] <= 1) ||
                    !(s[1] >= 0 && s[1] <= 1)))
        return sp__op_bad(err, idx, op, "translate", vals[1], "a,b in [0, 1] (fractions of the "
                   "width and the height)");
    if (vals[1]) memcpy(op->translate, s, sizeof op->translate);
    op->scale[0] = op->scale[1] = 1.0;
    if (vals[2] && (!sp__parse_list(vals[2], s, 2, &n) || n != 2 || !(s[0] > 0) || s[1] < s[0] ||
                    s[1] > 1e6))
        return sp__op_bad(err, idx, op, "scale", vals[2], "lo,hi with 0 < lo <= hi");
    if (vals[2]) memcpy(op->scale, s, sizeof op->scale);
    if (vals[3]) {
        int ok = sp__parse_list(vals[3], s, 4, &n) && n != 3;
        char pair[64];
        for (int i = 0; ok && i < (n == 4 ? 2 : 1); i++) {
            if (n == 1) snprintf(pair, sizeof pair, "%.17g", s[0]);
            else snprintf(pair, sizeof pair, "%.17g,%.17g", s[2 * i], s[2 * i + 1]);
            ok = sym_range(pair, 90.0, 1, op->shear + 2 * i);
        }
        if (!ok)
            return sp__op_bad(err, idx, op, "shear", vals[3], "S (x shear in [-S, S]), xlo,xhi or "
                       "xlo,xhi,ylo,yhi in degrees, each within (-90, 90)");
    }
    return parse_interp_fill(p, op, idx, vals, 4, 0, err);
}

/* An integer key in [lo, hi] with a default. */
static int int_key(const char *v, int lo, int hi, int dflt, int *out) {
    double x;
    *out = dflt;
    if (!v) return 1;
    if (!sp__parse_num(v, &x) || !(x >= lo && x <= hi) || x != (double)(int)x) return 0;
    *out = (int)x;
    return 1;
}

static int auto_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    op->policy = vals[0] ? -1 : 0;
    for (int i = 0; vals[0] && i < 3; i++)
        if (strcmp(vals[0], POLICIES[i]) == 0) op->policy = i;
    if (op->policy < 0)
        return sp__op_bad(err, idx, op, "policy", vals[0], "imagenet, cifar10 or svhn");
    return parse_interp_fill(p, op, idx, vals, 1, 1, err);
}

static int rand_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    if (!int_key(vals[0], 0, 16, 2, &op->num_ops))
        return sp__op_bad(err, idx, op, "num_ops", vals[0], "an integer in [0, 16]");
    if (!int_key(vals[2], 2, 1000, 31, &op->bins))
        return sp__op_bad(err, idx, op, "num_magnitude_bins", vals[2], "an integer in [2, 1000]");
    if (!int_key(vals[1], 0, op->bins - 1, 9, &op->magnitude))
        return sp__op_bad(err, idx, op, "magnitude", vals[1], "an integer in [0, "
                          "num_magnitude_bins - 1]");
    return parse_interp_fill(p, op, idx, vals, 3, 1, err);
}

static int trivial_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                         sp_error *err) {
    if (!int_key(vals[0], 2, 1000, 31, &op->bins))
        return sp__op_bad(err, idx, op, "num_magnitude_bins", vals[0], "an integer in [2, 1000]");
    return parse_interp_fill(p, op, idx, vals, 1, 1, err);
}

/* interpolation= fill=, the keys every op here ends with. */
static void canon_interp_fill(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, " interpolation=%s fill=", op->bilinear ? "bilinear" : "nearest");
    if (op->nofill) sp__sbuf_printf(b, "none");
    for (int i = 0; !op->nofill && i < op->nvalue; i++)
        sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->value[i]);
}

static void affine_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "affine degrees=%.9g,%.9g translate=%.9g,%.9g scale=%.9g,%.9g "
                    "shear=%.9g,%.9g,%.9g,%.9g", op->degrees[0], op->degrees[1],
                    op->translate[0], op->translate[1], op->scale[0], op->scale[1],
                    op->shear[0], op->shear[1], op->shear[2], op->shear[3]);
    canon_interp_fill(b, op);
}

static void auto_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "auto_augment policy=%s", POLICIES[op->policy]);
    canon_interp_fill(b, op);
}

static void rand_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "rand_augment num_ops=%d magnitude=%d num_magnitude_bins=%d",
                    op->num_ops, op->magnitude, op->bins);
    canon_interp_fill(b, op);
}

static void trivial_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "trivial_augment_wide num_magnitude_bins=%d", op->bins);
    canon_interp_fill(b, op);
}

/* ---- draws ------------------------------------------------------------------ */

/* affine's parameters for a W x H image: block 0 c[0] angle, c[1] tx, c[2]
 * ty, c[3] scale; block 1 c[0] shear x, c[1] shear y; each (float)(lo +
 * (hi - lo) * u01), translations then round_even (torchvision's get_params). */
typedef struct affine_draw { float angle, scale, shx, shy; int tx, ty; } affine_draw;

static void draw_affine(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                        affine_draw *a) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    sp_ctr e = sp_sample_draw(ctx->k_augment, 1, k, ctx->sample, ctx->epoch);
#define UNI(lo, hi, w) (float)((lo) + ((hi) - (lo)) * sp_u01d(w))
    a->angle = UNI(op->degrees[0], op->degrees[1], d.c[0]);
    double mx = op->translate[0] * W, my = op->translate[1] * H;
    a->tx = (int)rintf(UNI(-mx, mx, d.c[1]));
    a->ty = (int)rintf(UNI(-my, my, d.c[2]));
    a->scale = UNI(op->scale[0], op->scale[1], d.c[3]);
    a->shx = UNI(op->shear[0], op->shear[1], e.c[0]);
    a->shy = UNI(op->shear[2], op->shear[3], e.c[1]);
#undef UNI
}

/* A policy op's sub-ops for one sample on a W x H image. */
#define MAX_SUB 16
typedef struct policy_draw {
    int n, id, bin;               /* sub-ops; auto_augment's policy; trivial's bin */
    int op[MAX_SUB], on[MAX_SUB];
    double m[MAX_SUB];
    float u[2];                   /* auto_augment's two probabilities */
} policy_draw;

/* auto_augment: block 0 c[0] the sub-policy (uniform_int of 25), c[1] and
 * c[2] the probabilities u (sub-op i runs iff (float)u <= (float)p), block
 * 1 c[0] and c[1] the signs (uniform_int of 2; 0 negates, as torchvision). */
static void draw_auto(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                      policy_draw *pd) {
    sp_ctr d = sp_sample_draw(ctx->k_augment, 0, k, ctx->sample, ctx->epoch);
    sp_ctr e = sp_sample_draw(ctx->k_augment, 1, k, ctx->sample, ctx->epoch);
    pd->id = (int)sp_uniform_int(d.c[0], N_SUB);
    pd->n = 2;
    for (int i = 0; i < 2; i++) {
        const sub_op *s = &POLICY[op->policy][pd->id].s[i];
        pd->op[i] = s->op;
        pd->u[i] = sp_u01f(d.c[1 + i]);
        pd->on[i] = pd->u[i] <= (float)(s->p10 / 10.0);
        pd->m[i] = s->bin < 0 ? 0.0 : aug_magnitude(s->op, 0, 10, s->bin, W, H);
        if (aug_signed(s->op) && sp_uniform_int(e.c[i], 2) == 0) pd->m[i] = -pd->m[i];
    }
}

/* rand_augment: sub-op i from block i: c[0] the op (uniform_int of 14,
 * torchvision's order, Identity first), c[1] the sign (1 negates).
 * trivial_augment_wide: block 0 c[0] the op, c[1] the bin (uniform_int of
 * num_magnitude_bins), c[2] the sign (1 negates). */
static void draw_policy(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, int W, int H,
                        policy_draw *pd) {
    memset(pd, 0, sizeof *pd);
    if (op->desc == &sp__op_auto_augment) {
        draw_auto(op, k, ctx, W, H, pd);
        return;
    }
    int wide = op->desc == &sp__op_trivial_augment_wide;
    pd->n = wide ? 1 : op->num_ops;
    for (int i = 0; i < pd->n; i++) {
        sp_ctr d = sp_sample_draw(ctx->k_augment, (uint32_t)i, k, ctx->sample, ctx->epoch);
        int o = (int)sp_uniform_int(d.c[0], 14), bin = op->magnitude;
        if (wide) bin = pd->bin = (int)sp_uniform_int(d.c[1], (uint32_t)op->bins);
        pd->op[i] = o;
        pd->on[i] = 1;
        pd->m[i] = aug_magnitude(o, wide, op->bins, bin, W, H);
        if (aug_signed(o) && sp_uniform_int(d.c[wide ? 2 : 1], 2) == 1) pd->m[i] = -pd->m[i];
    }
}

/* ---- run and explain --------------------------------------------------------- */

/* A pending horizontal flip is applied first (torchvision's order); the
 * image is changed in place (its size is kept), and each geometric step
 * is logged. */
static int affine_run(sp__op_run *r, const sp_op *op, int k) {
    sp_image *img = &r->st->cur;
    int rc = sp__st_writable(r->st);
    if (!rc) rc = sp__st_unflip(r->st);
    if (rc) return sp__op_fail(r, rc);
    const float fill[3] = {(float)op->value[0], (float)op->value[1], (float)op->value[2]};
    const int W = img->width, H = img->height;
    affine_draw a;
    draw_affine(op, (uint32_t)k, r->ctx, W, H, &a);
    double rss[4];
    float th[6];
    sp__affine_rss(a.angle, a.shx, a.shy, rss);
    sp__affine_theta(rss, a.scale, 0.0, 0.0, a.tx, a.ty, th);
    sp_geom_step g;
    memset(&g, 0, sizeof g);   /* targets: the forward matrix about (W/2, H/2) */
    g.kind = SP_GEOM_AFFINE;
    g.op = k;
    g.in_w = g.out_w = W;
    g.in_h = g.out_h = H;
    sp__affine_forward(rss, a.scale, (double)W * 0.5, (double)H * 0.5, a.tx, a.ty, g.m);
    memcpy(g.th, th, sizeof g.th);   /* masks: the image's own inverse map */
    sp__geom_push(r->st->log, &g);
    sp_image out;
    if ((rc = sp__image_alloc(&out, W, H, img->channels))) return sp__op_fail(r, rc);
    sp__image_affine(img, th, op->bilinear, op->nofill ? NULL : fill, &out);
    size_t row = (size_t)W * (size_t)img->channels;
    for (int y = 0; y < H; y++)
        memcpy(img->data + (size_t)y * img->stride, out.data + (size_t)y * out.stride, row);
    sp_image_free(&out);
    return SP_OK;
}

/* The policy ops: their sub-ops, each as ops_policy.c applies it. */
static int policy_run(sp__op_run *r, const sp_op *op, int k) {
    sp_image *img = &r->st->cur;
    int rc = sp__st_writable(r->st);
    if (!rc) rc = sp__st_unflip(r->st);
    if (rc) return sp__op_fail(r, rc);
    const float fill[3] = {(float)op->value[0], (float)op->value[1], (float)op->value[2]};
    const int W = img->width, H = img->height;
    policy_draw pd;
    draw_policy(op, (uint32_t)k, r->ctx, W, H, &pd);
    for (int i = 0; !rc && i < pd.n; i++) {
        if (!pd.on[i]) continue;
        rc = sp__aug_apply(img, pd.op[i], pd.m[i], op->bilinear, op->nofill ? NULL : fill);
        sp_geom_step g;
        if (!rc && sp__aug_geom_step(pd.op[i], pd.m[i], W, H, k, &g)) sp__geom_push(r->st->log, &g);
    }
    return rc ? sp__op_fail(r, rc) : SP_OK;
}

static int affine_explain(sp__op_explain *x, const sp_op *op, int k) {
    affine_draw a;
    draw_affine(op, (uint32_t)k, x->ctx, x->W, x->H, &a);
    sp__fbuf_printf(x->e, "%d affine: angle %.9g translate %d,%d scale %.9g shear %.9g,%.9g "
                    "(%s)\n", k, (double)a.angle, a.tx, a.ty, (double)a.scale,
                    (double)a.shx, (double)a.shy, op->bilinear ? "bilinear" : "nearest");
    return k;
}

static int policy_explain(sp__op_explain *x, const sp_op *op, int k) {
    sp__fbuf *e = x->e;
    int is_auto = op->desc == &sp__op_auto_augment;
    policy_draw pd;
    draw_policy(op, (uint32_t)k, x->ctx, x->W, x->H, &pd);
    sp__fbuf_printf(e, "%d %s: [", k, op->desc->name);
    int first = 1;
    for (int i = 0; i < pd.n; i++) {
        if (!pd.on[i]) continue;
        sp__fbuf_printf(e, "%s%s %.9g", first ? "" : ", ", sp__aug_name(pd.op[i]), pd.m[i]);
        first = 0;
    }
    sp__fbuf_printf(e, "]");
    for (int i = 0; is_auto && i < 2; i++) {
        const sub_op *s = &POLICY[op->policy][pd.id].s[i];
        sp__fbuf_printf(e, "%s%s p=%g u=%.9g %s%s", i ? ", " : " (", sp__aug_name(s->op),
                        s->p10 / 10.0, (double)pd.u[i], pd.on[i] ? "applied" : "skipped",
                        i ? ")" : "");
    }
    if (is_auto) sp__fbuf_printf(e, " policy %s #%d", POLICIES[op->policy], pd.id);
    if (op->desc == &sp__op_trivial_augment_wide)
        sp__fbuf_printf(e, " bin %d of %d", pd.bin, op->bins);
    sp__fbuf_printf(e, " (%s)\n", op->bilinear ? "bilinear" : "nearest");
    return k;
}

/* The steps a sample logs: one per sub-op that runs (at most 2 for
 * auto_augment, num_ops for rand_augment). */
static int auto_steps(const sp_op *op) { (void)op; return 2; }
static int rand_steps(const sp_op *op) { return op->num_ops; }

#define POLICY_FLAGS SP__OP_MOVES_TARGETS

const sp__op_desc sp__op_affine = {
    "affine", {"degrees", "translate", "scale", "shear", "interpolation", "fill", NULL}, 1,
    POLICY_FLAGS, affine_parse, affine_canon, NULL, affine_run, affine_explain, NULL};

const sp__op_desc sp__op_auto_augment = {
    "auto_augment", {"policy", "interpolation", "fill", NULL}, 0,
    POLICY_FLAGS, auto_parse, auto_canon, NULL, policy_run, policy_explain, auto_steps};

const sp__op_desc sp__op_rand_augment = {
    "rand_augment", {"num_ops", "magnitude", "num_magnitude_bins", "interpolation", "fill", NULL},
    0, POLICY_FLAGS, rand_parse, rand_canon, NULL, policy_run, policy_explain, rand_steps};

const sp__op_desc sp__op_trivial_augment_wide = {
    "trivial_augment_wide", {"num_magnitude_bins", "interpolation", "fill", NULL}, 0,
    POLICY_FLAGS, trivial_parse, trivial_canon, NULL, policy_run, policy_explain, NULL};

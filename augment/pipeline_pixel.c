/* pipeline_pixel.c - the pixel-value ops invert, posterize, solarize,
 * autocontrast, equalize and sharpness (torchvision's RandomInvert,
 * RandomPosterize, RandomSolarize, RandomAutocontrast, RandomEqualize,
 * RandomAdjustSharpness: a magnitude and p=, default 0.5), and
 * random_apply (RandomApply: the ops=N ops after it all run with
 * probability p, else none). Each decides with block 0, c[0]: applied iff
 * u < p. Their values, canonical form, run and explain lines; the pixels
 * are ops_pixel.c's. docs/pipeline.md documents the ops.
 */
#include "augment/pipeline_internal.h"

#include <stdio.h>
#include "augment/ops_internal.h"

/* ---- values ----------------------------------------------------------------------- */

/* v: an integer in [lo, hi]. */
static int int_in(const char *v, int lo, int hi, int *out) {
    double x;
    if (!sp__parse_num(v, &x) || !(x >= lo && x <= hi) || x != (double)(int)x) return 0;
    *out = (int)x;
    return 1;
}

static int p_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals, sp_error *err) {
    (void)p;
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[0], &op->p);
}

static int posterize_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                           sp_error *err) {
    (void)p;
    if (!int_in(vals[0], 0, 8, &op->bits))
        return sp__op_bad(err, idx, op, "bits", vals[0], "an integer in [0, 8]");
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[1], &op->p);
}

static int solarize_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                          sp_error *err) {
    (void)p;
    if (!sp__parse_num(vals[0], &op->level) || !(op->level >= 0 && op->level <= 255))
        return sp__op_bad(err, idx, op, "threshold", vals[0], "a number in [0, 255]");
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[1], &op->p);
}

static int sharpness_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                           sp_error *err) {
    (void)p;
    if (!sp__parse_num(vals[0], &op->level) || !(op->level >= 0 && op->level <= SP_FACTOR_MAX))
        return sp__op_bad(err, idx, op, "factor", vals[0], "a number in [0, 255]");
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[1], &op->p);
}

static int random_apply_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                              sp_error *err) {
    (void)p;
    if (!int_in(vals[0], 1, SP_SPEC_MAX_OPS - 1, &op->span))
        return sp__op_bad(err, idx, op, "ops", vals[0], "an integer in [1, 63]: the ops that "
                          "follow");
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[1], &op->p);
}

/* ---- canonical form ---------------------------------------------------------------- */

static void p_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "%s p=%.9g", op->desc->name, op->p);
}
static void posterize_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "posterize bits=%d p=%.9g", op->bits, op->p);
}
static void solarize_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "solarize threshold=%.9g p=%.9g", op->level, op->p);
}
static void sharpness_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "sharpness factor=%.9g p=%.9g", op->level, op->p);
}
static void random_apply_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "random_apply ops=%d p=%.9g", op->span, op->p);
}

/* ---- run ---------------------------------------------------------------------------- */

/* The image op->desc's pixels work on when the draw applies it: writable. */
static sp_image *drawn(sp__op_run *r, const sp_op *op, int k, int *rc) {
    *rc = SP_OK;
    if (!(sp__op_u((uint32_t)k, r->ctx) < op->p)) return NULL;
    if ((*rc = sp__st_writable(r->st))) {
        sp__op_fail(r, *rc);
        return NULL;
    }
    return &r->st->cur;
}

static int invert_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img) sp__image_invert(img);
    return rc;
}
static int posterize_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img) sp__image_posterize(img, op->bits);
    return rc;
}
static int solarize_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img) sp__image_solarize(img, op->level);
    return rc;
}
static int autocontrast_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img) sp__image_autocontrast(img);
    return rc;
}
static int equalize_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img) sp__image_equalize(img);
    return rc;
}
static int sharpness_run(sp__op_run *r, const sp_op *op, int k) {
    int rc;
    sp_image *img = drawn(r, op, k, &rc);
    if (img && (rc = sp__image_sharpness(img, op->level))) sp__op_fail(r, rc);
    return rc;
}

/* Not drawn: the ops it governs are skipped. */
static int random_apply_run(sp__op_run *r, const sp_op *op, int k) {
    if (!(sp__op_u((uint32_t)k, r->ctx) < op->p)) r->next = k + 1 + op->span;
    return SP_OK;
}

/* ---- explain ------------------------------------------------------------------------- */

/* The op's magnitude (mag, may be empty) and whether it applies. */
static int explain_p(sp__op_explain *x, const sp_op *op, int k, const char *mag) {
    double u = sp__op_u((uint32_t)k, x->ctx);
    sp__fbuf_printf(x->e, "%d %s%s: %s (u=%.4f %s p=%g)\n", k, op->desc->name, mag,
                    u < op->p ? "applied" : "not applied", u, u < op->p ? "<" : ">=", op->p);
    return k;
}
static int p_explain(sp__op_explain *x, const sp_op *op, int k) {
    return explain_p(x, op, k, "");
}
static int posterize_explain(sp__op_explain *x, const sp_op *op, int k) {
    char mag[32];
    snprintf(mag, sizeof mag, " bits=%d", op->bits);
    return explain_p(x, op, k, mag);
}
static int level_explain(sp__op_explain *x, const sp_op *op, int k) {   /* solarize, sharpness */
    char mag[64];
    snprintf(mag, sizeof mag, " %s=%g", op->desc->keys[0], op->level);
    return explain_p(x, op, k, mag);
}

/* Whether its ops run; returns the last op it covers (its ops are
 * skipped) or k (they follow, explained as usual). */
static int random_apply_explain(sp__op_explain *x, const sp_op *op, int k) {
    double u = sp__op_u((uint32_t)k, x->ctx);
    int on = u < op->p;
    sp__fbuf_printf(x->e, "%d random_apply: ops %d..%d %s (u=%.4f %s p=%g)\n", k, k + 1,
                    k + op->span, on ? "applied" : "skipped", u, on ? "<" : ">=", op->p);
    for (int j = k + 1; !on && j <= k + op->span; j++)
        sp__fbuf_printf(x->e, "%d: skipped (random_apply %d)\n", j, k);
    return on ? k : k + op->span;
}

#define PIXEL SP__OP_MOVES_TARGETS

const sp__op_desc sp__op_invert = {
    "invert", {"p", NULL}, 0, PIXEL, p_parse, p_canon, NULL, invert_run, p_explain, NULL};
const sp__op_desc sp__op_posterize = {
    "posterize", {"bits", "p", NULL}, 1, PIXEL, posterize_parse, posterize_canon, NULL,
    posterize_run, posterize_explain, NULL};
const sp__op_desc sp__op_solarize = {
    "solarize", {"threshold", "p", NULL}, 1, PIXEL, solarize_parse, solarize_canon, NULL,
    solarize_run, level_explain, NULL};
const sp__op_desc sp__op_autocontrast = {
    "autocontrast", {"p", NULL}, 0, PIXEL, p_parse, p_canon, NULL, autocontrast_run, p_explain,
    NULL};
const sp__op_desc sp__op_equalize = {
    "equalize", {"p", NULL}, 0, PIXEL, p_parse, p_canon, NULL, equalize_run, p_explain, NULL};
const sp__op_desc sp__op_sharpness = {
    "sharpness", {"factor", "p", NULL}, 1, PIXEL, sharpness_parse, sharpness_canon, NULL,
    sharpness_run, level_explain, NULL};
const sp__op_desc sp__op_random_apply = {
    "random_apply", {"ops", "p", NULL}, 1, PIXEL, random_apply_parse, random_apply_canon, NULL,
    random_apply_run, random_apply_explain, NULL};

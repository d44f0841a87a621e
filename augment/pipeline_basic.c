/* pipeline_basic.c - the ops decode, hflip, vflip, grayscale and
 * normalize: their values in the spec, canonical form, run and explain
 * lines. decode only sets the decode mode (pipeline_run.c decodes);
 * normalize's tables are built by pipeline_spec.c and applied as the
 * output is written (pipeline_write.c). docs/pipeline.md documents them.
 */
#include "augment/pipeline_internal.h"

#include <string.h>
#include "augment/ops_internal.h"

/* ---- decode mode=rgb|gray dct=auto|off --------------------------------------------- */

static int decode_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                        sp_error *err) {
    const char *v;
    op->channels = 3;
    op->dct = 0;   /* default: torchvision's pixels (no DCT-domain scaling) */
    if ((v = vals[0])) {
        if (strcmp(v, "rgb") == 0) op->channels = 3;
        else if (strcmp(v, "gray") == 0) op->channels = 1;
        else return sp__op_bad(err, idx, op, "mode", v, "rgb or gray");
    }
    if ((v = vals[1])) {
        if (strcmp(v, "auto") == 0) op->dct = 1;
        else if (strcmp(v, "off") == 0) op->dct = 0;
        else return sp__op_bad(err, idx, op, "dct", v, "auto or off");
    }
    p->has_decode = 1;
    p->channels = op->channels;
    p->dct = op->dct;
    return SP_OK;
}

static void decode_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "decode mode=%s dct=%s", op->channels == 1 ? "gray" : "rgb",
                    op->dct ? "auto" : "off");
}

static const char *format_name(sp_format f) {
    switch (f) {
    case SP_FORMAT_PNG: return "PNG";
    case SP_FORMAT_JPEG: return "JPEG";
    case SP_FORMAT_BMP: return "BMP";
    case SP_FORMAT_WEBP: return "WebP";
    case SP_FORMAT_TIFF: return "TIFF";
    default: return "pixels";
    }
}

static int decode_explain(sp__op_explain *x, const sp_op *op, int k) {
    sp__fbuf_printf(x->e, "%d decode: %dx%d %s, %s\n", k, x->W, x->H,
                    format_name(x->src->format), op->channels == 1 ? "gray" : "rgb");
    return k;
}

/* ---- hflip, vflip, grayscale p= (block 0, c[0]: applied iff u < p) ------------------ */

static int flip_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    (void)p;
    op->p = 0.5;
    return sp__op_prob(err, idx, op, vals[0], &op->p);
}

static int gray_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                      sp_error *err) {
    (void)p;
    op->p = 0.1;
    return sp__op_prob(err, idx, op, vals[0], &op->p);
}

static void p_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "%s p=%.9g", op->desc->name, op->p);
}

/* Deferred: the output is written mirrored. Every other op that keeps the
 * pixels in place is per pixel (contrast's mean is a sum, equalize and
 * autocontrast use histograms, sharpness's kernel and border are
 * symmetric), so it commutes with the flip; an op that moves pixels
 * applies it first (sp__st_unflip()). */
static int hflip_run(sp__op_run *r, const sp_op *op, int k) {
    sp__run_state *st = r->st;
    if (sp__op_u((uint32_t)k, r->ctx) < op->p) {
        st->hflip ^= 1;   /* geometrically here, in op order */
        sp__st_log(st, SP_GEOM_HFLIP, k, st->cur.width, st->cur.height, st->cur.width,
                   st->cur.height, 0, 0, 1, 1);
    }
    return SP_OK;
}

static int vflip_run(sp__op_run *r, const sp_op *op, int k) {
    sp__run_state *st = r->st;
    if (!(sp__op_u((uint32_t)k, r->ctx) < op->p)) return SP_OK;
    int rc = sp__st_writable(st);
    if (rc) return sp__op_fail(r, rc);
    sp__image_vflip(&st->cur);
    sp__st_log(st, SP_GEOM_VFLIP, k, st->cur.width, st->cur.height, st->cur.width,
               st->cur.height, 0, 0, 1, 1);
    return SP_OK;
}

static int gray_run(sp__op_run *r, const sp_op *op, int k) {
    if (!(sp__op_u((uint32_t)k, r->ctx) < op->p)) return SP_OK;
    int rc = sp__st_writable(r->st);
    if (!rc) rc = sp__image_to_gray(&r->st->cur, &r->st->cur);
    return rc ? sp__op_fail(r, rc) : SP_OK;
}

static int p_explain(sp__op_explain *x, const sp_op *op, int k) {
    double u = sp__op_u((uint32_t)k, x->ctx);
    const char *did = op->desc->run == gray_run ? "converted" : "flipped";
    sp__fbuf_printf(x->e, "%d %s: %s (u=%.4f %s p=%g)\n", k, op->desc->name,
                    u < op->p ? did : "not applied", u, u < op->p ? "<" : ">=", op->p);
    return k;
}

/* ---- normalize mean= std= (1 or the channel count of each) ------------------------ */

static int normalize_parse(sp_pipeline *p, sp_op *op, int idx, const char *const *vals,
                           sp_error *err) {
    int nm, ns, c = p->channels;
    if (!sp__parse_list(vals[0], op->mean, 3, &nm) || (nm != 1 && nm != c))
        return sp__op_bad(err, idx, op, "mean", vals[0],
                          c == 3 ? "1 or 3 numbers" : "1 number (gray pipeline)");
    if (!vals[1])
        return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": missing required key \"%s\"",
                            idx, op->desc->name, "std");
    if (!sp__parse_list(vals[1], op->std, 3, &ns) || (ns != 1 && ns != c))
        return sp__op_bad(err, idx, op, "std", vals[1],
                          c == 3 ? "1 or 3 positive numbers" : "1 positive number");
    for (int i = 0; i < ns; i++)
        if (!(op->std[i] > 0)) return sp__op_bad(err, idx, op, "std", vals[1], "std > 0");
    for (int i = nm; i < c; i++) op->mean[i] = op->mean[0];
    for (int i = ns; i < c; i++) op->std[i] = op->std[0];
    op->nmean = c;
    p->has_normalize = 1;
    return SP_OK;
}

static void normalize_canon(sp__sbuf *b, const sp_op *op) {
    sp__sbuf_printf(b, "normalize mean=");
    for (int i = 0; i < op->nmean; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->mean[i]);
    sp__sbuf_printf(b, " std=");
    for (int i = 0; i < op->nmean; i++) sp__sbuf_printf(b, "%s%.9g", i ? "," : "", op->std[i]);
}

static int normalize_explain(sp__op_explain *x, const sp_op *op, int k) {
    (void)op;
    sp__fbuf_printf(x->e, "%d normalize: fixed (no draw)\n", k);
    return k;
}

const sp__op_desc sp__op_decode = {   /* decoded by pipeline_run.c */
    "decode", {"mode", "dct", NULL}, 0, SP__OP_FIRST | SP__OP_MOVES_TARGETS,
    decode_parse, decode_canon, NULL, NULL, decode_explain, NULL};

const sp__op_desc sp__op_hflip = {
    "hflip", {"p", NULL}, 0, SP__OP_MOVES_TARGETS,
    flip_parse, p_canon, NULL, hflip_run, p_explain, NULL};

const sp__op_desc sp__op_vflip = {
    "vflip", {"p", NULL}, 0, SP__OP_MOVES_TARGETS,
    flip_parse, p_canon, NULL, vflip_run, p_explain, NULL};

const sp__op_desc sp__op_grayscale = {
    "grayscale", {"p", NULL}, 0, SP__OP_MOVES_TARGETS,
    gray_parse, p_canon, NULL, gray_run, p_explain, NULL};

const sp__op_desc sp__op_normalize = {   /* applied as the output is written */
    "normalize", {"mean", "std", NULL}, 1, SP__OP_ON_OUTPUT | SP__OP_MOVES_TARGETS,
    normalize_parse, normalize_canon, NULL, NULL, normalize_explain, NULL};

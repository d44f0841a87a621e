/* pipeline_state.c - what the ops share while a sample runs: the state of
 * its pixels (an owned buffer, the current image, a pending horizontal
 * flip, the geometry log), the source a region op reads (the encoded file,
 * decoded region by region at a JPEG DCT scale, or an image), and the
 * helpers every op's parse and run use for their errors. The ops
 * (pipeline_<family>.c) and the runner (pipeline_run.c) call in here;
 * nothing here calls an op.
 */
#include "augment/pipeline_internal.h"
#include "augment/decode_internal.h"
#include "common/trace_internal.h"

#include <string.h>
#include "augment/ops_internal.h"

int sp__op_bad(sp_error *err, int idx, const sp_op *op, const char *key, const char *val,
               const char *expect) {
    return sp_error_set(err, SP_ESPEC, "pipeline op %d \"%s\": bad value \"%s\" for %s "
                        "(expected %s)", idx, op->desc->name, val, key, expect);
}

int sp__op_prob(sp_error *err, int idx, const sp_op *op, const char *v, double *p) {
    if (v && (!sp__parse_num(v, p) || *p < 0 || *p > 1))
        return sp__op_bad(err, idx, op, "p", v, "a probability in [0, 1]");
    return SP_OK;
}

int sp__op_fail(const sp__op_run *r, int rc) {
    return sp_error_set(r->err, rc, "%s: %s", r->path, sp_strerror(rc));
}

void sp__st_log(sp__run_state *s, int kind, int op, int in_w, int in_h, int out_w, int out_h,
                double x0, double y0, double sx, double sy) {
    if (!s->log || s->log->n >= SP_GEOM_LOG_MAX) return;
    sp__geom_step_set(&s->log->step[s->log->n++], kind, op, in_w, in_h, out_w, out_h, x0, y0,
                      sx, sy);
}

void sp__st_take(sp__run_state *s, sp_image *owned) {
    sp_image_free(&s->hold);
    s->hold = *owned;
    s->cur = *owned;
    s->writable = 1;
    memset(owned, 0, sizeof *owned);
}

int sp__st_writable(sp__run_state *s) {
    if (s->writable) return SP_OK;
    sp_image copy;
    int rc = sp__image_copy(&s->cur, &copy);
    if (rc) return rc;
    sp__st_take(s, &copy);
    return SP_OK;
}

int sp__st_unflip(sp__run_state *s) {
    if (!s->hflip) return SP_OK;
    int rc = sp__st_writable(s);
    if (rc) return rc;
    sp__image_hflip(&s->cur);
    s->hflip = 0;
    return SP_OK;
}

int sp__source_scale(const sp__source *s, int cw, int ch, int ow, int oh) {
    if (!s->src || s->format != SP_FORMAT_JPEG || !s->dct) return 1;
    for (int d = 8; d >= 2; d /= 2)
        if ((int64_t)cw >= (int64_t)d * ow && (int64_t)ch >= (int64_t)d * oh) return d;
    return 1;
}

int sp__source_region(const sp__source *s, int x, int y, int w, int h, int d, sp_image *out,
                      int *owned, const char *path, sp_error *err) {
    if (!s->src) {
        *owned = 0;
        if (d != 1 || sp__image_crop(s->img, x, y, w, h, out))
            return sp_error_set(err, SP_EINVAL, "%s: internal: bad region %d,%d %dx%d", path, x, y, w, h);
        return SP_OK;
    }
    sp_decode_req req = {s->channels, x, y, w, h, d};
    uint64_t t0 = sp__trace_t0();
    int rc = sp__image_decode_hint(s->src->bytes, s->src->len, path, &req, s->lim, &s->hint,
                                 out, err);
    sp__trace_end(SP_TRACE_DECODE, t0);
    if (rc) return rc;
    *owned = 1;
    int ws = (s->W + d - 1) / d, hs = (s->H + d - 1) / d;
    int x1 = (x + w + d - 1) / d, y1 = (y + h + d - 1) / d;
    int ew = (x1 < ws ? x1 : ws) - x / d, eh = (y1 < hs ? y1 : hs) - y / d;
    if (out->width != ew || out->height != eh || out->channels != s->channels) {
        sp_image_free(out);
        return sp_error_set(err, SP_EFORMAT, "%s: decoder returned %dx%dx%d for a %dx%d region at 1/%d",
                            path, out->width, out->height, out->channels, ew, eh, d);
    }
    return SP_OK;
}

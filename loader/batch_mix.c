/* batch_mix.c - MixUp and CutMix keyed by the batch (seedpipe/batchmix.h):
 * the draws of docs/determinism.md section 11a (stream tag 12, the Python
 * drop-in's) and the mix in float32, each operation rounded once in the
 * order torchvision v2's tensor operations take (the build compiles with
 * -ffp-contract=off: no fused multiply-add), so that a batch is byte for
 * byte what bindings/python/seedpipe/_batchmix.py gives.
 *
 * gamma() is Marsaglia-Tsang over the blocks of one purpose, beta() two
 * of them, box() CutMix's rule; sp_batch_mix_f32() rolls and mixes;
 * sp_batch_mix_parse() reads a --batch-mix spec. Calls
 * augment/'s det_log/det_exp (detmath_internal.h) and philox.h only.
 */
#include "seedpipe/batchmix.h"
#include "seedpipe/philox.h"
#include "augment/detmath_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "loader/batchmix_internal.h"

#define TAG_BATCHOP 12u
#define TRIES 64

typedef struct draws {
    sp_key key;
    uint64_t b;
    uint32_t e;
} draws;

static sp_ctr block(const draws *d, int purpose, int t) {
    sp_ctr c = {{(uint32_t)d->b, (uint32_t)(d->b >> 32), d->e, (uint32_t)(256 * purpose + t)}};
    return sp_philox4x32_10(c, d->key);
}

static double u01(uint32_t x) { return (double)(x >> 8) * (1.0 / 16777216.0); }
static double u01_pos(uint32_t x) { return (double)((x >> 8) + 1) * (1.0 / 16777216.0); }

static double gamma_draw(const draws *dr, int purpose, double a) {
    double b = a < 1.0 ? a + 1.0 : a;
    double d = b - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    double g = d;
    for (int t = 0; t < TRIES; t++) {
        sp_ctr w = block(dr, purpose, t);
        double u = 2.0 * u01(w.c[0]) - 1.0;
        double v = 2.0 * u01(w.c[1]) - 1.0;
        double s = u * u + v * v;
        if (s >= 1.0 || s == 0.0) continue;
        double x = u * sqrt((-2.0 * sp__det_log(s)) / s);
        double y = 1.0 + c * x;
        if (y <= 0.0) continue;
        double v3 = y * y * y;
        if (sp__det_log(u01_pos(w.c[2])) < 0.5 * x * x + d - d * v3 + d * sp__det_log(v3)) {
            g = d * v3;
            break;
        }
    }
    if (a < 1.0) g = g * sp__det_exp(sp__det_log(u01_pos(block(dr, purpose, TRIES).c[0])) / a);
    return g;
}

static draws make(uint64_t seed, uint32_t epoch, uint64_t index) {
    draws d = {sp_rng_key(seed, TAG_BATCHOP), index, epoch};
    return d;
}

int sp__batch_mix_draw(uint64_t seed, uint32_t epoch, uint64_t index, int op, double alpha,
                       int h, int w, sp_batch_mix *out, sp_error *err) {
    if (!(alpha > 0.0) || !isfinite(alpha))
        return sp_error_set(err, SP_EINVAL, "batch mix: alpha=%g: a finite number > 0 (lambda "
                            "~ Beta(alpha, alpha))", alpha);
    if ((op != SP_BATCH_MIXUP && op != SP_BATCH_CUTMIX) || h < 1 || w < 1)
        return sp_error_set(err, SP_EINVAL, "batch mix: op %d on %d x %d images", op, h, w);
    draws dr = make(seed, epoch, index);
    double x = gamma_draw(&dr, 1, alpha), y = gamma_draw(&dr, 2, alpha);
    double s = x + y;
    double lam = s > 0.0 ? x / s : 0.5;
    memset(out, 0, sizeof *out);
    out->op = op;
    out->lam = lam;
    if (op == SP_BATCH_CUTMIX) {
        sp_ctr bw = block(&dr, 3, 0);
        int rx = (int)sp_uniform_int(bw.c[0], (uint64_t)w);
        int ry = (int)sp_uniform_int(bw.c[1], (uint64_t)h);
        double r = 0.5 * sqrt(1.0 - lam);
        int rw = (int)(r * w), rh = (int)(r * h);
        int x1 = rx - rw > 0 ? rx - rw : 0, y1 = ry - rh > 0 ? ry - rh : 0;
        int x2 = rx + rw < w ? rx + rw : w, y2 = ry + rh < h ? ry + rh : h;
        out->box[0] = x1;
        out->box[1] = y1;
        out->box[2] = x2;
        out->box[3] = y2;
        out->lam = 1.0 - (double)((int64_t)(x2 - x1) * (y2 - y1)) / (double)((int64_t)w * h);
    }
    return SP_OK;
}

int sp__batch_mix_pick(uint64_t seed, uint32_t epoch, uint64_t index, const double *p, int n) {
    draws dr = make(seed, epoch, index);
    double total = 0.0, acc = 0.0;
    for (int i = 0; i < n; i++) total += p[i];
    double u = u01(block(&dr, 0, 0).c[0]);
    int last = 0;
    for (int i = 0; i < n; i++) {
        acc += p[i] / total;
        if (u < acc) return i;
        if (p[i] > 0) last = i;
    }
    return last;
}

int sp_batch_mix_f32(const sp_batch_mix *m, float *x, int n, int c, int h, int w,
                     const int64_t *labels, int k, float *targets, float *scratch,
                     sp_error *err) {
    if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1)
        return sp_error_set(err, SP_EINVAL, "batch mix: a batch of %d x %d x %d x %d, %d "
                            "classes", n, c, h, w, k);
    for (int i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= k)
            return sp_error_set(err, SP_EINVAL, "batch mix: num_classes=%d, and the batch has "
                                "label %lld", k, (long long)labels[i]);
    size_t plane = (size_t)c * h * w;
    float lam = (float)m->lam, mlam = (float)(1.0 - m->lam);
    /* roll(1, 0): image i takes image i - 1's pixels, image 0 the last
     * one's. Going from the last image down, image i - 1 is still unmixed
     * when image i reads it; only the last image is kept unmixed (scratch)
     * for image 0. The same operations as a whole copy, half the traffic. */
    memcpy(scratch, x + (size_t)(n - 1) * plane, plane * sizeof *x);
    for (int i = n - 1; i >= 0; i--) {
        const float *r = i ? x + (size_t)(i - 1) * plane : scratch;
        float *o = x + (size_t)i * plane;
        if (m->op == SP_BATCH_MIXUP) {
            for (size_t j = 0; j < plane; j++) {
                float p = r[j] * mlam;
                float q = o[j] * lam;
                o[j] = p + q;
            }
        } else {
            for (int ch = 0; ch < c; ch++)
                for (int yy = m->box[1]; yy < m->box[3]; yy++) {
                    size_t off = ((size_t)ch * h + (size_t)yy) * w + (size_t)m->box[0];
                    memcpy(o + off, r + off, (size_t)(m->box[2] - m->box[0]) * sizeof *o);
                }
        }
    }
    for (int i = 0; i < n; i++) {
        int64_t li = labels[i], lr = labels[i ? i - 1 : n - 1];
        float *t = targets + (size_t)i * k;
        for (int j = 0; j < k; j++) {
            float p = (float)(j == lr) * mlam;
            float q = (float)(j == li) * lam;
            t[j] = p + q;
        }
    }
    return SP_OK;
}

sp_digest sp_batch_mix_digest(const sp_batch_mix *m, int n, int k, const int32_t *labels,
                              const void *images, size_t image_bytes, const float *targets) {
    sp__hash h;
    sp__hash_init(&h);
    uint64_t lam;
    memcpy(&lam, &m->lam, sizeof lam);
    uint8_t b[8];
    sp__le_put32(b, (uint32_t)m->op);
    sp__hash_bytes(&h, b, 4);
    sp__le_put64(b, lam);
    sp__hash_bytes(&h, b, 8);
    for (int i = 0; i < 4; i++) {
        sp__le_put32(b, (uint32_t)m->box[i]);
        sp__hash_bytes(&h, b, 4);
    }
    sp__le_put32(b, (uint32_t)n);
    sp__hash_bytes(&h, b, 4);
    sp__le_put32(b, (uint32_t)k);
    sp__hash_bytes(&h, b, 4);
    for (int i = 0; i < n; i++) {
        sp__le_put32(b, (uint32_t)labels[i]);
        sp__hash_bytes(&h, b, 4);
    }
    sp__hash_bytes(&h, images, image_bytes);   /* float32: x86-64 is little-endian */
    sp__hash_bytes(&h, targets, (size_t)n * (size_t)k * sizeof *targets);
    return sp__hash_digest(&h);
}

/* ---- the --batch-mix spec ------------------------------------------------------- */

/* One item of a spec: "mixup:alpha=A" or "cutmix:alpha=A" (len n). */
static int parse_op(const char *t, size_t n, int *op, double *alpha) {
    size_t k = 0;
    if (n > 12 && strncmp(t, "mixup:alpha=", 12) == 0) { *op = SP_BATCH_MIXUP; k = 12; }
    else if (n > 13 && strncmp(t, "cutmix:alpha=", 13) == 0) { *op = SP_BATCH_CUTMIX; k = 13; }
    else return 0;
    char buf[64], *end;
    if (n - k >= sizeof buf) return 0;
    memcpy(buf, t + k, n - k);
    buf[n - k] = '\0';
    *alpha = strtod(buf, &end);
    return *end == '\0' && *alpha > 0.0 && isfinite(*alpha);
}

/* "p=P/P/..." (len n): one weight per op, finite, >= 0, not all 0. */
static int parse_p(const char *t, size_t n, sp_batch_mix_spec *s) {
    char buf[256], *at, *end;
    if (n - 2 >= sizeof buf) return 0;
    memcpy(buf, t + 2, n - 2);
    buf[n - 2] = '\0';
    at = buf;
    double sum = 0.0;
    for (int i = 0; i < s->n; i++) {
        s->p[i] = strtod(at, &end);
        if (end == at || !isfinite(s->p[i]) || s->p[i] < 0.0) return 0;
        sum += s->p[i];
        if (*end != (i + 1 < s->n ? '/' : '\0')) return 0;
        at = end + 1;
    }
    return sum > 0.0;
}

static int spec_item(const char *t, size_t n, sp_batch_mix_spec *s, int *have_p) {
    if (n > 8 && strncmp(t, "classes=", 8) == 0) {
        char buf[16], *end;
        if (n - 8 >= sizeof buf || s->classes) return 0;
        memcpy(buf, t + 8, n - 8);
        buf[n - 8] = '\0';
        long k = strtol(buf, &end, 10);
        s->classes = (int)k;
        return *end == '\0' && k >= 1 && k <= 65536;
    }
    if (n > 2 && strncmp(t, "p=", 2) == 0) {
        if (!s->choice || *have_p) return 0;
        *have_p = 1;
        return parse_p(t, n, s);
    }
    if (*have_p || s->classes || s->n == SP_BATCH_MIX_MAX_OPS || (!s->choice && s->n == 1))
        return 0;   /* ops first, then p= and classes= */
    if (!parse_op(t, n, &s->op[s->n], &s->alpha[s->n])) return 0;
    s->p[s->n++] = 1.0;
    return 1;
}

int sp_batch_mix_parse(const char *text, sp_batch_mix_spec *out, sp_error *err) {
    memset(out, 0, sizeof *out);
    const char *t = text ? text : "";
    if (strncmp(t, "choice:", 7) == 0) {
        out->choice = 1;
        t += 7;
    }
    int ok = 1, have_p = 0;
    while (ok) {
        size_t n = strcspn(t, ",");
        ok = n > 0 && spec_item(t, n, out, &have_p);
        if (!t[n]) break;
        t += n + 1;
    }
    if (ok && have_p == 0 && out->choice)
        for (int i = 0; i < out->n; i++) out->p[i] = 1.0;
    if (!ok || out->n < 1)
        return sp_error_set(err, SP_EINVAL, "--batch-mix %s: expected mixup:alpha=A or "
                            "cutmix:alpha=A, or choice:OP,OP[,...][,p=P/P/...] of such ops "
                            "(at most %d; p one weight >= 0 per op, not all 0), each "
                            "optionally ,classes=K (A a finite number > 0; K 1..65536, by "
                            "default the dataset's classes)", text ? text : "",
                            SP_BATCH_MIX_MAX_OPS);
    return SP_OK;
}

int sp_batch_mix_spec_draw(const sp_batch_mix_spec *s, uint64_t seed, uint32_t epoch,
                           uint64_t index, int h, int w, sp_batch_mix *out, sp_error *err) {
    if (s->n < 1 || s->n > SP_BATCH_MIX_MAX_OPS)
        return sp_error_set(err, SP_EINVAL, "batch mix: %d ops (1..%d)", s->n,
                            SP_BATCH_MIX_MAX_OPS);
    int i = s->n > 1 ? sp__batch_mix_pick(seed, epoch, index, s->p, s->n) : 0;
    return sp__batch_mix_draw(seed, epoch, index, s->op[i], s->alpha[i], h, w, out, err);
}

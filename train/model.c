/* model.c - the small CNN: its parameter layout, its initialisation, and
 * one sample's forward and backward pass (include/seedpipe/model.h). The
 * CPU backend that runs it over a batch, on threads and with fixed trees,
 * is model_cpu.c; the per-sample pass is shared with it through
 * model_internal.h.
 */
#include "seedpipe/model.h"

#include <math.h>      /* sqrt: correctly rounded (IEEE-754) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"
#include "train/nn_math.h"

static const char *const TENSOR_NAMES[SP_T_COUNT] = {"conv1.w", "conv1.b", "conv2.w",
                                                     "conv2.b", "fc.w",    "fc.b"};

const char *sp__model_tensor_name(int t) {
    return t >= 0 && t < SP_T_COUNT ? TENSOR_NAMES[t] : "?";
}

int sp_model_layout_of(const sp_model_shape *s, sp_model_layout *l, sp_error *err) {
    if (!s || !l) return sp_error_set(err, SP_EINVAL, "model: NULL shape");
    if (s->c != 1 && s->c != 3)
        return sp_error_set(err, SP_EINVAL, "model: input channels must be 1 or 3 (got %d)", s->c);
    if (s->h < 4 || s->w < 4 || s->h > 4096 || s->w > 4096)
        return sp_error_set(err, SP_EINVAL, "model: input size %dx%d out of range 4..4096",
                            s->w, s->h);
    if (s->classes < 2 || s->classes > 65536)
        return sp_error_set(err, SP_EINVAL, "model: classes must be in 2..65536 (got %d)",
                            s->classes);
    memset(l, 0, sizeof *l);
    l->in = *s;
    l->h1 = s->h / 2;
    l->w1 = s->w / 2;
    l->h2 = l->h1 / 2;
    l->w2 = l->w1 / 2;
    l->feat = (size_t)SP_MODEL_C2 * (size_t)l->h2 * (size_t)l->w2;
    size_t cnt[SP_T_COUNT] = {
        (size_t)SP_MODEL_C1 * (size_t)s->c * 9, SP_MODEL_C1,
        (size_t)SP_MODEL_C2 * SP_MODEL_C1 * 9,  SP_MODEL_C2,
        (size_t)s->classes * l->feat,           (size_t)s->classes};
    l->off[0] = 0;
    for (int t = 0; t < SP_T_COUNT; t++) l->off[t + 1] = l->off[t] + cnt[t];
    l->nparams = l->off[SP_T_COUNT];
    if (l->nparams > 0xffffffffu)
        return sp_error_set(err, SP_EINVAL, "model: %zu parameters (more than 2^32)", l->nparams);
    size_t hw = (size_t)s->h * (size_t)s->w, hw1 = (size_t)l->h1 * (size_t)l->w1;
    /* r1, p1, r2, p2(feat), logits, dlogits, dfeat, dr2, dp1, dr1, conv scratch */
    size_t sc1 = sp__nn_conv3x3_scratch(s->c, s->h, s->w, SP_MODEL_C1),
           sc2 = sp__nn_conv3x3_scratch(SP_MODEL_C1, l->h1, l->w1, SP_MODEL_C2);
    l->workspace = SP_MODEL_C1 * hw + SP_MODEL_C1 * hw1 + SP_MODEL_C2 * hw1 + l->feat +
                   2 * (size_t)s->classes + l->feat + SP_MODEL_C2 * hw1 + SP_MODEL_C1 * hw1 +
                   SP_MODEL_C1 * hw + (sc1 > sc2 ? sc1 : sc2);
    return 0;
}

void sp__model_init(const sp_model_layout *l, uint64_t seed, float *params) {
    sp_key k = sp_rng_key(seed, SP_RNG_INIT);
    double fan[SP_T_COUNT] = {(double)l->in.c * 9.0, 0, (double)SP_MODEL_C1 * 9.0, 0,
                              (double)l->feat, 0};
    for (int t = 0; t < SP_T_COUNT; t++) {
        size_t n = l->off[t + 1] - l->off[t];
        float *p = params + l->off[t];
        if (fan[t] == 0.0) {                    /* biases */
            memset(p, 0, n * sizeof *p);
            continue;
        }
        double bound = 1.0 / sqrt(fan[t]);
        for (size_t i = 0; i < n; i++) p[i] = sp_nn_init_value(k, (uint32_t)t, (uint32_t)i, bound);
    }
}

ws_view sp__model_ws_split(const sp_model_layout *l, float *ws) {
    size_t hw = (size_t)l->in.h * (size_t)l->in.w, hw1 = (size_t)l->h1 * (size_t)l->w1;
    ws_view v;
    v.r1 = ws;                   ws += SP_MODEL_C1 * hw;
    v.p1 = ws;                   ws += SP_MODEL_C1 * hw1;
    v.r2 = ws;                   ws += SP_MODEL_C2 * hw1;
    v.p2 = ws;                   ws += l->feat;
    v.logits = ws;               ws += (size_t)l->in.classes;
    v.dlogits = ws;              ws += (size_t)l->in.classes;
    v.dfeat = ws;                ws += l->feat;
    v.dr2 = ws;                  ws += SP_MODEL_C2 * hw1;
    v.dp1 = ws;                  ws += SP_MODEL_C1 * hw1;
    v.dr1 = ws;                  ws += SP_MODEL_C1 * hw;
    v.scratch = ws;
    return v;
}

static void forward(const sp_model_layout *l, const float *P, const float *x, ws_view *v) {
    int h = l->in.h, w = l->in.w;
    size_t hw = (size_t)h * (size_t)w, hw1 = (size_t)l->h1 * (size_t)l->w1;
    sp__nn_conv3x3_forward(x, l->in.c, h, w, P + l->off[SP_T_CONV1_W], P + l->off[SP_T_CONV1_B],
                           SP_MODEL_C1, v->r1, v->scratch);
    sp__nn_relu_forward(v->r1, SP_MODEL_C1 * hw, v->r1);
    sp__nn_maxpool2_forward(v->r1, SP_MODEL_C1, h, w, v->p1);
    sp__nn_conv3x3_forward(v->p1, SP_MODEL_C1, l->h1, l->w1, P + l->off[SP_T_CONV2_W],
                           P + l->off[SP_T_CONV2_B], SP_MODEL_C2, v->r2, v->scratch);
    sp__nn_relu_forward(v->r2, SP_MODEL_C2 * hw1, v->r2);
    sp__nn_maxpool2_forward(v->r2, SP_MODEL_C2, l->h1, l->w1, v->p2);
    sp__nn_linear_forward(v->p2, (int)l->feat, P + l->off[SP_T_FC_W], P + l->off[SP_T_FC_B],
                          l->in.classes, v->logits);
}

float sp__model_sample_forward(const sp_model_layout *l, const float *params, const float *x,
                               int label, float *ws, float *logits) {
    ws_view v = sp__model_ws_split(l, ws);
    forward(l, params, x, &v);
    if (logits) memcpy(logits, v.logits, (size_t)l->in.classes * sizeof *logits);
    if (label < 0) return 0.0f;
    return sp_nn_softmax_xent_row(v.logits, l->in.classes, label, 1.0f, NULL);
}

float sp__model_sample_backward(const sp_model_layout *l, const float *P, const float *x,
                                int label, float scale, ws_view *v, float *G, float *fc_w,
                                float *fc_b, int *pred) {
    int h = l->in.h, w = l->in.w;
    size_t hw = (size_t)h * (size_t)w, hw1 = (size_t)l->h1 * (size_t)l->w1;
    forward(l, P, x, v);
    float loss = sp_nn_softmax_xent_row(v->logits, l->in.classes, label, scale, v->dlogits);
    if (pred) *pred = sp_nn_argmax(v->logits, l->in.classes);
    sp__nn_linear_backward(v->p2, (int)l->feat, P + l->off[SP_T_FC_W], l->in.classes, v->dlogits,
                           v->dfeat, fc_w, fc_b);
    sp__nn_maxpool2_backward(v->r2, SP_MODEL_C2, l->h1, l->w1, v->dfeat, v->dr2);
    sp__nn_relu_backward(v->r2, v->dr2, SP_MODEL_C2 * hw1, v->dr2);
    sp__nn_conv3x3_backward(v->p1, SP_MODEL_C1, l->h1, l->w1, P + l->off[SP_T_CONV2_W],
                            SP_MODEL_C2, v->dr2, v->dp1, G + l->off[SP_T_CONV2_W],
                            G + l->off[SP_T_CONV2_B], v->scratch);
    sp__nn_maxpool2_backward(v->r1, SP_MODEL_C1, h, w, v->dp1, v->dr1);
    sp__nn_relu_backward(v->r1, v->dr1, SP_MODEL_C1 * hw, v->dr1);
    sp__nn_conv3x3_backward(x, l->in.c, h, w, P + l->off[SP_T_CONV1_W], SP_MODEL_C1, v->dr1, NULL,
                            G + l->off[SP_T_CONV1_W], G + l->off[SP_T_CONV1_B], v->scratch);
    return loss;
}

float sp__model_sample_grad(const sp_model_layout *l, const float *P, const float *x, int label,
                            float scale, float *ws, float *G, int *pred) {
    ws_view v = sp__model_ws_split(l, ws);
    return sp__model_sample_backward(l, P, x, label, scale, &v, G, G + l->off[SP_T_FC_W],
                                     G + l->off[SP_T_FC_B], pred);
}

/* train/model_internal.h - one sample's pass of the small CNN (model.c),
 * shared with the CPU backend (model_cpu.c). Internal to the training
 * core; not installed.
 */
#ifndef SEEDPIPE_TRAIN_MODEL_INTERNAL_H
#define SEEDPIPE_TRAIN_MODEL_INTERNAL_H

#include "seedpipe/model.h"

/* The slices of one sample's workspace (sp_model_layout.workspace floats). */
typedef struct ws_view {
    float *r1, *p1, *r2, *p2, *logits, *dlogits, *dfeat, *dr2, *dp1, *dr1, *scratch;
} ws_view;

ws_view sp__model_ws_split(const sp_model_layout *l, float *ws);

/* One sample's forward and backward; its loss (scaled gradients: scale
 * multiplies dlogits). The fc layer's weight and bias gradients are
 * dlogits[o] * p2[i] and dlogits[o]: with fc_w == NULL they are not written
 * (the backend forms them in its reduction, from the p2 and dlogits it
 * keeps per sample: the same products); else fc_w and fc_b get them. Conv
 * gradients go to G (the conv tensors' offsets). *pred (if not NULL): the
 * argmax of the logits. */
float sp__model_sample_backward(const sp_model_layout *l, const float *P, const float *x,
                                int label, float scale, ws_view *v, float *G, float *fc_w,
                                float *fc_b, int *pred);

#endif

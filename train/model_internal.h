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

/* ---- Internal to the library: once seedpipe/model.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__model_init() : write the initial parameters (nparams floats) for a
 *  seed, as described above. */
void sp__model_init(const sp_model_layout *l, uint64_t seed, float *params);

/*! sp__model_sample_forward() : logits (classes floats) of one CHW sample.
 *  ws: l->workspace floats of scratch. @return the sample's loss for
 *  `label` (label < 0: returns 0). */
float sp__model_sample_forward(const sp_model_layout *l, const float *params, const float *x,
                               int label, float *ws, float *logits);

/*! sp__model_sample_grad() : forward and backward of one sample: grad
 *  (nparams floats, overwritten) = d(loss * scale)/d(params), where loss is
 *  the sample's cross-entropy (scale = 1/B for a batch mean). *pred (may
 *  be NULL) gets the predicted class (first maximum of the logits).
 *  @return the (unscaled) loss. */
float sp__model_sample_grad(const sp_model_layout *l, const float *params, const float *x,
                            int label, float scale, float *ws, float *grad, int *pred);

/*! sp__model_tensor_name() : "conv1.w", ..., "fc.b". */
const char *sp__model_tensor_name(int t);

/*! sp__nn_conv3x3_backward() : given dy (cout*h*w):
 *  dx (may be NULL) = +0, then + w * dy over (o, ky, kx) in that order,
 *  dw[o][c][ky][kx] = +0, then + dy[o][i][j] * x[c][i+ky-1][j+kx-1] over
 *  every (i, j) row-major (padding taps add dy * 0),
 *  db[o] = left-to-right sum of dy[o]. Zero terms (padding, dy == 0) add
 *  +-0: the same bits as leaving them out, for finite x, w and dy. dx, dw,
 *  db are overwritten. */
void sp__nn_conv3x3_backward(const float *x, int cin, int h, int w, const float *wt, int cout,
                             const float *dy, float *dx, float *dw, float *db, float *scratch);

/*! sp__nn_conv3x3_forward() : y[o][i][j] = b[o] + sum over (c, ky, kx) of
 *  w[o][c][ky][kx] * x[c][i+ky-1][j+kx-1] (zero padding), accumulated in
 *  the order c, ky, kx starting from b[o]; a padding tap adds w * 0 = +-0,
 *  which gives the same bits as leaving it out (the sum is never -0 when
 *  b[o] is not -0). x: cin*h*w, y: cout*h*w, scratch: see above. */
void sp__nn_conv3x3_forward(const float *x, int cin, int h, int w, const float *wt,
                            const float *bias, int cout, float *y, float *scratch);

/*! sp__nn_conv3x3_scratch() : floats of scratch memory that
 *  sp__nn_conv3x3_forward and _backward need for these sizes (the larger
 *  of the two; the content is garbage on entry and on return). */
size_t sp__nn_conv3x3_scratch(int cin, int h, int w, int cout);

/*! sp__nn_conv_isa() : the SIMD level the convolutions use now: "sse2",
 *  "avx2", "avx512" (x86-64: the widest the CPU has, capped by
 *  SEEDPIPE_ISA=sse2|avx2|avx512) or "portable". Informational: every
 *  level gives the same bits. */
const char *sp__nn_conv_isa(void);

void sp__nn_linear_backward(const float *x, int nin, const float *wt, int nout, const float *dy,
                            float *dx, float *dw, float *db);

/*! sp__nn_linear_forward() : y[o] = b[o] + sum_i w[o][i] x[i], i ascending.
 *  _backward() : dx[i] = sum over o ascending of w[o][i] dy[o];
 *  dw[o][i] = dy[o] * x[i]; db = dy (overwritten; each of dx, dw, db may
 *  be NULL: not computed). */
void sp__nn_linear_forward(const float *x, int nin, const float *wt, const float *bias, int nout,
                           float *y);

void sp__nn_maxpool2_backward(const float *x, int c, int h, int w, const float *dy, float *dx);

/*! sp__nn_maxpool2_forward() : 2x2 stride 2, out c x h/2 x w/2; the window
 *  maximum is the first maximum in the order (0,0) (0,1) (1,0) (1,1).
 *  _backward() : dx (c*h*w, overwritten) gets dy at that element of each
 *  window and 0 everywhere else (the odd last row/column too); the CUDA
 *  kernel computes the same values as a gather (each input checks its
 *  window). */
void sp__nn_maxpool2_forward(const float *x, int c, int h, int w, float *y);

void sp__nn_relu_backward(const float *y, const float *dy, size_t n, float *dx);

/*! sp__nn_relu_forward() / _backward() : y = max(x, 0) (may be in place);
 *  dx = dy where y > 0, else 0 (may be in place on dy). */
void sp__nn_relu_forward(const float *x, size_t n, float *y);

/*! sp__nn_softmax_xent() : loss of one row and dlogits = (p - onehot) *
 *  scale (dlogits may be NULL); see sp_nn_softmax_xent_row in nn_math.h. */
float sp__nn_softmax_xent(const float *logits, int k, int label, float scale, float *dlogits);

#ifdef __cplusplus
}
#endif

#endif

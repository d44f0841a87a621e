/* seedpipe/model.h - the training core's small CNN and its CPU reference layers.
 *
 * The model (DESIGN.md section 7), for one C x H x W float32 input (C = 1
 * or 3, H, W >= 4; tested at 28..64 px):
 *
 *   conv3x3(C -> 16, pad 1) + ReLU -> maxpool 2x2   -> 16 x H/2 x W/2
 *   conv3x3(16 -> 32, pad 1) + ReLU -> maxpool 2x2  -> 32 x H/4 x W/4
 *   flatten (CHW order, as torch.flatten) -> linear -> `classes` logits
 *   softmax cross-entropy, mean over the batch
 *
 * (H/2 etc. round down: max-pool drops an odd last row/column, as PyTorch.)
 *
 * Parameters live in one float array, tensors in this order (SP_T_*):
 *   conv1.w [16][C][3][3], conv1.b [16], conv2.w [32][16][3][3],
 *   conv2.b [32], fc.w [classes][32*(H/4)*(W/4)], fc.b [classes].
 *
 * Initialisation (sp_model_init), the same bits on every backend: with
 * K_init = sp_rng_key(seed, SP_RNG_INIT), element i of tensor t is
 *   x = word (i % 4) of philox((i / 4, t, 0, 0), K_init)
 *   u = (x >> 8) * 2^-24,  value = (float)((2u - 1) * bound)  (double math)
 * with bound = 1 / sqrt(fan_in) for every weight tensor (PyTorch's default
 * for nn.Conv2d and nn.Linear: kaiming_uniform_ with a = sqrt(5)), and 0
 * for every bias (no draw). fan_in = C*9, 16*9, 32*(H/4)*(W/4). (The
 * ReLU gain sqrt(6 / fan_in) trained worse here: larger initial logits.)
 *
 * The layer functions below work on ONE sample (CHW) and are the CPU
 * reference: loops in a fixed order (documented on each; the convolutions
 * are matrix products vectorised across output elements only, so SIMD
 * width and CPU never change a bit), compiled with -ffp-contract=off and
 * no FMA; their per-element arithmetic comes from train/nn_math.h,
 * which the CUDA kernels share. Weight gradients are
 * per-sample (overwritten, not accumulated); the trainer sums them over the
 * batch with the fixed tree of nn_math.h, so the result does not depend on
 * how samples are spread over threads.
 *
 * Thread safety: pure functions on caller-owned memory.
 */
#ifndef SEEDPIPE_MODEL_H
#define SEEDPIPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SP_MODEL_C1 16
#define SP_MODEL_C2 32

enum sp_model_tensor {
    SP_T_CONV1_W = 0, SP_T_CONV1_B, SP_T_CONV2_W, SP_T_CONV2_B, SP_T_FC_W, SP_T_FC_B,
    SP_T_COUNT
};

/* Input shape and class count. */
typedef struct sp_model_shape {
    int c, h, w;      /* channels (1 or 3), height, width */
    int classes;      /* 2..65536 */
} sp_model_shape;

/* Derived sizes: tensor offsets into the parameter array and activations. */
typedef struct sp_model_layout {
    sp_model_shape in;
    int h1, w1;                    /* after pool 1: H/2, W/2 */
    int h2, w2;                    /* after pool 2: H/4, W/4 */
    size_t feat;                   /* 32 * h2 * w2 */
    size_t off[SP_T_COUNT + 1];    /* off[t]..off[t+1]: tensor t */
    size_t nparams;                /* off[SP_T_COUNT] */
    size_t workspace;              /* floats of scratch per sample (sp_model_sample_*) */
} sp_model_layout;

/*! sp_model_layout_of() : @return 0, or SP_EINVAL naming the bad field
 *  (channels not 1 or 3, H or W < 4 or > 4096, classes < 2 or > 65536). */
SP_API int sp_model_layout_of(const sp_model_shape *shape, sp_model_layout *out, sp_error *err);

/*! sp_model_tensor_name() : "conv1.w", ..., "fc.b". */
SP_API const char *sp_model_tensor_name(int t);

/*! sp_model_init() : write the initial parameters (nparams floats) for a
 *  seed, as described above. */
SP_API void sp_model_init(const sp_model_layout *l, uint64_t seed, float *params);

/*! sp_model_sample_forward() : logits (classes floats) of one CHW sample.
 *  ws: l->workspace floats of scratch. @return the sample's loss for
 *  `label` (label < 0: returns 0). */
SP_API float sp_model_sample_forward(const sp_model_layout *l, const float *params, const float *x,
                                     int label, float *ws, float *logits);

/*! sp_model_sample_grad() : forward and backward of one sample: grad
 *  (nparams floats, overwritten) = d(loss * scale)/d(params), where loss is
 *  the sample's cross-entropy (scale = 1/B for a batch mean). *pred (may
 *  be NULL) gets the predicted class (first maximum of the logits).
 *  @return the (unscaled) loss. */
SP_API float sp_model_sample_grad(const sp_model_layout *l, const float *params, const float *x,
                                  int label, float scale, float *ws, float *grad, int *pred);

/* ---- CPU reference layers (one sample, CHW) -------------------------------- */

/*! sp_nn_conv_isa() : the SIMD level the convolutions use now: "sse2",
 *  "avx2", "avx512" (x86-64: the widest the CPU has, capped by
 *  SEEDPIPE_ISA=sse2|avx2|avx512) or "portable". Informational: every
 *  level gives the same bits. */
SP_API const char *sp_nn_conv_isa(void);
/*! sp_nn_conv3x3_scratch() : floats of scratch memory that
 *  sp_nn_conv3x3_forward and _backward need for these sizes (the larger
 *  of the two; the content is garbage on entry and on return). */
SP_API size_t sp_nn_conv3x3_scratch(int cin, int h, int w, int cout);
/*! sp_nn_conv3x3_forward() : y[o][i][j] = b[o] + sum over (c, ky, kx) of
 *  w[o][c][ky][kx] * x[c][i+ky-1][j+kx-1] (zero padding), accumulated in
 *  the order c, ky, kx starting from b[o]; a padding tap adds w * 0 = +-0,
 *  which gives the same bits as leaving it out (the sum is never -0 when
 *  b[o] is not -0). x: cin*h*w, y: cout*h*w, scratch: see above. */
SP_API void sp_nn_conv3x3_forward(const float *x, int cin, int h, int w, const float *wt,
                                  const float *bias, int cout, float *y, float *scratch);
/*! sp_nn_conv3x3_backward() : given dy (cout*h*w):
 *  dx (may be NULL) = +0, then + w * dy over (o, ky, kx) in that order,
 *  dw[o][c][ky][kx] = +0, then + dy[o][i][j] * x[c][i+ky-1][j+kx-1] over
 *  every (i, j) row-major (padding taps add dy * 0),
 *  db[o] = left-to-right sum of dy[o]. Zero terms (padding, dy == 0) add
 *  +-0: the same bits as leaving them out, for finite x, w and dy. dx, dw,
 *  db are overwritten. */
SP_API void sp_nn_conv3x3_backward(const float *x, int cin, int h, int w, const float *wt, int cout,
                                   const float *dy, float *dx, float *dw, float *db, float *scratch);
/*! sp_nn_relu_forward() / _backward() : y = max(x, 0) (may be in place);
 *  dx = dy where y > 0, else 0 (may be in place on dy). */
SP_API void sp_nn_relu_forward(const float *x, size_t n, float *y);
SP_API void sp_nn_relu_backward(const float *y, const float *dy, size_t n, float *dx);
/*! sp_nn_maxpool2_forward() : 2x2 stride 2, out c x h/2 x w/2; the window
 *  maximum is the first maximum in the order (0,0) (0,1) (1,0) (1,1).
 *  _backward() : dx (c*h*w, overwritten) gets dy at that element of each
 *  window and 0 everywhere else (the odd last row/column too); the CUDA
 *  kernel computes the same values as a gather (each input checks its
 *  window). */
SP_API void sp_nn_maxpool2_forward(const float *x, int c, int h, int w, float *y);
SP_API void sp_nn_maxpool2_backward(const float *x, int c, int h, int w, const float *dy, float *dx);
/*! sp_nn_linear_forward() : y[o] = b[o] + sum_i w[o][i] x[i], i ascending.
 *  _backward() : dx[i] = sum over o ascending of w[o][i] dy[o];
 *  dw[o][i] = dy[o] * x[i]; db = dy (overwritten; each of dx, dw, db may
 *  be NULL: not computed). */
SP_API void sp_nn_linear_forward(const float *x, int nin, const float *wt, const float *bias, int nout,
                                 float *y);
SP_API void sp_nn_linear_backward(const float *x, int nin, const float *wt, int nout, const float *dy,
                                  float *dx, float *dw, float *db);
/*! sp_nn_softmax_xent() : loss of one row and dlogits = (p - onehot) *
 *  scale (dlogits may be NULL); see sp_nn_softmax_xent_row in nn_math.h. */
SP_API float sp_nn_softmax_xent(const float *logits, int k, int label, float scale, float *dlogits);

#ifdef __cplusplus
}
#endif
#endif

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
 * Initialisation (sp__model_init), the same bits on every backend: with
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

/* ---- CPU reference layers (one sample, CHW) -------------------------------- */

#ifdef __cplusplus
}
#endif
#endif

/* nn_backend.h - the one interface behind which the training backends live.
 *
 * Not a public header. train.c owns the model description, the initial
 * parameters (sp__model_init, computed once on the host so every backend
 * starts from the same bits), the step counter and the checkpoint; a
 * backend owns the device-side copies of parameters and momentum and does
 * one SGD step or one evaluation on a batch of float32 NCHW images.
 * Backends: sp__nn_cpu_backend (model_cpu.c, always built) and
 * sp__nn_cuda_backend (nn_cuda.cu, only with SEEDPIPE_HAVE_CUDA, in the
 * CUDA plugin loaded at run time: train/cuda_plugin.h).
 */
#ifndef SEEDPIPE_NN_BACKEND_H
#define SEEDPIPE_NN_BACKEND_H

#include "seedpipe/model.h"
#include "seedpipe/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This rank's place in a data-parallel step (filled by train.c after an
 * allgather of the slice sizes). */
typedef struct sp__nn_part {
    const sp_train_comm *comm;
    const uint32_t *counts;   /* comm->world slice sizes, rank order */
    uint32_t offset, total;   /* sum of counts[0..rank), sum of all */
} sp__nn_part;

typedef struct sp__nn_backend {
    const char *name;   /* "cpu", "cuda" */
    /* params/momentum: l->nparams floats each, copied. */
    int (*create)(const sp_model_layout *l, const sp_train_config *cfg, const float *params,
                  const float *momentum, void **ctx, sp_error *err);
    void (*destroy)(void *ctx);
    /* One SGD step on n samples (x: n*C*H*W floats, labels in [0, classes)).
     * *loss = mean cross-entropy before the update, *correct = argmax hits
     * before the update. */
    int (*step)(void *ctx, const float *x, const int32_t *labels, uint32_t n, float *loss,
                uint32_t *correct, sp_error *err);
    /* One data-parallel step (train.h, "data-parallel training"): x and
     * labels are this rank's part->counts[rank] samples, at positions
     * part->offset.. of a global batch of part->total; the backend trades
     * partial sums through part->comm. *loss and *correct are the global
     * batch's. NULL: the backend cannot train data-parallel. */
    int (*step_part)(void *ctx, const float *x, const int32_t *labels,
                     const struct sp__nn_part *part, float *loss, uint32_t *correct,
                     sp_error *err);
    /* Forward only: mean loss and correct predictions. */
    int (*eval)(void *ctx, const float *x, const int32_t *labels, uint32_t n, float *loss,
                uint32_t *correct, sp_error *err);
    /* Copy parameters and momentum out (either may be NULL) or in. */
    int (*get)(void *ctx, float *params, float *momentum, sp_error *err);
    int (*set)(void *ctx, const float *params, const float *momentum, sp_error *err);
    /* JSON members (no braces) describing the device and its libraries,
     * e.g. "\"cuda_runtime\":\"13.0\",..."; snprintf semantics. */
    int (*describe)(void *ctx, char *buf, size_t size);
} sp__nn_backend;

extern const sp__nn_backend sp__nn_cpu_backend;

#ifdef __cplusplus
}
#endif
#endif

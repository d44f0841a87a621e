/* seedpipe/train.h - deterministic training of the small CNN: step, eval,
 * checkpoint/resume, run record.
 *
 * A trainer holds the model (model.h), the SGD-with-momentum optimizer and
 * a step counter, on one backend:
 *   cpu   the reference: bit-identical results for any `threads` (samples
 *         are spread over threads in any way; per-sample gradients are
 *         summed over the batch with a fixed tree that depends only on the
 *         batch size; parameters are updated by fixed ranges).
 *   cuda  cuDNN convolutions with fixed deterministic algorithms, cuBLAS
 *         with pedantic math and no atomics, the project's own kernels for
 *         the rest (train/cuda/nn_cuda.cu). Run-to-run bit-identical in strict
 *         mode; close to, not bit-equal with, the CPU (other summation
 *         orders inside cuDNN/cuBLAS). Only when built with CUDA; otherwise
 *         SP_EUNSUPP "built without CUDA".
 * Every backend starts from the same initial bits (sp__model_init from the
 * seed's SP_RNG_INIT stream).
 *
 * Determinism: given the same config, initial state and batches, a CPU
 * trainer's weights after N steps are a pure function of those inputs.
 * A checkpoint stores weights, momentum and the step count exactly, so a
 * resumed run ends with the bits of an uninterrupted one.
 *
 * The training core is its own library, libseedpipe_train, on top of
 * libseedpipe (the loader, which needs no CUDA); only it links the CUDA
 * runtime, cuBLAS and cuDNN, when built with them.
 *
 * Thread safety: one trainer per thread at a time.
 */
#ifndef SEEDPIPE_TRAIN_H
#define SEEDPIPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "seedpipe/common.h"
#include "seedpipe/env.h"
#include "seedpipe/loader.h"
#include "seedpipe/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SP_DEVICE_CPU = 0, SP_DEVICE_CUDA = 1 } sp_device;

/* cuDNN algorithm choice: SP_ALGO_DEFAULT = the fixed deterministic one
 * (forward IMPLICIT_PRECOMP_GEMM, backward data ALGO_1, backward filter
 * ALGO_1); any other value is a raw cudnnConvolution*Algo_t number that
 * strict mode checks (it refuses BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0/3 and
 * anything it cannot vouch for). */
#define SP_ALGO_DEFAULT (-1)

typedef struct sp_train_config {
    uint64_t seed;            /* model init stream (SP_RNG_INIT) */
    sp_model_shape shape;
    float lr;                 /* default 0.02 */
    float momentum;           /* default 0.9 */
    float weight_decay;       /* default 5e-4 */
    sp_device device;         /* default cpu */
    int threads;              /* cpu: worker threads (<= 1: caller only), max 64 */
    /* cuda only */
    int cuda_device;          /* default 0 */
    int strict;               /* refuse any non-deterministic setting (default 1) */
    int fast;                 /* let cuDNN pick algorithms (needs strict = 0) */
    int conv_fwd_algo, conv_bwd_data_algo, conv_bwd_filter_algo;  /* SP_ALGO_DEFAULT */
} sp_train_config;

/*! sp_train_config_default() : the defaults above; shape must be set. */
SP_API void sp_train_config_default(sp_train_config *cfg);
/*! sp_device_parse() : "cpu" | "cuda". @return 0 or SP_EINVAL. */
SP_API int sp_device_parse(const char *s, sp_device *out, sp_error *err);
SP_API const char *sp_device_name(sp_device d);

typedef struct sp_trainer sp_trainer;

/*! sp_trainer_create() : model initialised from cfg->seed.
 *  @return 0, SP_EINVAL (bad shape or hyperparameter), SP_ENOMEM,
 *  SP_EUNSUPP (cuda not built; strict mode refusing a setting, the message
 *  names it), SP_EIO (CUDA/cuDNN/cuBLAS failure, message names the call). */
SP_API int sp_trainer_create(const sp_train_config *cfg, sp_trainer **out, sp_error *err);
SP_API void sp_trainer_destroy(sp_trainer *tr);   /* accepts NULL */

SP_API const sp_train_config *sp_trainer_config_of(const sp_trainer *tr);
SP_API const sp_model_layout *sp_trainer_layout(const sp_trainer *tr);
/*! sp_trainer_steps() : SGD steps taken (restored by sp_trainer_load). */
SP_API uint64_t sp_trainer_steps(const sp_trainer *tr);

/*! sp_trainer_step_batch() / sp_trainer_eval_batch() : the same on a loader
 *  batch (loader.h). uint8 images become v / 255.0f; the layout must be
 *  NCHW and the sample dims equal the model's input. @return SP_EINVAL
 *  naming the mismatch. */
SP_API int sp_trainer_step_batch(sp_trainer *tr, const sp_loader *ld, const sp_batch *b, float *loss,
                                 uint32_t *correct, sp_error *err);
SP_API int sp_trainer_eval_batch(sp_trainer *tr, const sp_loader *ld, const sp_batch *b,
                                 float *loss, uint32_t *correct, sp_error *err);

/* ---- data-parallel training ---------------------------------------------------
 * K processes ("ranks") train one model on one global batch stream: rank r
 * holds the r-th contiguous slice of every global batch (the loader's
 * rank/world, sampler.h), computes its samples' gradients, and the ranks
 * exchange partial sums through a communicator the caller provides (the
 * CLI's is MPI: docs/distributed.md). The weights after every step are the
 * same bits on every rank AND the same bits a single process computes on
 * the whole global batch, for any K dividing the batch size.
 *
 * HOW: the CPU reference sums per-sample gradients over the batch with the
 * fixed binary-counter tree of train/nn_math.h, which depends only on the
 * global count n. Its subtrees over aligned spans [p, p + 2^j) (2^j divides
 * p) are whole nodes of that tree, and pushing such a node's value into
 * the counter as a run of size 2^j continues the tree exactly as pushing
 * its 2^j leaves would. So each rank splits its slice [o, o + m) into
 * maximal aligned spans (at most 2 log2 m of them), sums each with the
 * tree, and every rank gathers all ranks' spans and pushes them in
 * position order: every addition of the single-process tree happens, in
 * the same order, on the same operands. Per step: one allgather of the
 * slice sizes (4 bytes per rank), one of the spans (per rank: spans *
 * nparams * 4 bytes, plus 4 bytes per sample for the losses). MPI's own
 * float reductions are never used (their order follows the process count).
 */

/* allgather: every rank sends `send` (send_bytes, may differ per rank);
 * on return recv holds rank 0's bytes, then rank 1's, ..., recv_bytes[k]
 * bytes from rank k (known to every rank in advance). @return 0, or an
 * error (set in err) that fails the step on this rank: the caller is
 * expected to stop the whole job (a peer is waiting in the exchange). */
typedef struct sp_train_comm {
    uint32_t rank, world;     /* world >= 1, rank < world */
    void *ctx;
    int (*allgather)(void *ctx, const void *send, size_t send_bytes, void *recv,
                     const size_t *recv_bytes, sp_error *err);
} sp_train_comm;

/*! sp_trainer_set_comm() : train data-parallel through comm (copied; the
 *  ctx must outlive the trainer's steps); NULL: a single process again.
 *  From then on sp__trainer_step / _step_batch take this rank's slice (n
 *  may be 0 for a slice of a short last batch, not for the whole batch)
 *  and *loss / *correct are those of the global batch. Only the cpu
 *  backend trains data-parallel. @return 0, SP_EINVAL, SP_EUNSUPP. */
SP_API int sp_trainer_set_comm(sp_trainer *tr, const sp_train_comm *comm, sp_error *err);
/*! sp_trainer_last_samples() : samples in the last step's (global) batch. */
SP_API uint32_t sp_trainer_last_samples(const sp_trainer *tr);

/*! sp_trainer_get_params() : copy nparams floats (layout order) out;
 *  momentum may be NULL. */
SP_API int sp_trainer_get_params(sp_trainer *tr, float *params, float *momentum, sp_error *err);
/*! sp_trainer_weights_digest() : XXH3-128 (seed 0) of the parameter array
 *  as little-endian IEEE-754 float32 bytes, layout order. */
SP_API int sp_trainer_weights_digest(sp_trainer *tr, sp_digest *out, sp_error *err);
/*! sp_trainer_describe() : JSON object text for the run record: backend,
 *  threads, and on CUDA the runtime/driver/cuDNN/cuBLAS versions, device
 *  name and algorithms. snprintf semantics. */
SP_API int sp_trainer_describe(sp_trainer *tr, char *buf, size_t size);

/* ---- checkpoints -------------------------------------------------------------
 * Binary file, all integers little-endian:
 *   "SPCKPT01" magic, u32 version 1, u32 header bytes,
 *   u64 seed, i32 c, h, w, classes, f32 lr, momentum, weight_decay (bits),
 *   u64 steps, u64 nparams, u32 blob length,
 *   blob (opaque caller bytes: the CLI stores its loader state JSON: epoch,
 *   next batch, loader fingerprint, seed), nparams f32 weights,
 *   nparams f32 momentum, then XXH3-128 of everything before (16 bytes).
 * Written to "<path>.tmp.<pid>" and renamed into place (atomic). */

/*! sp_trainer_save() : @return 0 or SP_EIO naming the path. */
SP_API int sp_trainer_save(sp_trainer *tr, const char *path, const void *blob, size_t blob_len,
                           sp_error *err);
/*! sp_trainer_load() : restore weights, momentum and the step count.
 *  *blob (malloc'd, NUL-terminated, caller frees; may be NULL) gets the
 *  stored blob. @return 0, SP_EIO, SP_EFORMAT (bad magic, truncated,
 *  checksum), SP_EMISMATCH listing every difference (seed, shape, classes,
 *  lr, momentum, weight decay) between the file and this trainer. */
SP_API int sp_trainer_load(sp_trainer *tr, const char *path, char **blob, size_t *blob_len,
                           sp_error *err);

/* ---- run record ------------------------------------------------------------ */

typedef struct sp_run_epoch {
    double loss;            /* mean training loss of the epoch */
    double accuracy;        /* training accuracy (correct / seen, pre-update) */
    double eval_accuracy;   /* < 0: no eval set */
    double eval_loss;
} sp_run_epoch;

typedef struct sp_run_record {
    uint64_t seed;
    const char *config_json;    /* full config, a JSON object text */
    sp_digest dataset_fingerprint;
    sp_digest loader_fingerprint;
    const char *device_json;    /* sp_trainer_describe() */
    uint32_t nepochs;
    const sp_run_epoch *epochs;
    uint64_t nsteps;
    const float *step_loss;     /* nsteps losses (exact, "%.9g") ... */
    uint64_t step_loss_first;   /* ... of steps step_loss_first + 0, 1, ... */
    sp_digest final_weights;
    double seconds;             /* wall time, informative only */
} sp_run_record;

/*! sp_run_record_write() : one JSON object with the keys seed, config,
 *  dataset_fingerprint, loader_fingerprint, versions
 *  (sp_library_versions_json), device, epochs [{loss, accuracy,
 *  eval_accuracy?, eval_loss?}], step_loss_first, step_loss [...], step_loss_digest
 *  (XXH3-128 of the float32 bytes), final_weights_digest, seconds.
 *  Written atomically (temp + rename). @return 0 or SP_EIO. */
SP_API int sp_run_record_write(const char *path, const sp_run_record *r, sp_error *err);

/*! sp_env_cuda_query() : the CUDA part of the environment record (env.h)
 *  as this training library sees it: compiled = 0 when built without CUDA;
 *  else the runtime, driver, cuDNN and cuBLAS versions and device 0.
 *  Fills *out (zeroed first). Never fails: problems go to out->error. */
SP_API void sp_env_cuda_query(sp_env_cuda_info *out);

#ifdef __cplusplus
}
#endif
#endif

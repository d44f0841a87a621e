/* cuda_plugin.h - the training core's CUDA half, a library loaded at run time.
 *
 * Not a public header. Everything that needs the CUDA runtime, cuBLAS or
 * cuDNN (train/cuda/nn_cuda.cu, graph_cuda.cu, env_cuda.cu) is built into
 * libseedpipe_cuda.so.N, which links those libraries and nothing of
 * seedpipe's but libseedpipe's public API. The training library
 * (libseedpipe_train and the tool) links no CUDA library: the first call
 * that asks for CUDA (a trainer on SP_DEVICE_CUDA, the GCN layer on the
 * GPU, the environment record) loads the plugin with dlopen
 * (train/cuda_plugin.c) and takes its one exported symbol, a table of
 * the entry points below. Without CUDA a process maps no CUDA library.
 */
#ifndef SEEDPIPE_CUDA_PLUGIN_H
#define SEEDPIPE_CUDA_PLUGIN_H

#include "train/nn_backend.h"
#include "seedpipe/env.h"
#include "seedpipe/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever the table below changes shape. */
#define SP__CUDA_PLUGIN_ABI 1
#define SP__CUDA_PLUGIN_SYMBOL "sp__cuda_plugin_v1"

typedef struct sp__cuda_plugin {
    int abi;                                  /* SP__CUDA_PLUGIN_ABI */
    const sp__nn_backend *nn;                 /* the training backend (nn_cuda.cu) */
    void (*env_query)(sp_env_cuda_info *out); /* env_cuda.cu */
    int (*device)(char *name, size_t n);      /* graph_cuda.cu: sp_graph_cuda_device() */
    int (*gcn_forward)(const sp_gcn *g, const float *x, sp_scatter_mode mode, float *out,
                       sp_error *err);
    int (*scatter_time)(const sp_csr *g, const uint32_t *src, const uint32_t *dst, uint64_t m,
                        uint32_t f, int reps, double *ms_atomic, double *ms_det, sp_error *err);
} sp__cuda_plugin;

/* The plugin's entry points (hidden; reached through the table). */
extern const sp__nn_backend sp__nn_cuda_backend;
void sp__cuda_env_query(sp_env_cuda_info *out);
int sp__cuda_device(char *name, size_t n);
int sp__cuda_gcn_forward(const sp_gcn *g, const float *x, sp_scatter_mode mode, float *out,
                         sp_error *err);
int sp__cuda_scatter_time(const sp_csr *g, const uint32_t *src, const uint32_t *dst, uint64_t m,
                          uint32_t f, int reps, double *ms_atomic, double *ms_det, sp_error *err);

/*! sp__cuda_plugin_load() : the plugin, loaded on the first call (thread-
 *  safe, once per process). NULL with SP_EUNSUPP in err when this build has
 *  no CUDA, the plugin is not found (the message lists where it looked) or
 *  it cannot be loaded (the loader's message: a missing CUDA runtime,
 *  cuBLAS or cuDNN). */
const sp__cuda_plugin *sp__cuda_plugin_load(sp_error *err);

#ifdef __cplusplus
}
#endif
#endif

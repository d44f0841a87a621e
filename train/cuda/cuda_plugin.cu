// cuda_plugin.cu - the one symbol libseedpipe_cuda exports: the table of
// its entry points (train/cuda_plugin.h), found by dlsym.
#include "train/cuda_plugin.h"

extern "C" SP_API const sp__cuda_plugin sp__cuda_plugin_v1 = {
    SP__CUDA_PLUGIN_ABI, &sp__nn_cuda_backend, sp__cuda_env_query, sp__cuda_device,
    sp__cuda_gcn_forward, sp__cuda_scatter_time};

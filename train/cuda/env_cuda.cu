// env_cuda.cu - the CUDA part of the environment record (seedpipe/env.h,
// sp_env_cuda_query() in seedpipe/train.h): runtime, driver, cuDNN and
// cuBLAS versions, device 0's name and compute capability. Part of the
// CUDA plugin (train/cuda_plugin.h); train/record.c calls it through
// the plugin's table.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <string.h>

#include "train/cuda_plugin.h"

extern "C" void sp__cuda_env_query(sp_env_cuda_info *out) {
    memset(out, 0, sizeof *out);
    out->compiled = 1;
    cudaRuntimeGetVersion(&out->runtime);
    if (cudaDriverGetVersion(&out->driver) != cudaSuccess) out->driver = 0;
    size_t v = cudnnGetVersion();   // e.g. 90300 (9.3.0)
    out->cudnn[0] = (int)(v / 10000);
    out->cudnn[1] = (int)(v % 10000 / 100);
    out->cudnn[2] = (int)(v % 100);
    cublasGetProperty(MAJOR_VERSION, &out->cublas[0]);
    cublasGetProperty(MINOR_VERSION, &out->cublas[1]);
    cublasGetProperty(PATCH_LEVEL, &out->cublas[2]);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        if (e != cudaErrorNoDevice && e != cudaErrorInsufficientDriver)
            snprintf(out->error, sizeof out->error, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        cudaGetLastError();
        count = 0;
    }
    out->devices = count;
    if (count > 0) {
        cudaDeviceProp p;
        e = cudaGetDeviceProperties(&p, 0);
        if (e == cudaSuccess) {
            snprintf(out->name, sizeof out->name, "%s", p.name);
            out->cc_major = p.major;
            out->cc_minor = p.minor;
            out->memory_mib = (unsigned long long)(p.totalGlobalMem >> 20);
        } else {
            snprintf(out->error, sizeof out->error, "cudaGetDeviceProperties: %s",
                     cudaGetErrorString(e));
            cudaGetLastError();
        }
    }
}

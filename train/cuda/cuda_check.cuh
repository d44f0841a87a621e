// cuda_check.cuh - the check macros of the CUDA plugin: every CUDA, cuDNN
// and cuBLAS call of train/cuda/*.cu goes through one of these.
//
// Each is for a function that returns an sp_error code and has
// `sp_error *err` in scope: a failing call returns SP_EIO from that
// function, with a message naming the library, the call as written and
// the library's own reason ("cuda: cudaMalloc(&p, n): out of memory").
// Nothing is printed and nothing aborts (a library never exits; STYLE.md).
//   CU(call)         a cudaError_t call
//   DNN(call)        a cudnnStatus_t call
//   BLAS(call)       a cublasStatus_t call
//   LAUNCHED(name)   after a kernel launch: cudaGetLastError reports (and
//                    clears) a bad launch configuration at once; a fault
//                    while the kernel runs surfaces at the next checked
//                    synchronising call.
#ifndef SEEDPIPE_CUDA_CHECK_CUH
#define SEEDPIPE_CUDA_CHECK_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "seedpipe/common.h"   // sp_error_set, SP_EIO

#define SP__CUDA_CHECK(type, ok, lib, call, reason)                                      \
    do {                                                                                 \
        type e_ = (call);                                                                \
        if (e_ != (ok)) return sp_error_set(err, SP_EIO, lib ": %s: %s", #call, reason(e_)); \
    } while (0)

#define CU(call) SP__CUDA_CHECK(cudaError_t, cudaSuccess, "cuda", call, cudaGetErrorString)
#define DNN(call) SP__CUDA_CHECK(cudnnStatus_t, CUDNN_STATUS_SUCCESS, "cudnn", call, cudnnGetErrorString)
#define BLAS(call) \
    SP__CUDA_CHECK(cublasStatus_t, CUBLAS_STATUS_SUCCESS, "cublas", call, cublasGetStatusString)
#define LAUNCHED(name)                                                                        \
    do {                                                                                      \
        cudaError_t e_ = cudaGetLastError();                                                  \
        if (e_ != cudaSuccess)                                                                \
            return sp_error_set(err, SP_EIO, "cuda: launch of %s: %s", #name,                 \
                                cudaGetErrorString(e_));                                      \
    } while (0)

#endif

// nn_cuda.cu - the CUDA backend of the training core (nn_backend.h).
//
// Same model, same initial bits and same update rule as the CPU reference
// (model.c), on one GPU:
//   convolutions   cuDNN 9 (legacy convolution API, still supported in 9.x)
//                  with explicitly fixed algorithms: forward
//                  IMPLICIT_PRECOMP_GEMM, backward data ALGO_1, backward
//                  filter ALGO_1 (all three documented deterministic;
//                  BWD_DATA_ALGO_0 and BWD_FILTER_ALGO_0/3 are not), math
//                  type CUDNN_FMA_MATH (no TF32 tensor cores);
//   linear layer   cuBLAS SGEMM with CUBLAS_PEDANTIC_MATH (no TF32, no
//                  reduced precision), CUBLAS_ATOMICS_NOT_ALLOWED, and a
//                  fixed 32 MiB workspace set with cublasSetWorkspace after
//                  cublasSetStream: the semantics of
//                  CUBLAS_WORKSPACE_CONFIG=:4096:8 (8 buffers of 4096 KiB),
//                  set by us so the user's environment cannot change it;
//   everything else: the kernels of nn_cuda.cuh (shared arithmetic from
//                  nn_math.h, no atomics, fixed-tree reductions).
// One stream, one cuDNN handle, one cuBLAS handle per trainer.
//
// Modes: strict (default) refuses, with an SP_EUNSUPP message naming it,
// any algorithm request that is not deterministic (BWD_DATA_ALGO_0,
// BWD_FILTER_ALGO_0/3, or any algorithm cuDNN itself reports
// CUDNN_NON_DETERMINISTIC for these shapes) and the fast mode. fast lets
// cuDNN's heuristics pick the algorithms (cudnnGet*Algorithm_v7, first
// result cuDNN can run) with CUDNN_DEFAULT_MATH (TF32 permitted on sm_80+)
// and cuBLAS CUBLAS_TF32_TENSOR_OP_MATH (CUBLAS_DEFAULT_MATH never uses TF32
// for SGEMM):
// for the strict-vs-fast benchmark only, not reproducible by contract.
//
// Bits: run-to-run identical in strict mode; NOT bit-equal to the CPU
// (cuDNN and cuBLAS sum in their own orders, with FMA); tests report the
// difference. Every CUDA, cuDNN and cuBLAS call is checked; a failure is
// SP_EIO naming the call.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda_plugin.h"
#include "train/nn_backend.h"
#include "train/cuda/cuda_check.cuh"
#include "train/cuda/nn_cuda.cuh"

#define SP_CUBLAS_WORKSPACE (8u * 4096u * 1024u)   // CUBLAS_WORKSPACE_CONFIG=:4096:8

typedef struct conv_layer {
    int cin, cout, h, w;
    cudnnTensorDescriptor_t xD, yD;
    cudnnFilterDescriptor_t wD;
    cudnnConvolutionDescriptor_t cD;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
} conv_layer;

typedef struct cuda_ctx {
    sp_model_layout l;
    sp_train_config cfg;
    int device;
    char device_name[256];
    cudaStream_t stream;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    void *blas_ws;
    void *dnn_ws;
    size_t dnn_ws_size;
    conv_layer c1, c2;
    int cur_n;                    // batch size the descriptors are set for
    uint32_t cap;                 // batch capacity of the activation buffers
    float *params, *mom, *grads;  // nparams each
    float *x, *r1, *p1, *r2, *p2, *logits, *dlogits, *dfeat, *dr2, *dp1, *dr1, *loss, *loss1;
    float *dbpart;                // N x C2: per-sample conv bias gradients
    int32_t *labels, *pred;
    int32_t *h_pred;
} cuda_ctx;

static const char *fwd_name(int a) {
    static const char *n[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                              "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    return a >= 0 && a < 8 ? n[a] : "?";
}
static const char *bwd_data_name(int a) {
    static const char *n[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                              "WINOGRAD_NONFUSED"};
    return a >= 0 && a < 6 ? n[a] : "?";
}
static const char *bwd_filter_name(int a) {
    static const char *n[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                              "FFT_TILING"};
    return a >= 0 && a < 7 ? n[a] : "?";
}

// ---- request checks (every mode) and strict-mode checks ---------------------------

static int check_request(const sp_train_config *cfg, sp_error *err) {
    // A raw algorithm number outside cuDNN's enum would otherwise reach
    // cuDNN as CUDNN_STATUS_BAD_PARAM with no hint of which option it was.
    if (cfg->conv_fwd_algo != SP_ALGO_DEFAULT &&
        (cfg->conv_fwd_algo < 0 || cfg->conv_fwd_algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT))
        return sp_error_set(err, SP_EINVAL, "cuda: forward algorithm %d is not a cuDNN "
                            "cudnnConvolutionFwdAlgo_t (0..%d)", cfg->conv_fwd_algo,
                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT - 1);
    if (cfg->conv_bwd_data_algo != SP_ALGO_DEFAULT &&
        (cfg->conv_bwd_data_algo < 0 ||
         cfg->conv_bwd_data_algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT))
        return sp_error_set(err, SP_EINVAL, "cuda: backward data algorithm %d is not a cuDNN "
                            "cudnnConvolutionBwdDataAlgo_t (0..%d)", cfg->conv_bwd_data_algo,
                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT - 1);
    if (cfg->conv_bwd_filter_algo != SP_ALGO_DEFAULT &&
        (cfg->conv_bwd_filter_algo < 0 ||
         cfg->conv_bwd_filter_algo >= CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT))
        return sp_error_set(err, SP_EINVAL, "cuda: backward filter algorithm %d is not a cuDNN "
                            "cudnnConvolutionBwdFilterAlgo_t (0..%d)", cfg->conv_bwd_filter_algo,
                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT - 1);
    if (!cfg->strict) return 0;
    if (cfg->fast)
        return sp_error_set(err, SP_EUNSUPP,
                            "strict mode: --fast lets cuDNN pick possibly non-deterministic "
                            "algorithms and TF32 math; use --mode fast without strict");
    if (cfg->conv_bwd_data_algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
        return sp_error_set(err, SP_EUNSUPP,
                            "strict mode: CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 is not deterministic "
                            "(it sums with atomics); use ALGO_1");
    if (cfg->conv_bwd_filter_algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
        cfg->conv_bwd_filter_algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3)
        return sp_error_set(err, SP_EUNSUPP,
                            "strict mode: CUDNN_CONVOLUTION_BWD_FILTER_ALGO_%d is not "
                            "deterministic (it sums with atomics); use ALGO_1",
                            cfg->conv_bwd_filter_algo);
    return 0;
}

// cuDNN's own verdict on the chosen algorithms for these shapes and this
// math type (the heuristics list every algorithm with its determinism).
static int strict_check_dnn(cuda_ctx *c, conv_layer *L, int need_data, sp_error *err) {
    int n = 0;
    cudnnConvolutionFwdAlgoPerf_t pw[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DNN(cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, L->xD, L->wD, L->cD, L->yD,
                                               2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, pw));
    for (int i = 0; i < n; i++)
        if (pw[i].algo == L->fwd && pw[i].status == CUDNN_STATUS_SUCCESS &&
            pw[i].determinism == CUDNN_NON_DETERMINISTIC)
            return sp_error_set(err, SP_EUNSUPP,
                                "strict mode: cuDNN reports forward %s as non-deterministic "
                                "for %dx%dx%d", fwd_name(L->fwd), L->cin, L->h, L->w);
    cudnnConvolutionBwdFilterAlgoPerf_t pf[2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        c->dnn, L->xD, L->yD, L->cD, L->wD, 2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, pf));
    for (int i = 0; i < n; i++)
        if (pf[i].algo == L->bwd_filter && pf[i].status == CUDNN_STATUS_SUCCESS &&
            pf[i].determinism == CUDNN_NON_DETERMINISTIC)
            return sp_error_set(err, SP_EUNSUPP,
                                "strict mode: cuDNN reports backward filter %s as "
                                "non-deterministic for %dx%dx%d",
                                bwd_filter_name(L->bwd_filter), L->cin, L->h, L->w);
    if (!need_data) return 0;
    cudnnConvolutionBwdDataAlgoPerf_t pd[2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        c->dnn, L->wD, L->yD, L->cD, L->xD, 2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, pd));
    for (int i = 0; i < n; i++)
        if (pd[i].algo == L->bwd_data && pd[i].status == CUDNN_STATUS_SUCCESS &&
            pd[i].determinism == CUDNN_NON_DETERMINISTIC)
            return sp_error_set(err, SP_EUNSUPP,
                                "strict mode: cuDNN reports backward data %s as "
                                "non-deterministic for %dx%dx%d",
                                bwd_data_name(L->bwd_data), L->cin, L->h, L->w);
    return 0;
}

// ---- descriptors, algorithms, buffers ---------------------------------------------

static int conv_create(conv_layer *L, int cin, int cout, int h, int w, sp_error *err) {
    L->cin = cin;
    L->cout = cout;
    L->h = h;
    L->w = w;
    DNN(cudnnCreateTensorDescriptor(&L->xD));
    DNN(cudnnCreateTensorDescriptor(&L->yD));
    DNN(cudnnCreateFilterDescriptor(&L->wD));
    DNN(cudnnCreateConvolutionDescriptor(&L->cD));
    DNN(cudnnSetFilter4dDescriptor(L->wD, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cout, cin, 3, 3));
    DNN(cudnnSetConvolution2dDescriptor(L->cD, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
    return 0;
}

static void conv_destroy(conv_layer *L) {
    if (L->xD) cudnnDestroyTensorDescriptor(L->xD);
    if (L->yD) cudnnDestroyTensorDescriptor(L->yD);
    if (L->wD) cudnnDestroyFilterDescriptor(L->wD);
    if (L->cD) cudnnDestroyConvolutionDescriptor(L->cD);
}

// Set the batch size n into the descriptors, pick (strict: check) the
// algorithms, and grow the cuDNN workspace to fit.
static int conv_setup(cuda_ctx *c, conv_layer *L, int n, int need_data, sp_error *err) {
    DNN(cudnnSetTensor4dDescriptor(L->xD, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, L->cin, L->h,
                                   L->w));
    DNN(cudnnSetTensor4dDescriptor(L->yD, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, L->cout, L->h,
                                   L->w));
    // 3x3, pad 1, stride 1 keeps H x W: check cuDNN agrees with yD.
    int on = 0, oc = 0, oh = 0, ow = 0;
    DNN(cudnnGetConvolution2dForwardOutputDim(L->cD, L->xD, L->wD, &on, &oc, &oh, &ow));
    if (on != n || oc != L->cout || oh != L->h || ow != L->w)
        return sp_error_set(err, SP_EIO, "cudnn: convolution output %dx%dx%dx%d, expected %dx%dx%dx%d",
                            on, oc, oh, ow, n, L->cout, L->h, L->w);
    DNN(cudnnSetConvolutionMathType(L->cD, c->cfg.fast ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    if (c->cfg.fast) {
        // cuDNN's heuristic order, first entry that cuDNN says it can run
        // (an entry may carry a failure status, and k may be short).
        int k = 0, i;
        cudnnConvolutionFwdAlgoPerf_t f[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        cudnnConvolutionBwdDataAlgoPerf_t d[2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cudnnConvolutionBwdFilterAlgoPerf_t g[2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, L->xD, L->wD, L->cD, L->yD,
                                                   2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &k, f));
        for (i = 0; i < k && f[i].status != CUDNN_STATUS_SUCCESS; i++) {}
        if (i == k)
            return sp_error_set(err, SP_EIO, "cudnn: no forward algorithm for %dx%dx%d", L->cin,
                                L->h, L->w);
        L->fwd = f[i].algo;
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            c->dnn, L->wD, L->yD, L->cD, L->xD, 2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &k, d));
        for (i = 0; i < k && d[i].status != CUDNN_STATUS_SUCCESS; i++) {}
        if (i == k)
            return sp_error_set(err, SP_EIO, "cudnn: no backward data algorithm for %dx%dx%d",
                                L->cin, L->h, L->w);
        L->bwd_data = d[i].algo;
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            c->dnn, L->xD, L->yD, L->cD, L->wD, 2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &k,
            g));
        for (i = 0; i < k && g[i].status != CUDNN_STATUS_SUCCESS; i++) {}
        if (i == k)
            return sp_error_set(err, SP_EIO, "cudnn: no backward filter algorithm for %dx%dx%d",
                                L->cin, L->h, L->w);
        L->bwd_filter = g[i].algo;
    } else {
        L->fwd = c->cfg.conv_fwd_algo == SP_ALGO_DEFAULT
                     ? CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
                     : (cudnnConvolutionFwdAlgo_t)c->cfg.conv_fwd_algo;
        L->bwd_data = c->cfg.conv_bwd_data_algo == SP_ALGO_DEFAULT
                          ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_1
                          : (cudnnConvolutionBwdDataAlgo_t)c->cfg.conv_bwd_data_algo;
        L->bwd_filter = c->cfg.conv_bwd_filter_algo == SP_ALGO_DEFAULT
                            ? CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1
                            : (cudnnConvolutionBwdFilterAlgo_t)c->cfg.conv_bwd_filter_algo;
        if (c->cfg.strict) {
            int rc = strict_check_dnn(c, L, need_data, err);
            if (rc) return rc;
        }
    }
    size_t s = 0, m = 0;
    DNN(cudnnGetConvolutionForwardWorkspaceSize(c->dnn, L->xD, L->wD, L->cD, L->yD, L->fwd, &s));
    m = s > m ? s : m;
    if (need_data) {
        DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(c->dnn, L->wD, L->yD, L->cD, L->xD,
                                                         L->bwd_data, &s));
        m = s > m ? s : m;
    }
    DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(c->dnn, L->xD, L->yD, L->cD, L->wD,
                                                       L->bwd_filter, &s));
    m = s > m ? s : m;
    if (m > c->dnn_ws_size) {
        if (c->dnn_ws) CU(cudaFree(c->dnn_ws));
        c->dnn_ws = NULL;
        c->dnn_ws_size = 0;
        CU(cudaMalloc(&c->dnn_ws, m));
        c->dnn_ws_size = m;
    }
    return 0;
}

static void free_acts(cuda_ctx *c) {
    float **f[] = {&c->x,      &c->r1,      &c->p1,    &c->r2,  &c->p2,  &c->logits, &c->dlogits,
                   &c->dfeat, &c->dr2,     &c->dp1,   &c->dr1, &c->loss,   &c->dbpart};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (*f[i]) cudaFree(*f[i]);
        *f[i] = NULL;
    }
    if (c->labels) cudaFree(c->labels);
    if (c->pred) cudaFree(c->pred);
    c->labels = c->pred = NULL;
    free(c->h_pred);
    c->h_pred = NULL;
    c->cap = 0;
}

static int ensure_batch(cuda_ctx *c, uint32_t n, sp_error *err) {
    const sp_model_layout *l = &c->l;
    if (n > c->cap) {
        free_acts(c);
        size_t N = n, hw = (size_t)l->in.h * l->in.w, hw1 = (size_t)l->h1 * l->w1,
               K = (size_t)l->in.classes;
        CU(cudaMalloc(&c->x, N * l->in.c * hw * sizeof(float)));
        CU(cudaMalloc(&c->r1, N * SP_MODEL_C1 * hw * sizeof(float)));
        CU(cudaMalloc(&c->dr1, N * SP_MODEL_C1 * hw * sizeof(float)));
        CU(cudaMalloc(&c->p1, N * SP_MODEL_C1 * hw1 * sizeof(float)));
        CU(cudaMalloc(&c->dp1, N * SP_MODEL_C1 * hw1 * sizeof(float)));
        CU(cudaMalloc(&c->r2, N * SP_MODEL_C2 * hw1 * sizeof(float)));
        CU(cudaMalloc(&c->dr2, N * SP_MODEL_C2 * hw1 * sizeof(float)));
        CU(cudaMalloc(&c->p2, N * l->feat * sizeof(float)));
        CU(cudaMalloc(&c->dfeat, N * l->feat * sizeof(float)));
        CU(cudaMalloc(&c->logits, N * K * sizeof(float)));
        CU(cudaMalloc(&c->dlogits, N * K * sizeof(float)));
        CU(cudaMalloc(&c->loss, N * sizeof(float)));
        CU(cudaMalloc(&c->dbpart, N * SP_MODEL_C2 * sizeof(float)));
        CU(cudaMalloc(&c->labels, N * sizeof(int32_t)));
        CU(cudaMalloc(&c->pred, N * sizeof(int32_t)));
        c->h_pred = (int32_t *)malloc(N * sizeof(int32_t));
        if (!c->h_pred) return sp_error_set(err, SP_ENOMEM, "cuda backend: out of memory");
        c->cap = n;
    }
    if ((int)n != c->cur_n) {
        int rc = conv_setup(c, &c->c1, (int)n, 0, err);
        if (rc) return rc;
        rc = conv_setup(c, &c->c2, (int)n, 1, err);
        if (rc) return rc;
        c->cur_n = (int)n;
    }
    return 0;
}

// ---- forward / backward --------------------------------------------------------------

static int forward(cuda_ctx *c, const float *x, const int32_t *labels, uint32_t n, int train,
                   sp_error *err) {
    const sp_model_layout *l = &c->l;
    int rc = ensure_batch(c, n, err);
    if (rc) return rc;
    size_t hw = (size_t)l->in.h * l->in.w, hw1 = (size_t)l->h1 * l->w1;
    int K = l->in.classes, F = (int)l->feat;
    const float one = 1.0f, zero = 0.0f;
    float *P = c->params;
    CU(cudaMemcpyAsync(c->x, x, (size_t)n * l->in.c * hw * sizeof(float), cudaMemcpyHostToDevice,
                       c->stream));
    CU(cudaMemcpyAsync(c->labels, labels, n * sizeof(int32_t), cudaMemcpyHostToDevice, c->stream));
    // conv1 (+ bias, ReLU) -> r1; pool -> p1
    DNN(cudnnConvolutionForward(c->dnn, &one, c->c1.xD, c->x, c->c1.wD, P + l->off[SP_T_CONV1_W],
                                c->c1.cD, c->c1.fwd, c->dnn_ws, c->dnn_ws_size, &zero, c->c1.yD,
                                c->r1));
    long t1 = (long)n * SP_MODEL_C1 * hw;
    sp_k_bias_relu<<<sp_cuda_blocks(t1), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r1, P + l->off[SP_T_CONV1_B], SP_MODEL_C1, (long)hw, t1);
    LAUNCHED(sp_k_bias_relu);
    long o1 = (long)n * SP_MODEL_C1 * hw1;
    sp_k_pool_fwd<<<sp_cuda_blocks(o1), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r1, c->p1, (long)n * SP_MODEL_C1, l->in.h, l->in.w);
    LAUNCHED(sp_k_pool_fwd);
    // conv2 (+ bias, ReLU) -> r2; pool -> p2 (the features, N x F)
    DNN(cudnnConvolutionForward(c->dnn, &one, c->c2.xD, c->p1, c->c2.wD, P + l->off[SP_T_CONV2_W],
                                c->c2.cD, c->c2.fwd, c->dnn_ws, c->dnn_ws_size, &zero, c->c2.yD,
                                c->r2));
    long t2 = (long)n * SP_MODEL_C2 * hw1;
    sp_k_bias_relu<<<sp_cuda_blocks(t2), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r2, P + l->off[SP_T_CONV2_B], SP_MODEL_C2, (long)hw1, t2);
    LAUNCHED(sp_k_bias_relu);
    long o2 = (long)n * F;
    sp_k_pool_fwd<<<sp_cuda_blocks(o2), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r2, c->p2, (long)n * SP_MODEL_C2, l->h1, l->w1);
    LAUNCHED(sp_k_pool_fwd);
    // logits (N x K, row-major) = p2 (N x F) W^T (W: K x F row-major) + b.
    // Column-major view: logits^T (K x N) = W_c^T (K x F) * p2_c (F x N).
    BLAS(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, K, (int)n, F, &one,
                     P + l->off[SP_T_FC_W], F, c->p2, F, &zero, c->logits, K));
    sp_k_add_bias_rows<<<sp_cuda_blocks((long)n * K), SP_CUDA_THREADS, 0, c->stream>>>(
        c->logits, P + l->off[SP_T_FC_B], (int)n, K);
    LAUNCHED(sp_k_add_bias_rows);
    sp_k_softmax_xent<<<sp_cuda_blocks(n), SP_CUDA_THREADS, 0, c->stream>>>(
        c->logits, c->labels, (int)n, K, 1.0f / (float)n, train ? c->dlogits : NULL, c->loss,
        c->pred);
    LAUNCHED(sp_k_softmax_xent);
    sp_k_tree_cols<<<1, 1, 0, c->stream>>>(c->loss, (long)n, 1, 1, (float)n, c->loss1);
    LAUNCHED(sp_k_tree_cols);
    return 0;
}

static int backward_update(cuda_ctx *c, uint32_t n, sp_error *err) {
    const sp_model_layout *l = &c->l;
    size_t hw = (size_t)l->in.h * l->in.w, hw1 = (size_t)l->h1 * l->w1;
    int K = l->in.classes, F = (int)l->feat;
    const float one = 1.0f, zero = 0.0f;
    float *P = c->params, *G = c->grads;
    // fc: dW (K x F row-major) = dlogits^T (K x N) p2 (N x F);
    // column-major: dW_c (F x K) = p2_c (F x N) * dlogits_c^T (N x K).
    BLAS(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, F, K, (int)n, &one, c->p2, F, c->dlogits, K,
                     &zero, G + l->off[SP_T_FC_W], F));
    sp_k_tree_cols<<<sp_cuda_blocks(K), SP_CUDA_THREADS, 0, c->stream>>>(
        c->dlogits, (long)n, K, K, 1.0f, G + l->off[SP_T_FC_B]);
    LAUNCHED(sp_k_tree_cols);
    // dfeat (N x F row-major) = dlogits (N x K) W (K x F);
    // column-major: dfeat_c (F x N) = W_c (F x K) * dlogits_c (K x N).
    BLAS(cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, F, (int)n, K, &one, P + l->off[SP_T_FC_W],
                     F, c->dlogits, K, &zero, c->dfeat, F));
    // pool 2 + ReLU 2 backward -> dr2
    long t2 = (long)n * SP_MODEL_C2 * hw1;
    sp_k_pool_relu_bwd<<<sp_cuda_blocks(t2), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r2, c->dfeat, c->dr2, (long)n * SP_MODEL_C2, l->h1, l->w1);
    LAUNCHED(sp_k_pool_relu_bwd);
    // conv2: bias, filter, data gradients
    sp_k_seq_rows<<<sp_cuda_blocks((long)n * SP_MODEL_C2), SP_CUDA_THREADS, 0, c->stream>>>(
        c->dr2, (long)n * SP_MODEL_C2, (long)hw1, c->dbpart);
    LAUNCHED(sp_k_seq_rows);
    sp_k_tree_cols<<<1, SP_MODEL_C2, 0, c->stream>>>(c->dbpart, (long)n, SP_MODEL_C2, SP_MODEL_C2,
                                                     1.0f, G + l->off[SP_T_CONV2_B]);
    LAUNCHED(sp_k_tree_cols);
    DNN(cudnnConvolutionBackwardFilter(c->dnn, &one, c->c2.xD, c->p1, c->c2.yD, c->dr2, c->c2.cD,
                                       c->c2.bwd_filter, c->dnn_ws, c->dnn_ws_size, &zero,
                                       c->c2.wD, G + l->off[SP_T_CONV2_W]));
    DNN(cudnnConvolutionBackwardData(c->dnn, &one, c->c2.wD, P + l->off[SP_T_CONV2_W], c->c2.yD,
                                     c->dr2, c->c2.cD, c->c2.bwd_data, c->dnn_ws, c->dnn_ws_size,
                                     &zero, c->c2.xD, c->dp1));
    // pool 1 + ReLU 1 backward -> dr1
    long t1 = (long)n * SP_MODEL_C1 * hw;
    sp_k_pool_relu_bwd<<<sp_cuda_blocks(t1), SP_CUDA_THREADS, 0, c->stream>>>(
        c->r1, c->dp1, c->dr1, (long)n * SP_MODEL_C1, l->in.h, l->in.w);
    LAUNCHED(sp_k_pool_relu_bwd);
    sp_k_seq_rows<<<sp_cuda_blocks((long)n * SP_MODEL_C1), SP_CUDA_THREADS, 0, c->stream>>>(
        c->dr1, (long)n * SP_MODEL_C1, (long)hw, c->dbpart);
    LAUNCHED(sp_k_seq_rows);
    sp_k_tree_cols<<<1, SP_MODEL_C1, 0, c->stream>>>(c->dbpart, (long)n, SP_MODEL_C1, SP_MODEL_C1,
                                                     1.0f, G + l->off[SP_T_CONV1_B]);
    LAUNCHED(sp_k_tree_cols);
    DNN(cudnnConvolutionBackwardFilter(c->dnn, &one, c->c1.xD, c->x, c->c1.yD, c->dr1, c->c1.cD,
                                       c->c1.bwd_filter, c->dnn_ws, c->dnn_ws_size, &zero,
                                       c->c1.wD, G + l->off[SP_T_CONV1_W]));
    // SGD over every parameter
    sp_k_sgd<<<sp_cuda_blocks((long)l->nparams), SP_CUDA_THREADS, 0, c->stream>>>(
        P, c->mom, G, (long)l->nparams, c->cfg.lr, c->cfg.momentum, c->cfg.weight_decay);
    LAUNCHED(sp_k_sgd);
    return 0;
}

static int fetch_results(cuda_ctx *c, const int32_t *labels, uint32_t n, float *loss,
                         uint32_t *correct, sp_error *err) {
    CU(cudaMemcpyAsync(loss, c->loss1, sizeof(float), cudaMemcpyDeviceToHost, c->stream));
    CU(cudaMemcpyAsync(c->h_pred, c->pred, n * sizeof(int32_t), cudaMemcpyDeviceToHost,
                       c->stream));
    CU(cudaStreamSynchronize(c->stream));
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) ok += c->h_pred[i] == labels[i];
    *correct = ok;
    return 0;
}

// ---- the backend interface ---------------------------------------------------------------

static void cuda_destroy(void *ctx) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    if (!c) return;
    // Teardown cannot report errors (destroy returns void); each call is
    // still made so nothing leaks when an earlier one failed.
    if (c->stream) {
        cudaSetDevice(c->device);
        cudaStreamSynchronize(c->stream);
    }
    free_acts(c);
    if (c->params) cudaFree(c->params);
    if (c->mom) cudaFree(c->mom);
    if (c->grads) cudaFree(c->grads);
    if (c->loss1) cudaFree(c->loss1);
    if (c->dnn_ws) cudaFree(c->dnn_ws);
    if (c->blas_ws) cudaFree(c->blas_ws);
    conv_destroy(&c->c1);
    conv_destroy(&c->c2);
    if (c->blas) cublasDestroy(c->blas);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

static int cuda_init(cuda_ctx *c, const float *params, const float *momentum, sp_error *err) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        return sp_error_set(err, SP_EIO, "device cuda: no CUDA device (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    if (c->cfg.cuda_device < 0 || c->cfg.cuda_device >= ndev)
        return sp_error_set(err, SP_EINVAL, "device cuda: device %d does not exist (%d present)",
                            c->cfg.cuda_device, ndev);
    c->device = c->cfg.cuda_device;
    CU(cudaSetDevice(c->device));
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, c->device));
    snprintf(c->device_name, sizeof c->device_name, "%.200s (sm_%d%d)", prop.name, prop.major,
             prop.minor);
    CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    DNN(cudnnCreate(&c->dnn));
    DNN(cudnnSetStream(c->dnn, c->stream));
    BLAS(cublasCreate(&c->blas));
    // Order matters: cublasSetStream resets the workspace to the default
    // pool, so the fixed workspace is set after it.
    BLAS(cublasSetStream(c->blas, c->stream));
    CU(cudaMalloc(&c->blas_ws, SP_CUBLAS_WORKSPACE));
    BLAS(cublasSetWorkspace(c->blas, c->blas_ws, SP_CUBLAS_WORKSPACE));
    // strict/default: PEDANTIC (no TF32, no reduced-precision reduction);
    // fast: TF32 allowed (CUBLAS_DEFAULT_MATH alone would not use TF32).
    BLAS(cublasSetMathMode(c->blas,
                           c->cfg.fast ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    BLAS(cublasSetAtomicsMode(c->blas, CUBLAS_ATOMICS_NOT_ALLOWED));
    BLAS(cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    const sp_model_layout *l = &c->l;
    int rc = conv_create(&c->c1, l->in.c, SP_MODEL_C1, l->in.h, l->in.w, err);
    if (!rc) rc = conv_create(&c->c2, SP_MODEL_C1, SP_MODEL_C2, l->h1, l->w1, err);
    if (rc) return rc;
    size_t bytes = l->nparams * sizeof(float);
    CU(cudaMalloc(&c->params, bytes));
    CU(cudaMalloc(&c->mom, bytes));
    CU(cudaMalloc(&c->grads, bytes));
    CU(cudaMalloc(&c->loss1, sizeof(float)));
    // Copies on the trainer's (non-blocking) stream, then a sync: a pageable
    // cudaMemcpy on the legacy stream may return before its DMA is done.
    CU(cudaMemcpyAsync(c->params, params, bytes, cudaMemcpyHostToDevice, c->stream));
    CU(cudaMemcpyAsync(c->mom, momentum, bytes, cudaMemcpyHostToDevice, c->stream));
    CU(cudaStreamSynchronize(c->stream));
    // Check (and, strict, vet) the algorithms once at a nominal batch of 1.
    return ensure_batch(c, 1, err);
}

static int cuda_create(const sp_model_layout *l, const sp_train_config *cfg, const float *params,
                       const float *momentum, void **out, sp_error *err) {
    int rc = check_request(cfg, err);
    if (rc) return rc;
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return sp_error_set(err, SP_ENOMEM, "cuda backend: out of memory");
    c->l = *l;
    c->cfg = *cfg;
    rc = cuda_init(c, params, momentum, err);
    if (rc) {
        cuda_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int cuda_step(void *ctx, const float *x, const int32_t *labels, uint32_t n, float *loss,
                     uint32_t *correct, sp_error *err) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    CU(cudaSetDevice(c->device));   // the calling thread may not be the creating one
    int rc = forward(c, x, labels, n, 1, err);
    if (!rc) rc = backward_update(c, n, err);
    if (!rc) rc = fetch_results(c, labels, n, loss, correct, err);
    return rc;
}

static int cuda_eval(void *ctx, const float *x, const int32_t *labels, uint32_t n,
                     float *loss, uint32_t *correct, sp_error *err) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    CU(cudaSetDevice(c->device));   // the calling thread may not be the creating one
    int rc = forward(c, x, labels, n, 0, err);
    if (!rc) rc = fetch_results(c, labels, n, loss, correct, err);
    return rc;
}

static int cuda_get(void *ctx, float *params, float *momentum, sp_error *err) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    CU(cudaSetDevice(c->device));
    size_t bytes = c->l.nparams * sizeof(float);
    if (params) CU(cudaMemcpyAsync(params, c->params, bytes, cudaMemcpyDeviceToHost, c->stream));
    if (momentum) CU(cudaMemcpyAsync(momentum, c->mom, bytes, cudaMemcpyDeviceToHost, c->stream));
    CU(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cuda_set(void *ctx, const float *params, const float *momentum, sp_error *err) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    CU(cudaSetDevice(c->device));
    size_t bytes = c->l.nparams * sizeof(float);
    if (params) CU(cudaMemcpyAsync(c->params, params, bytes, cudaMemcpyHostToDevice, c->stream));
    if (momentum) CU(cudaMemcpyAsync(c->mom, momentum, bytes, cudaMemcpyHostToDevice, c->stream));
    CU(cudaStreamSynchronize(c->stream));
    return 0;
}

static int cuda_describe(void *ctx, char *buf, size_t size) {
    cuda_ctx *c = (cuda_ctx *)ctx;
    // Versions the calls cannot give are written as 0.0 (never seen in
    // practice: the handles exist once create succeeded).
    int rt = 0, drv = 0, bl = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cublasGetVersion(c->blas, &bl) != CUBLAS_STATUS_SUCCESS) bl = 0;
    size_t dnn = cudnnGetVersion();   // 9.x: major * 10000 + minor * 100 + patch
    return snprintf(
        buf, size,
        "\"backend\":\"cuda\",\"device_name\":\"%s\",\"cuda_runtime\":\"%d.%d\","
        "\"cuda_driver\":\"%d.%d\",\"cudnn\":\"%zu.%zu.%zu\",\"cublas\":\"%d.%d.%d\","
        "\"mode\":\"%s\",\"conv1\":{\"fwd\":\"%s\",\"bwd_filter\":\"%s\"},"
        "\"conv2\":{\"fwd\":\"%s\",\"bwd_data\":\"%s\",\"bwd_filter\":\"%s\"},"
        "\"cudnn_math\":\"%s\",\"cublas_math\":\"%s\",\"cublas_atomics\":\"not allowed\","
        "\"cublas_workspace\":\":4096:8\"",
        c->device_name, rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, dnn / 10000,
        dnn % 10000 / 100, dnn % 100, bl / 10000, bl % 10000 / 100, bl % 100,
        c->cfg.fast ? "fast" : c->cfg.strict ? "strict" : "default", fwd_name(c->c1.fwd),
        bwd_filter_name(c->c1.bwd_filter), fwd_name(c->c2.fwd), bwd_data_name(c->c2.bwd_data),
        bwd_filter_name(c->c2.bwd_filter), c->cfg.fast ? "DEFAULT" : "FMA",
        c->cfg.fast ? "TF32_TENSOR_OP" : "PEDANTIC");
}

extern "C" const sp__nn_backend sp__nn_cuda_backend = {
    "cuda", cuda_create, cuda_destroy, cuda_step, NULL /* no data-parallel step yet */,
    cuda_eval, cuda_get, cuda_set, cuda_describe};

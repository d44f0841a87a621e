// nn_cuda.cuh - the project's own CUDA kernels of the training core.
//
// Everything cuDNN (convolutions) and cuBLAS (the linear layer) do not do:
// bias + ReLU, 2x2 max-pool forward and backward, softmax cross-entropy,
// bias gradients, the batch loss and the SGD update. Only launch geometry
// lives here; every value is computed by the SP_HOSTDEV functions of
// nn_math.h that the CPU reference runs too, so a kernel and the CPU give
// the same bits for the same inputs. No atomics anywhere: each output
// element is written by exactly one thread, and every reduction is the
// fixed tree of nn_math.h run by one thread over its column (the tree
// depends only on the length, never on the launch configuration).
// Max-pool backward is a gather: each input element checks its own window
// (cuDNN's pooling backward is documented non-deterministic, so it is not
// used). Compiled with --fmad=false, so no multiply-add is contracted.
// Shapes are written next to each kernel; NC = batch * channels.
#ifndef SEEDPIPE_NN_CUDA_CUH
#define SEEDPIPE_NN_CUDA_CUH

#include <stdint.h>

#include "train/nn_math.h"

#define SP_CUDA_THREADS 256

static inline unsigned sp_cuda_blocks(long n) {
    return (unsigned)((n + SP_CUDA_THREADS - 1) / SP_CUDA_THREADS);
}

// y (NC x hw): y = relu(y + b[c]), c = (i / hw) % C.
__global__ void sp_k_bias_relu(float *y, const float *b, int C, long hw, long total) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    y[i] = sp_nn_relu(y[i] + b[(i / hw) % C]);
}

// x (NC x h x w) -> y (NC x h/2 x w/2), first maximum of each window.
__global__ void sp_k_pool_fwd(const float *x, float *y, long nc, int h, int w) {
    int ho = h / 2, wo = w / 2;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nc * ho * wo) return;
    long plane = i / ((long)ho * wo);
    int r = (int)(i % ((long)ho * wo));
    int oi = r / wo, oj = r % wo;
    const float *r0 = x + plane * h * w + (long)(2 * oi) * w + 2 * oj, *r1 = r0 + w;
    int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
    y[i] = (a < 2 ? r0 : r1)[a & 1];
}

// Max-pool backward fused with the ReLU before it. x: the pool's input
// (= ReLU output, NC x h x w); dy: NC x h/2 x w/2; dx = relu_grad(x, g),
// g = dy of the window if this element is the window's first maximum.
__global__ void sp_k_pool_relu_bwd(const float *x, const float *dy, float *dx, long nc, int h,
                                   int w) {
    int ho = h / 2, wo = w / 2;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nc * h * w) return;
    long plane = i / ((long)h * w);
    int r = (int)(i % ((long)h * w));
    int ii = r / w, jj = r % w, oi = ii / 2, oj = jj / 2;
    float g = 0.0f;
    if (oi < ho && oj < wo) {
        const float *r0 = x + plane * h * w + (long)(2 * oi) * w + 2 * oj, *r1 = r0 + w;
        int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
        if (a == (ii & 1) * 2 + (jj & 1)) g = dy[plane * ho * wo + (long)oi * wo + oj];
    }
    dx[i] = sp_nn_relu_grad(x[i], g);
}

// logits (N x K) += b.
__global__ void sp_k_add_bias_rows(float *logits, const float *b, int n, int k) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * k) return;
    logits[i] = logits[i] + b[i % k];
}

// One thread per row: loss[r], pred[r], and (dlogits != NULL) dlogits row.
__global__ void sp_k_softmax_xent(const float *logits, const int32_t *labels, int n, int k,
                                  float scale, float *dlogits, float *loss, int32_t *pred) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const float *z = logits + (long)r * k;
    loss[r] = sp_nn_softmax_xent_row(z, k, labels[r], scale, dlogits ? dlogits + (long)r * k : 0);
    pred[r] = sp_nn_argmax(z, k);
}

// out[c] = tree_sum(v + c, n, stride) / div for c < count (fc bias
// gradient: v = dlogits, stride = K, div = 1; batch loss: count 1, div = N).
__global__ void sp_k_tree_cols(const float *v, long n, long stride, long count, float div,
                               float *out) {
    long c = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= count) return;
    out[c] = sp_nn_tree_sum(v + c, n, stride) / div;   // / 1 is exact
}

// Conv bias gradient, stage 1: part[r] = left-to-right sum of dy row r
// (dy: N x C x hw, one row per (sample, channel), r = s*C + c). Stage 2
// is sp_k_tree_cols(part, N, C, C, 1, db): the tree over samples of each
// channel, as the CPU reference (per-sample sum, then the fixed tree).
__global__ void sp_k_seq_rows(const float *dy, long rows, long hw, float *part) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    part[r] = sp_nn_seq_sum(dy + r * hw, hw);
}

// SGD with momentum and weight decay, one parameter per thread.
__global__ void sp_k_sgd(float *w, float *v, const float *g, long n, float lr, float mu, float wd) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sp_nn_sgd_update(&w[i], &v[i], g[i], lr, mu, wd);
}

#endif

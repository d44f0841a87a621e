// graph_cuda.cu - CUDA scatter-add and GCN layer (include/seedpipe/graph.h).
//
// Atomic form: one thread per (edge, feature), atomicAdd into the output
// (the usual scatter_add_; the order of the additions is the hardware's).
// Deterministic form: one thread per (destination, feature) walks its CSR
// row in order with sp_graph_row_term, exactly the CPU's sequence of
// operations; with --fmad=false (CMakeLists.txt) the bits equal the CPU's.
// The linear part: one thread per (node, output) with the same term and
// order as the CPU; the bias is added after the aggregation, as on the CPU.
// Every CUDA call is checked; a failure is SP_EIO naming the call. Part of
// the CUDA plugin (train/cuda_plugin.h): graph.c's sp_graph_cuda_device(),
// sp_gcn_forward_cuda() and sp__scatter_cuda_time() call these through it.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "train/cuda_plugin.h"
#include "seedpipe/graph.h"
#include "train/cuda/cuda_check.cuh"

namespace {

struct dev_bufs {   // frees what it allocated, whatever path leaves
    void *p[16];
    int n = 0;
    ~dev_bufs() {
        for (int i = 0; i < n; i++) cudaFree(p[i]);
    }
    template <typename T>
    cudaError_t alloc(T **out, size_t count) {
        void *q = nullptr;
        cudaError_t e = cudaMalloc(&q, count ? count * sizeof(T) : sizeof(T));
        if (e == cudaSuccess) p[n++] = q;
        *out = (T *)q;
        return e;
    }
};

__global__ void k_linear(const float *x, const float *wt, uint32_t n, uint32_t fin,
                         uint32_t fout, float *h) {
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (uint64_t)n * fout) return;
    uint64_t i = t / fout, o = t % fout;
    float acc = 0.0f;
    for (uint32_t k = 0; k < fin; k++) acc = sp_graph_row_term(acc, x[i * fin + k], wt[o * fin + k]);
    h[t] = acc;
}

__global__ void k_scatter_atomic(const uint32_t *src, const uint32_t *dst, const float *w,
                                 uint64_t m, const float *x, uint32_t f, float *out) {
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m * f) return;
    uint64_t e = t / f, k = t % f;
    float we = w ? w[e] : 1.0f;
    atomicAdd(&out[(uint64_t)dst[e] * f + k], __fmul_rn(we, x[(uint64_t)src[e] * f + k]));
}

__global__ void k_scatter_csr(const uint64_t *rowptr, const uint32_t *col, const float *w,
                              uint32_t n, const float *x, uint32_t f, float *out) {
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (uint64_t)n * f) return;
    uint64_t d = t / f, k = t % f;
    float acc = 0.0f;
    for (uint64_t s = rowptr[d]; s < rowptr[d + 1]; s++)
        acc = sp_graph_row_term(acc, w ? w[s] : 1.0f, x[(uint64_t)col[s] * f + k]);
    out[t] = acc;
}

__global__ void k_bias(float *out, const float *b, uint32_t n, uint32_t f) {
    uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (uint64_t)n * f) return;
    out[t] = out[t] + b[t % f];
}

unsigned blocks(uint64_t threads) { return (unsigned)((threads + 255) / 256); }

}  // namespace

extern "C" int sp__cuda_device(char *name, size_t n) {
    int count = 0;
    if (name && n) name[0] = '\0';
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        return 0;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (count > 0 && name && n) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) snprintf(name, n, "%s", p.name);
    }
    return count;
}

extern "C" int sp__cuda_gcn_forward(const sp_gcn *g, const float *x, sp_scatter_mode mode,
                                    float *out, sp_error *err) {
    dev_bufs b;
    float *dx, *dwt, *db, *dh, *dout, *dw;
    uint32_t *dsrc = nullptr, *ddst = nullptr, *dcol = nullptr;
    uint64_t *drp = nullptr;
    size_t nin = (size_t)g->n * g->fin, nout = (size_t)g->n * g->fout;
    CU(b.alloc(&dx, nin));
    CU(b.alloc(&dwt, (size_t)g->fin * g->fout));
    CU(b.alloc(&db, g->fout));
    CU(b.alloc(&dh, nout));
    CU(b.alloc(&dout, nout));
    CU(b.alloc(&dw, g->m));
    CU(cudaMemcpy(dx, x, nin * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dwt, g->weight, (size_t)g->fin * g->fout * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(db, g->bias, g->fout * sizeof(float), cudaMemcpyHostToDevice));
    k_linear<<<blocks(nout), 256>>>(dx, dwt, g->n, g->fin, g->fout, dh);
    CU(cudaGetLastError());
    if (mode == SP_SCATTER_ATOMIC) {
        CU(b.alloc(&dsrc, g->m));
        CU(b.alloc(&ddst, g->m));
        CU(cudaMemcpy(dsrc, g->src, g->m * sizeof(uint32_t), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(ddst, g->dst, g->m * sizeof(uint32_t), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dw, g->w, g->m * sizeof(float), cudaMemcpyHostToDevice));
        CU(cudaMemset(dout, 0, nout * sizeof(float)));
        k_scatter_atomic<<<blocks(g->m * g->fout), 256>>>(dsrc, ddst, dw, g->m, dh, g->fout, dout);
    } else {
        CU(b.alloc(&drp, (size_t)g->n + 1));
        CU(b.alloc(&dcol, g->m));
        CU(cudaMemcpy(drp, g->csr.rowptr, ((size_t)g->n + 1) * sizeof(uint64_t),
                      cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dcol, g->csr.col, g->m * sizeof(uint32_t), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dw, g->w_csr, g->m * sizeof(float), cudaMemcpyHostToDevice));
        k_scatter_csr<<<blocks(nout), 256>>>(drp, dcol, dw, g->n, dh, g->fout, dout);
    }
    CU(cudaGetLastError());
    k_bias<<<blocks(nout), 256>>>(dout, db, g->n, g->fout);
    CU(cudaGetLastError());
    CU(cudaMemcpy(out, dout, nout * sizeof(float), cudaMemcpyDeviceToHost));
    return SP_OK;
}

extern "C" int sp__cuda_scatter_time(const sp_csr *g, const uint32_t *src, const uint32_t *dst,
                                     uint64_t m, uint32_t f, int reps, double *ms_atomic,
                                     double *ms_det, sp_error *err) {
    dev_bufs b;
    float *dx, *dout;
    uint32_t *dsrc, *ddst, *dcol;
    uint64_t *drp;
    size_t cells = (size_t)g->n * f;
    CU(b.alloc(&dx, cells));
    CU(b.alloc(&dout, cells));
    CU(b.alloc(&dsrc, m));
    CU(b.alloc(&ddst, m));
    CU(b.alloc(&dcol, m));
    CU(b.alloc(&drp, (size_t)g->n + 1));
    CU(cudaMemset(dx, 0, cells * sizeof(float)));
    CU(cudaMemcpy(dsrc, src, m * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(ddst, dst, m * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dcol, g->col, m * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(drp, g->rowptr, ((size_t)g->n + 1) * sizeof(uint64_t), cudaMemcpyHostToDevice));
    cudaEvent_t t0, t1;
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    float ms = 0;
    if (reps < 1) reps = 1;
    for (int form = 0; form < 2; form++) {
        CU(cudaEventRecord(t0));
        for (int r = 0; r < reps; r++) {
            if (form == 0) {
                cudaMemsetAsync(dout, 0, cells * sizeof(float));
                k_scatter_atomic<<<blocks(m * f), 256>>>(dsrc, ddst, nullptr, m, dx, f, dout);
            } else {
                k_scatter_csr<<<blocks(cells), 256>>>(drp, dcol, nullptr, g->n, dx, f, dout);
            }
        }
        CU(cudaEventRecord(t1));
        CU(cudaEventSynchronize(t1));
        CU(cudaGetLastError());
        CU(cudaEventElapsedTime(&ms, t0, t1));
        *(form == 0 ? ms_atomic : ms_det) = ms / reps;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return SP_OK;
}

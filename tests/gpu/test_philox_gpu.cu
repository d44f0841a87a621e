// test_philox_gpu.cu - the same seedpipe/philox.h on the device gives the
// same words as on the host, for 1M counters and the derived stream keys.
// Skips (exit 77) with a message when no CUDA device is present.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "seedpipe/philox.h"

__global__ void draw(sp_key k, uint32_t n, uint32_t *out) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sp_ctr o = sp_sample_draw(k, i & 3u, i >> 2 & 7u, i, 7u);
    for (int j = 0; j < 4; j++) out[4 * (size_t)i + j] = o.c[j];
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    const uint32_t n = 1u << 20;
    sp_key k = sp_rng_key(0x0123456789abcdefull, SP_RNG_AUGMENT);
    uint32_t *d = NULL, *h = (uint32_t *)malloc(16ull * n);
    if (cudaMalloc(&d, 16ull * n) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    draw<<<(n + 255) / 256, 256>>>(k, n, d);
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(h, d, 16ull * n, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("kernel failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        sp_ctr o = sp_sample_draw(k, i & 3u, i >> 2 & 7u, i, 7u);
        for (int j = 0; j < 4; j++)
            if (h[4 * (size_t)i + j] != o.c[j]) {
                printf("mismatch at %u word %d: device %08x host %08x\n", i, j,
                       h[4 * (size_t)i + j], o.c[j]);
                return 1;
            }
    }
    printf("philox device == host for %u blocks\n", n);
    cudaFree(d);
    free(h);
    return 0;
}

/* nn_cpu.c - the CPU reference layers of the training core (one sample, CHW).
 *
 * Loops with a fixed accumulation order (written next to each function in
 * seedpipe/model.h), compiled with -ffp-contract=off so no multiply-add is
 * fused: the same inputs give the same bits with any compiler that honours
 * IEEE-754 single precision. Per-element arithmetic that the CUDA kernels
 * share (ReLU, pool window, softmax row, sums) comes from nn_math.h.
 *
 * HOW THE CONVOLUTIONS WORK: all three passes of a 3x3 convolution are one
 * small matrix product, C[m][n] = C[m][n] + A[m][k] * B[k][n] for k = 0, 1,
 * ..., K-1 in that order, one rounding per * and per + (gemm_acc below):
 *   forward      C = y (cout x hw, set to the bias), A = w (cout x cin*9),
 *                B = im2col(x) (cin*9 x hw): k runs over (c, ky, kx);
 *   weight grad  C = [dw^T; db] (cin*9 + 1 x cout, set to +0), A = [im2col(x);
 *                a row of ones], B = dy^T (hw x cout): k runs over the
 *                pixels (i, j) row-major;
 *   data grad    C = dx (cin x hw, set to +0), A = w^T (cin x cout*9),
 *                B = im2col of dy with flipped taps: k runs over (o, ky, kx).
 * im2col writes 0 where a tap falls outside the plane; that term adds
 * w * 0 = +-0, which leaves every sum here unchanged (no sum is ever -0:
 * it starts at +0 or at a bias that SGD from +0 never makes -0, and a
 * rounded sum is -0 only when both terms are), so the bits are those of
 * the plain loops that leave the padding taps out (tests/test_nn.c checks
 * them), for finite weights and inputs. Likewise the weight gradient adds
 * the terms with dy == 0 instead of skipping them.
 *
 * The product is vectorised along n only: each SIMD lane is one output
 * element C[m][n] and receives exactly the scalar sequence of + and *, so
 * the vector width never changes a bit. x86-64 builds carry an SSE2 (the
 * baseline), an AVX2 and an AVX-512F version and pick the widest the CPU
 * has at run time; SEEDPIPE_ISA=sse2|avx2|avx512 in the environment caps
 * the level (test_isa_levels in tests/test_nn.c runs every level against
 * the plain loops and compares trained weights). None of them uses FMA
 * instructions: a tile of R rows x 2 vectors keeps its sums in registers
 * and does one vector multiply and one vector add per term, which is the
 * non-FMA peak of the core.
 *
 * Cost: per sample of the bench model (3 x 32 x 32 input, classes 6) about
 * 4.5 M multiply-adds in the convolutions: about 12 ms for a batch of 64
 * on one core with AVX-512 (about 15 ms with AVX2, 25 ms with SSE2);
 * scratch: sp__nn_conv3x3_scratch() floats (im2col).
 */
/* The remaining loops are elementwise or fixed-order chains: -O3's
 * vectoriser speeds them up without changing any result (no reassociation
 * without -ffast-math, no contraction with -ffp-contract=off), so this
 * file asks for it whatever the build type. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#pragma GCC optimize("O3")
#endif
#include "seedpipe/model.h"

#include <stdlib.h>
#include <string.h>

#include "common/cpu_internal.h"
#include "train/nn_math.h"
#include "train/train_internal.h"
#include "train/model_internal.h"

/* ---- the matrix product ------------------------------------------------------ */

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define SP_NN_X86 1
#endif

/* C (M x N, row stride ldc) = C + A (M x K, lda) B (K x N, ldb), each
 * element's terms added in k order. A tile of R rows x V vectors of VL
 * lanes stays in registers over the whole k loop. Columns are covered by
 * tiles of 2 vectors, then 1 vector (with twice the rows, to keep enough
 * independent sums in flight), then scalars; rows left over by a tile
 * height go one at a time. Every path gives an element the same sequence
 * of operations. */
#define SP_GEMM_TILE(VT, VL, R, V)                                                               \
    {                                                                                           \
        VT acc[R][V];                                                                           \
        for (int r = 0; r < R; r++)                                                             \
            for (int v = 0; v < V; v++)                                                         \
                memcpy(&acc[r][v], C + (size_t)(m0 + r) * ldc + n0 + v * VL, sizeof(VT));       \
        const float *a = A + (size_t)m0 * lda;                                                  \
        const float *b = B + n0;                                                                \
        for (int k = 0; k < K; k++, b += ldb) {                                                 \
            VT bv[V];                                                                           \
            for (int v = 0; v < V; v++) memcpy(&bv[v], b + v * VL, sizeof(VT));                 \
            for (int r = 0; r < R; r++) {                                                       \
                float s = a[(size_t)r * lda + (size_t)k];                                       \
                for (int v = 0; v < V; v++) acc[r][v] = acc[r][v] + s * bv[v];                  \
            }                                                                                   \
        }                                                                                       \
        for (int r = 0; r < R; r++)                                                             \
            for (int v = 0; v < V; v++)                                                         \
                memcpy(C + (size_t)(m0 + r) * ldc + n0 + v * VL, &acc[r][v], sizeof(VT));       \
    }

#define SP_GEMM_ROWS(VT, VL, R, V)                                                               \
    for (; m0 + R <= M; m0 += R) SP_GEMM_TILE(VT, VL, R, V)

#define SP_GEMM_DEF(NAME, VT, VL, MR, ATTR)                                                      \
    ATTR static void NAME(int M, int N, int K, const float *A, size_t lda, const float *B,      \
                          size_t ldb, float *C, size_t ldc) {                                   \
        int n0 = 0, m0;                                                                         \
        for (; n0 + 2 * VL <= N; n0 += 2 * VL) {                                                \
            m0 = 0;                                                                             \
            SP_GEMM_ROWS(VT, VL, MR, 2);                                                        \
            SP_GEMM_ROWS(VT, VL, 4, 2);                                                         \
            SP_GEMM_ROWS(VT, VL, 2, 2);                                                         \
            SP_GEMM_ROWS(VT, VL, 1, 2);                                                         \
        }                                                                                       \
        for (; n0 + VL <= N; n0 += VL) {                                                        \
            m0 = 0;                                                                             \
            SP_GEMM_ROWS(VT, VL, 2 * MR, 1);                                                    \
            SP_GEMM_ROWS(VT, VL, 4, 1);                                                         \
            SP_GEMM_ROWS(VT, VL, 2, 1);                                                         \
            SP_GEMM_ROWS(VT, VL, 1, 1);                                                         \
        }                                                                                       \
        for (; n0 < N; n0++)                                                                    \
            for (int m = 0; m < M; m++) {                                                       \
                float s = C[(size_t)m * ldc + n0];                                              \
                const float *a = A + (size_t)m * lda;                                           \
                for (int k = 0; k < K; k++) s = s + a[k] * B[(size_t)k * ldb + n0];             \
                C[(size_t)m * ldc + n0] = s;                                                    \
            }                                                                                   \
    }

typedef float sp_v4 __attribute__((vector_size(16)));
SP_GEMM_DEF(gemm_base, sp_v4, 4, 4, )
#ifdef SP_NN_X86
typedef float sp_v8 __attribute__((vector_size(32)));
typedef float sp_v16 __attribute__((vector_size(64)));
SP_GEMM_DEF(gemm_avx2, sp_v8, 8, 4, __attribute__((target("avx2"))))
SP_GEMM_DEF(gemm_avx512, sp_v16, 16, 8, __attribute__((target("avx512f"))))
#endif

/* 0: baseline (SSE2 on x86-64), 1: AVX2, 2: AVX-512F. */
static int nn_isa(void) { return sp__cpu_level(SP__CPU_AVX512F); }

const char *sp__nn_conv_isa(void) {
    static const char *const names[3] = {"sse2", "avx2", "avx512"};
#ifdef SP_NN_X86
    return names[nn_isa()];
#else
    (void)names;
    return "portable";
#endif
}

static void gemm_acc(int M, int N, int K, const float *A, size_t lda, const float *B, size_t ldb,
                     float *C, size_t ldc) {
#ifdef SP_NN_X86
    int isa = nn_isa();
    if (isa == 2) { gemm_avx512(M, N, K, A, lda, B, ldb, C, ldc); return; }
    if (isa == 1) { gemm_avx2(M, N, K, A, lda, B, ldb, C, ldc); return; }
#endif
    gemm_base(M, N, K, A, lda, B, ldb, C, ldc);
}

/* ---- convolution --------------------------------------------------------------- */

/* col[(c * 9 + 3 * ky + kx) * hw + i * w + j] = x[c][i + dy][j + dx] with
 * (dy, dx) = (ky - 1, kx - 1), or (1 - ky, 1 - kx) when flip; 0 outside. */
static void im2col3x3(const float *x, int cin, int h, int w, int flip, float *col) {
    size_t hw = (size_t)h * (size_t)w;
    for (int c = 0; c < cin; c++)
        for (int t = 0; t < 9; t++) {
            int oy = flip ? 1 - t / 3 : t / 3 - 1, ox = flip ? 1 - t % 3 : t % 3 - 1;
            const float *xc = x + (size_t)c * hw;
            float *row = col + ((size_t)c * 9 + (size_t)t) * hw;
            /* columns j with 0 <= j + ox < w: [j0, j1) */
            int j0 = ox < 0 ? -ox : 0, j1 = ox > 0 ? w - ox : w;
            for (int i = 0; i < h; i++) {
                float *r = row + (size_t)i * (size_t)w;
                int ii = i + oy;
                if (ii < 0 || ii >= h || j1 <= j0) {
                    memset(r, 0, (size_t)w * sizeof *r);
                    continue;
                }
                for (int j = 0; j < j0; j++) r[j] = 0.0f;
                memcpy(r + j0, xc + (size_t)ii * (size_t)w + (size_t)(j0 + ox),
                       (size_t)(j1 - j0) * sizeof *r);
                for (int j = j1; j < w; j++) r[j] = 0.0f;
            }
        }
}

size_t sp__nn_conv3x3_scratch(int cin, int h, int w, int cout) {
    size_t hw = (size_t)h * (size_t)w, ci = (size_t)cin, co = (size_t)cout;
    size_t fwd_dw = (ci * 9 + 1) * hw + co * hw + (ci * 9 + 1) * co;   /* col, dy^T, dw^T */
    size_t dx = co * 9 * hw + ci * co * 9;                             /* flipped col, w^T */
    return fwd_dw > dx ? fwd_dw : dx;
}

void sp__nn_conv3x3_forward(const float *x, int cin, int h, int w, const float *wt,
                            const float *bias, int cout, float *y, float *scratch) {
    size_t hw = (size_t)h * (size_t)w, K = (size_t)cin * 9;
    im2col3x3(x, cin, h, w, 0, scratch);
    for (int o = 0; o < cout; o++)
        for (size_t p = 0; p < hw; p++) y[(size_t)o * hw + p] = bias[o];
    gemm_acc(cout, (int)hw, (int)K, wt, K, scratch, hw, y, hw);
}

void sp__nn_conv3x3_backward(const float *x, int cin, int h, int w, const float *wt, int cout,
                             const float *dy, float *dx, float *dw, float *db, float *scratch) {
    size_t hw = (size_t)h * (size_t)w, K = (size_t)cin * 9, co = (size_t)cout;
    /* [dw^T; db] ((K + 1) x cout) = [im2col(x); ones] ((K + 1) x hw) dy^T
     * (hw x cout), summed over the pixels in order from +0. The row of
     * ones makes db[o] = +0 + dy[o][0] + dy[o][1] + ..., exactly
     * sp_nn_seq_sum (1 * v = v), computed alongside. */
    float *col = scratch, *dyt = col + (K + 1) * hw, *dwt = dyt + hw * co;
    im2col3x3(x, cin, h, w, 0, col);
    for (size_t p = 0; p < hw; p++) col[K * hw + p] = 1.0f;
    for (size_t p = 0; p < hw; p++)
        for (size_t o = 0; o < co; o++) dyt[p * co + o] = dy[o * hw + p];
    memset(dwt, 0, (K + 1) * co * sizeof *dwt);
    gemm_acc((int)K + 1, cout, (int)hw, col, hw, dyt, co, dwt, co);
    for (size_t o = 0; o < co; o++) {
        for (size_t k = 0; k < K; k++) dw[o * K + k] = dwt[k * co + o];
        db[o] = dwt[K * co + o];
    }
    if (!dx) return;
    /* dx (cin x hw) = w^T (cin x cout*9) * flipped im2col(dy) (cout*9 x hw). */
    size_t K2 = co * 9;
    float *dcol = scratch, *wtt = dcol + K2 * hw;
    im2col3x3(dy, cout, h, w, 1, dcol);
    for (size_t o = 0; o < co; o++)
        for (size_t c = 0; c < (size_t)cin; c++)
            for (size_t t = 0; t < 9; t++) wtt[c * K2 + o * 9 + t] = wt[(o * (size_t)cin + c) * 9 + t];
    memset(dx, 0, (size_t)cin * hw * sizeof *dx);
    gemm_acc(cin, (int)hw, (int)K2, wtt, K2, dcol, hw, dx, hw);
}

void sp__nn_relu_forward(const float *x, size_t n, float *y) {
    for (size_t i = 0; i < n; i++) y[i] = sp_nn_relu(x[i]);
}

void sp__nn_relu_backward(const float *y, const float *dy, size_t n, float *dx) {
    for (size_t i = 0; i < n; i++) dx[i] = sp_nn_relu_grad(y[i], dy[i]);
}

void sp__nn_maxpool2_forward(const float *x, int c, int h, int w, float *y) {
    int ho = h / 2, wo = w / 2;
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)h * (size_t)w;
        float *yc = y + (size_t)ch * (size_t)ho * (size_t)wo;
        for (int i = 0; i < ho; i++)
            for (int j = 0; j < wo; j++) {
                const float *r0 = xc + (size_t)(2 * i) * (size_t)w + 2 * j, *r1 = r0 + w;
                int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
                yc[(size_t)i * (size_t)wo + j] = (a < 2 ? r0 : r1)[a & 1];
            }
    }
}

void sp__nn_maxpool2_backward(const float *x, int c, int h, int w, const float *dy, float *dx) {
    /* The same values as the CUDA gather (each input checks its window):
     * here each window is checked once and writes its four inputs; the
     * odd last row/column (in no window) gets 0. */
    int ho = h / 2, wo = w / 2;
    memset(dx, 0, (size_t)c * (size_t)h * (size_t)w * sizeof *dx);
    for (int ch = 0; ch < c; ch++) {
        const float *xc = x + (size_t)ch * (size_t)h * (size_t)w;
        const float *dyc = dy + (size_t)ch * (size_t)ho * (size_t)wo;
        float *dxc = dx + (size_t)ch * (size_t)h * (size_t)w;
        for (int i = 0; i < ho; i++)
            for (int j = 0; j < wo; j++) {
                size_t p = (size_t)(2 * i) * (size_t)w + 2 * (size_t)j;
                const float *r0 = xc + p, *r1 = r0 + w;
                int a = sp_nn_pool_argmax(r0[0], r0[1], r1[0], r1[1]);
                dxc[p + (size_t)(a >> 1) * (size_t)w + (size_t)(a & 1)] =
                    dyc[(size_t)i * (size_t)wo + j];
            }
    }
}

void sp__nn_linear_forward(const float *x, int nin, const float *wt, const float *bias, int nout,
                           float *y) {
    /* Four outputs at a time: four independent chains, each in i order. */
    int o = 0;
    for (; o + 4 <= nout; o += 4) {
        const float *w0 = wt + (size_t)o * (size_t)nin, *w1 = w0 + nin, *w2 = w1 + nin,
                    *w3 = w2 + nin;
        float s0 = bias[o], s1 = bias[o + 1], s2 = bias[o + 2], s3 = bias[o + 3];
        for (int i = 0; i < nin; i++) {
            float xi = x[i];
            s0 = s0 + w0[i] * xi;
            s1 = s1 + w1[i] * xi;
            s2 = s2 + w2[i] * xi;
            s3 = s3 + w3[i] * xi;
        }
        y[o] = s0;
        y[o + 1] = s1;
        y[o + 2] = s2;
        y[o + 3] = s3;
    }
    for (; o < nout; o++) {
        const float *wr = wt + (size_t)o * (size_t)nin;
        float s = bias[o];
        for (int i = 0; i < nin; i++) s = s + wr[i] * x[i];
        y[o] = s;
    }
}

void sp__nn_linear_backward(const float *x, int nin, const float *wt, int nout, const float *dy,
                            float *dx, float *dw, float *db) {
    for (int o = 0; dw && o < nout; o++) {
        float g = dy[o];
        float *dwr = dw + (size_t)o * (size_t)nin;
        for (int i = 0; i < nin; i++) dwr[i] = g * x[i];
    }
    for (int o = 0; db && o < nout; o++) db[o] = dy[o];
    if (!dx) return;
    for (int i = 0; i < nin; i++) dx[i] = 0.0f;
    for (int o = 0; o < nout; o++) {
        const float *wr = wt + (size_t)o * (size_t)nin;
        float g = dy[o];
        for (int i = 0; i < nin; i++) dx[i] = dx[i] + wr[i] * g;
    }
}

float sp__nn_softmax_xent(const float *logits, int k, int label, float scale, float *dlogits) {
    return sp_nn_softmax_xent_row(logits, k, label, scale, dlogits);
}

float sp__nn_tree_sum_f(const float *v, long n, long stride) { return sp_nn_tree_sum(v, n, stride); }
double sp__nn_exp_f(double x) { return sp_nn_exp_neg(x); }
double sp__nn_log_f(double x) { return sp_nn_log_pos(x); }

/* augment/write_kernels.c - the output writer's SIMD kernels
 * (write_kernels_internal.h): float32, bfloat16 and float16 values of a
 * 3-channel sample by arithmetic, 16 pixels at a time with AVX-512F, 8 with
 * AVX2 (and FMA, F16C), chosen at run time (common/cpu_internal.h).
 *
 * Each value is (v / 255 - mean) / std with every step rounded to float, as
 * the pipeline's tables hold it (pipeline_spec.c). Each division is a
 * product by the rounded reciprocal corrected once by a fused multiply-add
 * (q = a * r; e = a - q * b, exact; q + e * r), which gives the correctly
 * rounded quotient for these operands; the writer relies on that only
 * after sp__write_prepare() found every one of the 256 values of each
 * table equal, with the same kernel, when the pipeline was built. A block
 * reads its pixels' 3 x N bytes as decoded (pixel-major), computes them in
 * that order (lane j has channel j % 3), then puts them in the output's
 * order (planes for NCHW, mirrored for flip) by permutes. A row's blocks
 * start at its first column where the stores are aligned (column 0 in the
 * pool's slots and sp_batch_alloc()'s batches when a row is a multiple of
 * the block); the columns outside whole blocks are read from the tables.
 * Thread-safe (no state).
 */
#include "augment/write_kernels_internal.h"
#include "common/cpu_internal.h"

#include <stdint.h>

int sp__write_kernel_level(void) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(SP_NO_SIMD)
    int l = sp__cpu_level(SP__CPU_AVX512F);
    if (l == 1 && !sp__cpu_has(SP__CPU_FMA | SP__CPU_F16C)) l = 0;
    return l;
#else
    return 0;
#endif
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(SP_NO_SIMD)
#include <immintrin.h>

/* The first column of a row's output from which a block's stores (sz
 * bytes each, a destination advancing bpp bytes a pixel) are aligned, or
 * -1 where there is none: NCHW planes at different offsets, or no aligned
 * column within one block of n. An unaligned store costs about two. */
static int first_aligned(uint8_t *const *d, int nhwc, size_t sz, size_t bpp, int n) {
    uintptr_t a = (uintptr_t)d[0] & (sz - 1);
    if (!nhwc && (((uintptr_t)d[1] & (sz - 1)) != a || ((uintptr_t)d[2] & (sz - 1)) != a))
        return -1;
    for (int x = 0; x < n; x++)
        if ((a + (uintptr_t)x * bpp) % sz == 0) return x;
    return -1;
}

/* The tables' values of output column x of one row (tab: float32 or
 * 16-bit words, by kind). */
static inline void from_table(const uint8_t *row, int W, int x, int flip, int nhwc, int kind,
                              const void *const *tab, uint8_t *const *d) {
    const uint8_t *s = row + 3 * (size_t)(flip ? W - 1 - x : x);
    for (int c = 0; c < 3; c++) {
        size_t e = nhwc ? 3 * (size_t)x + (size_t)c : (size_t)x;
        uint8_t *q = nhwc ? d[0] : d[c];
        if (kind == SP__WK_F32) ((float *)(void *)q)[e] = ((const float *)tab[c])[s[c]];
        else ((uint16_t *)(void *)q)[e] = ((const uint16_t *)tab[c])[s[c]];
    }
}

/* Row y's destinations d (planes or one interleaved row; blocks of n
 * pixels) and its columns before the first aligned block, written from
 * the tables. Returns the column the blocks start at; *al: whether their
 * stores are aligned (else they start at column 0, unaligned). */
static int row_begin(const sp_image *im, int y, int flip, int nhwc, int kind, int n,
                     const void *const *tab, void *dst, uint8_t **d, int *al) {
    const int W = im->width;
    const size_t es = kind == SP__WK_F32 ? 4 : 2, bpp = (nhwc ? 3 : 1) * es;
    const size_t plane = (size_t)im->height * (size_t)W * es;
    d[0] = (uint8_t *)dst + (size_t)y * (size_t)W * bpp;
    d[1] = nhwc ? d[0] + (size_t)n * es : d[0] + plane;
    d[2] = nhwc ? d[0] + 2 * (size_t)n * es : d[1] + plane;
    int x0 = first_aligned(d, nhwc, (size_t)n * es, bpp, n);
    *al = x0 >= 0 && x0 + n <= W;
    if (!*al) return 0;
    const uint8_t *row = im->data + (size_t)y * im->stride;
    for (int x = 0; x < x0; x++) from_table(row, W, x, flip, nhwc, kind, tab, d);
    return x0;
}

/* ---- AVX-512F: 16 pixels, 48 values in 3 vectors ---- */

/* Vector k (values 16 k .. 16 k + 15) of a block's values, computed:
 *   u = v / 255;  t = u - mean;  x = t / std   (each rounded to float). */
#define SP__F32_RGB16(b, k, out)                                                          \
    do {                                                                                  \
        __m512 v_ = _mm512_cvtepi32_ps(                                                   \
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((b) + 16 * (k)))));    \
        __m512 q_ = _mm512_mul_ps(v_, r255);                                              \
        __m512 t_ = _mm512_sub_ps(_mm512_fmadd_ps(_mm512_fnmadd_ps(q_, c255, v_), r255, q_), \
                                  M##k);                                                  \
        q_ = _mm512_mul_ps(t_, R##k);                                                     \
        out = _mm512_fmadd_ps(_mm512_fnmadd_ps(q_, S##k, t_), R##k, q_);                  \
    } while (0)

/* Output vector k of a block: its 16 values picked from the block's 48
 * (lanes K from the third vector). */
#define SP__F32_PICK(k) \
    _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(f0, I##k, f1), K##k, I##k, f2)

/* 16 values as 16-bit words: bfloat16 (round to nearest even: add 0x7fff
 * plus the kept half's lowest bit, keep the top half; the values are
 * finite) or IEEE binary16 (the conversion instruction, nearest even). */
__attribute__((target("avx512f"))) static inline __m256i to_half16(__m512 v, int kind) {
    if (kind == SP__WK_F16) return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}

/* Store one output vector of a block: 64 bytes of float32 or 32 of
 * 16-bit words; al: aligned, nt: non-temporal (aligned only). */
__attribute__((target("avx512f"))) static inline void put16(uint8_t *q, __m512 v, int kind,
                                                           int al, int nt) {
    if (kind == SP__WK_F32) {
        if (al && nt) _mm512_stream_ps((float *)(void *)q, v);
        else if (al) _mm512_store_ps((float *)(void *)q, v);
        else _mm512_storeu_ps((float *)(void *)q, v);
        return;
    }
    __m256i h = to_half16(v, kind);
    if (al && nt) _mm256_stream_si256((__m256i *)(void *)q, h);
    else if (al) _mm256_store_si256((__m256i *)(void *)q, h);
    else _mm256_storeu_si256((__m256i *)(void *)q, h);
}

/* The output of a 3-channel image (kind: float32, bfloat16 or float16) by
 * SP__F32_RGB16, 16 pixels at a time; each block's 48 values are then put
 * in the output's order (planes for NCHW, mirrored for flip) by two
 * permutes per vector. A row's blocks start where its stores are aligned
 * (at column 0 in the pool's slots and in sp_batch_alloc()'s batches when
 * a row is a multiple of 16 pixels); the columns outside whole blocks are
 * read from the tables. */
__attribute__((target("avx512f"))) static void rgb_avx512(const sp_image *im, int flip, int nhwc,
                                                          int kind, const void *const *tab,
                                                          const float *mean, const float *sd,
                                                          int nt, void *dst) {
    const int H = im->height, W = im->width, ident = nhwc && !flip;
    const size_t bpp = (nhwc ? 3 : 1) * (kind == SP__WK_F32 ? 4 : 2);
    float mv[48], sv[48], rv[48];
    int32_t iv[48];
    for (int j = 0; j < 48; j++) {
        mv[j] = mean[j % 3];
        sv[j] = sd[j % 3];
        rv[j] = 1.0f / sd[j % 3];
        int i = nhwc ? j / 3 : j % 16, c = nhwc ? j % 3 : j / 16;   /* output value j */
        iv[j] = 3 * (flip ? 15 - i : i) + c;                      /* reads value iv[j] */
    }
    const __m512 r255 = _mm512_set1_ps(1.0f / 255.0f), c255 = _mm512_set1_ps(255.0f);
    const __m512 M0 = _mm512_loadu_ps(mv), M1 = _mm512_loadu_ps(mv + 16),
                 M2 = _mm512_loadu_ps(mv + 32);
    const __m512 S0 = _mm512_loadu_ps(sv), S1 = _mm512_loadu_ps(sv + 16),
                 S2 = _mm512_loadu_ps(sv + 32);
    const __m512 R0 = _mm512_loadu_ps(rv), R1 = _mm512_loadu_ps(rv + 16),
                 R2 = _mm512_loadu_ps(rv + 32);
    const __m512i I0 = _mm512_loadu_si512((const void *)iv),
                  I1 = _mm512_loadu_si512((const void *)(iv + 16)),
                  I2 = _mm512_loadu_si512((const void *)(iv + 32)), n32 = _mm512_set1_epi32(32);
    const __mmask16 K0 = _mm512_cmpge_epi32_mask(I0, n32), K1 = _mm512_cmpge_epi32_mask(I1, n32),
                    K2 = _mm512_cmpge_epi32_mask(I2, n32);
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        uint8_t *d[3];
        int al, x = row_begin(im, y, flip, nhwc, kind, 16, tab, dst, d, &al);
        for (; x + 16 <= W; x += 16) {
            const uint8_t *b = row + 3 * (size_t)(flip ? W - 16 - x : x);
            __m512 f0, f1, f2;
            SP__F32_RGB16(b, 0, f0);
            SP__F32_RGB16(b, 1, f1);
            SP__F32_RGB16(b, 2, f2);
            size_t off = (size_t)x * bpp;
            put16(d[0] + off, ident ? f0 : SP__F32_PICK(0), kind, al, nt);
            put16(d[1] + off, ident ? f1 : SP__F32_PICK(1), kind, al, nt);
            put16(d[2] + off, ident ? f2 : SP__F32_PICK(2), kind, al, nt);
        }
        for (; x < W; x++) from_table(row, W, x, flip, nhwc, kind, tab, d);
    }
}

/* ---- AVX2: 8 pixels, 24 values in 3 vectors ---- */

#define SP__RGB8(b, k, out)                                                               \
    do {                                                                                  \
        __m256 v_ = _mm256_cvtepi32_ps(                                                   \
            _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((b) + 8 * (k)))));     \
        __m256 q_ = _mm256_mul_ps(v_, r255);                                              \
        __m256 t_ = _mm256_sub_ps(_mm256_fmadd_ps(_mm256_fnmadd_ps(q_, c255, v_), r255, q_), \
                                  M[k]);                                                  \
        q_ = _mm256_mul_ps(t_, R[k]);                                                     \
        out = _mm256_fmadd_ps(_mm256_fnmadd_ps(q_, S[k], t_), R[k], q_);                  \
    } while (0)

/* Output vector k of a block: lane i is value I[k][i] of the 24, from the
 * vector that holds it (A: from the second, B: from the third). */
__attribute__((target("avx2,fma,f16c"))) static inline __m256 pick8(__m256 f0, __m256 f1,
                                                                   __m256 f2, __m256i I,
                                                                   __m256 A, __m256 B) {
    __m256 r = _mm256_permutevar8x32_ps(f0, I);
    r = _mm256_blendv_ps(r, _mm256_permutevar8x32_ps(f1, I), A);
    return _mm256_blendv_ps(r, _mm256_permutevar8x32_ps(f2, I), B);
}

/* Store one output vector of a block: 32 bytes of float32 or 16 of 16-bit
 * words (bfloat16 by the integer rule of to_half16, float16 by the
 * conversion instruction). */
__attribute__((target("avx2,fma,f16c"))) static inline void put8(uint8_t *q, __m256 v, int kind,
                                                                int al, int nt) {
    if (kind == SP__WK_F32) {
        if (al && nt) _mm256_stream_ps((float *)(void *)q, v);
        else if (al) _mm256_store_ps((float *)(void *)q, v);
        else _mm256_storeu_ps((float *)(void *)q, v);
        return;
    }
    __m128i h;
    if (kind == SP__WK_F16) {
        h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        __m256i u = _mm256_castps_si256(v);
        __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        u = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))),
                              16);
        u = _mm256_permute4x64_epi64(_mm256_packus_epi32(u, u), 0x08);   /* lanes 0, 2 */
        h = _mm256_castsi256_si128(u);
    }
    if (al && nt) _mm_stream_si128((__m128i *)(void *)q, h);
    else if (al) _mm_store_si128((__m128i *)(void *)q, h);
    else _mm_storeu_si128((__m128i *)(void *)q, h);
}

__attribute__((target("avx2,fma,f16c"))) static void rgb_avx2(const sp_image *im, int flip,
                                                              int nhwc, int kind,
                                                              const void *const *tab,
                                                              const float *mean, const float *sd,
                                                              int nt, void *dst) {
    const int H = im->height, W = im->width, ident = nhwc && !flip;
    const size_t bpp = (nhwc ? 3 : 1) * (kind == SP__WK_F32 ? 4 : 2);
    float mv[24], sv[24], rv[24];
    int32_t iv[24], av[24], bv[24];
    for (int j = 0; j < 24; j++) {
        mv[j] = mean[j % 3];
        sv[j] = sd[j % 3];
        rv[j] = 1.0f / sd[j % 3];
        int i = nhwc ? j / 3 : j % 8, c = nhwc ? j % 3 : j / 8;   /* output value j */
        iv[j] = 3 * (flip ? 7 - i : i) + c;                     /* reads value iv[j] */
        av[j] = iv[j] >= 8 && iv[j] < 16 ? -1 : 0;
        bv[j] = iv[j] >= 16 ? -1 : 0;
    }
    const __m256 r255 = _mm256_set1_ps(1.0f / 255.0f), c255 = _mm256_set1_ps(255.0f);
    __m256 M[3], S[3], R[3], A[3], B[3];
    __m256i I[3];
    for (int k = 0; k < 3; k++) {
        M[k] = _mm256_loadu_ps(mv + 8 * k);
        S[k] = _mm256_loadu_ps(sv + 8 * k);
        R[k] = _mm256_loadu_ps(rv + 8 * k);
        I[k] = _mm256_loadu_si256((const __m256i *)(const void *)(iv + 8 * k));
        A[k] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(const void *)(av + 8 * k)));
        B[k] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(const void *)(bv + 8 * k)));
    }
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        uint8_t *d[3];
        int al, x = row_begin(im, y, flip, nhwc, kind, 8, tab, dst, d, &al);
        for (; x + 8 <= W; x += 8) {
            const uint8_t *b = row + 3 * (size_t)(flip ? W - 8 - x : x);
            __m256 f0, f1, f2;
            SP__RGB8(b, 0, f0);
            SP__RGB8(b, 1, f1);
            SP__RGB8(b, 2, f2);
            size_t off = (size_t)x * bpp;
            put8(d[0] + off, ident ? f0 : pick8(f0, f1, f2, I[0], A[0], B[0]), kind, al, nt);
            put8(d[1] + off, ident ? f1 : pick8(f0, f1, f2, I[1], A[1], B[1]), kind, al, nt);
            put8(d[2] + off, ident ? f2 : pick8(f0, f1, f2, I[2], A[2], B[2]), kind, al, nt);
        }
        for (; x < W; x++) from_table(row, W, x, flip, nhwc, kind, tab, d);
    }
}
#endif

void sp__write_rgb(int level, const sp_image *im, int flip, int nhwc, int kind,
                   const void *const *tab, const float *mean, const float *sd, int nt,
                   void *dst) {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(SP_NO_SIMD)
    if (level == 2) rgb_avx512(im, flip, nhwc, kind, tab, mean, sd, nt, dst);
    else if (level == 1) rgb_avx2(im, flip, nhwc, kind, tab, mean, sd, nt, dst);
#else
    (void)level, (void)im, (void)flip, (void)nhwc, (void)kind, (void)tab, (void)mean, (void)sd,
        (void)nt, (void)dst;
#endif
}

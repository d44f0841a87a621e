/* pipeline_write.c - writing one sample's output (pipeline.h, "Output"):
 * the final image as uint8, bfloat16 / float16 or float32 elements, CHW or
 * HWC, each row read mirrored when a horizontal flip is pending. Values
 * are table lookups (pipeline_spec.c builds the tables), so they are exact
 * and the same everywhere. Split from pipeline_run.c, which calls
 * sp__write_output() once per sample, then sp__erase_output() when the
 * pipeline ends with random_erasing ops: they erase a box of the written
 * elements, in the output's own units (after normalize when there is
 * one, as torchvision's RandomErasing after ToTensor / Normalize).
 */
#include "augment/pipeline_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/cpu_internal.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#include "augment/ops_internal.h"
#endif

/* float32 samples at least this large are written with non-temporal
 * stores where they are aligned: a batch of them outgrows a core's
 * caches, and a store that skips the cache neither reads the line it
 * overwrites nor evicts the decoder's data for it (the RandomResizedCrop
 * pipeline ran about 8% faster with them on the development machine,
 * bench/RESULTS.md). Smaller samples stay in the cache for their reader.
 * The stores are fenced before sp__write_output() returns, so they are
 * ordered before whatever publishes the batch. */
#define SP__NT_BYTES ((size_t)128 << 10)

/* float32 -> bfloat16, round to nearest, ties to even (NaN kept a NaN). */
uint16_t sp__to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* float32 -> IEEE binary16, round to nearest, ties to even: overflow to
 * infinity, subnormals through one float addition (which rounds to nearest
 * even in the default rounding mode), normals by rounding the mantissa. */
uint16_t sp__to_f16(float f) {
    const uint32_t infty = 255u << 23, max16 = (127u + 16u) << 23;
    const uint32_t magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint16_t o;
    if (u >= max16) {
        o = u > infty ? 0x7e00 : 0x7c00;
    } else if (u < (113u << 23)) {
        float x, magic;
        memcpy(&x, &u, 4);
        memcpy(&magic, &magic_u, 4);
        x += magic;
        uint32_t r;
        memcpy(&r, &x, 4);
        o = (uint16_t)(r - magic_u);
    } else {
        uint32_t odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
        o = (uint16_t)(u >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

/* uint8 output: the pixels as they are (a copy per row, or mirrored). */
static void write_u8(const sp_image *im, int flip, int nhwc, uint8_t *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        const uint8_t *s = row + (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (nhwc && !flip) {
            memcpy(dst + (size_t)y * (size_t)W * (size_t)C, row, (size_t)W * (size_t)C);
        } else if (nhwc) {
            uint8_t *d = dst + (size_t)y * (size_t)W * (size_t)C;
            for (int x = 0; x < W; x++, s += step, d += C)
                for (int c = 0; c < C; c++) d[c] = s[c];
        } else if (C == 3) {
            uint8_t *d0 = dst + (size_t)y * (size_t)W, *d1 = d0 + plane, *d2 = d1 + plane;
            for (int x = 0; x < W; x++, s += step) {
                d0[x] = s[0];
                d1[x] = s[1];
                d2[x] = s[2];
            }
        } else {
            uint8_t *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = s[c];
        }
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(SP_NO_SIMD)
#include <immintrin.h>
#define SP_WRITE_AVX512 1

/* 16 RGB pixels' 48 float32 values in 3 vectors, as a table gives them:
 *   u = v / 255;  t = u - mean;  x = t / std   (each rounded to float)
 * Each division is a product by the rounded reciprocal corrected once by
 * a fused multiply-add (q = a * r; e = a - q * b exactly; q + e * r),
 * which gives the correctly rounded quotient for these operands; the
 * pipeline checks that claim on all 256 values of each channel when it is
 * built (sp__write_prepare()) and reads its tables where it fails. Lane j
 * of vector k holds value 16 k + j of the pixels as decoded (channel
 * (16 k + j) % 3). */
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

/* The output kinds of the arithmetic path: float32 and the two 16-bit
 * kinds, converted from its float32 values with round to nearest even
 * (the tables' sp__to_bf16() / sp__to_f16() on finite values). */
enum { K_F32, K_BF16, K_F16 };

/* The first column of a row's output from which a block's stores (sz
 * bytes each, a destination advancing bpp bytes a pixel) are aligned, or
 * -1 where there is none: NCHW planes at different offsets, or no aligned
 * column within 16. An unaligned store costs about two. */
static int first_aligned(uint8_t *const *d, int nhwc, size_t sz, size_t bpp) {
    uintptr_t a = (uintptr_t)d[0] & (sz - 1);
    if (!nhwc && (((uintptr_t)d[1] & (sz - 1)) != a || ((uintptr_t)d[2] & (sz - 1)) != a))
        return -1;
    for (int x = 0; x < 16; x++)
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
        if (kind == K_F32) ((float *)(void *)q)[e] = ((const float *)tab[c])[s[c]];
        else ((uint16_t *)(void *)q)[e] = ((const uint16_t *)tab[c])[s[c]];
    }
}

/* 16 values as 16-bit words: bfloat16 (round to nearest even: add 0x7fff
 * plus the kept half's lowest bit, keep the top half; the values are
 * finite) or IEEE binary16 (the conversion instruction, nearest even). */
__attribute__((target("avx512f"))) static inline __m256i to_half16(__m512 v, int kind) {
    if (kind == K_F16) return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}

/* Store one output vector of a block: 64 bytes of float32 or 32 of
 * 16-bit words; al: aligned, nt: non-temporal (aligned only). */
__attribute__((target("avx512f"))) static inline void put16(uint8_t *q, __m512 v, int kind,
                                                           int al, int nt) {
    if (kind == K_F32) {
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
    const size_t es = kind == K_F32 ? 4 : 2, sz = 16 * es, bpp = (nhwc ? 3 : 1) * es;
    const size_t plane = (size_t)H * (size_t)W * es;
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
        d[0] = (uint8_t *)dst + (size_t)y * (size_t)W * bpp;
        d[1] = nhwc ? d[0] + 16 * es : d[0] + plane;
        d[2] = nhwc ? d[0] + 32 * es : d[1] + plane;
        int x0 = first_aligned(d, nhwc, sz, bpp), al = x0 >= 0 && x0 + 16 <= W, x = 0;
        if (!al) x0 = 0;   /* no aligned block: unaligned stores from column 0 */
        for (; x < x0; x++) from_table(row, W, x, flip, nhwc, kind, tab, d);
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
#endif

/* bfloat16 / float16 output: 3 channels by the checked arithmetic
 * (AVX-512), else 16-bit words from the rounded tables, in the same
 * layouts. Returns 1 if non-temporal stores may have been used. */
static int write_half(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                      const sp_run_opts *o, uint16_t *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    int k = o->dtype == SP_DTYPE_FLOAT16, norm = p->has_normalize && !o->skip_normalize;
    const uint16_t *t[3];
    for (int c = 0; c < 3; c++) t[c] = p->half_table[k][norm ? c : 3];
#ifdef SP_WRITE_AVX512
    int kind = k ? K_F16 : K_BF16, nt = plane * (size_t)C * 2 >= SP__NT_BYTES;
    if (C == 3 && (p->out_simd[!norm] >> kind & 1) && sp__cpu_level(SP__CPU_AVX512F) == 2) {
        const void *tab[3] = {t[0], t[1], t[2]};
        rgb_avx512(im, flip, nhwc, kind, tab, p->f32_mean[!norm], p->f32_std[!norm], nt, dst);
        return nt;
    }
#endif
    for (int y = 0; y < H; y++) {
        const uint8_t *s = im->data + (size_t)y * im->stride +
                           (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (nhwc) {
            uint16_t *d = dst + (size_t)y * (size_t)W * (size_t)C;
            for (int x = 0; x < W; x++, s += step, d += C)
                for (int c = 0; c < C; c++) d[c] = t[c][s[c]];
        } else {
            uint16_t *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = t[c][s[c]];
        }
    }
    return 0;
}


/* float32 output: 3 channels by arithmetic with AVX-512 where the pipeline
 * checked that it gives the table's values (out_simd), else through the
 * per-channel tables. Returns 1 if non-temporal stores may have been used. */
static int write_f32(const sp_pipeline *p, const sp_image *im, int flip, int nhwc,
                     const sp_run_opts *o, float *dst) {
    const int H = im->height, W = im->width, C = im->channels;
    const size_t plane = (size_t)H * (size_t)W;
    const ptrdiff_t step = flip ? -(ptrdiff_t)C : (ptrdiff_t)C;
    const float *tab[3];
    int norm = p->has_normalize && !o->skip_normalize;
    for (int c = 0; c < 3; c++) tab[c] = norm ? p->norm_table[c] : p->unit_table;
    int nt = plane * (size_t)C * sizeof(float) >= SP__NT_BYTES;
#ifdef SP_WRITE_AVX512
    if (C == 3 && (p->out_simd[!norm] & 1) && sp__cpu_level(SP__CPU_AVX512F) == 2) {
        const void *tv[3] = {tab[0], tab[1], tab[2]};
        rgb_avx512(im, flip, nhwc, K_F32, tv, p->f32_mean[!norm], p->f32_std[!norm], nt, dst);
        return nt;
    }
#endif
    const float *restrict t0 = tab[0], *restrict t1 = tab[1], *restrict t2 = tab[2];
    for (int y = 0; y < H; y++) {
        const uint8_t *row = im->data + (size_t)y * im->stride;
        const uint8_t *s = row + (flip ? (size_t)(W - 1) * (size_t)C : 0);
        if (C == 1) {
            float *restrict d = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step) d[x] = t0[s[0]];
        } else if (C == 3 && nhwc) {
            float *restrict d = dst + (size_t)y * (size_t)W * 3;
            int x = 0;
#if defined(__SSE2__)
            for (; x + 4 <= W; x += 4, s += 4 * step, d += 12) {
                const uint8_t *p1 = s + step, *p2 = p1 + step, *p3 = p2 + step;
                _mm_storeu_ps(d, _mm_set_ps(t0[p1[0]], t2[s[2]], t1[s[1]], t0[s[0]]));
                _mm_storeu_ps(d + 4, _mm_set_ps(t1[p2[1]], t0[p2[0]], t2[p1[2]], t1[p1[1]]));
                _mm_storeu_ps(d + 8, _mm_set_ps(t2[p3[2]], t1[p3[1]], t0[p3[0]], t2[p2[2]]));
            }
#endif
            for (; x < W; x++, s += step, d += 3) {
                d[0] = t0[s[0]];
                d[1] = t1[s[1]];
                d[2] = t2[s[2]];
            }
        } else if (C == 3) {
            float *d0 = dst + (size_t)y * (size_t)W;
            float *d1 = d0 + plane;
            float *d2 = d1 + plane;
            int x = 0;
#if defined(__SSE2__)
            int al = nt && !(((uintptr_t)d0 | (uintptr_t)d1 | (uintptr_t)d2) & 15);
            for (; x + 4 <= W; x += 4, s += 4 * step) {
                __m128 v0 = _mm_set_ps(t0[s[3 * step]], t0[s[2 * step]], t0[s[step]], t0[s[0]]);
                __m128 v1 = _mm_set_ps(t1[s[3 * step + 1]], t1[s[2 * step + 1]], t1[s[step + 1]], t1[s[1]]);
                __m128 v2 = _mm_set_ps(t2[s[3 * step + 2]], t2[s[2 * step + 2]], t2[s[step + 2]], t2[s[2]]);
                if (al) {
                    _mm_stream_ps(d0 + x, v0);
                    _mm_stream_ps(d1 + x, v1);
                    _mm_stream_ps(d2 + x, v2);
                } else {
                    _mm_storeu_ps(d0 + x, v0);
                    _mm_storeu_ps(d1 + x, v1);
                    _mm_storeu_ps(d2 + x, v2);
                }
            }
#endif
            for (; x < W; x++, s += step) {
                d0[x] = t0[s[0]];
                d1[x] = t1[s[1]];
                d2[x] = t2[s[2]];
            }
        } else {
            float *d0 = dst + (size_t)y * (size_t)W;
            for (int x = 0; x < W; x++, s += step)
                for (int c = 0; c < C; c++) d0[(size_t)c * plane + (size_t)x] = tab[c][s[c]];
        }
    }
#if defined(__SSE2__)
    return nt && C == 3 && !nhwc;
#else
    return 0;
#endif
}

/* Write the output; with flip, each row is read mirrored (a pending hflip).
 * One pass per row, every channel at once: float32 by the checked
 * arithmetic (AVX-512) or through the per-channel table (exact either way;
 * with SSE2 four values are stored at a time, which halves the cost of the
 * table's float32 NCHW case). */
void sp__write_output(const sp_pipeline *p, const sp_image *im, int flip, const sp_run_opts *o,
                      void *out) {
    const int nhwc = o->layout == SP_LAYOUT_NHWC || im->channels == 1;
    if (o->dtype == SP_DTYPE_UINT8) {
        write_u8(im, flip, nhwc, out);
    } else if (o->dtype == SP_DTYPE_BFLOAT16 || o->dtype == SP_DTYPE_FLOAT16
                   ? write_half(p, im, flip, nhwc, o, out)
                   : write_f32(p, im, flip, nhwc, o, out)) {
#if defined(__SSE2__)
        _mm_sfence();   /* the non-temporal stores before anything after */
#endif
    }
}

void sp__write_prepare(sp_pipeline *p) {
    p->out_simd[0] = p->out_simd[1] = 0;
#ifdef SP_WRITE_AVX512
    if (sp__cpu_level(SP__CPU_AVX512F) < 2) return;
    /* Every input value once per channel: pixel v is (v, v, v); the planes
     * aligned, so that every column is computed (none read from a table). */
    uint8_t px[256 * 3];
    _Alignas(64) uint8_t got[3 * 256 * 4];
    for (int v = 0; v < 256; v++) px[3 * v] = px[3 * v + 1] = px[3 * v + 2] = (uint8_t)v;
    sp_image im = {256, 1, 3, sizeof px, px};
    for (int k = 0; k < 2; k++)   /* [0] normalize, [1] v / 255 */
        for (int kind = K_F32; kind <= K_F16; kind++) {
            const void *tab[3];
            for (int c = 0; c < 3; c++)
                tab[c] = kind == K_F32 ? (const void *)(k ? p->unit_table : p->norm_table[c])
                                       : (const void *)p->half_table[kind == K_F16][k ? 3 : c];
            size_t es = kind == K_F32 ? 4 : 2;
            rgb_avx512(&im, 0, 0, kind, tab, p->f32_mean[k], p->f32_std[k], 0, got);
            int same = 1;
            for (int c = 0; c < 3; c++) same &= !memcmp(got + 256 * es * c, tab[c], 256 * es);
            p->out_simd[k] |= same << kind;
        }
#endif
}

/* ---- random_erasing, on the written output ------------------------------------ */

/* One element of value v in the output's dtype at element index e. */
static void put(void *out, sp_dtype t, size_t e, float v) {
    if (t == SP_DTYPE_FLOAT32) ((float *)out)[e] = v;
    else if (t == SP_DTYPE_BFLOAT16) ((uint16_t *)out)[e] = sp__to_bf16(v);
    else if (t == SP_DTYPE_FLOAT16) ((uint16_t *)out)[e] = sp__to_f16(v);
    else ((uint8_t *)out)[e] = (uint8_t)(v >= 255.0f ? 255 : v > 0.0f ? (int)v : 0);
}

/* Erase box b of a W x H x C output: the values are op->value[c] or, for
 * value=random, the normals in (c, y, x) order of the box (torchvision's
 * v tensor of shape [C, h, w]). */
static int erase_box(const sp_op *op, uint32_t k, const sp_sample_ctx *ctx, const sp_crop_box *b,
                     int W, int H, int C, const sp_run_opts *o, void *out) {
    size_t n = (size_t)C * (size_t)b->h * (size_t)b->w, t = 0;
    float *v = NULL;
    if (op->erase_random && n) {
        if (!(v = malloc(n * sizeof *v))) return SP_ENOMEM;
        sp__erasing_normals(ctx->k_augment, k, ctx->sample, ctx->epoch, n, v);
    }
    int nhwc = o->layout == SP_LAYOUT_NHWC || C == 1;
    for (int c = 0; c < C; c++)
        for (int y = b->y; y < b->y + b->h; y++)
            for (int x = b->x; x < b->x + b->w; x++, t++) {
                size_t e = nhwc ? ((size_t)y * (size_t)W + (size_t)x) * (size_t)C + (size_t)c
                                : ((size_t)c * (size_t)H + (size_t)y) * (size_t)W + (size_t)x;
                put(out, o->dtype, e, v ? v[t] : (float)op->value[c]);
            }
    free(v);
    return SP_OK;
}

int sp__erase_output(const sp_pipeline *p, const sp_sample_ctx *ctx, int W, int H, int C,
                     const sp_run_opts *o, void *out) {
    for (int k = 0; k < p->nops; k++) {
        const sp_op *op = &p->ops[k];
        if (op->desc != &sp__op_random_erasing) continue;
        sp_ctr d = sp_sample_draw(ctx->k_augment, 0, (uint32_t)k, ctx->sample, ctx->epoch);
        if (!(sp_u01d(d.c[0]) < op->p)) continue;
        sp_crop_box b;
        if (!sp__erasing_sample(W, H, op->scale[0], op->scale[1], op->ratio[0], op->ratio[1],
                               ctx->k_augment, (uint32_t)k, ctx->sample, ctx->epoch, &b))
            continue;
        int rc = erase_box(op, (uint32_t)k, ctx, &b, W, H, C, o, out);
        if (rc) return rc;
    }
    return SP_OK;
}

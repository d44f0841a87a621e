/* resize.c - separable antialiased resampling in fixed point (ops.h).
 *
 * The same algorithm as PIL's ImagingResample with the bilinear (triangle)
 * or the bicubic (Keys, a = -0.5, support 2) filter, which torchvision's
 * antialias=True reproduces: on downscale the filter support widens by the
 * scale factor, so every source pixel contributes (no aliasing). The
 * bicubic weights can be negative, so each pass clamps its 8-bit result
 * to 0..255 (PIL's clip8; a bilinear sum never needs it). The weights are
 * computed per call in double from + - * / only (a fixed order, no libm),
 * quantised to Q14 and corrected so each kernel sums to exactly 1 << 14
 * (resize_kernel.c); all pixel arithmetic is integer, so the bytes are
 * identical on every platform. The exact rules are in
 * include/seedpipe/ops.h and docs/pipeline.md.
 *
 * HOW IT WORKS: kernels for the output window's columns and rows are built
 * first. Output rows are then produced in blocks of 16: each block row's
 * vertical pass runs contiguously over the source bytes the horizontal
 * kernels need (16, 32 or 64 bytes at a time, two taps per pmaddwd:
 * 8-bit values and Q14 weights are int16, their products summed exactly
 * in int32); the 16 rows are transposed (16 x 16 byte blocks) so that
 * value i of block row r is at T[i * 16 + r], the horizontal pass computes
 * the 16 rows of a block at once in the same way, and its result is
 * transposed back into the output rows. When no horizontal resampling is
 * needed the horizontal pass is a copy, and rows whose vertical kernel is
 * a single tap are read straight from the source. SSE2 is the x86-64
 * baseline; AVX2 / AVX-512BW versions of the hot loops are chosen at run
 * time; other targets use plain scalar loops. Every version computes the
 * same integer sums (each 128-bit lane does exactly what the SSE2 code
 * does) and the same clamp (the saturating packs are clip8), so the bytes
 * never depend on the instruction set, nor on SIMD at all.
 * SEEDPIPE_ISA=sse2|avx2|avx512 in the environment caps the level at run
 * time (tests/test_resize_isa.c compares them). Building with -DSP_NO_SIMD
 * selects the scalar code, -DSP_FORCE_ISA=0/1/2 pins the x86 level. Scratch memory: kernels + 16 rows + their
 * transposes.
 *
 * Cost (one core, x86-64 with AVX-512, 370x275 -> 224x224 RGB): about
 * 0.1 ms (SSE2 only: about 0.18 ms).
 */
#include "augment/resize_internal.h"
#include "common/cpu_internal.h"

#include <stdlib.h>
#include <string.h>
#include "augment/ops_internal.h"
#include "common/common_internal.h"

typedef sp__rs_kernel kernel;
typedef sp__rs_axis axis;

/* A pass's sum of Q14 products -> its byte: (s >> 14) clamped to 0..255
 * (PIL's clip8). Only negative (bicubic) weights can leave the range. */
static inline uint8_t clip8(int32_t s) {
    if (s < 0) return 0;
    s >>= SP_RESIZE_BITS;
    return (uint8_t)(s > 255 ? 255 : s);
}

/* Horizontal copy of one row when every horizontal kernel is a single tap
 * (no horizontal resampling): `in` holds plane columns [lo, ...). */
static void hcopy(const axis *ax, const uint8_t *in, int lo, int c, uint8_t *out, int wn) {
    if (ax->contig) {
        memcpy(out, in + (size_t)(ax->k[0].start - lo) * (size_t)c, (size_t)wn * (size_t)c);
        return;
    }
    for (int i = 0; i < wn; i++) {
        const uint8_t *p = in + (size_t)(ax->k[i].start - lo) * (size_t)c;
        for (int ch = 0; ch < c; ch++) out[(size_t)i * (size_t)c + (size_t)ch] = p[ch];
    }
}

/* Weights of kernel i as pairs of int16 packed in an int32 (low half: the
 * even tap), the tap count rounded up to even with a zero weight: the
 * layout of SSE2's pmaddwd, which computes w0 * a0 + w1 * a1 exactly in
 * 32 bits (Q14 weights and 8-bit values fit in int16: a bicubic weight,
 * renormalised where the plane's edge truncates its kernel, stays within
 * about -0.13 .. 1.13 of 16384, since b0 >= 0 keeps the centre tap). */
static int pack_pairs(const axis *a, int wn, uint32_t **out, int *pstride) {
    int ps = (a->ksize + 1) / 2;
    uint32_t *p = malloc((size_t)wn * (size_t)ps * sizeof *p);
    if (!p) return SP_ENOMEM;
    for (int i = 0; i < wn; i++) {
        const int32_t *w = a->w + (size_t)i * (size_t)a->ksize;
        int n = a->k[i].n;
        for (int t = 0; t < n; t += 2) {
            uint32_t w0 = (uint16_t)w[t], w1 = t + 1 < n ? (uint16_t)w[t + 1] : 0;
            p[(size_t)i * (size_t)ps + (size_t)(t / 2)] = w0 | (w1 << 16);
        }
    }
    *out = p;
    *pstride = ps;
    return SP_OK;
}

/* Scalar vertical pass of one output row over bytes [i, len):
 *   o[i] = (sum_t w[t] * rows[t][i] + 2^13) >> 14. */
static void vrow_tail(const uint8_t *const *rows, const int32_t *w, int n, size_t i, size_t len,
                      uint8_t *o) {
    const int32_t round = 1 << (SP_RESIZE_BITS - 1);
    for (; i < len; i++) {
        int32_t s = round;
        for (int t = 0; t < n; t++) s += w[t] * rows[t][i];
        o[i] = clip8(s);
    }
}

#if defined(__SSE2__) && !defined(SP_NO_SIMD)
#include <emmintrin.h>

/* 16 lanes of 32-bit sums += pmaddwd of the byte pairs (x[j], y[j]). */
#define SP_MADD16(a0, a1, a2, a3, x, y, wv)                                              \
    do {                                                                                 \
        const __m128i z_ = _mm_setzero_si128();                                          \
        __m128i lo_ = _mm_unpacklo_epi8((x), (y)), hi_ = _mm_unpackhi_epi8((x), (y));    \
        a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo_, z_), (wv)));       \
        a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo_, z_), (wv)));       \
        a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi_, z_), (wv)));       \
        a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi_, z_), (wv)));       \
    } while (0)

/* The 16 values clip8(sum) as bytes: sum >> 14 (arithmetic), then the
 * signed-saturating pack to int16 and the unsigned-saturating pack to
 * uint8 clamp it to 0..255 exactly as clip8() does (a bilinear sum never
 * leaves the range; a bicubic one can, by its negative lobes). */
static inline __m128i pack16(__m128i a0, __m128i a1, __m128i a2, __m128i a3) {
    a0 = _mm_srai_epi32(a0, SP_RESIZE_BITS);
    a1 = _mm_srai_epi32(a1, SP_RESIZE_BITS);
    a2 = _mm_srai_epi32(a2, SP_RESIZE_BITS);
    a3 = _mm_srai_epi32(a3, SP_RESIZE_BITS);
    return _mm_packus_epi16(_mm_packs_epi32(a0, a1), _mm_packs_epi32(a2, a3));
}

/* Wider versions of the same kernels for CPUs that have AVX2 / AVX-512BW,
 * chosen at run time (common/cpu_internal.h). Their lane-wise unpack,
 * pmaddwd and pack steps are those of the SSE2 code per 128-bit lane, so
 * every value is the same exact integer sum. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define SP_ISA_MULTI 1

__attribute__((target("avx2"))) static size_t vrow_avx2(const uint8_t *const *rows,
                                                        const uint32_t *wp, int n, size_t len,
                                                        uint8_t *o) {
    const __m256i rnd = _mm256_set1_epi32(1 << (SP_RESIZE_BITS - 1)), z = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        __m256i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        for (int t = 0; t < n; t += 2) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(rows[t] + i));
            __m256i y = _mm256_loadu_si256((const __m256i *)(rows[t + 1] + i));
            __m256i wv = _mm256_set1_epi32((int)wp[t / 2]);
            __m256i lo = _mm256_unpacklo_epi8(x, y), hi = _mm256_unpackhi_epi8(x, y);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, z), wv));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, z), wv));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, z), wv));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, z), wv));
        }
        a0 = _mm256_srai_epi32(a0, SP_RESIZE_BITS);   /* packs clamp: pack16 */
        a1 = _mm256_srai_epi32(a1, SP_RESIZE_BITS);
        a2 = _mm256_srai_epi32(a2, SP_RESIZE_BITS);
        a3 = _mm256_srai_epi32(a3, SP_RESIZE_BITS);
        _mm256_storeu_si256((__m256i *)(o + i),
                            _mm256_packus_epi16(_mm256_packs_epi32(a0, a1),
                                                _mm256_packs_epi32(a2, a3)));
    }
    return i;
}

__attribute__((target("avx512bw"))) static size_t vrow_avx512(const uint8_t *const *rows,
                                                              const uint32_t *wp, int n,
                                                              size_t len, uint8_t *o) {
    const __m512i rnd = _mm512_set1_epi32(1 << (SP_RESIZE_BITS - 1)), z = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= len; i += 64) {
        __m512i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        for (int t = 0; t < n; t += 2) {
            __m512i x = _mm512_loadu_si512((const void *)(rows[t] + i));
            __m512i y = _mm512_loadu_si512((const void *)(rows[t + 1] + i));
            __m512i wv = _mm512_set1_epi32((int)wp[t / 2]);
            __m512i lo = _mm512_unpacklo_epi8(x, y), hi = _mm512_unpackhi_epi8(x, y);
            a0 = _mm512_add_epi32(a0, _mm512_madd_epi16(_mm512_unpacklo_epi8(lo, z), wv));
            a1 = _mm512_add_epi32(a1, _mm512_madd_epi16(_mm512_unpackhi_epi8(lo, z), wv));
            a2 = _mm512_add_epi32(a2, _mm512_madd_epi16(_mm512_unpacklo_epi8(hi, z), wv));
            a3 = _mm512_add_epi32(a3, _mm512_madd_epi16(_mm512_unpackhi_epi8(hi, z), wv));
        }
        a0 = _mm512_srai_epi32(a0, SP_RESIZE_BITS);
        a1 = _mm512_srai_epi32(a1, SP_RESIZE_BITS);
        a2 = _mm512_srai_epi32(a2, SP_RESIZE_BITS);
        a3 = _mm512_srai_epi32(a3, SP_RESIZE_BITS);
        _mm512_storeu_si512((void *)(o + i),
                            _mm512_packus_epi16(_mm512_packs_epi32(a0, a1),
                                                _mm512_packs_epi32(a2, a3)));
    }
    return i;
}

/* hblock for 3 channels: the 48 bytes of a plane column (3 channels x 16
 * rows) in one masked 512-bit vector. */
__attribute__((target("avx512bw"))) static void hblock3_avx512(const axis *ax, const uint32_t *wp,
                                                               int ps, const uint8_t *T,
                                                               uint8_t *O, int wn) {
    const __m512i rnd = _mm512_set1_epi32(1 << (SP_RESIZE_BITS - 1)), z = _mm512_setzero_si512();
    const __mmask64 m48 = 0xffffffffffffull;
    for (int i = 0; i < wn; i++) {
        const kernel *k = &ax->k[i];
        const uint32_t *w = wp + (size_t)i * (size_t)ps;
        const uint8_t *p = T + (size_t)(k->start - ax->lo) * 48;
        __m512i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        for (int t = 0; t < k->n; t += 2) {
            __m512i x = _mm512_maskz_loadu_epi8(m48, p + (size_t)t * 48);
            __m512i y = _mm512_maskz_loadu_epi8(m48, p + (size_t)(t + 1) * 48);
            __m512i wv = _mm512_set1_epi32((int)w[t / 2]);
            __m512i lo = _mm512_unpacklo_epi8(x, y), hi = _mm512_unpackhi_epi8(x, y);
            a0 = _mm512_add_epi32(a0, _mm512_madd_epi16(_mm512_unpacklo_epi8(lo, z), wv));
            a1 = _mm512_add_epi32(a1, _mm512_madd_epi16(_mm512_unpackhi_epi8(lo, z), wv));
            a2 = _mm512_add_epi32(a2, _mm512_madd_epi16(_mm512_unpacklo_epi8(hi, z), wv));
            a3 = _mm512_add_epi32(a3, _mm512_madd_epi16(_mm512_unpackhi_epi8(hi, z), wv));
        }
        a0 = _mm512_srai_epi32(a0, SP_RESIZE_BITS);
        a1 = _mm512_srai_epi32(a1, SP_RESIZE_BITS);
        a2 = _mm512_srai_epi32(a2, SP_RESIZE_BITS);
        a3 = _mm512_srai_epi32(a3, SP_RESIZE_BITS);
        _mm512_mask_storeu_epi8(O + (size_t)i * 48, m48,
                                _mm512_packus_epi16(_mm512_packs_epi32(a0, a1),
                                                    _mm512_packs_epi32(a2, a3)));
    }
}

/* In-lane 16 x 16 byte transposes of four 128-bit lanes at once (the
 * stages of tr16 below). */
#define SP_TR16_512(r)                                                                 \
    do {                                                                               \
        __m512i s_[16], u_[16];                                                        \
        for (int p_ = 0; p_ < 8; p_++) {                                               \
            s_[p_] = _mm512_unpacklo_epi8(r[2 * p_], r[2 * p_ + 1]);                   \
            s_[8 + p_] = _mm512_unpackhi_epi8(r[2 * p_], r[2 * p_ + 1]);               \
        }                                                                              \
        for (int h_ = 0; h_ < 2; h_++)                                                 \
            for (int q_ = 0; q_ < 4; q_++) {                                           \
                u_[h_ * 8 + q_] =                                                      \
                    _mm512_unpacklo_epi16(s_[h_ * 8 + 2 * q_], s_[h_ * 8 + 2 * q_ + 1]); \
                u_[h_ * 8 + 4 + q_] =                                                  \
                    _mm512_unpackhi_epi16(s_[h_ * 8 + 2 * q_], s_[h_ * 8 + 2 * q_ + 1]); \
            }                                                                          \
        for (int Q_ = 0; Q_ < 4; Q_++)                                                 \
            for (int g_ = 0; g_ < 2; g_++) {                                           \
                s_[Q_ * 4 + g_] =                                                      \
                    _mm512_unpacklo_epi32(u_[Q_ * 4 + 2 * g_], u_[Q_ * 4 + 2 * g_ + 1]); \
                s_[Q_ * 4 + 2 + g_] =                                                  \
                    _mm512_unpackhi_epi32(u_[Q_ * 4 + 2 * g_], u_[Q_ * 4 + 2 * g_ + 1]); \
            }                                                                          \
        for (int E_ = 0; E_ < 8; E_++) {                                               \
            r[2 * E_] = _mm512_unpacklo_epi64(s_[2 * E_], s_[2 * E_ + 1]);             \
            r[2 * E_ + 1] = _mm512_unpackhi_epi64(s_[2 * E_], s_[2 * E_ + 1]);         \
        }                                                                              \
    } while (0)

/* to_columns for the first multiple of 64 bytes; returns how many. */
__attribute__((target("avx512bw"))) static size_t to_columns_avx512(const uint8_t *R, size_t rs,
                                                                    size_t len, uint8_t *T) {
    size_t i = 0;
    for (; i + 64 <= len; i += 64) {
        __m512i v[16];
        for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512((const void *)(R + r * rs + i));
        SP_TR16_512(v);   /* v[j] lane L: column i + 16 L + j */
        for (int j = 0; j < 16; j++) {
            uint8_t *t = T + (i + (size_t)j) * 16;
            _mm_storeu_si128((__m128i *)t, _mm512_castsi512_si128(v[j]));
            _mm_storeu_si128((__m128i *)(t + 256), _mm512_extracti32x4_epi32(v[j], 1));
            _mm_storeu_si128((__m128i *)(t + 512), _mm512_extracti32x4_epi32(v[j], 2));
            _mm_storeu_si128((__m128i *)(t + 768), _mm512_extracti32x4_epi32(v[j], 3));
        }
    }
    return i;
}

/* from_columns for the first multiple of 64 columns; returns how many. */
__attribute__((target("avx512bw"))) static size_t from_columns_avx512(const uint8_t *O, size_t m,
                                                                      uint8_t *out,
                                                                      size_t ostride, int nr) {
    size_t i = 0;
    for (; i + 64 <= m; i += 64) {
        __m512i v[16];
        for (int j = 0; j < 16; j++) {
            const uint8_t *o = O + (i + (size_t)j) * 16;
            __m512i x = _mm512_castsi128_si512(_mm_load_si128((const __m128i *)o));
            x = _mm512_inserti32x4(x, _mm_load_si128((const __m128i *)(o + 256)), 1);
            x = _mm512_inserti32x4(x, _mm_load_si128((const __m128i *)(o + 512)), 2);
            v[j] = _mm512_inserti32x4(x, _mm_load_si128((const __m128i *)(o + 768)), 3);
        }
        SP_TR16_512(v);   /* v[r]: row r, columns i .. i + 63 */
        for (int r = 0; r < nr; r++) _mm512_storeu_si512((void *)(out + (size_t)r * ostride + i), v[r]);
    }
    return i;
}

/* 0: SSE2, 1: AVX2, 2: AVX-512BW. */
static int resize_isa(void) {
#ifdef SP_FORCE_ISA   /* testing: force a level */
    return SP_FORCE_ISA;
#endif
    /* The CPU's level for these loops (AVX-512BW), capped by SEEDPIPE_ISA. */
    return sp__cpu_level(SP__CPU_AVX512BW);
}
#endif

/* Vertical pass of one output row (rows has n rounded up to even entries,
 * the pad entry any valid row: its weight is 0). */
static void vrow(const uint8_t *const *rows, const int32_t *w, const uint32_t *wp, int n,
                 size_t len, uint8_t *o, int isa) {
    if (n == 1) {   /* weight 2^14: (2^14 a + 2^13) >> 14 = a */
        memcpy(o, rows[0], len);
        return;
    }
    const __m128i rnd = _mm_set1_epi32(1 << (SP_RESIZE_BITS - 1));
    size_t i = 0;
#ifdef SP_ISA_MULTI
    if (isa == 2) i = vrow_avx512(rows, wp, n, len, o);
    else if (isa == 1) i = vrow_avx2(rows, wp, n, len, o);
#else
    (void)isa;
#endif
    for (; i + 16 <= len; i += 16) {
        __m128i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
        for (int t = 0; t < n; t += 2) {
            __m128i x = _mm_loadu_si128((const __m128i *)(rows[t] + i));
            __m128i y = _mm_loadu_si128((const __m128i *)(rows[t + 1] + i));
            __m128i wv = _mm_set1_epi32((int)wp[t / 2]);
            SP_MADD16(a0, a1, a2, a3, x, y, wv);
        }
        _mm_storeu_si128((__m128i *)(o + i), pack16(a0, a1, a2, a3));
    }
    vrow_tail(rows, w, n, i, len, o);
}

/* Transpose a 16 x 16 byte block in place: r[i] byte j -> r[j] byte i. */
static inline void tr16(__m128i r[16]) {
    __m128i s[16], u[16];
    for (int p = 0; p < 8; p++) {
        s[p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
        s[8 + p] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
    }
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 4; q++) {
            u[h * 8 + q] = _mm_unpacklo_epi16(s[h * 8 + 2 * q], s[h * 8 + 2 * q + 1]);
            u[h * 8 + 4 + q] = _mm_unpackhi_epi16(s[h * 8 + 2 * q], s[h * 8 + 2 * q + 1]);
        }
    for (int Q = 0; Q < 4; Q++)
        for (int g = 0; g < 2; g++) {
            s[Q * 4 + g] = _mm_unpacklo_epi32(u[Q * 4 + 2 * g], u[Q * 4 + 2 * g + 1]);
            s[Q * 4 + 2 + g] = _mm_unpackhi_epi32(u[Q * 4 + 2 * g], u[Q * 4 + 2 * g + 1]);
        }
    for (int E = 0; E < 8; E++) {
        r[2 * E] = _mm_unpacklo_epi64(s[2 * E], s[2 * E + 1]);
        r[2 * E + 1] = _mm_unpackhi_epi64(s[2 * E], s[2 * E + 1]);
    }
}

/* 16 rows of `len` bytes (rows r at R + r * rs, readable up to a multiple
 * of 16) -> T, value i of row r at T[i * 16 + r]. */
static void to_columns(const uint8_t *R, size_t rs, size_t len, uint8_t *T, int isa) {
    size_t i = 0;
#ifdef SP_ISA_MULTI
    if (isa == 2) i = to_columns_avx512(R, rs, len, T);
#else
    (void)isa;
#endif
    for (; i < len; i += 16) {
        __m128i v[16];
        for (int r = 0; r < 16; r++) v[r] = _mm_loadu_si128((const __m128i *)(R + r * rs + i));
        tr16(v);
        for (int j = 0; j < 16; j++) _mm_storeu_si128((__m128i *)(T + (i + j) * 16), v[j]);
    }
}

/* Horizontal pass of a block: T holds HB = 16 vertical rows as columns
 * (plane column x, channel ch at T[((x - lo) * c + ch) * 16 + r], one
 * readable pad column after the last); writes O[(i * c + ch) * 16 + r]. */
static void hblock(const axis *ax, const uint32_t *wp, int ps, const uint8_t *T, int c,
                   uint8_t *O, int wn) {
    const __m128i rnd = _mm_set1_epi32(1 << (SP_RESIZE_BITS - 1));
    const size_t step = (size_t)c * 16;
    for (int i = 0; i < wn; i++) {
        const kernel *k = &ax->k[i];
        const uint32_t *w = wp + (size_t)i * (size_t)ps;
        const uint8_t *p0 = T + (size_t)(k->start - ax->lo) * step;
        for (int ch = 0; ch < c; ch++) {
            const uint8_t *p = p0 + (size_t)ch * 16;
            __m128i a0 = rnd, a1 = rnd, a2 = rnd, a3 = rnd;
            for (int t = 0; t < k->n; t += 2) {
                __m128i x = _mm_load_si128((const __m128i *)(p + (size_t)t * step));
                __m128i y = _mm_load_si128((const __m128i *)(p + (size_t)(t + 1) * step));
                __m128i wv = _mm_set1_epi32((int)w[t / 2]);
                SP_MADD16(a0, a1, a2, a3, x, y, wv);
            }
            _mm_store_si128((__m128i *)(O + ((size_t)i * (size_t)c + (size_t)ch) * 16),
                            pack16(a0, a1, a2, a3));
        }
    }
}

/* O (m columns of 16 rows) -> the first nr rows of out. */
static void from_columns(const uint8_t *O, size_t m, uint8_t *out, size_t ostride, int nr,
                         int isa) {
    size_t i = 0;
#ifdef SP_ISA_MULTI
    if (isa == 2) i = from_columns_avx512(O, m, out, ostride, nr);
#else
    (void)isa;
#endif
    for (; i + 16 <= m; i += 16) {
        __m128i v[16];
        for (int j = 0; j < 16; j++) v[j] = _mm_load_si128((const __m128i *)(O + (i + j) * 16));
        tr16(v);
        for (int r = 0; r < nr; r++) _mm_storeu_si128((__m128i *)(out + (size_t)r * ostride + i), v[r]);
    }
    for (; i < m; i++)
        for (int r = 0; r < nr; r++) out[(size_t)r * ostride + i] = O[i * 16 + (size_t)r];
}
#define SP_HB 16
#else  /* portable scalar code: the same arithmetic */
static void vrow(const uint8_t *const *rows, const int32_t *w, const uint32_t *wp, int n,
                 size_t len, uint8_t *o, int isa) {
    (void)wp;
    (void)isa;
    vrow_tail(rows, w, n, 0, len, o);
}

static void hrow(const axis *ax, const uint8_t *in, int c, uint8_t *out, int wn) {
    const int32_t round = 1 << (SP_RESIZE_BITS - 1);
    for (int i = 0; i < wn; i++) {
        const kernel *k = &ax->k[i];
        const int32_t *w = ax->w + (size_t)i * (size_t)ax->ksize;
        const uint8_t *p = in + (size_t)(k->start - ax->lo) * (size_t)c;
        for (int ch = 0; ch < c; ch++) {
            int32_t s = round;
            for (int t = 0; t < k->n; t++) s += w[t] * p[(size_t)t * (size_t)c + (size_t)ch];
            out[(size_t)i * (size_t)c + (size_t)ch] = clip8(s);
        }
    }
}
#define SP_HB 1
#endif

/* The scratch of one sp__resample() call: the vertical rows (R, HB of
 * them), their columns (T) and the horizontal pass's columns (O), the
 * vertical kernel's row pointers, both axes' paired weights. */
typedef struct scratch {
    uint8_t *R, *T, *O;
    const uint8_t **rows;
    uint32_t *wpx, *wpy;
    int psx, psy;
    size_t len, lenp, m;   /* bytes of a row of taps, R's row stride, bytes of an output row */
    int isa;
} scratch;

static void scratch_free(scratch *s) {
    free(s->R);
    free(s->T);
    free(s->O);
    free(s->wpx);
    free(s->wpy);
    free(s->rows);
}

static int scratch_alloc(scratch *s, const axis *ax, const axis *ay, const sp_resample_geom *g,
                         int c) {
    const int HB = SP_HB;
    memset(s, 0, sizeof *s);
#ifdef SP_ISA_MULTI
    s->isa = resize_isa();
#endif
    s->len = (size_t)(ax->hi - ax->lo) * (size_t)c;
    s->lenp = (s->len + 15) & ~(size_t)15;             /* row buffer stride */
    size_t ncols = s->lenp + (size_t)c + 16;           /* T columns, pad included */
    s->m = (size_t)g->win_w * (size_t)c;
    s->R = calloc(s->lenp + 16, (size_t)HB);           /* vertical rows */
    s->rows = malloc((size_t)(ay->ksize + 1) * sizeof *s->rows);
    int rc = !s->R || !s->rows ? SP_ENOMEM : SP_OK;
    if (!rc) rc = pack_pairs(ay, g->win_h, &s->wpy, &s->psy);
    if (!rc && !ax->single && HB > 1) {
        rc = pack_pairs(ax, g->win_w, &s->wpx, &s->psx);
        s->T = aligned_alloc(16, ncols * 16);
        s->O = aligned_alloc(16, (s->m + 16) * 16);
        if (!rc && (!s->T || !s->O)) rc = SP_ENOMEM;
        if (!rc) memset(s->T, 0, ncols * 16);
    }
    return rc;
}

/* Output rows j0 .. j0 + HB - 1 (the last block may be short): each
 * row's vertical pass, then the horizontal pass (a copy when the x axis
 * is single taps; per row in scalar code, per block of 16 with SIMD). */
static void resample_block(const sp_image *src, int src_y, const axis *ax, const axis *ay,
                           const uint8_t *base, int c, int j0, scratch *s, sp_image *out) {
    const int HB = SP_HB, win_w = out->width;
    int nr = out->height - j0 < HB ? out->height - j0 : HB;
    int nb = ax->single ? nr : HB;   /* rows computed (pad rows repeat the last) */
    for (int r = 0; r < nb; r++) {
        int j = j0 + (r < nr ? r : nr - 1);
        const kernel *kv = &ay->k[j];
        for (int t = 0; t < kv->n; t++)
            s->rows[t] = base + (size_t)(kv->start - src_y + t) * src->stride;
        s->rows[kv->n] = s->rows[kv->n - 1];   /* pad tap, weight 0 */
        uint8_t *orow = out->data + (size_t)j * out->stride;
        const int32_t *w = ay->w + (size_t)j * (size_t)ay->ksize;
        const uint32_t *wp = s->wpy + (size_t)j * (size_t)s->psy;
        if (ax->single) {
            if (kv->n == 1) {
                hcopy(ax, s->rows[0], ax->lo, c, orow, win_w);
            } else {
                vrow(s->rows, w, wp, kv->n, s->len, s->R, s->isa);
                hcopy(ax, s->R, ax->lo, c, orow, win_w);
            }
            continue;
        }
        vrow(s->rows, w, wp, kv->n, s->len, s->R + (size_t)r * s->lenp, s->isa);
#if !defined(__SSE2__) || defined(SP_NO_SIMD)
        hrow(ax, s->R, c, orow, win_w);
#endif
    }
#if defined(__SSE2__) && !defined(SP_NO_SIMD)
    if (!ax->single) {
        to_columns(s->R, s->lenp, s->len, s->T, s->isa);
#ifdef SP_ISA_MULTI
        if (s->isa == 2 && c == 3) hblock3_avx512(ax, s->wpx, s->psx, s->T, s->O, win_w);
        else
#endif
            hblock(ax, s->wpx, s->psx, s->T, c, s->O, win_w);
        from_columns(s->O, s->m, out->data + (size_t)j0 * out->stride, out->stride, nr, s->isa);
    }
#endif
}

int sp__resample(const sp_image *src, int src_x, int src_y, const sp_resample_geom *g,
                 sp_image *out) {
    if (!src || !out || !g || src->channels != out->channels || out->width != g->win_w ||
        out->height != g->win_h)
        return SP_EINVAL;
    axis ax, ay;
    int rc = sp__axes_build(g, &ax, &ay);
    if (rc) return rc;
    int c = src->channels;
    if (ax.lo < src_x || ax.hi > src_x + src->width || ay.lo < src_y ||
        ay.hi > src_y + src->height) {
        sp__axis_free(&ax);
        sp__axis_free(&ay);
        return SP_EINVAL;
    }
    scratch s;
    rc = scratch_alloc(&s, &ax, &ay, g, c);
    const uint8_t *base = src->data + (size_t)(ax.lo - src_x) * (size_t)c;
    for (int j0 = 0; !rc && j0 < g->win_h; j0 += SP_HB)
        resample_block(src, src_y, &ax, &ay, base, c, j0, &s, out);
    scratch_free(&s);
    sp__axis_free(&ax);
    sp__axis_free(&ay);
    return rc;
}

int sp__image_resize(const sp_image *src, int out_w, int out_h, sp_image *out) {
    return sp__image_resize_filter(src, out_w, out_h, SP_RESAMPLE_BILINEAR, out);
}

int sp__image_resize_filter(const sp_image *src, int out_w, int out_h, int filter,
                            sp_image *out) {
    if (!src || !out || src->width <= 0 || src->height <= 0) return SP_EINVAL;
    int rc = sp__image_alloc(out, out_w, out_h, src->channels);
    if (rc) return rc;
    sp_resample_geom g = {src->width, src->height, 0.0, 0.0, (double)src->width,
                          (double)src->height, out_w, out_h, 0, 0, out_w, out_h, filter};
    rc = sp__resample(src, 0, 0, &g, out);
    if (rc) sp_image_free(out);
    return rc;
}

/* cache_filter.c - the image filters of the cache's batch files: the byte
 * shuffle and the float32 dictionary, encode and decode (cache_filter.h).
 *
 * The bottom of the cache's stack (cache/): it calls nothing else
 * of the cache; cache_file.c, the batch file format, is its one user.
 *
 * Float32 images are dictionary-coded (sp__dict_encode() below: a 256-entry
 * table per channel and one index byte per value, exact by construction and
 * checked by the file's raw hash) when each channel has at most 256 distinct
 * values, which the normalisation table guarantees; otherwise they are
 * byte-shuffled (byte k of every 4-byte value together, as in blosc/HDF5's
 * shuffle filter), so the shared exponent bytes become long runs.
 *
 * The decoder expands a dictionary frame piece by piece as zstd produces it
 * (cache_file.c's unzstd_chunks()), with an AVX-512 VBMI or AVX2 loop where
 * the caller's run-time check (cf_isa()) allows: every level writes the same
 * bytes (tests/test_cache_file.c).
 */
#include "cache/cache_filter.h"

#include <stdlib.h>
#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CF_X86 1
#include <immintrin.h>
#endif

/* ---- byte shuffle ---------------------------------------------------------------- */

/* Byte shuffle: dst[k * m + i] = src[4 i + k], m = n / 4 (n % 4 == 0). */
void sp__shuffle4(const uint8_t *src, uint8_t *dst, size_t n) {
    size_t m = n / 4;
    for (size_t i = 0; i < m; i++) {
        dst[i] = src[4 * i];
        dst[m + i] = src[4 * i + 1];
        dst[2 * m + i] = src[4 * i + 2];
        dst[3 * m + i] = src[4 * i + 3];
    }
}
void sp__unshuffle4(const uint8_t *src, uint8_t *dst, size_t n) {
    size_t m = n / 4;
    const uint8_t *s0 = src, *s1 = src + m, *s2 = src + 2 * m, *s3 = src + 3 * m;
    for (size_t i = 0; i < m; i++) {
        dst[4 * i] = s0[i];
        dst[4 * i + 1] = s1[i];
        dst[4 * i + 2] = s2[i];
        dst[4 * i + 3] = s3[i];
    }
}

/* Dictionary filter for float32 (SP__FILTER_DICT8_*): when every channel of
 * a batch takes at most 256 distinct 4-byte values (true of any pipeline
 * that ends in the 256-entry normalisation table, or converts uint8 pixels
 * to float), the images frame holds, instead of the floats, a table of
 * C x 256 4-byte values (in memory byte order, unused entries 0) followed
 * by one index byte per value: a quarter of the bytes to compress, write,
 * read and decompress. The table is built in order of first appearance,
 * so it is a pure function of the batch bytes. Channel of value k:
 * (k / plane) % C for NCHW, k % C for NHWC. */
typedef struct dict_slot { uint32_t key; int16_t idx; } dict_slot;
#define DICT_SLOTS 1024

/* One channel's dictionary while encoding. Lookups go first to a
 * direct-mapped table of 2^16 slots (the first index whose value hashes
 * there), checked against the value: with at most 256 values per channel
 * nearly every lookup hits it, without a data-dependent branch to
 * mispredict. A miss (a new value, or a value that collides with another)
 * goes to the authoritative open-addressing table, which assigns indices
 * in order of first appearance. */
#define DICT_FAST_BITS 16
typedef struct dict_chan {
    int16_t fast[1u << DICT_FAST_BITS];
    uint32_t val[256];    /* the value of each index */
    dict_slot slot[DICT_SLOTS];
    uint8_t *table;       /* 256 x 4 bytes in the frame */
    uint32_t n;
} dict_chan;

static inline uint32_t dict_fast_hash(uint32_t bits) {
    return (bits * 0x9E3779B1u) >> (32 - DICT_FAST_BITS);
}

/* The slow path of dict_index(): probe, insert if new. -1 when full. */
static int dict_index_slow(dict_chan *d, uint32_t bits) {
    uint32_t h = (bits * 0x9E3779B1u) >> 22;
    while (d->slot[h].idx >= 0 && d->slot[h].key != bits) h = (h + 1) & (DICT_SLOTS - 1);
    if (d->slot[h].idx < 0) {
        if (d->n == 256) return -1;
        d->slot[h].key = bits;
        d->slot[h].idx = (int16_t)d->n;
        d->val[d->n] = bits;
        memcpy(d->table + 4 * d->n, &bits, 4);
        d->n++;
    }
    int k = d->slot[h].idx;
    int16_t *f = &d->fast[dict_fast_hash(bits)];
    if (*f < 0) *f = (int16_t)k;
    return k;
}

/* Index of `bits` in channel d, adding it if new; -1 when full. */
static inline int dict_index(dict_chan *d, uint32_t bits) {
    int k = d->fast[dict_fast_hash(bits)];
    if (k >= 0 && d->val[k] == bits) return k;
    return dict_index_slow(d, bits);
}

int sp__dict_encode(const uint8_t *img, size_t nvals, uint32_t C, size_t plane, int nhwc,
                    uint8_t *frame) {
    dict_chan *d = malloc((size_t)C * sizeof *d);
    if (!d) return -2;
    memset(frame, 0, (size_t)C * 1024);
    for (uint32_t c = 0; c < C; c++) {
        for (int i = 0; i < DICT_SLOTS; i++) d[c].slot[i].idx = -1;
        memset(d[c].fast, 0xff, sizeof d[c].fast);   /* -1 */
        d[c].table = frame + (size_t)c * 1024;
        d[c].n = 0;
    }
    uint8_t *idx = frame + (size_t)C * 1024;
    uint32_t bits;
    int rc = 0;
    if (nhwc) {
        for (size_t v = 0; v < nvals && rc == 0; v += C)
            for (uint32_t c = 0; c < C; c++) {
                memcpy(&bits, img + 4 * (v + c), 4);
                int k = dict_index(&d[c], bits);
                if (k < 0) rc = -1;
                idx[v + c] = (uint8_t)k;
            }
    } else {
        for (size_t v0 = 0; v0 < nvals && rc == 0; v0 += plane) {
            dict_chan *dc = &d[(v0 / plane) % C];
            const uint8_t *src = img + 4 * v0;
            uint8_t *ix = idx + v0;
            for (size_t k = 0; k < plane; k++) {
                memcpy(&bits, src + 4 * k, 4);
                int j = dict_index(dc, bits);
                if (j < 0) {
                    rc = -1;
                    break;
                }
                ix[k] = (uint8_t)j;
            }
        }
    }
    free(d);
    return rc;
}

/* ---- dictionary decode ------------------------------------------------------------- */

/* The decoder's state, sp__dict_dec, is in cache_filter.h (the caller fills
 * its table as the frame arrives). */

void sp__dict_dec_ready(sp__dict_dec *d) {
    if (d->isa < 2) return;
    const uint8_t *tb = (const uint8_t *)d->t;
    for (uint32_t c = 0; c < d->C; c++)
        for (int j = 0; j < 256; j++)
            for (int k = 0; k < 4; k++) d->bp[c][k][j] = tb[(size_t)c * 1024 + 4 * j + k];
}

/* n values of one channel: out[k] = t[idx[k]] (4 bytes each). */
static void run_c(const uint32_t *t, const uint8_t *idx, size_t n, uint8_t *out) {
    for (size_t k = 0; k < n; k++) memcpy(out + 4 * k, &t[idx[k]], 4);
}

/* n values of a pixel-interleaved run, the first of channel `ph`. */
static void nhwc_c(const sp__dict_dec *d, const uint8_t *idx, uint32_t ph, size_t n,
                   uint8_t *out) {
    for (size_t k = 0; k < n; k++) {
        memcpy(out + 4 * k, &d->t[ph][idx[k]], 4);
        if (++ph == d->C) ph = 0;
    }
}

#ifdef CF_X86
/* The SIMD loops write the batch with non-temporal (streaming) stores: a
 * float32 batch is tens of MB, beyond the caches, and a normal store
 * first reads each line it writes. On the photos bench (38.5 MB batches)
 * the expansion ran at ~9 GB/s with normal stores and ~16-20 GB/s with
 * streaming ones, and the consumer's first read of the batch
 * (sp_batch_digest) took the same time either way, as long as after a
 * computed batch: the batch is not in cache for it in any case. The
 * sfence at the end of each loop orders the stores before whatever
 * follows (the batch may be handed to another thread). A caller that
 * reads the output back at once (sp__dict_dec.keep: a piece expanded into
 * a small buffer, hashed, then copied) gets plain stores. Streaming stores need
 * aligned addresses: head32() is the number of values to write first
 * (plainly) so that the rest starts on a 64-byte line, 0 when `out` is not
 * 4-byte aligned (then store32() falls back to unaligned stores). */
static size_t head32(const uint8_t *out, size_t n) {
    size_t k = ((uintptr_t)out & 3) ? 0 : ((64 - ((uintptr_t)out & 63)) & 63) / 4;
    return k < n ? k : n;
}

__attribute__((target("avx2"))) static inline void store32(uint8_t *o, __m256i v, int nt) {
    if (nt && ((uintptr_t)o & 31) == 0) _mm256_stream_si256((__m256i *)o, v);
    else _mm256_storeu_si256((__m256i *)o, v);
}

/* AVX2: 8 lookups per gather. */
__attribute__((target("avx2"))) static void run_avx2(const uint32_t *t, const uint8_t *idx,
                                                     size_t n, uint8_t *out, int nt) {
    size_t k = head32(out, n);
    run_c(t, idx, k, out);
    for (; k + 8 <= n; k += 8) {
        __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + k)));
        store32(out + 4 * k, _mm256_i32gather_epi32((const int *)t, i, 4), nt);
    }
    _mm_sfence();
    run_c(t, idx + k, n - k, out + 4 * k);
}

/* AVX2, pixel-interleaved: lane j of a vector that starts at channel ph
 * reads channel (ph + j) % C, i.e. entry 256 ((ph + j) % C) + index of the
 * C x 256 table. */
__attribute__((target("avx2"))) static void nhwc_avx2(const sp__dict_dec *d,
                                                      const uint8_t *idx, uint32_t ph, size_t n,
                                                      uint8_t *out) {
    int32_t o[4][8];
    for (uint32_t p = 0; p < d->C; p++)
        for (uint32_t j = 0; j < 8; j++) o[p][j] = (int32_t)(256 * ((p + j) % d->C));
    size_t k = head32(out, n);
    nhwc_c(d, idx, ph, k, out);
    ph = (uint32_t)((ph + k) % d->C);
    for (; k + 8 <= n; k += 8) {
        __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + k)));
        i = _mm256_add_epi32(i, _mm256_loadu_si256((const __m256i *)o[ph]));
        store32(out + 4 * k, _mm256_i32gather_epi32((const int *)&d->t[0][0], i, 4), !d->keep);
        ph = (ph + 8) % d->C;
    }
    _mm_sfence();
    nhwc_c(d, idx + k, ph, n - k, out + 4 * k);
}

/* AVX-512 VBMI: 64 values per step, no gathers. The table is split into
 * its 4 byte planes (bp); byte plane k of 64 values is two 128-entry byte
 * permutes (vpermi2b on the index's low 7 bits) blended by the index's top
 * bit. The planes are then interleaved into 4-byte values with the
 * unpack instructions, which work within 128-bit lanes: unpacking bytes
 * 16 L + 4 q + i of the planes gives value 16 q + 4 L + i of the output,
 * so the index vector is permuted first (ORDER) so that each output
 * vector comes out in order. */
__attribute__((target("avx512f"))) static inline void store64(uint8_t *o, __m512i v, int nt) {
    if (nt && ((uintptr_t)o & 63) == 0) _mm512_stream_si512((void *)o, v);
    else _mm512_storeu_si512(o, v);
}

static const uint8_t ORDER[64] = {
    0,  1,  2,  3,  16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51,
    4,  5,  6,  7,  20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
    8,  9,  10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59,
    12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
run_vbmi(const uint8_t (*bp)[256], const uint32_t *t, const uint8_t *idx, size_t n,
         uint8_t *out, int nt) {
    size_t k = 0;
    if (n >= 64) {
        __m512i P[4][4];
        for (int b = 0; b < 4; b++)
            for (int q = 0; q < 4; q++) P[b][q] = _mm512_loadu_si512(bp[b] + 64 * q);
        const __m512i order = _mm512_loadu_si512(ORDER);
        k = head32(out, n);
        run_c(t, idx, k, out);
        for (; k + 64 <= n; k += 64) {
            __m512i x = _mm512_permutexvar_epi8(order, _mm512_loadu_si512(idx + k));
            __mmask64 hi = _mm512_movepi8_mask(x);
            __m512i v[4];
            for (int b = 0; b < 4; b++)
                v[b] = _mm512_mask_blend_epi8(hi, _mm512_permutex2var_epi8(P[b][0], x, P[b][1]),
                                              _mm512_permutex2var_epi8(P[b][2], x, P[b][3]));
            __m512i w01l = _mm512_unpacklo_epi8(v[0], v[1]), w01h = _mm512_unpackhi_epi8(v[0], v[1]);
            __m512i w23l = _mm512_unpacklo_epi8(v[2], v[3]), w23h = _mm512_unpackhi_epi8(v[2], v[3]);
            uint8_t *o = out + 4 * k;
            store64(o, _mm512_unpacklo_epi16(w01l, w23l), nt);
            store64(o + 64, _mm512_unpackhi_epi16(w01l, w23l), nt);
            store64(o + 128, _mm512_unpacklo_epi16(w01h, w23h), nt);
            store64(o + 192, _mm512_unpackhi_epi16(w01h, w23h), nt);
        }
        _mm_sfence();
    }
    run_c(t, idx + k, n - k, out + 4 * k);
}

/* sp__copy_stream() at AVX2: streaming stores from the first 32-byte
 * aligned byte of dst on. */
__attribute__((target("avx2"))) static void copy_avx2(uint8_t *dst, const uint8_t *src,
                                                      size_t n) {
    size_t k = (32 - ((uintptr_t)dst & 31)) & 31;
    if (k > n) k = n;
    memcpy(dst, src, k);
    for (; k + 32 <= n; k += 32)
        _mm256_stream_si256((__m256i *)(dst + k), _mm256_loadu_si256((const __m256i *)(src + k)));
    _mm_sfence();
    memcpy(dst + k, src + k, n - k);
}
#endif

void sp__dict_dec_range(const sp__dict_dec *d, const uint8_t *idx, size_t v0, size_t n,
                           uint8_t *out) {
    if (d->nhwc && d->C > 1) {
        uint32_t ph = (uint32_t)(v0 % d->C);
#ifdef CF_X86
        if (d->isa >= 1) {
            nhwc_avx2(d, idx, ph, n, out);
            return;
        }
#endif
        nhwc_c(d, idx, ph, n, out);
        return;
    }
    while (n) {   /* runs of one channel: a plane, or everything (one channel) */
        size_t c = d->nhwc ? 0 : (v0 / d->plane) % d->C;
        size_t run = d->nhwc ? n : d->plane - v0 % d->plane;
        if (run > n) run = n;
#ifdef CF_X86
        if (d->isa == 2) run_vbmi(d->bp[c], d->t[c], idx, run, out, !d->keep);
        else if (d->isa == 1) run_avx2(d->t[c], idx, run, out, !d->keep);
        else
#endif
            run_c(d->t[c], idx, run, out);
        idx += run;
        out += 4 * run;
        v0 += run;
        n -= run;
    }
}

void sp__copy_stream(uint8_t *dst, const uint8_t *src, size_t n, int isa) {
#ifdef CF_X86
    if (isa >= 1) {
        copy_avx2(dst, src, n);
        return;
    }
#endif
    (void)isa;
    memcpy(dst, src, n);
}

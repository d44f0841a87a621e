/* cache_file.c - the cache's batch file format: encode, parse, decode, the
 * filters (the entry manifest's format is cache_manifest.c).
 *
 * A batch file is a 128-byte header and two zstd frames (the metadata and
 * the images; the layout is in cache_internal.h). Two checksums guard it:
 *
 *  - XXH3-64 over the header and the stored frames ("file hash"), checked
 *    first: a flipped or cut byte anywhere in the file is caught before a
 *    byte is decompressed, so a damaged frame never even reaches the
 *    decoder, and the message can say "checksum mismatch" rather than some
 *    decoder error. 64 bits against accidental damage miss with
 *    probability 2^-64; the manifest pins this value too, so a whole file
 *    swapped in from another entry is refused as well.
 *  - XXH3-128 over the uncompressed frames ("raw hash": the bytes zstd was
 *    given when writing and returns when reading), checked after
 *    decompression: the proof that what comes out of zstd is what went in,
 *    as strong as the 128-bit batch digests `verify` compares; it catches
 *    what the file hash cannot (a compressor or decompressor bug, a memory
 *    error in the decompressed buffer). The filters are exact by
 *    construction (a byte permutation; a dictionary of the values' exact
 *    bits), and the tests compare every cached batch with its recompute.
 *    Hashing the frames, not the expanded floats, hashes a quarter of the
 *    bytes for dictionary-coded float32.
 *
 * Float32 images are dictionary-coded (dict_encode() below: a 256-entry
 * table per channel and one index byte per value, exact by construction and
 * checked by the raw hash) when each channel has at most 256 distinct
 * values, which the normalisation table guarantees; otherwise they are
 * byte-shuffled (byte k of every 4-byte value together, as in blosc/HDF5's
 * shuffle filter), so the shared exponent bytes become long runs.
 *
 * Every length a file claims is bounded and cross-checked (header sizes vs
 * file size, zstd frame content sizes vs header, metadata records vs the
 * metadata size) before use: a cache file is untrusted input.
 *
 * The read path of a dictionary-coded batch (the warm cache's float32
 * case) touches each byte as few times as it can: the file hash, then the
 * images frame in 64 KiB pieces straight from zstd's streaming decoder,
 * each piece hashed and expanded into the batch while it is in L2
 * (unzstd_chunks()). The hashes run XXH3's AVX2 loop (cache_hash_avx2.c),
 * the expansion an AVX-512 VBMI or AVX2 loop, chosen at run time
 * (cf_isa()); every level writes the same bytes (tests/test_cache_file.c).
 * Files are the same bytes as before: the pieces' streaming XXH3 digest is
 * the one-shot one.
 */
#include "loader/cache/cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CF_X86 1
#include <immintrin.h>
#endif
/* xxHash is compiled in here (XXH_INLINE_ALL; public API only), as it is
 * in cache_hash_avx2.c, rather than called in the shared libxxhash: the two
 * translation units then share one XXH3_state_t type (cache_hash.h). This
 * file is built for baseline x86-64 (xxHash's SSE2 loop); where the CPU has
 * AVX2, hash64()/hash128() below hand the updates to cache_hash_avx2.c,
 * built with -mavx2. XXH3 is one function whichever loop computes it. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "loader/cache/cache_hash.h"

#include "common/le_internal.h"
#include "loader/loader_internal.h"

/* ---- little helpers ---------------------------------------------------------- */


/* Byte shuffle: dst[k * m + i] = src[4 i + k], m = n / 4 (n % 4 == 0). */
static void shuffle4(const uint8_t *src, uint8_t *dst, size_t n) {
    size_t m = n / 4;
    for (size_t i = 0; i < m; i++) {
        dst[i] = src[4 * i];
        dst[m + i] = src[4 * i + 1];
        dst[2 * m + i] = src[4 * i + 2];
        dst[3 * m + i] = src[4 * i + 3];
    }
}
static void unshuffle4(const uint8_t *src, uint8_t *dst, size_t n) {
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

static size_t dict_frame_size(uint32_t C, size_t nvals) { return (size_t)C * 1024 + nvals; }

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

/* @return 0, -1 if some channel has more than 256 distinct values, -2 (no memory). */
static int dict_encode(const uint8_t *img, size_t nvals, uint32_t C, size_t plane, int nhwc,
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

/* ---- run-time SIMD level; hashing ---------------------------------------------- */

/* 0: portable C, 1: AVX2, 2: AVX-512 with VBMI (F, BW, VBMI). The
 * environment variable SEEDPIPE_ISA=sse2|avx2|avx512 caps the level, as
 * for the resize (augment/resize.c): every level gives the same bytes, and
 * tests/test_cache_file.c compares them. */
static int cf_isa(void) {
#ifdef CF_X86
    return sp_isa_cap(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                              __builtin_cpu_supports("avx512vbmi")
                          ? 2
                      : __builtin_cpu_supports("avx2") ? 1
                                                       : 0);
#else
    return 0;
#endif
}

/* XXH3_64bits_update() (file hash) and XXH3_128bits_update() (raw hash),
 * each on a state reset for its width: xxHash's AVX2 build
 * (cache_hash_avx2.c) at isa >= 1, else this file's baseline build. */
static void hash64(XXH3_state_t *st, const void *p, size_t n, int isa) {
#ifdef SP__CACHE_HASH_AVX2
    if (isa >= 1) {
        sp__cache_hash64_update_avx2(st, p, n);
        return;
    }
#endif
    (void)isa;
    (void)XXH3_64bits_update(st, p, n);
}

static void hash128(XXH3_state_t *st, const void *p, size_t n, int isa) {
#ifdef SP__CACHE_HASH_AVX2
    if (isa >= 1) {
        sp__cache_hash128_update_avx2(st, p, n);
        return;
    }
#endif
    (void)isa;
    (void)XXH3_128bits_update(st, p, n);
}

/* ---- dictionary decode ------------------------------------------------------------- */

/* The decoder of one images frame: its table, and where value k's channel
 * comes from. dict_dec_range() expands any run of values, so the frame can
 * be decoded chunk by chunk as zstd produces it (a chunk may end anywhere,
 * in a plane or between the channels of a pixel). Every level writes each
 * value as the 4 table bytes its index selects: the same bytes. */
typedef struct dict_dec {
    uint32_t C;
    size_t plane;           /* NCHW: values per channel plane */
    int nhwc, isa;
    uint32_t t[4][256];     /* channel c's entries, in memory byte order */
    uint8_t bp[4][4][256];  /* isa 2: byte k of t[c][j] at bp[c][k][j] */
} dict_dec;

/* The table is in d->t (d->C, plane, nhwc and isa set): get ready to decode. */
static void dict_dec_ready(dict_dec *d) {
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
static void nhwc_c(const dict_dec *d, const uint8_t *idx, uint32_t ph, size_t n, uint8_t *out) {
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
 * follows (the batch may be handed to another thread). Streaming stores need
 * aligned addresses: head32() is the number of values to write first
 * (plainly) so that the rest starts on a 64-byte line, 0 when `out` is not
 * 4-byte aligned (then store32() falls back to unaligned stores). */
static size_t head32(const uint8_t *out, size_t n) {
    size_t k = ((uintptr_t)out & 3) ? 0 : ((64 - ((uintptr_t)out & 63)) & 63) / 4;
    return k < n ? k : n;
}

__attribute__((target("avx2"))) static inline void store32(uint8_t *o, __m256i v) {
    if (((uintptr_t)o & 31) == 0) _mm256_stream_si256((__m256i *)o, v);
    else _mm256_storeu_si256((__m256i *)o, v);
}

/* AVX2: 8 lookups per gather. */
__attribute__((target("avx2"))) static void run_avx2(const uint32_t *t, const uint8_t *idx,
                                                     size_t n, uint8_t *out) {
    size_t k = head32(out, n);
    run_c(t, idx, k, out);
    for (; k + 8 <= n; k += 8) {
        __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + k)));
        store32(out + 4 * k, _mm256_i32gather_epi32((const int *)t, i, 4));
    }
    _mm_sfence();
    run_c(t, idx + k, n - k, out + 4 * k);
}

/* AVX2, pixel-interleaved: lane j of a vector that starts at channel ph
 * reads channel (ph + j) % C, i.e. entry 256 ((ph + j) % C) + index of the
 * C x 256 table. */
__attribute__((target("avx2"))) static void nhwc_avx2(const dict_dec *d, const uint8_t *idx,
                                                      uint32_t ph, size_t n, uint8_t *out) {
    int32_t o[4][8];
    for (uint32_t p = 0; p < d->C; p++)
        for (uint32_t j = 0; j < 8; j++) o[p][j] = (int32_t)(256 * ((p + j) % d->C));
    size_t k = head32(out, n);
    nhwc_c(d, idx, ph, k, out);
    ph = (uint32_t)((ph + k) % d->C);
    for (; k + 8 <= n; k += 8) {
        __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(idx + k)));
        i = _mm256_add_epi32(i, _mm256_loadu_si256((const __m256i *)o[ph]));
        store32(out + 4 * k, _mm256_i32gather_epi32((const int *)&d->t[0][0], i, 4));
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
__attribute__((target("avx512f"))) static inline void store64(uint8_t *o, __m512i v) {
    if (((uintptr_t)o & 63) == 0) _mm512_stream_si512((void *)o, v);
    else _mm512_storeu_si512(o, v);
}

static const uint8_t ORDER[64] = {
    0,  1,  2,  3,  16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51,
    4,  5,  6,  7,  20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
    8,  9,  10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59,
    12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
run_vbmi(const uint8_t (*bp)[256], const uint32_t *t, const uint8_t *idx, size_t n,
         uint8_t *out) {
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
            store64(o, _mm512_unpacklo_epi16(w01l, w23l));
            store64(o + 64, _mm512_unpackhi_epi16(w01l, w23l));
            store64(o + 128, _mm512_unpacklo_epi16(w01h, w23h));
            store64(o + 192, _mm512_unpackhi_epi16(w01h, w23h));
        }
        _mm_sfence();
    }
    run_c(t, idx + k, n - k, out + 4 * k);
}
#endif

/* Expand values v0 .. v0 + n - 1 of the frame (their index bytes at idx)
 * into out (the bytes of value v0). */
static void dict_dec_range(const dict_dec *d, const uint8_t *idx, size_t v0, size_t n,
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
        if (d->isa == 2) run_vbmi(d->bp[c], d->t[c], idx, run, out);
        else if (d->isa == 1) run_avx2(d->t[c], idx, run, out);
        else
#endif
            run_c(d->t[c], idx, run, out);
        idx += run;
        out += 4 * run;
        v0 += run;
        n -= run;
    }
}

/* The failure record of `sample` in the loader's log, copied to *out:
 * @return 1 if there is one, else 0. */
static int find_failure(const sp_loader *ld, uint64_t sample, sp_failure *out) {
    if (!ld) return 0;
    size_t n = sp_loader_failure_count(ld);
    for (size_t i = 0; i < n; i++)
        if (sp_loader_failure_get(ld, i, out) == 0 && out->sample == sample) return 1;
    return 0;
}

/* ---- batch files: encode ------------------------------------------------------ */

int sp__cb_encode(ZSTD_CCtx *ctx, sp_digest key, const sp_batch *b, size_t sample_bytes,
                  int filter, const sp_loader *ld, sp__buf *out, size_t *len,
                  sp__buf *scratch, sp__cb_header *h, sp_error *err) {
    memset(h, 0, sizeof *h);
    size_t count = b->count;
    size_t img_raw = count * sample_bytes;
    uint32_t C = 0;
    size_t plane = 0;
    int nhwc = 0;
    if (filter == SP__FILTER_DICT8_NCHW) {   /* the writer's "auto" for float32 */
        int c = 0, hh = 0, ww = 0;
        sp_loader_sample_dims(ld, &c, &hh, &ww);
        C = (uint32_t)c;
        plane = (size_t)hh * (size_t)ww;
        nhwc = sp_loader_config_of(ld)->layout == SP_LAYOUT_NHWC;
        if (C < 1 || C > 4 || plane == 0 || sample_bytes != 4 * (size_t)C * plane)
            filter = SP__FILTER_SHUFFLE4;
    }
    if (filter == SP__FILTER_SHUFFLE4 && sample_bytes % 4) filter = SP__FILTER_NONE;
    size_t nvals = img_raw / 4;
    size_t frame_raw = filter == SP__FILTER_DICT8_NCHW ? dict_frame_size(C, nvals) : img_raw;
    /* The failed samples whose log lines travel with the batch. */
    uint32_t nfail = 0;
    size_t fail_bytes = 0, nfl = 0;
    size_t nbad = (size_t)b->nskipped + b->nsubstituted;
    sp_failure *fails = nbad ? malloc(nbad * sizeof *fails) : NULL;
    if (nbad && !fails) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    for (size_t i = 0; i < nbad; i++) {
        uint64_t s = i < b->nskipped ? b->skipped[i] : b->substituted[2 * (i - b->nskipped)];
        if (find_failure(ld, s, &fails[nfl])) {
            fail_bytes += 16 + strlen(fails[nfl].msg);
            nfl++;
            nfail++;
        }
    }
    size_t meta_raw = count * 12 + (size_t)b->nskipped * 8 + (size_t)b->nsubstituted * 16 +
                      fail_bytes;
    size_t meta_off = 0, img_off = (meta_raw + 63) & ~(size_t)63;
    if (sp__buf_reserve(scratch, img_off + (filter ? (frame_raw > img_raw ? frame_raw : img_raw)
                                                    : 0) + 1) != 0) {
        free(fails);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    uint8_t *m = scratch->p + meta_off;
    for (size_t i = 0; i < count; i++) sp__le_put64(m + 8 * i, b->indices[i]);
    m += 8 * count;
    for (size_t i = 0; i < count; i++) sp__le_put32(m + 4 * i, (uint32_t)b->labels[i]);
    m += 4 * count;
    for (uint32_t i = 0; i < b->nskipped; i++, m += 8) sp__le_put64(m, b->skipped[i]);
    for (uint32_t i = 0; i < 2 * b->nsubstituted; i++, m += 8) sp__le_put64(m, b->substituted[i]);
    for (size_t i = 0; i < nfl; i++) {
        size_t n = strlen(fails[i].msg);
        sp__le_put64(m, fails[i].sample);
        sp__le_put32(m + 8, (uint32_t)fails[i].code);
        sp__le_put32(m + 12, (uint32_t)n);
        memcpy(m + 16, fails[i].msg, n);
        m += 16 + n;
    }
    free(fails);
    const uint8_t *img = b->images;
    if (filter == SP__FILTER_DICT8_NCHW) {
        int dr = dict_encode(b->images, nvals, C, plane, nhwc, scratch->p + img_off);
        if (dr == -2) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        if (dr == 0) {
            img = scratch->p + img_off;
            if (nhwc) filter = SP__FILTER_DICT8_NHWC;
        } else {   /* more than 256 values in a channel: shuffle instead */
            filter = SP__FILTER_SHUFFLE4;
            frame_raw = img_raw;
        }
    }
    if (filter == SP__FILTER_SHUFFLE4) {
        shuffle4(b->images, scratch->p + img_off, img_raw);
        img = scratch->p + img_off;
    }
    size_t cap = SP__CB_HEADER + ZSTD_compressBound(meta_raw) + ZSTD_compressBound(frame_raw);
    if (sp__buf_reserve(out, cap) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    uint8_t *p = out->p;
    size_t ms = ZSTD_compress2(ctx, p + SP__CB_HEADER, cap - SP__CB_HEADER, scratch->p, meta_raw);
    if (ZSTD_isError(ms))
        return sp_error_set(err, SP_EIO, "cache: zstd: %s", ZSTD_getErrorName(ms));
    size_t is = ZSTD_compress2(ctx, p + SP__CB_HEADER + ms, cap - SP__CB_HEADER - ms, img,
                               frame_raw);
    if (ZSTD_isError(is))
        return sp_error_set(err, SP_EIO, "cache: zstd: %s", ZSTD_getErrorName(is));

    XXH3_state_t *st = XXH3_createState();
    if (!st) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    int isa = cf_isa();
    XXH3_128bits_reset(st);
    hash128(st, scratch->p, meta_raw, isa);
    hash128(st, img, frame_raw, isa);
    XXH128_hash_t rh = XXH3_128bits_digest(st);

    h->version = SP_CACHE_FORMAT_VERSION;
    h->key = key;
    h->epoch = b->epoch;
    h->filter = (uint32_t)filter;
    h->channels = filter >= SP__FILTER_DICT8_NCHW ? C : 0;
    h->index = b->index;
    h->count = b->count;
    h->nskipped = b->nskipped;
    h->nsubstituted = b->nsubstituted;
    h->nfailures = nfail;
    h->sample_bytes = sample_bytes;
    h->meta_raw = meta_raw;
    h->meta_stored = ms;
    h->images_stored = is;
    h->raw_hash.hi = rh.high64;
    h->raw_hash.lo = rh.low64;
    memset(p, 0, SP__CB_HEADER);
    memcpy(p, SP__CB_MAGIC, 8);
    sp__le_put32(p + 8, h->version);
    sp__le_put32(p + 12, SP__CB_HEADER);
    sp__le_put64(p + 16, key.hi);
    sp__le_put64(p + 24, key.lo);
    sp__le_put32(p + 32, h->epoch);
    sp__le_put32(p + 36, h->filter);
    sp__le_put64(p + 40, h->index);
    sp__le_put32(p + 48, h->count);
    sp__le_put32(p + 52, h->nskipped);
    sp__le_put32(p + 56, h->nsubstituted);
    sp__le_put32(p + 60, h->nfailures);
    sp__le_put64(p + 64, h->sample_bytes);
    sp__le_put64(p + 72, h->meta_raw);
    sp__le_put64(p + 80, h->meta_stored);
    sp__le_put64(p + 88, h->images_stored);
    sp__le_put64(p + 96, h->raw_hash.hi);
    sp__le_put64(p + 104, h->raw_hash.lo);
    sp__le_put32(p + 112, h->channels);
    *len = SP__CB_HEADER + ms + is;
    XXH3_64bits_reset(st);
    hash64(st, p, 120, isa);
    hash64(st, p + SP__CB_HEADER, ms + is, isa);
    h->file_hash = XXH3_64bits_digest(st);
    sp__le_put64(p + 120, h->file_hash);
    XXH3_freeState(st);
    return SP_OK;
}

/* ---- batch files: decode ------------------------------------------------------ */

int sp__cb_parse_header(const uint8_t *p, size_t len, const char *path, sp__cb_header *h,
                        sp_error *err) {
    memset(h, 0, sizeof *h);
    if (len < SP__CB_HEADER)
        return sp_error_set(err, SP_EFORMAT, "%s: truncated (%zu bytes, header needs %d)", path,
                            len, SP__CB_HEADER);
    if (memcmp(p, SP__CB_MAGIC, 8) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: not a seedpipe cache batch file", path);
    h->version = sp__le_get32(p + 8);
    if (h->version != SP_CACHE_FORMAT_VERSION)
        return sp_error_set(err, SP_EFORMAT, "%s: cache format version %u (this library reads %d)",
                            path, h->version, SP_CACHE_FORMAT_VERSION);
    if (sp__le_get32(p + 12) != SP__CB_HEADER)
        return sp_error_set(err, SP_EFORMAT, "%s: bad header size %u", path, sp__le_get32(p + 12));
    h->key.hi = sp__le_get64(p + 16);
    h->key.lo = sp__le_get64(p + 24);
    h->epoch = sp__le_get32(p + 32);
    h->filter = sp__le_get32(p + 36);
    h->index = sp__le_get64(p + 40);
    h->count = sp__le_get32(p + 48);
    h->nskipped = sp__le_get32(p + 52);
    h->nsubstituted = sp__le_get32(p + 56);
    h->nfailures = sp__le_get32(p + 60);
    h->sample_bytes = sp__le_get64(p + 64);
    h->meta_raw = sp__le_get64(p + 72);
    h->meta_stored = sp__le_get64(p + 80);
    h->images_stored = sp__le_get64(p + 88);
    h->raw_hash.hi = sp__le_get64(p + 96);
    h->raw_hash.lo = sp__le_get64(p + 104);
    h->channels = sp__le_get32(p + 112);
    h->file_hash = sp__le_get64(p + 120);
    if (h->filter >= SP__FILTER_DICT8_NCHW
            ? h->channels < 1 || h->channels > 4 || h->sample_bytes == 0 ||
                  h->sample_bytes % (4 * (uint64_t)h->channels)
            : h->channels != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: bad filter parameters", path);
    if (h->filter > SP__FILTER_DICT8_NHWC || sp__le_get32(p + 116) != 0 || h->count > SP__CB_MAX_COUNT ||
        h->nskipped > SP__CB_MAX_COUNT || h->nsubstituted > SP__CB_MAX_COUNT ||
        h->nfailures > 2 * SP__CB_MAX_COUNT || h->sample_bytes > SP__CB_MAX_RAW ||
        (h->count && h->sample_bytes > SP__CB_MAX_RAW / h->count) ||
        h->meta_raw > SP__CB_MAX_RAW || h->meta_stored > SP__CB_MAX_RAW ||
        h->images_stored > SP__CB_MAX_RAW)
        return sp_error_set(err, SP_EFORMAT, "%s: header field out of range", path);
    uint64_t fixed = (uint64_t)h->count * 12 + (uint64_t)h->nskipped * 8 +
                     (uint64_t)h->nsubstituted * 16 + (uint64_t)h->nfailures * 16;
    if (h->meta_raw < fixed ||
        h->meta_raw > fixed + (uint64_t)h->nfailures * SP_ERROR_MSG_MAX)
        return sp_error_set(err, SP_EFORMAT, "%s: metadata size %" PRIu64 " does not fit the "
                            "header's counts", path, h->meta_raw);
    if ((uint64_t)len != SP__CB_HEADER + h->meta_stored + h->images_stored)
        return sp_error_set(err, SP_EFORMAT, "%s: %zu bytes, header says %" PRIu64
                            " (truncated or extended)", path, len,
                            (uint64_t)SP__CB_HEADER + h->meta_stored + h->images_stored);
    return SP_OK;
}

/* Check that [src, src + stored) is exactly one zstd frame of `raw` bytes. */
static int frame_check(const uint8_t *src, size_t stored, size_t raw, const char *path,
                       const char *what, sp_error *err) {
    if (ZSTD_findFrameCompressedSize(src, stored) != stored ||
        ZSTD_getFrameContentSize(src, stored) != (unsigned long long)raw)
        return sp_error_set(err, SP_EFORMAT, "%s: %s frame does not match the header", path,
                            what);
    return SP_OK;
}

/* Decompress exactly one frame of `stored` bytes into exactly `raw` bytes. */
static int unzstd(ZSTD_DCtx *ctx, const uint8_t *src, size_t stored, uint8_t *dst, size_t raw,
                  const char *path, const char *what, sp_error *err) {
    int rc = frame_check(src, stored, raw, path, what, err);
    if (rc) return rc;
    size_t r = ZSTD_decompressDCtx(ctx, dst, raw, src, stored);
    if (ZSTD_isError(r) || r != raw)
        return sp_error_set(err, SP_EFORMAT, "%s: %s: zstd: %s", path, what,
                            ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short frame");
    return SP_OK;
}

/* A dictionary images frame is decompressed in pieces of CHUNK bytes
 * (zstd's streaming decoder, whose window, 512 KiB at the default level,
 * stays in its own buffer), and each piece is hashed and expanded into the
 * batch while it is in the L2 cache: the frame (a quarter of the batch's
 * bytes) never exists whole in memory and is never read back from RAM.
 * XXH3's streaming digest over the pieces is its one-shot digest over the
 * frame, so the file format is untouched. Unfiltered and shuffled frames
 * are decompressed whole (into the batch, or into scratch to unshuffle),
 * which measured as fast as pieces for them. */
#define CHUNK ((size_t)64 << 10)

/* Where the pieces of the images frame go. */
typedef struct img_sink {
    XXH3_state_t *st;   /* the raw hash, metadata already in */
    int isa;
    dict_dec *dd;       /* dictionary filters, else NULL */
    size_t tab;         /* dictionary: the table's bytes at the frame's start */
    uint8_t *final;     /* dictionary: the expanded images */
} img_sink;

/* Bytes [pos, pos + n) of the frame are at p: hash them; of a dictionary
 * frame, collect the table, then expand the index bytes. */
static void sink_put(img_sink *s, const uint8_t *p, size_t pos, size_t n) {
    hash128(s->st, p, n, s->isa);
    if (!s->dd) return;
    if (pos < s->tab) {
        size_t m = s->tab - pos < n ? s->tab - pos : n;
        memcpy((uint8_t *)s->dd->t + pos, p, m);
        p += m;
        pos += m;
        n -= m;
        if (pos == s->tab) dict_dec_ready(s->dd);
    }
    if (n) dict_dec_range(s->dd, p, pos - s->tab, n, s->final + 4 * (pos - s->tab));
}

/* Decompress the images frame (exactly `stored` bytes, exactly `raw` out)
 * piece by piece through ring[0, CHUNK) to the sink. */
static int unzstd_chunks(ZSTD_DCtx *ctx, const uint8_t *src, size_t stored, size_t raw,
                         uint8_t *ring, img_sink *s, const char *path, sp_error *err) {
    int rc = frame_check(src, stored, raw, path, "images", err);
    if (rc) return rc;
    /* A new frame (an earlier one may have failed half-way); any window
     * size the one-shot decoder took (memory is bounded by `raw`). */
    size_t r = ZSTD_DCtx_reset(ctx, ZSTD_reset_session_only);
    if (!ZSTD_isError(r))
        r = ZSTD_DCtx_setParameter(ctx, ZSTD_d_windowLogMax,
                                   ZSTD_dParam_getBounds(ZSTD_d_windowLogMax).upperBound);
    ZSTD_inBuffer in = {src, stored, 0};
    size_t done = 0;
    while (!ZSTD_isError(r)) {
        size_t room = raw - done < CHUNK ? raw - done : CHUNK;
        ZSTD_outBuffer ob = {ring, room, 0};
        size_t in0 = in.pos;
        r = ZSTD_decompressStream(ctx, &ob, &in);
        if (ZSTD_isError(r)) break;
        if (ob.pos) sink_put(s, ring, done, ob.pos);
        done += ob.pos;
        if (r == 0) break;   /* the frame is complete */
        if (ob.pos == 0 && in.pos == in0)
            return sp_error_set(err, SP_EFORMAT, "%s: images: zstd: short frame", path);
    }
    if (ZSTD_isError(r))
        return sp_error_set(err, SP_EFORMAT, "%s: images: zstd: %s", path, ZSTD_getErrorName(r));
    if (done != raw || in.pos != stored)
        return sp_error_set(err, SP_EFORMAT, "%s: images: zstd: short frame", path);
    return SP_OK;
}

static int decode_checked(ZSTD_DCtx *ctx, XXH3_state_t *st, const uint8_t *p, size_t len,
                          const char *path, const sp__cb_header *h, sp_batch *out,
                          sp__buf *meta, sp__buf *scratch, sp_error *err) {
    int isa = cf_isa();
    XXH3_64bits_reset(st);
    hash64(st, p, 120, isa);
    hash64(st, p + SP__CB_HEADER, len - SP__CB_HEADER, isa);
    if (XXH3_64bits_digest(st) != h->file_hash)
        return sp_error_set(err, SP_EFORMAT, "%s: checksum mismatch (stored bytes damaged)",
                            path);
    if (out && (h->count > out->capacity || h->nskipped > out->capacity ||
                h->nsubstituted > out->capacity))
        return sp_error_set(err, SP_EFORMAT, "%s: %u samples, the batch holds %u", path,
                            h->count, out->capacity);
    /* A batch logs at most one failure per position and substitute try, so
     * this bounds the metadata allocation by the batch, not by the header. */
    if (out && (uint64_t)h->nfailures > (uint64_t)out->capacity * (SP_SUBSTITUTE_TRIES + 1))
        return sp_error_set(err, SP_EFORMAT,
                            "%s: %u failure records, a batch of %u has at most %u", path,
                            h->nfailures, out->capacity, out->capacity * (SP_SUBSTITUTE_TRIES + 1));
    size_t img_raw = (size_t)h->count * (size_t)h->sample_bytes;
    if (h->filter == SP__FILTER_SHUFFLE4 && img_raw % 4)
        return sp_error_set(err, SP_EFORMAT, "%s: shuffled images of %zu bytes", path, img_raw);
    if (sp__buf_reserve(meta, (size_t)h->meta_raw + 1) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    const uint8_t *src = p + SP__CB_HEADER;
    int rc = unzstd(ctx, src, h->meta_stored, meta->p, h->meta_raw, path, "metadata", err);
    if (rc) return rc;
    src += h->meta_stored;
    /* The images end up in `final`: the batch, or scratch when verifying
     * only. A dictionary frame streams through a CHUNK-byte ring at the
     * start of scratch; a shuffled one is decompressed whole there and then
     * unshuffled; an unfiltered one goes straight to `final`. */
    size_t nvals = img_raw / 4;
    int dict = h->filter >= SP__FILTER_DICT8_NCHW;
    size_t frame_raw = dict ? dict_frame_size(h->channels, nvals) : img_raw;
    size_t front = dict ? CHUNK
                 : h->filter == SP__FILTER_SHUFFLE4 ? (frame_raw + 63) & ~(size_t)63 : 0;
    if (sp__buf_reserve(scratch, front + (out ? 0 : img_raw) + 1) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    uint8_t *final = out ? out->images : scratch->p + front;
    uint8_t *dst = h->filter ? scratch->p : final;
    dict_dec dd;
    img_sink s = {st, isa, NULL, 0, final};
    if (dict) {
        dd.C = h->channels;
        dd.plane = (size_t)(h->sample_bytes / 4 / h->channels);
        dd.nhwc = h->filter == SP__FILTER_DICT8_NHWC;
        dd.isa = isa;
        s.dd = &dd;
        s.tab = (size_t)h->channels * 1024;
    }
    XXH3_128bits_reset(st);
    hash128(st, meta->p, h->meta_raw, isa);
    if (dict) {
        rc = unzstd_chunks(ctx, src, h->images_stored, frame_raw, dst, &s, path, err);
    } else {
        rc = unzstd(ctx, src, h->images_stored, dst, frame_raw, path, "images", err);
        if (rc == 0) hash128(st, dst, frame_raw, isa);
    }
    if (rc) return rc;
    XXH128_hash_t rh = XXH3_128bits_digest(st);
    if (rh.high64 != h->raw_hash.hi || rh.low64 != h->raw_hash.lo)
        return sp_error_set(err, SP_EFORMAT, "%s: content hash mismatch after decompression",
                            path);
    if (h->filter == SP__FILTER_SHUFFLE4) unshuffle4(dst, final, img_raw);
    /* The failure records must tile the rest of the metadata exactly. */
    const uint8_t *m = meta->p;
    size_t off = (size_t)h->count * 12 + (size_t)h->nskipped * 8 + (size_t)h->nsubstituted * 16;
    for (uint32_t i = 0; i < h->nfailures; i++) {
        if (off + 16 > h->meta_raw || sp__le_get32(m + off + 12) >= SP_ERROR_MSG_MAX ||
            off + 16 + sp__le_get32(m + off + 12) > h->meta_raw)
            return sp_error_set(err, SP_EFORMAT, "%s: bad failure record %u", path, i);
        off += 16 + sp__le_get32(m + off + 12);
    }
    if (off != h->meta_raw)
        return sp_error_set(err, SP_EFORMAT, "%s: metadata has %zu trailing bytes", path,
                            (size_t)h->meta_raw - off);
    if (!out) return SP_OK;
    out->count = h->count;
    out->epoch = h->epoch;
    out->index = h->index;
    for (uint32_t i = 0; i < h->count; i++) out->indices[i] = sp__le_get64(m + 8 * (size_t)i);
    m += 8 * (size_t)h->count;
    for (uint32_t i = 0; i < h->count; i++) out->labels[i] = (int32_t)sp__le_get32(m + 4 * (size_t)i);
    m += 4 * (size_t)h->count;
    out->nskipped = h->nskipped;
    for (uint32_t i = 0; i < h->nskipped; i++, m += 8)
        if (out->skipped) out->skipped[i] = sp__le_get64(m);
    out->nsubstituted = h->nsubstituted;
    for (uint32_t i = 0; i < 2 * h->nsubstituted; i++, m += 8)
        if (out->substituted) out->substituted[i] = sp__le_get64(m);
    return SP_OK;
}


int sp__cb_decode(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                  const sp__cb_header *h, sp_batch *out, sp__buf *meta, sp__buf *scratch,
                  sp_error *err) {
    XXH3_state_t *st = XXH3_createState();
    if (!st) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    int rc = decode_checked(ctx, st, p, len, path, h, out, meta, scratch, err);
    XXH3_freeState(st);
    return rc;
}


void sp__cb_replay_failures(sp_loader *ld, const sp__cb_header *h, const uint8_t *meta) {
    size_t off = (size_t)h->count * 12 + (size_t)h->nskipped * 8 + (size_t)h->nsubstituted * 16;
    char msg[SP_ERROR_MSG_MAX];
    for (uint32_t i = 0; i < h->nfailures; i++) {
        uint32_t n = sp__le_get32(meta + off + 12);
        memcpy(msg, meta + off + 16, n);
        msg[n] = '\0';
        sp__loader_log_failure(ld, sp__le_get64(meta + off), (int)(int32_t)sp__le_get32(meta + off + 8), msg);
        off += 16 + n;
    }
}

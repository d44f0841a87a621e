/* cache_filter.h - the image filters of the cache's batch files
 * (cache/cache_filter.c; used by cache/cache_file.c only).
 *
 * Not a public header. The bottom of the cache's stack: the filters know
 * nothing of files, hashes or zstd; cache_file.c picks one, records it in
 * the header (SP__FILTER_*, cache_internal.h) and hands it the frame's
 * bytes. Every function is exact: decoding gives back the encoded bytes.
 */
#ifndef SEEDPIPE_CACHE_FILTER_H
#define SEEDPIPE_CACHE_FILTER_H

#include <stddef.h>
#include <stdint.h>

/* Byte shuffle by 4: dst[k * m + i] = src[4 i + k], m = n / 4 (n % 4 == 0),
 * and its inverse. */
void sp__shuffle4(const uint8_t *src, uint8_t *dst, size_t n);
void sp__unshuffle4(const uint8_t *src, uint8_t *dst, size_t n);

/* The images frame of a dictionary filter: C x 256 4-byte table entries,
 * then one index byte per value. */
static inline size_t sp__dict_frame_size(uint32_t C, size_t nvals) {
    return (size_t)C * 1024 + nvals;
}

/*! sp__dict_encode() : the dictionary frame (sp__dict_frame_size(C, nvals)
 *  bytes at frame) of nvals float32 values at img, C channels of `plane`
 *  values (NCHW) or pixel-interleaved (nhwc).
 *  @return 0, -1 if some channel has more than 256 distinct values, -2 (no
 *  memory). */
int sp__dict_encode(const uint8_t *img, size_t nvals, uint32_t C, size_t plane, int nhwc,
                    uint8_t *frame);

/* The decoder of one dictionary images frame: its table, and where value
 * k's channel comes from. sp__dict_dec_range() expands any run of values,
 * so the frame can be decoded chunk by chunk as zstd produces it (a chunk
 * may end anywhere, in a plane or between the channels of a pixel). isa is
 * the SIMD level (0 portable C, 1 AVX2, 2 AVX-512 VBMI; the caller's
 * run-time check): every level writes each value as the 4 table bytes its
 * index selects, the same bytes. */
typedef struct sp__dict_dec {
    uint32_t C;
    size_t plane;           /* NCHW: values per channel plane */
    int nhwc, isa;
    int keep;               /* 1: plain stores (the output is read back at once),
                             * else streaming ones where aligned */
    uint32_t t[4][256];     /* channel c's entries, in memory byte order */
    uint8_t bp[4][4][256];  /* isa 2: byte k of t[c][j] at bp[c][k][j] */
} sp__dict_dec;

/* The table is in d->t (d->C, plane, nhwc and isa set): get ready to decode. */
void sp__dict_dec_ready(sp__dict_dec *d);
/* Expand values v0 .. v0 + n - 1 of the frame (their index bytes at idx)
 * into out (the bytes of value v0). */
void sp__dict_dec_range(const sp__dict_dec *d, const uint8_t *idx, size_t v0, size_t n,
                        uint8_t *out);
/* memcpy() of n bytes with streaming stores where isa >= 1 (AVX2): for a
 * piece that was expanded and read in the caches and goes to a batch that
 * is not read again soon. The same bytes as memcpy(). */
void sp__copy_stream(uint8_t *dst, const uint8_t *src, size_t n, int isa);

#endif

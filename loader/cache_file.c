/* cache_file.c - the cache's file formats: batch files and entry manifests.
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
 */
#include "loader/cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "loader/loader_internal.h"

/* ---- little helpers ---------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

int sp__cbuf_reserve(sp__cbuf *b, size_t n) {
    if (n <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < n) cap = cap > SIZE_MAX / 2 ? n : cap * 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

void sp__cbuf_free(sp__cbuf *b) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

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

/* One channel's dictionary while encoding. */
typedef struct dict_chan {
    dict_slot slot[DICT_SLOTS];
    uint8_t *table;       /* 256 x 4 bytes in the frame */
    uint32_t n, last;
    int lastidx;
} dict_chan;

/* Index of `bits` in channel d, adding it if new; -1 when full. */
static inline int dict_index(dict_chan *d, uint32_t bits) {
    if (d->lastidx >= 0 && bits == d->last) return d->lastidx;
    uint32_t h = (bits * 0x9E3779B1u) >> 22;
    while (d->slot[h].idx >= 0 && d->slot[h].key != bits) h = (h + 1) & (DICT_SLOTS - 1);
    if (d->slot[h].idx < 0) {
        if (d->n == 256) return -1;
        d->slot[h].key = bits;
        d->slot[h].idx = (int16_t)d->n;
        memcpy(d->table + 4 * d->n, &bits, 4);
        d->n++;
    }
    d->last = bits;
    d->lastidx = d->slot[h].idx;
    return d->lastidx;
}

/* @return 0, -1 if some channel has more than 256 distinct values, -2 (no memory). */
static int dict_encode(const uint8_t *img, size_t nvals, uint32_t C, size_t plane, int nhwc,
                       uint8_t *frame) {
    dict_chan *d = malloc((size_t)C * sizeof *d);
    if (!d) return -2;
    memset(frame, 0, (size_t)C * 1024);
    for (uint32_t c = 0; c < C; c++) {
        for (int i = 0; i < DICT_SLOTS; i++) d[c].slot[i].idx = -1;
        d[c].table = frame + (size_t)c * 1024;
        d[c].n = d[c].last = 0;
        d[c].lastidx = -1;
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

static void dict_decode(const uint8_t *frame, size_t nvals, uint32_t C, size_t plane, int nhwc,
                        uint8_t *out) {
    uint32_t t[4][256];
    memcpy(t, frame, (size_t)C * 1024);
    const uint8_t *idx = frame + (size_t)C * 1024;
    if (nhwc) {
        for (size_t v = 0; v < nvals; v += C)
            for (uint32_t c = 0; c < C; c++) memcpy(out + 4 * (v + c), &t[c][idx[v + c]], 4);
        return;
    }
    for (size_t v0 = 0; v0 < nvals; v0 += plane) {
        const uint32_t *tc = t[(v0 / plane) % C];
        uint8_t *o = out + 4 * v0;
        const uint8_t *ix = idx + v0;
        for (size_t k = 0; k < plane; k++) memcpy(o + 4 * k, &tc[ix[k]], 4);
    }
}

/* The failure record of `sample` in the loader's log, or NULL. */
static const sp_failure *find_failure(const sp_loader *ld, uint64_t sample) {
    if (!ld) return NULL;
    size_t n = sp_loader_failure_count(ld);
    for (size_t i = 0; i < n; i++) {
        const sp_failure *f = sp_loader_failure(ld, i);
        if (f && f->sample == sample) return f;
    }
    return NULL;
}

/* ---- batch files: encode ------------------------------------------------------ */

int sp__cb_encode(ZSTD_CCtx *ctx, sp_digest key, const sp_batch *b, size_t sample_bytes,
                  int filter, const sp_loader *ld, sp__cbuf *out, size_t *len,
                  sp__cbuf *scratch, sp__cb_header *h, sp_error *err) {
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
    const sp_failure **fails = nbad ? malloc(nbad * sizeof *fails) : NULL;
    if (nbad && !fails) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    for (size_t i = 0; i < nbad; i++) {
        uint64_t s = i < b->nskipped ? b->skipped[i] : b->substituted[2 * (i - b->nskipped)];
        const sp_failure *f = find_failure(ld, s);
        if (f) {
            fails[nfl++] = f;
            fail_bytes += 16 + strlen(f->msg);
            nfail++;
        }
    }
    size_t meta_raw = count * 12 + (size_t)b->nskipped * 8 + (size_t)b->nsubstituted * 16 +
                      fail_bytes;
    size_t meta_off = 0, img_off = (meta_raw + 63) & ~(size_t)63;
    if (sp__cbuf_reserve(scratch, img_off + (filter ? (frame_raw > img_raw ? frame_raw : img_raw)
                                                    : 0) + 1) != 0) {
        free(fails);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    uint8_t *m = scratch->p + meta_off;
    for (size_t i = 0; i < count; i++) put64(m + 8 * i, b->indices[i]);
    m += 8 * count;
    for (size_t i = 0; i < count; i++) put32(m + 4 * i, (uint32_t)b->labels[i]);
    m += 4 * count;
    for (uint32_t i = 0; i < b->nskipped; i++, m += 8) put64(m, b->skipped[i]);
    for (uint32_t i = 0; i < 2 * b->nsubstituted; i++, m += 8) put64(m, b->substituted[i]);
    for (size_t i = 0; i < nfl; i++) {
        size_t n = strlen(fails[i]->msg);
        put64(m, fails[i]->sample);
        put32(m + 8, (uint32_t)fails[i]->code);
        put32(m + 12, (uint32_t)n);
        memcpy(m + 16, fails[i]->msg, n);
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
    if (sp__cbuf_reserve(out, cap) != 0)
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
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, scratch->p, meta_raw);
    XXH3_128bits_update(st, img, frame_raw);
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
    put32(p + 8, h->version);
    put32(p + 12, SP__CB_HEADER);
    put64(p + 16, key.hi);
    put64(p + 24, key.lo);
    put32(p + 32, h->epoch);
    put32(p + 36, h->filter);
    put64(p + 40, h->index);
    put32(p + 48, h->count);
    put32(p + 52, h->nskipped);
    put32(p + 56, h->nsubstituted);
    put32(p + 60, h->nfailures);
    put64(p + 64, h->sample_bytes);
    put64(p + 72, h->meta_raw);
    put64(p + 80, h->meta_stored);
    put64(p + 88, h->images_stored);
    put64(p + 96, h->raw_hash.hi);
    put64(p + 104, h->raw_hash.lo);
    put32(p + 112, h->channels);
    *len = SP__CB_HEADER + ms + is;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, p, 120);
    XXH3_64bits_update(st, p + SP__CB_HEADER, ms + is);
    h->file_hash = XXH3_64bits_digest(st);
    put64(p + 120, h->file_hash);
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
    h->version = get32(p + 8);
    if (h->version != SP_CACHE_FORMAT_VERSION)
        return sp_error_set(err, SP_EFORMAT, "%s: cache format version %u (this library reads %d)",
                            path, h->version, SP_CACHE_FORMAT_VERSION);
    if (get32(p + 12) != SP__CB_HEADER)
        return sp_error_set(err, SP_EFORMAT, "%s: bad header size %u", path, get32(p + 12));
    h->key.hi = get64(p + 16);
    h->key.lo = get64(p + 24);
    h->epoch = get32(p + 32);
    h->filter = get32(p + 36);
    h->index = get64(p + 40);
    h->count = get32(p + 48);
    h->nskipped = get32(p + 52);
    h->nsubstituted = get32(p + 56);
    h->nfailures = get32(p + 60);
    h->sample_bytes = get64(p + 64);
    h->meta_raw = get64(p + 72);
    h->meta_stored = get64(p + 80);
    h->images_stored = get64(p + 88);
    h->raw_hash.hi = get64(p + 96);
    h->raw_hash.lo = get64(p + 104);
    h->channels = get32(p + 112);
    h->file_hash = get64(p + 120);
    if (h->filter >= SP__FILTER_DICT8_NCHW
            ? h->channels < 1 || h->channels > 4 || h->sample_bytes == 0 ||
                  h->sample_bytes % (4 * (uint64_t)h->channels)
            : h->channels != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: bad filter parameters", path);
    if (h->filter > SP__FILTER_DICT8_NHWC || get32(p + 116) != 0 || h->count > SP__CB_MAX_COUNT ||
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

/* Decompress exactly one frame of `stored` bytes into exactly `raw` bytes. */
static int unzstd(ZSTD_DCtx *ctx, const uint8_t *src, size_t stored, uint8_t *dst, size_t raw,
                  const char *path, const char *what, sp_error *err) {
    if (ZSTD_findFrameCompressedSize(src, stored) != stored ||
        ZSTD_getFrameContentSize(src, stored) != (unsigned long long)raw)
        return sp_error_set(err, SP_EFORMAT, "%s: %s frame does not match the header", path,
                            what);
    size_t r = ZSTD_decompressDCtx(ctx, dst, raw, src, stored);
    if (ZSTD_isError(r) || r != raw)
        return sp_error_set(err, SP_EFORMAT, "%s: %s: zstd: %s", path, what,
                            ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short frame");
    return SP_OK;
}

static int decode_checked(ZSTD_DCtx *ctx, XXH3_state_t *st, const uint8_t *p, size_t len,
                          const char *path, const sp__cb_header *h, sp_batch *out,
                          sp__cbuf *meta, sp__cbuf *scratch, sp_error *err) {
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, p, 120);
    XXH3_64bits_update(st, p + SP__CB_HEADER, len - SP__CB_HEADER);
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
    if (sp__cbuf_reserve(meta, (size_t)h->meta_raw + 1) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    const uint8_t *src = p + SP__CB_HEADER;
    int rc = unzstd(ctx, src, h->meta_stored, meta->p, h->meta_raw, path, "metadata", err);
    if (rc) return rc;
    src += h->meta_stored;
    /* Where the images frame is decompressed to, and where the images end
     * up: straight into the batch when there is no filter. */
    size_t nvals = img_raw / 4;
    int dict = h->filter >= SP__FILTER_DICT8_NCHW;
    size_t frame_raw = dict ? dict_frame_size(h->channels, nvals) : img_raw;
    uint8_t *final = out ? out->images : NULL;
    uint8_t *dst = final;
    if (!out || h->filter) {
        size_t fo = (frame_raw + 63) & ~(size_t)63;
        size_t need = h->filter && !out ? fo + img_raw : frame_raw;
        if (sp__cbuf_reserve(scratch, need + 1) != 0)
            return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        dst = scratch->p;
        if (!out) final = h->filter ? scratch->p + fo : scratch->p;
    }
    rc = unzstd(ctx, src, h->images_stored, dst, frame_raw, path, "images", err);
    if (rc) return rc;
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, meta->p, h->meta_raw);
    XXH3_128bits_update(st, dst, frame_raw);
    XXH128_hash_t rh = XXH3_128bits_digest(st);
    if (rh.high64 != h->raw_hash.hi || rh.low64 != h->raw_hash.lo)
        return sp_error_set(err, SP_EFORMAT, "%s: content hash mismatch after decompression",
                            path);
    if (h->filter == SP__FILTER_SHUFFLE4) {
        if (img_raw % 4)
            return sp_error_set(err, SP_EFORMAT, "%s: shuffled images of %zu bytes", path, img_raw);
        unshuffle4(dst, final, img_raw);
    } else if (dict) {
        size_t plane = (size_t)(h->sample_bytes / 4 / h->channels);
        dict_decode(dst, nvals, h->channels, plane, h->filter == SP__FILTER_DICT8_NHWC, final);
    }
    /* The failure records must tile the rest of the metadata exactly. */
    const uint8_t *m = meta->p;
    size_t off = (size_t)h->count * 12 + (size_t)h->nskipped * 8 + (size_t)h->nsubstituted * 16;
    for (uint32_t i = 0; i < h->nfailures; i++) {
        if (off + 16 > h->meta_raw || get32(m + off + 12) >= SP_ERROR_MSG_MAX ||
            off + 16 + get32(m + off + 12) > h->meta_raw)
            return sp_error_set(err, SP_EFORMAT, "%s: bad failure record %u", path, i);
        off += 16 + get32(m + off + 12);
    }
    if (off != h->meta_raw)
        return sp_error_set(err, SP_EFORMAT, "%s: metadata has %zu trailing bytes", path,
                            (size_t)h->meta_raw - off);
    if (!out) return SP_OK;
    out->count = h->count;
    out->epoch = h->epoch;
    out->index = h->index;
    for (uint32_t i = 0; i < h->count; i++) out->indices[i] = get64(m + 8 * (size_t)i);
    m += 8 * (size_t)h->count;
    for (uint32_t i = 0; i < h->count; i++) out->labels[i] = (int32_t)get32(m + 4 * (size_t)i);
    m += 4 * (size_t)h->count;
    out->nskipped = h->nskipped;
    for (uint32_t i = 0; i < h->nskipped; i++, m += 8)
        if (out->skipped) out->skipped[i] = get64(m);
    out->nsubstituted = h->nsubstituted;
    for (uint32_t i = 0; i < 2 * h->nsubstituted; i++, m += 8)
        if (out->substituted) out->substituted[i] = get64(m);
    return SP_OK;
}


int sp__cb_decode(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                  const sp__cb_header *h, sp_batch *out, sp__cbuf *meta, sp__cbuf *scratch,
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
        uint32_t n = get32(meta + off + 12);
        memcpy(msg, meta + off + 16, n);
        msg[n] = '\0';
        sp__loader_log_failure(ld, get64(meta + off), (int)(int32_t)get32(meta + off + 8), msg);
        off += 16 + n;
    }
}

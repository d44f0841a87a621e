/* fuzz_cache_batch - the cache's batch-file reader (sp__cb_parse_header +
 * sp__cb_decode, what sp_cache_reader_batch runs on every hit).
 *
 * Byte 0 picks how the rest becomes a file:
 *   bit 1 clear: the rest is the file; bit 0 set: the file checksum
 *     (bytes 120..128) is fixed up so the fuzzer gets past it.
 *   bit 1 set (structured): 128 header bytes, u32 meta length M, M bytes
 *     of raw metadata, the rest raw images; the target compresses both
 *     frames (zstd level 1) and fills in every size and both checksums;
 *     with bit 2 the images are first cut or zero-padded to the size the
 *     header's count, sample bytes and filter imply.
 * Each file is decoded in verify-only mode and, when its geometry is small,
 * into a batch with room for 64 samples (as a reader's batch). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "cache/cache_internal.h"

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static void fix_file_hash(uint8_t *f, size_t len) {
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, f, 120);
    XXH3_64bits_update(st, f + 128, len - 128);
    put64(f + 120, XXH3_64bits_digest(st));
    XXH3_freeState(st);
}

/* Build a structured file; returns malloc'ed bytes or NULL. */
static uint8_t *build(const uint8_t *d, size_t n, int fit, size_t *flen) {
    if (n < 132) return NULL;
    uint8_t hdr[128];
    memcpy(hdr, d, 128);
    memcpy(hdr, "SPCACHEB", 8);
    put32(hdr + 8, SP_CACHE_FORMAT_VERSION);
    put32(hdr + 12, 128);
    uint32_t M = get32(d + 128);
    d += 132;
    n -= 132;
    if (M > n) M = (uint32_t)n;
    const uint8_t *meta = d;
    const uint8_t *img = d + M;
    size_t img_n = n - M;
    uint8_t *imgbuf = NULL;
    if (fit) {
        uint64_t count = get32(hdr + 48), sb = get64(hdr + 64);
        uint32_t filter = get32(hdr + 36), C = get32(hdr + 112);
        if (count > 4096 || sb > 65536) return NULL;
        uint64_t want = count * sb;
        if (filter >= 2 && C >= 1 && C <= 4) want = (uint64_t)C * 1024 + want / 4;
        imgbuf = calloc(1, want + 1);
        if (!imgbuf) return NULL;
        memcpy(imgbuf, img, img_n < want ? img_n : want);
        img = imgbuf;
        img_n = want;
    }
    size_t cm = ZSTD_compressBound(M), ci = ZSTD_compressBound(img_n);
    uint8_t *f = malloc(128 + cm + ci);
    if (!f) { free(imgbuf); return NULL; }
    size_t sm = ZSTD_compress(f + 128, cm, meta, M, 1);
    size_t si = ZSTD_isError(sm) ? sm : ZSTD_compress(f + 128 + sm, ci, img, img_n, 1);
    if (ZSTD_isError(sm) || ZSTD_isError(si)) { free(f); free(imgbuf); return NULL; }
    memcpy(f, hdr, 128);
    put64(f + 72, M);
    put64(f + 80, sm);
    put64(f + 88, si);
    XXH128_hash_t rh;
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, meta, M);
    XXH3_128bits_update(st, img, img_n);
    rh = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    put64(f + 96, rh.high64);
    put64(f + 104, rh.low64);
    *flen = 128 + sm + si;
    fix_file_hash(f, *flen);
    free(imgbuf);
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ZSTD_DCtx *dctx;
    if (!dctx) dctx = ZSTD_createDCtx();
    if (size < 1 || size > (1u << 20)) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    uint8_t *f;
    size_t len;
    if (mode & 2) {
        f = build(data, size, mode & 4, &len);
        if (!f) return 0;
    } else {
        f = malloc(size ? size : 1);
        if (!f) return 0;
        memcpy(f, data, size);
        len = size;
        if ((mode & 1) && len >= 128) fix_file_hash(f, len);
    }
    sp__cb_header h;
    sp_error err;
    sp__buf meta = {NULL, 0}, scratch = {NULL, 0};
    /* Callers bound the geometry before decoding (the reader: the loader's
     * batch; `cache verify`: the manifest's batch size and sample bytes);
     * the header alone allows up to 2^36 image bytes and ~1.1 GB of
     * metadata, which this target does not allocate. */
    if (sp__cb_parse_header(f, len, "fuzz", &h, &err) == 0 && h.meta_raw <= (64u << 20) &&
        (uint64_t)h.count * h.sample_bytes <= (64u << 20)) {
        int rc = sp__cb_decode(dctx, f, len, "fuzz", &h, NULL, &meta, &scratch, &err);
        if (rc != 0 && err.msg[0] == '\0') abort();
        if (h.sample_bytes <= 65536 && h.count <= 64) {
            sp_batch b;
            memset(&b, 0, sizeof b);
            b.capacity = 64;
            b.images = malloc(64 * (size_t)h.sample_bytes + 1);
            b.labels = malloc(64 * sizeof *b.labels);
            b.indices = malloc(64 * sizeof *b.indices);
            b.skipped = malloc(64 * sizeof *b.skipped);
            b.substituted = malloc(128 * sizeof *b.substituted);
            if (b.images && b.labels && b.indices && b.skipped && b.substituted) {
                rc = sp__cb_decode(dctx, f, len, "fuzz", &h, &b, &meta, &scratch, &err);
                if (rc == 0 && (b.count != h.count || b.count > b.capacity)) abort();
            }
            free(b.images);
            free(b.labels);
            free(b.indices);
            free(b.skipped);
            free(b.substituted);
        }
    }
    sp__buf_free(&meta);
    sp__buf_free(&scratch);
    free(f);
    return 0;
}

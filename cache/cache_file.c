/* cache_file.c - the cache's batch file format: encode, parse, decode, and
 * the failure records a batch carries (the layout is in cache_internal.h;
 * the entry manifest's format is cache_manifest.c).
 *
 * In the cache's stack (cache/, bottom first): cache_filter.c below it,
 * the only cache file it calls; cache_batch.c
 * (whole files on disk) above it. It knows nothing of directories.
 *
 * A batch file is a 128-byte header and two zstd frames (the metadata and
 * the images). Two checksums guard it:
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
 * The images frame is filtered first (cache_filter.c): float32 images are
 * dictionary-coded when each channel has at most 256 distinct values,
 * otherwise byte-shuffled.
 *
 * Every length a file claims is bounded and cross-checked (header sizes vs
 * file size, zstd frame content sizes vs header, metadata records vs the
 * metadata size) before use: a cache file is untrusted input.
 *
 * The read path of a dictionary-coded batch (the warm cache's float32
 * case) touches each byte as few times as it can: the file hash, then the
 * images frame in 64 KiB pieces straight from zstd's streaming decoder,
 * each piece hashed and expanded into the batch while it is in L2
 * (unzstd_chunks()). The hashes run XXH3's AVX2 loop (common/hash.c),
 * the expansion an AVX-512 VBMI or AVX2 loop (cache_filter.c), chosen at
 * run time (cf_isa()); every level writes the same bytes
 * (tests/test_cache_file.c). Files are the same bytes as before: the
 * pieces' streaming XXH3 digest is the one-shot one.
 */
#include "cache/cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CF_X86 1
#endif

#include "cache/cache_filter.h"

/* The checksums stream through the library's XXH3 state (common/hash.c:
 * xxHash's baseline or AVX2 loop, at the level ck_isa() gives; XXH3 is one
 * function whichever loop computes it). */
#include "common/cpu_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"
#include "loader/loader_internal.h"

/* ---- run-time SIMD level; hashing ---------------------------------------------- */

/* 0: portable C, 1: AVX2, 2: AVX-512 with VBMI (F, BW, VBMI). The
 * environment variable SEEDPIPE_ISA=sse2|avx2|avx512 caps the level, as
 * for the resize (augment/resize.c): every level gives the same bytes, and
 * tests/test_cache_file.c compares them. */
static int cf_isa(void) {
#ifdef CF_X86
    return sp__cpu_level(SP__CPU_AVX512F | SP__CPU_AVX512BW | SP__CPU_AVX512VBMI);
#else
    return 0;
#endif
}

/* The checksums' SIMD level: xxHash's AVX2 loop at most (as before they
 * went through the library's hash: on the warm-cache bench its AVX-512
 * loop made the read no faster, 1-4% slower in alternated runs). */
static int ck_isa(int isa) { return isa > 1 ? 1 : isa; }

/* ---- batch files: encode ------------------------------------------------------ */

/* What sp__cb_encode() decides about a batch's images frame. */
typedef struct enc_images {
    int filter;             /* SP__FILTER_*: asked for, then as written in the header */
    uint32_t C;             /* dictionary filters: channels (else 0) */
    size_t plane;           /* dictionary filters: values per channel plane */
    int nhwc;               /* dictionary filters: pixel-interleaved */
    size_t img_raw;         /* count * sample bytes */
    size_t frame_raw;       /* the images frame's uncompressed size */
    const uint8_t *frame;   /* its bytes: the batch's images, or filtered in scratch */
} enc_images;

/* The filter the batch can take: the dictionary ("auto" for float32)
 * needs 1-4 channels of float32 planes, else it falls back to the shuffle,
 * which needs whole 4-byte values, else none. */
static void enc_pick_filter(enc_images *im, int filter, const sp_loader *ld, const sp_batch *b,
                            size_t sample_bytes) {
    memset(im, 0, sizeof *im);
    im->img_raw = (size_t)b->count * sample_bytes;
    if (filter == SP__FILTER_DICT8_NCHW) {   /* the writer's "auto" for float32 */
        int c = 0, hh = 0, ww = 0;
        sp__loader_sample_dims(ld, &c, &hh, &ww);
        im->C = (uint32_t)c;
        im->plane = (size_t)hh * (size_t)ww;
        im->nhwc = sp__loader_config_of(ld)->layout == SP_LAYOUT_NHWC;
        if (im->C < 1 || im->C > 4 || im->plane == 0 ||
            sample_bytes != 4 * (size_t)im->C * im->plane)
            filter = SP__FILTER_SHUFFLE4;
    }
    if (filter == SP__FILTER_SHUFFLE4 && sample_bytes % 4) filter = SP__FILTER_NONE;
    im->filter = filter;
    im->frame_raw = filter == SP__FILTER_DICT8_NCHW
                         ? sp__dict_frame_size(im->C, im->img_raw / 4)
                         : im->img_raw;
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

/* The failed samples whose log lines travel with the batch (its skipped
 * and replaced samples that the loader logged): *fails (malloc'ed; NULL
 * when the batch has none), *n of them, *bytes their records' size.
 * @return 0 or SP_ENOMEM. */
static int enc_failures(const sp_loader *ld, const sp_batch *b, sp_failure **fails, size_t *n,
                        size_t *bytes) {
    *n = *bytes = 0;
    size_t nbad = (size_t)b->nskipped + b->nsubstituted;
    *fails = nbad ? malloc(nbad * sizeof **fails) : NULL;
    if (nbad && !*fails) return SP_ENOMEM;
    for (size_t i = 0; i < nbad; i++) {
        uint64_t s = i < b->nskipped ? b->skipped[i] : b->substituted[2 * (i - b->nskipped)];
        if (find_failure(ld, s, &(*fails)[*n])) {
            *bytes += 16 + strlen((*fails)[*n].msg);
            (*n)++;
        }
    }
    return SP_OK;
}

/* The raw metadata (layout in cache_internal.h) at m. */
static void enc_meta(uint8_t *m, const sp_batch *b, const sp_failure *fails, size_t nfl) {
    size_t count = b->count;
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
}

/* Filter the batch's images into dst (room for the larger of the frame and
 * the images): a dictionary that does not fit (more than 256 values in a
 * channel) becomes the shuffle. im->frame gets the frame's bytes.
 * @return 0 or SP_ENOMEM. */
static int enc_filter(enc_images *im, const sp_batch *b, uint8_t *dst, sp_error *err) {
    im->frame = b->images;
    if (im->filter == SP__FILTER_DICT8_NCHW) {
        int dr = sp__dict_encode(b->images, im->img_raw / 4, im->C, im->plane, im->nhwc, dst);
        if (dr == -2) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
        if (dr == 0) {
            im->frame = dst;
            if (im->nhwc) im->filter = SP__FILTER_DICT8_NHWC;
        } else {   /* more than 256 values in a channel: shuffle instead */
            im->filter = SP__FILTER_SHUFFLE4;
            im->frame_raw = im->img_raw;
        }
    }
    if (im->filter == SP__FILTER_SHUFFLE4) {
        sp__shuffle4(b->images, dst, im->img_raw);
        im->frame = dst;
    }
    return SP_OK;
}

/* Compress the metadata and the images frame after the header's room in
 * out: *ms and *is get their stored sizes. @return 0, SP_ENOMEM, SP_EIO. */
static int enc_compress(ZSTD_CCtx *ctx, const uint8_t *meta, size_t meta_raw,
                        const enc_images *im, sp__buf *out, size_t *ms, size_t *is,
                        sp_error *err) {
    size_t cap = SP__CB_HEADER + ZSTD_compressBound(meta_raw) + ZSTD_compressBound(im->frame_raw);
    if (sp__buf_reserve(out, cap) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    uint8_t *p = out->p;
    *ms = ZSTD_compress2(ctx, p + SP__CB_HEADER, cap - SP__CB_HEADER, meta, meta_raw);
    if (ZSTD_isError(*ms))
        return sp_error_set(err, SP_EIO, "cache: zstd: %s", ZSTD_getErrorName(*ms));
    *is = ZSTD_compress2(ctx, p + SP__CB_HEADER + *ms, cap - SP__CB_HEADER - *ms, im->frame,
                         im->frame_raw);
    if (ZSTD_isError(*is))
        return sp_error_set(err, SP_EIO, "cache: zstd: %s", ZSTD_getErrorName(*is));
    return SP_OK;
}

/* The header's bytes [0, 120) from h (the file hash, bytes 120-127, comes
 * last: it covers these). */
static void enc_header(uint8_t *p, const sp__cb_header *h) {
    memset(p, 0, SP__CB_HEADER);
    memcpy(p, SP__CB_MAGIC, 8);
    sp__le_put32(p + 8, h->version);
    sp__le_put32(p + 12, SP__CB_HEADER);
    sp__le_put64(p + 16, h->key.hi);
    sp__le_put64(p + 24, h->key.lo);
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
}

int sp__cb_encode(const sp__cb_encode_req *rq, const sp_batch *b, sp__buf *out, size_t *len,
                  sp__cb_header *h, sp_error *err) {
    ZSTD_CCtx *ctx = rq->ctx;
    sp__buf *scratch = rq->scratch;
    const sp_loader *ld = rq->ld;
    sp_digest key = rq->key;
    size_t sample_bytes = rq->sample_bytes;
    int filter = rq->filter;
    memset(h, 0, sizeof *h);
    enc_images im;
    enc_pick_filter(&im, filter, ld, b, sample_bytes);
    sp_failure *fails;
    size_t nfl, fail_bytes;
    if (enc_failures(ld, b, &fails, &nfl, &fail_bytes) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    /* scratch: the metadata, then (64-byte aligned) the filtered images. */
    size_t meta_raw = (size_t)b->count * 12 + (size_t)b->nskipped * 8 +
                      (size_t)b->nsubstituted * 16 + fail_bytes;
    size_t img_off = (meta_raw + 63) & ~(size_t)63;
    size_t room = im.filter ? (im.frame_raw > im.img_raw ? im.frame_raw : im.img_raw) : 0;
    if (sp__buf_reserve(scratch, img_off + room + 1) != 0) {
        free(fails);
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    }
    enc_meta(scratch->p, b, fails, nfl);
    free(fails);
    size_t ms = 0, is = 0;
    int rc = enc_filter(&im, b, scratch->p + img_off, err);
    if (rc == 0) rc = enc_compress(ctx, scratch->p, meta_raw, &im, out, &ms, &is, err);
    if (rc) return rc;

    sp__hash hs, *st = &hs;
    int isa = cf_isa();
    sp__hash_init(st);
    sp__hash_bytes_isa(st, scratch->p, meta_raw, ck_isa(isa));
    sp__hash_bytes_isa(st, im.frame, im.frame_raw, ck_isa(isa));
    sp_digest rh = sp__hash_digest(st);
    h->version = SP_CACHE_FORMAT_VERSION;
    h->key = key;
    h->epoch = b->epoch;
    h->filter = (uint32_t)im.filter;
    h->channels = im.filter >= SP__FILTER_DICT8_NCHW ? im.C : 0;
    h->index = b->index;
    h->count = b->count;
    h->nskipped = b->nskipped;
    h->nsubstituted = b->nsubstituted;
    h->nfailures = (uint32_t)nfl;
    h->sample_bytes = sample_bytes;
    h->meta_raw = meta_raw;
    h->meta_stored = ms;
    h->images_stored = is;
    h->raw_hash = rh;
    uint8_t *p = out->p;
    enc_header(p, h);
    *len = SP__CB_HEADER + ms + is;
    sp__hash64_init(st);
    sp__hash64_bytes_isa(st, p, 120, ck_isa(isa));
    sp__hash64_bytes_isa(st, p + SP__CB_HEADER, ms + is, ck_isa(isa));
    h->file_hash = sp__hash64_digest(st);
    sp__le_put64(p + 120, h->file_hash);
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
    if (h->filter > SP__FILTER_DICT8_NHWC || sp__le_get32(p + 116) != 0 ||
        h->count > SP__CB_MAX_COUNT || h->nskipped > SP__CB_MAX_COUNT ||
        h->nsubstituted > SP__CB_MAX_COUNT ||
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
    sp__hash *st;       /* the raw hash, metadata already in */
    int isa;
    sp__dict_dec *dd;   /* dictionary filters, else NULL */
    size_t tab;         /* dictionary: the table's bytes at the frame's start */
    uint8_t *final;     /* dictionary: the expanded images */
    sp__hash *digest;   /* the caller's digest of the images, or NULL */
    uint8_t *stage;     /* with a digest: 4 CHUNK bytes where a piece is expanded */
} img_sink;

/* Bytes [pos, pos + n) of the frame are at p: hash them; of a dictionary
 * frame, collect the table, then expand the index bytes. */
static void sink_put(img_sink *s, const uint8_t *p, size_t pos, size_t n) {
    sp__hash_bytes_isa(s->st, p, n, ck_isa(s->isa));
    if (!s->dd) return;
    if (pos < s->tab) {
        size_t m = s->tab - pos < n ? s->tab - pos : n;
        memcpy((uint8_t *)s->dd->t + pos, p, m);
        p += m;
        pos += m;
        n -= m;
        if (pos == s->tab) sp__dict_dec_ready(s->dd);
    }
    if (!n) return;
    uint8_t *out = s->final + 4 * (pos - s->tab);
    if (!s->digest) {
        sp__dict_dec_range(s->dd, p, pos - s->tab, n, out);
        return;
    }
    /* Expanded in the caches, hashed there, then stored (streaming). */
    sp__dict_dec_range(s->dd, p, pos - s->tab, n, s->stage);
    sp__hash_bytes(s->digest, s->stage, 4 * n);
    sp__copy_stream(out, s->stage, 4 * n, s->isa);
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

/* The file hash, then what the header claims against the batch it is read
 * into (out; NULL: verify only), before anything is allocated for it. */
static int dec_check_claims(sp__hash *st, int isa, const uint8_t *p, size_t len,
                            const char *path, const sp__cb_header *h, const sp_batch *out,
                            sp_error *err) {
    sp__hash64_init(st);
    sp__hash64_bytes_isa(st, p, 120, ck_isa(isa));
    sp__hash64_bytes_isa(st, p + SP__CB_HEADER, len - SP__CB_HEADER, ck_isa(isa));
    if (sp__hash64_digest(st) != h->file_hash)
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
    return SP_OK;
}

/* Decompress the images frame at src into out's images (or scratch, when
 * verifying only), feeding the raw hash (st, the metadata already in), and
 * check that hash; then undo the shuffle. */
static int dec_images(ZSTD_DCtx *ctx, sp__hash *st, int isa, const uint8_t *src,
                      const char *path, const sp__cb_header *h, sp_batch *out,
                      sp__buf *scratch, sp__hash *digest, sp_error *err) {
    /* The images end up in `final`: the batch, or scratch when verifying
     * only. A dictionary frame streams through a CHUNK-byte ring at the
     * start of scratch; a shuffled one is decompressed whole there and then
     * unshuffled; an unfiltered one goes straight to `final`. */
    size_t img_raw = (size_t)h->count * (size_t)h->sample_bytes;
    size_t nvals = img_raw / 4;
    int dict = h->filter >= SP__FILTER_DICT8_NCHW;
    size_t frame_raw = dict ? sp__dict_frame_size(h->channels, nvals) : img_raw;
    size_t front = dict ? CHUNK
                 : h->filter == SP__FILTER_SHUFFLE4 ? (frame_raw + 63) & ~(size_t)63 : 0;
    size_t stage = dict && digest ? 4 * CHUNK : 0;
    if (sp__buf_reserve(scratch, front + stage + (out ? 0 : img_raw) + 1) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    uint8_t *final = out ? out->images : scratch->p + front + stage;
    uint8_t *dst = h->filter ? scratch->p : final;
    sp__dict_dec dd;
    img_sink s = {st, isa, NULL, 0, final, digest, scratch->p + front};
    int rc;
    if (dict) {
        dd.C = h->channels;
        dd.plane = (size_t)(h->sample_bytes / 4 / h->channels);
        dd.nhwc = h->filter == SP__FILTER_DICT8_NHWC;
        dd.isa = isa;
        dd.keep = digest != NULL;
        s.dd = &dd;
        s.tab = (size_t)h->channels * 1024;
        rc = unzstd_chunks(ctx, src, h->images_stored, frame_raw, dst, &s, path, err);
    } else {
        rc = unzstd(ctx, src, h->images_stored, dst, frame_raw, path, "images", err);
        if (rc == 0) sp__hash_bytes_isa(st, dst, frame_raw, ck_isa(isa));
    }
    if (rc) return rc;
    sp_digest rh = sp__hash_digest(st);
    if (rh.hi != h->raw_hash.hi || rh.lo != h->raw_hash.lo)
        return sp_error_set(err, SP_EFORMAT, "%s: content hash mismatch after decompression",
                            path);
    if (h->filter == SP__FILTER_SHUFFLE4) sp__unshuffle4(dst, final, img_raw);
    if (digest && !dict) sp__hash_bytes(digest, final, img_raw);
    return SP_OK;
}

/* The failure records must tile the rest of the metadata m exactly. */
static int dec_check_failures(const uint8_t *m, const char *path, const sp__cb_header *h,
                              sp_error *err) {
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
    return SP_OK;
}

/* The batch's fields from the header and the checked metadata m. */
static void dec_fill(sp_batch *out, const sp__cb_header *h, const uint8_t *m) {
    out->count = h->count;
    out->epoch = h->epoch;
    out->index = h->index;
    for (uint32_t i = 0; i < h->count; i++) out->indices[i] = sp__le_get64(m + 8 * (size_t)i);
    m += 8 * (size_t)h->count;
    for (uint32_t i = 0; i < h->count; i++)
        out->labels[i] = (int32_t)sp__le_get32(m + 4 * (size_t)i);
    m += 4 * (size_t)h->count;
    out->nskipped = h->nskipped;
    for (uint32_t i = 0; i < h->nskipped; i++, m += 8)
        if (out->skipped) out->skipped[i] = sp__le_get64(m);
    out->nsubstituted = h->nsubstituted;
    for (uint32_t i = 0; i < 2 * h->nsubstituted; i++, m += 8)
        if (out->substituted) out->substituted[i] = sp__le_get64(m);
}

static int decode_checked(ZSTD_DCtx *ctx, sp__hash *st, const uint8_t *p, size_t len,
                          const char *path, const sp__cb_header *h, sp_batch *out,
                          sp__buf *meta, sp__buf *scratch, sp__hash *digest, sp_error *err) {
    int isa = cf_isa();
    int rc = dec_check_claims(st, isa, p, len, path, h, out, err);
    if (rc) return rc;
    if (sp__buf_reserve(meta, (size_t)h->meta_raw + 1) != 0)
        return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
    const uint8_t *src = p + SP__CB_HEADER;
    rc = unzstd(ctx, src, h->meta_stored, meta->p, h->meta_raw, path, "metadata", err);
    if (rc) return rc;
    sp__hash_init(st);
    sp__hash_bytes_isa(st, meta->p, h->meta_raw, ck_isa(isa));
    rc = dec_images(ctx, st, isa, src + h->meta_stored, path, h, out, scratch, digest, err);
    if (rc == 0) rc = dec_check_failures(meta->p, path, h, err);
    if (rc == 0 && out) dec_fill(out, h, meta->p);
    return rc;
}

int sp__cb_decode(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                  const sp__cb_header *h, sp_batch *out, sp__buf *meta, sp__buf *scratch,
                  sp_error *err) {
    return sp__cb_decode_digest(ctx, p, len, path, h, out, meta, scratch, NULL, err);
}

int sp__cb_decode_digest(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                         const sp__cb_header *h, sp_batch *out, sp__buf *meta,
                         sp__buf *scratch, sp__hash *digest, sp_error *err) {
    sp__hash st;
    return decode_checked(ctx, &st, p, len, path, h, out, meta, scratch, digest, err);
}

void sp__cb_replay_failures(sp_loader *ld, const sp__cb_header *h, const uint8_t *meta) {
    size_t off = (size_t)h->count * 12 + (size_t)h->nskipped * 8 + (size_t)h->nsubstituted * 16;
    char msg[SP_ERROR_MSG_MAX];
    for (uint32_t i = 0; i < h->nfailures; i++) {
        uint32_t n = sp__le_get32(meta + off + 12);
        memcpy(msg, meta + off + 16, n);
        msg[n] = '\0';
        sp__loader_log_failure(ld, sp__le_get64(meta + off),
                               (int)(int32_t)sp__le_get32(meta + off + 8), msg);
        off += 16 + n;
    }
}

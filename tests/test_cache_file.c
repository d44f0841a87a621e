/* test_cache_file.c - the batch-file decoder at every SIMD level, on hand-made files.
 *
 * cache/cache_file.c decodes a batch file's images frame in pieces as zstd
 * produces them, hashing each piece and, for the dictionary filters,
 * expanding its index bytes into the batch, with portable C, AVX2 or
 * AVX-512 VBMI loops chosen at run time (SEEDPIPE_ISA caps the level).
 * Here files are built by hand from the layout in cache/cache_internal.h
 * (hashes by libxxhash, frames by ZSTD_compress), for geometries that put
 * the ends of the pieces and of the SIMD steps everywhere: planes that are
 * not multiples of 64, an odd number of values, C = 1..4, NCHW and NHWC,
 * frames of one and of many pieces, batch buffers at odd addresses. Each is
 * decoded at every level the CPU has and compared with a plain reference
 * expansion. Then damaged copies must all be refused: a flipped byte
 * anywhere (file hash), a changed frame under a recomputed file hash
 * (content hash: in the first and in the last piece), frames that do not
 * match the header. Last, the encoder writes the same bytes at every level
 * (the hashes are XXH3 whichever loop computes them).
 *
 * Cases (tests/runner.h, each in its own process; setup prints the levels
 * tested): test_geometry_{dict8_nchw,dict8_nhwc,none,shuffle4},
 * test_damage_{dict8_nchw,dict8_nhwc,none}, test_encode_{none,shuffle4}.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "check.h"
#include "runner.h"
#include "cache/cache_internal.h"
#include "seedpipe/philox.h"

static const char *const LEVELS[] = {"sse2", "avx2", "avx512"};

static int have_level(int i) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return i == 0 ? 1
         : i == 1 ? __builtin_cpu_supports("avx2")
                  : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vbmi");
#else
    return i == 0;
#endif
}

static uint32_t ctr_ = 0;
static uint32_t rnd(void) {
    sp_ctr c = {{ctr_++, 0xcafe, 0, 0}};
    sp_key k = {{3, 4}};
    return sp_philox4x32_10(c, k).c[0];
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The raw parts of a batch file. */
typedef struct parts {
    uint32_t filter, C, count;
    uint64_t sample_bytes;
    uint8_t *meta;      /* count * 12 */
    size_t meta_raw;
    uint8_t *frame;     /* the images frame, raw */
    size_t frame_raw;
} parts;

/* The file bytes of `pt` (malloc'ed, *len). raw_hash: NULL to compute it,
 * else use these 16 bytes (hi, lo) as the header's (a forged file). */
static uint8_t *build(const parts *pt, const uint64_t *raw_hash, int no_content_size,
                      size_t *len) {
    size_t cap = SP__CB_HEADER + ZSTD_compressBound(pt->meta_raw) +
                 ZSTD_compressBound(pt->frame_raw);
    uint8_t *p = calloc(1, cap);
    CHECK(p);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    CHECK(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, -1) == 0);
    size_t ms = ZSTD_compress2(cc, p + SP__CB_HEADER, cap - SP__CB_HEADER, pt->meta, pt->meta_raw);
    CHECK(!ZSTD_isError(ms));
    if (no_content_size) CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
    size_t is = ZSTD_compress2(cc, p + SP__CB_HEADER + ms, cap - SP__CB_HEADER - ms, pt->frame,
                               pt->frame_raw);
    CHECK(!ZSTD_isError(is));
    ZSTD_freeCCtx(cc);
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, pt->meta, pt->meta_raw);
    XXH3_128bits_update(st, pt->frame, pt->frame_raw);
    XXH128_hash_t rh = XXH3_128bits_digest(st);
    memcpy(p, SP__CB_MAGIC, 8);
    put32(p + 8, SP_CACHE_FORMAT_VERSION);
    put32(p + 12, SP__CB_HEADER);
    put64(p + 16, 0x1234);
    put64(p + 24, 0x5678);
    put32(p + 32, 7);
    put32(p + 36, pt->filter);
    put64(p + 40, 3);
    put32(p + 48, pt->count);
    put64(p + 64, pt->sample_bytes);
    put64(p + 72, pt->meta_raw);
    put64(p + 80, ms);
    put64(p + 88, is);
    put64(p + 96, raw_hash ? raw_hash[0] : rh.high64);
    put64(p + 104, raw_hash ? raw_hash[1] : rh.low64);
    put32(p + 112, pt->filter >= SP__FILTER_DICT8_NCHW ? pt->C : 0);
    *len = SP__CB_HEADER + ms + is;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, p, 120);
    XXH3_64bits_update(st, p + SP__CB_HEADER, ms + is);
    put64(p + 120, XXH3_64bits_digest(st));
    XXH3_freeState(st);
    return p;
}

/* A batch of `cap` samples of sb bytes whose images start `off` bytes into
 * their allocation (odd addresses on purpose). */
typedef struct tbatch {
    sp_batch b;
    uint8_t *mem;
} tbatch;
static void tbatch_init(tbatch *t, uint32_t cap, uint64_t sb, size_t off) {
    memset(t, 0, sizeof *t);
    t->mem = malloc((size_t)cap * sb + off + 1);
    CHECK(t->mem);
    t->b.capacity = cap;
    t->b.images = t->mem + off;
    t->b.labels = calloc(cap + 1, 4);
    t->b.indices = calloc(cap + 1, 8);
    t->b.skipped = calloc(cap + 1, 8);
    t->b.substituted = calloc(2 * cap + 1, 8);
}
static void tbatch_free(tbatch *t) {
    free(t->mem);
    free(t->b.labels);
    free(t->b.indices);
    free(t->b.skipped);
    free(t->b.substituted);
}

/* Decode file p (len bytes) into t. @return the decoder's code; err set. */
static int decode(const uint8_t *p, size_t len, sp_batch *out, sp_error *err) {
    sp__cb_header h;
    int rc = sp__cb_parse_header(p, len, "t", &h, err);
    if (rc) return rc;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    sp__buf meta = {NULL, 0}, scratch = {NULL, 0};
    rc = sp__cb_decode(dc, p, len, "t", &h, out, &meta, &scratch, err);
    ZSTD_freeDCtx(dc);
    sp__buf_free(&meta);
    sp__buf_free(&scratch);
    return rc;
}

/* Parts of a batch of `count` samples, C channels of `plane` values; dict:
 * the images frame is a random table and random index bytes (every index
 * 0..255, so both halves of the 256-entry lookup); expect gets the images
 * the decoder must produce. */
static parts make_parts(uint32_t filter, uint32_t C, size_t plane, uint32_t count,
                        uint8_t **expect) {
    parts pt;
    memset(&pt, 0, sizeof pt);
    pt.filter = filter;
    pt.C = C;
    pt.count = count;
    pt.sample_bytes = filter == SP__FILTER_NONE ? (uint64_t)C * plane : 4 * (uint64_t)C * plane;
    pt.meta_raw = (size_t)count * 12;
    pt.meta = malloc(pt.meta_raw + 1);
    for (uint32_t i = 0; i < count; i++) {
        put64(pt.meta + 8 * (size_t)i, 1000 + i);
        put32(pt.meta + 8 * (size_t)count + 4 * (size_t)i, i % 10);
    }
    size_t img = (size_t)count * pt.sample_bytes, nvals = img / 4;
    uint8_t *ex = malloc(img + 1);
    if (filter >= SP__FILTER_DICT8_NCHW) {
        pt.frame_raw = (size_t)C * 1024 + nvals;
        pt.frame = malloc(pt.frame_raw);
        for (size_t i = 0; i < (size_t)C * 1024; i++) pt.frame[i] = (uint8_t)rnd();
        uint8_t *idx = pt.frame + (size_t)C * 1024;
        /* runs as well as noise, so that zstd finds matches too */
        for (size_t k = 0; k < nvals; k++) idx[k] = (k & 512) ? (uint8_t)(k / 7) : (uint8_t)rnd();
        for (size_t k = 0; k < nvals; k++) {
            size_t c = filter == SP__FILTER_DICT8_NHWC ? k % C : (k / plane) % C;
            memcpy(ex + 4 * k, pt.frame + c * 1024 + 4 * (size_t)idx[k], 4);
        }
    } else {
        for (size_t i = 0; i < img; i++) ex[i] = (i & 1024) ? (uint8_t)(i / 5) : (uint8_t)rnd();
        pt.frame_raw = img;
        pt.frame = malloc(img + 1);
        if (filter == SP__FILTER_SHUFFLE4) {
            size_t m = img / 4;
            for (size_t i = 0; i < m; i++)
                for (int k = 0; k < 4; k++) pt.frame[(size_t)k * m + i] = ex[4 * i + (size_t)k];
        } else {
            memcpy(pt.frame, ex, img);
        }
    }
    *expect = ex;
    return pt;
}

static void free_parts(parts *pt) {
    free(pt->meta);
    free(pt->frame);
}

/* Decode at every level and at several batch addresses; compare. */
static void check_geometry(uint32_t filter, uint32_t C, size_t plane, uint32_t count) {
    uint8_t *expect;
    parts pt = make_parts(filter, C, plane, count, &expect);
    size_t len;
    uint8_t *file = build(&pt, NULL, 0, &len);
    size_t img = (size_t)count * pt.sample_bytes;
    static const size_t offs[] = {0, 4, 1, 60};
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        setenv("SEEDPIPE_ISA", LEVELS[lv], 1);
        for (int o = 0; o < 4; o++) {
            tbatch t;
            tbatch_init(&t, count, pt.sample_bytes, offs[o]);
            sp_error err;
            CHECK_OK(decode(file, len, &t.b, &err), &err);
            CHECK(t.b.count == count && t.b.epoch == 7 && t.b.index == 3);
            for (uint32_t i = 0; i < count; i++)
                CHECK(t.b.indices[i] == 1000 + i && t.b.labels[i] == (int32_t)(i % 10));
            if (memcmp(t.b.images, expect, img) != 0) {
                size_t k = 0;
                while (t.b.images[k] == expect[k]) k++;
                CHECK_MSG(0, "filter %u C %u plane %zu count %u level %s offset %zu: byte %zu "
                          "of %zu differs", filter, C, plane, count, LEVELS[lv], offs[o], k, img);
            }
            tbatch_free(&t);
        }
        /* verify only (no batch) */
        sp_error err;
        CHECK_OK(decode(file, len, NULL, &err), &err);
    }
    unsetenv("SEEDPIPE_ISA");
    printf("filter %u, C %u, plane %zu, count %u: frame %zu bytes, %zu stored: same bytes at "
           "every level\n", filter, C, plane, count, pt.frame_raw, len);
    free(file);
    free(expect);
    free_parts(&pt);
}

/* Damaged copies of one dictionary file are refused at every level. */
static void check_damage(uint32_t filter) {
    uint8_t *expect;
    parts pt = make_parts(filter, 3, 100 * 50, 20, &expect);   /* 300000 values */
    size_t len;
    uint8_t *file = build(&pt, NULL, 0, &len);
    uint64_t rh[2];
    {
        sp__cb_header h;
        sp_error err;
        CHECK_OK(sp__cb_parse_header(file, len, "t", &h, &err), &err);
        rh[0] = h.raw_hash.hi;
        rh[1] = h.raw_hash.lo;
    }
    int nflip = 0;
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        setenv("SEEDPIPE_ISA", LEVELS[lv], 1);
        tbatch t;
        tbatch_init(&t, pt.count, pt.sample_bytes, 0);
        sp_error err;
        /* a flipped bit anywhere: every header byte, then spread over the frames */
        uint8_t *c = malloc(len);
        for (size_t pos = 0; pos < len; pos += pos < 160 ? 1 : 997 + pos % 13) {
            memcpy(c, file, len);
            c[pos] ^= (uint8_t)(1u << (pos % 8));
            CHECK_MSG(decode(c, len, &t.b, &err) != 0, "flipped byte %zu accepted", pos);
            nflip++;
        }
        memcpy(c, file, len);
        c[len - 1] ^= 0x80;
        CHECK(decode(c, len, &t.b, &err) == SP_EFORMAT);
        CHECK(decode(c, len - 1, &t.b, &err) == SP_EFORMAT);   /* cut */
        free(c);
        /* a changed raw frame under a correct file hash (a forged or a
         * mis-compressed file): the content hash, whichever piece it is in */
        size_t where[] = {5, pt.frame_raw / 2, pt.frame_raw - 1, 3 * 1024 + 1};
        for (int w = 0; w < 4; w++) {
            parts bad = pt;
            bad.frame = malloc(pt.frame_raw);
            memcpy(bad.frame, pt.frame, pt.frame_raw);
            bad.frame[where[w]] ^= 1;
            size_t blen;
            uint8_t *bf = build(&bad, rh, 0, &blen);
            CHECK(decode(bf, blen, &t.b, &err) == SP_EFORMAT);
            CHECK_MSG(strstr(err.msg, "content hash mismatch"), "%s", err.msg);
            CHECK(decode(bf, blen, NULL, &err) == SP_EFORMAT);
            free(bf);
            free(bad.frame);
        }
        /* changed metadata, likewise */
        {
            parts bad = pt;
            bad.meta = malloc(pt.meta_raw);
            memcpy(bad.meta, pt.meta, pt.meta_raw);
            bad.meta[1] ^= 1;
            size_t blen;
            uint8_t *bf = build(&bad, rh, 0, &blen);
            CHECK(decode(bf, blen, &t.b, &err) == SP_EFORMAT);
            CHECK_MSG(strstr(err.msg, "content hash mismatch"), "%s", err.msg);
            free(bf);
            free(bad.meta);
        }
        /* an images frame one byte longer than the header's geometry */
        {
            parts bad = pt;
            bad.frame = malloc(pt.frame_raw + 1);
            memcpy(bad.frame, pt.frame, pt.frame_raw);
            bad.frame[pt.frame_raw] = 9;
            bad.frame_raw++;
            size_t blen;
            uint8_t *bf = build(&bad, NULL, 0, &blen);
            CHECK(decode(bf, blen, &t.b, &err) == SP_EFORMAT);
            CHECK_MSG(strstr(err.msg, "images frame does not match the header"), "%s", err.msg);
            free(bf);
            free(bad.frame);
        }
        /* an images frame that does not state its size */
        {
            size_t blen;
            uint8_t *bf = build(&pt, NULL, 1, &blen);
            CHECK(decode(bf, blen, &t.b, &err) == SP_EFORMAT);
            CHECK_MSG(strstr(err.msg, "images frame does not match the header"), "%s", err.msg);
            free(bf);
        }
        /* and the intact file still decodes */
        CHECK_OK(decode(file, len, &t.b, &err), &err);
        CHECK(memcmp(t.b.images, expect, (size_t)pt.count * pt.sample_bytes) == 0);
        tbatch_free(&t);
    }
    unsetenv("SEEDPIPE_ISA");
    printf("filter %u: %d flipped bytes, forged frames and metadata, bad frame sizes: all "
           "refused\n", filter, nflip);
    free(file);
    free(expect);
    free_parts(&pt);
}

/* sp__cb_encode() writes the same bytes at every level, with libxxhash's
 * hashes (no loader: the unfiltered and shuffled formats). */
static void check_encode(int filter) {
    uint32_t count = 9;
    size_t sb = 4 * 30011;
    tbatch t;
    tbatch_init(&t, count, sb, 0);
    for (size_t i = 0; i < count * sb; i++) t.b.images[i] = (i & 256) ? (uint8_t)(i / 9) : (uint8_t)rnd();
    for (uint32_t i = 0; i < count; i++) {
        t.b.indices[i] = 50 + i;
        t.b.labels[i] = (int32_t)i;
    }
    t.b.count = count;
    t.b.epoch = 2;
    t.b.index = 5;
    uint8_t *ref = NULL;
    size_t ref_len = 0;
    for (int lv = 0; lv < 3; lv++) {
        if (!have_level(lv)) continue;
        setenv("SEEDPIPE_ISA", LEVELS[lv], 1);
        ZSTD_CCtx *cc = ZSTD_createCCtx();
        CHECK(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, -1) == 0);
        sp__buf out = {NULL, 0}, scratch = {NULL, 0};
        sp__cb_header h;
        sp_error err;
        size_t len;
        sp_digest key = {1, 2};
        sp__cb_encode_req eq = {.key = key, .sample_bytes = sb, .filter = filter, .ld = NULL,
                                .ctx = cc, .scratch = &scratch};
        CHECK_OK(sp__cb_encode(&eq, &t.b, &out, &len, &h, &err), &err);
        CHECK(h.filter == (uint32_t)filter);
        XXH3_state_t *st = XXH3_createState();
        XXH3_64bits_reset(st);
        XXH3_64bits_update(st, out.p, 120);
        XXH3_64bits_update(st, out.p + SP__CB_HEADER, len - SP__CB_HEADER);
        CHECK(XXH3_64bits_digest(st) == h.file_hash);
        XXH3_freeState(st);
        if (!ref) {
            ref = malloc(len);
            memcpy(ref, out.p, len);
            ref_len = len;
        } else {
            CHECK_MSG(len == ref_len && memcmp(ref, out.p, len) == 0,
                      "level %s writes other bytes", LEVELS[lv]);
        }
        tbatch d;
        tbatch_init(&d, count, sb, 0);
        CHECK_OK(decode(out.p, len, &d.b, &err), &err);
        CHECK(memcmp(d.b.images, t.b.images, count * sb) == 0);
        tbatch_free(&d);
        sp__buf_free(&out);
        sp__buf_free(&scratch);
        ZSTD_freeCCtx(cc);
    }
    unsetenv("SEEDPIPE_ISA");
    printf("encode filter %d: %zu bytes, the same at every level\n", filter, ref_len);
    free(ref);
    tbatch_free(&t);
}

/* ---- cases ------------------------------------------------------------------------- */

static void setup(void) {
    for (int i = 0; i < 3; i++)
        printf("level %s: %s\n", LEVELS[i], have_level(i) ? "tested" : "not on this CPU");
}

static void geometry_dict(uint32_t f) {
    check_geometry(f, 3, 224 * 224, 3);   /* the photos' planes, many pieces */
    check_geometry(f, 3, 7 * 13, 5);      /* tails everywhere */
    check_geometry(f, 1, 1001, 131);      /* an odd number of values, > 1 piece */
    check_geometry(f, 2, 64, 1);
    check_geometry(f, 4, 33 * 31, 70);
    check_geometry(f, 3, 1, 1);           /* 3 values */
    check_geometry(f, 3, 5, 0);           /* an empty batch: the table only */
}

static void test_geometry_dict8_nchw(void) { geometry_dict(SP__FILTER_DICT8_NCHW); }
static void test_geometry_dict8_nhwc(void) { geometry_dict(SP__FILTER_DICT8_NHWC); }
static void test_geometry_none(void) {
    check_geometry(SP__FILTER_NONE, 3, 100003, 3);
    check_geometry(SP__FILTER_NONE, 1, 17, 1);
}
static void test_geometry_shuffle4(void) {
    check_geometry(SP__FILTER_SHUFFLE4, 3, 30011, 4);
    check_geometry(SP__FILTER_SHUFFLE4, 1, 1, 1);
}
static void test_damage_dict8_nchw(void) { check_damage(SP__FILTER_DICT8_NCHW); }
static void test_damage_dict8_nhwc(void) { check_damage(SP__FILTER_DICT8_NHWC); }
static void test_damage_none(void) { check_damage(SP__FILTER_NONE); }
static void test_encode_none(void) { check_encode(SP__FILTER_NONE); }
static void test_encode_shuffle4(void) { check_encode(SP__FILTER_SHUFFLE4); }

static const sp_case cases[] = {
    SP_CASE(test_geometry_dict8_nchw),
    SP_CASE(test_geometry_dict8_nhwc),
    SP_CASE(test_geometry_none),
    SP_CASE(test_geometry_shuffle4),
    SP_CASE(test_damage_dict8_nchw),
    SP_CASE(test_damage_dict8_nhwc),
    SP_CASE(test_damage_none),
    SP_CASE(test_encode_none),
    SP_CASE(test_encode_shuffle4),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, NULL);
}

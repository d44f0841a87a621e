/* test_jpeg_ckpt.c - JPEG entropy checkpoints (augment/jpeg_ckpt.c): a
 * validated file's crop decoded from the last checkpoint above it gives
 * the bytes of a decode from the top; the tables travel with the verdict
 * through the dataset index (dataset/dataset_index.c, version 2).
 *
 * What it asserts:
 *  - test_same_pixels: JPEGs encoded here with libjpeg in 10 layouts
 *    (luma sampling 1x1, 2x1, 1x2, 2x2, 4x1, 1x4, 2x4, 4x2 with 1x1
 *    chroma; 2x2 luma with 2x1 chroma; gray), standard and optimised
 *    Huffman tables, three qualities, odd sizes: each has a table; every
 *    crop start row of the image (random x, width and height) decodes to
 *    the same bytes, 3 or 1 channels, with SP__DECODE_WIDE or not, with
 *    the table and without it; crops starting below the first iMCU row
 *    were resumed from a checkpoint (sp__jpeg_ckpt_resume(), so the path
 *    is not silently skipped): all of them with standard tables, 95% in
 *    all (an optimised table of this noise has no zero DC difference,
 *    which the made-up row works around, and a narrow file may have too
 *    few blocks to pad the row to its bit); others had the frame's end
 *    cut, more than 5% of all.
 *  - test_none: a progressive file, one with a restart interval, one
 *    of a single iMCU row, a PNG and a damaged JPEG have no table.
 *  - test_foreign_tables: a table used with another file of the same
 *    geometry, truncated, and with each of its bytes changed: every
 *    decode still succeeds (a stream libjpeg refuses falls back to the
 *    top) and the header fields a table must match make it unused
 *    (under ASan: never a read outside the buffers).
 *  - test_index: through an ImageFolder with the index in a cache folder,
 *    each clean file's table is the checker's, comes back from the index
 *    at the next open (nothing hashed) and at an open without a checker;
 *    an index of version 1 (made here from the version 2 one:
 *    no tables) is still read: without a checker its verdicts are kept
 *    (no table), with one its files are checked again, once, and get
 *    their tables; the loader's batches (random_resized_crop) equal those
 *    of SEEDPIPE_INDEX=off, where every file is read to its end.
 *  - test_corpus: the clean files of jpeg-bugs and jpeg-crashtest
 *    (skipped visibly when absent): regions with the table equal regions
 *    without it.
 *
 * Cases (tests/runner.h): test_same_pixels, test_none, test_foreign_tables,
 * test_index, test_corpus.
 */
#define _XOPEN_SOURCE 700   /* nftw (tmpdir.h) */
#include "seedpipe/decode.h"
#include "seedpipe/loader.h"
#include "augment/decode_internal.h"
#include "augment/jpeg_ckpt_internal.h"
#include "dataset/dataset_internal.h"
#include "common/le_internal.h"

#include "check.h"
#include "runner.h"
#include "tmpdir.h"
#include "loader_check.h"
#include "image_check.h"
#include "jpeg_check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <jpeglib.h>
#include <xxhash.h>

/* ---- helpers ------------------------------------------------------------ */

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

/* An encoding: luma sampling hy x vy (chroma hc x vc; gray when hy is 0). */
typedef struct enc {
    int hy, vy, hc, vc;
    int optimize, quality, progressive, restart;
} enc;

/* A W x H photo-like picture (gradients, edges and noise), encoded by
 * libjpeg as e says; malloc'd, *len bytes. */
static uint8_t *make_jpeg(int W, int H, const enc *e, size_t *len) {
    int nc = e->hy ? 3 : 1;
    uint8_t *px = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < nc; c++)
                px[((size_t)y * W + x) * nc + c] =
                    (uint8_t)((x * (c + 2) + y * (4 - c) + ((x / 13 + y / 7) % 3) * 60 +
                               (int)rnd(48)) & 255);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&ci, &out, &n);
    ci.image_width = (JDIMENSION)W;
    ci.image_height = (JDIMENSION)H;
    ci.input_components = nc;
    ci.in_color_space = nc == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, e->quality, TRUE);
    ci.optimize_coding = e->optimize ? TRUE : FALSE;
    ci.restart_interval = (unsigned)e->restart;
    if (nc == 3) {
        ci.comp_info[0].h_samp_factor = e->hy;
        ci.comp_info[0].v_samp_factor = e->vy;
        for (int c = 1; c < 3; c++) {
            ci.comp_info[c].h_samp_factor = e->hc;
            ci.comp_info[c].v_samp_factor = e->vc;
        }
    }
    if (e->progressive) jpeg_simple_progression(&ci);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW r = px + (size_t)ci.next_scanline * W * nc;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(px);
    uint8_t *j = malloc(n);
    memcpy(j, out, n);
    free(out);
    *len = n;
    return j;
}

static int decode_hint(const uint8_t *buf, size_t len, int ch, int x, int y, int w, int h,
                       int flags, const uint8_t *ck, size_t cklen, sp_image *out) {
    sp_decode_req r = {ch, x, y, w, h, 1};
    sp__decode_hint hint = {flags, ck, cklen};
    sp_error err;
    int rc = sp__image_decode_hint(buf, len, "t.jpg", &r, NULL, &hint, out, &err);
    if (rc) printf("decode failed: %s\n", err.msg);
    return rc;
}

/* A crop at row y of every kind the loader asks for, with and without the
 * table: same bytes. 1 if it was resumed from a checkpoint, 2 if only
 * its bottom was cut, 0 if decoded as the file is. */
static int check_crop(const uint8_t *j, size_t len, int W, int H, int y, const uint8_t *ck,
                      size_t cklen, const char *what) {
    int x = (int)rnd((uint32_t)W), w = 1 + (int)rnd((uint32_t)(W - x));
    int h = 1 + (int)rnd((uint32_t)(H - y));
    int ch = rnd(4) == 0 ? 1 : 3, fl = SP__DECODE_VALIDATED | (rnd(2) ? SP__DECODE_WIDE : 0);
    sp_image a, b;
    CHECK(decode_hint(j, len, ch, x, y, w, h, fl, NULL, 0, &a) == 0);
    CHECK(decode_hint(j, len, ch, x, y, w, h, fl, ck, cklen, &b) == 0);
    CHECK_MSG(same_pixels(&a, &b), "%s: crop %d,%d %dx%d (%d channels) differs", what, x, y, w,
              h, ch);
    sp_image_free(&a);
    sp_image_free(&b);
    sp__jpeg_resume rs;
    int r = sp__jpeg_ckpt_resume(j, len, ck, cklen, y, y + h, &rs);
    free(rs.head);
    return r != 1 ? 0 : rs.checkpoint > 0 ? 1 : 2;
}

/* ---- the same pixels -------------------------------------------------------- */

static void test_same_pixels(void) {
    static const enc layouts[] = {
        {1, 1, 1, 1, 0, 0, 0, 0}, {2, 1, 1, 1, 0, 0, 0, 0}, {1, 2, 1, 1, 0, 0, 0, 0},
        {2, 2, 1, 1, 0, 0, 0, 0}, {4, 1, 1, 1, 0, 0, 0, 0}, {1, 4, 1, 1, 0, 0, 0, 0},
        {2, 4, 1, 1, 0, 0, 0, 0}, {4, 2, 1, 1, 0, 0, 0, 0}, {2, 2, 2, 1, 0, 0, 0, 0},
        {0, 0, 0, 0, 0, 0, 0, 0},
    };
    static const int sizes[][2] = {{203, 157}, {61, 301}, {640, 67}, {17, 129}};
    static const int quals[] = {50, 85, 97};
    int files = 0, resumed = 0, deep = 0, crops = 0, cut = 0;
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
        for (int opt = 0; opt < 2; opt++)
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                enc e = layouts[l];
                e.optimize = opt;
                e.quality = quals[(l + s + (size_t)opt) % 3];
                int W = sizes[s][0], H = sizes[s][1];
                size_t len;
                uint8_t *j = make_jpeg(W, H, &e, &len);
                uint8_t *ck;
                size_t cklen;
                CHECK(sp__image_check(j, len, &ck, &cklen) == 1);
                int mh = 8 * (e.vy > e.vc ? e.vy : e.vc ? e.vc : 1);
                char what[96];
                snprintf(what, sizeof what, "%dx%d luma %dx%d chroma %dx%d%s q%d", W, H, e.hy,
                         e.vy, e.hc, e.vc, opt ? " optimised" : "", e.quality);
                CHECK_MSG(ck && cklen > 6, "%s: no checkpoint table", what);
                int fr = 0, fd = 0;
                for (int y = 0; y < H; y += 1 + (int)rnd(3)) {
                    int r = check_crop(j, len, W, H, y, ck, cklen, what);
                    cut += r == 2;
                    r = r == 1;
                    fr += r;
                    fd += y > mh;
                    CHECK_MSG(!r || y > mh, "%s: row %d resumed above its second iMCU row",
                              what, y);
                    crops++;
                }
                /* the standard tables code every DC step; optimised ones may not */
                if (!opt) CHECK_MSG(fr >= fd, "%s: %d of %d deep crops resumed", what, fr, fd);
                resumed += fr;
                deep += fd;
                files++;
                free(ck);
                free(j);
            }
    printf("%d files, %d crops, %d of the %d starting below the first iMCU row resumed from a "
           "checkpoint, %d others with the frame's end cut\n", files, crops, resumed, deep, cut);
    CHECK(cut > crops / 20);
    CHECK(resumed * 20 >= deep * 19);
}

/* ---- files without a table ---------------------------------------------------- */

static void test_none(void) {
    static const enc cases[] = {
        {2, 2, 1, 1, 0, 90, 1, 0},   /* progressive */
        {2, 2, 1, 1, 0, 90, 0, 4},   /* a restart interval */
    };
    for (int k = 0; k < 2; k++) {
        size_t len;
        uint8_t *j = make_jpeg(120, 90, &cases[k], &len), *ck = (uint8_t *)"x";
        size_t cklen = 1;
        CHECK(sp__image_check(j, len, &ck, &cklen) == 1);
        CHECK_MSG(ck == NULL && cklen == 0, "case %d has a table", k);
        free(j);
    }
    enc one = {2, 2, 1, 1, 0, 90, 0, 0};
    size_t len;
    uint8_t *j = make_jpeg(300, 16, &one, &len), *ck;
    size_t cklen;
    CHECK(sp__image_check(j, len, &ck, &cklen) == 1 && ck == NULL);   /* one iMCU row */
    free(j);
    j = make_jpeg(300, 64, &one, &len);
    j[len / 2] ^= 0x55;   /* damaged: not clean, no table */
    j[len / 2 + 1] = 0xFF;
    j[len / 2 + 2] = 0xD9;
    CHECK(sp__image_check(j, len, &ck, &cklen) == 0 && ck == NULL);
    free(j);
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
    CHECK(sp__image_check(png, sizeof png, &ck, &cklen) == 0 && ck == NULL);
}

/* ---- tables that are not the file's ------------------------------------------- */

static void test_foreign_tables(void) {
    enc e = {2, 2, 1, 1, 0, 85, 0, 0};
    size_t la, lb;
    uint8_t *a = make_jpeg(160, 120, &e, &la), *b = make_jpeg(160, 120, &e, &lb);
    uint8_t *ca, *cb;
    size_t cla, clb;
    CHECK(sp__image_check(a, la, &ca, &cla) == 1 && sp__image_check(b, lb, &cb, &clb) == 1);
    CHECK(ca && cb && cla == clb);
    sp_image im;
    for (int y = 1; y < 120; y += 7) {   /* b's table on a: decoded, pixels unknown */
        CHECK(decode_hint(a, la, 3, 5, y, 100, 120 - y, SP__DECODE_VALIDATED, cb, clb, &im) == 0);
        sp_image_free(&im);
    }
    /* every byte changed in turn, and every length */
    uint8_t *t = malloc(cla);
    for (size_t k = 0; k < cla; k++)
        for (int v = 0; v < 3; v++) {
            memcpy(t, ca, cla);
            t[k] = (uint8_t)(v == 0 ? t[k] ^ 0x80 : v == 1 ? 0xFF : t[k] + 1);
            int y = 17 + (int)rnd(100);
            CHECK(decode_hint(a, la, 3, 0, y, 160, 120 - y, SP__DECODE_VALIDATED, t, cla, &im) ==
                  0);
            sp_image_free(&im);
            sp__jpeg_resume rs;
            int r = sp__jpeg_ckpt_resume(a, la, t, cla, y, 120, &rs);
            free(rs.head);
            if (k < 6) CHECK_MSG(r == 0, "header byte %zu changed, the table used", k);
        }
    for (size_t n = 0; n < cla; n++) {
        sp__jpeg_resume rs;
        CHECK(sp__jpeg_ckpt_resume(a, la, ca, n, 60, 100, &rs) == 0 && rs.head == NULL);
        CHECK(decode_hint(a, la, 3, 0, 60, 160, 60, SP__DECODE_VALIDATED, ca, n, &im) == 0);
        sp_image_free(&im);
    }
    free(t);
    free(ca);
    free(cb);
    free(a);
    free(b);
}

/* ---- through the index -------------------------------------------------------- */

static uint8_t *read_all(const char *path, size_t *n) {
    uint8_t *b;
    sp_error err;
    CHECK_OK(sp_read_file(path, 0, &b, n, &err), &err);
    return b;
}

/* How many of ds's files have a table, each checked equal to the one
 * sp__image_check() makes of their bytes. */
static int tables_right(const sp_dataset *ds) {
    int n = 0;
    for (uint64_t i = 0; i < sp__dataset_size(ds); i++) {
        const uint8_t *t;
        size_t tl;
        int v = sp__ds_verdict(ds, i, &t, &tl);
        sp_sample_data sd;
        sp_error err;
        CHECK_OK(sp__dataset_read(ds, i, &sd, &err), &err);
        uint8_t *mine;
        size_t ml;
        CHECK(v == sp__image_check(sd.src.bytes, sd.src.len, &mine, &ml));
        CHECK_MSG(!t || (tl == ml && memcmp(t, mine, ml) == 0), "%s: another table",
                  sp_dataset_path(ds, i));
        n += t != NULL;
        free(mine);
        sp__sample_data_free(&sd);
    }
    return n;
}

/* Rewrite the version 2 index at path as version 1: no tables. */
static void to_version1(const char *path) {
    size_t n;
    uint8_t *b = read_all(path, &n), *o = malloc(n);
    uint32_t rl = sp__le_get32(b + 24);
    size_t head = 28 + rl, p = head, q = head;
    memcpy(o, b, head);
    sp__le_put32(o + 8, 1);
    for (uint64_t i = 0; i < sp__le_get64(b + 16); i++) {
        size_t fixed = 4 + 4 + 56 + sp__le_get32(b + p);
        memcpy(o + q, b + p, fixed);
        q += fixed;
        p += fixed + 4 + sp__le_get32(b + p + fixed);
    }
    CHECK(p == n - 8);
    sp__le_put64(o + q, XXH3_64bits(o, q));
    write_bytes(path, o, q + 8);
    free(o);
    free(b);
}

/* The loader's stream digest over 3 epochs (batches of 4). */
static void loader_digest(const char *root, uint8_t out[16 * 3 * 8]) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = root;
    cfg.pipeline = "random_resized_crop size=40 | hflip";
    cfg.batch_size = 4;
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    sp_batch b;
    CHECK_OK(sp_batch_alloc(ld, &b), &err);
    size_t k = 0;
    for (uint32_t e = 0; e < 3; e++)
        for (uint64_t i = 0; i < 8; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            XXH128_hash_t h = XXH3_128bits(b.images, b.count * ld_info(ld).sample_bytes);
            memcpy(out + 16 * k++, &h, 16);
        }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

static void test_index(void) {
    sp_tmp_make("ckpt");
    setenv("SEEDPIPE_CACHE", tp("cache"), 1);
    CHECK(mkdir(tp("ds"), 0755) == 0 && mkdir(tp("ds/a"), 0755) == 0 &&
          mkdir(tp("ds/b"), 0755) == 0);
    for (int f = 0; f < 32; f++) {   /* 30 baseline files, 2 progressive */
        enc e = {f % 3 ? 2 : 1, f % 2 ? 2 : 1, 1, 1, f % 4 == 1, 75 + f, f >= 30, 0};
        size_t len;
        uint8_t *j = make_jpeg(90 + 7 * f, 180 - 3 * f, &e, &len);
        char name[64];
        snprintf(name, sizeof name, "ds/%c/%02d.jpg", f % 2 ? 'a' : 'b', f);
        write_bytes(tp(name), j, len);
        age(tp(name));
        free(j);
    }
    sleep(3);   /* the index's racy rule */
    sp__ds_set_checker(sp__image_check);
    sp_dataset_index_info info;
    sp_dataset *ds = open_ds(tp("ds"), &info);
    CHECK(info.written && info.hashed == 32 && tables_right(ds) == 30);
    char ipath[sizeof info.path];
    snprintf(ipath, sizeof ipath, "%s", info.path);
    sp_dataset_close(ds);
    ds = open_ds(tp("ds"), &info);   /* from the index */
    CHECK(info.reused == 32 && info.hashed == 0 && tables_right(ds) == 30);
    sp_dataset_close(ds);
    sp__ds_set_checker(NULL);        /* kept without a checker too */
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 32 && tables_right(ds) == 30);
    sp_dataset_close(ds);

    uint8_t with[16 * 24], plain[16 * 24];
    sp__ds_set_checker(sp__image_check);
    loader_digest(tp("ds"), with);
    setenv("SEEDPIPE_INDEX", "off", 1);
    loader_digest(tp("ds"), plain);
    unsetenv("SEEDPIPE_INDEX");
    CHECK_MSG(memcmp(with, plain, sizeof with) == 0, "batches differ with the tables");

    to_version1(ipath);   /* an index written before the tables */
    sp__ds_set_checker(NULL);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 32 && !info.warning[0] && tables_right(ds) == 0);
    int clean = 0;
    for (uint64_t i = 0; i < 32; i++) clean += validated(ds, i);
    CHECK(clean == 32);
    sp_dataset_close(ds);
    sp__ds_set_checker(sp__image_check);
    ds = open_ds(tp("ds"), &info);   /* checked again, once */
    CHECK(info.hashed == 32 && info.written && tables_right(ds) == 30);
    sp_dataset_close(ds);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 32 && info.hashed == 0 && tables_right(ds) == 30);
    sp_dataset_close(ds);
    sp_tmp_remove();
}

/* ---- the hostile corpora -------------------------------------------------- */

static void check_corpus(const char *rel) {
    if (!sp_test_corpus(rel, "entropy checkpoints on the hostile-JPEG corpus")) return;
    char **files = NULL;
    size_t n = 0, tables = 0;
    corpus_files(sp_test_data(rel), &files, &n);
    for (size_t i = 0; i < n; i++) {
        uint8_t *buf, *ck;
        size_t len, cklen;
        sp_error err;
        if (sp_read_file(files[i], 0, &buf, &len, &err) != 0) continue;
        sp_image_info info;
        if (sp__image_check(buf, len, &ck, &cklen) && ck &&
            sp__image_probe(buf, len, files[i], NULL, &info, &err) == 0) {
            tables++;
            for (int y = 1; y < info.height; y += 1 + info.height / 16)
                check_crop(buf, len, info.width, info.height, y, ck, cklen, files[i]);
        }
        free(ck);
        free(buf);
        free(files[i]);
    }
    printf("%s: %zu files, %zu with a checkpoint table\n", rel, n, tables);
    free(files);
}

static void test_corpus(void) {
    check_corpus("jpeg-bugs");
    check_corpus("jpeg-crashtest");
    if (sp_test_status()) exit(77);
}

static const sp_case cases[] = {
    SP_CASE(test_same_pixels),
    SP_CASE(test_none),
    SP_CASE(test_foreign_tables),
    SP_CASE(test_index),
    SP_CASE(test_corpus),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

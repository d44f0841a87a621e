/* test_jpeg_verdict.c - the decode verdict of the persistent index and the
 * JPEG crops that stop after their last row (augment/decode_jpeg.c,
 * SP__DECODE_VALIDATED; dataset/dataset_index.c, "Verdicts").
 *
 * What it asserts:
 *  - test_same_pixels: on JPEGs encoded here (4:2:0, 4:2:2, 4:4:4, 4:4:0,
 *    gray, progressive), 300 random regions at scales 1, 2, 4, 8
 *    decode to the same bytes whether the decode stops after the region or
 *    reads to EOI, and a random_resized_crop pipeline gives the same output
 *    over 40 samples x 3 epochs either way.
 *  - test_damage_after_crop: damaged copies of a JPEG (cut at 90% and 97%,
 *    without EOI, a marker planted in the last tenth of the entropy data,
 *    the EOI made a second SOI) are refused by sp__image_check() and by a
 *    full decode, and a crop of their intact top rows is refused too
 *    without a verdict (the policy); with the flag that crop is served, so
 *    the verdict is what keeps the policy. Through an ImageFolder with the
 *    index in a cache folder: the clean files carry a verdict, the damaged
 *    ones none, and the loader (random_resized_crop, 12 epochs, each sample
 *    its own batch) fails every batch of a damaged file and no other.
 *  - test_binding: the verdict comes back from the index at the next open
 *    (no file hashed); a clean file rewritten with damaged bytes loses it;
 *    an index without verdicts (written with no checker) has its files
 *    hashed and checked once more when a checker is set; SEEDPIPE_INDEX=off
 *    and a cache folder that cannot be used or written (a file in its
 *    place, a read-only folder) give no verdict and the open still works.
 *  - test_corpus: every file of jpeg-bugs and jpeg-crashtest (skipped
 *    visibly when absent): sp__image_check() says clean exactly when a full
 *    decode succeeds; a clean one's regions are the same with and without
 *    the flag; a refused one's regions are refused without it.
 *
 * Cases (tests/runner.h): test_same_pixels, test_damage_after_crop,
 * test_binding, test_corpus.
 */
#define _XOPEN_SOURCE 700   /* nftw (tmpdir.h) */
#include "seedpipe/decode.h"
#include "seedpipe/loader.h"
#include "augment/decode_internal.h"
#include "augment/pipeline_internal.h"
#include "dataset/dataset_internal.h"

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

#include <turbojpeg.h>

/* ---- helpers ------------------------------------------------------------ */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

/* A W x H photo-like picture (gradients and noise: real entropy data),
 * encoded with subsampling samp (TJSAMP_*), progressive or not. */
static uint8_t *make_jpeg(int W, int H, int samp, int progressive, size_t *len) {
    uint8_t *px = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                px[((size_t)y * W + x) * 3 + c] =
                    (uint8_t)((x * (c + 1) + y * (3 - c) + (int)rnd(40)) & 255);
    tjhandle h = tjInitCompress();
    uint8_t *jpg = NULL;
    unsigned long n = 0;
    int flags = progressive ? TJFLAG_PROGRESSIVE : 0;
    CHECK(tjCompress2(h, px, W, 0, H, TJPF_RGB, &jpg, &n, samp, 90, flags) == 0);
    tjDestroy(h);
    free(px);
    uint8_t *out = malloc(n + 8);
    memcpy(out, jpg, n);
    tjFree(jpg);
    *len = n;
    return out;
}

static int decode_region(const uint8_t *buf, size_t len, int x, int y, int w, int h, int d,
                         int flags, sp_image *out, sp_error *err) {
    sp_decode_req r = {3, x, y, w, h, d};
    return sp__image_decode_ex(buf, len, "t.jpg", &r, NULL, flags, out, err);
}

/* Offset of the first byte after the first SOS segment. */
static size_t scan_start(const uint8_t *b, size_t len) {
    for (size_t i = 2; i + 3 < len; i++)
        if (b[i] == 0xFF && b[i + 1] == 0xDA) return i + 2 + (((size_t)b[i + 2] << 8) | b[i + 3]);
    CHECK(!"no SOS");
    return 0;
}

/* ---- the same pixels with and without the flag -------------------------- */

static void test_same_pixels(void) {
    static const int samps[] = {TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_GRAY, TJSAMP_440};
    const char *spec = "random_resized_crop size=48";
    sp_pipeline *p;
    sp_error err;
    CHECK_OK(sp_pipeline_parse(spec, &p, &err), &err);
    for (int f = 0; f < 6; f++) {
        int W = 200 + (int)rnd(90), H = 150 + (int)rnd(70);
        size_t len;
        uint8_t *j = make_jpeg(W, H, samps[f % 5], f == 5, &len);
        CHECK(sp__image_check(j, len, NULL, NULL) == 1);
        for (int k = 0; k < 50; k++) {
            int d = 1 << rnd(4);
            int x = (int)rnd((uint32_t)W), y = (int)rnd((uint32_t)H);
            int w = 1 + (int)rnd((uint32_t)(W - x)), h = 1 + (int)rnd((uint32_t)(H - y));
            sp_image a, b;
            CHECK_OK(decode_region(j, len, x, y, w, h, d, SP__DECODE_WIDE, &a, &err), &err);
            CHECK_OK(decode_region(j, len, x, y, w, h, d, SP__DECODE_WIDE | SP__DECODE_VALIDATED,
                                   &b, &err), &err);
            CHECK_MSG(same_pixels(&a, &b), "file %d: region %d,%d %dx%d at 1/%d differs", f, x,
                      y, w, h, d);
            sp_image_free(&a);
            sp_image_free(&b);
        }
        uint8_t o1[48 * 48 * 3], o2[48 * 48 * 3];
        sp_sample_src src = {"t.jpg", j, len, NULL};
        for (uint32_t e = 0; e < 3; e++)
            for (uint32_t s = 0; s < 40; s++) {
                sp_sample_ctx ctx = {sp_rng_key(7, SP_RNG_AUGMENT), e, s};
                sp__decode_hint validated = {SP__DECODE_VALIDATED, NULL, 0};
                CHECK_OK(sp__pipeline_run_hint(p, &ctx, &src, NULL, NULL, o1, sizeof o1, NULL,
                                               NULL, &err), &err);
                CHECK_OK(sp__pipeline_run_hint(p, &ctx, &src, NULL, NULL, o2, sizeof o2,
                                               &validated, NULL, &err), &err);
                CHECK(memcmp(o1, o2, sizeof o1) == 0);
            }
        free(j);
    }
    sp_pipeline_destroy(p);
}

/* ---- damage after the crop ------------------------------------------------ */

#define NDAMAGED 5

/* Damaged copies of j (each malloc'd, *lens set): the damage lies in the
 * last tenth of the entropy data or after it, below any top-rows crop.
 * Each is one libjpeg always reports (a premature end, a marker inside
 * the data, a second SOI), whatever the encoder wrote before it. */
static void make_damaged(const uint8_t *j, size_t len, uint8_t *out[NDAMAGED],
                         size_t lens[NDAMAGED]) {
    size_t s = scan_start(j, len), data = len - 2 - s;
    for (int k = 0; k < NDAMAGED; k++) {
        out[k] = malloc(len);
        memcpy(out[k], j, len);
        lens[k] = len;
    }
    lens[0] = s + data * 9 / 10;          /* cut at 90% */
    lens[1] = s + data * 97 / 100;        /* cut at 97% */
    lens[2] = len - 2;                    /* no EOI */
    size_t at = s + data * 93 / 100;      /* a marker where entropy data should be */
    out[3][at] = 0xFF;
    out[3][at + 1] = 0xD5;
    out[4][len - 1] = 0xD8;               /* EOI made a second SOI */
}

static void test_damage_after_crop(void) {
    sp_tmp_make("verdict");
    setenv("SEEDPIPE_CACHE", tp("cache"), 1);
    CHECK(mkdir(tp("ds"), 0755) == 0 && mkdir(tp("ds/clean"), 0755) == 0 &&
          mkdir(tp("ds/damaged"), 0755) == 0);
    sp_error err;
    int refused_flagged_served = 0;
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *j = make_jpeg(160, 120, f == 1 ? TJSAMP_444 : TJSAMP_420, 0, &len);
        uint8_t *bad[NDAMAGED];
        size_t blen[NDAMAGED];
        make_damaged(j, len, bad, blen);
        char name[64];
        snprintf(name, sizeof name, "ds/clean/%d.jpg", f);
        write_bytes(tp(name), j, len);
        age(tp(name));
        for (int k = 0; k < NDAMAGED; k++) {
            sp_image im;
            CHECK_MSG(sp__image_check(bad[k], blen[k], NULL, NULL) == 0,
                      "damage %d passed the check", k);
            CHECK(decode_region(bad[k], blen[k], 0, 0, 0, 0, 1, 0, &im, &err) != 0);
            /* the top rows are intact: refused by the policy, served with the flag */
            CHECK(decode_region(bad[k], blen[k], 8, 0, 64, 16, 1, 0, &im, &err) != 0);
            CHECK(strstr(err.msg, "t.jpg") != NULL);
            if (decode_region(bad[k], blen[k], 8, 0, 64, 16, 1, SP__DECODE_VALIDATED, &im,
                              &err) == 0) {
                refused_flagged_served++;
                sp_image_free(&im);
            }
            snprintf(name, sizeof name, "ds/damaged/%d_%d.jpg", f, k);
            write_bytes(tp(name), bad[k], blen[k]);
            age(tp(name));
            free(bad[k]);
        }
        free(j);
    }
    CHECK(refused_flagged_served >= 9);   /* the cuts and the missing EOI at least */

    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = tp("ds");
    cfg.pipeline = "random_resized_crop size=24";
    cfg.batch_size = 1;
    cfg.order = SP_ORDER_SEQUENTIAL;
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);   /* links the checker in */
    const sp_dataset *ds = ld_info(ld).dataset;
    sp_dataset_index_info info;
    sp__dataset_index_info_get(ds, &info);
    CHECK(info.used && info.written && info.hashed == 3 + 3 * NDAMAGED);
    sp_batch b;
    CHECK_OK(sp_batch_alloc(ld, &b), &err);
    for (uint64_t i = 0; i < sp__dataset_size(ds); i++) {
        int damaged = strncmp(sp_dataset_path(ds, i), "damaged/", 8) == 0;
        sp_sample_data sd;
        CHECK_OK(sp__dataset_read(ds, i, &sd, &err), &err);
        sp__sample_data_free(&sd);
        CHECK_MSG(validated(ds, i) == !damaged, "%s: verdict %d", sp_dataset_path(ds, i),
                  validated(ds, i));
        for (uint32_t e = 0; e < 12; e++) {
            int rc = sp_loader_batch(ld, e, i, &b, &err);
            CHECK_MSG((rc != 0) == damaged, "%s epoch %u: rc %d (%s)", sp_dataset_path(ds, i), e,
                      rc, rc ? err.msg : "");
            if (rc) CHECK(strstr(err.msg, sp_dataset_path(ds, i)) != NULL);
        }
    }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    sp_tmp_remove();
}

/* ---- the verdict's binding ------------------------------------------------ */

static int count_validated(const sp_dataset *ds) {
    int n = 0;
    for (uint64_t i = 0; i < sp__dataset_size(ds); i++) n += validated(ds, i);
    return n;
}

static void test_binding(void) {
    sp_tmp_make("verdict");
    setenv("SEEDPIPE_CACHE", tp("cache"), 1);
    CHECK(mkdir(tp("ds"), 0755) == 0 && mkdir(tp("ds/a"), 0755) == 0);
    size_t len = 0;
    uint8_t *j = NULL;
    for (int f = 0; f < 4; f++) {
        free(j);
        j = make_jpeg(96, 64, TJSAMP_420, f == 3, &len);
        char name[64];
        snprintf(name, sizeof name, "ds/a/%d.jpg", f);
        write_bytes(tp(name), j, len);
        age(tp(name));
    }
    sleep(3);   /* the index's racy rule */
    sp__ds_set_checker(NULL);   /* an index without verdicts */
    sp_dataset_index_info info;
    sp_dataset *ds = open_ds(tp("ds"), &info);
    CHECK(info.written && info.hashed == 4 && count_validated(ds) == 0);
    sp_dataset_close(ds);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 4 && !info.written && count_validated(ds) == 0);
    sp_dataset_close(ds);

    sp__ds_set_checker(sp__image_check);   /* checked once, then kept */
    ds = open_ds(tp("ds"), &info);
    CHECK(info.written && info.hashed == 4 && count_validated(ds) == 4);
    sp_dataset_close(ds);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 4 && info.hashed == 0 && !info.written && count_validated(ds) == 4);
    sp_dataset_close(ds);
    sp__ds_set_checker(NULL);   /* kept without a checker too: bound to the hash */
    ds = open_ds(tp("ds"), &info);
    CHECK(info.reused == 4 && count_validated(ds) == 4);
    sp_dataset_close(ds);
    sp__ds_set_checker(sp__image_check);

    /* a clean file rewritten damaged (same size): hashed again, no verdict */
    uint8_t *bad[NDAMAGED];
    size_t blen[NDAMAGED];
    make_damaged(j, len, bad, blen);
    write_bytes(tp("ds/a/3.jpg"), bad[3], blen[3]);
    age(tp("ds/a/3.jpg"));
    sleep(3);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.hashed == 1 && info.reused == 3 && count_validated(ds) == 3);
    CHECK(!validated(ds, 3));
    sp_dataset_close(ds);
    for (int k = 0; k < NDAMAGED; k++) free(bad[k]);
    free(j);

    /* no verdict where none can be kept; the open works */
    setenv("SEEDPIPE_INDEX", "off", 1);
    ds = open_ds(tp("ds"), &info);
    CHECK(!info.used && count_validated(ds) == 0);
    sp_dataset_close(ds);
    unsetenv("SEEDPIPE_INDEX");
    write_bytes(tp("notadir"), (const uint8_t *)"x", 1);
    setenv("SEEDPIPE_CACHE", tp("notadir"), 1);
    ds = open_ds(tp("ds"), &info);
    CHECK(info.hashed == 4 && info.warning[0] && count_validated(ds) == 0);
    sp_dataset_close(ds);
    if (geteuid() != 0) {   /* root writes anywhere */
        CHECK(mkdir(tp("ro"), 0700) == 0);
        setenv("SEEDPIPE_CACHE", tp("ro"), 1);
        CHECK(chmod(tp("ro"), 0500) == 0);
        ds = open_ds(tp("ds"), &info);
        CHECK(info.hashed == 4 && !info.written && count_validated(ds) == 0);
        sp_dataset_close(ds);
        CHECK(chmod(tp("ro"), 0700) == 0);
    } else {
        printf("note: running as root, the read-only cache folder part is not run\n");
    }
    sp_tmp_remove();
}

/* ---- the hostile corpora -------------------------------------------------- */

static void check_corpus(const char *rel) {
    if (!sp_test_corpus(rel, "the verdict on the hostile-JPEG corpus")) return;
    char **files = NULL;
    size_t n = 0;
    corpus_files(sp_test_data(rel), &files, &n);
    CHECK(n > 10);
    int clean = 0, refused = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        sp_error err;
        if (sp_read_file(files[i], 0, &buf, &len, &err) != 0) continue;
        sp_image full, a, b;
        int rc = decode_region(buf, len, 0, 0, 0, 0, 1, 0, &full, &err);
        int ok = sp__image_check(buf, len, NULL, NULL);
        CHECK_MSG(ok == (rc == 0 && sp__format_sniff(buf, len) == SP_FORMAT_JPEG),
                  "%s: check %d, full decode rc %d", files[i], ok, rc);
        sp_image_info info;
        if (sp__image_probe(buf, len, files[i], NULL, &info, &err) == 0) {
            int x = info.width / 4, y = info.height / 8;
            int w = info.width / 2 > 0 ? info.width / 2 : 1;
            int h = info.height / 4 > 0 ? info.height / 4 : 1;
            for (int d = 1; d <= 2; d++) {
                int ra = decode_region(buf, len, x, y, w, h, d, SP__DECODE_WIDE, &a, &err);
                if (ok) {
                    int rb = decode_region(buf, len, x, y, w, h, d,
                                           SP__DECODE_WIDE | SP__DECODE_VALIDATED, &b, &err);
                    CHECK_MSG(ra == 0 && rb == 0 && same_pixels(&a, &b),
                              "%s: region at 1/%d: %d %d or differs", files[i], d, ra, rb);
                    if (rb == 0) sp_image_free(&b);
                } else {
                    CHECK_MSG(ra != 0, "%s: refused in full, served as a region at 1/%d",
                              files[i], d);
                }
                if (ra == 0) sp_image_free(&a);
            }
        }
        if (rc == 0) sp_image_free(&full);
        clean += ok;
        refused += !ok;
        free(buf);
        free(files[i]);
    }
    printf("%s: %zu files, %d clean, %d refused\n", rel, n, clean, refused);
    CHECK(refused > 0);
    free(files);
}

static void test_corpus(void) {
    check_corpus("jpeg-bugs");
    check_corpus("jpeg-crashtest");
    if (sp_test_status()) exit(77);
}

static const sp_case cases[] = {
    SP_CASE(test_same_pixels),
    SP_CASE(test_damage_after_crop),
    SP_CASE(test_binding),
    SP_CASE(test_corpus),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

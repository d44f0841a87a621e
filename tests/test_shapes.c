/* test_shapes.c - the built-in shapes dataset (shapes.h).
 *
 * Asserts: the same seed gives byte-identical files, another seed different
 * ones; file names, classes and formats follow the documented scheme (class
 * (i + i/6) % 6, even index PNG, odd JPEG, balanced per class and per
 * format); the folder opens as an ImageFolder with the six classes in the
 * same order; the PNG files hold exactly sp__shapes_render()'s pixels and
 * the JPEGs are close to them; images are not blank; the rendered pixels
 * match a pinned digest (integer drawing: the same on every machine);
 * bad options and unwritable folders are clear errors.
 *
 * Cases (tests/runner.h, each in its own process, the files in one
 * mkdtemp() folder): test_class_scheme, test_files, test_not_blank,
 * test_errors, test_pinned.
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "seedpipe/dataset.h"
#include "seedpipe/shapes.h"

#include "check.h"
#include "runner.h"
#include "tmpdir.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */

#include <ftw.h>
#include <png.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <xxhash.h>
#include "loader/shapes_internal.h"

#define PINNED "a6814588efcea4fd5a0664704a60d255"   /* seed 0, size 64, images 0..11 */


static uint8_t *read_whole(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    CHECK(b);
    CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void file_name(char *buf, size_t cap, const char *dir, uint32_t i) {
    snprintf(buf, cap, "%s/%s/%06u.%s", dir, sp__shapes_class_names()[sp__shapes_class_of(i)], i,
             (i & 1) ? "jpg" : "png");
}

static void test_class_scheme(void) {
    const char *const *names = sp__shapes_class_names();
    int k = 0;
    while (names[k]) k++;
    CHECK(k == sp__shapes_num_classes() && k >= 6);
    for (int c = 1; c < k; c++) CHECK(strcmp(names[c - 1], names[c]) < 0);   /* sorted */
    for (uint32_t count = 1; count <= 1000; count += 37) {
        int per[16][2] = {{0}};
        for (uint32_t i = 0; i < count; i++) per[sp__shapes_class_of(i)][i & 1]++;
        int mn = 1 << 30, mx = 0;
        for (int c = 0; c < k; c++) {
            int t = per[c][0] + per[c][1];
            mn = t < mn ? t : mn;
            mx = t > mx ? t : mx;
            CHECK_MSG(abs(per[c][0] - per[c][1]) <= 1, "count %u class %d: %d png %d jpg", count,
                      c, per[c][0], per[c][1]);
        }
        CHECK_MSG(mx - mn <= 1, "count %u: classes %d..%d", count, mn, mx);
    }
}

static void make(const char *dir, uint32_t count, int size, uint64_t seed) {
    sp_error err;
    sp_shapes_opts o = {count, size, seed};
    CHECK_OK(sp_shapes_make(dir, &o, &err), &err);
}

static void files(const char *tmp) {
    enum { N = 24, S = 32 };
    char a[600], b[600], c[600], pa[700], pb[700], pc[700];
    snprintf(a, sizeof a, "%s/a", tmp);
    snprintf(b, sizeof b, "%s/b/nested", tmp);   /* parents are created */
    snprintf(c, sizeof c, "%s/c", tmp);
    make(a, N, S, 1);
    make(b, N, S, 1);
    make(c, N, S, 2);
    int png = 0, jpg = 0, differ = 0;
    for (uint32_t i = 0; i < N; i++) {
        file_name(pa, sizeof pa, a, i);
        file_name(pb, sizeof pb, b, i);
        file_name(pc, sizeof pc, c, i);
        size_t la, lb, lc;
        uint8_t *fa = read_whole(pa, &la), *fb = read_whole(pb, &lb), *fc = read_whole(pc, &lc);
        CHECK_MSG(fa && fb && fc, "missing %s", pa);
        CHECK_MSG(la == lb && memcmp(fa, fb, la) == 0, "%s differs between two runs", pa);
        if (lc != la || memcmp(fa, fc, la) != 0) differ++;
        if (i & 1) { CHECK(fa[0] == 0xFF && fa[1] == 0xD8); jpg++; }
        else { CHECK(memcmp(fa, "\x89PNG", 4) == 0); png++; }
        free(fa); free(fb); free(fc);
    }
    CHECK(png == N / 2 && jpg == N / 2);
    CHECK_MSG(differ == N, "only %d of %d files differ with another seed", differ, N);

    /* a stranger's file is left alone on re-make; ours are rewritten identically */
    char keep[700];
    snprintf(keep, sizeof keep, "%s/circle/keep.txt", a);
    FILE *f = fopen(keep, "w");
    CHECK(f);
    fputs("keep", f);
    fclose(f);
    make(a, N, S, 1);
    struct stat st;
    CHECK(stat(keep, &st) == 0);
    unlink(keep);

    /* the folder is an ImageFolder with the classes in sp__shapes_class_names() order */
    sp_error err;
    sp_dataset *ds;
    CHECK_OK(sp_dataset_open(a, NULL, &ds, &err), &err);
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_IMAGEFOLDER);
    CHECK(sp__dataset_size(ds) == N);
    CHECK(sp__dataset_num_classes(ds) == sp__shapes_num_classes());
    for (int k = 0; k < sp__shapes_num_classes(); k++) {
        CHECK(strcmp(sp_dataset_class_name(ds, k), sp__shapes_class_names()[k]) == 0);
        CHECK(sp__dataset_class_count(ds, k) == N / 6);
    }
    for (uint64_t i = 0; i < N; i++) {
        const char *p = sp_dataset_path(ds, i);
        const char *slash = strchr(p, '/');
        CHECK(slash);
        uint32_t idx = (uint32_t)strtoul(slash + 1, NULL, 10);
        CHECK(sp_dataset_label(ds, i) == sp__shapes_class_of(idx));
    }
    sp_dataset *ds2;
    CHECK_OK(sp_dataset_open(b, NULL, &ds2, &err), &err);
    sp_digest f1 = sp__dataset_fingerprint(ds), f2 = sp__dataset_fingerprint(ds2);
    CHECK(f1.hi == f2.hi && f1.lo == f2.lo);
    sp_dataset_close(ds2);
    sp_dataset_close(ds);

    /* the files hold the rendered pixels */
    for (uint32_t i = 0; i < 6; i++) {
        sp_shapes_opts o = {0, S, 1};
        sp_image im;
        int label = -1;
        CHECK_OK(sp__shapes_render(&o, i, &im, &label, &err), &err);
        CHECK(label == sp__shapes_class_of(i));
        CHECK(im.width == S && im.height == S && im.channels == 3 && im.stride == S * 3);
        file_name(pa, sizeof pa, a, i);
        size_t len;
        uint8_t *fa = read_whole(pa, &len);
        CHECK(fa);
        uint8_t px[S * S * 3];
        if (i % 2 == 0) {
            png_image pi;
            memset(&pi, 0, sizeof pi);
            pi.version = PNG_IMAGE_VERSION;
            CHECK(png_image_begin_read_from_memory(&pi, fa, len));
            pi.format = PNG_FORMAT_RGB;
            CHECK(png_image_finish_read(&pi, NULL, px, 0, NULL));
            CHECK_MSG(memcmp(px, im.data, sizeof px) == 0, "%s != render", pa);
        } else {
            tjhandle tj = tjInitDecompress();
            CHECK(tj);
            CHECK(tjDecompress2(tj, fa, len, px, S, 0, S, TJPF_RGB, TJFLAG_ACCURATEDCT) == 0);
            tjDestroy(tj);
            long sum = 0;
            for (size_t k = 0; k < sizeof px; k++) sum += abs(px[k] - im.data[k]);
            double mae = (double)sum / sizeof px;
            CHECK_MSG(mae < 12.0, "%s: JPEG mean abs error %.2f vs render", pa, mae);
        }
        free(fa);
        sp_image_free(&im);
    }
}

/* Not blank, not flat: per-channel variance and a clear bimodal contrast. */
static void test_not_blank(void) {
    sp_error err;
    for (uint32_t i = 0; i < 60; i++) {
        sp_shapes_opts o = {0, 64, 3};
        sp_image im;
        CHECK_OK(sp__shapes_render(&o, i, &im, NULL, &err), &err);
        for (int c = 0; c < 3; c++) {
            double s = 0, s2 = 0;
            int n = 64 * 64;
            for (int k = 0; k < n; k++) {
                double v = im.data[3 * k + c];
                s += v;
                s2 += v * v;
            }
            double var = s2 / n - (s / n) * (s / n);
            CHECK_MSG(var > 50.0, "image %u channel %d variance %.1f", i, c, var);
        }
        /* luma range: shape vs background differ a lot */
        int lo = 255, hi = 0;
        for (int k = 0; k < 64 * 64; k++) {
            int l = (im.data[3 * k] * 2 + im.data[3 * k + 1] * 5 + im.data[3 * k + 2]) / 8;
            lo = l < lo ? l : lo;
            hi = l > hi ? l : hi;
        }
        CHECK_MSG(hi - lo > 60, "image %u luma range %d..%d", i, lo, hi);
        sp_image_free(&im);
    }
}

/* Pixels are integer arithmetic on Philox output: pin them. */
static void test_pinned(void) {
    sp_error err;
    XXH3_state_t *st = XXH3_createState();
    CHECK(st);
    XXH3_128bits_reset(st);
    for (uint32_t i = 0; i < 12; i++) {
        sp_shapes_opts o = {0, 64, 0};
        sp_image im;
        CHECK_OK(sp__shapes_render(&o, i, &im, NULL, &err), &err);
        XXH3_128bits_update(st, im.data, 64 * 64 * 3);
        sp_image_free(&im);
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    sp_digest d = {h.high64, h.low64};
    char hex[33];
    sp_digest_hex(d, hex);
    printf("shapes seed 0 size 64 images 0..11 pixels: %s\n", hex);
    CHECK_MSG(strcmp(hex, PINNED) == 0, "pixels changed: %s, pinned %s", hex, PINNED);
}

static void errors(const char *tmp) {
    sp_error err;
    sp_shapes_opts o = {4, 8, 0};
    CHECK(sp_shapes_make(tmp, &o, &err) == SP_EINVAL);
    CHECK(strstr(err.msg, "size"));
    o.size = 5000;
    sp_image im;
    CHECK(sp__shapes_render(&o, 0, &im, NULL, &err) == SP_EINVAL);
    o.size = 32;
    CHECK(sp_shapes_make("/dev/null/shapes", &o, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "/dev/null"), "%s", err.msg);
    /* defaults: NULL opts render 64 x 64 */
    CHECK_OK(sp__shapes_render(NULL, 5, &im, NULL, &err), &err);
    CHECK(im.width == 64 && im.height == 64);
    sp_image_free(&im);
    /* odd sizes work and index far out is independent of count */
    o.size = 17;
    CHECK_OK(sp__shapes_render(&o, 4000000000u, &im, NULL, &err), &err);
    sp_image_free(&im);
}

/* ---- cases: each in its own process ---------------------------------------------------- */

static void setup(void) { sp_tmp_make("shapes"); }
static void teardown(void) { sp_tmp_remove(); }

static void test_files(void) { files(g_tmp); }
static void test_errors(void) { errors(g_tmp); }

static const sp_case cases[] = {
    SP_CASE(test_class_scheme),
    SP_CASE(test_files),
    SP_CASE(test_not_blank),
    SP_CASE(test_errors),
    SP_CASE(test_pinned),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

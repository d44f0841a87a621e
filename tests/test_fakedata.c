/* test_fakedata.c - the generated dataset "fakedata:..." (dataset/dataset_fake.c):
 * torchvision FakeData's defaults, every pixel and label the formula of
 * docs/determinism.md section 2 (tag 14) recomputed here from Philox
 * directly, offset = a shift of the index, the identity following the
 * settings, and the spec's refusals naming the spec.
 *
 * Cases: test_defaults, test_pixels_and_labels, test_identity, test_refusals.
 */
#include "seedpipe/dataset.h"
#include "seedpipe/philox.h"

#include "check.h"
#include "runner.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */

#include <stdlib.h>
#include <string.h>
#include "dataset/dataset_internal.h"

static sp_dataset *open_ok(const char *spec) {
    sp_error err;
    sp_dataset *ds = NULL;
    CHECK_OK(sp_dataset_open(spec, NULL, &ds, &err), &err);
    return ds;
}

static void test_defaults(void) {
    sp_dataset *ds = open_ok("fakedata:");
    int w = 0, h = 0;
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_FAKE);
    CHECK(strcmp(sp__dataset_kind_name(SP_DATASET_FAKE), "fakedata") == 0);
    CHECK(sp__dataset_size(ds) == 1000 && sp__dataset_num_classes(ds) == 10);
    CHECK(sp__dataset_raw_dims(ds, &w, &h) == 0 && w == 224 && h == 224);
    uint64_t total = 0;
    for (int c = 0; c < 10; c++) total += sp__dataset_class_count(ds, c);
    CHECK(total == 1000);
    sp_sample_data s;
    sp_error err;
    CHECK_OK(sp__dataset_read(ds, 999, &s, &err), &err);
    CHECK(s.src.raw && s.src.raw->channels == 3 && s.src.raw->stride == 224 * 3);
    sp__sample_data_free(&s);
    sp_dataset_close(ds);
}

/* Byte b of image j, from the formula. */
static uint8_t ref_byte(uint64_t j, size_t b) {
    sp_key k = sp_rng_key(0, 14);
    sp_ctr c = {{(uint32_t)(b / 16), (uint32_t)j, (uint32_t)(j >> 32), 0}};
    return (uint8_t)(sp_philox4x32_10(c, k).c[(b / 4) % 4] >> (8 * (b % 4)));
}

static void test_pixels_and_labels(void) {
    const uint64_t off = (UINT64_C(1) << 32) + 7;   /* the high word of j in play */
    sp_dataset *ds = open_ok("fakedata:image=1x5x3,classes=1000,size=40,offset=4294967303");
    sp_dataset *base = open_ok("fakedata:size=41,image=1x5x3,classes=1000,offset=4294967302");
    int seen[1000] = {0}, distinct = 0;
    for (uint64_t i = 0; i < 40; i++) {
        sp_sample_data s;
        sp_error err;
        CHECK_OK(sp__dataset_read(ds, i, &s, &err), &err);
        CHECK(s.src.raw->width == 3 && s.src.raw->height == 5 && s.src.raw->channels == 1);
        for (size_t b = 0; b < 15; b++) CHECK(s.src.raw->data[b] == ref_byte(i + off, b));
        sp__sample_data_free(&s);
        uint64_t j = i + off;
        sp_ctr c = {{0, (uint32_t)j, (uint32_t)(j >> 32), 1}};
        uint32_t w0 = sp_philox4x32_10(c, sp_rng_key(0, 14)).c[0];
        int lab = sp_dataset_label(ds, i);
        CHECK(lab == (int)(((uint64_t)w0 * 1000) >> 32));
        CHECK(lab == sp_dataset_label(base, i + 1));   /* offset shifts the index */
        sp_digest a = sp__dataset_content_hash(ds, i), b = sp__dataset_content_hash(base, i + 1);
        CHECK(a.hi == b.hi && a.lo == b.lo);
        distinct += !seen[lab];
        seen[lab] = 1;
    }
    CHECK(distinct > 30);
    sp_dataset_close(ds);
    sp_dataset_close(base);
}

static int same_fp(const char *a, const char *b) {
    sp_dataset *x = open_ok(a), *y = open_ok(b);
    sp_digest p = sp__dataset_fingerprint(x), q = sp__dataset_fingerprint(y);
    sp_dataset_close(x);
    sp_dataset_close(y);
    return p.hi == q.hi && p.lo == q.lo;
}

static void test_identity(void) {
    CHECK(same_fp("fakedata:", "fakedata:size=1000,image=3x224x224,classes=10,offset=0"));
    CHECK(!same_fp("fakedata:size=9", "fakedata:size=9,offset=1"));
    CHECK(!same_fp("fakedata:size=9", "fakedata:size=9,image=3x224x223"));
    CHECK(!same_fp("fakedata:size=9", "fakedata:size=9,classes=11"));
    CHECK(!same_fp("fakedata:size=9", "fakedata:size=10"));
    sp_dataset *a = open_ok("fakedata:size=2,image=3x2x2"), *b = open_ok("fakedata:size=2,image=1x2x6");
    sp_digest p = sp__dataset_content_hash(a, 0), q = sp__dataset_content_hash(b, 0);
    CHECK(p.hi != q.hi || p.lo != q.lo);   /* the same 12 bytes, another shape */
    sp_dataset_close(a);
    sp_dataset_close(b);
}

static void fails(const char *spec, const sp_dataset_limits *lim, int code, const char *sub) {
    sp_error err;
    sp_error_clear(&err);
    sp_dataset *ds = NULL;
    int rc = sp_dataset_open(spec, lim, &ds, &err);
    CHECK_MSG(rc == code, "%s: got %d (%s)", spec, rc, err.msg);
    CHECK(ds == NULL && strstr(err.msg, spec) && strstr(err.msg, sub));
}

static void test_refusals(void) {
    const char *bad[] = {"fakedata:image=2x4x4", "fakedata:image=3x0x4", "fakedata:size=0",
                         "fakedata:classes=0", "fakedata:classes=65537", "fakedata:size=1,",
                         "fakedata:seed=3", "fakedata:image=3x4", "fakedata:size=-1",
                         "fakedata:offset=4611686018427387905", "fakedata:size=5x", NULL};
    for (int k = 0; bad[k]; k++) fails(bad[k], NULL, SP_EINVAL, "not a FakeData spec");
    sp_dataset_limits lim = {.max_samples = 10, .max_file_bytes = 100};
    fails("fakedata:size=11,image=1x2x2", &lim, SP_EINVAL, "N 1..10");
    fails("fakedata:size=1,image=3x6x6", &lim, SP_ELIMIT, "over the limit of 100 bytes");
}

static const sp_case cases[] = {
    SP_CASE(test_defaults),
    SP_CASE(test_pixels_and_labels),
    SP_CASE(test_identity),
    SP_CASE(test_refusals),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

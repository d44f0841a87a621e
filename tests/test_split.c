/* test_split.c - deterministic train/validation splits (loader.h "Splits").
 *
 * Asserts: spec parsing (and that bad specs give a clear error naming the
 * problem); on 100,000 synthetic paths, subset sizes within the documented
 * 3-sigma binomial tolerance, for several specs and split seeds; a subset
 * is a function of the path alone (same answer with other files around);
 * with a real dataset, the subsets' loaders are disjoint and cover the
 * dataset, list their samples in canonical order, every epoch visits each
 * subset sample exactly once, and after adding files to the dataset every
 * existing sample keeps its subset; the loader fingerprint differs
 * between subsets, split seeds and no split, and is stable otherwise;
 * --split without --subset, an unknown subset and an empty subset are
 * refused with a clear message.
 *
 * Cases (tests/runner.h, each in its own process; the loader cases make
 * the two shapes datasets, once a run, in setup's mkdtemp() folder):
 * test_parse, test_sizes,
 * test_loader_subsets, test_loader_stability (finds each old sample's
 * subset itself, with the subsets' checks), test_loader_errors.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/loader.h"
#include "seedpipe/shapes.h"
#include "loader_check.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */
#include "dataset/split_internal.h"
#include "loader/loader_internal.h"

static void expect_bad(const char *spec, const char *needle) {
    sp_split s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_MSG(sp_split_parse(spec, 0, &s, &err) == SP_EINVAL, "spec \"%s\" accepted", spec);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "spec \"%s\": message \"%s\" lacks \"%s\"", spec,
              err.msg, needle);
}

static void test_parse(void) {
    sp_split s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_split_parse("train=0.9,val=0.1", 7, &s, &err), &err);
    CHECK(s.n == 2 && !strcmp(s.name[0], "train") && !strcmp(s.name[1], "val"));
    CHECK(s.frac[0] == 0.9 && s.frac[1] == 0.1 && s.cum[1] == 1.0 && s.seed == 7);
    CHECK(sp_split_find(&s, "val") == 1 && sp_split_find(&s, "test") == -1);
    char c[256];
    sp_split_canonical(&s, c, sizeof c);
    CHECK(!strcmp(c, "train=0.90000000000000002,val=0.10000000000000001"));
    CHECK_OK(sp_split_parse("a=0.2,b=0.3,c=0.5", 0, &s, &err), &err);
    CHECK(s.n == 3);
    CHECK_OK(sp_split_parse("all=1", 0, &s, &err), &err);
    expect_bad("", "empty");
    expect_bad("train", "expected NAME=FRACTION");
    expect_bad("train=0.9", "sum to 0.9");
    expect_bad("train=0.9,val=0.2", "not 1");
    expect_bad("a=0.5,a=0.5", "given twice");
    expect_bad("a=x,b=1", "fraction must be");
    expect_bad("a=0,b=1", "fraction must be");
    expect_bad("a=-0.5,b=1.5", "fraction must be");
    expect_bad("a b=0.5,c=0.5", "use letters");
    expect_bad("=0.5,c=0.5", "name must be");
    expect_bad("a=0.5,b=0.5,", "trailing comma");
    expect_bad("a=0.5x,b=0.5", "fraction must be");
    printf("parse ok\n");
}

static void test_sizes(void) {
    const uint64_t n = 100000;
    const char *specs[] = {"train=0.9,val=0.1", "train=0.8,val=0.1,test=0.1",
                           "a=0.5,b=0.5", "x=0.01,y=0.99"};
    char path[64];
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            sp_split s;
            sp_error err;
            CHECK_OK(sp_split_parse(specs[si], seed, &s, &err), &err);
            uint64_t cnt[SP_SPLIT_MAX] = {0};
            for (uint64_t i = 0; i < n; i++) {
                snprintf(path, sizeof path, "class%llu/img%06llu.png",
                         (unsigned long long)(i % 7), (unsigned long long)i);
                int k = sp_split_assign(&s, path);
                CHECK(k >= 0 && k < s.n);
                double u = sp__split_u01(seed, path);
                CHECK(u >= 0.0 && u < 1.0);
                CHECK(u < s.cum[k] && (k == 0 || u >= s.cum[k - 1]));
                cnt[k]++;
            }
            for (int k = 0; k < s.n; k++) {
                double f = s.frac[k], mean = (double)n * f, tol = 3 * sqrt((double)n * f * (1 - f));
                CHECK_MSG(fabs((double)cnt[k] - mean) <= tol, "%s seed %llu: %s has %llu, "
                          "expected %.0f +- %.0f", specs[si], (unsigned long long)seed,
                          s.name[k], (unsigned long long)cnt[k], mean, tol);
            }
        }
    /* the split seed matters */
    sp_split a, b;
    sp_error err;
    CHECK_OK(sp_split_parse("a=0.5,b=0.5", 1, &a, &err), &err);
    CHECK_OK(sp_split_parse("a=0.5,b=0.5", 2, &b, &err), &err);
    int diff = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(path, sizeof path, "c/%d.png", i);
        diff += sp_split_assign(&a, path) != sp_split_assign(&b, path);
    }
    CHECK(diff > 300 && diff < 700);
    printf("sizes ok\n");
}

static sp_loader *make_loader(const char *root, const char *split, const char *subset,
                              uint64_t split_seed, sp_error *err, int *rc) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = root;
    cfg.batch_size = 7;
    cfg.split = split;
    cfg.subset = subset;
    cfg.split_seed = split_seed;
    sp_loader *ld = NULL;
    *rc = sp_loader_create(&cfg, &ld, err);
    return ld;
}

static sp_loader *loader_ok(const char *root, const char *split, const char *subset,
                            uint64_t split_seed) {
    sp_error err;
    sp_error_clear(&err);
    int rc;
    sp_loader *ld = make_loader(root, split, subset, split_seed, &err, &rc);
    CHECK_MSG(rc == 0, "loader %s %s: %s", split ? split : "-", subset ? subset : "-", err.msg);
    return ld;
}

static int same_digest(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static char g_root[64], g_small[128], g_big[128];
static const char *const SPEC = "train=0.7,val=0.2,test=0.1";
static const char *const NAMES[] = {"train", "val", "test"};

/* The subsets of the small dataset: disjoint, covering, canonical order,
 * one visit an epoch, fingerprints; owner[i] gets sample i's subset. */
static void subsets(const char *small, sp_loader *all, int *owner) {
    const char *spec = SPEC;
    const char *const *names = NAMES;
    const sp_dataset *ds = ld_info(all).dataset;
    uint64_t n = sp__dataset_size(ds);
    for (uint64_t i = 0; i < n; i++) owner[i] = -1;
    sp_split s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_split_parse(spec, 3, &s, &err), &err);
    uint64_t counts[SP_SPLIT_MAX];
    sp_split_counts(&s, ds, counts);
    sp_digest fps[3];
    uint64_t total = 0;
    for (int k = 0; k < 3; k++) {
        sp_loader *ld = loader_ok(small, spec, names[k], 3);
        uint64_t m = ld_info(ld).size;
        CHECK(m == counts[k]);
        total += m;
        for (uint64_t j = 0; j < m; j++) {
            uint64_t i = sp__loader_sample_index(ld, j);
            CHECK(i < n);
            CHECK(j == 0 || i > sp__loader_sample_index(ld, j - 1));   /* canonical order */
            CHECK_MSG(owner[i] == -1, "sample %llu in two subsets", (unsigned long long)i);
            owner[i] = k;
            CHECK(sp_split_assign(&s, sp_dataset_path(ds, i)) == k);
        }
        /* an epoch visits each subset sample exactly once */
        char *seen = calloc(n, 1);
        CHECK(seen);
        sp_batch b;
        CHECK(sp_batch_alloc(ld, &b) == 0);
        for (uint64_t bi = 0; bi < ld_info(ld).batches_per_epoch; bi++) {
            CHECK_OK(sp_loader_batch(ld, 1, bi, &b, &err), &err);
            for (uint32_t q = 0; q < b.count; q++) {
                CHECK(owner[b.indices[q]] == k && !seen[b.indices[q]]);
                seen[b.indices[q]] = 1;
                CHECK(b.labels[q] == sp_dataset_label(ds, b.indices[q]));
            }
        }
        uint64_t visited = 0;
        for (uint64_t i = 0; i < n; i++) visited += seen[i];
        CHECK(visited == m);
        sp_batch_free(&b);
        free(seen);
        fps[k] = ld_info(ld).fingerprint;
        CHECK(!same_digest(fps[k], ld_info(all).fingerprint));
        sp_loader *again = loader_ok(small, spec, names[k], 3);
        CHECK(same_digest(fps[k], ld_info(again).fingerprint));
        sp_loader_destroy(again);
        sp_loader *other_seed = loader_ok(small, spec, names[k], 4);
        CHECK(!same_digest(fps[k], ld_info(other_seed).fingerprint));
        sp_loader_destroy(other_seed);
        sp_loader_destroy(ld);
    }
    CHECK(total == n);   /* coverage: with disjointness, the union is everything */
    for (uint64_t i = 0; i < n; i++) CHECK(owner[i] >= 0);
    CHECK(!same_digest(fps[0], fps[1]) && !same_digest(fps[1], fps[2]) &&
          !same_digest(fps[0], fps[2]));
    printf("loader: %llu samples: train %llu, val %llu, test %llu\n", (unsigned long long)n,
           (unsigned long long)counts[0], (unsigned long long)counts[1],
           (unsigned long long)counts[2]);
}

/* The two shapes datasets of the loader cases (`big` has all of `small`'s
 * files and more), each made by the first loader case of a run that needs
 * it, under g_root; a marker file tells the cases after it (forked from the
 * same runner). */
static void need_dataset(const char *dir, uint32_t count) {
    char mark[160];
    snprintf(mark, sizeof mark, "%s.made", dir);
    if (access(mark, F_OK) == 0) return;
    sp_error err;
    sp_error_clear(&err);
    sp_shapes_opts o = {count, 16, 0};
    CHECK_OK(sp_shapes_make(dir, &o, &err), &err);
    FILE *f = fopen(mark, "w");
    CHECK(f && fclose(f) == 0);
}
static void need_small(void) { need_dataset(g_small, 240); }
static void need_big(void) { need_dataset(g_big, 330); }

static void test_loader_subsets(void) {
    need_small();
    sp_loader *all = loader_ok(g_small, NULL, NULL, 0);
    int *owner = malloc(sp__dataset_size(ld_info(all).dataset) * sizeof *owner);
    CHECK(owner);
    subsets(g_small, all, owner);
    free(owner);
    sp_loader_destroy(all);
}

static void test_loader_stability(void) {
    const char *small = g_small, *big = g_big, *spec = SPEC;
    const char *const *names = NAMES;
    need_small();
    need_big();
    sp_loader *all = loader_ok(small, NULL, NULL, 0);
    const sp_dataset *ds = ld_info(all).dataset;
    uint64_t n = sp__dataset_size(ds);
    int *owner = malloc(n * sizeof *owner);
    CHECK(owner);
    subsets(small, all, owner);   /* each small sample's subset, checked */

    /* Stability: the bigger dataset has all the small one's files and more. */
    sp_loader *ball = loader_ok(big, NULL, NULL, 0);
    const sp_dataset *bds = ld_info(ball).dataset;
    uint64_t bn = sp__dataset_size(bds);
    CHECK(bn > n);
    uint64_t matched = 0;
    for (int k = 0; k < 3; k++) {
        sp_loader *ld = loader_ok(big, spec, names[k], 3);
        for (uint64_t j = 0; j < ld_info(ld).size; j++) {
            const char *p = sp_dataset_path(bds, sp__loader_sample_index(ld, j));
            for (uint64_t i = 0; i < n; i++)   /* the small dataset's subset of this path */
                if (!strcmp(sp_dataset_path(ds, i), p)) {
                    CHECK_MSG(owner[i] == k, "%s moved from %s to %s when files were added", p,
                              names[owner[i]], names[k]);
                    matched++;
                }
        }
        sp_loader_destroy(ld);
    }
    CHECK(matched == n);   /* every old sample found, in its old subset */
    printf("stability: %llu -> %llu samples, all %llu old samples kept their subset\n",
           (unsigned long long)n, (unsigned long long)bn, (unsigned long long)matched);
    sp_loader_destroy(ball);
    free(owner);
    sp_loader_destroy(all);
}

static void test_loader_errors(void) {
    need_small();
    const char *small = g_small, *spec = SPEC;
    sp_error err;
    sp_error_clear(&err);
    int rc;
    sp_loader *ld = make_loader(small, spec, NULL, 0, &err, &rc);
    CHECK(rc == SP_EINVAL && !ld && strstr(err.msg, "--subset"));
    ld = make_loader(small, NULL, "val", 0, &err, &rc);
    CHECK(rc == SP_EINVAL && !ld && strstr(err.msg, "--split"));
    ld = make_loader(small, spec, "holdout", 0, &err, &rc);
    CHECK(rc == SP_EINVAL && !ld && strstr(err.msg, "holdout") &&
          strstr(err.msg, "train, val, test"));
    ld = make_loader(small, "train=0.9,val=0.2", "val", 0, &err, &rc);
    CHECK(rc == SP_EINVAL && !ld && strstr(err.msg, "not 1"));
    ld = make_loader(small, "big=0.9999999,tiny=0.0000001", "tiny", 0, &err, &rc);
    CHECK(rc == SP_EINVAL && !ld && strstr(err.msg, "empty"));
    printf("errors ok\n");
}

/* ---- cases ------------------------------------------------------------------------- */

static void setup(void) {
    snprintf(g_root, sizeof g_root, "/tmp/sp-test-split-XXXXXX");
    CHECK(mkdtemp(g_root) != NULL);
    snprintf(g_small, sizeof g_small, "%s/small", g_root);
    snprintf(g_big, sizeof g_big, "%s/big", g_root);
}

static void teardown(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_root);
}

static const sp_case cases[] = {
    SP_CASE(test_parse),
    SP_CASE(test_sizes),
    SP_CASE(test_loader_subsets),
    SP_CASE(test_loader_stability),
    SP_CASE(test_loader_errors),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

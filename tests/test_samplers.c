/* test_samplers.c - the loader's samplers through the C API (loader.h
 * "Samplers", docs/determinism.md section 13; the indices against the
 * Python reference are bindings/python/tests/test_samplers.py).
 *
 * On a shapes dataset of 37 samples: the loader keeps its own copies of the
 * caller's indices and weights (the caller's arrays overwritten and freed,
 * the config of sp_loader_info_get() makes a loader with the same
 * fingerprint and batches); every sampler field changes the fingerprint, an unchanged
 * config does not; an index list in the sequential order is the list, cut
 * into strided rank slices; repeat's copies land on different ranks of a
 * world of r; a weighted epoch draws only positive weights, and a sample of
 * weight 0 never; without replacement each positive one once an epoch; each refusal names its field (indices with a split, a
 * repeated index, more draws without replacement than positive weights,
 * copies whose address would pass 2^32, too few weights); one service serving every rank of a world
 * of 2 gives each rank its in-process loader's batches (repeat's strided
 * slices, weighted draws with and without replacement).
 * Cases (tests/runner.h): test_config_is_copied, test_fingerprint_fields,
 * test_sequential_list_ranks, test_repeat_ranks, test_weighted_zero,
 * test_refusals, test_service_ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/loader.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "seedpipe/stream.h"
#include "service_join.h"
#include "loader_check.h"
#include "loader/loader_internal.h"
#include "service/service_internal.h"

#define N 37

static char g_tmp[256];
static char root[320];
static const char *PIPE = "random_resized_crop size=16 scale=0.3,1 | hflip p=0.5";

static sp_loader_config config(uint32_t batch) {
    sp_loader_config c;
    sp_loader_config_default(&c);
    c.dataset = root;
    c.pipeline = PIPE;
    c.seed = 21;
    c.batch_size = batch;
    return c;
}

static sp_loader *create(const sp_loader_config *c) {
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(c, &ld, &err), &err);
    return ld;
}

static int dig_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* Every index and the batch digests of epochs 0 and 1; returns the count. */
static size_t run(sp_loader *ld, uint64_t *idx, sp_digest *dig) {
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    size_t k = 0, d = 0;
    for (uint32_t e = 0; e < 2; e++)
        for (uint64_t i = 0; i < ld_info(ld).batches_per_epoch; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            for (uint32_t s = 0; s < b.count; s++) idx[k++] = b.indices[s];
            if (dig) dig[d++] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
    return k;
}

static void test_config_is_copied(void) {
    double *w = malloc(N * sizeof *w);
    uint64_t *ind = malloc(5 * sizeof *ind);
    for (int i = 0; i < N; i++) w[i] = (double)(i % 4);
    for (int i = 0; i < 5; i++) ind[i] = (uint64_t)(7 * i + 1);
    sp_loader_config c = config(8);
    c.weights = w;
    c.nweights = N;
    c.replacement = 1;
    c.num_samples = 50;
    sp_loader *a = create(&c);
    sp_loader_config d = config(4);
    d.indices = ind;
    d.nindices = 5;
    sp_loader *b = create(&d);
    for (int i = 0; i < N; i++) w[i] = 1.0;   /* the caller's arrays change and go */
    ind[0] = 2;
    free(w);
    free(ind);
    static uint64_t i1[200], i2[200];
    static sp_digest d1[40], d2[40];
    sp_loader *a2 = create(ld_info(a).config);
    CHECK(dig_eq(ld_info(a).fingerprint, ld_info(a2).fingerprint));
    size_t n1 = run(a, i1, d1), n2 = run(a2, i2, d2);
    CHECK(n1 == 100 && n2 == 100 && memcmp(i1, i2, sizeof i1) == 0);
    CHECK(memcmp(d1, d2, sizeof d1) == 0);
    for (size_t k = 0; k < n1; k++) CHECK(i1[k] % 4 != 0);   /* weight 0: never drawn */
    sp_loader *b2 = create(ld_info(b).config);
    CHECK(dig_eq(ld_info(b).fingerprint, ld_info(b2).fingerprint));
    n1 = run(b2, i1, NULL);
    CHECK(n1 == 10);
    for (size_t k = 0; k < n1; k++) CHECK(i1[k] % 7 == 1 && i1[k] <= 29);
    CHECK(ld_info(b2).size == 5 && sp__loader_sample_index(b2, 3) == 22);
    sp_loader_destroy(a);
    sp_loader_destroy(a2);
    sp_loader_destroy(b);
    sp_loader_destroy(b2);
}

static void test_fingerprint_fields(void) {
    static double w[N], w2[N];
    static uint64_t ind[3] = {4, 9, 1}, ind2[3] = {4, 1, 9};
    for (int i = 0; i < N; i++) w[i] = w2[i] = 1.0 + i;
    w2[N - 1] = 1.5;
    sp_loader_config base = config(8), c[8];
    for (int i = 0; i < 8; i++) c[i] = base;
    c[1].num_samples = 40;
    c[2].replacement = 1;
    c[3].replacement = 1, c[3].weights = w, c[3].nweights = N;
    c[4].replacement = 1, c[4].weights = w2, c[4].nweights = N;
    c[5].indices = ind, c[5].nindices = 3;
    c[6].indices = ind2, c[6].nindices = 3;
    c[7].repeat = 2;
    sp_digest fp[8];
    for (int i = 0; i < 8; i++) {
        sp_loader *ld = create(&c[i]);
        fp[i] = ld_info(ld).fingerprint;
        for (int j = 0; j < i; j++) CHECK(!dig_eq(fp[i], fp[j]));
        sp_loader_destroy(ld);
    }
    sp_loader_config same = base;
    same.repeat = 1;   /* 1: no repeat, the default stream */
    sp_loader *ld = create(&same);
    CHECK(dig_eq(ld_info(ld).fingerprint, fp[0]));
    sp_loader_destroy(ld);
}

static void test_sequential_list_ranks(void) {
    static uint64_t ind[7] = {30, 2, 17, 5, 36, 11, 0};
    uint64_t got[2][8];
    uint32_t cnt[2] = {0, 0};
    for (uint32_t r = 0; r < 2; r++) {
        sp_loader_config c = config(4);
        c.indices = ind;
        c.nindices = 7;
        c.order = SP_ORDER_SEQUENTIAL;
        c.rank = r;
        c.world = 2;
        sp_loader *ld = create(&c);
        sp_batch b;
        sp_error err;
        CHECK(sp_batch_alloc(ld, &b) == 0);
        for (uint64_t i = 0; i < ld_info(ld).batches_per_epoch; i++) {
            CHECK_OK(sp_loader_batch(ld, 0, i, &b, &err), &err);
            for (uint32_t s = 0; s < b.count; s++) got[r][cnt[r]++] = b.indices[s];
        }
        sp_batch_free(&b);
        sp_loader_destroy(ld);
    }
    CHECK(cnt[0] == 4 && cnt[1] == 3);   /* strided: rank r takes positions r, r + 2, ... */
    for (uint32_t k = 0; k < 7; k++) CHECK(got[k % 2][k / 2] == ind[k]);
}

static void test_repeat_ranks(void) {
    const uint32_t r = 3;
    static uint64_t idx[3][2 * N * 3];
    size_t cnt[3];
    for (uint32_t k = 0; k < r; k++) {
        sp_loader_config c = config(6);
        c.repeat = r;
        c.rank = k;
        c.world = r;
        sp_loader *ld = create(&c);
        CHECK(ld_info(ld).size == N * r);
        cnt[k] = run(ld, idx[k], NULL);
        sp_loader_destroy(ld);
    }
    for (uint32_t k = 0; k < r; k++) {
        CHECK(cnt[k] == 2 * N);
        for (uint32_t e = 0; e < 2; e++) {   /* each rank: every sample once an epoch */
            int seen[N] = {0};
            for (size_t j = 0; j < N; j++) seen[idx[k][e * N + j]]++;
            for (int i = 0; i < N; i++) CHECK(seen[i] == 1);
        }
    }
    for (size_t j = 0; j < N; j++)   /* position 3j + k holds copy k of the j-th sample */
        CHECK(idx[0][j] == idx[1][j] && idx[1][j] == idx[2][j]);
}

static void test_weighted_zero(void) {
    static double w[N];
    w[5] = 2.0;
    w[30] = 1.0;
    sp_loader_config c = config(10);
    c.weights = w;
    c.nweights = N;
    c.replacement = 1;
    c.num_samples = 300;
    sp_loader *ld = create(&c);
    static uint64_t idx[600];
    size_t n = run(ld, idx, NULL), five = 0;
    CHECK(n == 600);
    for (size_t k = 0; k < n; k++) {
        CHECK(idx[k] == 5 || idx[k] == 30);
        five += idx[k] == 5;
    }
    CHECK(five > 340 && five < 460);   /* 2/3 of 600 = 400, sd 11.5 */
    sp_loader_destroy(ld);
    /* without replacement: the positive weights' samples, each once an epoch */
    for (int i = 0; i < N; i++) w[i] = (i % 3) ? 1.0 + i : 0.0;
    c.replacement = 0;
    c.num_samples = 24;   /* the i % 3 != 0 of 37 */
    ld = create(&c);
    n = run(ld, idx, NULL);
    CHECK(n == 48);
    int seen[2][N] = {{0}};
    for (size_t k = 0; k < n; k++) seen[k / 24][idx[k]]++;
    for (int i = 0; i < N; i++) CHECK(seen[0][i] == (i % 3 != 0) && seen[1][i] == seen[0][i]);
    CHECK(memcmp(idx, idx + 24, 24 * sizeof *idx) != 0);   /* another order each epoch */
    sp_loader_destroy(ld);
}

static void refused(const sp_loader_config *c, int code, const char *what) {
    sp_loader *ld;
    sp_error err;
    int rc = sp_loader_create(c, &ld, &err);
    if (rc != code || !strstr(err.msg, what)) {
        fprintf(stderr, "expected %d \"%s\", got %d \"%s\"\n", code, what, rc, err.msg);
        CHECK(0);
    }
}

static void test_refusals(void) {
    static uint64_t ind[3] = {1, 2, 1}, big[2] = {1, N};
    static double w[N];
    for (int i = 0; i < N; i++) w[i] = 1.0;
    sp_loader_config c = config(4);
    c.indices = ind;
    c.nindices = 3;
    refused(&c, SP_EINVAL, "index 1 is listed twice");
    c.indices = big;
    c.nindices = 2;
    refused(&c, SP_EINVAL, "indices[1] = 37 is past the dataset");
    c.split = "train=0.5,val=0.5";
    c.subset = "train";
    refused(&c, SP_EINVAL, "a split");
    c = config(4);
    c.weights = w;
    c.nweights = N;
    w[4] = 0;   /* without replacement: 36 samples to draw from */
    refused(&c, SP_EINVAL, "only 36 samples have a weight above 0");
    w[4] = 1;
    c.replacement = 1;
    c.nweights = N - 1;
    refused(&c, SP_EINVAL, "36 weights for 37 samples");
    c = config(4);
    c.num_samples = UINT64_C(1) << 32;
    refused(&c, SP_ELIMIT, "below 2^32");
    c = config(4);
    c.repeat = 2;
    c.replacement = 1;
    refused(&c, SP_EINVAL, "repeat=2 with replacement");
}

/* One service for ranks 0..K-1 of world K of g (a global config); each rank's
 * batches of two epochs equal its in-process loader's. */
static void service_ranks(sp_loader_config g, uint32_t K, const char *what) {
    char name[80];
    pid_t pid;
    sp_error err;
    snprintf(name, sizeof name, ".sp-test-samplers-%d-%s", (int)getpid(), what);
    sp_service_config sc = {name, K, 2, 0, 2, NULL, NULL, NULL, 0, K, NULL};
    CHECK_OK(sp__service_fork(&g, &sc, &pid, &err), &err);
    sp_stream *s[2];
    sp_loader *ld[2];
    sp_batch b[2];
    for (uint32_t k = 0; k < K; k++) {
        sp_stream_config stc;
        sp_stream_config_default(&stc);
        stc.kind = SP_STREAM_SERVICE;
        stc.service_name = name;
        sp_loader_config c = g;
        c.rank = k;
        c.world = K;
        CHECK_OK(sp_stream_open(&c, &stc, &s[k], &err), &err);
        ld[k] = create(&c);
        CHECK(sp_batch_alloc(ld[k], &b[k]) == 0);
    }
    uint64_t nb = ld_info(ld[0]).batches_per_epoch;
    for (uint64_t q = 0; q < 2 * nb; q++)
        for (uint32_t k = 0; k < K; k++) {
            sp_batch v;
            CHECK_OK(sp_stream_next(s[k], &v, &err), &err);
            CHECK_OK(sp_loader_batch(ld[k], (uint32_t)(q / nb), q % nb, &b[k], &err), &err);
            CHECK_MSG(v.count == b[k].count && dig_eq(sp_stream_batch_digest(s[k], &v),
                                                      sp_batch_digest(ld[k], &b[k])),
                      "%s: rank %u batch %llu", what, k, (unsigned long long)q);
            CHECK_OK(sp_stream_release(s[k], &v, &err), &err);
        }
    for (uint32_t k = 0; k < K; k++) {
        sp_stream_close(s[k]);
        sp_batch_free(&b[k]);
        sp_loader_destroy(ld[k]);
    }
    CHECK(join_status(pid, 10000) == 0);
}

static void test_service_ranks(void) {
    sp_loader_config g = config(6);
    g.repeat = 2;
    service_ranks(g, 2, "repeat");
    static double w[N];
    for (int i = 0; i < N; i++) w[i] = 1.0 + (i % 3);
    g = config(6);
    g.weights = w;
    g.nweights = N;
    g.replacement = 1;
    g.num_samples = 40;
    service_ranks(g, 2, "weighted");
    g.replacement = 0;
    g.num_samples = 30;
    service_ranks(g, 2, "weighted-without");
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-samplers-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(root, sizeof root, "%s/data", g_tmp);
    sp_shapes_opts o = {N, 32, 8};
    sp_error err;
    CHECK_OK(sp_shapes_make(root, &o, &err), &err);
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_config_is_copied),
    SP_CASE(test_fingerprint_fields),
    SP_CASE(test_sequential_list_ranks),
    SP_CASE(test_repeat_ranks),
    SP_CASE(test_weighted_zero),
    SP_CASE(test_refusals),
    SP_CASE(test_service_ranks),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

/* test_order.c - the sequential order, the padded tail, the strided rank
 * slices (docs/determinism.md section 7a) and the in-memory sample list.
 *
 * On a shapes dataset of 37 samples (prime: no world 2 or 3 divides it):
 * the sequential order is the identity in every epoch; with pad_tail every
 * rank of world 1, 2, 3 gets the same number of samples in every batch, none
 * empty, padded samples wrap the epoch's own order and the ranks' samples
 * together are the padded epoch; sequential slices are strided, shuffled
 * ones contiguous; the in-process loader (1 and 3 threads), the worker pool
 * (2 workers) and a service (all ranks of world 3 and a two-service split)
 * give the same bytes; a state of another order or padding is refused by
 * name; verify runs one rank's stream and refuses world rows by name; the
 * sample list gives the bytes of a list file of the same samples
 * (sorted), another order when given another order, takes duplicates,
 * names a missing file, resolves relative paths under cfg.dataset and works
 * through the pool's forked workers.
 * Cases (tests/runner.h): test_sequential_identity, test_pad_tail_ranks,
 * test_paths_agree, test_service_ranks, test_verify_layouts,
 * test_state_order, test_sample_list,
 * test_sample_list_edges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "service_join.h"
#include "seedpipe/loader.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "seedpipe/state.h"
#include "seedpipe/stream.h"
#include "seedpipe/verify.h"
#include "loader_check.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */
#include "dataset/dataset_internal.h"
#include "service/service_internal.h"
#include "stream/verify_internal.h"

#define N 37
#define EPOCHS 2

static char g_tmp[256];
static char root[320];

static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3 saturation=0.3";
static const char *FIXED = "resize size=16,16";   /* no randomness: bytes follow the file */

static sp_loader_config config(const char *pipe, uint32_t batch, sp_order order, int pad,
                               uint32_t rank, uint32_t world) {
    sp_loader_config c;
    sp_loader_config_default(&c);
    c.dataset = root;
    c.pipeline = pipe;
    c.seed = 77;
    c.batch_size = batch;
    c.order = order;
    c.pad_tail = pad;
    c.rank = rank;
    c.world = world;
    return c;
}

static sp_loader *create(const sp_loader_config *c) {
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(c, &ld, &err), &err);
    return ld;
}

static int dig_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* Every batch digest of EPOCHS epochs, in stream order; returns the count. */
static size_t loader_digests(const sp_loader_config *c, sp_digest *out) {
    sp_loader *ld = create(c);
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    size_t k = 0;
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < ld_info(ld).batches_per_epoch; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            out[k++] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    return k;
}

static void test_sequential_identity(void) {
    sp_loader_config c = config(PIPE, 8, SP_ORDER_SEQUENTIAL, 0, 0, 1);
    sp_loader *ld = create(&c);
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    CHECK(ld_info(ld).batches_per_epoch == 5);
    for (uint32_t e = 0; e < 3; e++) {
        uint64_t next = 0;
        for (uint64_t i = 0; i < 5; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            CHECK(b.count == (i < 4 ? 8u : 5u));
            for (uint32_t s = 0; s < b.count; s++) CHECK(b.indices[s] == next++);
        }
        CHECK(next == N);
    }
    /* The fingerprint names the order; shuffle's is the v1 one (unchanged). */
    sp_loader_config d = config(PIPE, 8, SP_ORDER_SHUFFLE, 0, 0, 1);
    sp_loader *l2 = create(&d);
    CHECK(!dig_eq(ld_info(ld).fingerprint, ld_info(l2).fingerprint));
    d.order = (sp_order)2;
    sp_loader *bad;
    CHECK(sp_loader_create(&d, &bad, &err) == SP_EINVAL && strstr(err.msg, "order"));
    sp_order o;
    uint32_t k;
    CHECK(sp_order_spec_parse("sequential", &o, &k, NULL) == 0 && o == SP_ORDER_SEQUENTIAL);
    CHECK(sp_order_spec_parse("random", &o, &k, &err) == SP_EINVAL);
    char name[16];
    sp_order_spec_format(SP_ORDER_SHUFFLE, 0, name, sizeof name);
    CHECK(strcmp(name, "shuffle") == 0);
    sp_order_spec_format((sp_order)7, 0, name, sizeof name);
    CHECK(strcmp(name, "?") == 0);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    sp_loader_destroy(l2);
}

/* One (order, world) of test_pad_tail_ranks: every rank's batches. */
static void check_padded(sp_order order, uint32_t world, uint32_t per) {
    uint32_t B = world * per;
    uint64_t np = (N + world - 1) / world * world;
    sp_loader_config c0 = config(PIPE, B, order, 1, 0, world);
    sp_loader *l0 = create(&c0);
    CHECK(ld_info(l0).padded_size == np);
    uint64_t nb = ld_info(l0).batches_per_epoch;
    CHECK(nb == (np + B - 1) / B);
    sp_loader_config g = config(PIPE, B, order, 0, 0, 1);   /* the unpadded epoch order */
    sp_loader *gl = create(&g);
    sp_batch gb;
    CHECK(sp_batch_alloc(gl, &gb) == 0);
    uint64_t *epoch = malloc(N * sizeof *epoch);   /* position -> index */
    sp_error err;
    for (uint64_t i = 0, k = 0; i < ld_info(gl).batches_per_epoch; i++) {
        CHECK_OK(sp_loader_batch(gl, 1, i, &gb, &err), &err);
        for (uint32_t s = 0; s < gb.count; s++) epoch[k++] = gb.indices[s];
    }
    uint32_t seen[N] = {0};
    for (uint32_t r = 0; r < world; r++) {
        sp_loader_config c = config(PIPE, B, order, 1, r, world);
        sp_loader *ld = create(&c);
        sp_batch b;
        CHECK(sp_batch_alloc(ld, &b) == 0);
        for (uint64_t i = 0; i < nb; i++) {
            CHECK_OK(sp_loader_batch(ld, 1, i, &b, &err), &err);
            uint64_t cnt = np - i * B < B ? np - i * B : B;
            CHECK_MSG(b.count == cnt / world && b.count > 0, "world %u rank %u batch %llu: %u",
                      world, r, (unsigned long long)i, b.count);
            for (uint32_t j = 0; j < b.count; j++) {
                /* strided: position i*B + r + world*j; contiguous: i*B + r*cnt/world + j */
                uint64_t p = order == SP_ORDER_SEQUENTIAL ? i * B + r + (uint64_t)world * j
                                                          : i * B + r * cnt / world + j;
                CHECK_MSG(b.indices[j] == epoch[p % N], "world %u rank %u batch %llu slot %u",
                          world, r, (unsigned long long)i, j);
                seen[b.indices[j]]++;
            }
        }
        sp_batch_free(&b);
        sp_loader_destroy(ld);
    }
    /* The union is the padded epoch: each sample once, the first np - N twice. */
    for (uint64_t p = 0; p < N; p++)
        CHECK(seen[epoch[p]] == 1u + (p < np - N));
    free(epoch);
    sp_batch_free(&gb);
    sp_loader_destroy(gl);
    sp_loader_destroy(l0);
}

static void test_pad_tail_ranks(void) {
    for (int o = 0; o < 2; o++)
        for (uint32_t world = 1; world <= 3; world++)
            for (uint32_t per = 1; per <= 4; per += 3) check_padded((sp_order)o, world, per);
    /* world 1: pad_tail changes no byte (only the fingerprint). */
    sp_digest a[64], b[64];
    sp_loader_config c = config(PIPE, 6, SP_ORDER_SHUFFLE, 0, 0, 1);
    size_t na = loader_digests(&c, a);
    c.pad_tail = 1;
    CHECK(loader_digests(&c, b) == na);
    for (size_t i = 0; i < na; i++) CHECK(dig_eq(a[i], b[i]));
    /* Without pad_tail, sequential is strided and the last batch uneven:
     * B 6, world 3, batch 6 = positions 36 (rank 0) only. */
    sp_loader_config s = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 0, 1, 3);
    sp_loader *ld = create(&s);
    sp_batch bt;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &bt) == 0);
    CHECK_OK(sp_loader_batch(ld, 0, 2, &bt, &err), &err);
    CHECK(bt.count == 2 && bt.indices[0] == 13 && bt.indices[1] == 16);
    CHECK_OK(sp_loader_batch(ld, 0, 6, &bt, &err), &err);
    CHECK(bt.count == 0);
    sp_batch_free(&bt);
    sp_loader_destroy(ld);
}

/* The stream of c through `kind` (workers for a pool), digests into out. */
static size_t stream_digests(const sp_loader_config *c, sp_stream_kind kind, int workers,
                             sp_digest *out) {
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = kind;
    sc.workers = workers;
    sc.epochs = EPOCHS;
    sp_stream *s;
    sp_error err;
    CHECK_OK(sp_stream_open(c, &sc, &s, &err), &err);
    sp_batch v;
    size_t k = 0;
    int rc;
    while ((rc = sp_stream_next(s, &v, &err)) == 0) {
        out[k++] = sp_stream_batch_digest(s, &v);
        CHECK_OK(sp_stream_release(s, &v, &err), &err);
    }
    CHECK_MSG(rc == SP_END, "rc %d: %s", rc, err.msg);
    sp_stream_close(s);
    return k;
}

static void test_paths_agree(void) {
    const struct { sp_order o; int pad; uint32_t rank, world; } cfgs[] = {
        {SP_ORDER_SEQUENTIAL, 0, 0, 1}, {SP_ORDER_SEQUENTIAL, 1, 1, 3},
        {SP_ORDER_SEQUENTIAL, 0, 2, 3}, {SP_ORDER_SHUFFLE, 1, 2, 3}, {SP_ORDER_SHUFFLE, 1, 1, 2}};
    for (size_t t = 0; t < sizeof cfgs / sizeof cfgs[0]; t++) {
        sp_loader_config c = config(PIPE, 6, cfgs[t].o, cfgs[t].pad, cfgs[t].rank, cfgs[t].world);
        sp_digest ref[64], d[64];
        size_t n = loader_digests(&c, ref);
        c.threads = 3;
        CHECK(stream_digests(&c, SP_STREAM_LOADER, 0, d) == n);
        for (size_t i = 0; i < n; i++) CHECK_MSG(dig_eq(ref[i], d[i]), "threads, cfg %zu", t);
        c.threads = 1;
        CHECK(stream_digests(&c, SP_STREAM_POOL, 2, d) == n);
        for (size_t i = 0; i < n; i++) CHECK_MSG(dig_eq(ref[i], d[i]), "pool, cfg %zu", t);
    }
}

/* Services for ranks [first[i], first[i+1]) of world K, read by K clients
 * in lockstep; every rank's batches equal its in-process loader's. */
static void service_case(sp_order order, int pad, uint32_t K, uint32_t nsvc) {
    sp_loader_config g = config(PIPE, 6, order, pad, 0, 1);
    char name[2][80];
    pid_t pid[2] = {0, 0};
    uint32_t first[3] = {0, nsvc == 2 ? 1 : K, K};
    sp_error err;
    for (uint32_t i = 0; i < nsvc; i++) {
        snprintf(name[i], sizeof name[i], ".sp-test-order-%d-%u-%u", (int)getpid(), K, i);
        sp_service_config sc = {name[i], K, 2, 0, EPOCHS, NULL, NULL, NULL, first[i],
                                first[i + 1] - first[i], NULL};
        CHECK_OK(sp__service_fork(&g, &sc, &pid[i], &err), &err);
    }
    sp_stream *s[3];
    sp_loader *ld[3];
    sp_batch b[3];
    for (uint32_t k = 0; k < K; k++) {
        sp_stream_config sc;
        sp_stream_config_default(&sc);
        sc.kind = SP_STREAM_SERVICE;
        sc.service_name = name[nsvc == 2 && k >= first[1]];
        sp_loader_config c = config(PIPE, 6, order, pad, k, K);
        CHECK_OK(sp_stream_open(&c, &sc, &s[k], &err), &err);
        ld[k] = create(&c);
        CHECK(sp_batch_alloc(ld[k], &b[k]) == 0);
    }
    uint64_t nb = ld_info(ld[0]).batches_per_epoch;
    for (uint64_t q = 0; q < EPOCHS * nb; q++)
        for (uint32_t k = 0; k < K; k++) {
            sp_batch v;
            CHECK_OK(sp_stream_next(s[k], &v, &err), &err);
            CHECK_OK(sp_loader_batch(ld[k], (uint32_t)(q / nb), q % nb, &b[k], &err), &err);
            CHECK_MSG(v.count == b[k].count && dig_eq(sp_stream_batch_digest(s[k], &v),
                                                      sp_batch_digest(ld[k], &b[k])),
                      "order %d pad %d K %u nsvc %u: rank %u batch %llu (count %u vs %u)",
                      (int)order, pad, K, nsvc, k, (unsigned long long)q, v.count, b[k].count);
            CHECK_OK(sp_stream_release(s[k], &v, &err), &err);
        }
    for (uint32_t k = 0; k < K; k++) {
        sp_stream_close(s[k]);
        sp_batch_free(&b[k]);
        sp_loader_destroy(ld[k]);
    }
    for (uint32_t i = 0; i < nsvc; i++) CHECK(join_status(pid[i], 10000) == 0);
}

static void test_service_ranks(void) {
    service_case(SP_ORDER_SEQUENTIAL, 1, 3, 1);
    service_case(SP_ORDER_SEQUENTIAL, 0, 3, 2);
    service_case(SP_ORDER_SHUFFLE, 1, 3, 1);
    service_case(SP_ORDER_SHUFFLE, 1, 2, 2);
}

/* verify on the new layouts: one rank's stream (pool, crash, resume, cache,
 * service -> client rows) is identical; world rows are refused by name, as
 * the ranks' slices are not the world-1 stream there; the 2-rank service
 * row is skipped with its reason. */
static void test_verify_layouts(void) {
    int ws[] = {1, 2};
    sp_verify_config vc;
    memset(&vc, 0, sizeof vc);
    vc.workers = ws;
    vc.nworkers = 2;
    vc.epochs = 1;
    sp_verify_report *r;
    sp_error err;
    sp_loader_config c = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 1, 1, 3);
    CHECK_OK(sp_verify_run(&c, &vc, &r, &err), &err);
    CHECK_MSG(sp_verify_ok(r), "%s", sp__verify_summary(r));
    sp_verify_free(r);
    c = config(PIPE, 6, SP_ORDER_SHUFFLE, 1, 0, 1);
    CHECK_OK(sp_verify_run(&c, &vc, &r, &err), &err);
    CHECK_MSG(sp_verify_ok(r), "%s", sp__verify_summary(r));
    CHECK_MSG(strstr(sp__verify_skipped(r), "pad_tail"), "%s", sp__verify_skipped(r));
    sp_verify_free(r);
    int ks[] = {1, 3};
    vc.worlds = ks;
    vc.nworlds = 2;
    c = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 0, 0, 1);
    CHECK(sp_verify_run(&c, &vc, &r, &err) == SP_EUNSUPP);
    CHECK_MSG(strstr(err.msg, "sequential order"), "%s", err.msg);
}

static void test_state_order(void) {
    sp_loader_config a = config(PIPE, 6, SP_ORDER_SHUFFLE, 0, 0, 1);
    sp_loader_config b = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 0, 0, 1);
    sp_loader_config p2 = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 1, 0, 2);
    sp_loader_config p3 = config(PIPE, 6, SP_ORDER_SEQUENTIAL, 1, 1, 3);
    sp_loader *la = create(&a), *lb = create(&b), *l2 = create(&p2), *l3 = create(&p3);
    sp_loader_state st, back;
    sp_error err;
    char text[1024];
    /* A default state's text has no new key. */
    sp_loader_state_at(la, 1, 2, &st);
    sp_loader_state_format(&st, text, sizeof text);
    CHECK(!strstr(text, "order") && !strstr(text, "pad_tail"));
    CHECK(sp_loader_state_check(lb, &st, &err) == SP_EMISMATCH);
    CHECK_MSG(strstr(err.msg, "order shuffle in the state, sequential here"), "%s", err.msg);
    /* sequential + pad to 38 (world 2) vs world 3 (pad to 39): refused. */
    sp_loader_state_at(l2, 0, 3, &st);
    CHECK(sp_loader_state_format(&st, text, sizeof text) > 0);
    CHECK(strstr(text, "\"order\":\"sequential\"") && strstr(text, "\"pad_tail\":38"));
    CHECK_OK(sp_loader_state_parse(text, strlen(text), &back, &err), &err);
    CHECK(back.order == SP_ORDER_SEQUENTIAL && back.pad_tail == 38 && back.batch == 3);
    CHECK_OK(sp_loader_state_check(l2, &back, &err), &err);
    CHECK(sp_loader_state_check(l3, &back, &err) == SP_EMISMATCH);
    CHECK_MSG(strstr(err.msg, "pad_tail to 38 in the state, to 39 here"), "%s", err.msg);
    CHECK(sp_loader_state_check(lb, &back, &err) == SP_EMISMATCH);
    char *w = strstr(text, "sequential");
    memcpy(w, "sequentia_", 10);
    CHECK(sp_loader_state_parse(text, strlen(text), &back, &err) == SP_EFORMAT);
    CHECK_MSG(strstr(err.msg, "\"order\""), "%s", err.msg);
    sp_loader_destroy(la);
    sp_loader_destroy(lb);
    sp_loader_destroy(l2);
    sp_loader_destroy(l3);
}

/* The folder's samples (absolute paths, canonical order) and labels. */
static size_t folder_samples(char ***paths, int32_t **labels) {
    sp_dataset *ds;
    sp_error err;
    CHECK_OK(sp_dataset_open(root, NULL, &ds, &err), &err);
    size_t n = (size_t)sp__dataset_size(ds);
    *paths = calloc(n, sizeof **paths);
    *labels = calloc(n, sizeof **labels);
    for (size_t i = 0; i < n; i++) {
        const char *rel = sp_dataset_path(ds, i);
        (*paths)[i] = malloc(strlen(root) + strlen(rel) + 2);
        sprintf((*paths)[i], "%s/%s", root, rel);
        (*labels)[i] = sp_dataset_label(ds, i);
    }
    sp_dataset_close(ds);
    return n;
}

/* All N samples' bytes of one sequential batch of B = N. */
static void one_batch(const sp_loader_config *c, sp_batch *b, sp_loader **ld) {
    sp_error err;
    *ld = create(c);
    CHECK(sp_batch_alloc(*ld, b) == 0);
    CHECK_OK(sp_loader_batch(*ld, 0, 0, b, &err), &err);
}

static void test_sample_list(void) {
    char **paths;
    int32_t *labels;
    size_t n = folder_samples(&paths, &labels);
    CHECK(n == N);
    char listfile[400];
    snprintf(listfile, sizeof listfile, "%s/list.txt", g_tmp);
    FILE *f = fopen(listfile, "w");
    for (size_t i = 0; i < n; i++) fprintf(f, "%s\t%d\n", paths[i], (int)labels[i]);
    fclose(f);
    sp_sample_list sl = {n, (const char *const *)paths, labels, 0};
    /* The same samples in the same (sorted) order: the same bytes. */
    sp_loader_config lc = config(PIPE, 6, SP_ORDER_SHUFFLE, 0, 0, 1);
    lc.dataset = listfile;
    sp_loader_config mc = lc;
    mc.dataset = NULL;
    mc.samples = &sl;
    sp_digest a[64], b[64];
    size_t na = loader_digests(&lc, a);
    CHECK(loader_digests(&mc, b) == na);
    for (size_t i = 0; i < na; i++) CHECK(dig_eq(a[i], b[i]));
    /* Another order: reversed, sequential, a fixed pipeline: sample i of
     * the list is sample n-1-i of the list file. */
    char **rev = calloc(n, sizeof *rev);
    int32_t *rlab = calloc(n, sizeof *rlab);
    for (size_t i = 0; i < n; i++) {
        rev[i] = paths[n - 1 - i];
        rlab[i] = labels[n - 1 - i];
    }
    sp_sample_list rl = {n, (const char *const *)rev, rlab, 0};
    sp_loader_config fl = config(FIXED, N, SP_ORDER_SEQUENTIAL, 0, 0, 1);
    fl.dataset = listfile;
    sp_loader_config fr = fl;
    fr.dataset = NULL;
    fr.samples = &rl;
    sp_batch bl, br;
    sp_loader *ll, *lr;
    one_batch(&fl, &bl, &ll);
    one_batch(&fr, &br, &lr);
    size_t sb = ld_info(ll).sample_bytes;
    for (size_t i = 0; i < n; i++) {
        CHECK(br.indices[i] == i && br.labels[i] == bl.labels[n - 1 - i]);
        CHECK(memcmp(br.images + i * sb, bl.images + (n - 1 - i) * sb, sb) == 0);
    }
    CHECK(strcmp(sp__dataset_kind_name(sp__dataset_kind_of(ld_info(lr).dataset)), "samples") == 0);
    /* The pool's forked workers read the list the loader copied. */
    sp_digest p[64];
    size_t np = stream_digests(&mc, SP_STREAM_POOL, 2, p);
    CHECK(np == na);
    for (size_t i = 0; i < na; i++) CHECK(dig_eq(a[i], p[i]));
    sp_batch_free(&bl);
    sp_batch_free(&br);
    sp_loader_destroy(ll);
    sp_loader_destroy(lr);
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
    free(labels);
    free(rev);
    free(rlab);
}

static void test_sample_list_edges(void) {
    char **paths;
    int32_t *labels;
    size_t n = folder_samples(&paths, &labels);
    sp_error err;
    /* Duplicates: [s0, s1, s0] are three samples. */
    const char *dup[3] = {paths[0], paths[1], paths[0]};
    int32_t dl[3] = {labels[0], labels[1], labels[0]};
    sp_sample_list d = {3, dup, dl, 6};
    sp_loader_config c = config(FIXED, 3, SP_ORDER_SEQUENTIAL, 0, 0, 1);
    c.dataset = NULL;
    c.samples = &d;
    sp_batch b;
    sp_loader *ld;
    one_batch(&c, &b, &ld);
    size_t sb = ld_info(ld).sample_bytes;
    CHECK(b.count == 3 && b.indices[2] == 2 && b.labels[2] == labels[0]);
    CHECK(memcmp(b.images, b.images + 2 * sb, sb) == 0);
    CHECK(sp__dataset_num_classes(ld_info(ld).dataset) == 6);
    /* The loader keeps its own copy: config_of makes the same loader again. */
    sp_loader *again = create(ld_info(ld).config);
    CHECK(dig_eq(ld_info(again).fingerprint, ld_info(ld).fingerprint));
    sp_loader_destroy(again);
    /* A repeated file is hashed once: its repeats copy its size and hash. */
    const sp_dataset *dds = ld_info(ld).dataset;
    sp_dataset_index_info info;
    sp__dataset_index_info_get(dds, &info);
    CHECK_MSG(info.hashed == 2 && !info.used, "hashed %llu", (unsigned long long)info.hashed);
    CHECK(dig_eq(sp__dataset_content_hash(dds, 2), sp__dataset_content_hash(dds, 0)));
    CHECK(!dig_eq(sp__dataset_content_hash(dds, 1), sp__dataset_content_hash(dds, 0)));
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    /* A missing file listed twice is named at its first entry. */
    const char *miss2[4] = {paths[0], "/nonexistent-sp/y.png", paths[1], "/nonexistent-sp/y.png"};
    int32_t dl4[4] = {0, 0, 0, 0};
    sp_sample_list m2 = {4, miss2, dl4, 0};
    c.samples = &m2;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "/nonexistent-sp/y.png") && strstr(err.msg, "sample list entry 1)"),
              "%s", err.msg);
    /* A missing file is named, with its entry. */
    const char *miss[2] = {paths[0], "/nonexistent-sp/x.png"};
    sp_sample_list m = {2, miss, dl, 0};
    c.samples = &m;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "/nonexistent-sp/x.png") && strstr(err.msg, "sample list entry 1"),
              "%s", err.msg);
    /* Bad labels, an empty list. */
    int32_t big[2] = {0, 7};
    sp_sample_list bl = {2, dup, big, 6};
    c.samples = &bl;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL && strstr(err.msg, "label 7"));
    sp_sample_list empty = {0, dup, dl, 0};
    c.samples = &empty;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL && strstr(err.msg, "no samples"));
    /* Relative paths under cfg.dataset: the same dataset as absolute ones,
     * but for the paths as written (the fingerprint covers them). */
    const char *rel[2] = {paths[0] + strlen(root) + 1, paths[1] + strlen(root) + 1};
    sp_sample_list r = {2, rel, dl, 0};
    c.dataset = root;
    c.samples = &r;
    c.batch_size = 2;
    one_batch(&c, &b, &ld);
    sp_sample_list ab = {2, dup, dl, 0};
    sp_loader_config c2 = c;
    c2.dataset = NULL;
    c2.samples = &ab;
    sp_batch b2;
    sp_loader *l2;
    one_batch(&c2, &b2, &l2);
    CHECK(memcmp(b.images, b2.images, 2 * sb) == 0);
    CHECK(!dig_eq(ld_info(ld).fingerprint, ld_info(l2).fingerprint));
    sp_batch_free(&b);
    sp_batch_free(&b2);
    sp_loader_destroy(ld);
    sp_loader_destroy(l2);
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
    free(labels);
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-order-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(root, sizeof root, "%s/data", g_tmp);
    sp_shapes_opts o = {N, 32, 5};
    sp_error err;
    CHECK_OK(sp_shapes_make(root, &o, &err), &err);
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_sequential_identity),
    SP_CASE(test_pad_tail_ranks),
    SP_CASE(test_paths_agree),
    SP_CASE(test_service_ranks),
    SP_CASE(test_verify_layouts),
    SP_CASE(test_state_order),
    SP_CASE(test_sample_list),
    SP_CASE(test_sample_list_edges),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

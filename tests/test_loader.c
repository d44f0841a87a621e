/* test_loader.c - the in-process loader keeps the determinism contract.
 *
 * On a small built-in shapes dataset: every batch digest of two epochs is the
 * same for 1 and 2 threads and for computing batches in forward vs reverse
 * order; a rank's slices over world 1, 2, 4 concatenate to the global batch
 * bytes; the last partial batch and drop_last; a corrupt file is reported by
 * name, identically for any thread count; the fingerprint follows the
 * pipeline and output format; sp_loader_info_get() gives the geometry the
 * config asked for, the config as the loader keeps it, and honours
 * struct_size (too small: refused, nothing written; larger: the bytes past
 * its own struct left alone).
 * Cases (tests/runner.h): test_threads_and_order, test_epoch_covers_dataset,
 * test_world_slices, test_fingerprint_and_errors, test_on_error_policies,
 * test_info.
 * setup makes the dataset once in a fresh temp dir; the two cases that
 * corrupt a file (test_fingerprint_and_errors, test_on_error_policies) each
 * corrupt their own copy of it, so every case runs alone and in any order.
 */
#include <stddef.h>
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
#include "augment/pipeline_internal.h"

#define NSAMPLES 90
#define BATCH 8
#define EPOCHS 2

static char g_tmp[256];    /* per runner process: data/ and the cases' copies */
static char root[320];     /* the dataset a case uses: g_tmp/data or its own copy */

/* Point `root` at a private copy of the clean dataset (for a case that
 * corrupts a file); under g_tmp, so teardown removes it. */
static void use_own_copy(void) {
    char dst[320], cmd[1000];
    snprintf(dst, sizeof dst, "%s/copy-%d", g_tmp, (int)getpid());
    snprintf(cmd, sizeof cmd, "cp -r '%s/data' '%s'", g_tmp, dst);
    CHECK(system(cmd) == 0);
    snprintf(root, sizeof root, "%s", dst);
}

static sp_loader *make(const char *pipeline, int threads, uint32_t rank, uint32_t world,
                       int drop_last, sp_dtype dt) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = root;
    cfg.pipeline = pipeline;
    cfg.seed = 1234;
    cfg.batch_size = BATCH;
    cfg.threads = threads;
    cfg.rank = rank;
    cfg.world = world;
    cfg.drop_last = drop_last;
    cfg.dtype = dt;
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    return ld;
}

static void all_digests(sp_loader *ld, int reverse, sp_digest *out) {
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t k = 0; k < nb; k++) {
            uint64_t i = reverse ? nb - 1 - k : k;
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            out[e * nb + i] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
}

static const char *PIPE = "random_resized_crop size=32 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3 saturation=0.3";

static void test_threads_and_order(void) {
    sp_loader *l1 = make(PIPE, 1, 0, 1, 0, SP_DTYPE_UINT8);
    sp_loader *l2 = make(PIPE, 2, 0, 1, 0, SP_DTYPE_UINT8);
    uint64_t nb = ld_info(l1).batches_per_epoch;
    CHECK(nb == (NSAMPLES + BATCH - 1) / BATCH);
    sp_digest *a = calloc(EPOCHS * nb, sizeof *a), *b = calloc(EPOCHS * nb, sizeof *b),
              *c = calloc(EPOCHS * nb, sizeof *c);
    all_digests(l1, 0, a);
    all_digests(l2, 0, b);
    all_digests(l2, 1, c);
    for (uint64_t i = 0; i < EPOCHS * nb; i++) {
        CHECK_MSG(a[i].hi == b[i].hi && a[i].lo == b[i].lo, "threads 1 vs 2 differ at %llu",
                  (unsigned long long)i);
        CHECK_MSG(a[i].hi == c[i].hi && a[i].lo == c[i].lo, "forward vs reverse at %llu",
                  (unsigned long long)i);
    }
    /* Batches differ from each other and between epochs. */
    for (uint64_t i = 1; i < EPOCHS * nb; i++) CHECK(a[i].lo != a[0].lo || a[i].hi != a[0].hi);
    /* The same loader rebuilt from scratch repeats itself. */
    sp_loader *l3 = make(PIPE, 1, 0, 1, 0, SP_DTYPE_UINT8);
    all_digests(l3, 0, c);
    CHECK(memcmp(a, c, EPOCHS * nb * sizeof *a) == 0);
    sp_loader_destroy(l3);
    free(a);
    free(b);
    free(c);
    sp_loader_destroy(l1);
    sp_loader_destroy(l2);
}

static void test_epoch_covers_dataset(void) {
    sp_loader *ld = make(PIPE, 2, 0, 1, 0, SP_DTYPE_UINT8);
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    int seen[NSAMPLES] = {0};
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (uint64_t i = 0; i < nb; i++) {
        CHECK_OK(sp_loader_batch(ld, 1, i, &b, &err), &err);
        CHECK(b.count == (i + 1 < nb ? BATCH : NSAMPLES - BATCH * (nb - 1)));
        for (uint32_t s = 0; s < b.count; s++) {
            CHECK(b.indices[s] < NSAMPLES);
            seen[b.indices[s]]++;
            CHECK(b.labels[s] == sp_dataset_label(ld_info(ld).dataset, b.indices[s]));
        }
    }
    for (int i = 0; i < NSAMPLES; i++) CHECK(seen[i] == 1);
    CHECK(sp_loader_batch(ld, 0, nb, &b, &err) == SP_ERANGE);
    sp_batch_free(&b);
    sp_loader_destroy(ld);

    ld = make(PIPE, 1, 0, 1, 1, SP_DTYPE_UINT8);
    CHECK(ld_info(ld).batches_per_epoch == NSAMPLES / BATCH);
    sp_loader_destroy(ld);
}

static void test_world_slices(void) {
    sp_loader *g = make(PIPE, 1, 0, 1, 0, SP_DTYPE_FLOAT32);
    size_t sb = ld_info(g).sample_bytes;
    sp_batch gb, rb;
    sp_error err;
    CHECK(sp_batch_alloc(g, &gb) == 0);
    uint64_t nb = ld_info(g).batches_per_epoch;
    uint32_t worlds[] = {2, 4};
    for (int wi = 0; wi < 2; wi++) {
        uint32_t world = worlds[wi];
        for (uint64_t i = 0; i < nb; i += 3) {   /* includes the short last batch */
            uint64_t bi = (i + 3 >= nb) ? nb - 1 : i;
            CHECK_OK(sp_loader_batch(g, 1, bi, &gb, &err), &err);
            uint32_t off = 0;
            for (uint32_t r = 0; r < world; r++) {
                sp_loader *l = make(PIPE, 2, r, world, 0, SP_DTYPE_FLOAT32);
                CHECK(sp_batch_alloc(l, &rb) == 0);
                CHECK(rb.capacity == BATCH / world);
                CHECK_OK(sp_loader_batch(l, 1, bi, &rb, &err), &err);
                CHECK(off + rb.count <= gb.count);
                CHECK(memcmp(rb.indices, gb.indices + off, rb.count * sizeof(uint64_t)) == 0);
                CHECK(memcmp(rb.images, gb.images + (size_t)off * sb, rb.count * sb) == 0);
                off += rb.count;
                sp_batch_free(&rb);
                sp_loader_destroy(l);
            }
            CHECK_MSG(off == gb.count, "world %u: slices cover %u of %u", world, off, gb.count);
        }
    }
    sp_batch_free(&gb);
    sp_loader_destroy(g);
}

static void test_fingerprint_and_errors(void) {
    use_own_copy();   /* it corrupts a file */
    sp_loader *a = make(PIPE, 1, 0, 1, 0, SP_DTYPE_UINT8);
    sp_loader *b = make("random_resized_crop size=32 scale=0.3,1 | hflip p=0.4", 1, 0, 1, 0,
                        SP_DTYPE_UINT8);
    sp_loader *c = make(PIPE, 1, 0, 1, 0, SP_DTYPE_FLOAT32);
    sp_digest fa = ld_info(a).fingerprint, fb = ld_info(b).fingerprint,
              fc = ld_info(c).fingerprint;
    CHECK(fa.lo != fb.lo || fa.hi != fb.hi);
    CHECK(fa.lo != fc.lo || fa.hi != fc.hi);
    sp_loader_destroy(b);
    sp_loader_destroy(c);

    /* normalize with uint8 output is refused with a clear message. */
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = root;
    cfg.pipeline = "center_crop size=32 | normalize mean=0.5,0.5,0.5 std=0.2,0.2,0.2";
    sp_loader *bad;
    sp_error err;
    CHECK(sp_loader_create(&cfg, &bad, &err) == SP_EINVAL);
    CHECK(strstr(err.msg, "float32") != NULL);
    cfg.pipeline = "hflip q=1";
    CHECK(sp_loader_create(&cfg, &bad, &err) == SP_ESPEC);
    CHECK(strstr(err.msg, "q") != NULL);

    /* A file replaced after indexing is refused, naming it, for 1 and 2 threads. */
    const sp_dataset *ds = ld_info(a).dataset;
    sp_loader *a2 = make(PIPE, 2, 0, 1, 0, SP_DTYPE_UINT8);
    sp_batch bt;
    CHECK(sp_batch_alloc(a, &bt) == 0);
    CHECK_OK(sp_loader_batch(a, 0, 0, &bt, &err), &err);
    const char *victim = sp_dataset_path(ds, bt.indices[3]);
    char full[700];
    snprintf(full, sizeof full, "%s/%s", root, victim);
    FILE *f = fopen(full, "wb");
    CHECK(f != NULL);
    fputs("not an image any more", f);
    fclose(f);
    sp_error e1, e2;
    CHECK(sp_loader_batch(a, 0, 0, &bt, &e1) != 0);
    CHECK(sp_loader_batch(a2, 0, 0, &bt, &e2) != 0);
    CHECK_MSG(strstr(e1.msg, victim) != NULL, "message \"%s\" lacks %s", e1.msg, victim);
    CHECK(strcmp(e1.msg, e2.msg) == 0);
    sp_batch_free(&bt);
    sp_loader_destroy(a);
    sp_loader_destroy(a2);
}

/* Replace the file of the sample at position 3 of batch 0, epoch 0 (PIPE,
 * seed 1234) with bytes that are not an image, as test_fingerprint_and_errors
 * does after indexing. */
static void corrupt_batch0_pos3(void) {
    sp_loader *a = make(PIPE, 1, 0, 1, 0, SP_DTYPE_UINT8);
    sp_batch bt;
    sp_error err;
    CHECK(sp_batch_alloc(a, &bt) == 0);
    CHECK_OK(sp_loader_batch(a, 0, 0, &bt, &err), &err);
    char full[700];
    snprintf(full, sizeof full, "%s/%s", root,
             sp_dataset_path(ld_info(a).dataset, bt.indices[3]));
    FILE *f = fopen(full, "wb");
    CHECK(f != NULL);
    fputs("not an image any more", f);
    fclose(f);
    sp_batch_free(&bt);
    sp_loader_destroy(a);
}

/* On-error policies in-process (on its own copy of the dataset, where the
 * sample at position 3 of batch 0, epoch 0 is corrupted first, as
 * test_fingerprint_and_errors leaves it): skip leaves it out and lists it,
 * substitute puts the next position's sample in its place, both alike for
 * 1 and 2 threads; the failure is logged once. */
static void test_on_error_policies(void) {
    use_own_copy();
    corrupt_batch0_pos3();
    sp_error err, ferr;
    sp_loader *f = make(PIPE, 1, 0, 1, 0, SP_DTYPE_UINT8);
    sp_batch fb;
    CHECK(sp_batch_alloc(f, &fb) == 0);
    CHECK(sp_loader_batch(f, 0, 0, &fb, &ferr) != 0);
    CHECK(sp_loader_failure_count(f) == 1);
    for (int pol = SP_ON_ERROR_SKIP; pol <= SP_ON_ERROR_SUBSTITUTE; pol++) {
        sp_digest d[2];
        uint64_t victim = 0;
        for (int threads = 1; threads <= 2; threads++) {
            sp_loader_config cfg = *ld_info(f).config;
            cfg.threads = threads;
            cfg.on_error = (sp_on_error)pol;
            sp_loader *ld;
            CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
            sp_batch b;
            CHECK(sp_batch_alloc(ld, &b) == 0);
            for (int rep = 0; rep < 2; rep++) CHECK_OK(sp_loader_batch(ld, 0, 0, &b, &err), &err);
            CHECK(sp_loader_failure_count(ld) == 1);   /* once, though met twice */
            sp_failure f0;
            CHECK(sp_loader_failure_get(ld, 0, &f0) == 0);
            CHECK(sp_loader_failure_get(ld, 1, &f0) == SP_ERANGE);
            CHECK(sp_loader_failure_get(ld, 0, &f0) == 0);
            CHECK(strcmp(f0.msg, ferr.msg) == 0);
            victim = f0.sample;
            if (pol == SP_ON_ERROR_SKIP) {
                CHECK(b.count == BATCH - 1 && b.nskipped == 1 && b.skipped[0] == victim);
                for (uint32_t s = 0; s < b.count; s++) CHECK(b.indices[s] != victim);
            } else {
                CHECK(b.count == BATCH && b.nsubstituted == 1 && b.substituted[0] == victim);
                CHECK(b.indices[3] == b.substituted[1] && b.indices[4] == b.substituted[1]);
            }
            d[threads - 1] = sp_batch_digest(ld, &b);
            sp_batch_free(&b);
            sp_loader_destroy(ld);
        }
        CHECK(d[0].hi == d[1].hi && d[0].lo == d[1].lo);
        (void)victim;
    }
    sp_batch_free(&fb);
    sp_loader_destroy(f);
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-loader-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(root, sizeof root, "%s/data", g_tmp);
    sp_shapes_opts o = {NSAMPLES, 40, 7};
    sp_error err;
    CHECK_OK(sp_shapes_make(root, &o, &err), &err);
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static void test_info(void) {
    sp_loader *ld = make(PIPE, 1, 1, 2, 0, SP_DTYPE_FLOAT32);
    sp_loader_info li = ld_info(ld);
    CHECK(li.struct_size == sizeof li);
    CHECK(li.size == NSAMPLES && li.padded_size == NSAMPLES);
    CHECK(li.batches_per_epoch == (NSAMPLES + BATCH - 1) / BATCH);
    CHECK(li.c == 3 && li.h == 32 && li.w == 32);
    CHECK(li.sample_bytes == (size_t)li.c * li.h * li.w * sizeof(float));
    CHECK(li.config && li.config->world == 2 && li.config->rank == 1);
    CHECK(li.config->dtype == SP_DTYPE_FLOAT32 && strcmp(li.config->dataset, root) == 0);
    CHECK(li.dataset && sp__dataset_size(li.dataset) == NSAMPLES);
    CHECK(li.pipeline && strcmp(li.spec, sp__pipeline_canonical(li.pipeline)) == 0);
    /* the same spec hashes the same; another pipeline, another hash */
    sp_loader *same = make(PIPE, 2, 0, 1, 1, SP_DTYPE_UINT8);
    sp_loader *other = make("center_crop size=24", 1, 0, 1, 0, SP_DTYPE_UINT8);
    sp_loader_info si = ld_info(same), oi = ld_info(other);
    CHECK(si.pipeline_hash.hi == li.pipeline_hash.hi && si.pipeline_hash.lo == li.pipeline_hash.lo);
    CHECK(oi.pipeline_hash.hi != li.pipeline_hash.hi || oi.pipeline_hash.lo != li.pipeline_hash.lo);
    CHECK(si.batches_per_epoch == NSAMPLES / BATCH);   /* drop_last */
    CHECK(oi.h == 24 && oi.w == 24 && oi.sample_bytes == (size_t)oi.c * 24 * 24);

    /* struct_size: too small is refused with nothing written ... */
    sp_loader_info small;
    memset(&small, 0x5a, sizeof small);
    small.struct_size = offsetof(sp_loader_info, pipeline_hash);
    CHECK(sp_loader_info_get(ld, &small) == SP_EINVAL);
    CHECK(small.size == 0x5a5a5a5a5a5a5a5aull && small.c == 0x5a5a5a5a);
    CHECK(sp_loader_info_get(ld, NULL) == SP_EINVAL && sp_loader_info_get(NULL, &li) == SP_EINVAL);
    /* ... and a caller's longer struct keeps its bytes past ours */
    struct { sp_loader_info li; unsigned char tail[24]; } big;
    memset(&big, 0xab, sizeof big);
    big.li.struct_size = sizeof big;
    CHECK(sp_loader_info_get(ld, &big.li) == 0);
    CHECK(big.li.struct_size == sizeof big && big.li.size == NSAMPLES && big.li.c == 3);
    for (size_t i = 0; i < sizeof big.tail; i++) CHECK(big.tail[i] == 0xab);
    sp_loader_destroy(same);
    sp_loader_destroy(other);
    sp_loader_destroy(ld);
}

static const sp_case cases[] = {
    SP_CASE(test_threads_and_order),
    SP_CASE(test_epoch_covers_dataset),
    SP_CASE(test_world_slices),
    SP_CASE(test_fingerprint_and_errors),
    SP_CASE(test_on_error_policies),
    SP_CASE(test_info),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

/* test_order_block.c - the block:K order (docs/determinism.md section 6a,
 * sampler.h sp_block_perm_*, loader.h SP_ORDER_BLOCK).
 *
 * The order itself, on shard tables with empty shards, one shard, K = 1,
 * K >= S and a few hundred random layouts: a permutation of every epoch
 * (positions past the end are UINT64_MAX); the epoch is exactly ceil(S/K)
 * runs of consecutive positions (the blocks), each drawing from the K
 * shards of its places and no other, so every window of consecutive
 * positions inside a block touches at most K shards and a window of at
 * most the smallest block's size at most 2K; the shard at an epoch's first
 * place is uniform over the shards (8 shards, 4000 epochs, each within 20%
 * of its share); epochs and seeds give other orders; bad tables are
 * refused by name.
 * Through the loader, on 37 shapes written as shards of 7 (6 shards, the
 * last of 2): each epoch's batch indices are sp_block_perm_at()'s order of
 * the dataset's shard sizes; 1 and 3 threads, a pool of 2 and of 3 workers,
 * and a pool of 3 workers resumed from a 1-worker run's state give the same
 * digests; the ranks' slices of world 2 and 3 concatenated are the world-1
 * batch, bytes included; verify (workers 1 and 2, worlds 1, 2 and 3, a
 * crash, a resume, a service to 2 ranks) finds one stream; a split's
 * subset is permuted within its own shards; the fingerprint, state and
 * manifest name the order (block:2 vs block:3 vs global refused by name);
 * an ImageFolder, a mixture and K = 0 are refused by name.
 * Cases (tests/runner.h): test_perm_bijection, test_perm_blocks,
 * test_perm_uniform_first_shard, test_perm_refusals, test_loader_order,
 * test_loader_paths, test_loader_ranks, test_loader_verify,
 * test_loader_split, test_loader_state, test_loader_refusals.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/loader.h"
#include "seedpipe/manifest.h"
#include "seedpipe/shapes.h"
#include "seedpipe/state.h"
#include "seedpipe/stream.h"
#include "seedpipe/verify.h"
#include "loader_check.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */
#include "dataset/dataset_internal.h"
#include "loader/loader_internal.h"
#include "loader/sampler_internal.h"
#include "stream/verify_internal.h"

#define N 37
#define PER 7      /* samples a shard: shards of 7, 7, 7, 7, 7, 2 */
#define NSH 6
#define EPOCHS 2

static char g_tmp[256];
static char folder[320], shards[320];

static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3 saturation=0.3";

static int dig_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static sp_block_perm *make(const uint64_t *sizes, uint32_t ns, uint32_t k, uint64_t seed,
                           uint32_t epoch) {
    sp_block_perm *bp;
    sp_error err;
    CHECK_OK(sp_block_perm_create(sizes, ns, k, sp_rng_key(seed, SP_RNG_BLOCK), epoch, &bp,
                                  &err), &err);
    return bp;
}

/* The shard of sample i for the table `sizes`. */
static uint32_t shard_of(const uint64_t *sizes, uint32_t ns, uint64_t i) {
    uint32_t s = 0;
    while (s < ns && i >= sizes[s]) i -= sizes[s++];
    return s;
}

/* A deterministic little generator for the random tables (not the spec's). */
static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

/* Checks the order is a permutation; returns it (malloc'd). */
static uint64_t *whole(const sp_block_perm *bp) {
    uint64_t n = sp_block_perm_size(bp);
    uint64_t *o = malloc(n * sizeof *o);
    unsigned char *seen = calloc(n, 1);
    CHECK(o && seen);
    for (uint64_t p = 0; p < n; p++) {
        o[p] = sp_block_perm_at(bp, p);
        CHECK_MSG(o[p] < n && !seen[o[p]], "position %llu: %llu (n %llu)",
                  (unsigned long long)p, (unsigned long long)o[p], (unsigned long long)n);
        seen[o[p]] = 1;
    }
    CHECK(sp_block_perm_at(bp, n) == UINT64_MAX && sp_block_perm_at(bp, UINT64_MAX) == UINT64_MAX);
    free(seen);
    return o;
}

static void test_perm_bijection(void) {
    const struct { uint64_t sizes[8]; uint32_t ns, k; } t[] = {
        {{5}, 1, 1}, {{5}, 1, 3}, {{1, 1, 1, 1}, 4, 1}, {{3, 0, 4, 2, 5}, 5, 2},
        {{0, 0, 9, 0}, 4, 1}, {{10, 10, 10, 7}, 4, 1}, {{10, 10, 10, 7}, 4, 4},
        {{10, 10, 10, 7}, 4, 9}, {{100, 1, 100, 1, 100, 1, 100, 1}, 8, 3}};
    for (size_t c = 0; c < sizeof t / sizeof t[0]; c++)
        for (uint32_t e = 0; e < 3; e++) {
            sp_block_perm *bp = make(t[c].sizes, t[c].ns, t[c].k, 42 + c, e);
            CHECK(sp__block_perm_epoch(bp) == e);
            free(whole(bp));
            sp_block_perm_destroy(bp);
        }
    uint64_t x = 1, sizes[64];
    for (int r = 0; r < 300; r++) {   /* random layouts, zero-sized shards included */
        uint32_t ns = 1 + (uint32_t)(lcg(&x) % 40), k = 1 + (uint32_t)(lcg(&x) % 12);
        uint64_t n = 0;
        for (uint32_t s = 0; s < ns; s++) n += sizes[s] = lcg(&x) % 4 ? lcg(&x) % 30 : 0;
        if (n == 0) sizes[0] = n = 1;
        sp_block_perm *bp = make(sizes, ns, k, lcg(&x), (uint32_t)lcg(&x));
        CHECK(sp_block_perm_size(bp) == n);
        free(whole(bp));
        sp_block_perm_destroy(bp);
    }
    /* Other epochs and seeds: other orders; the same ones: the same order. */
    uint64_t s4[4] = {10, 10, 10, 7};
    sp_block_perm *a = make(s4, 4, 2, 7, 0), *b = make(s4, 4, 2, 7, 1), *c = make(s4, 4, 2, 8, 0),
                  *d = make(s4, 4, 2, 7, 0);
    uint64_t *oa = whole(a), *ob = whole(b), *oc = whole(c), *od = whole(d);
    CHECK(memcmp(oa, ob, 37 * 8) != 0 && memcmp(oa, oc, 37 * 8) != 0);
    CHECK(memcmp(oa, od, 37 * 8) == 0);
    free(oa), free(ob), free(oc), free(od);
    sp_block_perm_destroy(a), sp_block_perm_destroy(b), sp_block_perm_destroy(c);
    sp_block_perm_destroy(d);
}

/* The epoch is ceil(S/K) runs (all shards non-empty): scanning positions,
 * a run ends where a (K+1)-th distinct shard would join it; each run holds
 * every sample of its K shards; windows touch at most K (inside a run) or
 * 2K (at most the smallest run long) shards. */
static void check_blocks(const uint64_t *sizes, uint32_t ns, uint32_t k, uint64_t seed,
                         uint32_t epoch) {
    sp_block_perm *bp = make(sizes, ns, k, seed, epoch);
    uint64_t n = sp_block_perm_size(bp), *o = whole(bp);
    uint64_t *run_end = malloc((ns + 1) * sizeof *run_end);
    uint32_t *in = calloc(ns, sizeof *in), runs = 0, distinct = 0;
    CHECK(run_end && in);
    for (uint64_t p = 0; p < n; p++) {
        uint32_t s = shard_of(sizes, ns, o[p]);
        if (!in[s] && distinct == k) {   /* a new run: forget the last run's shards */
            run_end[runs++] = p;
            memset(in, 0, ns * sizeof *in);
            distinct = 0;
        }
        if (!in[s]) distinct++;
        in[s]++;
    }
    run_end[runs++] = n;
    uint32_t want = (ns + k - 1) / k;
    CHECK_MSG(runs == want, "S %u K %u: %u runs, want %u", ns, k, runs, want);
    uint64_t lo = 0, smallest = n;
    for (uint32_t r = 0; r < runs; r++) {
        uint64_t len = run_end[r] - lo, sum = 0;
        memset(in, 0, ns * sizeof *in);
        for (uint64_t p = lo; p < run_end[r]; p++) in[shard_of(sizes, ns, o[p])]++;
        uint32_t d = 0;
        for (uint32_t s = 0; s < ns; s++)
            if (in[s]) {
                d++;
                CHECK_MSG(in[s] == sizes[s], "run %u holds %u of shard %u's %llu samples", r,
                          in[s], s, (unsigned long long)sizes[s]);
                sum += sizes[s];
            }
        CHECK(d <= k && sum == len);
        if (r + 1 < runs) CHECK(d == k);
        if (len < smallest) smallest = len;
        lo = run_end[r];
    }
    for (uint64_t p = 0; p + smallest <= n; p++) {   /* every window of the smallest run's length */
        memset(in, 0, ns * sizeof *in);
        uint32_t d = 0;
        for (uint64_t q = p; q < p + smallest; q++) d += !in[shard_of(sizes, ns, o[q])]++;
        CHECK_MSG(d <= 2 * k, "window at %llu touches %u shards, K %u", (unsigned long long)p, d,
                  k);
    }
    free(in);
    free(run_end);
    free(o);
    sp_block_perm_destroy(bp);
}

static void test_perm_blocks(void) {
    uint64_t s4[4] = {10, 10, 10, 7}, s8[8] = {100, 1, 100, 1, 100, 1, 100, 1};
    for (uint32_t k = 1; k <= 5; k++) check_blocks(s4, 4, k, 3, k);
    for (uint32_t k = 1; k <= 8; k++) check_blocks(s8, 8, k, 9, 0);
    uint64_t x = 5, sizes[48];
    for (int r = 0; r < 60; r++) {
        uint32_t ns = 1 + (uint32_t)(lcg(&x) % 48), k = 1 + (uint32_t)(lcg(&x) % 6);
        for (uint32_t s = 0; s < ns; s++) sizes[s] = 1 + lcg(&x) % 20;
        check_blocks(sizes, ns, k, lcg(&x), (uint32_t)lcg(&x));
    }
}

/* Over 4000 epochs the first place's shard is each of 8 shards about 500
 * times (a broken shard permutation, e.g. the identity, fails). */
static void test_perm_uniform_first_shard(void) {
    uint64_t sizes[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    unsigned count[8] = {0};
    for (uint32_t e = 0; e < 4000; e++) {
        sp_block_perm *bp = make(sizes, 8, 2, 11, e);
        count[sp_block_perm_at(bp, 0) / 3]++;
        sp_block_perm_destroy(bp);
    }
    for (int s = 0; s < 8; s++) CHECK_MSG(count[s] >= 400 && count[s] <= 600, "shard %d: %u", s,
                                          count[s]);
}

static void test_perm_refusals(void) {
    uint64_t sizes[3] = {1, 2, 3}, zero[2] = {0, 0};
    sp_block_perm *bp = (sp_block_perm *)1;
    sp_error err;
    sp_key key = sp_rng_key(1, SP_RNG_BLOCK);
    CHECK(sp_block_perm_create(sizes, 3, 0, key, 0, &bp, &err) == SP_EINVAL && !bp);
    CHECK_MSG(strstr(err.msg, "K"), "%s", err.msg);
    CHECK(sp_block_perm_create(sizes, 0, 1, key, 0, &bp, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "no shards"), "%s", err.msg);
    CHECK(sp_block_perm_create(zero, 2, 1, key, 0, &bp, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "no sample"), "%s", err.msg);
    CHECK(sp_block_perm_at(NULL, 0) == UINT64_MAX);
    sp_block_perm_destroy(NULL);
    /* The names: global is the default's other name; K is checked. */
    sp_order o;
    uint32_t k;
    CHECK(sp_order_spec_parse("global", &o, &k, &err) == 0 && o == SP_ORDER_SHUFFLE && k == 0);
    CHECK(sp_order_spec_parse("shuffle", &o, &k, &err) == 0 && o == SP_ORDER_SHUFFLE);
    CHECK(sp_order_spec_parse("sequential", &o, &k, &err) == 0 && o == SP_ORDER_SEQUENTIAL);
    CHECK(sp_order_spec_parse("block:4", &o, &k, &err) == 0 && o == SP_ORDER_BLOCK && k == 4);
    CHECK(sp_order_spec_parse("block:4294967295", &o, &k, &err) == 0 && k == 4294967295u);
    const char *bad[] = {"block:0", "block:", "block:x", "block:-1", "block:04", "block: 4",
                         "block:4294967296", "block", "blocks:2", "", "random"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(sp_order_spec_parse(bad[i], &o, &k, &err) == SP_EINVAL, "%s", bad[i]);
        CHECK_MSG(strstr(err.msg, "order \"") && strstr(err.msg, bad[i]), "%s", err.msg);
    }
    char buf[32];
    CHECK(sp_order_spec_format(SP_ORDER_BLOCK, 12, buf, sizeof buf) == 8 &&
          !strcmp(buf, "block:12"));
    CHECK(sp_order_spec_format(SP_ORDER_SHUFFLE, 0, buf, sizeof buf) == 7 &&
          !strcmp(buf, "shuffle"));
}

/* ---- through the loader ---------------------------------------------------------- */

static sp_loader_config config(uint32_t k, uint32_t rank, uint32_t world) {
    sp_loader_config c;
    sp_loader_config_default(&c);
    c.dataset = shards;
    c.pipeline = PIPE;
    c.seed = 77;
    c.batch_size = 6;
    c.order = k ? SP_ORDER_BLOCK : SP_ORDER_SHUFFLE;
    c.block_shards = k;
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

static void test_loader_order(void) {
    uint64_t sizes[NSH] = {PER, PER, PER, PER, PER, N - 5 * PER};
    for (uint32_t k = 1; k <= 4; k++) {
        sp_loader_config c = config(k, 0, 1);
        sp_loader *ld = create(&c);
        CHECK(sp__dataset_shard_count(ld_info(ld).dataset) == NSH);
        sp_batch b;
        sp_error err;
        CHECK(sp_batch_alloc(ld, &b) == 0);
        for (uint32_t e = 0; e < 3; e++) {
            sp_block_perm *bp = make(sizes, NSH, k, 77, e);
            uint64_t p = 0;
            for (uint64_t i = 0; i < ld_info(ld).batches_per_epoch; i++) {
                CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
                for (uint32_t s = 0; s < b.count; s++, p++)
                    CHECK_MSG(b.indices[s] == sp_block_perm_at(bp, p), "K %u epoch %u pos %llu",
                              k, e, (unsigned long long)p);
            }
            CHECK(p == N);
            sp_block_perm_destroy(bp);
        }
        sp_batch_free(&b);
        sp_loader_destroy(ld);
    }
}

/* The stream of c through `kind` (workers for a pool; resume may be NULL). */
static size_t stream_digests(const sp_loader_config *c, sp_stream_kind kind, int workers,
                             const sp_loader_state *resume, sp_digest *out,
                             sp_loader_state *after3) {
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = kind;
    sc.workers = workers;
    sc.epochs = EPOCHS;
    sc.resume = resume;
    sp_stream *s;
    sp_error err;
    CHECK_OK(sp_stream_open(c, &sc, &s, &err), &err);
    sp_batch v;
    size_t k = 0;
    int rc;
    while ((rc = sp_stream_next(s, &v, &err)) == 0) {
        out[k++] = sp_stream_batch_digest(s, &v);
        CHECK_OK(sp_stream_release(s, &v, &err), &err);
        if (k == 3 && after3) sp_stream_state(s, after3);
    }
    CHECK_MSG(rc == SP_END, "rc %d: %s", rc, err.msg);
    sp_stream_close(s);
    return k;
}

static void test_loader_paths(void) {
    sp_loader_config c = config(2, 0, 1);
    sp_digest ref[32], d[32];
    sp_loader_state st;
    size_t n = stream_digests(&c, SP_STREAM_LOADER, 0, NULL, ref, &st);
    CHECK(n == EPOCHS * 7);
    c.threads = 3;
    CHECK(stream_digests(&c, SP_STREAM_LOADER, 0, NULL, d, NULL) == n);
    for (size_t i = 0; i < n; i++) CHECK_MSG(dig_eq(ref[i], d[i]), "3 threads, batch %zu", i);
    c.threads = 1;
    for (int w = 2; w <= 3; w++) {
        CHECK(stream_digests(&c, SP_STREAM_POOL, w, NULL, d, NULL) == n);
        for (size_t i = 0; i < n; i++) CHECK_MSG(dig_eq(ref[i], d[i]), "%d workers, batch %zu", w, i);
    }
    /* Resumed after 3 batches of the in-process run, on a pool of 3. */
    CHECK(st.epoch == 0 && st.batch == 3 && st.order == SP_ORDER_BLOCK && st.block_shards == 2);
    CHECK(stream_digests(&c, SP_STREAM_POOL, 3, &st, d, NULL) == n - 3);
    for (size_t i = 0; i + 3 < n; i++) CHECK_MSG(dig_eq(ref[i + 3], d[i]), "resumed, batch %zu", i);
    /* And it differs from the global order's stream. */
    sp_loader_config g = config(0, 0, 1);
    CHECK(stream_digests(&g, SP_STREAM_LOADER, 0, NULL, d, NULL) == n);
    CHECK(!dig_eq(ref[0], d[0]));
}

/* World 2 and 3 (B = 6): the ranks' slices, concatenated, are the world-1
 * batch: indices, labels and bytes. */
static void test_loader_ranks(void) {
    sp_loader_config c1 = config(2, 0, 1);
    sp_loader *one = create(&c1);
    sp_batch g;
    sp_error err;
    CHECK(sp_batch_alloc(one, &g) == 0);
    size_t sb = ld_info(one).sample_bytes;
    for (uint32_t world = 2; world <= 3; world++) {
        sp_loader *r[3];
        sp_batch b[3];
        for (uint32_t k = 0; k < world; k++) {
            sp_loader_config c = config(2, k, world);
            r[k] = create(&c);
            CHECK(sp_batch_alloc(r[k], &b[k]) == 0);
            CHECK(dig_eq(ld_info(r[k]).fingerprint, ld_info(one).fingerprint));
        }
        for (uint32_t e = 0; e < EPOCHS; e++)
            for (uint64_t i = 0; i < ld_info(one).batches_per_epoch; i++) {
                CHECK_OK(sp_loader_batch(one, e, i, &g, &err), &err);
                uint32_t at = 0;
                for (uint32_t k = 0; k < world; k++) {
                    CHECK_OK(sp_loader_batch(r[k], e, i, &b[k], &err), &err);
                    CHECK(at + b[k].count <= g.count);
                    CHECK(!memcmp(b[k].indices, g.indices + at, b[k].count * 8));
                    CHECK(!memcmp(b[k].images, g.images + at * sb, b[k].count * sb));
                    at += b[k].count;
                }
                CHECK_MSG(at == g.count, "world %u epoch %u batch %llu", world, e,
                          (unsigned long long)i);
            }
        for (uint32_t k = 0; k < world; k++) {
            sp_batch_free(&b[k]);
            sp_loader_destroy(r[k]);
        }
    }
    sp_batch_free(&g);
    sp_loader_destroy(one);
}

/* verify's table: worker counts, a crash, a resume, a service to 1 client
 * and to 2 ranks, worlds 1-3 from in-process loaders and two services. */
static void test_loader_verify(void) {
    int ws[] = {1, 2}, ks[] = {1, 2, 3};
    sp_verify_config vc;
    memset(&vc, 0, sizeof vc);
    vc.workers = ws;
    vc.nworkers = 2;
    vc.worlds = ks;
    vc.nworlds = 3;
    vc.epochs = 2;
    sp_verify_report *r;
    sp_error err;
    sp_loader_config c = config(3, 0, 1);
    CHECK_OK(sp_verify_run(&c, &vc, &r, &err), &err);
    CHECK_MSG(sp_verify_ok(r), "%s", sp__verify_summary(r));
    CHECK_MSG(!strstr(sp__verify_skipped(r), "2 clients"), "%s", sp__verify_skipped(r));
    sp_verify_free(r);
}

/* A split's subset: each shard keeps its members of the subset; an epoch
 * is a permutation of the subset, in ceil(S'/K) runs of K shards. */
static void test_loader_split(void) {
    sp_loader_config c = config(2, 0, 1);
    c.split = "a=0.6,b=0.4";
    c.subset = "a";
    c.batch_size = 4;
    sp_loader *ld = create(&c);
    uint64_t m = ld_info(ld).size;
    CHECK(m > 0 && m < N);
    const sp_dataset *ds = ld_info(ld).dataset;
    uint64_t sizes[NSH] = {0};
    for (uint64_t j = 0; j < m; j++)
        sizes[sp_dataset_shard_of(ds, sp__loader_sample_index(ld, j))]++;
    sp_block_perm *bp = make(sizes, NSH, 2, 77, 1);
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    uint64_t p = 0;
    for (uint64_t i = 0; i < ld_info(ld).batches_per_epoch; i++) {
        CHECK_OK(sp_loader_batch(ld, 1, i, &b, &err), &err);
        for (uint32_t s = 0; s < b.count; s++, p++)
            CHECK(b.indices[s] == sp__loader_sample_index(ld, sp_block_perm_at(bp, p)));
    }
    CHECK(p == m);
    sp_block_perm_destroy(bp);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

static void test_loader_state(void) {
    sp_loader_config c2 = config(2, 0, 1), c3 = config(3, 0, 1), g = config(0, 0, 1);
    sp_loader *l2 = create(&c2), *l3 = create(&c3), *lg = create(&g);
    CHECK(!dig_eq(ld_info(l2).fingerprint, ld_info(l3).fingerprint));
    CHECK(!dig_eq(ld_info(l2).fingerprint, ld_info(lg).fingerprint));
    sp_loader_state st, back;
    sp_error err;
    char text[1024];
    sp_loader_state_at(l2, 1, 2, &st);
    CHECK(sp_loader_state_format(&st, text, sizeof text) > 0);
    CHECK_MSG(strstr(text, "\"order\":\"block:2\""), "%s", text);
    CHECK_OK(sp_loader_state_parse(text, strlen(text), &back, &err), &err);
    CHECK(back.order == SP_ORDER_BLOCK && back.block_shards == 2 && back.epoch == 1);
    CHECK_OK(sp_loader_state_check(l2, &back, &err), &err);
    CHECK(sp_loader_state_check(l3, &back, &err) == SP_EMISMATCH);
    CHECK_MSG(strstr(err.msg, "order block:2 in the state, block:3 here"), "%s", err.msg);
    CHECK(sp_loader_state_check(lg, &back, &err) == SP_EMISMATCH);
    CHECK_MSG(strstr(err.msg, "order block:2 in the state, shuffle here"), "%s", err.msg);
    char *w = strstr(text, "block:2");
    memcpy(w, "block:0", 7);
    CHECK(sp_loader_state_parse(text, strlen(text), &back, &err) == SP_EFORMAT);
    CHECK_MSG(strstr(err.msg, "\"order\""), "%s", err.msg);
    /* The manifest's header names it; two orders' manifests differ by it. */
    char mpath[2][400];
    for (int i = 0; i < 2; i++) {
        snprintf(mpath[i], sizeof mpath[i], "%s/m%d.jsonl", g_tmp, i);
        FILE *f = fopen(mpath[i], "w");
        CHECK(f && sp_manifest_write_header(f, i ? l3 : l2, 1, &err) == 0);
        fclose(f);
    }
    sp_manifest *ma, *mb;
    CHECK_OK(sp_manifest_read(mpath[0], &ma, &err), &err);
    CHECK_OK(sp_manifest_read(mpath[1], &mb, &err), &err);
    CHECK(!strcmp(ma->order, "block:2") && !strcmp(mb->order, "block:3"));
    sp_manifest_divergence d;
    sp_manifest_compare(ma, mb, &d);
    CHECK_MSG(!d.equal && strstr(d.header, "order"), "%s", d.header);
    sp_manifest_free(ma);
    sp_manifest_free(mb);
    sp_loader_destroy(l2);
    sp_loader_destroy(l3);
    sp_loader_destroy(lg);
}

static void test_loader_refusals(void) {
    sp_loader_config c = config(2, 0, 1);
    sp_loader *ld = NULL;
    sp_error err;
    c.dataset = folder;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL && !ld);
    CHECK_MSG(strstr(err.msg, "block:2") && strstr(err.msg, "imagefolder") &&
              strstr(err.msg, "no shards"), "%s", err.msg);
    char mix[400];
    snprintf(mix, sizeof mix, "%s/two.mix", g_tmp);
    FILE *f = fopen(mix, "w");
    CHECK(f);
    fprintf(f, "1\t%s\n1\t%s\n", shards, folder);
    fclose(f);
    c.dataset = mix;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "mixture"), "%s", err.msg);
    c = config(2, 0, 1);
    c.block_shards = 0;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "block:0") && strstr(err.msg, "at least 1"), "%s", err.msg);
    c.order = (sp_order)3;
    CHECK(sp_loader_create(&c, &ld, &err) == SP_EINVAL && strstr(err.msg, "order"));
    /* K is ignored by the other orders (and not hashed there). */
    sp_loader_config a = config(0, 0, 1), b = config(0, 0, 1);
    b.block_shards = 5;
    sp_loader *la = create(&a), *lb = create(&b);
    CHECK(dig_eq(ld_info(la).fingerprint, ld_info(lb).fingerprint));
    CHECK(ld_info(lb).config->block_shards == 0);
    sp_loader_destroy(la);
    sp_loader_destroy(lb);
}

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-block-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(folder, sizeof folder, "%s/data", g_tmp);
    snprintf(shards, sizeof shards, "%s/shards", g_tmp);
    sp_shapes_opts o = {N, 32, 5};
    sp_error err;
    CHECK_OK(sp_shapes_make(folder, &o, &err), &err);
    sp_dataset *ds;
    uint64_t made;
    CHECK_OK(sp_dataset_open(folder, NULL, &ds, &err), &err);
    CHECK_OK(sp__dataset_write_shards(ds, shards, PER, &made, &err), &err);
    CHECK(made == NSH);
    sp_dataset_close(ds);
}

static void teardown(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_perm_bijection),
    SP_CASE(test_perm_blocks),
    SP_CASE(test_perm_uniform_first_shard),
    SP_CASE(test_perm_refusals),
    SP_CASE(test_loader_order),
    SP_CASE(test_loader_paths),
    SP_CASE(test_loader_ranks),
    SP_CASE(test_loader_verify),
    SP_CASE(test_loader_split),
    SP_CASE(test_loader_state),
    SP_CASE(test_loader_refusals),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

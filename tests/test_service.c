/* test_service.c - the service and its C client keep the determinism contract
 * and survive crashes, stale and hostile regions.
 *
 * On a small shapes dataset, two epochs, batch 8 (regions named
 * .sp-test-svc-<pid>-<n>):
 *  - one client: every batch digest equals the in-process loader's; the
 *    loader state after k batches is sp_loader_state_at(k); at most R views
 *    are held; out-of-order release works; a second release of a view and
 *    a forged view are refused; rank >= world and a wrong expected
 *    fingerprint are refused;
 *  - 2 clients as ranks: each rank equals an in-process loader with rank r,
 *    world 2, and the concatenated slices equal the global batch; also with
 *    a corrupt file under on-error skip (the service compacts per slice);
 *  - rank spans: a loader computing ranks A..A+m-1 of world 4 (aligned and
 *    not) gives, batch by batch, the per-rank loaders' batches concatenated
 *    (bytes, labels, indices, skipped and substituted samples); a span past
 *    the world is refused;
 *  - one service per node: two services of world 4 (ranks 0-1 + 2-3, and
 *    0 + 1-3, where 1-3 is a span), 4 clients with their global ranks: each
 *    rank's batches equal the in-process loader's with rank r, world 4,
 *    exactly (also the skipped / substituted samples, under on-error skip
 *    and substitute with a corrupt file); a rank another service serves is
 *    refused, naming the range; status shows the range; each service's
 *    workers computed exactly its ranks' positions; under on-error fail the
 *    service whose ranks meet the corrupt file fails for its ranks only,
 *    after the batches before it, and the other service serves its ranks to
 *    the end;
 *  - hostile regions written under /dev/shm with the right name (missing,
 *    empty, truncated, garbage, wrong magic, wrong version, huge sizes and
 *    offsets, a bad start state, a fingerprint that disagrees, mode 0644, a
 *    dead owner, nobody answering, another uid (as root), and 300 random
 *    header corruptions):
 *    attach and status give an error (or, rarely, attach), never a crash;
 *  - a live name is refused; after SIGKILL of a service its region stays,
 *    is reported stale, and the next create removes it with a note; a
 *    crafted stale region too; a foreign file with the name is refused;
 *  - a client SIGKILLed while holding batches: the other rank goes on to
 *    the end, the service counts the death, and a client re-attaching as
 *    that rank continues with correct batches;
 *  - SIGTERM: the service exits 0, its region is unlinked, its workers are
 *    gone, and a client waiting for more sees an error, not a hang;
 *  - after every case: no child process left, no region of ours in /dev/shm.
 * Cases (tests/runner.h), one per part above, each in its own process:
 * test_one_client; test_ranks_clean, _corrupt_skip; test_span_loader_clean,
 * _corrupt_skip, _corrupt_substitute; test_node_services_clean (ranks
 * 0-1 + 2-3), _corrupt_skip, _corrupt_substitute (0 + 1-3), _corrupt_fail
 * (0-1 + 2-3), _corrupt_fail_split1 (0 + 1-3); test_hostile;
 * test_stale_and_live; test_dead_client; test_sigterm. setup makes the clean
 * and the corrupt dataset once, in fresh temp dirs; no case changes them;
 * a case's regions are named .sp-test-svc-<runner pid>-<case pid>-<n>.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "service_join.h"
#include "pool/ring_internal.h"
#include "seedpipe/client.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "seedpipe/state.h"
#include "loader_check.h"
#include "service/client_internal.h"
#include "service/service_internal.h"

#define EPOCHS 2
#define MAXB 64

static char shapes[256], shapes_bad[256];
static char prefix[64];   /* .sp-test-svc-<runner pid> */
static int name_no;
static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3";

/* The names of this process's (this case's) regions start so. */
static const char *case_prefix(void) {
    static char buf[96];
    snprintf(buf, sizeof buf, "%s-%d-", prefix, (int)getpid());
    return buf;
}

static const char *new_name(void) {
    static char buf[128];
    snprintf(buf, sizeof buf, "%s%d", case_prefix(), name_no++);
    return buf;
}

static int ours_in_shm(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    const char *p = case_prefix();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strncmp(e->d_name, p, strlen(p)) == 0;
    closedir(d);
    return n;
}

static void check_no_leaks(void) {
    errno = 0;
    CHECK_MSG(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "a child process was left");
    CHECK_MSG(ours_in_shm() == 0, "a region was left in /dev/shm");
}

static int region_exists(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "/dev/shm/%s", name);
    return access(p, F_OK) == 0;
}

static void cfg_of(sp_loader_config *c, const char *ds, uint32_t rank, uint32_t world) {
    sp_loader_config_default(c);
    c->dataset = ds;
    c->pipeline = PIPE;
    c->seed = 21;
    c->batch_size = 8;
    c->rank = rank;
    c->world = world;
}

typedef struct ref {
    int n;
    sp_digest d[MAXB];
} ref;

static void run_ref(const sp_loader_config *c, ref *r) {
    memset(r, 0, sizeof *r);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(c, &ld, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < nb; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            CHECK(r->n < MAXB);
            r->d[r->n++] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

static int same_digest(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static pid_t fork_service(const sp_loader_config *c, const char *name, uint32_t world,
                          int workers, int ring) {
    sp_service_config sc = {name, world, workers, ring, EPOCHS, NULL, NULL, NULL, 0, 0, NULL};
    pid_t pid;
    sp_error err;
    CHECK_OK(sp__service_fork(c, &sc, &pid, &err), &err);
    CHECK(region_exists(name));
    return pid;
}

/* ---- one client ---------------------------------------------------------------------- */

static void test_one_client(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    ref r;
    run_ref(&c, &r);
    const char *name = new_name();
    pid_t pid = fork_service(&c, name, 1, 2, 3);
    sp_error err;
    sp_client *cl;
    CHECK(sp__client_attach(name, 1, &cl, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "world 1") != NULL, "%s", err.msg);
    sp_digest wrong = {1, 2};
    sp_client_opts o = {0, &wrong, 0};
    CHECK(sp__client_attach_opts(name, 0, &o, &cl, &err) == SP_EMISMATCH);
    CHECK_OK(sp__client_attach(name, 0, &cl, &err), &err);
    sp_client *cl2;
    CHECK(sp__client_attach(name, 0, &cl2, &err) == SP_EIO);   /* rank taken */
    CHECK_MSG(strstr(err.msg, "attached by pid") != NULL, "%s", err.msg);
    sp_client_info info;
    sp_client_info_get(cl, &info);
    CHECK(info.world == 1 && info.ring_slots == 3 && info.total == (uint64_t)r.n);

    sp_batch v[3], extra;
    int n = 0;
    /* Hold R = 3, a 4th is refused; release out of order; double release refused. */
    for (int k = 0; k < 3; k++) {
        CHECK_OK(sp__client_next(cl, &v[k], &err), &err);
        CHECK(same_digest(sp__client_batch_digest(cl, &v[k]), r.d[n]));
        CHECK(v[k].epoch == 0 && v[k].index == (uint64_t)k);
        n++;
    }
    CHECK(sp__client_next(cl, &extra, &err) == SP_EINVAL);
    sp_batch copy = v[1];
    CHECK_OK(sp__client_release(cl, &v[1], &err), &err);
    CHECK(v[1].images == NULL);
    CHECK(sp__client_release(cl, &v[1], &err) == SP_EINVAL);
    CHECK(sp__client_release(cl, &copy, &err) == SP_EINVAL);   /* a copy, released twice */
    CHECK_MSG(strstr(err.msg, "not held") != NULL, "%s", err.msg);
    sp_batch forged = v[0];
    forged.images += 1;
    CHECK(sp__client_release(cl, &forged, &err) == SP_EINVAL);
    CHECK_OK(sp__client_release(cl, &v[2], &err), &err);
    CHECK_OK(sp__client_release(cl, &v[0], &err), &err);
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (;;) {
        sp_batch b;
        int rc = sp__client_next(cl, &b, &err);
        if (rc == SP_END) break;
        CHECK_OK(rc, &err);
        CHECK(n < r.n);
        CHECK_MSG(same_digest(sp__client_batch_digest(cl, &b), r.d[n]), "batch %d differs", n);
        CHECK(b.epoch == (uint32_t)(n / (int)nb) && b.index == (uint64_t)n % nb);
        n++;
        if (n == 7) {   /* the state names the next batch */
            sp_loader_state st, want;
            sp_client_state(cl, &st);
            sp_loader_state_at(ld, 0, 7, &want);
            CHECK(memcmp(&st, &want, sizeof st) == 0);
            CHECK_OK(sp_loader_state_check(ld, &st, &err), &err);
        }
        CHECK_OK(sp__client_release(cl, &b, &err), &err);
    }
    CHECK(n == r.n);
    sp_batch b;
    CHECK(sp__client_next(cl, &b, &err) == SP_END);
    sp_loader_state st, want;
    sp_client_state(cl, &st);
    sp_loader_state_at(ld, EPOCHS, 0, &want);
    CHECK(st.epoch == want.epoch && st.batch == 0);
    sp_loader_destroy(ld);
    sp__client_detach(cl);
    CHECK(join_status(pid, 10000) == 0);
    CHECK(!region_exists(name));
    check_no_leaks();
    printf("  one client: %d batches equal\n", n);
}

/* ---- ranks ------------------------------------------------------------------------------ */

static void test_ranks(const char *ds, sp_on_error on_error, const char *what) {
    sp_loader_config c;
    cfg_of(&c, ds, 0, 1);
    c.on_error = on_error;
    ref g, rk[2];
    run_ref(&c, &g);
    for (uint32_t k = 0; k < 2; k++) {
        sp_loader_config ck = c;
        ck.rank = k;
        ck.world = 2;
        run_ref(&ck, &rk[k]);
    }
    const char *name = new_name();
    pid_t pid = fork_service(&c, name, 2, 3, 0);
    sp_client *cl[2];
    sp_error err;
    for (uint32_t k = 0; k < 2; k++) CHECK_OK(sp__client_attach(name, k, &cl[k], &err), &err);
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    sp_batch cat;
    CHECK(sp_batch_alloc(ld, &cat) == 0);
    size_t sb = ld_info(ld).sample_bytes;
    int n = 0, skipped = 0;
    for (;;) {
        sp_batch v[2];
        int rc0 = sp__client_next(cl[0], &v[0], &err);
        if (rc0 == SP_END) {
            CHECK(sp__client_next(cl[1], &v[1], &err) == SP_END);
            break;
        }
        CHECK_OK(rc0, &err);
        CHECK_OK(sp__client_next(cl[1], &v[1], &err), &err);
        cat.count = 0;
        for (int k = 0; k < 2; k++) {
            CHECK_MSG(same_digest(sp__client_batch_digest(cl[k], &v[k]), rk[k].d[n]),
                      "%s: rank %d batch %d differs", what, k, n);
            memcpy(cat.images + cat.count * sb, v[k].images, v[k].count * sb);
            memcpy(cat.indices + cat.count, v[k].indices, v[k].count * sizeof(uint64_t));
            memcpy(cat.labels + cat.count, v[k].labels, v[k].count * sizeof(int32_t));
            cat.count += v[k].count;
            skipped += (int)v[k].nskipped;
        }
        CHECK_MSG(same_digest(sp_batch_digest(ld, &cat), g.d[n]), "%s: batch %d concatenated",
                  what, n);
        n++;
        for (int k = 1; k >= 0; k--) CHECK_OK(sp__client_release(cl[k], &v[k], &err), &err);
    }
    CHECK(n == g.n);
    CHECK(on_error != SP_ON_ERROR_SKIP || skipped == EPOCHS);
    sp_batch_free(&cat);
    sp_loader_destroy(ld);
    for (int k = 0; k < 2; k++) sp__client_detach(cl[k]);
    CHECK(join_status(pid, 10000) == 0);
    check_no_leaks();
    printf("  2 ranks (%s): %d batches, slices and concatenation equal\n", what, n);
}

/* ---- rank spans: one service per node ---------------------------------------------------- */

#define K4 4

/* a == b: count, images, labels, indices, skipped, substituted. */
static int same_batch(const sp_batch *a, const sp_batch *b, size_t sb) {
    return a->count == b->count && a->nskipped == b->nskipped &&
           a->nsubstituted == b->nsubstituted &&
           memcmp(a->images, b->images, (size_t)a->count * sb) == 0 &&
           memcmp(a->labels, b->labels, a->count * sizeof(int32_t)) == 0 &&
           memcmp(a->indices, b->indices, a->count * sizeof(uint64_t)) == 0 &&
           memcmp(a->skipped, b->skipped, a->nskipped * sizeof(uint64_t)) == 0 &&
           memcmp(a->substituted, b->substituted, 2 * a->nsubstituted * sizeof(uint64_t)) == 0;
}

static void open_rank_loaders(const sp_loader_config *c, sp_loader **ld, sp_batch *b) {
    sp_error err;
    for (uint32_t k = 0; k < K4; k++) {
        sp_loader_config ck = *c;
        ck.rank = k;
        ck.world = K4;
        CHECK_OK(sp_loader_create(&ck, &ld[k], &err), &err);
        CHECK(sp_batch_alloc(ld[k], &b[k]) == 0);
    }
}

static void close_rank_loaders(sp_loader **ld, sp_batch *b) {
    for (uint32_t k = 0; k < K4; k++) {
        sp_batch_free(&b[k]);
        sp_loader_destroy(ld[k]);
    }
}

static void test_span_loader(const char *ds, sp_on_error on_error, const char *what) {
    sp_loader_config c;
    cfg_of(&c, ds, 0, 1);
    c.on_error = on_error;
    sp_loader *rk[K4];
    sp_batch rb[K4];
    open_rank_loaders(&c, rk, rb);
    size_t sb = ld_info(rk[0]).sample_bytes;
    uint64_t nb = ld_info(rk[0]).batches_per_epoch;
    static const uint32_t spans[][2] = {{0, 2}, {2, 2}, {1, 2}, {1, 3}, {0, 4}, {3, 1}, {0, 3}};
    int batches = 0, listed = 0;
    sp_error err;
    for (size_t t = 0; t < sizeof spans / sizeof spans[0]; t++) {
        uint32_t A = spans[t][0], m = spans[t][1];
        sp_loader_config cs = c;
        cs.rank = A;
        cs.world = K4;
        sp_loader *ld;
        CHECK_OK(sp_loader_create(&cs, &ld, &err), &err);
        CHECK(sp__loader_set_span(ld, 0, &err) == SP_EINVAL);
        CHECK(sp__loader_set_span(ld, K4 - A + 1, &err) == SP_EINVAL);
        CHECK_MSG(strstr(err.msg, "does not fit in world 4") != NULL, "%s", err.msg);
        CHECK_OK(sp__loader_set_span(ld, m, &err), &err);
        sp_batch b, cat;
        CHECK(sp_batch_alloc(ld, &b) == 0 && b.capacity == m * 2);
        CHECK(sp_batch_alloc(ld, &cat) == 0);
        for (uint32_t e = 0; e < EPOCHS; e++)
            for (uint64_t i = 0; i < nb; i++) {
                CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
                cat.count = cat.nskipped = cat.nsubstituted = 0;
                for (uint32_t k = A; k < A + m; k++) {   /* the ranks' batches, in rank order */
                    const sp_batch *v = &rb[k];
                    CHECK_OK(sp_loader_batch(rk[k], e, i, &rb[k], &err), &err);
                    memcpy(cat.images + cat.count * sb, v->images, v->count * sb);
                    memcpy(cat.labels + cat.count, v->labels, v->count * sizeof(int32_t));
                    memcpy(cat.indices + cat.count, v->indices, v->count * sizeof(uint64_t));
                    memcpy(cat.skipped + cat.nskipped, v->skipped, v->nskipped * 8);
                    memcpy(cat.substituted + 2 * cat.nsubstituted, v->substituted,
                           v->nsubstituted * 16);
                    cat.count += v->count;
                    cat.nskipped += v->nskipped;
                    cat.nsubstituted += v->nsubstituted;
                }
                CHECK_MSG(same_batch(&b, &cat, sb), "%s: ranks %u+%u, epoch %u batch %llu", what,
                          A, m, e, (unsigned long long)i);
                listed += (int)(b.nskipped + b.nsubstituted);
                batches++;
            }
        sp_batch_free(&b);
        sp_batch_free(&cat);
        sp_loader_destroy(ld);
    }
    close_rank_loaders(rk, rb);
    CHECK(on_error == SP_ON_ERROR_FAIL || listed > 0);
    printf("  span loader (%s): %d batches of 7 spans equal to their ranks' concatenated "
           "(%d skipped/substituted)\n", what, batches, listed);
}

/* Two services of world 4 serving ranks [0, split) and [split, 4). */
static void test_node_services(const char *ds, sp_on_error on_error, uint32_t split,
                               const char *what) {
    sp_loader_config c;
    cfg_of(&c, ds, 0, 1);
    c.on_error = on_error;
    sp_loader *rk[K4];
    sp_batch rb[K4];
    open_rank_loaders(&c, rk, rb);
    size_t sb = ld_info(rk[0]).sample_bytes;
    uint64_t nb = ld_info(rk[0]).batches_per_epoch;
    /* Per rank: the first batch its in-process loader fails on (on-error
     * fail), and the positions it computes; a service fails at its ranks'
     * first failure. */
    int64_t fails[K4], svc_fail[2] = {-1, -1};
    uint64_t positions[2] = {0, 0};
    sp_error err;
    for (uint32_t k = 0; k < K4; k++) {
        fails[k] = -1;
        for (uint64_t q = 0; q < EPOCHS * nb && fails[k] < 0; q++) {
            int rc = sp_loader_batch(rk[k], (uint32_t)(q / nb), q % nb, &rb[k], &err);
            if (rc != 0) fails[k] = (int64_t)q;
            else positions[k >= split] += rb[k].count + rb[k].nskipped;
        }
        int s = k >= split;
        if (fails[k] >= 0 && (svc_fail[s] < 0 || fails[k] < svc_fail[s])) svc_fail[s] = fails[k];
    }
    const char *names[2];
    char nbuf[2][128];
    pid_t pid[2];
    for (int s = 0; s < 2; s++) {
        snprintf(nbuf[s], sizeof nbuf[s], "%s", new_name());
        names[s] = nbuf[s];
        uint32_t first = s ? split : 0, count = s ? K4 - split : split;
        sp_service_config sc = {names[s], K4, 2, 3, EPOCHS, NULL, NULL, NULL, first, count,
                                NULL};
        CHECK_OK(sp__service_fork(&c, &sc, &pid[s], &err), &err);
    }
    sp_client *cl[K4];
    /* A rank of the other service is refused, naming the range served. */
    CHECK(sp__client_attach(names[1], 0, &cl[0], &err) == SP_EINVAL);
    char want[160];
    snprintf(want, sizeof want, "serves ranks %u-%u of world 4; rank 0 is served by another "
             "node's service", split, K4 - 1);
    CHECK_MSG(strstr(err.msg, want) != NULL && strstr(err.msg, names[1]) != NULL, "%s", err.msg);
    CHECK(sp__client_attach(names[0], split, &cl[0], &err) == SP_EINVAL);
    CHECK(sp__client_attach(names[0], K4, &cl[0], &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "world 4") != NULL, "%s", err.msg);
    for (uint32_t k = 0; k < K4; k++)
        CHECK_OK(sp__client_attach(names[k >= split], k, &cl[k], &err), &err);
    for (int s = 0; s < 2; s++) {
        sp_service_status st;
        CHECK_OK(sp_service_status_read(names[s], &st, &err), &err);
        CHECK(st.world == K4 && st.rank_first == (s ? split : 0) &&
              st.nranks == (s ? K4 - split : split));
        sp_client_info info;
        sp_client_info_get(cl[s ? split : 0], &info);
        CHECK(info.world == K4 && info.rank == (s ? split : 0) && info.batch_size == 8);
    }
    int n[K4] = {0}, gone[K4] = {0};
    for (uint64_t q = 0; q <= EPOCHS * nb; q++)
        for (uint32_t k = 0; k < K4; k++) {
            int s = k >= split;
            if (gone[k]) continue;   /* got its stream's error */
            sp_batch v;
            int rc = sp__client_next(cl[k], &v, &err);
            if (q == EPOCHS * nb) {
                CHECK_MSG(rc == SP_END, "%s: rank %u rc %d", what, k, rc);
                continue;
            }
            if (svc_fail[s] >= 0 && q == (uint64_t)svc_fail[s]) {
                CHECK_MSG(rc != 0 && rc != SP_END && strstr(err.msg, "zz-bad.png"),
                          "%s: rank %u at batch %llu: rc %d %s", what, k, (unsigned long long)q,
                          rc, err.msg);
                gone[k] = 1;
                continue;
            }
            CHECK_OK(rc, &err);
            CHECK(v.epoch == q / nb && v.index == q % nb);
            CHECK_OK(sp_loader_batch(rk[k], v.epoch, v.index, &rb[k], &err), &err);
            CHECK_MSG(same_batch(&v, &rb[k], sb), "%s: rank %u batch %llu differs", what, k,
                      (unsigned long long)q);
            CHECK(same_digest(sp__client_batch_digest(cl[k], &v), sp_batch_digest(rk[k], &rb[k])));
            n[k]++;
            if (q + 1 == EPOCHS * nb && k + 1 == (s ? K4 : split) && svc_fail[s] < 0) {
                /* The service's last batch, held by its last rank: all is
                 * computed, and its workers did its ranks' positions, no
                 * other (it ends once this is released). */
                sp_service_status st;
                CHECK_OK(sp_service_status_read(names[s], &st, &err), &err);
                uint64_t done = 0;
                for (uint32_t w = 0; w < st.nworkers; w++) done += st.workers[w].samples;
                CHECK_MSG(done == positions[s], "%s: service %d computed %llu positions, its "
                          "ranks have %llu", what, s, (unsigned long long)done,
                          (unsigned long long)positions[s]);
            }
            CHECK_OK(sp__client_release(cl[k], &v, &err), &err);
        }
    for (uint32_t k = 0; k < K4; k++) sp__client_detach(cl[k]);
    for (int s = 0; s < 2; s++) {
        int status = join_status(pid[s], 10000);
        CHECK_MSG(status == (svc_fail[s] >= 0 ? 1 : 0), "%s: service %d exit %d", what, s,
                  status);
    }
    close_rank_loaders(rk, rb);
    check_no_leaks();
    char r0[16], r1[16];
    snprintf(r0, sizeof r0, split > 1 ? "0-%u" : "0", split - 1);
    snprintf(r1, sizeof r1, split < 3 ? "%u-3" : "3", split);
    printf("  2 services, ranks %s + %s of world 4 (%s): %d+%d+%d+%d batches equal to the "
           "ranks' loaders", r0, r1, what, n[0], n[1], n[2], n[3]);
    for (int t = 0; t < 2; t++)
        if (svc_fail[t] >= 0)
            printf("; ranks %s got the error at batch %lld, the other service's ranks %s%s",
                   t ? r1 : r0, (long long)svc_fail[t], t ? r0 : r1,
                   svc_fail[1 - t] >= 0 ? " too" : " their whole stream");
    printf("\n");
}

/* ---- hostile regions --------------------------------------------------------------------- */

static void write_region(const char *name, const void *data, size_t len, size_t total,
                         mode_t mode) {
    char p[256];
    snprintf(p, sizeof p, "/dev/shm/%s", name);
    unlink(p);
    int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, len) == (ssize_t)len);
    if (total > len) CHECK(ftruncate(fd, (off_t)total) == 0);
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

static void remove_region(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "/dev/shm/%s", name);
    unlink(p);
}

/* A valid-looking service header for the shapes stream. */
static sp__ring_hdr *good_header(void) {
    sp__ring_hdr *h = calloc(1, sizeof *h);
    CHECK(h);
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    h->nslots = 2;
    h->cap = 8;
    h->nranks = 1;
    h->world = 1;
    h->sample_bytes = ld_info(ld).sample_bytes;
    CHECK_OK(sp__ring_layout(h, &err), &err);
    h->magic = SP__RING_MAGIC;
    h->version = SP__RING_VERSION;
    sp_loader_state st;
    sp_loader_state_at(ld, 0, 0, &st);
    sp_loader_state_format(&st, h->state_text, sizeof h->state_text);
    h->fp_hi = st.fingerprint.hi;
    h->fp_lo = st.fingerprint.lo;
    h->batches_per_epoch = ld_info(ld).batches_per_epoch;
    h->epochs = 1;
    h->total = h->batches_per_epoch;
    h->owner_pid = getpid();
    h->owner_start = sp__proc_start(getpid());
    atomic_store(&h->svc_running, 1);
    sp_loader_destroy(ld);
    return h;
}

static int dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    CHECK(p > 0);
    waitpid(p, NULL, 0);
    return p;
}

static void expect_attach_error(const char *name, int code, const char *word, const char *what) {
    sp_client *cl = NULL;
    sp_error err;
    sp_client_opts o = {0, NULL, 30};
    int rc = sp__client_attach_opts(name, 0, &o, &cl, &err);
    CHECK_MSG(rc == code, "%s: rc %d (%s)", what, rc, err.msg);
    CHECK(cl == NULL);
    CHECK_MSG(strstr(err.msg, word) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, word);
    printf("    %-22s %s\n", what, err.msg);
}

static void test_hostile(void) {
    const char *name = new_name();
    sp_error err;
    expect_attach_error(name, SP_EIO, "no such region", "missing");
    sp_client *cl;
    CHECK(sp__client_attach("a/b", 0, &cl, &err) == SP_EINVAL);
    CHECK(sp__client_attach("", 0, &cl, &err) == SP_EINVAL);
    CHECK(sp__client_attach("..", 0, &cl, &err) == SP_EINVAL);
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(sp__client_attach(big, 0, &cl, &err) == SP_EINVAL);

    sp__ring_hdr *g = good_header();
    size_t hs = sizeof *g, total = g->region_size;
    uint8_t *buf = malloc(hs);
    CHECK(buf);
    write_region(name, "", 0, 0, 0600);
    expect_attach_error(name, SP_EFORMAT, "truncated", "empty");
    write_region(name, g, 100, 100, 0600);
    expect_attach_error(name, SP_EFORMAT, "truncated", "truncated");
    for (size_t i = 0; i < hs; i++) buf[i] = (uint8_t)(i * 131 + 7);
    write_region(name, buf, hs, total, 0600);
    expect_attach_error(name, SP_EFORMAT, "bad magic", "garbage");
#define HOSTILE(WHAT, WORD, CODE, STMT)                       \
    do {                                                      \
        memcpy(buf, g, hs);                                   \
        sp__ring_hdr *h = (sp__ring_hdr *)buf;                \
        STMT;                                                 \
        write_region(name, buf, hs, total, 0600);             \
        expect_attach_error(name, CODE, WORD, WHAT);          \
    } while (0)
    HOSTILE("wrong magic", "bad magic", SP_EFORMAT, h->magic ^= 1);
    HOSTILE("wrong version", "layout version", SP_EFORMAT, h->version = 99);
    HOSTILE("version 3 region", "layout version 3, this build reads 5", SP_EFORMAT,
            h->version = 3);
    HOSTILE("world 0", "of world 0", SP_EFORMAT, h->world = 0);
    HOSTILE("targets without their bytes", "the state says", SP_EFORMAT,
            h->tg_on = 1; h->tg_max_boxes = 4);
    HOSTILE("hostile targets", "ring: targets 1", SP_EFORMAT,
            h->tg_on = 1; h->tg_max_boxes = 1u << 30);
    HOSTILE("targets flag 2", "ring: targets 2", SP_EFORMAT, h->tg_on = 2);
    HOSTILE("mix without classes", "batch mix of 1 ops, 0 classes", SP_EFORMAT, h->mix_n = 1);
    HOSTILE("mix classes without a mix", "disagree", SP_EFORMAT, h->mix_classes = 5);
    HOSTILE("ranks past world", "ranks 1+1 of world 1", SP_EFORMAT, h->rank_first = 1);
    HOSTILE("world vs batch", "batch size", SP_EFORMAT, h->world = 2);
    HOSTILE("huge slots", "hostile", SP_EFORMAT, h->nslots = 0xffffffffu);
    HOSTILE("huge sample", "hostile", SP_EFORMAT, h->sample_bytes = 1ull << 62);
    HOSTILE("huge offset", "disagree", SP_EFORMAT, h->off_images = 1ull << 60);
    HOSTILE("huge slot size", "disagree", SP_EFORMAT, h->slot_size = 1ull << 50);
    HOSTILE("size > mapping", "region has", SP_EFORMAT, h->nslots = 64; sp__ring_layout(h, NULL));
    HOSTILE("zero ranks", "0 ranks", SP_EFORMAT, h->nranks = 0);
    HOSTILE("ranks not dividing", "hostile", SP_EFORMAT, h->nranks = 3);
    HOSTILE("many workers", "workers", SP_EFORMAT, h->nworkers = 1000);
    HOSTILE("bad state", "start state", SP_EFORMAT, memcpy(h->state_text, "{\"seedpipe_state\":", 19));
    HOSTILE("unterminated state", "no start state", SP_EFORMAT,
            memset(h->state_text, 'x', sizeof h->state_text));
    HOSTILE("fingerprint", "fingerprint", SP_EFORMAT, h->fp_lo ^= 1);
    HOSTILE("bounds", "bounds", SP_EFORMAT, h->total = 5);
    HOSTILE("dead owner", "stale", SP_EIO, h->owner_pid = dead_pid());
    HOSTILE("not running", "not running", SP_EIO, atomic_store(&h->svc_running, 0));
    HOSTILE("no answer", "did not answer", SP_EIO, (void)h);
    memcpy(buf, g, hs);
    write_region(name, buf, hs, total, 0644);
    expect_attach_error(name, SP_EIO, "mode 0644", "mode");
    if (geteuid() == 0) {   /* another uid's region: refused unless allowed */
        char path[256];
        snprintf(path, sizeof path, "/dev/shm/%s", name);
        write_region(name, g, hs, total, 0600);
        CHECK(chown(path, 65534, 65534) == 0);
        expect_attach_error(name, SP_EIO, "owned by uid 65534", "foreign uid");
        sp_client_opts fo = {SP_CLIENT_ALLOW_FOREIGN, NULL, 30};
        CHECK(sp__client_attach_opts(name, 0, &fo, &cl, &err) == SP_EIO);
        CHECK_MSG(strstr(err.msg, "did not answer") != NULL, "%s", err.msg);   /* got past it */
        sp_loader_config fc;
        cfg_of(&fc, shapes, 0, 1);
        sp_service_config fsc = {name, 1, 1, 0, 1, NULL, NULL, NULL, 0, 0, NULL};
        sp_service *fsvc;
        CHECK(sp_service_create(&fc, &fsc, &fsvc, &err) == SP_EIO);
        CHECK_MSG(strstr(err.msg, "belongs to uid 65534") != NULL, "%s", err.msg);
    }
    /* status reads hostile regions without crashing too */
    sp_service_status sst;
    write_region(name, "garbage", 7, 4096 * 4, 0600);
    CHECK(sp_service_status_read(name, &sst, &err) == SP_EFORMAT);
    /* Random corruption of the header's first 512 bytes: never a crash. */
    srand(12345);
    int attached = 0;
    for (int it = 0; it < 300; it++) {
        memcpy(buf, g, hs);
        int flips = 1 + rand() % 3;
        for (int f = 0; f < flips; f++) buf[rand() % 512] ^= (uint8_t)(1 + rand() % 255);
        write_region(name, buf, hs, total, 0600);
        sp_client_opts o = {0, NULL, 5};
        cl = NULL;
        int rc = sp__client_attach_opts(name, 0, &o, &cl, &err);
        if (rc == 0) {   /* the flip hit padding: attach works (a service answered?) */
            attached++;
            sp__client_detach(cl);
        }
        sp_service_status_read(name, &sst, &err);
    }
    printf("    300 random corruptions: no crash (%d attached)\n", attached);
    /* A service refuses a foreign file with its name; removes a stale one. */
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    sp_service_config sc = {name, 1, 1, 0, 1, NULL, NULL, NULL, 0, 0, NULL};
    sp_service *svc;
    write_region(name, buf, 64, 64, 0600);   /* garbage, not a header */
    memset(buf, 0x5a, 64);
    write_region(name, buf, 64, hs, 0600);
    CHECK(sp_service_create(&c, &sc, &svc, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "not a (stale) seedpipe region") != NULL, "%s", err.msg);
    memcpy(buf, g, hs);
    ((sp__ring_hdr *)buf)->owner_pid = dead_pid();
    write_region(name, buf, hs, total, 0600);
    CHECK_OK(sp_service_create(&c, &sc, &svc, &err), &err);
    CHECK_MSG(strstr(sp_service_note(svc), "removed stale region") != NULL, "%s",
              sp_service_note(svc));
    sp_service_destroy(svc);
    CHECK(!region_exists(name));
    remove_region(name);
    free(buf);
    free(g);
    check_no_leaks();
}

/* ---- stale / live ------------------------------------------------------------------------- */

static void test_stale_and_live(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    const char *name = new_name();
    pid_t pid = fork_service(&c, name, 1, 2, 0);
    sp_service_status st;
    sp_error err;
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    CHECK(st.alive && st.running && st.pid == pid && st.nworkers == 2);
    int wpids[2] = {st.workers[0].pid, st.workers[1].pid};
    CHECK(wpids[0] > 0 && wpids[1] > 0 && st.workers[0].alive);
    sp_service_config sc = {name, 1, 1, 0, EPOCHS, NULL, NULL, NULL, 0, 0, NULL};
    sp_service *svc;
    CHECK(sp_service_create(&c, &sc, &svc, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "is served by pid") != NULL, "%s", err.msg);
    printf("  live: %s\n", err.msg);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, NULL, 0) == pid);
    CHECK(region_exists(name));   /* left behind */
    for (int i = 0; i < 2000 && (sp__proc_alive(wpids[0], 0) || sp__proc_alive(wpids[1], 0)); i++)
        usleep(1000);
    CHECK_MSG(!sp__proc_alive(wpids[0], 0) && !sp__proc_alive(wpids[1], 0),
              "workers outlived their killed service");
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    CHECK(!st.alive);
    sp_client *cl;
    CHECK(sp__client_attach(name, 0, &cl, &err) == SP_EIO);
    CHECK_MSG(strstr(err.msg, "stale") != NULL, "%s", err.msg);
    CHECK_OK(sp_service_create(&c, &sc, &svc, &err), &err);
    CHECK_MSG(strstr(sp_service_note(svc), "removed stale region") != NULL, "%s",
              sp_service_note(svc));
    printf("  stale: %s\n", sp_service_note(svc));
    sp_service_destroy(svc);
    CHECK(!region_exists(name));
    check_no_leaks();
}

/* ---- a client dies holding batches ------------------------------------------------------------- */

static void test_dead_client(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    ref rk[2];
    for (uint32_t k = 0; k < 2; k++) {
        sp_loader_config ck = c;
        ck.rank = k;
        ck.world = 2;
        run_ref(&ck, &rk[k]);
    }
    const char *name = new_name();
    pid_t svc = fork_service(&c, name, 2, 2, 3);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {   /* rank 1: take 2 batches, hold them, die */
        close(pfd[0]);
        sp_client *cl;
        sp_error e;
        if (sp__client_attach(name, 1, &cl, &e) != 0) _exit(3);
        sp_batch v[2];
        for (int i = 0; i < 2; i++)
            if (sp__client_next(cl, &v[i], &e) != 0) _exit(4);
        if (write(pfd[1], "x", 1) != 1) _exit(5);
        raise(SIGKILL);
        _exit(6);
    }
    close(pfd[1]);
    char x;
    CHECK(read(pfd[0], &x, 1) == 1);
    close(pfd[0]);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    sp_client *c0, *c1 = NULL;
    sp_error err;
    CHECK_OK(sp__client_attach(name, 0, &c0, &err), &err);
    int n = 0, n1 = 0;
    int64_t first1 = -1;
    for (;;) {
        sp_batch b;
        int rc = sp__client_next(c0, &b, &err);
        if (rc == SP_END) break;
        CHECK_OK(rc, &err);
        CHECK_MSG(same_digest(sp__client_batch_digest(c0, &b), rk[0].d[n]), "rank 0 batch %d", n);
        n++;
        CHECK_OK(sp__client_release(c0, &b, &err), &err);
        if (n == 10) {   /* rank 1 comes back */
            CHECK_OK(sp__client_attach(name, 1, &c1, &err), &err);
            sp_client_info info;
            sp_client_info_get(c1, &info);
            first1 = (int64_t)info.first;
            n1 = (int)info.first;
            CHECK_MSG(first1 >= 2 && first1 <= 10, "re-attached at %lld", (long long)first1);
        }
        if (c1)
            while (n1 < n) {
                sp_batch b1;
                CHECK_OK(sp__client_next(c1, &b1, &err), &err);
                CHECK_MSG(same_digest(sp__client_batch_digest(c1, &b1), rk[1].d[n1]),
                          "re-attached rank 1 batch %d", n1);
                n1++;
                CHECK_OK(sp__client_release(c1, &b1, &err), &err);
            }
    }
    CHECK(n == rk[0].n && n1 == rk[1].n);
    sp_service_status st;
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    CHECK_MSG(st.client_deaths == 1, "%u client deaths", st.client_deaths);
    CHECK(st.ranks[1].attaches == 2 && st.ranks[1].deaths == 1);
    sp__client_detach(c0);
    sp__client_detach(c1);
    CHECK(join_status(svc, 10000) == 0);
    check_no_leaks();
    printf("  dead client: rank 0 read all %d batches; rank 1 re-attached at batch %lld\n", n,
           (long long)first1);
}

/* ---- SIGTERM ---------------------------------------------------------------------------- */

static void test_sigterm(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    const char *name = new_name();
    pid_t pid = fork_service(&c, name, 1, 2, 2);
    sp_error err;
    sp_client *cl;
    CHECK_OK(sp__client_attach(name, 0, &cl, &err), &err);
    sp_batch b[2];
    CHECK_OK(sp__client_next(cl, &b[0], &err), &err);
    CHECK_OK(sp__client_next(cl, &b[1], &err), &err);
    sp_service_status st;
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    int wpids[2] = {st.workers[0].pid, st.workers[1].pid};
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(join_status(pid, 5000) == 0);
    CHECK(!region_exists(name));
    CHECK(!sp__proc_alive(wpids[0], 0) && !sp__proc_alive(wpids[1], 0));
    /* The held views stay readable; more batches are an error, not a hang. */
    CHECK(b[0].images[0] == b[0].images[0]);
    CHECK_OK(sp__client_release(cl, &b[0], &err), &err);
    CHECK_OK(sp__client_release(cl, &b[1], &err), &err);
    sp_batch v;
    int rc = sp__client_next(cl, &v, &err);
    CHECK_MSG(rc == SP_EIO && strstr(err.msg, "stopped") != NULL, "rc %d: %s", rc, err.msg);
    printf("  sigterm: %s\n", err.msg);
    sp__client_detach(cl);
    check_no_leaks();
}

/* sp__service_join(): the exit status of a service killed by a signal, and
 * named errors, never a bare -1, for a pid it cannot wait for. */
static void test_join(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    const char *name = new_name();
    pid_t pid = fork_service(&c, name, 1, 1, 2);
    CHECK(kill(pid, SIGKILL) == 0);
    sp_error err = {0};
    int status = 0;
    CHECK_OK(sp__service_join(pid, 5000, &status, &err), &err);
    CHECK_MSG(status == 128 + SIGKILL, "status %d", status);
    int rc = sp__service_join(pid, 1000, &status, &err);   /* reaped already */
    CHECK_MSG(rc == SP_EIO && status == -1 && strstr(err.msg, "waitpid") != NULL, "rc %d: %s", rc,
              err.msg);
    printf("  join, twice: %s\n", err.msg);
    CHECK(sp__service_join(0, 1000, &status, &err) == SP_EINVAL && strstr(err.msg, "pid 0"));
    CHECK(sp__service_join(pid, -1, NULL, &err) == SP_EINVAL);
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    unlink(path);   /* the killed service could not remove its region */
}

static void make_bad_copy(void) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -r '%s/.' '%s/' && printf 'not an image' > '%s/circle/zz-bad.png'",
             shapes, shapes_bad, shapes_bad);
    CHECK(system(cmd) == 0);
}

static void setup(void) {
    /* Dot names: invisible to other tests that count /dev/shm entries
     * (test_pool counts every name not starting with '.'). */
    snprintf(prefix, sizeof prefix, ".sp-test-svc-%d", (int)getpid());
    snprintf(shapes, sizeof shapes, "/tmp/sp-test-svc-XXXXXX");
    CHECK(mkdtemp(shapes) != NULL);
    snprintf(shapes_bad, sizeof shapes_bad, "/tmp/sp-test-svc-bad-XXXXXX");
    CHECK(mkdtemp(shapes_bad) != NULL);
    sp_shapes_opts o = {60, 32, 3};
    sp_error err;
    CHECK_OK(sp_shapes_make(shapes, &o, &err), &err);
    make_bad_copy();
}

/* The cases check for leaks themselves; a failed one may leave a region. */
static void teardown(void) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' /dev/shm/%s-*", shapes, shapes_bad, prefix);
    CHECK(system(cmd) == 0);
}

static void test_ranks_clean(void) { test_ranks(shapes, SP_ON_ERROR_FAIL, "clean"); }
static void test_ranks_corrupt_skip(void) {
    test_ranks(shapes_bad, SP_ON_ERROR_SKIP, "corrupt file, skip");
}
static void test_span_loader_clean(void) { test_span_loader(shapes, SP_ON_ERROR_FAIL, "clean"); }
static void test_span_loader_corrupt_skip(void) {
    test_span_loader(shapes_bad, SP_ON_ERROR_SKIP, "corrupt file, skip");
}
static void test_span_loader_corrupt_substitute(void) {
    test_span_loader(shapes_bad, SP_ON_ERROR_SUBSTITUTE, "corrupt file, substitute");
}
static void test_node_services_clean(void) {
    test_node_services(shapes, SP_ON_ERROR_FAIL, 2, "clean");
}
static void test_node_services_corrupt_skip(void) {
    test_node_services(shapes_bad, SP_ON_ERROR_SKIP, 2, "corrupt file, skip");
}
static void test_node_services_corrupt_substitute(void) {
    test_node_services(shapes_bad, SP_ON_ERROR_SUBSTITUTE, 1, "corrupt file, substitute");
}
static void test_node_services_corrupt_fail(void) {
    test_node_services(shapes_bad, SP_ON_ERROR_FAIL, 2, "corrupt file, fail");
}
static void test_node_services_corrupt_fail_split1(void) {
    test_node_services(shapes_bad, SP_ON_ERROR_FAIL, 1, "corrupt file, fail");
}

static const sp_case cases[] = {
    SP_CASE(test_one_client),
    SP_CASE(test_ranks_clean),
    SP_CASE(test_ranks_corrupt_skip),
    SP_CASE(test_span_loader_clean),
    SP_CASE(test_span_loader_corrupt_skip),
    SP_CASE(test_span_loader_corrupt_substitute),
    SP_CASE(test_node_services_clean),
    SP_CASE(test_node_services_corrupt_skip),
    SP_CASE(test_node_services_corrupt_substitute),
    SP_CASE(test_node_services_corrupt_fail),
    SP_CASE(test_node_services_corrupt_fail_split1),
    SP_CASE(test_hostile),
    SP_CASE(test_stale_and_live),
    SP_CASE(test_dead_client),
    SP_CASE(test_sigterm),
    SP_CASE(test_join),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

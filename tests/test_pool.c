/* test_pool.c - the worker pool keeps the determinism contract.
 *
 * On a built-in shapes dataset and on a PngSuite ImageFolder (classes by
 * colour type), two epochs:
 *  - the batch digests (and skipped/substituted lists) from the pool with
 *    1, 2, 3, 4, 8 workers equal the in-process loader's;
 *  - equal again when the test SIGKILLs a worker mid-epoch (the pool must
 *    notice, redo its positions, and count the death);
 *  - equal when the stream is stopped at a random batch, its state written
 *    to text, parsed back, and resumed in a new pool with other workers;
 *  - rng-mode per-worker: 1 worker equals the in-process per-worker stream,
 *    3 workers diverge (the classic scheme is not worker-count invariant);
 *  - on-error with PngSuite's corrupt x*.png: fail names the same file for
 *    the loader and 1 and 3 workers; skip and substitute give the same
 *    manifest lines and the same failure log for all three;
 *  - a sample whose computation kills its worker (SEEDPIPE_TEST_CRASH_SAMPLE)
 *    costs two workers, then fails like a corrupt file, alike for 1 and 3
 *    workers (a test hook: without SEEDPIPE_TEST_HOOKS the case skips);
 *  - workers SIGKILLed by this process as soon as they exist, eight rounds:
 *    the stream unchanged (on_error fail), every kill counted;
 *  - sample 17's worker killed 2, 3 or 5 times in a row (SIGKILL, SIGTERM,
 *    raised by the hook), more than the crash budget: the stream unchanged;
 *    crashed by SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT (raised, or a
 *    real fault): that sample substituted, every other batch unchanged;
 *    the same signals sent twice by another process (kill(), as a
 *    watchdog would): the stream unchanged, nothing substituted; killed every time: the
 *    respawn bound ends the stream with SP_ELIMIT, nothing substituted
 *    (hook cases: without SEEDPIPE_TEST_HOOKS they skip);
 *  - a state from another dataset / pipeline / seed is refused naming it;
 *    hostile state texts are refused;
 *  - every pool batch's sp_pool_digest() (hashed while the pool waited)
 *    equals its sp_batch_digest(), failures, kills and resumes included;
 *  - after every pool: no child process left, no shared memory (ring memfd,
 *    /dev/shm entry) still open or mapped in this process.
 * Cases (tests/runner.h): test_worker_counts_shapes (worker counts, kill,
 * resume on shapes), test_worker_counts_pngsuite (the same on PngSuite),
 * test_per_worker_mode, test_on_error, test_crashing_sample,
 * test_kills_at_start, test_kills_same_sample, test_crash_signals,
 * test_outside_crash_signals, test_respawn_bound, test_state_refusal. setup makes the datasets once, in a fresh temp dir;
 * no case changes them (the state file goes beside them).
 * Without PngSuite ($SP_SHARED_DATA/pngsuite) the PngSuite parts (its worker
 * counts, on-error, the other-dataset refusal) print SKIP and their cases
 * exit 77 (test_state_refusal after its other checks); the shapes cases run.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/pool.h"
#include "seedpipe/shapes.h"
#include "seedpipe/state.h"
#include "loader_check.h"
#include "pool/pool_internal.h"

#define EPOCHS 2
#define MAXB 256

static char g_tmp[256];   /* per runner process: shapes/, png/, pngbad/ */
static char shapes[300], png[300], pngbad[300];
static int shm_before;
static int have_png;   /* $SP_SHARED_DATA/pngsuite is there */

typedef struct stream {
    int n;
    sp_digest d[MAXB];
    uint32_t count[MAXB];
    uint32_t nskipped[MAXB], nsubst[MAXB];
    uint64_t skip0[MAXB], subst0[MAXB][2];
    int rc;                 /* error code if the stream failed */
    char msg[SP_ERROR_MSG_MAX];
    size_t nfail;
    uint64_t fail_samples[64];
    uint64_t deaths;
} stream;

/* Shared memory this process still holds: open descriptors and mappings of
 * /dev/shm entries or of the pool's ring (a memfd, "seedpipe-ring"). Per
 * process, so tests running beside this one (services naming regions in
 * /dev/shm) cannot move it. */
static int holds_shm(const char *what) {
    return strncmp(what, "/dev/shm/", 9) == 0 || strstr(what, "memfd:seedpipe") != NULL;
}

static int count_shm(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char link[300], target[4096];
            if (e->d_name[0] == '.') continue;
            snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
            ssize_t k = readlink(link, target, sizeof target - 1);
            if (k <= 0) continue;
            target[k] = '\0';
            n += holds_shm(target);
        }
        closedir(d);
    }
    FILE *f = fopen("/proc/self/maps", "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f)) {
            char *path = strchr(line, '/');
            char *memfd = strstr(line, "memfd:");
            n += (path && holds_shm(path)) || (memfd && holds_shm(memfd));
        }
        fclose(f);
    }
    return n;
}

/* No child left, no shared memory still held. */
static void check_no_leaks(void) {
    errno = 0;
    CHECK_MSG(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "a worker process was left");
    CHECK_MSG(count_shm() <= shm_before, "shared memory was left (an fd or mapping of /dev/shm or the ring)");
}

static void record(stream *s, const sp_loader *ld, const sp_batch *b) {
    CHECK(s->n < MAXB);
    s->d[s->n] = sp_batch_digest(ld, b);
    s->count[s->n] = b->count;
    s->nskipped[s->n] = b->nskipped;
    s->nsubst[s->n] = b->nsubstituted;
    s->skip0[s->n] = b->nskipped ? b->skipped[0] : 0;
    s->subst0[s->n][0] = b->nsubstituted ? b->substituted[0] : 0;
    s->subst0[s->n][1] = b->nsubstituted ? b->substituted[1] : 0;
    s->n++;
}

/* A pool's batch: recorded, and sp_pool_digest() (hashed while the pool
 * waited, where it could) equals sp_batch_digest(). */
static void record_pool(stream *s, sp_pool *pool, const sp_batch *b) {
    sp_digest d = sp_pool_digest(pool, b);
    record(s, sp__pool_loader(pool), b);
    CHECK_MSG(d.hi == s->d[s->n - 1].hi && d.lo == s->d[s->n - 1].lo,
              "sp_pool_digest differs from sp_batch_digest at batch %d", s->n - 1);
}

static void record_failures(stream *s, const sp_loader *ld) {
    s->nfail = sp_loader_failure_count(ld);
    for (size_t i = 0; i < s->nfail && i < 64; i++) {
        sp_failure f;
        CHECK(sp_loader_failure_get(ld, i, &f) == 0);
        s->fail_samples[i] = f.sample;
    }
}

static void cfg_of(sp_loader_config *c, const char *ds, const char *pipe, uint64_t seed,
                   uint32_t batch) {
    sp_loader_config_default(c);
    c->dataset = ds;
    c->pipeline = pipe;
    c->seed = seed;
    c->batch_size = batch;
}

static void run_inproc(const sp_loader_config *c, stream *s) {
    memset(s, 0, sizeof *s);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(c, &ld, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    uint64_t nb = ld_info(ld).batches_per_epoch;
    for (uint32_t e = 0; e < EPOCHS && !s->rc; e++)
        for (uint64_t i = 0; i < nb; i++) {
            int rc = sp_loader_batch(ld, e, i, &b, &err);
            if (rc) {
                s->rc = rc;
                snprintf(s->msg, sizeof s->msg, "%s", err.msg);
                break;
            }
            record(s, ld, &b);
        }
    record_failures(s, ld);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

/* Wait (up to 2 s) until pid is a zombie, so the pool can reap it. */
static void wait_zombie(int pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        if (!f) return;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'Z') return;
        usleep(1000);
    }
}

/* The pool stream; kill_at >= 0: SIGKILL worker (kill_at % W) after taking
 * batch kill_at; stop_at >= 0: stop there, save/parse the state, resume in a
 * new pool of `workers2` workers. */
static void run_pool(const sp_loader_config *c, int workers, int ring, int kill_at, int stop_at,
                     int workers2, stream *s) {
    memset(s, 0, sizeof *s);
    sp_pool_config pc = {workers, ring, EPOCHS, NULL, NULL, NULL};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(c, &pc, &pool, &err), &err);
    /* The leak check sees a live pool's ring (else it could never fail). */
    CHECK_MSG(count_shm() > shm_before, "the shared-memory count does not see the pool's ring");
    sp_batch v;
    for (;;) {
        if (stop_at >= 0 && s->n == stop_at) {
            sp_loader_state st, st2;
            sp__pool_state(pool, &st);
            char text[1024];
            int n = sp_loader_state_format(&st, text, sizeof text);
            CHECK(n > 0 && (size_t)n < sizeof text);
            CHECK_OK(sp_loader_state_parse(text, (size_t)n, &st2, &err), &err);
            CHECK(memcmp(&st, &st2, sizeof st) == 0);
            record_failures(s, sp__pool_loader(pool));
            sp__pool_destroy(pool);
            check_no_leaks();
            pc.workers = workers2;
            pc.resume = &st2;
            CHECK_OK(sp__pool_create(c, &pc, &pool, &err), &err);
            stop_at = -1;
        }
        int rc = sp__pool_next(pool, &v, &err);
        if (rc == SP_END) break;
        if (rc) {
            s->rc = rc;
            snprintf(s->msg, sizeof s->msg, "%s", err.msg);
            CHECK(sp__pool_next(pool, &v, &err) == rc);   /* sticky */
            break;
        }
        record_pool(s, pool, &v);
        if (kill_at >= 0 && s->n == kill_at + 1) {
            int pid = sp_pool_worker_pid(pool, kill_at % workers);
            CHECK(pid > 0);
            CHECK(kill(pid, SIGKILL) == 0);
            wait_zombie(pid);
        }
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    sp_pool_stats st;
    sp__pool_stats_get(pool, &st);
    s->deaths = st.worker_deaths;
    size_t before = s->nfail;
    record_failures(s, sp__pool_loader(pool));
    (void)before;
    sp__pool_destroy(pool);
    check_no_leaks();
}

static void same(const stream *a, const stream *b, const char *what) {
    CHECK_MSG(a->rc == b->rc, "%s: rc %d vs %d (%s | %s)", what, a->rc, b->rc, a->msg, b->msg);
    CHECK_MSG(strcmp(a->msg, b->msg) == 0, "%s: \"%s\" vs \"%s\"", what, a->msg, b->msg);
    CHECK_MSG(a->n == b->n, "%s: %d vs %d batches", what, a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        CHECK_MSG(a->d[i].hi == b->d[i].hi && a->d[i].lo == b->d[i].lo, "%s: batch %d differs",
                  what, i);
        CHECK(a->count[i] == b->count[i] && a->nskipped[i] == b->nskipped[i] &&
              a->nsubst[i] == b->nsubst[i] && a->skip0[i] == b->skip0[i] &&
              a->subst0[i][0] == b->subst0[i][0] && a->subst0[i][1] == b->subst0[i][1]);
    }
}

static int differs(const stream *a, const stream *b) {
    if (a->n != b->n) return 1;
    for (int i = 0; i < a->n; i++)
        if (a->d[i].hi != b->d[i].hi || a->d[i].lo != b->d[i].lo) return 1;
    return 0;
}

/* cp from to (in-process: setup runs once per case under ctest). */
static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    CHECK_MSG(in && out, "cannot copy %s to %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
    CHECK(!ferror(in));
    fclose(in);
    CHECK(fclose(out) == 0);
}

static void make_png_sets(void) {
    const char *src = sp_test_data("pngsuite");
    DIR *d = opendir(src);
    CHECK_MSG(d, "cannot open %s", src);
    const char *classes[] = {"0g", "2c", "3p", "4a", "6a"};
    char path[8192];
    for (int k = 0; k < 2; k++) {
        const char *root = k ? pngbad : png;
        for (int c = 0; c < 5; c++) {
            snprintf(path, sizeof path, "%s/%s", root, classes[c]);
            CHECK(mkdir(path, 0755) == 0);
        }
    }
    struct dirent *e;
    int nbad = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n != 12 || strcmp(e->d_name + 8, ".png") != 0) continue;
        int bad = e->d_name[0] == 'x';
        const char *cls = NULL;
        for (int c = 0; c < 5; c++)
            if (!strncmp(e->d_name + 4, classes[c], 2)) cls = classes[c];
        if (!cls) cls = "2c";
        for (int k = bad; k < 2; k++) {
            char from[4200];
            snprintf(from, sizeof from, "%s/%s", src, e->d_name);
            snprintf(path, sizeof path, "%s/%s/%s", k ? pngbad : png, cls, e->d_name);
            copy_file(from, path);
        }
        nbad += bad;
    }
    closedir(d);
    CHECK(nbad >= 10);
}

static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3 saturation=0.3";

static void test_worker_counts(const char *ds, uint32_t batch) {
    sp_loader_config c;
    cfg_of(&c, ds, PIPE, 77, batch);
    stream ref, s;
    run_inproc(&c, &ref);
    CHECK(ref.rc == 0 && ref.n > 4);
    int ws[] = {1, 2, 3, 4, 8};
    for (int i = 0; i < 5; i++) {
        run_pool(&c, ws[i], i == 1 ? 1 : 0, -1, -1, 0, &s);   /* R = 1 once: tightest ring */
        char what[64];
        snprintf(what, sizeof what, "%s workers %d", ds, ws[i]);
        same(&ref, &s, what);
    }
    /* A worker SIGKILLed mid-epoch. */
    run_pool(&c, 3, 2, ref.n / 4, -1, 0, &s);
    same(&ref, &s, "kill");
    CHECK_MSG(s.deaths >= 1, "the killed worker was not noticed");
    /* Stop and resume at a random batch, with another worker count. */
    int k = 1 + (int)(getpid() % (unsigned)(ref.n - 1));
    printf("  %s: resume at batch %d of %d\n", ds, k, ref.n);
    run_pool(&c, 2, 0, -1, k, 3, &s);
    same(&ref, &s, "resume");
}

static void test_per_worker_mode(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    c.rng_mode = SP_RNG_PER_WORKER;
    stream ref, s1, s3;
    run_inproc(&c, &ref);
    run_pool(&c, 1, 0, -1, -1, 0, &s1);
    same(&ref, &s1, "per-worker 1 worker");
    /* 4 workers: with fewer on 60 samples, a loaded machine may leave all
     * but worker 0 idle, and the per-worker bytes then happen to agree. */
    run_pool(&c, 4, 0, -1, -1, 0, &s3);
    CHECK_MSG(differs(&ref, &s3), "per-worker mode with 4 workers did not diverge");
    c.rng_mode = SP_RNG_PER_SAMPLE;
    stream d;
    run_inproc(&c, &d);
    CHECK(differs(&ref, &d));
}

static void test_on_error(void) {
    if (!sp_test_corpus("pngsuite", "on-error with PngSuite's x*.png")) return;
    sp_loader_config c;
    cfg_of(&c, pngbad, PIPE, 5, 16);
    stream ref, s;
    /* fail */
    run_inproc(&c, &ref);
    CHECK(ref.rc != 0 && strstr(ref.msg, "/x") != NULL);
    printf("  fail: %s\n", ref.msg);
    run_pool(&c, 1, 0, -1, -1, 0, &s);
    same(&ref, &s, "fail 1 worker");
    run_pool(&c, 3, 0, -1, -1, 0, &s);
    same(&ref, &s, "fail 3 workers");
    for (int pol = SP_ON_ERROR_SKIP; pol <= SP_ON_ERROR_SUBSTITUTE; pol++) {
        c.on_error = (sp_on_error)pol;
        run_inproc(&c, &ref);
        CHECK_MSG(ref.rc == 0, "%s", ref.msg);
        CHECK(ref.nfail >= 10);
        uint32_t total = 0, nsk = 0, nsu = 0;
        for (int i = 0; i < ref.n; i++) {
            total += ref.count[i];
            nsk += ref.nskipped[i];
            nsu += ref.nsubst[i];
        }
        if (pol == SP_ON_ERROR_SKIP) {
            CHECK(nsk == 2 * ref.nfail && nsu == 0);
        } else {
            CHECK(nsu == 2 * ref.nfail && nsk == 0);
        }
        for (int w = 1; w <= 3; w += 2) {
            run_pool(&c, w, 0, -1, -1, 0, &s);
            same(&ref, &s, pol == SP_ON_ERROR_SKIP ? "skip" : "substitute");
            CHECK(s.nfail == ref.nfail);
            CHECK(memcmp(s.fail_samples, ref.fail_samples, ref.nfail * sizeof(uint64_t)) == 0);
        }
        (void)total;
    }
}

/* A sample whose decode kills the worker (test hook): two deaths, then it
 * fails like a corrupt file; 1 and 3 workers agree. The hook exists only in
 * builds configured with SEEDPIPE_TEST_HOOKS=ON: elsewhere the case skips. */
static void test_crashing_sample(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the crash hook (SEEDPIPE_TEST_CRASH_SAMPLE) is compiled only into builds configured "
         "with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    c.on_error = SP_ON_ERROR_SKIP;
    setenv("SEEDPIPE_TEST_CRASH_SAMPLE", "17", 1);
    stream s1, s3;
    run_pool(&c, 1, 0, -1, -1, 0, &s1);
    run_pool(&c, 3, 2, -1, -1, 0, &s3);
    same(&s1, &s3, "crashing sample");
    CHECK_MSG(s1.deaths == 2 * EPOCHS, "%llu deaths", (unsigned long long)s1.deaths);
    CHECK(s1.nfail == 1 && s1.fail_samples[0] == 17);
    int skipped = 0;
    for (int i = 0; i < s1.n; i++) skipped += s1.nskipped[i] == 1 && s1.skip0[i] == 17;
    CHECK(skipped == EPOCHS);
    /* fail: the error names the file and the deaths. */
    c.on_error = SP_ON_ERROR_FAIL;
    run_pool(&c, 2, 0, -1, -1, 0, &s1);
    CHECK(s1.rc == SP_EIO);
    CHECK_MSG(strstr(s1.msg, "died 2 times") != NULL && strstr(s1.msg, shapes) != NULL,
              "%s", s1.msg);
    printf("  crash: %s\n", s1.msg);
    unsetenv("SEEDPIPE_TEST_CRASH_SAMPLE");
#endif
}

/* ---- deaths: a kill is redone, a crash costs its sample, the respawn bound ---------------- */

/* SIGKILL every live worker of the pool not killed before (a pid that was
 * killed but not yet reaped by the pool is still listed). @return kills. */
static int kill_all(sp_pool *pool, int workers, int *killed, int *nkilled) {
    int n = 0;
    for (int w = 0; w < workers; w++) {
        int pid = sp_pool_worker_pid(pool, w), seen = 0;
        for (int i = 0; i < *nkilled; i++) seen |= killed[i] == pid;
        if (pid <= 0 || seen) continue;
        CHECK(kill(pid, SIGKILL) == 0);
        wait_zombie(pid);
        killed[(*nkilled)++] = pid;
        n++;
    }
    return n;
}

/* The pool stream with every worker SIGKILLed from this process as soon as
 * it exists: right after sp__pool_create() (the workers have just started),
 * then after each of the first rounds - 1 batches (the replacements forked
 * meanwhile). @return the kills sent; s->deaths must equal them. */
static int run_pool_killing(const sp_loader_config *c, int workers, int rounds, stream *s) {
    memset(s, 0, sizeof *s);
    sp_pool_config pc = {workers, 0, EPOCHS, NULL, NULL, NULL};
    sp_pool *pool;
    sp_error err;
    CHECK_OK(sp__pool_create(c, &pc, &pool, &err), &err);
    int killed[256], nkilled = 0, kills = 0;
    sp_batch v;
    for (int round = 0;; round++) {
        if (round < rounds) kills += kill_all(pool, workers, killed, &nkilled);
        int rc = sp__pool_next(pool, &v, &err);
        if (rc == SP_END) break;
        if (rc) {
            s->rc = rc;
            snprintf(s->msg, sizeof s->msg, "%s", err.msg);
            break;
        }
        record_pool(s, pool, &v);
        CHECK_OK(sp__pool_release(pool, &v, &err), &err);
    }
    sp_pool_stats st;
    sp__pool_stats_get(pool, &st);
    s->deaths = st.worker_deaths;
    record_failures(s, sp__pool_loader(pool));
    sp__pool_destroy(pool);
    check_no_leaks();
    return kills;
}

/* Workers SIGKILLed from outside as they start, round after round: the
 * stream is the in-process one (on_error fail: a sample charged with the
 * kills would end it), every kill counted. Which positions the kills hit
 * is up to the scheduler; test_kills_same_sample hits one deterministically. */
static void test_kills_at_start(void) {
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    stream ref, s;
    run_inproc(&c, &ref);
    for (int workers = 1; workers <= 3; workers += 2) {
        int kills = run_pool_killing(&c, workers, 8, &s);
        char what[64];
        snprintf(what, sizeof what, "%d workers, %d killed as they start", workers, kills);
        same(&ref, &s, what);
        /* Round 0 always kills every worker; a later round kills those the
         * pool has replaced by then (how many is up to the scheduler). */
        CHECK_MSG(kills >= workers && s.deaths == (uint64_t)kills, "%s: %llu deaths", what,
                  (unsigned long long)s.deaths);
        printf("  %s: stream unchanged\n", what);
    }
}

#ifdef SEEDPIPE_TEST_HOOKS
/* The crash hook on sample 17 raising `sig` while the position has seen
 * fewer than `times` deaths (0: always). */
static void hook(int sig, int times) {
    char v[16];
    setenv("SEEDPIPE_TEST_CRASH_SAMPLE", "17", 1);
    snprintf(v, sizeof v, "%d", sig);
    setenv("SEEDPIPE_TEST_CRASH_SIGNAL", v, 1);
    snprintf(v, sizeof v, "%d", times);
    if (times) setenv("SEEDPIPE_TEST_CRASH_TIMES", v, 1);
    else unsetenv("SEEDPIPE_TEST_CRASH_TIMES");
}
static void unhook(void) {
    unsetenv("SEEDPIPE_TEST_CRASH_SAMPLE");
    unsetenv("SEEDPIPE_TEST_CRASH_SIGNAL");
    unsetenv("SEEDPIPE_TEST_CRASH_TIMES");
    unsetenv("SEEDPIPE_TEST_CRASH_FROM");
}
#endif

/* The worker computing sample 17 is killed (SIGKILL, SIGTERM: raised by
 * the hook, which the pool cannot tell from a kill sent from outside)
 * several times in a row, more often than the crash budget: the stream is
 * the in-process one, under on_error fail. Test hook: skips without it. */
static void test_kills_same_sample(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the crash hook (SEEDPIPE_TEST_CRASH_SAMPLE/_SIGNAL/_TIMES) is compiled only into "
         "builds configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    stream ref, s;
    run_inproc(&c, &ref);
    struct { int sig, times, workers, ring; } runs[] = {
        {SIGKILL, 3, 1, 0}, {SIGKILL, 3, 3, 2}, {SIGTERM, 2, 2, 0}, {SIGKILL, 5, 2, 1}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        hook(runs[i].sig, runs[i].times);
        run_pool(&c, runs[i].workers, runs[i].ring, -1, -1, 0, &s);
        char what[96];
        snprintf(what, sizeof what, "signal %d %d times on sample 17, %d workers", runs[i].sig,
                 runs[i].times, runs[i].workers);
        same(&ref, &s, what);
        CHECK_MSG(s.nfail == 0 && s.deaths == (uint64_t)runs[i].times * EPOCHS,
                  "%s: %zu failures, %llu deaths", what, s.nfail, (unsigned long long)s.deaths);
        printf("  %s: stream unchanged\n", what);
    }
    unhook();
#endif
}

/* A worker crashing on sample 17 by any crash signal costs that sample only:
 * substituted (each other batch as in-process), two deaths an epoch;
 * raised by the worker through its handlers (pool_death.c) and, where there
 * is one, by a real fault (SEEDPIPE_TEST_CRASH_FROM=fault: a store through
 * NULL, abort(), a trap instruction). */
static void test_crash_signals(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the crash hook (SEEDPIPE_TEST_CRASH_SAMPLE/_SIGNAL) is compiled only into builds "
         "configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    c.on_error = SP_ON_ERROR_SUBSTITUTE;
    stream ref, s;
    run_inproc(&c, &ref);
    int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSEGV, SIGILL, SIGABRT};
    for (int k = 0; k < 8; k++) {
        hook(sigs[k], 0);
        if (k >= 5) setenv("SEEDPIPE_TEST_CRASH_FROM", "fault", 1);
        run_pool(&c, 2, 0, -1, -1, 0, &s);
        const char *how = k >= 5 ? "fault" : "raised";
        CHECK_MSG(s.rc == 0 && s.n == ref.n, "signal %d (%s): rc %d (%s)", sigs[k], how, s.rc,
                  s.msg);
        int subst = 0;
        for (int i = 0; i < s.n; i++) {
            if (s.nsubst[i] == 1 && s.subst0[i][0] == 17) {
                subst++;
                continue;
            }
            CHECK_MSG(s.d[i].hi == ref.d[i].hi && s.d[i].lo == ref.d[i].lo && s.nsubst[i] == 0,
                      "signal %d (%s): batch %d differs", sigs[k], how, i);
        }
        CHECK_MSG(subst == EPOCHS && s.nfail == 1 && s.fail_samples[0] == 17 &&
                      s.deaths == 2 * EPOCHS,
                  "signal %d (%s): %d substituted, %zu failures, %llu deaths", sigs[k], how,
                  subst, s.nfail, (unsigned long long)s.deaths);
        unhook();
    }
#endif
}

/* The crash signals sent to the worker computing sample 17 by another
 * process (a child of the worker kill()s it, as a watchdog would: si_code
 * SI_USER), twice in a row, under on_error substitute: not the sample's
 * fault, so the stream is the in-process one, nothing substituted, both
 * deaths counted. Before the worker's handler told them apart, each was
 * charged as a crash and sample 17 was substituted. */
static void test_outside_crash_signals(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the crash hook (SEEDPIPE_TEST_CRASH_SAMPLE/_SIGNAL/_FROM) is compiled only into "
         "builds configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    c.on_error = SP_ON_ERROR_SUBSTITUTE;
    stream ref, s;
    run_inproc(&c, &ref);
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (int k = 0; k < 5; k++) {
        hook(sigs[k], 2);
        setenv("SEEDPIPE_TEST_CRASH_FROM", "outside", 1);
        run_pool(&c, 1 + k % 2, 0, -1, -1, 0, &s);
        unhook();
        char what[96];
        snprintf(what, sizeof what, "signal %d sent twice from outside, %d workers", sigs[k],
                 1 + k % 2);
        same(&ref, &s, what);
        int subst = 0;
        for (int i = 0; i < s.n; i++) subst += s.nsubst[i];
        CHECK_MSG(s.rc == 0 && s.nfail == 0 && subst == 0 && s.deaths == 2 * EPOCHS,
                  "%s: rc %d, %zu failures, %d substituted, %llu deaths", what, s.rc, s.nfail,
                  subst, (unsigned long long)s.deaths);
        printf("  %s: stream unchanged\n", what);
    }
#endif
}

/* Sample 17's worker is killed every time: the pool redoes it until the
 * respawn bound, then the stream fails with SP_ELIMIT, naming it, with
 * nothing substituted (on_error substitute) and every batch before it the
 * in-process one. */
static void test_respawn_bound(void) {
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("the crash hook (SEEDPIPE_TEST_CRASH_SAMPLE/_SIGNAL) is compiled only into builds "
         "configured with -DSEEDPIPE_TEST_HOOKS=ON");
#else
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    c.on_error = SP_ON_ERROR_SUBSTITUTE;
    stream ref, s;
    run_inproc(&c, &ref);
    hook(SIGKILL, 0);
    run_pool(&c, 2, 0, -1, -1, 0, &s);
    unhook();
    printf("  %s\n", s.msg);
    CHECK_MSG(s.rc == SP_ELIMIT && strstr(s.msg, "respawn bound reached") &&
                  strstr(s.msg, "SIGKILL") && strstr(s.msg, "nothing substituted"),
              "rc %d: %s", s.rc, s.msg);
    CHECK_MSG(s.deaths == SP_POOL_RESPAWN_BOUND(2) + 1, "%llu deaths",
              (unsigned long long)s.deaths);
    CHECK(s.n < ref.n / EPOCHS && s.nfail == 0);
    for (int i = 0; i < s.n; i++)
        CHECK_MSG(s.d[i].hi == ref.d[i].hi && s.d[i].lo == ref.d[i].lo && s.nsubst[i] == 0,
                  "batch %d before the bound differs", i);
#endif
}

static void test_state_refusal(void) {
    int png_ok = sp_test_corpus("pngsuite", "the other-dataset state refusal");
    sp_loader_config c;
    cfg_of(&c, shapes, PIPE, 77, 8);
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    sp_loader_state st;
    sp_loader_state_at(ld, 1, 3, &st);
    CHECK_OK(sp_loader_state_check(ld, &st, &err), &err);
    sp_loader_destroy(ld);
    struct {
        const char *ds, *pipe;
        uint64_t seed;
        const char *word;
    } cases[] = {{png_ok ? png : NULL, PIPE, 77, "dataset"},
                 {shapes, "hflip p=0.5 | random_resized_crop size=24", 77, "pipeline"},
                 {shapes, PIPE, 78, "seed 77 in the state, 78 here"}};
    for (int i = 0; i < 3; i++) {
        if (!cases[i].ds) continue;   /* no PngSuite: no other dataset (SKIP above) */
        sp_loader_config o;
        cfg_of(&o, cases[i].ds, cases[i].pipe, cases[i].seed, 8);
        sp_pool_config pc = {2, 0, EPOCHS, &st, NULL, NULL};
        sp_pool *pool = NULL;
        CHECK(sp__pool_create(&o, &pc, &pool, &err) == SP_EMISMATCH);
        CHECK(pool == NULL);
        CHECK_MSG(strstr(err.msg, cases[i].word) != NULL, "\"%s\" lacks \"%s\"", err.msg,
                  cases[i].word);
        check_no_leaks();
    }
    /* Round trip through a file, and hostile texts. */
    char path[400];
    snprintf(path, sizeof path, "%s/state-%d.json", g_tmp, (int)getpid());
    CHECK_OK(sp_loader_state_save(path, &st, &err), &err);
    sp_loader_state back;
    CHECK_OK(sp_loader_state_load(path, &back, &err), &err);
    CHECK(memcmp(&st, &back, sizeof st) == 0);
    char text[1024];
    int n = sp_loader_state_format(&st, text, sizeof text);
    for (int cut = 0; cut < n - 2; cut += 7)
        CHECK(sp_loader_state_parse(text, (size_t)cut, &back, &err) == SP_EFORMAT);
    const char *hostile[] = {"", "[]", "{", "{\"seedpipe_state\":1}", "\"x\"", "nul",
                             "{\"a\":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]}", "{\"seed\":-1}",
                             "{\"seedpipe_state\":1e400}", "\xff\xfe"};
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++)
        CHECK(sp_loader_state_parse(hostile[i], strlen(hostile[i]), &back, &err) == SP_EFORMAT);
    /* A key given twice, an unknown key, a wrong type. */
    char t2[1200];
    snprintf(t2, sizeof t2, "{\"seed\":1,%s", text + 1);
    CHECK(sp_loader_state_parse(t2, strlen(t2), &back, &err) == SP_EFORMAT);
    CHECK(strstr(err.msg, "twice") != NULL);
    snprintf(t2, sizeof t2, "{\"bogus\":1,%s", text + 1);
    CHECK(sp_loader_state_parse(t2, strlen(t2), &back, &err) == SP_EFORMAT);
    CHECK(strstr(err.msg, "bogus") != NULL);
    /* A blend's keys (ABI 6): the four round-trip; three of them, lists of
     * other lengths, a zero weight, a slot past 2^32 are refused. */
    const char *id = "\"blend_identity\":\"000102030405060708090a0b0c0d0e0f\"";
    snprintf(t2, sizeof t2, "{%s,\"blend_since\":[1,24],\"blend_weights\":[3,1],"
             "\"blend_draws\":[10,4],%s", id, text + 1);
    CHECK_OK(sp_loader_state_parse(t2, strlen(t2), &back, &err), &err);
    CHECK(back.blend_sources == 2 && back.blend_epoch == 1 && back.blend_slot == 24);
    CHECK(back.blend_weights[0] == 3 && back.blend_draws[1] == 4);
    char t3[SP_STATE_TEXT_MAX];
    CHECK(sp_loader_state_format(&back, t3, sizeof t3) < (int)sizeof t3);
    CHECK(strstr(t3, "\"blend_draws\":[10,4]") != NULL);
    const char *bad_blend[] = {
        "\"blend_since\":[1,24],\"blend_weights\":[3,1],",
        "\"blend_since\":[1,24],\"blend_weights\":[3,1],\"blend_draws\":[10],",
        "\"blend_since\":[1,24],\"blend_weights\":[3,0],\"blend_draws\":[10,4],",
        "\"blend_since\":[1,4294967297],\"blend_weights\":[3,1],\"blend_draws\":[10,4],",
        "\"blend_since\":[1],\"blend_weights\":[3,1],\"blend_draws\":[10,4],"};
    for (size_t i = 0; i < sizeof bad_blend / sizeof *bad_blend; i++) {
        snprintf(t2, sizeof t2, "{%s%s%s", i ? id : "", i ? "," : "", bad_blend[i]);
        snprintf(t2 + strlen(t2), sizeof t2 - strlen(t2), "%s", text + 1);
        CHECK_MSG(sp_loader_state_parse(t2, strlen(t2), &back, &err) == SP_EFORMAT,
                  "blend case %zu parsed", i);
        CHECK(strstr(err.msg, "blend") != NULL);
    }
}

static void test_worker_counts_shapes(void) { test_worker_counts(shapes, 8); }

static void test_worker_counts_pngsuite(void) {
    if (!sp_test_corpus("pngsuite", "the PngSuite ImageFolder's worker counts")) return;
    test_worker_counts(png, 16);
}

static void setup(void) {
    struct stat sb;
    have_png = stat(sp_test_data("pngsuite"), &sb) == 0;   /* the cases say SKIP */
    shm_before = count_shm();
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp-test-pool-XXXXXX");
    CHECK(mkdtemp(g_tmp) != NULL);
    snprintf(shapes, sizeof shapes, "%s/shapes", g_tmp);
    snprintf(png, sizeof png, "%s/png", g_tmp);
    snprintf(pngbad, sizeof pngbad, "%s/pngbad", g_tmp);
    CHECK(mkdir(png, 0755) == 0 && mkdir(pngbad, 0755) == 0);
    sp_shapes_opts o = {60, 32, 3};
    sp_error err;
    CHECK_OK(sp_shapes_make(shapes, &o, &err), &err);
    if (have_png) make_png_sets();
}

static void teardown(void) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_worker_counts_shapes),
    SP_CASE(test_worker_counts_pngsuite),
    SP_CASE(test_per_worker_mode),
    SP_CASE(test_on_error),
    SP_CASE(test_crashing_sample),
    SP_CASE(test_kills_at_start),
    SP_CASE(test_kills_same_sample),
    SP_CASE(test_crash_signals),
    SP_CASE(test_outside_crash_signals),
    SP_CASE(test_respawn_bound),
    SP_CASE(test_state_refusal),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

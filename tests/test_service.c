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
#include "loader/ring_internal.h"
#include "seedpipe/client.h"
#include "seedpipe/service.h"
#include "seedpipe/shapes.h"
#include "seedpipe/state.h"

#define EPOCHS 2
#define MAXB 64

static char shapes[256], shapes_bad[256];
static char prefix[64];
static int name_no;
static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3";

static const char *new_name(void) {
    static char buf[96];
    snprintf(buf, sizeof buf, "%s-%d", prefix, name_no++);
    return buf;
}

static int ours_in_shm(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
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
    uint64_t nb = sp_loader_batches_per_epoch(ld);
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
    sp_service_config sc = {name, world, workers, ring, EPOCHS, NULL, NULL, NULL};
    pid_t pid;
    sp_error err;
    CHECK_OK(sp_service_fork(c, &sc, &pid, &err), &err);
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
    CHECK(sp_client_attach(name, 1, &cl, &err) == SP_EINVAL);
    CHECK_MSG(strstr(err.msg, "world 1") != NULL, "%s", err.msg);
    sp_digest wrong = {1, 2};
    sp_client_opts o = {0, &wrong, 0};
    CHECK(sp_client_attach_opts(name, 0, &o, &cl, &err) == SP_EMISMATCH);
    CHECK_OK(sp_client_attach(name, 0, &cl, &err), &err);
    sp_client *cl2;
    CHECK(sp_client_attach(name, 0, &cl2, &err) == SP_EIO);   /* rank taken */
    CHECK_MSG(strstr(err.msg, "attached by pid") != NULL, "%s", err.msg);
    sp_client_info info;
    sp_client_info_get(cl, &info);
    CHECK(info.world == 1 && info.ring_slots == 3 && info.total == (uint64_t)r.n);

    sp_batch v[3], extra;
    int n = 0;
    /* Hold R = 3, a 4th is refused; release out of order; double release refused. */
    for (int k = 0; k < 3; k++) {
        CHECK_OK(sp_client_next(cl, &v[k], &err), &err);
        CHECK(same_digest(sp_client_batch_digest(cl, &v[k]), r.d[n]));
        CHECK(v[k].epoch == 0 && v[k].index == (uint64_t)k);
        n++;
    }
    CHECK(sp_client_next(cl, &extra, &err) == SP_EINVAL);
    sp_batch copy = v[1];
    CHECK_OK(sp_client_release(cl, &v[1], &err), &err);
    CHECK(v[1].images == NULL);
    CHECK(sp_client_release(cl, &v[1], &err) == SP_EINVAL);
    CHECK(sp_client_release(cl, &copy, &err) == SP_EINVAL);   /* a copy, released twice */
    CHECK_MSG(strstr(err.msg, "not held") != NULL, "%s", err.msg);
    sp_batch forged = v[0];
    forged.images += 1;
    CHECK(sp_client_release(cl, &forged, &err) == SP_EINVAL);
    CHECK_OK(sp_client_release(cl, &v[2], &err), &err);
    CHECK_OK(sp_client_release(cl, &v[0], &err), &err);
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    uint64_t nb = sp_loader_batches_per_epoch(ld);
    for (;;) {
        sp_batch b;
        int rc = sp_client_next(cl, &b, &err);
        if (rc == SP_CLIENT_END) break;
        CHECK_OK(rc, &err);
        CHECK(n < r.n);
        CHECK_MSG(same_digest(sp_client_batch_digest(cl, &b), r.d[n]), "batch %d differs", n);
        CHECK(b.epoch == (uint32_t)(n / (int)nb) && b.index == (uint64_t)n % nb);
        n++;
        if (n == 7) {   /* the state names the next batch */
            sp_loader_state st, want;
            sp_client_state(cl, &st);
            sp_loader_state_at(ld, 0, 7, &want);
            CHECK(memcmp(&st, &want, sizeof st) == 0);
            CHECK_OK(sp_loader_state_check(ld, &st, &err), &err);
        }
        CHECK_OK(sp_client_release(cl, &b, &err), &err);
    }
    CHECK(n == r.n);
    sp_batch b;
    CHECK(sp_client_next(cl, &b, &err) == SP_CLIENT_END);
    sp_loader_state st, want;
    sp_client_state(cl, &st);
    sp_loader_state_at(ld, EPOCHS, 0, &want);
    CHECK(st.epoch == want.epoch && st.batch == 0);
    sp_loader_destroy(ld);
    sp_client_detach(cl);
    CHECK(sp_service_join(pid, 10000) == 0);
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
    for (uint32_t k = 0; k < 2; k++) CHECK_OK(sp_client_attach(name, k, &cl[k], &err), &err);
    sp_loader *ld;
    CHECK_OK(sp_loader_create(&c, &ld, &err), &err);
    sp_batch cat;
    CHECK(sp_batch_alloc(ld, &cat) == 0);
    size_t sb = sp_loader_sample_bytes(ld);
    int n = 0, skipped = 0;
    for (;;) {
        sp_batch v[2];
        int rc0 = sp_client_next(cl[0], &v[0], &err);
        if (rc0 == SP_CLIENT_END) {
            CHECK(sp_client_next(cl[1], &v[1], &err) == SP_CLIENT_END);
            break;
        }
        CHECK_OK(rc0, &err);
        CHECK_OK(sp_client_next(cl[1], &v[1], &err), &err);
        cat.count = 0;
        for (int k = 0; k < 2; k++) {
            CHECK_MSG(same_digest(sp_client_batch_digest(cl[k], &v[k]), rk[k].d[n]),
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
        for (int k = 1; k >= 0; k--) CHECK_OK(sp_client_release(cl[k], &v[k], &err), &err);
    }
    CHECK(n == g.n);
    CHECK(on_error != SP_ON_ERROR_SKIP || skipped == EPOCHS);
    sp_batch_free(&cat);
    sp_loader_destroy(ld);
    for (int k = 0; k < 2; k++) sp_client_detach(cl[k]);
    CHECK(sp_service_join(pid, 10000) == 0);
    check_no_leaks();
    printf("  2 ranks (%s): %d batches, slices and concatenation equal\n", what, n);
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
    h->sample_bytes = sp_loader_sample_bytes(ld);
    CHECK_OK(sp__ring_layout(h, &err), &err);
    h->magic = SP__RING_MAGIC;
    h->version = SP__RING_VERSION;
    sp_loader_state st;
    sp_loader_state_at(ld, 0, 0, &st);
    sp_loader_state_format(&st, h->state_text, sizeof h->state_text);
    h->fp_hi = st.fingerprint.hi;
    h->fp_lo = st.fingerprint.lo;
    h->batches_per_epoch = sp_loader_batches_per_epoch(ld);
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
    int rc = sp_client_attach_opts(name, 0, &o, &cl, &err);
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
    CHECK(sp_client_attach("a/b", 0, &cl, &err) == SP_EINVAL);
    CHECK(sp_client_attach("", 0, &cl, &err) == SP_EINVAL);
    CHECK(sp_client_attach("..", 0, &cl, &err) == SP_EINVAL);
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(sp_client_attach(big, 0, &cl, &err) == SP_EINVAL);

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
        CHECK(sp_client_attach_opts(name, 0, &fo, &cl, &err) == SP_EIO);
        CHECK_MSG(strstr(err.msg, "did not answer") != NULL, "%s", err.msg);   /* got past it */
        sp_loader_config fc;
        cfg_of(&fc, shapes, 0, 1);
        sp_service_config fsc = {name, 1, 1, 0, 1, NULL, NULL, NULL};
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
        int rc = sp_client_attach_opts(name, 0, &o, &cl, &err);
        if (rc == 0) {   /* the flip hit padding: attach works (a service answered?) */
            attached++;
            sp_client_detach(cl);
        }
        sp_service_status_read(name, &sst, &err);
    }
    printf("    300 random corruptions: no crash (%d attached)\n", attached);
    /* A service refuses a foreign file with its name; removes a stale one. */
    sp_loader_config c;
    cfg_of(&c, shapes, 0, 1);
    sp_service_config sc = {name, 1, 1, 0, 1, NULL, NULL, NULL};
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
    sp_service_config sc = {name, 1, 1, 0, EPOCHS, NULL, NULL, NULL};
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
    CHECK(sp_client_attach(name, 0, &cl, &err) == SP_EIO);
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
        if (sp_client_attach(name, 1, &cl, &e) != 0) _exit(3);
        sp_batch v[2];
        for (int i = 0; i < 2; i++)
            if (sp_client_next(cl, &v[i], &e) != 0) _exit(4);
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
    CHECK_OK(sp_client_attach(name, 0, &c0, &err), &err);
    int n = 0, n1 = 0;
    int64_t first1 = -1;
    for (;;) {
        sp_batch b;
        int rc = sp_client_next(c0, &b, &err);
        if (rc == SP_CLIENT_END) break;
        CHECK_OK(rc, &err);
        CHECK_MSG(same_digest(sp_client_batch_digest(c0, &b), rk[0].d[n]), "rank 0 batch %d", n);
        n++;
        CHECK_OK(sp_client_release(c0, &b, &err), &err);
        if (n == 10) {   /* rank 1 comes back */
            CHECK_OK(sp_client_attach(name, 1, &c1, &err), &err);
            sp_client_info info;
            sp_client_info_get(c1, &info);
            first1 = (int64_t)info.first;
            n1 = (int)info.first;
            CHECK_MSG(first1 >= 2 && first1 <= 10, "re-attached at %lld", (long long)first1);
        }
        if (c1)
            while (n1 < n) {
                sp_batch b1;
                CHECK_OK(sp_client_next(c1, &b1, &err), &err);
                CHECK_MSG(same_digest(sp_client_batch_digest(c1, &b1), rk[1].d[n1]),
                          "re-attached rank 1 batch %d", n1);
                n1++;
                CHECK_OK(sp_client_release(c1, &b1, &err), &err);
            }
    }
    CHECK(n == rk[0].n && n1 == rk[1].n);
    sp_service_status st;
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    CHECK_MSG(st.client_deaths == 1, "%u client deaths", st.client_deaths);
    CHECK(st.ranks[1].attaches == 2 && st.ranks[1].deaths == 1);
    sp_client_detach(c0);
    sp_client_detach(c1);
    CHECK(sp_service_join(svc, 10000) == 0);
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
    CHECK_OK(sp_client_attach(name, 0, &cl, &err), &err);
    sp_batch b[2];
    CHECK_OK(sp_client_next(cl, &b[0], &err), &err);
    CHECK_OK(sp_client_next(cl, &b[1], &err), &err);
    sp_service_status st;
    CHECK_OK(sp_service_status_read(name, &st, &err), &err);
    int wpids[2] = {st.workers[0].pid, st.workers[1].pid};
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(sp_service_join(pid, 5000) == 0);
    CHECK(!region_exists(name));
    CHECK(!sp__proc_alive(wpids[0], 0) && !sp__proc_alive(wpids[1], 0));
    /* The held views stay readable; more batches are an error, not a hang. */
    CHECK(b[0].images[0] == b[0].images[0]);
    CHECK_OK(sp_client_release(cl, &b[0], &err), &err);
    CHECK_OK(sp_client_release(cl, &b[1], &err), &err);
    sp_batch v;
    int rc = sp_client_next(cl, &v, &err);
    CHECK_MSG(rc == SP_EIO && strstr(err.msg, "stopped") != NULL, "rc %d: %s", rc, err.msg);
    printf("  sigterm: %s\n", err.msg);
    sp_client_detach(cl);
    check_no_leaks();
}

static void make_bad_copy(void) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -r '%s/.' '%s/' && printf 'not an image' > '%s/circle/zz-bad.png'",
             shapes, shapes_bad, shapes_bad);
    CHECK(system(cmd) == 0);
}

int main(void) {
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

    test_one_client();
    test_ranks(shapes, SP_ON_ERROR_FAIL, "clean");
    test_ranks(shapes_bad, SP_ON_ERROR_SKIP, "corrupt file, skip");
    test_hostile();
    test_stale_and_live();
    test_dead_client();
    test_sigterm();

    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", shapes, shapes_bad);
    CHECK(system(cmd) == 0);
    check_no_leaks();
    printf("service: all checks passed\n");
    return 0;
}

/* test_cache.c - the epoch cache never changes a byte and never serves damage.
 *
 * On a small shapes dataset: cold-then-warm streams through
 * sp__cache_epoch_batch() give the uncached sp_loader_batch() digests (1 and
 * 2 threads, uint8 and float32 with the shuffle filter, on-error skip with
 * its lists and failure log); hundreds of single-byte flips at random
 * offsets in every file of an entry are each caught, reported once with the
 * path, the entry moved aside, and the stream stays correct; truncation at
 * many points likewise; a missing manifest is a miss; an entry of another
 * format version is refused; 2-4 forked writers of one key (with and
 * without the lock) leave exactly one valid entry and no staging files; a
 * full disk (a 24 KiB tmpfs when mount works, RLIMIT_FSIZE, and the
 * injected-failure hook, compiled only with SEEDPIPE_TEST_HOOKS: without it
 * the case runs the rest and then skips) leaves no entry and no temp files
 * while the stream goes on; gc evicts least recently used first and never a live writer's
 * staging directory; verify reports a header claiming huge metadata.
 *
 * Cases (tests/runner.h; each in its own process, with its own cache folder
 * under one mkdtemp root that setup fills with the shapes dataset):
 * test_cold_warm, test_on_error_skip (makes its own broken copy),
 * test_damage_uint8, test_damage_float32, test_concurrent, test_full_disk,
 * test_gc, test_verify_hostile_header.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "check.h"
#include "runner.h"
#include "cache/cache_internal.h"
#include "seedpipe/cache.h"
#include "seedpipe/loader.h"
#include "seedpipe/shapes.h"
#include "loader_check.h"

#define NSAMPLES 40
#define BATCH 8
#define NB ((NSAMPLES + BATCH - 1) / BATCH)
#define EPOCHS 2

static char root[256], data[300], bad_data[300];
static const char *PIPE = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                          "color_jitter brightness=0.3 contrast=0.3 saturation=0.3";
static const char *PIPE_F = "random_resized_crop size=24 scale=0.3,1 | hflip p=0.5 | "
                            "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225";

/* ---- helpers ------------------------------------------------------------------------ */

static sp_loader *make(const char *ds, const char *pipe, int threads, sp_dtype dt,
                       sp_on_error oe) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = ds;
    cfg.pipeline = pipe;
    cfg.seed = 77;
    cfg.batch_size = BATCH;
    cfg.threads = threads;
    cfg.dtype = dt;
    cfg.on_error = oe;
    sp_loader *ld;
    sp_error err;
    CHECK_OK(sp_loader_create(&cfg, &ld, &err), &err);
    return ld;
}

static int eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static void ref_digests(sp_loader *ld, sp_digest *out) {
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = 0; e < EPOCHS; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            out[e * NB + i] = sp_batch_digest(ld, &b);
        }
    sp_batch_free(&b);
}

/* Warnings collected from the cache. */
typedef struct warns {
    int n;
    char last[SP_ERROR_MSG_MAX + 128];
} warns;
static void on_warn(void *ud, const char *msg) {
    warns *w = ud;
    w->n++;
    snprintf(w->last, sizeof w->last, "%s", msg);
}

static sp_cache *open_cache(const char *dir, warns *w, int no_lock) {
    sp_cache_opts o;
    sp_cache_opts_default(&o);
    o.no_fsync = 1;   /* tmp dirs; correctness never depends on fsync */
    o.no_lock = no_lock;
    o.warn = on_warn;
    o.warn_ud = w;
    sp_cache *c;
    sp_error err;
    CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
    return c;
}

/* Stream epochs [e0, e1) through the cache; check every digest. */
static void stream_check(sp_cache *c, sp_loader *ld, uint32_t e0, uint32_t e1,
                         const sp_digest *ref) {
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = e0; e < e1; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp__cache_epoch_batch(c, ld, e, i, &b, &err), &err);
            CHECK_MSG(eq(sp_batch_digest(ld, &b), ref[e * NB + i]),
                      "epoch %u batch %llu differs from the uncached stream", e,
                      (unsigned long long)i);
        }
    sp_cache_flush(c);
    sp_batch_free(&b);
}

static void rmrf(const char *p) { CHECK(sp__rmtree_at(AT_FDCWD, p) == 0); }

/* Number of entries in a directory (not . and ..). */
static int count_dir(const char *p) {
    DIR *d = opendir(p);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void entry_path(const char *dir, sp_loader *ld, uint32_t epoch, char *out, size_t cap) {
    char hex[33];
    sp_digest_hex(sp__cache_key(ld, epoch), hex);
    snprintf(out, cap, "%s/%s", dir, hex);
}

static size_t read_all(const char *p, uint8_t **buf) {
    FILE *f = fopen(p, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)n + 1);
    CHECK(fread(*buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    return (size_t)n;
}

static void write_all(const char *p, const uint8_t *buf, size_t n) {
    FILE *f = fopen(p, "wb");
    CHECK(f);
    CHECK(fwrite(buf, 1, n, f) == n);
    CHECK(fclose(f) == 0);
}

/* Copy a flat directory (an entry). */
static void copy_tree(const char *from, const char *to) {
    rmrf(to);
    CHECK(mkdir(to, 0755) == 0);
    DIR *d = opendir(from);
    CHECK(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        uint8_t *buf;
        size_t n = read_all(a, &buf);
        write_all(b, buf, n);
        free(buf);
    }
    closedir(d);
}

/* A tiny deterministic generator for test offsets (tests only). */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- tests -------------------------------------------------------------------------- */

static void cold_warm(const char *dir) {
    sp_digest ref[EPOCHS * NB];
    sp_loader *l0 = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    ref_digests(l0, ref);
    sp_loader_destroy(l0);
    for (int threads = 1; threads <= 2; threads++) {
        rmrf(dir);
        sp_loader *ld = make(data, PIPE, threads, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
        warns w = {0, ""};
        sp_cache *c = open_cache(dir, &w, 0);
        stream_check(c, ld, 0, EPOCHS, ref);   /* cold */
        sp_cache_stats s;
        sp_cache_stats_get(c, &s);
        CHECK(s.misses == EPOCHS && s.hits == 0 && s.committed == EPOCHS);
        CHECK(s.batches_written == EPOCHS * NB && w.n == 0);
        sp_cache_close(c);
        c = open_cache(dir, &w, 0);
        stream_check(c, ld, 0, EPOCHS, ref);   /* warm */
        sp_cache_stats_get(c, &s);
        CHECK(s.hits == EPOCHS && s.misses == 0 && s.batches_read == EPOCHS * NB);
        CHECK(s.batches_computed == 0 && w.n == 0);
        /* Another seed is another key: a miss. */
        sp_cache_reader *r;
        sp_error err;
        sp_loader_config cfg = *ld_info(ld).config;
        cfg.seed = 78;
        sp_loader *l2;
        CHECK_OK(sp_loader_create(&cfg, &l2, &err), &err);
        CHECK(sp_cache_reader_open(c, l2, 0, &r, &err) == SP_CACHE_MISS && !r);
        CHECK(!eq(sp__cache_key(l2, 0), sp__cache_key(ld, 0)));
        CHECK(!eq(sp__cache_key(ld, 1), sp__cache_key(ld, 0)));
        sp_loader_destroy(l2);
        sp_cache_close(c);
        sp_loader_destroy(ld);
    }
    /* float32: dictionary-coded (NCHW, NHWC), byte-shuffled, unfiltered. */
    for (int v = 0; v < 4; v++) {
        rmrf(dir);
        sp_loader_config cfg;
        sp_loader_config_default(&cfg);
        cfg.dataset = data;
        cfg.pipeline = v == 3 ? PIPE : PIPE_F;
        cfg.seed = 77;
        cfg.batch_size = BATCH;
        cfg.threads = 2;
        cfg.dtype = SP_DTYPE_FLOAT32;
        cfg.layout = v == 1 ? SP_LAYOUT_NHWC : SP_LAYOUT_NCHW;
        sp_loader *lf;
        sp_error err;
        CHECK_OK(sp_loader_create(&cfg, &lf, &err), &err);
        ref_digests(lf, ref);
        warns w = {0, ""};
        sp_cache_opts o;
        sp_cache_opts_default(&o);
        o.no_fsync = 1;
        o.warn = on_warn;
        o.warn_ud = &w;
        o.filter = v == 2 ? 1 : 0;   /* v 3: a float pipeline without normalize */
        sp_cache *c;
        CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
        stream_check(c, lf, 0, EPOCHS, ref);
        sp_cache_close(c);
        CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
        stream_check(c, lf, 0, EPOCHS, ref);
        sp_cache_stats s;
        sp_cache_stats_get(c, &s);
        CHECK(s.batches_read == EPOCHS * NB && w.n == 0);
        /* The dictionary stores about a byte per value, not four. */
        if (v != 2) CHECK_MSG(s.bytes_read * 3 < s.raw_read, "stored %llu of %llu raw",
                              (unsigned long long)s.bytes_read, (unsigned long long)s.raw_read);
        sp_cache_close(c);
        sp_loader_destroy(lf);
    }
    printf("cold/warm: digests equal for threads 1, 2, uint8 and float32 (4 filters)\n");
}

static void on_error_skip(const char *dir) {
    rmrf(dir);
    sp_digest ref[EPOCHS * NB];
    sp_loader *l0 = make(bad_data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_SKIP);
    ref_digests(l0, ref);
    size_t nf = sp_loader_failure_count(l0);
    CHECK(nf >= 1);
    char msg0[SP_ERROR_MSG_MAX];
    sp_failure f0;
    CHECK(sp_loader_failure_get(l0, 0, &f0) == 0);
    snprintf(msg0, sizeof msg0, "%s", f0.msg);
    sp_loader_destroy(l0);
    for (int round = 0; round < 2; round++) {   /* cold, warm */
        sp_loader *ld = make(bad_data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_SKIP);
        warns w = {0, ""};
        sp_cache *c = open_cache(dir, &w, 0);
        stream_check(c, ld, 0, EPOCHS, ref);
        sp_cache_stats s;
        sp_cache_stats_get(c, &s);
        CHECK(round == 0 ? s.committed == EPOCHS : s.batches_read == EPOCHS * NB);
        CHECK_MSG(sp_loader_failure_count(ld) == nf, "failure log %zu vs %zu",
                  sp_loader_failure_count(ld), nf);
        CHECK(sp_loader_failure_get(ld, 0, &f0) == 0 && strcmp(f0.msg, msg0) == 0);
        sp_cache_close(c);
        sp_loader_destroy(ld);
    }
    printf("on-error skip: lists, digests and failure log equal cold and warm\n");
}

/* Run the whole epoch 0 through a fresh handle: digests right, #warnings. */
static int run_epoch0(const char *dir, sp_loader *ld, const sp_digest *ref, warns *w) {
    w->n = 0;
    w->last[0] = '\0';
    sp_cache *c = open_cache(dir, w, 0);
    stream_check(c, ld, 0, 1, ref);
    sp_cache_stats s;
    sp_cache_stats_get(c, &s);
    sp_cache_close(c);
    return (int)s.corrupt;
}

static void damage(const char *dir, sp_dtype dt) {
    rmrf(dir);
    char backup[400], entry[600], corrupt[320], tmp[320];
    snprintf(backup, sizeof backup, "%s.pristine", dir);
    snprintf(corrupt, sizeof corrupt, "%s/.corrupt", dir);
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    sp_digest ref[EPOCHS * NB];
    sp_loader *ld = make(data, dt == SP_DTYPE_UINT8 ? PIPE : PIPE_F, 1, dt, SP_ON_ERROR_FAIL);
    ref_digests(ld, ref);
    warns w;
    CHECK(run_epoch0(dir, ld, ref, &w) == 0 && w.n == 0);
    entry_path(dir, ld, 0, entry, sizeof entry);
    copy_tree(entry, backup);
    /* The files of the entry and their sizes. */
    char files[NB + 1][700];
    size_t sizes[NB + 1], total = 0;
    for (int i = 0; i <= NB; i++) {
        if (i < NB) snprintf(files[i], sizeof files[i], "%s/b%08d", entry, i);
        else snprintf(files[i], sizeof files[i], "%s/MANIFEST", entry);
        struct stat st;
        CHECK(stat(files[i], &st) == 0);
        sizes[i] = (size_t)st.st_size;
        total += sizes[i];
    }
    /* Byte flips: every one caught, reported once with the path, stream right. */
    int flips = 400;
    for (int k = 0; k < flips; k++) {
        copy_tree(backup, entry);
        rmrf(corrupt);
        size_t off = (size_t)(rnd() % total);
        int f = 0;
        while (off >= sizes[f]) off -= sizes[f++];
        uint8_t *buf;
        size_t n = read_all(files[f], &buf);
        buf[off] ^= (uint8_t)(1 + rnd() % 255);
        write_all(files[f], buf, n);
        free(buf);
        int bad = run_epoch0(dir, ld, ref, &w);
        CHECK_MSG(bad == 1 && w.n == 1, "flip %d in %s at %zu: %d corrupt, %d warnings", k,
                  files[f], off, bad, w.n);
        CHECK_MSG(strstr(w.last, files[f]) != NULL, "message \"%s\" lacks the path", w.last);
        CHECK(count_dir(corrupt) == 1);   /* moved aside, once */
    }
    printf("damage (%s): %d/%d byte flips caught (entry of %zu bytes)\n", sp_dtype_name(dt),
           flips, flips, total);
    /* Truncation at many points of every file. */
    int cuts = 0;
    for (int f = 0; f <= NB; f++) {
        size_t pts[12] = {0, 1, 7, 64, 127, 128, 129, sizes[f] / 2, sizes[f] - 1,
                          (size_t)(rnd() % sizes[f]), (size_t)(rnd() % sizes[f]),
                          (size_t)(rnd() % sizes[f])};
        for (int p = 0; p < 12; p++) {
            if (pts[p] >= sizes[f]) continue;
            copy_tree(backup, entry);
            rmrf(corrupt);
            CHECK(truncate(files[f], (off_t)pts[p]) == 0);
            int bad = run_epoch0(dir, ld, ref, &w);
            CHECK_MSG(bad == 1 && w.n == 1 && strstr(w.last, files[f]),
                      "cut %s at %zu: %d corrupt, %d warnings: %s", files[f], pts[p], bad, w.n,
                      w.last);
            cuts++;
        }
    }
    /* An appended byte too. */
    copy_tree(backup, entry);
    {
        FILE *fa = fopen(files[0], "ab");
        CHECK(fa && fputc(0, fa) == 0 && fclose(fa) == 0);
    }
    CHECK(run_epoch0(dir, ld, ref, &w) == 1 && w.n == 1);
    printf("damage: %d truncations and an extension caught\n", cuts);

    /* Missing manifest: a miss (reported), the stream is computed and rebuilt. */
    copy_tree(backup, entry);
    CHECK(unlink(files[NB]) == 0);
    sp_cache *c = open_cache(dir, &w, 0);
    sp_cache_reader *r;
    sp_error err;
    sp_error_clear(&err);
    CHECK(sp_cache_reader_open(c, ld, 0, &r, &err) == SP_CACHE_MISS && !r);
    CHECK_MSG(strstr(err.msg, "missing manifest") && strstr(err.msg, entry), "%s", err.msg);
    CHECK(!exists(entry));   /* moved aside */
    sp_cache_close(c);
    CHECK(run_epoch0(dir, ld, ref, &w) == 0 && exists(files[NB]));   /* rebuilt */
    /* A missing batch file: caught, not mistaken for eviction. */
    copy_tree(backup, entry);
    CHECK(unlink(files[2]) == 0);
    CHECK(run_epoch0(dir, ld, ref, &w) == 1 && strstr(w.last, "missing"));

    /* Another format version: refused, by the manifest and by a batch file. */
    copy_tree(backup, entry);
    char vnow[32], vother[32];
    snprintf(vnow, sizeof vnow, "seedpipe-cache %d\n", SP_CACHE_FORMAT_VERSION);
    snprintf(vother, sizeof vother, "format version %d", SP_CACHE_FORMAT_VERSION + 1);
    CHECK(SP_CACHE_FORMAT_VERSION + 1 < 10);   /* one digit, patched in place */
    {
        uint8_t *buf;
        size_t n = read_all(files[NB], &buf);
        CHECK(memcmp(buf, vnow, strlen(vnow)) == 0);
        buf[15] = (uint8_t)('0' + SP_CACHE_FORMAT_VERSION + 1);
        /* Re-seal the checksum so only the version is wrong. */
        size_t last = n - 1;
        while (buf[last - 1] != '\n') last--;
        char line[64];
        snprintf(line, sizeof line, "checksum %016llx\n",
                 (unsigned long long)XXH3_64bits(buf, last));
        memcpy(buf + last, line, strlen(line));
        write_all(files[NB], buf, n);
        free(buf);
        c = open_cache(dir, &w, 0);
        sp_error_clear(&err);
        CHECK(sp_cache_reader_open(c, ld, 0, &r, &err) == SP_CACHE_MISS);
        CHECK_MSG(strstr(err.msg, vother), "%s", err.msg);
        sp_cache_close(c);
    }
    copy_tree(backup, entry);
    {
        uint8_t *buf;
        size_t n = read_all(files[1], &buf);
        buf[8] = (uint8_t)(SP_CACHE_FORMAT_VERSION + 1);   /* format version field */
        write_all(files[1], buf, n);
        free(buf);
        CHECK(run_epoch0(dir, ld, ref, &w) == 1 && strstr(w.last, vother));
    }
    /* verify_entry: clean entry 0 problems, a flipped one 1, read-only. */
    copy_tree(backup, entry);
    c = open_cache(dir, &w, 0);
    char hex[33];
    sp_digest_hex(sp__cache_key(ld, 0), hex);
    uint64_t nbad;
    CHECK_OK(sp_cache_verify_entry(c, hex, NULL, NULL, &nbad, &err), &err);
    CHECK(nbad == 0);
    {
        uint8_t *buf;
        size_t n = read_all(files[3], &buf);
        buf[n / 2] ^= 0x40;
        write_all(files[3], buf, n);
        free(buf);
    }
    CHECK_OK(sp_cache_verify_entry(c, hex, NULL, NULL, &nbad, &err), &err);
    CHECK(nbad == 1 && exists(entry));
    sp_cache_close(c);
    CHECK(count_dir(tmp) == 0);
    rmrf(backup);
    sp_loader_destroy(ld);
    printf("damage: missing manifest, missing file, format version 2, verify\n");
}

/* Fork n writers of the same epochs at once. */
static void race(const char *dir, int n, int no_lock, const sp_digest *ref) {
    rmrf(dir);
    int go[2];
    CHECK(pipe(go) == 0);
    fflush(stdout);
    pid_t pids[8];
    for (int k = 0; k < n; k++) {
        pids[k] = fork();
        CHECK(pids[k] >= 0);
        if (pids[k] == 0) {
            close(go[1]);
            char ch;
            (void)!read(go[0], &ch, 1);   /* wait for the start */
            sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
            warns w = {0, ""};
            sp_cache *c = open_cache(dir, &w, no_lock);
            stream_check(c, ld, 0, EPOCHS, ref);   /* exits 1 on a wrong byte */
            sp_cache_close(c);
            sp_loader_destroy(ld);
            _exit(w.n == 0 ? 0 : 3);
        }
    }
    close(go[0]);
    close(go[1]);   /* everyone starts now */
    for (int k = 0; k < n; k++) {
        int st;
        CHECK(waitpid(pids[k], &st, 0) == pids[k]);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d: status %d", k, st);
    }
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    CHECK(count_dir(tmp) == 0);
    /* Exactly the entries of the epochs (+ 3 bookkeeping dirs), each valid. */
    CHECK(count_dir(dir) == EPOCHS + 3);
    sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    warns w = {0, ""};
    sp_cache *c = open_cache(dir, &w, 0);
    sp_error err;
    for (uint32_t e = 0; e < EPOCHS; e++) {
        char hex[33];
        uint64_t nbad;
        sp_digest_hex(sp__cache_key(ld, e), hex);
        CHECK_OK(sp_cache_verify_entry(c, hex, NULL, NULL, &nbad, &err), &err);
        CHECK(nbad == 0);
    }
    stream_check(c, ld, 0, EPOCHS, ref);
    sp_cache_stats s;
    sp_cache_stats_get(c, &s);
    CHECK(s.batches_read == EPOCHS * NB && w.n == 0);
    sp_cache_close(c);
    sp_loader_destroy(ld);
}

static void concurrent(const char *dir) {
    sp_digest ref[EPOCHS * NB];
    sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    ref_digests(ld, ref);
    sp_loader_destroy(ld);
    for (int n = 2; n <= 4; n++) {
        race(dir, n, 0, ref);
        race(dir, n, 1, ref);
    }
    /* The lockless race made explicit: two complete writers, one commit wins. */
    rmrf(dir);
    ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    warns w = {0, ""};
    sp_cache *c = open_cache(dir, &w, 1);
    sp_cache_writer *w1, *w2;
    sp_error err;
    CHECK_OK(sp__cache_writer_open(c, ld, 0, &w1, &err), &err);
    CHECK_OK(sp__cache_writer_open(c, ld, 0, &w2, &err), &err);
    sp_batch b;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint64_t i = 0; i < NB; i++) {
        CHECK_OK(sp_loader_batch(ld, 0, i, &b, &err), &err);
        CHECK_OK(sp__cache_writer_put(w1, &b, &err), &err);
        CHECK_OK(sp__cache_writer_put(w2, &b, &err), &err);
    }
    CHECK(sp__cache_writer_put(w2, &b, &err) == SP_EINVAL);   /* twice */
    CHECK_OK(sp__cache_writer_commit(w1, &err), &err);
    CHECK_OK(sp__cache_writer_commit(w2, &err), &err);
    sp_cache_stats s;
    sp_cache_stats_get(c, &s);
    CHECK(s.committed == 1 && s.lost_races == 1);
    /* With the lock: the second writer is told to skip. */
    sp_cache_close(c);
    c = open_cache(dir, &w, 0);
    CHECK_OK(sp__cache_writer_open(c, ld, 1, &w1, &err), &err);
    sp_cache *c2 = open_cache(dir, &w, 0);
    CHECK(sp__cache_writer_open(c2, ld, 1, &w2, &err) == SP_CACHE_SKIP && !w2);
    CHECK(strstr(err.msg, "another process"));
    CHECK(sp__cache_writer_open(c2, ld, 0, &w2, &err) == SP_CACHE_SKIP);   /* exists */
    sp__cache_writer_abort(w1);
    CHECK_OK(sp__cache_writer_open(c2, ld, 1, &w2, &err), &err);   /* lock released */
    sp__cache_writer_abort(w2);
    sp_cache_close(c2);
    sp_cache_close(c);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    printf("concurrent: 2-4 writers with and without the lock leave one valid entry\n");
}

/* After a failed write: no entry, nothing in .tmp, the stream right. */
static void check_full_disk(const char *dir, sp_loader *ld, const sp_digest *ref,
                            const char *what) {
    warns w = {0, ""};
    sp_cache *c = open_cache(dir, &w, 0);
    stream_check(c, ld, 0, 1, ref);
    sp_cache_stats s;
    sp_cache_stats_get(c, &s);
    sp_cache_close(c);
    char entry[600], tmp[320];
    entry_path(dir, ld, 0, entry, sizeof entry);
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    CHECK_MSG(w.n == 1 && strstr(w.last, "continues uncached"), "%s: %d warnings: %s", what, w.n,
              w.last);
    CHECK_MSG(s.write_failures == 1 && s.committed == 0, "%s", what);
    CHECK_MSG(!exists(entry) && count_dir(tmp) == 0, "%s: partial files left", what);
    printf("full disk (%s): %s\n", what, w.last);
}

static void full_disk(const char *dir) {
    sp_digest ref[EPOCHS * NB];
    sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    ref_digests(ld, ref);
    /* Sizes of a complete entry, to aim the failures mid-epoch. */
    rmrf(dir);
    warns w;
    CHECK(run_epoch0(dir, ld, ref, &w) == 0);
    char entry[600], f0[700];
    entry_path(dir, ld, 0, entry, sizeof entry);
    snprintf(f0, sizeof f0, "%s/b%08d", entry, 0);
    struct stat st;
    CHECK(stat(f0, &st) == 0);
    size_t bsize = (size_t)st.st_size, stored = 0;
    for (int i = 0; i < NB; i++) {
        snprintf(f0, sizeof f0, "%s/b%08d", entry, i);
        CHECK(stat(f0, &st) == 0);
        stored += (size_t)st.st_size;
    }

    /* 1. A real full file system: a 24 KiB tmpfs, where mount works. */
    char mnt[300];
    snprintf(mnt, sizeof mnt, "%s/small", root);
    CHECK(mkdir(mnt, 0755) == 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=24k") == 0) {
        char cdir[400];
        snprintf(cdir, sizeof cdir, "%s/cache", mnt);
        check_full_disk(cdir, ld, ref, "24 KiB tmpfs");
        CHECK(umount(mnt) == 0);
    } else {
        printf("full disk: tmpfs mount not permitted here (%s); RLIMIT_FSIZE and the hook "
               "still run\n", strerror(errno));
    }
    /* 2. RLIMIT_FSIZE (EFBIG from the kernel), in a child. */
    rmrf(dir);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)(bsize / 2), (rlim_t)(bsize / 2)};
        CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
        check_full_disk(dir, ld, ref, "RLIMIT_FSIZE");
        fflush(stdout);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* 3. The injected failure, mid-epoch and on the manifest (the hook is
     * in test builds only). */
#ifdef SEEDPIPE_TEST_HOOKS
    rmrf(dir);
    atomic_store(&sp__cache_fail_after_bytes, (long long)(bsize * 5 / 2));
    check_full_disk(dir, ld, ref, "injected, batch 2");
    rmrf(dir);
    atomic_store(&sp__cache_fail_after_bytes, (long long)(stored + 10));
    check_full_disk(dir, ld, ref, "injected, manifest");
    atomic_store(&sp__cache_fail_after_bytes, 0);
#else
    (void)stored;
#endif
    /* And the cache works again afterwards. */
    rmrf(dir);
    CHECK(run_epoch0(dir, ld, ref, &w) == 0 && w.n == 0);
    sp_loader_destroy(ld);
#ifndef SEEDPIPE_TEST_HOOKS
    SKIP("full disk: the injected write failure (sp__cache_fail_after_bytes) is compiled only "
         "into builds configured with -DSEEDPIPE_TEST_HOOKS=ON; the tmpfs and RLIMIT_FSIZE "
         "parts ran");
#endif
}

static void set_mtime(const char *entry, time_t t) {
    char p[4096];
    snprintf(p, sizeof p, "%s/MANIFEST", entry);
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    CHECK(utimensat(AT_FDCWD, p, ts, 0) == 0);
}

static void gc(const char *dir) {
    rmrf(dir);
    sp_digest ref[4 * NB];
    sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    sp_batch b;
    sp_error err;
    CHECK(sp_batch_alloc(ld, &b) == 0);
    for (uint32_t e = 0; e < 4; e++)
        for (uint64_t i = 0; i < NB; i++) {
            CHECK_OK(sp_loader_batch(ld, e, i, &b, &err), &err);
            ref[e * NB + i] = sp_batch_digest(ld, &b);
        }
    warns w = {0, ""};
    sp_cache *c = open_cache(dir, &w, 0);
    stream_check(c, ld, 0, 4, ref);
    char ent[4][600];
    time_t t0 = time(NULL) - 1000;
    static const int age[4] = {10, 30, 20, 40};   /* LRU order: 0, 2, 1, 3 */
    uint64_t size[4];
    sp_cache_entry_info *info;
    size_t n;
    for (int e = 0; e < 4; e++) {
        entry_path(dir, ld, (uint32_t)e, ent[e], sizeof ent[e]);
        set_mtime(ent[e], t0 + age[e]);
    }
    CHECK_OK(sp_cache_list(c, &info, &n, &err), &err);
    CHECK(n == 4);
    for (int e = 0; e < 4; e++) {
        char hex[33];
        sp_digest_hex(sp__cache_key(ld, (uint32_t)e), hex);
        for (size_t k = 0; k < n; k++)
            if (!strcmp(info[k].key, hex)) {
                size[e] = info[k].disk_bytes;
                CHECK(info[k].ok && info[k].epoch == (uint32_t)e && info[k].batches == NB);
                CHECK(info[k].stored_bytes < info[k].raw_bytes);
            }
    }
    CHECK(!strcmp(info[0].key, strrchr(ent[3], '/') + 1));   /* most recent first */
    sp_cache_list_free(info, n);
    /* A live writer's staging dir (made old) and a dead one's survive / go. */
    sp_cache_writer *live;
    CHECK_OK(sp__cache_writer_open(c, ld, 9, &live, &err), &err);
    char stale[400], cmd[1200];
    snprintf(stale, sizeof stale, "%s/.tmp/deadbeef.1.0", dir);
    CHECK(mkdir(stale, 0755) == 0);
    snprintf(cmd, sizeof cmd, "touch -d '2 hours ago' %s/.tmp/*", dir);
    CHECK(system(cmd) == 0);
    sp_cache_gc_report rep;
    CHECK_OK(sp_cache_gc(c, size[1] + size[3], &rep, &err), &err);
    CHECK(rep.evicted == 2 && rep.entries_before == 4 && rep.stale_removed == 1);
    CHECK(!exists(ent[0]) && !exists(ent[2]) && exists(ent[1]) && exists(ent[3]));
    CHECK(rep.bytes_after == size[1] + size[3] && !exists(stale));
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s/.tmp", dir);
    CHECK(count_dir(tmp) == 1);   /* the live writer's */
    sp__cache_writer_abort(live);
    CHECK(count_dir(tmp) == 0);
    /* A hit refreshes the last use: entry 1 becomes the most recent. */
    sp_cache_reader *r;
    CHECK(sp_cache_reader_open(c, ld, 1, &r, &err) == 0);
    CHECK_OK(sp_cache_reader_batch(r, 0, &b, &err), &err);
    CHECK(eq(sp_batch_digest(ld, &b), ref[NB]));
    sp_cache_reader_close(r);
    CHECK_OK(sp_cache_gc(c, size[1], &rep, &err), &err);
    CHECK(rep.evicted == 1 && exists(ent[1]) && !exists(ent[3]));
    CHECK_OK(sp_cache_gc(c, 0, &rep, &err), &err);
    CHECK(rep.evicted == 1 && !exists(ent[1]));
    sp_cache_close(c);
    /* max_size on the handle: collected after each commit, newest kept. */
    rmrf(dir);
    sp_cache_opts o;
    sp_cache_opts_default(&o);
    o.no_fsync = 1;
    o.max_size = size[0] + size[0] / 2;   /* room for one entry */
    CHECK_OK(sp_cache_open(dir, &o, &c, &err), &err);
    stream_check(c, ld, 0, 3, ref);
    CHECK(!exists(ent[0]) && !exists(ent[1]) && exists(ent[2]));
    sp_cache_close(c);
    uint64_t v;
    CHECK(sp_parse_size("10M", &v, &err) == 0 && v == 10ull << 20);
    CHECK(sp_parse_size("2G", &v, &err) == 0 && v == 2ull << 30);
    CHECK(sp_parse_size("512", &v, &err) == 0 && v == 512);
    CHECK(sp_parse_size("1.5G", &v, &err) == SP_EINVAL);
    CHECK(sp_parse_size("-1", &v, &err) == SP_EINVAL);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
    printf("gc: least recently used first, hits refresh, live writers kept\n");
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A batch file whose checksums are right but whose header claims metadata
 * no batch can have (a hostile or buggy writer): verify must report it,
 * not allocate what it claims. The manifest is rewritten to match. */
static void verify_hostile_header(const char *dir) {
    rmrf(dir);
    sp_loader *ld = make(data, PIPE, 1, SP_DTYPE_UINT8, SP_ON_ERROR_FAIL);
    sp_digest ref[EPOCHS * NB];
    ref_digests(ld, ref);
    warns w = {0, ""};
    sp_cache *c = open_cache(dir, &w, 0);
    stream_check(c, ld, 0, 1, ref);
    char ent[400], f[500], mf[500];
    entry_path(dir, ld, 0, ent, sizeof ent);
    snprintf(f, sizeof f, "%s/b00000000", ent);
    snprintf(mf, sizeof mf, "%s/%s", ent, SP__CM_NAME);
    uint8_t *b;
    size_t n = read_all(f, &b);
    uint32_t count = (uint32_t)b[48] | (uint32_t)b[49] << 8;
    uint64_t sb = 0, old_raw = 0;
    for (int i = 7; i >= 0; i--) sb = sb << 8 | b[64 + i];
    for (int i = 7; i >= 0; i--) old_raw = old_raw << 8 | b[72 + i];
    /* The most the header's own bounds allow: 2^21 failure records of
     * 500-byte messages, ~1.1 GB of "metadata". */
    uint64_t meta_raw = (uint64_t)count * 12 + (1ull << 21) * (16 + 500);
    put_le(b + 60, 1u << 21, 4);      /* nfailures */
    put_le(b + 72, meta_raw, 8);
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b, 120);
    XXH3_64bits_update(st, b + 128, n - 128);
    uint64_t fh = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    put_le(b + 120, fh, 8);
    write_all(f, b, n);
    free(b);
    /* The manifest: batch 0's line (raw, hash), raw_bytes, the checksum. */
    uint8_t *mt;
    size_t mn = read_all(mf, &mt);
    char *out = malloc(mn + 256), *o = out;
    uint64_t raw0 = meta_raw + (uint64_t)count * sb;
    for (char *line = (char *)mt; line < (char *)mt + mn;) {
        char *end = memchr(line, '\n', (size_t)((char *)mt + mn - line));
        *end = '\0';
        unsigned long long x, y, z;
        if (!strncmp(line, "checksum ", 9)) {
            o += sprintf(o, "checksum %016llx\n", (unsigned long long)XXH3_64bits(out,
                                                                              (size_t)(o - out)));
        } else if (sscanf(line, "b 0 %llu %llu", &x, &y) == 2) {
            o += sprintf(o, "b 0 %llu %llu %016llx\n", x, (unsigned long long)raw0,
                         (unsigned long long)fh);
        } else if (sscanf(line, "raw_bytes %llu", &z) == 1) {
            o += sprintf(o, "raw_bytes %llu\n", z - (old_raw + (uint64_t)count * sb) + raw0);
        } else {
            o += sprintf(o, "%s\n", line);
        }
        line = end + 1;
    }
    write_all(mf, (uint8_t *)out, (size_t)(o - out));
    free(out);
    free(mt);
    char hex[33];
    sp_digest_hex(sp__cache_key(ld, 0), hex);
    uint64_t nbad = 0;
    sp_error err;
    CHECK_OK(sp_cache_verify_entry(c, hex, on_warn, &w, &nbad, &err), &err);
    CHECK_MSG(nbad == 1 && strstr(w.last, "b00000000") && strstr(w.last, "metadata larger"),
              "hostile header: %llu problems, last: %s", (unsigned long long)nbad, w.last);
    sp_cache_close(c);
    sp_loader_destroy(ld);
    printf("verify: a header claiming 1.1 GB of metadata is reported, not allocated\n");
}

/* ---- cases: each in its own process, on its own cache folder under root --------------- */

static void setup(void) {
    snprintf(root, sizeof root, "/tmp/sp_test_cache.XXXXXX");
    CHECK(mkdtemp(root));
    snprintf(data, sizeof data, "%s/data", root);
    snprintf(bad_data, sizeof bad_data, "%s/bad", root);
    sp_error err;
    sp_shapes_opts so = {NSAMPLES, 32, 5};
    CHECK_OK(sp_shapes_make(data, &so, &err), &err);
}

static void teardown(void) { rmrf(root); }

/* The case's cache folder, root/cache-NAME (no case sees another's). */
static const char *cache_dir(const char *name) {
    static char dir[300];
    snprintf(dir, sizeof dir, "%s/cache-%s", root, name);
    return dir;
}

static void test_cold_warm(void) { cold_warm(cache_dir("cold_warm")); }
static void test_on_error_skip(void) {
    /* The broken copy only this case reads (made here, not in setup). */
    sp_error err;
    sp_shapes_opts so = {NSAMPLES, 32, 5};
    CHECK_OK(sp_shapes_make(bad_data, &so, &err), &err);
    sp_test_break_png(bad_data, 1);   /* one broken file for the on-error test */
    on_error_skip(cache_dir("on_error"));
}
static void test_damage_uint8(void) { damage(cache_dir("damage_u8"), SP_DTYPE_UINT8); }
static void test_damage_float32(void) {
    rng_state = 0x2F6B3C7A91D4E805ull;   /* other offsets than the uint8 case's */
    damage(cache_dir("damage_f32"), SP_DTYPE_FLOAT32);
}
static void test_concurrent(void) { concurrent(cache_dir("concurrent")); }
static void test_full_disk(void) { full_disk(cache_dir("full_disk")); }
static void test_gc(void) { gc(cache_dir("gc")); }
static void test_verify_hostile_header(void) { verify_hostile_header(cache_dir("hostile")); }

static const sp_case cases[] = {
    SP_CASE(test_cold_warm),
    SP_CASE(test_on_error_skip),
    SP_CASE(test_damage_uint8),
    SP_CASE(test_damage_float32),
    SP_CASE(test_concurrent),
    SP_CASE(test_full_disk),
    SP_CASE(test_gc),
    SP_CASE(test_verify_hostile_header),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

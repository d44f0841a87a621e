/* test_dataset_index.c - the persistent dataset index (dataset/dataset_index.c).
 *
 * On a shapes ImageFolder and a list file, with the files made old enough
 * that their timestamps can be trusted (the index's racy rule, 2 s):
 *  - the first open hashes every file and writes the sidecar; the second
 *    reads no sample file (the process's read byte count, /proc/self/io,
 *    stays below the dataset's size) and gives the same fingerprint as a
 *    full hash (SP_INDEX_OFF);
 *  - a file rewritten with other bytes of the same size, with and without
 *    restoring its mtime, is hashed again and the fingerprint follows;
 *  - a sidecar that claims an unchanged stat but a wrong hash (a change the
 *    stat cannot see) is trusted at open, and the sample is refused when
 *    read, naming the file;
 *  - a truncated, bit-flipped or foreign sidecar is rebuilt with a warning
 *    naming it; a folder that cannot hold the sidecar sends it to
 *    $XDG_CACHE_HOME/seedpipe/;
 *  - freshly written files are hashed again at the next open (racy);
 *  - four processes rebuilding at once all succeed with one fingerprint and
 *    leave a sound sidecar.
 *
 * Cases (tests/runner.h; each in its own process, on its own datasets under
 * one mkdtemp() folder): test_racy (fresh files), test_imagefolder (the
 * sidecar's reuse, rewrites, a forged hash, damaged and foreign sidecars,
 * concurrent rebuilds: one sequence on one dataset), test_cache_dir_and_list
 * ($XDG_CACHE_HOME, the list file, SEEDPIPE_INDEX=off).
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "seedpipe/dataset.h"
#include "seedpipe/shapes.h"

#include "check.h"
#include "runner.h"
#include "common/le_internal.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

static char g_tmp[256];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static const char *tp(const char *rel) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 1024, "%s/%s", g_tmp, rel);
    return b;
}

static sp_dataset *open_ds(const char *path, sp_index_mode mode, sp_dataset_index_info *info) {
    sp_dataset_limits lim = {.index = mode};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(path, &lim, &ds, &err);
    if (rc) fprintf(stderr, "open %s: %s\n", path, err.msg);
    CHECK(rc == 0);
    if (info) sp_dataset_index_info_get(ds, info);
    return ds;
}

static sp_digest full_fingerprint(const char *path) {
    sp_dataset *ds = open_ds(path, SP_INDEX_OFF, NULL);
    sp_digest d = sp_dataset_fingerprint(ds);
    sp_dataset_close(ds);
    return d;
}

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* Bytes this process has passed through read()/pread() so far. */
static unsigned long long rchar(void) {
    FILE *f = fopen("/proc/self/io", "r");
    CHECK(f);
    char line[128];
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %llu", &v) == 1) break;
    fclose(f);
    return v;
}

static unsigned long long sample_bytes(const sp_dataset *ds) {
    unsigned long long s = 0;
    for (uint64_t i = 0; i < sp_dataset_size(ds); i++) {
        struct stat st;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", tp("shapes"), sp_dataset_path(ds, i));
        if (stat(p, &st) == 0) s += (unsigned long long)st.st_size;
    }
    return s;
}

/* Overwrite a file with other bytes of the same length. */
static void flip_byte(const char *path, long at) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x55;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

static void read_file(const char *path, unsigned char **p, size_t *n) {
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *p = malloc(*n);
    CHECK(*p && fread(*p, 1, *n, f) == *n);
    fclose(f);
}

static void write_file(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    fclose(f);
}

/* Forge the sidecar: sample 0's hash changed, checksum made right again. */
static void forge_first_hash(const char *sidecar) {
    unsigned char *p;
    size_t n;
    read_file(sidecar, &p, &n);
    size_t off = 8 + 4 + 4 + 8;
    off += 4 + sp__le_get32(p + off);                 /* the root */
    off += 4 + sp__le_get32(p + off) + 4 + 5 * 8;     /* record 0: path, flags, stat */
    p[off] ^= 1;                              /* its hash's low byte */
    uint64_t h = XXH3_64bits(p, n - 8);
    sp__le_put64(p + n - 8, h);
    write_file(sidecar, p, n);
    free(p);
}

static void test_imagefolder(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("shapes"));
    sp_shapes_opts o = {40, 24, 3};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    sleep(3);   /* older than the racy window: the stats can be trusted */
    sp_digest want = full_fingerprint(root);

    sp_dataset_index_info a, b;
    sp_dataset *ds = open_ds(root, SP_INDEX_AUTO, &a);
    unsigned long long total = sample_bytes(ds);
    CHECK(a.used && a.written && a.hashed == 40 && a.reused == 0 && !a.warning[0]);
    CHECK(strcmp(a.path, tp("shapes/.seedpipe-index")) == 0);
    CHECK(same(sp_dataset_fingerprint(ds), want));
    sp_dataset_close(ds);

    unsigned long long r0 = rchar();
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    unsigned long long r1 = rchar();
    CHECK(b.used && !b.written && b.hashed == 0 && b.reused == 40 && !b.warning[0]);
    CHECK(same(sp_dataset_fingerprint(ds), want));
    /* the sidecar is read, no sample file: far less than the dataset's bytes */
    struct stat sst;
    CHECK(stat(b.path, &sst) == 0);
    CHECK(r1 - r0 <= (unsigned long long)sst.st_size + 4096 && r1 - r0 < total / 2);
    /* a full hash does read them all */
    r0 = rchar();
    sp_dataset_close(open_ds(root, SP_INDEX_OFF, NULL));
    CHECK(rchar() - r0 >= total);

    /* one file: other bytes, same size -> hashed again, new fingerprint */
    char victim[2048];
    snprintf(victim, sizeof victim, "%s/%s", root, sp_dataset_path(ds, 7));
    sp_dataset_close(ds);
    flip_byte(victim, 40);
    sp_digest want2 = full_fingerprint(root);
    CHECK(!same(want2, want));
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.hashed == 1 && b.reused == 39 && b.written);
    CHECK(same(sp_dataset_fingerprint(ds), want2));
    sp_dataset_close(ds);

    /* the same with the mtime put back: the ctime still tells */
    struct stat st;
    CHECK(stat(victim, &st) == 0);
    flip_byte(victim, 41);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    CHECK(utimensat(AT_FDCWD, victim, times, 0) == 0);
    sp_digest want3 = full_fingerprint(root);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.hashed == 1 && b.reused == 39);
    CHECK(same(sp_dataset_fingerprint(ds), want3));
    sp_dataset_close(ds);

    /* a change the stat cannot see: caught when the sample is read */
    sleep(3);   /* the rewritten sidecar's record of the victim is no longer racy */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    forge_first_hash(tp("shapes/.seedpipe-index"));
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.reused == 40 && b.hashed == 0 && !b.warning[0]);
    sp_sample_data sd;
    int rc = sp_dataset_read(ds, 0, &sd, &err);
    CHECK(rc == SP_EMISMATCH && strstr(err.msg, sp_dataset_path(ds, 0)) &&
          strstr(err.msg, "changed since"));
    CHECK(sp_dataset_read(ds, 1, &sd, &err) == 0);
    sp_sample_data_free(&sd);
    sp_dataset_close(ds);
    sp_dataset_close(open_ds(root, SP_INDEX_REBUILD, &b));
    CHECK(b.hashed == 40 && b.written);

    /* damaged sidecars: rebuilt with a warning naming the file */
    char sc[1024];
    snprintf(sc, sizeof sc, "%s", tp("shapes/.seedpipe-index"));
    unsigned char *p;
    size_t n;
    read_file(sc, &p, &n);
    struct { const char *what; size_t len; long flip; const char *says; } bad[] = {
        {"truncated", n / 2, -1, "checksum"},
        {"too short", 20, -1, "truncated"},
        {"bit flipped", n, (long)n / 3, "checksum"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        if (bad[k].flip >= 0) p[bad[k].flip] ^= 0x10;
        write_file(sc, p, bad[k].len);
        if (bad[k].flip >= 0) p[bad[k].flip] ^= 0x10;
        ds = open_ds(root, SP_INDEX_AUTO, &b);
        if (!strstr(b.warning, sc) || !strstr(b.warning, bad[k].says))
            fprintf(stderr, "%s: warning \"%s\"\n", bad[k].what, b.warning);
        CHECK(strstr(b.warning, sc) && strstr(b.warning, bad[k].says) &&
              strstr(b.warning, "rebuilt"));
        CHECK(b.hashed == 40 && b.written && same(sp_dataset_fingerprint(ds), want3));
        sp_dataset_close(ds);
        sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
        CHECK(b.reused == 40 && !b.warning[0]);   /* sound again */
    }
    free(p);

    /* a copy of the dataset: the sidecar it carries is foreign */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp -a %s %s", root, tp("copy"));
    CHECK(system(cmd) == 0);
    ds = open_ds(tp("copy"), SP_INDEX_AUTO, &b);
    CHECK(strstr(b.warning, "another dataset") && b.hashed == 40 && b.written);
    CHECK(same(sp_dataset_fingerprint(ds), want3));   /* the root is not hashed */
    sp_dataset_close(ds);

    /* concurrent openers: all succeed, one fingerprint, a sound sidecar */
    pid_t kids[4];
    for (int k = 0; k < 4; k++) {
        kids[k] = fork();
        CHECK(kids[k] >= 0);
        if (kids[k] == 0) {
            for (int r = 0; r < 5; r++) {
                sp_dataset_limits lim = {.index = SP_INDEX_REBUILD};
                sp_dataset *d;
                if (sp_dataset_open(root, &lim, &d, &err) != 0) _exit(1);
                int ok = same(sp_dataset_fingerprint(d), want3);
                sp_dataset_close(d);
                if (!ok) _exit(2);
            }
            _exit(0);
        }
    }
    for (int k = 0; k < 4; k++) {
        int status;
        CHECK(waitpid(kids[k], &status, 0) == kids[k]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.warning[0] && same(sp_dataset_fingerprint(ds), want3));
    sp_dataset_close(ds);
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c tmp", root);
    FILE *f = popen(cmd, "r");
    CHECK(f);
    int tmps = -1;
    CHECK(fscanf(f, "%d", &tmps) == 1);
    pclose(f);
    CHECK(tmps == 0);   /* no temporary file left behind */
}

static void test_cache_dir_and_list(void) {
    /* A folder where the sidecar cannot go: $XDG_CACHE_HOME/seedpipe/. */
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("shapes2"));
    sp_shapes_opts o = {12, 16, 4};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    CHECK(mkdir(tp("shapes2/.seedpipe-index"), 0755) == 0);   /* squats the name */
    /* The list file (two of those samples): a sidecar beside it. */
    sp_dataset *all = open_ds(root, SP_INDEX_OFF, NULL);
    FILE *f = fopen(tp("list.txt"), "w");
    CHECK(f);
    fprintf(f, "shapes2/%s\t0\nshapes2/%s\t1\n", sp_dataset_path(all, 0), sp_dataset_path(all, 5));
    fclose(f);
    sp_dataset_close(all);
    sleep(3);
    setenv("XDG_CACHE_HOME", tp("xdg"), 1);
    sp_dataset_index_info b;
    sp_dataset *ds = open_ds(root, SP_INDEX_AUTO, &b);
    char want_dir[1024];
    snprintf(want_dir, sizeof want_dir, "%s", tp("xdg/seedpipe/index-"));
    CHECK(b.written && strncmp(b.path, want_dir, strlen(want_dir)) == 0);
    sp_digest fp = sp_dataset_fingerprint(ds);
    sp_dataset_close(ds);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.reused == 12 && b.hashed == 0 && same(sp_dataset_fingerprint(ds), fp));
    sp_dataset_close(ds);

    ds = open_ds(tp("list.txt"), SP_INDEX_AUTO, &b);
    CHECK(b.written && b.hashed == 2 && strcmp(b.path, tp(".list.txt.seedpipe-index")) == 0);
    sp_dataset_close(ds);
    ds = open_ds(tp("list.txt"), SP_INDEX_AUTO, &b);
    CHECK(b.reused == 2 && b.hashed == 0);
    sp_dataset_close(ds);

    /* SEEDPIPE_INDEX=off: no index at all */
    setenv("SEEDPIPE_INDEX", "off", 1);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.used && b.hashed == 12 && !b.written);
    sp_dataset_close(ds);
    unsetenv("SEEDPIPE_INDEX");
}

static void test_racy(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("fresh"));
    sp_shapes_opts o = {10, 16, 5};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    sp_dataset_index_info b;
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(b.hashed == 10 && b.written);
    /* written moments ago: their timestamps cannot vouch for them yet */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(b.hashed == 10 && b.reused == 0);
    sleep(3);
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));   /* hashed, now recorded as settled */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(b.hashed == 0 && b.reused == 10);
}

/* ---- cases: each in its own process, in its own folders under g_tmp ------------------- */

static void setup(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp_test_dsindex.XXXXXX");
    CHECK(mkdtemp(g_tmp));
    unsetenv("SEEDPIPE_INDEX");
}

static void teardown(void) { nftw(g_tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static const sp_case cases[] = {
    SP_CASE(test_racy),
    SP_CASE(test_imagefolder),
    SP_CASE(test_cache_dir_and_list),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

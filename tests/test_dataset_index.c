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
 *  - the index lives in the cache folder (SEEDPIPE_CACHE, else
 *    $XDG_CACHE_HOME/seedpipe, else ~/.cache/seedpipe, made 0700), never
 *    in the dataset (a read-only one works with no warning); a cache folder
 *    others may write, a file in its place or none at all: every file is
 *    hashed, the open works and the warning says why;
 *  - a truncated, bit-flipped or foreign index is rebuilt with a warning
 *    naming it;
 *  - an old sidecar beside the data (an older version's) is still read and
 *    never rewritten;
 *  - freshly written files are hashed again at the next open (racy);
 *  - four processes rebuilding at once all succeed with one fingerprint and
 *    leave a sound sidecar.
 *
 * Cases (tests/runner.h; each in its own process, on its own datasets under
 * one mkdtemp() folder): test_racy (fresh files), test_imagefolder (the
 * sidecar's reuse, rewrites, a forged hash, damaged and foreign sidecars,
 * concurrent rebuilds: one sequence on one dataset), test_cache_folder
 * (where the cache is, refused folders, a read-only dataset), test_list
 * (a list file, SEEDPIPE_INDEX=off), test_legacy_sidecar.
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "seedpipe/dataset.h"
#include "seedpipe/shapes.h"

#include "check.h"
#include "runner.h"
#include "tmpdir.h"
#include "common/le_internal.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "dataset/dataset_internal.h"


static sp_dataset *open_ds(const char *path, sp_index_mode mode, sp_dataset_index_info *info) {
    sp_dataset_limits lim = {.index = mode};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(path, &lim, &ds, &err);
    if (rc) fprintf(stderr, "open %s: %s\n", path, err.msg);
    CHECK(rc == 0);
    if (info) sp__dataset_index_info_get(ds, info);
    return ds;
}

static sp_digest full_fingerprint(const char *path) {
    sp_dataset *ds = open_ds(path, SP_INDEX_OFF, NULL);
    sp_digest d = sp__dataset_fingerprint(ds);
    sp_dataset_close(ds);
    return d;
}

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* 1 when nothing under dir (hidden files included) has "seedpipe" or "tmp"
 * in its name: no index, no temporary file in the user's data. */
static int nothing_beside(const char *dir) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "find %s -name '*seedpipe*' -o -name '*tmp*' | wc -l", dir);
    FILE *f = popen(cmd, "r");
    CHECK(f);
    int n = -1;
    CHECK(fscanf(f, "%d", &n) == 1);
    pclose(f);
    return n == 0;
}

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
    for (uint64_t i = 0; i < sp__dataset_size(ds); i++) {
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
    CHECK(strncmp(a.path, tp("cache/folder-"), strlen(tp("cache/folder-"))) == 0);
    CHECK(strlen(a.path) == strlen(tp("cache/folder-")) + 32);
    CHECK(nothing_beside(root));   /* the index is not in the user's data */
    char sc[sizeof a.path];
    snprintf(sc, sizeof sc, "%s", a.path);
    CHECK(same(sp__dataset_fingerprint(ds), want));
    sp_dataset_close(ds);

    unsigned long long r0 = rchar();
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    unsigned long long r1 = rchar();
    CHECK(b.used && !b.written && b.hashed == 0 && b.reused == 40 && !b.warning[0]);
    CHECK(same(sp__dataset_fingerprint(ds), want));
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
    CHECK(same(sp__dataset_fingerprint(ds), want2));
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
    CHECK(same(sp__dataset_fingerprint(ds), want3));
    sp_dataset_close(ds);

    /* a change the stat cannot see: caught when the sample is read */
    sleep(3);   /* the rewritten sidecar's record of the victim is no longer racy */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    forge_first_hash(sc);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.reused == 40 && b.hashed == 0 && !b.warning[0]);
    sp_sample_data sd;
    int rc = sp__dataset_read(ds, 0, &sd, &err);
    CHECK(rc == SP_EMISMATCH && strstr(err.msg, sp_dataset_path(ds, 0)) &&
          strstr(err.msg, "changed since"));
    CHECK(sp__dataset_read(ds, 1, &sd, &err) == 0);
    sp__sample_data_free(&sd);
    sp_dataset_close(ds);
    sp_dataset_close(open_ds(root, SP_INDEX_REBUILD, &b));
    CHECK(b.hashed == 40 && b.written);

    /* damaged indexes: rebuilt with a warning naming the file */
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
        CHECK(b.hashed == 40 && b.written && same(sp__dataset_fingerprint(ds), want3));
        sp_dataset_close(ds);
        sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
        CHECK(b.reused == 40 && !b.warning[0]);   /* sound again */
    }
    free(p);

    /* a copy of the dataset: an entry of its own */
    char cmd[2 * sizeof sc + 64];
    snprintf(cmd, sizeof cmd, "cp -a %s %s", root, tp("copy"));
    CHECK(system(cmd) == 0);
    ds = open_ds(tp("copy"), SP_INDEX_AUTO, &b);
    CHECK(!b.warning[0] && b.hashed == 40 && b.written && strcmp(b.path, sc) != 0);
    CHECK(same(sp__dataset_fingerprint(ds), want3));   /* the root is not hashed */
    sp_dataset_close(ds);
    /* with no cache entry, an old sidecar beside it that is the original's
     * (an old version's, copied along): foreign, not trusted, not rewritten */
    CHECK(unlink(b.path) == 0);
    snprintf(cmd, sizeof cmd, "cp %s %s/.seedpipe-index", sc, tp("copy"));
    CHECK(system(cmd) == 0);
    struct stat old_st;
    CHECK(stat(tp("copy/.seedpipe-index"), &old_st) == 0);
    ds = open_ds(tp("copy"), SP_INDEX_AUTO, &b);
    CHECK(strstr(b.warning, "another dataset") && b.hashed == 40 && b.written);
    CHECK(strncmp(b.path, tp("cache/folder-"), strlen(tp("cache/folder-"))) == 0);
    sp_dataset_close(ds);
    CHECK(stat(tp("copy/.seedpipe-index"), &st) == 0 && st.st_ino == old_st.st_ino &&
          st.st_mtim.tv_nsec == old_st.st_mtim.tv_nsec && st.st_size == old_st.st_size);

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
                int ok = same(sp__dataset_fingerprint(d), want3);
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
    CHECK(!b.warning[0] && same(sp__dataset_fingerprint(ds), want3));
    sp_dataset_close(ds);
    snprintf(cmd, sizeof cmd, "find %s %s -name '*tmp*' | wc -l", root, tp("cache"));
    FILE *f = popen(cmd, "r");
    CHECK(f);
    int tmps = -1;
    CHECK(fscanf(f, "%d", &tmps) == 1);
    pclose(f);
    CHECK(tmps == 0);   /* no temporary file left behind */
}

/* The entry's folder is `want` (a prefix of b->path) and is mode 0700. */
static void check_in(const sp_dataset_index_info *b, const char *want) {
    if (strncmp(b->path, want, strlen(want)) != 0)
        fprintf(stderr, "index at \"%s\", expected under \"%s\"\n", b->path, want);
    CHECK(b->written && strncmp(b->path, want, strlen(want)) == 0);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", b->path);
    *strrchr(dir, '/') = '\0';
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
}

static void test_cache_folder(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("shapes2"));
    sp_shapes_opts o = {12, 16, 4};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    sleep(3);
    /* SEEDPIPE_CACHE first, then $XDG_CACHE_HOME/seedpipe, then ~/.cache/seedpipe */
    setenv("XDG_CACHE_HOME", tp("xdg"), 1);
    setenv("HOME", tp("home"), 1);
    sp_dataset_index_info b;
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    check_in(&b, tp("cache/folder-"));
    unsetenv("SEEDPIPE_CACHE");
    sp_dataset *ds = open_ds(root, SP_INDEX_AUTO, &b);
    check_in(&b, tp("xdg/seedpipe/folder-"));
    sp_digest fp = sp__dataset_fingerprint(ds);
    sp_dataset_close(ds);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(b.reused == 12 && b.hashed == 0 && same(sp__dataset_fingerprint(ds), fp));
    sp_dataset_close(ds);
    setenv("XDG_CACHE_HOME", "relative/xdg", 1);   /* not absolute: ignored (XDG spec) */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    check_in(&b, tp("home/.cache/seedpipe/folder-"));
    CHECK(!b.warning[0]);

    /* a cache folder others may write, or a file in its place: not used;
     * the open works, hashes every file and says why */
    setenv("SEEDPIPE_CACHE", tp("open"), 1);
    CHECK(mkdir(tp("open"), 0777) == 0 && chmod(tp("open"), 01777) == 0);
    for (int k = 0; k < 2; k++) {
        ds = open_ds(root, SP_INDEX_AUTO, &b);
        if (!strstr(b.warning, "others may write")) fprintf(stderr, "warning \"%s\"\n", b.warning);
        CHECK(b.used && !b.written && b.hashed == 12 && b.reused == 0 && !b.path[0]);
        CHECK(strstr(b.warning, tp("open")) && strstr(b.warning, "others may write") &&
              strstr(b.warning, "no index kept"));
        CHECK(same(sp__dataset_fingerprint(ds), fp));
        sp_dataset_close(ds);
    }
    /* in a folder others may write that is not sticky: could be swapped */
    CHECK(mkdir(tp("loose"), 0777) == 0 && chmod(tp("loose"), 0777) == 0);
    setenv("SEEDPIPE_CACHE", tp("loose/c"), 1);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.written && b.hashed == 12 && strstr(b.warning, "not sticky"));
    sp_dataset_close(ds);
    write_file(tp("afile"), (const unsigned char *)"x", 1);
    setenv("SEEDPIPE_CACHE", tp("afile"), 1);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.written && b.hashed == 12 && strstr(b.warning, tp("afile")));
    sp_dataset_close(ds);
    unsetenv("SEEDPIPE_CACHE");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.written && b.hashed == 12 && strstr(b.warning, "no cache folder"));
    sp_dataset_close(ds);

    /* a read-only dataset: indexed with no warning, nothing written in it */
    setenv("SEEDPIPE_CACHE", tp("cache"), 1);
    CHECK(chmod(root, 0555) == 0);
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(!b.warning[0]);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.warning[0] && b.reused == 12);
    sp_dataset_close(ds);
    CHECK(chmod(root, 0755) == 0);
    CHECK(nothing_beside(root));
}

static void test_list(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("shapes3"));
    sp_shapes_opts o = {12, 16, 4};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    sp_dataset *all = open_ds(root, SP_INDEX_OFF, NULL);
    FILE *f = fopen(tp("list.txt"), "w");
    CHECK(f);
    fprintf(f, "shapes3/%s\t0\nshapes3/%s\t1\n", sp_dataset_path(all, 0), sp_dataset_path(all, 5));
    fclose(f);
    sp_dataset_close(all);
    sleep(3);
    sp_dataset_index_info b;
    sp_dataset *ds = open_ds(tp("list.txt"), SP_INDEX_AUTO, &b);
    check_in(&b, tp("cache/list-"));
    CHECK(b.hashed == 2);
    sp_dataset_close(ds);
    ds = open_ds(tp("list.txt"), SP_INDEX_AUTO, &b);
    CHECK(b.reused == 2 && b.hashed == 0);
    sp_dataset_close(ds);
    CHECK(access(tp(".list.txt.seedpipe-index"), F_OK) != 0 && nothing_beside(root));

    /* SEEDPIPE_INDEX=off: no index at all */
    setenv("SEEDPIPE_INDEX", "off", 1);
    ds = open_ds(root, SP_INDEX_AUTO, &b);
    CHECK(!b.used && b.hashed == 12 && !b.written);
    sp_dataset_close(ds);
    unsetenv("SEEDPIPE_INDEX");
}

/* The sidecar older versions wrote beside the data is still read (the
 * same trust rules) and never written: for a folder and a list file. */
static void test_legacy_sidecar(void) {
    char root[1024];
    snprintf(root, sizeof root, "%s", tp("shapes4"));
    sp_shapes_opts o = {12, 16, 4};
    sp_error err;
    CHECK(sp_shapes_make(root, &o, &err) == 0);
    sp_dataset *all = open_ds(root, SP_INDEX_OFF, NULL);
    FILE *f = fopen(tp("l.txt"), "w");
    CHECK(f);
    fprintf(f, "shapes4/%s\t0\nshapes4/%s\t1\n", sp_dataset_path(all, 1), sp_dataset_path(all, 2));
    fclose(f);
    char victim[2048];
    snprintf(victim, sizeof victim, "%s/%s", root, sp_dataset_path(all, 3));
    sp_dataset_close(all);
    sleep(3);
    const char *ds_path[2] = {root, tp("l.txt")};
    const char *old[2] = {tp("shapes4/.seedpipe-index"), tp(".l.txt.seedpipe-index")};
    uint64_t n[2] = {12, 2};
    for (int k = 0; k < 2; k++) {   /* an old version's sidecar: the same bytes, beside */
        sp_dataset_index_info b;
        sp_dataset_close(open_ds(ds_path[k], SP_INDEX_AUTO, &b));
        CHECK(b.written && rename(b.path, old[k]) == 0);
        struct stat st0, st1;
        CHECK(stat(old[k], &st0) == 0);
        sp_dataset *ds = open_ds(ds_path[k], SP_INDEX_AUTO, &b);
        CHECK(b.reused == n[k] && b.hashed == 0 && !b.written && !b.warning[0]);
        CHECK(strcmp(b.path, old[k]) == 0);
        sp_dataset_close(ds);
        CHECK(stat(old[k], &st1) == 0 && st1.st_ino == st0.st_ino &&
              st1.st_mtim.tv_sec == st0.st_mtim.tv_sec &&
              st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec);
    }
    /* a file changed: hashed again, the new index goes to the cache, the old
     * sidecar is left as it was; the cache's entry is read from then on */
    struct stat st0, st1;
    CHECK(stat(old[0], &st0) == 0);
    flip_byte(victim, 40);
    sp_dataset_index_info b;
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(b.hashed == 1 && b.reused == 11 && b.written);
    check_in(&b, tp("cache/folder-"));
    CHECK(stat(old[0], &st1) == 0 && st1.st_ino == st0.st_ino &&
          st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec && st1.st_size == st0.st_size);
    sleep(3);
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));   /* the victim settles */
    sp_dataset_close(open_ds(root, SP_INDEX_AUTO, &b));
    CHECK(b.reused == 12 && strncmp(b.path, tp("cache/"), strlen(tp("cache/"))) == 0);
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
    sp_tmp_make("dsindex");
    unsetenv("SEEDPIPE_INDEX");
    setenv("SEEDPIPE_CACHE", tp("cache"), 1);   /* this case's own index cache */
}

static void teardown(void) { sp_tmp_remove(); }

static const sp_case cases[] = {
    SP_CASE(test_racy),
    SP_CASE(test_imagefolder),
    SP_CASE(test_cache_folder),
    SP_CASE(test_list),
    SP_CASE(test_legacy_sidecar),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

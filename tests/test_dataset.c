/* test_dataset.c - the dataset index (dataset.h): ImageFolder, IDX, list files.
 *
 * Everything is built in a mkdtemp() folder under /tmp and removed after.
 * Asserts:
 *  - ImageFolder: byte-wise (not locale) class order and class ids, sample
 *    order by relative path (which can interleave classes: "a-b/" < "a/"),
 *    upper-case extensions, recursion, hidden files/folders, non-image files
 *    and root files ignored, empty class kept;
 *  - the fingerprint equals a re-computation from the documented layout; it
 *    is stable on re-open and independent of the root path and creation
 *    order; it changes with a file's content, a move to another class, a
 *    rename, a new class, a list label;
 *  - sp__dataset_read returns the exact bytes, from threads and a forked
 *    child too, and refuses a file changed after open (same size or not);
 *  - IDX plain and .gz (same fingerprint), labels/pixels/raw dims; malformed
 *    IDX files are clear errors naming the file: bad magic, unsupported
 *    type, truncated header/data, trailing data, count mismatch, label out
 *    of range, huge dims, a huge count in a tiny file (no huge allocation),
 *    corrupt gzip, missing labels file;
 *  - list files: comments, blank lines, CRLF, relative and absolute paths;
 *    bad label / missing TAB / duplicate path name the line;
 *  - unreadable (as root: checked in a child that drops to nobody) or empty
 *    roots, unreadable files, limits, dangling links, link loops, FIFOs;
 *    sample paths stay valid after a chdir();
 *  - Fashion-MNIST, when installed: 60000 samples, 10 classes of 6000.
 *
 * Cases (tests/runner.h; each in its own process, in its own folders under
 * one mkdtemp() folder): test_folder_order, test_fingerprint, test_read,
 * test_idx_valid, test_idx_malformed, test_list, test_errors,
 * test_cwd_and_fifo, test_fashion_mnist (skipped, 77, when not installed).
 */
#define _XOPEN_SOURCE 700   /* nftw */
#include "seedpipe/dataset.h"

#include "check.h"
#include "runner.h"
#include "tmpdir.h"
#include "dataset/dataset_api_internal.h"   /* the one-value accessors */

#include <errno.h>
#include <ftw.h>
#include <locale.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>
#include "dataset/dataset_internal.h"

#define CHECK_HAS(msg, sub) CHECK_MSG(strstr((msg), (sub)) != NULL, "message \"%s\" lacks \"%s\"", (msg), (sub))

/* ---- helpers ---------------------------------------------------------------------- */

static void mkdirs_for(const char *path) {
    char b[1024];
    snprintf(b, sizeof b, "%s", path);
    for (char *p = b + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(b, 0755) != 0) CHECK_MSG(errno == EEXIST, "mkdir %s: %s", b, strerror(errno));
        *p = '/';
    }
}

static void write_bytes(const char *path, const void *data, size_t len) {
    mkdirs_for(path);
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f, "%s: %s", path, strerror(errno));
    CHECK(fwrite(data, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}
static void write_str(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }

static void write_gz(const char *path, const void *data, size_t len) {
    mkdirs_for(path);
    gzFile g = gzopen(path, "wb");
    CHECK(g);
    CHECK(gzwrite(g, data, (unsigned)len) == (int)len);
    CHECK(gzclose(g) == Z_OK);
}

static int fp_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

static sp_dataset *open_ok(const char *path) {
    sp_error err;
    sp_dataset *ds = NULL;
    CHECK_OK(sp_dataset_open(path, NULL, &ds, &err), &err);
    CHECK(ds);
    return ds;
}

static sp_digest fp_of(const char *path) {
    sp_dataset *ds = open_ok(path);
    sp_digest d = sp__dataset_fingerprint(ds);
    sp_dataset_close(ds);
    return d;
}

/* Expect failure `code` with a message containing `sub`. */
static void open_fails(const char *path, const sp_dataset_limits *lim, int code, const char *sub,
                       const char *sub2) {
    sp_error err;
    sp_error_clear(&err);
    sp_dataset *ds = (sp_dataset *)1;
    int rc = sp_dataset_open(path, lim, &ds, &err);
    CHECK_MSG(rc == code, "%s: got %d (%s), expected %d", path, rc, err.msg, code);
    CHECK(err.code == code);
    CHECK(ds == NULL);
    CHECK_HAS(err.msg, sub);
    if (sub2) CHECK_HAS(err.msg, sub2);
}

/* ---- the documented fingerprint layout, recomputed independently --------------------- */

static void put32(XXH3_state_t *st, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    XXH3_128bits_update(st, b, 4);
}
static void put64(XXH3_state_t *st, uint64_t v) {
    put32(st, (uint32_t)v);
    put32(st, (uint32_t)(v >> 32));
}
static void putstr(XXH3_state_t *st, const char *s) {
    put32(st, (uint32_t)strlen(s));
    XXH3_128bits_update(st, s, strlen(s));
}

typedef struct ref_sample { const char *path; int label; const void *data; size_t len; } ref_sample;

static sp_digest ref_fingerprint(int kind, const char *const *classes, int nclasses, int raw_w,
                                 int raw_h, const ref_sample *s, int n) {
    XXH3_state_t *st = XXH3_createState();
    CHECK(st);
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, "seedpipe.dataset.v1", 19);
    put32(st, (uint32_t)kind);
    put64(st, (uint64_t)n);
    put32(st, (uint32_t)nclasses);
    for (int c = 0; c < nclasses; c++) putstr(st, classes[c]);
    put32(st, (uint32_t)raw_w);
    put32(st, (uint32_t)raw_h);
    for (int i = 0; i < n; i++) {
        XXH128_hash_t h = XXH3_128bits(s[i].data, s[i].len);
        putstr(st, s[i].path);
        put32(st, (uint32_t)s[i].label);
        put64(st, (uint64_t)s[i].len);
        put64(st, h.high64);
        put64(st, h.low64);
    }
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    sp_digest d = {h.high64, h.low64};
    return d;
}

/* ---- ImageFolder ---------------------------------------------------------------------- */

/* canonical order of the folder built below */
static const ref_sample folder1[] = {
    {"Zebra/y.JpEg", 0, "y-bytes", 7},
    {"Zebra/z.PnG", 0, "zz", 2},
    {"a-b/m.png", 2, "m", 1},
    {"a/x.png", 1, "xxx", 3},
    {"apple/A.JPG", 3, "apple A", 7},
    {"apple/b.png", 3, "apple b!", 8},
    {"apple/sub/deep.jpeg", 3, "", 0},
    {"banana/c.jpg", 4, "\0\1\2\3", 4},
};
static const char *const folder1_classes[] = {"Zebra", "a", "a-b", "apple", "banana", "cherry"};

static void build_folder1(const char *root, int reverse) {
    char p[1024];
    int n = (int)(sizeof folder1 / sizeof folder1[0]);
    for (int k = 0; k < n; k++) {
        int i = reverse ? n - 1 - k : k;
        snprintf(p, sizeof p, "%s/%s", root, folder1[i].path);
        write_bytes(p, folder1[i].data, folder1[i].len);
    }
    /* noise that must be ignored */
    static const char *const junk[] = {
        "apple/sub/.hidden.png", "apple/.git/x.png", "apple/notes.txt", "apple/a.png.bak",
        "apple/noext", "apple/png", ".cache/x.png", "root.png", ".DS_Store", "banana/.x.jpg",
        "Zebra/gif.gif", NULL};
    for (int k = 0; junk[k]; k++) {
        snprintf(p, sizeof p, "%s/%s", root, junk[k]);
        write_str(p, "junk");
    }
    snprintf(p, sizeof p, "%s/cherry", root);   /* an empty class */
    CHECK(mkdir(p, 0755) == 0);
}

static void test_folder_order(void) {
    /* Under a real locale "apple" would collate before "Zebra"; the index
     * must not care. */
    setlocale(LC_ALL, "en_US.UTF-8");
    const char *root = tp("f1");
    build_folder1(root, 0);
    char slash_root[1100];
    snprintf(slash_root, sizeof slash_root, "%s/", root);
    sp_dataset *ds = open_ok(slash_root);
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_IMAGEFOLDER);
    CHECK(strcmp(sp__dataset_kind_name(SP_DATASET_IMAGEFOLDER), "imagefolder") == 0);
    CHECK(strcmp(sp__dataset_root(ds), root) == 0);
    int nc = (int)(sizeof folder1_classes / sizeof folder1_classes[0]);
    int n = (int)(sizeof folder1 / sizeof folder1[0]);
    CHECK(sp__dataset_num_classes(ds) == nc);
    for (int c = 0; c < nc; c++)
        CHECK_MSG(strcmp(sp_dataset_class_name(ds, c), folder1_classes[c]) == 0, "class %d is %s", c,
                  sp_dataset_class_name(ds, c));
    CHECK(sp_dataset_class_name(ds, nc) == NULL && sp_dataset_class_name(ds, -1) == NULL);
    CHECK(sp__dataset_size(ds) == (uint64_t)n);
    uint64_t counts[6] = {0};
    for (int i = 0; i < n; i++) {
        CHECK_MSG(strcmp(sp_dataset_path(ds, (uint64_t)i), folder1[i].path) == 0, "sample %d is %s",
                  i, sp_dataset_path(ds, (uint64_t)i));
        CHECK(sp_dataset_label(ds, (uint64_t)i) == folder1[i].label);
        counts[folder1[i].label]++;
    }
    for (int c = 0; c < nc; c++) CHECK(sp__dataset_class_count(ds, c) == counts[c]);
    CHECK(sp__dataset_class_count(ds, 5) == 0);   /* cherry: empty but a class */
    CHECK(sp_dataset_label(ds, (uint64_t)n) == -1 && sp_dataset_path(ds, (uint64_t)n) == NULL);
    int w, h;
    CHECK(sp__dataset_raw_dims(ds, &w, &h) == SP_EINVAL);
    /* the fingerprint is exactly the documented layout */
    sp_digest ref = ref_fingerprint(SP_DATASET_IMAGEFOLDER, folder1_classes, nc, 0, 0, folder1, n);
    CHECK(fp_eq(sp__dataset_fingerprint(ds), ref));
    XXH128_hash_t hh = XXH3_128bits(folder1[3].data, folder1[3].len);
    sp_digest ch = sp__dataset_content_hash(ds, 3);
    CHECK(ch.hi == hh.high64 && ch.lo == hh.low64);
    sp_dataset_close(ds);
    setlocale(LC_ALL, "C");
}

static void test_fingerprint(void) {
    const char *a = tp("fpa"), *b = tp("fpb");
    build_folder1(a, 0);
    build_folder1(b, 1);   /* other root, other creation order */
    sp_digest f0 = fp_of(a);
    CHECK(fp_eq(f0, fp_of(a)));   /* re-open */
    CHECK(fp_eq(f0, fp_of(b)));
    char p[1100], q[1100];

    /* content, same size */
    snprintf(p, sizeof p, "%s/apple/b.png", a);
    write_str(p, "apple B!");
    sp_digest f1 = fp_of(a);
    CHECK(!fp_eq(f0, f1));
    write_str(p, "apple b!");
    CHECK(fp_eq(f0, fp_of(a)));

    /* move to another class: label and path change */
    snprintf(q, sizeof q, "%s/banana/b.png", a);
    CHECK(rename(p, q) == 0);
    sp_digest f2 = fp_of(a);
    CHECK(!fp_eq(f0, f2) && !fp_eq(f1, f2));
    CHECK(rename(q, p) == 0);
    CHECK(fp_eq(f0, fp_of(a)));

    /* rename inside the class: path only */
    snprintf(q, sizeof q, "%s/apple/b2.png", a);
    CHECK(rename(p, q) == 0);
    CHECK(!fp_eq(f0, fp_of(a)));
    CHECK(rename(q, p) == 0);

    /* a new (empty) class changes the class list */
    snprintf(q, sizeof q, "%s/dates", a);
    CHECK(mkdir(q, 0755) == 0);
    CHECK(!fp_eq(f0, fp_of(a)));
    CHECK(rmdir(q) == 0);
    CHECK(fp_eq(f0, fp_of(a)));

    /* list file: only a label changes */
    write_str(tp("fpl/x.png"), "x");
    write_str(tp("fpl/y.png"), "y");
    write_str(tp("fpl/l1.txt"), "x.png\t0\ny.png\t1\n");
    write_str(tp("fpl/l2.txt"), "x.png\t1\ny.png\t0\n");
    write_str(tp("fpl/l3.txt"), "y.png\t1\nx.png\t0\n");   /* same as l1, other line order */
    sp_digest l1 = fp_of(tp("fpl/l1.txt"));
    CHECK(!fp_eq(l1, fp_of(tp("fpl/l2.txt"))));
    CHECK(fp_eq(l1, fp_of(tp("fpl/l3.txt"))));
}

/* ---- reading ------------------------------------------------------------------------------ */

static sp_dataset *g_read_ds;

static int read_all_ok(const sp_dataset *ds) {
    uint64_t n = sp__dataset_size(ds);
    for (uint64_t i = 0; i < n; i++) {
        sp_sample_data s;
        sp_error err;
        if (sp__dataset_read(ds, i, &s, &err) != 0) return 0;
        int ok = s.src.len == folder1[i].len && s.src.raw == NULL &&
                 (s.src.len == 0 || memcmp(s.src.bytes, folder1[i].data, s.src.len) == 0);
        sp__sample_data_free(&s);
        if (!ok) return 0;
    }
    return 1;
}

static void *reader_thread(void *arg) {
    (void)arg;
    for (int r = 0; r < 25; r++)
        if (!read_all_ok(g_read_ds)) return (void *)1;
    return NULL;
}

static void test_read(void) {
    const char *root = tp("rd");
    build_folder1(root, 0);
    sp_dataset *ds = open_ok(root);
    int n = (int)sp__dataset_size(ds);
    sp_error err;
    for (int i = 0; i < n; i++) {
        sp_sample_data s;
        CHECK_OK(sp__dataset_read(ds, (uint64_t)i, &s, &err), &err);
        CHECK(s.src.len == folder1[i].len);
        CHECK(s.src.len == 0 || memcmp(s.src.bytes, folder1[i].data, s.src.len) == 0);
        CHECK(s.src.raw == NULL && s.src.path == s.full_path);
        char want[1100];
        snprintf(want, sizeof want, "%s/%s", root, folder1[i].path);
        CHECK(strcmp(s.full_path, want) == 0);
        sp__sample_data_free(&s);
        CHECK(s.full_path == NULL && s.owned == NULL);
    }
    sp__sample_data_free(NULL);
    sp_sample_data s;
    CHECK(sp__dataset_read(ds, (uint64_t)n, &s, &err) == SP_ERANGE);

    /* concurrent threads, then a forked child */
    g_read_ds = ds;
    pthread_t th[4];
    for (int t = 0; t < 4; t++) CHECK(pthread_create(&th[t], NULL, reader_thread, NULL) == 0);
    for (int t = 0; t < 4; t++) {
        void *r;
        CHECK(pthread_join(th[t], &r) == 0);
        CHECK(r == NULL);
    }
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(read_all_ok(ds) ? 0 : 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* a file changed after open: same size, then other size, then gone */
    char p[1100];
    snprintf(p, sizeof p, "%s/apple/b.png", root);   /* sample 5 */
    CHECK(strcmp(sp_dataset_path(ds, 5), "apple/b.png") == 0);
    write_str(p, "apple c!");
    CHECK(sp__dataset_read(ds, 5, &s, &err) == SP_EMISMATCH);
    CHECK_HAS(err.msg, p);
    CHECK_HAS(err.msg, "changed since the dataset was indexed");
    CHECK(s.full_path == NULL && s.owned == NULL && s.src.bytes == NULL);
    write_str(p, "apple b!!");
    CHECK(sp__dataset_read(ds, 5, &s, &err) == SP_EMISMATCH);
    CHECK_HAS(err.msg, "changed");
    write_str(p, "apple b!");   /* restored: readable again */
    CHECK_OK(sp__dataset_read(ds, 5, &s, &err), &err);
    sp__sample_data_free(&s);
    CHECK(unlink(p) == 0);
    CHECK(sp__dataset_read(ds, 5, &s, &err) == SP_EIO);
    CHECK_HAS(err.msg, p);
    CHECK_HAS(err.msg, "No such file");
    sp_dataset_close(ds);
    sp_dataset_close(NULL);
}

/* ---- IDX ------------------------------------------------------------------------------------ */

static void be32w(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24); b[1] = (uint8_t)(v >> 16); b[2] = (uint8_t)(v >> 8); b[3] = (uint8_t)v;
}

typedef struct blob { uint8_t *p; size_t len; } blob;

/* idx3 bytes: header for (n, rows, cols) followed by `have` pixel bytes k*7+3 */
static blob idx3(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t have) {
    blob b = {malloc(16 + have), 16 + have};
    CHECK(b.p);
    be32w(b.p, magic); be32w(b.p + 4, n); be32w(b.p + 8, rows); be32w(b.p + 12, cols);
    for (size_t k = 0; k < have; k++) b.p[16 + k] = (uint8_t)(k * 7 + 3);
    return b;
}

static blob idx1(uint32_t magic, uint32_t n, const uint8_t *labels, size_t have) {
    blob b = {malloc(8 + have), 8 + have};
    CHECK(b.p);
    be32w(b.p, magic); be32w(b.p + 4, n);
    if (have) memcpy(b.p + 8, labels, have);
    return b;
}

static void put_file(const char *path, blob b, int gz) {
    if (gz) write_gz(path, b.p, b.len);
    else write_bytes(path, b.p, b.len);
    free(b.p);
}

enum { IN = 5, IR = 3, IC = 4 };
static const uint8_t idx_labels[IN] = {3, 1, 4, 1, 9};

static void write_mini(const char *dir, const char *images, const char *labels, int gz_img,
                       int gz_lab) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, images);
    put_file(p, idx3(0x803, IN, IR, IC, IN * IR * IC), gz_img);
    snprintf(p, sizeof p, "%s/%s", dir, labels);
    put_file(p, idx1(0x801, IN, idx_labels, IN), gz_lab);
}

static void test_idx_valid(void) {
    write_mini(tp("idx"), "mini-images-idx3-ubyte", "mini-labels-idx1-ubyte", 0, 0);
    write_mini(tp("idxgz"), "mini-images-idx3-ubyte.gz", "mini-labels-idx1-ubyte.gz", 1, 1);
    write_mini(tp("idxmix"), "mini-images-idx3-ubyte.gz", "mini-labels-idx1-ubyte", 1, 0);
    write_mini(tp("idxdot"), "t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte", 0, 0);

    sp_dataset *ds = open_ok(tp("idx/mini-images-idx3-ubyte"));
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_IDX);
    CHECK(strcmp(sp__dataset_kind_name(SP_DATASET_IDX), "idx") == 0);
    CHECK(sp__dataset_size(ds) == IN);
    int w = 0, h = 0;
    CHECK(sp__dataset_raw_dims(ds, &w, &h) == 0 && w == IC && h == IR);
    CHECK(sp__dataset_num_classes(ds) == 10);
    const char *names[10];
    char namebuf[10][4];
    for (int c = 0; c < 10; c++) {
        snprintf(namebuf[c], sizeof namebuf[c], "%d", c);
        names[c] = namebuf[c];
        CHECK(strcmp(sp_dataset_class_name(ds, c), namebuf[c]) == 0);
    }
    CHECK(sp__dataset_class_count(ds, 1) == 2 && sp__dataset_class_count(ds, 0) == 0 &&
          sp__dataset_class_count(ds, 9) == 1);
    uint8_t pix[IN * IR * IC];
    for (int k = 0; k < IN * IR * IC; k++) pix[k] = (uint8_t)(k * 7 + 3);
    ref_sample rs[IN];
    char rpath[IN][64];
    for (int i = 0; i < IN; i++) {
        snprintf(rpath[i], sizeof rpath[i], "mini-images-idx3-ubyte#%d", i);
        CHECK(strcmp(sp_dataset_path(ds, (uint64_t)i), rpath[i]) == 0);
        CHECK(sp_dataset_label(ds, (uint64_t)i) == idx_labels[i]);
        rs[i].path = rpath[i];
        rs[i].label = idx_labels[i];
        rs[i].data = pix + i * IR * IC;
        rs[i].len = IR * IC;
        sp_sample_data s;
        sp_error err;
        CHECK_OK(sp__dataset_read(ds, (uint64_t)i, &s, &err), &err);
        CHECK(s.src.bytes == NULL && s.src.raw == &s.raw_view);
        CHECK(s.src.raw->width == IC && s.src.raw->height == IR && s.src.raw->channels == 1 &&
              s.src.raw->stride == IC);
        CHECK(memcmp(s.src.raw->data, pix + i * IR * IC, IR * IC) == 0);
        CHECK(strstr(s.full_path, "idx/mini-images-idx3-ubyte#") && s.src.path == s.full_path);
        sp__sample_data_free(&s);
    }
    sp_digest fp = sp__dataset_fingerprint(ds);
    CHECK(fp_eq(fp, ref_fingerprint(SP_DATASET_IDX, names, 10, IC, IR, rs, IN)));
    sp_dataset_close(ds);

    /* gzip'd copies fingerprint alike; the dotted naming works */
    CHECK(fp_eq(fp, fp_of(tp("idxgz/mini-images-idx3-ubyte.gz"))));
    CHECK(fp_eq(fp, fp_of(tp("idxmix/mini-images-idx3-ubyte.gz"))));
    ds = open_ok(tp("idxdot/t10k-images.idx3-ubyte"));
    CHECK(sp__dataset_size(ds) == IN && strcmp(sp_dataset_path(ds, 0),
                                               "t10k-images.idx3-ubyte#0") == 0);
    sp_dataset_close(ds);

    /* a changed label changes the fingerprint */
    uint8_t lab2[IN];
    memcpy(lab2, idx_labels, IN);
    lab2[4] = 8;
    put_file(tp("idx/mini-labels-idx1-ubyte"), idx1(0x801, IN, lab2, IN), 0);
    CHECK(!fp_eq(fp, fp_of(tp("idx/mini-images-idx3-ubyte"))));

    /* RGB (4 dimensions, 3 channels last) and a label past 9: 43 classes */
    blob rgb = idx3(0x804, 2, 2, 2, 4 + 24);
    be32w(rgb.p + 16, 3);
    put_file(tp("idxrgb/c-images-idx4-ubyte"), rgb, 0);
    uint8_t rl[2] = {0, 42};
    put_file(tp("idxrgb/c-labels-idx1-ubyte"), idx1(0x801, 2, rl, 2), 0);
    ds = open_ok(tp("idxrgb/c-images-idx4-ubyte"));
    CHECK(sp__dataset_num_classes(ds) == 43 && sp_dataset_label(ds, 1) == 42);
    sp_sample_data s1;
    sp_error e1;
    CHECK_OK(sp__dataset_read(ds, 1, &s1, &e1), &e1);
    CHECK(s1.src.raw->channels == 3 && s1.src.raw->stride == 6 && s1.src.raw->width == 2);
    for (int k = 0; k < 12; k++) CHECK(s1.src.raw->data[k] == (uint8_t)((4 + 12 + k) * 7 + 3));
    sp__sample_data_free(&s1);
    sp_dataset_close(ds);

    /* limits */
    sp_dataset_limits lim = {.max_samples = 3};
    open_fails(tp("idxgz/mini-images-idx3-ubyte.gz"), &lim, SP_ELIMIT,
               "mini-images-idx3-ubyte.gz", "limit");
}

/* One malformed case per folder: images + labels written as given. */
static void idx_case(const char *name, blob img, blob lab, int gz, int code,
                     const char *file_sub, const char *what) {
    char dir[300], ip[400], lp[400];
    snprintf(dir, sizeof dir, "bad_%s", name);
    snprintf(ip, sizeof ip, "%s/%s", tp(dir), gz ? "x-images-idx3-ubyte.gz" : "x-images-idx3-ubyte");
    snprintf(lp, sizeof lp, "%s/%s", tp(dir), gz ? "x-labels-idx1-ubyte.gz" : "x-labels-idx1-ubyte");
    put_file(ip, img, gz);
    if (lab.p) put_file(lp, lab, gz);
    open_fails(ip, NULL, code, file_sub, what);
}

static void test_idx_malformed(void) {
    uint8_t lab[IN] = {0, 1, 2, 3, 4};
#define IMG(m, n, r, c, have) idx3((m), (n), (r), (c), (have))
#define LAB(m, n, l, have) idx1((m), (n), (l), (have))
    const int full = IN * IR * IC;
    idx_case("magic", IMG(0x12345678, IN, IR, IC, full), LAB(0x801, IN, lab, IN), 0,
             SP_EFORMAT, "x-images-idx3-ubyte", "bad magic");
    idx_case("dims", IMG(0x801, IN, IR, IC, full), LAB(0x801, IN, lab, IN), 0,
             SP_EFORMAT, "x-images-idx3-ubyte", "dimensions");
    idx_case("type", IMG(0xD03, IN, IR, IC, full), LAB(0x801, IN, lab, IN), 0,
             SP_EUNSUPP, "x-images-idx3-ubyte", "data type 0x0d");
    idx_case("lmagic", IMG(0x803, IN, IR, IC, full), LAB(0x803, IN, lab, IN), 0,
             SP_EFORMAT, "x-labels-idx1-ubyte", "magic");
    blob shorthdr = IMG(0x803, IN, IR, IC, 0);
    shorthdr.len = 10;
    idx_case("hdr", shorthdr, LAB(0x801, IN, lab, IN), 0, SP_EFORMAT,
             "x-images-idx3-ubyte", "truncated header");
    idx_case("trunc", IMG(0x803, IN, IR, IC, full - 7), LAB(0x801, IN, lab, IN), 0,
             SP_EFORMAT, "x-images-idx3-ubyte", "truncated");
    idx_case("truncgz", IMG(0x803, IN, IR, IC, full - 7), LAB(0x801, IN, lab, IN), 1,
             SP_EFORMAT, "x-images-idx3-ubyte.gz", "truncated");
    idx_case("trail", IMG(0x803, IN, IR, IC, full + 3), LAB(0x801, IN, lab, IN), 0,
             SP_EFORMAT, "x-images-idx3-ubyte", "trailing");
    idx_case("count", IMG(0x803, IN, IR, IC, full), LAB(0x801, IN - 1, lab, IN - 1), 0,
             SP_EFORMAT, "x-labels-idx1-ubyte", "4 labels, but");
    idx_case("ltrunc", IMG(0x803, IN, IR, IC, full), LAB(0x801, IN, lab, IN - 2), 1,
             SP_EFORMAT, "x-labels-idx1-ubyte.gz", "truncated");
    /* 4 dimensions: the 4th (the first pixel bytes here) must be 1 or 3 */
    idx_case("chans", IMG(0x804, IN, IR, IC, full), LAB(0x801, IN, lab, IN), 0,
             SP_EUNSUPP, "x-images-idx3-ubyte", "channels (only 1, grey, or 3");
    idx_case("zero", IMG(0x803, 0, IR, IC, 0), LAB(0x801, 0, lab, 0), 0, SP_EFORMAT,
             "x-images-idx3-ubyte", "0 images");
    idx_case("zerodim", IMG(0x803, IN, 0, IC, 0), LAB(0x801, IN, lab, IN), 0,
             SP_EFORMAT, "x-images-idx3-ubyte", "0 x 4");
    idx_case("hugedims", IMG(0x803, 1, 100000, 100000, 16), LAB(0x801, 1, lab, 1), 0,
             SP_ELIMIT, "x-images-idx3-ubyte", "100000 x 100000");
    idx_case("hugecount", IMG(0x803, 0xFFFFFFFFu, 28, 28, 100), LAB(0x801, 1, lab, 1), 0,
             SP_ELIMIT, "x-images-idx3-ubyte", "4294967295 images");
    /* within the limits but not in the file: refused as truncated without
     * allocating the declared 784 MB (ASan would abort on such a malloc) */
    idx_case("bigcount", IMG(0x803, 1000000, 28, 28, 100), LAB(0x801, 1, lab, 1), 1,
             SP_EFORMAT, "x-images-idx3-ubyte.gz", "truncated");
    /* 7.8 GB declared: over the default 4 GiB of pixels, named with its knob;
     * a lower SEEDPIPE_IDX_MAX_BYTES refuses even a small file, a malformed
     * one is an error naming the variable */
    idx_case("overlimit", IMG(0x803, 10000000, 28, 28, 100), LAB(0x801, 1, lab, 1), 1,
             SP_ELIMIT, "x-images-idx3-ubyte.gz", "SEEDPIPE_IDX_MAX_BYTES");
    setenv("SEEDPIPE_IDX_MAX_BYTES", "50", 1);   /* the file has 60 pixel bytes */
    idx_case("envlimit", IMG(0x803, IN, IR, IC, full), LAB(0x801, IN, lab, IN), 0,
             SP_ELIMIT, "x-images-idx3-ubyte", "limit of 50 bytes");
    setenv("SEEDPIPE_IDX_MAX_BYTES", "1K", 1);
    char okp[400];
    snprintf(okp, sizeof okp, "%s", tp("bad_envlimit/x-images-idx3-ubyte"));
    sp_dataset *ds = NULL;
    sp_error e;
    CHECK_OK(sp_dataset_open(okp, NULL, &ds, &e), &e);
    sp_dataset_close(ds);
    setenv("SEEDPIPE_IDX_MAX_BYTES", "0x10", 1);
    open_fails(okp, NULL, SP_EINVAL, "SEEDPIPE_IDX_MAX_BYTES=\"0x10\"", NULL);
    unsetenv("SEEDPIPE_IDX_MAX_BYTES");
    /* a FIFO where the labels file is expected: refused at once, no hang */
    char fifo[400];
    snprintf(fifo, sizeof fifo, "%s", tp("bad_envlimit/x-labels-idx1-ubyte"));
    CHECK(unlink(fifo) == 0 && mkfifo(fifo, 0600) == 0);
    open_fails(okp, NULL, SP_EIO, "x-labels-idx1-ubyte", "FIFO");
    blob none = {NULL, 0};
    idx_case("nolabels", IMG(0x803, IN, IR, IC, full), none, 0, SP_EIO,
             "x-labels-idx1-ubyte", "No such file");
    /* a gzip header followed by garbage */
    uint8_t *gzbad = malloc(64);
    CHECK(gzbad);
    static const uint8_t gzhdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(gzbad, gzhdr, 10);
    for (int k = 10; k < 64; k++) gzbad[k] = (uint8_t)(0xA5 ^ k);
    char p[400];
    snprintf(p, sizeof p, "%s", tp("bad_gzip/x-images-idx3-ubyte.gz"));
    write_bytes(p, gzbad, 64);
    free(gzbad);
    open_fails(p, NULL, SP_EFORMAT, "x-images-idx3-ubyte.gz", "gzip");
#undef IMG
#undef LAB
}

/* ---- list files ------------------------------------------------------------------------------ */

static void test_list(void) {
    write_str(tp("ls/img/a.png"), "AAA");
    write_str(tp("ls/img/b.png"), "BB");
    write_str(tp("ls/c.jpg"), "C");
    write_str(tp("abs/x.png"), "XXXX");
    char list[2048], absx[600];
    snprintf(absx, sizeof absx, "%s", tp("abs/x.png"));
    snprintf(list, sizeof list,
             "# a comment\n"
             "\n"
             "img/b.png\t1\n"
             "   # indented comment\n"
             "  \t \n"
             "c.jpg\t0\r\n"
             "img/a.png\t2  \n"
             "%s\t1", absx);
    write_str(tp("ls/train.txt"), list);
    sp_dataset *ds = open_ok(tp("ls/train.txt"));
    CHECK(sp__dataset_kind_of(ds) == SP_DATASET_LIST);
    CHECK(strcmp(sp__dataset_kind_name(SP_DATASET_LIST), "list") == 0);
    CHECK(sp__dataset_size(ds) == 4);
    CHECK(sp__dataset_num_classes(ds) == 3);
    CHECK(strcmp(sp_dataset_class_name(ds, 2), "2") == 0);
    const char *want[4] = {absx, "c.jpg", "img/a.png", "img/b.png"};
    const int wl[4] = {1, 0, 2, 1};
    const char *wd[4] = {"XXXX", "C", "AAA", "BB"};
    for (int i = 0; i < 4; i++) {
        CHECK_MSG(strcmp(sp_dataset_path(ds, (uint64_t)i), want[i]) == 0, "%d: %s", i,
                  sp_dataset_path(ds, (uint64_t)i));
        CHECK(sp_dataset_label(ds, (uint64_t)i) == wl[i]);
        sp_sample_data s;
        sp_error err;
        CHECK_OK(sp__dataset_read(ds, (uint64_t)i, &s, &err), &err);
        CHECK(s.src.len == strlen(wd[i]) && memcmp(s.src.bytes, wd[i], s.src.len) == 0);
        sp__sample_data_free(&s);
    }
    CHECK(sp__dataset_class_count(ds, 1) == 2);
    ref_sample rs[4];
    for (int i = 0; i < 4; i++) {
        rs[i].path = want[i]; rs[i].label = wl[i]; rs[i].data = wd[i]; rs[i].len = strlen(wd[i]);
    }
    const char *cls[3] = {"0", "1", "2"};
    CHECK(fp_eq(sp__dataset_fingerprint(ds),
                ref_fingerprint(SP_DATASET_LIST, cls, 3, 0, 0, rs, 4)));
    sp_dataset_close(ds);

    write_str(tp("ls/bad1.txt"), "c.jpg\t0\n# ok\nimg/a.png\tabc\n");
    open_fails(tp("ls/bad1.txt"), NULL, SP_EFORMAT, "bad1.txt:3:", "bad label \"abc\"");
    write_str(tp("ls/bad2.txt"), "c.jpg\t-1\n");
    open_fails(tp("ls/bad2.txt"), NULL, SP_EFORMAT, "bad2.txt:1:", "bad label");
    write_str(tp("ls/bad3.txt"), "c.jpg\t70000\n");
    open_fails(tp("ls/bad3.txt"), NULL, SP_EFORMAT, "bad3.txt:1:", "out of range");
    write_str(tp("ls/bad4.txt"), "c.jpg\t0\nimg/a.png 1\n");
    open_fails(tp("ls/bad4.txt"), NULL, SP_EFORMAT, "bad4.txt:2:", "no TAB");
    write_str(tp("ls/bad5.txt"), "\t1\n");
    open_fails(tp("ls/bad5.txt"), NULL, SP_EFORMAT, "bad5.txt:1:", "empty path");
    write_str(tp("ls/bad6.txt"), "img/a.png\t0\nc.jpg\t1\n\nimg/a.png\t2\n");
    open_fails(tp("ls/bad6.txt"), NULL, SP_EFORMAT, "bad6.txt:4:", "duplicate path \"img/a.png\" (first on line 1)");
    write_str(tp("ls/bad7.txt"), "c.jpg\t0\nmissing.png\t1\n");
    open_fails(tp("ls/bad7.txt"), NULL, SP_EIO, "ls/missing.png: No such file",
               "(listed at " );
    open_fails(tp("ls/bad7.txt"), NULL, SP_EIO, "bad7.txt:2)", NULL);
    write_str(tp("ls/bad8.txt"), "# nothing\n\n");
    open_fails(tp("ls/bad8.txt"), NULL, SP_EFORMAT, "bad8.txt", "no samples");
    write_bytes(tp("ls/bad9.txt"), "c.jpg\t0\nx\0y\t1\n", 14);
    open_fails(tp("ls/bad9.txt"), NULL, SP_EFORMAT, "bad9.txt:2:", "NUL");
    write_str(tp("ls/bad10.txt"), "c.jpg\t\n");
    open_fails(tp("ls/bad10.txt"), NULL, SP_EFORMAT, "bad10.txt:1:", "bad label");
}

/* ---- roots, limits, links ------------------------------------------------------------------- */

/* Unreadable root folder and unreadable sample file. Root ignores
 * permissions, so as root the checks run in a child that drops to nobody. */
static void unreadable_checks(void) {
    open_fails(tp("locked"), NULL, SP_EIO, tp("locked"), "Permission denied");
    open_fails(tp("locked2"), NULL, SP_EIO, "locked2/cls/a.png", "Permission denied");
}

static void test_unreadable(void) {
    write_str(tp("locked/cls/a.png"), "a");
    write_str(tp("locked2/cls/a.png"), "a");
    CHECK(chmod(tp("locked"), 0) == 0);
    CHECK(chmod(tp("locked2/cls/a.png"), 0) == 0);
    if (geteuid() != 0) {
        unreadable_checks();
    } else {
        CHECK(chmod(g_tmp, 0755) == 0);   /* let nobody reach the test folders */
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0) _exit(77);
            unreadable_checks();
            _exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
        if (WEXITSTATUS(st) == 77) printf("SKIP: cannot drop root to test unreadable roots\n");
        else CHECK_MSG(WEXITSTATUS(st) == 0, "unreadable-root checks failed in the child");
        CHECK(chmod(g_tmp, 0700) == 0);
    }
    CHECK(chmod(tp("locked"), 0755) == 0);
    CHECK(chmod(tp("locked2/cls/a.png"), 0644) == 0);
}

/* Paths resolve against the root as it was at open, not the cwd of the
 * moment; FIFOs never block the index. */
static void test_cwd_and_fifo(void) {
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd));
    write_str(tp("rel/c/a.png"), "rel-a");
    CHECK(chdir(g_tmp) == 0);
    sp_dataset *ds = open_ok("rel");
    CHECK(strcmp(sp__dataset_root(ds), "rel") == 0);
    CHECK(chdir("/") == 0);
    sp_sample_data s;
    sp_error err;
    CHECK_OK(sp__dataset_read(ds, 0, &s, &err), &err);
    CHECK(s.full_path[0] == '/' && s.src.len == 5 && memcmp(s.src.bytes, "rel-a", 5) == 0);
    sp__sample_data_free(&s);
    sp_dataset_close(ds);
    CHECK(chdir(cwd) == 0);

    write_str(tp("fifo/c/a.png"), "a");
    CHECK(mkfifo(tp("fifo/c/pipe.png"), 0644) == 0);
    ds = open_ok(tp("fifo"));   /* ignored in a folder walk */
    CHECK(sp__dataset_size(ds) == 1);
    sp_dataset_close(ds);
    write_str(tp("fifo/list.txt"), "c/a.png\t0\nc/pipe.png\t1\n");
    open_fails(tp("fifo/list.txt"), NULL, SP_EFORMAT, "c/pipe.png", "not a regular file");
}

static void test_errors(void) {
    sp_error err;
    sp_dataset *ds = (sp_dataset *)1;
    CHECK(sp_dataset_open(NULL, NULL, &ds, &err) == SP_EINVAL && ds == NULL);
    CHECK(sp_dataset_open("x", NULL, NULL, &err) == SP_EINVAL);
    CHECK(sp_dataset_open("/nonexistent-sp/data", NULL, &ds, NULL) == SP_EIO);   /* err may be NULL */

    open_fails(tp("does/not/exist"), NULL, SP_EIO, tp("does/not/exist"),
               "No such file or directory");
    CHECK(mkdir(tp("empty"), 0755) == 0);
    open_fails(tp("empty"), NULL, SP_EFORMAT, tp("empty"), "no class folders");
    write_str(tp("noimg/cls/readme.txt"), "x");
    open_fails(tp("noimg"), NULL, SP_EFORMAT, tp("noimg"), "no images");

    test_unreadable();

    /* limits */
    for (int k = 0; k < 5; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "lim/c/%d.png", k);
        write_str(tp(rel), k == 2 ? "0123456789012345678901234567890123456789" : "small");
    }
    sp_dataset_limits lim = {.max_samples = 3};
    open_fails(tp("lim"), &lim, SP_ELIMIT, tp("lim"), "more than 3 samples");
    sp_dataset_limits lim2 = {.max_file_bytes = 20};
    open_fails(tp("lim"), &lim2, SP_ELIMIT, "lim/c/2.png", "limit of 20");

    /* a dangling link named like an image; a link loop */
    write_str(tp("dang/c/ok.png"), "ok");
    CHECK(symlink(tp("dang/c/nothing.png"), tp("dang/c/broken.png")) == 0);
    open_fails(tp("dang"), NULL, SP_EIO, "dang/c/broken.png", "No such file");
    write_str(tp("loop/c/ok.png"), "ok");
    CHECK(symlink("..", tp("loop/c/up")) == 0);
    open_fails(tp("loop"), NULL, SP_EFORMAT, "loop/c/up", "loop");
    /* a link to a file elsewhere is followed */
    write_str(tp("elsewhere.png"), "far");
    write_str(tp("lnk/c/ok.png"), "ok");
    CHECK(symlink(tp("elsewhere.png"), tp("lnk/c/far.png")) == 0);
    ds = open_ok(tp("lnk"));
    CHECK(sp__dataset_size(ds) == 2 && strcmp(sp_dataset_path(ds, 0), "c/far.png") == 0);
    sp_dataset_close(ds);
}

/* ---- Fashion-MNIST (CI installs dataset-fashion-mnist) ---------------------------------------- */

static void test_fashion_mnist(void) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    char p[256];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    if (access(p, R_OK) != 0) {
        printf("SKIP: %s not installed (apt-get install dataset-fashion-mnist)\n", p);
        exit(77);   /* this case alone is skipped */
    }
    static const struct { const char *file; uint64_t n, per; } sets[] = {
        {"train-images-idx3-ubyte.gz", 60000, 6000}, {"t10k-images-idx3-ubyte.gz", 10000, 1000}};
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/%s", dir, sets[s].file);
        sp_dataset *ds = open_ok(p);
        CHECK(sp__dataset_kind_of(ds) == SP_DATASET_IDX);
        CHECK(sp__dataset_size(ds) == sets[s].n);
        CHECK(sp__dataset_num_classes(ds) == 10);
        for (int c = 0; c < 10; c++) CHECK(sp__dataset_class_count(ds, c) == sets[s].per);
        int w, h;
        CHECK(sp__dataset_raw_dims(ds, &w, &h) == 0 && w == 28 && h == 28);
        sp_sample_data sd;
        sp_error err;
        CHECK_OK(sp__dataset_read(ds, sets[s].n - 1, &sd, &err), &err);
        int nonzero = 0;
        for (int k = 0; k < 28 * 28; k++) nonzero += sd.src.raw->data[k] != 0;
        CHECK(nonzero > 50);
        sp__sample_data_free(&sd);
        char hex[33];
        sp_digest_hex(sp__dataset_fingerprint(ds), hex);
        printf("fashion-mnist %s: %llu samples, fingerprint %s\n", sets[s].file,
               (unsigned long long)sets[s].n, hex);
        sp_dataset_close(ds);
    }
}

/* sp_dataset_info_get() and sp_dataset_mix_source_get(): the same values as
 * the library's one-value accessors, only struct_size bytes written (a
 * program built against a shorter struct keeps working), the kind named by
 * its driver. */
static void test_info(void) {
    const char *root = tp("inf");
    build_folder1(root, 0);
    sp_dataset *ds = open_ok(root);
    sp_dataset_info in = SP_DATASET_INFO_INIT;
    CHECK(sp_dataset_info_get(ds, &in) == 0);
    CHECK(strcmp(in.kind_name, "imagefolder") == 0 && in.kind == SP_DATASET_IMAGEFOLDER);
    CHECK(strcmp(in.root, sp__dataset_root(ds)) == 0 && in.size == sp__dataset_size(ds));
    CHECK(in.num_classes == 6 && in.class_counts[3] == sp__dataset_class_count(ds, 3));
    CHECK(fp_eq(in.fingerprint, sp__dataset_fingerprint(ds)));
    CHECK(in.shard_count == 0 && in.raw_w == 0 && in.raw_h == 0);
    CHECK(in.mix_sources == 0 && in.mix_length == in.size && in.index.used == 1);
    /* an older caller's struct: the fields past its end stay untouched */
    sp_dataset_info small;
    memset(&small, 0xab, sizeof small);
    small.struct_size = offsetof(sp_dataset_info, root);
    CHECK(sp_dataset_info_get(ds, &small) == 0);
    CHECK(strcmp(small.kind_name, "imagefolder") == 0 && small.kind == SP_DATASET_IMAGEFOLDER);
    const unsigned char *tail = (const unsigned char *)&small + offsetof(sp_dataset_info, root);
    CHECK(tail[0] == 0xab && tail[sizeof small - offsetof(sp_dataset_info, root) - 1] == 0xab);
    small.struct_size = offsetof(sp_dataset_info, kind_name);   /* not even the name */
    CHECK(sp_dataset_info_get(ds, &small) == SP_EINVAL && sp_dataset_info_get(NULL, &in) == SP_EINVAL);
    sp_mix_source src = SP_MIX_SOURCE_INIT;
    CHECK(sp_dataset_mix_source_get(ds, 0, &src) == SP_EINVAL);   /* not a mixture */

    /* a mixture of the folder and a list (weights 3 and 1.5 reduce to 2/3, 1/3) */
    write_str(tp("infl/x.png"), "x");
    write_str(tp("infl/l.txt"), "x.png\t1\n");
    char mix[1100];
    snprintf(mix, sizeof mix, "3\t%s\n1.5\t%s\nlength\t7\n", root, tp("infl/l.txt"));
    write_str(tp("inf.mix"), mix);
    sp_dataset *mx = open_ok(tp("inf.mix"));
    CHECK(sp_dataset_info_get(mx, &in) == 0);
    CHECK(strcmp(in.kind_name, "mixture") == 0 && in.kind == SP_DATASET_MIX);
    CHECK(in.mix_sources == 2 && in.mix_length == 7 && in.size == sp__dataset_size(ds) + 1);
    CHECK(sp_dataset_mix_source_get(mx, 1, &src) == 0);
    CHECK(src.weight_num == 1 && src.weight_den == 3 && src.offset == sp__dataset_size(ds));
    CHECK(src.class_offset == 6 && src.dataset == sp__dataset_mix_source(mx, 1));
    sp_dataset_info si = SP_DATASET_INFO_INIT;
    CHECK(sp_dataset_info_get(src.dataset, &si) == 0 && strcmp(si.kind_name, "list") == 0);
    CHECK(sp_dataset_mix_source_get(mx, 0, &src) == 0 && src.weight_num == 2 && src.offset == 0);
    CHECK(sp_dataset_mix_source_get(mx, 2, &src) == SP_EINVAL);
    sp_dataset_close(mx);
    sp_dataset_close(ds);

    /* the other kinds' names come from their drivers too */
    CHECK(sp_dataset_open("fakedata:size=3,image=1x2x5", NULL, &ds, NULL) == 0);
    CHECK(sp_dataset_info_get(ds, &in) == 0 && strcmp(in.kind_name, "fakedata") == 0);
    CHECK(in.kind == SP_DATASET_FAKE && in.raw_w == 5 && in.raw_h == 2 && in.size == 3);
    sp_dataset_close(ds);
}

/* ---- cases: each in its own process, in its own folders under g_tmp ------------------- */

static void setup(void) { sp_tmp_make("dataset"); }
static void teardown(void) { sp_tmp_remove(); }

static const sp_case cases[] = {
    SP_CASE(test_folder_order),
    SP_CASE(test_fingerprint),
    SP_CASE(test_read),
    SP_CASE(test_idx_valid),
    SP_CASE(test_idx_malformed),
    SP_CASE(test_list),
    SP_CASE(test_errors),
    SP_CASE(test_cwd_and_fifo),
    SP_CASE(test_fashion_mnist),
    SP_CASE(test_info),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

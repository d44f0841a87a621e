/* test_coco_stream.c - the streamed COCO instances reader
 * (dataset/dataset_coco.c over dataset/dataset_coco_stream.c).
 *
 * Asserts: a generated COCO-shaped file with more than 2^24 JSON tokens
 * (the old whole-file bound) opens under the default limits, with every
 * sample's boxes, labels and order as generated, its crowd and unmatched
 * annotations counted, and a fingerprint equal to XXH3-128 of
 * "seedpipe-coco-v1" and the file's bytes at once (the reader's before
 * streaming, so states made before stay valid); under lowered limits a
 * file far above max_tokens in all opens while an element above it, an
 * element above max_element and a file above max_bytes are SP_ELIMIT
 * errors naming the file; the key order does not matter (annotations
 * before images, other keys around) and every proper prefix of a file is
 * an error naming the file, never a crash or a success; segmentations are
 * kept or only checked as asked, each coordinate the double strtod()
 * gives for its text; a left-out annotation's keypoints never
 * become the next kept one's.
 *
 * Cases (tests/runner.h): test_beyond_old_bounds, test_lowered_bounds,
 * test_key_order_and_prefixes, test_keep_segmentations,
 * test_left_out_keypoints_do_not_leak, test_coordinates_equal_strtod; setup makes the
 * dataset in a mkdtemp() folder, teardown removes it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "dataset/dataset_coco.h"
#include "seedpipe/dataset.h"

#include <fcntl.h>

static char g_dir[256];

/* setup: a.png, b.png, c.png and a list file naming them in a fresh folder
 * (the cases write their JSON files there too). */
static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/sp-coco-stream-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    char p[512];
    const char *names[] = {"a.png", "b.png", "c.png"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        FILE *f = fopen(p, "wb");
        CHECK(f && fputs("x", f) >= 0 && fclose(f) == 0);
    }
    snprintf(p, sizeof p, "%s/list.txt", g_dir);
    FILE *f = fopen(p, "wb");
    CHECK(f && fputs("a.png\t0\nb.png\t1\nc.png\t0\n", f) >= 0 && fclose(f) == 0);
}

static sp_dataset *make_dataset(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/list.txt", g_dir);
    sp_dataset_limits lim = {.max_samples = 16, .max_file_bytes = 64, .index = SP_INDEX_OFF};
    sp_dataset *ds;
    sp_error err;
    CHECK_OK(sp_dataset_open(p, &lim, &ds, &err), &err);
    return ds;
}

static const char *file(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static void write_text(const char *name, const char *text, size_t n) {
    FILE *f = fopen(file(name), "wb");
    CHECK(f && fwrite(text, 1, n, f) == n && fclose(f) == 0);
}

static const char *IMAGES = "\"images\": [{\"id\": 1, \"file_name\": \"a.png\"}, "
                            "{\"id\": 2, \"file_name\": \"b.png\"}, "
                            "{\"id\": 3, \"file_name\": \"c.png\"}, "
                            "{\"id\": 9, \"file_name\": \"gone.png\"}]";

/* Annotation q of the big file: image, category, box, crowd. */
static int big_image(int q) { return q % 11 == 10 ? 9 : 1 + q % 3; }

static uint64_t write_big(const char *path, int nann, int npts) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    uint64_t tokens = 0;
    fprintf(f, "{\"info\": {\"v\": [1, 2, {\"x\": null}]}, %s,\n\"annotations\": [", IMAGES);
    for (int q = 0; q < nann; q++) {
        fprintf(f, "%s{\"id\": %d, \"image_id\": %d, \"category_id\": %d, \"iscrowd\": %d, "
                "\"bbox\": [%d, %d, 3, 4], \"segmentation\": [[", q ? ",\n" : "", q,
                big_image(q), q, q % 13 == 12, q % 7, q % 5);
        for (int k = 0; k < 2 * npts; k++) fprintf(f, k ? ",%d" : "%d", (k * 7 + q) % 50);
        fputs("]]}", f);
        tokens += 20 + 2 * (uint64_t)npts;
    }
    fputs("], \"categories\": [{\"id\": 1, \"name\": \"x\"}]}\n", f);
    CHECK(fclose(f) == 0);
    return tokens;
}

static sp_digest hash_file(const char *path) {
    sp__buf buf = {NULL, 0};
    size_t len;
    sp_error err;
    CHECK_OK(sp__read_regular(AT_FDCWD, path, path, 0, (uint64_t)1 << 32, &buf, &len, &err), &err);
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_str(&h, "seedpipe-coco-v1");
    sp__hash_bytes(&h, buf.p, len);
    sp__buf_free(&buf);
    return sp__hash_digest(&h);
}

static void test_beyond_old_bounds(void) {
    sp_dataset *ds = make_dataset();
    const int nann = 4300, npts = 2000;
    uint64_t tokens = write_big(file("big.json"), nann, npts);
    CHECK(tokens > ((uint64_t)1 << 24));
    sp_coco_limits lim = sp__coco_default_limits();
    lim.keep_segmentations = 0;
    sp_coco *c;
    sp_error err;
    CHECK_OK(sp__coco_open(file("big.json"), ds, &lim, &c, &err), &err);
    uint64_t crowd = 0, unmatched = 0, n[3] = {0, 0, 0};
    for (int q = 0; q < nann; q++) {
        if (q % 13 == 12) crowd++;
        else if (big_image(q) == 9) unmatched++;
        else n[big_image(q) - 1]++;
    }
    CHECK(sp__coco_crowd(c) == crowd && sp__coco_unmatched(c) == unmatched);
    for (uint64_t s = 0; s < 3; s++) {
        sp_targets t;
        sp__coco_get(c, s, &t);
        CHECK_MSG(t.n == n[s], "sample %llu: %u boxes, expected %llu", (unsigned long long)s,
                  t.n, (unsigned long long)n[s]);
        uint32_t b = 0;
        for (int q = 0; q < nann; q++) {
            if (q % 13 == 12 || big_image(q) != (int)s + 1) continue;
            CHECK(t.labels[b] == q);
            CHECK(t.boxes[4 * b] == (float)(q % 7) && t.boxes[4 * b + 1] == (float)(q % 5));
            CHECK(t.boxes[4 * b + 2] == (float)(q % 7 + 3) && t.boxes[4 * b + 3] == (float)(q % 5 + 4));
            CHECK(sp__coco_segmentation(c, s, b) == NULL);
            b++;
        }
    }
    sp_digest a = sp__coco_fingerprint(c), e = hash_file(file("big.json"));
    CHECK(a.hi == e.hi && a.lo == e.lo);
    size_t first;
    CHECK(sp__coco_unsegmented(c, &first) == 0);
    sp__coco_close(c);
    sp_dataset_close(ds);
}

static int open_with(const sp_dataset *ds, const char *text, const sp_coco_limits *lim,
                     sp_error *err) {
    write_text("t.json", text, strlen(text));
    sp_coco *c = NULL;
    sp_error_clear(err);
    int rc = sp__coco_open(file("t.json"), ds, lim, &c, err);
    CHECK((rc == 0) == (c != NULL));
    if (rc) CHECK_MSG(strstr(err->msg, file("t.json")) != NULL, "message: %s", err->msg);
    sp__coco_close(c);
    return rc;
}

/* A document with n small annotations of image 1, then `extra` inside the
 * last one (malloc'd). */
static char *doc(int n, const char *extra) {
    size_t cap = 4096 + (size_t)n * 128 + strlen(extra);
    char *s = malloc(cap);
    CHECK(s != NULL);
    size_t at = (size_t)snprintf(s, cap, "{%s, \"annotations\": [", IMAGES);
    for (int q = 0; q < n; q++)
        at += (size_t)snprintf(s + at, cap - at, "%s{\"image_id\": 1, \"category_id\": %d, "
                               "\"bbox\": [0, 0, 1, 1]%s}", q ? ", " : "", q,
                               q == n - 1 ? extra : "");
    snprintf(s + at, cap - at, "]}");
    return s;
}

static void test_lowered_bounds(void) {
    sp_dataset *ds = make_dataset();
    sp_coco_limits lim = {1 << 20, 64, 4096, 1, 0};
    sp_error err;
    char *ok = doc(200, "");
    CHECK_OK(open_with(ds, ok, &lim, &err), &err);   /* ~3000 tokens in all */
    char kps[1024] = ", \"keypoints\": [1";
    for (int i = 1; i < 90; i++) strcat(kps, i % 3 == 2 ? ", 1" : ", 2");
    strcat(kps, "]");
    char *many = doc(3, kps);
    CHECK(open_with(ds, many, &lim, &err) == SP_ELIMIT);
    CHECK_MSG(strstr(err.msg, "more than 64 JSON values") && strstr(err.msg, "offset"), "%s",
              err.msg);
    char *longs = malloc(6000);
    CHECK(longs != NULL);
    strcpy(longs, ", \"note\": \"");
    memset(longs + strlen(longs), 'x', 5000);
    strcpy(longs + 11 + 5000, "\"");
    char *big = doc(3, longs);
    CHECK(open_with(ds, big, &lim, &err) == SP_ELIMIT);
    CHECK_MSG(strstr(err.msg, "a value longer than 4096 bytes"), "%s", err.msg);
    lim.max_bytes = 100;
    CHECK(open_with(ds, ok, &lim, &err) == SP_ELIMIT);
    CHECK_MSG(strstr(err.msg, "annotations larger than 100 bytes"), "%s", err.msg);
    free(ok);
    free(many);
    free(longs);
    free(big);
    sp_dataset_close(ds);
}

static void same_targets(const sp_dataset *ds, const char *x, const char *y) {
    sp_coco *a, *b;
    sp_error err;
    write_text("x.json", x, strlen(x));
    write_text("y.json", y, strlen(y));
    CHECK_OK(sp__coco_open(file("x.json"), ds, NULL, &a, &err), &err);
    CHECK_OK(sp__coco_open(file("y.json"), ds, NULL, &b, &err), &err);
    for (uint64_t s = 0; s < 3; s++) {
        sp_targets p, q;
        sp__coco_get(a, s, &p);
        sp__coco_get(b, s, &q);
        CHECK(p.n == q.n && p.k == q.k);
        CHECK(memcmp(p.boxes, q.boxes, 16 * (size_t)p.n) == 0);
        CHECK(memcmp(p.labels, q.labels, 4 * (size_t)p.n) == 0);
    }
    CHECK(sp__coco_fingerprint(a).lo != sp__coco_fingerprint(b).lo);
    sp__coco_close(a);
    sp__coco_close(b);
}

static void test_key_order_and_prefixes(void) {
    sp_dataset *ds = make_dataset();
    const char *anns = "\"annotations\": [{\"image_id\": 2, \"category_id\": 5, \"bbox\": "
                       "[1, 2, 3, 4]}, {\"image_id\": 1, \"category_id\": 6, \"bbox\": "
                       "[5, 6, 7, 8], \"segmentation\": [[0, 0, 4, 0, 4, 4]]}]";
    char x[2048], y[2048];
    snprintf(x, sizeof x, "{%s, %s}", IMAGES, anns);
    snprintf(y, sizeof y, " {\"categories\": [{\"id\": 5, \"s\": \"\\\"]}\"}], %s,\n"
             "\"info\": {\"a\": [[], {}]}, %s, \"annotations\": 7} ", anns, IMAGES);
    same_targets(ds, x, y);
    sp_error err;
    for (size_t cut = 0; cut + 1 < strlen(y); cut++) {   /* y ends with a space */
        write_text("p.json", y, cut);
        sp_coco *c = NULL;
        int rc = sp__coco_open(file("p.json"), ds, NULL, &c, &err);
        CHECK_MSG(rc == SP_EFORMAT && c == NULL, "prefix of %zu bytes: %d", cut, rc);
        CHECK(strstr(err.msg, file("p.json")) != NULL);
    }
    CHECK(open_with(ds, "{\"images\": [], \"annotations\": []} {}", NULL, &err) == SP_EFORMAT);
    CHECK(strstr(err.msg, "trailing characters"));
    CHECK(open_with(ds, "{\"images\": [1,], \"annotations\": []}", NULL, &err) == SP_EFORMAT);
    CHECK(open_with(ds, "{\"images\": [], \"annotations\": [],}", NULL, &err) == SP_EFORMAT);
    CHECK(open_with(ds, "{\"images\": [] \"annotations\": []}", NULL, &err) == SP_EFORMAT);
    CHECK(open_with(ds, "{\"images\": [], \"annotations\": []}", NULL, &err) == 0);
    CHECK(open_with(ds, "{\"annotations\": []}", NULL, &err) == SP_EFORMAT);
    CHECK(strstr(err.msg, "\"images\" must be an array"));
    sp_dataset_close(ds);
}

static void test_keep_segmentations(void) {
    sp_dataset *ds = make_dataset();
    char *d = doc(2, ", \"segmentation\": [[0, 0, 4, 0, 4, 4], [1, 1, 2, 1, 2, 2, 1, 2]]");
    write_text("s.json", d, strlen(d));
    free(d);
    sp_coco_limits lim = sp__coco_default_limits();
    for (int keep = 0; keep < 2; keep++) {
        lim.keep_segmentations = keep;
        sp_coco *c;
        sp_error err;
        CHECK_OK(sp__coco_open(file("s.json"), ds, &lim, &c, &err), &err);
        size_t first = 99;
        CHECK(sp__coco_unsegmented(c, &first) == 1 && first == 0);
        const double *seg = sp__coco_segmentation(c, 0, 1);
        if (keep) {
            CHECK(seg && seg[0] == 1 && seg[1] == 2 && seg[2] == 3 && seg[9] == 4);
        } else {
            CHECK(seg == NULL);
        }
        CHECK(sp__coco_segmentation(c, 0, 0) == NULL);
        sp__coco_close(c);
    }
    sp_dataset_close(ds);
}

/* A left-out annotation (crowd, or of an image no sample has) with
 * keypoints, then a kept one without: the kept one's keypoints are zeros. */
static void test_left_out_keypoints_do_not_leak(void) {
    sp_dataset *ds = make_dataset();
    const char *t = "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\"}], \"annotations\": ["
                    "{\"image_id\": 1, \"category_id\": 1, \"bbox\": [0, 0, 1, 1], \"iscrowd\": 1, "
                    "\"keypoints\": [5, 6, 2]}, "
                    "{\"image_id\": 1, \"category_id\": 2, \"bbox\": [0, 0, 1, 1]}, "
                    "{\"image_id\": 1, \"category_id\": 3, \"bbox\": [0, 0, 1, 1], "
                    "\"keypoints\": [7, 8, 1]}]}";
    write_text("k.json", t, strlen(t));
    sp_coco *c;
    sp_error err;
    CHECK_OK(sp__coco_open(file("k.json"), ds, NULL, &c, &err), &err);
    sp_targets g;
    sp__coco_get(c, 0, &g);
    CHECK(g.n == 2 && g.k == 1 && g.labels[0] == 2 && g.labels[1] == 3);
    CHECK(g.keypoints[0] == 0 && g.keypoints[1] == 0 && g.keypoints[2] == 0);
    CHECK(g.keypoints[3] == 7 && g.keypoints[4] == 8 && g.keypoints[5] == 1);
    sp__coco_close(c);
    sp_dataset_close(ds);
}

/* Polygon coordinates in many decimal forms read back (kept) equal to
 * strtod() of their text: the reader's plain-decimal fast path and its
 * strtod() fallback agree bit for bit. */
static void test_coordinates_equal_strtod(void) {
    sp_dataset *ds = make_dataset();
    enum { NPT = 3000 };
    static char text[NPT * 2][40];
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int q = 0; q < 2 * NPT; q++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        int ni = 1 + (int)(r % 7), nf = (int)((r >> 5) % 11);   /* up to 17 digits */
        char *t = text[q];
        size_t at = 0;
        if ((r >> 20) & 1) t[at++] = '-';
        for (int d = 0; d < ni + nf; d++) {
            if (d == ni) t[at++] = '.';
            int v = (int)((r >> (d % 40 + 9)) % 10);
            t[at++] = (char)('0' + (d == 0 && ni > 1 && v == 0 ? 1 : v));
        }
        t[at] = '\0';
        if (q < 8) snprintf(t, 40, "%s", (const char *[]){"-0", "0.1", "1234567.12345678",
                            "1.000000000000001", "16777216", "0.30000000000000004", "7",
                            "99999.999999999"}[q]);
    }
    size_t cap = (size_t)NPT * 2 * 42 + 4096, at = 0;
    char *d = malloc(cap);
    CHECK(d != NULL);
    at += (size_t)snprintf(d, cap, "{%s, \"annotations\": [{\"image_id\": 1, \"category_id\": "
                           "1, \"bbox\": [0, 0, 1, 1], \"segmentation\": [[", IMAGES);
    for (int q = 0; q < 2 * NPT; q++)
        at += (size_t)snprintf(d + at, cap - at, "%s%s", q ? "," : "", text[q]);
    snprintf(d + at, cap - at, "]]}]}");
    write_text("n.json", d, strlen(d));
    free(d);
    sp_coco *c;
    sp_error err;
    CHECK_OK(sp__coco_open(file("n.json"), ds, NULL, &c, &err), &err);
    const double *seg = sp__coco_segmentation(c, 0, 0);
    CHECK(seg && seg[0] == 1 && seg[1] == 1 && seg[2] == NPT);
    for (int q = 0; q < 2 * NPT; q++) {
        double want = strtod(text[q], NULL);
        CHECK_MSG(memcmp(&seg[3 + q], &want, sizeof want) == 0, "%s: %.17g, strtod %.17g",
                  text[q], seg[3 + q], want);
    }
    sp__coco_close(c);
    sp_dataset_close(ds);
}

static const sp_case cases[] = {
    SP_CASE(test_coordinates_equal_strtod),
    SP_CASE(test_left_out_keypoints_do_not_leak),
    SP_CASE(test_beyond_old_bounds),
    SP_CASE(test_lowered_bounds),
    SP_CASE(test_key_order_and_prefixes),
    SP_CASE(test_keep_segmentations),
};

static void teardown(void) {
    if (!g_dir[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
}

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

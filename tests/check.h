/* check.h - tiny assertion helpers for seedpipe's C tests.
 *
 * Tests only (library code never aborts). CHECK(cond) prints the failing
 * expression with file:line and exits 1; SKIP(msg) exits 77, which ctest
 * reports as a skipped test. sp_test_data(rel) returns $SP_SHARED_DATA/rel.
 * sp_test_corpus(rel, what) says whether that third-party corpus (folder or
 * file) is there; when it is not (a fresh clone has no ../shared/data) it
 * prints a SKIP line naming the path and what was not run, and the test
 * goes on with its other parts and ends with `return sp_test_status();`
 * (77 if a part was skipped, else 0; a failed CHECK has already exited 1).
 * sp_test_break_png(dir, n) overwrites the n-th (1-based, sorted) PNG of an
 * ImageFolder with 6 undecodable bytes (on-error tests).
 */
#ifndef SP_TESTS_CHECK_H
#define SP_TESTS_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    exit(1); } } while (0)
#define CHECK_MSG(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)
#define CHECK_OK(expr, errp) do { int rc_ = (expr); if (rc_ != 0) { \
    fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #expr, \
            rc_, (errp)->msg); exit(1); } } while (0)
#define SKIP(msg) do { printf("SKIP: %s\n", msg); exit(77); } while (0)

static inline const char *sp_test_data(const char *rel) {
    static char buf[4096];
    const char *root = getenv("SP_SHARED_DATA");
    if (!root) root = "../shared/data";
    snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

/* The number of parts skipped for a missing corpus (one counter per test). */
static inline int *sp_test_skips_(void) {
    static int n;
    return &n;
}

/* 1 when $SP_SHARED_DATA/rel exists; else prints
 *   SKIP: <path> not found (SP_SHARED_DATA=<value>; the third-party corpora,
 *   see README); not run: <what>
 * counts the skip for sp_test_status() and returns 0. */
static inline int sp_test_corpus(const char *rel, const char *what) {
    const char *root = getenv("SP_SHARED_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root ? root : "../shared/data", rel);
    struct stat st;
    if (stat(path, &st) == 0) return 1;
    printf("SKIP: %s not found (SP_SHARED_DATA=%s; the third-party corpora, see README)%s%s\n",
           path, root ? root : "unset, default ../shared/data", what ? "; not run: " : "",
           what ? what : "");
    fflush(stdout);
    ++*sp_test_skips_();
    return 0;
}

/* What main returns once every part ran or was skipped: 77 (ctest: skipped)
 * when sp_test_corpus() skipped a part, 0 when everything ran. */
static inline int sp_test_status(void) { return *sp_test_skips_() ? 77 : 0; }

static inline void sp_test_break_png(const char *dir, int n) {
    char cmd[4200], p[4096];
    snprintf(cmd, sizeof cmd, "ls %s/*/*.png | sed -n %dp", dir, n);
    FILE *f = popen(cmd, "r");
    CHECK(f && fgets(p, sizeof p, f));
    pclose(f);
    p[strcspn(p, "\n")] = '\0';
    FILE *g = fopen(p, "wb");
    CHECK(g && fwrite("broken", 1, 6, g) == 6 && fclose(g) == 0);
}
#endif

/* check.h - tiny assertion helpers for seedpipe's C tests.
 *
 * Tests only (library code never aborts). CHECK(cond) prints the failing
 * expression with file:line and exits 1; SKIP(msg) exits 77, which ctest
 * reports as a skipped test. sp_test_data(rel) returns $SP_SHARED_DATA/rel.
 */
#ifndef SP_TESTS_CHECK_H
#define SP_TESTS_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#endif

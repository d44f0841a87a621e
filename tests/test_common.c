/* test_common.c - common/'s helpers that every layer builds on.
 *
 *  1. test_sbuf: the one growable append buffer (common/sbuf_internal.h)
 *     holds exactly what was appended: many printf appends across every
 *     growth step equal one snprintf of the whole; binary bytes (NULs
 *     inside) go in as they are; a NUL always follows the data; an empty
 *     printf allocates and stays empty; sp__sbuf_free empties it.
 *  2. test_publish_knobs: the atomic publish's internal knobs
 *     (fileio_internal.h): the mode given to sp__publish_begin_ex is the
 *     published file's (0600), each sync policy (none, file, directory)
 *     publishes the whole file over the old one, no temporary file is left
 *     beside it, and an abort leaves the old file as it was.
 *  3. test_escape: the one rule for printing strings from outside
 *     (common/escape_internal.h): C0, DEL, C1 (0x80-0x9f) and the
 *     backslash as \xNN, other bytes as they are; a cut buffer ends on a
 *     whole escape, NUL-terminated; the malloc'd copy is never cut.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/escape_internal.h"
#include "common/fileio_internal.h"
#include "common/sbuf_internal.h"
#include "runner.h"
#include "common/common_internal.h"

static void test_sbuf(void) {
    sp__sbuf b = {0};
    static char want[200000];
    size_t n = 0;
    for (int i = 0; i < 20000; i++) {   /* grows from 256 bytes through ~2^18 */
        sp__sbuf_printf(&b, "%d:%s|", i, i % 7 ? "x" : "seven");
        n += (size_t)snprintf(want + n, sizeof want - n, "%d:%s|", i, i % 7 ? "x" : "seven");
    }
    CHECK(!b.oom && b.len == n && b.cap > b.len && memcmp(b.p, want, n) == 0);
    CHECK(b.p[b.len] == '\0' && strlen(b.p) == n);
    const unsigned char bin[5] = {1, 0, 2, 0, 255};
    sp__sbuf_put(&b, bin, sizeof bin);
    sp__sbuf_put(&b, NULL, 0);
    CHECK(b.len == n + 5 && memcmp(b.p + n, bin, 5) == 0 && b.p[b.len] == '\0');
    sp__sbuf_free(&b);
    CHECK(!b.p && !b.len && !b.cap && !b.oom);
    sp__sbuf e = {0};
    sp__sbuf_printf(&e, "%s", "");
    CHECK(e.p && e.len == 0 && e.p[0] == '\0');
    sp__sbuf_free(&e);
    sp__sbuf_free(NULL);
}

/* The names in dir other than . and .. (count), and whether one is `name`. */
static int names_in(const char *dir, const char *name, int *has) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    *has = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        n++;
        if (!strcmp(de->d_name, name)) *has = 1;
    }
    closedir(d);
    return n;
}

static void test_publish_knobs(void) {
    char dir[] = "/tmp/sp_test_common.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    umask(022);
    const sp__sync policies[3] = {SP__SYNC_NONE, SP__SYNC_FILE, SP__SYNC_DIR};
    sp_error err;
    for (int k = 0; k < 3; k++) {
        sp_publish *p;
        CHECK_OK(sp__publish_begin_ex(path, 0600, &p, &err), &err);
        char text[32];
        int len = snprintf(text, sizeof text, "version %d\n", k);
        CHECK(sp__write_full(sp__publish_fd(p), text, (size_t)len) == 0);
        CHECK_OK(sp__publish_commit_ex(p, policies[k], &err), &err);
        struct stat st;
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        uint8_t *data;
        size_t n;
        CHECK_OK(sp_read_file(path, 1024, &data, &n, &err), &err);
        CHECK(n == (size_t)len && memcmp(data, text, n) == 0);
        free(data);
        int has;
        CHECK(names_in(dir, "out.bin", &has) == 1 && has);   /* no temporary left */
    }
    sp_publish *p;   /* an abort: the old file stays, the temporary goes */
    CHECK_OK(sp__publish_begin_ex(path, 0644, &p, &err), &err);
    CHECK(sp__write_full(sp__publish_fd(p), "partial", 7) == 0);
    sp__publish_abort(p);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 10 && (st.st_mode & 0777) == 0600);
    int has;
    CHECK(names_in(dir, "out.bin", &has) == 1 && has);
    CHECK(unlink(path) == 0 && rmdir(dir) == 0);
}

static void test_escape(void) {
    const char in[] = "a\nb\x1b[2J\\c\x7f\x9b\xc3\xa9.tar";
    const char want[] = "a\\x0ab\\x1b[2J\\x5cc\\x7f\\x9b\xc3\xa9.tar";
    char out[128];
    sp__escape_copy(out, sizeof out, in, sizeof in - 1);
    CHECK_MSG(strcmp(out, want) == 0, "escaped \"%s\"", out);
    char *d = sp__escape_dup(in, sizeof in - 1);
    CHECK(d && strcmp(d, want) == 0);
    free(d);
    sp__escape_copy(out, 6, in, sizeof in - 1);   /* "a" + "\x0a" does not fit in 5 */
    CHECK_MSG(strcmp(out, "a") == 0, "cut: \"%s\"", out);
    sp__escape_copy(out, sizeof out, in, 3);        /* a length, not only a NUL, ends it */
    CHECK(strcmp(out, "a\\x0ab") == 0);
    d = sp__escape_dup("", 0);
    CHECK(d && d[0] == '\0');
    free(d);
}

static const sp_case cases[] = {
    SP_CASE(test_sbuf),
    SP_CASE(test_publish_knobs),
    SP_CASE(test_escape),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), NULL, NULL);
}

/* tmpdir.h - a C test's own temporary folder (tests/runner.h runs each case
 * in its own process: setup() makes the folder, teardown() removes it).
 *
 *   static void setup(void) { sp_tmp_make("tokens"); }   // /tmp/sp_test_tokens.XXXXXX
 *   static void teardown(void) { sp_tmp_remove(); }
 *   ... fopen(tp("a.idx"), "w") ...                       // a path under it
 *
 * g_tmp is the folder; tp() gives paths under it from 8 rotating buffers,
 * so up to 8 may be used in one expression. The including file defines
 * _XOPEN_SOURCE 700 before any include (nftw). Header-only: each test is
 * its own program.
 */
#ifndef SEEDPIPE_TESTS_TMPDIR_H
#define SEEDPIPE_TESTS_TMPDIR_H

#include "check.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static char g_tmp[256];

static int sp_tmp_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* rm -rf p (links removed, never followed). */
static inline void sp_tmp_rm_rf(const char *p) { nftw(p, sp_tmp_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static inline void sp_tmp_make(const char *tag) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sp_test_%s.XXXXXX", tag);
    CHECK(mkdtemp(g_tmp));
}

static inline void sp_tmp_remove(void) { sp_tmp_rm_rf(g_tmp); }

static inline const char *tp(const char *rel) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 1024, "%s/%s", g_tmp, rel);
    return b;
}

#endif

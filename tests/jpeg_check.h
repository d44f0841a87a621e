/* jpeg_check.h - what the JPEG verdict and checkpoint tests share
 * (test_jpeg_verdict.c, test_jpeg_ckpt.c): writing a file and ageing it
 * past the index's racy window, opening a dataset with its index info, a
 * sample's verdict, and the files of a third-party corpus. Header-only: each test is its
 * own program; needs check.h's CHECK and CHECK_OK.
 */
#ifndef SEEDPIPE_TESTS_JPEG_CHECK_H
#define SEEDPIPE_TESTS_JPEG_CHECK_H

#include "seedpipe/dataset.h"
#include "dataset/dataset_api_internal.h"
#include "check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

static inline void write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    fclose(f);
}

/* mtime an hour ago (the ctime stays: the index trusts a file's stat
 * once both are over 2 s old, so the tests sleep 3 s after writing). */
static inline void age(const char *path) {
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= 3600;
    tv[1] = tv[0];
    CHECK(utimes(path, tv) == 0);
}

/* Open the dataset at path (it must open) and get its index info. */
static inline sp_dataset *open_ds(const char *path, sp_dataset_index_info *info) {
    sp_dataset *ds = NULL;
    sp_error err;
    CHECK_OK(sp_dataset_open(path, NULL, &ds, &err), &err);
    sp__dataset_index_info_get(ds, info);
    return ds;
}

/* sp__ds_verdict() without the table: 1 if sample i decoded clean. */
static inline int validated(const sp_dataset *ds, uint64_t i) {
    const uint8_t *aux;
    size_t len;
    return sp__ds_verdict(ds, i, &aux, &len);
}

/* Every regular file under dir (recursively, dot names skipped) appended
 * to (*v, *n), malloc'd paths. */
static inline void corpus_files(const char *dir, char ***v, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        int pl = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (pl < 0 || (size_t)pl >= sizeof p) continue;
        if (stat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            corpus_files(p, v, n);
        } else if (S_ISREG(st.st_mode)) {
            *v = realloc(*v, (*n + 1) * sizeof **v);
            (*v)[(*n)++] = strdup(p);
        }
    }
    closedir(d);
}

#endif

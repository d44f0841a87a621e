/* jpeg_files.h - bench_decode_pipeline's input: every .jpg / .jpeg under
 * a folder read into memory, sorted by path (so runs see the same order),
 * and the two clocks it reports. Header-only: each bench is its own
 * program.
 */
#ifndef SEEDPIPE_BENCH_JPEG_FILES_H
#define SEEDPIPE_BENCH_JPEG_FILES_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "seedpipe/common.h"

typedef struct {
    char *path;
    uint8_t *data;
    size_t len;
} jpeg_file;

/* Wall-clock seconds. */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: the per-core figure, less exposed than the wall
 * clock to other processes on a shared machine. */
static inline double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void jpeg_files_walk(const char *dir, jpeg_file **files, size_t *n, size_t *cap) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        const char *dot = strrchr(e->d_name, '.');
        if (e->d_type == DT_DIR) {
            jpeg_files_walk(p, files, n, cap);
        } else if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) {
            sp_error err;
            jpeg_file f = {strdup(p), NULL, 0};
            if (sp_read_file(p, 0, &f.data, &f.len, &err) != 0) {
                fprintf(stderr, "skip %s\n", err.msg);
                free(f.path);
                continue;
            }
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 256;
                *files = realloc(*files, *cap * sizeof **files);
            }
            (*files)[(*n)++] = f;
        }
    }
    closedir(d);
}

static int jpeg_file_cmp(const void *a, const void *b) {
    return strcmp(((const jpeg_file *)a)->path, ((const jpeg_file *)b)->path);
}

/*! jpeg_files_load() : the JPEG files under dir, sorted by path (*n of
 *  them; free with jpeg_files_free()). */
static inline jpeg_file *jpeg_files_load(const char *dir, size_t *n) {
    jpeg_file *files = NULL;
    size_t cap = 0;
    *n = 0;
    jpeg_files_walk(dir, &files, n, &cap);
    if (*n) qsort(files, *n, sizeof *files, jpeg_file_cmp);
    return files;
}

static inline void jpeg_files_free(jpeg_file *files, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(files[i].path);
        free(files[i].data);
    }
    free(files);
}

#endif

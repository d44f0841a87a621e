/* fuzz_util.h - helpers shared by the libFuzzer targets (tests/fuzz/).
 *
 * Targets whose reader only takes a path get a private temporary directory
 * (under $TMPDIR or /tmp, never /dev/shm), created on first use and removed
 * at exit; each run rewrites its files there.
 */
#ifndef SP_FUZZ_UTIL_H
#define SP_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dataset/dataset_internal.h"

static char fz_dir[512];

static void fz_cleanup(void) {
    if (!fz_dir[0]) return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir);
    if (system(cmd) != 0) { /* best effort */ }
    fz_dir[0] = '\0';
}

static const char *fz_tmpdir(void) {
    if (fz_dir[0]) return fz_dir;
    const char *t = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/spfuzz.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fz_dir)) abort();
    atexit(fz_cleanup);
    return fz_dir;
}

/* Write data to DIR/name (truncating); returns the malloc'ed full path. */
static char *fz_write(const char *name, const uint8_t *data, size_t len) {
    const char *d = fz_tmpdir();
    size_t n = strlen(d) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", d, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    close(fd);
    return p;
}

#ifdef SEEDPIPE_DATASET_H
/* The invariants of any opened dataset: 1..max_samples samples, 1..65536
 * classes whose counts add up to the samples, every label one of them,
 * every path present; then the first `nread` samples are read back, each
 * one either returning its bytes or failing with a message. */
static void fz_check_dataset(const sp_dataset *ds, uint64_t max_samples, uint64_t nread) {
    uint64_t n = sp__dataset_size(ds);
    if (n == 0 || n > max_samples) abort();
    int k = sp__dataset_num_classes(ds);
    if (k <= 0 || k > 65536) abort();
    uint64_t tot = 0;
    for (int c = 0; c < k; c++) tot += sp__dataset_class_count(ds, c);
    if (tot != n) abort();
    for (uint64_t i = 0; i < n; i++) {
        int l = sp_dataset_label(ds, i);
        if (!sp_dataset_path(ds, i) || l < 0 || l >= k) abort();
        if (i >= nread) continue;
        sp_sample_data sd;
        sp_error err;
        if (sp__dataset_read(ds, i, &sd, &err) == 0) {
            if (!sd.src.bytes && !sd.src.raw) abort();
            sp__sample_data_free(&sd);
        } else if (err.msg[0] == '\0') {
            abort();
        }
    }
}
#endif

#endif

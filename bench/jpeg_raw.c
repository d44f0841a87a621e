/* bench/jpeg_raw.c - the JPEG decode ceiling: raw TurboJPEG throughput.
 *
 *   bench_jpeg_raw DIR [SECONDS]
 *
 * Loads every .jpg/.jpeg file under DIR (recursively) into memory, then
 * times tjDecompress2() full decodes to packed RGB with TJFLAG_ACCURATEDCT
 * (the same accurate integer IDCT seedpipe uses) on one thread, in passes
 * over all files, until at least SECONDS (default 2) have elapsed. Files
 * TurboJPEG cannot decode are left out (and counted). Prints
 *   raw_tjdecompress2 images/s: X
 *   raw_tjdecompress2 MB/s: Y        (decoded RGB bytes per second)
 *   raw_tjdecompress2 input MB/s: Z  (compressed bytes per second)
 * This is the peer seedpipe's decode path is measured against; it uses no
 * seedpipe code except sp_read_file().
 */
#include "seedpipe/decode.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <turbojpeg.h>

typedef struct jfile { uint8_t *data; size_t len; int w, h; } jfile;
typedef struct jset { jfile *v; size_t n, cap; size_t skipped; } jset;

static int has_jpeg_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

/* TurboJPEG 2.1 can leave a handle unusable after a failed call (the next
 * header read reports "two SOI markers"), so a failure replaces it. */
static void tj_reset(tjhandle *tj) {
    tjDestroy(*tj);
    *tj = tjInitDecompress();
}

static void load_dir(const char *dir, tjhandle *tj, jset *set) {
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "bench_jpeg_raw: cannot open %s\n", dir); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) { load_dir(path, tj, set); continue; }
        if (!*tj) break;
        if (!S_ISREG(st.st_mode) || !has_jpeg_ext(e->d_name)) continue;
        jfile f = {0};
        sp_error err;
        if (sp_read_file(path, 0, &f.data, &f.len, &err) != 0) { set->skipped++; continue; }
        int sub, cs;
        if (tjDecompressHeader3(*tj, f.data, (unsigned long)f.len, &f.w, &f.h, &sub, &cs) != 0 ||
            (uint64_t)f.w * (uint64_t)f.h > (64ull << 20)) {
            tj_reset(tj);
            free(f.data); set->skipped++; continue;
        }
        /* keep only files that decode without error */
        uint8_t *tmp = malloc((size_t)f.w * (size_t)f.h * 3);
        int bad = !tmp || tjDecompress2(*tj, f.data, (unsigned long)f.len, tmp, f.w, 0, f.h,
                                        TJPF_RGB, TJFLAG_ACCURATEDCT) != 0;
        free(tmp);
        if (bad) { tj_reset(tj); free(f.data); set->skipped++; continue; }
        if (set->n == set->cap) {
            set->cap = set->cap ? 2 * set->cap : 64;
            jfile *nv = realloc(set->v, set->cap * sizeof *nv);
            if (!nv) { free(f.data); set->skipped++; break; }
            set->v = nv;
        }
        set->v[set->n++] = f;
    }
    closedir(d);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [SECONDS]\n", argv[0]);
        return 2;
    }
    double min_s = argc > 2 ? atof(argv[2]) : 2.0;
    if (!(min_s > 0)) min_s = 2.0;
    tjhandle tj = tjInitDecompress();
    if (!tj) { fprintf(stderr, "bench_jpeg_raw: tjInitDecompress failed\n"); return 1; }
    jset set = {0};
    load_dir(argv[1], &tj, &set);
    if (!tj) { fprintf(stderr, "bench_jpeg_raw: tjInitDecompress failed\n"); return 1; }
    if (set.n == 0) {
        fprintf(stderr, "bench_jpeg_raw: no decodable JPEG under %s (%zu skipped)\n", argv[1],
                set.skipped);
        tjDestroy(tj);
        return 1;
    }
    size_t maxpix = 0, in_bytes = 0, out_bytes = 0;
    for (size_t i = 0; i < set.n; i++) {
        size_t p = (size_t)set.v[i].w * (size_t)set.v[i].h;
        if (p > maxpix) maxpix = p;
    }
    uint8_t *dst = malloc(maxpix * 3);
    if (!dst) { fprintf(stderr, "bench_jpeg_raw: out of memory\n"); return 1; }

    long images = 0;
    int failures = 0;
    double t0 = now_s(), t = t0;
    do {
        for (size_t i = 0; i < set.n; i++) {
            const jfile *f = &set.v[i];
            if (tjDecompress2(tj, f->data, (unsigned long)f->len, dst, f->w, 0, f->h, TJPF_RGB,
                              TJFLAG_ACCURATEDCT) != 0)
                failures++;
            images++;
            in_bytes += f->len;
            out_bytes += (size_t)f->w * (size_t)f->h * 3;
        }
        t = now_s();
    } while (t - t0 < min_s);
    double el = t - t0;

    printf("raw_tjdecompress2 files: %zu (skipped %zu), decodes: %ld in %.2f s, 1 thread\n",
           set.n, set.skipped, images, el);
    printf("raw_tjdecompress2 images/s: %.1f\n", (double)images / el);
    printf("raw_tjdecompress2 MB/s: %.1f\n", (double)out_bytes / el / 1e6);
    printf("raw_tjdecompress2 input MB/s: %.1f\n", (double)in_bytes / el / 1e6);
    if (failures) printf("raw_tjdecompress2 failures: %d\n", failures);

    free(dst);
    for (size_t i = 0; i < set.n; i++) free(set.v[i].data);
    free(set.v);
    tjDestroy(tj);
    return failures ? 1 : 0;
}

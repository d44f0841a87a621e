/* coco_open.c - open a COCO instances JSON against a list dataset, the
 * reader behind --annotations (dataset/dataset_coco.c), and print the open
 * time and this process's peak RSS. bench/coco_open.py drives it.
 *
 *   bench_coco_open LIST JSON [keep]   (keep: 1 keeps the segmentations,
 *                                       as masks=instance does; default 0)
 *
 * Prints one line: "open_s=S peak_rss_mb=M base_rss_mb=B boxes=N" (base:
 * the peak after opening the dataset, before the annotations).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "dataset/dataset_coco.h"
#include "seedpipe/dataset.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double peak_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIST JSON [keep]\n", argv[0]);
        return 2;
    }
    sp_dataset_limits dl = {.max_samples = 1u << 24, .max_file_bytes = 1u << 20,
                            .index = SP_INDEX_OFF};
    sp_dataset *ds;
    sp_error err;
    if (sp_dataset_open(argv[1], &dl, &ds, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double base = peak_mb();
    sp_coco_limits lim = sp__coco_default_limits();
    lim.keep_segmentations = argc > 3 && atoi(argv[3]) == 1;
    sp_coco *c;
    double t0 = now();
    if (sp__coco_open(argv[2], ds, &lim, &c, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t = now() - t0;
    uint64_t boxes = 0;
    for (uint64_t i = 0; i < sp__dataset_size(ds); i++) {
        sp_targets tg;
        sp__coco_get(c, i, &tg);
        boxes += tg.n;
    }
    printf("open_s=%.3f peak_rss_mb=%.1f base_rss_mb=%.1f boxes=%llu\n", t, peak_mb(), base,
           (unsigned long long)boxes);
    sp__coco_close(c);
    sp_dataset_close(ds);
    return 0;
}

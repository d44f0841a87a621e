/* pool_handoff.c - batch hand-off rate and latency of the worker pool.
 *
 *   bench_pool_handoff [--workers W] [--ring R] [--batch B] [--batches N]
 *
 * Writes a small IDX dataset (4096 gray 28x28 images: no decode) to a temp
 * folder and streams it through the pool with a trivial pipeline
 * ("hflip p=0.5"), so the numbers are those of the machinery, not of image
 * work. The consumer does nothing but take and release. Reported:
 *  - batches/s and images/s over the run;
 *  - wake-up latency: for batches that became complete while the consumer
 *    was waiting in sp__pool_next(), the time from the last worker's store
 *    (its CLOCK_MONOTONIC stamp in the slot) to sp__pool_next() returning:
 *    the futex hand-off, p50 / p99 / max;
 *  - ready latency: for batches already complete when asked for, the
 *    duration of the sp__pool_next() call (finalising the view in place).
 * The image bytes are never copied after the worker writes them: the view
 * points into the shared slot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "seedpipe/pool.h"
#include "pool/pool_internal.h"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void put_be32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fwrite(b, 1, 4, f);
}

static int write_idx(const char *dir, int n, char *images_path, size_t cap) {
    char lp[512];
    snprintf(images_path, cap, "%s/bench-images-idx3-ubyte", dir);
    snprintf(lp, sizeof lp, "%s/bench-labels-idx1-ubyte", dir);
    FILE *fi = fopen(images_path, "wb"), *fl = fopen(lp, "wb");
    if (!fi || !fl) return -1;
    put_be32(fi, 0x00000803);
    put_be32(fi, (uint32_t)n);
    put_be32(fi, 28);
    put_be32(fi, 28);
    put_be32(fl, 0x00000801);
    put_be32(fl, (uint32_t)n);
    uint8_t px[28 * 28];
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 28 * 28; k++) px[k] = (uint8_t)(i * 7 + k * 13);
        fwrite(px, 1, sizeof px, fi);
        fputc(i % 10, fl);
    }
    fclose(fi);
    fclose(fl);
    return 0;
}

static void pct(const char *what, uint64_t *v, size_t n) {
    if (!n) {
        printf("  %-16s (no samples)\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    printf("  %-16s n=%zu  p50 %.1f us  p99 %.1f us  max %.1f us\n", what, n,
           (double)v[n / 2] / 1e3, (double)v[(n * 99) / 100] / 1e3, (double)v[n - 1] / 1e3);
}

int main(int argc, char **argv) {
    int workers = 2, ring = 4, batch = 64, nbatches = 4000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--workers")) workers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ring")) ring = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batches")) nbatches = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_pool_handoff [--workers W] [--ring R] [--batch B] [--batches N]\n");
            return 2;
        }
    }
    char dir[] = "/tmp/sp-bench-handoff-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    char images[512];
    if (write_idx(dir, 4096, images, sizeof images) != 0) return 1;
    sp_loader_config lc;
    sp_loader_config_default(&lc);
    lc.dataset = images;
    lc.pipeline = "hflip p=0.5";
    lc.seed = 1;
    lc.batch_size = (uint32_t)batch;
    lc.drop_last = 1;
    uint32_t per_epoch = 4096u / (uint32_t)batch;
    uint32_t epochs = ((uint32_t)nbatches + per_epoch - 1) / per_epoch;
    sp_pool_config pc = {workers, ring, epochs, NULL, NULL, NULL};
    sp_pool *pool;
    sp_error err;
    if (sp__pool_create(&lc, &pc, &pool, &err) != 0) {
        fprintf(stderr, "bench_pool_handoff: %s\n", err.msg);
        return 1;
    }
    uint64_t *wake = calloc((size_t)nbatches, 8), *ready = calloc((size_t)nbatches, 8);
    size_t nw = 0, nr = 0;
    sp_batch v;
    uint64_t t0 = now_ns(), images_done = 0;
    int n = 0;
    for (; n < nbatches; n++) {
        uint64_t call = now_ns();
        int rc = sp__pool_next(pool, &v, &err);
        if (rc == SP_END) break;
        if (rc != 0) {
            fprintf(stderr, "bench_pool_handoff: %s\n", err.msg);
            return 1;
        }
        sp_pool_stats st;
        sp__pool_stats_get(pool, &st);
        if (st.last_ready_ns > call) wake[nw++] = st.last_taken_ns - st.last_ready_ns;
        else ready[nr++] = st.last_taken_ns - call;
        images_done += v.count;
        sp__pool_release(pool, &v, NULL);
    }
    double dt = (double)(now_ns() - t0) / 1e9;
    printf("pool hand-off: %d workers, ring %d, batch %d (28x28 gray uint8, hflip), %d batches\n",
           workers, ring, batch, n);
    printf("  %.0f batches/s, %.0f images/s\n", n / dt, (double)images_done / dt);
    pct("wake-up latency", wake, nw);
    pct("ready latency", ready, nr);
    sp__pool_destroy(pool);

    /* The same batches in-process (1 thread): the pool's per-sample claim
     * protocol costs the difference (sample-granularity claiming). */
    sp_loader *ld;
    if (sp_loader_create(&lc, &ld, &err) == 0) {
        sp_batch b;
        if (sp_batch_alloc(ld, &b) == 0) {
            uint64_t t1 = now_ns(), imgs = 0;
            for (int i = 0; i < n; i++) {
                if (sp_loader_batch(ld, (uint32_t)(i / (int)per_epoch), (uint64_t)(i % (int)per_epoch),
                                    &b, &err) != 0)
                    break;
                imgs += b.count;
            }
            double di = (double)(now_ns() - t1) / 1e9;
            printf("  in-process, 1 thread: %.0f images/s (%.2f us/sample; the pool: %.2f us/sample)\n",
                   (double)imgs / di, di * 1e6 / (double)imgs, dt * 1e6 / (double)images_done);
            sp_batch_free(&b);
        }
        sp_loader_destroy(ld);
    }
    free(wake);
    free(ready);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}

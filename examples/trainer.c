/* trainer.c - an example C trainer that reads batches from `seedpipe serve`.
 *
 *   example_trainer --name NAME [--rank R] [--bench] [--hold-and-die N]
 *
 * Opens a batch stream (stream.h) on the service's shared-memory region as
 * rank R (SP_STREAM_SERVICE), takes every batch in order (zero copy: the
 * view points into the region), computes something simple from the pixels
 * (the mean intensity per class, a stand-in for a training step), folds
 * each batch's digest into a stream digest, gives the batch back, and at
 * the end prints
 *
 *   stream digest: <32 hex> (N batches, M images, rank R of K)
 *
 * which is the value `seedpipe digest ... --rank R --world K` prints as
 * "stream" for the same configuration (XXH3-128 over the 16-byte big-endian
 * batch digests, in order), so a run through the service can be checked
 * against an in-process one by one line. Per epoch it prints the batches,
 * images and per-class mean intensity. A stream with targets (serve
 * --annotations, docs/targets.md) also gets one line with the boxes kept:
 * each sample is its image then its target fields (client.h,
 * sp_client_info: the sample record).
 *
 * The loop is the same for every source: with sc.kind SP_STREAM_LOADER or
 * SP_STREAM_POOL and a loader configuration (loader.h) instead of a service
 * name, it reads the same bytes in process or from a worker pool. Only
 * what a service alone has (its pid, the handoff timing) comes from the
 * stream's client (sp_stream_client(), client.h).
 *
 * --bench: no per-class statistics; prints delivery rate and the handoff
 * latency of each batch: "ready" = the call's duration when the batch
 * was already published; "wake-up" = from the last worker's store into the
 * slot to sp_stream_next() returning, for batches the trainer waited for.
 * --hold-and-die N: take N batches, then SIGKILL itself while holding the
 * last (tests: a dead client must not stall the other ranks).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

/* The client's hand-off timing (client.h) is the advanced API, which a
 * program opts into (README.md "The C API"); the rest is the front door. */
#define SEEDPIPE_ADVANCED_API 1
#include "seedpipe/client.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/stream.h"

#define MAX_CLASSES 1024

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Boxes kept in a batch of a targets stream: each sample's counts[0], the
 * int32 after its boxes, keypoints and labels (client.h: the sample record). */
static uint64_t kept_boxes(const sp_client_info *ci, const sp_batch *v, size_t sample_bytes) {
    size_t n = (size_t)ci->max_boxes, k = (size_t)ci->keypoints, at = ci->target_offset;
    at += 4 * (4 * n + 3 * n * k + n);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        int32_t kept;
        memcpy(&kept, v->images + (size_t)i * sample_bytes + at, sizeof kept);
        sum += (uint64_t)(kept > 0 ? kept : 0);
    }
    return sum;
}

static void pct(const char *what, uint64_t *v, size_t n) {
    if (!n) {
        printf("  %-18s (no samples)\n", what);
        return;
    }
    qsort(v, n, sizeof *v, cmp_u64);
    printf("  %-18s n=%zu  p50 %.1f us  p99 %.1f us  max %.1f us\n", what, n,
           (double)v[n / 2] / 1e3, (double)v[(n * 99) / 100] / 1e3, (double)v[n - 1] / 1e3);
}

static void fold(XXH3_state_t *st, sp_digest d) {
    uint8_t raw[16];
    for (int k = 0; k < 8; k++) {
        raw[k] = (uint8_t)(d.hi >> (56 - 8 * k));
        raw[8 + k] = (uint8_t)(d.lo >> (56 - 8 * k));
    }
    XXH3_128bits_update(st, raw, sizeof raw);
}

/* Mean intensity of one sample (uint8: 0..255; float32: normalised units). */
static double sample_mean(const uint8_t *p, size_t bytes, sp_dtype dt) {
    double s = 0.0;
    if (dt == SP_DTYPE_UINT8) {
        uint64_t acc = 0;
        for (size_t i = 0; i < bytes; i++) acc += p[i];
        return (double)acc / (double)bytes;
    }
    size_t n = bytes / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, p + i * sizeof f, sizeof f);
        s += f;
    }
    return n ? s / (double)n : 0.0;
}

static void print_epoch(uint32_t epoch, uint64_t batches, uint64_t images, const double *sum,
                        const uint64_t *cnt, int ncls) {
    printf("epoch %u: %llu batches, %llu images; mean intensity per class:", epoch,
           (unsigned long long)batches, (unsigned long long)images);
    for (int k = 0; k < ncls; k++)
        if (cnt[k]) printf(" %d=%.2f", k, sum[k] / (double)cnt[k]);
    printf("\n");
}

/* --bench: the handoff latency of the batch just taken, into wake or ready. */
static void time_handoff(sp_client *c, uint64_t *wake, size_t *nw, uint64_t *ready, size_t *nr) {
    sp_client_timing tm;
    sp_client_timing_get(c, &tm);
    if (tm.published_ns > tm.call_ns && tm.ready_ns) wake[(*nw)++] = tm.taken_ns - tm.ready_ns;
    else ready[(*nr)++] = tm.taken_ns - tm.call_ns;
}

int main(int argc, char **argv) {
    const char *name = NULL;
    unsigned rank = 0;
    int bench = 0;
    long hold_and_die = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc) name = argv[++i];
        else if (!strcmp(argv[i], "--rank") && i + 1 < argc) rank = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--bench")) bench = 1;
        else if (!strcmp(argv[i], "--hold-and-die") && i + 1 < argc) hold_and_die = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: example_trainer --name NAME [--rank R] [--bench] "
                            "[--hold-and-die N]\n");
            return 2;
        }
    }
    if (!name) {
        fprintf(stderr, "example_trainer: --name NAME is required\n");
        return 2;
    }
    /* The stream: this rank's slice of whatever the service serves. */
    sp_error err;
    sp_error_clear(&err);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_SERVICE;
    sc.service_name = name;
    sc.rank = rank;
    sp_stream *s;
    if (sp_stream_open(NULL, &sc, &s, &err) != 0) {
        fprintf(stderr, "example_trainer: %s\n", err.msg);
        return 1;
    }
    sp_stream_info info;
    sp_stream_info_get(s, &info);
    sp_client_info ci;   /* what only the service has: its pid, its stream's length */
    sp_client_info_get(sp_stream_client(s), &ci);
    char fp[33];
    sp_digest_hex(info.fingerprint, fp);
    printf("attached to %s as rank %u of %u (service pid %d): %llu batches of %u/%u samples "
           "%dx%dx%d %s, fingerprint %s\n",
           name, info.rank, info.world, ci.service_pid, (unsigned long long)ci.total,
           info.batch_size / info.world, info.batch_size, info.c, info.h, info.w,
           sp_dtype_name(info.dtype), fp);
    fflush(stdout);

    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    static double sum[MAX_CLASSES];
    static uint64_t cnt[MAX_CLASSES];
    int ncls = 0;
    uint64_t batches = 0, images = 0, ep_batches = 0, ep_images = 0, boxes = 0;
    uint32_t epoch = UINT32_MAX;
    uint64_t *wake = calloc(ci.total + 1, 8), *ready = calloc(ci.total + 1, 8);
    size_t nw = 0, nr = 0;
    uint64_t t0 = now_ns();   /* from attach: the rate includes waiting for the first batch */
    int rc;
    sp_batch v;
    while ((rc = sp_stream_next(s, &v, &err)) == 0) {
        if (bench && wake && ready) time_handoff(sp_stream_client(s), wake, &nw, ready, &nr);
        if (v.epoch != epoch) {
            if (epoch != UINT32_MAX && !bench) print_epoch(epoch, ep_batches, ep_images, sum, cnt, ncls);
            epoch = v.epoch;
            ep_batches = ep_images = 0;
            memset(sum, 0, sizeof sum);
            memset(cnt, 0, sizeof cnt);
        }
        if (!bench)   /* the "training step": v.images holds v.count samples */
            for (uint32_t k = 0; k < v.count; k++) {
                int32_t lb = v.labels[k];
                if (lb < 0 || lb >= MAX_CLASSES) continue;
                if (lb + 1 > ncls) ncls = lb + 1;
                sum[lb] += sample_mean(v.images + (size_t)k * info.sample_bytes,
                                       ci.image_bytes, info.dtype);
                cnt[lb]++;
            }
        if (ci.targets) boxes += kept_boxes(&ci, &v, info.sample_bytes);
        fold(st, sp_stream_batch_digest(s, &v));
        batches++;
        images += v.count;
        ep_batches++;
        ep_images += v.count;
        if (hold_and_die >= 0 && (long)batches >= hold_and_die) {
            printf("holding batch %llu of epoch %u and dying\n", (unsigned long long)v.index,
                   v.epoch);
            fflush(stdout);
            raise(SIGKILL);
        }
        if (sp_stream_release(s, &v, &err) != 0) {
            rc = err.code;
            break;
        }
    }
    if (rc == SP_END) rc = 0;   /* the end of the stream, not an error */
    double dt = (double)(now_ns() - t0) / 1e9;
    if (epoch != UINT32_MAX && !bench) print_epoch(epoch, ep_batches, ep_images, sum, cnt, ncls);
    if (rc != 0) {
        fprintf(stderr, "example_trainer: %s\n", err.msg);
    } else {
        XXH128_hash_t h = XXH3_128bits_digest(st);
        sp_digest d = {h.high64, h.low64};
        char hex[33];
        sp_digest_hex(d, hex);
        sp_loader_state ls;   /* where a resumed service (serve --resume) would start */
        sp_stream_state(s, &ls);
        printf("stream digest: %s (%llu batches, %llu images, rank %u of %u)\n", hex,
               (unsigned long long)batches, (unsigned long long)images, info.rank, info.world);
        printf("delivered %.0f images/s (%.0f batches/s) over %.2f s; next state: epoch %u "
               "batch %llu\n",
               dt > 0 ? (double)images / dt : 0.0, dt > 0 ? (double)batches / dt : 0.0, dt,
               ls.epoch, (unsigned long long)ls.batch);
        if (ci.targets)
            printf("targets: %llu boxes kept over %llu images (max_boxes %d, keypoints %d)\n",
                   (unsigned long long)boxes, (unsigned long long)images, ci.max_boxes,
                   ci.keypoints);
        if (bench) {
            pct("ready latency", ready, nr);
            pct("wake-up latency", wake, nw);
        }
    }
    XXH3_freeState(st);
    free(wake);
    free(ready);
    sp_stream_close(s);
    return rc == 0 ? 0 : 1;
}

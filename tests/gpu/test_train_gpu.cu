// test_train_gpu.cu - the CUDA training backend against itself and the CPU.
//
//  1. strict mode, twice from the same seed and batches (full batches of B,
//     one short batch of 7 in the middle, then full ones again: the
//     descriptors and workspace are re-set both ways): bit-identical
//     per-step losses, final weights, momentum and eval results;
//  2. the same steps on the CPU reference: identical initial weights; the
//     first step's loss (forward only, same weights) agrees closely; after
//     STEPS steps the max absolute / relative weight difference is reported
//     and bounded loosely (cuDNN/cuBLAS sum in other orders, so bits differ);
//  3. strict mode refuses BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0 and _3, and
//     fast, each with SP_EUNSUPP and a message naming it; an algorithm
//     number outside cuDNN's enum is SP_EINVAL in any mode;
//  4. fast mode runs twice; whether it repeated itself and the step times
//     strict vs fast are printed (informative).
// Every check runs even when an earlier one failed, so one run on a lent
// GPU reports everything; lines starting "gpu-summary:" are the results.
// Skips (exit 77) with "SKIP: no CUDA device" when no device is present.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seedpipe/shapes.h"
#include "seedpipe/train.h"
#include "loader/shapes_internal.h"
#include "train/train_internal.h"

static int g_failures;
#define FAIL(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); g_failures++; } while (0)
#define FATAL(...) do { printf("FATAL: "); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)

enum { NIMG = 64, B = 16, SHORT = 7, STEPS = 12, PX = 32 };
static float *g_x;
static int32_t g_y[NIMG];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void make_data(void) {
    size_t per = 3 * PX * PX;
    g_x = (float *)malloc(NIMG * per * sizeof(float));
    if (!g_x) FATAL("out of memory");
    sp_shapes_opts o = {0, PX, 5};
    for (uint32_t i = 0; i < NIMG; i++) {
        sp_image im;
        int label;
        sp_error err;
        if (sp__shapes_render(&o, i, &im, &label, &err)) FATAL("render: %s", err.msg);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < PX; y++)
                for (int x = 0; x < PX; x++)
                    g_x[i * per + ((size_t)c * PX + y) * PX + x] =
                        (float)im.data[(size_t)y * im.stride + (size_t)x * 3 + c] / 255.0f;
        g_y[i] = label;
        sp_image_free(&im);
    }
}

static void config(sp_train_config *cfg, sp_device dev) {
    sp_train_config_default(cfg);
    cfg->seed = 9;
    cfg->shape.c = 3;
    cfg->shape.h = cfg->shape.w = PX;
    cfg->shape.classes = 6;
    cfg->lr = 0.01f;
    cfg->device = dev;
}

// Step s uses batch (s % 4) of B images, except step 5: SHORT images.
static uint32_t batch_of(int s, uint32_t *first) {
    *first = (uint32_t)(s % (NIMG / B)) * B;
    return s == 5 ? SHORT : B;
}

typedef struct result {
    float *w, *m, *w0;        // final weights, momentum, initial weights (nparams each)
    float loss[STEPS];
    uint32_t eval_correct;
    float eval_loss;
    sp_digest d;
    double sec_per_step;      // steps 1.. (step 0 includes the warm-up)
    int ok;                   // 0: create or a step failed (message printed)
} result;

static void result_alloc(result *r, size_t P) {
    memset(r, 0, sizeof *r);
    r->w = (float *)calloc(P, 4);
    r->m = (float *)calloc(P, 4);
    r->w0 = (float *)calloc(P, 4);
    if (!r->w || !r->m || !r->w0) FATAL("out of memory");
}
static void result_free(result *r) { free(r->w); free(r->m); free(r->w0); }

static void run(const char *label, const sp_train_config *cfg, result *r) {
    sp_trainer *tr;
    sp_error err;
    printf("%s:\n", label);
    if (sp_trainer_create(cfg, &tr, &err)) {
        FAIL("%s: create: %s", label, err.msg);
        return;
    }
    size_t per = 3 * PX * PX;
    double t = 0;
    if (sp_trainer_get_params(tr, r->w0, NULL, &err)) FAIL("%s: get: %s", label, err.msg);
    for (int s = 0; s < STEPS; s++) {
        uint32_t first, n = batch_of(s, &first);
        double t0 = now();
        if (sp__trainer_step(tr, g_x + first * per, g_y + first, n, &r->loss[s], NULL, &err)) {
            FAIL("%s: step %d (n=%u): %s", label, s, n, err.msg);
            sp_trainer_destroy(tr);
            return;
        }
        if (s > 0) t += now() - t0;
    }
    r->sec_per_step = t / (STEPS - 1);
    // Eval on all NIMG images: a batch larger than any step's (buffers grow).
    if (sp__trainer_eval(tr, g_x, g_y, NIMG, &r->eval_loss, &r->eval_correct, &err))
        FAIL("%s: eval: %s", label, err.msg);
    if (sp_trainer_get_params(tr, r->w, r->m, &err)) FAIL("%s: get: %s", label, err.msg);
    if (sp_trainer_weights_digest(tr, &r->d, &err)) FAIL("%s: digest: %s", label, err.msg);
    char desc[4096];
    sp_trainer_describe(tr, desc, sizeof desc);
    printf("  %s\n", desc);
    char h[33];
    sp_digest_hex(r->d, h);
    printf("  final loss %.6f, eval %u/%d correct (loss %.6f), digest %s\n", r->loss[STEPS - 1],
           r->eval_correct, NIMG, r->eval_loss, h);
    sp_trainer_destroy(tr);
    r->ok = 1;
}

static int same(const result *a, const result *b, size_t P) {
    return a->ok && b->ok && memcmp(a->loss, b->loss, sizeof a->loss) == 0 &&
           a->d.hi == b->d.hi && a->d.lo == b->d.lo && memcmp(a->w, b->w, P * 4) == 0 &&
           memcmp(a->m, b->m, P * 4) == 0 && a->eval_correct == b->eval_correct &&
           memcmp(&a->eval_loss, &b->eval_loss, sizeof a->eval_loss) == 0;
}

static void expect_refused(sp_train_config cfg, const char *what, int code, const char *needle) {
    sp_trainer *tr = NULL;
    sp_error err;
    int rc = sp_trainer_create(&cfg, &tr, &err);
    if (rc == 0) {
        FAIL("accepted %s", what);
        sp_trainer_destroy(tr);
        return;
    }
    if (rc != code || !strstr(err.msg, needle)) {
        FAIL("refused %s with code %d and message \"%s\" (expected code %d, \"%s\")", what, rc,
             err.msg, code, needle);
        return;
    }
    printf("refuses %s: %s\n", what, err.msg);
}

int main(void) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    make_data();
    sp_train_config gcfg, ccfg;
    config(&gcfg, SP_DEVICE_CUDA);
    config(&ccfg, SP_DEVICE_CPU);
    sp_model_layout l;
    sp_error err;
    if (sp_model_layout_of(&gcfg.shape, &l, &err)) FATAL("%s", err.msg);
    size_t P = l.nparams;
    result sa, sb, cpu, fa, fb;
    result_alloc(&sa, P);
    result_alloc(&sb, P);
    result_alloc(&cpu, P);
    result_alloc(&fa, P);
    result_alloc(&fb, P);

    // 1. strict, run to run
    run("strict run 1", &gcfg, &sa);
    run("strict run 2", &gcfg, &sb);
    int strict_same = same(&sa, &sb, P);
    if (sa.ok && sb.ok && !strict_same) {
        for (int s = 0; s < STEPS; s++)
            if (memcmp(&sa.loss[s], &sb.loss[s], 4))
                printf("  step %d loss %.9g vs %.9g\n", s, sa.loss[s], sb.loss[s]);
        FAIL("strict mode: the two runs differ (losses, weights, momentum or eval)");
    }
    printf("gpu-summary: strict run-to-run bit-identical (%d steps incl. a %d-sample batch, "
           "weights + momentum + eval): %s\n",
           STEPS, SHORT, strict_same ? "yes" : "NO");

    // 2. CPU reference, same steps
    ccfg.threads = 1;
    run("cpu reference", &ccfg, &cpu);
    if (sa.ok && cpu.ok) {
        if (memcmp(sa.w0, cpu.w0, P * 4) != 0) FAIL("initial weights differ between CPU and GPU");
        double maxabs = 0, maxrel = 0, maxw = 0, maxl = 0;
        int finite = 1;
        for (size_t i = 0; i < P; i++) {
            double a = sa.w[i], c = cpu.w[i], d = fabs(a - c);
            if (!isfinite(a)) finite = 0;
            if (d > maxabs) maxabs = d;
            double r = d / (fabs(c) + 1e-3);
            if (r > maxrel) maxrel = r;
            if (fabs(c) > maxw) maxw = fabs(c);
        }
        for (int s = 0; s < STEPS; s++) maxl = fmax(maxl, fabs((double)sa.loss[s] - cpu.loss[s]));
        double l0 = fabs((double)sa.loss[0] - cpu.loss[0]);
        printf("gpu-summary: cpu vs gpu strict after %d steps: max |dw| %.3e, max rel %.3e "
               "(|w| <= %.3f), step-0 |dloss| %.3e, max |dloss| %.3e, eval correct cpu %u gpu %u, "
               "bit-equal weights: %s\n",
               STEPS, maxabs, maxrel, maxw, l0, maxl, cpu.eval_correct, sa.eval_correct,
               maxabs == 0 ? "yes" : "no");
        // Step 0 is a forward pass from identical weights: only summation
        // order differs, so a layout or transpose bug shows up here.
        if (!(l0 < 1e-4)) FAIL("step-0 loss differs by %.3e between CPU and GPU", l0);
        if (!finite || !(maxabs < 1e-2 && maxl < 1e-3))
            FAIL("CPU and GPU drifted apart more than expected");
    }

    // 3. refusals
    int failures_before = g_failures;
    sp_train_config bad = gcfg;
    bad.conv_bwd_data_algo = 0;
    expect_refused(bad, "backward data ALGO_0 in strict mode", SP_EUNSUPP, "BWD_DATA_ALGO_0");
    bad = gcfg;
    bad.conv_bwd_filter_algo = 0;
    expect_refused(bad, "backward filter ALGO_0 in strict mode", SP_EUNSUPP, "BWD_FILTER_ALGO_0");
    bad = gcfg;
    bad.conv_bwd_filter_algo = 3;
    expect_refused(bad, "backward filter ALGO_3 in strict mode", SP_EUNSUPP, "BWD_FILTER_ALGO_3");
    bad = gcfg;
    bad.fast = 1;
    expect_refused(bad, "fast in strict mode", SP_EUNSUPP, "fast");
    bad = gcfg;
    bad.strict = 0;
    bad.conv_fwd_algo = 99;
    expect_refused(bad, "forward algorithm 99", SP_EINVAL, "forward algorithm 99");
    printf("gpu-summary: strict mode refuses BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0/3 and fast: %s\n",
           failures_before == g_failures ? "yes" : "see FAIL lines");

    // 4. fast mode
    sp_train_config fast = gcfg;
    fast.strict = 0;
    fast.fast = 1;
    run("fast run 1", &fast, &fa);
    run("fast run 2", &fast, &fb);
    printf("gpu-summary: fast mode repeated itself bit for bit: %s\n",
           !(fa.ok && fb.ok) ? "n/a (a run failed)" : same(&fa, &fb, P) ? "yes (this time)" : "no");
    printf("gpu-summary: step time (B=%d, %dx%d RGB, tiny model: launch-bound): cpu %.3f ms, "
           "gpu strict %.3f ms, gpu fast %.3f ms, strict/fast %.2fx\n",
           B, PX, PX, 1e3 * cpu.sec_per_step, 1e3 * sa.sec_per_step, 1e3 * fa.sec_per_step,
           fa.sec_per_step > 0 ? sa.sec_per_step / fa.sec_per_step : 0.0);

    result_free(&sa); result_free(&sb); result_free(&cpu); result_free(&fa); result_free(&fb);
    free(g_x);
    if (g_failures) {
        printf("test_train_gpu: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("test_train_gpu: ok\n");
    return 0;
}

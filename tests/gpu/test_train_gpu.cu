// test_train_gpu.cu - the CUDA training backend against itself and the CPU.
//
//  1. strict mode, twice from the same seed and batches: bit-identical
//     per-step losses and final weights (digest);
//  2. the same steps on the CPU reference: identical initial weights, then
//     max absolute / relative weight difference after N steps reported and
//     bounded loosely (cuDNN/cuBLAS sum in other orders, so bits differ);
//  3. strict mode refuses BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0 and _3, and
//     --fast, each with a message naming it;
//  4. fast mode runs; step times strict vs fast are printed (informative).
// Skips (exit 77) with "SKIP: no CUDA device" when no device is present.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seedpipe/shapes.h"
#include "seedpipe/train.h"

#define FAIL(...) do { printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); exit(1); } while (0)
#define OK(expr) do { sp_error e_; int rc_ = (expr); if (rc_) FAIL("%s: %s", #expr, e_.msg); } while (0)

enum { NIMG = 64, B = 16, STEPS = 12, PX = 32 };
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
    sp_shapes_opts o = {0, PX, 5};
    for (uint32_t i = 0; i < NIMG; i++) {
        sp_image im;
        int label;
        sp_error err;
        if (sp_shapes_render(&o, i, &im, &label, &err)) FAIL("render: %s", err.msg);
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

// Train STEPS steps; weights out (nparams floats), losses out, seconds/step.
static double run(const sp_train_config *cfg, float *w, float *losses, float *w0, sp_digest *d) {
    sp_trainer *tr;
    sp_error err;
    if (sp_trainer_create(cfg, &tr, &err)) FAIL("create (%s): %s", sp_device_name(cfg->device), err.msg);
    if (w0 && sp_trainer_get_params(tr, w0, NULL, &err)) FAIL("get: %s", err.msg);
    size_t per = 3 * PX * PX;
    double t = 0;
    for (int s = 0; s < STEPS; s++) {
        int b = s % (NIMG / B);
        double t0 = now();
        if (sp_trainer_step(tr, g_x + (size_t)b * B * per, g_y + b * B, B, &losses[s], NULL, &err))
            FAIL("step: %s", err.msg);
        if (s > 0) t += now() - t0;   // step 0 includes warm-up
    }
    if (sp_trainer_get_params(tr, w, NULL, &err)) FAIL("get: %s", err.msg);
    if (sp_trainer_weights_digest(tr, d, &err)) FAIL("digest: %s", err.msg);
    char desc[4096];
    sp_trainer_describe(tr, desc, sizeof desc);
    printf("  %s\n", desc);
    sp_trainer_destroy(tr);
    return t / (STEPS - 1);
}

static void expect_refused(sp_train_config cfg, const char *what, const char *needle) {
    sp_trainer *tr = NULL;
    sp_error err;
    int rc = sp_trainer_create(&cfg, &tr, &err);
    if (rc == 0) FAIL("strict mode accepted %s", what);
    if (rc != SP_EUNSUPP || !strstr(err.msg, needle))
        FAIL("strict mode refused %s with code %d and message \"%s\" (expected \"%s\")", what, rc,
             err.msg, needle);
    printf("strict refuses %s: %s\n", what, err.msg);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    make_data();
    sp_train_config gcfg, ccfg;
    config(&gcfg, SP_DEVICE_CUDA);
    config(&ccfg, SP_DEVICE_CPU);
    sp_model_layout l;
    sp_error err;
    if (sp_model_layout_of(&gcfg.shape, &l, &err)) FAIL("%s", err.msg);
    size_t P = l.nparams;
    float *wa = (float *)malloc(P * 4), *wb = (float *)malloc(P * 4), *wc = (float *)malloc(P * 4),
          *w0g = (float *)malloc(P * 4), *w0c = (float *)malloc(P * 4);
    float la[STEPS], lb[STEPS], lc[STEPS];
    sp_digest da, db, dc;

    printf("strict run 1:\n");
    double ts = run(&gcfg, wa, la, w0g, &da);
    printf("strict run 2:\n");
    run(&gcfg, wb, lb, NULL, &db);
    char ha[33], hb[33], hc[33];
    sp_digest_hex(da, ha);
    sp_digest_hex(db, hb);
    printf("strict: digests %s / %s\n", ha, hb);
    if (memcmp(la, lb, sizeof la) != 0) FAIL("strict mode: per-step losses differ between runs");
    if (da.hi != db.hi || da.lo != db.lo || memcmp(wa, wb, P * 4) != 0)
        FAIL("strict mode: final weights differ between runs");
    printf("strict mode: %d steps bit-identical run to run\n", STEPS);

    printf("cpu reference:\n");
    double tc = run(&ccfg, wc, lc, w0c, &dc);
    sp_digest_hex(dc, hc);
    if (memcmp(w0g, w0c, P * 4) != 0) FAIL("initial weights differ between CPU and GPU");
    double maxabs = 0, maxrel = 0, maxw = 0;
    for (size_t i = 0; i < P; i++) {
        double a = wa[i], c = wc[i], d = fabs(a - c);
        if (d > maxabs) maxabs = d;
        double r = d / (fabs(c) + 1e-3);
        if (r > maxrel) maxrel = r;
        if (fabs(c) > maxw) maxw = fabs(c);
    }
    double maxl = 0;
    for (int s = 0; s < STEPS; s++) maxl = fmax(maxl, fabs((double)la[s] - lc[s]));
    printf("cpu vs gpu after %d steps: cpu digest %s; max |dw| %.3e, max rel %.3e (|w| <= %.3f), "
           "max |dloss| %.3e; bit-equal: %s\n",
           STEPS, hc, maxabs, maxrel, maxw, maxl, maxabs == 0 ? "yes" : "no");
    if (!(maxabs < 1e-2 && maxl < 1e-3)) FAIL("CPU and GPU drifted apart more than expected");

    sp_train_config bad = gcfg;
    bad.conv_bwd_data_algo = 0;
    expect_refused(bad, "backward data ALGO_0", "BWD_DATA_ALGO_0");
    bad = gcfg;
    bad.conv_bwd_filter_algo = 0;
    expect_refused(bad, "backward filter ALGO_0", "BWD_FILTER_ALGO_0");
    bad = gcfg;
    bad.conv_bwd_filter_algo = 3;
    expect_refused(bad, "backward filter ALGO_3", "BWD_FILTER_ALGO_3");
    bad = gcfg;
    bad.fast = 1;
    expect_refused(bad, "fast mode", "fast");

    sp_train_config fast = gcfg;
    fast.strict = 0;
    fast.fast = 1;
    float *wfa = (float *)malloc(P * 4), *wfb = (float *)malloc(P * 4), lf[STEPS], lf2[STEPS];
    sp_digest df, df2;
    printf("fast run 1:\n");
    double tf = run(&fast, wfa, lf, NULL, &df);
    printf("fast run 2:\n");
    run(&fast, wfb, lf2, NULL, &df2);
    printf("fast mode repeats itself bit for bit: %s\n",
           memcmp(wfa, wfb, P * 4) == 0 ? "yes (this time)" : "no");
    printf("step time (B=%d, %dx%d RGB): cpu %.3f ms, gpu strict %.3f ms, gpu fast %.3f ms, "
           "strict/fast %.2fx\n",
           B, PX, PX, 1e3 * tc, 1e3 * ts, 1e3 * tf, ts / tf);
    printf("test_train_gpu: ok\n");
    free(wa); free(wb); free(wc); free(w0g); free(w0c); free(wfa); free(wfb); free(g_x);
    return 0;
}

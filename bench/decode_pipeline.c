/* decode_pipeline.c - benchmark: seedpipe's JPEG pipeline vs raw TurboJPEG decode.
 *
 *   bench_decode_pipeline DIR [--seconds S] [--pipeline SPEC] [--dtype T]
 *
 * Loads every .jpg/.jpeg under DIR into memory, then alternates rounds of
 *  (a) raw: tjDecompress2 full decode to RGB with TJFLAG_ACCURATEDCT (the
 *      peer: what a loader pays just to decode), and
 *  (b) seedpipe: sp__pipeline_run() of the pipeline (default: decode +
 *      random_resized_crop 224 + hflip + normalize to float32 NCHW; --dtype
 *      bfloat16, float16 or uint8 for another output) into a batch-64
 *      buffer, every JPEG read to EOI (a file without a verdict),
 *  (c) the same with the dataset index's verdict: each file checked once
 *      at load (sp__image_check, a full decode; its time is printed, not
 *      counted in the rounds), then every crop stops after its last row
 *      (SP__DECODE_VALIDATED),
 *  (d) what the loader does for an indexed dataset: (c) with the entropy
 *      checkpoints the check made (augment/jpeg_ckpt.c): a crop also
 *      starts decoding at the last checkpoint above it;
 *      (c)'s and (d)'s outputs are compared with (b)'s,
 * on one thread, and prints images/s of each and the ratios (b)/(a) and
 * (c)/(a) measured in the same run. Rounds alternate so machine noise hits
 * all alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include "bench/jpeg_files.h"

#include "seedpipe/decode.h"
#include "seedpipe/pipeline.h"
#include "augment/decode_internal.h"
#include "augment/pipeline_internal.h"

static jpeg_file *files;
static int *clean;   /* each file's verdict (sp__image_check) */
static uint8_t **ckpt;   /* and its checkpoints */
static size_t *ckpt_len;
static size_t nfiles;

static double round_raw(tjhandle tj, uint8_t *buf, size_t cap, double *cpu) {
    double t0 = now_s(), c0 = cpu_s();
    for (size_t i = 0; i < nfiles; i++) {
        int w, h, ss, cs;
        if (tjDecompressHeader3(tj, files[i].data, files[i].len, &w, &h, &ss, &cs) != 0) continue;
        if ((size_t)w * h * 3 > cap) continue;
        tjDecompress2(tj, files[i].data, files[i].len, buf, w, 0, h, TJPF_RGB,
                      TJFLAG_ACCURATEDCT);
    }
    *cpu += cpu_s() - c0;
    return now_s() - t0;
}

/* The decode hint of file i in mode 0: none, every file is read whole
 * (b); 1: the file's verdict (c); 2: and its checkpoints (d). */
static sp__decode_hint hint_of(size_t i, int mode) {
    sp__decode_hint h = {mode >= 1 && clean[i] ? SP__DECODE_VALIDATED : 0,
                         mode == 2 ? ckpt[i] : NULL, mode == 2 ? ckpt_len[i] : 0};
    return h;
}

static sp_dtype dtype = SP_DTYPE_FLOAT32;

static double round_pipe(const sp_pipeline *p, uint8_t *batch, size_t sample_bytes,
                         uint32_t epoch, int validated, size_t *failed, double *cpu) {
    sp_key k = sp_rng_key(1, SP_RNG_AUGMENT);
    sp_run_opts o = {dtype, SP_LAYOUT_NCHW, 0, NULL};
    double t0 = now_s(), c0 = cpu_s();
    for (size_t i = 0; i < nfiles; i++) {
        sp_sample_ctx ctx = {k, epoch, (uint32_t)i};
        sp_sample_src src = {files[i].path, files[i].data, files[i].len, NULL};
        sp_error err;
        sp__decode_hint h = hint_of(i, validated);
        if (sp__pipeline_run_hint(p, &ctx, &src, &o, NULL, batch + (i % 64) * sample_bytes,
                                  SIZE_MAX, &h, NULL, &err) != 0)
            (*failed)++;
    }
    *cpu += cpu_s() - c0;
    return now_s() - t0;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    const char *spec = "random_resized_crop size=224 | hflip p=0.5 | "
                       "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225";
    double seconds = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pipeline") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *t = argv[++i];
            dtype = !strcmp(t, "bfloat16") ? SP_DTYPE_BFLOAT16
                  : !strcmp(t, "float16")  ? SP_DTYPE_FLOAT16
                  : !strcmp(t, "uint8")    ? SP_DTYPE_UINT8 : SP_DTYPE_FLOAT32;
        }
        else dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: bench_decode_pipeline DIR [--seconds S] [--pipeline SPEC] "
                        "[--dtype float32|bfloat16|float16|uint8]\n");
        return 2;
    }
    files = jpeg_files_load(dir, &nfiles);
    if (nfiles == 0) {
        fprintf(stderr, "no JPEG files under %s\n", dir);
        return 1;
    }
    sp_pipeline *p;
    sp_error err;
    if (sp_pipeline_parse(spec, &p, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int oh, ow, oc;
    if (sp__pipeline_output_dims(p, 0, 0, &oh, &ow, &oc, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t sample_bytes = (size_t)oh * ow * oc * sp__dtype_size(dtype);
    /* 64-byte aligned as the pool's slots (aligned_alloc: a multiple of 64) */
    uint8_t *batch = aligned_alloc(64, (64 * sample_bytes + 63) & ~(size_t)63);
    size_t cap = 64u << 20;
    uint8_t *raw = malloc(cap);
    tjhandle tj = tjInitDecompress();
    double tcheck = now_s();   /* the index's one-time check */
    size_t nclean = 0;
    clean = calloc(nfiles, sizeof *clean);
    ckpt = calloc(nfiles, sizeof *ckpt);
    ckpt_len = calloc(nfiles, sizeof *ckpt_len);
    size_t nckpt = 0;
    for (size_t i = 0; i < nfiles; i++) {
        clean[i] = sp__image_check(files[i].data, files[i].len, &ckpt[i], &ckpt_len[i]);
        nclean += (size_t)clean[i];
        nckpt += ckpt[i] != NULL;
    }
    tcheck = now_s() - tcheck;
    /* (c) and (d) give (b)'s bytes: four epochs of each, compared */
    uint8_t *batch2 = malloc(64 * sample_bytes);
    size_t differ = 0;
    for (uint32_t ep = 0; ep < 4; ep++)
        for (size_t i = 0; i < nfiles; i++) {
            sp_key k = sp_rng_key(1, SP_RNG_AUGMENT);
            sp_run_opts o = {dtype, SP_LAYOUT_NCHW, 0, NULL};
            sp_sample_ctx ctx = {k, ep, (uint32_t)i};
            sp_sample_src src = {files[i].path, files[i].data, files[i].len, NULL};
            int a = sp__pipeline_run_hint(p, &ctx, &src, &o, NULL, batch, SIZE_MAX, NULL, NULL,
                                          &err);
            for (int m = 1; m <= 2; m++) {
                sp__decode_hint h = hint_of(i, m);
                int b = sp__pipeline_run_hint(p, &ctx, &src, &o, NULL, batch2, SIZE_MAX, &h,
                                              NULL, &err);
                differ += a != b || (a == 0 && memcmp(batch, batch2, sample_bytes) != 0);
            }
        }
    free(batch2);
    double traw = 0, tpipe = 0, tval = 0, tck = 0, craw = 0, cpipe = 0, cval = 0, cck = 0;
    size_t rounds = 0, failed = 0;
    double t0 = now_s();
    while (now_s() - t0 < seconds || rounds < 2) {
        traw += round_raw(tj, raw, cap, &craw);
        tpipe += round_pipe(p, batch, sample_bytes, (uint32_t)rounds, 0, &failed, &cpipe);
        tval += round_pipe(p, batch, sample_bytes, (uint32_t)rounds, 1, &failed, &cval);
        tck += round_pipe(p, batch, sample_bytes, (uint32_t)rounds, 2, &failed, &cck);
        rounds++;
    }
    double n = (double)nfiles * (double)rounds;
    double raw_rate = n / traw, pipe_rate = n / tpipe, val_rate = n / tval, ck_rate = n / tck;
    printf("files: %zu JPEGs from %s, rounds: %zu, one thread\n", nfiles, dir, rounds);
    static const char *const names[] = {"uint8", "float32", "bfloat16", "float16"};
    printf("pipeline: %s (%s NCHW, batch 64)\n", sp__pipeline_canonical(p),
           (unsigned)dtype < 4 ? names[dtype] : "?");
    printf("raw_tjdecompress2_full images/s: %.0f\n", raw_rate);
    printf("seedpipe_pipeline      images/s: %.0f (every file read to EOI)\n", pipe_rate);
    printf("seedpipe_validated     images/s: %.0f (%zu of %zu files checked clean once, "
           "%.0f files/s; crops stop after their last row)\n", val_rate, nclean, nfiles,
           (double)nfiles / tcheck);
    printf("seedpipe_checkpoints   images/s: %.0f (%zu files with entropy checkpoints; crops "
           "also start at the last one above them)\n", ck_rate, nckpt);
    printf("ratio pipeline/raw: %.2f%s\n", pipe_rate / raw_rate,
           failed ? "  (some samples FAILED)" : "");
    printf("ratio validated/raw: %.2f\n", val_rate / raw_rate);
    printf("ratio checkpoints/raw: %.2f (outputs of (c) and (d) differing from the full "
           "read: %zu)\n", ck_rate / raw_rate, differ);
    printf("on thread CPU time: pipeline/raw %.2f, validated/raw %.2f, checkpoints/raw %.2f, "
           "checkpoints/validated %.2f\n", craw / cpipe, craw / cval, craw / cck, cval / cck);
    tjDestroy(tj);
    free(raw);
    free(batch);
    sp_pipeline_destroy(p);
    jpeg_files_free(files, nfiles);
    for (size_t i = 0; i < nfiles; i++) free(ckpt[i]);
    free(ckpt);
    free(ckpt_len);
    free(clean);
    return failed || differ ? 1 : 0;
}

/* tests/testing_lib.c - libseedpipe_testing.so: the library's objects (the
 * loader's and the training core's) with the internals that Python tests
 * and benchmarks call through ctypes, exported under spt_ names.
 *
 * The shared libraries export only the public API (SP_API); the sp__
 * internals are hidden, and a hidden symbol cannot be re-exported. C tests
 * and benchmarks link the static libraries and reach them directly; for
 * ctypes this file wraps each one a Python test needs (the pure functions
 * checked against an independent reference: masks against pycocotools, the
 * sampler's spans, the crop draw, the batch-mix draws, one SGD step against
 * torch; and the service's client, which the fault tests drive by hand).
 * Test builds only; never installed. The library's public functions are
 * exported here too, so one test may use this library alone.
 */
#include "service/client_internal.h"
#include "loader/batchmix_internal.h"
#include "loader/sampler_internal.h"
#include "augment/ops_internal.h"
#include "augment/masks_internal.h"
#include "common/masks_internal.h"
#include "train/train_internal.h"

#define SPT __attribute__((visibility("default")))

SPT int spt_client_attach(const char *name, uint32_t rank, sp_client **out, sp_error *err) {
    return sp__client_attach(name, rank, out, err);
}
SPT int spt_client_next(sp_client *c, sp_batch *view, sp_error *err) {
    return sp__client_next(c, view, err);
}
SPT int spt_client_release(sp_client *c, sp_batch *view, sp_error *err) {
    return sp__client_release(c, view, err);
}
SPT void spt_client_detach(sp_client *c) { sp__client_detach(c); }
SPT sp_digest spt_client_batch_digest(const sp_client *c, const sp_batch *view) {
    return sp__client_batch_digest(c, view);
}

SPT void spt_batch_span(const sp_batching *bt, uint64_t b, uint32_t nranks, uint64_t *pos,
                        uint32_t *count) {
    sp__batch_span(bt, b, nranks, pos, count);
}
SPT int spt_batch_mix_draw(uint64_t seed, uint32_t epoch, uint64_t index, int op, double alpha,
                           int h, int w, sp_batch_mix *out, sp_error *err) {
    return sp__batch_mix_draw(seed, epoch, index, op, alpha, h, w, out, err);
}
SPT int spt_batch_mix_pick(uint64_t seed, uint32_t epoch, uint64_t index, const double *p,
                           int n) {
    return sp__batch_mix_pick(seed, epoch, index, p, n);
}

SPT int spt_rrc_sample(int W, int H, double s0, double s1, double r0, double r1,
                       sp_key k_augment, uint32_t op, uint32_t sample, uint32_t epoch,
                       sp_crop_box *box) {
    return sp__rrc_sample(W, H, s0, s1, r0, r1, k_augment, op, sample, epoch, box);
}
SPT int spt_image_resize_filter(const sp_image *src, int out_w, int out_h, int filter,
                                sp_image *out) {
    return sp__image_resize_filter(src, out_w, out_h, filter, out);
}

SPT int spt_mask_polygons(const double *xy, const uint32_t *npts, uint32_t npoly, int h, int w,
                          uint8_t *mask, const char *what, sp_error *err) {
    return sp__mask_polygons(xy, npts, npoly, h, w, mask, what, err);
}
SPT int spt_mask_rle(const uint32_t *counts, size_t m, int h, int w, uint8_t *mask,
                     const char *what, sp_error *err) {
    return sp__mask_rle(counts, m, h, w, mask, what, err);
}
SPT int spt_mask_rle_string(const char *s, size_t len, uint32_t *counts, size_t max,
                            size_t *m, const char *what, sp_error *err) {
    return sp__mask_rle_string(s, len, counts, max, m, what, err);
}
SPT int spt_mask_warp(const sp_geom_log *log, const uint8_t *src, uint8_t fill, uint8_t *out,
                      sp_error *err) {
    return sp__mask_warp(log, src, fill, out, err);
}

SPT int spt_trainer_step(sp_trainer *tr, const float *x, const int32_t *labels, uint32_t n,
                         float *loss, uint32_t *correct, sp_error *err) {
    return sp__trainer_step(tr, x, labels, n, loss, correct, err);
}

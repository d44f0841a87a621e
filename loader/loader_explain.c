/* loader_explain.c - sp_loader_explain() (include/seedpipe/loader.h):
 * the draws of one sample of an epoch as text, replayed from the same
 * keys the batches use (an image's pipeline lines and, with targets, each
 * box's fate; a token window's documents and offsets; a mixture's slot and
 * the sample it draws). Pure: it reads the sample and computes nothing
 * that reaches a batch.
 */
#include "loader/loader_struct.h"

#include <stdio.h>
#include "augment/decode_internal.h"
#include "augment/pipeline_internal.h"
#include "dataset/dataset_internal.h"

int sp_loader_explain(const sp_loader *ld, uint32_t epoch, uint64_t index, char *buf,
                      size_t n, sp_error *err) {
    if (n) buf[0] = '\0';
    if (ld->cfg.rng_mode != SP_RNG_PER_SAMPLE)
        return sp_error_set(err, SP_EINVAL, "explain: only in the per-sample rng mode (in "
                            "per-worker mode the draws depend on scheduling)");
    if (ld->tok) return sp__tokl_explain(ld->tok, epoch, index, buf, n, err);
    uint64_t len = ld->mix ? sp__dataset_mix_length(ld->ds) : sp__dataset_size(ld->ds);
    uint64_t idx = index;
    if (index >= len)
        return sp_error_set(err, SP_ERANGE, "explain: %s %llu out of range (%s has %llu)",
                            ld->mix ? "slot" : "sample", (unsigned long long)index,
                            ld->mix ? "the mixture's epoch" : "dataset", (unsigned long long)len);
    if (ld->mix) {   /* index is a slot: the sample it draws, augmented as slot `index` */
        sp_mix_draw d;
        sp_dataset_mix_draw(ld->ds, ld->cfg.seed, epoch, index, &d);
        idx = d.index;
    }
    sp_sample_data sd;
    int rc = sp__dataset_read(ld->ds, idx, &sd, err);
    if (rc != 0) return rc;
    int W, H;
    sp_format fmt = SP_FORMAT_UNKNOWN;
    if (sd.src.raw) {
        W = sd.src.raw->width;
        H = sd.src.raw->height;
    } else {
        sp_image_info info = {0};
        rc = sp__image_probe(sd.src.bytes, sd.src.len, sd.src.path, NULL, &info, err);
        W = info.width;
        H = info.height;
        fmt = info.format;
    }
    if (rc == 0) {
        sp_sample_ctx ctx = {ld->k_augment, epoch, (uint32_t)index};
        sp_run_opts opts = {ld->cfg.dtype, ld->cfg.layout, ld->cfg.skip_normalize, NULL};
        sp_out_shape shape = {ld->h, ld->w, ld->c};
        if (ld->targets)   /* the sample is run: random_iou_crop's attempts, each box's fate */
            sp__ldt_explain(ld->targets, ld->pl, &ctx, &sd.src, &opts, &shape, idx,
                            ld->image_bytes, ld->sample_bytes, W, H, fmt, buf, n, &rc, err);
        else
            sp__pipeline_explain(ld->pl, &ctx, W, H, fmt, buf, n);
    }
    sp__sample_data_free(&sd);
    return rc;
}

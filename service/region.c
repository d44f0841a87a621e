/* region.c - the service's region as a reader checks it: a COPY of the
 * ring header validated before anything in the mapping is trusted
 * (sp__ring_validate() for the ring's layout, then the service block: the
 * ranks served, the start state and what it says about the stream, the
 * sample record: its image and, with targets, their fields; a batch mix).
 *
 * Below both users: the client's attach (service_client.c) and the
 * service's `status` reader (sp_service_status_read() in service.c) call
 * down into it; it calls only the ring (pool) and the loader's state
 * parser.
 */
#include "service/region_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "seedpipe/batchmix.h"
#include "seedpipe/pipeline.h"
#include "seedpipe/state.h"
#include "seedpipe/targets.h"
#include "augment/pipeline_internal.h"
#include "augment/targets_internal.h"

/* The batch mix block: none (all zero), or a spec the client can redraw
 * from, over float32 NCHW images without targets. */
static int check_mix(const sp__ring_hdr *h, const sp_loader_state *st0, sp_error *err) {
    if (!h->mix_n) {
        if (h->mix_classes)
            return sp_error_set(err, SP_EFORMAT, "ring: %u mix classes without a mix",
                                h->mix_classes);
        return SP_OK;
    }
    int ok = h->mix_n <= SP_BATCH_MIX_MAX_OPS && h->mix_classes >= 1 &&
             h->mix_classes <= 65536 && h->mix_choice <= 1 && !h->tg_on &&
             st0->dtype == SP_DTYPE_FLOAT32 && st0->layout == SP_LAYOUT_NCHW;
    double sum = 0.0;
    for (uint32_t i = 0; ok && i < h->mix_n; i++) {
        ok = (h->mix_op[i] == SP_BATCH_MIXUP || h->mix_op[i] == SP_BATCH_CUTMIX) &&
             h->mix_alpha[i] > 0.0 && isfinite(h->mix_alpha[i]) && h->mix_p[i] >= 0.0 &&
             isfinite(h->mix_p[i]);
        sum += ok ? h->mix_p[i] : 0.0;
    }
    if (!ok || !(sum > 0.0) || !isfinite(sum))
        return sp_error_set(err, SP_EFORMAT, "ring: batch mix of %u ops, %u classes: hostile "
                            "or not on float32 NCHW images", h->mix_n, h->mix_classes);
    return SP_OK;
}

int sp__service_validate(const sp__ring_hdr *h, size_t mapped, sp_loader_state *st0,
                         sp_error *err) {
    int rc = sp__ring_validate(h, mapped, err);
    if (rc != 0) return rc;
    if (h->nranks < 1 || h->nranks > SP__RING_MAX_RANKS)
        return sp_error_set(err, SP_EFORMAT, "ring: %u ranks", h->nranks);
    if (h->world < 1 || h->world > SP__RING_MAX_WORLD || h->rank_first >= h->world ||
        h->nranks > h->world - h->rank_first)
        return sp_error_set(err, SP_EFORMAT, "ring: ranks %u+%u of world %u", h->rank_first,
                            h->nranks, h->world);
    const char *text = h->state_text;
    const char *nul = memchr(text, '\0', SP__STATE_TEXT_MAX);
    if (!nul || nul == text)
        return sp_error_set(err, SP_EFORMAT, "ring: no start state in the header");
    sp_error e;
    sp_error_clear(&e);
    if (sp_loader_state_parse(text, (size_t)(nul - text), st0, &e) != 0)
        return sp_error_set(err, SP_EFORMAT, "ring: start state: %s", e.msg);
    if (st0->c <= 0 || st0->h <= 0 || st0->w <= 0 || st0->c > 65535 || st0->h > 65535 ||
        st0->w > 65535)
        return sp_error_set(err, SP_EFORMAT, "ring: sample shape %dx%dx%d", st0->c, st0->h,
                            st0->w);
    uint64_t sb = (uint64_t)st0->c * (uint64_t)st0->h * (uint64_t)st0->w *
                  (uint64_t)sp__dtype_size(st0->dtype);
    if (h->tg_on > 1 || (h->tg_on && (h->tg_max_boxes < 1 ||
                                      h->tg_max_boxes > SP_TARGETS_MAX_BOXES ||
                                      h->tg_keypoints > SP_TARGETS_MAX_KEYPOINTS ||
                                      h->tg_masks > SP_MASKS_SEMANTIC)))
        return sp_error_set(err, SP_EFORMAT, "ring: targets %u: %u boxes, %u keypoints, masks "
                            "%u", h->tg_on, h->tg_max_boxes, h->tg_keypoints, h->tg_masks);
    int rc2 = check_mix(h, st0, err);
    if (rc2 != 0) return rc2;
    if (h->tg_on) {   /* the image, zeros to 8 bytes, the target fields (targets.h) */
        sp_targets_rules r;
        memset(&r, 0, sizeof r);
        r.max_boxes = (int)h->tg_max_boxes;
        r.keypoints = (int)h->tg_keypoints;
        r.masks = (int)h->tg_masks;
        r.mask_w = st0->w;
        r.mask_h = st0->h;
        sb = sp__targets_image_span((size_t)sb) + sp__targets_record_bytes(&r);
    }
    if (sb != h->sample_bytes)
        return sp_error_set(err, SP_EFORMAT, "ring: sample of %llu bytes, the state says %llu",
                            (unsigned long long)h->sample_bytes, (unsigned long long)sb);
    if ((uint64_t)st0->batch_size != (uint64_t)h->world * h->rank_cap)
        return sp_error_set(err, SP_EFORMAT, "ring: %u positions per rank, world %u, batch "
                            "size %u", h->rank_cap, h->world, st0->batch_size);
    if (st0->fingerprint.hi != h->fp_hi || st0->fingerprint.lo != h->fp_lo)
        return sp_error_set(err, SP_EFORMAT, "ring: fingerprint differs from the start state's");
    if (h->batches_per_epoch == 0 || h->batches_per_epoch > (1ull << 40) ||
        h->total > (1ull << 40) || h->epochs == 0)
        return sp_error_set(err, SP_EFORMAT, "ring: stream of %llu batches, %llu per epoch",
                            (unsigned long long)h->total,
                            (unsigned long long)h->batches_per_epoch);
    uint64_t start = (uint64_t)st0->epoch * h->batches_per_epoch + st0->batch;
    if (start != h->start_abs || h->start_abs + h->total != (uint64_t)h->epochs * h->batches_per_epoch)
        return sp_error_set(err, SP_EFORMAT, "ring: stream bounds disagree with the start state");
    if (h->owner_pid <= 0) return sp_error_set(err, SP_EFORMAT, "ring: owner pid %d", h->owner_pid);
    return SP_OK;
}

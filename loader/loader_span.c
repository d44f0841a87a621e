/* loader_span.c - which positions of a batch a loader computes: one rank's
 * slice (sampler.h sp__batch_span()), or with a span (the service) the
 * slices of consecutive ranks, their parts within the span's buffer, and
 * their spreading to one buffer of fixed-size rank slots. Geometry only:
 * nothing here reads a sample.
 */
#include "seedpipe/loader.h"
#include "loader/loader_struct.h"

#include <string.h>
#include "loader/sampler_internal.h"

int sp__loader_set_span(sp_loader *ld, uint32_t span, sp_error *err) {
    if (span == 0 || (uint64_t)ld->bt.rank + span > ld->bt.world)
        return sp_error_set(err, SP_EINVAL, "loader: a span of %u ranks from rank %u does not "
                            "fit in world %u", span, ld->bt.rank, ld->bt.world);
    ld->span = span;
    return SP_OK;
}

/* Positions a batch buffer holds: B / world * span. */
uint32_t sp__loader_capacity(const sp_loader *ld) {
    return ld->bt.batch_size / ld->bt.world * ld->span;
}

void sp__loader_slice(const sp_loader *ld, uint64_t b, uint64_t *pos, uint32_t *count) {
    sp__batch_span(&ld->bt, b, ld->span, pos, count);
}

void sp__loader_span_part(const sp_loader *ld, uint64_t b, uint32_t nranks, uint32_t k,
                          uint32_t *off, uint32_t *count) {
    uint64_t first, pos;
    uint32_t all;
    sp__batch_span(&ld->bt, b, ld->span, &first, &all);
    *off = 0;
    *count = 0;
    if (k >= nranks || all == 0) return;
    if (nranks != ld->span) {   /* one rank of world K/m standing for m ranks of K */
        uint32_t cap = sp__loader_capacity(ld) / nranks;
        *off = (uint32_t)k * cap < all ? k * cap : all;
        *count = all - *off < cap ? all - *off : cap;
        return;
    }
    sp_batching one = ld->bt;
    one.rank = ld->bt.rank + k;
    sp__batch_span(&one, b, 1, &pos, count);
    *off = *count ? (uint32_t)(pos - first) : 0;
}

void sp__spread_slices(const sp_loader *ld, uint64_t b, uint32_t nranks, uint32_t rank_cap,
                       uint8_t *images, size_t sample_bytes, int32_t *labels,
                       uint64_t *indices, sp__item *items) {
    for (uint32_t k = nranks; k-- > 0;) {
        uint32_t off, cnt;
        sp__loader_span_part(ld, b, nranks, k, &off, &cnt);
        size_t dst = (size_t)k * rank_cap;
        if (cnt == 0 || dst == off) continue;
        memmove(images + dst * sample_bytes, images + (size_t)off * sample_bytes,
                cnt * sample_bytes);
        memmove(labels + dst, labels + off, cnt * sizeof *labels);
        memmove(indices + dst, indices + off, cnt * sizeof *indices);
        memmove(items + dst, items + off, cnt * sizeof *items);
    }
}

/* state_blend.c - a blend's part of a loader state, and sp_loader_resume()
 * (include/seedpipe/state.h; docs/determinism.md section 12b).
 *
 * A blend (a mixture of token corpora) may be resumed with other weights:
 * its state carries what the weights cannot be recomputed from, the blend's
 * identity (the loader fingerprint less the weights and any switch), the
 * weights in force and the switch they took effect at (the slot, and each
 * source's draws before it). sp_loader_resume() (state.c) then, through
 * sp__state_blend_resume(), either adopts the state's switch (the same
 * weights), or makes a new one at the state's
 * position: the draws each source has made by then are counted under the
 * state's weights (the mixture's schedule is built once for them and once
 * more for the new ones), and from there each source continues its own
 * order. Nothing here is thread-safe: a resume runs before any batch.
 */
#include "seedpipe/state.h"

#include <stdio.h>
#include <string.h>

#include "common/json_internal.h"
#include "dataset/dataset_tokens.h"
#include "loader/loader_internal.h"
#include "loader/state_internal.h"
#include "common/common_internal.h"

void sp__state_blend_at(const sp_loader *ld, sp_loader_state *st) {
    sp_dataset *ds = sp__loader_blend((sp_loader *)ld);   /* read only */
    if (!ds) return;
    uint32_t S = sp__dataset_mix_sources(ds);
    st->blend_sources = S;
    st->blend_identity = sp__loader_blend_identity(ld);
    sp__ds_mix_since(ds, &st->blend_epoch, &st->blend_slot, st->blend_draws);
    for (uint32_t s = 0; s < S; s++) sp__dataset_mix_weight(ds, s, &st->blend_weights[s], NULL);
}

static int same_weights(const sp_loader_state *a, const sp_loader_state *b) {
    return !memcmp(a->blend_weights, b->blend_weights, a->blend_sources * sizeof(uint64_t));
}

static int same_since(const sp_loader_state *a, const sp_loader_state *b) {
    return a->blend_epoch == b->blend_epoch && a->blend_slot == b->blend_slot &&
           !memcmp(a->blend_draws, b->blend_draws, a->blend_sources * sizeof(uint64_t));
}

int sp__state_blend_check(const sp_loader_state *me, const sp_loader_state *st, char *why,
                          size_t cap) {
    if (!me->blend_sources || !st->blend_sources) return 0;
    char a[33], b[33];
    if (me->blend_sources != st->blend_sources ||
        memcmp(&me->blend_identity, &st->blend_identity, sizeof me->blend_identity)) {
        sp_digest_hex(st->blend_identity, a);
        sp_digest_hex(me->blend_identity, b);
        snprintf(why, cap, "blend identity %.12s.. in the state, %.12s.. here (other sources, "
                 "spec, seed or batching)", a, b);
        return 1;
    }
    if (!same_weights(me, st) || !same_since(me, st)) {
        snprintf(why, cap, "the blend's weights or their switch differ from the state's "
                 "(sp_loader_resume() adopts them)");
        return 1;
    }
    return 0;
}

/* The draws each source made before the state's position, under the
 * state's weights and switch: ds reweighted to them, counted. */
static int draws_before(sp_dataset *ds, const sp_loader_state *st, uint64_t q, uint64_t *draws,
                        sp_error *err) {
    int rc = sp__ds_mix_reweight(ds, st->blend_weights, err);
    if (rc == SP_OK && (st->blend_epoch || st->blend_slot))
        rc = sp__ds_mix_set_since(ds, st->blend_epoch, st->blend_slot, st->blend_draws, err);
    if (rc == SP_OK && sp__ds_mix_draws_at(ds, st->epoch, q, draws) != SP_OK)
        rc = sp_error_set(err, SP_EFORMAT, "state: epoch %u slot %llu lies before the blend's "
                          "switch at epoch %u slot %llu", st->epoch, (unsigned long long)q,
                          st->blend_epoch, (unsigned long long)st->blend_slot);
    return rc;
}

int sp__state_blend_resume(sp_loader *ld, const sp_loader_state *me, const sp_loader_state *st,
                           int *changed, sp_error *err) {
    *changed = 0;
    sp_dataset *ds = sp__loader_blend(ld);
    if (!ds || !st->blend_sources || !me->blend_sources) return SP_OK;
    if (same_weights(me, st) && same_since(me, st)) return SP_OK;
    if (me->blend_sources != st->blend_sources ||
        memcmp(&me->blend_identity, &st->blend_identity, sizeof me->blend_identity))
        return SP_OK;   /* the check names what differs */
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    uint64_t q = st->batch * cfg->batch_size, draws[SP_STATE_MAX_SOURCES];
    if (q > sp__dataset_mix_length(ds))
        return sp_error_set(err, SP_ERANGE, "state: batch %llu is past the blend's epoch",
                            (unsigned long long)st->batch);
    int rc = SP_OK;
    if (same_weights(me, st)) {   /* the state's own switch: adopt it */
        rc = sp__ds_mix_set_since(ds, st->blend_epoch, st->blend_slot,
                                  st->blend_epoch || st->blend_slot ? st->blend_draws : NULL,
                                  err);
    } else {
        if (cfg->pad_tail)
            return sp_error_set(err, SP_EUNSUPP, "state: a blend's weights cannot change "
                                "under pad_tail (its last batch repeats earlier slots)");
        rc = draws_before(ds, st, q, draws, err);
        if (rc == SP_OK) rc = sp__ds_mix_reweight(ds, me->blend_weights, err);
        if (rc == SP_OK) rc = sp__ds_mix_set_since(ds, st->epoch, q, draws, err);
        if (rc != SP_OK) {   /* the loader as it was: its own weights, no switch */
            sp_error keep = err ? *err : (sp_error){0};
            sp__ds_mix_reweight(ds, me->blend_weights, NULL);
            if (err) *err = keep;
        }
    }
    sp__loader_refingerprint(ld);
    *changed = rc == SP_OK;
    return rc;
}

/* ---- the JSON keys ------------------------------------------------------------------- */

static void put_list(sp__jw *w, const char *key, const uint64_t *v, uint32_t S) {
    sp__jw_key(w, key);
    sp__jw_arr(w);
    for (uint32_t s = 0; s < S; s++) sp__jw_u64(w, v[s]);
    sp__jw_end(w, ']');
}

void sp__state_blend_write(const sp_loader_state *st, sp__jw *w) {
    if (!st->blend_sources) return;
    char id[33];
    sp_digest_hex(st->blend_identity, id);
    sp__jw_kstr(w, "blend_identity", id);
    sp__jw_key(w, "blend_since");
    sp__jw_fmt(w, "[%u,%llu]", st->blend_epoch, (unsigned long long)st->blend_slot);
    put_list(w, "blend_weights", st->blend_weights, st->blend_sources);
    put_list(w, "blend_draws", st->blend_draws, st->blend_sources);
}

/* An array of 1 .. SP_STATE_MAX_SOURCES integers <= max into v; its length. */
static long get_list(const sp__json *j, long a, uint64_t max, uint64_t *v) {
    if (a < 0 || j->t[a].kind != SP__J_ARR || j->t[a].size == 0 ||
        j->t[a].size > SP_STATE_MAX_SOURCES)
        return -1;
    for (size_t i = 0; i < j->t[a].size; i++)
        if (sp__json_u64(j, sp__json_at(j, (size_t)a, i), &v[i]) != 0 || v[i] > max) return -1;
    return (long)j->t[a].size;
}

int sp__state_blend_parse(const sp__json *j, int present, sp_loader_state *st, sp_error *err) {
    if (present == 0) return SP_OK;
    if (present != 4)
        return sp_error_set(err, SP_EFORMAT, "state: the blend_ keys come as four "
                            "(blend_identity, blend_since, blend_weights, blend_draws)");
    char hex[40];
    if (sp__json_str(j, sp__json_get(j, 0, "blend_identity"), hex, sizeof hex) != 0 ||
        sp__digest_parse(hex, &st->blend_identity) != 0)
        return sp_error_set(err, SP_EFORMAT, "state: \"blend_identity\": expected 32 hex digits");
    uint64_t since[2];
    if (get_list(j, sp__json_get(j, 0, "blend_since"), UINT64_MAX, since) != 2 ||
        since[0] > UINT32_MAX || since[1] > (UINT64_C(1) << 32))
        return sp_error_set(err, SP_EFORMAT, "state: \"blend_since\": expected [EPOCH,SLOT]");
    st->blend_epoch = (uint32_t)since[0];
    st->blend_slot = since[1];
    long nw = get_list(j, sp__json_get(j, 0, "blend_weights"), (UINT64_C(1) << 62) - 1,
                       st->blend_weights);
    long nd = get_list(j, sp__json_get(j, 0, "blend_draws"), UINT64_MAX, st->blend_draws);
    if (nw < 0 || nd != nw)
        return sp_error_set(err, SP_EFORMAT, "state: \"blend_weights\" and \"blend_draws\": "
                            "expected two lists of 1 to %d integers, as long as each other",
                            SP_STATE_MAX_SOURCES);
    for (long s = 0; s < nw; s++)
        if (st->blend_weights[s] == 0)
            return sp_error_set(err, SP_EFORMAT, "state: \"blend_weights\": a weight is 0");
    st->blend_sources = (uint32_t)nw;
    return SP_OK;
}

/* service_client.c - attach to a service's region and read its batches in place
 * (include/seedpipe/client.h): attach (owner check, header copy, rank claim,
 * the service's answer), next / release, detach, state and info.
 *
 * HOW IT WORKS
 *
 * Attach. The region is mapped read-write (the client writes its rank
 * record and sleeps on futex words in it). Before anything in it is used,
 * the header is copied out of the shared mapping and the COPY is validated
 * (sp__service_validate, region.c): a service, or anyone able to write the
 * region, cannot change an offset between the check and its use, because
 * every pointer the client forms is computed from the copy's offsets and
 * the mapping's base. Then the rank is claimed with a compare-and-swap on its
 * record's state (NEVER or GONE -> ATTACHING), the pid and its start time
 * are written, and the service, woken through the consumer word `cwake`,
 * answers by setting `first` (the batch this attachment starts at) and
 * state ATTACHED.
 *
 * Taking. Batch q (the stream's q-th batch, slot q mod R) is visible when
 * q < `published` (store-release by the service after it wrote the slot's
 * per-rank table); the client waits on the futex `pub_wake` (short spin
 * first), checking every 50 ms that the service is alive. The view points
 * into the slot, which holds the slices of the ranks the service serves
 * (rank_first .. rank_first + nranks - 1 of world K, in rank order): rank
 * r's slice starts at position (r - rank_first) * B/K. A rank outside that
 * range is refused at attach, naming the range. Counts read from the slot
 * are range-checked before use.
 *
 * Releasing. Views may be released in any order; the rank record's
 * `released` cursor moves to the oldest batch still held (or to the
 * cursor), so a batch is released once and a cursor never moves back.
 *
 * LIMITATIONS
 * - A process able to write the region (same uid) can still make a client
 *   read wrong batches or wait; it cannot make it read outside the mapping,
 *   except by shrinking the object (ftruncate) under it, which gives SIGBUS.
 */
#include "seedpipe/client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/loader_internal.h"
#include "service/region_internal.h"
#include "pool/ring_layout.h"
#include "seedpipe/batchmix.h"
#include "seedpipe/pipeline.h"
#include "augment/pipeline_internal.h"
#include "service/client_internal.h"

#define SPIN_NS 20000ull
#define LIVENESS_NS 50000000ull

struct sp_client {
    sp__region region;
    sp__ring_hdr *live;   /* the shared header (mutable fields only) */
    sp__ring_hdr *hc;     /* validated copy: every offset comes from here */
    char name[256];
    uint32_t rank, world, R, rank_cap;   /* rank: the global rank */
    uint32_t local;                      /* rank - the first rank served: record, slice */
    uint64_t nb, total, start_abs;
    sp_loader_state st0;
    int owner_pid;
    uint64_t owner_start;
    int32_t pid;
    sp__rank_rec *rec;
    uint64_t cursor, first;
    uint64_t *held;       /* held batches, oldest first */
    uint8_t *held_rel;    /* released (but not yet the oldest) */
    uint32_t nheld;
    int dropped;
    uint64_t last_live_ns;
    sp_client_timing timing;
};

/* ---- pointers from the validated copy --------------------------------------- */

static uint8_t *slot_base(const sp_client *c, uint32_t s) {
    return c->region.base + c->hc->slots_offset + (uint64_t)s * c->hc->slot_size;
}
static sp__slot_hdr *slot_hdr(const sp_client *c, uint32_t s) {
    return (sp__slot_hdr *)slot_base(c, s);
}
static uint8_t *slice_images(const sp_client *c, uint32_t s) {
    return slot_base(c, s) + c->hc->off_images +
           (uint64_t)c->local * c->rank_cap * c->hc->sample_bytes;
}

static void service_wake(sp__ring_hdr *h) {
    atomic_fetch_add(&h->cwake, 1);
    if (atomic_load(&h->csleep)) sp__futex_wake(&h->cwake, 1);
}

/* ---- attach ------------------------------------------------------------------ */

static int fail_attach(sp_client *c, int rc) {
    sp__client_detach(c);
    return rc;
}

static int owner_alive(const sp_client *c) { return sp__proc_alive(c->owner_pid, c->owner_start); }

int sp__client_attach(const char *name, uint32_t rank, sp_client **out, sp_error *err) {
    return sp__client_attach_opts(name, rank, NULL, out, err);
}

/* The region's owner must be this user and its mode 0600, unless the caller
 * accepts a foreign region (SP_CLIENT_ALLOW_FOREIGN). */
static int check_owner(const struct stat *st, const char *name, unsigned flags, sp_error *err) {
    if (flags & SP_CLIENT_ALLOW_FOREIGN) return SP_OK;
    if (st->st_uid != geteuid())
        return sp_error_set(err, SP_EIO, "region %s: owned by uid %u, not by this user "
                            "(SP_CLIENT_ALLOW_FOREIGN accepts it)", name, (unsigned)st->st_uid);
    if (st->st_mode & 077)
        return sp_error_set(err, SP_EIO, "region %s: mode %04o, expected 0600", name,
                            (unsigned)(st->st_mode & 0777));
    return SP_OK;
}

/* Copy the header out of the shared mapping, validate the COPY
 * (sp__service_validate, region.c) and take the stream's numbers from it. */
static int read_header(sp_client *c, const char *name, sp_error *err) {
    c->hc = malloc(sizeof *c->hc);
    if (!c->hc) return sp_error_set(err, SP_ENOMEM, "client: out of memory");
    memcpy(c->hc, c->region.base, sizeof *c->hc);   /* size checked by attach */
    c->live = (sp__ring_hdr *)c->region.base;
    sp_error e;
    sp_error_clear(&e);
    int rc = sp__service_validate(c->hc, c->region.size, &c->st0, &e);
    if (rc != 0) return sp_error_set(err, rc, "region %s: %s", name, e.msg);
    const sp__ring_hdr *hc = c->hc;
    c->world = hc->world;
    c->R = hc->nslots;
    c->rank_cap = hc->rank_cap;
    c->nb = hc->batches_per_epoch;
    c->total = hc->total;
    c->start_abs = hc->start_abs;
    c->owner_pid = hc->owner_pid;
    c->owner_start = hc->owner_start;
    return SP_OK;
}

/* The service must serve c->rank, the expected stream (if the caller names
 * one), be alive and be running; sets c->local. */
static int check_service(sp_client *c, const char *name, const sp_client_opts *o,
                         sp_error *err) {
    const sp__ring_hdr *hc = c->hc;
    uint32_t rank = c->rank;
    if (rank >= c->world)
        return sp_error_set(err, SP_EINVAL, "region %s: rank %u, the service has world %u", name,
                            rank, c->world);
    if (rank < hc->rank_first || rank - hc->rank_first >= hc->nranks)
        return sp_error_set(err, SP_EINVAL, "region %s: service %s serves ranks %u-%u of world "
                            "%u; rank %u is served by another node's service", name, name,
                            hc->rank_first, hc->rank_first + hc->nranks - 1, c->world, rank);
    c->local = rank - hc->rank_first;
    if (o->expect_fingerprint && (o->expect_fingerprint->hi != hc->fp_hi ||
                                  o->expect_fingerprint->lo != hc->fp_lo)) {
        char a[33], b[33];
        sp_digest_hex(*o->expect_fingerprint, a);
        sp_digest_hex(c->st0.fingerprint, b);
        return sp_error_set(err, SP_EMISMATCH, "region %s: serves stream %s, expected %s", name,
                            b, a);
    }
    if (!owner_alive(c))
        return sp_error_set(err, SP_EIO, "region %s: service pid %d is gone (stale region; the "
                            "next `seedpipe serve --name %s` removes it)", name, c->owner_pid,
                            name);
    if (!atomic_load(&c->live->svc_running))
        return sp_error_set(err, SP_EIO, "region %s: the service is %s", name,
                            atomic_load(&c->live->svc_end) ? "finished" : "not running yet");
    return SP_OK;
}

/* Claim the rank's record (NEVER or GONE -> ATTACHING by CAS), waiting while
 * another attachment is in progress or a dead holder is not yet dropped by
 * the service; sets c->rec. t0, limit: the attach timeout's start and span. */
static int claim_rank(sp_client *c, const char *name, uint64_t t0, uint64_t limit,
                      sp_error *err) {
    sp__rank_rec *rec = &c->live->ranks[c->local];
    for (;;) {
        uint32_t s = atomic_load(&rec->state);
        if ((s == SP__RANK_NEVER || s == SP__RANK_GONE) &&
            atomic_compare_exchange_strong(&rec->state, &s, SP__RANK_ATTACHING))
            break;
        int holder = atomic_load(&rec->pid);
        if (s == SP__RANK_ATTACHED && holder > 0 &&
            sp__proc_alive(holder, atomic_load(&rec->pid_start)))
            return sp_error_set(err, SP_EIO, "region %s: rank %u is attached by pid %d", name,
                                c->rank, holder);
        if (sp__now_ns() - t0 > limit || !owner_alive(c))   /* the service will notice */
            return sp_error_set(err, SP_EIO, "region %s: rank %u is busy (attaching or held by "
                                "a dead client the service has not dropped)", name, c->rank);
        usleep(2000);
    }
    c->rec = rec;
    return SP_OK;
}

/* Write our pid (and start time) into the claimed record, wake the service
 * and wait for its answer: state ATTACHED with our pid. On a refusal or a
 * timeout the record is let go (c->rec NULL). */
static int await_attached(sp_client *c, const char *name, uint64_t t0, uint64_t limit,
                          sp_error *err) {
    sp__rank_rec *rec = c->rec;
    atomic_store(&rec->pid_start, sp__proc_start(c->pid));
    uint32_t wv = atomic_load(&rec->wake);
    atomic_store(&rec->pid, c->pid);
    service_wake(c->live);
    for (;;) {
        uint32_t s = atomic_load(&rec->state);
        if (s == SP__RANK_ATTACHED && atomic_load(&rec->pid) == c->pid) return SP_OK;
        if (s != SP__RANK_ATTACHING) {
            c->rec = NULL;
            return sp_error_set(err, SP_EIO, "region %s: rank %u: the service refused the "
                                "attachment", name, c->rank);
        }
        if (sp__now_ns() - t0 > limit || !owner_alive(c)) {
            uint32_t a = SP__RANK_ATTACHING;
            atomic_store(&rec->pid, 0);
            atomic_compare_exchange_strong(&rec->state, &a, SP__RANK_GONE);
            c->rec = NULL;
            return sp_error_set(err, SP_EIO, "region %s: the service (pid %d) did not answer",
                                name, c->owner_pid);
        }
        sp__futex_wait(&rec->wake, wv, 10000000ull);
        wv = atomic_load(&rec->wake);
    }
}

int sp__client_attach_opts(const char *name, uint32_t rank, const sp_client_opts *opts,
                           sp_client **out, sp_error *err) {
    *out = NULL;
    sp_client_opts o = {0, NULL, 0};
    if (opts) o = *opts;
    int timeout_ms = o.attach_timeout_ms > 0 ? o.attach_timeout_ms : 5000;
    if (!name) return sp_error_set(err, SP_EINVAL, "client: no region name");
    int rc = sp__region_name_check(name, err);
    if (rc != 0) return rc;
    sp_client *c = calloc(1, sizeof *c);
    if (!c) return sp_error_set(err, SP_ENOMEM, "client: out of memory");
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    struct stat st;
    rc = sp__region_attach(&c->region, name, 0, &st, err);
    if (rc == 0) rc = check_owner(&st, name, o.flags, err);
    if (rc == 0) rc = read_header(c, name, err);
    if (rc == 0) rc = check_service(c, name, &o, err);
    if (rc != 0) return fail_attach(c, rc);
    c->held = calloc(c->R, sizeof *c->held);
    c->held_rel = calloc(c->R, 1);
    if (!c->held || !c->held_rel)
        return fail_attach(c, sp_error_set(err, SP_ENOMEM, "client: out of memory"));
    c->pid = (int32_t)getpid();
    uint64_t t0 = sp__now_ns(), limit = (uint64_t)timeout_ms * 1000000ull;
    rc = claim_rank(c, name, t0, limit, err);
    if (rc == 0) rc = await_attached(c, name, t0, limit, err);
    if (rc != 0) return fail_attach(c, rc);
    c->first = c->cursor = atomic_load(&c->rec->first);
    if (c->cursor > c->total) c->cursor = c->total;
    c->last_live_ns = sp__now_ns();
    *out = c;
    return SP_OK;
}

void sp__client_detach(sp_client *c) {
    if (!c) return;
    if (c->rec && !c->dropped && atomic_load(&c->rec->pid) == c->pid) {
        /* Held batches stay unreleased: a re-attaching rank resumes there. */
        atomic_store(&c->rec->pid, 0);
        atomic_store(&c->rec->state, SP__RANK_GONE);
        service_wake(c->live);
    }
    sp__region_close(&c->region);
    free(c->hc);
    free(c->held);
    free(c->held_rel);
    free(c);
}

/* ---- next / release ------------------------------------------------------------ */

static int still_ours(const sp_client *c) {
    return atomic_load(&c->rec->state) == SP__RANK_ATTACHED &&
           atomic_load(&c->rec->pid) == c->pid;
}

/* The batch q is not (yet) published: why, or 0 to keep waiting. */
static int not_published(sp_client *c, uint64_t q, sp_error *err) {
    sp__ring_hdr *h = c->live;
    if (atomic_load_explicit(&h->published, memory_order_acquire) > q) return 0;
    if (atomic_load(&h->svc_end)) {
        if (atomic_load_explicit(&h->published, memory_order_acquire) > q) return 0;
        int code = atomic_load(&h->svc_err_code);
        if (code < 0) {
            char msg[SP_ERROR_MSG_MAX];
            memcpy(msg, h->svc_err_msg, sizeof msg);
            msg[sizeof msg - 1] = '\0';
            return sp_error_set(err, code, "%s", msg);
        }
        return sp_error_set(err, SP_EIO, "region %s: the service stopped before the end of the "
                            "stream (at batch %llu of %llu)", c->name, (unsigned long long)q,
                            (unsigned long long)c->total);
    }
    if (!still_ours(c)) {
        c->dropped = 1;
        return sp_error_set(err, SP_EIO, "region %s: rank %u was dropped by the service", c->name,
                            c->rank);
    }
    return 0;
}

/* Wait until batch q is published: a short spin, then sleeps on pub_wake
 * with the service's liveness checked every LIVENESS_NS. @return 0, or why
 * it never will be (not_published(), the service died). */
static int wait_published(sp_client *c, uint64_t q, sp_error *err) {
    sp__ring_hdr *h = c->live;
    uint64_t t0 = c->timing.call_ns;
    while (atomic_load_explicit(&h->published, memory_order_acquire) <= q &&
           sp__now_ns() - t0 < SPIN_NS) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    for (;;) {
        uint32_t wv = atomic_load(&h->pub_wake);
        int rc = not_published(c, q, err);
        if (rc != 0) return rc;
        if (atomic_load_explicit(&h->published, memory_order_acquire) > q) break;
        atomic_fetch_add(&h->pub_sleepers, 1);
        int timed_out = 0;
        if (atomic_load_explicit(&h->published, memory_order_acquire) <= q &&
            atomic_load(&h->pub_wake) == wv)
            timed_out = sp__futex_wait(&h->pub_wake, wv, LIVENESS_NS);
        atomic_fetch_sub(&h->pub_sleepers, 1);
        uint64_t now = sp__now_ns();
        if ((timed_out || now - c->last_live_ns >= LIVENESS_NS) &&
            atomic_load_explicit(&h->published, memory_order_acquire) <= q) {
            c->last_live_ns = now;
            if (!owner_alive(c) && atomic_load_explicit(&h->published, memory_order_acquire) <= q &&
                !atomic_load(&h->svc_end))
                return sp_error_set(err, SP_EIO, "region %s: the service (pid %d) died",
                                    c->name, c->owner_pid);
        }
    }
    return SP_OK;
}

int sp__client_next(sp_client *c, sp_batch *view, sp_error *err) {
    if (c->dropped)
        return sp_error_set(err, SP_EIO, "region %s: rank %u was dropped by the service", c->name,
                            c->rank);
    if (c->cursor >= c->total) return SP_END;
    if (c->nheld >= c->R)
        return sp_error_set(err, SP_EINVAL, "client: all %u slots are held; release one first",
                            c->R);
    sp__ring_hdr *h = c->live;
    uint64_t q = c->cursor;
    c->timing.call_ns = sp__now_ns();
    if (atomic_load_explicit(&h->published, memory_order_acquire) <= q) {
        int rc = wait_published(c, q, err);
        if (rc != 0) return rc;
    }
    uint32_t s = (uint32_t)(q % c->R);
    sp__slot_hdr *sh = slot_hdr(c, s);
    uint64_t sq = atomic_load_explicit(&sh->q, memory_order_acquire);
    if (sq != q)
        return sp_error_set(err, SP_EFORMAT, "region %s: slot %u holds batch %llu, expected %llu",
                            c->name, s, (unsigned long long)sq, (unsigned long long)q);
    const sp__rank_slice *rs =
        (const sp__rank_slice *)(slot_base(c, s) + c->hc->off_ranks) + c->local;
    sp__rank_slice sl;
    memcpy(&sl, rs, sizeof sl);
    if (sl.count > c->rank_cap || sl.nskipped > c->rank_cap || sl.nsubst > c->rank_cap)
        return sp_error_set(err, SP_EFORMAT, "region %s: batch %llu: hostile counts", c->name,
                            (unsigned long long)q);
    uint64_t abs = c->start_abs + q;
    uint64_t off = (uint64_t)c->local * c->rank_cap;
    memset(view, 0, sizeof *view);
    view->capacity = c->rank_cap;
    view->count = sl.count;
    view->epoch = (uint32_t)(abs / c->nb);
    view->index = abs % c->nb;
    view->images = slice_images(c, s);
    view->labels = (int32_t *)(slot_base(c, s) + c->hc->off_labels) + off;
    view->indices = (uint64_t *)(slot_base(c, s) + c->hc->off_indices) + off;
    view->nskipped = sl.nskipped;
    view->skipped = (uint64_t *)(slot_base(c, s) + c->hc->off_skipped) + off;
    view->nsubstituted = sl.nsubst;
    view->substituted = (uint64_t *)(slot_base(c, s) + c->hc->off_subst) + 2 * off;
    view->flags = SP_BATCH_VIEW;
    c->timing.ready_ns = atomic_load(&sh->ready_ns);
    c->timing.published_ns = atomic_load(&sh->pub_ns);
    c->timing.taken_ns = sp__now_ns();
    c->held[c->nheld] = q;
    c->held_rel[c->nheld] = 0;
    c->nheld++;
    c->cursor++;
    atomic_store_explicit(&c->rec->cursor, c->cursor, memory_order_relaxed);
    return SP_OK;
}

int sp__client_release(sp_client *c, sp_batch *view, sp_error *err) {
    uint32_t i = 0;
    if (view && view->images)
        for (; i < c->nheld; i++)
            if (!c->held_rel[i] && slice_images(c, (uint32_t)(c->held[i] % c->R)) == view->images)
                break;
    if (!view || !view->images || i == c->nheld)
        return sp_error_set(err, SP_EINVAL, "client: this batch is not held (released twice?)");
    c->held_rel[i] = 1;
    uint32_t k = 0;
    while (k < c->nheld && c->held_rel[k]) k++;
    if (k) {
        memmove(c->held, c->held + k, (c->nheld - k) * sizeof *c->held);
        memmove(c->held_rel, c->held_rel + k, c->nheld - k);
        c->nheld -= k;
        if (!c->dropped && still_ours(c)) {
            atomic_store_explicit(&c->rec->released, c->nheld ? c->held[0] : c->cursor,
                                  memory_order_release);
            service_wake(c->live);
        }
    }
    memset(view, 0, sizeof *view);
    return SP_OK;
}

/* ---- state, info, digest ------------------------------------------------------------ */

void sp_client_state(const sp_client *c, sp_loader_state *st) {
    *st = c->st0;
    uint64_t abs = c->start_abs + c->cursor;
    st->epoch = (uint32_t)(abs / c->nb);
    st->batch = abs % c->nb;
}

void sp_client_info_get(const sp_client *c, sp_client_info *in) {
    memset(in, 0, sizeof *in);
    in->rank = c->rank;
    in->world = c->world;
    in->ring_slots = c->R;
    in->batch_size = c->world * c->rank_cap;   /* = the start state's, validated */
    in->c = c->st0.c;
    in->h = c->st0.h;
    in->w = c->st0.w;
    in->dtype = c->st0.dtype;
    in->layout = c->st0.layout;
    in->sample_bytes = (size_t)c->hc->sample_bytes;
    in->batches_per_epoch = c->nb;
    in->total = c->total;
    in->first = c->first;
    in->epochs = c->hc->epochs;
    in->service_pid = c->owner_pid;
    in->fingerprint = c->st0.fingerprint;
    in->seed = c->st0.seed;
    in->image_bytes = (size_t)c->st0.c * (size_t)c->st0.h * (size_t)c->st0.w *
                      sp__dtype_size(c->st0.dtype);
    in->target_offset = in->image_bytes;
    if (c->hc->tg_on) {   /* validated by region.c against sample_bytes */
        in->targets = 1;
        in->max_boxes = (int)c->hc->tg_max_boxes;
        in->keypoints = (int)c->hc->tg_keypoints;
        in->masks = (int)c->hc->tg_masks;
        in->target_offset = (in->image_bytes + 7) & ~(size_t)7;
    }
    in->mix_classes = (int)c->hc->mix_classes;   /* 0 without a mix (region.c) */
}

/* The slot of a view this client holds, or -1. */
static int64_t held_slot(const sp_client *c, const sp_batch *view) {
    for (uint32_t i = 0; view && view->images && i < c->nheld; i++) {
        uint32_t s = (uint32_t)(c->held[i] % c->R);
        if (!c->held_rel[i] && slice_images(c, s) == view->images) return s;
    }
    return -1;
}

/* The header's batch mix as a spec (validated by region.c). */
static void mix_spec(const sp__ring_hdr *hc, sp_batch_mix_spec *sp) {
    memset(sp, 0, sizeof *sp);
    sp->n = (int)hc->mix_n;
    sp->choice = (int)hc->mix_choice;
    sp->classes = (int)hc->mix_classes;
    for (int i = 0; i < sp->n; i++) {
        sp->op[i] = hc->mix_op[i];
        sp->alpha[i] = hc->mix_alpha[i];
        sp->p[i] = hc->mix_p[i];
    }
}

const float *sp_client_mix_targets(const sp_client *c, const sp_batch *view, sp_batch_mix *mix) {
    int64_t s = c->hc->mix_n ? held_slot(c, view) : -1;
    if (s < 0) return NULL;
    if (mix) {
        sp_batch_mix_spec sp;
        mix_spec(c->hc, &sp);
        if (sp_batch_mix_spec_draw(&sp, c->st0.seed, view->epoch, view->index, c->st0.h,
                                   c->st0.w, mix, NULL) != 0)
            return NULL;
    }
    const uint8_t *base = slot_base(c, (uint32_t)s) + c->hc->off_mix;
    return (const float *)base + (uint64_t)c->local * c->rank_cap * c->hc->mix_classes;
}

void sp_client_timing_get(const sp_client *c, sp_client_timing *t) { *t = c->timing; }

sp_digest sp__client_batch_digest(const sp_client *c, const sp_batch *b) {
    sp_batch_mix m;
    const float *t = sp_client_mix_targets(c, b, &m);
    if (t)   /* what `digest --batch-mix` writes */
        return sp_batch_mix_digest(&m, (int)b->count, (int)c->hc->mix_classes, b->labels,
                                   b->images, (size_t)b->count * (size_t)c->hc->sample_bytes, t);
    return sp__batch_digest(b, c->st0.c, c->st0.h, c->st0.w, (sp_dtype)c->st0.dtype,
                            (size_t)c->hc->sample_bytes);
}

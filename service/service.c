/* service.c - the loader as a service: a worker pool in a named region,
 * batches published to K ranks of clients (include/seedpipe/service.h).
 *
 * HOW IT WORKS
 *
 * The service is the pool's consumer (pool.c). Its loop, on one thread:
 *  1. answers attach requests: a rank record in state ATTACHING with a pid
 *     gets first = max(the rank's released cursor, the oldest batch still
 *     in the ring), and state ATTACHED; every 20 ms it checks the pid (and
 *     /proc start time) of each attached client and marks a dead one GONE;
 *  2. recycles: the oldest taken batch q goes back to the pool
 *     (sp__pool_release) once every rank is past it: released_r > q for an
 *     ATTACHED rank, a GONE rank never blocks, a NEVER or ATTACHING rank
 *     always does (a first attach must start at batch 0);
 *  3. publishes: when the next batch is complete (sp__pool_poll), it
 *     finalises each served rank's slice in place (the loader's
 *     sp__batch_finalize on the slot's positions [k*B/K, (k+1)*B/K) for
 *     the k-th rank served: skip compacts within the slice, exactly as an
 *     in-process loader with that rank would), writes the slot's rank
 *     table, then stores published = q + 1 with release order and wakes
 *     sleeping clients (futex pub_wake);
 *  4. sleeps on the consumer word cwake (10 ms at most) when nothing moved;
 *     workers (a batch complete) and clients (a release, an attach, a
 *     detach) bump it and wake the service if it sleeps.
 * Only the service recycles slots and answers attaches, so a client never
 * sees a slot change under a batch it holds: every rank record field has
 * one writer at a time (the client: pid, cursor, released; the service:
 * state ATTACHED/GONE, first).
 *
 * Ranks served. A service serves ranks A..A+m-1 of world K (all by
 * default). Its pool's loader computes their positions and nothing else:
 * rank A/m of world K/m when m divides A and K (ranks 2-3 of world 4 are
 * rank 1 of world 2; all ranks are the global stream), else the span of m
 * consecutive slices from rank A (sp__loader_set_span()). The slot then
 * holds the m slices in rank order; rank record k is rank A + k. The header
 * records world and rank_first for clients and status (layout version 3).
 *
 * Targets and batch mixes (layout version 5). The header says how a sample
 * record is cut (record_layout: the targets op's N, K, masks), so clients
 * read the target fields after each image without the pipeline. With a
 * batch mix (service.h: batch_mix) each finalised slice is mixed in place
 * before it is published (mix_slices: the draw of the global batch, the
 * rank's slice rolled and mixed as `digest --rank r --batch-mix` does) and
 * its soft targets go to the slot's off_mix area; the spec is in the
 * header, so a client redraws the mix for its digest.
 *
 * Also in service/: the staleness check before the region is created and
 * sp_service_status_read() (`seedpipe status`) in service_status.c, the
 * service in a child process (sp__service_fork() / sp__service_join()) in
 * service_fork.c, the header checks a reader makes in region.c, and the
 * client in service_client.c.
 *
 * LIMITATIONS
 * - A rank that never attaches holds the stream after R batches (by
 *   design: no rank misses batches silently); stop the service to give up.
 * - Client liveness is checked by pid; a client in another pid namespace
 *   is not supported.
 * - A client killed in the middle of attaching (between claiming its rank
 *   and writing its pid) holds the stream for ATTACH_STALL_NS (2 s).
 * - Clients map the region read-write (their rank records, futex words):
 *   a client (same uid, mode 0600) is trusted not to write elsewhere in it.
 */
#include "seedpipe/service.h"
#include "seedpipe/batchmix.h"
#include "seedpipe/targets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader_internal.h"
#include "service/region_internal.h"
#include "pool/pool_internal.h"
#include "common/escape_internal.h"
#include "common/trace_internal.h"

#define SLEEP_NS 10000000ull      /* longest sleep between loop turns */
#define LIVENESS_NS 20000000ull   /* client pid checks */
#define SPIN_NS 20000ull
#define ATTACH_STALL_NS 2000000000ull

struct sp_service {
    sp_pool *pool;
    sp_loader *ld;
    sp__ring_hdr *h;
    uint32_t nranks, R, rank_cap;   /* ranks served (records 0..nranks-1) */
    uint64_t total, published, recycled;
    uint64_t last_live_ns;
    uint64_t attaching_since[SP__RING_MAX_RANKS];
    sp_batch_mix_spec mix;          /* mix.n 0: none (service.h: batch_mix) */
    uint64_t seed;
    int c, hh, ww, k;               /* the images mixed, the classes of their targets */
    float *scratch;                 /* one image (sp_batch_mix_f32()) */
    int64_t *lab;                   /* rank_cap labels */
    int ended, failed;
    sp_error fail_err;
    char name[256];
    char note[600];
};

/* ---- create / destroy ------------------------------------------------------------- */

/* The batch mix's buffers (the header's block is the pool's: sp__ring_mix). */
static int mix_open(sp_service *svc, const sp_batch_mix_spec *mix, uint64_t seed,
                    sp_error *err) {
    svc->mix = *mix;
    svc->seed = seed;
    svc->k = (int)svc->h->mix_classes;
    sp__loader_sample_dims(svc->ld, &svc->c, &svc->hh, &svc->ww);
    size_t plane = (size_t)svc->c * (size_t)svc->hh * (size_t)svc->ww;
    svc->scratch = malloc(plane * sizeof *svc->scratch);
    svc->lab = malloc((size_t)svc->rank_cap * sizeof *svc->lab);
    if (!svc->scratch || !svc->lab)
        return sp_error_set(err, SP_ENOMEM, "service: out of memory for the batch mix");
    return SP_OK;
}

/* The sample record, for the clients (region.c checks it against
 * sample_bytes): with targets, the image then the target fields. */
static void record_layout(sp__ring_hdr *h, const sp_loader *ld) {
    sp_targets_rules tr;
    const sp_pipeline *pl = sp__loader_pipeline(ld);
    if (!pl || !sp_pipeline_targets(pl, &tr)) return;
    h->tg_on = 1;
    h->tg_max_boxes = (uint32_t)tr.max_boxes;
    h->tg_keypoints = (uint32_t)tr.keypoints;
    h->tg_masks = (uint32_t)tr.masks;
}

/* The ranks served (A..A+m-1 of world K, checked) and the loader that
 * computes their positions only: *lc a copy of lcfg as one rank of a
 * smaller world when they line up, else *span = m slices from rank A. */
static int served_ranks(const sp_loader_config *lcfg, const sp_service_config *scfg,
                        sp_loader_config *lc, uint32_t *m_out, uint32_t *span, sp_error *err) {
    uint32_t K = scfg->world ? scfg->world : 1;
    if (K > SP_SERVICE_MAX_WORLD)
        return sp_error_set(err, SP_EINVAL, "service: world %u (1..%u)", K, SP_SERVICE_MAX_WORLD);
    uint32_t A = scfg->rank_first;
    if (A >= K)
        return sp_error_set(err, SP_EINVAL, "service: first rank %u, the world has %u", A, K);
    uint32_t m = scfg->rank_count ? scfg->rank_count : K - A;
    if ((uint64_t)A + m > K)
        return sp_error_set(err, SP_EINVAL, "service: ranks %u-%llu, the world has %u (0-%u)", A,
                            (unsigned long long)A + m - 1, K, K - 1);
    if (m > SP_SERVICE_MAX_RANKS)
        return sp_error_set(err, SP_EINVAL, "service: %u ranks; one service serves at most %d "
                            "(run one per node, each with its --ranks)", m, SP_SERVICE_MAX_RANKS);
    if (lcfg->world > 1 || lcfg->rank != 0)
        return sp_error_set(err, SP_EINVAL, "service: the loader must be global (rank 0, "
                            "world 1); ranks are the service's world");
    if (lcfg->batch_size % K != 0)
        return sp_error_set(err, SP_EINVAL, "service: batch size %u is not divisible by world %u",
                            lcfg->batch_size, K);
    /* The loader computes the served positions only. Ranks A..A+m-1 that
     * line up (m divides A and K) are one rank of world K/m: the loader is
     * that rank (its cache key is that rank's; all ranks: the global
     * stream, exactly as before ranges existed). Otherwise it takes the
     * span of m slices from rank A of world K. With pad_tail or the
     * strided slices (the sequential order, repeat) the ranks' parts
     * depend on K itself (sampler.h), so only m == 1 lines up there. */
    *lc = *lcfg;
    *m_out = m;
    *span = 1;
    if (A % m == 0 && K % m == 0 &&
        (m == 1 || (!lcfg->pad_tail && lcfg->order != SP_ORDER_SEQUENTIAL &&
                    lcfg->repeat <= 1))) {
        lc->rank = A / m;
        lc->world = K / m;
        return SP_OK;
    }
    lc->rank = A;
    lc->world = K;
    *span = m;
    if (scfg->cache_dir)
        return sp_error_set(err, SP_EUNSUPP,
                            "service: ranks %u-%u of world %u with the epoch cache: a cache "
                            "entry holds one rank's stream of some world size, and these %u "
                            "ranks are not one (serve ranges whose size divides their first "
                            "rank and the world, e.g. 0-1 and 2-3 of world 4, or serve "
                            "without a cache)", A, A + m - 1, K, m);
    return SP_OK;
}

/* The header's service block, but for `running`: what clients and status
 * read (the start state, the owner, the ranks). */
static int publish_header(sp_service *svc, const sp_loader_config *lcfg,
                          const sp_service_config *scfg, sp_error *err) {
    sp__ring_hdr *h = svc->h;
    h->world = scfg->world ? scfg->world : 1;
    h->rank_first = scfg->rank_first;
    record_layout(h, svc->ld);
    sp_loader_state st;
    sp_loader_state_at(svc->ld, (uint32_t)(h->start_abs / h->batches_per_epoch),
                       h->start_abs % h->batches_per_epoch, &st);
    int n = sp_loader_state_format(&st, h->state_text, sizeof h->state_text);
    if (n <= 0 || (size_t)n >= sizeof h->state_text)
        return sp_error_set(err, SP_ELIMIT, "service: state text too long");
    h->owner_uid = (uint32_t)geteuid();
    h->owner_start = sp__proc_start((int)getpid());
    h->epochs = scfg->epochs;
    snprintf(h->dataset, sizeof h->dataset, "%s", lcfg->dataset ? lcfg->dataset : "");
    h->started_ns = sp__now_ns();
    if (svc->total == 0) atomic_store(&h->svc_end, 1);
    return SP_OK;
}

int sp_service_create(const sp_loader_config *lcfg, const sp_service_config *scfg,
                      sp_service **out, sp_error *err) {
    *out = NULL;
    if (!lcfg || !scfg || !scfg->name) return sp_error_set(err, SP_EINVAL, "service: missing config");
    int rc = sp__region_name_check(scfg->name, err);
    if (rc != 0) return rc;
    sp_loader_config lc;
    uint32_t m = 1, span = 1;
    if ((rc = served_ranks(lcfg, scfg, &lc, &m, &span, err)) != 0) return rc;
    sp_service *svc = calloc(1, sizeof *svc);
    if (!svc) return sp_error_set(err, SP_ENOMEM, "service: out of memory");
    snprintf(svc->name, sizeof svc->name, "%s", scfg->name);
    rc = sp__service_stale_check(scfg->name, svc->note, sizeof svc->note, err);
    if (rc != 0) {
        free(svc);
        return rc;
    }
    sp_pool_config pc = {scfg->workers, scfg->ring_slots, scfg->epochs, scfg->resume,
                         scfg->cache_dir, scfg->cache_opts};
    sp__pool_setup su = {SP__POOL_SERVICE, scfg->name, m, span, scfg->batch_mix};
    rc = sp__pool_create_ex(&lc, &pc, &su, &svc->pool, err);
    if (rc != 0) {
        free(svc);
        return rc;
    }
    svc->ld = sp__pool_loader(svc->pool);
    svc->h = sp__pool_hdr(svc->pool);
    svc->nranks = m;
    svc->R = svc->h->nslots;
    svc->rank_cap = svc->h->rank_cap;
    svc->total = sp__pool_total(svc->pool);
    if (svc->h->batches_per_epoch == 0)
        rc = sp_error_set(err, SP_EINVAL, "service: the stream has no batches (fewer samples "
                          "than a batch with drop_last)");
    else if (scfg->batch_mix)
        rc = mix_open(svc, scfg->batch_mix, lcfg->seed, err);
    if (rc == 0) rc = publish_header(svc, lcfg, scfg, err);
    if (rc != 0) {
        sp_service_destroy(svc);
        return rc;
    }
    atomic_store_explicit(&svc->h->svc_running, 1, memory_order_release);
    *out = svc;
    return SP_OK;
}

const char *sp_service_note(const sp_service *svc) { return svc->note; }
sp_loader *sp_service_loader(sp_service *svc) { return svc->ld; }
sp_cache *sp_service_cache(sp_service *svc) { return sp_pool_cache(svc->pool); }

static void wake_clients(sp__ring_hdr *h) {
    atomic_fetch_add(&h->pub_wake, 1);
    if (atomic_load(&h->pub_sleepers)) sp__futex_wake(&h->pub_wake, 1 << 30);
}

void sp_service_destroy(sp_service *svc) {
    if (!svc) return;
    if (svc->h) {
        atomic_store(&svc->h->svc_running, 0);
        atomic_store(&svc->h->svc_end, 1);
        wake_clients(svc->h);
        for (uint32_t r = 0; r < SP__RING_MAX_RANKS; r++) {
            atomic_fetch_add(&svc->h->ranks[r].wake, 1);
            sp__futex_wake(&svc->h->ranks[r].wake, 1 << 30);
        }
    }
    sp__pool_destroy(svc->pool);   /* kills the workers, unlinks the region */
    free(svc->scratch);
    free(svc->lab);
    free(svc);
}

/* ---- the loop --------------------------------------------------------------------- */

static void fail_stream(sp_service *svc, int code, const char *msg) {
    sp__ring_hdr *h = svc->h;
    svc->failed = code;
    sp_error_set(&svc->fail_err, code, "%s", msg);
    snprintf(h->svc_err_msg, sizeof h->svc_err_msg, "%s", msg);
    atomic_store(&h->svc_err_code, code);
    atomic_store(&h->svc_end, 1);
    svc->ended = 1;
    wake_clients(h);
}

/* Attach requests and dead clients. */
static int tend_ranks(sp_service *svc, uint64_t now) {
    sp__ring_hdr *h = svc->h;
    int progress = 0, check = now - svc->last_live_ns >= LIVENESS_NS;
    if (check) svc->last_live_ns = now;
    for (uint32_t r = 0; r < svc->nranks; r++) {
        sp__rank_rec *rec = &h->ranks[r];
        uint32_t s = atomic_load(&rec->state);
        if (s == SP__RANK_ATTACHING) {
            int pid = atomic_load(&rec->pid);
            if (pid > 0) {
                uint64_t rel = atomic_load(&rec->released);
                uint64_t first = rel > svc->recycled ? rel : svc->recycled;
                atomic_store(&rec->first, first);
                atomic_store(&rec->cursor, first);
                atomic_store(&rec->released, first);
                atomic_fetch_add(&rec->attaches, 1);
                svc->attaching_since[r] = 0;
                atomic_store(&rec->state, SP__RANK_ATTACHED);
                atomic_fetch_add(&rec->wake, 1);
                sp__futex_wake(&rec->wake, 1 << 30);
                progress = 1;
            } else if (!svc->attaching_since[r]) {
                svc->attaching_since[r] = now;
            } else if (now - svc->attaching_since[r] > ATTACH_STALL_NS) {
                uint32_t a = SP__RANK_ATTACHING;   /* a client died mid-attach */
                if (atomic_compare_exchange_strong(&rec->state, &a, SP__RANK_GONE)) progress = 1;
                svc->attaching_since[r] = 0;
            }
        } else if (s == SP__RANK_ATTACHED && check) {
            int pid = atomic_load(&rec->pid);
            if (!sp__proc_alive(pid, atomic_load(&rec->pid_start))) {
                uint32_t a = SP__RANK_ATTACHED;
                if (atomic_compare_exchange_strong(&rec->state, &a, SP__RANK_GONE)) {
                    atomic_store(&rec->pid, 0);
                    atomic_fetch_add(&rec->deaths, 1);
                    atomic_fetch_add(&h->client_deaths, 1);
                    progress = 1;
                }
            }
        }
    }
    return progress;
}

static int can_recycle(const sp_service *svc, uint64_t q) {
    for (uint32_t r = 0; r < svc->nranks; r++) {
        sp__rank_rec *rec = &svc->h->ranks[r];
        uint32_t s = atomic_load(&rec->state);
        if (s == SP__RANK_NEVER || s == SP__RANK_ATTACHING) return 0;   /* its first batch
                                                                            is being decided */
        if (s == SP__RANK_ATTACHED &&
            atomic_load_explicit(&rec->released, memory_order_acquire) <= q)
            return 0;
    }
    return 1;
}

/* Finalise each served rank's slice of slot s in place (the slot holds the
 * span of the served ranks, spread first so that local rank r's slice
 * starts at r * rank_cap, where its client reads it, with the count the
 * rank's own loader would give); 0 or the first error. */
static int finalize_slices(sp_service *svc, uint32_t s, uint64_t *samples, sp_error *err) {
    sp__ring_hdr *h = svc->h;
    sp__slot_hdr *sh = sp__slot(h, s);
    sp__rank_slice *tab = sp__slot_ranks(h, s);
    size_t sb = (size_t)h->sample_bytes;
    sp__spread_slices(svc->ld, sh->index, svc->nranks, svc->rank_cap, sp__slot_images(h, s),
                      sb, sp__slot_labels(h, s), sp__slot_indices(h, s), sp__slot_items(h, s));
    for (uint32_t r = 0; r < svc->nranks; r++) {
        uint64_t pos0 = (uint64_t)r * svc->rank_cap;
        uint32_t off, count;   /* spread above: the slice now starts at pos0 */
        sp__loader_span_part(svc->ld, sh->index, svc->nranks, r, &off, &count);
        (void)off;
        sp_batch v;
        memset(&v, 0, sizeof v);
        v.capacity = svc->rank_cap;
        v.count = count;
        v.images = sp__slot_images(h, s) + pos0 * sb;
        v.labels = sp__slot_labels(h, s) + pos0;
        v.indices = sp__slot_indices(h, s) + pos0;
        v.skipped = sp__slot_skipped(h, s) + pos0;
        v.substituted = sp__slot_subst(h, s) + 2 * pos0;
        v.flags = SP_BATCH_VIEW;
        int rc = sp__batch_finalize(svc->ld, &v, sp__slot_items(h, s) + pos0, err);
        if (rc != 0) return rc;
        tab[r].count = v.count;
        tab[r].nskipped = v.nskipped;
        tab[r].nsubst = v.nsubstituted;
        tab[r].pad = 0;
        *samples += v.count;
    }
    return SP_OK;
}

/* The batch mix of slot s (service.h: batch_mix): each served rank's
 * finalised slice mixed in place by the draw of the slot's global batch
 * (as `digest --rank r --world K --batch-mix` mixes that rank's batch),
 * its soft targets at the slice's positions of the slot's off_mix. */
static int mix_slices(sp_service *svc, uint32_t s, sp_error *err) {
    sp__ring_hdr *h = svc->h;
    const sp__slot_hdr *sh = sp__slot(h, s);
    const sp__rank_slice *tab = sp__slot_ranks(h, s);
    uint8_t *base = (uint8_t *)sp__slot(h, s);
    sp_batch_mix m;
    int rc = sp_batch_mix_spec_draw(&svc->mix, svc->seed, sh->epoch, sh->index, svc->hh,
                                    svc->ww, &m, err);
    for (uint32_t r = 0; rc == 0 && r < svc->nranks; r++) {
        uint64_t pos0 = (uint64_t)r * svc->rank_cap;
        int n = (int)tab[r].count;
        if (n == 0) continue;
        const int32_t *labels = sp__slot_labels(h, s) + pos0;
        for (int i = 0; i < n; i++) svc->lab[i] = labels[i];
        float *x = (float *)(sp__slot_images(h, s) + pos0 * h->sample_bytes);
        float *t = (float *)(base + h->off_mix) + pos0 * (uint64_t)svc->k;
        rc = sp_batch_mix_f32(&m, x, n, svc->c, svc->hh, svc->ww, svc->lab, svc->k, t,
                              svc->scratch, err);
    }
    return rc;
}

/* One turn; *done when served. @return 1 if anything moved, 0 if not, < 0 error. */
static int step(sp_service *svc, int *done, sp_error *err) {
    sp__ring_hdr *h = svc->h;
    uint64_t now = sp__now_ns();
    int progress = tend_ranks(svc, now);
    while (svc->recycled < svc->published && can_recycle(svc, svc->recycled)) {
        int rc = sp__pool_release_oldest(svc->pool, err);
        if (rc != 0) return rc;
        svc->recycled++;
        atomic_store(&h->pool_released, svc->recycled);
        progress = 1;
    }
    while (!svc->ended && svc->published - svc->recycled < svc->R) {
        uint32_t s;
        uint64_t q;
        sp_error e;
        sp_error_clear(&e);
        int rc = sp__pool_poll(svc->pool, &s, &q, &e);
        if (rc == SP__POOL_AGAIN) break;
        if (rc == SP_END) {
            svc->ended = 1;
            atomic_store(&h->svc_end, 1);
            wake_clients(h);
            break;
        }
        if (rc != 0) {   /* workers keep dying: the stream cannot go on */
            fail_stream(svc, rc, e.msg);
            if (err) *err = e;
            return rc;
        }
        uint64_t samples = 0, tp = sp__trace_t0();
        rc = finalize_slices(svc, s, &samples, &e);
        if (rc == 0 && svc->mix.n) rc = mix_slices(svc, s, &e);
        if (rc != 0) {   /* on-error fail: serve the error after batch q - 1 */
            fail_stream(svc, rc, e.msg);
            progress = 1;
            break;
        }
        sp__slot_hdr *sh = sp__slot(h, s);
        atomic_store(&sh->pub_ns, sp__now_ns());
        svc->published = q + 1;
        atomic_fetch_add(&h->samples_published, samples);
        atomic_store(&h->last_pub_ns, sp__now_ns());
        atomic_store_explicit(&h->published, svc->published, memory_order_release);
        if (svc->published == svc->total) {
            svc->ended = 1;
            atomic_store(&h->svc_end, 1);
        }
        wake_clients(h);
        if (tp) sp__trace_record(SP_TRACE_PUBLISH, tp, sh->epoch, sh->index, SP__TRACE_NONE32,
                                 SP__TRACE_NONE64);
        progress = 1;
    }
    if (svc->ended && svc->recycled == svc->published) *done = 1;
    return progress;
}

int sp_service_run(sp_service *svc, volatile sig_atomic_t *stop, sp_error *err) {
    sp__ring_hdr *h = svc->h;
    if (svc->total == 0) svc->ended = 1;
    for (;;) {
        if (stop && *stop) return SP_STOPPED;
        uint32_t wv = atomic_load(&h->cwake);
        int done = 0;
        int rc = step(svc, &done, err);
        if (rc < 0) return rc;
        if (done) {
            if (svc->failed) {
                if (err) *err = svc->fail_err;
                return svc->failed;
            }
            return SP_OK;
        }
        if (rc > 0) continue;
        uint64_t t0 = sp__now_ns();   /* a short spin, then sleep */
        while (atomic_load(&h->cwake) == wv && sp__now_ns() - t0 < SPIN_NS) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (atomic_load(&h->cwake) != wv) continue;
        atomic_store(&h->csleep, 1);
        uint64_t tw = sp__trace_t0();   /* waiting for a batch (or a client's release) */
        if (atomic_load(&h->cwake) == wv && !(stop && *stop))
            sp__futex_wait(&h->cwake, wv, SLEEP_NS);
        atomic_store(&h->csleep, 0);
        if (tw) sp__trace_record(SP_TRACE_NEXT, tw, SP__TRACE_NONE32, SP__TRACE_NONE64,
                                 SP__TRACE_NONE32, SP__TRACE_NONE64);
    }
}

/* pool.c - the worker pool (include/seedpipe/pool.h): forked workers filling a
 * shared-memory ring of batch slots, a consumer taking them in order, and
 * recovery from dead workers. The pool's epoch-cache protocol is in
 * pool_cache.c, how a death is charged in pool_death.c and the batch
 * digest, hashed as the batch is computed (by the consumer while it waits,
 * or by the workers), in pool_digest.c (all called from here, never
 * calling back); what they share (the pool's struct, the slot
 * helpers) is in pool_shared.h.
 *
 * HOW IT WORKS
 *
 * The stream is numbered: batch q = 0, 1, ..., total-1 is batch
 * (start + q) mod nb of epoch (start + q) / nb, where start = epoch * nb +
 * batch of the resume state. Slot q mod R holds batch q. The work unit is
 * one position p of one batch: item t = q * cap + p (cap = B / world, the
 * loader's slice; the service's span of m ranks: m * B / world).
 *
 * Claiming and Writing: the workers' side, pool_worker.c's HOW IT WORKS
 * (a shared counter hands out positions, a CAS on each position's state
 * word decides who computes it, the slot's tagged `done` counter wakes the
 * consumer).
 *
 * Taking. sp__pool_next(q) waits until the `done` counter says count, or,
 * when woken by its 10 ms timeout, until a scan of the state words finds
 * every position DONE(q) (the scan is the ground truth: a worker killed
 * between its DONE store and its counter bump leaves the counter short
 * forever). It then assembles the batch in place with sp__batch_finalize()
 * (the loader's: first FAILED position's error, skipped positions compacted
 * out, substitutes listed) and returns a view into the slot. The consumer
 * releases batches in order; releasing batch r initialises slot r mod R for
 * batch r + R (states FREE(r + R), counters) and only then publishes
 * released = r + 1 (release order), so a worker that sees the new value
 * sees an initialised slot.
 *
 * Start-up. The workers are forked as soon as the ring is mapped and its
 * first R slots activated; the ring's pages (the kernel zeroes them) are
 * reserved afterwards, by the consumer inside sp__pool_create(), from the
 * ring's end backwards while the workers start on slot 0 (a ring the
 * memory cannot hold fails the creation with SP_ENOMEM, the workers
 * reaped). So the first batch is computed while the rest of the ring is
 * prepared, not after (docs/tracing.md: "ring").
 *
 * Recovery. On every timeout (and while waiting) the consumer polls its
 * workers with waitpid(pid, WNOHANG). When worker w is gone (reaped, so it
 * can no longer write), the consumer walks the live slots and turns every
 * CLAIMED(q, w) back into FREE(q), noting the death in the position's
 * crash word (the sample bytes it may have half-written are simply
 * overwritten by the redo). It bumps scan_gen, forks a replacement with
 * the same id w and wakes everyone. Items are also orphaned when a worker dies between its
 * fetch_add and its CAS (FREE, but the counter has passed them); so every
 * worker, after seeing scan_gen change, and, once any death has happened,
 * whenever `released` moves (a slot becomes live), scans the live slots and
 * claims any FREE position by the same CAS. Nothing is lost (every FREE
 * position in a live slot is eventually claimed by a scan or the counter),
 * nothing is duplicated (one CAS wins FREE -> CLAIMED, and only DONE
 * positions enter a batch), and the bytes are those of any other run,
 * since they depend on (q, p) only.
 *
 * Deaths. Whether a death is the sample's fault is decided from how the
 * worker ended (waitpid's status), never from timing (pool_death.c):
 *  - a crash: a signal the worker raises on itself by faulting or aborting
 *    (SIGSEGV, SIGILL, SIGFPE, SIGABRT; its handler tells it from one sent
 *    by another process: pool_death.c), or an exit (workers never exit
 *    while the pool runs, so an exit is a library's exit() or a
 *    sanitizer's report). It is charged to the position the worker held
 *    (crash word bits 0-7). A position charged twice (SP__CRASH_BUDGET) is
 *    not tried a third time: it fails with "worker process died 2 times
 *    while computing it (last: signal 11)", deterministically for a
 *    deterministic crash, and cfg.on_error applies.
 *  - SIGBUS: a crash too while the ring's memory object still has its size
 *    (sp__region_intact(): the creator keeps its descriptor); if it shrank
 *    (truncated under us: every page past the end faults) the stream stops
 *    with SP_EIO, since a retry would only die again.
 *  - anything else: SIGKILL (the OOM killer, an operator, raise(SIGKILL)
 *    alike), SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGTRAP (a debugger),
 *    SIGXCPU, ..., a crash signal another process sent (kill -ABRT): signals
 *    from outside. Never charged (crash word bits 8-15 count them): the
 *    position is redone as often as it takes, so a kill never changes the
 *    stream. Each such death, and each crash of a worker that held no
 *    position, counts against the run's respawn bound
 *    (SP_POOL_RESPAWN_BOUND(W) = 100 + 16 W, pool.h); the death past it
 *    fails the stream with SP_ELIMIT "pool: respawn bound reached", and
 *    nothing is substituted. Charged crashes need no bound of their own:
 *    each position of the stream can take at most two.
 * The service (service.c) takes its batches through the same consumer
 * code (sp__pool_poll()), so the same rules hold there.
 *
 * Cache (pool.h, cache.h). With a cache directory a batch can come from
 * its epoch's cache entry (one worker reads the file into the slot) or go
 * into it (the worker completing the batch writes the file); that protocol,
 * the consumer's part included, is pool_cache.c's (its HOW IT WORKS).
 * pool.c calls into it at four points of a batch's life: activation
 * (sp__pool_cache_activate), a worker's item (sp__pool_cache_read /
 * sp__pool_cache_write), a dead worker (sp__pool_cache_worker_died) and the
 * take (sp__pool_cache_settled, sp__pool_cache_take).
 *
 * The service (service.c) is a consumer too: it takes batches with
 * sp__pool_poll() (the same take, without the wait and without the
 * finalising, which it does per rank slice), from a pool created for it
 * (sp__pool_create_ex(), owner SP__POOL_SERVICE: pool_internal.h says what
 * the owner decides) whose region is named and carries a per-slot rank
 * table, and it sleeps on the same `cwake` word, which its clients also bump. Its loader
 * computes only the positions of the ranks it serves: one rank of a
 * smaller world when they line up (ranks 2-3 of world 4 are rank 1 of
 * world 2), else a span of consecutive ranks (sp__loader_set_span()).
 *
 * Sync primitive. Futexes on 32-bit words of the shared mapping plus C11
 * atomics: no process-shared mutex, so a worker killed at any instruction
 * holds no lock. A hand-off costs one FUTEX_WAKE from the last worker and
 * one wake-up of the consumer (bench/pool_scaling.sh measures p50/p99).
 *
 * LIMITATIONS
 * - A worker reaped by someone else (waitpid(-1), SIGCHLD ignored) counts as
 *   a kill; a crash signal sent before its handler is installed, as a crash.
 * - Workers are forked from the consumer: they share its loader (dataset
 *   index, parsed pipeline) copy-on-write; a consumer with other threads
 *   must not hold locks the workers need (seedpipe's loader holds none
 *   between calls).
 * - A crash that only happens when a worker computes two particular
 *   samples in a row is charged to the second.
 * - The per-worker rng mode counter restarts at 0 in a respawned worker
 *   (as PyTorch's would); that mode is a demonstration only.
 */
#include "pool/pool_shared.h"
#include "common/trace_internal.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "pool/pool_internal.h"

#define CONSUMER_TIMEOUT_NS 10000000ull   /* liveness poll while waiting */
#define SPIN_NS 20000ull                  /* consumer spin before sleeping */

/* ---- consumer side -------------------------------------------------------- */

/* Make slot q mod R batch q's: its positions FREE(q), its counters reset,
 * its cache record set; the slot's q is stored last (release order). */
static void activate(sp_pool *pool, uint64_t q) {
    sp__ring_hdr *h = pool->h;
    uint32_t s = (uint32_t)(q % pool->R);
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    sp__slot_hdr *sh = sp__slot(h, s);
    _Atomic uint64_t *st = sp__slot_state(h, s);
    _Atomic uint32_t *cr = sp__slot_crash(h, s);
    for (uint32_t p = 0; p < pool->cap; p++) {
        atomic_store_explicit(&st[p], sp__st(q, SP__ST_FREE, 0), memory_order_relaxed);
        atomic_store_explicit(&cr[p], 0, memory_order_relaxed);
    }
    sh->count = g.count;
    sh->epoch = g.epoch;
    sh->index = g.index;
    atomic_store(&sh->ready_ns, 0);
    atomic_store(&sh->done, (q & ((1ull << 40) - 1)) << SP__POOL_DONE_SHIFT);
    if (pool->cc) sp__pool_cache_activate(pool, s, &g);
    atomic_store_explicit(&sh->q, q, memory_order_release);
}

static void wake_workers(sp_pool *pool) { sp__pool_wake_workers(pool->h); }

/* Put worker w's claimed positions of the live slots back (FREE), noting
 * the death in each one's crash word: charged to it (a crash) or not.
 * @return the number of positions charged. */
static uint32_t put_back(sp_pool *pool, uint32_t w, int crash, uint32_t cause) {
    sp__ring_hdr *h = pool->h;
    uint32_t charged = 0;
    for (uint64_t q = pool->released; q < pool->released + pool->R && q < pool->total; q++) {
        uint32_t s = (uint32_t)(q % pool->R);
        _Atomic uint64_t *st = sp__slot_state(h, s);
        _Atomic uint32_t *cr = sp__slot_crash(h, s);
        for (uint32_t p = 0; p < pool->cap; p++) {
            uint64_t v = sp__st(q, SP__ST_CLAIMED, w);
            if (atomic_load(&st[p]) != v) continue;
            uint32_t c = atomic_load(&cr[p]), n = sp__crash_count(c), k = sp__crash_kills(c);
            if (crash) {
                c = (n < 255 ? n + 1 : n) | (k << 8) | cause;
                charged++;
            } else {
                c = (c & ~0xff00u) | ((k < 255 ? k + 1 : k) << 8);
            }
            atomic_store(&cr[p], c);
            if (atomic_compare_exchange_strong(&st[p], &v, sp__st(q, SP__ST_FREE, 0)))
                pool->redone++;
        }
        /* A worker that died writing a batch file: the batch is in the
         * slot (every position DONE), so the consumer writes it again. */
        if (pool->cc) sp__pool_cache_worker_died(pool, s, w);
    }
    sp__pool_digest_worker_died(pool, w);
    return charged;
}

/* Reap dead workers, put their positions back, respawn. A death charged
 * to no sample counts against the run's respawn bound. */
static int check_workers(sp_pool *pool, sp_error *err) {
    sp__ring_hdr *h = pool->h;
    for (int w = 0; w < pool->nworkers; w++) {
        int status = 0;
        if (pool->pids[w] <= 0) continue;
        pid_t r = waitpid(pool->pids[w], &status, WNOHANG);
        if (r == 0) continue;
        if (r < 0 && errno == EINTR) {
            w--;
            continue;
        }
        /* Gone (or reaped by someone else: treat it as gone). */
        uint32_t cause;
        int kind = sp__pool_death_kind(pool, (uint32_t)w, r, status, &cause);
        unsigned sig = (cause & SP__CRASH_EXITED) ? 0 : (cause >> 16) & 0xff;
        pool->pids[w] = 0;
        atomic_store(&h->workers[w].pid, 0);
        atomic_store(&h->workers[w].busy, 0);
        pool->deaths++;
        atomic_fetch_add(&h->deaths, 1);
        if (kind == SP__DEATH_RING) {
            /* Not the sample's fault: the ring's memory is gone (it is
             * reserved at creation, so someone truncated it). Retrying
             * would loop; stop with the reason. */
            wake_workers(pool);
            return sp_error_set(err, SP_EIO,
                                "pool: worker %d died of SIGBUS (bus error): the shared memory "
                                "of the ring is gone or could not be backed; not retried", w);
        }
        uint32_t charged = put_back(pool, (uint32_t)w, kind == SP__DEATH_CRASH, cause);
        atomic_fetch_add(&h->scan_gen, 1);
        if (!charged && ++pool->uncharged > pool->respawn_limit) {
            wake_workers(pool);
            return sp_error_set(err, SP_ELIMIT,
                                "pool: respawn bound reached: worker %d %s %u%s; %llu worker "
                                "deaths charged to no sample (kills from outside: the OOM "
                                "killer, an operator) exceed this run's bound of %llu; the "
                                "stream stops here, nothing substituted", w,
                                (cause & SP__CRASH_EXITED) ? "exited with status" : "was killed by signal",
                                (cause >> 16) & 0xff, sp__pool_sig_name(sig),
                                (unsigned long long)pool->uncharged,
                                (unsigned long long)pool->respawn_limit);
        }
        int rc = sp__pool_spawn(pool, (uint32_t)w, err);
        wake_workers(pool);
        if (rc != 0) return rc;
    }
    return SP_OK;
}

static int fail_sticky(sp_pool *pool, int rc, const sp_error *e, sp_error *err) {
    pool->sticky = rc;
    pool->sticky_err = *e;
    if (err) *err = *e;
    return rc;
}

/* A liveness poll (check_workers) when the last one is CONSUMER_TIMEOUT_NS
 * old. @return 0 (*polled: whether it ran) or the sticky error. */
static int poll_due(sp_pool *pool, int *polled, sp_error *err) {
    uint64_t now = sp__now_ns();
    *polled = now - pool->last_check_ns >= CONSUMER_TIMEOUT_NS;
    if (!*polled) return SP_OK;
    pool->last_check_ns = now;
    sp_error e;
    sp_error_clear(&e);
    int rc = check_workers(pool, &e);
    return rc != 0 ? fail_sticky(pool, rc, &e, err) : SP_OK;
}

static int slot_complete(const sp_pool *pool, uint64_t q, uint32_t count) {
    _Atomic uint64_t *st = sp__slot_state(pool->h, (uint32_t)(q % pool->R));
    for (uint32_t p = 0; p < count; p++) {
        uint64_t v = atomic_load_explicit(&st[p], memory_order_acquire);
        if (sp__st_kind(v) != SP__ST_DONE || sp__st_q(v) != q) return 0;
    }
    return 1;
}

static uint64_t done_want(const sp_pool *pool, uint64_t q) {
    return ((q & ((1ull << 40) - 1)) << SP__POOL_DONE_SHIFT) | sp__slot(pool->h, (uint32_t)(q % pool->R))->count;
}

/* Sleep on cwake while it still reads wv (at most timeout_ns). */
static void consumer_sleep(sp__ring_hdr *h, uint32_t wv, uint64_t timeout_ns) {
    atomic_store(&h->csleep, 1);
    if (atomic_load(&h->cwake) == wv) sp__futex_wait(&h->cwake, wv, timeout_ns);
    atomic_store(&h->csleep, 0);
}

int sp__pool_poll(sp_pool *pool, uint32_t *slot, uint64_t *qout, sp_error *err) {
    if (pool->sticky) {
        if (err) *err = pool->sticky_err;
        return pool->sticky;
    }
    if (pool->taken >= pool->total) {
        /* Count any death that the stream did not need to wait for. */
        sp_error e;
        sp_error_clear(&e);
        int rc = check_workers(pool, &e);
        if (rc != 0) return fail_sticky(pool, rc, &e, err);
        return SP_END;
    }
    if (pool->taken - pool->released >= pool->R)
        return sp_error_set(err, SP_EINVAL, "pool: all %u slots are held; release one first",
                            pool->R);
    uint64_t q = pool->taken;
    uint32_t s = (uint32_t)(q % pool->R);
    sp__ring_hdr *h = pool->h;
    sp__slot_hdr *sh = sp__slot(h, s);
    if (atomic_load_explicit(&sh->done, memory_order_acquire) != done_want(pool, q)) {
        int polled, rc = poll_due(pool, &polled, err);
        if (rc != 0) return rc;
        if (!polled || !slot_complete(pool, q, sh->count)) return SP__POOL_AGAIN;
    }
    if (pool->cc && !sp__pool_cache_settled(pool, s)) {
        int polled, rc = poll_due(pool, &polled, err);   /* a worker writes it: watch it */
        return rc != 0 ? rc : SP__POOL_AGAIN;
    }
    atomic_thread_fence(memory_order_acquire);
    if (pool->cc) sp__pool_cache_take(pool, q, s);
    pool->last_ready_ns = atomic_load(&sh->ready_ns);
    pool->last_taken_ns = sp__now_ns();
    pool->taken++;
    *slot = s;
    *qout = q;
    return SP_OK;
}

int sp__pool_next(sp_pool *pool, sp_batch *view, sp_error *err) {
    sp__ring_hdr *h = pool->h;
    uint32_t s = 0;
    uint64_t q = 0;
    int rc, spun = 0;
    for (;;) {
        uint32_t wv = atomic_load(&h->cwake);
        rc = sp__pool_poll(pool, &s, &q, err);
        if (rc != SP__POOL_AGAIN) break;
        if (!spun) {   /* a short spin first: a batch that is nearly done is
                          taken without a sleep/wake-up round trip */
            spun = 1;
            sp__slot_hdr *sh = sp__slot(h, (uint32_t)(pool->taken % pool->R));
            uint64_t want = done_want(pool, pool->taken), t0 = sp__now_ns();
            while (atomic_load_explicit(&sh->done, memory_order_acquire) != want &&
                   sp__now_ns() - t0 < SPIN_NS) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            }
            continue;
        }
        /* Hash what is done of the batch meanwhile (pool_digest.c). */
        if (pool->pd && (sp__pool_digest_advance(pool) || sp__pool_digest_want(pool))) continue;
        consumer_sleep(h, wv, CONSUMER_TIMEOUT_NS);
    }
    if (rc != 0) return rc;
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    *view = sp__pool_slot_view(pool, s, &g);
    sp_error e;
    sp_error_clear(&e);
    if (!pool->cc || !sp__pool_cache_finish(pool, s, view))
        rc = sp__batch_finalize(pool->ld, view, sp__slot_items(h, s), &e);
    if (rc != 0) {
        pool->taken--;   /* the state names the failing batch */
        return fail_sticky(pool, rc, &e, err);
    }
    return SP_OK;
}

/* The oldest batch taken goes back: its slot is the next batch's. (The
 * service recycles this way, once every rank is past it.) */
int sp__pool_release_oldest(sp_pool *pool, sp_error *err) {
    if (pool->released >= pool->taken)
        return sp_error_set(err, SP_EINVAL, "pool: no batch is held");
    uint64_t next = pool->released + pool->R;
    if (next < pool->total) activate(pool, next);
    pool->released++;
    atomic_store_explicit(&pool->h->released, pool->released, memory_order_release);
    wake_workers(pool);
    /* A liveness poll at most every 10 ms even when batches are always
     * ready (a dead worker's claims would stall a later batch). */
    int polled;
    return poll_due(pool, &polled, err);
}

/* Any held view, in any order: its slot is marked, and the ring moves past
 * the oldest batches while they are back. */
int sp__pool_release(sp_pool *pool, sp_batch *view, sp_error *err) {
    if (!pool || !view) return sp_error_set(err, SP_EINVAL, "pool: %s is NULL", pool ? "view" : "pool");
    uint64_t abs = (uint64_t)view->epoch * pool->nb + view->index;
    uint64_t q = abs - pool->start_abs;   /* wraps (huge) below the start */
    uint32_t s = (uint32_t)(q % pool->R);
    if (abs < pool->start_abs || q < pool->released || q >= pool->taken || pool->given_back[s] ||
        view->images != sp__slot_images(pool->h, s))
        return sp_error_set(err, SP_EINVAL, "pool: epoch %u batch %llu is not held (given back "
                            "already, or not a view of this pool)", view->epoch,
                            (unsigned long long)view->index);
    pool->given_back[s] = 1;
    memset(view, 0, sizeof *view);
    while (pool->released < pool->taken && pool->given_back[pool->released % pool->R]) {
        pool->given_back[pool->released % pool->R] = 0;
        int rc = sp__pool_release_oldest(pool, err);
        if (rc != 0) return rc;
    }
    return SP_OK;
}

void sp__pool_state(const sp_pool *pool, sp_loader_state *st) {
    uint64_t abs = pool->start_abs + pool->taken;
    sp_loader_state_at(pool->ld, (uint32_t)(abs / pool->nb), abs % pool->nb, st);
}

sp_loader *sp__pool_loader(sp_pool *pool) { return pool->ld; }
sp_cache *sp_pool_cache(sp_pool *pool) { return sp__pool_cache_of(pool->cc); }

int sp_pool_worker_pid(const sp_pool *pool, int w) {
    return (w >= 0 && w < pool->nworkers) ? (int)pool->pids[w] : 0;
}

void sp__pool_stats_get(const sp_pool *pool, sp_pool_stats *st) {
    memset(st, 0, sizeof *st);
    st->workers = pool->nworkers;
    st->ring_slots = (int)pool->R;
    st->batches_taken = pool->taken;
    st->batches_total = pool->total;
    st->worker_deaths = pool->deaths;
    st->positions_redone = pool->redone;
    st->last_ready_ns = pool->last_ready_ns;
    st->last_taken_ns = pool->last_taken_ns;
}

sp__ring_hdr *sp__pool_hdr(sp_pool *pool) { return pool->h; }
uint64_t sp__pool_total(const sp_pool *pool) { return pool->total; }

/* Fork the workers, then reserve the pool's own ring while they compute
 * ("Start-up"; a service's named region is reserved already: THE OWNER,
 * pool_internal.h). */
static int start_workers(sp_pool *pool, sp_error *err) {
    uint64_t t0 = sp__trace_t0();
    for (int w = 0; w < pool->nworkers; w++) {
        int rc = sp__pool_spawn(pool, (uint32_t)w, err);
        if (rc != 0) return rc;
    }
    sp__trace_end(SP_TRACE_SPAWN, t0);
    if (pool->owner != SP__POOL_TRAINER) return SP_OK;
    t0 = sp__trace_t0();
    int rc = sp__region_reserve(&pool->region, err);
    sp__trace_end(SP_TRACE_RING, t0);
    return rc;
}

int sp__pool_create(const sp_loader_config *lcfg, const sp_pool_config *pcfg, sp_pool **out,
                    sp_error *err) {
    return sp__pool_create_ex(lcfg, pcfg, NULL, out, err);
}

/* The arguments, each refusal named; *R the ring's slots. */
static int check_args(const sp_loader_config *lcfg, const sp_pool_config *pcfg,
                      const sp__pool_setup *su, int *R, sp_error *err) {
    if (!lcfg || !pcfg) return sp_error_set(err, SP_EINVAL, "pool: missing config");
    if (su->owner == SP__POOL_SERVICE ? !su->region_name || !su->region_name[0]
                                      : su->owner != SP__POOL_TRAINER || su->region_name)
        return sp_error_set(err, SP_EINVAL, "pool: owner %d with %s region name", (int)su->owner,
                            su->region_name ? "a" : "no");
    if (pcfg->workers < 1 || pcfg->workers > SP_POOL_MAX_WORKERS)
        return sp_error_set(err, SP_EINVAL, "pool: %d workers (1..%d; 0 is the in-process loader)",
                            pcfg->workers, SP_POOL_MAX_WORKERS);
    *R = pcfg->ring_slots ? pcfg->ring_slots : (pcfg->workers * 2 > 2 ? pcfg->workers * 2 : 2);
    if (*R < 1 || *R > SP__RING_MAX_SLOTS)
        return sp_error_set(err, SP_EINVAL, "pool: %d ring slots (1..%d)", *R, SP__RING_MAX_SLOTS);
    if (pcfg->epochs == 0) return sp_error_set(err, SP_EINVAL, "pool: epochs must be >= 1");
    return SP_OK;
}

/* The loader's span and resume state, the stream's geometry. */
static int stream_geometry(sp_pool *pool, const sp_pool_config *pcfg, uint32_t span,
                           sp_error *err) {
    int rc;
    if (span > 1 && (rc = sp__loader_set_span(pool->ld, span, err)) != 0) return rc;
    if (span > 1 && pcfg->cache_dir)
        /* A cache entry is one rank's stream (its key names rank and world):
         * a span's batches are no rank's. */
        return sp_error_set(err, SP_EUNSUPP, "pool: the epoch cache holds one rank's stream; a "
                            "span of %u ranks is not one", span);
    pool->nb = sp__loader_batches_per_epoch(pool->ld);
    pool->cap = sp__loader_capacity(pool->ld);
    if (pcfg->resume) {
        if ((rc = sp_loader_resume(pool->ld, pcfg->resume, err)) != 0) return rc;
        pool->start_abs = (uint64_t)pcfg->resume->epoch * pool->nb + pcfg->resume->batch;
    }
    uint64_t end = (uint64_t)pcfg->epochs * pool->nb;
    pool->total = end > pool->start_abs ? end - pool->start_abs : 0;
    if (pool->total >= (1ull << 40))
        return sp_error_set(err, SP_ELIMIT, "pool: stream of %llu batches is too long",
                            (unsigned long long)pool->total);
    return SP_OK;
}

#ifdef SEEDPIPE_TEST_HOOKS   /* pool.h: test builds only */
static void test_hooks(sp_pool *pool) {
    const char *crash = getenv("SEEDPIPE_TEST_CRASH_SAMPLE");
    pool->crash_sample = crash && *crash ? strtoull(crash, NULL, 10) : UINT64_MAX;
    crash = getenv("SEEDPIPE_TEST_CRASH_SIGNAL");
    pool->crash_signal = crash && *crash ? atoi(crash) : SIGSEGV;
    crash = getenv("SEEDPIPE_TEST_CRASH_TIMES");
    pool->crash_times = crash && *crash ? (uint32_t)strtoul(crash, NULL, 10) : UINT32_MAX;
    crash = getenv("SEEDPIPE_TEST_CRASH_FROM");   /* pool_death.c: 1 a fault, 2 sent */
    pool->crash_from = !crash ? 0 : !strcmp(crash, "fault") ? 1 : !strcmp(crash, "outside") * 2;
}
#endif

/* Lay the ring out, create its region and write its header; activate the
 * first R slots. */
static int ring_open(sp_pool *pool, const sp__pool_setup *su, sp_error *err) {
    sp__ring_hdr hh;
    memset(&hh, 0, sizeof hh);
    hh.nslots = pool->R;
    hh.cap = pool->cap;
    hh.sample_bytes = sp__loader_sample_bytes(pool->ld);
    hh.nranks = su->nranks;
    int rc;
    if ((rc = sp__ring_mix(pool->ld, su->mix, &hh, err)) != 0 ||
        (rc = sp__ring_layout(&hh, err)) != 0 ||
        (rc = sp__region_create(&pool->region, su->region_name, hh.region_size, err)) != 0)
        return rc;
    sp__ring_hdr *h = (sp__ring_hdr *)pool->region.base;
    pool->h = h;
    /* Copy the immutable part; the atomics start at zero (fresh mapping). */
    memcpy(h, &hh, offsetof(sp__ring_hdr, hint));
    h->magic = SP__RING_MAGIC;
    h->version = SP__RING_VERSION;
    sp_digest fp = sp__loader_fingerprint(pool->ld);
    h->fp_hi = fp.hi;
    h->fp_lo = fp.lo;
    h->owner_pid = (int32_t)getpid();
    h->nworkers = (uint32_t)pool->nworkers;
    h->start_abs = pool->start_abs;
    h->total = pool->total;
    h->batches_per_epoch = pool->nb;
    for (uint64_t q = 0; q < pool->R && q < pool->total; q++) activate(pool, q);
    atomic_store(&h->released, 0);
    return SP_OK;
}

int sp__pool_create_ex(const sp_loader_config *lcfg, const sp_pool_config *pcfg,
                       const sp__pool_setup *setup, sp_pool **out, sp_error *err) {
    *out = NULL;
    sp__pool_setup su = {SP__POOL_TRAINER, NULL, 1, 1, NULL};
    if (setup) su = *setup;
    int R = 0, rc = check_args(lcfg, pcfg, &su, &R, err);
    if (rc != 0) return rc;
    sp_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return sp_error_set(err, SP_ENOMEM, "pool: out of memory");
    pool->owner = su.owner;
    pool->nworkers = pcfg->workers;
    pool->R = (uint32_t)R;
    if ((rc = sp_loader_create(lcfg, &pool->ld, err)) != 0) {
        free(pool);
        return rc;
    }
    if ((rc = stream_geometry(pool, pcfg, su.span, err)) != 0) goto fail;
    /* A cached batch file with failed samples is taken whole by a trainer's
     * pool, not a service's (it finalises per rank from the positions). */
    if (pcfg->cache_dir &&
        (rc = sp__pool_cache_open(pool, pcfg, pool->owner == SP__POOL_TRAINER, err)) != 0)
        goto fail;
    pool->respawn_limit = SP_POOL_RESPAWN_BOUND(pcfg->workers);
#ifdef SEEDPIPE_TEST_HOOKS
    test_hooks(pool);
#endif
    if ((rc = ring_open(pool, &su, err)) != 0) goto fail;
    pool->parent = getpid();
    /* The digest is the trainer's (its clients hash a service's slices). */
    if (pool->owner == SP__POOL_TRAINER) sp__pool_digest_open(pool);
    if ((rc = start_workers(pool, err)) != 0) goto fail;
    *out = pool;
    return SP_OK;
fail:
    sp__pool_destroy(pool);
    return rc;
}

void sp__pool_destroy(sp_pool *pool) {
    if (!pool) return;
    if (pool->h) atomic_store(&pool->h->stop, 1);
    for (int w = 0; w < pool->nworkers; w++)
        if (pool->pids[w] > 0) kill(pool->pids[w], SIGKILL);
    for (int w = 0; w < pool->nworkers; w++)
        if (pool->pids[w] > 0) {
            while (waitpid(pool->pids[w], NULL, 0) < 0 && errno == EINTR) {
            }
            pool->pids[w] = 0;
        }
    sp__region_close(&pool->region);
    sp__pool_digest_free(pool);
    sp__pool_cache_close(pool);
    sp_loader_destroy(pool->ld);
    free(pool);
}

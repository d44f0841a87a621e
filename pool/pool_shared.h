/* pool_shared.h - what the files of the worker pool share: the pool's struct
 * (with a pointer to the cache's controller, whose state is pool_cache.c's
 * own), a worker's context, the stream's geometry, small inline helpers on
 * a slot (its view as a batch, its tagged completion counter, the
 * wake-ups), and the calls the consumer (pool.c) makes into the worker
 * process (pool_worker.c), how a death is charged (pool_death.c), the
 * batch digest (pool_digest.c) and the cache protocol (pool_cache.c).
 *
 * Not a public header; included by the files of pool/ (and tests/test_pool_digest.c,
 * for its counts) only. The arrows point one way: pool.c calls the
 * sp__pool_*() functions below, pool_worker.c calls pool_cache.c,
 * pool_digest.c and pool_death.c, and none of them calls back into pool.c
 * (what both sides need is inline here). The protocols themselves are
 * described in pool.c (the consumer, recovery), pool_worker.c (claiming,
 * writing) and pool_cache.c (the cache).
 */
#ifndef SEEDPIPE_POOL_SHARED_H
#define SEEDPIPE_POOL_SHARED_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "seedpipe/pool.h"
#include "cache/cache_internal.h"
#include "loader/loader_internal.h"
#include "pool/pool_internal.h"
#include "pool/ring_internal.h"

/* A slot's `done` word: (q << SP__POOL_DONE_SHIFT) | positions done (pool.c). */
#define SP__POOL_DONE_SHIFT 24

/* A position's crash word (pool.c, "Deaths"): bits 0-7 the deaths charged
 * to it (crashes of the worker computing it: its budget), bits 8-15 the
 * other deaths while it was claimed (kills from outside: never charged),
 * bits 16-23 the last charged cause, a signal number or, with bit 24, an
 * exit status. Each count saturates at 255. */
static inline uint32_t sp__crash_count(uint32_t c) { return c & 0xff; }
static inline uint32_t sp__crash_kills(uint32_t c) { return (c >> 8) & 0xff; }
#define SP__CRASH_EXITED (1u << 24)
/* The budget: a position charged with this many crashes is not tried again. */
#define SP__CRASH_BUDGET 2

/* ---- the epoch cache ---------------------------------------------------------- */

/* Slot cache modes (sp__pool_cache_mode()), decided per epoch by the
 * consumer when a batch is activated; READ turns into NONE when the worker
 * can't use the file. */
enum { SP__SCM_NONE = 0, SP__SCM_READ = 1, SP__SCM_FILL = 2 };

/* ---- the pool ------------------------------------------------------------------ */

typedef struct sp__pool_pd sp__pool_pd;   /* pool_digest.c */
struct sp__pool_wd;                       /* pool_digest.c: the workers' hasher */

struct sp_pool {
    sp__pool_owner owner;              /* pool_internal.h: decides the cache's whole
                                        * batches, the digest, the ring's reservation */
    sp_loader *ld;
    sp__region region;
    sp__ring_hdr *h;
    int nworkers;
    uint32_t R, cap;
    uint64_t total, start_abs, nb;
    uint64_t taken, released;          /* consumer's counters */
    /* Slot s's batch (taken, not yet released) was given back out of order:
     * the ring moves past it once every older one is back (sp__pool_release). */
    uint8_t given_back[SP__RING_MAX_SLOTS];
    pid_t pids[SP_POOL_MAX_WORKERS];
    pid_t parent;
    uint64_t deaths, redone;
    uint64_t uncharged, respawn_limit; /* deaths charged to no sample, and their bound */
    uint64_t last_ready_ns, last_taken_ns;
    uint64_t last_check_ns;            /* last liveness poll */
#ifdef SEEDPIPE_TEST_HOOKS
    uint64_t crash_sample;             /* test hook, UINT64_MAX: none */
    int crash_signal;                  /* ... the signal it raises (SIGSEGV) */
    uint32_t crash_times;              /* ... while the position saw fewer deaths */
    int crash_from;                    /* ... 0 raised, 1 a fault, 2 sent by another process */
#endif
    int sticky;                        /* a stream error: returned again */
    sp_error sticky_err;
    /* The epoch cache's controller (NULL: no cache), pool_cache.c's own:
     * pool.c reaches it only through the sp__pool_cache_*() calls below. */
    struct sp__pool_cc *cc;
    sp__pool_pd *pd;                   /* the digest hashed while waiting (pool_digest.c) */
    struct sp__pool_wd *wd;            /* ... by the workers: shared records (NULL: the
                                        * consumer hashes) */
};

/* A worker process's own state (pool_worker.c). */
typedef struct sp__worker_ctx {
    sp_pool *pool;
    uint32_t w;
    sp_key key;             /* K_worker(w): per-worker rng mode, never otherwise */
    uint32_t counter;       /* per-worker mode: samples this process computed */
    uint32_t seen_scan;
    uint64_t seen_released;
    sp__cb_io io;           /* cache reads and writes */
    uint8_t mapped[SP__RING_MAX_SLOTS];   /* slot s's pages in this process's page table
                                           * (pool_worker.c, map_slot): 0 none, 1 its share, 2 all */
    uint64_t *pd_idx;       /* cap each: a batch's expected indices and labels */
    int32_t *pd_lab;        /* (pool_digest.c, the workers' hasher) */
} sp__worker_ctx;

/* ---- the stream's geometry (pure functions of q) -------------------------- */

typedef struct sp__batch_geo {
    uint32_t epoch, count;
    uint64_t index, pos0;
} sp__batch_geo;

static inline sp__batch_geo sp__pool_geo_of(const sp_pool *pool, uint64_t q) {
    sp__batch_geo g;
    uint64_t abs = pool->start_abs + q;
    g.epoch = (uint32_t)(abs / pool->nb);
    g.index = abs % pool->nb;
    sp__loader_slice(pool->ld, g.index, &g.pos0, &g.count);
    return g;
}

/* ---- a slot: view, completion counter, wake-ups ------------------------------ */

/* Wake the consumer (sleeping on cwake) if it sleeps: a bump, and a
 * FUTEX_WAKE only when csleep says someone waits (seq_cst on both sides:
 * either the sleeper sees the bump or the waker sees csleep). */
static inline void sp__pool_consumer_wake(sp__ring_hdr *h) {
    atomic_fetch_add(&h->cwake, 1);
    if (atomic_load(&h->csleep)) sp__futex_wake(&h->cwake, 1);
}

/* Wake every worker sleeping on `wake`. */
static inline void sp__pool_wake_workers(sp__ring_hdr *h) {
    atomic_fetch_add(&h->wake, 1);
    sp__futex_wake(&h->wake, 1 << 30);
}

/* The slot's arrays as a batch of `count` (capacity cap). */
static inline sp_batch sp__pool_slot_view(const sp_pool *pool, uint32_t s,
                                          const sp__batch_geo *g) {
    sp__ring_hdr *h = pool->h;
    sp_batch b;
    memset(&b, 0, sizeof b);
    b.capacity = pool->cap;
    b.count = g->count;
    b.epoch = g->epoch;
    b.index = g->index;
    b.images = sp__slot_images(h, s);
    b.labels = sp__slot_labels(h, s);
    b.indices = sp__slot_indices(h, s);
    b.skipped = sp__slot_skipped(h, s);
    b.substituted = sp__slot_subst(h, s);
    b.flags = SP_BATCH_VIEW;
    return b;
}

/* Add n to batch q's tagged completion counter; the one that completes the
 * batch stamps it and wakes the consumer. */
static inline void sp__pool_done_add(sp_pool *pool, uint64_t q, uint32_t s, uint32_t n,
                                     uint32_t count) {
    sp__ring_hdr *h = pool->h;
    sp__slot_hdr *sh = sp__slot(h, s);
    uint64_t v = atomic_load(&sh->done);
    for (;;) {
        if ((v >> SP__POOL_DONE_SHIFT) != (q & ((1ull << 40) - 1))) return;   /* stale */
        if (atomic_compare_exchange_weak(&sh->done, &v, v + n)) break;
    }
    if ((uint32_t)((v + n) & ((1u << SP__POOL_DONE_SHIFT) - 1)) == count) {
        atomic_store(&sh->ready_ns, sp__now_ns());
        sp__pool_consumer_wake(h);
    }
}

/* ---- the worker process (pool_worker.c), called by pool.c ---------------------- */

/*! sp__pool_spawn() : fork worker w (at creation, or as a dead one's
 *  replacement); the child runs the worker loop and never returns.
 *  @return 0 (pool->pids[w] and its record set) or SP_EIO (fork failed). */
int sp__pool_spawn(sp_pool *pool, uint32_t w, sp_error *err);

/* ---- deaths (pool_death.c), called by pool.c and pool_worker.c -------------- */

/* How a death is charged (pool.c's HOW IT WORKS, "Deaths"). */
enum { SP__DEATH_CRASH, SP__DEATH_OTHER, SP__DEATH_RING };
/*! sp__pool_death_kind() : classify worker w's end from waitpid's r and
 *  status, and from the crash signal its handler saw sent from another
 *  process (h->workers[w].outside, read and cleared here); *cause: the
 *  crash word's cause field (signal, or exit status | SP__CRASH_EXITED). */
int sp__pool_death_kind(const sp_pool *pool, uint32_t w, pid_t r, int status, uint32_t *cause);
/*! sp__pool_death_arm() : in worker w, before its first sample: the
 *  handler of SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that tells a
 *  signal another process sent (kill(), sigqueue(), tgkill(): si_code
 *  SI_USER, SI_QUEUE or SI_TKILL with another si_pid) from one the worker
 *  raised itself (a fault, abort(), raise()), records the former in its
 *  record's `outside` word, and dies of the signal by its default action
 *  either way. @return 0, or -1 when a handler could not be installed
 *  (the worker then runs without: every such death is charged). */
int sp__pool_death_arm(sp__ring_hdr *h, uint32_t w);
#ifdef SEEDPIPE_TEST_HOOKS
/*! sp__pool_test_crash() : the crash hook's death by sig (pool.h,
 *  SEEDPIPE_TEST_CRASH_FROM): from 0 raised, 1 a real fault, 2 sent by
 *  another process. Never returns while sig kills. */
void sp__pool_test_crash(int sig, int from);
#endif
/*! sp__pool_sig_name() : " (SIGKILL)" and the like for the signals a worker
 *  may die of, "" otherwise. */
const char *sp__pool_sig_name(unsigned sig);

/* ---- the batch digest (pool_digest.c), called by pool.c and pool_worker.c --- */

/*! sp__pool_digest_advance() : once sp_pool_digest() was asked for, hash
 *  the next batch's positions that are DONE, in order. @return 1 when it
 *  hashed one or more, 0 when none was ready (or no digest is wanted). */
int sp__pool_digest_advance(sp_pool *pool);
/*! sp__pool_digest_want() : before the consumer sleeps: ask the worker
 *  that completes the next position to hash to wake it (the ring's
 *  pd_want). @return 1 when that position is done already (hash, do not
 *  sleep), 0 when the consumer may sleep. */
int sp__pool_digest_want(sp_pool *pool);
/* The ring's pd_want word for position p of batch q (0 is "none"). */
static inline uint64_t sp__pool_pd_want(uint64_t q, uint32_t p) {
    return (((q & ((1ull << 40) - 1)) << 24) | p) + 1;
}
/*! sp__pool_digest_open() : before the workers are forked: choose the
 *  hasher (pool_digest.c's HOW IT WORKS), and for the workers' map their
 *  shared records (pool->wd; NULL: the consumer hashes). */
void sp__pool_digest_open(sp_pool *pool);
/*! sp__pool_digest_work() : worker side, pool->wd set, position of batch q
 *  in slot s just DONE: hash what is DONE of the batch in order, if the
 *  record is free and a digest was asked for. */
void sp__pool_digest_work(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g);
/*! sp__pool_digest_claim() : worker side, pool->wd set, batch q (slot s)
 *  about to be read from the epoch cache: its record locked and begun, and
 *  the state the batch's images go into as they are decompressed
 *  (sp__cb_read_req.digest); NULL when no digest was asked for or the
 *  record is busy. sp__pool_digest_unclaim() lets go: every position
 *  hashed (ok: the batch was read) or the record dropped. */
struct sp__hash *sp__pool_digest_claim(sp__worker_ctx *wc, uint64_t q, uint32_t s,
                                       const sp__batch_geo *g);
void sp__pool_digest_unclaim(sp__worker_ctx *wc, uint32_t s, uint32_t count, int ok);
/*! sp__pool_digest_worker_died() : worker w is reaped: a record it held is
 *  freed and dropped (that batch is hashed from the view). */
void sp__pool_digest_worker_died(sp_pool *pool, uint32_t w);
/*! sp__pool_digest_counts() : the batches sp_pool_digest() finished from
 *  the workers' record, from the consumer's, and hashed from the view
 *  (tests/test_pool_digest.c). */
void sp__pool_digest_counts(const sp_pool *pool, uint64_t by[3]);
/*! sp__pool_digest_free() : its state (accepts a pool without one). */
void sp__pool_digest_free(sp_pool *pool);

/* ---- the cache protocol (pool_cache.c), called by pool.c and pool_worker.c -- */

/* The controller (pool_cache.c; pool->cc, NULL without a cache). */
typedef struct sp__pool_cc sp__pool_cc;

/*! sp__pool_cache_open() : pool->cc: open the cache at pcfg->cache_dir and
 *  map the slots' shared records (before any worker is forked); whole: a
 *  batch file with failed samples may be taken as it is (the plain pool;
 *  the service's pool computes it). @return 0, sp_cache_open()'s error, or
 *  SP_ENOMEM; on error what was made is freed by sp__pool_cache_close(). */
int sp__pool_cache_open(sp_pool *pool, const sp_pool_config *pcfg, int whole, sp_error *err);
/*! sp__pool_cache_close() : abort the epochs still in the ring (nothing of
 *  them is committed), unmap the records, close the cache, free pool->cc.
 *  Accepts a pool without a cache. */
void sp__pool_cache_close(sp_pool *pool);
/*! sp__pool_cache_mode() : slot s's mode now (SP__SCM_*; NONE without a
 *  cache). Workers and the consumer ask it. */
uint32_t sp__pool_cache_mode(const sp__pool_cc *cc, uint32_t s);
/*! sp__pool_cache_of() : the cache (sp_pool_cache()), NULL without one. */
sp_cache *sp__pool_cache_of(const sp__pool_cc *cc);

/* Worker side. */
/*! sp__pool_cache_read() : SP__SCM_READ: the holder of position 0 reads the
 *  whole batch file into the slot. @return 1 (every position is DONE; the
 *  caller then bumps the completion counter by the count) or 0:
 *  compute instead (the slot is SP__SCM_NONE now and the other workers are
 *  told to scan for its positions). crash: the position's crash word. */
int sp__pool_cache_read(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g,
                        uint32_t crash, struct sp__hash *digest);
/*! sp__pool_cache_write() : SP__SCM_FILL: the worker completing a batch
 *  writes its file, unless the consumer took the job or the batch has failed
 *  samples; the result goes into the slot's record. */
void sp__pool_cache_write(sp__worker_ctx *wc, uint32_t s, const sp__batch_geo *g);

/* Consumer side. */
/*! sp__pool_cache_activate() : give slot s (batch g) its cache mode and
 *  what its worker needs, opening the epoch's reader or writer first. */
void sp__pool_cache_activate(sp_pool *pool, uint32_t s, const sp__batch_geo *g);
/*! sp__pool_cache_worker_died() : worker w is gone: a FILL record it held
 *  BUSY becomes the consumer's (marked partial). */
void sp__pool_cache_worker_died(sp_pool *pool, uint32_t s, uint32_t w);
/*! sp__pool_cache_settled() : 1 unless slot s was activated FILL and a
 *  worker still writes its file (0: hold the batch back); a FILL write is
 *  settled once done, failed, or the consumer's to do. */
int sp__pool_cache_settled(sp_pool *pool, uint32_t s);
/*! sp__pool_cache_take() : batch q (slot s) is being taken: account for
 *  what its worker did; close the epoch after its last batch. */
void sp__pool_cache_take(sp_pool *pool, uint64_t q, uint32_t s);
/*! sp__pool_cache_finish() : sp__pool_next()'s finalising of slot s, read
 *  whole from a batch file with failed samples: *view gets the file's
 *  count and lists, its failure records are logged in the consumer's
 *  loader (as sp_cache_reader_batch() logs them). @return 1, or 0 when the
 *  slot is not such a batch (then sp__batch_finalize() applies). */
int sp__pool_cache_finish(sp_pool *pool, uint32_t s, sp_batch *view);

#endif

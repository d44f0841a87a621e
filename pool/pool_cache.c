/* pool_cache.c - the worker pool's epoch-cache protocol (pool.h, cache.h):
 * workers reading a cached batch file into their slot or writing the batch
 * they completed, and the consumer's part (a reader or writer per epoch in
 * the ring, each slot's record set when the slot is activated and read back
 * when its batch is taken, the batches the consumer writes itself).
 *
 * Called by pool.c (the consumer's side) and pool_worker.c (the workers'
 * side) only (pool_shared.h: sp__pool_cache_*()); it calls down into the
 * cache (cache/) and the loader, and never calls back into either. Its state is its own: the controller, struct sp__pool_cc below
 * (pool->cc, which pool.c only passes on); of the pool it reads the
 * geometry (loader, ring header, R, cap, nb, total) and uses the slot
 * helpers inline in pool_shared.h.
 *
 * HOW IT WORKS
 *
 * The workers' part. With a cache directory each slot has a record in a
 * second shared mapping (sp__slot_cache, pool_shared.h): a mode, set by
 * the consumer when it activates the slot from its epoch's lookup (READ: the entry's
 * key and the manifest line of the batch; FILL: the staging directory;
 * NONE), and a state the workers report through. READ: only position 0 is
 * claimed; its holder reads the batch file into the slot, marks every
 * position DONE (position 0 last, so a death before that leaves position
 * 0 CLAIMED, to be freed and redone like any other) and adds count to the
 * completion counter. A file whose batch has failed samples is the batch
 * as finalised (samples compacted, skipped and substituted lists): the
 * worker reads it whole into the slot, copies its failure records into the
 * slot's item array (unused then) and marks the record `whole`; the
 * consumer then takes count and lists from the record instead of
 * finalising the positions, and logs the records itself
 * (sp__pool_cache_finish(): the same records, in the same order, as the
 * in-process reader logs, so the failure log is the same). The service's
 * pool, which finalises per rank from the positions, computes such a
 * batch instead. If the file is unusable it records why (FALLBACK),
 * turns the slot into NONE and bumps scan_gen: the other workers' orphan
 * scans then claim positions 1.. as usual. FILL: a worker about to make
 * the completion counter reach count (every other position is DONE) first
 * wins the record (EMPTY -> BUSY by CAS), encodes and writes the file, and
 * records the result (OK with its manifest line, FAILED, or CONSUMER when
 * the batch has failed samples), then bumps. If a bump was lost (a worker
 * died between DONE and its bump) nobody writes: the consumer, finding the
 * batch complete by its scan, takes the record (EMPTY -> CONSUMER) and
 * writes the batch itself; the CAS decides between it and a late last
 * worker. The consumer never takes a FILL batch whose record is BUSY;
 * when a worker dies, sp__pool_cache_worker_died() (from pool.c's
 * check_workers()) turns its BUSY record into CONSUMER (marked
 * partial): the batch is in the slot, so the consumer removes the
 * half-written file and writes the batch itself. A write that fails
 * (FAILED: full disk) spoils the entry: the epoch goes on uncached, and
 * the staging directory is removed once the epoch's last batch is taken
 * (no worker can be writing into it then).
 *
 * The consumer's part. Epochs enter the ring in order and leave it
 * (their last batch taken) in order: cc->ec is a FIFO of their reader or
 * writer, opened when an epoch's first batch is activated and closed when
 * its last batch is taken: a complete writer is then handed to the cache's
 * commit thread (cache/cache_commit.c: the commit and the gc after it run
 * while the consumer takes the next epoch's batches; a finished commit is
 * accounted for at the next take, the stream's last commit is waited for
 * at its last batch, any other at sp__pool_cache_close()). Each activated slot gets the
 * epoch's mode and what its worker needs (entry key or staging directory,
 * the manifest line); taking a batch reads back what the worker did.
 */
#include "pool/pool_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "cache/cache_internal.h"
#include "common/common_internal.h"

/* Record states: BUSY carries the worker id in bits 8..15. */
enum {
    SP__SCR_EMPTY = 0,
    SP__SCR_BUSY = 1,
    SP__SCR_OK = 2,
    SP__SCR_FAILED = 3,
    SP__SCR_CONSUMER = 4,
    SP__SCR_FALLBACK = 5
};

/* One per slot, in a shared mapping of its own (cc->sc). */
typedef struct sp__slot_cache {
    _Atomic uint32_t mode;       /* SP__SCM_* */
    _Atomic uint32_t state;      /* SP__SCR_* | worker << 8 */
    int32_t code, enoent;        /* FAILED / FALLBACK: the problem (code 0: none to report) */
    int32_t filter;              /* FILL: the writer's image filter */
    /* READ, state OK: the slot holds the file's finished batch (skipped
     * and substituted lists, `count` samples; the plain pool only); the
     * failure records, nfailures of them, are copied into the slot's item
     * array as the file holds them, for the consumer to log. */
    uint32_t whole, count, nskipped, nsubst, nfailures;
    int32_t partial;             /* FILL: its writer died: a partial file may be there */
    sp_digest key;               /* the entry key */
    sp__cm_batch line;           /* READ: the manifest's line; FILL: the file written */
    char name[128];              /* READ: the entry key; FILL: the staging dir under .tmp */
    char msg[SP_ERROR_MSG_MAX];
} sp__slot_cache;

/* The consumer's per-epoch cache state, oldest epoch first. */
typedef struct sp__epoch_cache {
    uint32_t epoch, mode;
    sp_cache_reader *rd;
    sp_cache_writer *wr;
} sp__epoch_cache;

/* The controller: what the cache protocol keeps (pool->cc). The slot
 * records are shared with the workers (a MAP_SHARED mapping made before
 * they fork); the rest is the consumer's. */
struct sp__pool_cc {
    sp_cache *cache;
    sp__slot_cache *sc;                /* R records, shared with the workers */
    uint32_t R;
    uint32_t *smode;                   /* per slot: the mode it was activated with */
    sp__epoch_cache *ec;               /* FIFO of the epochs in the ring */
    uint32_t ec_cap, ec_head, ec_n;
    int warned_unsupp;
    int whole;                         /* batches with failures read too (not the service) */
    uint64_t crash_write;              /* test hook (SEEDPIPE_TEST_CRASH_CACHE_WRITE), UINT64_MAX: none */
};

uint32_t sp__pool_cache_mode(const sp__pool_cc *cc, uint32_t s) {
    return cc ? atomic_load(&cc->sc[s].mode) : SP__SCM_NONE;
}

sp_cache *sp__pool_cache_of(const sp__pool_cc *cc) { return cc ? cc->cache : NULL; }

/* ---- worker side ------------------------------------------------------------ */

/* A batch file read into slot s that has failed samples (skipped or
 * substituted ones, failure records): the plain pool's consumer takes it
 * as it is (sp__pool_cache_finish) when its failure records fit in the
 * slot's item array, where they are copied as the file holds them (records
 * of 16 + length bytes; an item is larger than the longest). @return 1
 * (kept), 0 (the service's pool, or too many records: computed instead). */
static int keep_whole(sp__worker_ctx *wc, uint32_t s, const sp__cb_header *hd) {
    sp_pool *pool = wc->pool;
    sp__slot_cache *sc = &pool->cc->sc[s];
    if (!pool->cc->whole || hd->nfailures > pool->cap) return 0;
    size_t fixed = (size_t)hd->count * 12 + (size_t)hd->nskipped * 8 +
                   (size_t)hd->nsubstituted * 16;
    if (hd->meta_raw < fixed || hd->meta_raw - fixed > (size_t)pool->cap * sizeof(sp__item))
        return 0;
    /* The records (sp__cb_decode() checked that they add up to meta_raw). */
    memcpy(sp__slot_items(pool->h, s), wc->io.meta.p + fixed, hd->meta_raw - fixed);
    sc->count = hd->count;
    sc->nskipped = hd->nskipped;
    sc->nsubst = hd->nsubstituted;
    sc->nfailures = hd->nfailures;
    sc->whole = 1;
    return 1;
}

/* SP__SCM_READ: the holder of position 0 reads the whole batch file into the
 * slot. @return 1 (every position is DONE) or 0: compute instead (the slot
 * is SP__SCM_NONE now and the other workers are told to scan for its positions). */
int sp__pool_cache_read(sp__worker_ctx *wc, uint64_t q, uint32_t s, const sp__batch_geo *g,
                        uint32_t crash, struct sp__hash *digest) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    sp__slot_cache *sc = &pool->cc->sc[s];
    atomic_store(&sc->state, SP__SCR_BUSY | (wc->w << 8));
    sp_error e;
    sp_error_clear(&e);
    int enoent = 0, rc = -1;
    sp_batch v = sp__pool_slot_view(pool, s, g);
    sc->whole = 0;
    if (sp__crash_count(crash)) {   /* a worker crashed reading it: no second try */
        e.code = 0;
    } else {
        char dir[PATH_CAP + 160], name[32];
        snprintf(dir, sizeof dir, "%s/%s", sp_cache_dir(pool->cc->cache), sc->name);
        snprintf(name, sizeof name, "b%08" PRIu64, g->index);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
            enoent = errno == ENOENT;
            rc = sp_error_set(&e, SP_EFORMAT, "%s: %s", dir, strerror(errno));
        } else {
            sp__cb_header hd;
            sp__cb_read_req rq = {.dirfd = dfd, .dirpath = dir, .name = name, .key = sc->key,
                                  .epoch = g->epoch, .index = g->index,
                                  .sample_bytes = h->sample_bytes, .cap = pool->cap,
                                  .line = &sc->line, .digest = digest};
            rc = sp__cb_read(&rq, &wc->io, &v, &hd, &enoent, &e);
            close(dfd);
            if (rc == 0 && (v.count != g->count || hd.nskipped || hd.nsubstituted ||
                            hd.nfailures) && !keep_whole(wc, s, &hd)) {
                rc = -1;   /* sound, but not for this pool to take whole: computed */
                e.code = 0;
            }
        }
    }
    if (rc != 0) {
        sc->code = e.code;
        sc->enoent = enoent;
        memcpy(sc->msg, e.msg, sizeof sc->msg);
        atomic_store(&sc->state, SP__SCR_FALLBACK);
        atomic_store(&sc->mode, SP__SCM_NONE);
        atomic_fetch_add(&h->scan_gen, 1);   /* the others claim positions 1.. by a scan */
        sp__pool_wake_workers(h);
        return 0;
    }
    sp__item *it = sp__slot_items(h, s);
    _Atomic uint64_t *st = sp__slot_state(h, s);
    for (uint32_t p = 0; p < g->count && !sc->whole; p++) {   /* whole: they hold the records */
        it[p].status = SP__ITEM_OK;
        it[p].code = 0;
        it[p].failed = 0;
        it[p].msg[0] = '\0';
    }
    atomic_store(&sc->state, SP__SCR_OK);
    /* Position 0 (ours, CLAIMED) last: if we die before it, the consumer
     * frees it and another worker redoes the whole read. */
    for (uint32_t p = g->count; p-- > 0;)
        atomic_store_explicit(&st[p], sp__st(q, SP__ST_DONE, wc->w), memory_order_release);
    atomic_fetch_add_explicit(&h->workers[wc->w].samples, g->count, memory_order_relaxed);
    return 1;   /* the caller bumps the counter (pool.c: after hashing it) */
}

/* SP__SCM_FILL: the worker completing a batch writes its file into the entry's
 * staging directory, unless the consumer took the job (a lost counter bump)
 * or the batch has failed samples (then the consumer writes it: the failure
 * log is its). */
void sp__pool_cache_write(sp__worker_ctx *wc, uint32_t s, const sp__batch_geo *g) {
    sp_pool *pool = wc->pool;
    sp__ring_hdr *h = pool->h;
    sp__slot_cache *sc = &pool->cc->sc[s];
    uint32_t expect = SP__SCR_EMPTY;
    if (!atomic_compare_exchange_strong(&sc->state, &expect, SP__SCR_BUSY | (wc->w << 8))) return;
    const sp__item *it = sp__slot_items(h, s);
    for (uint32_t p = 0; p < g->count; p++)
        if (it[p].status != SP__ITEM_OK) {
            atomic_store(&sc->state, SP__SCR_CONSUMER);
            return;
        }
    sp_batch b = sp__pool_slot_view(pool, s, g);
    const sp_cache_opts *o = sp__cache_opts(pool->cc->cache);
    char dir[PATH_CAP + 160];
    snprintf(dir, sizeof dir, "%s/.tmp/%s", sp_cache_dir(pool->cc->cache), sc->name);
    sp_error e;
    sp_error_clear(&e);
    int rc, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        rc = sp_error_set(&e, SP_EIO, "%s: %s", dir, strerror(errno));
    } else {
        sp__cb_write_req rq = {.dirfd = dfd, .dirpath = dir, .key = sc->key,
                               .sample_bytes = h->sample_bytes, .filter = sc->filter,
                               .level = o->level, .no_fsync = o->no_fsync, .ld = pool->ld};
        rc = sp__cb_write(&rq, &b, &wc->io, &sc->line, &e);
        close(dfd);
    }
#ifdef SEEDPIPE_TEST_HOOKS
    if (g->index == pool->cc->crash_write) {   /* test hook: die with the file written */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
#endif
    if (rc != 0) {
        sc->code = e.code;
        memcpy(sc->msg, e.msg, sizeof sc->msg);
    }
    atomic_store(&sc->state, rc == 0 ? SP__SCR_OK : SP__SCR_FAILED);
}

/* ---- consumer side -------------------------------------------------------- */

/* A warning through the cache's warning callback (sp__cache_warn). */
static void cwarn(sp_pool *pool, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void cwarn(sp_pool *pool, const char *fmt, ...) {
    char msg[SP_ERROR_MSG_MAX + 160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp__cache_warn(pool->cc->cache, msg);
}

static sp__epoch_cache *ec_tail(sp_pool *pool) {
    return pool->cc->ec_n ? &pool->cc->ec[(pool->cc->ec_head + pool->cc->ec_n - 1) % pool->cc->ec_cap] : NULL;
}

/* Look up epoch e, whose first batch in this stream is `index`. */
static void ec_open(sp_pool *pool, uint32_t epoch, uint64_t index) {
    sp__epoch_cache *ec = &pool->cc->ec[(pool->cc->ec_head + pool->cc->ec_n) % pool->cc->ec_cap];
    pool->cc->ec_n++;
    memset(ec, 0, sizeof *ec);
    ec->epoch = epoch;
    ec->mode = SP__SCM_NONE;
    sp_error e;
    sp_error_clear(&e);
    if (sp__loader_config_of(pool->ld)->rng_mode == SP_RNG_PER_WORKER) {
        if (!pool->cc->warned_unsupp++)
            cwarn(pool, "%s: per-worker rng mode is not cacheable (its bytes depend on the "
                  "order batches are computed in); the stream runs uncached",
                  sp_cache_dir(pool->cc->cache));
        return;
    }
    int rc = sp_cache_reader_open(pool->cc->cache, pool->ld, epoch, &ec->rd, &e);
    if (rc == 0) {
        ec->mode = SP__SCM_READ;
        return;
    }
    if (e.code) cwarn(pool, "%s", e.msg);
    if (index != 0) return;   /* a resumed epoch is not filled: it lacks its start */
    sp_error_clear(&e);
    rc = sp__cache_writer_open(pool->cc->cache, pool->ld, epoch, &ec->wr, &e);
    if (rc == 0) ec->mode = SP__SCM_FILL;
    else if (rc != SP_CACHE_SKIP) cwarn(pool, "%s", e.msg);
}

/* The oldest epoch's last batch was taken: commit (on the cache's commit
 * thread, cache_commit.c: the consumer goes on with the next epoch) or
 * abort, close, pop. */
static void ec_close(sp_pool *pool) {
    sp__epoch_cache *ec = &pool->cc->ec[pool->cc->ec_head];
    if (ec->wr) {
        if (!sp__cache_writer_complete(ec->wr)) sp__cache_writer_abort(ec->wr);
        else sp__cache_commit_start(pool->cc->cache, ec->wr, ec->epoch);
    }
    sp_cache_reader_close(ec->rd);
    memset(ec, 0, sizeof *ec);
    pool->cc->ec_head = (pool->cc->ec_head + 1) % pool->cc->ec_cap;
    pool->cc->ec_n--;
}

/* The epoch's entry cannot be completed: spoil its writer. It is aborted
 * (its staging directory removed) only at ec_close(), when every batch of
 * the epoch has been taken: until then a worker may still be writing
 * another of its batches there, and removing the directory under it would
 * leave it behind. */
static void ec_drop_writer(sp_pool *pool, sp__epoch_cache *ec, const char *msg) {
    if (msg) cwarn(pool, "%s; epoch %u goes on uncached", msg, ec->epoch);
    sp__cache_writer_spoil(ec->wr);
    ec->mode = SP__SCM_NONE;
}

/* Give slot s (batch g) its cache mode and what its worker needs. */
void sp__pool_cache_activate(sp_pool *pool, uint32_t s, const sp__batch_geo *g) {
    sp__epoch_cache *t = ec_tail(pool);
    if (!t || t->epoch != g->epoch) {
        ec_open(pool, g->epoch, g->index);
        t = ec_tail(pool);
    }
    sp__slot_cache *sc = &pool->cc->sc[s];
    sc->code = sc->enoent = sc->partial = 0;
    sc->msg[0] = '\0';
    memset(&sc->line, 0, sizeof sc->line);
    uint32_t mode = t->mode;
    if (mode == SP__SCM_READ) {
        const sp__cm_batch *l = sp__cache_reader_line(t->rd, g->index);
        if (l) {
            sc->line = *l;
            snprintf(sc->name, sizeof sc->name, "%s", sp__cache_reader_key(t->rd));
            sp__digest_parse(sc->name, &sc->key);
        } else {
            mode = SP__SCM_NONE;
        }
    } else if (mode == SP__SCM_FILL) {
        snprintf(sc->name, sizeof sc->name, "%s", sp__cache_writer_stage(t->wr));
        sc->key = sp__cache_writer_key(t->wr);
        sc->filter = sp__cache_writer_filter(t->wr);
    }
    pool->cc->smode[s] = mode;
    atomic_store(&sc->state, SP__SCR_EMPTY);
    atomic_store(&sc->mode, mode);
}

/* A batch with failed samples, one whose counter bump was lost, or one
 * whose writer died: the consumer writes it (finalised, with its
 * failure-log lines) from a copy, leaving the slot as it is. */
static void consumer_put(sp_pool *pool, sp__epoch_cache *ec, uint32_t s,
                         const sp__batch_geo *g) {
    sp_batch b;
    sp_error e;
    sp_error_clear(&e);
    size_t sb = sp__loader_sample_bytes(pool->ld);
    sp__item *items = malloc(((size_t)g->count + 1) * sizeof *items);   /* +1: count 0 */
    if (!items || sp_batch_alloc(pool->ld, &b) != 0) {
        free(items);
        ec_drop_writer(pool, ec, "cache: out of memory");
        return;
    }
    sp_batch v = sp__pool_slot_view(pool, s, g);
    memcpy(items, sp__slot_items(pool->h, s), (size_t)g->count * sizeof *items);
    memcpy(b.images, v.images, (size_t)g->count * sb);
    memcpy(b.indices, v.indices, (size_t)g->count * sizeof *b.indices);
    memcpy(b.labels, v.labels, (size_t)g->count * sizeof *b.labels);
    b.count = g->count;
    b.epoch = g->epoch;
    b.index = g->index;
    if (pool->cc->sc[s].partial) sp__cache_writer_discard(ec->wr, g->index);
    if (sp__batch_finalize(pool->ld, &b, items, &e) != 0)
        ec_drop_writer(pool, ec, NULL);   /* the stream fails here (on_error fail) */
    else if (sp__cache_writer_put(ec->wr, &b, &e) != 0)
        ec_drop_writer(pool, ec, e.msg);
    sp_batch_free(&b);
    free(items);
}

/* 1 unless the slot is FILL and its write not settled (done, failed, or the
 * consumer's to do): a worker that is still writing holds the batch back. */
int sp__pool_cache_settled(sp_pool *pool, uint32_t s) {
    if (pool->cc->smode[s] != SP__SCM_FILL) return 1;
    sp__slot_cache *sc = &pool->cc->sc[s];
    uint32_t expect = SP__SCR_EMPTY;
    if (atomic_compare_exchange_strong(&sc->state, &expect, SP__SCR_CONSUMER)) return 1;
    return (expect & 0xff) != SP__SCR_BUSY;
}

/* Batch q (slot s) is being taken: account for what its worker did. */
void sp__pool_cache_take(sp_pool *pool, uint64_t q, uint32_t s) {
    sp__batch_geo g = sp__pool_geo_of(pool, q);
    sp__epoch_cache *ec = &pool->cc->ec[pool->cc->ec_head];
    sp__slot_cache *sc = &pool->cc->sc[s];
    sp_cache_stats *cst = &pool->cc->cache->st;
    uint32_t st = atomic_load(&sc->state) & 0xff;
    if (pool->cc->smode[s] == SP__SCM_READ && (st == SP__SCR_OK || g.count == 0)) {
        /* (An empty batch, a rank's slice past the data, has nothing to read.) */
        sp__cache_reader_count(ec->rd, g.index);
    } else {
        cst->batches_computed++;
        if (pool->cc->smode[s] == SP__SCM_READ && sc->code && ec->mode == SP__SCM_READ) {
            sp_error e;
            e.code = sc->code;
            memcpy(e.msg, sc->msg, sizeof e.msg);
            sp__cache_reader_failed(ec->rd, sc->enoent, &e);
            cwarn(pool, "%s; batch recomputed", e.msg);
            ec->mode = SP__SCM_NONE;   /* one report per entry; the rest is computed */
        } else if (pool->cc->smode[s] == SP__SCM_FILL && ec->mode == SP__SCM_FILL) {
            if (st == SP__SCR_OK) {
                sp_batch b;
                memset(&b, 0, sizeof b);
                b.epoch = g.epoch;
                b.index = g.index;
                b.count = g.count;
                b.capacity = pool->cap;
                sp_error e;
                if (sp__cache_writer_record(ec->wr, &b, &sc->line, &e) != 0)
                    ec_drop_writer(pool, ec, e.msg);
            } else if (st == SP__SCR_FAILED) {
                ec_drop_writer(pool, ec, sc->msg);
            } else {
                consumer_put(pool, ec, s, &g);
            }
        }
    }
    if (g.index + 1 == pool->nb || q + 1 == pool->total) ec_close(pool);
    /* A commit that has finished is counted (and warns) now; the stream's
     * last one is waited for: after the last batch every epoch taken is
     * committed, as when the consumer committed it itself. */
    if (q + 1 == pool->total) sp__cache_commit_wait(pool->cc->cache);
    else sp__cache_commit_reap(pool->cc->cache);
}

/* Worker w is gone: a batch file it was writing (its record BUSY with its
 * id) is the consumer's to write again; the batch is in the slot (every
 * position DONE). */
void sp__pool_cache_worker_died(sp_pool *pool, uint32_t s, uint32_t w) {
    uint32_t busy = SP__SCR_BUSY | (w << 8);
    if (pool->cc->smode[s] == SP__SCM_FILL && atomic_load(&pool->cc->sc[s].state) == busy) {
        pool->cc->sc[s].partial = 1;
        atomic_compare_exchange_strong(&pool->cc->sc[s].state, &busy, SP__SCR_CONSUMER);
    }
}

/* sp__pool_next()'s finalising of a batch read whole (keep_whole()): the
 * file's count and lists are in the slot already; its failure records are
 * logged as the in-process reader logs them (sp__cb_replay_failures()). */
int sp__pool_cache_finish(sp_pool *pool, uint32_t s, sp_batch *view) {
    sp__slot_cache *sc = &pool->cc->sc[s];
    if (pool->cc->smode[s] != SP__SCM_READ || (atomic_load(&sc->state) & 0xff) != SP__SCR_OK ||
        !sc->whole)
        return 0;
    view->count = sc->count;
    view->nskipped = sc->nskipped;
    view->nsubstituted = sc->nsubst;
    sp__cb_header hd;   /* the records alone: no samples or lists before them */
    memset(&hd, 0, sizeof hd);
    hd.nfailures = sc->nfailures;
    sp__cb_replay_failures(pool->ld, &hd, (const uint8_t *)sp__slot_items(pool->h, s));
    return 1;
}

/* ---- opening and closing ------------------------------------------------------ */

int sp__pool_cache_open(sp_pool *pool, const sp_pool_config *pcfg, int whole, sp_error *err) {
    sp__pool_cc *cc = calloc(1, sizeof *cc);
    if (!cc) return sp_error_set(err, SP_ENOMEM, "pool: out of memory for the cache records");
    pool->cc = cc;
    cc->R = pool->R;
    cc->whole = whole;
    cc->crash_write = UINT64_MAX;
#ifdef SEEDPIPE_TEST_HOOKS   /* pool.h: test builds only */
    const char *crash = getenv("SEEDPIPE_TEST_CRASH_CACHE_WRITE");
    if (crash && *crash) cc->crash_write = strtoull(crash, NULL, 10);
#endif
    int rc = sp_cache_open(pcfg->cache_dir, pcfg->cache_opts, &cc->cache, err);
    if (rc != 0) return rc;
    void *m = mmap(NULL, (size_t)cc->R * sizeof *cc->sc, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cc->ec_cap = cc->R + 2;   /* epochs in the ring: at most R + 1 */
    cc->smode = calloc(cc->R, sizeof *cc->smode);
    cc->ec = calloc(cc->ec_cap, sizeof *cc->ec);
    if (m == MAP_FAILED || !cc->smode || !cc->ec) {
        if (m != MAP_FAILED) munmap(m, (size_t)cc->R * sizeof *cc->sc);
        return sp_error_set(err, SP_ENOMEM, "pool: out of memory for the cache records");
    }
    cc->sc = m;
    return SP_OK;
}

void sp__pool_cache_close(sp_pool *pool) {
    sp__pool_cc *cc = pool->cc;
    if (!cc) return;
    sp__cache_commit_wait(cc->cache);   /* an epoch's commit still running */
    while (cc->ec && cc->ec_n) {   /* unfinished epochs: nothing is committed */
        sp__epoch_cache *ec = &cc->ec[cc->ec_head];
        sp__cache_writer_abort(ec->wr);
        ec->wr = NULL;
        ec_close(pool);
    }
    if (cc->sc) munmap(cc->sc, (size_t)cc->R * sizeof *cc->sc);
    free(cc->smode);
    free(cc->ec);
    sp_cache_close(cc->cache);
    free(cc);
    pool->cc = NULL;
}

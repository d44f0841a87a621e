/* cache_commit.c - an epoch's commit and the gc after it on a thread of its
 * own, so that the consumer taking batches (the worker pool's, pool/) does
 * not wait for the manifest's write, the fsyncs, the rename and the
 * eviction between one epoch's last batch and the next epoch's first.
 *
 * In the cache's stack (cache/, bottom first): above the writer
 * (cache_writer.c: the commit's steps, sp__cache_writer_commit_quiet()) and
 * gc (cache_gc.c), the cache files it calls; below the epoch helper
 * (cache.c), which does not use it (sp__cache_epoch_batch() commits before
 * it returns an epoch's last batch, as cache.h says).
 *
 * HOW IT WORKS
 *
 * The writer is handed over whole: once started, only the commit's thread
 * touches it (its files, its locks, its memory), and that thread reads
 * nothing of the handle but its directory and options (set at open, never
 * changed). What the handle owns and its user sees, the stats and the
 * warning callback, stays on the handle's thread: the thread records what
 * happened (sp__commit_outcome, the error of a failed commit, the error of
 * the gc) and sp__cache_commit_wait(), called by the handle's thread,
 * counts it and warns, as a commit made there would have. One commit runs
 * at a time, in the order started (a start waits for the one before), so
 * gc and commits see the directory in the same order as before. The pool
 * waits for it at the end of its stream (sp__pool_next's SP_END: every
 * epoch taken is committed, as before) and when it is destroyed, and reaps
 * a finished one at each batch taken (its warnings come then).
 *
 * A crash is what it was: the commit's steps are the same, in the same
 * order (staging directory, manifest, fsync, one rename), so a process
 * killed while a commit runs leaves the staging directory (gc collects it)
 * or the committed entry, never a partial entry. Only when differs: a
 * process killed after an epoch's last batch was taken and before its
 * commit's thread finished leaves that epoch uncommitted; the next run
 * computes and fills it (bytes are never in question: the key decides
 * them).
 *
 * The thread blocks every signal (they go to the process's other threads,
 * as before) and holds no lock a forked worker could need.
 */
#include "cache/cache_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SEEDPIPE_TEST_HOOKS
_Atomic unsigned long sp__cache_commits_threaded = 0;
#endif

struct sp__cache_commit {
    pthread_t th, starter;
    int threaded;                /* th runs (else it ran on the caller) */
    _Atomic int done;            /* the thread's work is over: join does not block */
    sp_cache *c;                 /* its dir and opts only, on the thread */
    sp_cache_writer *w;          /* the thread's alone once started */
    uint32_t epoch;
    int rc, gc_rc;
    sp__commit_outcome out;
    sp_error err, gc_err;
};

/* The commit, then gc down to max_size after a commit that made the entry
 * visible (not after a lost race or a failure: as sp__cache_writer_commit()). */
static void *commit_main(void *arg) {
    struct sp__cache_commit *k = arg;
    sp_error_clear(&k->err);
    sp_error_clear(&k->gc_err);
    k->rc = sp__cache_writer_commit_quiet(k->w, &k->out, &k->err);
    k->w = NULL;
    const sp_cache_opts *o = sp__cache_opts(k->c);
    if (k->rc == 0 && k->out.committed && o->max_size)
        k->gc_rc = sp_cache_gc(k->c, o->max_size, NULL, &k->gc_err);
#ifdef SEEDPIPE_TEST_HOOKS
    if (!pthread_equal(pthread_self(), k->starter)) atomic_fetch_add(&sp__cache_commits_threaded, 1);
#endif
    atomic_store_explicit(&k->done, 1, memory_order_release);
    return NULL;
}

void sp__cache_commit_start(sp_cache *c, sp_cache_writer *w, uint32_t epoch) {
    sp__cache_commit_wait(c);
    struct sp__cache_commit *k = calloc(1, sizeof *k);
    if (!k) {   /* no room for the record: commit here, as before */
        sp_error e;
        sp_error_clear(&e);
        if (sp__cache_writer_commit(w, &e) != 0) {
            char msg[SP_ERROR_MSG_MAX + 64];
            snprintf(msg, sizeof msg, "%s; epoch %u was not cached", e.msg, epoch);
            sp__cache_warn(c, msg);
        }
        return;
    }
    k->starter = pthread_self();
    k->c = c;
    k->w = w;
    k->epoch = epoch;
    c->pending = k;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* the thread starts with every signal blocked */
    k->threaded = pthread_create(&k->th, NULL, commit_main, k) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!k->threaded) commit_main(k);
}

void sp__cache_commit_wait(sp_cache *c) {
    struct sp__cache_commit *k = c ? c->pending : NULL;
    if (!k) return;
    if (k->threaded) pthread_join(k->th, NULL);
    c->pending = NULL;
    sp__cache_commit_count(c, &k->out);
    if (k->rc != 0) {
        char msg[SP_ERROR_MSG_MAX + 64];
        snprintf(msg, sizeof msg, "%s; epoch %u was not cached", k->err.msg, k->epoch);
        sp__cache_warn(c, msg);
    } else if (k->gc_rc != 0) {
        sp__cache_warn(c, k->gc_err.msg);
    }
    free(k);
}

void sp__cache_commit_reap(sp_cache *c) {
    struct sp__cache_commit *k = c ? c->pending : NULL;
    if (k && atomic_load_explicit(&k->done, memory_order_acquire)) sp__cache_commit_wait(c);
}

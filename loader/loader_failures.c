/* loader_failures.c - the loader's failure log and a batch's on-error
 * outcome (loader.h "Failing samples"): sp__batch_finalize() turns the
 * positions' outcomes into the batch (fail with the first failing
 * position's error, or compact skipped positions out and list skips and
 * substitutes), and logs each failing sample once, under a lock, in stream
 * order. The in-process loader and the worker pool both end a batch here.
 */
#include "seedpipe/loader.h"
#include "loader/loader_struct.h"
#include "common/vec_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sp__loader_log_failure(sp_loader *ld, uint64_t sample, int code, const char *msg) {
    pthread_mutex_lock(&ld->log_lock);
    /* Linear dedupe: failures are expected to be few (LIMITATION: quadratic
     * for a dataset where most files fail). */
    for (size_t i = 0; i < ld->nfailures; i++)
        if (ld->failures[i].sample == sample) {
            pthread_mutex_unlock(&ld->log_lock);
            return;
        }
    if (SP__VEC_RESERVE(ld->failures, ld->cap_failures, ld->nfailures + 1, 16) != 0) {
        pthread_mutex_unlock(&ld->log_lock);   /* the log is best effort; the batch result is not */
        return;
    }
    sp_failure *f = &ld->failures[ld->nfailures++];
    f->sample = sample;
    f->code = code;
    snprintf(f->msg, sizeof f->msg, "%s", msg);
    pthread_mutex_unlock(&ld->log_lock);
}

size_t sp_loader_failure_count(const sp_loader *ld) {
    sp_loader *m = (sp_loader *)ld;
    pthread_mutex_lock(&m->log_lock);
    size_t n = m->nfailures;
    pthread_mutex_unlock(&m->log_lock);
    return n;
}

int sp_loader_failure_get(const sp_loader *ld, size_t i, sp_failure *out) {
    sp_loader *m = (sp_loader *)ld;
    pthread_mutex_lock(&m->log_lock);
    int rc = i < m->nfailures ? SP_OK : SP_ERANGE;
    if (rc == SP_OK) *out = m->failures[i];
    pthread_mutex_unlock(&m->log_lock);
    return rc;
}

int sp__batch_finalize(sp_loader *ld, sp_batch *b, const sp__item *items, sp_error *err) {
    b->nskipped = 0;
    b->nsubstituted = 0;
    for (uint32_t s = 0; s < b->count; s++)
        if (items[s].status == SP__ITEM_FAILED) {
            sp__loader_log_failure(ld, items[s].failed, items[s].code, items[s].msg);
            sp_error_set(err, items[s].code, "%s", items[s].msg);
            return items[s].code;
        }
    uint32_t w = 0;
    size_t sb = ld->sample_bytes;
    for (uint32_t s = 0; s < b->count; s++) {
        const sp__item *it = &items[s];
        if (it->status != SP__ITEM_OK)
            sp__loader_log_failure(ld, it->failed, it->code, it->msg);
        if (it->status == SP__ITEM_SKIPPED) {
            if (b->skipped) b->skipped[b->nskipped] = it->failed;
            b->nskipped++;
            continue;
        }
        if (it->status == SP__ITEM_SUBSTITUTED) {
            if (b->substituted) {
                b->substituted[2 * b->nsubstituted] = it->failed;
                b->substituted[2 * b->nsubstituted + 1] = b->indices[s];
            }
            b->nsubstituted++;
        }
        if (w != s) {
            memmove(b->images + (size_t)w * sb, b->images + (size_t)s * sb, sb);
            b->indices[w] = b->indices[s];
            b->labels[w] = b->labels[s];
        }
        w++;
    }
    b->count = w;
    return SP_OK;
}

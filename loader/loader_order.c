/* loader_order.c - the loader's block order (loader.h SP_ORDER_BLOCK): the
 * shard sizes of the loader's samples and the epochs' shard tables.
 *
 * The block order (sampler.h, docs/determinism.md section 6a) needs a
 * table of the epoch's permuted shards (O(shards), never O(samples)).
 * Every position of a batch asks for it, from loader threads and, after a
 * fork, from the pool's workers, so the last few epochs' tables are kept
 * here (a batch, and a pool crossing an epoch's end, asks for at most two
 * epochs at a time). The table is a pure function of (shard sizes, K,
 * seed, epoch): which thread built it, and when, never changes a position.
 *
 * Thread safety: sp__order_at() takes the object's lock for the lookup and
 * the position (a few microseconds; an epoch's first call builds its table
 * under the lock). Fork-safe as the loader is: no lock is held between
 * calls.
 */
#include "loader/loader_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_shard_count(), kind */

#include <pthread.h>
#include <stdlib.h>
#include "loader/sampler_internal.h"

#define ORDER_EPOCHS 4   /* epochs' tables kept */

struct sp__order {
    uint64_t *sizes;     /* [nshards] the loader's samples in each shard */
    uint32_t nshards, k;
    sp_key key;          /* K_block of the seed */
    pthread_mutex_t lock;
    sp_block_perm *table[ORDER_EPOCHS];
    uint64_t used[ORDER_EPOCHS], tick;
};

void sp__order_destroy(sp__order *o) {
    if (!o) return;
    for (int i = 0; i < ORDER_EPOCHS; i++) sp_block_perm_destroy(o->table[i]);
    pthread_mutex_destroy(&o->lock);
    free(o->sizes);
    free(o);
}

/* Why the dataset cannot be read in blocks of shards, or SP_OK. */
static int check_kind(const sp_dataset *ds, const char *what, uint32_t k, sp_error *err) {
    if (sp__dataset_mix_sources(ds))
        return sp_error_set(err, SP_EINVAL, "order block:%u: %s is a mixture: its epoch is drawn "
                            "from its sources by weight, not read from shards (use the global "
                            "order)", k, what);
    if (sp__dataset_shard_count(ds) == 0)
        return sp_error_set(err, SP_EINVAL, "order block:%u: %s is a dataset of kind %s, which "
                            "has no shards (the block order permutes WebDataset .tar shards, "
                            "local or remote, and the samples within K of them; use the global "
                            "order)", k, what, sp__dataset_kind_name(sp__dataset_kind_of(ds)));
    return SP_OK;
}

int sp__order_create(const sp_dataset *ds, const uint64_t *map, uint64_t n, uint32_t k,
                     uint64_t seed, const char *what, sp__order **out, sp_error *err) {
    *out = NULL;
    if (k == 0)
        return sp_error_set(err, SP_EINVAL, "order block:0: K, the shards a block, must be at "
                            "least 1 (block_shards)");
    int rc = check_kind(ds, what, k, err);
    if (rc != SP_OK) return rc;
    sp__order *o = calloc(1, sizeof *o);
    if (!o) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    pthread_mutex_init(&o->lock, NULL);
    o->nshards = sp__dataset_shard_count(ds);
    o->k = k;
    o->key = sp_rng_key(seed, SP_RNG_BLOCK);
    o->sizes = calloc(o->nshards, sizeof *o->sizes);
    if (!o->sizes) rc = sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    /* The loader's j-th sample (a subset's too: its map is increasing) is
     * counted in its shard; shards number the samples in order. */
    uint32_t prev = 0;
    for (uint64_t j = 0; rc == SP_OK && j < n; j++) {
        uint32_t s = sp_dataset_shard_of(ds, map ? map[j] : j);
        if (s >= o->nshards || s < prev)
            rc = sp_error_set(err, SP_EFORMAT, "order block:%u: %s: sample %llu is not in shard "
                              "order", k, what, (unsigned long long)(map ? map[j] : j));
        else
            o->sizes[s]++;
        prev = s;
    }
    if (rc == SP_OK)   /* epoch 0's table: the sizes are sound (and it is the first asked for) */
        rc = sp_block_perm_create(o->sizes, o->nshards, k, o->key, 0, &o->table[0], err);
    if (rc != SP_OK) {
        sp__order_destroy(o);
        return rc;
    }
    *out = o;
    return SP_OK;
}

/* The table of `epoch`, kept or built in the least recently used place;
 * NULL when out of memory. Under o->lock. */
static const sp_block_perm *table_of(sp__order *o, uint32_t epoch) {
    int victim = 0;
    for (int i = 0; i < ORDER_EPOCHS; i++) {
        if (o->table[i] && sp__block_perm_epoch(o->table[i]) == epoch) {
            o->used[i] = ++o->tick;
            return o->table[i];
        }
        if (!o->table[i] || (o->table[victim] && o->used[i] < o->used[victim])) victim = i;
    }
    sp_block_perm_destroy(o->table[victim]);
    o->table[victim] = NULL;
    if (sp_block_perm_create(o->sizes, o->nshards, o->k, o->key, epoch, &o->table[victim],
                             NULL) != SP_OK)
        return NULL;
    o->used[victim] = ++o->tick;
    return o->table[victim];
}

uint64_t sp__order_at(sp__order *o, uint32_t epoch, uint64_t pos) {
    pthread_mutex_lock(&o->lock);
    const sp_block_perm *t = table_of(o, epoch);
    uint64_t j = t ? sp_block_perm_at(t, pos) : UINT64_MAX;
    pthread_mutex_unlock(&o->lock);
    return j;
}

/* cache_key.c - what names an entry, and the cache handle's accessors
 * (include/seedpipe/cache.h, cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first) low, with the file
 * formats and the POSIX helpers: it calls no other cache file, so the
 * reader, gc and writer above can all ask it. sp__cache_key() is the entry
 * key (a digest of everything that decides an epoch's bytes);
 * sp__cache_info_from_loader() the manifest fields a loader decides, which
 * a writer records and a reader compares. The accessors read the handle
 * (struct sp_cache, cache_internal.h) for the files outside cache/.
 */
#include "cache/cache_internal.h"
#include "common/hash_internal.h"
#include "loader/loader_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_fingerprint() */

#include <stdio.h>

#include "seedpipe/pipeline.h"

const char *sp_cache_dir(const sp_cache *c) { return c->dir; }
int sp__cache_read_only(const sp_cache *c) { return c->o.read_only; }
const sp_cache_opts *sp__cache_opts(const sp_cache *c) { return &c->o; }
void sp_cache_stats_get(const sp_cache *c, sp_cache_stats *s) { *s = c->st; }

void sp__cache_warn(sp_cache *c, const char *msg) {
    if (c->o.warn) c->o.warn(c->o.warn_ud, msg);
}

sp_digest sp__cache_key(const sp_loader *ld, uint32_t epoch) {
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    sp_digest fp = sp__loader_fingerprint(ld);
    sp__hash st;
    sp__hash_init(&st);
    sp__hash_str(&st, "seedpipe-cache-key");
    sp__hash_u64(&st, SP_CACHE_FORMAT_VERSION);
    sp__hash_u64(&st, fp.hi);
    sp__hash_u64(&st, fp.lo);
    sp__hash_u64(&st, cfg->seed);
    sp__hash_u64(&st, epoch);
    sp__hash_u64(&st, cfg->rank);
    sp__hash_u64(&st, cfg->world ? cfg->world : 1);
    return sp__hash_digest(&st);
}

/* The manifest fields a loader decides (everything but sizes and times). */
void sp__cache_info_from_loader(const sp_loader *ld, uint32_t epoch, sp_cache_entry_info *e) {
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    e->fingerprint = sp__loader_fingerprint(ld);
    e->dataset_fingerprint = sp__dataset_fingerprint(sp__loader_dataset(ld));
    e->seed = cfg->seed;
    e->epoch = epoch;
    e->rank = cfg->rank;
    e->world = cfg->world ? cfg->world : 1;
    e->batch_size = cfg->batch_size;
    e->drop_last = cfg->drop_last ? 1 : 0;
    e->skip_normalize = cfg->skip_normalize ? 1 : 0;
    snprintf(e->dtype, sizeof e->dtype, "%s", sp_dtype_name(cfg->dtype));
    snprintf(e->layout, sizeof e->layout, "%s", sp_layout_name(cfg->layout));
    snprintf(e->on_error, sizeof e->on_error, "%s", sp_on_error_name(cfg->on_error));
    snprintf(e->rng_mode, sizeof e->rng_mode, "%s", sp__rng_mode_name(cfg->rng_mode));
    e->batches = sp__loader_batches_per_epoch(ld);
    e->sample_bytes = sp__loader_sample_bytes(ld);
}

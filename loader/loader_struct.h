/* loader_struct.h - the fields of the loader object (include/seedpipe/
 * loader.h's sp_loader), for the files that make it: loader.c (create,
 * order, batches), loader_samples.c (the sample list and the subset),
 * loader_span.c (a batch's rank slices),
 * loader_failures.c (the failure log, a batch's outcome) and
 * loader_explain.c. Nothing else includes it: the other loader files use
 * loader_internal.h's functions. Not installed.
 */
#ifndef SEEDPIPE_LOADER_STRUCT_H
#define SEEDPIPE_LOADER_STRUCT_H

#include "seedpipe/loader.h"
#include "dataset/dataset_api_internal.h"
#include "loader/loader_internal.h"
#include "loader/tokens_internal.h"
#include "loader/targets_internal.h"

#include <pthread.h>

struct sp_loader {
    sp_loader_config cfg;
    char *dataset_path;
    char *pipeline_spec;
    sp_dataset *ds;
    sp_pipeline *pl;                  /* NULL for a token corpus: */
    sp__tokl *tok;                    /* its windows (tokens.c); NULL for images */
    sp_batching bt;
    uint32_t span;                    /* consecutive ranks per batch (1; the service: more) */
    sp_key k_shuffle, k_augment;
    int c, h, w;
    size_t sample_bytes;
    sp_digest fingerprint, pipeline_hash;
    uint64_t worker_counter;          /* per-worker rng mode, in-process */
    pthread_mutex_t log_lock;         /* guards the failure log */
    sp_failure *failures;
    size_t nfailures, cap_failures;
    char *split_spec, *subset_name;   /* copies; NULL: no split */
    sp_split split;
    uint64_t *map;                    /* subset sample j -> dataset index */
    uint64_t nmap;
    int mix;                          /* the dataset is a mixture: its own epoch (index_at) */
    sp__order *block;                 /* SP_ORDER_BLOCK: the epochs' shard tables; else NULL */
    sp__samp *samp;                   /* a sampler (samplers.c); NULL: each sample once */
    sp_sample_list list;              /* cfg.samples: a view of the dataset's copy */
    const char **list_paths;
    int32_t *list_labels;
    char *annotations;                /* copy of cfg.annotations, or NULL */
    sp__ldt *targets;                 /* boxes and keypoints (loader_targets.c), or NULL */
    size_t image_bytes;               /* a sample's image (then its targets, if any) */
};

/* Steps of sp_loader_create() (loader_samples.c). sp__loader_own_list():
 * cfg.samples becomes the loader's view of the opened list, cfg.dataset
 * its absolute folder. sp__loader_build_subset(): with a split, ld->map
 * gets the subset's dataset indices (canonical order). @return 0 or the
 * error (SP_ENOMEM; SP_EINVAL naming the split, the subset or the
 * dataset). */
int sp__loader_own_list(sp_loader *ld, sp_error *err);
int sp__loader_build_subset(sp_loader *ld, sp_error *err);

#endif

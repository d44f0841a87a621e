/* loader_samples.c - which samples a loader draws from: a caller's sample
 * list kept as the loader's own (cfg.samples), and a split's subset (the
 * dataset indices of one named subset, split.h), in canonical order. Two
 * steps of sp_loader_create() (loader.c), apart from the batch work.
 */
#include "seedpipe/loader.h"
#include "loader/loader_struct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cfg.samples points at the loader's own view of the list (paths and
 * labels as the dataset keeps them), so the config sp_loader_info_get()
 * gives can be given to sp_loader_create() again while ld lives, as with
 * any other config. */
int sp__loader_own_list(sp_loader *ld, sp_error *err) {
    uint64_t n = sp__dataset_size(ld->ds);
    ld->list_paths = malloc(n * sizeof *ld->list_paths);
    ld->list_labels = malloc(n * sizeof *ld->list_labels);
    if (!ld->list_paths || !ld->list_labels)
        return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        ld->list_paths[i] = sp_dataset_path(ld->ds, i);
        ld->list_labels[i] = sp_dataset_label(ld->ds, i);
    }
    ld->list.count = (size_t)n;
    ld->list.paths = ld->list_paths;
    ld->list.labels = ld->list_labels;
    ld->list.num_classes = sp__dataset_num_classes(ld->ds);
    ld->cfg.samples = &ld->list;
    /* the absolute folder, even if cfg.dataset was NULL */
    char *base = strdup(sp__dataset_root(ld->ds));
    if (!base) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    free(ld->dataset_path);
    ld->dataset_path = base;
    ld->cfg.dataset = base;
    return SP_OK;
}

/* The subset's dataset indices in canonical order. */
int sp__loader_build_subset(sp_loader *ld, sp_error *err) {
    const sp_loader_config *c = &ld->cfg;
    if (!c->split && !c->subset) return SP_OK;
    if (sp__dataset_mix_sources(ld->ds))
        return sp_error_set(err, SP_EINVAL, "%s: a mixture cannot be split (split its sources "
                            "into lists and mix those)", ld->dataset_path);
    if (!c->split || !c->subset)
        return sp_error_set(err, SP_EINVAL, "%s", c->split ? "--split needs --subset NAME (the "
                            "subset to load)" : "--subset needs --split NAME=FRACTION,...");
    int rc = sp_split_parse(c->split, c->split_seed, &ld->split, err);
    if (rc != 0) return rc;
    int k = sp_split_find(&ld->split, c->subset);
    if (k < 0) {
        char names[SP_SPLIT_MAX * SP_SPLIT_NAME_MAX + 64];
        size_t len = 0;
        names[0] = '\0';
        for (int i = 0; i < ld->split.n; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                    ld->split.name[i]);
        return sp_error_set(err, SP_EINVAL, "subset \"%s\" is not in split \"%s\" (subsets: %s)",
                            c->subset, c->split, names);
    }
    uint64_t n = sp__dataset_size(ld->ds);
    ld->map = malloc((n ? n : 1) * sizeof *ld->map);
    if (!ld->map) return sp_error_set(err, SP_ENOMEM, "loader: out of memory");
    ld->nmap = 0;
    for (uint64_t i = 0; i < n; i++)
        if (sp_split_assign(&ld->split, sp_dataset_path(ld->ds, i)) == k) ld->map[ld->nmap++] = i;
    if (ld->nmap == 0)
        return sp_error_set(err, SP_EINVAL, "%s: subset \"%s\" of split \"%s\" is empty "
                            "(%llu samples)", ld->dataset_path, c->subset, c->split,
                            (unsigned long long)n);
    return SP_OK;
}


/* dataset_samples.c - the in-memory sample list source (sp_dataset_open_list(),
 * include/seedpipe/dataset.h): a torch Subset or ConcatDataset of image
 * folders handed over as (path, label) pairs, without a temporary file.
 *
 * The list is checked entry by entry (a NULL or empty path, a label outside
 * [0, num_classes) is SP_EINVAL naming the entry), copied into entries in
 * the order given, which is the dataset's canonical order (no sorting;
 * duplicates are their own samples), and handed to sp__ds_finish_listed()
 * (dataset_index.c), which packs it and hashes every file: no persistent
 * index, since a sidecar records the sorted samples of one root. A missing
 * file fails the open with SP_EIO naming the path and "(sample list entry
 * I)". Called by dataset_open.c; calls down into dataset_index.c and
 * dataset_common.c only.
 */
#include "dataset/dataset_internal.h"

#include <limits.h>
#include <stdlib.h>

/* No probe: sp_dataset_open_list() (dataset_open.c) opens it by name. */
const sp__ds_driver sp__ds_driver_samples = {
    .name = "samples", .code = SP_DATASET_SAMPLES, .ops = &sp__ds_files_ops,
};

int sp__ds_open_samples(sp_dataset *ds, const sp_sample_list *list, sp_error *err) {
    if (list->count == 0)
        return sp_error_set(err, SP_EINVAL, "sample list: no samples");
    if (!list->paths || !list->labels)
        return sp_error_set(err, SP_EINVAL, "sample list: paths and labels must be set");
    if ((uint64_t)list->count > ds->max_samples)
        return sp_error_set(err, SP_ELIMIT, "sample list: %zu samples, more than the limit of "
                            "%llu", list->count, (unsigned long long)ds->max_samples);
    int32_t k = list->num_classes;
    if (k < 0 || k > SP_DS_MAX_CLASSES)
        return sp_error_set(err, SP_EINVAL, "sample list: num_classes %d (expected 0..%d)",
                            (int)k, SP_DS_MAX_CLASSES);
    int32_t max_label = -1;
    for (size_t i = 0; i < list->count; i++) {
        const char *p = list->paths[i];
        int32_t l = list->labels[i];
        if (!p || !p[0])
            return sp_error_set(err, SP_EINVAL, "sample list entry %zu: %s path", i,
                                p ? "empty" : "NULL");
        if (l < 0 || l >= (k ? k : SP_DS_MAX_CLASSES))
            return sp_error_set(err, SP_EINVAL, "sample list entry %zu (%s): label %d out of "
                                "range 0..%d", i, p, (int)l, (k ? k : SP_DS_MAX_CLASSES) - 1);
        if (l > max_label) max_label = l;
    }
    sp__ds_entries e = {0};
    int rc = SP_OK;
    for (size_t i = 0; rc == SP_OK && i < list->count; i++) {
        char *rel = sp__ds_strdup(list->paths[i]);
        int line = i < (size_t)INT_MAX ? (int)(i + 1) : 0;   /* annotate(): "entry i" */
        if (!rel || sp__ds_entries_push(&e, rel, list->labels[i], line))
            rc = sp_error_set(err, SP_ENOMEM, "sample list: out of memory");
    }
    if (rc == SP_OK) rc = sp__ds_numeric_classes(ds, k ? k : max_label + 1, err);
    if (rc == SP_OK) rc = sp__ds_finish_listed(ds, &e, err);
    sp__ds_entries_free(&e);
    return rc;
}

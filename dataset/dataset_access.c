/* dataset_access.c - what an open dataset answers (include/seedpipe/
 * dataset.h): sp_dataset_info_get(), the per-class and per-sample
 * accessors, sp__dataset_read() and sp_dataset_close(), and the one-value
 * accessors of the layers above (dataset_api_internal.h).
 *
 * Every kind keeps its own state behind its source table (ds->ops,
 * dataset_internal.h), so this file never names a kind: an entry a kind
 * leaves NULL means the shared sample table of struct sp_dataset. It sits
 * below every kind (a mixture reads, labels and closes its sources through
 * it) and below the dispatcher (dataset_open.c), and calls down only.
 *
 * Thread/fork safety: an open dataset is immutable; every function here
 * may run concurrently, sp_dataset_close() aside.
 */
#include "dataset/dataset_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- close ---------------------------------------------------------------------- */

void sp_dataset_close(sp_dataset *ds) {
    if (!ds) return;
    if (ds->ops && ds->ops->destroy) ds->ops->destroy(ds);
    if (ds->class_names)
        for (int c = 0; c < ds->num_classes; c++) free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->class_counts);
    free(ds->pool);
    free(ds->path_off);
    free(ds->labels);
    free(ds->sizes);
    free(ds->hashes);
    free(ds->verdicts);
    free(ds->aux);
    free(ds->aux_off);
    free(ds->base);
    free(ds->root);
    free(ds);
}

/* ---- the dataset as a whole ----------------------------------------------------- */

sp_dataset_kind sp__dataset_kind_of(const sp_dataset *ds) {
    return (sp_dataset_kind)sp__ds_kind(ds);
}

const char *sp__dataset_root(const sp_dataset *ds) { return ds->root; }
uint64_t sp__dataset_size(const sp_dataset *ds) { return ds->n; }
int sp__dataset_num_classes(const sp_dataset *ds) { return ds->num_classes; }
sp_digest sp__dataset_fingerprint(const sp_dataset *ds) { return ds->fingerprint; }

/* Only the WebDataset kinds (local, remote) have shards (their source
 * tables answer); a mixture keeps its sources' shards to itself. */
uint32_t sp__dataset_shard_count(const sp_dataset *ds) {
    return ds->ops->shard_count ? ds->ops->shard_count(ds) : 0;
}

int sp__dataset_raw_dims(const sp_dataset *ds, int *w, int *h) {
    if (!ds->ops->raw_dims) return SP_EINVAL;
    int rw = 0, rh = 0;
    ds->ops->raw_dims(ds, &rw, &rh);
    if (w) *w = rw;
    if (h) *h = rh;
    return SP_OK;
}

void sp__dataset_index_info_get(const sp_dataset *ds, sp_dataset_index_info *out) {
    *out = ds->index;
}

int sp_dataset_info_get(const sp_dataset *ds, sp_dataset_info *out) {
    size_t need = offsetof(sp_dataset_info, kind_name) + sizeof out->kind_name;
    if (!ds || !out || out->struct_size < need) return SP_EINVAL;
    sp_dataset_info *in = malloc(sizeof *in);   /* the index info's paths: 5 KiB */
    if (!in) return SP_ENOMEM;
    memset(in, 0, sizeof *in);
    in->struct_size = out->struct_size;
    in->kind_name = ds->driver->name;
    in->kind = (int)sp__ds_kind(ds);
    in->root = ds->root;
    in->size = ds->n;
    in->num_classes = ds->num_classes;
    in->class_counts = ds->class_counts;
    in->fingerprint = ds->fingerprint;
    in->shard_count = sp__dataset_shard_count(ds);
    sp__dataset_raw_dims(ds, &in->raw_w, &in->raw_h);
    in->mix_length = ds->n;
    in->index = ds->index;
    if (ds->ops->info) ds->ops->info(ds, in);   /* a mixture's sources and length */
    size_t n = out->struct_size < sizeof *in ? out->struct_size : sizeof *in;
    memcpy(out, in, n);
    free(in);
    return SP_OK;
}

/* ---- classes and samples -------------------------------------------------------- */

const char *sp_dataset_class_name(const sp_dataset *ds, int cls) {
    if (cls < 0 || cls >= ds->num_classes) return NULL;
    return ds->class_names[cls];
}

uint64_t sp__dataset_class_count(const sp_dataset *ds, int cls) {
    if (cls < 0 || cls >= ds->num_classes) return 0;
    return ds->class_counts[cls];
}

uint32_t sp_dataset_shard_of(const sp_dataset *ds, uint64_t i) {
    return sp__dataset_shard_count(ds) && i < ds->n ? ds->ops->shard_of(ds, i) : UINT32_MAX;
}

int sp_dataset_label(const sp_dataset *ds, uint64_t i) {
    if (i >= ds->n) return -1;
    if (ds->ops->label) return ds->ops->label(ds, i);
    return ds->labels[i];
}

const char *sp_dataset_path(const sp_dataset *ds, uint64_t i) {
    if (i >= ds->n) return NULL;
    if (ds->ops->path) return ds->ops->path(ds, i);
    return ds->pool + ds->path_off[i];
}

sp_digest sp__dataset_content_hash(const sp_dataset *ds, uint64_t i) {
    sp_digest z = {0, 0};
    if (i >= ds->n) return z;
    if (ds->ops->content_hash) return ds->ops->content_hash(ds, i);
    return ds->hashes[i];
}

/* ---- reading a sample ----------------------------------------------------------- */

int sp__dataset_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                     sp_error *err) {
    if (!ds || !out) return sp_error_set(err, SP_EINVAL, "sp__dataset_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (i >= ds->n)
        return sp_error_set(err, SP_ERANGE, "%s: sample %llu out of range (dataset has %llu)",
                            ds->root, (unsigned long long)i, (unsigned long long)ds->n);
    int rc = ds->ops->read(ds, i, out, err);
    if (rc != SP_OK) sp__sample_data_free(out);
    return rc;
}

void sp__ds_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n) {
    if (ds && ds->ops->prefetch) ds->ops->prefetch(ds, idx, n);
}

int sp__ds_is_remote(const sp_dataset *ds) {
    return ds && ds->ops->is_remote ? ds->ops->is_remote(ds) : 0;
}

int sp__ds_verdict(const sp_dataset *ds, uint64_t i, const uint8_t **aux, size_t *aux_len) {
    *aux = NULL;
    *aux_len = 0;
    if (ds->ops->verdict) return ds->ops->verdict(ds, i, aux, aux_len);
    if (!ds->verdicts || i >= ds->n || !(ds->verdicts[i] & SP_DS_CLEAN)) return 0;
    if (ds->aux && ds->aux_off[i + 1] > ds->aux_off[i]) {
        *aux = ds->aux + ds->aux_off[i];
        *aux_len = (size_t)(ds->aux_off[i + 1] - ds->aux_off[i]);
    }
    return 1;
}

void sp__sample_data_free(sp_sample_data *s) {
    if (!s) return;
    free(s->full_path);
    free(s->owned);
    memset(s, 0, sizeof *s);
}

/* dataset_api_internal.h - what the layers above (loader/, cache/, pool/)
 * use of a dataset beyond include/seedpipe/dataset.h: the read-ahead, the
 * decode verdicts, and the one-value accessors that are no longer public
 * (users call sp_dataset_info_get() and sp_dataset_mix_source_get()).
 * Nothing here shows a dataset's fields or a kind's state: those stay
 * behind dataset_internal.h, which only dataset/ includes.
 *
 * Not installed, not part of the API.
 */
#ifndef SEEDPIPE_DATASET_API_INTERNAL_H
#define SEEDPIPE_DATASET_API_INTERNAL_H

#include "seedpipe/dataset.h"

#include <stddef.h>
#include <stdint.h>

/* The decode verdict of a file's bytes (dataset_index.c "Verdicts"): the
 * checker is augment's sp__image_check(), handed down by the layer above
 * both (loader/loader.c) through sp__ds_set_checker(), since this layer
 * may not call augment/. Besides 1 (clean) or 0 it may give a malloc'd
 * table of what the decoder can reuse of a clean file (*aux, *aux_len: a
 * JPEG's entropy checkpoints; NULL, 0: none), kept with the verdict. */
typedef int (*sp__ds_checker)(const uint8_t *buf, size_t len, uint8_t **aux, size_t *aux_len);
void sp__ds_set_checker(sp__ds_checker fn);

/* dataset_access.c: read ahead the samples idx[0..n) of a remote dataset
 * (nothing for a local one); 1 if ds is remote. For the loader and the pool. */
void sp__ds_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n);
int sp__ds_is_remote(const sp_dataset *ds);
/* dataset_access.c: 1 if sample i's bytes decoded without error in full
 * when they were indexed (SP_DS_CLEAN, kept with their content hash), and
 * then the checker's table of those bytes in *aux, *aux_len (NULL, 0:
 * none; owned by ds). The loader asks after a successful
 * sp__dataset_read() of i (which re-hashed the bytes), and then lets a
 * JPEG crop stop after its last row and start at its checkpoint. */
int sp__ds_verdict(const sp_dataset *ds, uint64_t i, const uint8_t **aux, size_t *aux_len);

/* dataset_access.c: one field of sp_dataset_info each (the library's own
 * callers; the same values, the same out-of-range answers as the info). */
sp_dataset_kind sp__dataset_kind_of(const sp_dataset *ds);
const char *sp__dataset_kind_name(sp_dataset_kind k);   /* "unknown" for no kind */
const char *sp__dataset_root(const sp_dataset *ds);
uint64_t sp__dataset_size(const sp_dataset *ds);
uint32_t sp__dataset_shard_count(const sp_dataset *ds);
int sp__dataset_num_classes(const sp_dataset *ds);
uint64_t sp__dataset_class_count(const sp_dataset *ds, int cls);
sp_digest sp__dataset_fingerprint(const sp_dataset *ds);
int sp__dataset_raw_dims(const sp_dataset *ds, int *w, int *h);   /* SP_EINVAL: none */
void sp__dataset_index_info_get(const sp_dataset *ds, sp_dataset_index_info *out);

/* dataset_mix.c: one field of sp_mix_source each; sp__dataset_mix_length()
 * is sp__dataset_size() for another dataset, the others 0 / NULL /
 * SP_EINVAL / -1 there. sp__dataset_mix_locate(): which source mixture
 * sample i belongs to and its index there (source 0 and i for another
 * dataset; SP_ERANGE for i >= size). */
uint32_t sp__dataset_mix_sources(const sp_dataset *ds);
const sp_dataset *sp__dataset_mix_source(const sp_dataset *ds, uint32_t s);
int sp__dataset_mix_weight(const sp_dataset *ds, uint32_t s, uint64_t *num, uint64_t *den);
uint64_t sp__dataset_mix_length(const sp_dataset *ds);
int sp__dataset_mix_locate(const sp_dataset *ds, uint64_t i, uint32_t *source, uint64_t *local);
int sp__dataset_mix_class_offset(const sp_dataset *ds, uint32_t s);

#endif

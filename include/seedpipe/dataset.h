/* seedpipe/dataset.h - dataset index: canonical sample order, labels, fingerprint.
 *
 * Three kinds, detected by sp_dataset_open():
 *  - ImageFolder (a directory): one sub-folder per class, files ending in
 *    .png .jpg .jpeg (any case), as torchvision's ImageFolder. Class id =
 *    index of the class folder name in byte-wise sorted order; samples in
 *    byte-wise sorted order of their relative path ("class/file").
 *    Hidden entries (leading '.') are ignored; nested folders inside a class
 *    are walked recursively.
 *  - IDX (a file named *-images-idx3-ubyte or *-images.idx3-ubyte, optionally
 *    .gz): MNIST / Fashion-MNIST; labels from the sibling file with
 *    "images-idx3" replaced by "labels-idx1". Samples in file order; class
 *    names are the label numbers "0".."9". Pixels are kept in memory.
 *  - List file (any other regular file): one `path<TAB>label` per line,
 *    path relative to the list file's folder (or absolute), label a
 *    non-negative integer; '#' comments and blank lines ignored. Samples in
 *    byte-wise sorted path order (duplicate paths are an error).
 *
 * Fingerprint (XXH3-128, streamed): kind, sample count, then for every
 * sample in canonical order its relative path, label and the XXH3-128 of its
 * content bytes; class names too. Opening reads every file once to hash it.
 *
 * Thread/fork safety: an open sp_dataset is immutable; sp_dataset_read()
 * may be called concurrently from threads and from forked children.
 */
#ifndef SEEDPIPE_DATASET_H
#define SEEDPIPE_DATASET_H

#include "seedpipe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SP_DATASET_IMAGEFOLDER = 0,
    SP_DATASET_IDX = 1,
    SP_DATASET_LIST = 2
} sp_dataset_kind;

typedef struct sp_dataset sp_dataset;

/* Bounds applied while opening (hostile IDX headers, huge lists). */
typedef struct sp_dataset_limits {
    uint64_t max_samples;     /* default 1<<31 */
    uint64_t max_file_bytes;  /* per sample file, default 256 MiB */
} sp_dataset_limits;

/*! sp_dataset_open() : index the dataset at `path` (limits may be NULL).
 *  @return 0, SP_EIO (unreadable root or file: path and strerror),
 *  SP_EFORMAT (malformed IDX/list: path, line or offset, reason),
 *  SP_ELIMIT, SP_ENOMEM. An ImageFolder with no images is SP_EFORMAT. */
int sp_dataset_open(const char *path, const sp_dataset_limits *limits,
                    sp_dataset **out, sp_error *err);
void sp_dataset_destroy(sp_dataset *ds);   /* accepts NULL */

sp_dataset_kind sp_dataset_kind_of(const sp_dataset *ds);
const char *sp_dataset_kind_name(sp_dataset_kind k);  /* "imagefolder", "idx", "list" */
const char *sp_dataset_root(const sp_dataset *ds);
uint64_t sp_dataset_size(const sp_dataset *ds);
int sp_dataset_num_classes(const sp_dataset *ds);
const char *sp_dataset_class_name(const sp_dataset *ds, int cls);
/*! sp_dataset_class_count() : number of samples with label cls. */
uint64_t sp_dataset_class_count(const sp_dataset *ds, int cls);
int sp_dataset_label(const sp_dataset *ds, uint64_t i);
/*! sp_dataset_path() : the sample's relative path ("class/file.png") or, for
 *  IDX, "<images file>#<index>". Owned by ds. */
const char *sp_dataset_path(const sp_dataset *ds, uint64_t i);
sp_digest sp_dataset_fingerprint(const sp_dataset *ds);
/*! sp_dataset_raw_dims() : for IDX, the common image size (w, h, 1 channel);
 *  returns SP_EINVAL for encoded-file datasets. */
int sp_dataset_raw_dims(const sp_dataset *ds, int *w, int *h);

/* One sample's input. For encoded datasets `bytes` is a malloc'd copy of the
 * file; for IDX `raw` points into the dataset (no copy). */
typedef struct sp_sample_data {
    sp_sample_src src;   /* what sp_pipeline_run() takes */
    char *full_path;     /* absolute or root-joined path, for messages */
    uint8_t *owned;      /* file bytes to free */
    sp_image raw_view;
} sp_sample_data;

/*! sp_dataset_read() : load sample i. The content is re-checked against the
 *  hash taken at open: a file that changed since is SP_EMISMATCH ("file
 *  changed since the dataset was indexed"), never silently used.
 *  @return 0, SP_EIO, SP_EMISMATCH, SP_ERANGE. */
int sp_dataset_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                    sp_error *err);
void sp_sample_data_free(sp_sample_data *s);   /* accepts NULL */

#ifdef __cplusplus
}
#endif
#endif

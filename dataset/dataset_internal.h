/* dataset_internal.h - the private layout of sp_dataset, the kinds' drivers
 * and source tables, and the helpers the dataset kinds share (the
 * WebDataset kind's own state and functions: dataset_tar.h). Only dataset/
 * includes it; the layers above use dataset_api_internal.h.
 *
 * The files form a one-way stack; each calls only the ones below it:
 *
 *   dataset_tar_write.c   the shard writer (`seedpipe shard`): reads samples
 *                         through sp__dataset_read()
 *   dataset_tokens_write.c  the token-corpus writer (seedpipe/tokens.h): calls
 *                         common/ only
 *   dataset_open.c        sp_dataset_open(): walks the driver table, opens
 *                         with the first driver whose probe claims the path,
 *                         computes the fingerprint; sp_dataset_open_list()
 *   dataset_drivers.c     the driver table: one line a kind, in detection order
 *   dataset_mix.c         the kinds, each one file ending in its driver (a  \
 *   dataset_mix_parse.c   few with helpers of their own): a mixture (its     |
 *   dataset_fake.c        sources opened through req->open, a pointer, not a |
 *   dataset_tokens.c      call up), generated images, token corpora          |
 *   dataset_tokens_read.c (local or remote), remote shards, local shards,    |
 *   dataset_remote.c      ImageFolder, IDX, list files, the in-memory sample |
 *   dataset_tar_open.c    list                                               |
 *   dataset_folder.c                                                         |
 *   dataset_idx.c                                                            |
 *   dataset_list.c                                                           |
 *   dataset_samples.c                                                       /
 *   dataset_object.c      the dataset index object (seedpipe.index): encode,
 *                         decode; sp_dataset_write_index()
 *   dataset_coco*.c       COCO annotations and the shards' @json targets
 *   dataset_access.c      what an open dataset answers: sp_dataset_info_get(),
 *                         the accessors, sp__dataset_read(), close, all
 *                         through the kind's source table (ds->ops)
 *   remote.c              requests through libcurl (remote_internal.h), over
 *   remote_config.c       URLs and the protocol table (remote_http.c, remote_s3.c)
 *   dataset_files.c       the encoded files' source table (folder, list, samples)
 *   dataset_tar.c         WebDataset shards, read once (the tar reader)
 *   dataset_tar_read.c    one WebDataset sample's read
 *   dataset_tar_index.c   the shard sample table and its per-shard index file
 *   dataset_index.c       sp__ds_finish_files(): sort, pack and hash the
 *                         collected files, with the persistent index
 *   dataset_cache_dir.c   the user's cache folder the indexes live in
 *   dataset_common.c      strings, entries, sample arrays, fd hashing, byte
 *                         buffers, ds->base
 *
 * The encoded-file kinds (folder, list) collect (relative path, label)
 * pairs into an sp__ds_entries and hand them to sp__ds_finish_files(),
 * which sorts, checks for duplicates, packs the index and hashes the files
 * (or takes their hashes from the persistent index); IDX and WebDataset
 * fill the arrays themselves.
 *
 * ADDING A KIND: a new file ending in `const sp__ds_driver
 * sp__ds_driver_NAME = {...}` (below: name, number, round, probe, open,
 * source table), its state a struct of its own behind ds->state, and one
 * X(NAME) line in dataset_drivers.c at its place in the detection order.
 * The dispatcher, the accessors, sp__dataset_read() and close call through
 * ds->ops and never name a kind; what every kind has (the sample table
 * below, the classes, the limits, the persistent index's report) stays in
 * struct sp_dataset.
 *
 * Not installed, not part of the API: names are sp__ds_*.
 */
#ifndef SEEDPIPE_DATASET_INTERNAL_H
#define SEEDPIPE_DATASET_INTERNAL_H

#include "seedpipe/dataset.h"
#include "dataset/dataset_api_internal.h"   /* the accessors, read-ahead, verdicts */
#include "common/sbuf_internal.h"   /* sp__sbuf: the index files' buffer */

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* Label values of list files are bounded so that a hostile list cannot make
 * us allocate a huge class table: labels are 0 .. SP_DS_MAX_CLASSES-1. */
#define SP_DS_MAX_CLASSES 65536
/* IDX label files name the ten classes "0".."9" (MNIST, Fashion-MNIST). */
#define SP_DS_IDX_CLASSES 10
/* Defaults for sp_dataset_limits fields left at 0. */
#define SP_DS_DEFAULT_MAX_SAMPLES (UINT64_C(1) << 31)
#define SP_DS_DEFAULT_MAX_FILE_BYTES (UINT64_C(256) << 20)
/* A list file itself may not be larger than this. */
#define SP_DS_MAX_LIST_BYTES (UINT64_C(1) << 30)

/* A kind's source table: what dataset_access.c calls for a sample (i < ds->n);
 * its opener sets ds->ops. read is required; a NULL entry means the
 * sample table of struct sp_dataset (label, path, content_hash), nothing
 * to free (destroy), nothing to fetch ahead (prefetch), a local dataset
 * (is_remote) or one without shards (shard_count, shard_of). */
typedef struct sp__ds_ops {
    int (*label)(const sp_dataset *ds, uint64_t i);
    const char *(*path)(const sp_dataset *ds, uint64_t i);
    sp_digest (*content_hash)(const sp_dataset *ds, uint64_t i);
    /* out is zeroed and i in range; on failure out is freed by the caller */
    int (*read)(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err);
    void (*destroy)(sp_dataset *ds);   /* frees the kind's own state, not ds itself */
    /* sp__ds_prefetch() and sp__ds_is_remote() (below) of such a dataset */
    void (*prefetch)(const sp_dataset *ds, const uint64_t *idx, size_t n);
    int (*is_remote)(const sp_dataset *ds);
    /* sp__dataset_shard_count() and sp_dataset_shard_of() (NULL: no shards) */
    uint32_t (*shard_count)(const sp_dataset *ds);
    uint32_t (*shard_of)(const sp_dataset *ds, uint64_t i);
    /* sp__ds_verdict() of a mixture (NULL: ds->verdicts, ds->aux) */
    int (*verdict)(const sp_dataset *ds, uint64_t i, const uint8_t **aux, size_t *aux_len);
    /* the kind's own fingerprint (NULL: dataset_open.c's, over the sample table) */
    int (*fingerprint)(const sp_dataset *ds, sp_digest *out, sp_error *err);
    /* sp__dataset_raw_dims(), the images' common size, also hashed in the
     * fingerprint (NULL: encoded files, no common size: 0, 0) */
    void (*raw_dims)(const sp_dataset *ds, int *w, int *h);
    /* the kind's own fields of sp_dataset_info_get() (NULL: none; a
     * mixture's sources and length) */
    void (*info)(const sp_dataset *ds, sp_dataset_info *info);
} sp__ds_ops;

/* The source tables of the kinds whose state is not their own file's alone:
 * the encoded files (folder, list, sample list: dataset_files.c). */
extern const sp__ds_ops sp__ds_files_ops;

struct sp_dataset {
    const struct sp__ds_driver *driver;   /* the kind (set by the dispatcher) */
    const sp__ds_ops *ops;     /* the kind's source table (set by its opener) */
    /* The kind's own state (its file's struct), NULL until its opener makes
     * it; only the kind's files read it: the dispatcher calls ops. */
    void *state;
    char *root;            /* the path given to sp_dataset_open (trailing '/' removed) */
    char *base;            /* folder that relative sample paths are joined to */
    uint64_t max_samples;
    uint64_t max_file_bytes;

    uint64_t n;            /* number of samples */
    int num_classes;
    char **class_names;    /* num_classes strings */
    uint64_t *class_counts;

    char *pool;            /* all sample paths, NUL-separated */
    size_t *path_off;      /* n offsets into pool */
    int32_t *labels;       /* n labels in [0, num_classes) */
    uint64_t *sizes;       /* n content sizes in bytes */
    sp_digest *hashes;     /* n XXH3-128 of the content bytes */

    sp_digest fingerprint;

    /* The persistent index (dataset_index.c). */
    sp_index_mode index_mode;
    int hash_threads;
    sp_dataset_index_info index;
    /* n decode verdicts kept with the index records (SP_DS_CHECKED, and
     * SP_DS_CLEAN: a full decode succeeded), or NULL: none known */
    uint8_t *verdicts;
    /* the checker's tables of the clean files, kept with the verdicts:
     * sample i's is aux[aux_off[i] .. aux_off[i + 1]) (NULL: none) */
    uint8_t *aux;
    uint64_t *aux_off;
};

/* The largest checker table kept for one file (a longer one is dropped). */
#define SP_DS_AUX_MAX 4096u

/* A file's checker table while the index is merged and hashed: in the
 * loaded index's bytes, or malloc'd by the checker (owned). */
typedef struct sp__ds_aux {
    const uint8_t *p;
    size_t len;
    int owned;
} sp__ds_aux;

/* The decode verdict of a file's bytes (dataset_index.c "Verdicts"): the
 * checker is augment's sp__image_check(), handed down by the layer above
 * both (loader/loader.c) through sp__ds_set_checker(), since this layer
 * may not call augment/ (dataset_api_internal.h). */
#define SP_DS_CHECKED 2u
#define SP_DS_CLEAN 4u

/* One collected sample of an encoded-file dataset before packing. */
typedef struct sp__ds_entry {
    char *rel;       /* relative (or, for lists, possibly absolute) path; owned */
    int32_t label;
    int line;        /* list files: 1-based line number; 0 otherwise */
} sp__ds_entry;

typedef struct sp__ds_entries {
    sp__ds_entry *v;
    size_t n, cap;
} sp__ds_entries;

/* dataset_common.c, up to sp__ds_hash_fd() below.
 * Append (takes ownership of rel, frees it on failure). @return 0 / SP_ENOMEM. */
int sp__ds_entries_push(sp__ds_entries *e, char *rel, int32_t label, int line);
void sp__ds_entries_free(sp__ds_entries *e);

/* c in ASCII lower case (no locale decides a file name's meaning). */
static inline int sp__ds_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

/* malloc'd copy / "a/b" join (b returned as a copy when absolute). NULL on OOM. */
char *sp__ds_strdup(const char *s);
char *sp__ds_join(const char *a, const char *b);
/* out->full_path (and out->src.path): ds->base joined with sample i's path,
 * what a kind's read names in messages. @return 0 / SP_ENOMEM. */
int sp__ds_sample_path(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err);

/* 1 if ext (the text after a file or member name's dot, without it) is an
 * image extension the decoders take: "png", "jpg" or "jpeg", in any ASCII
 * case; else 0. The one image-extension check of the folder and tar kinds
 * (each finds the extension by its own rule: a file's last dot, a tar
 * member's first). */
int sp__ds_is_image_ext(const char *ext);

/* dataset_index.c: sort the entries byte-wise by path, refuse duplicates
 * (naming both list lines), hash every file under ds->base (from the
 * persistent index where a file's stat is unchanged), fill ds->pool/
 * path_off/labels/sizes/hashes/class_counts. ds->num_classes and class_names must be set;
 * every label must be below num_classes. Frees the entries' strings (the
 * entries array itself is left to the caller). */
int sp__ds_finish_files(sp_dataset *ds, sp__ds_entries *e, const char *what,
                        sp_error *err);

/* dataset_index.c: as sp__ds_finish_files(), but the entries keep their
 * order (duplicates allowed) and every file is hashed (no persistent
 * index): the in-memory sample list (dataset_samples.c). */
int sp__ds_finish_listed(sp_dataset *ds, sp__ds_entries *e, sp_error *err);

/* Allocate ds->pool (pool_len bytes), path_off, labels, sizes, hashes (n
 * each) and class_counts (num_classes, zeroed); sets ds->n.
 * @return 0 / SP_ENOMEM (what was allocated is freed by destroy). */
int sp__ds_alloc_samples(sp_dataset *ds, size_t n, size_t pool_len, sp_error *err);

/* The index files (dataset_index.c: the files' sidecar; dataset_tar_index.c: one
 * beside each shard) share these. A record whose mtime or ctime is within
 * SP_DS_RACY_NS of the moment the stats were taken cannot be trusted later
 * (coarse timestamps, clock skew). */
#define SP_DS_RACY_NS (2000000000ll)

/* dataset_cache_dir.c: the user's index cache folder (SEEDPIPE_CACHE, else
 * $XDG_CACHE_HOME/seedpipe, else ~/.cache/seedpipe) into dir (n >= 4096):
 * made 0700 where missing, checked (this user's, writable by no one
 * else). @return 0, or -1 with why (a sentence naming the folder) filled:
 * the caller keeps no index then, never fails. */
int sp__ds_cache_dir(char *dir, size_t n, char *why, size_t wn);

/* dataset_cache_dir.c: the path of the entry in cache folder dir of the
 * dataset root, list file or shard at `path`, kind `tag` ("files", "tar"):
 * dir/tag-HEX, HEX the XXH3-128 of (tag, realpath, device and inode of the
 * folder). @return 0, or -1 (path unresolvable: out is ""). */
int sp__ds_cache_entry(const char *dir, const char *tag, const char *path, char *out,
                       size_t n);

/* A struct timespec in nanoseconds. */
static inline uint64_t sp__ds_ns(struct timespec t) {
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A file's stat as the persistent index keeps it (dataset_index.c). */
typedef struct sp__ds_rec {
    uint64_t dev, ino, size, mtime, ctime;
} sp__ds_rec;

static inline sp__ds_rec sp__ds_rec_of(const struct stat *st) {
    sp__ds_rec r = {(uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
                    sp__ds_ns(st->st_mtim), sp__ds_ns(st->st_ctim)};
    return r;
}

/* dataset_hash.c: hash the files todo[0..ntodo) (sample indices, ascending)
 * into ds->sizes/hashes and their stats into recs, in threads
 * (ds->hash_threads; 0: the online CPUs, at most 8); with a checker, each
 * file is read whole, its verdict set in ds->verdicts and its table in
 * aux[i] (owned; aux may be NULL only without a checker). On failure
 * *failed is the first failing sample in canonical order and err its
 * error. */
int sp__ds_hash_all(sp_dataset *ds, const uint64_t *todo, uint64_t ntodo, sp__ds_rec *recs,
                    sp__ds_checker check, sp__ds_aux *aux, uint64_t *failed, sp_error *err);

/* The index files' little-endian fields, appended to common's growable
 * buffer (sp__sbuf: an allocation failure sets oom and makes every later
 * append a no-op; the caller checks oom once). */
void sp__ds_buf_u32(sp__sbuf *b, uint32_t v);
void sp__ds_buf_u64(sp__sbuf *b, uint64_t v);
void sp__ds_buf_str(sp__sbuf *b, const char *s);   /* u32 length + bytes; NULL: "" */

/* Class names "0".."k-1" (for IDX and list files). */
int sp__ds_numeric_classes(sp_dataset *ds, int k, sp_error *err);

/* XXH3-128 (seed 0) of an open file descriptor's bytes, read to EOF in
 * chunks; refuses more than max_bytes with SP_ELIMIT. `path` names the file
 * in messages. */
int sp__ds_hash_fd(int fd, const char *path, uint64_t max_bytes,
                   uint64_t *size, sp_digest *digest, sp_error *err);

/* ---- the kinds' drivers -------------------------------------------------------

 * A kind is a driver: one const sp__ds_driver in the kind's own file,
 * listed once in dataset_drivers.c's table. sp_dataset_open()
 * (dataset_open.c) walks the table in order and opens the path with the
 * first driver whose probe claims it; nothing else in the layer names a
 * kind. The walk has two rounds: first the drivers with local == 0, on the
 * path as given (URLs, "fakedata:...", brace patterns, names that need no
 * stat); then, for an existing local folder or regular file (an error
 * naming the path otherwise), ds->base set, the drivers with local == 1. */

/* What a probe sees, and what an opener may use. */
typedef struct sp__ds_req {
    const char *path;       /* as given to sp_dataset_open() */
    const char *root;       /* ds->root: trailing '/' removed (not for URLs) */
    const char *leaf;       /* root's last component */
    int url;                /* path is a URL (s3://, http://, https://) */
    /* the second round only: */
    int is_dir;             /* a folder (else a regular file) */
    int shards, folders;    /* a folder: its .tar files and sub-folders (sp__ds_dir_kind) */
    const sp_dataset_limits *limits;
    /* the dispatcher's own open, for a kind made of other datasets (a
     * mixture's sources): a pointer, so that no kind calls up into it */
    int (*open)(const char *path, const sp_dataset_limits *limits, sp_dataset **out,
                sp_error *err);
} sp__ds_req;

typedef struct sp__ds_driver {
    const char *name;   /* sp_dataset_info's kind_name: "imagefolder", "webdataset", ... */
    uint32_t code;      /* the kind's number (sp_dataset_kind; hashed in fingerprints and
                         * index files): a new kind takes the next one free */
    int local;          /* 1: probed in the second round (above) */
    /* 1: the path is this kind's; 0: not; < 0: an error code, err set (the
     * path can be no other kind's). NULL: never detected (opened by its own
     * entry point: the in-memory sample list). */
    int (*probe)(const sp__ds_req *rq, sp_error *err);
    /* fill ds (zeroed but root, base (second round), limits, driver and
     * ops = this ops); on failure ds is closed by the caller */
    int (*open)(sp_dataset *ds, const sp__ds_req *rq, sp_error *err);
    const sp__ds_ops *ops;
} sp__ds_driver;

/* dataset_drivers.c: the table, in probe order, NULL-terminated. */
extern const sp__ds_driver *const sp__ds_drivers[];

/* The kind's number (sp_dataset_kind for the kinds dataset.h lists). */
static inline uint32_t sp__ds_kind(const sp_dataset *ds) { return ds->driver->code; }

/* dataset_common.c: ds->base, the absolute, resolved folder sample paths
 * are relative to: the root itself (is_dir), else the folder holding it. */
int sp__ds_set_base(sp_dataset *ds, int is_dir, sp_error *err);

/* dataset_samples.c: the in-memory sample list's driver and opener
 * (sp_dataset_open_list()). */
extern const sp__ds_driver sp__ds_driver_samples;
int sp__ds_open_samples(sp_dataset *ds, const sp_sample_list *list, sp_error *err);
/* dataset_tar.c: 1 if path is a brace pattern ("dir/train-{000000..000099}.tar");
 * the count of .tar files and of sub-folders directly in dir. */
int sp__ds_is_shard_pattern(const char *path);
int sp__ds_dir_kind(const char *dir, int *shards, int *folders, sp_error *err);


/* ---- Internal to the library: once seedpipe/dataset.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__dataset_content_hash() : XXH3-128 of sample i's content as indexed
 *  (file bytes, or IDX pixels); {0, 0} when i is out of range. */
sp_digest sp__dataset_content_hash(const sp_dataset *ds, uint64_t i);

/*! sp__dataset_read() : load sample i. The content is re-checked against the
 *  hash taken at open: a file that changed since is SP_EMISMATCH ("file
 *  changed since the dataset was indexed"), never silently used.
 *  @return 0, SP_EIO, SP_EMISMATCH, SP_ERANGE, SP_ENOMEM. On failure *out
 *  is left zeroed (nothing to free). Free with sp__sample_data_free(). */
int sp__dataset_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                     sp_error *err);

/*! sp__dataset_write_shards() : write the samples of an ImageFolder or list
 *  dataset, in canonical order, as WebDataset shards OUT_DIR/shard-000000.tar,
 *  ... of at most max_count samples each (members "%09llu.<ext>" and
 *  "%09llu.cls"; fixed tar metadata, so the bytes depend only on the
 *  samples). The sharded dataset streams the same batches as ds. OUT_DIR is
 *  created if missing and must not hold .tar files yet; each shard is
 *  written to a temporary name, fsync'd and renamed. *nshards (may be NULL)
 *  gets the count written. @return 0, SP_EUNSUPP (IDX), SP_EINVAL, SP_EIO,
 *  or a read error of a sample (which names it). */
int sp__dataset_write_shards(const sp_dataset *ds, const char *out_dir,
                             uint64_t max_count, uint64_t *nshards, sp_error *err);

void sp__sample_data_free(sp_sample_data *s);   /* accepts NULL */

#ifdef __cplusplus
}
#endif

#endif

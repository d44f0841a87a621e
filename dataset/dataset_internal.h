/* dataset_internal.h - the private layout of sp_dataset and the helpers that
 * the dataset sources share.
 *
 * The files form a one-way stack; each calls only the ones below it:
 *
 *   dataset_tar_write.c   the shard writer (`seedpipe shard`): reads samples
 *                         through sp_dataset_read()
 *   dataset_mix.c         sp_dataset_open(): a weighted mixture (NAME.mix),
 *                         its sources opened through sp__ds_open_plain(), its
 *                         schedule; anything else handed to sp__ds_open_plain()
 *   dataset.c             the dispatcher: kind detection, the accessors, the
 *                         fingerprint, sp_dataset_read(), destroy
 *   dataset_remote.c      WebDataset shards in an object store or on an HTTP
 *                         server: opened from the dataset index object
 *   dataset_object.c      the dataset index object (seedpipe.index): encode,
 *                         decode; sp_dataset_write_index()
 *   remote.c              requests through libcurl (remote_internal.h), over
 *   remote_config.c       URLs, S3 settings and credentials
 *   dataset_folder.c      ImageFolder directory walk    \
 *   dataset_list.c        `path<TAB>label` list files    |  the per-kind
 *   dataset_samples.c     an in-memory sample list       |  openers: each
 *   dataset_idx.c         MNIST-style IDX files          |  fills an
 *   dataset_tar.c         WebDataset shards, read once   |
 *   dataset_tar_read.c    one WebDataset sample's read  /   sp_dataset
 *   dataset_tar_index.c   the shard sample table and its per-shard index file
 *   dataset_index.c       sp__ds_finish_files(): sort, pack and hash the
 *                         collected files, with the persistent index
 *   dataset_common.c      strings, entries, sample arrays, fd hashing, byte
 *                         buffers, the atomic file write
 *
 * The encoded-file kinds (folder, list) collect (relative path, label)
 * pairs into an sp__ds_entries and hand them to sp__ds_finish_files(),
 * which sorts, checks for duplicates, packs the index and hashes the files
 * (or takes their hashes from the persistent index); IDX and WebDataset
 * fill the arrays themselves.
 *
 * A kind whose samples are not in the arrays below (a mixture) sets ds->ops,
 * its source table: dataset.c's accessors, sp_dataset_read() and destroy
 * call through it, so the dispatcher never names the kind's functions (and
 * the mixture, which opens its sources through dataset.c, stays above it).
 *
 * Not installed, not part of the API: names are sp__ds_*.
 */
#ifndef SEEDPIPE_DATASET_INTERNAL_H
#define SEEDPIPE_DATASET_INTERNAL_H

#include "seedpipe/dataset.h"
#include "common/sbuf_internal.h"   /* sp__sbuf: the index files' buffer */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct stat;

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

/* The source table of a kind that keeps its samples elsewhere (dataset_mix.c):
 * what dataset.c calls instead of reading its own arrays; i < ds->n. */
typedef struct sp__ds_ops {
    int (*label)(const sp_dataset *ds, uint64_t i);
    const char *(*path)(const sp_dataset *ds, uint64_t i);
    sp_digest (*content_hash)(const sp_dataset *ds, uint64_t i);
    int (*read)(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err);
    void (*destroy)(sp_dataset *ds);   /* frees what the kind owns, not ds itself */
    /* sp__ds_prefetch() and sp__ds_is_remote() (below) of such a dataset */
    void (*prefetch)(const sp_dataset *ds, const uint64_t *idx, size_t n);
    int (*is_remote)(const sp_dataset *ds);
} sp__ds_ops;

struct sp_dataset {
    sp_dataset_kind kind;
    const sp__ds_ops *ops;     /* NULL: the arrays below hold the samples */
    struct sp__ds_mix *mix;    /* a mixture's own state (dataset_mix.c); else NULL */
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

    /* IDX only: n images of raw_h x raw_w gray pixels, one after another. */
    int raw_w, raw_h;
    uint8_t *pixels;
    char *idx_file;        /* the images file as opened, for messages */

    sp_digest fingerprint;

    /* WebDataset shards only (dataset_tar.c): the shards (relative to base,
     * sorted), where each sample's image member lies, and the samples that
     * fail when read (sorted by index). */
    char **shards;
    size_t nshards;
    uint64_t *shard_sizes;    /* bytes of each shard as read (the dataset index object) */
    _Atomic int *shard_fds;   /* opened on first read (0: not yet; fd + 1), kept to destroy */
    uint32_t *shard_of;
    uint64_t *offsets;
    struct sp__ds_bad *bad;
    size_t nbad;

    /* A remote dataset (dataset_remote.c): the store the shards are in;
     * NULL for local ones. */
    struct sp__rio *rio;
    uint64_t pf_owner;        /* its prefetches' owner id (remote.c) */
    char *shard_cache;        /* SEEDPIPE_SHARD_CACHE resolved, or NULL (dataset_shard_cache.c) */
    uint64_t shard_cache_bytes;
    sp_digest *shard_cache_keys;   /* each shard's name there */

    /* The persistent index (dataset_index.c). */
    sp_index_mode index_mode;
    int hash_threads;
    sp_dataset_index_info index;
};

/* A WebDataset sample that cannot be read, and why ("shard/member: reason"). */
typedef struct sp__ds_bad {
    uint64_t i;
    char *msg;
} sp__ds_bad;

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

/* malloc'd copy / "a/b" join (b returned as a copy when absolute). NULL on OOM. */
char *sp__ds_strdup(const char *s);
char *sp__ds_join(const char *a, const char *b);

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

/* A struct timespec in nanoseconds. */
static inline uint64_t sp__ds_ns(struct timespec t) {
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

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

/* dataset.c: sp_dataset_open() of every kind but a mixture (what
 * dataset_mix.c calls for a path that is not a .mix file, and for each
 * source of one). */
int sp__ds_open_plain(const char *path, const sp_dataset_limits *limits, sp_dataset **out,
                      sp_error *err);
/* dataset.c: a zeroed dataset with root = path (trailing '/' removed) and the
 * limits applied, for an opener above dataset.c (NULL on out of memory). */
sp_dataset *sp__ds_new(const char *path, const sp_dataset_limits *limits);

/* The per-kind openers. `path` is the root as given. */
int sp__ds_open_folder(sp_dataset *ds, sp_error *err);
int sp__ds_open_idx(sp_dataset *ds, sp_error *err);
int sp__ds_open_list(sp_dataset *ds, sp_error *err);
/* dataset_samples.c: the in-memory sample list (sp_dataset_open_list()). */
int sp__ds_open_samples(sp_dataset *ds, const sp_sample_list *list, sp_error *err);

/* WebDataset shards (dataset_tar.c, dataset_tar_read.c): 1 if path is a
 * brace pattern ("dir/train-{000000..000099}.tar"); the count of .tar files and of
 * sub-folders directly in dir; the opener; one sample's read (full_path
 * set by the caller); the error recorded against sample i, or NULL. */
int sp__ds_is_shard_pattern(const char *path);
int sp__ds_dir_kind(const char *dir, int *shards, int *folders, sp_error *err);
int sp__ds_open_tar(sp_dataset *ds, sp_error *err);
/* dataset_tar.c: the shard names of a brace pattern, in order (a malloc'd
 * array of malloc'd strings, *n of them). */
int sp__ds_expand_pattern(const char *pat, char ***names, size_t *n, sp_error *err);
int sp__ds_read_tar(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err);
void sp__ds_close_shards(sp_dataset *ds);   /* the kept descriptors (destroy) */

/* A WebDataset sample as the shards are read (dataset_tar.c) or taken from
 * a shard's index file (dataset_tar_index.c), before packing. */
typedef struct sp__ds_tar_sample {
    char *path;            /* "shard/member" (or "shard/key" without an image) */
    char *key;
    int32_t label;         /* -1 until a valid .cls */
    uint32_t shard;
    uint64_t offset, size;
    sp_digest hash;
    int has_image;
    char *bad;             /* the first reason it cannot be read, or NULL */
} sp__ds_tar_sample;

typedef struct sp__ds_tar_set {
    sp__ds_tar_sample *v;
    size_t n, cap;
} sp__ds_tar_set;

/* dataset_tar_index.c: the zeroed slot t->v[t->n] (the caller fills it and
 * counts it, t->n++), or NULL on out of memory; freeing every sample. */
sp__ds_tar_sample *sp__ds_tar_set_slot(sp__ds_tar_set *t);
void sp__ds_tar_set_free(sp__ds_tar_set *t);

/* dataset_tar_index.c: the keys of one shard's samples (a hash set of
 * indices into t->v; {NULL, 0, 0} is empty; the owner frees slot), so the
 * reader checks "key seen before in this shard" in O(1) a member: find the
 * sample with a key (or NULL); reserve room for one more (SP_ENOMEM); put
 * t->v[index]'s key. */
typedef struct sp__ds_tar_keys {
    size_t *slot;
    size_t cap, n;
} sp__ds_tar_keys;
sp__ds_tar_sample *sp__ds_tar_keys_find(const sp__ds_tar_keys *ks, sp__ds_tar_set *t,
                                        const char *key, size_t len);
int sp__ds_tar_keys_reserve(sp__ds_tar_keys *ks, const sp__ds_tar_set *t);
void sp__ds_tar_keys_put(sp__ds_tar_keys *ks, const sp__ds_tar_set *t, size_t index);

/* The index file of shard `rel` (relative to ds->base): its path
 * (malloc'd, NULL on OOM); write samples [first, t->n) of the shard whose
 * stat is st (1: written; 0: not, e.g. the shard changed too recently);
 * read it back, appending the shard's samples to t (1: taken; 0: absent,
 * stale or damaged, t unchanged). */
char *sp__ds_tar_index_path(const sp_dataset *ds, const char *rel);
int sp__ds_tar_index_write(const sp_dataset *ds, const char *rel, const struct stat *st,
                           const sp__ds_tar_set *t, size_t first);
int sp__ds_tar_index_read(sp_dataset *ds, uint32_t shard, const char *rel,
                          const struct stat *st, sp__ds_tar_set *t);

/* dataset_tar.c: read one shard from the open descriptor fd, start to
 * end-of-archive, appending its samples to t (rel: its name in sample
 * paths; full: in messages; buf: TAR_READ_BUF = 1 MiB of scratch). */
int sp__ds_tar_scan_fd(sp_dataset *ds, uint32_t shard, const char *rel, const char *full,
                       int fd, sp__ds_tar_set *t, uint8_t *buf, sp_error *err);
#define SP_DS_TAR_READ_BUF (1u << 20)

/* dataset_tar_index.c: fill ds from the collected samples t (shards
 * `names`, nnames of them, with their sizes: both taken over by ds, even
 * on failure). SP_EFORMAT when there is no sample. */
int sp__ds_tar_pack(sp_dataset *ds, char **names, size_t nnames, uint64_t *sizes,
                    sp__ds_tar_set *t, sp_error *err);

/* dataset_tar_read.c: the reason sample i cannot be read, or NULL. */
const char *sp__ds_tar_bad(const sp_dataset *ds, uint64_t i);

/* dataset_remote.c: a dataset of shards in an object store or on an HTTP
 * server (ds->root a URL): open it through its dataset index object, or
 * (SP_INDEX_REBUILD) by reading every shard once; read one sample. */
int sp__ds_open_remote(sp_dataset *ds, sp_error *err);
int sp__ds_read_remote(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err);
void sp__ds_close_remote(sp_dataset *ds);
/* dataset_remote.c: start reading samples idx[0..n) on this thread (a
 * later sp_dataset_read() of one of them on this thread takes its bytes). */
void sp__ds_prefetch_remote(const sp_dataset *ds, const uint64_t *idx, size_t n);

/* dataset_shard_cache.c: the shard cache of a remote dataset
 * (SEEDPIPE_SHARD_CACHE; after its table is packed); sample i from it: 1
 * (served, hash checked), 0 (not usable: read from the store), or an
 * error (the shard's download failed). */
int sp__ds_shard_cache_setup(sp_dataset *ds, sp_error *err);
int sp__ds_shard_cache_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                            sp_error *err);

/* dataset.c: sp__ds_prefetch_remote() for a remote dataset, else nothing;
 * 1 if ds is remote. For the loader and the pool. */
void sp__ds_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n);
int sp__ds_is_remote(const sp_dataset *ds);

/* dataset_object.c: the dataset index object (seedpipe.index beside the
 * shards): encode a WebDataset's table; decode one, keeping the shards
 * `want` (NULL: all of them, their names into *all / *nall), appending
 * their samples to t and their sizes to sizes (nwant entries). */
#define SP_DS_OBJECT_NAME "seedpipe.index"
int sp__ds_object_encode(const sp_dataset *ds, sp__sbuf *b, sp_error *err);
int sp__ds_object_decode(sp_dataset *ds, const char *what, const uint8_t *d, size_t n,
                         char **want, size_t nwant, char ***all, size_t *nall,
                         uint64_t **sizes, sp__ds_tar_set *t, sp_error *err);

#endif

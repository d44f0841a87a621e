/* dataset_internal.h - the private layout of sp_dataset, the source table
 * every kind fills, and the helpers that the dataset sources share (the
 * WebDataset kind's own state and functions: dataset_tar.h).
 *
 * The files form a one-way stack; each calls only the ones below it:
 *
 *   dataset_tar_write.c   the shard writer (`seedpipe shard`): reads samples
 *                         through sp_dataset_read()
 *   dataset_tokens_write.c  the token-corpus writer (seedpipe/tokens.h): calls
 *                         common/ only
 *   dataset_mix.c         sp_dataset_open(): a weighted mixture (NAME.mix),
 *                         its sources opened through sp__ds_open_plain(), its
 *                         schedule; anything else handed to sp__ds_open_plain()
 *   dataset_open.c        the dispatcher: kind detection, the accessors, the
 *                         fingerprint; sp_dataset_read() and close call the
 *                         kind's source table
 *   dataset_remote.c      WebDataset shards in an object store or on an HTTP
 *                         server: opened from the dataset index object
 *   dataset_tokens.c      Megatron token corpora, local (mapped) or remote
 *   dataset_object.c      the dataset index object (seedpipe.index): encode,
 *                         decode; sp_dataset_write_index()
 *   remote.c              requests through libcurl (remote_internal.h), over
 *   remote_config.c       URLs, S3 settings and credentials
 *   dataset_folder.c      ImageFolder directory walk    \
 *   dataset_list.c        `path<TAB>label` list files    |  the per-kind
 *   dataset_samples.c     an in-memory sample list       |  openers: each
 *   dataset_files.c       their source table (one file)  |  fills an
 *   dataset_idx.c         MNIST-style IDX files          |  sp_dataset and
 *   dataset_fake.c        generated images (FakeData)    |
 *   dataset_tar.c         WebDataset shards, read once   |  sets its ops
 *   dataset_tar_read.c    one WebDataset sample's read  /
 *   dataset_tar_index.c   the shard sample table and its per-shard index file
 *   dataset_index.c       sp__ds_finish_files(): sort, pack and hash the
 *                         collected files, with the persistent index
 *   dataset_cache_dir.c   the user's cache folder the indexes live in
 *   dataset_common.c      strings, entries, sample arrays, fd hashing, byte
 *                         buffers, the atomic file write
 *
 * The encoded-file kinds (folder, list) collect (relative path, label)
 * pairs into an sp__ds_entries and hand them to sp__ds_finish_files(),
 * which sorts, checks for duplicates, packs the index and hashes the files
 * (or takes their hashes from the persistent index); IDX and WebDataset
 * fill the arrays themselves.
 *
 * Every kind's opener sets ds->ops, its source table (sp__ds_ops below):
 * dataset_open.c's accessors, sp_dataset_read() and sp_dataset_close() call
 * through it, so the dispatcher never names a kind's functions nor reads
 * its state. A kind keeps what is its own behind its own pointer (ds->idx,
 * ds->tar, ds->mix, ds->tok), defined in its own file; what every kind has (the
 * sample table below, the classes, the limits, the persistent index's
 * report) stays in struct sp_dataset. The mixture opens its sources
 * through dataset_open.c and so stays above it.
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

/* A kind's source table: what dataset_open.c calls for a sample (i < ds->n);
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
    /* sp_dataset_shard_count() and sp_dataset_shard_of() (NULL: no shards) */
    uint32_t (*shard_count)(const sp_dataset *ds);
    uint32_t (*shard_of)(const sp_dataset *ds, uint64_t i);
    /* sp__ds_validated() of a mixture (NULL: ds->verdicts) */
    int (*validated)(const sp_dataset *ds, uint64_t i);
    /* the kind's own fingerprint (NULL: dataset_open.c's, over the sample table) */
    int (*fingerprint)(const sp_dataset *ds, sp_digest *out, sp_error *err);
} sp__ds_ops;

/* The source tables of the kinds whose state is not their own file's alone:
 * the encoded files (folder, list, sample list: dataset_files.c). */
extern const sp__ds_ops sp__ds_files_ops;

struct sp_dataset {
    sp_dataset_kind kind;
    const sp__ds_ops *ops;     /* the kind's source table (set by its opener) */
    /* Each kind's own state, in its own files; NULL for the other kinds.
     * dataset_open.c never reads them: it calls ops. */
    struct sp__ds_idx *idx;    /* IDX (dataset_idx.c) */
    struct sp__ds_tar *tar;    /* WebDataset shards, local or remote (dataset_tar.h) */
    struct sp__ds_mix *mix;    /* a mixture (dataset_mix.c) */
    struct sp__tok *tok;       /* a token corpus (dataset_tokens.c) */
    struct sp__ds_fake *fake;  /* generated images, FakeData (dataset_fake.c) */
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

    /* IDX: the images' size (in the fingerprint); 0, 0 for the other kinds. */
    int raw_w, raw_h;

    sp_digest fingerprint;

    /* The persistent index (dataset_index.c). */
    sp_index_mode index_mode;
    int hash_threads;
    sp_dataset_index_info index;
    /* n decode verdicts kept with the index records (SP_DS_CHECKED, and
     * SP_DS_CLEAN: a full decode succeeded), or NULL: none known */
    uint8_t *verdicts;
};

/* The decode verdict of a file's bytes (dataset_index.c "Verdicts"): the
 * checker is augment's sp__image_check(), handed down by the layer above
 * both (loader/loader.c) through sp__ds_set_checker(), since this layer
 * may not call augment/. */
#define SP_DS_CHECKED 2u
#define SP_DS_CLEAN 4u
typedef int (*sp__ds_checker)(const uint8_t *buf, size_t len);
void sp__ds_set_checker(sp__ds_checker fn);

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

/* dataset_open.c: sp_dataset_open() of every kind but a mixture (what
 * dataset_mix.c calls for a path that is not a .mix file, and for each
 * source of one). */
int sp__ds_open_plain(const char *path, const sp_dataset_limits *limits, sp_dataset **out,
                      sp_error *err);
/* dataset_open.c: a zeroed dataset with root = path (trailing '/' removed) and the
 * limits applied, for an opener above dataset_open.c (NULL on out of memory). */
sp_dataset *sp__ds_new(const char *path, const sp_dataset_limits *limits);

/* The per-kind openers. `path` is the root as given. */
int sp__ds_open_folder(sp_dataset *ds, sp_error *err);
int sp__ds_open_idx(sp_dataset *ds, sp_error *err);
/* dataset_fake.c: 1 if path is a "fakedata:..." spec; its opener. */
int sp__ds_is_fake(const char *path);
int sp__ds_open_fake(sp_dataset *ds, sp_error *err);
int sp__ds_open_list(sp_dataset *ds, sp_error *err);
/* dataset_samples.c: the in-memory sample list (sp_dataset_open_list()). */
int sp__ds_open_samples(sp_dataset *ds, const sp_sample_list *list, sp_error *err);
/* Local WebDataset shards (dataset_tar.c; the reads are dataset_tar_read.c's):
 * 1 if path is a brace pattern ("dir/train-{000000..000099}.tar"); the
 * count of .tar files and of sub-folders directly in dir; the opener. */
int sp__ds_is_shard_pattern(const char *path);
int sp__ds_dir_kind(const char *dir, int *shards, int *folders, sp_error *err);
int sp__ds_open_tar(sp_dataset *ds, sp_error *err);
/* dataset_tokens.c: a Megatron token corpus (dataset_tokens.h). *prefix
 * (malloc'd) is the corpus's PREFIX when the local path names one:
 * PREFIX.idx or PREFIX.bin with the other beside it, or an absent PREFIX
 * with both; else NULL. @return 0 / SP_ENOMEM. The opener maps PREFIX.idx
 * and PREFIX.bin (prefix NULL: ds->root is a URL ending in .idx or .bin,
 * fetched), checks them and sets ds->root to the prefix. */
int sp__ds_tokens_prefix(const char *path, char **prefix);
int sp__ds_open_tokens(sp_dataset *ds, const char *prefix, sp_error *err);
/* dataset_remote.c: shards in an object store or on an HTTP server
 * (ds->root a URL), opened through their dataset index object, or
 * (SP_INDEX_REBUILD) by reading every shard once; a sample is read from
 * the shard cache, a prefetch made on this thread, or one ranged request. */
int sp__ds_open_remote(sp_dataset *ds, sp_error *err);

/* dataset_open.c: sp__ds_prefetch_remote() for a remote dataset, else nothing;
 * 1 if ds is remote. For the loader and the pool. */
void sp__ds_prefetch(const sp_dataset *ds, const uint64_t *idx, size_t n);
int sp__ds_is_remote(const sp_dataset *ds);
/* dataset_open.c: 1 if sample i's bytes decoded without error in full when
 * they were indexed (SP_DS_CLEAN, kept with their content hash). The
 * loader asks after a successful sp_dataset_read() of i (which re-hashed
 * the bytes), and then lets a JPEG crop stop after its last row. */
int sp__ds_validated(const sp_dataset *ds, uint64_t i);

#endif

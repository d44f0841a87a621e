/* cache_internal.h - the cache's on-disk formats, its internal functions
 * and the handle, for cache/ and the worker pool (pool/).
 *
 * Not a public header. The cache is a one-way stack of files, each calling
 * only files below it (the list, one line a file, is at the top of
 * cache.c). At the bottom, calling no other cache file but the first:
 * cache_filter.c (filters) under cache_file.c (batch file format),
 * cache_fs.c (POSIX helpers), cache_manifest.c (the manifest), cache_key.c
 * (entry key, handle accessors); above them, each on the ones before:
 * cache_batch.c (whole batch files), cache_read.c (readers), cache_gc.c
 * (list, gc, verify), cache_writer.c (lock, staging, commit),
 * cache_commit.c (a commit and gc on a thread of its own), cache.c
 * (open/close, the epoch helper). This header declares them in that order.
 *
 * BATCH FILE "bNNNNNNNN" (all integers little-endian):
 *     0   8  magic "SPCACHEB"
 *     8   4  format version (SP_CACHE_FORMAT_VERSION)
 *    12   4  header size (128)
 *    16  16  entry key (hi, lo)
 *    32   4  epoch
 *    36   4  filter (0 none, 1 byte-shuffle by 4, 2/3 dictionary NCHW/NHWC)
 *    40   8  batch index
 *    48   4  count            52  4  nskipped
 *    56   4  nsubstituted     60  4  nfailures
 *    64   8  sample bytes
 *    72   8  meta raw size    80  8  meta stored size
 *    88   8  images stored size (images raw size = count * sample bytes)
 *    96  16  XXH3-128 of the uncompressed frames: meta raw, then images frame raw
 *   112   4  dictionary filters: channels C (else 0)
 *   116   4  reserved (0)
 *   120   8  XXH3-64 of bytes [0,120) and of everything after byte 128
 *   128      meta frame (zstd), images frame (zstd)
 * The images frame holds count * sample bytes, or for the dictionary
 * filters C x 256 4-byte table entries then one index byte per value.
 * meta raw = indices (u64 x count), labels (i32 x count), skipped (u64 x
 * nskipped), substituted (u64 x 2 nsubstituted), then nfailures records
 * (u64 sample, i32 code, u32 length, length bytes of "path: reason").
 *
 * MANIFEST: text, one "name value" per line, the last line
 * "checksum <16 hex>" = XXH3-64 of every byte before that line; one
 * "b <index> <stored> <raw> <file xxh64 hex>" line per batch.
 */
#ifndef SEEDPIPE_CACHE_INTERNAL_H
#define SEEDPIPE_CACHE_INTERNAL_H

#include "common/fileio_internal.h"
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#include <zstd.h>

#include "seedpipe/cache.h"

#define SP__CB_MAGIC "SPCACHEB"
#define SP__CB_HEADER 128
#define SP__CM_NAME "MANIFEST"
#define SP__CM_MAGIC "seedpipe-cache"
/* Bounds on what a file may claim (a cache file is untrusted input). */
#define SP__CB_MAX_COUNT (1u << 20)
#define SP__CB_MAX_RAW (1ull << 36)
#define SP__CM_MAX_BYTES (64u << 20)
#define SP__CM_MAX_BATCHES (1ull << 24)

enum {
    SP__FILTER_NONE = 0,
    SP__FILTER_SHUFFLE4 = 1,     /* byte shuffle by 4 */
    SP__FILTER_DICT8_NCHW = 2,   /* per-channel 256-entry dictionary, NCHW */
    SP__FILTER_DICT8_NHWC = 3    /* the same, NHWC */
};

/* The header fields of a batch file. */
typedef struct sp__cb_header {
    uint32_t version;
    sp_digest key;
    uint32_t epoch, filter;
    uint64_t index;
    uint32_t count, nskipped, nsubstituted, nfailures;
    uint64_t sample_bytes;
    uint64_t meta_raw, meta_stored, images_stored;
    sp_digest raw_hash;
    uint32_t channels;           /* dictionary filters: C */
    uint64_t file_hash;
} sp__cb_header;

/* Per-batch line of a manifest. */
typedef struct sp__cm_batch {
    uint64_t stored, raw, file_hash;
} sp__cm_batch;

/* A parsed manifest: the entry-info fields plus the per-batch lines. */
typedef struct sp__cm {
    sp_cache_entry_info info;   /* dataset/pipeline owned */
    uint32_t version;
    sp_digest key;
    sp__cm_batch *b;            /* info.batches */
} sp__cm;

/* Scratch buffers reused across batches by readers and writers are
 * sp__buf (common/fileio_internal.h). */

/* ---- cache_file.c: the batch file format ----------------------------------------- */

/* How sp__cb_encode() encodes a batch. */
typedef struct sp__cb_encode_req {
    sp_digest key;              /* the entry's key */
    size_t sample_bytes;
    int filter;                 /* SP__FILTER_NONE, _SHUFFLE4, or _DICT8_NCHW meaning
                                   "dictionary if the batch allows it" (else the shuffle) */
    const sp_loader *ld;        /* its failure log (NULL: none) */
    ZSTD_CCtx *ctx;             /* reused across batches */
    sp__buf *scratch;           /* a work buffer, reused */
} sp__cb_encode_req;

/*! sp__cb_encode() : the batch file bytes of b into out (size in *len),
 *  with the failure-log lines of its failed samples from rq->ld; *h the
 *  header written. @return 0, SP_ENOMEM, SP_EIO. */
int sp__cb_encode(const sp__cb_encode_req *rq, const sp_batch *b, sp__buf *out, size_t *len,
                  sp__cb_header *h, sp_error *err);

/*! sp__cb_parse_header() : parse and bound-check the header of a file of
 *  `len` bytes (not the checksums). @return 0 or SP_EFORMAT "path: reason". */
int sp__cb_parse_header(const uint8_t *p, size_t len, const char *path, sp__cb_header *h,
                        sp_error *err);

/*! sp__cb_decode() : verify the file hash, decompress both frames, verify
 *  the raw hash, undo the filter and fill out (may be NULL: verify only;
 *  then images go to scratch). The metadata stays in `meta` (for
 *  sp__cb_replay_failures()).
 *  @return 0 or SP_EFORMAT "path: reason", SP_ENOMEM. */
int sp__cb_decode(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                  const sp__cb_header *h, sp_batch *out, sp__buf *meta, sp__buf *scratch,
                  sp_error *err);
/*! sp__cb_decode_digest() : sp__cb_decode() that also feeds the images'
 *  bytes, in order, into *digest (NULL: none) as they are decoded: a
 *  dictionary frame's pieces while they are in the caches (the pool's
 *  batch digest, pool_digest.c). On an error *digest is unspecified. */
struct sp__hash;
int sp__cb_decode_digest(ZSTD_DCtx *ctx, const uint8_t *p, size_t len, const char *path,
                         const sp__cb_header *h, sp_batch *out, sp__buf *meta,
                         sp__buf *scratch, struct sp__hash *digest, sp_error *err);

/*! sp__cb_replay_failures() : log the failure records of a decoded meta
 *  buffer into the loader (the same log a recompute writes). */
void sp__cb_replay_failures(sp_loader *ld, const sp__cb_header *h, const uint8_t *meta);

/* ---- cache_fs.c: POSIX helpers ------------------------------------------------- */

#ifdef SEEDPIPE_TEST_HOOKS
/* Test hook (test builds only: -DSEEDPIPE_TEST_HOOKS=ON): when > 0, cache
 * file writes fail with ENOSPC once this many more bytes would be written
 * (decremented by every write). A release build has no hook; tests that
 * need it skip there. */
extern _Atomic long long sp__cache_fail_after_bytes;
#endif

/*! sp__write_new() : write `len` bytes as the new file dirfd/name (O_EXCL;
 *  fsync unless no_fsync); on an error the file is removed.
 *  @return 0 or the errno. */
int sp__write_new(int dirfd, int no_fsync, const char *name, const void *p, size_t len);
/*! sp__rmtree_at() : remove dirfd/name and everything under it (no
 *  symlink following). @return 0 or -1. */
int sp__rmtree_at(int dirfd, const char *name);
/*! sp__move_aside() : rename DIR/<name> to DIR/.corrupt/<name>.<pid>.<n>;
 *  `dst` gets the new path. @return 0 or -1 (e.g. already moved). */
int sp__move_aside(const char *dir, const char *name, char *dst, size_t cap);
/* 1 if s is 32 lowercase hex digits. */
int sp__is_key_name(const char *s);
/* A unique-per-process suffix counter. */
unsigned long sp__cache_seq(void);
/* Fill info->disk_bytes by stat'ing the files of entry dirfd. */
uint64_t sp__dir_bytes(int dirfd);

/* ---- cache_manifest.c: an entry's MANIFEST --------------------------------------- */

/*! sp__cm_format() : the manifest text (malloc'ed, *len bytes).
 *  @return 0 or SP_ENOMEM. */
int sp__cm_format(const sp__cm *m, char **text, size_t *len);
/*! sp__cm_read() : read and check the manifest at dirfd/MANIFEST.
 *  @return 0, SP_EIO (errno ENOENT kept in *enoent), SP_EFORMAT, SP_ENOMEM. */
int sp__cm_read(int dirfd, const char *path, sp__cm *m, int *enoent, sp_error *err);
void sp__cm_free(sp__cm *m);

/* ---- the handle; cache_key.c: the entry key and the handle's accessors ---------- */

#define PATH_CAP 4096

/* The cache handle (opened in cache.c); every file of the stack sees it. */
struct sp_cache {
    char *dir;
    sp_cache_opts o;
    sp_cache_stats st;
    /* The helper's open entry. */
    int slot_on;
    sp_loader *slot_ld;
    uint32_t slot_epoch;
    sp_digest slot_key;        /* a new loader at a freed one's address differs here */
    sp_cache_reader *rd;
    sp_cache_writer *wr;
    /* An entry being committed on a thread of its own (cache_commit.c), or
     * NULL; started and waited for by the thread that uses the handle. */
    struct sp__cache_commit *pending;
};

int sp__cache_read_only(const sp_cache *c);
const sp_cache_opts *sp__cache_opts(const sp_cache *c);
/* Pass a warning to opts.warn (if set). */
void sp__cache_warn(sp_cache *c, const char *msg);
/* The manifest fields a loader decides (everything but sizes and times). */
void sp__cache_info_from_loader(const sp_loader *ld, uint32_t epoch, sp_cache_entry_info *e);

/* ---- cache_batch.c: whole batch files, for readers, writers and pool workers ----
 * A pool's workers (pool/) read and write batch files in their own
 * processes, in parallel; the consumer keeps the epoch's reader or writer
 * (manifest, lock, staging directory, stats, the corrupt-entry policy) and
 * learns what each worker did through the pool's slot records. These two
 * functions are the whole-file steps both paths share. */

/* A codec state with its buffers, one per reader, writer or worker. */
typedef struct sp__cb_io {
    ZSTD_DCtx *dctx;
    ZSTD_CCtx *cctx;
    sp__buf file, meta, scratch;
} sp__cb_io;
void sp__cb_io_free(sp__cb_io *io);   /* and zero it */

/* Which batch file sp__cb_read() reads, and what it must be. */
typedef struct sp__cb_read_req {
    int dirfd;                  /* the entry's directory */
    const char *dirpath;        /* its path, for messages */
    const char *name;           /* the file, "bNNNNNNNN" */
    sp_digest key;              /* the entry's key, epoch, the batch's index */
    uint32_t epoch;
    uint64_t index;
    size_t sample_bytes;        /* the reader's sample size */
    uint32_t cap;               /* the most samples a batch of the entry has */
    const sp__cm_batch *line;   /* the file's line in the entry's manifest */
    struct sp__hash *digest;    /* NULL, or fed the images (sp__cb_decode_digest()) */
} sp__cb_read_req;

/*! sp__cb_read() : read the batch file rq->dirfd/name (dirpath/name in
 *  messages), check it against its manifest line and (key, epoch, index,
 *  sample_bytes), bound what its metadata claims by a batch of `cap`
 *  samples (before allocating for it), decode it into out (NULL: verify
 *  only). *enoent is set when the file was missing. The metadata stays in
 *  io->meta, the header in *h. Readers, pool workers and `cache verify`
 *  all read through here.
 *  @return 0; SP_EFORMAT ("path: reason": damaged, truncated, missing,
 *  foreign); SP_ENOMEM. */
int sp__cb_read(const sp__cb_read_req *rq, sp__cb_io *io, sp_batch *out, sp__cb_header *h,
                int *enoent, sp_error *err);

/* Where and how sp__cb_write() writes a batch file. */
typedef struct sp__cb_write_req {
    int dirfd;                  /* the staging directory */
    const char *dirpath;        /* its path, for messages */
    sp_digest key;              /* the entry's key */
    size_t sample_bytes;
    int filter;                 /* SP__FILTER_*, as for sp__cb_encode() */
    int level;                  /* zstd level (set on io's first compression) */
    int no_fsync;
    const sp_loader *ld;        /* its failure log, and the dictionary's sample geometry */
} sp__cb_write_req;

/*! sp__cb_write() : encode b (sp__cb_encode()) with zstd rq->level and
 *  write it as the new file rq->dirfd/bNNNNNNNN (O_EXCL; fsync unless
 *  no_fsync); on a write error the file is removed. *line gets its
 *  manifest line. @return 0, SP_EIO ("dirpath/name: reason"), SP_ENOMEM. */
int sp__cb_write(const sp__cb_write_req *rq, const sp_batch *b, sp__cb_io *io,
                 sp__cm_batch *line, sp_error *err);

/* ---- the pool's side of a reader (cache_read.c) and a writer (cache_writer.c) -- */
const char *sp__cache_reader_key(const sp_cache_reader *r);      /* 32 hex */
const sp__cm_batch *sp__cache_reader_line(const sp_cache_reader *r, uint64_t index);
/*! sp__cache_reader_count() : a worker read batch `index` of r's entry. */
void sp__cache_reader_count(sp_cache_reader *r, uint64_t index);
/*! sp__cache_reader_failed() : a worker's sp__cb_read() of r's entry
 *  failed with err (enoent as it set it): decide as sp_cache_reader_batch()
 *  does: SP_EIO when the entry was evicted, else SP_EFORMAT and the entry
 *  is moved aside (once); err's message is completed. */
int sp__cache_reader_failed(sp_cache_reader *r, int enoent, sp_error *err);

const char *sp__cache_writer_stage(const sp_cache_writer *w);    /* name under DIR/.tmp */
sp_digest sp__cache_writer_key(const sp_cache_writer *w);
int sp__cache_writer_filter(const sp_cache_writer *w);
/*! sp__cache_writer_record() : batch b->index was written by a worker as
 *  described by line. @return 0 or SP_EINVAL (as sp__cache_writer_put()). */
int sp__cache_writer_record(sp_cache_writer *w, const sp_batch *b, const sp__cm_batch *line,
                            sp_error *err);
/*! sp__cache_writer_discard() : remove the staged file of batch `index`
 *  (not yet recorded) that a dead worker may have left half written. */
void sp__cache_writer_discard(sp_cache_writer *w, uint64_t index);
/*! sp__cache_writer_spoil() : a worker's write failed: the entry cannot be
 *  committed (counts a write failure). */
void sp__cache_writer_spoil(sp_cache_writer *w);

/* What a commit did, for the handle's stats (sp__cache_commit_count()). */
typedef struct sp__commit_outcome {
    uint32_t committed, lost_race, write_failure;
} sp__commit_outcome;
/*! sp__cache_writer_commit_quiet() : sp__cache_writer_commit() but for the
 *  gc after it, and counting nothing in the handle (its dir and opts are
 *  read only): *o says what happened, for sp__cache_commit_count() on the
 *  handle's thread. w is freed either way. @return as
 *  sp__cache_writer_commit(). */
int sp__cache_writer_commit_quiet(sp_cache_writer *w, sp__commit_outcome *o, sp_error *err);
/*! sp__cache_commit_count() : add a commit's outcome to c's stats. */
void sp__cache_commit_count(sp_cache *c, const sp__commit_outcome *o);

/* ---- cache_commit.c: an epoch's commit and the gc after it, off the caller --- */

/*! sp__cache_commit_start() : commit w (its epoch's entry, complete) and
 *  then collect c down to opts.max_size, on a thread of its own, and
 *  return at once; an earlier commit still running on c is waited for
 *  first (one at a time, in order). Without a thread (pthread_create
 *  failed) the same is done here. The handle's stats and warnings are not
 *  touched by that thread: sp__cache_commit_wait() accounts for them. */
void sp__cache_commit_start(sp_cache *c, sp_cache_writer *w, uint32_t epoch);
/*! sp__cache_commit_wait() : wait for the commit started on c (none: a
 *  no-op), then count it in c's stats and pass its warnings to opts.warn
 *  on the caller's thread, as the same commit made there would: "<reason>;
 *  epoch E was not cached" for a failed commit, the gc's error for a gc
 *  that failed. */
void sp__cache_commit_wait(sp_cache *c);
#ifdef SEEDPIPE_TEST_HOOKS
/* Test builds: commits made on the commit thread (not its starter's). */
extern _Atomic unsigned long sp__cache_commits_threaded;
#endif
/*! sp__cache_commit_reap() : sp__cache_commit_wait() if the commit's
 *  thread has finished already; else nothing (never blocks). */
void sp__cache_commit_reap(sp_cache *c);

/* ---- Internal to the library: once seedpipe/cache.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

/*! sp__cache_epoch_batch() : batch `index` of `epoch` into out, exactly as
 *  sp_loader_batch() computes it, through the cache: the first request of a
 *  (loader, epoch) looks the entry up; on a hit batches are read (and
 *  verified), on a miss they are computed and, when the epoch is streamed
 *  from batch 0, stored; when its last batch has been stored the entry is
 *  committed. Any cache problem (corrupt file, full disk, lost race) is a
 *  warning (opts.warn) and the batch is computed instead. The handle keeps
 *  one open entry (and the loader pointer): use one sp_cache per stream, and
 *  call sp_cache_flush() before destroying the loader.
 *  @return 0, or sp_loader_batch()'s error (SP_ERANGE, a sample's error). */
int sp__cache_epoch_batch(sp_cache *c, sp_loader *ld, uint32_t epoch, uint64_t index,
                          sp_batch *out, sp_error *err);

/*! sp__cache_key() : the entry key of (ld, epoch) as defined above. */
sp_digest sp__cache_key(const sp_loader *ld, uint32_t epoch);

/*! sp__cache_writer_abort() : remove everything written, free. Accepts NULL. */
void sp__cache_writer_abort(sp_cache_writer *w);

/*! sp__cache_writer_commit() : write the manifest, rename the entry into
 *  place, free w (always). Losing a race to a concurrent writer of the same
 *  key is success (the entry is there). With opts.max_size, collects.
 *  @return 0, SP_EINVAL (incomplete: aborted), SP_EIO (aborted). */
int sp__cache_writer_commit(sp_cache_writer *w, sp_error *err);

/*! sp__cache_writer_complete() : 1 if every batch of the epoch was put. */
int sp__cache_writer_complete(const sp_cache_writer *w);

/*! sp__cache_writer_open() : start writing the entry of (ld, epoch) in a
 *  private staging directory (DIR/.tmp/).
 *  @return 0 (*out set); SP_CACHE_SKIP (*out NULL: the entry exists or
 *  another process holds the key's lock; err says which); SP_EUNSUPP
 *  (per-worker rng mode); SP_EIO; SP_ENOMEM. */
int sp__cache_writer_open(sp_cache *c, const sp_loader *ld, uint32_t epoch,
                          sp_cache_writer **out, sp_error *err);

/*! sp__cache_writer_put() : compress, checksum and write one batch (any
 *  order, each index once). On a write error (ENOSPC, EFBIG, EIO) the file
 *  is removed and the writer is spoiled: abort it.
 *  @return 0, SP_EIO ("path: reason"), SP_EINVAL (wrong epoch, duplicate
 *  index, bad count), SP_ENOMEM. */
int sp__cache_writer_put(sp_cache_writer *w, const sp_batch *b, sp_error *err);

#ifdef __cplusplus
}
#endif

#endif

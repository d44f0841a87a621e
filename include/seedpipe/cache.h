/* seedpipe/cache.h - a disk cache of augmented epochs, keyed by seed.
 *
 * Decoding and augmenting an epoch costs CPU; replaying it from a cache
 * costs a read and a zstd decompression. One cache ENTRY is one epoch of one
 * rank's stream: every batch of (loader, epoch), each batch a file holding
 * its images, labels, sample indices and on-error lists, zstd-compressed and
 * checksummed. The entry KEY is XXH3-128 of everything that decides the
 * epoch's bytes (DESIGN.md section 6):
 *
 *   key = XXH3-128("seedpipe-cache-key", SP_CACHE_FORMAT_VERSION,
 *                  the loader's fingerprint    -- dataset fingerprint,
 *                        canonical pipeline, dtype, layout, batch size,
 *                        drop_last, on_error, skip_normalize --,
 *                  seed, epoch, rank, world)
 *
 * Guarantees
 *  - A hit returns exactly the bytes sp_loader_batch() would compute (the
 *    batch file carries an XXH3-128 of its uncompressed bytes, checked on
 *    every read).
 *  - An entry is visible whole or not at all: it is written in a private
 *    staging directory and renamed into place after its manifest.
 *  - A corrupt, truncated or foreign file is never served: the read fails
 *    with SP_EFORMAT and a message naming the file, the entry is moved
 *    aside to DIR/.corrupt/ (once), and the caller recomputes the batch.
 *  - A failed write (full disk, any I/O error) leaves no file behind; the
 *    caller keeps going uncached.
 *  - Concurrent writers of one key never corrupt it; with the (default)
 *    per-key lock only one of them does the writing.
 *  - The cache never decides a byte of the stream: sp__cache_epoch_batch()
 *    returns sp_loader_batch()'s bytes whether it hit, missed or failed.
 *
 * Not cached: rng_mode per-worker (its bytes depend on the order batches
 * are asked for, so they are not a function of the key): the writer
 * refuses with SP_EUNSUPP and the helper computes uncached.
 *
 * Layout: see cache/cache.c (HOW IT WORKS) and docs/cache.md.
 *
 * Thread safety: one sp_cache handle (and its readers and writers) is used
 * by one thread at a time; any number of processes and handles may share one
 * directory. Library code never prints: warnings go to opts.warn.
 */
#ifndef SEEDPIPE_CACHE_H
#define SEEDPIPE_CACHE_H

#include <stdint.h>

#include "seedpipe/common.h"
#include "seedpipe/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The on-disk format version; part of the key and of every file. Bumped
 * when the bytes an entry holds would mean something else, not only when
 * the layout changes: 2 = the decoders' warning policy (docs/security.md),
 * under which some samples that version 1 entries hold as pixels (a
 * truncated JPEG under a crop, a palette index past the PLTE) are errors. */
#define SP_CACHE_FORMAT_VERSION 2

/* zstd level -5 (a "fast" level: literals stored raw, few matches looked
 * for) reads augmented photos 15-20% faster than level -1 and 3-4x faster
 * than level 3, for 6-7% more disk than -1 (bench/cache_bench.c,
 * docs/cache.md); a cache exists to be read fast. */
#define SP_CACHE_DEFAULT_LEVEL (-5)

/* Positive outcomes that are not errors (common.h, SP_STATUS_MAP):
 * SP_CACHE_MISS  sp_cache_reader_open(): no usable entry;
 * SP_CACHE_SKIP  sp__cache_writer_open(): someone else writes it / it exists. */

typedef struct sp_cache_opts {
    uint64_t max_size;  /* bytes; 0 = unlimited. After each commit the cache
                           is collected down to it (sp_cache_gc()). */
    int level;          /* zstd level, ZSTD_minCLevel()..ZSTD_maxCLevel();
                           0 = SP_CACHE_DEFAULT_LEVEL */
    int filter;         /* image filter before compression: 0 = auto (float32:
                           a per-channel 256-entry dictionary when the batch
                           allows it, else byte shuffle; uint8: none),
                           1 = byte shuffle, 2 = none */
    int no_lock;        /* 1: skip the per-key writer lock (concurrent writers
                           then race; the first rename wins; tests use it) */
    int read_only;      /* 1: never modify the directory: hits do not touch
                           the last-use time, bad entries are refused but not
                           moved, writers are refused (SP_CACHE_SKIP); the
                           directory must exist. `cache verify` uses it. */
    int no_fsync;       /* 1: skip fsync of files and directories. Safe for
                           correctness (every read is checksummed), not for
                           durability across a power loss. */
    /* Warnings of sp__cache_epoch_batch() (a corrupt file, a failed write),
     * one line each, "path: reason". May be NULL. */
    void (*warn)(void *ud, const char *msg);
    void *warn_ud;
} sp_cache_opts;

/*! sp_cache_opts_default() : unlimited size, level -5, auto filter, lock,
 *  fsync, no warning callback. */
SP_API void sp_cache_opts_default(sp_cache_opts *o);

typedef struct sp_cache sp_cache;

/*! sp_cache_open() : open (creating it and its .tmp/.corrupt/.locks
 *  subdirectories if missing) the cache directory `dir`. opts may be NULL.
 *  @return 0, SP_EIO ("dir: reason"), SP_EINVAL (bad level), SP_ENOMEM. */
SP_API int sp_cache_open(const char *dir, const sp_cache_opts *opts, sp_cache **out, sp_error *err);
/*! sp_cache_close() : finishes the helper's open entry (commits it if
 *  complete, else aborts it), then frees. Accepts NULL. */
SP_API void sp_cache_close(sp_cache *c);
SP_API const char *sp_cache_dir(const sp_cache *c);

/* ---- the convenience path: one batch stream through the cache ------------- */

/*! sp_cache_flush() : commit (if complete) or abort the helper's open entry;
 *  for a pool's cache (sp_pool_cache()), wait for an epoch's commit still
 *  running on the cache's commit thread. */
SP_API void sp_cache_flush(sp_cache *c);

typedef struct sp_cache_stats {
    uint64_t hits, misses;             /* entry lookups */
    uint64_t batches_read;             /* served from the cache */
    uint64_t batches_computed;         /* computed by the helper */
    uint64_t batches_written;
    uint64_t corrupt;                  /* files/entries refused */
    uint64_t write_failures;           /* entries abandoned on a write error */
    uint64_t committed, lost_races;    /* entries made visible / already there */
    uint64_t bytes_read, bytes_written;   /* stored (compressed) bytes */
    uint64_t raw_read, raw_written;       /* uncompressed bytes */
} sp_cache_stats;
SP_API void sp_cache_stats_get(const sp_cache *c, sp_cache_stats *s);

/* ---- reading an entry ------------------------------------------------------- */

typedef struct sp_cache_reader sp_cache_reader;

/*! sp_cache_reader_open() : look up the entry of (ld, epoch) and check its
 *  manifest (format version, key fields, geometry, checksum). On a hit the
 *  entry's last-use time is set to now (LRU).
 *  @return 0 (hit, *out set), SP_CACHE_MISS (*out NULL; if an entry was
 *  there but unusable, err says why with its path and it was moved aside),
 *  or SP_ENOMEM / SP_EIO (*out NULL). */
SP_API int sp_cache_reader_open(sp_cache *c, sp_loader *ld, uint32_t epoch, sp_cache_reader **out,
                                sp_error *err);
/*! sp_cache_reader_batch() : read, verify and decompress batch `index`
 *  into out (allocated with sp_batch_alloc(ld)); replays the batch's
 *  failure-log lines into the loader. out is only meaningful on success.
 *  @return 0; SP_EFORMAT (corrupt or truncated: err names the file, the
 *  entry was moved aside, recompute); SP_EIO (vanished, e.g. evicted:
 *  recompute); SP_ERANGE; SP_ENOMEM. */
SP_API int sp_cache_reader_batch(sp_cache_reader *r, uint64_t index, sp_batch *out, sp_error *err);
SP_API void sp_cache_reader_close(sp_cache_reader *r);   /* accepts NULL */

/* ---- writing an entry ------------------------------------------------------- */

typedef struct sp_cache_writer sp_cache_writer;

/* ---- maintenance: ls, gc, verify ------------------------------------------- */

typedef struct sp_cache_entry_info {
    char key[33];
    int ok;                     /* 0: manifest unreadable; problem says why */
    char problem[256];
    sp_digest fingerprint, dataset_fingerprint;
    uint64_t seed;
    uint32_t epoch, rank, world, batch_size;
    int drop_last, skip_normalize;
    char dtype[16], layout[16], on_error[16], rng_mode[16];
    uint64_t batches, sample_bytes;
    uint64_t raw_bytes, stored_bytes;   /* sums over the batch files */
    uint64_t disk_bytes;                /* all files of the entry */
    int64_t created, last_use;          /* unix seconds */
    int64_t last_use_ns;                /* manifest mtime in ns: the LRU order */
    int level;
    char *dataset, *pipeline;           /* owned; NULL if unknown */
    char *split, *subset;               /* owned; NULL: the whole dataset */
    uint64_t split_seed;
} sp_cache_entry_info;

/*! sp_cache_list() : every committed entry, most recently used first.
 *  Free with sp_cache_list_free(). @return 0, SP_EIO, SP_ENOMEM. */
SP_API int sp_cache_list(sp_cache *c, sp_cache_entry_info **out, size_t *n, sp_error *err);
SP_API void sp_cache_list_free(sp_cache_entry_info *e, size_t n);   /* accepts NULL */

/*! sp_cache_entry_config() : a loader config that recomputes the entry
 *  (dataset may override the recorded path; threads 1). Pointers in cfg
 *  point into e. @return 0 or SP_EFORMAT. */
SP_API int sp_cache_entry_config(const sp_cache_entry_info *e, const char *dataset,
                                 sp_loader_config *cfg, sp_error *err);

typedef struct sp_cache_gc_report {
    uint64_t bytes_before, bytes_after;
    uint32_t entries_before, evicted;
    uint32_t stale_removed;     /* staging dirs of dead writers */
    uint32_t corrupt_removed;   /* moved-aside entries in .corrupt/ */
} sp_cache_gc_report;

/*! sp_cache_gc() : remove dead writers' staging directories and the
 *  .corrupt/ area, then evict committed entries, least recently used first
 *  (ties: by key), until the total of entry files is <= max_size. An entry
 *  being written (a live staging directory) is never touched; an entry
 *  being read is renamed away first, so its reader sees a miss (SP_EIO),
 *  never a partial file. rep may be NULL. @return 0, SP_EIO. */
SP_API int sp_cache_gc(sp_cache *c, uint64_t max_size, sp_cache_gc_report *rep, sp_error *err);

/*! sp_cache_verify_entry() : re-check the manifest and every batch file of
 *  entry `key` (32 hex): sizes, both checksums, decompression, the layout
 *  of the metadata. Read-only (nothing is moved). report(ud, msg) is called
 *  once per problem ("path: reason"); *bad gets the number of problems.
 *  @return 0 (check *bad), SP_ENOMEM. */
SP_API int sp_cache_verify_entry(sp_cache *c, const char *key, void (*report)(void *, const char *),
                                 void *ud, uint64_t *bad, sp_error *err);


#ifdef __cplusplus
}
#endif
#endif

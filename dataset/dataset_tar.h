/* dataset_tar.h - the WebDataset kind's own state and the functions its
 * files share: the local shards (dataset_tar.c, dataset_tar_read.c,
 * dataset_tar_index.c, dataset_tar_write.c), the remote ones
 * (dataset_remote.c, dataset_shard_cache.c) and the dataset index object
 * (dataset_object.c). The rest of the dataset layer sees a shard dataset
 * only through its source table (ds->ops, dataset_internal.h) and its drivers (dataset_tar_open.c, dataset_remote.c).
 *
 * Not installed, not part of the API: names are sp__ds_*.
 */
#ifndef SEEDPIPE_DATASET_TAR_H
#define SEEDPIPE_DATASET_TAR_H

#include "dataset/dataset_internal.h"

/* The kind's state (ds->state, sp__ds_tar()): the shards (relative to ds->base, sorted), where each sample's
 * image member lies, and the samples that fail when read (sorted by index);
 * for a remote dataset also the store and the shard cache. */
struct sp__ds_tar {
    char **shards;
    size_t nshards;
    uint64_t *shard_sizes;    /* bytes of each shard as read (the dataset index object) */
    _Atomic int *shard_fds;   /* opened on first read (0: not yet; fd + 1), kept to destroy */
    uint32_t *shard_of;
    uint64_t *offsets;
    /* Each sample's KEY.json member (its targets, read by dataset_coco.c
     * for --annotations @json): offset, size (UINT64_MAX: none), hash;
     * NULL when no sample has one. */
    uint64_t *json_off, *json_size;
    sp_digest *json_hash;
    int json_unindexed;       /* 1: a version 1 dataset index object (dataset_object.c),
                               * which does not say where the .json members lie */
    struct sp__ds_bad *bad;
    size_t nbad;

    /* A remote dataset (dataset_remote.c): the store the shards are in;
     * NULL for local ones. */
    struct sp__rio *rio;
    uint64_t pf_owner;        /* its prefetches' owner id (remote.c) */
    char *shard_cache;        /* the cache's private folder in SEEDPIPE_SHARD_CACHE
                               * (DIR/seedpipe-shards-UID, resolved), or NULL
                               * (dataset_shard_cache.c) */
    uint64_t shard_cache_bytes;
    sp_digest *shard_cache_keys;   /* each shard's name there */
    _Atomic int shard_cache_off;   /* 1: a copy could not be written (a full disk):
                                    * this process reads from the store */
};

/* The WebDataset kinds' state (local and remote shards). */
static inline struct sp__ds_tar *sp__ds_tar(const sp_dataset *ds) {
    return (struct sp__ds_tar *)ds->state;
}

/* A WebDataset sample that cannot be read, and why ("shard/member: reason"). */
typedef struct sp__ds_bad {
    uint64_t i;
    char *msg;
} sp__ds_bad;

/* dataset_tar_index.c: a zeroed sp__ds_tar(ds) (SP_ENOMEM); free it and what it
 * holds (its descriptors and the remote store closed first). */
int sp__ds_tar_new(sp_dataset *ds, sp_error *err);
void sp__ds_tar_free(sp_dataset *ds);
/* dataset_tar_index.c: the source tables' shard_count and shard_of (both
 * kinds: the shard table is the same). */
uint32_t sp__ds_tar_shard_count(const sp_dataset *ds);
uint32_t sp__ds_tar_shard_of(const sp_dataset *ds, uint64_t i);

/* The source tables: local shards (dataset_tar_read.c), remote ones
 * (dataset_remote.c). */
extern const sp__ds_ops sp__ds_tar_ops;
extern const sp__ds_ops sp__ds_remote_ops;

/* dataset_tar.c: the shard names of a brace pattern, in order (a malloc'd
 * array of malloc'd strings, *n of them). */
int sp__ds_expand_pattern(const char *pat, char ***names, size_t *n, sp_error *err);

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
    int has_json;          /* KEY.json: where it lies, its hash */
    uint64_t json_offset, json_size;
    sp_digest json_hash;
    char *bad;             /* the first reason it cannot be read, or NULL */
} sp__ds_tar_sample;

/* A sample's place and hashes as an index record stores them (a shard's
 * index file, the dataset index object): jsize UINT64_MAX is "no
 * KEY.json". */
static inline void sp__ds_tar_sample_place(sp__ds_tar_sample *s, int32_t label, uint32_t shard,
                                           uint64_t off, uint64_t size, sp_digest h,
                                           uint64_t joff, uint64_t jsize, sp_digest jh) {
    s->label = label;
    s->shard = shard;
    s->offset = off;
    s->size = size;
    s->hash = h;
    s->has_image = 1;
    s->has_json = jsize != UINT64_MAX;
    s->json_offset = joff;
    s->json_size = s->has_json ? jsize : 0;
    s->json_hash = jh;
}

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

/* The index file of shard `rel` (relative to ds->base): its path in the
 * user's index cache (legacy 0; "" when no cache folder is usable) or
 * beside the shard, where older versions wrote it (legacy 1), malloc'd,
 * NULL on OOM; write samples [first, t->n) of the shard whose
 * stat is st (1: written; 0: not, e.g. the shard changed too recently);
 * read it back, appending the shard's samples to t (1: taken; 0: absent,
 * stale or damaged, t unchanged). */
char *sp__ds_tar_index_path(const sp_dataset *ds, const char *rel, int legacy);
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

/* dataset_tar_read.c: sample i's KEY.json member, read and its hash
 * checked (*bytes malloc'd; NULL, *len 0 when it has none). SP_EINVAL for
 * remote shards (sp__ds_remote_json() reads those), SP_EIO, SP_EMISMATCH
 * (changed since indexed), SP_ELIMIT (longer than max, not read), naming
 * the member. */
int sp__ds_tar_json(const sp_dataset *ds, uint64_t i, uint64_t max, uint8_t **bytes, size_t *len,
                    sp_error *err);

/* dataset_remote.c: the KEY.json members of remote shards, read for
 * sp__coco_open_fetch() (its fetch callback, arg a reader from
 * sp__ds_remote_json_new()), in sample order: each call past the samples
 * fetched reads the members of the next samples at once (at most
 * SP_DS_JSON_WINDOW samples and SP_DS_JSON_WINDOW_BYTES of ranges; members
 * at most 16 KiB apart in a shard one ranged GET, up to 64 in flight),
 * each checked against its indexed hash (SP_EMISMATCH naming
 * URL/shard/KEY.json). SP_EUNSUPP for a version 1 index object (no
 * members' places: rebuild it). */
typedef struct sp__ds_json_reader sp__ds_json_reader;
#define SP_DS_JSON_WINDOW 512u
#define SP_DS_JSON_WINDOW_BYTES (UINT64_C(64) << 20)
sp__ds_json_reader *sp__ds_remote_json_new(void);
int sp__ds_remote_json(void *reader, const sp_dataset *ds, uint64_t i, uint64_t max,
                       uint8_t **bytes, size_t *len, sp_error *err);
/* Its GETs so far (for the bench); free it (accepts NULL). */
uint64_t sp__ds_remote_json_requests(const sp__ds_json_reader *r);
void sp__ds_remote_json_free(sp__ds_json_reader *r);

/* dataset_tar_read.c: the reason sample i cannot be read, or NULL. */
const char *sp__ds_tar_bad(const sp_dataset *ds, uint64_t i);


/* dataset_shard_cache.c: the shard cache of a remote dataset
 * (SEEDPIPE_SHARD_CACHE; after its table is packed); sample i from it: 1
 * (served, hash checked), 0 (not usable: read from the store), or an
 * error (the shard's download failed). */
int sp__ds_shard_cache_setup(sp_dataset *ds, sp_error *err);
int sp__ds_shard_cache_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out,
                            sp_error *err);

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

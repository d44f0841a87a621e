/* dataset_index.c - the persistent dataset index: content hashes kept in a
 * file of the user's cache folder and trusted again while each file's stat
 * is unchanged (include/seedpipe/dataset.h, "Persistent index").
 *
 * Opening an ImageFolder or a list file needs every sample's XXH3-128 for
 * the fingerprint. sp__ds_finish_files(), called by dataset_folder.c and
 * dataset_list.c with their collected entries, sorts and packs them and
 * then has hash_files() fill the hashes. Reading every byte of the dataset
 * at every open is what this file avoids: hash_files() stats every sample,
 * takes the hash of each file whose (device, inode, size, mtime ns, ctime
 * ns) equals the sidecar's record, hashes the others (pthreads, one 64 KiB
 * buffer each) and rewrites the sidecar when anything differed. The fingerprint is the
 * one a full hash gives; a file changed without a stat change is still
 * refused when it is read (sp__dataset_read() re-hashes every sample).
 *
 * HOW IT WORKS
 *  - Where: in the user's index cache folder (dataset_cache_dir.c:
 *    SEEDPIPE_CACHE, else $XDG_CACHE_HOME/seedpipe, else ~/.cache/seedpipe;
 *    private, never a folder others may write), named folder-<hex> or
 *    list-<hex> after the root's resolved path and identity: nothing is
 *    ever written into the user's data, and a read-only dataset is indexed
 *    as any other. The sidecar older versions wrote beside the data
 *    (<root>/.seedpipe-index, .<name>.seedpipe-index beside a list file) is
 *    still read, under the same rules, when the cache has no sound entry,
 *    and never written. No usable cache folder: every file is hashed and
 *    index info's warning says why; the open never fails for it.
 *  - Format (little-endian): "SPDSIDX\0", u32 version 2, u32 kind, u64 n,
 *    u32 len + the absolute root, then n records in canonical (byte-wise
 *    path) order: u32 len + relative path, u32 flags (1 = racy), u64 dev,
 *    ino, size, mtime ns, ctime ns, hash hi, hash lo, u32 len + the
 *    checker's table (at most SP_DS_AUX_MAX bytes); last an XXH3-64 of
 *    all the bytes before it. Version 1 (no table) is still read. A
 *    sidecar whose checksum, magic, version, kind or root does not match
 *    is not trusted: it is rebuilt, and the reason is kept for
 *    sp__dataset_index_info_get() (the tool prints it as a warning).
 *  - Racy entries (git's "racily clean" problem): timestamps are coarse (a
 *    jiffy, or a second on some filesystems), so a file rewritten with the
 *    same size in the same tick as the stat taken here would look
 *    unchanged. A record whose mtime or ctime is within SP_DS_RACY_NS of the
 *    moment the stats were taken is written with the racy flag and hashed
 *    again at the next open (then it is old enough to be trusted).
 *  - Concurrency: the index is written to a unique temporary name in the
 *    same folder and renamed over the old one, so a reader sees a whole
 *    file or the previous one; concurrent openers each write a complete
 *    file and the last rename wins. A failed write only costs the next open
 *    its hashing: opening never fails because of the sidecar.
 *
 *  - Verdicts: each record's flags also keep what a full decode of the
 *    file's bytes gave (SP_DS_CHECKED, SP_DS_CLEAN: the checker handed
 *    down by sp__ds_set_checker(), augment's sp__image_check()). A file is
 *    checked when it is hashed: read whole, hashed and decoded from the
 *    same buffer, so the verdict belongs to those bytes' hash; the loader
 *    asks for it (sp__ds_verdict()) only after sp__dataset_read() has
 *    re-hashed the bytes it serves. Checking is on when a checker is set
 *    and the cache folder is writable (the verdict can be kept); then a
 *    record without a verdict (an index written before verdicts existed)
 *    is not trusted and its file is hashed and checked again, once; so is
 *    a version 1 record (the checker's table came with version 2). With
 *    no cache, a read-only one or SEEDPIPE_INDEX=off nothing is checked,
 *    no verdict is known and every decode reads its whole file, as before.
 *
 * LIMITS: the stat check trusts the filesystem's timestamps; a tool that
 * rewrites a file and restores both mtime and ctime (ctime cannot be set
 * through the normal API) defeats it, and then the read-time re-hash
 * refuses the sample, naming it. SEEDPIPE_INDEX=off in the environment (or
 * sp_dataset_limits.index = SP_INDEX_OFF) hashes every file and touches no
 * sidecar.
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"
#include "common/hash_internal.h"
#include "common/le_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#define SIDECAR_MAGIC "SPDSIDX"   /* 7 characters + NUL = 8 bytes */
#define SIDECAR_VERSION 2u
#define SIDECAR_RACY 1u   /* then SP_DS_CHECKED 2, SP_DS_CLEAN 4 (dataset_internal.h) */
#define SIDECAR_VERDICT (SP_DS_CHECKED | SP_DS_CLEAN)
#define RECORD_FIXED (4 + 4 + 7 * 8)       /* len, flags, 7 u64 */

/* The bytes of the record at r (its path's length read, inside the file),
 * of a version v index: the fixed fields, the path, a version 2 table. */
static size_t record_bytes(const uint8_t *r, uint32_t v) {
    size_t fixed = RECORD_FIXED + sp__le_get32(r);
    return v < 2 ? fixed : fixed + 4 + sp__le_get32(r + fixed);
}

typedef sp__ds_rec rec;

/* ---- where the sidecar lives -------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static void note(char *why, size_t wn, const char *fmt,
                                                       ...);

/* The absolute root the sidecar belongs to: the folder of an ImageFolder,
 * the list file itself (resolved). malloc'd, or NULL. */
static char *abs_root(const sp_dataset *ds) {
    if (sp__ds_kind(ds) == SP_DATASET_IMAGEFOLDER) return sp__ds_strdup(ds->base);
    return realpath(ds->root, NULL);
}

/* The two candidate paths: [0] the entry in the user's index cache ("" when
 * no cache folder is usable: why says why), [1] the old sidecar beside the
 * data, read where it exists and never written. */
static void sidecar_paths(const sp_dataset *ds, const char *root, char p[2][4096], char *why,
                          size_t wn) {
    if (sp__ds_kind(ds) == SP_DATASET_IMAGEFOLDER) {
        snprintf(p[1], 4096, "%s/.seedpipe-index", root);
    } else {
        const char *slash = strrchr(root, '/');
        snprintf(p[1], 4096, "%.*s/.%s.seedpipe-index", (int)(slash - root), root, slash + 1);
    }
    char dir[4096];
    p[0][0] = '\0';
    if (sp__ds_cache_dir(dir, sizeof dir, why, wn) == 0 &&
        sp__ds_cache_entry(dir, sp__ds_kind(ds) == SP_DATASET_IMAGEFOLDER ? "folder" : "list", root, p[0],
                           4096) != 0)
        note(why, wn, "%s: %s", root, strerror(errno));
}

/* ---- reading ------------------------------------------------------------------ */

/* printf into a bounded message (truncating is fine: it is a warning). */
__attribute__((format(printf, 3, 4))) static void note(char *why, size_t wn, const char *fmt,
                                                       ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, wn, fmt, ap);
    va_end(ap);
}

typedef struct sidecar {
    uint8_t *data;
    uint64_t n;
    size_t first;   /* offset of the first record */
    uint32_t version;
} sidecar;

/* The sidecar's bytes (len >= its header and checksum) checked: checksum,
 * magic, version, this dataset's kind and root, every record inside the
 * file. @return 0 (*nrec its records), or -1 with why. */
static int sidecar_check(const uint8_t *data, size_t len, const sp_dataset *ds, const char *root,
                         const char *path, uint64_t *nrec, char *why, size_t wn) {
    size_t head = 8 + 4 + 4 + 8 + 4;
    if (XXH3_64bits(data, len - 8) != sp__le_get64(data + len - 8)) {
        note(why, wn, "%s: checksum mismatch (damaged)", path);
        return -1;
    }
    if (memcmp(data, SIDECAR_MAGIC, 8) != 0) {
        note(why, wn, "%s: not a seedpipe dataset index", path);
        return -1;
    }
    uint32_t v = sp__le_get32(data + 8);
    if (v != 1 && v != SIDECAR_VERSION) {
        note(why, wn, "%s: index format version %u, this library writes %u", path,
                 sp__le_get32(data + 8), SIDECAR_VERSION);
        return -1;
    }
    uint32_t rl = sp__le_get32(data + 24);
    if (sp__le_get32(data + 12) != sp__ds_kind(ds) || head + rl + 8 > len ||
        rl != strlen(root) || memcmp(data + head, root, rl) != 0) {
        note(why, wn, "%s: belongs to another dataset (%.*s)", path,
                 (int)(rl < 512 && head + rl + 8 <= len ? rl : 0), (const char *)data + head);
        return -1;
    }
    /* Every record must lie inside the file, ending at the checksum. */
    uint64_t n = sp__le_get64(data + 16);
    *nrec = n;
    size_t off = head + rl;
    for (uint64_t i = 0; i < n; i++) {
        size_t fixed = off + 4 <= len - 8 ? RECORD_FIXED + sp__le_get32(data + off) : 0;
        if (!fixed || sp__le_get32(data + off) > 4096 || fixed > len - 8 - off ||
            (v >= 2 && (fixed + 4 > len - 8 - off ||
                        sp__le_get32(data + off + fixed) > SP_DS_AUX_MAX ||
                        record_bytes(data + off, v) > len - 8 - off))) {
            note(why, wn, "%s: record %llu out of bounds (damaged)", path,
                     (unsigned long long)i);
            return -1;
        }
        off += record_bytes(data + off, v);
    }
    if (off != len - 8) {
        note(why, wn, "%s: %zu bytes after the last record (damaged)", path, len - 8 - off);
        return -1;
    }
    return 0;
}

/* Load and check the sidecar at `path`. @return 1 (valid: *sc filled), 0
 * (absent), -1 (present but not trusted: why in `why`). */
static int sidecar_load(const char *path, const sp_dataset *ds, const char *root, sidecar *sc,
                        char *why, size_t wn) {
    /* The size a sidecar of this dataset has (its records and paths), with
     * room for one written when the folder held as many files again: a
     * larger file is refused before a byte of it is read. */
    uint64_t pool = ds->n ? ds->path_off[ds->n - 1] + strlen(ds->pool + ds->path_off[ds->n - 1]) + 1
                          : 0;
    uint64_t expect = 8 + 4 + 4 + 8 + 4 + strlen(root) +
                      ds->n * (4 + 4 + 7 * 8 + 4 + SP_DS_AUX_MAX) + pool + 8;
    struct stat st;
    sp_error e;
    int fd = sp__open_regular(AT_FDCWD, path, path, 1, 2 * expect + (1u << 20), &st, &e);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == EINVAL)
            return 0;   /* absent, or something else holds the name: written elsewhere */
        note(why, wn, "%s", e.msg);
        return -1;
    }
    int rc = -1;
    uint8_t *data = NULL;
    size_t len = (size_t)st.st_size, got = 0;
    size_t head = 8 + 4 + 4 + 8 + 4;
    if (st.st_size < (off_t)(head + 8)) {
        note(why, wn, "%s: truncated (%lld bytes)", path, (long long)st.st_size);
        goto out;
    }
    sp__buf buf = {NULL, 0};
    int rd = sp__read_fd(fd, path, len, len, &buf, &got, &e);
    data = buf.p;
    if (rd == SP_OK && got != len) rd = sp_error_set(&e, SP_EIO, "%s: short read", path);
    if (rd == SP_ELIMIT) rd = sp_error_set(&e, SP_EIO, "%s: grew while read", path);
    if (rd != SP_OK) {
        note(why, wn, "%s", e.msg);
        goto out;
    }
    uint64_t n = 0;
    if (sidecar_check(data, len, ds, root, path, &n, why, wn) != 0) goto out;
    uint32_t rl = sp__le_get32(data + 24);
    sc->data = data;
    sc->n = n;
    sc->first = head + rl;
    sc->version = sp__le_get32(data + 8);
    data = NULL;
    rc = 1;
out:
    free(data);
    close(fd);
    return rc;
}

/* ---- the decode checker --------------------------------------------------------- */

/* The decode checker (set once, by the loader layer at library load). */
static _Atomic(sp__ds_checker) g_checker;

void sp__ds_set_checker(sp__ds_checker fn) { atomic_store(&g_checker, fn); }

/* ---- hashing a dataset's files ------------------------------------------------------ */

static void annotate(sp_dataset *ds, const sp__ds_entries *e, uint64_t i, int rc, sp_error *err) {
    if (!err || e->v[i].line <= 0) return;
    char msg[SP_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    if (sp__ds_kind(ds) == SP_DATASET_SAMPLES)
        sp_error_set(err, rc, "%s (sample list entry %d)", msg, e->v[i].line - 1);
    else
        sp_error_set(err, rc, "%s (listed at %s:%d)", msg, ds->root, e->v[i].line);
}

/* 1. stat every sample (in canonical order: the first bad file is named).
 * Sorted paths come folder by folder: each folder is looked up once and
 * its files stat'ed relative to it (fstatat), not walked from the root. */
static int stat_all(sp_dataset *ds, const sp__ds_entries *e, rec *recs, sp_error *err) {
    int rc = SP_OK;
    int dfd = -1;
    size_t dlen = 0;
    const char *dpath = NULL;
    for (uint64_t i = 0; i < ds->n; i++) {
        const char *rel = ds->pool + ds->path_off[i];
        const char *slash = strrchr(rel, '/');
        size_t len = slash ? (size_t)(slash - rel) : 0;
        if (rel[0] != '/' && (!dpath || len != dlen || memcmp(rel, dpath, len) != 0)) {
            if (dfd >= 0) close(dfd);
            char *dir = len ? strndup(rel, len) : NULL;
            char *full = dir ? sp__ds_join(ds->base, dir) : sp__ds_strdup(ds->base);
            dfd = full ? open(full, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            free(dir);
            free(full);
            dpath = rel;
            dlen = len;
        }
        char *full = sp__ds_join(ds->base, rel);
        if (!full) {
            if (dfd >= 0) close(dfd);
            return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
        }
        struct stat st;
        int r = rel[0] != '/' && dfd >= 0 ? fstatat(dfd, slash ? slash + 1 : rel, &st, 0)
                                          : stat(full, &st);
        if (r != 0)
            rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        else if (!S_ISREG(st.st_mode))
            rc = sp_error_set(err, SP_EFORMAT, "%s: not a regular file", full);
        else if ((uint64_t)st.st_size > ds->max_file_bytes)
            rc = sp_error_set(err, SP_ELIMIT, "%s: %llu bytes, more than the limit of %llu", full,
                              (unsigned long long)st.st_size,
                              (unsigned long long)ds->max_file_bytes);
        free(full);
        if (rc) {
            if (dfd >= 0) close(dfd);
            annotate(ds, e, i, rc, err);
            return rc;
        }
        recs[i] = sp__ds_rec_of(&st);
    }
    if (dfd >= 0) close(dfd);
    return SP_OK;
}

/* 2. the index, if one is there and sound (the cache's entry first, then
 * an old sidecar beside the data): loaded into *sc; returns which of
 * paths[] (filled here; why: why there is no cache entry) held it, or -1. */
static int find_sidecar(sp_dataset *ds, const char *root, char paths[2][4096], sidecar *sc,
                        char *nocache, size_t nn) {
    sp_dataset_index_info *info = &ds->index;
    int found = -1;
    sidecar_paths(ds, root, paths, nocache, nn);
    snprintf(info->path, sizeof info->path, "%.4095s", paths[0]);   /* < 4096 bytes */
    for (int k = 0; k < 2 && found < 0; k++) {
        if (!paths[k][0]) continue;
        if (ds->index_mode == SP_INDEX_REBUILD) break;
        char why[sizeof info->warning];
        int r = sidecar_load(paths[k], ds, root, sc, why, sizeof why);
        if (r == 1) found = k;
        if (r < 0 && !info->warning[0])
            note(info->warning, sizeof info->warning, "%s; rebuilt", why);
    }
    if (found >= 0) snprintf(info->path, sizeof info->path, "%.4095s", paths[found]);
    return found;
}

/* 3. merge: trust a record whose path and stat match and that is not racy
 * (its size, hash and verdict go to ds, its table to aux[i] when aux is
 * not NULL) nor, when checking, without a verdict and a table (version 1);
 * the others are listed in todo. Returns how many are in todo; *reused
 * counts the trusted ones. */
static uint64_t merge(sp_dataset *ds, const sidecar *sc, int found, const rec *recs,
                      int checking, sp__ds_aux *aux, uint64_t *todo, uint64_t *reused) {
    uint64_t ntodo = 0;
    size_t off = sc->first;
    uint64_t k = 0;
    for (uint64_t i = 0; i < ds->n; i++) {
        const char *path = ds->pool + ds->path_off[i];
        int hit = 0;
        while (found >= 0 && k < sc->n) {
            uint32_t pl = sp__le_get32(sc->data + off);
            const char *sp = (const char *)sc->data + off + 4;
            size_t pathlen = strlen(path);
            int c = memcmp(sp, path, pl < pathlen ? pl : pathlen);
            if (c == 0) c = (pl > pathlen) - (pl < pathlen);
            if (c > 0) break;                       /* path not in the sidecar */
            const uint8_t *r = sc->data + off + 4 + pl;   /* flags, 7 u64, [table] */
            off += record_bytes(sc->data + off, sc->version);
            k++;
            if (c < 0) continue;                    /* a record of a file now gone */
            rec old = {sp__le_get64(r + 4), sp__le_get64(r + 12), sp__le_get64(r + 20), sp__le_get64(r + 28), sp__le_get64(r + 36)};
            uint32_t fl = sp__le_get32(r);
            if (!(fl & SIDECAR_RACY) &&
                (!checking || ((fl & SP_DS_CHECKED) && sc->version >= 2)) &&
                !memcmp(&old, &recs[i], sizeof old)) {
                if (ds->verdicts) ds->verdicts[i] = (uint8_t)(fl & SIDECAR_VERDICT);
                if (aux && sc->version >= 2) aux[i] = (sp__ds_aux){r + 64, sp__le_get32(r + 60), 0};
                ds->sizes[i] = old.size;
                ds->hashes[i].hi = sp__le_get64(r + 44);
                ds->hashes[i].lo = sp__le_get64(r + 52);
                hit = 1;
            }
            break;
        }
        if (hit) (*reused)++;
        else todo[ntodo++] = i;
    }
    return ntodo;
}

/* 5. write the index into the user's cache folder; best effort: on
 * failure the next open hashes again. flags: n spare words. */
static void write_sidecar(sp_dataset *ds, const char *root, const rec *recs, uint32_t *flags,
                          uint64_t racy_from, char paths[2][4096]) {
    sp_dataset_index_info *info = &ds->index;
    uint64_t n = ds->n;
    sp__sbuf b = {0};
    for (uint64_t i = 0; i < n; i++)
        flags[i] = (recs[i].mtime >= racy_from || recs[i].ctime >= racy_from ? SIDECAR_RACY : 0) |
                   (ds->verdicts ? ds->verdicts[i] : 0u);
    sp__sbuf_put(&b, SIDECAR_MAGIC, 8);
    sp__ds_buf_u32(&b, SIDECAR_VERSION);
    sp__ds_buf_u32(&b, sp__ds_kind(ds));
    sp__ds_buf_u64(&b, n);
    sp__ds_buf_u32(&b, (uint32_t)strlen(root));
    sp__sbuf_put(&b, root, strlen(root));
    for (uint64_t i = 0; i < n; i++) {
        const char *path = ds->pool + ds->path_off[i];
        sp__ds_buf_u32(&b, (uint32_t)strlen(path));
        sp__sbuf_put(&b, path, strlen(path));
        sp__ds_buf_u32(&b, flags[i]);
        sp__ds_buf_u64(&b, recs[i].dev);
        sp__ds_buf_u64(&b, recs[i].ino);
        sp__ds_buf_u64(&b, ds->sizes[i]);
        sp__ds_buf_u64(&b, recs[i].mtime);
        sp__ds_buf_u64(&b, recs[i].ctime);
        sp__ds_buf_u64(&b, ds->hashes[i].hi);
        sp__ds_buf_u64(&b, ds->hashes[i].lo);
        uint64_t a0 = ds->aux ? ds->aux_off[i] : 0, a1 = ds->aux ? ds->aux_off[i + 1] : 0;
        sp__ds_buf_u32(&b, (uint32_t)(a1 - a0));
        sp__sbuf_put(&b, ds->aux ? ds->aux + a0 : NULL, (size_t)(a1 - a0));
    }
    if (!b.oom) sp__ds_buf_u64(&b, XXH3_64bits(b.p, b.len));
    /* Only into the cache: an old sidecar beside the data is never written. */
    if (!b.oom && paths[0][0] && sp_write_file_atomic(paths[0], b.p, b.len, 0, NULL) == SP_OK) {
        info->written = 1;
        memcpy(info->path, paths[0], sizeof paths[0]);   /* same size, NUL-terminated */
    }
    free(b.p);
}

/* The checker, when a verdict can be kept: an entry path in a cache folder
 * this process may write (else checking would cost a full decode of every
 * file at every open). */
static sp__ds_checker checker_for(const char *entry) {
    sp__ds_checker fn = atomic_load(&g_checker);
    const char *slash = strrchr(entry, '/');
    if (!fn || !slash) return NULL;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - entry), entry);
    return access(dir, W_OK) == 0 ? fn : NULL;
}

/* 4b. the tables of aux packed into ds->aux / aux_off (none on a failed
 * allocation: then only the decodes' speed differs). */
static void pack_aux(sp_dataset *ds, const sp__ds_aux *aux) {
    uint64_t n = ds->n, total = 0;
    for (uint64_t i = 0; i < n; i++) total += aux[i].len;
    if (!total) return;
    ds->aux_off = malloc((n + 1) * sizeof *ds->aux_off);
    ds->aux = malloc(total);
    if (!ds->aux_off || !ds->aux) {
        free(ds->aux_off);
        free(ds->aux);
        ds->aux_off = NULL;
        ds->aux = NULL;
        return;
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        ds->aux_off[i] = off;
        if (aux[i].len) memcpy(ds->aux + off, aux[i].p, aux[i].len);
        off += aux[i].len;
    }
    ds->aux_off[n] = off;
}

/* Fill ds->sizes/hashes of the n packed samples: from the persistent
 * index where a file's stat is unchanged, else by hashing it (threads),
 * then rewrite the index if anything differed. Errors name the file (and
 * its list line, from e). */
static int hash_files(sp_dataset *ds, const sp__ds_entries *e, sp_error *err) {
    sp_dataset_index_info *info = &ds->index;
    uint64_t n = ds->n;
    const char *env = getenv("SEEDPIPE_INDEX");
    int use = ds->index_mode != SP_INDEX_OFF && !(env && strcmp(env, "off") == 0);
    rec *recs = calloc(n ? n : 1, sizeof *recs);
    uint32_t *flags = calloc(n ? n : 1, sizeof *flags);
    uint64_t *todo = malloc((n ? n : 1) * sizeof *todo);
    char *root = use ? abs_root(ds) : NULL;
    sp__ds_aux *aux = use ? calloc(n ? n : 1, sizeof *aux) : NULL;
    if (use) ds->verdicts = calloc(n ? n : 1, 1);
    sidecar sc = {0};
    int rc = SP_OK;
    if (!recs || !flags || !todo || (use && (!root || !ds->verdicts || !aux))) {
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory for %llu samples", ds->root,
                          (unsigned long long)n);
        goto done;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t racy_from = sp__ds_ns(now) - (uint64_t)SP_DS_RACY_NS;
    if (use && (rc = stat_all(ds, e, recs, err)) != SP_OK) goto done;
    char paths[2][4096] = {"", ""}, nocache[sizeof info->warning] = "";
    int found = use ? find_sidecar(ds, root, paths, &sc, nocache, sizeof nocache) : -1;
    uint64_t reused = 0;
    sp__ds_checker check = use ? checker_for(paths[0]) : NULL;
    uint64_t ntodo = merge(ds, &sc, found, recs, check != NULL, aux, todo, &reused);
    int dirty = found < 0 || ntodo > 0 || sc.n != n;

    /* 4. hash what could not be trusted. */
    uint64_t failed = 0;
    rc = sp__ds_hash_all(ds, todo, ntodo, recs, check, aux, &failed, err);
    if (rc) {
        annotate(ds, e, failed, rc, err);
        goto done;
    }
    if (use) pack_aux(ds, aux);
    info->reused = reused;
    info->hashed = ntodo;
    info->used = use;
    if (use && dirty) write_sidecar(ds, root, recs, flags, racy_from, paths);
    if (use && dirty && !paths[0][0] && !info->warning[0])   /* said once, the first reason */
        note(info->warning, sizeof info->warning, "%s; no index kept: every file is hashed at "
             "each open", nocache);
done:
    for (uint64_t i = 0; aux && i < n; i++)
        if (aux[i].owned) free((void *)aux[i].p);
    free(aux);
    free(sc.data);
    free(root);
    free(todo);
    free(flags);
    free(recs);
    return rc;
}

/* A sample list may name one file many times (a torch Subset that repeats
 * indices): dups[i] is the first sample with sample i's path, and only
 * those firsts are hashed. Sorting (path, sample number) pairs puts each
 * path's first occurrence first: O(n log n) string compares. */
typedef struct path_ref {
    const char *path;
    uint64_t i;
} path_ref;

static int cmp_path_ref(const void *a, const void *b) {
    const path_ref *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int find_duplicates(const sp_dataset *ds, uint64_t *dups, sp_error *err) {
    uint64_t n = ds->n;
    path_ref *ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory for %llu samples", ds->root,
                            (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) ord[i] = (path_ref){ds->pool + ds->path_off[i], i};
    qsort(ord, n, sizeof *ord, cmp_path_ref);
    for (uint64_t k = 0; k < n; k++) {
        int same = k > 0 && strcmp(ord[k].path, ord[k - 1].path) == 0;
        dups[ord[k].i] = same ? dups[ord[k - 1].i] : ord[k].i;
    }
    free(ord);
    return SP_OK;
}

/* Hash each distinct file of a listed dataset once; repeats copy its size
 * and hash. The first failing sample in list order is still the one named. */
static int hash_listed(sp_dataset *ds, const sp__ds_entries *e, sp_error *err) {
    uint64_t n = ds->n, ntodo = 0, failed = 0;
    uint64_t *dups = malloc((n ? n : 1) * sizeof *dups);
    uint64_t *todo = malloc((n ? n : 1) * sizeof *todo);
    rec *recs = calloc(n ? n : 1, sizeof *recs);
    int rc = !dups || !todo || !recs
                 ? sp_error_set(err, SP_ENOMEM, "%s: out of memory for %llu samples", ds->root,
                                (unsigned long long)n)
                 : find_duplicates(ds, dups, err);
    for (uint64_t i = 0; rc == SP_OK && i < n; i++)
        if (dups[i] == i) todo[ntodo++] = i;
    if (rc == SP_OK &&
        (rc = sp__ds_hash_all(ds, todo, ntodo, recs, NULL, NULL, &failed, err)) != SP_OK)
        annotate(ds, e, failed, rc, err);
    for (uint64_t i = 0; rc == SP_OK && i < n; i++) {
        ds->sizes[i] = ds->sizes[dups[i]];
        ds->hashes[i] = ds->hashes[dups[i]];
    }
    if (rc == SP_OK) {
        ds->index.hashed = ntodo;
        ds->index.used = 0;
    }
    free(recs);
    free(todo);
    free(dups);
    return rc;
}

/* ---- the entry point: packing an encoded-file dataset ------------------------------ */

/* Pack the entries, in their order, into ds's sample arrays. */
static int pack(sp_dataset *ds, const sp__ds_entries *e, sp_error *err) {
    size_t n = e->n, pool_len = 0;
    for (size_t i = 0; i < n; i++) pool_len += strlen(e->v[i].rel) + 1;
    int rc = sp__ds_alloc_samples(ds, n, pool_len, err);
    if (rc != SP_OK) return rc;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(e->v[i].rel) + 1;
        memcpy(ds->pool + off, e->v[i].rel, len);
        ds->path_off[i] = off;
        off += len;
        ds->labels[i] = e->v[i].label;
        ds->class_counts[e->v[i].label]++;
    }
    return SP_OK;
}

static int cmp_entry(const void *a, const void *b) {
    const sp__ds_entry *x = a, *y = b;
    int c = strcmp(x->rel, y->rel);
    if (c) return c;
    return (x->line > y->line) - (x->line < y->line);
}

int sp__ds_finish_files(sp_dataset *ds, sp__ds_entries *e, const char *what,
                        sp_error *err) {
    int rc = SP_OK;
    if (e->n == 0) {
        rc = sp_error_set(err, SP_EFORMAT, "%s: %s", ds->root, what);
        goto done;
    }
    qsort(e->v, e->n, sizeof *e->v, cmp_entry);
    for (size_t i = 1; i < e->n; i++) {
        if (strcmp(e->v[i - 1].rel, e->v[i].rel) == 0) {
            rc = sp_error_set(err, SP_EFORMAT, "%s:%d: duplicate path \"%s\" (first on line %d)",
                              ds->root, e->v[i].line, e->v[i].rel, e->v[i - 1].line);
            goto done;
        }
    }
    rc = pack(ds, e, err);
    /* Every file's content hash: from the persistent index, or read. */
    if (rc == SP_OK) rc = hash_files(ds, e, err);
done:
    for (size_t i = 0; i < e->n; i++) { free(e->v[i].rel); e->v[i].rel = NULL; }
    e->n = 0;
    return rc;
}

int sp__ds_finish_listed(sp_dataset *ds, sp__ds_entries *e, sp_error *err) {
    ds->index_mode = SP_INDEX_OFF;   /* a sidecar keeps sorted records of a root */
    int rc = pack(ds, e, err);
    if (rc == SP_OK) rc = hash_listed(ds, e, err);
    for (size_t i = 0; i < e->n; i++) { free(e->v[i].rel); e->v[i].rel = NULL; }
    e->n = 0;
    return rc;
}

/* cache_manifest.c - an entry's MANIFEST: what the entry is, in clear text
 * (its format and its strict reader; cache_internal.h).
 *
 * In the cache's stack (cache/, bottom first) low, beside the batch
 * file format: it calls no other cache file (the bounded file read is
 * common/'s); readers, gc and writers above read and write it.
 *
 * The manifest is the last file written into an entry and the first one
 * read: a reader trusts an entry only through it. It is text so that a
 * person can `cat` it, one "name value" per line:
 *
 *   seedpipe-cache 2                  format version (first line, always)
 *   key <32 hex>                      the entry key (= the directory name)
 *   fingerprint <32 hex>              sp__loader_fingerprint()
 *   dataset_fingerprint <32 hex>
 *   seed S / epoch E / rank R / world W / batch_size B / drop_last 0|1
 *   skip_normalize 0|1 / dtype / layout / on_error / rng_mode
 *   sample_bytes N / batches N / raw_bytes N / stored_bytes N / level L
 *   created <unix seconds>            informational (LRU uses the mtime)
 *   dataset <path> / pipeline <canonical spec>   informational, for verify
 *   b <index> <stored> <raw> <16 hex> one per batch, in order: file size,
 *                                     uncompressed size, the file's XXH3-64
 *   checksum <16 hex>                 XXH3-64 of every byte before this line
 *
 * The reader is strict: every field exactly once, numbers in range, batch
 * lines complete and in order, the checksum last, nothing after it. A
 * manifest of another format version is refused by its first line, before
 * anything else is interpreted.
 */
#include "cache/cache_internal.h"
#include "common/sbuf_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include "common/common_internal.h"

int sp__cm_format(const sp__cm *m, char **text, size_t *len) {
    const sp_cache_entry_info *e = &m->info;
    sp__sbuf t = {0};
    char k[33], f[33], d[33];
    sp_digest_hex(m->key, k);
    sp_digest_hex(e->fingerprint, f);
    sp_digest_hex(e->dataset_fingerprint, d);
    sp__sbuf_printf(&t, "%s %u\nkey %s\nfingerprint %s\ndataset_fingerprint %s\n",
                    SP__CM_MAGIC, m->version, k, f, d);
    sp__sbuf_printf(&t, "seed %" PRIu64 "\nepoch %u\nrank %u\nworld %u\nbatch_size %u\n"
                    "drop_last %d\n", e->seed, e->epoch, e->rank, e->world, e->batch_size,
                    e->drop_last ? 1 : 0);
    sp__sbuf_printf(&t, "skip_normalize %d\ndtype %s\nlayout %s\non_error %s\nrng_mode %s\n",
                    e->skip_normalize ? 1 : 0, e->dtype, e->layout, e->on_error, e->rng_mode);
    sp__sbuf_printf(&t, "sample_bytes %" PRIu64 "\nbatches %" PRIu64 "\nraw_bytes %" PRIu64
                    "\nstored_bytes %" PRIu64 "\nlevel %d\ncreated %" PRId64 "\n",
                    e->sample_bytes, e->batches, e->raw_bytes, e->stored_bytes, e->level,
                    e->created);
    sp__sbuf_printf(&t, "dataset %s\npipeline %s\n", e->dataset ? e->dataset : "",
                    e->pipeline ? e->pipeline : "");
    if (e->split && e->subset)   /* optional: entries of a whole dataset have none */
        sp__sbuf_printf(&t, "split %s\nsubset %s\nsplit_seed %" PRIu64 "\n", e->split,
                        e->subset, e->split_seed);
    for (uint64_t i = 0; i < e->batches; i++)
        sp__sbuf_printf(&t, "b %" PRIu64 " %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n", i,
                        m->b[i].stored, m->b[i].raw, m->b[i].file_hash);
    if (!t.oom) {
        uint64_t h = XXH3_64bits(t.p, t.len);
        sp__sbuf_printf(&t, "checksum %016" PRIx64 "\n", h);
    }
    if (t.oom) {
        free(t.p);
        return SP_ENOMEM;
    }
    *text = t.p;
    *len = t.len;
    return SP_OK;
}

void sp__cm_free(sp__cm *m) {
    if (!m) return;
    free(m->info.dataset);
    free(m->info.pipeline);
    free(m->info.split);
    free(m->info.subset);
    free(m->b);
    memset(m, 0, sizeof *m);
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s || *s == '-' || *s == '+' || *s == ' ') return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static int parse_u32(const char *s, uint32_t *out) {
    uint64_t v;
    if (parse_u64(s, &v) || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_hex64(const char *s, uint64_t *out) {
    if (strlen(s) != 16) return -1;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = (v << 4) | (uint64_t)d;
    }
    *out = v;
    return 0;
}

static int copy_word(char *dst, size_t cap, const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n >= cap) return -1;
    memcpy(dst, v, n + 1);
    return 0;
}

static char *dup_or_null(const char *v) {
    size_t n = strlen(v) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, v, n);
    return d;
}

/* The first line (the magic and the format version, before anything else)
 * and the last (the checksum of everything before it) of the text s
 * (NUL-terminated, length len). The checksum line is cut off (s ends
 * before it); *body gets the second line. */
static int parse_frame(char *s, size_t len, const char *path, sp__cm *m, char **body,
                       sp_error *err) {
    size_t ml = strlen(SP__CM_MAGIC);
    if (len < ml + 3 || memcmp(s, SP__CM_MAGIC " ", ml + 1) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: not a seedpipe cache manifest", path);
    char *nl = memchr(s, '\n', len);
    if (!nl) return sp_error_set(err, SP_EFORMAT, "%s: truncated", path);
    *nl = '\0';
    if (parse_u32(s + ml + 1, &m->version) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: bad format version line", path);
    if (m->version != SP_CACHE_FORMAT_VERSION)
        return sp_error_set(err, SP_EFORMAT, "%s: cache format version %u (this library reads "
                            "%d): refused", path, m->version, SP_CACHE_FORMAT_VERSION);
    *nl = '\n';
    if (s[len - 1] != '\n') return sp_error_set(err, SP_EFORMAT, "%s: truncated", path);
    size_t last = len - 1;
    while (last > 0 && s[last - 1] != '\n') last--;
    uint64_t want;
    s[len - 1] = '\0';
    if (strncmp(s + last, "checksum ", 9) != 0 || parse_hex64(s + last + 9, &want) != 0)
        return sp_error_set(err, SP_EFORMAT, "%s: truncated (no checksum line)", path);
    if (XXH3_64bits(s, last) != want)
        return sp_error_set(err, SP_EFORMAT, "%s: checksum mismatch", path);
    s[last] = '\0';
    *body = nl + 1;
    return SP_OK;
}

/* The "name value" fields, in the order of their index in parse_field(). */
enum { NFIELDS = 26, NREQUIRED = 22 };   /* split, subset, split_seed: optional */
static const char *const FIELDS[NFIELDS] = {
    "key", "fingerprint", "dataset_fingerprint", "seed", "epoch", "rank", "world",
    "batch_size", "drop_last", "skip_normalize", "dtype", "layout", "on_error", "rng_mode",
    "sample_bytes", "batches", "raw_bytes", "stored_bytes", "level", "created", "dataset",
    "pipeline", "split", "subset", "split_seed", NULL};

/* Field f (an index of FIELDS) has value v: store it in m.
 * @return 0, 1 (a bad value), or -1 (out of memory). */
static int parse_field(int f, const char *v, sp__cm *m) {
    sp_cache_entry_info *e = &m->info;
    uint64_t u = 0;
    int bad = 0;
    switch (f) {
    case 0: bad = sp__digest_parse(v, &m->key) != 0; break;
    case 1: bad = sp__digest_parse(v, &e->fingerprint) != 0; break;
    case 2: bad = sp__digest_parse(v, &e->dataset_fingerprint) != 0; break;
    case 3: bad = parse_u64(v, &e->seed); break;
    case 4: bad = parse_u32(v, &e->epoch); break;
    case 5: bad = parse_u32(v, &e->rank); break;
    case 6: bad = parse_u32(v, &e->world); break;
    case 7: bad = parse_u32(v, &e->batch_size); break;
    case 8: bad = parse_u64(v, &u) || u > 1; e->drop_last = (int)u; break;
    case 9: bad = parse_u64(v, &u) || u > 1; e->skip_normalize = (int)u; break;
    case 10: bad = copy_word(e->dtype, sizeof e->dtype, v); break;
    case 11: bad = copy_word(e->layout, sizeof e->layout, v); break;
    case 12: bad = copy_word(e->on_error, sizeof e->on_error, v); break;
    case 13: bad = copy_word(e->rng_mode, sizeof e->rng_mode, v); break;
    case 14: bad = parse_u64(v, &e->sample_bytes) || e->sample_bytes > SP__CB_MAX_RAW; break;
    case 15:
        bad = parse_u64(v, &e->batches) || e->batches == 0 || e->batches > SP__CM_MAX_BATCHES;
        if (!bad) {
            m->b = calloc((size_t)e->batches, sizeof *m->b);
            if (!m->b) return -1;
        }
        break;
    case 16: bad = parse_u64(v, &e->raw_bytes); break;
    case 17: bad = parse_u64(v, &e->stored_bytes); break;
    case 18: {
        int neg = v[0] == '-';
        bad = parse_u64(v + neg, &u) || u > 1000;
        e->level = neg ? -(int)u : (int)u;
        break;
    }
    case 19: bad = parse_u64(v, &u) || u > INT64_MAX; e->created = (int64_t)u; break;
    case 20: bad = !(e->dataset = dup_or_null(v)); break;
    case 21: bad = !(e->pipeline = dup_or_null(v)); break;
    case 22: bad = !*v || !(e->split = dup_or_null(v)); break;
    case 23: bad = !*v || !(e->subset = dup_or_null(v)); break;
    case 24: bad = parse_u64(v, &e->split_seed); break;
    }
    return bad;
}

/* A "b <index> <stored> <raw> <file xxh64>" line's value v, which must be
 * batch *nextb (after the batches field). */
static int parse_batch_line(const char *v, sp__cm *m, uint64_t *nextb, const char *path,
                            sp_error *err) {
    uint64_t idx, st, raw, fh;
    char w[4][32];
    if (!m->b || sscanf(v, "%31s %31s %31s %31s", w[0], w[1], w[2], w[3]) != 4 ||
        parse_u64(w[0], &idx) || parse_u64(w[1], &st) || parse_u64(w[2], &raw) ||
        parse_hex64(w[3], &fh) || idx != *nextb || idx >= m->info.batches)
        return sp_error_set(err, SP_EFORMAT, "%s: bad batch line %" PRIu64, path, *nextb);
    m->b[idx].stored = st;
    m->b[idx].raw = raw;
    m->b[idx].file_hash = fh;
    (*nextb)++;
    return SP_OK;
}

/* After the last line: every required field seen, the split fields all or
 * none, every batch line there, and the sizes adding up. */
static int check_complete(const sp__cm *m, const int *seen, uint64_t nextb, const char *path,
                          sp_error *err) {
    const sp_cache_entry_info *e = &m->info;
    for (int i = 0; i < NREQUIRED; i++)
        if (!seen[i]) return sp_error_set(err, SP_EFORMAT, "%s: missing \"%s\"", path, FIELDS[i]);
    if (seen[22] != seen[23] || seen[22] != seen[24])
        return sp_error_set(err, SP_EFORMAT, "%s: split, subset and split_seed go together", path);
    if (nextb != e->batches)
        return sp_error_set(err, SP_EFORMAT, "%s: %" PRIu64 " batch lines, %" PRIu64 " expected",
                            path, nextb, e->batches);
    uint64_t st = 0, raw = 0;
    for (uint64_t i = 0; i < e->batches; i++) {
        st += m->b[i].stored;
        raw += m->b[i].raw;
    }
    if (st != e->stored_bytes || raw != e->raw_bytes)
        return sp_error_set(err, SP_EFORMAT, "%s: batch sizes do not add up", path);
    return SP_OK;
}

/* Parse the text (NUL-terminated, length len) into m. */
static int parse(char *s, size_t len, const char *path, sp__cm *m, sp_error *err) {
    char *line = NULL;
    int rc = parse_frame(s, len, path, m, &line, err);
    if (rc) return rc;
    int seen[NFIELDS] = {0};
    uint64_t nextb = 0;
    while (*line) {
        char *end = strchr(line, '\n');
        if (!end) return sp_error_set(err, SP_EFORMAT, "%s: truncated", path);
        *end = '\0';
        char *sp = strchr(line, ' ');
        if (!sp) return sp_error_set(err, SP_EFORMAT, "%s: bad line \"%.40s\"", path, line);
        *sp = '\0';
        const char *v = sp + 1;
        if (!strcmp(line, "b")) {
            rc = parse_batch_line(v, m, &nextb, path, err);
            if (rc) return rc;
        } else {
            int f = -1;
            for (int i = 0; FIELDS[i]; i++)
                if (!strcmp(FIELDS[i], line)) f = i;
            if (f < 0 || seen[f])
                return sp_error_set(err, SP_EFORMAT, "%s: %s field \"%s\"", path,
                                    f < 0 ? "unknown" : "repeated", line);
            seen[f] = 1;
            int bad = parse_field(f, v, m);
            if (bad < 0) return sp_error_set(err, SP_ENOMEM, "cache: out of memory");
            if (bad)
                return sp_error_set(err, SP_EFORMAT, "%s: bad value of \"%s\"", path, line);
        }
        line = end + 1;
    }
    rc = check_complete(m, seen, nextb, path, err);
    if (rc) return rc;
    sp_digest_hex(m->key, m->info.key);
    m->info.ok = 1;
    return SP_OK;
}

int sp__cm_read(int dirfd, const char *path, sp__cm *m, int *enoent, sp_error *err) {
    memset(m, 0, sizeof *m);
    *enoent = 0;
    sp__buf buf = {NULL, 0};
    size_t len;
    /* The size is compared with the limit before a byte is read. */
    if (sp__read_file_at(dirfd, SP__CM_NAME, NULL, SP__CM_MAX_BYTES, &buf, &len, NULL) != 0) {
        int e = errno;
        sp__buf_free(&buf);
        *enoent = e == ENOENT;
        return sp_error_set(err, e == ENOENT ? SP_EIO : SP_EFORMAT, "%s: %s", path,
                            e == ENOENT ? "missing manifest" : e == EFBIG ? "manifest too large"
                                                                        : strerror(e));
    }
    buf.p[len] = '\0';
    if (memchr(buf.p, '\0', len)) {
        sp__buf_free(&buf);
        return sp_error_set(err, SP_EFORMAT, "%s: NUL byte in manifest", path);
    }
    int rc = parse((char *)buf.p, len, path, m, err);
    sp__buf_free(&buf);
    if (rc) {
        free(m->info.dataset);
        free(m->info.pipeline);
        free(m->info.split);
        free(m->info.subset);
        free(m->b);
        m->b = NULL;
        m->info.dataset = m->info.pipeline = m->info.split = m->info.subset = NULL;
    }
    return rc;
}

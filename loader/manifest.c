/* manifest.c - writing, reading and comparing digest manifests
 * (include/seedpipe/manifest.h).
 *
 * Writing goes through the library's JSON writer (common/json_write_internal.h). Reading goes line by line through the bounded
 * JSON tokenizer (json.c) and checks every field, since a manifest to
 * compare may come from another machine or be truncated by a crash.
 */
#include "seedpipe/manifest.h"
#include "seedpipe/state.h"
#include "loader/loader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio_internal.h"
#include "common/json_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_size(), sp__dataset_fingerprint() */
#include "common/json_write_internal.h"
#include "common/common_internal.h"
#include "loader/manifest_internal.h"

void sp__json_write_string(FILE *f, const char *s) {
    sp__jw w = sp__jw_file(f);
    sp__jw_str(&w, s);
}

static int check_io(FILE *f, sp_error *err) {
    if (ferror(f))
        return sp_error_set(err, SP_EIO, "manifest: write failed: %s", strerror(errno));
    return SP_OK;
}

/* "key":[v0,v1,...] */
static void put_list(sp__jw *w, const char *key, const uint64_t *v, uint32_t n) {
    sp__jw_key(w, key);
    sp__jw_arr(w);
    for (uint32_t i = 0; i < n; i++) sp__jw_u64(w, v[i]);
    sp__jw_end(w, ']');
}

int sp_manifest_write_header(FILE *f, const sp_loader *ld, uint32_t epochs, sp_error *err) {
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    const sp_dataset *ds = sp__loader_dataset(ld);
    char fp[33], dfp[33], versions[512];
    sp_digest_hex(sp__loader_fingerprint(ld), fp);
    sp_digest_hex(sp__dataset_fingerprint(ds), dfp);
    sp_library_versions_json(versions, sizeof versions);
    int c, h, w;
    sp__loader_sample_dims(ld, &c, &h, &w);
    sp__jw j = sp__jw_file(f);
    sp__jw_obj(&j);
    sp__jw_ku64(&j, "seedpipe_manifest", 1);
    sp__jw_kstr(&j, "fingerprint", fp);
    sp__jw_kstr(&j, "dataset_fingerprint", dfp);
    sp__jw_kstr(&j, "dataset", cfg->dataset);
    sp__jw_ku64(&j, "samples", sp__dataset_size(ds));
    sp__jw_kstr(&j, "pipeline", sp__loader_spec(ld));
    sp__jw_ku64(&j, "seed", cfg->seed);
    sp__jw_ku64(&j, "batch_size", cfg->batch_size);
    sp__jw_key(&j, "drop_last");
    sp__jw_bool(&j, cfg->drop_last);
    sp__jw_ku64(&j, "rank", cfg->rank);
    sp__jw_ku64(&j, "world", cfg->world);
    sp__jw_kstr(&j, "dtype", sp_dtype_name(cfg->dtype));
    sp__jw_kstr(&j, "layout", sp_layout_name(cfg->layout));
    sp__jw_key(&j, "sample_shape");
    sp__jw_fmt(&j, "[%d,%d,%d]", c, h, w);
    sp__jw_ku64(&j, "epochs", epochs);
    if (cfg->on_error != SP_ON_ERROR_FAIL)
        sp__jw_kstr(&j, "on_error", sp_on_error_name(cfg->on_error));
    if (cfg->rng_mode != SP_RNG_PER_SAMPLE)
        sp__jw_kstr(&j, "rng_mode", sp__rng_mode_name(cfg->rng_mode));
    if (cfg->order != SP_ORDER_SHUFFLE) {
        char o[32];
        sp_order_spec_format(cfg->order, cfg->block_shards, o, sizeof o);
        sp__jw_kstr(&j, "order", o);
    }
    sp_loader_state st;   /* a blend whose weights switched: where, and the weights since */
    sp_loader_state_at(ld, 0, 0, &st);
    if (st.blend_sources && (st.blend_epoch || st.blend_slot)) {
        sp__jw_key(&j, "blend_since");
        sp__jw_fmt(&j, "[%u,%llu]", st.blend_epoch, (unsigned long long)st.blend_slot);
        put_list(&j, "blend_weights", st.blend_weights, st.blend_sources);
    }
    sp__jw_key(&j, "versions");
    sp__jw_json(&j, versions);
    sp__jw_end(&j, '}');
    sp__jw_raw(&j, "\n");
    return check_io(f, err);
}

int sp_manifest_write_batch(FILE *f, const sp_batch *b, sp_digest digest, sp_error *err) {
    char hex[33];
    sp_digest_hex(digest, hex);
    sp__jw j = sp__jw_file(f);
    sp__jw_obj(&j);
    sp__jw_ku64(&j, "epoch", b->epoch);
    sp__jw_ku64(&j, "batch", b->index);
    sp__jw_ku64(&j, "count", b->count);
    put_list(&j, "indices", b->indices, b->count);
    sp__jw_key(&j, "labels");
    sp__jw_arr(&j);
    for (uint32_t i = 0; i < b->count; i++) sp__jw_i64(&j, b->labels[i]);
    sp__jw_end(&j, ']');
    /* Only present when the on-error policy acted, so clean streams keep
     * the v1 line format. */
    if (b->nskipped && b->skipped) put_list(&j, "skipped", b->skipped, b->nskipped);
    if (b->nsubstituted && b->substituted) {
        sp__jw_key(&j, "substituted");
        sp__jw_arr(&j);
        for (uint32_t i = 0; i < b->nsubstituted; i++)
            sp__jw_fmt(&j, "[%llu,%llu]", (unsigned long long)b->substituted[2 * i],
                       (unsigned long long)b->substituted[2 * i + 1]);
        sp__jw_end(&j, ']');
    }
    sp__jw_kstr(&j, "digest", hex);
    sp__jw_end(&j, '}');
    sp__jw_raw(&j, "\n");
    return check_io(f, err);
}

/* ---- reading ----------------------------------------------------------------- */

#define LINE_MAX_BYTES (64u << 20)
#define BATCH_MAX (1u << 20)

void sp_manifest_free(sp_manifest *m) {
    if (!m) return;
    for (size_t i = 0; i < m->nbatches; i++) {
        free(m->batches[i].indices);
        free(m->batches[i].labels);
        free(m->batches[i].skipped);
        free(m->batches[i].substituted);
    }
    free(m->batches);
    free(m->dataset);
    free(m->pipeline);
    free(m);
}

static char *json_strdup(const sp__json *j, long tok) {
    if (tok < 0 || j->t[tok].kind != SP__J_STR) return NULL;
    size_t cap = j->t[tok].end - j->t[tok].start + 1;
    char *b = malloc(cap);
    if (b && sp__json_str(j, tok, b, cap) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

/* A JSON array of `n` unsigned integers (<= max) into a new array. */
static int u64_array(const sp__json *j, long tok, uint64_t max, uint64_t **out, uint32_t *n) {
    *out = NULL;
    *n = 0;
    if (tok < 0 || j->t[tok].kind != SP__J_ARR || j->t[tok].size > BATCH_MAX) return -1;
    size_t sz = j->t[tok].size;
    uint64_t *a = malloc((sz ? sz : 1) * sizeof *a);
    if (!a) return -1;
    size_t k = (size_t)tok + 1;
    for (size_t i = 0; i < sz; i++) {
        if (sp__json_u64(j, (long)k, &a[i]) != 0 || a[i] > max) {
            free(a);
            return -1;
        }
        k = j->t[k].next;
    }
    *out = a;
    *n = (uint32_t)sz;
    return 0;
}

static int parse_header(sp_manifest *m, const sp__json *j) {
    long t;
    uint64_t v;
    if (j->t[0].kind != SP__J_OBJ) return -1;
    if (sp__json_u64(j, sp__json_get(j, 0, "seedpipe_manifest"), &v) != 0 || v != 1) return -1;
    char hex[40];
    if (sp__json_str(j, sp__json_get(j, 0, "fingerprint"), hex, sizeof hex) != 0 ||
        sp__digest_parse(hex, &m->fingerprint) != 0)
        return -1;
    if (sp__json_str(j, sp__json_get(j, 0, "dataset_fingerprint"), hex, sizeof hex) != 0 ||
        sp__digest_parse(hex, &m->dataset_fingerprint) != 0)
        return -1;
    m->dataset = json_strdup(j, sp__json_get(j, 0, "dataset"));
    m->pipeline = json_strdup(j, sp__json_get(j, 0, "pipeline"));
    if (!m->dataset || !m->pipeline) return -1;
    if (sp__json_u64(j, sp__json_get(j, 0, "seed"), &m->seed) != 0) return -1;
    if (sp__json_u64(j, sp__json_get(j, 0, "samples"), &m->samples) != 0) return -1;
    struct { const char *k; uint32_t *dst; } u32s[] = {{"batch_size", &m->batch_size},
        {"epochs", &m->epochs}, {"rank", &m->rank}, {"world", &m->world}};
    for (int i = 0; i < 4; i++) {
        if (sp__json_u64(j, sp__json_get(j, 0, u32s[i].k), &v) != 0 || v > UINT32_MAX) return -1;
        *u32s[i].dst = (uint32_t)v;
    }
    t = sp__json_get(j, 0, "drop_last");
    if (t < 0 || (j->t[t].kind != SP__J_TRUE && j->t[t].kind != SP__J_FALSE)) return -1;
    m->drop_last = j->t[t].kind == SP__J_TRUE;
    if (sp__json_str(j, sp__json_get(j, 0, "dtype"), m->dtype, sizeof m->dtype) != 0 ||
        sp__json_str(j, sp__json_get(j, 0, "layout"), m->layout, sizeof m->layout) != 0)
        return -1;
    snprintf(m->on_error, sizeof m->on_error, "fail");
    snprintf(m->rng_mode, sizeof m->rng_mode, "per-sample");
    t = sp__json_get(j, 0, "on_error");
    if (t >= 0 && sp__json_str(j, t, m->on_error, sizeof m->on_error) != 0) return -1;
    t = sp__json_get(j, 0, "rng_mode");
    if (t >= 0 && sp__json_str(j, t, m->rng_mode, sizeof m->rng_mode) != 0) return -1;
    snprintf(m->order, sizeof m->order, "shuffle");
    t = sp__json_get(j, 0, "order");
    if (t >= 0 && sp__json_str(j, t, m->order, sizeof m->order) != 0) return -1;
    return 0;
}

static const char *parse_batch(sp_manifest_batch *b, const sp__json *j) {
    uint64_t v;
    uint32_t n;
    if (j->t[0].kind != SP__J_OBJ) return "not a JSON object";
    if (sp__json_u64(j, sp__json_get(j, 0, "epoch"), &v) != 0 || v > UINT32_MAX) return "bad \"epoch\"";
    b->epoch = (uint32_t)v;
    if (sp__json_u64(j, sp__json_get(j, 0, "batch"), &b->batch) != 0) return "bad \"batch\"";
    if (sp__json_u64(j, sp__json_get(j, 0, "count"), &v) != 0 || v > BATCH_MAX) return "bad \"count\"";
    b->count = (uint32_t)v;
    if (u64_array(j, sp__json_get(j, 0, "indices"), UINT64_MAX, &b->indices, &n) != 0 || n != b->count)
        return "bad \"indices\" (not count unsigned integers)";
    long t = sp__json_get(j, 0, "labels");
    if (t < 0 || j->t[t].kind != SP__J_ARR || j->t[t].size != b->count) return "bad \"labels\"";
    b->labels = malloc((b->count ? b->count : 1) * sizeof *b->labels);
    if (!b->labels) return "out of memory";
    size_t k = (size_t)t + 1;
    for (uint32_t i = 0; i < b->count; i++) {
        int64_t x;
        if (sp__json_i64(j, (long)k, &x) != 0 || x < INT32_MIN || x > INT32_MAX) return "bad \"labels\"";
        b->labels[i] = (int32_t)x;
        k = j->t[k].next;
    }
    t = sp__json_get(j, 0, "skipped");
    if (t >= 0 && u64_array(j, t, UINT64_MAX, &b->skipped, &b->nskipped) != 0) return "bad \"skipped\"";
    t = sp__json_get(j, 0, "substituted");
    if (t >= 0) {
        if (j->t[t].kind != SP__J_ARR || j->t[t].size > BATCH_MAX) return "bad \"substituted\"";
        size_t sz = j->t[t].size;
        b->substituted = malloc((sz ? sz : 1) * 2 * sizeof(uint64_t));
        if (!b->substituted) return "out of memory";
        k = (size_t)t + 1;
        for (size_t i = 0; i < sz; i++) {
            if (j->t[k].kind != SP__J_ARR || j->t[k].size != 2 ||
                sp__json_u64(j, (long)k + 1, &b->substituted[2 * i]) != 0 ||
                sp__json_u64(j, (long)j->t[k + 1].next, &b->substituted[2 * i + 1]) != 0)
                return "bad \"substituted\"";
            k = j->t[k].next;
        }
        b->nsubstituted = (uint32_t)sz;
    }
    char hex[40];
    if (sp__json_str(j, sp__json_get(j, 0, "digest"), hex, sizeof hex) != 0 ||
        sp__digest_parse(hex, &b->digest) != 0)
        return "bad \"digest\"";
    return NULL;
}

/* The next line of f into *line (grown as it comes, never past max + 1
 * bytes: a line longer than max is refused before more of it is held).
 * @return its length, -1 at end of file, -2 on a read error, -3 if longer
 * than max, -4 out of memory, -5 a NUL byte (no manifest has one). */
static ptrdiff_t bounded_line(FILE *f, char **line, size_t *cap, size_t max) {
    size_t len = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF) {
        if (c == 0) return -5;
        if (len + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 4096;
            if (nc > max + 2) nc = max + 2;
            if (len + 2 > nc) return -3;
            char *p = realloc(*line, nc);
            if (!p) return -4;
            *line = p;
            *cap = nc;
        }
        (*line)[len++] = (char)c;
        if (c == '\n') break;
    }
    if (ferror(f)) return -2;
    if (len == 0) return -1;
    (*line)[len] = '\0';
    return (ptrdiff_t)len;
}

/* The next line of f without its line end (*len): *eof at the end of the
 * file; a read error, an overlong line, a NUL byte or an empty line is an
 * error naming path and the line. */
static int next_line(FILE *f, const char *path, uint64_t *lineno, char **line, size_t *lcap,
                     size_t *len, int *eof, sp_error *err) {
    ptrdiff_t n = bounded_line(f, line, lcap, LINE_MAX_BYTES);
    *eof = n == -1;
    if (*eof) return SP_OK;
    unsigned long long ln = ++*lineno;
    if (n == -2) return sp_error_set(err, SP_EIO, "%s: read error", path);
    if (n == -4) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    if (n == -5) return sp_error_set(err, SP_EFORMAT, "%s:%llu: NUL byte", path, ln);
    if (n == -3)
        return sp_error_set(err, SP_ELIMIT, "%s:%llu: line longer than %u bytes", path, ln,
                            LINE_MAX_BYTES);
    size_t l = (size_t)n;
    while (l && ((*line)[l - 1] == '\n' || (*line)[l - 1] == '\r')) l--;
    if (l == 0) return sp_error_set(err, SP_EFORMAT, "%s:%llu: empty line", path, ln);
    *len = l;
    return SP_OK;
}

/* One parsed line into m: the header (line 1) or the next batch (*cap:
 * the batches allocated). */
static int add_line(sp_manifest *m, size_t *cap, const sp__json *j, uint64_t lineno,
                    const char *path, sp_error *err) {
    if (lineno == 1)
        return parse_header(m, j) != 0
                   ? sp_error_set(err, SP_EFORMAT, "%s:1: not a seedpipe manifest header", path)
                   : SP_OK;
    if (m->nbatches == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        sp_manifest_batch *nb = realloc(m->batches, nc * sizeof *nb);
        if (!nb) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
        m->batches = nb;
        *cap = nc;
    }
    sp_manifest_batch *b = &m->batches[m->nbatches++];
    memset(b, 0, sizeof *b);
    b->line = lineno;
    const char *why = parse_batch(b, j);
    return why ? sp_error_set(err, SP_EFORMAT, "%s:%llu: %s", path, (unsigned long long)lineno,
                              why)
               : SP_OK;
}

int sp_manifest_read(const char *path, sp_manifest **out, sp_error *err) {
    *out = NULL;
    struct stat st;   /* the rule every reader follows: no FIFO, a regular file */
    int fd = sp__open_regular(AT_FDCWD, path, path, 0, UINT64_MAX, &st, err);
    if (fd < 0) return fd;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    sp_manifest *m = calloc(1, sizeof *m);
    char *line = NULL;
    size_t lcap = 0, cap = 0, len = 0;
    uint64_t lineno = 0;
    int rc = m ? SP_OK : sp_error_set(err, SP_ENOMEM, "%s: out of memory", path), eof = 0;
    while (rc == 0) {
        rc = next_line(f, path, &lineno, &line, &lcap, &len, &eof, err);
        if (rc != 0 || eof) break;
        sp__json j;
        sp_error je;
        char what[64];
        snprintf(what, sizeof what, "line %llu", (unsigned long long)lineno);
        int jr = sp__json_parse(&j, line, len, 8, 3 * (size_t)BATCH_MAX + 256, what, &je);
        if (jr != 0) rc = sp_error_set(err, jr, "%s: %s", path, je.msg);
        else rc = add_line(m, &cap, &j, lineno, path, err);
        sp__json_free(&j);
    }
    free(line);
    fclose(f);
    if (rc == 0 && lineno == 0) rc = sp_error_set(err, SP_EFORMAT, "%s: empty file", path);
    if (rc != 0) {
        sp_manifest_free(m);
        return rc;
    }
    *out = m;
    return SP_OK;
}

static int dig_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

void sp_manifest_compare(const sp_manifest *a, const sp_manifest *b, sp_manifest_divergence *d) {
    memset(d, 0, sizeof *d);
    d->position = -1;
    char *h = d->header;
    size_t hc = sizeof d->header;
#define HDIFF(cond, name) \
    if (cond) { size_t l_ = strlen(h); snprintf(h + l_, hc - l_, "%s%s", l_ ? ", " : "", name); }
    HDIFF(!dig_eq(a->dataset_fingerprint, b->dataset_fingerprint), "dataset");
    HDIFF(strcmp(a->pipeline, b->pipeline) != 0, "pipeline");
    HDIFF(a->seed != b->seed, "seed");
    HDIFF(a->batch_size != b->batch_size || a->drop_last != b->drop_last, "batch geometry");
    HDIFF(a->rank != b->rank || a->world != b->world, "rank/world");
    HDIFF(strcmp(a->dtype, b->dtype) || strcmp(a->layout, b->layout), "output format");
    HDIFF(strcmp(a->on_error, b->on_error) != 0, "on_error");
    HDIFF(strcmp(a->rng_mode, b->rng_mode) != 0, "rng_mode");
    HDIFF(strcmp(a->order, b->order) != 0, "order");
    HDIFF(!h[0] && !dig_eq(a->fingerprint, b->fingerprint), "fingerprint");
#undef HDIFF
    size_t n = a->nbatches < b->nbatches ? a->nbatches : b->nbatches;
    for (size_t i = 0; i < n; i++) {
        const sp_manifest_batch *x = &a->batches[i], *y = &b->batches[i];
        int same = x->epoch == y->epoch && x->batch == y->batch && x->count == y->count &&
                   dig_eq(x->digest, y->digest) && x->nskipped == y->nskipped &&
                   x->nsubstituted == y->nsubstituted &&
                   memcmp(x->indices, y->indices, x->count * sizeof *x->indices) == 0 &&
                   memcmp(x->labels, y->labels, x->count * sizeof *x->labels) == 0 &&
                   (!x->nskipped || memcmp(x->skipped, y->skipped, x->nskipped * 8) == 0) &&
                   (!x->nsubstituted ||
                    memcmp(x->substituted, y->substituted, x->nsubstituted * 16) == 0);
        if (same) continue;
        d->batch_found = 1;
        d->line = i;
        d->epoch = x->epoch;
        d->batch = x->batch;
        if (x->epoch != y->epoch || x->batch != y->batch) {
            snprintf(d->what, sizeof d->what, "line %zu is epoch %u batch %llu in A, epoch %u batch %llu in B",
                     i + 2, x->epoch, (unsigned long long)x->batch, y->epoch,
                     (unsigned long long)y->batch);
            break;
        }
        uint32_t m = x->count < y->count ? x->count : y->count;
        for (uint32_t p = 0; p < m; p++)
            if (x->indices[p] != y->indices[p] || x->labels[p] != y->labels[p]) {
                d->position = p;
                d->index_a = x->indices[p];
                d->index_b = y->indices[p];
                break;
            }
        if (d->position >= 0)
            snprintf(d->what, sizeof d->what, "different samples from position %lld",
                     (long long)d->position);
        else if (x->count != y->count)
            snprintf(d->what, sizeof d->what, "%u samples in A, %u in B", x->count, y->count);
        else if (x->nskipped != y->nskipped || x->nsubstituted != y->nsubstituted)
            snprintf(d->what, sizeof d->what, "different skipped/substituted samples");
        else
            snprintf(d->what, sizeof d->what,
                     "same samples, different bytes (digest); recompute the batch to find the "
                     "position");
        break;
    }
    if (!d->batch_found && a->nbatches != b->nbatches) {
        d->batch_found = 1;
        d->line = n;
        const sp_manifest_batch *x = n < a->nbatches ? &a->batches[n] : &b->batches[n];
        d->epoch = x->epoch;
        d->batch = x->batch;
        snprintf(d->what, sizeof d->what, "A has %zu batches, B has %zu", a->nbatches, b->nbatches);
    }
    d->equal = !d->header[0] && !d->batch_found;
}

/* state.c - loader states: make, check, write and read (include/seedpipe/state.h).
 *
 * A state is tiny and exact: (fingerprints, seed, next epoch and batch).
 * The check compares each identity field on its own so that a refusal says
 * which of dataset, pipeline, seed, format or geometry differs. The reader
 * goes through the bounded JSON tokenizer (json.c) and then demands every
 * key exactly once with a value of the right type and range: a state file
 * is input from elsewhere and is fuzzed.
 */
#include "seedpipe/state.h"
#include "loader/loader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio_internal.h"
#include "common/json_internal.h"
#include "loader/state_internal.h"
#include "dataset/dataset_api_internal.h"   /* sp__dataset_fingerprint() */
#include "common/common_internal.h"

void sp_loader_state_at(const sp_loader *ld, uint32_t epoch, uint64_t batch,
                        sp_loader_state *st) {
    memset(st, 0, sizeof *st);
    const sp_loader_config *cfg = sp__loader_config_of(ld);
    uint64_t nb = sp__loader_batches_per_epoch(ld);
    if (nb && batch >= nb) {
        epoch += (uint32_t)(batch / nb);
        batch %= nb;
    }
    st->fingerprint = sp__loader_fingerprint(ld);
    st->dataset_fingerprint = sp__dataset_fingerprint(sp__loader_dataset(ld));
    st->pipeline_hash = sp__loader_pipeline_hash(ld);
    st->seed = cfg->seed;
    st->epoch = epoch;
    st->batch = batch;
    st->samples = sp__dataset_size(sp__loader_dataset(ld));
    st->batch_size = cfg->batch_size;
    st->drop_last = cfg->drop_last ? 1 : 0;
    st->dtype = cfg->dtype;
    st->layout = cfg->layout;
    sp__loader_sample_dims(ld, &st->c, &st->h, &st->w);
    st->on_error = cfg->on_error;
    st->rng_mode = cfg->rng_mode;
    st->order = cfg->order;
    st->block_shards = cfg->order == SP_ORDER_BLOCK ? cfg->block_shards : 0;
    st->pad_tail = cfg->pad_tail ? sp__loader_padded_size(ld) : 0;
    sp__state_blend_at(ld, st);
}

static int dig_eq(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* Append "; " + formatted text to buf. */
static void add(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void add(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    if (n && n + 2 < cap) {
        memcpy(buf + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (n < cap) vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

int sp_loader_state_check(const sp_loader *ld, const sp_loader_state *st, sp_error *err) {
    sp_loader_state me;
    sp_loader_state_at(ld, 0, 0, &me);
    char why[600] = "";
    char a[33], b[33];
    /* A blend's state: its identity, weights and switch in place of the
     * fingerprints, which hold the weights (state_blend.c). */
    int blend = me.blend_sources && st->blend_sources;
    if (blend) sp__state_blend_check(&me, st, why, 240);
    if (!blend && !dig_eq(me.dataset_fingerprint, st->dataset_fingerprint)) {
        sp_digest_hex(st->dataset_fingerprint, a);
        sp_digest_hex(me.dataset_fingerprint, b);
        add(why, sizeof why, "dataset fingerprint %.12s.. in the state, %.12s.. here", a, b);
    }
    if (!dig_eq(me.pipeline_hash, st->pipeline_hash)) {
        sp_digest_hex(st->pipeline_hash, a);
        sp_digest_hex(me.pipeline_hash, b);
        add(why, sizeof why, "pipeline hash %.12s.. in the state, %.12s.. here", a, b);
    }
    if (me.seed != st->seed)
        add(why, sizeof why, "seed %llu in the state, %llu here", (unsigned long long)st->seed,
            (unsigned long long)me.seed);
    if (me.batch_size != st->batch_size || me.drop_last != st->drop_last)
        add(why, sizeof why, "batch size %u%s in the state, %u%s here", st->batch_size,
            st->drop_last ? " (drop_last)" : "", me.batch_size, me.drop_last ? " (drop_last)" : "");
    if (me.dtype != st->dtype || me.layout != st->layout)
        add(why, sizeof why, "output %s/%s in the state, %s/%s here", sp_dtype_name(st->dtype),
            sp_layout_name(st->layout), sp_dtype_name(me.dtype), sp_layout_name(me.layout));
    if (me.c != st->c || me.h != st->h || me.w != st->w)
        add(why, sizeof why, "sample shape [%d,%d,%d] in the state, [%d,%d,%d] here", st->c,
            st->h, st->w, me.c, me.h, me.w);
    if (me.on_error != st->on_error)
        add(why, sizeof why, "on-error %s in the state, %s here", sp_on_error_name(st->on_error),
            sp_on_error_name(me.on_error));
    if (me.rng_mode != st->rng_mode)
        add(why, sizeof why, "rng-mode %s in the state, %s here", sp__rng_mode_name(st->rng_mode),
            sp__rng_mode_name(me.rng_mode));
    if (me.order != st->order || me.block_shards != st->block_shards) {
        char so[32], mo[32];
        sp_order_spec_format(st->order, st->block_shards, so, sizeof so);
        sp_order_spec_format(me.order, me.block_shards, mo, sizeof mo);
        add(why, sizeof why, "order %s in the state, %s here", so, mo);
    }
    if (me.pad_tail != st->pad_tail)
        add(why, sizeof why, "pad_tail %s%llu in the state, %s%llu here",
            st->pad_tail ? "to " : "", (unsigned long long)st->pad_tail,
            me.pad_tail ? "to " : "", (unsigned long long)me.pad_tail);
    if (!why[0] && !blend && !dig_eq(me.fingerprint, st->fingerprint)) {
        sp_digest_hex(st->fingerprint, a);
        sp_digest_hex(me.fingerprint, b);
        add(why, sizeof why, "loader fingerprint %.12s.. in the state, %.12s.. here (a part "
            "the state does not list differs: the split or the annotation file)", a, b);
    }
    if (why[0])
        return sp_error_set(err, SP_EMISMATCH, "state is for another stream: %s", why);
    uint64_t nb = sp__loader_batches_per_epoch(ld);
    if (st->batch >= nb)
        return sp_error_set(err, SP_ERANGE, "state: batch %llu, but an epoch has %llu batches",
                            (unsigned long long)st->batch, (unsigned long long)nb);
    return SP_OK;
}

int sp_loader_resume(sp_loader *ld, const sp_loader_state *st, sp_error *err) {
    if (!st) return sp_error_set(err, SP_EINVAL, "state: NULL");
    sp_loader_state me;
    sp_loader_state_at(ld, 0, 0, &me);
    int changed, rc = sp__state_blend_resume(ld, &me, st, &changed, err);
    if (rc != SP_OK || !changed) return rc != SP_OK ? rc : sp_loader_state_check(ld, st, err);
    /* The state as ld now writes it at st's position: its own fingerprints,
     * weights and switch; every other field is st's, checked as usual. */
    sp_loader_state adopted = *st;
    sp_loader_state_at(ld, st->epoch, st->batch, &me);
    adopted.fingerprint = me.fingerprint;
    adopted.dataset_fingerprint = me.dataset_fingerprint;
    memcpy(adopted.blend_weights, me.blend_weights, sizeof me.blend_weights);
    adopted.blend_epoch = me.blend_epoch;
    adopted.blend_slot = me.blend_slot;
    memcpy(adopted.blend_draws, me.blend_draws, sizeof me.blend_draws);
    return sp_loader_state_check(ld, &adopted, err);
}

int sp_loader_state_format(const sp_loader_state *st, char *buf, size_t size) {
    char fp[33], dfp[33], ph[33];
    sp_digest_hex(st->fingerprint, fp);
    sp_digest_hex(st->dataset_fingerprint, dfp);
    sp_digest_hex(st->pipeline_hash, ph);
    sp__jw w = sp__jw_buf(buf, size);
    sp__jw_obj(&w);
    sp__jw_ku64(&w, "seedpipe_state", 1);
    sp__jw_kstr(&w, "fingerprint", fp);
    sp__jw_kstr(&w, "dataset_fingerprint", dfp);
    sp__jw_kstr(&w, "pipeline_hash", ph);
    sp__jw_ku64(&w, "seed", st->seed);
    sp__jw_ku64(&w, "epoch", st->epoch);
    sp__jw_ku64(&w, "batch", st->batch);
    sp__jw_ku64(&w, "samples", st->samples);
    sp__jw_ku64(&w, "batch_size", st->batch_size);
    sp__jw_key(&w, "drop_last");
    sp__jw_bool(&w, st->drop_last);
    sp__jw_kstr(&w, "dtype", sp_dtype_name(st->dtype));
    sp__jw_kstr(&w, "layout", sp_layout_name(st->layout));
    sp__jw_key(&w, "sample_shape");
    sp__jw_fmt(&w, "[%d,%d,%d]", st->c, st->h, st->w);
    sp__jw_kstr(&w, "on_error", sp_on_error_name(st->on_error));
    sp__jw_kstr(&w, "rng_mode", sp__rng_mode_name(st->rng_mode));
    if (st->order != SP_ORDER_SHUFFLE) {   /* the optional keys, only when not the default */
        char o[32];
        sp_order_spec_format(st->order, st->block_shards, o, sizeof o);
        sp__jw_kstr(&w, "order", o);
    }
    if (st->pad_tail) sp__jw_ku64(&w, "pad_tail", st->pad_tail);
    sp__state_blend_write(st, &w);
    sp__jw_end(&w, '}');
    sp__jw_raw(&w, "\n");
    return (int)w.len;
}

static const char *const KEYS[] = {"seedpipe_state", "fingerprint", "dataset_fingerprint",
                                   "pipeline_hash",  "seed",        "epoch",
                                   "batch",          "samples",     "batch_size",
                                   "drop_last",      "dtype",       "layout",
                                   "sample_shape",   "on_error",    "rng_mode",
                                   "order",          "pad_tail",
                                   "blend_identity", "blend_since", "blend_weights",
                                   "blend_draws"};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])
#define NREQUIRED (NKEYS - 6)   /* order, pad_tail (ABI 2) and blend_* (ABI 6) are optional */
#define K_ORDER NREQUIRED

static int bad(sp_error *err, const char *key, const char *why) {
    return sp_error_set(err, SP_EFORMAT, "state: \"%s\": %s", key, why);
}

static int get_digest(const sp__json *j, const char *key, sp_digest *d, sp_error *err) {
    char hex[40];
    if (sp__json_str(j, sp__json_get(j, 0, key), hex, sizeof hex) != 0 ||
        sp__digest_parse(hex, d) != 0)
        return bad(err, key, "expected 32 hex digits");
    return SP_OK;
}

static int get_u64(const sp__json *j, const char *key, uint64_t max, uint64_t *v, sp_error *err) {
    if (sp__json_u64(j, sp__json_get(j, 0, key), v) != 0 || *v > max)
        return bad(err, key, "expected a non-negative integer in range");
    return SP_OK;
}

/* Every key of the object known and present exactly once, the required
 * ones all there; seen[n] counts KEYS[n]. */
static int check_keys(const sp__json *j, size_t seen[NKEYS], sp_error *err) {
    size_t k = 1;
    for (size_t i = 0; i < j->t[0].size; i++) {
        size_t v = k + 1, n;
        for (n = 0; n < NKEYS; n++)
            if (sp__json_streq(j, (long)k, KEYS[n])) break;
        if (n == NKEYS) {
            char key[64];
            if (sp__json_str(j, (long)k, key, sizeof key) != 0) snprintf(key, sizeof key, "?");
            return sp_error_set(err, SP_EFORMAT, "state: unknown key \"%s\"", key);
        }
        if (seen[n]++) return bad(err, KEYS[n], "given twice");
        k = j->t[v].next;
    }
    for (size_t n = 0; n < NREQUIRED; n++)
        if (!seen[n]) return bad(err, KEYS[n], "missing");
    return SP_OK;
}

/* The version, the digests and the numbers of the stream's position. */
static int get_numbers(const sp__json *j, sp_loader_state *st, sp_error *err) {
    uint64_t ver, v;
    int rc = get_u64(j, "seedpipe_state", 1, &ver, err);
    if (rc == 0 && ver != 1) rc = bad(err, "seedpipe_state", "unsupported version");
    if (rc == 0) rc = get_digest(j, "fingerprint", &st->fingerprint, err);
    if (rc == 0) rc = get_digest(j, "dataset_fingerprint", &st->dataset_fingerprint, err);
    if (rc == 0) rc = get_digest(j, "pipeline_hash", &st->pipeline_hash, err);
    if (rc == 0) rc = get_u64(j, "seed", UINT64_MAX, &st->seed, err);
    if (rc == 0 && (rc = get_u64(j, "epoch", UINT32_MAX, &v, err)) == 0) st->epoch = (uint32_t)v;
    if (rc == 0) rc = get_u64(j, "batch", 1ull << 40, &st->batch, err);
    if (rc == 0) rc = get_u64(j, "samples", 1ull << 32, &st->samples, err);
    if (rc == 0 && (rc = get_u64(j, "batch_size", 1u << 20, &v, err)) == 0)
        st->batch_size = (uint32_t)v;
    if (rc == 0) {
        int kd = j->t[sp__json_get(j, 0, "drop_last")].kind;
        if (kd != SP__J_TRUE && kd != SP__J_FALSE) rc = bad(err, "drop_last", "expected a boolean");
        st->drop_last = kd == SP__J_TRUE;
    }
    return rc;
}

/* The named values: dtype, layout, on_error, rng_mode and (if given) order. */
static int get_names(const sp__json *j, int has_order, sp_loader_state *st, sp_error *err) {
    char word[32];
    if (sp__json_str(j, sp__json_get(j, 0, "dtype"), word, sizeof word) != 0 ||
        sp_dtype_parse(word, &st->dtype, NULL) != 0)
        return bad(err, "dtype", "expected uint8, float32, bfloat16 or float16");
    if (sp__json_str(j, sp__json_get(j, 0, "layout"), word, sizeof word) != 0 ||
        sp_layout_parse(word, &st->layout, NULL) != 0)
        return bad(err, "layout", "expected nchw or nhwc");
    if (sp__json_str(j, sp__json_get(j, 0, "on_error"), word, sizeof word) != 0 ||
        sp_on_error_parse(word, &st->on_error, NULL) != 0)
        return bad(err, "on_error", "expected fail, skip or substitute");
    if (sp__json_str(j, sp__json_get(j, 0, "rng_mode"), word, sizeof word) != 0 ||
        sp_rng_mode_parse(word, &st->rng_mode, NULL) != 0)
        return bad(err, "rng_mode", "expected per-sample or per-worker");
    if (has_order &&
        (sp__json_str(j, sp__json_get(j, 0, "order"), word, sizeof word) != 0 ||
         sp_order_spec_parse(word, &st->order, &st->block_shards, NULL) != 0))
        return bad(err, "order", "expected shuffle, sequential or block:K");
    return SP_OK;
}

/* "sample_shape": [C, H, W], each at most 2^20. */
static int get_shape(const sp__json *j, sp_loader_state *st, sp_error *err) {
    long a = sp__json_get(j, 0, "sample_shape");
    int dims[3];
    uint64_t v;
    if (j->t[a].kind != SP__J_ARR || j->t[a].size != 3) return bad(err, "sample_shape", "expected [C,H,W]");
    for (int i = 0; i < 3; i++) {
        if (sp__json_u64(j, sp__json_at(j, (size_t)a, (size_t)i), &v) != 0 || v > 1u << 20)
            return bad(err, "sample_shape", "expected [C,H,W]");
        dims[i] = (int)v;
    }
    st->c = dims[0];
    st->h = dims[1];
    st->w = dims[2];
    return SP_OK;
}

int sp_loader_state_parse(const char *text, size_t len, sp_loader_state *st, sp_error *err) {
    memset(st, 0, sizeof *st);
    if (len > SP_STATE_MAX_BYTES)
        return sp_error_set(err, SP_EFORMAT, "state: %zu bytes (at most %d)", len,
                            SP_STATE_MAX_BYTES);
    sp__json j;
    int rc = sp__json_parse(&j, text, len, 4, 2 * SP_STATE_MAX_SOURCES + 256, "state", err);
    if (rc != 0) {
        sp__json_free(&j);
        return rc == SP_ELIMIT ? SP_EFORMAT : rc;
    }
    size_t seen[NKEYS] = {0};
    if (j.t[0].kind != SP__J_OBJ) rc = sp_error_set(err, SP_EFORMAT, "state: not a JSON object");
    if (rc == 0) rc = check_keys(&j, seen, err);
    if (rc == 0) rc = get_numbers(&j, st, err);
    if (rc == 0) rc = get_names(&j, seen[K_ORDER] != 0, st, err);
    if (rc == 0)
        rc = sp__state_blend_parse(&j, (int)(seen[K_ORDER + 2] + seen[K_ORDER + 3] +
                                             seen[K_ORDER + 4] + seen[K_ORDER + 5]), st, err);
    if (rc == 0 && seen[K_ORDER + 1])
        rc = get_u64(&j, "pad_tail", (1ull << 32) + (1ull << 31), &st->pad_tail, err);
    if (rc == 0) rc = get_shape(&j, st, err);
    sp__json_free(&j);
    if (rc != 0) memset(st, 0, sizeof *st);
    return rc;
}

int sp_loader_state_save(const char *path, const sp_loader_state *st, sp_error *err) {
    char buf[SP_STATE_TEXT_MAX];
    int n = sp_loader_state_format(st, buf, sizeof buf);
    if (n < 0 || (size_t)n >= sizeof buf) return sp_error_set(err, SP_EIO, "%s: state too long", path);
    return sp_write_file_atomic(path, buf, (size_t)n, 1, err);   /* common.h: atomic publish */
}

int sp_loader_state_load(const char *path, sp_loader_state *st, sp_error *err) {
    memset(st, 0, sizeof *st);
    struct stat fst;   /* the reading rule: no FIFO, a regular file (common/fileio_internal.h) */
    int fd = sp__open_regular(AT_FDCWD, path, path, 0, UINT64_MAX, &fst, err);
    if (fd < 0) return fd;
    sp__buf raw = {NULL, 0};
    size_t len = 0;
    int rd = sp__read_fd(fd, path, SP_STATE_MAX_BYTES + 1, 0, &raw, &len, err);
    close(fd);
    if (rd != SP_OK && rd != SP_ELIMIT) {
        sp__buf_free(&raw);
        return rd;
    }
    /* Longer than SP_STATE_MAX_BYTES + 1: the parser sees max + 1 bytes
     * and refuses the size, as it always has. */
    if (rd == SP_ELIMIT) len = SP_STATE_MAX_BYTES + 1;
    char *buf = (char *)raw.p;
    sp_error e;
    sp_error_clear(&e);
    int rc = sp_loader_state_parse(buf, len, st, &e);
    sp__buf_free(&raw);
    if (rc != 0) return sp_error_set(err, rc, "%s: %s", path, e.msg);
    return SP_OK;
}

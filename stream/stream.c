/* stream.c - one batch stream over the in-process loader, the worker pool or a service client.
 *
 * The stream (stream.h) keeps, whatever its kind, the views it has handed
 * out (copies, oldest first, at most max_held; given back in any order), so release,
 * state and info read the same for all three. Only next, release, state and
 * close look at the kind:
 *   LOADER   position abs (epoch * nb + batch) in [abs, end); next computes
 *            batch abs into the one owned buffer (through the epoch cache
 *            when there is one) and hands out a view of it;
 *   POOL     sp__pool_next / sp__pool_release / sp__pool_state;
 *   SERVICE  sp__client_next / sp__client_release / sp_client_state.
 * Nothing here computes a byte: the guarantee is the sources' own.
 */
#include <stdlib.h>
#include <string.h>

#include "seedpipe/stream.h"

#include "seedpipe/client.h"
#include "seedpipe/pool.h"

#include "common/hash_internal.h"
#include "common/trace_internal.h"
#include "loader/loader_internal.h"
#include "cache/cache_internal.h"
#include "pool/pool_internal.h"
#include "service/client_internal.h"
#include "stream/stream_internal.h"

struct sp_stream {
    sp_stream_kind kind;
    sp_loader *ld;        /* LOADER: owned; POOL: the pool's; SERVICE: owned check loader or NULL */
    sp_pool *pool;
    sp_client *client;
    sp_cache *cache;      /* LOADER with cache_dir */
    sp_batch buf;         /* LOADER: the batch buffer */
    uint64_t abs, first, end, nb, taken;
    uint32_t rank, world, batch_size, epochs;
    sp_batch *held;       /* max_held copies of the views handed out, a FIFO */
    int max_held, nheld, head;
    sp_stream_info info;  /* geometry, filled at open */
    int failed;           /* the first error of next/release: returned again from then on */
    sp_error failure;
};

void sp_stream_config_default(sp_stream_config *sc) {
    memset(sc, 0, sizeof *sc);
    sc->kind = SP_STREAM_LOADER;
    sc->epochs = 1;
}

const char *sp__stream_kind_name(sp_stream_kind k) {
    switch (k) {
    case SP_STREAM_LOADER: return "loader";
    case SP_STREAM_POOL: return "pool";
    case SP_STREAM_SERVICE: return "service";
    default: return "?";
    }
}

/* The arguments every kind needs, each refusal named. */
static int check_config(const sp_loader_config *lcfg, const sp_stream_config *sc, sp_stream **out,
                        sp_error *err) {
    if (!out || !sc) return sp_error_set(err, SP_EINVAL, "stream: %s is NULL", out ? "config" : "out");
    *out = NULL;
    if (sc->kind != SP_STREAM_LOADER && sc->kind != SP_STREAM_POOL && sc->kind != SP_STREAM_SERVICE)
        return sp_error_set(err, SP_EINVAL, "stream: kind %d is not loader (0), pool (1) or "
                            "service (2)", (int)sc->kind);
    if (sc->kind == SP_STREAM_SERVICE) {
        if (!sc->service_name || !sc->service_name[0])
            return sp_error_set(err, SP_EINVAL, "stream: a service stream needs a service name");
        if (sc->resume || sc->cache_dir)
            return sp_error_set(err, SP_EINVAL, "stream: a service stream takes its position and "
                                "cache from the service (no resume state or cache directory)");
        return SP_OK;
    }
    if (!lcfg)
        return sp_error_set(err, SP_EINVAL, "stream: a %s stream needs a loader configuration",
                            sp__stream_kind_name(sc->kind));
    if (sc->epochs < 1) return sp_error_set(err, SP_EINVAL, "stream: epochs must be >= 1 (got 0)");
    if (sc->kind == SP_STREAM_POOL && (sc->workers < 1 || sc->workers > SP_POOL_MAX_WORKERS))
        return sp_error_set(err, SP_EINVAL, "stream: a pool stream needs workers in 1..%d (got %d)",
                            SP_POOL_MAX_WORKERS, sc->workers);
    return SP_OK;
}

static void fill_geometry(sp_stream *s, const sp_loader *ld) {
    sp_stream_info *in = &s->info;
    const sp_loader_config *c = sp__loader_config_of(ld);
    sp__loader_sample_dims(ld, &in->c, &in->h, &in->w);
    in->dtype = c->dtype;
    in->layout = c->layout;
    in->sample_bytes = sp__loader_sample_bytes(ld);
    in->fingerprint = sp__loader_fingerprint(ld);
    in->seed = c->seed;
    s->rank = c->rank;
    s->world = c->world;
    s->batch_size = c->batch_size;
    s->nb = sp__loader_batches_per_epoch(ld);
}

static int open_loader(sp_stream *s, const sp_loader_config *lcfg, const sp_stream_config *sc,
                       sp_error *err) {
    int rc = SP_OK;
    if (sc->cache_dir) {
        sp_cache_opts o;
        if (!sc->cache_opts) sp_cache_opts_default(&o);
        rc = sp_cache_open(sc->cache_dir, sc->cache_opts ? sc->cache_opts : &o, &s->cache, err);
    }
    if (rc == 0) rc = sp_loader_create(lcfg, &s->ld, err);
    if (rc == 0 && sc->resume) rc = sp_loader_resume(s->ld, sc->resume, err);
    if (rc == 0 && sp_batch_alloc(s->ld, &s->buf) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "stream: out of memory for a batch");
    if (rc != 0) return rc;
    fill_geometry(s, s->ld);
    s->abs = s->first = sc->resume ? (uint64_t)sc->resume->epoch * s->nb + sc->resume->batch : 0;
    s->end = (uint64_t)sc->epochs * s->nb;
    s->max_held = 1;
    return SP_OK;
}

static int open_pool(sp_stream *s, const sp_loader_config *lcfg, const sp_stream_config *sc,
                     sp_error *err) {
    sp_pool_config pc = {sc->workers, sc->ring_slots, sc->epochs, sc->resume, sc->cache_dir,
                         sc->cache_opts};
    int rc = sp__pool_create(lcfg, &pc, &s->pool, err);
    if (rc != 0) return rc;
    s->ld = sp__pool_loader(s->pool);
    fill_geometry(s, s->ld);
    s->first = sc->resume ? (uint64_t)sc->resume->epoch * s->nb + sc->resume->batch : 0;
    s->end = (uint64_t)sc->epochs * s->nb;
    sp_pool_stats ps;
    sp__pool_stats_get(s->pool, &ps);
    s->max_held = ps.ring_slots;
    return SP_OK;
}

static int open_service(sp_stream *s, const sp_loader_config *lcfg, const sp_stream_config *sc,
                        sp_error *err) {
    sp_client_opts co;
    memset(&co, 0, sizeof co);
    if (sc->client_opts) co = *sc->client_opts;
    sp_digest fp;
    uint32_t rank = sc->rank;
    if (lcfg) {
        int rc = sp_loader_create(lcfg, &s->ld, err);
        if (rc != 0) return rc;
        fp = sp__loader_fingerprint(s->ld);
        if (!co.expect_fingerprint) co.expect_fingerprint = &fp;
        rank = lcfg->rank;
    }
    int rc = sp__client_attach_opts(sc->service_name, rank, &co, &s->client, err);
    if (rc != 0) return rc;
    sp_client_info ci;
    sp_client_info_get(s->client, &ci);
    if (lcfg && ci.world != lcfg->world)
        return sp_error_set(err, SP_EINVAL, "stream: service %s serves a world of %u ranks, the "
                            "loader configuration has world %u", sc->service_name, ci.world,
                            lcfg->world);
    /* The fingerprint covers everything but the seed (loader.h). */
    if (lcfg && ci.seed != lcfg->seed)
        return sp_error_set(err, SP_EMISMATCH, "stream: service %s serves seed %llu, the loader "
                            "configuration has seed %llu", sc->service_name,
                            (unsigned long long)ci.seed, (unsigned long long)lcfg->seed);
    sp_stream_info *in = &s->info;
    in->c = ci.c;
    in->h = ci.h;
    in->w = ci.w;
    in->dtype = ci.dtype;
    in->layout = ci.layout;
    in->sample_bytes = ci.sample_bytes;
    in->fingerprint = ci.fingerprint;
    in->seed = ci.seed;
    s->rank = ci.rank;
    s->world = ci.world;
    s->batch_size = ci.batch_size;
    s->nb = ci.batches_per_epoch;
    s->end = (uint64_t)ci.epochs * ci.batches_per_epoch;
    s->first = s->end - ci.total + ci.first;
    s->max_held = (int)ci.ring_slots;
    return SP_OK;
}

int sp_stream_open(const sp_loader_config *lcfg, const sp_stream_config *sc, sp_stream **out,
                   sp_error *err) {
    int rc = check_config(lcfg, sc, out, err);
    if (rc != 0) return rc;
    sp_stream *s = calloc(1, sizeof *s);
    if (!s) return sp_error_set(err, SP_ENOMEM, "stream: out of memory");
    s->kind = sc->kind;
    s->epochs = sc->epochs;
    rc = s->kind == SP_STREAM_LOADER ? open_loader(s, lcfg, sc, err)
         : s->kind == SP_STREAM_POOL ? open_pool(s, lcfg, sc, err)
                                     : open_service(s, lcfg, sc, err);
    if (rc == 0 && !(s->held = calloc((size_t)(s->max_held > 0 ? s->max_held : 1), sizeof *s->held)))
        rc = sp_error_set(err, SP_ENOMEM, "stream: out of memory");
    if (rc != 0) {
        sp_stream_close(s);
        return rc;
    }
    *out = s;
    return SP_OK;
}

void sp_stream_close(sp_stream *s) {
    if (!s) return;
    sp_cache_flush(s->cache);
    sp_cache_close(s->cache);
    if (s->pool) sp__pool_destroy(s->pool);
    else sp_loader_destroy(s->ld);
    sp__client_detach(s->client);
    sp_batch_free(&s->buf);
    free(s->held);
    free(s);
}

/* LOADER: compute batch abs into the buffer. */
static int loader_next(sp_stream *s, sp_batch *view, sp_error *err) {
    if (s->abs >= s->end) return SP_END;
    uint32_t e = (uint32_t)(s->abs / s->nb);
    uint64_t bi = s->abs % s->nb;
    int rc = s->cache ? sp__cache_epoch_batch(s->cache, s->ld, e, bi, &s->buf, err)
                      : sp_loader_batch(s->ld, e, bi, &s->buf, err);
    if (rc != 0) return rc;
    s->abs++;
    *view = s->buf;
    view->flags |= SP_BATCH_VIEW;
    return SP_OK;
}

/* A stream that has failed keeps failing (stream.h), whatever its kind:
 * the first error is kept and returned again. */
static int fail(sp_stream *s, int rc, sp_error *err) {
    if (!s->failed) {
        s->failed = rc;
        if (err) s->failure = *err;
        else sp_error_set(&s->failure, rc, "stream: %s", sp_strerror(rc));
    }
    return rc;
}

static int failed_again(const sp_stream *s, sp_error *err) {
    if (err) *err = s->failure;
    return s->failed;
}

int sp_stream_next(sp_stream *s, sp_batch *view, sp_error *err) {
    if (!s) return sp_error_set(err, SP_EINVAL, "stream: stream is NULL");
    if (s->failed) return failed_again(s, err);
    if (!view) return sp_error_set(err, SP_EINVAL, "stream: view is NULL");
    if (s->nheld >= s->max_held)
        return sp_error_set(err, SP_EINVAL, "stream: %d view%s already held (the most this %s "
                            "stream holds): give one back first", s->nheld,
                            s->nheld == 1 ? "" : "s", sp__stream_kind_name(s->kind));
    uint64_t t0 = sp__trace_t0();   /* the consumer's wait for the batch */
    int rc = s->kind == SP_STREAM_LOADER ? loader_next(s, view, err)
             : s->kind == SP_STREAM_POOL ? sp__pool_next(s->pool, view, err)
                                         : sp__client_next(s->client, view, err);
    if (t0 && rc == SP_OK)   /* a batch handed over (not the end, not an error) */
        sp__trace_record(SP_TRACE_NEXT, t0, view->epoch, view->index, SP__TRACE_NONE32,
                         SP__TRACE_NONE64);
    if (rc == SP_END) memset(view, 0, sizeof *view);
    if (rc < 0) return fail(s, rc, err);
    if (rc != 0) return rc;
    s->held[(s->head + s->nheld) % s->max_held] = *view;
    s->nheld++;
    s->taken++;
    return SP_OK;
}

int sp_stream_release(sp_stream *s, sp_batch *view, sp_error *err) {
    if (!s) return sp_error_set(err, SP_EINVAL, "stream: stream is NULL");
    if (s->failed) return failed_again(s, err);
    if (!view) return sp_error_set(err, SP_EINVAL, "stream: view is NULL");
    int k = 0;   /* which held view, counted from the oldest */
    while (k < s->nheld) {
        const sp_batch *h = &s->held[(s->head + k) % s->max_held];
        if (h->images == view->images && h->epoch == view->epoch && h->index == view->index) break;
        k++;
    }
    if (k == s->nheld)
        return sp_error_set(err, SP_EINVAL, "stream: epoch %u batch %llu is not held (given back "
                            "already, or not this stream's)%s", view->epoch,
                            (unsigned long long)view->index,
                            s->nheld ? "" : "; no view is held");
    sp_batch *held = &s->held[(s->head + k) % s->max_held];
    int rc = SP_OK;
    if (s->kind == SP_STREAM_POOL) rc = sp__pool_release(s->pool, held, err);
    else if (s->kind == SP_STREAM_SERVICE) rc = sp__client_release(s->client, held, err);
    if (rc != 0) return fail(s, rc, err);
    /* The FIFO closes the gap: the newer views move up by one. */
    for (int j = k; j + 1 < s->nheld; j++)
        s->held[(s->head + j) % s->max_held] = s->held[(s->head + j + 1) % s->max_held];
    memset(&s->held[(s->head + s->nheld - 1) % s->max_held], 0, sizeof *s->held);
    s->nheld--;
    memset(view, 0, sizeof *view);
    return SP_OK;
}

int sp_stream_seek(sp_stream *s, const sp_loader_state *st, sp_error *err) {
    if (!s || !st) return sp_error_set(err, SP_EINVAL, "stream: %s is NULL", s ? "state" : "stream");
    if (s->kind != SP_STREAM_LOADER)
        return sp_error_set(err, SP_EUNSUPP, "stream: a %s stream cannot seek (its batches are "
                            "computed ahead): close it and open one with sc.resume",
                            sp__stream_kind_name(s->kind));
    if (s->failed) return failed_again(s, err);
    int rc = sp_loader_state_check(s->ld, st, err);
    if (rc != 0) return rc;
    uint64_t abs = (uint64_t)st->epoch * s->nb + st->batch;
    if (st->batch >= s->nb || abs > s->end)
        return sp_error_set(err, SP_ERANGE, "stream: epoch %u batch %llu is outside this stream "
                            "(%llu batches an epoch, %u epochs)", st->epoch,
                            (unsigned long long)st->batch, (unsigned long long)s->nb, s->epochs);
    s->abs = abs;
    return SP_OK;
}

void sp_stream_state(const sp_stream *s, sp_loader_state *st) {
    if (s->kind == SP_STREAM_POOL) sp__pool_state(s->pool, st);
    else if (s->kind == SP_STREAM_SERVICE) sp_client_state(s->client, st);
    else sp_loader_state_at(s->ld, (uint32_t)(s->abs / s->nb), s->abs % s->nb, st);
}

void sp_stream_info_get(const sp_stream *s, sp_stream_info *info) {
    *info = s->info;
    info->kind = s->kind;
    info->rank = s->rank;
    info->world = s->world;
    info->batch_size = s->batch_size;
    info->batches_per_epoch = s->nb;
    info->first = s->first;
    info->end = s->end;
    info->taken = s->taken;
    info->held = s->nheld;
    info->max_held = s->max_held;
}

sp_digest sp_stream_batch_digest(const sp_stream *s, const sp_batch *b) {
    if (s->client) return sp__client_batch_digest(s->client, b);
    return sp_batch_digest(s->ld, b);
}

sp_digest sp_stream_digest_of(const sp_digest *d, size_t n) {
    sp__hash h;
    sp__hash_init(&h);
    for (size_t i = 0; i < n; i++) {
        uint8_t raw[16];   /* big-endian hi, then lo */
        for (int k = 0; k < 8; k++) {
            raw[k] = (uint8_t)(d[i].hi >> (56 - 8 * k));
            raw[8 + k] = (uint8_t)(d[i].lo >> (56 - 8 * k));
        }
        sp__hash_bytes(&h, raw, sizeof raw);
    }
    return sp__hash_digest(&h);
}

sp_loader *sp_stream_loader(sp_stream *s) { return s->ld; }

sp_cache *sp_stream_cache(sp_stream *s) { return s->pool ? sp_pool_cache(s->pool) : s->cache; }

sp_pool *sp_stream_pool(sp_stream *s) { return s->pool; }

sp_client *sp_stream_client(sp_stream *s) { return s->client; }

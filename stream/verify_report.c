/* verify_report.c - a verify report: equality, the first divergence of each row, text and JSON.
 *
 * A row differs from the reference when it failed, has another number of
 * batches, another stream digest, or other skipped / substituted samples.
 * For a digest divergence the reference's batch is recomputed with a fresh
 * loader (in the per-worker demonstration mode the stream is replayed up to
 * it, since the loader's running counter decides the draws) and compared
 * with the row's copy of its batch: the first position whose sample index
 * differs, else the first byte that differs, else only the counts. The
 * notes are the lines `seedpipe verify` prints under its table.
 */
#define _XOPEN_SOURCE 700   /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_write_internal.h"
#include "stream/verify_internal.h"
#include "seedpipe/manifest.h"
#include "loader/loader_internal.h"

static int same(sp_digest a, sp_digest b) { return a.hi == b.hi && a.lo == b.lo; }

/* The rank (of a K-rank row) holding position p, from the ranks' counts. */
static void rank_of(const sp__verify_run *r, uint32_t p, sp_verify_divergence *d) {
    d->rank = d->rank_position = -1;
    if (!r->row.world || !r->div_counts) return;
    uint32_t first = 0;
    for (uint32_t k = 0; k < r->row.world; k++) {
        if (p < first + r->div_counts[k]) {
            d->rank = k;
            d->rank_position = p - first;
            return;
        }
        first += r->div_counts[k];
    }
}

/* Compare the recomputed reference batch b with the row's copy. */
static void locate(const sp__verify_run *r, const sp_batch *b, size_t sb, sp_verify_divergence *d) {
    uint32_t n = b->count < r->div_count ? b->count : r->div_count;
    d->count_ref = b->count;
    d->count = r->div_count;
    d->kind = SP_VERIFY_DIV_COUNT;
    for (uint32_t p = 0; p < n; p++) {
        d->position = p;
        d->sample_ref = b->indices[p];
        d->sample = r->div_indices[p];
        rank_of(r, p, d);
        if (b->indices[p] != r->div_indices[p]) {
            d->kind = SP_VERIFY_DIV_SAMPLE;
            return;
        }
        const uint8_t *x = b->images + (size_t)p * sb, *y = r->div_images + (size_t)p * sb;
        for (size_t k = 0; k < sb; k++)
            if (x[k] != y[k]) {
                d->kind = SP_VERIFY_DIV_BYTE;
                d->byte_offset = (int64_t)((size_t)p * sb + k);
                d->sample_byte = (int64_t)k;
                d->byte_ref = x[k];
                d->byte = y[k];
                return;
            }
    }
    d->position = d->rank = d->rank_position = -1;
}

/* Recompute the reference's batch for r's first divergence; *why: "" or why not. */
static void recompute(const sp__verify *v, const sp__verify_run *r, sp_verify_divergence *d,
                      char *why, size_t nwhy) {
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    why[0] = '\0';
    if (sp_loader_create(&v->lcfg, &ld, &err) != 0) {
        snprintf(why, nwhy, "%s", err.msg);
        return;
    }
    sp_batch b;
    if (sp_batch_alloc(ld, &b) != 0) {
        snprintf(why, nwhy, "out of memory");
        sp_loader_destroy(ld);
        return;
    }
    uint64_t nb = sp__loader_batches_per_epoch(ld);
    int rc = 0;
    if (v->lcfg.rng_mode == SP_RNG_PER_WORKER)
        for (uint64_t q = 0; q < (uint64_t)r->div && rc == 0; q++)
            rc = sp_loader_batch(ld, (uint32_t)(q / nb), q % nb, &b, &err);
    if (rc != 0 || sp_loader_batch(ld, d->epoch, d->batch, &b, &err) != 0)
        snprintf(why, nwhy, "%s", err.msg);
    else
        locate(r, &b, sp__loader_sample_bytes(ld), d);
    sp_batch_free(&b);
    sp_loader_destroy(ld);
}

/* The first divergence of r (div >= 0) into its row and note. */
static void divergence(const sp__verify *v, sp__verify_run *r, FILE *f) {
    sp_verify_divergence *d = &r->row.div;
    uint64_t nb = v->total / v->cfg.epochs;
    d->stream_batch = r->div;
    d->epoch = (uint32_t)((uint64_t)r->div / nb);
    d->batch = (uint64_t)r->div % nb;
    const char *name = r->row.name;
    char there[32] = "the reference", here[32] = "here", in[4] = "";
    if (r->row.world) {
        snprintf(there, sizeof there, "world 1");
        snprintf(here, sizeof here, "world %u", r->row.world);
        snprintf(in, sizeof in, "in ");
    }
    fprintf(f, "  %s: first divergence%s at epoch %u, batch %llu (stream batch %lld)\n", name,
            r->row.world ? " from world 1" : "", d->epoch, (unsigned long long)d->batch,
            (long long)d->stream_batch);
    if (r->div >= (int64_t)v->ref->n || !r->div_indices || !r->div_images) {
        d->kind = SP_VERIFY_DIV_MISSING;
        fprintf(f, "    the reference has no such batch\n");
        return;
    }
    char why[SP_ERROR_MSG_MAX];
    recompute(v, r, d, why, sizeof why);
    if (why[0]) {
        d->kind = SP_VERIFY_DIV_UNKNOWN;
        fprintf(f, "    (cannot recompute: %s)\n", why);
        return;
    }
    char rk[80] = "";
    if (d->rank >= 0)
        snprintf(rk, sizeof rk, " (rank %lld of world %u, its position %lld)", (long long)d->rank,
                 r->row.world, (long long)d->rank_position);
    if (d->kind == SP_VERIFY_DIV_SAMPLE)
        fprintf(f, "    position %lld%s: sample index %llu in %s, %llu %s%s\n",
                (long long)d->position, rk, (unsigned long long)d->sample_ref, there,
                (unsigned long long)d->sample, in, here);
    else if (d->kind == SP_VERIFY_DIV_BYTE)
        fprintf(f, "    position %lld%s, sample index %llu: byte offset %lld in the batch "
                "(%lld in the sample): %u in %s, %u %s%s\n",
                (long long)d->position, rk, (unsigned long long)d->sample_ref,
                (long long)d->byte_offset, (long long)d->sample_byte, d->byte_ref, there,
                d->byte, in, here);
    else
        fprintf(f, "    %u samples in %s, %u %s%s\n", d->count_ref, there, d->count, in, here);
}

/* The lines under the table for row i. */
static void note(const sp__verify *v, sp__verify_run *r, int i, FILE *f) {
    const sp__verify_run *ref = &v->runs[0];
    uint64_t deaths = r->row.worker_deaths;
    if (deaths)
        fprintf(f, "  %s: %llu worker death%s noticed, work redone by a replacement\n",
                r->row.name, (unsigned long long)deaths, deaths > 1 ? "s" : "");
    if (r->row.rc != 0) {
        fprintf(f, "  %s: error: %s\n", r->row.name, r->row.msg);
    } else if (i > 0 && !r->row.equal && r->div >= 0) {
        divergence(v, r, f);
    } else if (i > 0 && !r->row.equal && r->list_div >= 0) {
        uint64_t nb = v->total / v->cfg.epochs;
        sp_verify_divergence *d = &r->row.div;
        d->kind = SP_VERIFY_DIV_LISTS;
        d->stream_batch = r->list_div;
        d->epoch = (uint32_t)((uint64_t)r->list_div / nb);
        d->batch = (uint64_t)r->list_div % nb;
        fprintf(f, "  %s: the skipped/substituted samples differ from the reference first at "
                "epoch %u, batch %llu (stream batch %lld)\n", r->row.name, d->epoch,
                (unsigned long long)d->batch, (long long)r->list_div);
    } else if (i > 0 && !r->row.equal) {
        r->row.div.kind = SP_VERIFY_DIV_LENGTH;
        fprintf(f, "  %s: %llu batches, the reference has %llu\n", r->row.name,
                (unsigned long long)r->n, (unsigned long long)ref->n);
    }
}

static void finish_row(sp__verify *v, sp__verify_run *r, int i) {
    const sp__verify_run *ref = &v->runs[0];
    r->row.equal = r->row.rc == 0 && r->n == ref->n && same(r->row.stream, ref->row.stream) &&
                   r->list_div < 0;
    if ((i > 0 && (!r->row.equal || ref->row.rc != 0)) || r->row.rc != 0) v->ok = 0;
    sp_verify_divergence *d = &r->row.div;
    memset(d, 0, sizeof *d);
    d->stream_batch = d->position = d->rank = d->rank_position = d->byte_offset =
        d->sample_byte = -1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        note(v, r, i, f);
        fclose(f);
        snprintf(r->row.note, sizeof r->row.note, "%s", text ? text : "");
    }
    free(text);
    free(r->d);
    free(r->lists);
    free(r->div_indices);
    free(r->div_images);
    free(r->div_counts);
    r->d = r->lists = NULL;
    r->div_indices = NULL;
    r->div_images = NULL;
    r->div_counts = NULL;
}

void sp__verify_finish(sp__verify *v) {
    v->ok = 1;
    for (int i = 0; i < v->nruns; i++) finish_row(v, &v->runs[i], i);
    char worlds[160] = "";
    if (v->nworlds) {
        size_t len = (size_t)snprintf(worlds, sizeof worlds, "; world sizes");
        for (int i = 0; i < v->nworlds && len < sizeof worlds; i++)
            len += (size_t)snprintf(worlds + len, sizeof worlds - len, "%s%d", i ? "," : " ",
                                    v->worlds[i]);
    }
    snprintf(v->summary, sizeof v->summary, "%s (%s rng, on-error %s%s)",
             v->ok ? "all configurations give identical streams"
                   : "MISMATCH: the stream depends on the configuration",
             sp__rng_mode_name(v->lcfg.rng_mode), sp_on_error_name(v->lcfg.on_error), worlds);
    if (v->skip_name[0])
        snprintf(v->skipped, sizeof v->skipped, "%s: %s", v->skip_name, v->skip_why);
    memset(&v->lcfg, 0, sizeof v->lcfg);   /* the caller's strings are not kept */
    v->lcfg.rng_mode = SP_RNG_PER_SAMPLE;
}

void sp_verify_free(sp_verify_report *r) { free(r); }

int sp_verify_ok(const sp_verify_report *r) { return ((const sp__verify *)r)->ok; }

size_t sp__verify_row_count(const sp_verify_report *r) {
    return (size_t)((const sp__verify *)r)->nruns;
}

const sp_verify_row *sp__verify_row_get(const sp_verify_report *r, size_t i) {
    const sp__verify *v = (const sp__verify *)r;
    return i < (size_t)v->nruns ? &v->runs[i].row : NULL;
}

const char *sp__verify_skipped(const sp_verify_report *r) {
    return ((const sp__verify *)r)->skipped;
}

const char *sp__verify_summary(const sp_verify_report *r) {
    return ((const sp__verify *)r)->summary;
}

/* Copy a memstream's text into buf, snprintf-style. */
static size_t out_text(char *text, size_t len, char *buf, size_t size) {
    if (size) {
        size_t n = len < size - 1 ? len : size - 1;
        if (text) memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    return len;
}

size_t sp_verify_format(const sp_verify_report *rep, char *buf, size_t size) {
    const sp__verify *v = (const sp__verify *)rep;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return out_text(NULL, 0, buf, size);
    fprintf(f, "%-30s %8s  %-32s  %s\n", "configuration", "batches", "stream digest", "equal");
    for (int i = 0; i < v->nruns; i++) {
        const sp_verify_row *r = &v->runs[i].row;
        char hex[33];
        sp_digest_hex(r->stream, hex);
        fprintf(f, "%-30s %8llu  %-32s  %s\n", r->name, (unsigned long long)r->batches,
                r->rc ? "(failed)" : hex, i == 0 ? "reference" : r->equal ? "yes" : "NO");
    }
    if (v->skip_name[0]) fprintf(f, "%-30s %8s  %-32s  %s\n", v->skip_name, "-", "-", v->skip_why);
    for (int i = 0; i < v->nruns; i++) fputs(v->runs[i].row.note, f);
    fprintf(f, "verify: %s\n", v->summary);
    fclose(f);
    return out_text(text, len, buf, size);
}

static void json_div(sp__jw *w, const sp_verify_divergence *d) {
    static const char *kinds[] = {"same", "sample", "byte", "count", "missing",
                                  "lists", "length", "unknown"};
    if (d->kind == SP_VERIFY_SAME) {
        sp__jw_null(w);
        return;
    }
    sp__jw_obj(w);
    sp__jw_kstr(w, "kind", kinds[d->kind]);
    sp__jw_ku64(w, "epoch", d->epoch);
    sp__jw_ku64(w, "batch", d->batch);
    static const char *const ik[] = {"stream_batch", "position", "rank", "rank_position"};
    const int64_t iv[] = {d->stream_batch, d->position, d->rank, d->rank_position};
    for (int i = 0; i < 4; i++) {
        sp__jw_key(w, ik[i]);
        sp__jw_i64(w, iv[i]);
    }
    sp__jw_ku64(w, "sample_ref", d->sample_ref);
    sp__jw_ku64(w, "sample", d->sample);
    sp__jw_key(w, "byte_offset");
    sp__jw_i64(w, d->byte_offset);
    sp__jw_key(w, "sample_byte");
    sp__jw_i64(w, d->sample_byte);
    sp__jw_ku64(w, "byte_ref", d->byte_ref);
    sp__jw_ku64(w, "byte", d->byte);
    sp__jw_ku64(w, "count_ref", d->count_ref);
    sp__jw_ku64(w, "count", d->count);
    sp__jw_end(w, '}');
}

static void json_row(sp__jw *w, const sp_verify_row *r, int i) {
    char hex[33];
    sp_digest_hex(r->stream, hex);
    sp__jw_obj(w);
    sp__jw_kstr(w, "configuration", r->name);
    sp__jw_ku64(w, "batches", r->batches);
    sp__jw_key(w, "digest");
    if (r->rc) sp__jw_null(w);
    else sp__jw_str(w, hex);
    sp__jw_key(w, "equal");
    if (i == 0) sp__jw_null(w);
    else sp__jw_bool(w, r->equal);
    sp__jw_key(w, "error");
    if (r->rc) sp__jw_str(w, r->msg);
    else sp__jw_null(w);
    sp__jw_ku64(w, "world", r->world);
    sp__jw_ku64(w, "worker_deaths", r->worker_deaths);
    sp__jw_kstr(w, "note", r->note);
    sp__jw_key(w, "divergence");
    json_div(w, &r->div);
    sp__jw_end(w, '}');
}

size_t sp_verify_json(const sp_verify_report *rep, char *buf, size_t size) {
    const sp__verify *v = (const sp__verify *)rep;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return out_text(NULL, 0, buf, size);
    sp__jw w = sp__jw_file(f);
    sp__jw_obj(&w);
    sp__jw_key(&w, "ok");
    sp__jw_bool(&w, v->ok);
    sp__jw_kstr(&w, "summary", v->summary);
    sp__jw_kstr(&w, "skipped", v->skipped);
    sp__jw_key(&w, "rows");
    sp__jw_arr(&w);
    for (int i = 0; i < v->nruns; i++) json_row(&w, &v->runs[i].row, i);
    sp__jw_end(&w, ']');
    sp__jw_end(&w, '}');
    fclose(f);
    return out_text(text, len, buf, size);
}

/* verify_internal.h - what verify.c (running the rows) and verify_report.c
 * (the first divergences, the text and JSON renderings) share. */
#ifndef SEEDPIPE_VERIFY_INTERNAL_H
#define SEEDPIPE_VERIFY_INTERNAL_H

#include "seedpipe/verify.h"

/* One row while it runs, and what the report needs of it afterwards. */
typedef struct sp__verify_run {
    sp_verify_row row;     /* the public part */
    uint64_t n;            /* batches taken */
    sp_digest *d;          /* per batch */
    sp_digest *lists;      /* per batch: its skipped and substituted samples */
    int64_t div;           /* first batch that differs from the reference, copied: */
    uint32_t div_count;
    uint64_t *div_indices;
    uint8_t *div_images;
    uint32_t *div_counts;  /* a K-rank row: each rank's samples in that batch */
    int64_t list_div;      /* first batch whose skipped/substituted samples differ */
} sp__verify_run;

/* The report (sp_verify_report is this). */
typedef struct sp__verify {
    sp_loader_config lcfg;     /* its strings are the caller's: used during the run only */
    sp_verify_config cfg;
    int worlds[SP_VERIFY_MAX_LIST], nworlds;
    uint64_t total;            /* batches in the stream */
    const sp__verify_run *ref; /* NULL while running the reference */
    const char *cache;         /* the cache rows' directory, or NULL */
    sp__verify_run runs[SP_VERIFY_MAX_ROWS];
    int nruns, ok;
    char skip_name[64], skip_why[96], skipped[192];
    char summary[256];
} sp__verify;

/* After the rows ran: equality, first divergences and notes, summary; the
 * rows' copies of batches are freed (verify_report.c). */
void sp__verify_finish(sp__verify *v);

/* ---- Internal to the library: once seedpipe/verify.h exports, now the
 * layers' own (no caller outside libseedpipe). ---- */

#ifdef __cplusplus
extern "C" {
#endif

size_t sp__verify_row_count(const sp_verify_report *r);

/*! sp__verify_row_get() : row i (0: the reference), or NULL past the end. */
const sp_verify_row *sp__verify_row_get(const sp_verify_report *r, size_t i);

/*! sp__verify_skipped() : "" or the rows not run, with why (e.g. "service -> 2
 *  clients as ranks: not run (odd batch size)"). */
const char *sp__verify_skipped(const sp_verify_report *r);

/*! sp__verify_summary() : "all configurations give identical streams
 *  (per-sample rng, on-error fail)" or "MISMATCH: the stream depends on the
 *  configuration (...)". */
const char *sp__verify_summary(const sp_verify_report *r);

#ifdef __cplusplus
}
#endif

#endif

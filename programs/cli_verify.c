/* cli_verify.c - seedpipe verify (a thin caller of sp_verify_run(), verify.h) and seedpipe diff.
 *
 * `verify` parses its options (--workers and --world are lists here),
 * runs the configurations in the library and prints its report
 * (sp_verify_format(): the table of stream digests and the first
 * divergence of each row that differs), exit 0 only if every row equals
 * the reference. Progress goes to stderr when it is a terminal. `diff`
 * compares two manifests.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seedpipe/manifest.h"
#include "seedpipe/pool.h"
#include "seedpipe/verify.h"

/* ---- verify ---------------------------------------------------------------------- */

/* A comma-separated list of 1..max into out[16]; @return the count (exits 2 if bad). */
static int parse_list(cli_args *a, const char *opt, const char *list, long max, int *out) {
    int n = 0;
    const char *p = list;
    do {
        size_t len = strcspn(p, ",");
        if (n == 16) cli_usage_error(a, "--%s \"%s\": more than 16 numbers", opt, list);
        out[n++] = (int)cli_num_span(a, opt, list, p, len, 1, (uint64_t)max);
        p += len;
    } while (*p++ == ',');
    return n;
}

/* The row being run, on a terminal: "  NAME batch I/N", erased when it ends. */
static void progress(void *ud, const char *name, uint64_t done, uint64_t total) {
    (void)ud;
    if (name)
        fprintf(stderr, "\r  %-28s batch %llu/%llu   ", name, (unsigned long long)done,
                (unsigned long long)total);
    else
        fputs("\r\033[K", stderr);
}

/* The loader options, with --workers (and --world, a list unless --rank
 * names one rank of it) hidden from cli_loader_config / cli_pool_options. */
static void verify_loader_config(cli_args *a, int lists_world, sp_loader_config *cfg, int *ring) {
    cli_args tmp = *a;
    for (int i = 0; i < tmp.nopt; i++)
        if (!strcmp(tmp.opt[i].key, "workers") || (lists_world && !strcmp(tmp.opt[i].key, "world")))
            tmp.opt[i].key = "";
    cli_loader_config(&tmp, a->pos[0], cfg, CLI_BATCHES | CLI_FORMAT);
    int dummy_w;
    cli_pool_options(&tmp, cfg, &dummy_w, ring);
    for (int i = 0; i < a->nopt; i++) a->opt[i].used |= tmp.opt[i].used;
}

int cmd_verify(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe verify DATASET --workers 1,2,4 ...");
    const char *wlist = cli_str(a, "workers", "1,2,3,4,8");
    const char *klist = cli_has(a, "rank") ? NULL : cli_str(a, "world", NULL);
    sp_loader_config cfg;
    sp_verify_config vc;
    memset(&vc, 0, sizeof vc);
    verify_loader_config(a, klist != NULL, &cfg, &vc.ring_slots);
    vc.epochs = (uint32_t)cli_uint(a, "epochs", 1, 1, UINT32_MAX);
    static const struct { const char *opt; unsigned flag; } flags[] = {
        {"no-crash", SP_VERIFY_NO_CRASH}, {"no-resume", SP_VERIFY_NO_RESUME},
        {"no-service", SP_VERIFY_NO_SERVICE}, {"no-cache", SP_VERIFY_NO_CACHE}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (cli_has(a, flags[i].opt)) vc.flags |= flags[i].flag;
    vc.cache_dir = cli_str(a, "cache", NULL);   /* kept; else a temporary one */
    if (vc.cache_dir && (vc.flags & SP_VERIFY_NO_CACHE))
        cli_usage_error(a, "--cache DIR and --no-cache exclude each other");
    cli_check_unused(a);
    int ws[16], ks[16];
    vc.workers = ws;
    vc.nworkers = parse_list(a, "workers", wlist, SP_POOL_MAX_WORKERS, ws);
    vc.worlds = ks;
    vc.nworlds = klist ? parse_list(a, "world", klist, SP_VERIFY_MAX_WORLD, ks) : 0;
    for (int i = 0; i < vc.nworlds; i++)
        if (cfg.batch_size % (uint32_t)ks[i] != 0)
            cli_usage_error(a, "--world %d: the batch size %u is not divisible by %d (every world "
                            "size must divide the global batch)", ks[i], cfg.batch_size, ks[i]);
    sp_cache_opts co;
    cli_cache_opts(&co);
    vc.cache_opts = &co;
    if (isatty(2)) vc.progress = progress;
    sp_error err;
    sp_error_clear(&err);
    sp_verify_report *r;
    if (sp_verify_run(&cfg, &vc, &r, &err) != 0) cli_fail(a, &err);
    size_t n = sp_verify_format(r, NULL, 0);
    char *text = malloc(n + 1);
    if (!text) {
        sp_verify_free(r);
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(a, &err);
    }
    sp_verify_format(r, text, n + 1);
    fputs(text, stdout);
    free(text);
    int ok = sp_verify_ok(r);
    sp_verify_free(r);
    return ok ? 0 : 1;
}

/* ---- diff ------------------------------------------------------------------- */

int cmd_diff(cli_args *a) {
    if (a->npos != 2) cli_usage_error(a, "usage: seedpipe diff A.jsonl B.jsonl");
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_manifest *m1, *m2;
    if (sp_manifest_read(a->pos[0], &m1, &err) != 0) cli_fail(a, &err);
    if (sp_manifest_read(a->pos[1], &m2, &err) != 0) {
        sp_manifest_free(m1);
        cli_fail(a, &err);
    }
    sp_manifest_divergence d;
    sp_manifest_compare(m1, m2, &d);
    if (d.equal) {
        printf("equal: %zu batches\n", m1->nbatches);
    } else {
        if (d.header[0]) printf("header differs: %s\n", d.header);
        if (d.batch_found) {
            printf("first divergence: epoch %u, batch %llu", d.epoch, (unsigned long long)d.batch);
            if (d.position >= 0)
                printf(", position %lld, sample index %llu in A, %llu in B", (long long)d.position,
                       (unsigned long long)d.index_a, (unsigned long long)d.index_b);
            printf(": %s\n", d.what);
        }
    }
    sp_manifest_free(m1);
    sp_manifest_free(m2);
    return d.equal ? 0 : 1;
}

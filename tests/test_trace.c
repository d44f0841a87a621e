/* test_trace.c - the trace recorder (trace.h) from C, threads included
 * (tests/tsan.sh runs it: the recorder is shared by a process's threads).
 *
 *  1. In-process loader with 4 threads, traced: the same batch digests as
 *     untraced; the file's summary (sp_trace_summary_read) names one
 *     process, "consumer", with one "sample" span per position (each
 *     naming its thread), and its busy time is at most the wall times the
 *     thread count.
 *  2. A pool of 2 workers, traced: three processes (consumer, worker 0,
 *     worker 1); no parts directory left; the same digests.
 *  3. The contract: a second start while recording is SP_EINVAL ("already
 *     records"); stop when not recording is 0; a start into a missing
 *     directory is SP_EIO naming it; spans through the public
 *     sp_trace_span() land with their kind's name; sp_trace_clock() is 0
 *     when not recording; the summary of a file that is not a trace is
 *     SP_EFORMAT.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runner.h"
#include "seedpipe/shapes.h"
#include "seedpipe/stream.h"
#include "seedpipe/trace.h"
#include "common/trace_internal.h"

#define NSAMPLES 60
#define BATCH 8

static char g_root[64];   /* traces are written here */
static char g_ds[96];     /* the dataset: g_root/ds */

static void config(sp_loader_config *c, int threads) {
    sp_loader_config_default(c);
    c->dataset = g_ds;
    c->pipeline = "shapes-train";
    c->seed = 9;
    c->batch_size = BATCH;
    c->threads = threads;
}

/* Every batch digest of one epoch, into d (returns the count). */
static int digests(int kind, int workers, int threads, sp_digest *d) {
    sp_loader_config lc;
    config(&lc, threads);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = kind;
    sc.workers = workers;
    sp_stream *s;
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_stream_open(&lc, &sc, &s, &err), &err);
    int n = 0;
    sp_batch v;
    while (sp_stream_next(s, &v, &err) == 0) {
        d[n++] = sp_stream_batch_digest(s, &v);
        CHECK_OK(sp_stream_release(s, &v, &err), &err);
    }
    sp_stream_close(s);
    return n;
}

static int parts_left(void) {
    DIR *d = opendir(g_root);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) n += strstr(de->d_name, ".parts-") != NULL;
    closedir(d);
    return n;
}

static void test_threads(void) {
    sp_digest a[32], b[32];
    int n = digests(SP_STREAM_LOADER, 0, 4, a);
    char path[128];
    snprintf(path, sizeof path, "%s/threads.json", g_root);
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_trace_start(path, &err), &err);
    CHECK(sp_trace_active() == 1);
    CHECK(digests(SP_STREAM_LOADER, 0, 4, b) == n);
    CHECK_OK(sp_trace_stop(&err), &err);
    CHECK(sp_trace_active() == 0);
    for (int i = 0; i < n; i++) CHECK(a[i].hi == b[i].hi && a[i].lo == b[i].lo);
    sp_trace_summary s;
    CHECK_OK(sp_trace_summary_read(path, 4, &s, &err), &err);
    CHECK(s.nprocs == 1 && !strcmp(s.procs[0].name, "consumer"));
    CHECK(s.procs[0].pid == (int)getpid());
    CHECK(s.first_batch_us > 0 && s.dropped == 0);
    CHECK(s.busy_us > 0 && s.busy_us <= s.wall_us * 4.01);
    sp_trace_summary_free(&s);
    /* One "sample" per position. */
    uint8_t *text;
    size_t len;
    CHECK_OK(sp_read_file(path, 0, &text, &len, &err), &err);
    int samples = 0, tids[8] = {0}, ntids = 0;
    for (const char *p = (const char *)text; (p = strstr(p, "{\"name\":\"sample\"")) != NULL; p++) {
        samples++;
        const char *t = strstr(p, "\"tid\":");
        CHECK(t != NULL);
        int tid = atoi(t + 6), seen = 0;
        for (int i = 0; i < ntids; i++) seen |= tids[i] == tid;
        if (!seen && ntids < 8) tids[ntids++] = tid;
    }
    free(text);
    CHECK_MSG(samples == NSAMPLES, "%d sample spans, want %d", samples, NSAMPLES);
    /* which threads computed them is the scheduler's choice (a loaded machine
     * may run one thread through all); each span names a thread */
    CHECK_MSG(ntids >= 1, "sample spans from %d thread(s)", ntids);
    CHECK(parts_left() == 0);
}

static void test_pool(void) {
    sp_digest a[32], b[32];
    int n = digests(SP_STREAM_POOL, 2, 1, a);
    char path[128];
    snprintf(path, sizeof path, "%s/pool.json", g_root);
    sp_error err;
    sp_error_clear(&err);
    CHECK_OK(sp_trace_start(path, &err), &err);
    CHECK(digests(SP_STREAM_POOL, 2, 1, b) == n);
    CHECK_OK(sp_trace_stop(&err), &err);
    for (int i = 0; i < n; i++) CHECK(a[i].hi == b[i].hi && a[i].lo == b[i].lo);
    sp_trace_summary s;
    CHECK_OK(sp_trace_summary_read(path, 0, &s, &err), &err);
    CHECK_MSG(s.nprocs == 3, "%zu processes", s.nprocs);
    CHECK(!strcmp(s.procs[0].name, "consumer") && !strcmp(s.procs[1].name, "worker 0") &&
          !strcmp(s.procs[2].name, "worker 1"));
    /* both workers have a track; which of them computed the samples is the
     * scheduler's choice (on a loaded machine one may do them all) */
    CHECK(s.procs[1].busy_us + s.procs[2].busy_us > 0 && s.ngaps == 0);
    sp_trace_summary_free(&s);
    CHECK(parts_left() == 0);
}

static void test_contract(void) {
    char path[128], bad[160];
    snprintf(path, sizeof path, "%s/c.json", g_root);
    snprintf(bad, sizeof bad, "%s/missing/c.json", g_root);
    sp_error err;
    sp_error_clear(&err);
    CHECK(sp_trace_clock() == 0);
    CHECK(sp_trace_stop(&err) == 0);
    CHECK(sp_trace_start(bad, &err) == SP_EIO && strstr(err.msg, "missing"));
    CHECK(sp_trace_start("", &err) == SP_EINVAL);
    CHECK_OK(sp_trace_start(path, &err), &err);
    CHECK(sp_trace_start(path, &err) == SP_EINVAL && strstr(err.msg, "already records"));
    uint64_t t0 = sp_trace_clock();
    CHECK(t0 != 0);
    usleep(2000);
    sp_trace_span(SP_TRACE_STEP, t0, 3, 7);
    sp_trace_span(SP_TRACE_USER, sp_trace_clock(), UINT32_MAX, UINT64_MAX);
    sp_trace_span(99, t0, 0, 0);   /* no such kind: nothing */
    CHECK_OK(sp_trace_stop(&err), &err);
    uint8_t *text;
    size_t len;
    CHECK_OK(sp_read_file(path, 0, &text, &len, &err), &err);
    CHECK(strstr((char *)text, "{\"name\":\"step\",\"cat\":\"work\",\"ph\":\"X\"") != NULL);
    CHECK(strstr((char *)text, "\"args\":{\"epoch\":3,\"batch\":7}") != NULL);
    CHECK(strstr((char *)text, "{\"name\":\"user\"") != NULL);
    CHECK(strstr((char *)text, "\"events\":2,") != NULL);
    free(text);
    sp_trace_summary s;
    CHECK_OK(sp_trace_summary_read(path, 2, &s, &err), &err);
    CHECK(s.events == 2 && s.procs[0].busy_us >= 2000.0 && s.first_batch_us < 0);
    sp_trace_summary_free(&s);
    char notrace[128];
    snprintf(notrace, sizeof notrace, "%s/x.json", g_root);
    CHECK_OK(sp_write_file_atomic(notrace, "{\"a\":1}", 7, 0, &err), &err);
    CHECK(sp_trace_summary_read(notrace, 2, &s, &err) == SP_EFORMAT && strstr(err.msg, "not a trace"));
    CHECK(!strcmp(sp__trace_kind_name(SP_TRACE_WAIT_SLOT), "wait slot"));
    CHECK(!strcmp(sp__trace_kind_name(0), "?"));
}

static void setup(void) {
    snprintf(g_root, sizeof g_root, "/tmp/sp-test-trace-XXXXXX");
    CHECK(mkdtemp(g_root) != NULL);
    snprintf(g_ds, sizeof g_ds, "%s/ds", g_root);
    sp_shapes_opts o = {NSAMPLES, 16, 5};
    sp_error err;
    CHECK_OK(sp_shapes_make(g_ds, &o, &err), &err);
}

static void teardown(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0);
}

static const sp_case cases[] = {
    SP_CASE(test_threads),
    SP_CASE(test_pool),
    SP_CASE(test_contract),
};

int main(int argc, char **argv) {
    return sp_run_cases(argc, argv, cases, SP_NCASES(cases), setup, teardown);
}

/* cli_trace.c - `--trace FILE.json` (digest, serve, train) and `seedpipe
 * trace-summary FILE`: a timeline of the run (include/seedpipe/trace.h,
 * docs/tracing.md) and what it says in numbers.
 *
 * The trace starts before the dataset is opened, so its clock origin is
 * the command's start (after the tool's own load and argument parsing),
 * and it is written at exit (atexit: also when the command fails, which
 * is when a timeline helps most). trace-summary prints each process's busy
 * share of the wall, the average number of busy cores, the time to the
 * first batch and the longest idle gaps with what was waited for.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/trace.h"

static void trace_at_exit(void) {
    sp_error err;
    sp_error_clear(&err);
    if (!sp_trace_active()) return;
    if (sp_trace_stop(&err) != 0) fprintf(stderr, "seedpipe: --trace: %s\n", err.msg);
    else if (err.msg[0]) fprintf(stderr, "seedpipe: --trace: warning: %s\n", err.msg);
}

void cli_trace_start_rank(cli_args *a, uint32_t rank, uint32_t world) {
    const char *path = cli_str(a, "trace", NULL);
    if (!path) return;
    if (!path[0]) cli_usage_error(a, "--trace needs a file name");
    char buf[4096];
    if (world > 1) {   /* FILE.json -> FILE.rankR.json */
        size_t n = strlen(path);
        size_t stem = n > 5 && !strcmp(path + n - 5, ".json") ? n - 5 : n;
        snprintf(buf, sizeof buf, "%.*s.rank%u.json", (int)stem, path, rank);
        path = buf;
    }
    sp_error err;
    sp_error_clear(&err);
    if (sp_trace_start(path, &err) != 0) cli_fail(a, &err);
    atexit(trace_at_exit);
}

void cli_trace_start(cli_args *a) { cli_trace_start_rank(a, 0, 1); }

static const char *proc_name(const sp_trace_summary *s, int pid) {
    for (size_t i = 0; i < s->nprocs; i++)
        if (s->procs[i].pid == pid) return s->procs[i].name;
    return "?";
}

int cmd_trace_summary(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe trace-summary FILE.json [--gaps N]");
    uint64_t ngaps = cli_uint(a, "gaps", 10, 0, 1000);
    cli_check_unused(a);
    sp_trace_summary s;
    sp_error err;
    sp_error_clear(&err);
    if (sp_trace_summary_read(a->pos[0], (size_t)ngaps, &s, &err) != 0) cli_fail(a, &err);
    double wall = s.wall_us / 1e6;
    printf("trace %s: %zu processes, %llu spans (%llu dropped), wall %.3f s\n", a->pos[0],
           s.nprocs, (unsigned long long)s.events, (unsigned long long)s.dropped, wall);
    printf("busy cores: %.2f on average (%.3f s of work in %.3f s)\n",
           s.wall_us > 0 ? s.busy_us / s.wall_us : 0.0, s.busy_us / 1e6, wall);
    if (s.first_batch_us >= 0)
        printf("first batch: %.3f s after the trace started\n", s.first_batch_us / 1e6);
    printf("\n%-16s %8s %10s %10s %8s %8s\n", "process", "pid", "from s", "busy s", "busy %",
           "spans");
    for (size_t i = 0; i < s.nprocs; i++) {
        const sp_trace_proc *p = &s.procs[i];
        printf("%-16s %8d %10.3f %10.3f %7.1f%% %8llu\n", p->name, p->pid,
               p->first_us < 0 ? 0.0 : p->first_us / 1e6, p->busy_us / 1e6,
               s.wall_us > 0 ? 100.0 * p->busy_us / s.wall_us : 0.0,
               (unsigned long long)p->events);
    }
    if (s.ngaps) {
        printf("\nlongest idle gaps (no work span):\n");
        printf("%-16s %8s %10s %10s  %s\n", "process", "pid", "at s", "ms", "waiting in");
    }
    for (size_t i = 0; i < s.ngaps; i++) {
        const sp_trace_gap *g = &s.gaps[i];
        printf("%-16s %8d %10.3f %10.3f  %s\n", proc_name(&s, g->pid), g->pid, g->start_us / 1e6,
               g->dur_us / 1e3, g->waited);
    }
    sp_trace_summary_free(&s);
    return 0;
}

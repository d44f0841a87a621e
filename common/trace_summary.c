/* trace_summary.c - what a trace file says in numbers (trace.h,
 * sp_trace_summary_read()): each process's busy time and share of the
 * wall, the time to the first batch, and the longest idle gaps with what
 * each process was waiting for in them. `seedpipe trace-summary` prints it.
 *
 * HOW IT WORKS
 *
 * The file is parsed whole by the strict JSON reader (json_internal.h).
 * Every complete event ("ph": "X") is a span of its pid; "process_name"
 * metadata names the pids. A span is a wait when its name is "wait work",
 * "wait slot" or "next" (the consumer waiting for a batch); every other
 * span is work. A process's busy time is the length of the union of its
 * work spans (nested spans, a "decode" inside a "sample", count once); its
 * idle gaps are the holes in that union between its first and its last
 * span. Each gap is labelled with the wait span that overlaps it most, or
 * "untraced" when none does (time the process spent in code that records
 * no span). The wall is the first span's start to the last one's end over
 * all processes, so busy / wall summed over the processes is the average
 * number of busy cores.
 */
#include "common/json_internal.h"
#include "seedpipe/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    int pid;
    int wait;          /* 1: a wait span */
    double ts, end;
    char name[24];
} span;

static int is_wait(const char *name) {
    return !strcmp(name, "wait work") || !strcmp(name, "wait slot") || !strcmp(name, "next");
}

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return 0;
}

static int cmp_gap(const void *a, const void *b) {
    const sp_trace_gap *x = a, *y = b;
    if (x->dur_us != y->dur_us) return x->dur_us > y->dur_us ? -1 : 1;
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

static int num(const sp__json *j, long tok, double *out) {
    if (tok < 0 || j->t[tok].kind != SP__J_NUM) return -1;
    char buf[64];
    size_t n = j->t[tok].end - j->t[tok].start;
    if (n >= sizeof buf) return -1;
    memcpy(buf, j->s + j->t[tok].start, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    return 0;
}

/* The process named pid (added if new). @return its index or -1 (ENOMEM). */
static long proc_of(sp_trace_summary *s, size_t *cap, int pid) {
    for (size_t i = 0; i < s->nprocs; i++)
        if (s->procs[i].pid == pid) return (long)i;
    if (s->nprocs == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        sp_trace_proc *p = realloc(s->procs, nc * sizeof *p);
        if (!p) return -1;
        s->procs = p;
        *cap = nc;
    }
    sp_trace_proc *p = &s->procs[s->nprocs];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    snprintf(p->name, sizeof p->name, "pid %d", pid);
    p->first_us = -1;
    return (long)s->nprocs++;
}

/* 1 if a gap of dur would be among the max longest kept so far. */
static int gap_wanted(const sp_trace_summary *s, size_t max, double dur) {
    return max && (s->ngaps < max || dur > s->gaps[max - 1].dur_us);
}

/* Keep gap g if it is among the max longest (gaps sorted, longest first). */
static int gap_add(sp_trace_summary *s, size_t max, const sp_trace_gap *g) {
    if (!gap_wanted(s, max, g->dur_us)) return 0;
    if (!s->gaps && !(s->gaps = calloc(max, sizeof *s->gaps))) return -1;
    size_t i = s->ngaps < max ? s->ngaps++ : max - 1;
    s->gaps[i] = *g;
    qsort(s->gaps, s->ngaps, sizeof *s->gaps, cmp_gap);
    return 0;
}

/* Label gap [a, b) of the process whose spans are sp[0..n) (sorted by
 * start): the wait span overlapping it most. */
static void gap_label(const span *sp, size_t n, double a, double b, char out[24]) {
    double best = 0;
    snprintf(out, 24, "untraced");
    for (size_t i = 0; i < n && sp[i].ts < b; i++) {
        if (!sp[i].wait) continue;
        double lo = sp[i].ts > a ? sp[i].ts : a, hi = sp[i].end < b ? sp[i].end : b;
        if (hi - lo > best) {
            best = hi - lo;
            snprintf(out, 24, "%s", sp[i].name);
        }
    }
}

/* Busy time and gaps of one process's spans sp[0..n) (sorted by start). */
static int proc_scan(sp_trace_summary *s, size_t max_gaps, sp_trace_proc *p, const span *sp,
                     size_t n) {
    double cur_a = -1, cur_b = -1;   /* the busy interval being merged */
    for (size_t i = 0; i < n; i++) {
        if (p->first_us < 0 || sp[i].ts < p->first_us) p->first_us = sp[i].ts;
        if (sp[i].end > p->last_us) p->last_us = sp[i].end;
        if (sp[i].wait) continue;
        if (cur_b >= 0 && sp[i].ts <= cur_b) {
            if (sp[i].end > cur_b) cur_b = sp[i].end;
            continue;
        }
        if (cur_b >= 0) p->busy_us += cur_b - cur_a;
        double gap_from = cur_b >= 0 ? cur_b : p->first_us;
        if (sp[i].ts > gap_from && gap_wanted(s, max_gaps, sp[i].ts - gap_from)) {
            sp_trace_gap g = {p->pid, gap_from, sp[i].ts - gap_from, ""};
            gap_label(sp, n, gap_from, sp[i].ts, g.waited);
            if (gap_add(s, max_gaps, &g) != 0) return -1;
        }
        cur_a = sp[i].ts;
        cur_b = sp[i].end;
    }
    if (cur_b >= 0) p->busy_us += cur_b - cur_a;
    double tail = cur_b >= 0 ? cur_b : p->first_us;
    if (p->last_us > tail && gap_wanted(s, max_gaps, p->last_us - tail)) {
        sp_trace_gap g = {p->pid, tail, p->last_us - tail, ""};
        gap_label(sp, n, tail, p->last_us, g.waited);
        if (gap_add(s, max_gaps, &g) != 0) return -1;
    }
    return 0;
}

/* Collect the spans and names of the parsed file. */
static int collect(const sp__json *j, long evs, sp_trace_summary *s, size_t *pcap, span **out,
                   size_t *nout, sp_error *err) {
    size_t n = 0, cap = 0;
    span *sp = NULL;
    for (size_t t = (size_t)evs + 1; t < j->t[evs].next; t = j->t[t].next) {
        if (j->t[t].kind != SP__J_OBJ) continue;
        long ph = sp__json_get(j, t, "ph"), nm = sp__json_get(j, t, "name");
        int64_t pid;
        if (sp__json_i64(j, sp__json_get(j, t, "pid"), &pid) != 0) continue;
        char name[64];
        if (nm < 0 || sp__json_str(j, nm, name, sizeof name) != 0) continue;
        if (sp__json_streq(j, ph, "M") && !strcmp(name, "process_name")) {
            long args = sp__json_get(j, t, "args");
            long pi = proc_of(s, pcap, (int)pid);
            if (pi < 0) goto oom;
            char pn[64];
            if (args >= 0 && sp__json_str(j, sp__json_get(j, args, "name"), pn, sizeof pn) == 0)
                snprintf(s->procs[pi].name, sizeof s->procs[pi].name, "%.31s", pn);
            continue;
        }
        if (!sp__json_streq(j, ph, "X")) continue;
        double ts, dur;
        if (num(j, sp__json_get(j, t, "ts"), &ts) != 0 ||
            num(j, sp__json_get(j, t, "dur"), &dur) != 0 || dur < 0)
            return sp_error_set(err, SP_EFORMAT, "trace: event at offset %zu: \"X\" without "
                                "a numeric ts and dur", j->t[t].start);
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            span *nsp = realloc(sp, cap * sizeof *sp);
            if (!nsp) goto oom;
            sp = nsp;
        }
        long pi = proc_of(s, pcap, (int)pid);
        if (pi < 0) goto oom;
        s->procs[pi].events++;
        sp[n].pid = (int)pid;
        sp[n].ts = ts;
        sp[n].end = ts + dur;
        snprintf(sp[n].name, sizeof sp[n].name, "%.23s", name);
        sp[n].wait = is_wait(name);
        n++;
    }
    *out = sp;
    *nout = n;
    return SP_OK;
oom:
    free(sp);
    return sp_error_set(err, SP_ENOMEM, "trace: out of memory");
}

static int cmp_proc(const void *a, const void *b) {
    const sp_trace_proc *x = a, *y = b;
    int cx = strcmp(x->name, "consumer") == 0, cy = strcmp(y->name, "consumer") == 0;
    if (cx != cy) return cy - cx;
    int wx = strncmp(x->name, "worker ", 7) == 0, wy = strncmp(y->name, "worker ", 7) == 0;
    if (wx && wy && atoi(x->name + 7) != atoi(y->name + 7))
        return atoi(x->name + 7) - atoi(y->name + 7);
    return x->pid - y->pid;
}

/* Summarise the spans (sorted by pid, then start). */
static int summarise(sp_trace_summary *s, size_t max_gaps, span *sp, size_t n) {
    qsort(sp, n, sizeof *sp, cmp_span);
    s->events = n;
    double lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || sp[i].ts < lo) lo = sp[i].ts;
        if (i == 0 || sp[i].end > hi) hi = sp[i].end;
    }
    s->wall_us = n ? hi - lo : 0;
    s->first_batch_us = -1;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && sp[b].pid == sp[a].pid) b++;
        sp_trace_proc *p = NULL;
        for (size_t i = 0; i < s->nprocs; i++)
            if (s->procs[i].pid == sp[a].pid) p = &s->procs[i];
        if (p && proc_scan(s, max_gaps, p, sp + a, b - a) != 0) return -1;
        if (p && !strcmp(p->name, "consumer"))
            for (size_t i = a; i < b; i++)
                if (!strcmp(sp[i].name, "next") &&
                    (s->first_batch_us < 0 || sp[i].end < s->first_batch_us))
                    s->first_batch_us = sp[i].end;
        if (p) s->busy_us += p->busy_us;
        a = b;
    }
    qsort(s->procs, s->nprocs, sizeof *s->procs, cmp_proc);
    return 0;
}

int sp_trace_summary_read(const char *path, size_t max_gaps, sp_trace_summary *out,
                          sp_error *err) {
    memset(out, 0, sizeof *out);
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = sp_read_file(path, (uint64_t)2 << 30, &data, &len, err);
    if (rc != 0) return rc;
    sp__json j;
    rc = sp__json_parse(&j, (const char *)data, len, 16, len / 2 + 16, path, err);
    span *sp = NULL;
    size_t n = 0, pcap = 0;
    if (rc == 0) {
        long evs = j.t[0].kind == SP__J_OBJ ? sp__json_get(&j, 0, "traceEvents") : -1;
        if (evs < 0 || j.t[evs].kind != SP__J_ARR)
            rc = sp_error_set(err, SP_EFORMAT, "%s: not a trace: no \"traceEvents\" array", path);
        else
            rc = collect(&j, evs, out, &pcap, &sp, &n, err);
        long other = j.t[0].kind == SP__J_OBJ ? sp__json_get(&j, 0, "otherData") : -1;
        if (rc == 0 && other >= 0) sp__json_u64(&j, sp__json_get(&j, other, "dropped"), &out->dropped);
    }
    if (rc == 0 && summarise(out, max_gaps, sp, n) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "trace: out of memory");
    free(sp);
    sp__json_free(&j);
    free(data);
    if (rc != 0) sp_trace_summary_free(out);
    return rc;
}

void sp_trace_summary_free(sp_trace_summary *s) {
    if (!s) return;
    free(s->procs);
    free(s->gaps);
    memset(s, 0, sizeof *s);
}

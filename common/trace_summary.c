/* trace_summary.c - what a trace file says in numbers (trace.h,
 * sp_trace_summary_read()): each process's busy time and share of the
 * wall, the time to the first batch, and the longest idle gaps with what
 * each process was waiting for in them. `seedpipe trace-summary` prints it.
 *
 * HOW IT WORKS
 *
 * The file is read by the one bounded-read rule (fileio_internal.h: a
 * regular file, its size checked against SP_TRACE_SUMMARY_MAX_BYTES before
 * a byte is read). The top-level object is walked here, value by value
 * (strings and brackets only), and each value the summary uses (each event
 * of "traceEvents", "otherData") is parsed on its own by the strict JSON
 * reader (json_internal.h, at most EVENT_MAX_TOKENS values each), so the
 * memory is the file, one event's tokens and 48 bytes a span, never a
 * token array for the whole file. Every complete event ("ph": "X") is a span of its pid; "process_name"
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
 *
 * Names from the file (process_name, span names) are kept with their
 * control bytes escaped as \xNN, by the rule `seedpipe status` uses for
 * strings from a region (common/escape.c): printing a summary prints no
 * terminal escape.
 */
#include "common/escape_internal.h"
#include "common/fileio_internal.h"
#include "common/json_internal.h"
#include "seedpipe/trace.h"

#include "common/vec_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    int pid;
    int wait;          /* 1: a wait span */
    double ts, end;
    char name[24];
} span;

#define EVENT_MAX_TOKENS 4096   /* JSON values in one event or in otherData */
#define EVENT_MAX_DEPTH 16

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
    if (SP__VEC_RESERVE(s->procs, *cap, s->nprocs + 1, 8) != 0) return -1;
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

/* The spans a walk collects. */
typedef struct spans {
    span *v;
    size_t n, cap;
    size_t pcap;   /* procs' capacity */
} spans;

/* One event (j: it alone, token 0) at byte offset `at` of the file. */
static int one_event(const sp__json *j, size_t at, const char *path, sp_trace_summary *s,
                     spans *sp, sp_error *err) {
    if (j->t[0].kind != SP__J_OBJ) return SP_OK;
    long ph = sp__json_get(j, 0, "ph"), nm = sp__json_get(j, 0, "name");
    int64_t pid;
    if (sp__json_i64(j, sp__json_get(j, 0, "pid"), &pid) != 0) return SP_OK;
    char name[64];
    if (nm < 0 || sp__json_str(j, nm, name, sizeof name) != 0) return SP_OK;
    if (sp__json_streq(j, ph, "M") && !strcmp(name, "process_name")) {
        long args = sp__json_get(j, 0, "args");
        long pi = proc_of(s, &sp->pcap, (int)pid);
        if (pi < 0) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
        char pn[64];
        if (args >= 0 && sp__json_str(j, sp__json_get(j, args, "name"), pn, sizeof pn) == 0)
            sp__escape_copy(s->procs[pi].name, sizeof s->procs[pi].name, pn, sizeof pn);
        return SP_OK;
    }
    if (!sp__json_streq(j, ph, "X")) return SP_OK;
    double ts, dur;
    if (num(j, sp__json_get(j, 0, "ts"), &ts) != 0 ||
        num(j, sp__json_get(j, 0, "dur"), &dur) != 0 || !(dur >= 0))
        return sp_error_set(err, SP_EFORMAT, "%s: event at offset %zu: \"X\" without a "
                            "numeric ts and dur", path, at);
    if (SP__VEC_RESERVE(sp->v, sp->cap, sp->n + 1, 1024) != 0)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    long pi = proc_of(s, &sp->pcap, (int)pid);
    if (pi < 0) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    s->procs[pi].events++;
    span *x = &sp->v[sp->n++];
    x->pid = (int)pid;
    x->ts = ts;
    x->end = ts + dur;
    sp__escape_copy(x->name, sizeof x->name, name, sizeof name);
    x->wait = is_wait(name);
    return SP_OK;
}

/* Parse d[a, b) (one value) strictly on its own. */
static int parse_value(sp__json *j, const char *d, size_t a, size_t b, const char *path,
                       sp_error *err) {
    char what[4200];
    snprintf(what, sizeof what, "%s: the value at offset %zu", path, a);
    return sp__json_parse(j, d + a, b - a, EVENT_MAX_DEPTH, EVENT_MAX_TOKENS, what, err);
}

static size_t skip_ws(const char *d, size_t n, size_t i) {
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
    return i;
}

/* The end of the JSON value that starts at d[i], by its structure only
 * (strings with their escapes, brackets up to EVENT_MAX_DEPTH + 2 deep; the
 * values used are then parsed strictly), or 0 when it does not end in n. */
static size_t value_end(const char *d, size_t n, size_t i) {
    int depth = 0;
    for (size_t k = i; k < n; k++) {
        char c = d[k];
        if (depth == 0 && k > i &&
            (c == ',' || c == ':' || c == '}' || c == ']' || c == ' ' || c == '\t' ||
             c == '\n' || c == '\r'))
            return k;   /* the end of a number or a literal */
        if (c == '"') {
            for (k++; k < n && d[k] != '"'; k++)
                if (d[k] == '\\') k++;
            if (k >= n) return 0;
            if (depth == 0) return k + 1;
        } else if (c == '{' || c == '[') {
            if (++depth > EVENT_MAX_DEPTH + 2) return 0;
        } else if (c == '}' || c == ']') {
            if (--depth < 0) return 0;
            if (depth == 0) return k + 1;
        } else if (depth == 0 && (c == ',' || c == ':')) {
            return 0;   /* no value */
        }
    }
    return depth == 0 && n > i ? n : 0;
}

static int not_trace(sp_error *err, const char *path, size_t at, const char *why) {
    return sp_error_set(err, SP_EFORMAT, "%s: not a trace: offset %zu: %s", path, at, why);
}

/* Walk the top-level object of d[0, n): each "traceEvents" element and
 * "otherData" parsed on its own, every other value skipped. */
static int walk(const char *d, size_t n, const char *path, sp_trace_summary *s, spans *sp,
                sp_error *err) {
    size_t i = skip_ws(d, n, 0);
    if (i >= n || d[i] != '{') return not_trace(err, path, i, "not a JSON object");
    i = skip_ws(d, n, i + 1);
    int events = 0;
    if (i < n && d[i] == '}') i++;
    else for (;;) {
        size_t ke = i < n && d[i] == '"' ? value_end(d, n, i) : 0;
        if (!ke) return not_trace(err, path, i, "expected a key");
        int is_events = ke - i == 13 && !memcmp(d + i, "\"traceEvents\"", 13);
        int is_other = ke - i == 11 && !memcmp(d + i, "\"otherData\"", 11);
        i = skip_ws(d, n, ke);
        if (i >= n || d[i] != ':') return not_trace(err, path, i, "expected ':'");
        i = skip_ws(d, n, i + 1);
        if (is_events && i < n && d[i] == '[') {
            events = 1;
            i = skip_ws(d, n, i + 1);
            if (i < n && d[i] == ']') {
                i++;
            } else for (;;) {
                size_t e = value_end(d, n, i);
                if (!e) return not_trace(err, path, i, "expected an event");
                sp__json j;
                int rc = parse_value(&j, d, i, e, path, err);
                if (rc == SP_OK) rc = one_event(&j, i, path, s, sp, err);
                sp__json_free(&j);
                if (rc != SP_OK) return rc;
                i = skip_ws(d, n, e);
                if (i < n && d[i] == ',') { i = skip_ws(d, n, i + 1); continue; }
                if (i < n && d[i] == ']') { i++; break; }
                return not_trace(err, path, i, "expected ',' or ']' after an event");
            }
        } else {
            size_t e = value_end(d, n, i);
            if (!e) return not_trace(err, path, i, "expected a value");
            if (is_other) {
                sp__json j;
                int rc = parse_value(&j, d, i, e, path, err);
                if (rc == SP_OK && j.t[0].kind == SP__J_OBJ)
                    sp__json_u64(&j, sp__json_get(&j, 0, "dropped"), &s->dropped);
                sp__json_free(&j);
                if (rc != SP_OK) return rc;
            }
            i = e;
        }
        i = skip_ws(d, n, i);
        if (i < n && d[i] == ',') { i = skip_ws(d, n, i + 1); continue; }
        if (i < n && d[i] == '}') { i++; break; }
        return not_trace(err, path, i, "expected ',' or '}'");
    }
    if (skip_ws(d, n, i) != n) return not_trace(err, path, i, "bytes after the object");
    if (!events) return sp_error_set(err, SP_EFORMAT, "%s: not a trace: no \"traceEvents\" array",
                                     path);
    return SP_OK;
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
    if (n > 1) qsort(sp, n, sizeof *sp, cmp_span);   /* never qsort(NULL, 0) */
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
    if (s->nprocs > 1) qsort(s->procs, s->nprocs, sizeof *s->procs, cmp_proc);
    return 0;
}

int sp_trace_summary_read(const char *path, size_t max_gaps, sp_trace_summary *out,
                          sp_error *err) {
    memset(out, 0, sizeof *out);
    if (!path) return sp_error_set(err, SP_EINVAL, "(null): no path");
    sp__buf buf = {NULL, 0};
    size_t len = 0;
    int rc = sp__read_regular(AT_FDCWD, path, path, 0, SP_TRACE_SUMMARY_MAX_BYTES, &buf, &len,
                              err);
    spans sp = {NULL, 0, 0, 0};
    if (rc == SP_OK) rc = walk(buf.p ? (const char *)buf.p : "", len, path, out, &sp, err);
    if (rc == SP_OK && summarise(out, max_gaps, sp.v, sp.n) != 0)
        rc = sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    free(sp.v);   /* also after an error: the spans so far */
    sp__buf_free(&buf);
    if (rc != SP_OK) sp_trace_summary_free(out);
    return rc;
}

void sp_trace_summary_free(sp_trace_summary *s) {
    if (!s) return;
    free(s->procs);
    free(s->gaps);
    memset(s, 0, sizeof *s);
}

/* cli_service.c - seedpipe serve and seedpipe status.
 *
 * `serve` runs the loader as a service (service.h) behind the named
 * shared-memory region NAME, for all --world K ranks or, one service per
 * node, for the ranks --ranks A-B (it computes only their samples): it
 * prints one line starting with "ready" once
 * clients can attach, serves until the stream has been consumed by every
 * rank or until SIGTERM/SIGINT (then it stops the workers and unlinks the
 * region; exit 0), and prints a summary. A stale region of the same name is
 * removed with a message; a live one is refused (exit 1). `status NAME`
 * prints a running service's progress, throughput, ring occupancy, workers
 * and clients (exit 0; 1 if the region is missing, invalid or stale).
 * `serve --batch-mix SPEC` (digest's syntax, sp_batch_mix_parse()) mixes
 * each published batch in the service, its soft targets beside it in the
 * ring (service.h: batch_mix).
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seedpipe/batchmix.h"
#include "seedpipe/pool.h"
#include "seedpipe/service.h"
#include "seedpipe/state.h"

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

/* --ranks A-B (or A) of world K into *first, *count; absent: all K. */
static void parse_ranks(cli_args *a, uint32_t world, uint32_t *first, uint32_t *count) {
    const char *v = cli_str(a, "ranks", NULL);
    *first = 0;
    *count = world;
    if (!v) return;
    size_t n = strcspn(v, "-");
    uint64_t lo, hi;
    int rc = cli_parse_dec(v, n, &lo), bad = rc == -1 || rc == -3;
    if (rc == -2) lo = UINT64_MAX;   /* out of range below */
    hi = lo;
    if (!bad && v[n] == '-') {
        rc = cli_parse_dec(v + n + 1, strlen(v + n + 1), &hi);
        bad = rc == -1 || rc == -3;
        if (rc == -2) hi = UINT64_MAX;
    }
    if (bad)
        cli_usage_error(a, "--ranks \"%s\": expected A-B (first and last rank served) or A, "
                        "decimal", v);
    if (!cli_has(a, "world")) cli_usage_error(a, "--ranks needs --world K (the job's ranks)");
    if (lo > hi || hi >= world)
        cli_usage_error(a, "--ranks \"%s\": need A <= B < --world %u", v, world);
    if (hi - lo + 1 > SP_SERVICE_MAX_RANKS)
        cli_usage_error(a, "--ranks %s: one service serves at most %d ranks", v,
                        SP_SERVICE_MAX_RANKS);
    *first = (uint32_t)lo;
    *count = (uint32_t)(hi - lo + 1);
}

/* --batch-mix SPEC (batchmix.h: sp_batch_mix_parse()): 1 and *m, or 0. */
static int parse_mix(cli_args *a, const sp_loader_config *cfg, sp_batch_mix_spec *m) {
    const char *spec = cli_str(a, "batch-mix", NULL);
    if (!spec) return 0;
    sp_error e;
    sp_error_clear(&e);
    if (sp_batch_mix_parse(spec, m, &e) != 0) cli_usage_error(a, "%s", e.msg);
    if (cfg->dtype != SP_DTYPE_FLOAT32 || cfg->layout != SP_LAYOUT_NCHW)
        cli_usage_error(a, "--batch-mix needs --dtype float32 and --layout nchw (the mix is "
                        "torch's float32 arithmetic on (B, C, H, W) batches)");
    if (cfg->annotations)
        cli_usage_error(a, "--batch-mix with --annotations: a batch mix mixes class labels "
                        "into soft targets; boxes and masks are not mixed");
    return 1;
}

/* SIGTERM and SIGINT stop the service (stop_flag), which then exits cleanly. */
static void catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* The "ready ..." line, from the published status (what clients read). */
static void print_ready(cli_args *a, sp_service *svc, const char *name) {
    sp_service_status st;
    sp_error e2;
    sp_error_clear(&e2);
    if (sp_service_status_read(name, &st, &e2) != 0) {
        sp_service_destroy(svc);
        cli_fail(a, &e2);
    }
    char range[48] = "";
    if (st.nranks != st.world)
        snprintf(range, sizeof range, " ranks %u-%u", st.rank_first, st.rank_first + st.nranks - 1);
    printf("ready %s pid %d world %u%s workers %u ring %u batches %llu (epochs %u x %llu) "
           "fingerprint %s\n",
           name, (int)getpid(), st.world, range, st.nworkers, st.ring_slots,
           (unsigned long long)st.total, st.epochs, (unsigned long long)st.batches_per_epoch,
           st.fingerprint);
    fflush(stdout);
}

/* The "served ..." line after sp_service_run() returned rc. */
static void print_served(const char *name, int rc) {
    sp_service_status st;
    sp_error e2;
    sp_error_clear(&e2);
    if (sp_service_status_read(name, &st, &e2) == 0)
        printf("served %llu of %llu batches, %llu images in %.2f s (%.0f images/s); "
               "%u worker death%s, %u client death%s%s\n",
               (unsigned long long)st.published, (unsigned long long)st.total,
               (unsigned long long)st.samples, st.seconds,
               st.seconds > 0 ? (double)st.samples / st.seconds : 0.0, st.worker_deaths,
               st.worker_deaths == 1 ? "" : "s", st.client_deaths,
               st.client_deaths == 1 ? "" : "s",
               rc == SP_STOPPED ? "; stopped by a signal" : "");
    fflush(stdout);
}

int cmd_serve(cli_args *a) {
    if (a->npos != 1)
        cli_usage_error(a, "usage: seedpipe serve --name NAME DATASET --pipeline P --seed S "
                           "--batch-size B --workers W [--epochs E] [--world K [--ranks A-B]] "
                           "[--cache DIR] [--batch-mix SPEC]");
    const char *name = cli_str(a, "name", NULL);
    if (!name) cli_usage_error(a, "--name NAME is required");
    cli_trace_start(a);
    if (cli_has(a, "rank"))
        cli_usage_error(a, "serve takes --world K; each client attaches as its own rank");
    sp_loader_config cfg;
    cli_loader_config(a, a->pos[0], &cfg, CLI_BATCHES | CLI_FORMAT);
    uint32_t world = cfg.world;
    cfg.world = 1;
    cfg.rank = 0;
    int workers, ring;
    cli_pool_options(a, &cfg, &workers, &ring);
    if (workers < 1) cli_usage_error(a, "--workers W (1..%d) is required", SP_POOL_MAX_WORKERS);
    uint32_t start;
    uint64_t epochs;
    cli_epoch_range(a, UINT32_MAX, &start, &epochs);
    if ((uint64_t)start + epochs > UINT32_MAX)
        cli_usage_error(a, "--epoch-start %u --epochs %llu: a service serves epochs below "
                        "4294967295 (its epochs are a 32-bit end, service.h); use digest for the "
                        "last one", start, (unsigned long long)epochs);
    const char *resume_path = cli_str(a, "resume", NULL);
    const char *cache_dir = cli_str(a, "cache", NULL);
    sp_batch_mix_spec mix;
    int mixing = parse_mix(a, &cfg, &mix);
    uint32_t first, count;
    parse_ranks(a, world, &first, &count);
    cli_check_unused(a);
    if (world > SP_SERVICE_MAX_WORLD)
        cli_usage_error(a, "--world must be <= %u", SP_SERVICE_MAX_WORLD);
    if (count > SP_SERVICE_MAX_RANKS)
        cli_usage_error(a, "--world %u: one service serves at most %d ranks; run one per node "
                        "with --ranks A-B", world, SP_SERVICE_MAX_RANKS);
    if (cfg.batch_size % world != 0)
        cli_usage_error(a, "--batch-size %u is not divisible by --world %u", cfg.batch_size,
                        world);

    sp_error err;
    sp_error_clear(&err);
    sp_loader_state resume;
    if (resume_path && sp_loader_state_load(resume_path, &resume, &err) != 0) cli_fail(a, &err);
    if (resume_path && resume.epoch < start)
        cli_usage_error(a, "--resume %s: the state is at epoch %u, before --epoch-start %u",
                        resume_path, resume.epoch, start);
    if (!resume_path && start > 0) cli_state_at(a, &cfg, start, &resume);

    catch_signals();
    sp_cache_opts co;
    cli_cache_opts(&co);
    sp_service_config sc = {name, world, workers, ring, (uint32_t)(start + epochs),
                            resume_path || start ? &resume : NULL, cache_dir, &co, first, count,
                            mixing ? &mix : NULL};
    sp_service *svc;
    if (sp_service_create(&cfg, &sc, &svc, &err) != 0) cli_fail(a, &err);
    if (sp_service_note(svc)[0]) fprintf(stderr, "seedpipe serve: %s\n", sp_service_note(svc));
    print_ready(a, svc, name);
    int rc = sp_service_run(svc, &stop_flag, &err);
    print_served(name, rc);
    cli_print_failures(sp_service_loader(svc), stderr);
    cli_print_cache_stats(sp_service_cache(svc), stdout);
    sp_service_destroy(svc);
    if (rc != 0 && rc != SP_STOPPED) cli_fail(a, &err);
    return 0;
}

static const char *rank_state(int s) {
    switch (s) {
    case SP_RANK_NEVER: return "never attached";
    case SP_RANK_ATTACHING: return "attaching";
    case SP_RANK_ATTACHED: return "attached";
    default: return "detached";
    }
}

int cmd_status(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe status NAME");
    cli_check_unused(a);
    const char *name = a->pos[0];
    sp_service_status st;
    sp_error err;
    sp_error_clear(&err);
    if (sp_service_status_read(name, &st, &err) != 0) cli_fail(a, &err);
    const char *what = !st.alive ? "GONE: stale region (the next serve with this name removes it)"
                       : st.running ? (st.ended ? "running, stream complete" : "running")
                                    : "not running";
    printf("region %s: service pid %d, %s\n", name, st.pid, what);
    printf("  dataset %s, seed %llu, fingerprint %s\n", st.dataset, (unsigned long long)st.seed,
           st.fingerprint);
    uint64_t abs = st.start_abs + st.published, nb = st.batches_per_epoch ? st.batches_per_epoch : 1;
    printf("  progress: epoch %llu batch %llu of %llu per epoch (epochs %u); published %llu of "
           "%llu batches, recycled %llu\n",
           (unsigned long long)(abs / nb), (unsigned long long)(abs % nb),
           (unsigned long long)nb, st.epochs, (unsigned long long)st.published,
           (unsigned long long)st.total, (unsigned long long)st.recycled);
    printf("  throughput: %.0f images/s (%llu images in %.2f s)\n",
           st.seconds > 0 ? (double)st.samples / st.seconds : 0.0,
           (unsigned long long)st.samples, st.seconds);
    printf("  ring: %u slots: %u ready for clients, %u being computed, %u free\n", st.ring_slots,
           st.slots_ready, st.slots_computing, st.ring_slots - st.slots_ready - st.slots_computing);
    printf("  workers (%u; %u deaths noticed):\n", st.nworkers, st.worker_deaths);
    for (uint32_t w = 0; w < st.nworkers; w++)
        printf("    worker %u: pid %d %s, %s, %llu samples, respawned %u times\n", w,
               st.workers[w].pid, st.workers[w].alive ? "alive" : "dead",
               st.workers[w].busy ? "busy" : "idle", (unsigned long long)st.workers[w].samples,
               st.workers[w].respawns);
    if (st.nranks == st.world)
        printf("  clients (world %u; %u client deaths noticed):\n", st.world, st.client_deaths);
    else
        printf("  clients (ranks %u-%u of world %u, the others served elsewhere; %u client "
               "deaths noticed):\n", st.rank_first, st.rank_first + st.nranks - 1, st.world,
               st.client_deaths);
    for (uint32_t r = 0; r < st.nranks; r++) {
        printf("    rank %u: %s", st.rank_first + r, rank_state(st.ranks[r].state));
        if (st.ranks[r].state == SP_RANK_ATTACHED) printf(" (pid %d)", st.ranks[r].pid);
        if (st.ranks[r].state != SP_RANK_NEVER)
            printf(", next batch %llu, released %llu, attached %u times",
                   (unsigned long long)st.ranks[r].next, (unsigned long long)st.ranks[r].released,
                   st.ranks[r].attaches);
        printf("\n");
    }
    if (st.err_code) printf("  stream error: %s\n", st.err_msg);
    return st.alive ? 0 : 1;
}

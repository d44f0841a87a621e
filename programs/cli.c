/* cli.c - the seedpipe command-line tool: dispatch and option parsing.
 *
 *   seedpipe <command> [positional args] [--option value | --flag] ...
 *
 * Commands are listed in usage() below and documented in README.md.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options by how many words follow them (cmd NULL: any command);
 * everything else takes one. */
static const struct { const char *cmd, *key; int arity; } arities[] = {
    {NULL, "drop-last", 0}, {NULL, "help", 0},   {"rng", "batch", 0},
    {"rng", "key", 2},      {"rng", "counter", 4},
    {"verify", "no-crash", 0}, {"verify", "no-resume", 0}, {"verify", "no-service", 0},
    {"verify", "no-cache", 0}, {"train", "strict", 0}, {"train", "fast", 0},
    {"index", "rebuild", 0},
};

static int cli_arity(const char *cmd, const char *key) {
    for (size_t i = 0; i < sizeof arities / sizeof arities[0]; i++)
        if ((!arities[i].cmd || strcmp(arities[i].cmd, cmd) == 0) &&
            strcmp(arities[i].key, key) == 0)
            return arities[i].arity;
    return 1;
}

static void usage(FILE *f) {
    fputs("usage: seedpipe <command> ...\n"
          "\n"
          "  make-shapes OUT_DIR [--count N] [--size PX] [--seed S]\n"
          "      write the built-in shapes dataset (an ImageFolder)\n"
          "  inspect DATASET [--split NAME=FRACTION,... [--split-seed S]]\n"
          "      sample count, classes with counts, fingerprint, subset sizes\n"
          "  index DATASET [--rebuild] [--threads T]\n"
          "      build or check the persistent index (the content hashes kept beside\n"
          "      the data, trusted while each file's stat is unchanged): what was reused,\n"
          "      what was hashed; --rebuild ignores the one there\n"
          "  shard DATASET OUT_DIR [--max-count N]\n"
          "      write an ImageFolder or list as WebDataset tar shards (canonical order,\n"
          "      N samples a shard, default 10000); they stream the same batches\n"
          "  split DATASET --split NAME=FRACTION,... --subset NAME [--split-seed S]\n"
          "      print the paths of one subset of the split (relative to the dataset\n"
          "      root, one a line), to record it\n"
          "  explain DATASET --pipeline P --seed S --epoch E --sample I\n"
          "      what each op draws for one sample: crop box, flips, jitter factors/order\n"
          "  digest DATASET --pipeline P --seed S --epochs E --batch-size B\n"
          "         [--threads T] [--drop-last] [--rank R --world W]\n"
          "         [--dtype uint8|float32|bfloat16|float16] [--layout nchw|nhwc]\n"
          "         --out FILE.jsonl\n"
          "         [--workers W [--ring R]] [--on-error fail|skip|substitute]\n"
          "         [--rng-mode per-sample|per-worker] [--resume STATE]\n"
          "         [--save-state FILE [--stop-after N]] [--cache DIR]\n"
          "      write one digest line per batch (a manifest); --workers W >= 1 runs on\n"
          "      the worker pool, 0 (default) in-process; every way gives the same lines\n"
          "  verify DATASET --pipeline P --seed S --epochs E --batch-size B\n"
          "         [--workers 1,2,3,4,8] [--world 1,2,4] [--rng-mode per-sample|per-worker]\n"
          "         [--ring R] [--on-error P] [--no-crash] [--no-resume] [--no-service]\n"
          "         [--no-cache | --cache DIR]\n"
          "      run the stream in-process, at each worker count, with a worker killed,\n"
          "      with a stop/resume, and through a service to 1 client and to 2 ranks;\n"
          "      --world: for each world size K (dividing B), the K ranks' slices from\n"
          "      in-process loaders (rank r of K, --threads T) concatenated in rank order,\n"
          "      and (K >= 2) from two services, one per half of the ranks, must give\n"
          "      the global stream; table of stream digests, first divergence\n"
          "      (--rank R --world K instead verifies that one rank's stream)\n"
          "  serve --name NAME DATASET --pipeline P --seed S --batch-size B --workers W\n"
          "        [--epochs E] [--world K [--ranks A-B]] [--ring R] [--on-error P]\n"
          "        [--resume STATE] [--cache DIR]\n"
          "      serve the stream over the shared-memory region NAME (mode 0600) to\n"
          "      clients (client.h, examples/trainer.c), K ranks each reading its slice\n"
          "      of every global batch; --ranks A-B: only ranks A..B of the K (one\n"
          "      service per node, each with its own NAME), computing only their\n"
          "      samples; clients attach with their global rank; prints a 'ready' line;\n"
          "      ends when every rank served has consumed the stream, or on\n"
          "      SIGTERM/SIGINT (region unlinked, exit 0)\n"
          "  status NAME\n"
          "      a service's progress, throughput, ring occupancy, workers, clients\n"
          "  diff A.jsonl B.jsonl\n"
          "      compare two manifests; the first divergence; exit 0 only if equal\n"
          "  cache build DATASET --cache DIR --pipeline P --seed S --batch-size B --epochs 0-9\n"
          "        [--threads T | --workers W] [--level L] [--max-size SIZE]   fill the epoch cache\n"
          "  cache ls DIR | cache verify DIR [--recompute N [--dataset D]]\n"
          "  cache gc DIR --max-size SIZE\n"
          "  train DATASET --seed S --epochs E --batch-size B --out RUN.json\n"
          "         [--pipeline P] [--dtype uint8|float32] [--threads T] [--train-threads T]\n"
          "         [--device cpu|cuda] [--mode strict|fast|default] [--lr X] [--momentum X]\n"
          "         [--weight-decay X] [--eval DATASET] [--eval-subset NAME] [--eval-pipeline P]\n"
          "         [--checkpoint-dir DIR --checkpoint-every N] [--resume CKPT] [--stop-after N]\n"
          "         [--workers W [--ring R] | --attach NAME] [--cache DIR] [--seeds 1,2,3]\n"
          "         [--compare-devices STEPS]\n"
          "      train the small CNN on loader batches (docs/training.md); writes a run record;\n"
          "      under `mpirun -np K` (or srun) data-parallel with the same weights for any K\n"
          "      dividing B, each rank reading its slice (--attach: its node's service;\n"
          "      docs/distributed.md)\n"
          "  dump DATASET --pipeline P --seed S --epoch E --batch B --out grid.png\n"
          "      write one augmented batch as a contact sheet\n"
          "  order (DATASET | --n N) --seed S --epoch E\n"
          "      print the epoch's sample indices in order\n"
          "  rng --key K0 K1 --counter C0 C1 C2 C3   one Philox4x32-10 block\n"
          "  rng --batch                            the same, 'k0 k1 c0 c1 c2 c3' lines on stdin\n"
          "  rng --seed S --stream shuffle|augment|init|worker|other [--worker W]\n"
          "      print a derived key\n"
          "  gcn-demo [--threads T] [--device cpu|cuda] [--runs 5] [--seed S]\n"
          "      a GCN layer on an Erdos-Renyi graph, atomic vs deterministic scatter-add:\n"
          "      the output sums of each run and \"All equal\" (docs/graph.md)\n"
          "  env [--json FILE]\n"
          "      versions, build options, compiler, CUDA/cuDNN/cuBLAS, device, CPU\n"
          "  version\n"
          "\n"
          "Every command that takes a DATASET also takes --split NAME=FRACTION,...\n"
          "[--subset NAME] [--split-seed S]: the samples of one subset, decided by a\n"
          "keyed hash of each sample's path (docs/graph.md; inspect prints the sizes)\n",
          f);
}

int main(int argc, char **argv) {
    cli_args a;
    memset(&a, 0, sizeof a);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    a.cmd = argv[1];
    if (!strcmp(a.cmd, "help") || !strcmp(a.cmd, "--help") || !strcmp(a.cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(a.cmd, "version") || !strcmp(a.cmd, "--version")) {
        char v[512];
        sp_library_versions_json(v, sizeof v);
        printf("%s\n%s\n", sp_version_string(), v);
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (s[0] == '-' && s[1] == '-' && s[2]) {
            if (a.nopt == (int)(sizeof a.opt / sizeof a.opt[0]))
                cli_usage_error(&a, "too many options");
            const char *key = s + 2;
            int n = cli_arity(a.cmd, key);
            a.opt[a.nopt].key = key;
            if (n == 0) {
                a.opt[a.nopt].val = "1";
            } else {
                if (i + n >= argc)
                    cli_usage_error(&a, "--%s needs %d value%s", key, n, n > 1 ? "s" : "");
                a.opt[a.nopt].words = (const char *const *)argv + i + 1;
                a.opt[a.nopt].val = argv[i + 1];
                i += n;
            }
            a.nopt++;
        } else {
            if (a.npos == (int)(sizeof a.pos / sizeof a.pos[0]))
                cli_usage_error(&a, "too many arguments");
            a.pos[a.npos++] = s;
        }
    }
    static const struct { const char *name; int (*fn)(cli_args *); } cmds[] = {
        {"rng", cmd_rng},         {"order", cmd_order},
        {"inspect", cmd_inspect}, {"make-shapes", cmd_make_shapes},
        {"index", cmd_index},     {"shard", cmd_shard},
        {"split", cmd_split},     {"explain", cmd_explain},
        {"digest", cmd_digest},   {"dump", cmd_dump},
        {"verify", cmd_verify},   {"diff", cmd_diff},
        {"serve", cmd_serve},     {"status", cmd_status},
        {"cache", cmd_cache},     {"train", cmd_train},
        {"gcn-demo", cmd_gcn_demo}, {"env", cmd_env},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmds[i].name, a.cmd)) return cmds[i].fn(&a);
    fprintf(stderr, "seedpipe: unknown command \"%s\"\n", a.cmd);
    usage(stderr);
    return 2;
}

/* cli_help.c - the tool's help: every command's options, in one table.
 *
 * `seedpipe help` prints every topic, `seedpipe help CMD [SUB]` and
 * `seedpipe CMD [SUB] --help` print one, from the same text. The text is
 * also the list of what each command reads: cli_args.c's lookups ask
 * cli_help_lists() and stop the tool (abort) on an option that the
 * command's help does not list, so the help cannot drift from the code
 * (tests/test_cli_numbers.py reaches every command's lookups).
 *
 * A topic is its own text plus the shared blocks its flags name (the
 * loader options, the batch geometry, the output format, the split, the
 * worker pool), printed after it; `seedpipe help` prints each block once,
 * at the end.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#define B_LOADER 1u   /* --pipeline --seed */
#define B_BATCH 2u    /* --batch-size --drop-last --rank --world --threads --order */
#define B_FORMAT 4u   /* --dtype --layout */
#define B_SPLIT 8u    /* --split --subset --split-seed */
#define B_POOL 16u    /* --workers --ring --on-error --rng-mode */
#define B_TRACE 32u   /* --trace */

static const struct { unsigned flag; const char *title, *text; } blocks[] = {
    {B_LOADER, "loader options",
     "  --pipeline P          the augmentation pipeline: a preset name, an op list\n"
     "                        (docs/pipeline.md) or @FILE (default shapes-train)\n"
     "  --seed S              the stream's seed, 0..18446744073709551615 (default 0)\n"
     "  --annotations FILE    a COCO-style instances JSON for the images: boxes and\n"
     "                        keypoints ride the pipeline, which ends with a targets\n"
     "                        op (docs/targets.md); @json: each WebDataset sample's\n"
     "                        KEY.json member\n"
     "  --shard-cache DIR     remote shards (s3://, http(s)://): keep whole local copies\n"
     "                        in DIR/seedpipe-shards-UID (its own, 0700; nothing else\n"
     "                        in DIR is touched), shared by processes (docs/remote.md)\n"
     "  --shard-cache-size N  the copies' total size, e.g. 50G (default 10G)\n"
     "  --seq-len L           a token corpus (PREFIX.idx + PREFIX.bin, docs/tokens.md):\n"
     "                        windows of L tokens, 1..1048576, in place of --pipeline\n"
     "  --packing P           concat (default: the documents as one stream, windows of\n"
     "                        L+1 tokens) | docs (whole documents, segment ids)\n"
     "  --eod ID --pad ID     the end-of-document token concat adds after each document\n"
     "                        (default none) and the padding token (default 0)\n"},
    {B_BATCH, "batch options",
     "  --batch-size B        the global batch, 1..1048576 (default 32)\n"
     "  --drop-last           leave out the last, short batch of an epoch\n"
     "  --rank R --world W    rank R's slice of every global batch, W in 1..65536,\n"
     "                        R in 0..W-1 (default 0 of 1)\n"
     "  --threads T           loader threads, 1..64 (default 1; never changes a byte)\n"
     "  --order O             global (default; also shuffle) | sequential | block:K:\n"
     "                        block:K (tar shards, local or remote) permutes the shards,\n"
     "                        then the samples within each block of K shards, so the\n"
     "                        stream reads K shards at a time; K in 1..4294967295\n"
     "                        (docs/determinism.md 6a, docs/remote.md)\n"
     "  --indices FILE        the samples: these dataset indices (decimal, one a line,\n"
     "                        each once), permuted, or in the file's order (sequential)\n"
     "  --num-samples N       positions an epoch, 1..4294967296 (default: the samples)\n"
     "  --replacement         draw each position with replacement (uniformly, or by\n"
     "                        --weights)\n"
     "  --weights FILE        one weight >= 0 a line, one per sample: weighted draws,\n"
     "                        without --replacement each sample at most once an epoch\n"
     "  --repeat R            each sample R times in a row, each copy augmented as its\n"
     "                        own, the copies on different ranks (docs/determinism.md 13)\n"},
    {B_FORMAT, "format options",
     "  --dtype D             uint8 | float32 | bfloat16 | float16 (default: float32\n"
     "                        when the pipeline normalizes, else uint8); a token\n"
     "                        corpus: int32 (default) | int64\n"
     "  --layout L            nchw | nhwc (default nchw)\n"},
    {B_SPLIT, "split options",
     "  --split NAME=FRACTION,...  a split of the dataset by keyed hash of each\n"
     "                        sample's path (docs/graph.md; inspect prints the sizes)\n"
     "  --subset NAME         the subset of --split to use\n"
     "  --split-seed S        the split's key, 0..18446744073709551615 (default 0)\n"},
    {B_POOL, "pool options",
     "  --workers W           0 (default): in-process; 1..64: a pool of W worker\n"
     "                        processes (same bytes)\n"
     "  --ring R              the pool's ring slots, 0..1024 (0: max(2, 2W))\n"
     "  --on-error P          fail | skip | substitute (default fail)\n"
     "  --rng-mode M          per-sample | per-worker (default per-sample)\n"},
    {B_TRACE, "trace option",
     "  --trace FILE.json     write a timeline of the run (Chrome trace-event JSON for\n"
     "                        Perfetto or chrome://tracing): the consumer's and every\n"
     "                        worker's spans (read, decode, augment, write, waits, cache),\n"
     "                        written at exit; never changes a byte (docs/tracing.md;\n"
     "                        seedpipe trace-summary FILE.json)\n"},
};

static const struct { const char *name; unsigned blocks; const char *text; } topics[] = {
    {"make-shapes", 0,
     "  make-shapes OUT_DIR [--count N] [--size PX] [--seed S]\n"
     "      write the built-in shapes dataset (an ImageFolder): N images (1..10000000,\n"
     "      default 1000) of PX x PX pixels (16..4096, default 64), seed S (default 0)\n"},
    {"inspect", 0,
     "  inspect DATASET [--split NAME=FRACTION,... [--split-seed S]]\n"
     "      sample count, classes with counts, fingerprint, subset sizes; a mixture's\n"
     "      sources, weights and epoch length\n"
     "      DATASET, in every command: an ImageFolder, a list file, an IDX file,\n"
     "      WebDataset .tar shards, or a weighted mixture of those, NAME.mix\n"
     "      (WEIGHT<TAB>DATASET lines; README.md \"Mixtures\"); or a Megatron token\n"
     "      corpus, PREFIX.idx + PREFIX.bin (docs/tokens.md; inspect, index)\n"},
    {"index", 0,
     "  index DATASET [--rebuild] [--threads T] [--out FILE]\n"
     "      build or check the persistent index (the content hashes kept in\n"
     "      $SEEDPIPE_CACHE, else ~/.cache/seedpipe, never in the data, trusted while\n"
     "      each file's stat is unchanged): where it is, what was reused, what was\n"
     "      hashed; --rebuild ignores the one there; --threads T hashing\n"
     "      threads, 0..64 (0, default: the online CPUs, at most 8). For remote\n"
     "      shards (s3://... or http(s)://..., docs/remote.md) it reads every shard\n"
     "      once and uploads the dataset index object seedpipe.index beside them;\n"
     "      --out FILE writes that object to FILE instead (for any WebDataset)\n"},
    {"shard", 0,
     "  shard DATASET OUT_DIR [--max-count N] [--annotations FILE]\n"
     "      write an ImageFolder or list as WebDataset tar shards (canonical order,\n"
     "      N samples a shard, default 10000); they stream the same batches; and\n"
     "      the dataset index object OUT_DIR/seedpipe.index, which opens a copy of\n"
     "      the shards in an object store or on an HTTP server (docs/remote.md).\n"
     "      --annotations FILE (COCO instances) puts each sample's annotations in a\n"
     "      KEY.json member: --annotations @json reads them (docs/targets.md)\n"},
    {"split", 0,
     "  split DATASET --split NAME=FRACTION,... --subset NAME [--split-seed S]\n"
     "      print the paths of one subset of the split (relative to the dataset\n"
     "      root, one a line), to record it\n"},
    {"explain", B_LOADER | B_SPLIT,
     "  explain DATASET --pipeline P --seed S --epoch E --sample I\n"
     "      what each op draws for one sample: crop box, flips, jitter factors/order;\n"
     "      E in 0..4294967295, I a dataset index (for a mixture a slot of the epoch,\n"
     "      0..length-1: the source and sample it draws)\n"},
    {"digest", B_LOADER | B_BATCH | B_FORMAT | B_SPLIT | B_POOL | B_TRACE,
     "  digest DATASET --pipeline P --seed S --batch-size B --out FILE.jsonl\n"
     "         [--epoch-start S] [--epochs E] [--resume STATE]\n"
     "         [--save-state FILE [--stop-after N]] [--cache DIR]\n"
     "         [--batch-mix mixup:alpha=A|cutmix:alpha=A|choice:OP,OP[,p=P/P][,classes=K]]\n"
     "      write one digest line per batch (a manifest; --out - for stdout) of the\n"
     "      epochs S..S+E-1 (--epoch-start S, default 0; --epochs E, default 1;\n"
     "      S+E <= 4294967296, so any epoch can be named); --resume STATE continues\n"
     "      a stopped run (--stop-after N batches, then --save-state FILE); --cache\n"
     "      DIR reads and fills the epoch cache; every way gives the same lines.\n"
     "      Epoch 4294967295 is computed in-process, without --workers or --cache.\n"
     "      --batch-mix mixes each batch as the torch drop-in's MixUp/CutMix (keyed by\n"
     "      the batch; --dtype float32, K the dataset's classes by default) and\n"
     "      writes the digest of the mixed images and targets; choice: is the\n"
     "      drop-in's RandomChoice of the OPs (mixup:alpha=A or cutmix:alpha=A), op i\n"
     "      with probability P_i (default equal), e.g.\n"
     "      choice:mixup:alpha=0.8,cutmix:alpha=1.0,p=1/1\n"},
    {"verify", B_LOADER | B_BATCH | B_FORMAT | B_SPLIT,
     "  verify DATASET --pipeline P --seed S --epochs E --batch-size B\n"
     "         [--workers 1,2,3,4,8] [--world 1,2,4] [--rng-mode per-sample|per-worker]\n"
     "         [--ring R] [--on-error P] [--no-crash] [--no-resume] [--no-service]\n"
     "         [--no-cache | --cache DIR]\n"
     "      run the stream of epochs 0..E-1 in-process, at each worker count (--workers:\n"
     "      a list of 1..64), with a worker killed, with a stop/resume, and through a\n"
     "      service to 1 client and to 2 ranks; --world: for each world size K (a list\n"
     "      of 1..128, each dividing B), the K ranks' slices from in-process loaders\n"
     "      (rank r of K, --threads T) concatenated in rank order, and (K >= 2) from\n"
     "      two services, one per half of the ranks, must give the global stream;\n"
     "      table of stream digests, first divergence (--rank R --world K instead\n"
     "      verifies that one rank's stream); --ring R 0..1024, --on-error\n"
     "      fail|skip|substitute as in digest\n"},
    {"serve", B_LOADER | B_BATCH | B_FORMAT | B_SPLIT | B_POOL | B_TRACE,
     "  serve --name NAME DATASET --pipeline P --seed S --batch-size B --workers W\n"
     "        [--epoch-start S] [--epochs E] [--world K [--ranks A-B]] [--resume STATE]\n"
     "        [--cache DIR] [--batch-mix SPEC]\n"
     "      serve the stream of epochs S..S+E-1 (S+E <= 4294967295) over the\n"
     "      shared-memory region NAME (mode 0600) to clients (client.h,\n"
     "      examples/trainer.c), K ranks each reading its slice of every global\n"
     "      batch (no --rank: each client attaches as its own rank); --ranks A-B:\n"
     "      only ranks A..B of the K (one service per node, each with its own NAME),\n"
     "      computing only their samples; prints a 'ready' line; ends when every\n"
     "      rank served has consumed the stream, or on SIGTERM/SIGINT (region\n"
     "      unlinked, exit 0); with --annotations each sample's target fields ride\n"
     "      the ring after its image (docs/targets.md \"The service\"); --batch-mix\n"
     "      (digest's SPEC) mixes each batch in the service, its soft targets (B x K\n"
     "      float32) beside it in the ring\n"},
    {"trace-summary", 0,
     "  trace-summary FILE.json [--gaps N]\n"
     "      what a --trace file says: each process's busy time and share of the wall,\n"
     "      the average number of busy cores, the time to the first batch, and the N\n"
     "      longest idle gaps (0..1000, default 10) with the wait that covers each\n"},
    {"status", 0,
     "  status NAME\n"
     "      a service's progress, throughput, ring occupancy, workers, clients\n"},
    {"diff", 0,
     "  diff A.jsonl B.jsonl\n"
     "      compare two manifests; the first divergence; exit 0 only if equal\n"},
    {"cache build", B_LOADER | B_BATCH | B_FORMAT | B_SPLIT,
     "  cache build DATASET --cache DIR --pipeline P --seed S --batch-size B\n"
     "        [--epochs N | A-B | A,B-C,... [--epoch-start S]] [--workers W]\n"
     "        [--level L] [--max-size SIZE] [--on-error fail|skip|substitute]\n"
     "      fill the epoch cache: --epochs N the N epochs from --epoch-start S\n"
     "      (default 0), or the epochs listed (A-B inclusive), at most 65536 of\n"
     "      0..4294967294; --workers W (0..64) a pool per epoch; --level L the zstd\n"
     "      level, -131072..22 (the one number with a sign; default -5);\n"
     "      --max-size SIZE (10M, 2G, ...) evicts the least recently used\n"},
    {"cache ls", 0,
     "  cache ls DIR\n"
     "      the entries, most recently used first\n"},
    {"cache verify", 0,
     "  cache verify DIR [--recompute N [--dataset D]]\n"
     "      re-check every checksum; --recompute N batches and compare them byte for\n"
     "      byte (--dataset D: the dataset, if it moved)\n"},
    {"cache gc", 0,
     "  cache gc DIR --max-size SIZE\n"
     "      evict least recently used entries down to SIZE (10M, 2G, ...)\n"},
    {"train", B_LOADER | B_BATCH | B_FORMAT | B_SPLIT | B_POOL | B_TRACE,
     "  train DATASET --seed S --epochs E --batch-size B --out RUN.json\n"
     "         [--pipeline P] [--dtype uint8|float32] [--threads T] [--train-threads T]\n"
     "         [--device cpu|cuda] [--cuda-device N] [--mode strict|fast|default]\n"
     "         [--strict | --fast] [--lr X] [--momentum X] [--weight-decay X]\n"
     "         [--eval DATASET] [--eval-subset NAME] [--eval-pipeline P]\n"
     "         [--checkpoint-dir DIR --checkpoint-every N] [--resume CKPT] [--stop-after N]\n"
     "         [--workers W [--ring R] | --attach NAME] [--cache DIR] [--seeds 1,2,3]\n"
     "         [--compare-devices STEPS]\n"
     "      train the small CNN on loader batches (docs/training.md); writes a run record;\n"
     "      E in 1..1000000, --train-threads 1..64, --cuda-device 0..1023, --lr and\n"
     "      --weight-decay in [0, 1e6], --momentum in [0, 1] (decimal, e.g. 0.05 or\n"
     "      5e-2); --seeds: up to 64; under `mpirun -np K` (or srun) data-parallel with\n"
     "      the same weights for any K dividing B, each rank reading its slice\n"
     "      (--attach: its node's service; docs/distributed.md)\n"},
    {"dump", B_LOADER | B_BATCH | B_SPLIT,
     "  dump DATASET --pipeline P --seed S --epoch E --batch I --out grid.png\n"
     "      write batch I of epoch E (0..4294967295) as a contact sheet (uint8 NHWC\n"
     "      preview, before normalization)\n"},
    {"order", 0,
     "  order (DATASET | --n N | --shard-sizes C0,C1,...) --seed S --epoch E\n"
     "        [--order global|sequential|block:K]\n"
     "        [--split NAME=FRACTION,... --subset NAME [--split-seed S]]\n"
     "      print the epoch's sample indices in order (N in 1..2^40, E in\n"
     "      0..4294967295; global (or shuffle): the keyed permutation; sequential:\n"
     "      the canonical order; block:K: shards permuted, then samples within\n"
     "      blocks of K shards, for a DATASET of tar shards or shards of C0, C1, ...\n"
     "      samples (each 0..4294967295, at most 2^20 shards)); for a mixture\n"
     "      (NAME.mix) one \"SOURCE INDEX\" line a slot of the epoch, the source's\n"
     "      number and the sample's index there; for a token corpus (docs/tokens.md)\n"
     "      with --seq-len L [--packing concat|docs] [--eod ID] [--pad ID], the\n"
     "      window indices (explain says what each window holds)\n"},
    {"rng", 0,
     "  rng --key K0 K1 --counter C0 C1 C2 C3   one Philox4x32-10 block\n"
     "  rng --batch                            the same, 'k0 k1 c0 c1 c2 c3' lines on stdin\n"
     "      a word (K0.., C0.., k0..) is 1 to 8 hex digits, most significant first,\n"
     "      optionally after 0x or 0X (ffffffff, 0x0000002a); printed as 8 lowercase\n"
     "      hex digits (docs/determinism.md)\n"
     "  rng --seed S --stream shuffle|augment|init|worker|other|mix|block [--worker W]\n"
     "      print a derived key (S decimal, 0..18446744073709551615; W decimal,\n"
     "      0..4294967295)\n"},
    {"gcn-demo", 0,
     "  gcn-demo [--threads T] [--device cpu|cuda] [--runs 5] [--seed S] [--nodes N]\n"
     "           [--p P]\n"
     "      a GCN layer on an Erdos-Renyi graph (N nodes, 1..1000000, default 1000;\n"
     "      edge probability P in [0, 1], default 0.01), atomic vs deterministic\n"
     "      scatter-add: the output sums of each run and \"All equal\" (docs/graph.md)\n"},
    {"env", 0,
     "  env [--json FILE]\n"
     "      versions, build options, compiler, CUDA/cuDNN/cuBLAS, device, CPU\n"},
    {"version", 0,
     "  version\n"
     "      the library's version and its libraries'\n"},
};

#define NTOPICS (sizeof topics / sizeof topics[0])
#define NBLOCKS (sizeof blocks / sizeof blocks[0])

static const char numbers_note[] =
    "Numbers are decimal: digits 0-9 only, the whole word, no leading zero (010 was\n"
    "octal 8 before, so it is refused), sign, space, 0x, exponent or empty word, in\n"
    "the option's range (an error names the\n"
    "option and the value); rng's words are hex, as above; cache build --level\n"
    "may be negative. --lr/--momentum/--weight-decay/--p take decimals (0.5, 5e-1).\n"
    "Each option is given once. `seedpipe COMMAND --help` prints one command.\n";

/* 1 if text holds --key as a whole option name. */
static int mentions(const char *text, const char *key) {
    size_t n = strlen(key);
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        if (strncmp(p + 2, key, n) != 0) continue;
        /* p[2 + n] exists: the n bytes before it matched, none of them NUL */
        char before = p > text ? p[-1] : ' ', after = p[2 + n];
        if (!(before == '-' || (before >= 'a' && before <= 'z')) &&
            !(after == '-' || (after >= 'a' && after <= 'z') || (after >= '0' && after <= '9')))
            return 1;
    }
    return 0;
}

static void print_topic(FILE *f, size_t t, int with_blocks) {
    fputs(topics[t].text, f);
    for (size_t b = 0; with_blocks && b < NBLOCKS; b++)
        if (topics[t].blocks & blocks[b].flag) fprintf(f, "    %s:\n%s", blocks[b].title, blocks[b].text);
}

int cli_help_print(FILE *f, const char *topic, const char *sub) {
    if (!topic) {
        fputs("usage: seedpipe <command> ... (seedpipe <command> --help: its options)\n\n", f);
        for (size_t t = 0; t < NTOPICS; t++) {
            print_topic(f, t, 0);
            unsigned bl = topics[t].blocks;
            if (bl) {
                fputs("      and the", f);
                for (size_t b = 0, k = 0; b < NBLOCKS; b++)
                    if (bl & blocks[b].flag) fprintf(f, "%s %s", k++ ? "," : "", blocks[b].title);
                fputs(" below\n", f);
            }
        }
        for (size_t b = 0; b < NBLOCKS; b++) fprintf(f, "\n%s:\n%s", blocks[b].title, blocks[b].text);
        fprintf(f, "\n%s", numbers_note);
        return 0;
    }
    size_t tl = strlen(topic);
    int found = 0;
    for (size_t t = 0; t < NTOPICS; t++) {
        const char *name = topics[t].name;
        if (strncmp(name, topic, tl) != 0 || (name[tl] && name[tl] != ' ')) continue;
        if (sub && name[tl] && strcmp(name + tl + 1, sub) != 0) continue;
        if (!found++) fputs("usage: seedpipe\n", f);
        print_topic(f, t, 1);
    }
    if (found) fprintf(f, "\n%s", numbers_note);
    return found ? 0 : -1;
}

int cli_help_lists(const cli_args *a, const char *key) {
    char name[64];
    if (!strcmp(a->cmd, "cache") && a->npos)
        snprintf(name, sizeof name, "cache %s", a->pos[0]);
    else
        snprintf(name, sizeof name, "%s", a->cmd);
    for (size_t t = 0; t < NTOPICS; t++) {
        if (strcmp(topics[t].name, name) != 0) continue;
        if (mentions(topics[t].text, key)) return 1;
        for (size_t b = 0; b < NBLOCKS; b++)
            if ((topics[t].blocks & blocks[b].flag) && mentions(blocks[b].text, key)) return 1;
        return 0;
    }
    return 0;
}

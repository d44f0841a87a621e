/* cli_core.c - seedpipe rng, order, inspect and make-shapes.
 *
 * `rng` exposes the generator of docs/determinism.md so anyone can check a
 * word by hand or against tests/philox_ref.py; `order` prints an epoch's
 * data order; `inspect` summarises a dataset; `make-shapes` writes the
 * built-in dataset.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "seedpipe/dataset.h"
#include "seedpipe/philox.h"
#include "seedpipe/sampler.h"
#include "seedpipe/shapes.h"

/* A 32-bit word as `rng` documents it (cli_help.c, docs/determinism.md):
 * 1 to 8 hex digits (0-9, a-f, A-F), most significant first, optionally
 * after 0x or 0X; nothing else (no sign, space or empty word). */
static int parse_word(const char *s, uint32_t *out) {
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    if (!*s || strlen(s) > 8) return -1;
    uint32_t v = 0;
    for (; *s; s++) {
        int d;
        if (*s >= '0' && *s <= '9') d = *s - '0';
        else if (*s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
        else if (*s >= 'A' && *s <= 'F') d = *s - 'A' + 10;
        else return -1;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 0;
}

static const struct { const char *name; uint32_t tag; } streams[] = {
    {"shuffle", SP_RNG_SHUFFLE}, {"augment", SP_RNG_AUGMENT},
    {"init", SP_RNG_INIT},       {"worker", SP_RNG_WORKER},
    {"other", SP_RNG_OTHER},
    {"mix", SP_RNG_MIX},         {"block", SP_RNG_BLOCK},
};

static int rng_batch(void) {
    char line[512];
    unsigned long lineno = 0;
    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        uint32_t w[6];
        int n = 0;
        for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
            if (n == 6 || parse_word(tok, &w[n]) != 0) n = 7;
            else n++;
        }
        if (n == 0) continue;
        if (n != 6) {
            fprintf(stderr, "seedpipe rng: stdin line %lu: expected 6 words of 1 to 8 hex "
                            "digits, optionally after 0x (k0 k1 c0 c1 c2 c3)\n", lineno);
            return 1;
        }
        sp_key k = {{w[0], w[1]}};
        sp_ctr c = {{w[2], w[3], w[4], w[5]}};
        sp_ctr o = sp_philox4x32_10(c, k);
        printf("%08x %08x %08x %08x\n", o.c[0], o.c[1], o.c[2], o.c[3]);
    }
    return 0;
}

int cmd_rng(cli_args *a) {
    if (cli_has(a, "batch")) {
        cli_check_unused(a);
        return rng_batch();
    }
    const char *const *kw = cli_words(a, "key");
    const char *const *cw = cli_words(a, "counter");
    if (kw || cw) {
        if (!kw || !cw) cli_usage_error(a, "--key K0 K1 and --counter C0 C1 C2 C3 go together");
        cli_check_unused(a);
        uint32_t w[6];
        for (int i = 0; i < 6; i++) {
            const char *s = i < 2 ? kw[i] : cw[i - 2];
            if (parse_word(s, &w[i]) != 0)
                cli_usage_error(a, "--%s \"%s\": not a 32-bit word (1 to 8 hex digits, "
                                "optionally after 0x)", i < 2 ? "key" : "counter", s);
        }
        sp_key k = {{w[0], w[1]}};
        sp_ctr c = {{w[2], w[3], w[4], w[5]}};
        sp_ctr o = sp_philox4x32_10(c, k);
        printf("%08x %08x %08x %08x\n", o.c[0], o.c[1], o.c[2], o.c[3]);
        return 0;
    }
    const char *stream = cli_str(a, "stream", NULL);
    if (!cli_has(a, "seed") || !stream)
        cli_usage_error(a, "give --key/--counter, --batch, or --seed S --stream NAME");
    uint64_t seed = cli_uint(a, "seed", 0, 0, UINT64_MAX);
    uint32_t tag = 0;
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++)
        if (!strcmp(streams[i].name, stream)) tag = streams[i].tag;
    if (!tag)
        cli_usage_error(a, "--stream \"%s\": expected shuffle, augment, init, worker, other, "
                           "mix or block", stream);
    sp_key k = sp_rng_key(seed, tag);
    if (cli_has(a, "worker")) {
        if (tag != SP_RNG_WORKER) cli_usage_error(a, "--worker needs --stream worker");
        k = sp_key_derive(k, (uint32_t)cli_uint(a, "worker", 0, 0, UINT32_MAX));
    }
    cli_check_unused(a);
    printf("%08x %08x\n", k.k[0], k.k[1]);
    return 0;
}

/* The samples a shard of `order --order block:K`: --shard-sizes C0,C1,...
 * or the DATASET's shards (a subset's members of each with --split). */
static uint64_t *order_shard_sizes(cli_args *a, const char *list, const sp_dataset *ds,
                                   const uint64_t *map, uint64_t n, uint32_t *nshards) {
    sp_error err;
    sp_error_clear(&err);
    uint64_t *sizes = NULL;
    if (list) {
        uint32_t cnt = 1;
        for (const char *p = list; *p; p++) cnt += *p == ',';
        if (cnt > (1u << 20)) cli_usage_error(a, "--shard-sizes: more than 2^20 shards");
        sizes = calloc(cnt, sizeof *sizes);
        if (!sizes) cli_usage_error(a, "--shard-sizes: out of memory");
        const char *p = list;
        for (uint32_t s = 0; s < cnt; s++) {
            size_t len = strcspn(p, ",");
            sizes[s] = cli_num_span(a, "shard-sizes", list, p, len, 0, UINT32_MAX);
            p += len + (p[len] == ',');
        }
        *nshards = cnt;
        return sizes;
    }
    if (!ds) cli_usage_error(a, "--order block:K needs a DATASET of shards or --shard-sizes");
    *nshards = cli_ds_info(ds).shard_count;
    if (*nshards == 0 || cli_ds_info(ds).mix_sources)
        cli_usage_error(a, "--order block:K: %s is a dataset of kind %s, which has no shards "
                        "(give WebDataset .tar shards, or --shard-sizes)", a->pos[0],
                        cli_ds_info(ds).kind_name);
    sizes = calloc(*nshards, sizeof *sizes);
    if (!sizes) cli_usage_error(a, "out of memory");
    for (uint64_t j = 0; j < n; j++) sizes[sp_dataset_shard_of(ds, map ? map[j] : j)]++;
    return sizes;
}

/* The subset's dataset indices (`order --split --subset`); *n its size. */
static uint64_t *order_subset(cli_args *a, const sp_dataset *ds, const char *split_spec,
                              const char *subset, uint64_t split_seed, uint64_t *n) {
    sp_error err;
    sp_error_clear(&err);
    sp_split split;
    if (!ds) cli_usage_error(a, "--split needs a DATASET");
    if (!split_spec || !subset) cli_usage_error(a, "--split and --subset go together");
    if (sp_split_parse(split_spec, split_seed, &split, &err) != 0)
        cli_usage_error(a, "--split: %s", err.msg);
    int k = sp_split_find(&split, subset);
    if (k < 0) cli_usage_error(a, "--subset %s: not a subset of --split %s", subset, split_spec);
    uint64_t *map = malloc((*n ? *n : 1) * sizeof *map);
    if (!map) {
        sp_error_set(&err, SP_ENOMEM, "out of memory");
        cli_fail(a, &err);
    }
    uint64_t m = 0;
    for (uint64_t i = 0; i < *n; i++)
        if (sp_split_assign(&split, sp_dataset_path(ds, i)) == k) map[m++] = i;
    *n = m;
    if (m == 0) {
        sp_error_set(&err, SP_EINVAL, "subset %s is empty", subset);
        cli_fail(a, &err);
    }
    return map;
}

/* The windows of the token corpus a->pos[0] cut by `spec` (its epoch's N). */
static uint64_t token_windows(cli_args *a, const char *spec) {
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = a->pos[0];
    cfg.pipeline = spec;
    cfg.batch_size = 1;
    sp_error err;
    sp_error_clear(&err);
    sp_loader *ld;
    if (sp_loader_create(&cfg, &ld, &err) != 0) cli_fail(a, &err);
    uint64_t n = cli_loader_info(ld).size;
    sp_loader_destroy(ld);
    return n;
}

int cmd_order(cli_args *a) {
    uint64_t n = 0;
    sp_dataset *ds = NULL;
    sp_error err;
    sp_error_clear(&err);
    const char *split_spec = cli_str(a, "split", NULL), *subset = cli_str(a, "subset", NULL);
    uint64_t split_seed = cli_uint(a, "split-seed", 0, 0, UINT64_MAX);
    const char *list = cli_str(a, "shard-sizes", NULL);
    uint64_t *map = NULL;
    const char *tok = cli_token_spec(a);
    if (a->npos == 1 && !list) {
        if (sp_dataset_open(a->pos[0], NULL, &ds, &err) != 0) cli_fail(a, &err);
        if (!tok && cli_ds_info(ds).kind == SP_DATASET_TOKENS)
            cli_usage_error(a, "%s is a token corpus: --seq-len L says how it is cut into "
                            "windows (docs/tokens.md)", a->pos[0]);
        n = tok ? token_windows(a, tok) : cli_ds_info(ds).size;
    } else if (a->npos == 0 && cli_has(a, "n") && !list) {
        n = cli_uint(a, "n", 0, 1, 1ull << 40);
    } else if (!(a->npos == 0 && list && !cli_has(a, "n"))) {
        cli_usage_error(a, "give a DATASET, --n N or --shard-sizes C0,C1,...");
    }
    if (split_spec || subset) map = order_subset(a, ds, split_spec, subset, split_seed, &n);
    uint64_t seed = cli_uint(a, "seed", 0, 0, UINT64_MAX);
    uint64_t epoch = cli_uint(a, "epoch", 0, 0, UINT32_MAX);
    sp_order ord;
    uint32_t k;
    if (sp_order_spec_parse(cli_str(a, "order", "global"), &ord, &k, &err) != 0)
        cli_usage_error(a, "--order: %s", err.msg);
    cli_check_unused(a);
    if (ds && cli_ds_info(ds).mix_sources && ord != SP_ORDER_BLOCK) {   /* each slot's source */
        if (map) cli_usage_error(a, "a mixture cannot be split");
        n = cli_ds_info(ds).mix_length;
    }
    sp_block_perm *bp = NULL;
    if (ord == SP_ORDER_BLOCK) {
        uint32_t nshards;
        uint64_t *sizes = order_shard_sizes(a, list, ds, map, n, &nshards);
        int rc = sp_block_perm_create(sizes, nshards, k, sp_rng_key(seed, SP_RNG_BLOCK),
                                      (uint32_t)epoch, &bp, &err);
        free(sizes);
        if (rc != 0) cli_usage_error(a, "--order block:%u: %s", k, err.msg);
        n = sp_block_perm_size(bp);
    } else if (list) {
        cli_usage_error(a, "--shard-sizes goes with --order block:K");
    }
    sp_perm p;
    sp_perm_init(&p, n, sp_rng_key(seed, SP_RNG_SHUFFLE), (uint32_t)epoch);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = ord == SP_ORDER_SEQUENTIAL ? i : bp ? sp_block_perm_at(bp, i)
                                                         : sp_perm_at(&p, i);
        sp_mix_draw d;
        if (ds && !bp && sp_dataset_mix_draw(ds, seed, (uint32_t)epoch, j, &d) == 0)
            printf("%u %llu\n", d.source, (unsigned long long)d.local);
        else
            printf("%llu\n", (unsigned long long)(map ? map[j] : j));
    }
    sp_block_perm_destroy(bp);
    free(map);
    sp_dataset_close(ds);
    return 0;
}

/* The head of `inspect` and `index`: path, kind, samples, [classes,] fingerprint. */
static void print_dataset(const char *path, const sp_dataset *ds, int classes) {
    char fp[33];
    sp_dataset_info in = cli_ds_info(ds);
    sp_digest_hex(in.fingerprint, fp);
    printf("dataset:     %s\n", path);
    printf("kind:        %s\n", in.kind_name);
    printf("samples:     %llu\n", (unsigned long long)in.size);
    if (classes) {
        printf("classes:     %d\n", in.num_classes);
        for (int c = 0; c < in.num_classes; c++)
            printf("  %3d  %-20s %llu\n", c, sp_dataset_class_name(ds, c),
                   (unsigned long long)in.class_counts[c]);
    }
    printf("fingerprint: %s\n", fp);
    if (in.mix_sources) printf("length:      %llu slots an epoch\n",
                               (unsigned long long)in.mix_length);
    for (uint32_t s = 0; s < in.mix_sources; s++) {
        sp_mix_source src = cli_mix_source(ds, s);
        sp_dataset_info si = cli_ds_info(src.dataset);
        sp_digest_hex(si.fingerprint, fp);
        printf("source %u:    %s (%s, %llu samples, weight %llu/%llu, labels from %d) %s\n", s,
               si.root, si.kind_name, (unsigned long long)si.size,
               (unsigned long long)src.weight_num, (unsigned long long)src.weight_den,
               src.class_offset, fp);
    }
}

int cmd_inspect(cli_args *a) {
    if (a->npos != 1)
        cli_usage_error(a, "usage: seedpipe inspect DATASET [--split NAME=FRACTION,... "
                           "[--split-seed S]]");
    const char *split_spec = cli_str(a, "split", NULL);
    uint64_t split_seed = cli_uint(a, "split-seed", 0, 0, UINT64_MAX);
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_split split;
    if (split_spec && sp_split_parse(split_spec, split_seed, &split, &err) != 0)
        cli_usage_error(a, "--split: %s", err.msg);
    sp_dataset *ds;
    if (sp_dataset_open(a->pos[0], NULL, &ds, &err) != 0) cli_fail(a, &err);
    cli_index_warning(ds);
    print_dataset(a->pos[0], ds, 1);
    if (split_spec) {
        uint64_t counts[SP_SPLIT_MAX];
        sp_split_counts(&split, ds, counts);
        double n = (double)cli_ds_info(ds).size;
        printf("split:       %s (split seed %llu; by keyed hash of the path)\n", split_spec,
               (unsigned long long)split_seed);
        for (int k = 0; k < split.n; k++) {
            double f = split.frac[k], mean = n * f, tol = 3.0 * sqrt(n * f * (1.0 - f));
            printf("  %-12s %llu samples  (expected %.1f +- %.1f at 3 sigma)\n", split.name[k],
                   (unsigned long long)counts[k], mean, tol);
        }
    }
    sp_dataset_close(ds);
    return 0;
}

/* The persistent index's warning (an index found but not trusted, or none kept), once. */
void cli_index_warning(const sp_dataset *ds) {
    sp_dataset_info in = cli_ds_info(ds);
    const sp_dataset_index_info info = in.index;
    if (info.warning[0]) fprintf(stderr, "seedpipe: warning: dataset index %s\n", info.warning);
}

static int is_url(const char *s) {
    return strncmp(s, "s3://", 5) == 0 || strncmp(s, "http://", 7) == 0 ||
           strncmp(s, "https://", 8) == 0;
}

int cmd_index(cli_args *a) {
    if (a->npos != 1)
        cli_usage_error(a, "usage: seedpipe index DATASET [--rebuild] [--threads T] [--out FILE]");
    sp_dataset_limits lim = {0};
    int remote = is_url(a->pos[0]);
    /* a remote dataset: its shards are read once, the index object written */
    lim.index = cli_has(a, "rebuild") || remote ? SP_INDEX_REBUILD : SP_INDEX_AUTO;
    lim.hash_threads = (int)cli_uint(a, "threads", 0, 0, 64);
    const char *out = cli_str(a, "out", NULL);
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sp_dataset *ds;
    if (sp_dataset_open(a->pos[0], &lim, &ds, &err) != 0) cli_fail(a, &err);
    if ((remote || out) && sp_dataset_write_index(ds, out, &err) != 0) {
        sp_dataset_close(ds);
        cli_fail(a, &err);
    }
    if (remote || out)
        printf("object:      %s%s (the dataset index object)\n", out ? out : cli_ds_info(ds).root,
               out ? "" : " -> seedpipe.index beside it");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sp_dataset_info in = cli_ds_info(ds);
    const sp_dataset_index_info info = in.index;
    cli_index_warning(ds);
    print_dataset(a->pos[0], ds, 0);
    if (!info.used) {
        int k = in.kind;
        printf("index:       none (%s)\n",
               k == SP_DATASET_IDX   ? "an IDX file is read whole at open"
               : k == SP_DATASET_MIX ? "a mixture: each source keeps its own index"
               : k == SP_DATASET_TOKENS ? "a token corpus's .idx is checked at open"
               : k == SP_DATASET_FAKE   ? "generated images: nothing to index"
                                     : "SEEDPIPE_INDEX=off");
    } else {
        printf("index:       %s (%s)\n", info.path[0] ? info.path : "none kept",
               info.written    ? "written now"
               : !info.path[0] ? "no usable cache folder: see the warning"
               : info.hashed   ? "not rewritten: what changed in the last 2 s is hashed again "
                                 "at the next open"
                               : "up to date");
        printf("reused:      %llu samples (stat unchanged, file not read)\n",
               (unsigned long long)info.reused);
        printf("hashed:      %llu samples\n", (unsigned long long)info.hashed);
    }
    printf("time:        %.3f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    FILE *st = fopen("/proc/self/status", "r");   /* what the open index keeps resident */
    char line[256];
    while (st && fgets(line, sizeof line, st))
        if (strncmp(line, "VmRSS:", 6) == 0) printf("resident:    %s", line + 6 + strspn(line + 6, " \t"));
    if (st) fclose(st);
    sp_dataset_close(ds);
    return 0;
}

int cmd_shard(cli_args *a) {
    if (a->npos != 2)
        cli_usage_error(a, "usage: seedpipe shard DATASET OUT_DIR [--max-count N] "
                           "[--annotations FILE]");
    uint64_t max_count = cli_uint(a, "max-count", 10000, 1, UINT64_MAX);
    const char *ann = cli_str(a, "annotations", NULL);
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    sp_dataset *ds;
    if (sp_dataset_open(a->pos[0], NULL, &ds, &err) != 0) cli_fail(a, &err);
    cli_index_warning(ds);
    uint64_t n = 0;
    if (sp_dataset_write_shards_annotated(ds, ann, a->pos[1], max_count, &n, &err) != 0) {
        sp_dataset_close(ds);
        cli_fail(a, &err);
    }
    /* the dataset index object beside the shards, from the shards as written */
    sp_dataset *sh = NULL;
    if (sp_dataset_open(a->pos[1], NULL, &sh, &err) != 0 || sp_dataset_write_index(sh, NULL, &err) != 0) {
        sp_dataset_close(sh);
        sp_dataset_close(ds);
        cli_fail(a, &err);
    }
    sp_digest sfp = cli_ds_info(sh).fingerprint;
    sp_dataset_close(sh);
    sp_digest fp = cli_ds_info(ds).fingerprint;
    printf("wrote %llu samples of %s into %llu shards in %s (at most %llu each)\n",
           (unsigned long long)cli_ds_info(ds).size, a->pos[0], (unsigned long long)n,
           a->pos[1], (unsigned long long)max_count);
    printf("source fingerprint %016llx%016llx\n", (unsigned long long)fp.hi,
           (unsigned long long)fp.lo);
    printf("shards fingerprint %016llx%016llx (index object %s/seedpipe.index)\n",
           (unsigned long long)sfp.hi, (unsigned long long)sfp.lo, a->pos[1]);
    sp_dataset_close(ds);
    return 0;
}

int cmd_split(cli_args *a) {
    if (a->npos != 1)
        cli_usage_error(a, "usage: seedpipe split DATASET --split NAME=FRACTION,... "
                           "--subset NAME [--split-seed S]");
    const char *spec = cli_str(a, "split", NULL), *subset = cli_str(a, "subset", NULL);
    uint64_t seed = cli_uint(a, "split-seed", 0, 0, UINT64_MAX);
    cli_check_unused(a);
    if (!spec || !subset) cli_usage_error(a, "seedpipe split needs --split and --subset");
    sp_error err;
    sp_error_clear(&err);
    sp_split split;
    if (sp_split_parse(spec, seed, &split, &err) != 0) cli_usage_error(a, "--split: %s", err.msg);
    int k = sp_split_find(&split, subset);
    if (k < 0) cli_usage_error(a, "--subset %s is not in --split %s", subset, spec);
    sp_dataset *ds;
    if (sp_dataset_open(a->pos[0], NULL, &ds, &err) != 0) cli_fail(a, &err);
    cli_index_warning(ds);
    uint64_t n = cli_ds_info(ds).size, m = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *p = sp_dataset_path(ds, i);
        if (sp_split_assign(&split, p) == k) {
            puts(p);
            m++;
        }
    }
    char canon[512];
    sp_split_canonical(&split, canon, sizeof canon);
    fprintf(stderr, "seedpipe split: %llu of %llu samples in %s (split %s, split seed %llu)\n",
            (unsigned long long)m, (unsigned long long)n, subset, canon,
            (unsigned long long)seed);
    sp_dataset_close(ds);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "seedpipe split: writing the list failed\n");
        return 1;
    }
    return 0;
}

int cmd_make_shapes(cli_args *a) {
    if (a->npos != 1) cli_usage_error(a, "usage: seedpipe make-shapes OUT_DIR [--count N] "
                                         "[--size PX] [--seed S]");
    sp_shapes_opts o = {1000, 64, 0};
    o.count = (uint32_t)cli_uint(a, "count", o.count, 1, 10000000);
    o.size = (int)cli_uint(a, "size", (uint64_t)o.size, 16, 4096);
    o.seed = cli_uint(a, "seed", 0, 0, UINT64_MAX);
    cli_check_unused(a);
    sp_error err;
    sp_error_clear(&err);
    if (sp_shapes_make(a->pos[0], &o, &err) != 0) cli_fail(a, &err);
    printf("wrote %u images (%dx%d) to %s\n", o.count, o.size, o.size, a->pos[0]);
    return 0;
}

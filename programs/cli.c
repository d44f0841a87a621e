/* cli.c - the seedpipe command-line tool: dispatch and option parsing.
 *
 *   seedpipe <command> [positional args] [--option value | --flag] ...
 *
 * Commands and their options are listed in cli_help.c (`seedpipe help`,
 * `seedpipe COMMAND --help` or `-h`, before anything else is checked) and
 * documented in README.md. An option given twice is a usage error (the
 * first would be silently lost).
 */
#include "cli.h"
#include "seedpipe/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options by how many words follow them (cmd NULL: any command);
 * everything else takes one. */
static const struct { const char *cmd, *key; int arity; } arities[] = {
    {NULL, "drop-last", 0}, {NULL, "help", 0},   {"rng", "batch", 0}, {NULL, "replacement", 0},
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

/* help, --help, -h, version, --version: answered before anything else is
 * checked. @return the exit status, or -1 when argv names another command. */
static int early_command(int argc, char **argv) {
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            if (cli_help_print(stdout, argv[2], argc > 3 ? argv[3] : NULL) == 0) return 0;
            fprintf(stderr, "seedpipe help: no command \"%s\"\n", argv[2]);
            return 2;
        }
        cli_help_print(stdout, NULL, NULL);
        return 0;
    }
    if (!strcmp(cmd, "version") && argc > 2 &&
        (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")))
        return cli_help_print(stdout, "version", NULL) ? 2 : 0;
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        char v[512];
        sp_library_versions_json(v, sizeof v);
        printf("%s\n%s\n", sp_version_string(), v);
        return 0;
    }
    return -1;
}

/* The words after the command into a: --key with its cli_arity() values,
 * the rest positional. Exits (usage error) on a repeated option, a missing
 * value or too many of either. */
static void parse_words(cli_args *a, int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        const char *s = !strcmp(argv[i], "-h") ? "--help" : argv[i];   /* -h: help too */
        if (s[0] == '-' && s[1] == '-' && s[2]) {
            if (a->nopt == (int)(sizeof a->opt / sizeof a->opt[0]))
                cli_usage_error(a, "too many options");
            const char *key = s + 2;
            for (int j = 0; j < a->nopt; j++)
                if (!strcmp(a->opt[j].key, key)) cli_usage_error(a, "--%s given twice", key);
            int n = cli_arity(a->cmd, key);
            a->opt[a->nopt].key = key;
            if (n == 0) {
                a->opt[a->nopt].val = "1";
            } else {
                if (i + n >= argc)
                    cli_usage_error(a, "--%s needs %d value%s", key, n, n > 1 ? "s" : "");
                a->opt[a->nopt].words = (const char *const *)argv + i + 1;
                a->opt[a->nopt].val = argv[i + 1];
                i += n;
            }
            a->nopt++;
        } else {
            if (a->npos == (int)(sizeof a->pos / sizeof a->pos[0]))
                cli_usage_error(a, "too many arguments");
            a->pos[a->npos++] = s;
        }
    }
}

int main(int argc, char **argv) {
    cli_args a;
    memset(&a, 0, sizeof a);
    if (argc < 2) {
        cli_help_print(stderr, NULL, NULL);
        return 2;
    }
    a.cmd = argv[1];
    int early = early_command(argc, argv);
    if (early >= 0) return early;
    parse_words(&a, argc, argv);
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
        {"trace-summary", cmd_trace_summary},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmds[i].name, a.cmd) != 0) continue;
        for (int j = 0; j < a.nopt; j++)   /* COMMAND [SUB] --help: its options */
            if (!strcmp(a.opt[j].key, "help")) {
                const char *sub = !strcmp(a.cmd, "cache") && a.npos ? a.pos[0] : NULL;
                if (cli_help_print(stdout, a.cmd, sub) == 0) return 0;
                cli_usage_error(&a, "no subcommand \"%s\"", sub);
            }
        sp_error eerr;
        if (sp_env_check(&eerr) != SP_OK) {   /* every SEEDPIPE_* value, by name */
            fprintf(stderr, "seedpipe %s: %s\n", a.cmd, eerr.msg);
            return 2;
        }
        return cmds[i].fn(&a);
    }
    fprintf(stderr, "seedpipe: unknown command \"%s\" (seedpipe help)\n", a.cmd);
    return 2;
}

/* cli_env.c - `seedpipe env [--json FILE]`: the environment (env.h). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "seedpipe/env.h"
#include "seedpipe/train.h"   /* sp_env_cuda_query() */

int cmd_env(cli_args *a) {
    const char *json = cli_str(a, "json", NULL);
    cli_check_unused(a);
    if (a->npos) cli_usage_error(a, "takes no arguments");
    sp_env_cuda_info cuda;
    sp_env_cuda_query(&cuda);   /* the training library's CUDA, if any */
    char buf[16384];
    int len = sp_env_json(buf, sizeof buf, &cuda);
    if (len < 0 || (size_t)len >= sizeof buf) {
        sp_error err;
        sp_error_set(&err, SP_ELIMIT, "environment description longer than %zu bytes", sizeof buf);
        cli_fail(a, &err);
    }
    if (json) {
        sp_error err;
        buf[len] = '\n';   /* len < sizeof buf (checked): the NUL's place, not used again */
        if (cli_write_file_atomic(json, buf, (size_t)len + 1, 0, &err)) cli_fail(a, &err);
    }
    char text[16384];
    sp_env_text(text, sizeof text, &cuda);
    fputs(text, stdout);
    if (json) printf("written: %s\n", json);
    return 0;
}

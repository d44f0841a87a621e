/* loader_options.c - the loader's option names and their parsing
 * (include/seedpipe/loader.h): order, on-error and rng mode, by name both
 * ways, and sp_loader_config_default(). Pure functions of their arguments;
 * moved out of loader.c, whose batch work they take no part in.
 */
#include "seedpipe/loader.h"

#include <string.h>

static const char *const on_error_names[] = {"fail", "skip", "substitute"};
static const char *const rng_mode_names[] = {"per-sample", "per-worker"};
static const char *const order_names[] = {"shuffle", "sequential"};

int sp_order_parse(const char *s, sp_order *out, sp_error *err) {
    for (int i = 0; i < 2; i++)
        if (s && strcmp(s, order_names[i]) == 0) {
            *out = (sp_order)i;
            return SP_OK;
        }
    return sp_error_set(err, SP_EINVAL, "order \"%s\": expected shuffle or sequential",
                        s ? s : "");
}

const char *sp_order_name(sp_order o) { return (unsigned)o < 2 ? order_names[o] : "?"; }

int sp_on_error_parse(const char *s, sp_on_error *out, sp_error *err) {
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, on_error_names[i]) == 0) {
            *out = (sp_on_error)i;
            return SP_OK;
        }
    return sp_error_set(err, SP_EINVAL, "on-error \"%s\": expected fail, skip or substitute",
                        s ? s : "");
}

int sp_rng_mode_parse(const char *s, sp_rng_mode *out, sp_error *err) {
    for (int i = 0; i < 2; i++)
        if (s && strcmp(s, rng_mode_names[i]) == 0) {
            *out = (sp_rng_mode)i;
            return SP_OK;
        }
    return sp_error_set(err, SP_EINVAL, "rng-mode \"%s\": expected per-sample or per-worker",
                        s ? s : "");
}

const char *sp_on_error_name(sp_on_error p) {
    return (unsigned)p < 3 ? on_error_names[p] : "?";
}
const char *sp_rng_mode_name(sp_rng_mode m) { return (unsigned)m < 2 ? rng_mode_names[m] : "?"; }

void sp_loader_config_default(sp_loader_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->pipeline = "shapes-train";
    cfg->batch_size = 32;
    cfg->world = 1;
    cfg->dtype = SP_DTYPE_UINT8;
    cfg->layout = SP_LAYOUT_NCHW;
    cfg->threads = 1;
}

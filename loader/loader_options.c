/* loader_options.c - the loader's option names and their parsing
 * (include/seedpipe/loader.h): order (global, sequential, block:K), on-error
 * and rng mode, by name both ways, and sp_loader_config_default(). Pure functions of their arguments;
 * moved out of loader.c, whose batch work they take no part in.
 */
#include "seedpipe/loader.h"

#include <stdio.h>
#include <string.h>
#include "loader/loader_internal.h"

static const char *const on_error_names[] = {"fail", "skip", "substitute"};
static const char *const rng_mode_names[] = {"per-sample", "per-worker"};
static const char *const order_names[] = {"shuffle", "sequential", "block"};

/* "global" (the documented name of the default), "shuffle", "sequential". */
static int order_parse(const char *s, sp_order *out, sp_error *err) {
    if (s && strcmp(s, "global") == 0) s = "shuffle";
    for (int i = 0; i < 2; i++)
        if (s && strcmp(s, order_names[i]) == 0) {
            *out = (sp_order)i;
            return SP_OK;
        }
    return sp_error_set(err, SP_EINVAL, "order \"%s\": expected global (or shuffle), "
                        "sequential or block:K", s ? s : "");
}

int sp_order_spec_parse(const char *s, sp_order *order, uint32_t *block_shards, sp_error *err) {
    *block_shards = 0;
    if (!s || strncmp(s, "block:", 6) != 0) return order_parse(s, order, err);
    const char *d = s + 6;
    size_t len = strlen(d);
    uint64_t k = 0;
    int digits = len > 0 && strspn(d, "0123456789") == len;
    for (size_t i = 0; digits && i < len && k <= UINT32_MAX; i++) k = k * 10 + (uint64_t)(d[i] - '0');
    if (!digits)
        return sp_error_set(err, SP_EINVAL, "order \"%s\": K, the shards a block, must be a "
                            "decimal number in 1..4294967295 (digits 0-9 only)", s);
    if (len > 1 && d[0] == '0')
        return sp_error_set(err, SP_EINVAL, "order \"%s\": K has a leading zero (write the "
                            "number without it)", s);
    if (k == 0)
        return sp_error_set(err, SP_EINVAL, "order \"%s\": K, the shards a block, must be at "
                            "least 1", s);
    if (k > UINT32_MAX)
        return sp_error_set(err, SP_EINVAL, "order \"%s\": K is out of range 1..4294967295", s);
    *order = SP_ORDER_BLOCK;
    *block_shards = (uint32_t)k;
    return SP_OK;
}

int sp_order_spec_format(sp_order order, uint32_t block_shards, char *buf, size_t n) {
    if (order == SP_ORDER_BLOCK) return snprintf(buf, n, "block:%u", block_shards);
    return snprintf(buf, n, "%s", (unsigned)order < 3 ? order_names[order] : "?");
}

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
const char *sp__rng_mode_name(sp_rng_mode m) { return (unsigned)m < 2 ? rng_mode_names[m] : "?"; }

void sp_loader_config_default(sp_loader_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->pipeline = "shapes-train";
    cfg->batch_size = 32;
    cfg->world = 1;
    cfg->dtype = SP_DTYPE_UINT8;
    cfg->layout = SP_LAYOUT_NCHW;
    cfg->threads = 1;
}

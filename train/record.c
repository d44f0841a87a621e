/* record.c - the run record of a training run (one JSON object).
 *
 * What a user needs to reproduce and check a run (DESIGN.md section 7):
 * seed, full config, dataset and loader fingerprints, library versions,
 * the device description, per-epoch loss/accuracy, every step's loss
 * (exact: "%.9g" round-trips a float) with their XXH3-128 digest, and the
 * final weights digest. Written to a temporary file and renamed, so a
 * reader never sees half a record.
 */
#include "seedpipe/train.h"
#include "seedpipe/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/json_write_internal.h"
#include "train/cuda_plugin.h"

/* From the CUDA plugin (env_cuda.cu) when it can be loaded; else only
 * whether CUDA was built and why it is not there. */
void sp_env_cuda_query(sp_env_cuda_info *out) {
    sp_error err;
    const sp__cuda_plugin *cuda = sp__cuda_plugin_load(&err);
    if (cuda) {
        cuda->env_query(out);
        return;
    }
    memset(out, 0, sizeof *out);
#ifdef SEEDPIPE_HAVE_CUDA
    out->compiled = 1;
    snprintf(out->error, sizeof out->error, "%s", err.msg);
#endif
}

/* {"epoch":E,"loss":...,"accuracy":...[,"eval_accuracy":...,"eval_loss":...]} */
static void json_epoch(sp__jw *w, uint32_t e, const sp_run_epoch *ep) {
    sp__jw_obj(w);
    sp__jw_ku64(w, "epoch", e);
    sp__jw_key(w, "loss");
    sp__jw_fmt(w, "%.9g", ep->loss);
    sp__jw_key(w, "accuracy");
    sp__jw_fmt(w, "%.6f", ep->accuracy);
    if (ep->eval_accuracy >= 0) {
        sp__jw_key(w, "eval_accuracy");
        sp__jw_fmt(w, "%.6f", ep->eval_accuracy);
        sp__jw_key(w, "eval_loss");
        sp__jw_fmt(w, "%.9g", ep->eval_loss);
    }
    sp__jw_end(w, '}');
}

int sp_run_record_write(const char *path, const sp_run_record *r, sp_error *err) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    char versions[1024], dfp[33], lfp[33], wd[33], sd[33];
    sp_library_versions_json(versions, sizeof versions);
    sp_digest_hex(r->dataset_fingerprint, dfp);
    sp_digest_hex(r->loader_fingerprint, lfp);
    sp_digest_hex(r->final_weights, wd);
    XXH128_hash_t h = XXH3_128bits(r->step_loss, (size_t)r->nsteps * sizeof(float));
    sp_digest sdg = {h.high64, h.low64};
    sp_digest_hex(sdg, sd);
    char env[8192];
    sp_env_cuda_info cuda;
    sp_env_cuda_query(&cuda);
    if (sp_env_json(env, sizeof env, &cuda) >= (int)sizeof env) snprintf(env, sizeof env, "{}");
    sp__jw w = sp__jw_file(f);
    sp__jw_obj(&w);
    sp__jw_ku64(&w, "seed", r->seed);
    sp__jw_key(&w, "config");
    sp__jw_json(&w, r->config_json ? r->config_json : "{}");
    sp__jw_kstr(&w, "dataset_fingerprint", dfp);
    sp__jw_kstr(&w, "loader_fingerprint", lfp);
    sp__jw_key(&w, "versions");
    sp__jw_json(&w, versions);
    sp__jw_key(&w, "device");
    sp__jw_json(&w, r->device_json ? r->device_json : "{}");
    sp__jw_key(&w, "environment");
    sp__jw_json(&w, env);
    sp__jw_key(&w, "epochs");
    sp__jw_arr(&w);
    for (uint32_t e = 0; e < r->nepochs; e++) json_epoch(&w, e, &r->epochs[e]);
    sp__jw_end(&w, ']');
    sp__jw_ku64(&w, "step_loss_first", r->step_loss_first);
    sp__jw_key(&w, "step_loss");
    sp__jw_arr(&w);
    for (uint64_t s = 0; s < r->nsteps; s++) sp__jw_fmt(&w, "%.9g", (double)r->step_loss[s]);
    sp__jw_end(&w, ']');
    sp__jw_kstr(&w, "step_loss_digest", sd);
    sp__jw_kstr(&w, "final_weights_digest", wd);
    sp__jw_key(&w, "seconds");
    sp__jw_fmt(&w, "%.3f", r->seconds);
    sp__jw_end(&w, '}');
    sp__jw_raw(&w, "\n");
    if (fclose(f) != 0 || !text) {
        free(text);
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", path);
    }
    sp_error e;   /* atomic publish (common.h): unpredictable O_EXCL temporary, fsync, rename */
    int rc = sp_write_file_atomic(path, text, len, 1, &e);
    free(text);
    if (rc) return sp_error_set(err, SP_EIO, "cannot write run record: %s", e.msg);
    return 0;
}

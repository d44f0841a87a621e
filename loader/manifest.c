/* manifest.c - writing digest manifests (include/seedpipe/manifest.h). */
#include "seedpipe/manifest.h"

#include <errno.h>
#include <string.h>

void sp_json_write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static int check_io(FILE *f, sp_error *err) {
    if (ferror(f))
        return sp_error_set(err, SP_EIO, "manifest: write failed: %s", strerror(errno));
    return SP_OK;
}

int sp_manifest_write_header(FILE *f, const sp_loader *ld, uint32_t epochs, sp_error *err) {
    const sp_loader_config *cfg = sp_loader_config_of(ld);
    const sp_dataset *ds = sp_loader_dataset(ld);
    char fp[33], dfp[33], versions[512];
    sp_digest_hex(sp_loader_fingerprint(ld), fp);
    sp_digest_hex(sp_dataset_fingerprint(ds), dfp);
    sp_library_versions_json(versions, sizeof versions);
    int c, h, w;
    sp_loader_sample_dims(ld, &c, &h, &w);
    fprintf(f, "{\"seedpipe_manifest\":1,\"fingerprint\":\"%s\",\"dataset_fingerprint\":\"%s\","
               "\"dataset\":",
            fp, dfp);
    sp_json_write_string(f, cfg->dataset);
    fprintf(f, ",\"samples\":%llu,\"pipeline\":", (unsigned long long)sp_dataset_size(ds));
    sp_json_write_string(f, sp_pipeline_canonical(sp_loader_pipeline(ld)));
    fprintf(f,
            ",\"seed\":%llu,\"batch_size\":%u,\"drop_last\":%s,\"rank\":%u,\"world\":%u,"
            "\"dtype\":\"%s\",\"layout\":\"%s\",\"sample_shape\":[%d,%d,%d],\"epochs\":%u,"
            "\"versions\":%s}\n",
            (unsigned long long)cfg->seed, cfg->batch_size, cfg->drop_last ? "true" : "false",
            cfg->rank, cfg->world, sp_dtype_name(cfg->dtype), sp_layout_name(cfg->layout), c,
            h, w, epochs, versions);
    return check_io(f, err);
}

int sp_manifest_write_batch(FILE *f, const sp_batch *b, sp_digest digest, sp_error *err) {
    char hex[33];
    sp_digest_hex(digest, hex);
    fprintf(f, "{\"epoch\":%u,\"batch\":%llu,\"count\":%u,\"indices\":[", b->epoch,
            (unsigned long long)b->index, b->count);
    for (uint32_t i = 0; i < b->count; i++)
        fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)b->indices[i]);
    fputs("],\"labels\":[", f);
    for (uint32_t i = 0; i < b->count; i++) fprintf(f, "%s%d", i ? "," : "", b->labels[i]);
    fprintf(f, "],\"digest\":\"%s\"}\n", hex);
    return check_io(f, err);
}

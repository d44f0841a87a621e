/* fuzz_dsobject - the dataset index object decoder (dataset/dataset_object.c),
 * what a remote dataset's open believes. The input's last 8 bytes are
 * replaced by the XXH3-64 of the rest (a hostile server can checksum what
 * it sends, so the parser behind the checksum is what is fuzzed), and the
 * whole is decoded as the
 * seedpipe.index of an object store's folder, every shard it lists taken;
 * a decoded table must pack into a dataset whose invariants hold (samples,
 * class counts adding up, paths "shard/member" of a listed shard, members
 * inside their shard, every path safe to build a URL or a path from and to
 * print: no control byte, no leading '/', no empty, "." or ".." segment),
 * KEY.json members of readable samples inside their shard and within
 * max_file_bytes, and encoding that dataset again must decode to the same
 * fingerprint-relevant table and the same members. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/le_internal.h"
#include "dataset/dataset_internal.h"
#include "dataset/dataset_tar.h"
#include "fuzz_util.h"

extern const sp__ds_driver sp__ds_driver_tar;   /* dataset/dataset_tar_open.c */

static sp_dataset *blank(void) {
    sp_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) abort();
    ds->driver = &sp__ds_driver_tar;   /* local shards */
    ds->root = strdup("fuzz");
    ds->base = strdup("fuzz");
    ds->max_samples = 256;
    ds->max_file_bytes = 1u << 16;
    sp_error err;
    if (sp__ds_tar_new(ds, &err) != 0) abort();
    ds->ops = &sp__ds_tar_ops;   /* local shards' reads: none is made here */
    return ds;
}

static sp_dataset *decode(const uint8_t *data, size_t size) {
    sp_dataset *ds = blank();
    sp__ds_tar_set t = {0};
    char **all = NULL;
    size_t nall = 0;
    uint64_t *sizes = NULL;
    sp_error err;
    int rc = sp__ds_object_decode(ds, "fuzz", data, size, NULL, 0, &all, &nall, &sizes, &t, &err);
    if (rc == 0) rc = sp__ds_tar_pack(ds, all, nall, sizes, &t, &err);   /* takes all, sizes */
    else {
        for (size_t i = 0; all && i < nall; i++) free(all[i]);
        free(all);
        free(sizes);
    }
    sp__ds_tar_set_free(&t);
    if (rc != 0) {
        if (err.msg[0] == '\0') abort();
        sp_dataset_close(ds);
        return NULL;
    }
    return ds;
}

/* What name_fault() in dataset_object.c lets through, checked on the result. */
static void check_safe(const char *p) {
    if (p[0] == '/' || p[0] == '\0') abort();
    for (const char *q = p; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) abort();
    for (const char *a = p;;) {
        size_t l = strcspn(a, "/");
        if (l == 0 || (l == 1 && a[0] == '.') || (l == 2 && a[0] == '.' && a[1] == '.')) abort();
        if (!a[l]) break;
        a += l + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size) {
    if (size > (1u << 18) || size < 8) return 0;
    uint8_t *data = malloc(size);
    if (!data) return 0;
    memcpy(data, input, size);
    sp__le_put64(data + size - 8, XXH3_64bits(data, size - 8));
    sp_dataset *ds = decode(data, size);
    free(data);
    if (!ds) return 0;
    fz_check_dataset(ds, ds->max_samples, 0);
    const struct sp__ds_tar *t = sp__ds_tar(ds);
    for (uint64_t i = 0; i < ds->n; i++) {
        const char *shard = t->shards[t->shard_of[i]], *p = ds->pool + ds->path_off[i];
        if (strncmp(p, shard, strlen(shard)) != 0 || p[strlen(shard)] != '/') abort();
        if (strchr(shard, '/')) abort();
        check_safe(p);
        if (!sp__ds_tar_bad(ds, i) &&
            t->offsets[i] + ds->sizes[i] > t->shard_sizes[t->shard_of[i]])
            abort();
        if (!sp__ds_tar_bad(ds, i) && t->json_size &&   /* a KEY.json a read may fetch */
            t->json_size[i] != UINT64_MAX &&
            (t->json_size[i] > ds->max_file_bytes ||
             t->json_off[i] + t->json_size[i] >
                 t->shard_sizes[t->shard_of[i]]))
            abort();
    }
    sp__sbuf b = {0};
    sp_error err;
    if (sp__ds_object_encode(ds, &b, &err) != 0) abort();
    sp_dataset *again = decode((const uint8_t *)b.p, b.len);
    if (!again || again->n != ds->n) abort();
    const struct sp__ds_tar *ta = sp__ds_tar(again);
    for (uint64_t i = 0; i < ds->n; i++)
        if (strcmp(again->pool + again->path_off[i], ds->pool + ds->path_off[i]) != 0 ||
            again->labels[i] != ds->labels[i] || again->sizes[i] != ds->sizes[i] ||
            again->hashes[i].hi != ds->hashes[i].hi || again->hashes[i].lo != ds->hashes[i].lo)
            abort();
    if (!t->json_size != !ta->json_size) abort();
    for (uint64_t i = 0; t->json_size && i < ds->n; i++)
        if (ta->json_size[i] != t->json_size[i] ||
            (t->json_size[i] != UINT64_MAX &&
             (ta->json_off[i] != t->json_off[i] ||
              ta->json_hash[i].hi != t->json_hash[i].hi ||
              ta->json_hash[i].lo != t->json_hash[i].lo)))
            abort();
    free(b.p);
    sp_dataset_close(again);
    sp_dataset_close(ds);
    return 0;
}

/* dataset_fake.c - generated images: torchvision's FakeData, computed in C.
 *
 * A dataset path "fakedata:" followed by comma-separated settings, each
 * optional, torchvision's FakeData defaults otherwise:
 *
 *     fakedata:size=N,image=CxHxW,classes=K,offset=O
 *     (N 1000, image 3x224x224, K 10, O 0; C 1 grey or 3 RGB)
 *
 * pytorch/examples' `--dummy` is fakedata:size=1281167,image=3x224x224,classes=1000.
 * Sample i is index j = i + O (FakeData's random_offset) and a pure function
 * of (j, C, H, W, K) under the stream key K_fake = sp_rng_key(0, 14) (tag 14,
 * docs/determinism.md section 2; independent of the loader's seed, as
 * FakeData's images are): byte b of the image (H x W x C order, row-major,
 * channels interleaved) is byte b % 4 (little-endian) of word (b / 4) % 4 of
 * philox((b / 16, j lo, j hi, 0), K_fake); the label is
 * sp_uniform_int(philox((0, j lo, j hi, 1), K_fake)[0], K). Not torch's
 * values (FakeData draws with torch's generator): the same shapes, labels
 * in range, every byte reproducible. Nothing is stored but the labels: a
 * read generates the pixels into out->owned; the content hash of a sample
 * is XXH3-128 of ("seedpipe.fakedata.v1", C, H, W, K, j), the fingerprint
 * that of the settings and N.
 *
 * Its driver (sp__ds_driver_fake, at the end) claims a path starting with
 * "fakedata:"; the opener parses it and fills the labels. Calls common/ only.
 */
#include "dataset/dataset_internal.h"
#include "common/hash_internal.h"
#include "seedpipe/philox.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fake_prefix[] = "fakedata:";

struct sp__ds_fake {
    uint32_t c, h, w, classes;
    uint64_t offset;
    sp_key key;
};

static struct sp__ds_fake *fake_of(const sp_dataset *ds) { return ds->state; }

static int fake_probe(const sp__ds_req *rq, sp_error *err) {
    (void)err;
    return strncmp(rq->path, fake_prefix, sizeof fake_prefix - 1) == 0;
}

static void fake_pixels(const struct sp__ds_fake *f, uint64_t j, uint8_t *px, size_t len) {
    for (size_t blk = 0; blk * 16 < len; blk++) {
        sp_ctr c = {{(uint32_t)blk, (uint32_t)j, (uint32_t)(j >> 32), 0}};
        sp_ctr r = sp_philox4x32_10(c, f->key);
        for (size_t b = blk * 16; b < len && b < blk * 16 + 16; b++)
            px[b] = (uint8_t)(r.c[(b / 4) % 4] >> (8 * (b % 4)));
    }
}

static int fake_read(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    const struct sp__ds_fake *f = fake_of(ds);
    size_t len = (size_t)f->c * f->h * f->w;
    out->owned = malloc(len);
    size_t pl = strlen(ds->root) + 24;
    out->full_path = malloc(pl);
    if (!out->owned || !out->full_path)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    snprintf(out->full_path, pl, "%s#%" PRIu64, ds->root, i);
    fake_pixels(f, i + f->offset, out->owned, len);
    out->raw_view.width = (int)f->w;
    out->raw_view.height = (int)f->h;
    out->raw_view.channels = (int)f->c;
    out->raw_view.stride = (size_t)f->w * f->c;
    out->raw_view.data = out->owned;
    out->src.path = out->full_path;
    out->src.raw = &out->raw_view;
    return SP_OK;
}

static const char *fake_path(const sp_dataset *ds, uint64_t i) {
    (void)i;
    return ds->root;
}

static sp_digest fake_hash(const sp_dataset *ds, uint64_t i) {
    const struct sp__ds_fake *f = fake_of(ds);
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_str(&h, "seedpipe.fakedata.v1");
    sp__hash_u64(&h, f->c);
    sp__hash_u64(&h, f->h);
    sp__hash_u64(&h, f->w);
    sp__hash_u64(&h, f->classes);
    sp__hash_u64(&h, i + f->offset);
    return sp__hash_digest(&h);
}

static int fake_fingerprint(const sp_dataset *ds, sp_digest *out, sp_error *err) {
    (void)err;
    const struct sp__ds_fake *f = fake_of(ds);
    sp__hash h;
    sp__hash_init(&h);
    sp__hash_str(&h, "seedpipe.fakedata.v1");
    sp__hash_u64(&h, (uint64_t)SP_DATASET_FAKE);
    sp__hash_u64(&h, ds->n);
    sp__hash_u64(&h, f->c);
    sp__hash_u64(&h, f->h);
    sp__hash_u64(&h, f->w);
    sp__hash_u64(&h, f->classes);
    sp__hash_u64(&h, f->offset);
    *out = sp__hash_digest(&h);
    return SP_OK;
}

static void fake_destroy(sp_dataset *ds) {
    free(ds->state);
    ds->state = NULL;
}

static void fake_raw_dims(const sp_dataset *ds, int *w, int *h) {
    *w = (int)fake_of(ds)->w;
    *h = (int)fake_of(ds)->h;
}

static const sp__ds_ops fake_ops = {
    .path = fake_path,
    .content_hash = fake_hash,
    .read = fake_read,
    .destroy = fake_destroy,
    .fingerprint = fake_fingerprint,
    .raw_dims = fake_raw_dims,
};

/* One decimal number in [lo, hi] from s (up to a ',', 'x' or the end). */
static int number(const char **s, uint64_t lo, uint64_t hi, uint64_t *out) {
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < lo || v > hi) return -1;
    *s = p;
    *out = v;
    return 0;
}

/* The settings after "fakedata:" into f and *n. */
static int parse(const sp_dataset *ds, struct sp__ds_fake *f, uint64_t *n, sp_error *err) {
    const char *s = ds->root + sizeof fake_prefix - 1;
    uint64_t v[3];
    while (*s) {
        int rc = -1;
        if (strncmp(s, "size=", 5) == 0) {
            s += 5;
            rc = number(&s, 1, ds->max_samples, n);
        } else if (strncmp(s, "classes=", 8) == 0) {
            s += 8;
            rc = number(&s, 1, SP_DS_MAX_CLASSES, &v[0]);
            if (!rc) f->classes = (uint32_t)v[0];
        } else if (strncmp(s, "offset=", 7) == 0) {
            s += 7;
            rc = number(&s, 0, UINT64_C(1) << 62, &f->offset);
        } else if (strncmp(s, "image=", 6) == 0) {
            s += 6;
            rc = number(&s, 1, 3, &v[0]);
            if (!rc && (v[0] == 2 || *s++ != 'x')) rc = -1;
            if (!rc) rc = number(&s, 1, 65535, &v[1]);
            if (!rc && *s++ != 'x') rc = -1;
            if (!rc) rc = number(&s, 1, 65535, &v[2]);
            if (!rc) { f->c = (uint32_t)v[0]; f->h = (uint32_t)v[1]; f->w = (uint32_t)v[2]; }
        }
        if (!rc && *s == ',' && !s[1]) rc = -1;   /* "...," : an empty setting */
        if (rc || (*s && *s != ','))
            return sp_error_set(err, SP_EINVAL,
                                "%s: not a FakeData spec (fakedata:size=N,image=CxHxW,classes=K,"
                                "offset=O, each optional: N 1..%" PRIu64 ", C 1 or 3, H and W "
                                "1..65535, K 1..%d, O <= 2^62)",
                                ds->root, ds->max_samples, SP_DS_MAX_CLASSES);
        if (*s) s++;
    }
    if ((uint64_t)f->c * f->h * f->w > ds->max_file_bytes)
        return sp_error_set(err, SP_ELIMIT, "%s: images of %u x %u x %u bytes, over the limit "
                            "of %" PRIu64 " bytes per sample", ds->root, f->c, f->h, f->w,
                            ds->max_file_bytes);
    return SP_OK;
}

static int fake_open(sp_dataset *ds, const sp__ds_req *rq, sp_error *err) {
    (void)rq;
    struct sp__ds_fake *f = ds->state = calloc(1, sizeof *f);
    if (!f) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    *f = (struct sp__ds_fake){.c = 3, .h = 224, .w = 224, .classes = 10, .offset = 0};
    uint64_t n = 1000;
    int rc = parse(ds, f, &n, err);
    if (rc) return rc;
    f->key = sp_rng_key(0, SP_RNG_FAKE);
    rc = sp__ds_numeric_classes(ds, (int)f->classes, err);
    if (rc) return rc;
    ds->class_counts = calloc(f->classes, sizeof *ds->class_counts);
    ds->labels = malloc((size_t)n * sizeof *ds->labels);
    if (!ds->class_counts || !ds->labels)
        return sp_error_set(err, SP_ENOMEM, "%s: out of memory", ds->root);
    ds->n = n;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j = i + f->offset;
        sp_ctr c = {{0, (uint32_t)j, (uint32_t)(j >> 32), 1}};
        uint32_t lab = sp_uniform_int(sp_philox4x32_10(c, f->key).c[0], f->classes);
        ds->labels[i] = (int32_t)lab;
        ds->class_counts[lab]++;
    }
    return SP_OK;
}

const sp__ds_driver sp__ds_driver_fake = {
    .name = "fakedata", .code = SP_DATASET_FAKE, .probe = fake_probe, .open = fake_open,
    .ops = &fake_ops,
};

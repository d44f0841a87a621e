/* fuzz_coco - the COCO-style annotation reader (dataset/dataset_coco.c;
 * segmentations: dataset/dataset_coco_mask.c, rasterised and moved)
 * and the target arithmetic (augment/targets.c). The input is written as
 * ann.json into a private temporary directory beside a list file naming
 * a.png, b.png and sub/c.jpg, and opened against that dataset with small
 * limits; an opened file's samples are read back (counts, finite values)
 * and moved through a crop, a flip and a rotation under keeping rules.
 * The same input is also read as per-sample members (the WebDataset
 * KEY.json form, sp__coco_open_fetch()): its first half as sample 0's,
 * the whole as sample 1's, none for sample 2. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "seedpipe/dataset.h"
#include "seedpipe/targets.h"
#include "dataset/dataset_coco.h"
#include "loader/masks_internal.h"
#include "seedpipe/masks.h"
#include "fuzz_util.h"
#include "augment/masks_internal.h"
#include "augment/targets_internal.h"

static sp_dataset *g_ds;

static void init_dataset(void) {
    if (g_ds) return;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", fz_tmpdir());
    mkdir(sub, 0700);
    free(fz_write("a.png", (const uint8_t *)"a", 1));
    free(fz_write("b.png", (const uint8_t *)"b", 1));
    free(fz_write("sub/c.jpg", (const uint8_t *)"c", 1));
    const char *list = "a.png\t0\nb.png\t1\nsub/c.jpg\t0\n";
    char *lp = fz_write("list.txt", (const uint8_t *)list, strlen(list));
    sp_dataset_limits lim = {.max_samples = 16, .max_file_bytes = 64, .index = SP_INDEX_OFF};
    sp_error err;
    if (sp_dataset_open(lp, &lim, &g_ds, &err) != 0) abort();
    free(lp);
}

static void check(const sp_coco *c) {
    static uint8_t out[1 << 20];
    sp_geom_log log;
    memset(&log, 0, sizeof log);
    log.src_w = 100;
    log.src_h = 60;
    log.n = 3;
    log.step[0] = (sp_geom_step){SP_GEOM_AXIS, 0, 100, 60, 50, 50, 10, 5, 50.0 / 70, 1, 0, 0,
                                 {0}};
    log.step[1] = (sp_geom_step){SP_GEOM_HFLIP, 1, 50, 50, 50, 50, 0, 0, 1, 1, 0, 0, {0}};
    log.step[2] = (sp_geom_step){SP_GEOM_ROTATE, 2, 50, 50, 50, 50, 0, 0, 1, 1, 0.8f, 0.6f, {0}};
    for (uint64_t i = 0; i < 3; i++) {
        sp_targets t;
        sp__coco_get(c, i, &t);
        if (t.n > 4096 / 11) abort();   /* an annotation takes at least 11 tokens */
        for (uint32_t b = 0; b < 4 * t.n; b++)
            if (!isfinite(t.boxes[b])) abort();
        sp_targets_rules r = {64, (int)(i & 1), (int)t.k, 1.0, 0.25, 0, 0, 0, 0, 0, 0, {0}};
        if (t.n > 64 || t.k > 16) continue;
        sp_targets_stats st;
        sp_error err;
        if (sp__targets_record_bytes(&r) > sizeof out) abort();
        if (sp__targets_apply(&r, &log, &t, out, &st, NULL, 0, "fuzz", &err) != 0) abort();
        if (st.kept + st.dropped_empty + st.dropped_area + st.dropped_visibility != t.n) abort();
        for (uint32_t b = 0; b < t.n; b++) {   /* masks: rasterised at 100x60, then moved */
            static uint8_t m[60 * 100], mo[50 * 50];
            const double *seg = sp__coco_segmentation(c, i, b);
            if (!seg || sp__ldm_rasterise(seg, 60, 100, m, "fuzz", &err) != 0) continue;
            if (sp__mask_warp(&log, m, 0, mo, &err) != 0) abort();
            for (size_t q = 0; q < sizeof mo; q++)
                if (mo[q] > 1) abort();
        }
    }
}

static const uint8_t *g_data;
static size_t g_size;

static int fetch(void *arg, const sp_dataset *ds, uint64_t i, uint64_t max, uint8_t **bytes,
                 size_t *len, sp_error *err) {
    (void)arg, (void)ds, (void)err, (void)max;   /* read_member() bounds what it gets */
    *bytes = NULL;
    *len = i == 0 ? g_size / 2 : i == 1 ? g_size : 0;
    if (i > 1) return 0;
    *bytes = malloc(*len + 1);
    if (!*bytes) abort();
    memcpy(*bytes, g_data, *len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    init_dataset();
    char *p = fz_write("ann.json", data, size);
    sp_coco_limits lim = {1u << 16, 4096, 1u << 16, 1, 0};
    sp_coco *c = NULL;
    sp_error err;
    sp_error_clear(&err);
    int rc = sp__coco_open(p, g_ds, &lim, &c, &err);
    if (rc == 0) {
        check(c);
        sp__coco_close(c);
    } else if (c != NULL || err.msg[0] == '\0') {
        abort();
    }
    g_data = data;
    g_size = size;
    c = NULL;
    sp_error_clear(&err);
    rc = sp__coco_open_fetch(g_ds, fetch, NULL, &lim, &c, &err);
    if (rc == 0) {
        check(c);
        sp__coco_close(c);
    } else if (c != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(p);
    return 0;
}

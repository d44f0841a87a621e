/* fuzz_mix - the mixture file parser (NAME.mix: dataset/dataset_mix.c).
 * Input: the text of a .mix file. It is written to a private temporary
 * directory as fz.mix beside three small IDX datasets (a, b and c: 7, 3
 * and 12 one-pixel images, written once) that its lines may name; an input
 * naming anything else (a '/' or ':' in it: an absolute path, a parent
 * folder, a URL) is skipped, so a run never walks or fetches what is not
 * its own. SEEDPIPE_INDEX=off: no index is written. An opened mixture is
 * checked: its sources, weights (num / den, den their sum), length, the
 * dataset invariants (fz_check_dataset) and slot draws at the start, the
 * middle and the end of two epochs (every draw a sample of its source). A
 * refusal must carry a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/dataset.h"
#include "fuzz_util.h"

/* IDX dataset NAME of n one-pixel images (pixel and label i % 3). */
static void make_idx(const char *name, unsigned n) {
    uint8_t img[16 + 64], lab[8 + 64];
    const uint8_t ih[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, 1, 0, 0, 0, 1};
    const uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
    memcpy(img, ih, 16);
    memcpy(lab, lh, 8);
    for (unsigned i = 0; i < n; i++) img[16 + i] = lab[8 + i] = (uint8_t)(i % 3);
    char path[64];
    snprintf(path, sizeof path, "%s-images-idx3-ubyte", name);
    free(fz_write(path, img, 16 + n));
    snprintf(path, sizeof path, "%s-labels-idx1-ubyte", name);
    free(fz_write(path, lab, 8 + n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        setenv("SEEDPIPE_INDEX", "off", 1);
        make_idx("a", 7);
        make_idx("b", 3);
        make_idx("c", 12);
        ready = 1;
    }
    if (size > (1u << 16) || memchr(data, '/', size) || memchr(data, ':', size)) return 0;
    char *path = fz_write("fz.mix", data, size);
    sp_dataset_limits lim = {.max_samples = 4096, .max_file_bytes = 64 * 1024};
    sp_dataset *ds = NULL;
    sp_error err;
    err.msg[0] = '\0';
    int rc = sp_dataset_open(path, &lim, &ds, &err);
    if (rc == 0) {
        uint32_t S = sp__dataset_mix_sources(ds);
        if (S == 0 || S > 256) abort();
        uint64_t den0 = 0, sum = 0;
        for (uint32_t s = 0; s < S; s++) {
            uint64_t num, den;
            if (sp__dataset_mix_weight(ds, s, &num, &den) != 0 || num == 0 || num > den) abort();
            if (s > 0 && den != den0) abort();
            den0 = den;
            sum += num;
            if (!sp__dataset_mix_source(ds, s) || sp__dataset_mix_class_offset(ds, s) < 0) abort();
        }
        if (sum != den0 || sp__dataset_mix_source(ds, S)) abort();
        fz_check_dataset(ds, lim.max_samples, 4);
        uint64_t L = sp__dataset_mix_length(ds);
        if (L == 0 || L > (UINT64_C(1) << 32)) abort();
        uint64_t qs[] = {0, 1, L / 2, L - 1};
        for (uint32_t e = 0; e < 2; e++)
            for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
                sp_mix_draw d;
                if (qs[k] >= L) continue;
                if (sp_dataset_mix_draw(ds, 7, e, qs[k], &d) != 0) abort();
                if (d.source >= S || d.index >= sp__dataset_size(ds) ||
                    d.local >= sp__dataset_size(sp__dataset_mix_source(ds, d.source)))
                    abort();
            }
        sp_mix_draw d;
        if (sp_dataset_mix_draw(ds, 7, 0, L, &d) == 0) abort();   /* past the epoch */
        sp_dataset_close(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(path);
    return 0;
}

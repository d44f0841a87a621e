/* fuzz_tar - the WebDataset shard reader (loader/dataset_tar.c). The input
 * is written as s.tar into a private temporary directory and opened with
 * sp_dataset_open(); an opened dataset's invariants are checked (samples,
 * class counts adding up, paths named "s.tar/...") and its first samples
 * read back: each read either returns exactly the indexed size or fails
 * with a message (a broken member is that sample's error). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "seedpipe/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 18)) return 0;
    char *tar = fz_write("s.tar", data, size);
    sp_dataset_limits lim = {.max_samples = 256, .max_file_bytes = 1u << 16,
                             .index = SP_INDEX_OFF};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(tar, &lim, &ds, &err);
    if (rc == 0) {
        if (sp_dataset_kind_of(ds) != SP_DATASET_WEBDATASET) abort();
        uint64_t n = sp_dataset_size(ds);
        if (n == 0 || n > lim.max_samples) abort();
        int k = sp_dataset_num_classes(ds);
        if (k <= 0 || k > 65536) abort();
        uint64_t tot = 0;
        for (int c = 0; c < k; c++) tot += sp_dataset_class_count(ds, c);
        if (tot != n) abort();
        for (uint64_t i = 0; i < n; i++) {
            const char *p = sp_dataset_path(ds, i);
            if (!p || strncmp(p, "s.tar/", 6) != 0) abort();
            int l = sp_dataset_label(ds, i);
            if (l < 0 || l >= k) abort();
            if (i < 16) {
                sp_sample_data sd;
                if (sp_dataset_read(ds, i, &sd, &err) == 0) {
                    if (!sd.src.bytes && sd.src.len) abort();
                    sp_sample_data_free(&sd);
                } else if (err.msg[0] == '\0') {
                    abort();
                }
            }
        }
        sp_dataset_destroy(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(tar);
    return 0;
}

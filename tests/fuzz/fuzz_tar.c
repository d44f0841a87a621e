/* fuzz_tar - the WebDataset shard reader (dataset/dataset_tar.c). The input
 * is written as s.tar into a private temporary directory and opened with
 * sp_dataset_open(); an opened dataset's invariants are checked (samples,
 * class counts adding up, paths named "s.tar/...") and its first samples
 * read back: each read either returns exactly the indexed size or fails
 * with a message (a broken member is that sample's error). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seedpipe/dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 18)) return 0;
    char *tar = fz_write("s.tar", data, size);
    sp_dataset_limits lim = {.max_samples = 256, .max_file_bytes = 1u << 16,
                             .index = SP_INDEX_OFF};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(tar, &lim, &ds, &err);
    if (rc == 0) {
        if (sp__dataset_kind_of(ds) != SP_DATASET_WEBDATASET) abort();
        fz_check_dataset(ds, lim.max_samples, 16);
        for (uint64_t i = 0; i < sp__dataset_size(ds); i++)
            if (strncmp(sp_dataset_path(ds, i), "s.tar/", 6) != 0) abort();
        sp_dataset_close(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(tar);
    return 0;
}

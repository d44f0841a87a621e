/* fuzz_idx - the IDX (MNIST) reader. Input: u32 little-endian length L of
 * the images file, L bytes of it, then the labels file. Both are written to
 * a private temporary directory as fz-images-idx3-ubyte and
 * fz-labels-idx1-ubyte (plain or gzip'd: zlib reads both) and opened with
 * sp_dataset_open(); an opened dataset's samples are read back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "seedpipe/dataset.h"
#include "dataset/dataset_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || size > (1u << 20)) return 0;
    uint32_t L = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                 (uint32_t)data[3] << 24;
    data += 4;
    size -= 4;
    if (L > size) L = (uint32_t)size;
    char *img = fz_write("fz-images-idx3-ubyte", data, L);
    char *lab = fz_write("fz-labels-idx1-ubyte", data + L, size - L);
    sp_dataset_limits lim = {.max_samples = 4096, .max_file_bytes = 64 * 1024};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(img, &lim, &ds, &err);
    if (rc == 0) {
        uint64_t n = sp__dataset_size(ds);
        int w, h;
        if (sp__dataset_raw_dims(ds, &w, &h) != 0 || w <= 0 || h <= 0) abort();
        if (n == 0 || n > lim.max_samples) abort();
        for (int c = 0; c < sp__dataset_num_classes(ds); c++)
            (void)sp__dataset_class_count(ds, c);
        for (uint64_t i = 0; i < n && i < 8; i++) {
            sp_sample_data sd;
            if (sp__dataset_read(ds, i, &sd, &err) == 0) {
                if (!sd.src.raw || sd.src.raw->width != w || sd.src.raw->height != h) abort();
                volatile uint8_t acc = 0;
                for (size_t k = 0; k < (size_t)w * (size_t)h; k++) acc ^= sd.src.raw->data[k];
                (void)acc;
                int l = sp_dataset_label(ds, i);
                if (l < 0 || l >= sp__dataset_num_classes(ds)) abort();
                (void)sp_dataset_path(ds, i);
                sp__sample_data_free(&sd);
            }
        }
        sp_dataset_close(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(img);
    free(lab);
    return 0;
}

/* fuzz_list - the list-file reader (`path<TAB>label` lines). The input is
 * written as list.txt into a private temporary directory that also holds
 * a.png, b.png and sub/c.jpg (a few bytes each), and opened with
 * sp_dataset_open(); an opened dataset's samples are read back. Small
 * limits keep absolute paths (/etc/...) cheap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "seedpipe/dataset.h"
#include "fuzz_util.h"

static void init_files(void) {
    static int done;
    if (done) return;
    done = 1;
    char *p = fz_write("a.png", (const uint8_t *)"aaaa", 4);
    free(p);
    p = fz_write("b.png", (const uint8_t *)"bbbbbbbb", 8);
    free(p);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", fz_tmpdir());
    mkdir(sub, 0700);
    p = fz_write("sub/c.jpg", (const uint8_t *)"c", 1);
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    init_files();
    char *list = fz_write("list.txt", data, size);
    sp_dataset_limits lim = {.max_samples = 64, .max_file_bytes = 4096, .index = SP_INDEX_OFF};
    sp_dataset *ds = NULL;
    sp_error err;
    int rc = sp_dataset_open(list, &lim, &ds, &err);
    if (rc == 0) {
        fz_check_dataset(ds, lim.max_samples, 4);
        for (uint64_t i = 1; i < sp__dataset_size(ds); i++)   /* sorted, unique */
            if (strcmp(sp_dataset_path(ds, i - 1), sp_dataset_path(ds, i)) >= 0) abort();
        sp_dataset_close(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(list);
    return 0;
}

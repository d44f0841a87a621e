/* fuzz_manifest - the digest-manifest reader (`seedpipe diff`): the input is
 * written to a temporary file and read with sp_manifest_read(); a manifest
 * that reads is compared with itself (must be equal). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "seedpipe/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char *path = fz_write("manifest.jsonl", data, size);
    sp_manifest *m = NULL;
    sp_error err;
    int rc = sp_manifest_read(path, &m, &err);
    if (rc == 0) {
        sp_manifest_divergence d;
        sp_manifest_compare(m, m, &d);
        if (!d.equal) abort();
        for (size_t i = 0; i < m->nbatches; i++) {
            const sp_manifest_batch *b = &m->batches[i];
            volatile uint64_t acc = 0;
            for (uint32_t k = 0; k < b->count; k++) acc += b->indices[k] + (uint64_t)b->labels[k];
            for (uint32_t k = 0; k < b->nskipped; k++) acc += b->skipped[k];
            for (uint32_t k = 0; k < 2 * b->nsubstituted; k++) acc += b->substituted[k];
            (void)acc;
        }
        sp_manifest_free(m);
    } else if (m != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(path);
    return 0;
}

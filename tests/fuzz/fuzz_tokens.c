/* fuzz_tokens - the token-corpus reader (dataset/dataset_tokens.c: the
 * Megatron .idx's checks at open, then lengths and reads). Input: u16
 * little-endian size B of the .bin, then the .idx's bytes. fz.bin is B
 * bytes of a fixed pattern (the reader's checks are on the .idx; the .bin
 * only has a size), fz.idx the rest; sp_dataset_open("DIR/fz") opens the
 * pair by its prefix. An opened corpus must be consistent (D documents,
 * their lengths summing to the total) and its first documents are read to
 * int32 and int64; a refusal must come with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "dataset/dataset_tokens.h"
#include "seedpipe/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > (1u << 20)) return 0;
    size_t B = (size_t)data[0] | (size_t)data[1] << 8;
    uint8_t *bin = malloc(B ? B : 1);
    if (!bin) return 0;
    for (size_t k = 0; k < B; k++) bin[k] = (uint8_t)(k * 37 + 11);
    char *pb = fz_write("fz.bin", bin, B);
    char *pi = fz_write("fz.idx", data + 2, size - 2);
    free(bin);
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/fz", fz_tmpdir());
    sp_dataset *ds = NULL;
    sp_error err;
    err.msg[0] = '\0';
    int rc = sp_dataset_open(prefix, NULL, &ds, &err);
    if (rc == 0) {
        const sp__tok *t = sp__tok_of(ds);
        if (!t || sp__dataset_kind_of(ds) != SP_DATASET_TOKENS) abort();
        uint64_t D = sp__tok_docs(t), sum = 0;
        if (D == 0 || D != sp__dataset_size(ds)) abort();
        for (uint64_t d = 0; d < D; d++) sum += sp__tok_len(t, d);
        if (sum != sp__tok_total(t) || sum > B) abort();
        int64_t out[64];
        for (uint64_t d = 0; d < D && d < 16; d++) {
            uint64_t n = sp__tok_len(t, d);
            sp__tok_span s = {d, n > 64 ? n - 64 : 0, n > 64 ? 64 : n, out};
            (void)sp__tok_read(t, &s, 1, 8, &err);
            (void)sp__tok_read(t, &s, 1, 4, &err);
            s.off = n;   /* past the end: refused */
            s.n = 1;
            if (sp__tok_read(t, &s, 1, 8, &err) != SP_ERANGE) abort();
        }
        if (sp__tok_len(t, D) != 0) abort();
        sp_dataset_close(ds);
    } else if (ds != NULL || err.msg[0] == '\0') {
        abort();
    }
    free(pb);
    free(pi);
    return 0;
}

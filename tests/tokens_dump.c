/* tokens_dump.c - seedpipe's side of bindings/python/tests/test_tokens_megatron.py
 * (a helper, not a test: ctest runs tests/test_*.c).
 *
 *   tokens_dump PATH OUT
 *
 * Opens PATH with sp_dataset_open() (a token corpus: PREFIX, PREFIX.idx or
 * PREFIX.bin) and writes to OUT, little-endian: u64 D, u64 kind, then for
 * each document u64 length and its tokens as int64 (sp__tok_read() with
 * 8-byte output). On failure prints "ERR <rc> <message>" and exits 1.
 */
#include "seedpipe/dataset.h"
#include "dataset/dataset_tokens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int put(FILE *f, uint64_t v) { return fwrite(&v, 8, 1, f) == 1 ? 0 : -1; }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tokens_dump PATH OUT\n");
        return 2;
    }
    sp_dataset *ds = NULL;
    sp_error err = {0};
    int rc = sp_dataset_open(argv[1], NULL, &ds, &err);
    const sp__tok *t = rc == 0 ? sp__tok_of(ds) : NULL;
    if (rc == 0 && !t) rc = sp_error_set(&err, SP_EINVAL, "%s: not a token corpus", argv[1]);
    FILE *f = rc == 0 ? fopen(argv[2], "wb") : NULL;
    if (rc == 0 && !f) rc = sp_error_set(&err, SP_EIO, "%s: cannot create", argv[2]);
    uint64_t D = t ? sp__tok_docs(t) : 0;
    if (f && (put(f, D) || put(f, (uint64_t)sp_dataset_kind_of(ds))))
        rc = sp_error_set(&err, SP_EIO, "%s: write failed", argv[2]);
    for (uint64_t d = 0; rc == 0 && d < D; d++) {
        uint64_t n = sp__tok_len(t, d);
        int64_t *v = malloc(n ? n * 8 : 8);
        sp__tok_span s = {d, 0, n, v};
        rc = v ? sp__tok_read(t, &s, 1, 8, &err) : sp_error_set(&err, SP_ENOMEM, "oom");
        if (rc == 0 && (put(f, n) || (n && fwrite(v, 8, n, f) != n)))
            rc = sp_error_set(&err, SP_EIO, "%s: write failed", argv[2]);
        free(v);
    }
    if (f && fclose(f) != 0 && rc == 0) rc = sp_error_set(&err, SP_EIO, "%s: close", argv[2]);
    sp_dataset_close(ds);
    if (rc != 0) {
        printf("ERR %d %s\n", rc, err.msg);
        return 1;
    }
    return 0;
}

/* tokens_dump.c - seedpipe's side of bindings/python/tests/test_tokens_megatron.py
 * (a helper, not a test: ctest runs tests/test_*.c).
 *
 *   tokens_dump PATH OUT
 *
 * Opens PATH with sp_dataset_open() (a token corpus: PREFIX, PREFIX.idx or
 * PREFIX.bin, or a URL of either file) and writes to OUT, little-endian:
 * u64 D, u64 kind, u64 fingerprint hi, u64 lo, then for each document u64
 * length and its tokens as int64, all read by one sp__tok_read() call with
 * 8-byte output (every document one span: a remote corpus reads them as one
 * range). On failure prints "ERR <rc> <message>" and exits 1.
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
    uint64_t D = t ? sp__tok_docs(t) : 0, total = t ? sp__tok_total(t) : 0;
    sp_digest fp = rc == 0 ? sp__dataset_fingerprint(ds) : (sp_digest){0, 0};
    if (f && (put(f, D) || put(f, (uint64_t)sp__dataset_kind_of(ds)) || put(f, fp.hi) ||
              put(f, fp.lo)))
        rc = sp_error_set(&err, SP_EIO, "%s: write failed", argv[2]);
    int64_t *v = rc == 0 ? malloc((total ? total : 1) * 8) : NULL;
    sp__tok_span *s = rc == 0 ? calloc(D ? D : 1, sizeof *s) : NULL;
    if (rc == 0 && (!v || !s)) rc = sp_error_set(&err, SP_ENOMEM, "out of memory");
    uint64_t at = 0;
    for (uint64_t d = 0; rc == 0 && d < D; d++) {
        s[d] = (sp__tok_span){d, 0, sp__tok_len(t, d), v + at};
        at += s[d].n;
    }
    if (rc == 0) rc = sp__tok_read(t, s, (size_t)D, 8, &err);
    for (uint64_t d = 0; rc == 0 && d < D; d++)
        if (put(f, s[d].n) || (s[d].n && fwrite(s[d].dst, 8, s[d].n, f) != s[d].n))
            rc = sp_error_set(&err, SP_EIO, "%s: write failed", argv[2]);
    free(v);
    free(s);
    if (f && fclose(f) != 0 && rc == 0) rc = sp_error_set(&err, SP_EIO, "%s: close", argv[2]);
    sp_dataset_close(ds);
    if (rc != 0) {
        printf("ERR %d %s\n", rc, err.msg);
        return 1;
    }
    return 0;
}

/* fuzz_cache_manifest - the cache entry's MANIFEST reader (sp__cm_read, run
 * on every lookup, `cache ls` and `cache verify`). Byte 0 odd: the rest gets
 * a correct trailing "checksum <hex>" line appended, so the fuzzer reaches
 * the field parser. The text is written as MANIFEST into a private
 * temporary directory and read; a manifest that reads is formatted again
 * and the text re-read must give the same entry. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "fuzz_util.h"
#include "cache/cache_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    uint8_t *t = malloc(size + 40);
    if (!t) return 0;
    memcpy(t, data, size);
    size_t len = size;
    if (mode & 1) {
        char line[40];
        int n = snprintf(line, sizeof line, "checksum %016" PRIx64 "\n", (uint64_t)XXH3_64bits(t, len));
        memcpy(t + len, line, (size_t)n);
        len += (size_t)n;
    }
    char *p = fz_write(SP__CM_NAME, t, len);
    free(p);
    free(t);
    int dfd = open(fz_tmpdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) abort();
    sp__cm m;
    int enoent;
    sp_error err;
    int rc = sp__cm_read(dfd, "fuzz/MANIFEST", &m, &enoent, &err);
    if (rc == 0) {
        char *text = NULL;
        size_t tl = 0;
        if (sp__cm_format(&m, &text, &tl) == 0) {
            char *q = fz_write(SP__CM_NAME, (const uint8_t *)text, tl);
            free(q);
            sp__cm m2;
            if (sp__cm_read(dfd, "fuzz/MANIFEST", &m2, &enoent, &err) != 0) abort();
            if (m2.info.batches != m.info.batches || m2.info.seed != m.info.seed ||
                m2.info.epoch != m.info.epoch)
                abort();
            sp__cm_free(&m2);
            free(text);
        }
        sp__cm_free(&m);
    } else if (err.msg[0] == '\0') {
        abort();
    }
    close(dfd);
    return 0;
}

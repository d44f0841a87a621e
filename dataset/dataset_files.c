/* dataset_files.c - the source table of the encoded-file kinds (ImageFolder,
 * list file, in-memory sample list): a sample is one file under ds->base,
 * read whole and checked against the size and content hash it was indexed
 * with (dataset_index.c filled the sample table).
 *
 * Each read opens the file with open()/read() (no shared FILE*, no shared
 * offset), so reads may run concurrently in threads and forked children;
 * a file that changed since the dataset was indexed (size, bytes) is
 * refused with SP_EMISMATCH naming the file and what changed, and a FIFO
 * put in a file's place cannot block the reader (O_NONBLOCK, then not a
 * regular file).
 */
#include "dataset/dataset_internal.h"
#include "common/fileio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

static int changed(sp_error *err, const char *path, const char *why) {
    return sp_error_set(err, SP_EMISMATCH,
                        "%s: file changed since the dataset was indexed (%s)", path, why);
}

static int read_file(const sp_dataset *ds, uint64_t i, sp_sample_data *out, sp_error *err) {
    int rc = sp__ds_sample_path(ds, i, out, err);
    if (rc != SP_OK) return rc;
    const char *full = out->full_path;
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO must not block */
    if (fd < 0) return sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
    struct stat st;
    uint64_t want = ds->sizes[i];
    sp__buf buf = {NULL, 0};
    size_t got = 0;
    if (fstat(fd, &st) != 0) {
        rc = sp_error_set(err, SP_EIO, "%s: %s", full, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != want) {
        char why[96];
        snprintf(why, sizeof why, "size %llu bytes, was %llu",
                 (unsigned long long)st.st_size, (unsigned long long)want);
        rc = changed(err, full, why);
        goto done;
    }
    /* Read to the end, at most the indexed size: a file that changed since
     * it was indexed is refused, shorter, longer or with other bytes. */
    rc = sp__read_fd(fd, full, want, want, &buf, &got, err);
    out->owned = buf.p;
    if (rc == SP_ELIMIT || (rc == SP_OK && got != want)) {
        rc = changed(err, full, rc == SP_OK ? "shorter than indexed" : "longer than indexed");
        goto done;
    }
    if (rc != SP_OK) goto done;
    XXH128_hash_t h = XXH3_128bits(out->owned, (size_t)want);
    if (h.high64 != ds->hashes[i].hi || h.low64 != ds->hashes[i].lo) {
        rc = changed(err, full, "content hash differs");
        goto done;
    }
    out->src.bytes = out->owned;
    out->src.len = (size_t)want;
done:
    close(fd);
    return rc;
}

const sp__ds_ops sp__ds_files_ops = {.read = read_file};

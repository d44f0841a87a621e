/* app.c - an outside program built against an installed seedpipe.
 *
 *   app DATASET PIPELINE SEED EPOCHS BATCH_SIZE WORKERS
 *
 * Uses only the installed front-door headers (stream.h and what it
 * includes) and libseedpipe.so, as a C trainer would: checks the library's
 * ABI version, streams EPOCHS epochs from the worker pool (WORKERS
 * processes over shared memory, through sp_stream_open()) and prints one line
 * per batch,
 *
 *   EPOCH BATCH DIGEST
 *
 * with the digest `seedpipe digest` writes for that batch into its manifest;
 * it also recomputes every batch in-process (sp_loader_batch) and fails if
 * the two differ. tests/install/run.sh builds it with pkg-config and with
 * find_package and compares its lines with the tool's manifest.
 */
#include <stdio.h>
#include <stdlib.h>

/* The front door alone: no SEEDPIPE_ADVANCED_API, so none of the advanced
 * headers (pool.h, client.h, ...) could be included here. */
#include <seedpipe/stream.h>
#include <seedpipe/version.h>

static int fail(const char *what, const sp_error *err) {
    fprintf(stderr, "app: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: app DATASET PIPELINE SEED EPOCHS BATCH_SIZE WORKERS\n");
        return 2;
    }
    if (sp_abi_version() != SP_ABI_VERSION) {
        fprintf(stderr, "app: built for seedpipe ABI %d, loaded ABI %d (%s)\n", SP_ABI_VERSION,
                sp_abi_version(), sp_version_string());
        return 1;
    }
    sp_loader_config cfg;
    sp_loader_config_default(&cfg);
    cfg.dataset = argv[1];
    cfg.pipeline = argv[2];
    cfg.seed = strtoull(argv[3], NULL, 10);
    cfg.batch_size = (uint32_t)strtoul(argv[5], NULL, 10);
    sp_stream_config sc;
    sp_stream_config_default(&sc);
    sc.kind = SP_STREAM_POOL;
    sc.epochs = (uint32_t)strtoul(argv[4], NULL, 10);
    sc.workers = atoi(argv[6]);

    sp_error err;
    sp_loader *ld = NULL;
    sp_stream *s = NULL;
    sp_batch mine = {0};
    if (sp_loader_create(&cfg, &ld, &err) != 0) return fail(argv[1], &err);
    if (sp_batch_alloc(ld, &mine) != 0 || sp_stream_open(&cfg, &sc, &s, &err) != 0)
        return fail("stream", &err);
    int rc = 0;
    uint64_t n = 0;
    for (;;) {
        sp_batch view;
        int r = sp_stream_next(s, &view, &err);
        if (r == SP_END) break;
        if (r != 0) {
            rc = fail("next batch", &err);
            break;
        }
        sp_digest d = sp_stream_batch_digest(s, &view);
        if (sp_loader_batch(ld, view.epoch, view.index, &mine, &err) != 0) {
            rc = fail("in-process batch", &err);
            break;
        }
        sp_digest d2 = sp_batch_digest(ld, &mine);
        char hex[33];
        sp_digest_hex(d, hex);
        printf("%u %llu %s\n", view.epoch, (unsigned long long)view.index, hex);
        if (d.hi != d2.hi || d.lo != d2.lo) {
            fprintf(stderr, "app: epoch %u batch %llu: pool and in-process digests differ\n",
                    view.epoch, (unsigned long long)view.index);
            rc = 1;
        }
        if (sp_stream_release(s, &view, &err) != 0) {
            rc = fail("release", &err);
            break;
        }
        n++;
    }
    fprintf(stderr, "app: %llu batches from %d workers (%s, ABI %d)\n", (unsigned long long)n,
            sc.workers, sp_version_string(), sp_abi_version());
    sp_stream_close(s);
    sp_batch_free(&mine);
    sp_loader_destroy(ld);
    return rc;
}

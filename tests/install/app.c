/* app.c - an outside program built against an installed seedpipe.
 *
 *   app DATASET PIPELINE SEED EPOCHS BATCH_SIZE WORKERS
 *
 * Uses only the installed public headers and libseedpipe.so, as a C trainer
 * would: checks the library's ABI version, streams EPOCHS epochs from the
 * worker pool (WORKERS processes over shared memory) and prints one line
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

#include <seedpipe/loader.h>
#include <seedpipe/pool.h>
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
    sp_pool_config pc = {0};
    pc.epochs = (uint32_t)strtoul(argv[4], NULL, 10);
    pc.workers = atoi(argv[6]);

    sp_error err;
    sp_loader *ld = NULL;
    sp_pool *pool = NULL;
    sp_batch mine = {0};
    if (sp_loader_create(&cfg, &ld, &err) != 0) return fail(argv[1], &err);
    if (sp_batch_alloc(ld, &mine) != 0 || sp_pool_create(&cfg, &pc, &pool, &err) != 0)
        return fail("pool", &err);
    int rc = 0;
    uint64_t n = 0;
    for (;;) {
        sp_batch view;
        int r = sp_pool_next(pool, &view, &err);
        if (r == SP_POOL_END) break;
        if (r != 0) {
            rc = fail("next batch", &err);
            break;
        }
        sp_digest d = sp_batch_digest(sp_pool_loader(pool), &view);
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
        if (sp_pool_release(pool, &err) != 0) {
            rc = fail("release", &err);
            break;
        }
        n++;
    }
    fprintf(stderr, "app: %llu batches from %d workers (%s, ABI %d)\n", (unsigned long long)n,
            pc.workers, sp_version_string(), sp_abi_version());
    sp_pool_destroy(pool);
    sp_batch_free(&mine);
    sp_loader_destroy(ld);
    return rc;
}

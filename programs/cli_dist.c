/* cli_dist.c - the tool's MPI glue: data-parallel `seedpipe train` under mpirun / srun.
 *
 * Detection: a process started by mpirun (OpenMPI: OMPI_COMM_WORLD_SIZE),
 * by MPICH's or Slurm's PMI (PMI_SIZE) or by PMIx (PMIX_RANK) initialises
 * MPI and takes its rank and size from MPI_COMM_WORLD; any other process
 * is a single rank and never touches MPI (a build without MPI, or a run
 * without a launcher, trains exactly as before). A build without MPI that
 * finds itself started as one of several ranks refuses to run rather than
 * train K copies of the whole job.
 *
 * The communicator given to the trainer (train.h, sp_train_comm) is one
 * MPI_Allgatherv of bytes. Errors: MPI_COMM_WORLD's handler is set to
 * MPI_ERRORS_RETURN, so a failed collective (a peer that died, a broken
 * connection) comes back as an error naming this rank, the step and
 * MPI's own text; cli_dist_fail() prints "seedpipe train: rank R of K:
 * ..." and calls MPI_Abort, so the other ranks stop too (mpirun then
 * names the rank that died and its exit status or signal).
 */
#include "cli_dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SEEDPIPE_HAVE_MPI
#include <mpi.h>
#endif

/* The size a launcher announced in the environment (PMIx alone: 1, the
 * real size comes from MPI), or 0 when no launcher started this process. */
static unsigned long launcher_size(const char **var) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *var = vars[i];
            return strtoul(v, NULL, 10);
        }
    }
    *var = "PMIX_RANK";
    return getenv("PMIX_RANK") ? 1 : 0;
}

int cli_dist_start(cli_dist *d, sp_error *err) {
    memset(d, 0, sizeof d[0]);
    d->world = 1;
    const char *var;
    unsigned long n = launcher_size(&var);
    if (n == 0) return 0;
#ifdef SEEDPIPE_HAVE_MPI
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return sp_error_set(err, SP_EIO, "MPI_Init failed (started by a launcher: %s)", var);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int r = 0, k = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &k);
    d->rank = (uint32_t)r;
    d->world = (uint32_t)k;
    d->mpi = 1;
    return 0;
#else
    if (n <= 1) return 0;
    return sp_error_set(err, SP_EUNSUPP,
                        "started as one of %lu ranks (%s) but this seedpipe was built without "
                        "MPI (SEEDPIPE_MPI=OFF, or no MPI found: apt-get install libopenmpi-dev "
                        "openmpi-bin, then rebuild); refusing to train %lu copies of the job",
                        n, var, n);
#endif
}

#ifdef SEEDPIPE_HAVE_MPI
static int mpi_error(const cli_dist *d, int code, const char *what, sp_error *err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", code);
    return sp_error_set(err, SP_EIO, "%s failed on rank %u of %u: %s (a peer rank has probably "
                        "died: mpirun names it)", what, d->rank, d->world, text);
}

/* MPI_Allgatherv of bytes; counts must fit an int (checked). */
static int gather(const cli_dist *d, const void *send, size_t send_bytes, void *recv,
                  const size_t *recv_bytes, const char *what, sp_error *err) {
    int *cnt = (int *)malloc(2 * (size_t)d->world * sizeof *cnt);
    if (!cnt) return sp_error_set(err, SP_ENOMEM, "%s: out of memory", what);
    int *disp = cnt + d->world;
    size_t off = 0;
    for (uint32_t k = 0; k < d->world; k++) {
        if (recv_bytes[k] > (size_t)0x7fffffff || off > (size_t)0x7fffffff) {
            free(cnt);
            return sp_error_set(err, SP_EINVAL, "%s: %zu bytes from rank %u is more than MPI's "
                                "int counts allow", what, recv_bytes[k], k);
        }
        cnt[k] = (int)recv_bytes[k];
        disp[k] = (int)off;
        off += recv_bytes[k];
    }
    int rc = MPI_Allgatherv(send, (int)send_bytes, MPI_BYTE, recv, cnt, disp, MPI_BYTE,
                            MPI_COMM_WORLD);
    free(cnt);
    return rc == MPI_SUCCESS ? 0 : mpi_error(d, rc, what, err);
}

static int comm_allgather(void *ctx, const void *send, size_t send_bytes, void *recv,
                          const size_t *recv_bytes, sp_error *err) {
    cli_dist *d = (cli_dist *)ctx;
    double t0 = MPI_Wtime();
    int rc = gather(d, send, send_bytes, recv, recv_bytes, "the gradient exchange (MPI_Allgatherv)",
                    err);
    d->comm_seconds += MPI_Wtime() - t0;
    for (uint32_t k = 0; k < d->world; k++) d->comm_bytes += recv_bytes[k];
    return rc;
}
#endif

sp_train_comm cli_dist_comm(cli_dist *d) {
    sp_train_comm c;
    memset(&c, 0, sizeof c);
    c.rank = d->rank;
    c.world = d->world;
    c.ctx = d;
#ifdef SEEDPIPE_HAVE_MPI
    c.allgather = comm_allgather;
#endif
    return c;
}

int cli_dist_same(cli_dist *d, sp_digest v, const char *what, sp_error *err) {
    if (!d->mpi || d->world < 2) return 0;
#ifdef SEEDPIPE_HAVE_MPI
    uint64_t mine[2] = {v.hi, v.lo};
    uint64_t *all = (uint64_t *)malloc(2 * (size_t)d->world * sizeof *all);
    size_t *sz = (size_t *)malloc((size_t)d->world * sizeof *sz);
    int rc = 0;
    if (!all || !sz) {
        rc = sp_error_set(err, SP_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < d->world; k++) sz[k] = sizeof mine;
    rc = gather(d, mine, sizeof mine, all, sz, what, err);
    for (uint32_t k = 1; rc == 0 && k < d->world; k++)
        if (all[2 * k] != all[0] || all[2 * k + 1] != all[1]) {
            char h0[33], hk[33];
            sp_digest_hex((sp_digest){all[0], all[1]}, h0);
            sp_digest_hex((sp_digest){all[2 * k], all[2 * k + 1]}, hk);
            rc = sp_error_set(err, SP_EMISMATCH, "ranks disagree on the %s: %s on rank 0, %s on "
                              "rank %u", what, h0, hk, k);
        }
out:
    free(all);
    free(sz);
    return rc;
#else
    (void)v, (void)what, (void)err;
    return 0;
#endif
}

_Noreturn void cli_dist_fail(const cli_dist *d, const char *cmd, const sp_error *err) {
    const char *msg = err->msg[0] ? err->msg : sp_strerror(err->code);
    if (d && d->world > 1)
        fprintf(stderr, "seedpipe %s: rank %u of %u: %s\n", cmd, d->rank, d->world, msg);
    else
        fprintf(stderr, "seedpipe %s: %s\n", cmd, msg);
    fflush(stderr);
#ifdef SEEDPIPE_HAVE_MPI
    if (d && d->mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    exit(1);
}

void cli_dist_finish(cli_dist *d) {
#ifdef SEEDPIPE_HAVE_MPI
    if (d->mpi) MPI_Finalize();
#endif
    d->mpi = 0;
}

int cli_dist_have_mpi(void) {
#ifdef SEEDPIPE_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

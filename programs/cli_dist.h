/* cli_dist.h - the tool's view of a data-parallel job (cli_dist.c).
 *
 * A job is `world` ranks; this process is `rank`. Started by mpirun or
 * srun, the rank and world come from MPI; otherwise the process is rank 0
 * of 1 and MPI is never initialised. See docs/distributed.md.
 */
#ifndef SEEDPIPE_CLI_DIST_H
#define SEEDPIPE_CLI_DIST_H

#include <stdint.h>

#include "seedpipe/train.h"

typedef struct cli_dist {
    uint32_t rank, world;
    int mpi;                /* MPI initialised (and not yet finalised) */
    double comm_seconds;    /* time in the trainer's exchanges (the caller resets both) */
    uint64_t comm_bytes;    /* bytes they received (every rank's contribution) */
} cli_dist;

/* Detect a launcher and initialise MPI if one started this process.
 * @return 0, or an error (MPI_Init failed; several ranks but no MPI here). */
int cli_dist_start(cli_dist *d, sp_error *err);
/* The trainer's communicator over MPI_COMM_WORLD (an MPI_Allgatherv). */
sp_train_comm cli_dist_comm(cli_dist *d);
/* Every rank passes its v; SP_EMISMATCH naming rank 0's and the first
 * differing rank's values ("ranks disagree on the <what>: ..."). */
int cli_dist_same(cli_dist *d, sp_digest v, const char *what, sp_error *err);
/* Print "seedpipe CMD: rank R of K: msg" and stop the whole job (MPI_Abort). */
_Noreturn void cli_dist_fail(const cli_dist *d, const char *cmd, const sp_error *err);
void cli_dist_finish(cli_dist *d);
/* 1 if this tool was built with MPI. */
int cli_dist_have_mpi(void);

#endif

"""Rank and world from the launcher's environment: distributed_env() reads
torchrun's, OpenMPI's, MPICH's/Intel MPI's or srun's variables, and
resolve_rank_world() turns a Loader's rank="auto" / world="auto" into
integers (checked against the environment when only one is "auto")."""
from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional, Tuple

from ._args import check_int

__all__ = ["distributed_env", "DistributedEnv"]

# (rank variable, world variable), in order of precedence.
_DIST_SOURCES = (
    ("RANK", "WORLD_SIZE"),                              # torchrun / torch.distributed.launch
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),    # OpenMPI's mpirun
    ("PMI_RANK", "PMI_SIZE"),                            # MPICH / Intel MPI (Hydra), srun --mpi=pmi2
    ("SLURM_PROCID", "SLURM_NTASKS"),                    # srun
)


class _DistributedEnv(NamedTuple):
    rank: int
    world: int
    source: str


class DistributedEnv(_DistributedEnv):
    """(rank, world, source) from distributed_env(), with .local_rank besides:
    LOCAL_RANK's value under torchrun, else None. It is information (the
    rank within one node, e.g. to pick a device), never the rank."""
    local_rank: Optional[int] = None

    def __new__(cls, rank: int, world: int, source: str, local_rank: Optional[int] = None):
        self = super().__new__(cls, rank, world, source)
        self.local_rank = local_rank
        return self

    def __repr__(self):
        extra = f", local_rank={self.local_rank}" if self.local_rank is not None else ""
        return (f"DistributedEnv(rank={self.rank}, world={self.world}, "
                f"source={self.source!r}{extra})")


def _env_uint(env, name: str) -> int:
    v = env[name]
    t = v.strip()
    if not t or not t.isascii() or not t.isdigit():
        raise ValueError(f"{name}={v!r} is not a non-negative integer")
    return int(t)


def distributed_env(environ=None) -> DistributedEnv:
    """(rank, world, source) of this process as its launcher set them.

    The first complete pair of these environment variables wins:
        RANK / WORLD_SIZE                             torchrun (torch.distributed.run)
        OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE   OpenMPI's mpirun
        PMI_RANK / PMI_SIZE                           MPICH, Intel MPI (Hydra)
        SLURM_PROCID / SLURM_NTASKS                   srun
    and source names it ("RANK/WORLD_SIZE", ...); with none of them set it
    is (0, 1, "default"). LOCAL_RANK is never the rank (it is the rank
    within one node); under torchrun its value is given as .local_rank.

    Raises ValueError naming the variable and its value when a value is not
    a non-negative integer (LOCAL_RANK included, when RANK/WORLD_SIZE are
    used), when world is 0 or rank >= world, or when only
    one variable of a pair is set (a launcher sets both; half a pair is a
    mistake, not a reason to try the next launcher). Pairs after the one
    used are not looked at. Note that inside an sbatch script, outside srun,
    SLURM_PROCID=0 and SLURM_NTASKS=N are set for the one batch process.
    `environ` defaults to os.environ.
    """
    env = os.environ if environ is None else environ
    for rname, wname in _DIST_SOURCES:
        have_r, have_w = rname in env, wname in env
        if not have_r and not have_w:
            continue
        if have_r != have_w:
            set_, unset = (rname, wname) if have_r else (wname, rname)
            raise ValueError(f"{set_}={env[set_]!r} is set but {unset} is not "
                             f"(a launcher sets both)")
        rank, world = _env_uint(env, rname), _env_uint(env, wname)
        if world < 1:
            raise ValueError(f"{wname}={env[wname]!r} must be at least 1")
        if rank >= world:
            raise ValueError(f"{rname}={env[rname]!r} must be less than "
                             f"{wname}={env[wname]!r}")
        local = None
        if rname == "RANK" and "LOCAL_RANK" in env:
            local = _env_uint(env, "LOCAL_RANK")
        return DistributedEnv(rank, world, f"{rname}/{wname}", local)
    return DistributedEnv(0, 1, "default")


def resolve_rank_world(rank: Any, world: Any) -> Tuple[int, int]:
    """Loader's rank/world: ints as given; "auto" from distributed_env(). One
    "auto" with one int must agree with the environment."""
    auto_r = isinstance(rank, str) and rank == "auto"
    auto_w = isinstance(world, str) and world == "auto"
    for name, v, auto in (("rank", rank, auto_r), ("world", world, auto_w)):
        if isinstance(v, str) and not auto:
            raise ValueError(f"{name} must be an integer or 'auto', got {v!r}")
    if not auto_r and not auto_w:
        return rank, world
    de = distributed_env()
    if auto_r and auto_w:
        return de.rank, de.world
    if auto_r:
        world = check_int("world", world, 1, 1 << 16)
        if world != de.world:
            raise ValueError(f"rank='auto' with world={world}, but the environment says world "
                             f"{de.world} ({de.source}); pass world='auto' too, or both as "
                             "integers")
        return de.rank, world
    rank = check_int("rank", rank, 0, 1 << 16)
    if rank != de.rank:
        raise ValueError(f"world='auto' with rank={rank}, but the environment says rank "
                         f"{de.rank} ({de.source}); pass rank='auto' too, or both as integers")
    return rank, de.world

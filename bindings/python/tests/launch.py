"""launch.py - what the two example tests share to run a script as one
process and under `python -m torch.distributed.run` (not a test itself):
an environment without any launcher's variables that imports the seedpipe
under test, a free local port, and torch 1.13's torchrun bug on Python 3.11+."""
import os
import socket

import seedpipe

LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
               "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
               "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


def clean_env():
    """os.environ less the launchers' variables, one OpenMP thread, and the
    seedpipe under test (PYTHONPATH, SEEDPIPE_LIB) for the child."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    pkg = os.path.dirname(os.path.dirname(seedpipe.__file__))
    env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["SEEDPIPE_LIB"] = seedpipe.LIB_PATH
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_std_broken():
    """torch 1.13 on Python 3.11+: torchrun's Std.from_str("0") (the default
    --redirects/--tee) is None (3.11's Flag iteration skips 0), and torchrun
    dies with AttributeError: 'NoneType' object has no attribute 'get'
    (examples/torchrun/README.md); pass --redirects 1 --tee 1 then."""
    try:
        from torch.distributed.elastic.multiprocessing.api import Std
    except ImportError:
        return False
    return Std.from_str("0") is None

"""launch.py - what the two example tests share to run a script as one
process and under `python -m torch.distributed.run` (not a test itself):
an environment without any launcher's variables that imports the seedpipe
under test, a free local port, torch 1.13's torchrun bug on Python 3.11+,
and torchrun itself, bounded in time and killed whole."""
import os
import signal
import socket
import subprocess
import sys

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


def torchrun(script, args, env, log_dir, timeout=300):
    """`python -m torch.distributed.run --nproc_per_node 2 script args` in
    its own session, a fresh free port per try (the port may be taken
    before torchrun binds it). On a timeout the whole session is killed
    (ranks and their workers too) and the failure shows the process tree
    as it was and the ranks' logs."""
    extra = ["--log_dir", log_dir]             # else a /tmp/torchelastic_* per run
    if torchrun_std_broken():
        extra += ["--redirects", "1", "--tee", "1"]
    for attempt in range(3):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_port", str(free_port()), *extra, script, *args]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            tree = subprocess.run(["ps", "-eo", "pid,ppid,sid,stat,wchan:24,etime,args",
                                   "--forest"], capture_output=True, text=True).stdout
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            logs = []
            for d, _, files in os.walk(log_dir):
                for f in sorted(files):
                    with open(os.path.join(d, f), errors="replace") as fh:
                        logs.append(f"--- {os.path.join(d, f)}\n{fh.read()[-4000:]}")
            raise AssertionError(f"torchrun still running after {timeout} s: {' '.join(cmd)}\n"
                                 f"processes then (session {p.pid}):\n"
                                 + "\n".join(line for line in tree.splitlines()
                                             if f" {p.pid} " in line or line.startswith("  PID"))
                                 + f"\nstdout:\n{out}\nstderr:\n{err}\n" + "\n".join(logs))
        res = subprocess.CompletedProcess(cmd, p.returncode, out, err)
        if p.returncode == 0 or "address already in use" not in (out + err).lower():
            return res
    return res

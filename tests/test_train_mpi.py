"""test_train_mpi.py - `seedpipe train` under mpirun: the same weights for any world size.

With a global batch of 48 on a 240-image shapes set (2 epochs, 10 steps):
  1. the final-weights digest of one process equals that of `mpirun -np 2`,
     `-np 3` and `-np 4`, with each rank reading its slice from its own
     in-process loader, from its own worker pool (np 2, --workers 1), and
     from a service (`serve --world 2`, np 2 --attach); the run record says
     "world";
  2. a checkpoint written at np 4 (step 6) resumed at np 2 and at np 1
     ends with the same digest and the same step losses;
  3. a corrupt file in one rank's slice stops the whole job at once, the
     message naming the rank and the file; a rank killed with SIGKILL
     makes mpirun fail naming "rank 2"; ranks that see different datasets
     stop before the first step with both fingerprints;
  4. refusals without MPI: --world 2 without a launcher; a build without
     MPI started as one of 2 ranks (only checked in such a build).
SKIP (77) when the tool was built without MPI (SP_MPIEXEC unset); part 4's
first check runs anyway. Standard library only.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from cli_testlib import BIN, final_digest, procs, run, serve, stop_all

MPIEXEC = os.environ.get("SP_MPIEXEC")
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def mpirun(np, *args, ok=True, timeout=120, env=None, wrap=None):
    e = dict(os.environ)
    e.update(ROOT_ENV)
    e.update(env or {})
    cmd = [MPIEXEC, "-np", str(np), "--oversubscribe"]
    cmd += wrap if wrap else [BIN]
    p = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, env=e,
                       timeout=timeout)
    if ok and p.returncode != 0:
        raise AssertionError(f"mpirun -np {np} {' '.join(map(str, args))} failed "
                             f"({p.returncode}): {p.stdout}{p.stderr}")
    return p


def record(path):
    with open(path) as f:
        return json.load(f)


def refusals_without_mpi(tmp, ds):
    p = run("train", ds, "--seed", 3, "--batch-size", 48, "--world", 2,
            "--out", os.path.join(tmp, "w.json"), ok=False)
    assert p.returncode == 2 and "mpirun -np 2" in p.stderr, p.stderr
    if not MPIEXEC:
        # This build has no MPI: started as one of 2 ranks, it must refuse.
        p = run("train", ds, "--seed", 3, "--batch-size", 48, "--out",
                os.path.join(tmp, "w.json"), ok=False, env={"OMPI_COMM_WORLD_SIZE": "2"})
        assert p.returncode == 1 and "built without MPI" in p.stderr, p.stderr
    print("refusals without MPI: ok")


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-train-mpi-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 240, "--size", 32, "--seed", 4)
        refusals_without_mpi(tmp, ds)
        if not MPIEXEC:
            print("SKIP: this seedpipe was built without MPI (SEEDPIPE_MPI, libopenmpi-dev); "
                  "data-parallel training not run")
            return 77
        common = ["--seed", 3, "--epochs", 2, "--batch-size", 48]

        # 1. one process, then 2, 3 and 4 ranks
        t0 = time.time()
        one = final_digest(run("train", ds, *common, "--out", os.path.join(tmp, "r1.json")).stdout)
        seen = {"np 1": one}
        for np in (2, 3, 4):
            out = os.path.join(tmp, f"r{np}.json")
            p = mpirun(np, "train", ds, *common, "--out", out)
            seen[f"np {np}"] = final_digest(p.stdout)
            assert record(out)["config"]["world"] == np, record(out)["config"]
            # every rank reports its own timing line: all of them trained
            ranks = {l.split(":")[0] for l in p.stdout.splitlines() if l.startswith("rank ")}
            assert ranks == {f"rank {r}/{np}" for r in range(np)}, p.stdout
        p = mpirun(2, "train", ds, *common, "--workers", 1, "--out", os.path.join(tmp, "rw.json"))
        seen["np 2, a pool per rank"] = final_digest(p.stdout)
        sp, _ = serve("sp-train-mpi-attach", ds, ["--seed", 3, "--epochs", 2, "--batch-size", 48],
                      "--world", 2, "--workers", 1)
        p = mpirun(2, "train", ds, *common, "--attach", "sp-train-mpi-attach",
                   "--out", os.path.join(tmp, "ra.json"))
        sp.wait(timeout=30)
        seen["np 2, --attach a service"] = final_digest(p.stdout)
        assert set(seen.values()) == {one}, seen
        print(f"final weights {one} for: {', '.join(seen)} ({time.time() - t0:.1f} s)")

        # 2. checkpoint at np 4, resume at np 2 and at np 1
        ck = os.path.join(tmp, "ck")
        mpirun(4, "train", ds, *common, "--checkpoint-dir", ck, "--checkpoint-every", 3,
               "--stop-after", 7, "--out", os.path.join(tmp, "part.json"))
        assert sorted(os.listdir(ck)) == ["step-3.ckpt", "step-6.ckpt"], os.listdir(ck)
        p2 = mpirun(2, "train", ds, *common, "--resume", os.path.join(ck, "step-6.ckpt"),
                    "--out", os.path.join(tmp, "res2.json"))
        p1 = run("train", ds, *common, "--resume", os.path.join(ck, "step-3.ckpt"),
                 "--out", os.path.join(tmp, "res1.json"))
        assert final_digest(p2.stdout) == one and final_digest(p1.stdout) == one, (p2.stdout, p1.stdout)
        full = record(os.path.join(tmp, "r1.json"))
        for name in ("res2.json", "res1.json"):
            r = record(os.path.join(tmp, name))
            assert r["step_loss"] == full["step_loss"], (name, r["step_loss"], full["step_loss"])
        print("checkpoint at np 4 resumed at np 2 and np 1: same weights and step losses")

        # 3. failures stop the whole job, naming the rank
        bad = os.path.join(tmp, "bad")
        shutil.copytree(ds, bad)
        victim = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(bad) for f in fs
                        if f.endswith(".png"))[16]
        with open(victim, "wb") as f:
            f.write(b"garbage")
        t = time.time()
        p = mpirun(3, "train", bad, *common, "--out", os.path.join(tmp, "bad.json"), ok=False,
                   timeout=60)
        assert p.returncode != 0, p.stdout
        line = [l for l in p.stderr.splitlines() if l.startswith("seedpipe train: rank ")]
        assert line and " of 3: " in line[0] and victim in line[0], p.stderr
        print(f"a corrupt file stops the job in {time.time() - t:.1f} s: {line[0]}")

        # different datasets on different ranks: rank 1 reads the corrupted copy
        wrap = ["sh", "-c", f'exec "{BIN}" "$@" "$([ "$OMPI_COMM_WORLD_RANK" = 1 ] && '
                f'echo {bad} || echo {ds})"', "sh"]
        p = mpirun(2, "train", *common, "--out", os.path.join(tmp, "mix.json"), ok=False,
                   wrap=wrap, timeout=60)
        assert p.returncode != 0 and "ranks disagree on the dataset fingerprint" in p.stderr \
            and "on rank 0" in p.stderr and "on rank 1" in p.stderr, p.stderr
        print("different datasets: refused with both fingerprints")

        # a rank killed mid-run
        e = dict(os.environ)
        e.update(ROOT_ENV)
        job = subprocess.Popen([MPIEXEC, "-np", "3", "--oversubscribe", BIN, "train", ds,
                                "--seed", "3", "--epochs", "200", "--batch-size", "48",
                                "--out", os.path.join(tmp, "long.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        procs.append(job)
        victim_pid = None
        deadline = time.time() + 30
        while victim_pid is None and time.time() < deadline:
            time.sleep(0.2)
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        env = f.read().split(b"\0")
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if b"OMPI_COMM_WORLD_RANK=2" in env and b"long.json" in cmd and \
                        cmd.startswith(BIN.encode()):
                    victim_pid = int(pid)
        assert victim_pid, "rank 2 never started"
        time.sleep(0.5)
        os.kill(victim_pid, signal.SIGKILL)
        out, err = job.communicate(timeout=60)
        assert job.returncode != 0 and "rank 2" in out + err, (job.returncode, out, err)
        print(f"rank 2 killed: the job failed ({job.returncode}), mpirun names rank 2")
        return 0
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""test_train_netns.py - data-parallel training across a network: two namespaces, one job.

tests/mpi/netns_run.sh puts ranks 0..1 in one network namespace and 2..3 in
another, joined by a veth pair; OpenMPI talks TCP over it (no shared
memory), so the gradient exchange really crosses a network. Checked:
  1. `seedpipe train` at np 4 across the two namespaces ends with the
     final-weights digest of one process;
  2. the same with one data service per "node": `serve --world 4 --ranks
     0-1` and `--ranks 2-3`, ranks 0-1 attaching to the first, 2-3 to the
     second (when this seedpipe's serve has --ranks);
  3. no namespace and no process of the job is left afterwards.
SKIP (77) when the tool has no MPI, or the machine cannot make namespaces
(not root, no CAP_SYS_ADMIN, no `ip`): netns_run.sh exits 77 and says why.
Standard library only.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cli_testlib import BIN, final_digest, procs, run, serve, stop_all

SRC = os.environ.get("SP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
NETNS_RUN = os.path.join(SRC, "tests", "mpi", "netns_run.sh")
MPIEXEC = os.environ.get("SP_MPIEXEC")


def namespaces():
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [l.split()[0] for l in p.stdout.splitlines() if l.startswith("sp-mpi-")]


def across(np, *cmd, timeout=150):
    e = dict(os.environ)
    e["NETNS_TIMEOUT"] = "120"
    p = subprocess.run(["bash", NETNS_RUN, str(np), "--", *map(str, cmd)], capture_output=True,
                       text=True, env=e, timeout=timeout)
    return p


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    if not MPIEXEC:
        print("SKIP: this seedpipe was built without MPI; the two-namespace job is not run")
        return 77
    tmp = tempfile.mkdtemp(prefix="sp-test-netns-")
    before = set(namespaces())
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 192, "--size", 32, "--seed", 4)
        common = ["--seed", 5, "--epochs", 2, "--batch-size", 48]
        one = final_digest(run("train", ds, *common, "--out", os.path.join(tmp, "r1.json")).stdout)

        t = time.time()
        p = across(4, BIN, "train", ds, *common, "--out", os.path.join(tmp, "r4.json"))
        if p.returncode == 77:
            print(p.stderr.strip())
            return 77
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
        assert "netns_run: ranks 0..1 in A" in p.stdout and "2..3 in B" in p.stdout, p.stdout
        assert final_digest(p.stdout) == one, (p.stdout, one)
        print(f"np 4 across two namespaces: {one}, as one process ({time.time() - t:.1f} s)")

        help_text = run("help").stdout + run("help").stderr
        if "--ranks" in help_text:
            names = ["sp-netns-node-a", "sp-netns-node-b"]
            svc = [serve(names[0], ds, common[:6], "--world", 4, "--ranks", "0-1",
                         "--workers", 1)[0],
                   serve(names[1], ds, common[:6], "--world", 4, "--ranks", "2-3",
                         "--workers", 1)[0]]
            pick = (f'n={names[0]}; [ "$OMPI_COMM_WORLD_RANK" -ge 2 ] && n={names[1]}; '
                    f'exec "{BIN}" train "{ds}" {" ".join(map(str, common))} --attach "$n" '
                    f'--out "{os.path.join(tmp, "svc.json")}"')
            p = across(4, "sh", "-c", pick)
            assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
            assert final_digest(p.stdout) == one, (p.stdout, one)
            for s in svc:
                s.wait(timeout=30)
            print("np 4 across two namespaces, one service per node (--ranks 0-1, 2-3): "
                  "the same digest")
        else:
            print("SKIP part: serve has no --ranks here; per-node services not run")

        left = set(namespaces()) - before
        assert not left, f"namespaces left behind: {left}"
        stray = subprocess.run(["pgrep", "-af", "orted|prted"], capture_output=True, text=True)
        assert not stray.stdout.strip(), f"processes left behind: {stray.stdout}"
        print("no namespace or process left")
        return 0
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

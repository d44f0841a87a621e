"""startup.py - what every process pays before it does anything: wall time
and peak resident memory of short `seedpipe` commands, against /bin/true
(the floor: exec + exit) measured in the same run.

    python3 bench/startup.py [--runs N] BIN [BIN ...]

For each seedpipe binary (e.g. this build's and an older one's): `help`,
`inspect DATASET` on a small shapes dataset (made once with the first
binary), each run N times (default 30) as a child process; prints the
median wall time, its ratio to /bin/true's, and the command's peak RSS as
GNU time (/usr/bin/time, Debian's `time`) reports it (a child of this
Python process would inherit Python's resident pages into ru_maxrss), plus
whether ldd lists a CUDA library. Standard library only.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def peak_rss_kb(argv):
    if not os.path.exists("/usr/bin/time"):
        return None
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True)
    return int(p.stderr.strip().splitlines()[-1])


def measure(argv, runs):
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                                           (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
        _, status = os.waitpid(pid, 0)
        walls.append(time.perf_counter() - t0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(argv)} failed")
    return statistics.median(walls), peak_rss_kb(argv)


def mb(kb):
    return "n/a (no /usr/bin/time)" if kb is None else f"{kb / 1024:.1f} MB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("bins", nargs="+")
    a = ap.parse_args()
    bins = [os.path.abspath(b) for b in a.bins]
    with tempfile.TemporaryDirectory(prefix="sp-startup-") as d:
        ds = os.path.join(d, "shapes")
        subprocess.run([bins[0], "make-shapes", ds, "--count", "200", "--size", "32"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([bins[0], "inspect", ds], check=True, stdout=subprocess.DEVNULL)
        floor, floor_rss = measure(["/bin/true"], a.runs)
        print(f"/bin/true: {floor * 1e3:.2f} ms, peak RSS {mb(floor_rss)} (the floor)")
        for b in bins:
            ldd = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
            cuda = sorted({l.split()[0] for l in ldd.splitlines()
                           if any(k in l for k in ("libcudart", "libcublas", "libcudnn"))})
            print(f"{b}: links {', '.join(cuda) if cuda else 'no CUDA library'}")
            for cmd in (["help"], ["inspect", ds]):
                wall, rss = measure([b, *cmd], a.runs)
                print(f"  {cmd[0]:8s} {wall * 1e3:8.2f} ms  ({wall / floor:6.1f}x /bin/true)  "
                      f"peak RSS {mb(rss)}")


if __name__ == "__main__":
    main()

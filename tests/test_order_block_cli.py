"""test_order_block_cli.py - `--order block:K` through the tool (docs/determinism.md
section 6a, docs/remote.md).

On 60 shapes written by `seedpipe shard --max-count 7` (9 shards, the last
of 4):
 - `verify --order block:3` (in-process, 1 and 3 workers, a worker killed,
   stopped and resumed 1 -> 3 workers, the cache cold and warm, a service to
   one client and to 2 ranks, worlds 1, 2 and 4) finds one stream, and it is
   not the global order's; `digest` names the order in the manifest header
   and its indices run through the shards K at a time (ceil(9/3) = 3 runs
   of 3 shards an epoch);
 - a state saved by `digest --order block:3 --stop-after 4` resumes on 2
   workers to the uninterrupted run's digest, and is refused by name under
   --order block:2 and under the default order;
 - bad values (block:0, block:x, block:, blocks:2) exit 2 naming --order and
   the reason; an ImageFolder is refused naming its kind;
 - `train --order block:2` records the order in its run record, and under
   `mpirun -np 2` (where the tool has MPI) ends with the same weights;
 - over HTTP (nginx on 127.0.0.1, skipped visibly without it) the same
   shards stream the same block-order digest on 3 workers, and so does the
   Python Loader(order="block:3") against the local one.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import remote_servers as rs
from cli_testlib import final_digest, preload_env, run

BIN = os.environ.get("SEEDPIPE_BIN")
MPIEXEC = os.environ.get("SP_MPIEXEC")
COMMON = ["--pipeline", "shapes-train", "--seed", 9, "--epochs", 2, "--batch-size", 8]
PATTERN = "shard-{000000..000008}.tar"
SIZES = [7] * 8 + [4]
skipped = []


def stream_of(p):
    for line in (p.stdout + p.stderr).splitlines():
        if line.startswith("digest:"):
            return line.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def digest(ds, *extra, ok=True, env=None):
    p = run("digest", ds, *COMMON, *extra, "--out", "/dev/null", ok=ok, env=env, timeout=180)
    return stream_of(p) if ok else p


def shard_of(i):
    s = 0
    while i >= SIZES[s]:
        i -= SIZES[s]
        s += 1
    return s


def check_verify_and_manifest(shards, tmp):
    p = run("verify", shards, *COMMON, "--order", "block:3", "--workers", "1,3", "--world",
            "1,2,4", timeout=300)
    assert "all configurations give identical streams" in p.stdout, p.stdout
    assert "2 clients" in p.stdout and "not run" not in p.stdout, p.stdout
    ref = [l for l in p.stdout.splitlines() if l.endswith(" reference")][0].split()[-2]
    assert digest(shards, "--order", "block:3") == ref
    assert digest(shards) != ref and digest(shards, "--order", "block:2") != ref
    man = os.path.join(tmp, "m.jsonl")
    run("digest", shards, *COMMON, "--order", "block:3", "--workers", 3, "--out", man)
    lines = [json.loads(l) for l in open(man)]
    assert lines[0]["order"] == "block:3", lines[0]
    for e in (0, 1):
        idx = [i for b in lines[1:] if b["epoch"] == e for i in b["indices"]]
        assert sorted(idx) == list(range(60)), idx
        runs, cur = 0, set()
        for i in idx:   # a run ends where a 4th shard would join it
            if shard_of(i) not in cur and len(cur) == 3:
                runs, cur = runs + 1, set()
            cur.add(shard_of(i))
        assert runs + 1 == 3, (e, idx)
    print(f"verify --order block:3: one stream ({ref}), not the global order's; the "
          "manifest names it; 3 runs of 3 shards an epoch", flush=True)
    return ref


def check_resume(shards, tmp, ref):
    st = os.path.join(tmp, "state.json")
    run("digest", shards, *COMMON, "--order", "block:3", "--stop-after", 4, "--save-state", st,
        "--out", os.path.join(tmp, "part.jsonl"))
    assert '"order":"block:3"' in open(st).read()
    full = os.path.join(tmp, "full.jsonl")
    run("digest", shards, *COMMON, "--order", "block:3", "--out", full)
    rest = os.path.join(tmp, "rest.jsonl")
    run("digest", shards, *COMMON, "--order", "block:3", "--workers", 2, "--resume", st,
        "--out", rest)
    body = lambda f: [l for l in open(f)][1:]   # noqa: E731
    assert body(os.path.join(tmp, "part.jsonl")) + body(rest) == body(full)
    for other, here in (("block:2", "block:2"), (None, "shuffle")):
        p = run("digest", shards, *COMMON, *(["--order", other] if other else []), "--resume",
                st, "--out", "/dev/null", ok=False)
        assert p.returncode == 1 and f"order block:3 in the state, {here} here" in p.stderr, \
            p.stderr
    print("resume: a block:3 state resumes on 2 workers to the same batches; refused under "
          "block:2 and the global order, by name", flush=True)


def check_refusals(folder, shards):
    for bad, why in (("block:0", "at least 1"), ("block:x", "decimal number"),
                     ("block:", "decimal number"), ("blocks:2", "expected global"),
                     ("block:07", "leading zero")):
        p = run("digest", shards, *COMMON, "--order", bad, "--out", "/dev/null", ok=False)
        assert p.returncode == 2 and "--order" in p.stderr and why in p.stderr, (bad, p.stderr)
    p = run("digest", folder, *COMMON, "--order", "block:2", "--out", "/dev/null", ok=False)
    assert p.returncode == 1 and "imagefolder" in p.stderr and "no shards" in p.stderr, p.stderr
    assert "block:K" in run("digest", "--help").stdout
    print("refusals: bad K and a dataset without shards, by name", flush=True)


def check_train(shards, tmp):
    train = ["--seed", 3, "--epochs", 1, "--batch-size", 12, "--order", "block:2"]
    rec = os.path.join(tmp, "run.json")
    w = final_digest(run("train", shards, *train, "--out", rec, timeout=300).stdout)
    assert json.load(open(rec))["config"]["order"] == "block:2"
    if not MPIEXEC:
        print("train --order block:2: recorded (mpirun not run: no MPI in this build)")
        return
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
             OMPI_MCA_rmaps_base_oversubscribe="1")
    p = subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", BIN, "train", shards,
                        *map(str, train), "--out", os.path.join(tmp, "mpi.json")],
                       capture_output=True, text=True, env=e, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert final_digest(p.stdout) == w, (p.stdout, w)
    print(f"train --order block:2: mpirun -np 2 ends with the local weights {w}", flush=True)


PY = r"""
import hashlib, sys
import seedpipe
h = hashlib.sha256()
for x, y in seedpipe.Loader(sys.argv[1], pipeline="shapes-train", seed=9, batch_size=8,
                            workers=int(sys.argv[2]), epochs=2, order="block:3"):
    h.update(x.tobytes()); h.update(y.tobytes())
print(h.hexdigest())
"""


def py_digest(ds, workers):
    lib = os.path.join(os.environ.get("SP_BUILD_DIR", ""), "libseedpipe.so")
    src = os.path.join(os.environ.get("SP_SOURCE_DIR", os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "bindings", "python")
    env = preload_env(lib, dict(os.environ, SEEDPIPE_LIB=lib, PYTHONPATH=src,
                                NO_PROXY="127.0.0.1", no_proxy="127.0.0.1"))
    p = subprocess.run([sys.executable, "-c", PY, ds, str(workers)], capture_output=True,
                       text=True, env=env, timeout=180)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def check_http(www, tmp, ref, local_pattern):
    try:
        ng = rs.Nginx(www, tmp)
    except rs.Unavailable as e:
        print(f"SKIP: http: {e}", flush=True)
        skipped.append("http")
        return
    try:
        url = f"{ng.url}/data/{PATTERN}"
        env = {"NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        assert digest(url, "--order", "block:3", "--workers", 3, env=env) == ref
        assert py_digest(url, 2) == py_digest(local_pattern, 0)
    finally:
        ng.stop()
    print("http: the block:3 stream over HTTP (3 workers) and the Python Loader's batches "
          "(2 workers) are the local ones", flush=True)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-block-cli-")
    os.chmod(tmp, 0o755)
    try:
        folder = os.path.join(tmp, "shapes")
        run("make-shapes", folder, "--count", 60, "--size", 32, "--seed", 4)
        www = os.path.join(tmp, "www")
        data = os.path.join(www, "data")
        os.makedirs(www)
        run("shard", folder, data, "--max-count", 7)
        assert len([f for f in os.listdir(data) if f.endswith(".tar")]) == len(SIZES)
        shards = os.path.join(data, PATTERN)
        ref = check_verify_and_manifest(shards, tmp)
        check_resume(shards, tmp, ref)
        check_refusals(folder, shards)
        check_train(shards, tmp)
        check_http(www, tmp, ref, shards)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("order block: ok" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())

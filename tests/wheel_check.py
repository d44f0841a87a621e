"""wheel_check.py REFERENCE_TOOL - run by tests/wheel.sh inside a bare venv
where only the repaired wheel is installed: the package must load its own
libseedpipe.so and `seedpipe` tool from site-packages, and its batches must
equal the digests that REFERENCE_TOOL (built from the same source) writes."""
import json
import os
import subprocess
import sys
import sysconfig
import tempfile

import seedpipe

ref = sys.argv[1]
site = os.path.realpath(sysconfig.get_paths()["platlib"])
lib = os.path.realpath(seedpipe.LIB_PATH)
tool = os.path.realpath(seedpipe.find_binary())
for what, path in (("LIB_PATH", lib), ("the tool", tool), ("the package", seedpipe.__file__)):
    if not os.path.realpath(path).startswith(site + os.sep):
        sys.exit(f"FAIL: {what} {path} is not inside site-packages ({site})")
print(f"seedpipe {seedpipe.__version__} from {lib} (ABI {seedpipe._lib.sp_abi_version()})")

# every library the native files load comes from the wheel or the base system
for f in (lib, tool):
    out = subprocess.run(["ldd", f], capture_output=True, text=True, check=True).stdout
    for name in ("png", "jpeg", "zstd", "xxhash"):
        rows = [r for r in out.splitlines() if name in r]
        if not rows or not all("seedpipe.libs" in r for r in rows):
            sys.exit(f"FAIL: {f} does not load its {name} from the wheel:\n{out}")

with tempfile.TemporaryDirectory(prefix="seedpipe-wheel-") as tmp:
    data = os.path.join(tmp, "shapes")
    subprocess.run([tool, "make-shapes", data, "--count", "120", "--seed", "5"], check=True,
                   stdout=subprocess.DEVNULL)
    cfg = dict(pipeline="shapes-train", seed=11, batch_size=32)
    man = os.path.join(tmp, "ref.jsonl")
    subprocess.run([ref, "digest", data, "--pipeline", cfg["pipeline"], "--seed", str(cfg["seed"]),
                    "--epochs", "2", "--batch-size", str(cfg["batch_size"]), "--out", man],
                   check=True, stdout=subprocess.DEVNULL)
    want = [json.loads(l)["digest"] for l in open(man) if '"digest"' in l]
    got = []
    with seedpipe.Loader(data, workers=2, epochs=2, **cfg) as ld:
        for _ in ld.stream():
            got.append(ld.batch_digest())
    if got != want:
        sys.exit(f"FAIL: the wheel's Loader streamed {got} but the reference tool wrote {want}")
    via_digest = seedpipe.digest(data, epochs=2, workers=2, **cfg).digests
    if via_digest != want:
        sys.exit(f"FAIL: seedpipe.digest() gave {via_digest}, reference {want}")
    mine = os.path.join(tmp, "wheel.jsonl")
    subprocess.run([tool, "digest", data, "--pipeline", cfg["pipeline"], "--seed",
                    str(cfg["seed"]), "--epochs", "2", "--batch-size", str(cfg["batch_size"]),
                    "--workers", "2", "--out", mine], check=True, stdout=subprocess.DEVNULL)
    via_tool = [json.loads(l)["digest"] for l in open(mine) if '"digest"' in l]
    if via_tool != want:
        sys.exit(f"FAIL: the wheel's tool wrote {via_tool}, reference {want}")
print(f"{len(got)} batches from 2 workers equal the reference tool's digests, "
      "through the Loader, seedpipe.digest() and the wheel's tool")

# the command comes with the package: `seedpipe` on the venv's PATH (the
# console script) and `python -m seedpipe`, both running the wheel's tool
script = os.path.join(os.path.dirname(sys.executable), "seedpipe")
p = subprocess.run([sys.executable, "-m", "seedpipe.audit", "--help"], capture_output=True,
                   text=True)
if p.returncode != 0 or "make_loader" not in p.stdout or p.stderr:
    sys.exit(f"FAIL: python -m seedpipe.audit --help exited {p.returncode}: {p.stdout}{p.stderr}")
for cmd in ([script, "--help"], [sys.executable, "-m", "seedpipe", "--help"]):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or "make-shapes" not in p.stdout + p.stderr:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stdout}{p.stderr}")
print("`seedpipe --help` (console script) and `python -m seedpipe --help` run the wheel's tool")

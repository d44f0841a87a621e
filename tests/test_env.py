"""test_env.py - `seedpipe env` and `seedpipe env --json FILE` (seedpipe/env.h).

Asserts: the command exits 0; the JSON file parses and has every
documented key (seedpipe, build{cuda,sanitizers}, compiler, libraries{libpng,
libjpeg-turbo, zstd, xxhash, zlib, libwebp, libtiff}, cuda{compiled, and when
compiled: runtime, driver, cudnn, cublas, devices, device}, cpu{model,
threads}, os);
the text output names the same facts ("CUDA: not compiled in" or the CUDA
versions); `gcn-demo` prints "All equal: True" for the deterministic form.
Every SEEDPIPE_* variable with a set of values is checked by name
(sp_env_check): a value outside it (SEEDPIPE_ISA=bogus, SEEDPIPE_INDEX=of,
SEEDPIPE_PREFETCH=300, ...) makes any command exit 2 with a message naming
the variable, the value (control bytes shown as '?') and the values it
takes, before anything runs; each documented value, and an empty one, runs.
Standard library only; the CLI comes from $SEEDPIPE_BIN.
"""
import json
import os
import subprocess
import sys
import tempfile


def run(*args):
    binp = os.environ.get("SEEDPIPE_BIN", "seedpipe")
    p = subprocess.run([binp, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit(f"FAIL: seedpipe {' '.join(args)} exited {p.returncode}")
    return p.stdout


def check_values():
    binp = os.environ.get("SEEDPIPE_BIN", "seedpipe")
    base = {k: v for k, v in os.environ.items() if not k.startswith("SEEDPIPE_")}

    def rng(var, value):
        return subprocess.run([binp, "rng", "--seed", "1", "--stream", "shuffle"],
                              capture_output=True, text=True, timeout=60,
                              env=dict(base, **{var: value}))

    bad = [("SEEDPIPE_ISA", "bogus", "sse2, avx2 or avx512"),
           ("SEEDPIPE_ISA", "AVX2", "sse2, avx2 or avx512"),
           ("SEEDPIPE_INDEX", "of", "on or off"),
           ("SEEDPIPE_POOL_DIGEST", "worker", "auto, workers or consumer"),
           ("SEEDPIPE_PREFETCH", "300", "0..256"), ("SEEDPIPE_PREFETCH", "-1", "0..256"),
           ("SEEDPIPE_PREFETCH", "16k", "0..256"),
           ("SEEDPIPE_REMOTE_RETRIES", "101", "0..100"),
           ("SEEDPIPE_IDX_MAX_BYTES", "0", "1..1T"), ("SEEDPIPE_IDX_MAX_BYTES", "2T", "1..1T"),
           ("SEEDPIPE_SHARD_CACHE_SIZE", "ten", "a size")]
    for var, value, takes in bad:
        p = rng(var, value)
        assert p.returncode == 2 and f'{var}="{value}"' in p.stderr and takes in p.stderr, \
            (var, value, p.returncode, p.stderr)
    p = rng("SEEDPIPE_ISA", "\x1b[2J")
    assert p.returncode == 2 and 'SEEDPIPE_ISA="?[2J"' in p.stderr and "\x1b" not in p.stderr, \
        p.stderr
    good = [("SEEDPIPE_ISA", v) for v in ("sse2", "avx2", "avx512", "")] + \
        [("SEEDPIPE_INDEX", "off"), ("SEEDPIPE_INDEX", "on"), ("SEEDPIPE_PREFETCH", "0"),
         ("SEEDPIPE_PREFETCH", "256"), ("SEEDPIPE_POOL_DIGEST", "workers"),
         ("SEEDPIPE_POOL_DIGEST", "consumer"), ("SEEDPIPE_POOL_DIGEST", "auto"),
         ("SEEDPIPE_REMOTE_RETRIES", "0"), ("SEEDPIPE_IDX_MAX_BYTES", "1T"),
         ("SEEDPIPE_SHARD_CACHE_SIZE", "10G")]
    want = rng("SEEDPIPE_ISA", "").stdout
    for var, value in good:
        p = rng(var, value)
        assert p.returncode == 0 and p.stdout == want, (var, value, p.stderr)
    print(f"environment values: {len(bad) + 1} refused by name, {len(good)} accepted")


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "env.json")
        text = run("env", "--json", path)
        with open(path) as f:
            env = json.load(f)
    for k in ("seedpipe", "build", "compiler", "libraries", "cuda", "cpu", "os"):
        assert k in env, f"missing key {k}"
    assert env["seedpipe"].startswith("seedpipe ")
    assert isinstance(env["build"]["cuda"], bool)
    assert "sanitizers" in env["build"]
    for lib in ("libpng", "libjpeg-turbo", "zstd", "xxhash", "zlib", "libwebp", "libtiff"):
        assert env["libraries"].get(lib), f"no version for {lib}"
    cuda = env["cuda"]
    assert cuda["compiled"] == env["build"]["cuda"]
    if cuda["compiled"]:
        for k in ("runtime", "driver", "cudnn", "cublas", "devices", "device"):
            assert k in cuda, f"cuda.{k} missing"
        if cuda["devices"] == 0:
            assert cuda["device"] == "no CUDA device"
            assert "no CUDA device" in text
        else:
            assert cuda["device"]["name"] and "compute_capability" in cuda["device"]
        assert "cuDNN:" in text and "cuBLAS:" in text
    else:
        assert "CUDA:        not compiled in" in text
    assert env["cpu"]["model"] and env["cpu"]["threads"] >= 1
    assert env["compiler"] in text and env["cpu"]["model"] in text
    # no stray output besides the text and the "written:" line
    assert text.rstrip().endswith("written: " + path)

    demo = run("gcn-demo", "--threads", "2", "--runs", "3")
    blocks = demo.split("deterministic scatter-add")
    assert len(blocks) >= 2, demo
    for b in blocks[1:]:
        first = [ln for ln in b.splitlines() if "All equal:" in ln][0]
        assert first.strip() == "All equal: True", demo
    check_values()
    print("test_env: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""test_env.py - `seedpipe env` and `seedpipe env --json FILE` (seedpipe/env.h).

Asserts: the command exits 0; the JSON file parses and has every
documented key (seedpipe, build{cuda,sanitizers}, compiler, libraries{libpng,
libjpeg-turbo, zstd, xxhash, zlib}, cuda{compiled, and when compiled:
runtime, driver, cudnn, cublas, devices, device}, cpu{model, threads}, os);
the text output names the same facts ("CUDA: not compiled in" or the CUDA
versions); `gcn-demo` prints "All equal: True" for the deterministic form.
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
    for lib in ("libpng", "libjpeg-turbo", "zstd", "xxhash", "zlib"):
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
    print("test_env: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

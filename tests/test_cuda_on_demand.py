"""test_cuda_on_demand.py - the tool links no CUDA library; the CUDA backend
(libseedpipe_cuda, train/cuda_plugin.h) is loaded only when asked for.

Asserts: `ldd $SEEDPIPE_BIN` lists no libcudart/cuBLAS/cuDNN; `train
--device cuda` fails with a message that says why (built without CUDA, no
CUDA device, or the backend cannot be loaded) rather than crashing or
training on the CPU. (A bad SEEDPIPE_CUDA_PLUGIN: test_cuda_plugin_named.py.)
Standard library only.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_testlib import BIN, run  # noqa: E402


def main():
    out = subprocess.run(["ldd", BIN], capture_output=True, text=True, check=True).stdout
    cuda_libs = [l.strip() for l in out.splitlines()
                 if any(k in l for k in ("libcudart", "libcublas", "libcudnn", "libcuda."))]
    assert not cuda_libs, f"{BIN} links CUDA: {cuda_libs}"

    with tempfile.TemporaryDirectory() as d:
        run("make-shapes", os.path.join(d, "ds"), "--count", "40", "--size", "16")
        train = ["train", os.path.join(d, "ds"), "--seed", "1", "--epochs", "1",
                 "--batch-size", "20", "--device", "cuda", "--out", os.path.join(d, "r.json")]
        p = run(*train, ok=None)
        if p.returncode != 0:
            assert "device cuda:" in p.stderr, p.stderr
            assert any(w in p.stderr for w in ("built without CUDA", "no CUDA device",
                                               "cannot load")), p.stderr
            print(f"train --device cuda refused: {p.stderr.strip()}")
        else:
            print("train --device cuda ran (a GPU is present)")
    print("test_cuda_on_demand: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

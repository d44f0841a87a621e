"""test_cuda_plugin_named.py - a CUDA build names a bad CUDA backend: with
SEEDPIPE_CUDA_PLUGIN naming a file that is not a shared library, `train
--device cuda` fails naming that file and the loader's reason, and `env`
reports it. Exits 77 (skipped) when this build has no CUDA parts (the
plugin is then never looked for; test_cuda_on_demand.py covers that build).
Standard library only.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_testlib import run  # noqa: E402


def main():
    with tempfile.TemporaryDirectory() as d:
        envj = os.path.join(d, "env.json")
        run("env", "--json", envj)
        if not json.load(open(envj))["build"]["cuda"]:
            print("SKIP: CUDA parts not built here (nvcc or cuDNN missing): no plugin to name")
            return 77
        run("make-shapes", os.path.join(d, "ds"), "--count", "40", "--size", "16")
        train = ["train", os.path.join(d, "ds"), "--seed", "1", "--epochs", "1",
                 "--batch-size", "20", "--device", "cuda", "--out", os.path.join(d, "r.json")]
        bogus = os.path.join(d, "not-a-plugin.so")
        with open(bogus, "w") as f:
            f.write("not an ELF file\n")
        env = dict(os.environ, SEEDPIPE_CUDA_PLUGIN=bogus)
        p = run(*train, ok=False, env=env)
        assert f"cannot load the CUDA backend {bogus}" in p.stderr, p.stderr
        run("env", "--json", envj, env=env)
        c = json.load(open(envj))["cuda"]
        assert c["compiled"] and bogus in c.get("error", ""), c
        print(f"a bad plugin is named: {c['error']}")
    print("test_cuda_plugin_named: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

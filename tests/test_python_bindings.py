"""test_python_bindings.py - run the Python bindings' pytest suite from ctest.

Runs `python3 -m pytest bindings/python/tests -q` with PYTHONPATH=bindings/python
and SEEDPIPE_LIB=$SP_BUILD_DIR/libseedpipe.so (SEEDPIPE_BIN as ctest sets it),
with the interpreter running this file (the one CMake's FindPython3 chose).
Exits 77 (skipped) only when numpy or pytest is not importable by it; otherwise
pytest's exit code, where 5 ("no tests collected") counts as a failure.
Standard library only at the top level.
"""
import importlib.util
import os
import subprocess
import sys

from cli_testlib import preload_env


def main():
    missing = [m for m in ("numpy", "pytest") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"SKIP: {' and '.join(missing)} not importable by {sys.executable} "
              f"(install python3-numpy python3-pytest, or {sys.executable} -m pip install "
              f"numpy pytest)")
        return 77
    src = os.environ.get("SP_SOURCE_DIR") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    build = os.environ.get("SP_BUILD_DIR") or os.path.join(src, "build")
    lib = os.path.join(build, "libseedpipe.so")
    if not os.path.exists(lib):
        print(f"FAIL: {lib} not built")
        return 1
    pkg = os.path.join(src, "bindings", "python")
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["SEEDPIPE_LIB"] = lib
    if not env.get("SEEDPIPE_BIN"):
        env["SEEDPIPE_BIN"] = os.path.join(build, "seedpipe")
    env["PYTHONDONTWRITEBYTECODE"] = "1"      # leave the source tree clean
    preload_env(lib, env)
    if env.get("LD_PRELOAD") != os.environ.get("LD_PRELOAD"):
        print(f"sanitized library: LD_PRELOAD={env['LD_PRELOAD']}")
    cmd = [sys.executable, "-m", "pytest", os.path.join(pkg, "tests"), "-q", "-rs",
           "-p", "no:cacheprovider"]   # -rs: every skip printed with its reason
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, env=env, cwd=pkg, timeout=540)
    if rc == 5:
        print("FAIL: pytest collected no tests")
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""abi.py - the public ABI is what users call (DESIGN.md section 8).

    python3 tests/abi.py [BUILD_DIR]

Checks, and fails naming the function:

  1. count: at most MAX_API functions are declared SP_API in
     include/seedpipe/ (the loader's and the training core's together);
  2. callers: every one is called from outside the libraries: the tool
     (programs/), the Python package (bindings/python/seedpipe/), the
     examples (examples/) or the install test (tests/install/); the
     training core (train/), a library on top of libseedpipe.so, counts as
     a caller of the loader's API. A function only the layers call one
     another through is an internal, sp__NAME in an internal header of its
     layer (C tests and benches reach those through the static library,
     Python tests through libseedpipe_testing.so, tests/testing_lib.c);
  3. exports (with BUILD_DIR): libseedpipe.so and libseedpipe_train.so
     export exactly the sp_ functions their headers declare SP_API, and no
     sp__ internal.
"""
import os
import re
import subprocess
import sys

MAX_API = 180
TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The training core's headers (libseedpipe_train.so); the rest are libseedpipe.so's.
TRAIN_HEADERS = {"train.h", "model.h", "graph.h"}
CALLERS = ["programs", "bindings/python/seedpipe", "examples", "tests/install"]
DECL = re.compile(r"SP_API\b[^;{]*?\b(sp_[a-z0-9_]+)\s*\(", re.S)


def sources(folder, exts=(".c", ".h", ".cu", ".py", ".cpp")):
    for root, _, files in os.walk(os.path.join(TREE, folder)):
        for f in sorted(files):
            if f.endswith(exts):
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    yield fh.read()


def declared():
    """name -> header of every SP_API function."""
    out = {}
    inc = os.path.join(TREE, "include", "seedpipe")
    for h in sorted(os.listdir(inc)):
        if h.endswith(".h"):
            with open(os.path.join(inc, h), encoding="utf-8") as f:
                for m in DECL.finditer(f.read()):
                    out[m.group(1)] = h
    return out


def exported(lib):
    text = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                          capture_output=True, text=True).stdout
    return {line.split()[-1] for line in text.splitlines()
            if line.split() and line.split()[-1].startswith("sp_")}


def main(argv):
    api = declared()
    problems = []
    if len(api) > MAX_API:
        problems.append(f"{len(api)} SP_API functions (limit {MAX_API})")
    words = set()
    for folder in CALLERS:
        for text in sources(folder):
            words.update(re.findall(r"\bsp_[a-z0-9_]+", text))
    # the training core's sources and the inline headers of libseedpipe's
    # layers they include (common/cpu_internal.h: compiled into the core)
    train_words, below = set(), set()
    for text in sources("train", (".c", ".cu")):
        train_words.update(re.findall(r"\bsp_[a-z0-9_]+", text))
        below.update(h for h in re.findall(r'#include "([a-z]+/[a-z_0-9]+\.h)"', text)
                     if not h.startswith("train/"))
    for h in sorted(below):
        path = os.path.join(TREE, h)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                train_words.update(re.findall(r"\bsp_[a-z0-9_]+", f.read()))
    for name, h in sorted(api.items()):
        if name in words or (h not in TRAIN_HEADERS and name in train_words):
            continue
        problems.append(f"{name} (seedpipe/{h}) has no caller in {', '.join(CALLERS)}: "
                        "an internal (sp__, in its layer's internal header), or a caller is missing")
    if len(argv) > 1:
        build = argv[1]
        for lib, want in (("libseedpipe.so", {n for n, h in api.items() if h not in TRAIN_HEADERS}),
                          ("libseedpipe_train.so", {n for n, h in api.items() if h in TRAIN_HEADERS})):
            path = os.path.join(build, lib) if lib == "libseedpipe.so" else \
                os.path.join(build, "train", lib)
            if not os.path.exists(path):
                alt = os.path.join(build, lib)
                if not os.path.exists(alt):
                    problems.append(f"{lib} not found under {build}")
                    continue
                path = alt
            got = exported(path)
            for n in sorted(got - want):
                problems.append(f"{lib} exports {n}, which no public header declares SP_API")
            for n in sorted(want - got):
                problems.append(f"{lib} does not export {n} (declared SP_API)")
    for p in problems:
        print("abi: " + p)
    if problems:
        print(f"abi: FAIL, {len(problems)} problem(s)")
        return 1
    print(f"abi: ok, {len(api)} SP_API functions (limit {MAX_API}), each called from "
          f"{', '.join(CALLERS)} or the training core; the libraries export exactly them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""layers.py - the layering rules of DESIGN.md section 8, checked on a build.

    python3 tests/layers.py BUILD_DIR [--graph]

Reads every object file of the libraries and the tool under BUILD_DIR (the
CMake object folders, CMakeFiles/<target>.dir/<source>.o) with nm, and
draws one edge from a source file to another for each global symbol the
first uses and the second defines. Then it checks, and fails naming the
files and the symbol:

  1. direction: a file calls only into its own layer or a layer MAY_CALL
     lets it call (the folders of libseedpipe: the BELOW lists of their
     sp_layer() calls, which this checks too); the tool (programs/) only
     into the public API;
  2. no call-level cycle between two files (strongly connected components
     of the file graph, each printed with one edge of the cycle);
  3. includes: a file includes only headers of its own layer or below, and
     programs/ only include/seedpipe/ and its own headers;
  4. size: no library source over MAX_FILE_LINES lines of code (the lines
     after the file's opening comment, the module's preamble, which is prose)
     and no library function over MAX_FUNC_LINES lines (the tool's are
     listed, not failed), except the functions in SIZE_EXEMPT, each with the
     reason;
  5. owners: a third-party API in OWNED_APIS is called from its one owner
     file only (libcurl: dataset/remote.c, DESIGN.md section 8).

--graph prints the file graph (one "a -> b  (symbol)" line per edge).
"""
import os
import re
import subprocess
import sys

# Each layer (a folder; a source belongs to the longest prefix it starts
# with) and the layers it may call, bottom first. For the folders of
# libseedpipe this must equal the BELOW list of the folder's
# sp_layer(NAME BELOW ...) in its CMakeLists.txt (checked below), which is
# what the linker enforces; this script adds what the linker cannot see.
LIB = ["common/", "dataset/", "augment/", "loader/", "cache/", "pool/", "service/",
       "stream/"]
MAY_CALL = {
    "common/": [],
    "dataset/": ["common/"],
    "augment/": ["common/"],
    "loader/": ["common/", "dataset/", "augment/"],
    "cache/": LIB[:4],
    "pool/": LIB[:5],
    "service/": LIB[:6],
    "stream/": LIB[:7],
    # the training core, on libseedpipe; its CUDA plugin includes the plugin
    # interface of train/ (cuda_plugin.h, nn_backend.h) but links
    # libseedpipe alone (--no-undefined: a call into train/*.c fails there)
    "train/": LIB,
    "train/cuda/": LIB + ["train/"],
    "programs/": LIB + ["train/"],
}
LAYERS = list(MAY_CALL)
# Public headers (include/seedpipe/) of the layers above libseedpipe; the
# others may be included by any library file.
HEADER_LAYER = {
    "seedpipe/train.h": "train/",
    "seedpipe/model.h": "train/",
    "seedpipe/graph.h": "train/",
}
SOURCE_EXT = (".c", ".cu")
MAX_FILE_LINES = 700
MAX_FUNC_LINES = 80
# Symbol prefix of a third-party API -> the one source file that may call it.
OWNED_APIS = {"curl_": "dataset/remote.c"}
# "file:function": why it stays longer than MAX_FUNC_LINES.
SIZE_EXEMPT = {}


def layer_of(path):
    best = None
    for name in LAYERS:
        if path.startswith(name) and (best is None or len(name) > len(best)):
            best = name
    return best


def may_call(layer, other):
    return other == layer or other in MAY_CALL[layer]


SP_LAYER = re.compile(r"^sp_layer\((\w+)(?:\s+BELOW\s+([\w\s]+))?\)", re.M)


def check_cmake(tree):
    """Each libseedpipe folder's sp_layer() call names the layers MAY_CALL
    gives it, and every folder of LIB has one."""
    problems = []
    for layer in LIB:
        path = os.path.join(tree, layer, "CMakeLists.txt")
        try:
            with open(path, encoding="utf-8") as f:
                m = SP_LAYER.search(f.read())
        except OSError:
            m = None
        if not m:
            problems.append(f"{layer}CMakeLists.txt: no sp_layer() call")
            continue
        below = [b + "/" for b in (m.group(2) or "").split()]
        if m.group(1) + "/" != layer or sorted(below) != sorted(MAY_CALL[layer]):
            problems.append(f"{layer}CMakeLists.txt: sp_layer({m.group(1)} BELOW "
                            f"{' '.join(below)}) but layers.py says {layer} may call "
                            f"{' '.join(MAY_CALL[layer]) or 'nothing'}")
    return problems


def objects(build, tree):
    """(source path relative to the tree, object path) for the library and
    tool objects: <folder>/CMakeFiles/<target>.dir/<source>.o, with the
    source relative to the folder whose CMakeLists.txt made the target;
    tests and benches left out."""
    out = []
    # The targets of the build as configured now (folders of targets that
    # are gone may still hold stale objects).
    listed = os.path.join(build, "CMakeFiles", "TargetDirectories.txt")
    with open(listed, encoding="utf-8") as f:
        current = sorted({line.strip() for line in f if line.strip()})
    build = os.path.abspath(build)
    for base in current:
        if not base.endswith(".dir") or not os.path.isdir(base):
            continue
        folder = os.path.relpath(os.path.dirname(os.path.dirname(base)), build)
        folder = "" if folder == "." else folder + "/"
        for root, _, files in os.walk(base):
            for f in files:
                if not f.endswith(".o"):
                    continue
                obj = os.path.join(root, f)
                src = folder + os.path.relpath(obj, base)[:-2]
                # (an object whose source is gone is a stale leftover)
                if (src.endswith(SOURCE_EXT) and layer_of(src)
                        and os.path.exists(os.path.join(tree, src))):
                    out.append((src, obj))
    return out


def symbols(obj):
    """(defined, undefined) global symbol sets of one object file."""
    text = subprocess.run(["nm", "-P", "-g", obj], check=True,
                          capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRVWCGS" or kind in "tdbr":
            defined.add(name)
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                out.append(sorted(comp))
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_includes(tree, sources):
    problems = []
    for src in sorted(sources):
        layer = layer_of(src)
        with open(os.path.join(tree, src), encoding="utf-8") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if layer == "programs/":
                if not (inc.startswith("seedpipe/") or "/" not in inc):
                    problems.append(f"{src}: includes \"{inc}\": the tool includes "
                                    "only the public headers (include/seedpipe/) and its own")
                continue
            if inc.startswith("seedpipe/"):
                owner = HEADER_LAYER.get(inc)
            elif "/" in inc:
                owner = layer_of(inc)
            else:
                continue   # a header beside the file
            if owner is not None and not may_call(layer, owner):
                problems.append(f"{src}: includes \"{inc}\" of {owner}, which {layer} "
                                "may not call")
    return problems


FUNC_HEAD = re.compile(r"^[A-Za-z_][A-Za-z_0-9 *]*?\b([A-Za-z_][A-Za-z_0-9]*)\s*\(")


def functions(text):
    """(name, first line, line count) of each function definition, in the
    house style: the head starts in column 0, the body ends with a '}' in
    column 0."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = FUNC_HEAD.match(lines[i])
        if m and not lines[i].startswith(("typedef", "#", "static const", "const")):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{") and ";" not in lines[j]:
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and ";" not in lines[j]:
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                yield m.group(1), i + 1, k - i + 1
                i = k
        i += 1


def code_lines(text):
    """Lines of a source after its opening comment (the preamble)."""
    body = text.lstrip()
    if body.startswith("/*") and "*/" in body:
        body = body[body.index("*/") + 2:]
    return body.count("\n")


def check_sizes(tree, sources):
    problems, notes = [], []
    for src in sorted(sources):
        with open(os.path.join(tree, src), encoding="utf-8") as f:
            text = f.read()
        tool = layer_of(src) == "programs/"
        out = notes if tool else problems
        n = code_lines(text)
        if n > MAX_FILE_LINES:
            out.append(f"{src}: {n} lines of code (limit {MAX_FILE_LINES})")
        for name, line, count in functions(text):
            if count > MAX_FUNC_LINES and f"{src}:{name}" not in SIZE_EXEMPT:
                out.append(f"{src}:{line}: {name}() is {count} lines (limit {MAX_FUNC_LINES})")
    return problems, notes


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build = argv[1]
    tree = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    objs = objects(build, tree)
    if not objs:
        print(f"layers.py: no library objects under {build}/CMakeFiles", file=sys.stderr)
        return 2
    # One source can be compiled into several targets (the fuzz build); the
    # graph is over sources.
    defined, undefined = {}, {}
    owner = {}
    for src, obj in objs:
        d, u = symbols(obj)
        defined.setdefault(src, set()).update(d)
        undefined.setdefault(src, set()).update(u)
        for name in d:
            owner.setdefault(name, src)
    edges = {}
    for src, used in undefined.items():
        for name in sorted(used):
            dst = owner.get(name)
            if dst and dst != src:
                edges.setdefault(src, {}).setdefault(dst, name)

    if "--graph" in argv:
        for a in sorted(edges):
            for b, name in sorted(edges[a].items()):
                print(f"{a} -> {b}  ({name})")

    problems = []
    for a in sorted(edges):
        la = layer_of(a)
        for b, name in sorted(edges[a].items()):
            lb = layer_of(b)
            if not may_call(la, lb):
                problems.append(f"{a} calls {name} in {b}: {la} may not call {lb} "
                                f"(it may call {' '.join(MAY_CALL[la]) or 'nothing'})")
    for comp in sccs(set(defined), edges):
        if len(comp) < 2:
            continue
        members = set(comp)
        ring = [f"{a} -> {b} ({name})" for a in comp
                for b, name in sorted(edges.get(a, {}).items()) if b in members]
        problems.append("call cycle between " + ", ".join(comp) + ": " + "; ".join(ring))
    for src, used in sorted(undefined.items()):
        for prefix, only in OWNED_APIS.items():
            calls = sorted(n for n in used if n.startswith(prefix))
            if calls and src != only:
                problems.append(f"{src} calls {calls[0]}: only {only} calls the {prefix}* API")
    problems += check_includes(tree, defined)
    problems += check_cmake(tree)
    size_problems, size_notes = check_sizes(tree, defined)
    problems += size_problems
    for n in size_notes:
        print("layers: note (the tool, not failed): " + n)

    files = len(defined)
    nedges = sum(len(v) for v in edges.values())
    for p in problems:
        print("layers: " + p)
    if problems:
        print(f"layers: FAIL, {len(problems)} problem(s) in {files} files, {nedges} file edges")
        return 1
    print(f"layers: ok, {files} files in {len(set(map(layer_of, defined)))} layers, "
          f"{nedges} file edges, every one downward or within a layer, no cycle; "
          f"no library file over {MAX_FILE_LINES} lines of code, no function over {MAX_FUNC_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

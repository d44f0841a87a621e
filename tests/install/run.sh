#!/usr/bin/env bash
# tests/install/run.sh BUILD_DIR - install seedpipe from a configured build
# and use it from outside, as a C trainer would:
#   1. cmake --install BUILD_DIR into a temporary prefix; the installed
#      libseedpipe.so has a versioned SONAME, exports no sp__ internal and
#      needs no CUDA library;
#   2. tests/install/app.c built three ways: cc with pkg-config, CMake with
#      find_package(seedpipe) against the prefix, CMake with
#      add_subdirectory() of this source tree;
#   3. each program streams the built-in shapes dataset through the worker
#      pool and prints every batch digest, which must equal the manifest of
#      the installed `seedpipe digest`.
# Exits non-zero on the first difference. Used by scripts/test.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: tests/install/run.sh BUILD_DIR}" && pwd)
W=$(mktemp -d /tmp/seedpipe-install.XXXXXX)
trap 'rm -rf "$W"' EXIT
P=$W/prefix
fail() { echo "install test: FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$P" >"$W/install.log"
libdir=$(dirname "$(find "$P" -name libseedpipe.so -print -quit)")
[ -n "$libdir" ] || fail "no libseedpipe.so under $P"
for f in "$P/include/seedpipe/loader.h" "$P/include/seedpipe/version.h" "$libdir/libseedpipe.a" \
         "$libdir/pkgconfig/seedpipe.pc" "$libdir/cmake/seedpipe/seedpipe-config.cmake" \
         "$libdir/cmake/seedpipe/seedpipe-config-version.cmake" "$P/bin/seedpipe"; do
  [ -e "$f" ] || fail "not installed: ${f#$P/}"
done
so=$(readlink -f "$libdir/libseedpipe.so")
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ $soname == libseedpipe.so.[0-9]* ]] || fail "SONAME is '$soname'"
[ -e "$libdir/$soname" ] || fail "$soname link not installed"
for f in "$so" "$(readlink -f "$libdir/libseedpipe_train.so")"; do
  internal=$(nm -D --defined-only "$f" | grep ' sp__' || true)
  [ -z "$internal" ] || fail "$(basename "$f") exports internals: $(echo "$internal" | head -3)"
done
cuda=$(ldd "$so" | grep -iE 'cuda|cublas|cudnn' || true)
[ -z "$cuda" ] || fail "libseedpipe.so needs CUDA: $cuda"
for f in "$libdir/libseedpipe_train.so" "$P/bin/seedpipe"; do
  cuda=$(ldd "$f" | grep -iE 'cuda|cublas|cudnn' || true)
  [ -z "$cuda" ] || fail "$(basename "$f") links CUDA (the plugin should be loaded on demand): $cuda"
done
if [ -e "$libdir/libseedpipe_cuda.so.${soname##*.so.}" ]; then
  # the CUDA backend, loaded on demand from the prefix by the installed tool
  "$P/bin/seedpipe" env --json "$W/env.json" >/dev/null
  python3 - "$W/env.json" <<'PY' || fail "the installed tool did not load its CUDA backend"
import json, sys
c = json.load(open(sys.argv[1]))["cuda"]
assert c["compiled"] and c["runtime"] != "0.0" and "error" not in c, c
print(f"CUDA backend loaded on demand: runtime {c['runtime']}, cuDNN {c['cudnn']}, {c['device']}")
PY
  missing=$(ldd "$libdir/libseedpipe_cuda.so.${soname##*.so.}" | grep 'not found' || true)
  [ -z "$missing" ] || fail "libseedpipe_cuda misses libraries: $missing"
fi
missing=$(ldd "$libdir/libseedpipe_train.so" "$P/bin/seedpipe" | grep 'not found' || true)
[ -z "$missing" ] || fail "installed files miss libraries: $missing"
echo "installed into a temporary prefix: $soname, $(nm -D --defined-only "$so" | grep -c ' sp_') exported sp_ functions, no sp__, no CUDA"

# The reference: the installed tool's manifest, one "epoch batch digest" line per batch.
"$P/bin/seedpipe" make-shapes "$W/shapes" --count 150 --seed 3 >/dev/null
args=("$W/shapes" shapes-train 7 2 32)
"$P/bin/seedpipe" digest "${args[0]}" --pipeline "${args[1]}" --seed "${args[2]}" \
  --epochs "${args[3]}" --batch-size "${args[4]}" --out "$W/ref.jsonl" >/dev/null
python3 - "$W/ref.jsonl" >"$W/ref.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "digest" in r:
        print(r["epoch"], r["batch"], r["digest"])
PY
[ -s "$W/ref.txt" ] || fail "the tool wrote no batch digests"

check() {  # NAME BINARY
  "$2" "${args[@]}" 2 >"$W/$1.txt" 2>"$W/$1.err" || { cat "$W/$1.err" >&2; fail "$1: the program failed"; }
  cmp -s "$W/ref.txt" "$W/$1.txt" || { diff "$W/ref.txt" "$W/$1.txt" | head >&2; fail "$1: digests differ from seedpipe digest"; }
  echo "$1: $(wc -l <"$W/$1.txt") batch digests equal to seedpipe digest ($(cat "$W/$1.err"))"
}

# 1. pkg-config
cc=${CC:-cc}
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists seedpipe || fail "pkg-config does not find seedpipe.pc"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror -o "$W/app_pc" "$ROOT/tests/install/app.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs seedpipe) -Wl,-rpath,"$libdir"
# (ldd's list into a file first: `ldd | grep -q` under pipefail fails when grep
# stops reading before ldd has written its last line, as a longer list allows)
ldd "$W/app_pc" >"$W/app_pc.ldd"
grep -q "$libdir/libseedpipe.so" "$W/app_pc.ldd" || fail "app_pc does not load the installed library"
check pkg-config "$W/app_pc"
# The advanced headers are fenced: each installed one compiles with
# SEEDPIPE_ADVANCED_API defined, and one of them without it is an error
# that says what to do.
pcflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags seedpipe)
for h in "$P"/include/seedpipe/*.h; do
  # shellcheck disable=SC2086
  printf '#define SEEDPIPE_ADVANCED_API\n#include <seedpipe/%s>\n' "$(basename "$h")" \
    | $cc -std=c11 -Wall -Werror -fsyntax-only -x c - $pcflags || fail "$(basename "$h") does not compile alone"
done
# shellcheck disable=SC2086
if printf '#include <seedpipe/pool.h>\n' | $cc -std=c11 -fsyntax-only -x c - $pcflags 2>"$W/fence.err"; then
  fail "seedpipe/pool.h compiled without SEEDPIPE_ADVANCED_API"
fi
grep -q 'advanced API' "$W/fence.err" || { cat "$W/fence.err"; fail "the fence's message"; }
echo "headers: each compiles alone; pool.h without SEEDPIPE_ADVANCED_API: $(grep -o 'seedpipe/pool.h is the advanced API' "$W/fence.err" | head -1)"

# 2. find_package
cmake -S "$ROOT/tests/install" -B "$W/fp" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$W/fp.log" \
  || { cat "$W/fp.log"; fail "find_package configure"; }
cmake --build "$W/fp" >>"$W/fp.log" 2>&1 || { tail -20 "$W/fp.log"; fail "find_package build"; }
check find_package "$W/fp/app"

# 3. add_subdirectory (builds only what the program needs)
cmake -S "$ROOT/tests/install" -B "$W/sub" -DSEEDPIPE_SOURCE_DIR="$ROOT" -DSEEDPIPE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Release >"$W/sub.log" || { cat "$W/sub.log"; fail "add_subdirectory configure"; }
cmake --build "$W/sub" -j"$(nproc)" >>"$W/sub.log" 2>&1 || { tail -20 "$W/sub.log"; fail "add_subdirectory build"; }
check add_subdirectory "$W/sub/app"
echo "install test: OK"

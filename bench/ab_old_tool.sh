#!/usr/bin/env bash
# bench/ab_old_tool.sh REV - print the absolute path of the `seedpipe` tool
# built from git revision REV, building it first if needed, in
# build-ab-REV/ (git archive, RelWithDebInfo, no CUDA, no MPI, no tests).
# OLD_TOOL=path prints that path instead. The one old-tool build of
# bench/ab_tool.sh (speed) and tests/ab_outputs.sh (bytes).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/ab_old_tool.sh REV}
if [ -n "${OLD_TOOL:-}" ]; then
  echo "$OLD_TOOL"
  exit 0
fi
dir="build-ab-$(git rev-parse --short "$rev")"
if [ ! -x "$dir/b/seedpipe" ]; then
  rm -rf "$dir" && mkdir -p "$dir/src"
  git archive "$rev" | tar x -C "$dir/src"
  cmake -S "$dir/src" -B "$dir/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDPIPE_CUDA=OFF \
        -DSEEDPIPE_MPI=OFF -DSEEDPIPE_BUILD_TESTS=OFF >/dev/null
  cmake --build "$dir/b" -j"$(nproc)" --target seedpipe_cli >/dev/null
fi
echo "$(pwd)/$dir/b/seedpipe"

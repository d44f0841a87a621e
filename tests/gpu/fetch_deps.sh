#!/usr/bin/env bash
# tests/gpu/fetch_deps.sh - run HERE (a Debian/Ubuntu x86-64 machine where
# apt works), not on the GPU machine: downloads the host libraries seedpipe
# builds against (headers, .pc files, shared objects) and pkgconf as .debs,
# and unpacks them into ROOT/.gpudeps/root (in .gitignore). Carry `.gpudeps` to a GPU machine whose image lacks
# them; tests/gpu/run.sh then builds against that prefix
# (PKG_CONFIG_SYSROOT_DIR, CMAKE_PREFIX_PATH, LD_LIBRARY_PATH). Nothing is
# installed into / on either machine. About 5 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=$ROOT/.gpudeps
mkdir -p "$D/debs" "$D/root"
# Debian names; Ubuntu has the same except libjpeg-turbo8(-dev).
PKGS=(libpng-dev libpng16-16 zlib1g-dev zlib1g libturbojpeg0-dev libturbojpeg0 libzstd-dev libzstd1
      libxxhash-dev libxxhash0 libwebp-dev libwebp7 libwebpdemux2 libwebpmux3
      libtiff-dev libtiff6 libtiffxx6 libdeflate0 libjbig0 liblerc4 liblzma5
      pkgconf pkgconf-bin libpkgconf3)
if apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1; then
  PKGS+=(libjpeg62-turbo-dev libjpeg62-turbo)
else
  PKGS+=(libjpeg-turbo8-dev libjpeg-turbo8 libjpeg8-dev libjpeg8)
fi
(cd "$D/debs" && apt-get download "${PKGS[@]}")
for f in "$D"/debs/*.deb; do dpkg -x "$f" "$D/root"; done
# Absolute symlinks inside the prefix (e.g. libfoo.so -> /lib/...) would
# point outside it on the GPU machine: make them relative to the prefix.
find "$D/root" -type l | while read -r l; do
  t=$(readlink "$l")
  case $t in /*) [ -e "$D/root$t" ] &&
    ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$D/root$t")" "$l" ;; esac
done
du -sh "$D"
echo "carry: .gpudeps   (tests/gpu/run.sh finds it at ROOT/.gpudeps)"

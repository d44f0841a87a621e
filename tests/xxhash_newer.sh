#!/usr/bin/env bash
# tests/xxhash_newer.sh - build and test against a newer xxhash.h than the system's.
#
# The library compiles xxHash in (XXH_INLINE_ALL in common/hash.c,
# hash_avx2.c and hash_avx512.c: every digest, fingerprint and cache
# checksum), so its code must stay on xxHash's public API:
# with a private internal (XXH3_update and its loop functions) the build
# broke on the xxHash 0.8.2/0.8.3 headers of Debian 13 and Ubuntu 24.04,
# while Debian 12's 0.8.1 built it. This script checks that against a newer
# header without installing one: it takes the xxhash.h bundled in the PyPI
# source distribution of the python `xxhash` package (3.5.0: xxHash 0.8.2),
# puts its folder first on the include path (-I in CMAKE_C_FLAGS, checked
# below through the build's own compile commands), builds the library, the
# CLI and the tests in build-xxhash/ (Release, -Werror, no CUDA) and runs
# `ctest -R "cache|hash"` there. Still linked with the system's libxxhash: only
# the header is newer.
#
#   bash tests/xxhash_newer.sh      needs python3 -m pip (scripts/setup.sh
#                                   installs python3-pip) and, once, network
#
# The sdist is kept in build-xxhash/sdist/, so reruns do not download it
# again. JOBS=N sets the build's parallelism (default: nproc). Exits non-zero
# when anything fails.
set -euo pipefail

PKG_VERSION=3.5.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/build-xxhash
sdist_dir=$out/sdist
sdist=$sdist_dir/xxhash-$PKG_VERSION.tar.gz
jobs=${JOBS:-$(nproc)}
SECONDS=0

die() { echo "xxhash_newer: $*" >&2; exit 1; }

# ---- 1. the sdist (downloaded once) ----------------------------------------------
mkdir -p "$sdist_dir"
if [[ ! -s $sdist ]]; then
    command -v python3 >/dev/null || die "python3 not found (scripts/setup.sh installs it)"
    python3 -m pip --version >/dev/null 2>&1 ||
        die "pip is missing: 'python3 -m pip' does not work; install python3-pip (scripts/setup.sh does)"
    echo "xxhash_newer: downloading the xxhash==$PKG_VERSION sdist into $sdist_dir"
    python3 -m pip download --no-binary :all: --no-deps "xxhash==$PKG_VERSION" -d "$sdist_dir" ||
        die "pip download of xxhash==$PKG_VERSION failed (no network? a PyPI mirror?)"
    [[ -s $sdist ]] || die "pip download did not leave $sdist"
else
    echo "xxhash_newer: using the cached $sdist"
fi

# ---- 2. its xxhash.h ----------------------------------------------------------
listing=$(tar -tzf "$sdist") || die "cannot read $sdist (remove it to download again)"
member=$(grep -E '^[^/]+/deps/xxhash/xxhash\.h$' <<<"$listing") ||
    die "no deps/xxhash/xxhash.h inside $sdist"
hdr_root=$out/xxhash-header
rm -rf "$hdr_root"
mkdir -p "$hdr_root"
tar -xzf "$sdist" -C "$hdr_root" "$member"
hdr_dir=$hdr_root/$(dirname "$member")
hdr=$hdr_dir/xxhash.h
[[ -s $hdr ]] || die "extracting $member failed"

xxh_version() {   # the XXH_VERSION_{MAJOR,MINOR,RELEASE} of header $1 as M.m.r
    awk '$1 == "#define" && $2 ~ /^XXH_VERSION_(MAJOR|MINOR|RELEASE)$/ { v[$2] = $3 }
         END { print v["XXH_VERSION_MAJOR"] "." v["XXH_VERSION_MINOR"] "." v["XXH_VERSION_RELEASE"] }' "$1"
}
new_version=$(xxh_version "$hdr")
[[ $new_version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "cannot read XXH_VERSION_* in $hdr"
sys_version=unknown
[[ -f /usr/include/xxhash.h ]] && sys_version=$(xxh_version /usr/include/xxhash.h)
echo "xxhash_newer: $member: xxHash $new_version (system header: $sys_version)"

# ---- 3. configure and build with that header first ---------------------------
cmake -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release -DSEEDPIPE_WERROR=ON \
      -DSEEDPIPE_CUDA=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      -DCMAKE_C_FLAGS="-I$hdr_dir"
# The library, the CLI (the Python cache tests drive it) and every C test
# that `ctest -R "cache|hash"` runs.
mapfile -t cache_tests < <(ctest --test-dir "$out" -N -R "cache|hash" |
                           awk '$1 == "Test" && $2 ~ /^#/ && $3 !~ /^py_/ { sub(/\..*/, "", $3); print $3 }' |
                           sort -u)   # a file's cases (test_x.case) are one target
((${#cache_tests[@]} > 0)) || die "ctest -R \"cache|hash\" lists no C tests"
cmake --build "$out" -j "$jobs" --target seedpipe seedpipe_static seedpipe_cli "${cache_tests[@]}"

# ---- 4. the build really saw that header ---------------------------------------
# Rerun the compile commands of the files that compile xxHash in, preprocessing
# only: which xxhash.h they include (-M) and its version (-dM).
python3 - "$out/compile_commands.json" "$hdr" "$new_version" <<'EOF'
import json, os, re, shlex, subprocess, sys

db, want_hdr, want_version = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
checked = 0
for e in json.load(open(db)):
    src = e["file"]
    if not src.endswith(("common/hash.c", "common/hash_avx2.c", "common/hash_avx512.c")):
        continue
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    cmd, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
        elif a not in ("-c", "-MD", "-MMD", src):
            cmd.append(a)
    run = lambda extra: subprocess.run(cmd + extra + [src], cwd=e["directory"], check=True,
                                       capture_output=True, text=True).stdout
    deps = run(["-M"]).replace("\\\n", " ").split()
    used = [os.path.realpath(d) for d in deps if os.path.basename(d) == "xxhash.h"]
    macros = dict(re.findall(r"#define (XXH_VERSION_(?:MAJOR|MINOR|RELEASE)) (\d+)", run(["-E", "-dM"])))
    seen = ".".join(macros.get("XXH_VERSION_" + k, "?") for k in ("MAJOR", "MINOR", "RELEASE"))
    print(f"xxhash_newer: {os.path.relpath(src)}: built with {', '.join(used)} (xxHash {seen})")
    if used != [want_hdr] or seen != want_version:
        sys.exit(f"xxhash_newer: {src} did not use {want_hdr} (xxHash {want_version})")
    checked += 1
if checked != 3:
    sys.exit(f"xxhash_newer: found {checked} of the 3 xxHash-inlining files in {db}")
EOF

# ---- 5. the cache tests -----------------------------------------------------------
ctest --test-dir "$out" -R "cache|hash" --output-on-failure -j "$jobs"
echo "xxhash_newer: OK: xxHash $new_version header, cache and hash tests passed (${SECONDS}s)"

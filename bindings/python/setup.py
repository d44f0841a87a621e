"""Build hook: put libseedpipe.so (and the `seedpipe` tool) inside the package.

At `pip install ./bindings/python` the C library is taken from, in order:
  1. $SEEDPIPE_LIB: an already built libseedpipe.so (and the `seedpipe` tool
     from $SEEDPIPE_BIN or next to it, if present);
  2. otherwise a fresh CMake build of the repository this folder belongs to
     ($SEEDPIPE_SOURCE_DIR, default ../..) into a temporary build directory
     (targets seedpipe and seedpipe_cli only, CUDA off, default build type, -j
     $SEEDPIPE_BUILD_JOBS, default 2). Needs cmake, a C compiler and the C
     library's -dev packages (libpng, libjpeg-turbo, zlib, zstd, xxhash).
Both files land in seedpipe/_native/, which the runtime search finds first
(after $SEEDPIPE_LIB). The wheel is platform-specific.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _log(msg):
    print(f"seedpipe setup: {msg}", file=sys.stderr, flush=True)


def _locate_native():
    """(lib, bin or None, tmpdir or None)."""
    lib = os.environ.get("SEEDPIPE_LIB")
    if lib:
        if not os.path.isfile(lib):
            raise SystemExit(f"seedpipe setup: SEEDPIPE_LIB={lib} does not exist")
        b = os.environ.get("SEEDPIPE_BIN") or os.path.join(os.path.dirname(lib), "seedpipe")
        _log(f"using SEEDPIPE_LIB={lib}")
        return lib, (b if os.path.isfile(b) else None), None
    src = os.environ.get("SEEDPIPE_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
    if not os.path.isfile(os.path.join(src, "CMakeLists.txt")) or \
            not os.path.isdir(os.path.join(src, "include", "seedpipe")):
        raise SystemExit("seedpipe setup: cannot find the seedpipe C sources (set "
                         "SEEDPIPE_SOURCE_DIR to the repository, or SEEDPIPE_LIB to a built "
                         f"libseedpipe.so); looked in {src}")
    if not shutil.which("cmake"):
        raise SystemExit("seedpipe setup: cmake not found (install cmake, or set SEEDPIPE_LIB)")
    tmp = tempfile.mkdtemp(prefix="seedpipe-build-")
    jobs = os.environ.get("SEEDPIPE_BUILD_JOBS", "2")
    _log(f"building the C library from {src} in {tmp} (-j{jobs})")
    # the project default build type (RelWithDebInfo, -O2): the one its CI builds with -Werror
    subprocess.check_call(["cmake", "-S", src, "-B", tmp,
                           "-DSEEDPIPE_CUDA=OFF"], stdout=sys.stderr)
    subprocess.check_call(["cmake", "--build", tmp, "-j", jobs, "--target", "seedpipe",
                           "seedpipe_cli"], stdout=sys.stderr)
    return os.path.join(tmp, "libseedpipe.so"), os.path.join(tmp, "seedpipe"), tmp


class BuildPyWithNative(build_py):
    def run(self):
        super().run()
        lib, binary, tmp = _locate_native()
        try:
            dest = os.path.join(self.build_lib, "seedpipe", "_native")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), os.path.join(dest, "libseedpipe.so"))
            if binary:
                shutil.copy2(binary, os.path.join(dest, "seedpipe"))
            else:
                _log("no `seedpipe` tool found; digest()/verify() will need SEEDPIPE_BIN")
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True   # ships a shared library: platform wheel


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=BinaryDistribution)

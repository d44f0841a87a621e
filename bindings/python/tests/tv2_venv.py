"""A venv with a newer torch and torchvision (transforms v2, tv_tensors)
from PyPI, for the tests and benches that compare with torchvision v2.

Debian's torchvision 0.14 has no transforms.v2, so those comparisons run in
a child interpreter of this venv: `tv2_python()` returns its python (made
on first use, about 5 GB and a minute from PyPI) or None and the reason,
so that the caller skips visibly. The venv is kept across builds in
SEEDPIPE_TV2_VENV or ~/.cache/seedpipe-venvs/tv2-<versions>; a stamp file
is written only after a successful install and import, so a half-made venv
is made again. The child runs the seedpipe package from this checkout
(`child_env()` puts it on PYTHONPATH) with numpy from the venv.
"""
import fcntl
import os
import subprocess
import sys

TORCH = "torch==2.15.0"
TORCHVISION = "torchvision==0.29.2"
_CHECK = ("import torch, torchvision; from torchvision.transforms import v2; "
          "from torchvision import tv_tensors; print(torch.__version__, torchvision.__version__)")


def venv_dir():
    tag = (TORCH + "-" + TORCHVISION).replace("==", "")
    return os.environ.get("SEEDPIPE_TV2_VENV") or os.path.join(
        os.path.expanduser("~"), ".cache", "seedpipe-venvs", tag)


def tv2_python():
    """(python path, None) of a venv with torchvision v2, or (None, why)."""
    root = venv_dir()
    py = os.path.join(root, "bin", "python")
    stamp = os.path.join(root, "installed.ok")
    try:
        os.makedirs(os.path.dirname(root), exist_ok=True)
        with open(root + ".lock", "w") as lock:       # tests in parallel make it once
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(stamp):
                r = subprocess.run([sys.executable, "-m", "venv", "--clear", root],
                                   capture_output=True, timeout=300)
                if r.returncode != 0:
                    return None, "cannot make a venv (python3-venv?): " + r.stderr.decode()[-300:]
                r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                    TORCH, TORCHVISION, "numpy", "pillow"],
                                   capture_output=True, timeout=1200)
                if r.returncode != 0:
                    return None, (f"pip install {TORCH} {TORCHVISION} failed (no PyPI?): "
                                  + r.stderr.decode()[-300:])
                r = subprocess.run([py, "-c", _CHECK], capture_output=True, timeout=300)
                if r.returncode != 0:
                    return None, "torchvision v2 does not import: " + r.stderr.decode()[-300:]
                with open(stamp, "w") as f:
                    f.write(r.stdout.decode())
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"cannot make the torchvision v2 venv at {root}: {e}"
    return py, None


def with_module(py, module, package):
    """Make sure the venv of `py` imports `module`, installing `package`
    from PyPI into it if not (e.g. pycocotools, which torchvision's COCO
    wrapper needs for masks); (True, None) or (False, why)."""
    if subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0:
        return True, None
    try:
        with open(venv_dir() + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                package], capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"cannot install {package} into the venv: {e}"
    if r.returncode != 0:
        return False, f"pip install {package} failed (no PyPI?): " + r.stderr.decode()[-300:]
    return True, None


def child_env(extra=None):
    """Environment for a child of the venv: this checkout's seedpipe package
    first on PYTHONPATH, the tool and library the tests use kept."""
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = pkg
    env.pop("PYTHONHOME", None)
    if extra:
        env.update(extra)
    return env


if __name__ == "__main__":
    p, why = tv2_python()
    print(p if p else "SKIP: " + why)
    sys.exit(0 if p else 1)

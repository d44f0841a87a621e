"""seedpipe: deterministic, zero-copy batches for Python trainers.

    import seedpipe
    with seedpipe.Loader("data/train", pipeline="imagenet-train", seed=1,
                         batch_size=64, workers=4, dtype="float32") as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for images, labels in loader:     # numpy views, valid until the next step
                ...

Every batch is a pure function of (dataset, pipeline, seed, epoch, batch
index, format, geometry): worker count, scheduling, resume and cache never
change a byte. See docs/python.md.
"""
from ._core import BatchInfo, Client, DistributedEnv, Error, Loader, attach, distributed_env
from ._cli import DigestResult, VerifyResult, digest, verify
from . import _lib
from .mixture import Mixture
from . import transforms
from .audit import AuditReport, audit   # the function shadows the submodule's name here

# `python -m seedpipe.audit` imports this package (and so seedpipe.audit) before
# running audit.py as __main__; runpy's warning about that is harmless noise.
import warnings as _warnings
_warnings.filterwarnings("ignore", message="'seedpipe.audit' found in sys.modules",
                         category=RuntimeWarning)

LIB_PATH = _lib.LIB_PATH
# The version is written once (include/seedpipe/version.h); this is the
# running library's, whose ABI the import has just checked.
__version__ = _lib.sp_version_string().decode().split()[-1]


def version() -> str:
    """The C library's version string, e.g. "seedpipe 0.1.0"."""
    return _lib.sp_version_string().decode()


def find_binary() -> str:
    """Path of the `seedpipe` tool used by digest() (verify() calls the library)."""
    return _lib.find_binary()


__all__ = ["Loader", "Client", "attach", "Error", "BatchInfo", "digest", "verify",
           "DigestResult", "VerifyResult", "audit", "AuditReport", "version", "find_binary", "LIB_PATH",
           "transforms", "distributed_env", "DistributedEnv", "Mixture"]

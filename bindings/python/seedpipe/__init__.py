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

The package, by concern (the modules with a leading underscore are
private; everything public is imported here or in seedpipe.torch):
    _lib       ctypes declarations of the C API, finding libseedpipe.so
    _errors    seedpipe.Error and the status codes (from the library)
    _args      argument checks (ValueError naming the argument)
    _views     numpy views on C memory, BatchInfo
    _state     loader state to and from JSON (state_dict)
    _launch    rank and world from the launcher (distributed_env)
    _stream    one batch stream: its C handles, batches, epoch iteration
    _loader    Loader
    _client    attach() and Client (a running `seedpipe serve`)
    _digest    digest() and verify()
    the Python backend (a user's own map-style dataset, DESIGN.md section 13):
    _keys      the per-sample seeds of random, NumPy and torch (determinism.md 11)
    _pyorder   its epoch orders (the C sampler's, a user's sampler, replacement)
    _pybatch   a batch in a shared-memory buffer: collated in place, written, read
    _pyworkers the forked worker processes, their buffers, death and redo
    _pyloader  PyLoader (epochs, seeding, the cache) and Loader(dataset_object)
    _pytorch   seedpipe.torch.DataLoader's Python backend
    _pyverify  seedpipe.torch.verify() on the user's own loader
    mixture, tokens, transforms, audit, torch: public submodules.
Importing seedpipe changes no global state (no warnings filter, no signal
handler); it loads the library and checks its ABI.
"""
from . import _lib
from ._client import Client, attach
from ._digest import DigestResult, VerifyResult, digest, verify
from ._errors import Error
from ._launch import DistributedEnv, distributed_env
from ._loader import Loader
from ._views import BatchInfo
from .mixture import Mixture
from . import tokens, transforms
from .audit import AuditReport, audit   # the function shadows the submodule's name here

LIB_PATH = _lib.LIB_PATH
# The version is written once (include/seedpipe/version.h); this is the
# running library's, whose ABI the import has just checked.
__version__ = _lib.sp_version_string().decode().split()[-1]


def version() -> str:
    """The C library's version string, e.g. "seedpipe 0.1.0"."""
    return _lib.sp_version_string().decode()


def find_binary() -> str:
    """Path of the `seedpipe` command-line tool ($SEEDPIPE_BIN, next to the
    library, the package's _native/ folder, then PATH), for scripts that run
    it; digest() and verify() call the library and need no tool."""
    return _lib.find_binary()


__all__ = ["Loader", "Client", "attach", "Error", "BatchInfo", "digest", "verify",
           "DigestResult", "VerifyResult", "audit", "AuditReport", "version", "find_binary", "LIB_PATH",
           "transforms", "tokens", "distributed_env", "DistributedEnv", "Mixture"]

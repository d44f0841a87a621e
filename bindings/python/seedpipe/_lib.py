"""ctypes declarations of the seedpipe C API (include/seedpipe/*.h) and the
search for libseedpipe.so and the `seedpipe` command-line tool.

Library search order (the first that exists wins):
  1. $SEEDPIPE_LIB: path of a built libseedpipe.so (an explicit choice: never
     silently replaced by another);
  2. seedpipe/_native/libseedpipe.so inside the installed package (the wheel
     carries it; pip install . builds it with CMake, see pyproject.toml);
  3. used from a checkout (bindings/python on PYTHONPATH): the repository's
     build/libseedpipe.so, the README's build directory, and no other;
  4. the system loader (ctypes.util.find_library("seedpipe")), e.g. after
     cmake --install.
At import the library's ABI version (sp_abi_version()) must equal ABI_VERSION,
the one these declarations are written for; otherwise ImportError says which
library was found and what to do.
Tool search order: $SEEDPIPE_BIN, `seedpipe` next to the library found above,
seedpipe/_native/seedpipe, then `seedpipe` on PATH.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from ctypes import (POINTER, Structure, c_char, c_char_p, c_int, c_size_t, c_uint32, c_uint64,
                    c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))
_NATIVE = os.path.join(_HERE, "_native")
_REPO = os.path.abspath(os.path.join(_HERE, "..", "..", ".."))

# SP_ABI_VERSION of include/seedpipe/version.h that the declarations below
# follow (bindings/python/tests/test_abi.py checks the two agree).
ABI_VERSION = 7

SP_ERROR_MSG_MAX = 512

DTYPES = {"uint8": 0, "float32": 1, "bfloat16": 2, "float16": 3,
          "int32": 4, "int64": 5}   # int32, int64: a token corpus's windows (ABI 5)
LAYOUTS = {"nchw": 0, "nhwc": 1}
ON_ERROR = {"fail": 0, "skip": 1, "substitute": 2}
RNG_MODES = {"per-sample": 0, "per-worker": 1}


# Every struct the C library writes into (or reads from) ends with _RESERVED
# spare zero bytes: if a newer library appends a field, it lands there
# instead of past the end of a Python-owned buffer (a new config field then
# reads as 0). tests/test_abi.py checks that each struct's C fields, in the
# headers, are a prefix of the fields declared here.
_RESERVED = ("_reserved", ctypes.c_uint8 * 256)


class sp_error(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * SP_ERROR_MSG_MAX)]


class sp_digest(Structure):
    _fields_ = [("hi", c_uint64), ("lo", c_uint64)]

    def hex(self) -> str:
        return f"{self.hi:016x}{self.lo:016x}"


class sp_sample_list(Structure):   # dataset.h (ABI 2)
    _fields_ = [("count", c_size_t), ("paths", POINTER(c_char_p)),
                ("labels", POINTER(ctypes.c_int32)), ("num_classes", ctypes.c_int32)]


class sp_dataset_index_info(Structure):   # dataset.h
    _fields_ = [("used", c_int), ("written", c_int), ("reused", c_uint64),
                ("hashed", c_uint64), ("path", ctypes.c_char * 4096),
                ("warning", ctypes.c_char * 768)]


class sp_dataset_info(Structure):   # dataset.h: grows at its end (struct_size)
    _fields_ = [("struct_size", c_size_t), ("kind_name", c_char_p), ("kind", c_int),
                ("root", c_char_p), ("size", c_uint64), ("num_classes", c_int),
                ("class_counts", POINTER(c_uint64)), ("fingerprint", sp_digest),
                ("shard_count", c_uint32), ("raw_w", c_int), ("raw_h", c_int),
                ("mix_sources", c_uint32), ("mix_length", c_uint64),
                ("index", sp_dataset_index_info)]


class sp_mix_source(Structure):   # dataset.h: grows at its end (struct_size)
    _fields_ = [("struct_size", c_size_t), ("dataset", ctypes.c_void_p),
                ("weight_num", c_uint64), ("weight_den", c_uint64), ("offset", c_uint64),
                ("class_offset", c_int)]


ORDERS = {"shuffle": 0, "sequential": 1, "block": 2}   # sp_order (ABI 2; block: ABI 4)


class sp_loader_config(Structure):
    _fields_ = [("dataset", c_char_p), ("pipeline", c_char_p), ("seed", c_uint64),
                ("batch_size", c_uint32), ("drop_last", c_int), ("rank", c_uint32),
                ("world", c_uint32), ("dtype", c_int), ("layout", c_int), ("threads", c_int),
                ("skip_normalize", c_int), ("on_error", c_int), ("rng_mode", c_int),
                ("split", c_char_p), ("subset", c_char_p), ("split_seed", c_uint64),
                ("order", c_int), ("pad_tail", c_int), ("samples", POINTER(sp_sample_list)),
                ("block_shards", c_uint32), ("annotations", c_char_p),
                # ABI 6: the sampler (loader.h "Samplers")
                ("indices", POINTER(c_uint64)), ("nindices", c_uint64),
                ("num_samples", c_uint64), ("replacement", c_int),
                ("weights", POINTER(ctypes.c_double)), ("nweights", c_uint64),
                ("repeat", c_uint32), _RESERVED]


class sp_batch(Structure):
    _fields_ = [("capacity", c_uint32), ("count", c_uint32), ("epoch", c_uint32),
                ("index", c_uint64), ("images", c_void_p), ("labels", c_void_p),
                ("indices", c_void_p), ("nskipped", c_uint32),
                ("skipped", c_void_p), ("nsubstituted", c_uint32),
                ("substituted", c_void_p), ("flags", c_uint32), _RESERVED]


class sp_loader_state(Structure):
    _fields_ = [("fingerprint", sp_digest), ("dataset_fingerprint", sp_digest),
                ("pipeline_hash", sp_digest), ("seed", c_uint64), ("epoch", c_uint32),
                ("batch", c_uint64), ("samples", c_uint64), ("batch_size", c_uint32),
                ("drop_last", c_int), ("dtype", c_int), ("layout", c_int), ("c", c_int),
                ("h", c_int), ("w", c_int), ("on_error", c_int), ("rng_mode", c_int),
                ("order", c_int), ("pad_tail", c_uint64), ("block_shards", c_uint32),
                ("blend_sources", c_uint32), ("blend_identity", sp_digest),
                ("blend_epoch", c_uint32), ("blend_slot", c_uint64),
                ("blend_weights", c_uint64 * 256), ("blend_draws", c_uint64 * 256), _RESERVED]


# void (*warn)(void *ud, const char *msg)
CACHE_WARN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_char_p)


class sp_cache_opts(Structure):
    _fields_ = [("max_size", c_uint64), ("level", c_int), ("filter", c_int), ("no_lock", c_int),
                ("read_only", c_int), ("no_fsync", c_int), ("warn", CACHE_WARN),
                ("warn_ud", ctypes.c_void_p), _RESERVED]


class sp_cache_stats(Structure):
    _fields_ = [("hits", c_uint64), ("misses", c_uint64), ("batches_read", c_uint64),
                ("batches_computed", c_uint64), ("batches_written", c_uint64),
                ("corrupt", c_uint64), ("write_failures", c_uint64), ("committed", c_uint64),
                ("lost_races", c_uint64), ("bytes_read", c_uint64), ("bytes_written", c_uint64),
                ("raw_read", c_uint64), ("raw_written", c_uint64), _RESERVED]


class sp_pool_config(Structure):
    _fields_ = [("workers", c_int), ("ring_slots", c_int), ("epochs", c_uint32),
                ("resume", POINTER(sp_loader_state)),
                ("cache_dir", c_char_p), ("cache_opts", POINTER(sp_cache_opts)), _RESERVED]


class sp_pool_stats(Structure):
    _fields_ = [("workers", c_int), ("ring_slots", c_int), ("batches_taken", c_uint64),
                ("batches_total", c_uint64), ("worker_deaths", c_uint64),
                ("positions_redone", c_uint64), ("last_ready_ns", c_uint64),
                ("last_taken_ns", c_uint64), _RESERVED]


class sp_client_info(Structure):
    _fields_ = [("rank", c_uint32), ("world", c_uint32), ("ring_slots", c_uint32),
                ("batch_size", c_uint32), ("c", c_int), ("h", c_int), ("w", c_int),
                ("dtype", c_int), ("layout", c_int), ("sample_bytes", c_size_t),
                ("batches_per_epoch", c_uint64), ("total", c_uint64), ("first", c_uint64),
                ("epochs", c_uint32), ("service_pid", c_int), ("fingerprint", sp_digest),
                ("seed", c_uint64), ("targets", c_int), ("max_boxes", c_int),
                ("keypoints", c_int), ("masks", c_int), ("image_bytes", c_size_t),
                ("target_offset", c_size_t), ("mix_classes", c_int), _RESERVED]


class sp_failure(Structure):
    _fields_ = [("sample", c_uint64), ("code", c_int), ("msg", c_char * SP_ERROR_MSG_MAX)]


class sp_loader_info(Structure):   # loader.h (ABI 7): sp_loader_info_get() fills it
    _fields_ = [("struct_size", c_size_t), ("config", POINTER(sp_loader_config)),
                ("dataset", c_void_p), ("pipeline", c_void_p), ("spec", c_char_p),
                ("size", c_uint64), ("padded_size", c_uint64), ("batches_per_epoch", c_uint64),
                ("c", c_int), ("h", c_int), ("w", c_int), ("sample_bytes", c_size_t),
                ("fingerprint", sp_digest), ("pipeline_hash", sp_digest)]


def _candidates():
    env = os.environ.get("SEEDPIPE_LIB")
    if env:
        yield env
        return  # an explicit choice is never silently replaced
    yield os.path.join(_NATIVE, "libseedpipe.so")
    if os.path.isfile(os.path.join(_REPO, "CMakeLists.txt")) and \
            os.path.isfile(os.path.join(_REPO, "include", "seedpipe", "version.h")):
        yield os.path.join(_REPO, "build", "libseedpipe.so")
    found = ctypes.util.find_library("seedpipe")
    if found:
        yield found


def find_library() -> str:
    tried = []
    for p in _candidates():
        if os.path.isabs(p) and not os.path.exists(p):
            tried.append(p)
            continue
        return p
    raise ImportError("seedpipe: libseedpipe.so not found (pip install . from the repository "
                      "builds and ships it; or set SEEDPIPE_LIB to a built libseedpipe.so); "
                      "tried: " + ", ".join(tried))


def check_abi(lib, path: str) -> None:
    """ImportError unless the loaded library has the ABI these declarations
    are written for (calling through a wrong struct layout or signature
    corrupts memory instead of failing)."""
    fn = getattr(lib, "sp_abi_version", None)
    if fn is None:
        have = "an older one (no sp_abi_version())"
    else:
        fn.restype, fn.argtypes = c_int, []
        abi = fn()
        if abi == ABI_VERSION:
            return
        have = f"ABI {abi}"
    raise ImportError(
        f"seedpipe: {path} is {have}, but this Python package needs libseedpipe ABI "
        f"{ABI_VERSION}. Use the library built from the same source as the package: "
        "reinstall the package (pip install . from the repository), rebuild the checkout's "
        "build/ (cmake --build build), or point SEEDPIPE_LIB at a matching libseedpipe.so.")


LIB_PATH = find_library()
lib = ctypes.CDLL(LIB_PATH)
check_abi(lib, LIB_PATH)
HAS_SPLIT = hasattr(lib, "sp_split_parse")   # sp_loader_config.split/subset/split_seed


def find_binary() -> str:
    env = os.environ.get("SEEDPIPE_BIN")
    if env:
        return env
    for p in (os.path.join(os.path.dirname(os.path.abspath(LIB_PATH)), "seedpipe"),
              os.path.join(_NATIVE, "seedpipe")):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    w = shutil.which("seedpipe")
    if w:
        return w
    raise FileNotFoundError("seedpipe: the `seedpipe` tool was not found (set SEEDPIPE_BIN, or "
                            f"put it next to {LIB_PATH})")


def _fn(name, restype, *argtypes):
    """The C function `name` with its signature; ImportError if the library
    lacks it (an older build of the same ABI version)."""
    try:
        f = getattr(lib, name)
    except AttributeError:
        raise ImportError(f"seedpipe: {LIB_PATH} has no {name}() (built from older source "
                          "than this package); rebuild it or reinstall the package") from None
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


E = POINTER(sp_error)
P = c_void_p
sp_strerror = _fn("sp_strerror", c_char_p, c_int)
sp_status_at = _fn("sp_status_at", c_char_p, c_size_t, POINTER(c_int))
sp_version_string = _fn("sp_version_string", c_char_p)
sp_abi_version = _fn("sp_abi_version", c_int)

sp_loader_config_default = _fn("sp_loader_config_default", None, POINTER(sp_loader_config))
sp_order_spec_parse = _fn("sp_order_spec_parse", c_int, c_char_p, POINTER(c_int),
                          POINTER(c_uint32), E)   # ABI 4
sp_loader_create = _fn("sp_loader_create", c_int, POINTER(sp_loader_config), POINTER(P), E)
sp_loader_destroy = _fn("sp_loader_destroy", None, P)
sp_loader_info_get = _fn("sp_loader_info_get", c_int, P, POINTER(sp_loader_info))   # ABI 7
sp_loader_failure_count = _fn("sp_loader_failure_count", c_size_t, P)
sp_loader_failure_get = _fn("sp_loader_failure_get", c_int, P, c_size_t, POINTER(sp_failure))
sp_dataset_info_get = _fn("sp_dataset_info_get", c_int, P, POINTER(sp_dataset_info))
sp_dataset_path = _fn("sp_dataset_path", c_char_p, P, c_uint64)
sp_dataset_label = _fn("sp_dataset_label", c_int, P, c_uint64)
sp_dataset_open = _fn("sp_dataset_open", c_int, c_char_p, P, POINTER(P), E)
sp_dataset_close = _fn("sp_dataset_close", None, P)
sp_dataset_mix_source_get = _fn("sp_dataset_mix_source_get", c_int, P, c_uint32,
                                POINTER(sp_mix_source))


def dataset_info(ds) -> sp_dataset_info:
    """sp_dataset_info_get() of an open dataset (pointer)."""
    info = sp_dataset_info(struct_size=ctypes.sizeof(sp_dataset_info))
    rc = sp_dataset_info_get(ds, ctypes.byref(info))
    if rc != 0:
        raise ValueError(f"sp_dataset_info_get: error {rc}")
    return info


def mix_source(ds, s: int) -> sp_mix_source:
    """sp_dataset_mix_source_get(): source s of a mixture."""
    src = sp_mix_source(struct_size=ctypes.sizeof(sp_mix_source))
    rc = sp_dataset_mix_source_get(ds, s, ctypes.byref(src))
    if rc != 0:
        raise ValueError(f"sp_dataset_mix_source_get: source {s}: error {rc}")
    return src


# tokens.h: the token-corpus writer (seedpipe.tokens)
sp_tokens_writer_open = _fn("sp_tokens_writer_open", c_int, c_char_p, c_char_p, POINTER(P), E)
sp_tokens_writer_add = _fn("sp_tokens_writer_add", c_int, P, c_void_p, c_size_t, E)
sp_tokens_writer_close = _fn("sp_tokens_writer_close", c_int, P, E)
sp_tokens_writer_abort = _fn("sp_tokens_writer_abort", None, P)
sp_batch_alloc = _fn("sp_batch_alloc", c_int, P, POINTER(sp_batch))
sp_batch_free = _fn("sp_batch_free", None, POINTER(sp_batch))
sp_loader_batch = _fn("sp_loader_batch", c_int, P, c_uint32, c_uint64, POINTER(sp_batch), E)
sp_pipeline_parse = _fn("sp_pipeline_parse", c_int, c_char_p, POINTER(P), E)
sp_pipeline_destroy = _fn("sp_pipeline_destroy", None, P)
sp_pipeline_has_normalize = _fn("sp_pipeline_has_normalize", c_int, P)
sp_loader_explain = _fn("sp_loader_explain", c_int, P, c_uint32, c_uint64, c_char_p, c_size_t,
                        POINTER(sp_error))

# perm.h and sampler.h: the epoch order and its batches (the Python backend
# cuts a Python dataset's epochs with the C path's own functions)
class sp_key(Structure):
    _fields_ = [("k", c_uint32 * 2)]


class sp_perm(Structure):
    _fields_ = [("n", c_uint64), ("key", sp_key), ("epoch", c_uint32), ("half_bits", ctypes.c_uint),
                ("half_mask", c_uint64)]


class sp_batching(Structure):
    _fields_ = [("n", c_uint64), ("batch_size", c_uint32), ("drop_last", c_int), ("rank", c_uint32),
                ("world", c_uint32), ("pad_tail", c_int), ("strided", c_int)]


sp_perm_init = _fn("sp_perm_init", None, POINTER(sp_perm), c_uint64, sp_key, c_uint32)
sp_perm_at = _fn("sp_perm_at", c_uint64, POINTER(sp_perm), c_uint64)
sp_batching_check = _fn("sp_batching_check", c_int, POINTER(sp_batching), E)
sp_batching_padded = _fn("sp_batching_padded", c_uint64, POINTER(sp_batching))
sp_batches_per_epoch = _fn("sp_batches_per_epoch", c_uint64, POINTER(sp_batching))
sp_batch_slice = _fn("sp_batch_slice", None, POINTER(sp_batching), c_uint64, POINTER(c_uint64),
                     POINTER(c_uint32))
sp_batch_position = _fn("sp_batch_position", c_uint64, POINTER(sp_batching), c_uint64)

# manifest.h; FILE * is an opaque pointer here (seedpipe.digest() passes an open_memstream)
sp_manifest_write_header = _fn("sp_manifest_write_header", c_int, c_void_p, P, c_uint32, E)
sp_manifest_write_batch = _fn("sp_manifest_write_batch", c_int, c_void_p, POINTER(sp_batch),
                              sp_digest, E)

sp_loader_state_at = _fn("sp_loader_state_at", None, P, c_uint32, c_uint64,
                         POINTER(sp_loader_state))
sp_loader_state_check = _fn("sp_loader_state_check", c_int, P, POINTER(sp_loader_state), E)
sp_loader_resume = _fn("sp_loader_resume", c_int, P, POINTER(sp_loader_state), E)
sp_loader_state_format = _fn("sp_loader_state_format", c_int, POINTER(sp_loader_state),
                             c_char_p, c_size_t)
sp_loader_state_parse = _fn("sp_loader_state_parse", c_int, c_char_p, c_size_t,
                            POINTER(sp_loader_state), E)

sp_pool_worker_pid = _fn("sp_pool_worker_pid", c_int, P, c_int)

HAS_POOL_CACHE = hasattr(lib, "sp_pool_cache")   # sp_pool_config.cache_dir/cache_opts
sp_cache_opts_default = _fn("sp_cache_opts_default", None, POINTER(sp_cache_opts))
sp_cache_flush = _fn("sp_cache_flush", None, P)
sp_cache_stats_get = _fn("sp_cache_stats_get", None, P, POINTER(sp_cache_stats))
sp_client_state = _fn("sp_client_state", None, P, POINTER(sp_loader_state))
sp_client_info_get = _fn("sp_client_info_get", None, P, POINTER(sp_client_info))
sp_client_mix_targets = _fn("sp_client_mix_targets", P, P, POINTER(sp_batch), P)


# ---- batch streams (stream.h) and verify (verify.h); additions to ABI 1 -------------

STREAM_KINDS = {"loader": 0, "pool": 1, "service": 2}


class sp_client_opts(Structure):
    _fields_ = [("flags", ctypes.c_uint), ("expect_fingerprint", POINTER(sp_digest)),
                ("attach_timeout_ms", c_int), _RESERVED]


class sp_stream_config(Structure):
    _fields_ = [("kind", c_int), ("workers", c_int), ("ring_slots", c_int), ("epochs", c_uint32),
                ("resume", POINTER(sp_loader_state)), ("cache_dir", c_char_p),
                ("cache_opts", POINTER(sp_cache_opts)), ("service_name", c_char_p),
                ("rank", c_uint32), ("client_opts", POINTER(sp_client_opts)), _RESERVED]


class sp_stream_info(Structure):
    _fields_ = [("kind", c_int), ("rank", c_uint32), ("world", c_uint32),
                ("batch_size", c_uint32), ("c", c_int), ("h", c_int), ("w", c_int),
                ("dtype", c_int), ("layout", c_int), ("sample_bytes", c_size_t),
                ("batches_per_epoch", c_uint64), ("first", c_uint64), ("end", c_uint64),
                ("taken", c_uint64), ("held", c_int), ("max_held", c_int),
                ("fingerprint", sp_digest), ("seed", c_uint64), _RESERVED]


VERIFY_NO_CRASH, VERIFY_NO_RESUME, VERIFY_NO_SERVICE, VERIFY_NO_CACHE = 1, 2, 4, 8


class sp_verify_config(Structure):
    _fields_ = [("workers", POINTER(c_int)), ("nworkers", c_int), ("worlds", POINTER(c_int)),
                ("nworlds", c_int), ("ring_slots", c_int), ("epochs", c_uint32),
                ("flags", ctypes.c_uint), ("cache_dir", c_char_p),
                ("cache_opts", POINTER(sp_cache_opts)), ("progress", c_void_p),
                ("progress_ud", c_void_p), _RESERVED]


HAS_STREAM = hasattr(lib, "sp_stream_open")
if HAS_STREAM:
    sp_stream_config_default = _fn("sp_stream_config_default", None, POINTER(sp_stream_config))
    sp_stream_open = _fn("sp_stream_open", c_int, POINTER(sp_loader_config),
                         POINTER(sp_stream_config), POINTER(P), E)
    sp_stream_close = _fn("sp_stream_close", None, P)
    sp_stream_next = _fn("sp_stream_next", c_int, P, POINTER(sp_batch), E)
    sp_stream_release = _fn("sp_stream_release", c_int, P, POINTER(sp_batch), E)
    sp_stream_state = _fn("sp_stream_state", None, P, POINTER(sp_loader_state))
    sp_stream_seek = _fn("sp_stream_seek", c_int, P, POINTER(sp_loader_state), E)
    sp_stream_info_get = _fn("sp_stream_info_get", None, P, POINTER(sp_stream_info))
    sp_stream_batch_digest = _fn("sp_stream_batch_digest", sp_digest, P, POINTER(sp_batch))
    sp_stream_digest_of = _fn("sp_stream_digest_of", sp_digest, POINTER(sp_digest), c_size_t)
    sp_stream_loader = _fn("sp_stream_loader", P, P)
    sp_stream_cache = _fn("sp_stream_cache", P, P)
    sp_stream_pool = _fn("sp_stream_pool", P, P)
    sp_stream_client = _fn("sp_stream_client", P, P)

HAS_TRACE = hasattr(lib, "sp_trace_start")
if HAS_TRACE:
    sp_trace_start = _fn("sp_trace_start", c_int, c_char_p, E)
    sp_trace_stop = _fn("sp_trace_stop", c_int, E)

HAS_VERIFY = hasattr(lib, "sp_verify_run")
if HAS_VERIFY:
    sp_verify_run = _fn("sp_verify_run", c_int, POINTER(sp_loader_config),
                        POINTER(sp_verify_config), POINTER(P), E)
    sp_verify_free = _fn("sp_verify_free", None, P)
    sp_verify_format = _fn("sp_verify_format", c_size_t, P, c_char_p, c_size_t)
    sp_verify_json = _fn("sp_verify_json", c_size_t, P, c_char_p, c_size_t)


def loader_info(ld) -> sp_loader_info:
    """sp_loader_info_get() of the loader ld (its geometry, spec,
    fingerprint, dataset and config in one struct)."""
    info = sp_loader_info(struct_size=ctypes.sizeof(sp_loader_info))
    rc = sp_loader_info_get(ld, ctypes.byref(info))
    if rc != 0:
        raise RuntimeError(f"sp_loader_info_get: {sp_strerror(rc).decode()}")
    return info

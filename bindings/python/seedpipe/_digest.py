"""digest() and verify(): a whole stream checked in the library.

digest() takes every batch of a configuration from a batch stream
(stream.h), writes the manifest with the library's own writer
(sp_manifest_write_header/_batch: the lines `seedpipe digest --out` writes)
and folds the batch digests with sp_stream_digest_of(), the stream digest
the tool prints. verify() runs sp_verify_run() (verify.h), what `seedpipe
verify` runs. Neither starts the tool nor parses its output. Options after
the dataset are keyword-only.
"""
from __future__ import annotations

import ctypes
import json
import os
import time
import warnings
from ctypes import byref
from typing import Iterable, List, Optional, Union

from . import _lib as L
from ._args import U32_MAX, check_choice, check_int, check_order, default_dtype
from ._errors import END, EUNSUPP, Error, raise_error
from ._sampling import sampler_fields
from ._state import state_from

__all__ = ["digest", "verify", "DigestResult", "VerifyResult"]


def _loader_config(data, pipeline, seed, epochs, batch_size, on_error, rng_mode):
    """(sp_loader_config, the bytes it points to) of the options digest()
    and verify() share, each checked (ValueError naming it)."""
    if not isinstance(data, (str, bytes, os.PathLike)):
        raise ValueError(f"data must be a dataset path, got {type(data).__name__}")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise ValueError(f"pipeline must be a non-empty spec string, got {pipeline!r}")
    check_int("epochs", epochs, 1, U32_MAX - 1)
    cfg = L.sp_loader_config()
    L.sp_loader_config_default(byref(cfg))
    keep = (os.fsencode(data), pipeline.encode())
    cfg.dataset, cfg.pipeline = keep
    cfg.seed = check_int("seed", seed, 0, 2**64 - 1)
    cfg.batch_size = check_int("batch_size", batch_size, 1, U32_MAX)
    cfg.on_error = check_choice("on_error", on_error, L.ON_ERROR)
    cfg.rng_mode = check_choice("rng_mode", rng_mode, L.RNG_MODES)
    return cfg, keep


class DigestResult(list):
    """The manifest of a stream, as `seedpipe digest --out` writes it: a
    list of batch dicts (epoch, batch, count, indices, labels, digest[,
    skipped, substituted]) in stream order, plus .header (the manifest's
    first line), .stream (the stream digest, sp_stream_digest_of() of the
    batch digests), .images_per_s and .output (the summary line `seedpipe
    digest` prints: "digest: N batches, M images in T s (R images/s),
    stream HEX")."""

    header: dict
    stream: str
    images_per_s: float
    output: str

    @property
    def digests(self) -> List[str]:
        return [b["digest"] for b in self]


# The manifest is written by the library into memory (open_memstream), then
# parsed: DigestResult holds exactly the tool's lines.
_libc = ctypes.CDLL(None, use_errno=True)
_open_memstream = _libc.open_memstream
_open_memstream.restype, _open_memstream.argtypes = ctypes.c_void_p, [
    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
_fclose = _libc.fclose
_fclose.restype, _fclose.argtypes = ctypes.c_int, [ctypes.c_void_p]
_free = _libc.free
_free.restype, _free.argtypes = None, [ctypes.c_void_p]


def _resume_state(resume) -> L.sp_loader_state:
    """A state dict, its JSON text, or the path of a state file."""
    if isinstance(resume, str) and resume.lstrip().startswith("{"):
        return state_from(resume)
    if isinstance(resume, (str, bytes, os.PathLike)):
        with open(resume, "rb") as f:
            return state_from(f.read())
    return state_from(resume)


def _cache_warning(ud, msg) -> None:
    warnings.warn("seedpipe cache: " + msg.decode("utf-8", "replace"), RuntimeWarning,
                  stacklevel=2)


def _open_stream(cfg, workers, ring, epochs, resume, cache):
    """The batch stream digest() reads: (sp_stream *, what C points to)."""
    sc = L.sp_stream_config()
    L.sp_stream_config_default(byref(sc))
    sc.kind = L.STREAM_KINDS["pool" if workers else "loader"]
    sc.workers, sc.ring_slots, sc.epochs = workers, ring, epochs
    keep = []
    if resume is not None:
        keep.append(_resume_state(resume))
        sc.resume = ctypes.pointer(keep[-1])
    if cache is not None:
        opts = L.sp_cache_opts()
        L.sp_cache_opts_default(byref(opts))
        keep += [os.fsencode(cache), L.CACHE_WARN(_cache_warning), opts]
        opts.warn = keep[-2]
        sc.cache_dir, sc.cache_opts = keep[-3], ctypes.pointer(opts)
    s, err = ctypes.c_void_p(), L.sp_error()
    rc = L.sp_stream_open(byref(cfg), byref(sc), byref(s), byref(err))
    if rc != 0:
        raise_error(rc, err, os.fsdecode(cfg.dataset))
    return s.value, keep


def _take_all(s, f, epochs: int, stop_after: Optional[int]) -> tuple:
    """Every batch of stream s (up to stop_after) into the manifest f.
    Returns (batch digests, images)."""
    err = L.sp_error()
    rc = L.sp_manifest_write_header(f, L.sp_stream_loader(s), epochs, byref(err))
    digests, images = [], 0
    while rc == 0 and (stop_after is None or len(digests) < stop_after):
        view = L.sp_batch()
        rc = L.sp_stream_next(s, byref(view), byref(err))
        if rc == END:
            rc = 0
            break
        if rc != 0:
            break
        d = L.sp_stream_batch_digest(s, byref(view))
        digests.append(d)
        images += view.count
        rc = L.sp_manifest_write_batch(f, byref(view), d, byref(err))
        L.sp_stream_release(s, byref(view), None)
    if rc != 0:
        raise_error(rc, err, "digest")
    return digests, images


def digest(data, *, pipeline: str = "shapes-train", seed: int = 0, epochs: int = 1,
           batch_size: int = 32, workers: int = 0, drop_last: bool = False,
           dtype: Optional[str] = None, layout: str = "nchw", rank: int = 0, world: int = 1,
           on_error: str = "fail", rng_mode: str = "per-sample", threads: int = 1,
           ring: int = 0, resume: Union[None, dict, str, os.PathLike] = None,
           stop_after: Optional[int] = None, timeout: Optional[float] = None,
           cache: Union[None, str, os.PathLike] = None,
           order: str = "global", indices=None, num_samples=None, replacement: bool = False,
           weights=None, repeat: int = 1) -> DigestResult:
    """The manifest and stream digest of this configuration (DigestResult),
    computed by the library in this process: the same lines and the same
    stream digest as `seedpipe digest` with these options. resume: a state
    dict (Loader.state_dict()), its JSON text, or a state file path;
    stop_after: stop after that many batches; cache: an epoch cache
    directory (--cache; its warnings are RuntimeWarnings). Raises
    seedpipe.Error with the C message ("path: reason") when the stream
    fails, ValueError for bad arguments. order: "global", "sequential" or
    "block:K" (--order). indices, num_samples, replacement, weights, repeat:
    the samplers, as Loader's (--indices, --num-samples, --replacement,
    --weights, --repeat). timeout is accepted for compatibility and not
    used."""
    del timeout
    cfg, keep = _loader_config(data, pipeline, seed, epochs, batch_size, on_error, rng_mode)
    if dtype is None:   # as --dtype: float32 when the pipeline normalizes, else uint8
        dtype = default_dtype(pipeline)
    cfg.dtype = check_choice("dtype", dtype, L.DTYPES)
    cfg.layout = check_choice("layout", layout, L.LAYOUTS)
    cfg.threads = check_int("threads", threads, 1, 1024)
    cfg.drop_last = int(bool(drop_last))
    cfg.order, cfg.block_shards = check_order(order)
    keep_sampler = sampler_fields(cfg, indices, num_samples, replacement, weights, repeat)
    cfg.world = check_int("world", world, 1, 64)
    cfg.rank = check_int("rank", rank, 0, cfg.world - 1)
    workers = check_int("workers", workers, 0, 64)
    ring = check_int("ring", ring, 0, 1024)
    if stop_after is not None:
        stop_after = check_int("stop_after", stop_after, 1, 2**63)
    if not L.HAS_STREAM:
        raise Error(EUNSUPP, f"{L.LIB_PATH} has no batch streams (an older library)")
    t0 = time.monotonic()
    s, keep_open = _open_stream(cfg, workers, ring, epochs, resume, cache)
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    f = _open_memstream(byref(buf), byref(size))
    try:
        if not f:
            raise MemoryError("digest: open_memstream failed")
        digests, images = _take_all(s, f, epochs, stop_after)
    finally:
        L.sp_stream_close(s)
        if f:
            _fclose(f)
        text = ctypes.string_at(buf.value, size.value).decode() if buf.value else ""
        _free(buf)
    dt = time.monotonic() - t0
    del keep_sampler   # the arrays cfg pointed at: the stream is closed
    lines = [json.loads(l) for l in text.splitlines() if l.strip()]
    res = DigestResult(lines[1:])
    res.header = lines[0] if lines else {}
    res.stream = L.sp_stream_digest_of((L.sp_digest * len(digests))(*digests),
                                       len(digests)).hex()
    res.images_per_s = images / dt if dt > 0 else 0.0
    res.output = (f"digest: {len(digests)} batches, {images} images in {dt:.2f} s "
                  f"({res.images_per_s:.0f} images/s), stream {res.stream}\n")
    return res


class VerifyResult:
    """The result of verify(): .ok (every configuration gave the reference
    stream), .rows (dicts: configuration, batches, digest (None if the row
    failed), equal (True/False, None for the reference), error, world,
    worker_deaths, divergence (None, or where the row first differs:
    kind, epoch, batch, stream_batch, position, rank, rank_position,
    sample_ref, sample, byte_offset, sample_byte, byte_ref, byte,
    count_ref, count)), .notes (the lines under the table: divergences,
    worker deaths, errors), .skipped (rows not run, with why), .summary,
    .returncode (0 if ok, else 1, as `seedpipe verify` exits) and .output
    (the report as `seedpipe verify` prints it). Built from the library's
    report (sp_verify_json / sp_verify_format), not from the tool's output."""

    def __init__(self, report: dict, text: str):
        self.ok = bool(report["ok"])
        self.summary = report["summary"]
        self.skipped = report.get("skipped", "")
        self.rows: List[dict] = []
        self.notes: List[str] = []
        for r in report["rows"]:
            row = dict(r)
            note = row.pop("note", "")
            self.rows.append(row)
            self.notes += [l.strip() for l in note.splitlines() if l.strip()]
        self.returncode = 0 if self.ok else 1
        self.output = text

    @property
    def digests(self) -> dict:
        return {r["configuration"]: r["digest"] for r in self.rows}

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"VerifyResult(ok={self.ok}, rows={len(self.rows)}, summary={self.summary!r})"


def _c_text(fn, rep) -> str:
    n = fn(rep, None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    fn(rep, buf, n + 1)
    return buf.value.decode("utf-8", "replace")


def verify(data, *, pipeline: str = "shapes-train", seed: int = 0, epochs: int = 1,
           batch_size: int = 32, workers: Iterable[int] = (1, 2), ring: int = 0,
           on_error: str = "fail", rng_mode: str = "per-sample", crash: bool = True,
           resume: bool = True, service: bool = True, cache: bool = True,
           timeout: Optional[float] = None) -> VerifyResult:
    """Verify the determinism contract with the library's sp_verify_run()
    (verify.h; what `seedpipe verify` runs): the same stream in-process, at
    each worker count, with a worker killed, with a stop/resume, through
    the cache and a service; returns a VerifyResult. A mismatch is a result
    with ok=False, not an exception. Raises seedpipe.Error with the C
    message when the stream cannot be opened (e.g. "path: No such file or
    directory"), ValueError for bad arguments. timeout is accepted for
    compatibility and not used (the run is in this process)."""
    del timeout
    ws = list(workers) if not isinstance(workers, int) else [workers]
    if not ws:
        raise ValueError("workers must list at least one worker count")
    ws = [check_int("workers", w, 1, 64) for w in ws]
    if len(ws) > 16:
        raise ValueError(f"workers: at most 16 worker counts, got {len(ws)}")
    cfg, keep = _loader_config(data, pipeline, seed, epochs, batch_size, on_error, rng_mode)
    if not L.HAS_VERIFY:
        raise Error(EUNSUPP, f"{L.LIB_PATH} has no sp_verify_run (an older library)")
    vc = L.sp_verify_config()
    arr = (ctypes.c_int * len(ws))(*ws)
    vc.workers, vc.nworkers, vc.epochs = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int)), len(ws), epochs
    if ring:
        vc.ring_slots = check_int("ring", ring, 1, 1024)
    for flag, on in ((L.VERIFY_NO_CRASH, crash), (L.VERIFY_NO_RESUME, resume),
                     (L.VERIFY_NO_SERVICE, service), (L.VERIFY_NO_CACHE, cache)):
        if not on:
            vc.flags |= flag
    rep = ctypes.c_void_p()
    err = L.sp_error()
    rc = L.sp_verify_run(ctypes.byref(cfg), ctypes.byref(vc), ctypes.byref(rep), ctypes.byref(err))
    if rc != 0:
        raise_error(rc, err, os.fsdecode(data))
    try:
        report = json.loads(_c_text(L.sp_verify_json, rep))
        text = _c_text(L.sp_verify_format, rep)
    finally:
        L.sp_verify_free(rep)
    return VerifyResult(report, text)

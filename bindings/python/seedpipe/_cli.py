"""digest() and verify() as Python functions returning Python objects.
digest() runs the `seedpipe digest` command, found by seedpipe.find_binary()
($SEEDPIPE_BIN, next to libseedpipe.so, the package's _native/ folder, PATH);
verify() calls the library's sp_verify_run() (verify.h) through ctypes."""
from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import tempfile
from typing import Iterable, List, Optional, Union

from . import _lib as L
from ._core import Error, _check_choice, _check_int, _raise

__all__ = ["digest", "verify", "DigestResult", "VerifyResult"]


def _run(args: List[str], timeout: Optional[float]) -> subprocess.CompletedProcess:
    return subprocess.run([L.find_binary(), *args], capture_output=True, text=True,
                          timeout=timeout)


def _cli_error(cmd: str, p: subprocess.CompletedProcess) -> Error:
    text = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}")
    lines = [l for l in text.splitlines() if l.strip()]
    msg = lines[-1] if lines else text
    for prefix in (f"seedpipe {cmd}: ", "seedpipe: "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    e = Error(-1 if "usage" in msg else -3, msg)
    e.returncode, e.output = p.returncode, p.stdout + p.stderr
    return e


def _common(data, pipeline, seed, epochs, batch_size, on_error, rng_mode) -> List[str]:
    if not isinstance(data, (str, bytes, os.PathLike)):
        raise ValueError(f"data must be a dataset path, got {type(data).__name__}")
    if not isinstance(pipeline, str) or not pipeline.strip():
        raise ValueError(f"pipeline must be a non-empty spec string, got {pipeline!r}")
    _check_choice("on_error", on_error, L.ON_ERROR)
    _check_choice("rng_mode", rng_mode, L.RNG_MODES)
    return [os.fsdecode(data), "--pipeline", pipeline,
            "--seed", str(_check_int("seed", seed, 0, 2**64 - 1)),
            "--epochs", str(_check_int("epochs", epochs, 1, 0xFFFFFFFE)),
            "--batch-size", str(_check_int("batch_size", batch_size, 1, 0xFFFFFFFF)),
            "--on-error", on_error, "--rng-mode", rng_mode]


class DigestResult(list):
    """The manifest of `seedpipe digest`: a list of batch dicts (epoch,
    batch, count, indices, labels, digest[, skipped, substituted]) in
    stream order, plus .header (the manifest's first line), .stream (the
    stream digest: XXH3-128 over the batch digests), .images_per_s and
    .output (the tool's stdout + stderr)."""

    header: dict
    stream: str
    images_per_s: float
    output: str

    @property
    def digests(self) -> List[str]:
        return [b["digest"] for b in self]


def digest(data, pipeline: str = "shapes-train", seed: int = 0, epochs: int = 1,
           batch_size: int = 32, workers: int = 0, drop_last: bool = False,
           dtype: str = "uint8", layout: str = "nchw", rank: int = 0, world: int = 1,
           on_error: str = "fail", rng_mode: str = "per-sample", threads: int = 1,
           ring: int = 0, resume: Union[None, dict, str, os.PathLike] = None,
           stop_after: Optional[int] = None, timeout: Optional[float] = 600,
           cache: Union[None, str, os.PathLike] = None) -> DigestResult:
    """Run `seedpipe digest` on this configuration and return its manifest
    (DigestResult). resume: a state dict (Loader.state_dict()), its JSON
    text, or a state file path. cache: an epoch cache directory (--cache).
    Raises seedpipe.Error with the tool's message ("path: reason") when it
    fails."""
    args = ["digest", *_common(data, pipeline, seed, epochs, batch_size, on_error, rng_mode),
            "--dtype", _name("dtype", dtype, L.DTYPES),
            "--layout", _name("layout", layout, L.LAYOUTS),
            "--threads", str(_check_int("threads", threads, 1, 1024)),
            "--workers", str(_check_int("workers", workers, 0, 64))]
    world = _check_int("world", world, 1, 64)
    args += ["--rank", str(_check_int("rank", rank, 0, world - 1)), "--world", str(world)]
    if ring:
        args += ["--ring", str(_check_int("ring", ring, 1, 1024))]
    if drop_last:
        args.append("--drop-last")
    if cache is not None:
        args += ["--cache", os.fsdecode(cache)]
    with tempfile.TemporaryDirectory(prefix="seedpipe-digest-") as tmp:
        if resume is not None:
            if isinstance(resume, dict):
                path = os.path.join(tmp, "resume.json")
                with open(path, "w") as f:
                    f.write(json.dumps(resume, separators=(",", ":")) + "\n")
            elif isinstance(resume, str) and resume.lstrip().startswith("{"):
                path = os.path.join(tmp, "resume.json")
                with open(path, "w") as f:
                    f.write(resume.strip() + "\n")
            else:
                path = os.fsdecode(resume)
            args += ["--resume", path]
        if stop_after is not None:
            args += ["--stop-after", str(_check_int("stop_after", stop_after, 1, 2**63)),
                     "--save-state", os.path.join(tmp, "state.json")]
        out = os.path.join(tmp, "manifest.jsonl")
        args += ["--out", out]
        p = _run(args, timeout)
        if p.returncode != 0:
            raise _cli_error("digest", p)
        res = DigestResult()
        with open(out) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    res.header = lines[0] if lines else {}
    res.extend(lines[1:])
    text = p.stdout + p.stderr
    res.output = text
    m = re.search(r"stream ([0-9a-f]{32})", text)
    res.stream = m.group(1) if m else ""
    m = re.search(r"\(([0-9.]+) images/s\)", text)
    res.images_per_s = float(m.group(1)) if m else 0.0
    return res


def _name(arg: str, value, table: dict) -> str:
    code = _check_choice(arg, value, table)
    return next(k for k, v in table.items() if v == code)


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


def verify(data, pipeline: str = "shapes-train", seed: int = 0, epochs: int = 1,
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
    ws = [_check_int("workers", w, 1, 64) for w in ws]
    if len(ws) > 16:
        raise ValueError(f"workers: at most 16 worker counts, got {len(ws)}")
    _common(data, pipeline, seed, epochs, batch_size, on_error, rng_mode)   # checks only
    if not L.HAS_VERIFY:
        raise Error(-9, f"{L.LIB_PATH} has no sp_verify_run (an older library)")
    cfg = L.sp_loader_config()
    L.sp_loader_config_default(ctypes.byref(cfg))
    keep = (os.fsencode(data), pipeline.encode())
    cfg.dataset, cfg.pipeline, cfg.seed, cfg.batch_size = keep[0], keep[1], seed, batch_size
    cfg.on_error, cfg.rng_mode = L.ON_ERROR[on_error.lower()], L.RNG_MODES[rng_mode.lower()]
    vc = L.sp_verify_config()
    arr = (ctypes.c_int * len(ws))(*ws)
    vc.workers, vc.nworkers, vc.epochs = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int)), len(ws), epochs
    if ring:
        vc.ring_slots = _check_int("ring", ring, 1, 1024)
    for flag, on in ((L.VERIFY_NO_CRASH, crash), (L.VERIFY_NO_RESUME, resume),
                     (L.VERIFY_NO_SERVICE, service), (L.VERIFY_NO_CACHE, cache)):
        if not on:
            vc.flags |= flag
    rep = ctypes.c_void_p()
    err = L.sp_error()
    rc = L.sp_verify_run(ctypes.byref(cfg), ctypes.byref(vc), ctypes.byref(rep), ctypes.byref(err))
    if rc != 0:
        _raise(rc, err, os.fsdecode(data))
    try:
        report = json.loads(_c_text(L.sp_verify_json, rep))
        text = _c_text(L.sp_verify_format, rep)
    finally:
        L.sp_verify_free(rep)
    return VerifyResult(report, text)

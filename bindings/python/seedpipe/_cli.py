"""digest() and verify(): the `seedpipe digest` / `seedpipe verify` commands
as Python functions returning Python objects. The tool is found by
seedpipe.find_binary() ($SEEDPIPE_BIN, next to libseedpipe.so, the
package's _native/ folder, PATH)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from typing import Iterable, List, Optional, Union

from . import _lib as L
from ._core import Error, _check_choice, _check_int

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
    """The result of `seedpipe verify`: .ok (every configuration gave the
    reference stream), .rows (dicts: configuration, batches, digest, equal
    (True/False, None for the reference)), .notes (the lines under the
    table: divergences, worker deaths), .summary (the last line),
    .returncode, .output."""

    def __init__(self, p: subprocess.CompletedProcess):
        self.returncode = p.returncode
        self.output = p.stdout + p.stderr
        self.rows: List[dict] = []
        self.notes: List[str] = []
        self.summary = ""
        row = re.compile(r"^(.*?)\s+(\d+)\s+([0-9a-f]{32})\s+(reference|yes|NO)\s*$")
        for line in p.stdout.splitlines():
            m = row.match(line)
            if m:
                eq = {"reference": None, "yes": True, "NO": False}[m.group(4)]
                self.rows.append({"configuration": m.group(1).strip(),
                                  "batches": int(m.group(2)), "digest": m.group(3),
                                  "equal": eq})
            elif line.startswith("verify:"):
                self.summary = line[len("verify:"):].strip()
            elif line.startswith("  "):
                self.notes.append(line.strip())
        self.ok = (p.returncode == 0 and bool(self.rows)
                   and all(r["equal"] is not False for r in self.rows))

    @property
    def digests(self) -> dict:
        return {r["configuration"]: r["digest"] for r in self.rows}

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"VerifyResult(ok={self.ok}, rows={len(self.rows)}, summary={self.summary!r})"


def verify(data, pipeline: str = "shapes-train", seed: int = 0, epochs: int = 1,
           batch_size: int = 32, workers: Iterable[int] = (1, 2), ring: int = 0,
           on_error: str = "fail", rng_mode: str = "per-sample", crash: bool = True,
           resume: bool = True, service: bool = True, cache: bool = True,
           timeout: Optional[float] = 600) -> VerifyResult:
    """Run `seedpipe verify` (the same stream in-process, at each worker
    count, with a worker killed, with a stop/resume, through the cache and a
    service) and return a VerifyResult; a mismatch is a result with
    ok=False, not an exception. Raises seedpipe.Error if the tool fails."""
    ws = list(workers) if not isinstance(workers, int) else [workers]
    if not ws:
        raise ValueError("workers must list at least one worker count")
    ws = [_check_int("workers", w, 1, 64) for w in ws]
    args = ["verify", *_common(data, pipeline, seed, epochs, batch_size, on_error, rng_mode),
            "--workers", ",".join(map(str, ws))]
    if ring:
        args += ["--ring", str(_check_int("ring", ring, 1, 1024))]
    for flag, on in (("--no-crash", crash), ("--no-resume", resume), ("--no-service", service),
                     ("--no-cache", cache)):
        if not on:
            args.append(flag)
    p = _run(args, timeout)
    res = VerifyResult(p)
    if p.returncode != 0 and not res.rows:
        raise _cli_error("verify", p)
    return res

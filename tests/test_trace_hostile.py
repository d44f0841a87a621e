"""test_trace_hostile.py - traces on a full disk and `trace-summary` on
hostile files (docs/tracing.md "Limits"; issue 38).

 - `digest --trace` into a full tmpfs (1 MiB, mounted by this test, filled;
   skipped visibly where mounting is not permitted): a named error at start
   naming ENOSPC and the parts directory, never a signal (the recorder
   mapped sparse pages and died of SIGBUS, exit 135); no FILE.parts-PID left.
 - a tmpfs with room for the consumer's part only (4 MiB, 2 workers): the
   run ends with the stream of a run without a trace, exit 0, a warning
   that the trace is truncated (ENOSPC), a trace file that is JSON, no parts
   left.
 - trace-summary of a 2 GB sparse file: refused on its size (the limit
   named) in well under 5 s, never read whole.
 - trace-summary escapes control bytes of process_name and span names
   (`seedpipe status`'s rule, \\xNN): no ESC reaches the terminal.
 - a trace without spans is summarised (0 spans; it used to call
   qsort(NULL, 0): UBSan), a bad "ts" is a named error (it used to leak
   the span array: LeakSanitizer; both show in the sanitizer build).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cli_testlib import run

BIN = os.environ.get("SEEDPIPE_BIN")
COMMON = ["--pipeline", "shapes-train", "--seed", 3, "--epochs", 1, "--batch-size", 8]
skipped = []


def skip(what, why):
    print(f"SKIP: {what}: {why}", flush=True)
    skipped.append(what)


def mount(mnt, size):
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", mnt],
                       capture_output=True, text=True)
    return None if p.returncode == 0 else p.stderr.strip()


def fill(path):
    """Write zeros to path until the file system is full."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def digest_of(p):
    for line in p.stdout.splitlines():
        if line.startswith("digest:"):
            return line.rsplit(" ", 1)[1]
    raise AssertionError(p.stdout + p.stderr)


def full_disk(tmp, ds):
    mnt = os.path.join(tmp, "full")
    why = mount(mnt, "1m")
    if why:
        skip("traces on a full disk (tmpfs)", f"mount not permitted: {why}")
        return
    try:
        fill(os.path.join(mnt, "filler"))
        tr = os.path.join(mnt, "t.json")
        p = run("digest", ds, *COMMON, "--workers", 2, "--trace", tr, "--out", "/dev/null",
                ok=False)
        assert p.returncode == 1, (p.returncode, p.stderr)   # an error, not a signal
        assert "(ENOSPC)" in p.stderr and f"{tr}.parts-" in p.stderr, p.stderr
        assert sorted(os.listdir(mnt)) == ["filler"], os.listdir(mnt)
        print(f"trace on a full disk: a named error at start: {p.stderr.strip()}", flush=True)
    finally:
        subprocess.run(["umount", mnt])
    mnt = os.path.join(tmp, "small")
    why = mount(mnt, "4m")
    if why:
        skip("a trace truncated on a small disk (tmpfs)", why)
        return
    try:
        ref = digest_of(run("digest", ds, *COMMON, "--workers", 2, "--out", "/dev/null"))
        tr = os.path.join(mnt, "t.json")
        p = run("digest", ds, *COMMON, "--workers", 2, "--trace", tr, "--out", "/dev/null")
        assert digest_of(p) == ref
        assert "--trace: warning: trace" in p.stderr and "truncated" in p.stderr and \
            "(ENOSPC)" in p.stderr, p.stderr
        with open(tr) as f:
            doc = json.load(f)
        assert doc["traceEvents"], doc
        assert sorted(os.listdir(mnt)) == ["t.json"], os.listdir(mnt)
        print(f"trace on a small disk: the same stream, exit 0, {p.stderr.strip()}", flush=True)
    finally:
        subprocess.run(["umount", mnt])


def summary_inputs(tmp):
    sparse = os.path.join(tmp, "sparse.json")
    with open(sparse, "wb") as f:
        f.truncate(2_000_000_000)
    t0 = time.monotonic()
    p = run("trace-summary", sparse, ok=False)
    took = time.monotonic() - t0
    assert p.returncode != 0 and "file is 2000000000 bytes, limit 268435456" in p.stderr, \
        p.stderr
    assert took < 5, took
    print(f"trace-summary: a 2 GB sparse file refused on its size in {took:.2f} s", flush=True)

    esc = os.path.join(tmp, "esc.json")
    with open(esc, "w") as f:
        json.dump({"traceEvents": [
            {"name": "process_name", "ph": "M", "pid": 7, "args": {"name": "\x1b[2J\nevil\\"}},
            {"name": "work\x1b]0;pwned\x07", "ph": "X", "pid": 7, "ts": 0, "dur": 5},
            {"name": "\x1b[31mred", "ph": "X", "pid": 7, "ts": 10, "dur": 5},
            {"name": "work", "ph": "X", "pid": 7, "ts": 100, "dur": 5}]}, f)
    p = run("trace-summary", esc)
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout, repr(p.stdout)
    assert "\\x1b[2J\\x0aevil\\x5c" in p.stdout, p.stdout
    print("trace-summary: control bytes in process_name and span names escaped (\\xNN)",
          flush=True)

    empty = os.path.join(tmp, "empty.json")
    with open(empty, "w") as f:
        f.write('{"traceEvents":[],"otherData":{"dropped":3}}')
    p = run("trace-summary", empty)
    assert "0 processes, 0 spans (3 dropped)" in p.stdout, p.stdout
    meta = os.path.join(tmp, "meta.json")
    with open(meta, "w") as f:
        f.write('{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"args":{"name":"a"}}]}')
    p = run("trace-summary", meta)
    assert "1 processes, 0 spans" in p.stdout, p.stdout
    bad = os.path.join(tmp, "badts.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents":[' + ",".join(
            f'{{"name":"a","ph":"X","pid":1,"ts":{k},"dur":1}}' for k in range(2000)) +
            ',{"name":"a","ph":"X","pid":1,"ts":"x","dur":1}]}')
    p = run("trace-summary", bad, ok=False)
    assert p.returncode == 1 and "\"X\" without a numeric ts and dur" in p.stderr, p.stderr
    assert "LeakSanitizer" not in p.stderr, p.stderr
    for text, why in [('{"traceEvents":[{"ph":"X"', "expected an event"),
                      ('{"traceEvents":[1 2]}', "expected ',' or ']'"),
                      ('[]', "not a JSON object"),
                      ('{"x":1}', "no \"traceEvents\" array"),
                      ('{"traceEvents":[]} x', "bytes after the object")]:
        with open(bad, "w") as f:
            f.write(text)
        p = run("trace-summary", bad, ok=False)
        assert p.returncode == 1 and why in p.stderr and bad in p.stderr, (text, p.stderr)
    print("trace-summary: no spans, only metadata: summarised; a bad ts and broken files: "
          "named errors", flush=True)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-trace-hostile-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 48, "--size", 16, "--seed", 5)
        summary_inputs(tmp)
        full_disk(tmp, ds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("trace hostile: ok" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""test_cache_cli.py - `seedpipe cache build|ls|verify|gc` end to end.

Builds two epochs of a small shapes set into a cache, lists them, verifies
them (with a byte-for-byte recompute), damages one batch file (verify fails
naming it; build reports it, moves the entry aside and rebuilds it), and
collects by size. Skips (77) while the `cache` command is not wired into the
tool. Standard library only; the tool is $SEEDPIPE_BIN.
"""
import glob
import os
import subprocess
import sys
import tempfile

BIN = os.environ.get("SEEDPIPE_BIN", "seedpipe")


def run(*args, ok=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if ok is True and p.returncode != 0:
        sys.exit(f"FAIL: seedpipe {' '.join(args)}: rc {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def main():
    with tempfile.TemporaryDirectory() as tmp:
        data, cache = os.path.join(tmp, "shapes"), os.path.join(tmp, "cache")
        probe = run("cache", "ls", tmp, ok=None)
        if "unknown command" in probe.stderr:
            print("SKIP: the cache command is not in this build's dispatch table")
            return 77
        run("make-shapes", data, "--count", "60", "--size", "32")
        common = ["--pipeline", "shapes-train", "--seed", "5", "--batch-size", "16"]
        p = run("cache", "build", data, "--cache", cache, *common, "--epochs", "0-1",
                "--level", "5")
        assert "2 committed" in p.stdout, p.stdout
        p = run("cache", "build", data, "--cache", cache, *common, "--epochs", "2")
        assert "2 already cached and verified, 0 committed" in p.stdout, p.stdout
        p = run("cache", "ls", cache)
        assert "2 entries" in p.stdout, p.stdout
        p = run("cache", "verify", cache, "--recompute", "6")
        assert "0 problems" in p.stdout and "6 batches recomputed" in p.stdout, p.stdout
        # Damage one batch file: verify names it and fails; build repairs it.
        victim = sorted(glob.glob(os.path.join(cache, "*", "b00000001")))[0]
        with open(victim, "r+b") as f:
            f.seek(300)
            b = f.read(1)
            f.seek(300)
            f.write(bytes([b[0] ^ 0x10]))
        p = run("cache", "verify", cache, ok=None)
        assert p.returncode == 1 and victim in p.stdout and "checksum" in p.stdout, p.stdout
        p = run("cache", "build", data, "--cache", cache, *common, "--epochs", "2")
        assert victim in p.stderr and "moved to" in p.stderr, p.stderr
        assert "1 committed" in p.stdout, p.stdout
        p = run("cache", "verify", cache)
        assert "0 problems" in p.stdout, p.stdout
        # gc: down to nothing, then a bad size is a usage error.
        p = run("cache", "gc", cache, "--max-size", "0")
        assert "2 of 2 entries evicted" in p.stdout, p.stdout
        assert "0 entries" in run("cache", "ls", cache).stdout
        assert run("cache", "gc", cache, "--max-size", "12Q", ok=None).returncode == 2
        assert run("cache", "frobnicate", ok=None).returncode == 2
    print("test_cache_cli: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

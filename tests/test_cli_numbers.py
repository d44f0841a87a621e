"""test_cli_numbers.py - the tool's command line: numbers, repeated options, the help (stdlib only).

Numbers (issue 25, item 3): every number option of every command reads
decimal digits only, the whole word (010 is refused, as tests/philox_ref.py
reads it), and refuses 0x10, -1, +1, " 5", "5 ", "", "1e3" and an overflow
with exit 2 and a message naming the option and the value; the lists
(--workers 1,2, --seeds, --epochs A-B, --ranks A-B) by the same rule;
`rng`'s words are 1 to 8 hex digits, optionally after 0x. The same in
tests/philox_ref.py, and the two diff equal on the same words.
Epochs: --epoch-start 4294967295 --epochs 1 gives that epoch (its order is
`order --epoch 4294967295`'s), 4294967295 + 2 is refused; the in-process
path that epoch takes gives the stream's bytes on epoch 4294967294.
Options: one given twice is a usage error; `seedpipe CMD --help` lists
what the command reads (--dtype for verify) and exits 0 for every command;
every command's lookups run to its unknown-option check without the tool
stopping on an option its help does not list (cli_help.c).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("SEEDPIPE_BIN")
HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "philox_ref.py")

BAD = ["0x10", "-1", "+1", " 5", "5 ", "", "1e3", "99999999999999999999", "1_0", "\u0661"]


def run(*args, ok=True, stdin=None):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, input=stdin,
                       timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"seedpipe {' '.join(map(str, args))} failed ({p.returncode}): "
                             f"{p.stderr}")
    return p


def ref(*args, ok=True):
    p = subprocess.run([sys.executable, REF, *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"philox_ref {' '.join(map(str, args))} failed: {p.stderr}")
    return p


def refused(p, opt, value, what):
    """Exit 2, and stderr names --opt and the value (or its bad item)."""
    assert p.returncode == 2, f"{what}: exit {p.returncode}, stdout {p.stdout!r} {p.stderr!r}"
    assert f"--{opt}" in p.stderr and f'"{value}"' in p.stderr, f"{what}: {p.stderr!r}"
    assert "internal error" not in p.stderr, p.stderr


def check_numbers(ds, tmp):
    out = os.path.join(tmp, "m.jsonl")
    dig = ["digest", ds, "--batch-size", 8, "--out", out]
    # (command prefix, option, a good value): each option refuses every bad form
    ver = ["verify", ds, "--batch-size", 8, "--no-crash", "--no-service", "--no-cache",
           "--no-resume"]
    cb = ["cache", "build", ds, "--cache", os.path.join(tmp, "c"), "--batch-size", 8]
    tr = ["train", ds, "--batch-size", 8, "--out", os.path.join(tmp, "r.json")]
    cases = [
        (["order", "--n", 10, "--epoch", 0], "seed", 3),
        (["order", "--n", 10, "--seed", 1], "epoch", 3),
        (["order", "--seed", 1, "--epoch", 0], "n", 10),
        (["rng", "--stream", "shuffle"], "seed", 3),
        (["rng", "--seed", 1, "--stream", "worker"], "worker", 3),
        (["make-shapes", os.path.join(tmp, "never")], "count", 20),
        (["make-shapes", os.path.join(tmp, "never")], "size", 32),
        (["inspect", ds], "split-seed", 3),
        (["index", ds], "threads", 1),
        (["shard", ds, os.path.join(tmp, "never")], "max-count", 5),
        (["explain", ds, "--epoch", 0], "sample", 3),
        (["explain", ds, "--sample", 1], "epoch", 3),
        (["dump", ds, "--out", os.path.join(tmp, "g.png")], "batch", 0),
        (dig, "seed", 3), (dig, "epochs", 1), (dig, "epoch-start", 2), (dig, "threads", 1),
        (dig, "workers", 0), (dig, "ring", 4), (dig, "world", 1), (dig, "stop-after", 1),
        (["digest", ds, "--out", out], "batch-size", 8),
        (ver + ["--workers", 1], "epochs", 1), (ver, "workers", 1), (ver, "world", 1),
        (cb, "epochs", 1), (cb, "workers", 0), (cb, "epoch-start", 0),
        (["cache", "verify", os.path.join(tmp, "c")], "recompute", 0),
        (tr, "epochs", 1), (tr, "seeds", 1), (tr, "train-threads", 1),
        (tr, "checkpoint-every", 1), (tr, "cuda-device", 0),
        (["gcn-demo", "--nodes", 50], "runs", 2),
        (["gcn-demo", "--runs", 1], "nodes", 50),
    ]
    for pre, opt, good in cases:
        for bad in BAD:
            refused(run(*pre, f"--{opt}", bad, ok=False), opt, bad, f"{pre[0]} --{opt} {bad!r}")
    # lists: a bad item is named with the whole value
    for pre, opt, v, item in [
            (ver, "workers", "1,0x2", "0x2"), (ver, "workers", "1,,2", ""),
            (ver, "workers", "1, 2", " 2"), (ver, "workers", "1,65", "65"),
            (cb, "epochs", "0-0x3", "0x3"), (cb, "epochs", "3-1", "1"),
            (cb, "epochs", "0,-1", ""), (tr, "seeds", "1,-2", "-2"),
            (["serve", "--name", "sp-test-numbers", ds, "--workers", 1, "--world", 4], "ranks",
             "1-07x", "1-07x"),
            (["serve", "--name", "sp-test-numbers", ds, "--workers", 1, "--world", 4], "ranks",
             "1-+2", "1-+2")]:
        p = run(*pre, f"--{opt}", v, ok=False)
        assert p.returncode == 2 and f"--{opt}" in p.stderr and f'"{item}"' in p.stderr, \
            (opt, v, p.stderr)
    # a leading zero is refused (the tool read 010 as octal 8 before: a stored
    # command line fails instead of giving another stream), here and in the
    # reference; a lone 0 is zero
    for prog in (run, ref):
        for opt, v in (("seed", "010"), ("epoch", "007"), ("n", "08")):
            args = {"seed": 1, "epoch": 0, "n": 50}
            args[opt] = v
            p = prog("order", "--n", args["n"], "--seed", args["seed"], "--epoch", args["epoch"],
                     ok=False)
            assert p.returncode == 2 and f"--{opt}" in p.stderr and "leading zero" in p.stderr, \
                (prog, opt, p.stderr)
    assert run("order", "--n", 50, "--seed", 0, "--epoch", 0).stdout == \
        ref("order", "--n", 50, "--seed", "0", "--epoch", "0").stdout
    p = run(*dig, "--seed", "10", "--batch-size", "8", ok=False)
    assert p.returncode == 2 and "--batch-size given twice" in p.stderr, p.stderr
    for v in ("08", "00"):
        p = run("digest", ds, "--batch-size", v, "--seed", 1, "--out", out, ok=False)
        assert p.returncode == 2 and "leading zero" in p.stderr, p.stderr
    # ranges: the option's own
    nob = ["digest", ds, "--out", out]
    for pre, opt, v in [(nob, "batch-size", 0), (nob, "batch-size", 1048577), (dig, "rank", 1),
                        (["order", "--n", 10, "--seed", 1], "epoch", 4294967296),
                        (["order", "--seed", 1, "--epoch", 0], "n", 0)]:
        refused(run(*pre, f"--{opt}", v, ok=False), opt, v, f"--{opt} {v}")
    # real numbers: decimals only
    for v in ["0x1p-3", "inf", "nan", "-0.1", " 0.1", "", ".", "1e", "2"]:
        refused(run("gcn-demo", "--runs", 1, "--nodes", 20, "--p", v, ok=False), "p", v, v)
    run("gcn-demo", "--runs", 1, "--nodes", 20, "--p", "5e-2", "--threads", "1")
    # a signed one: the zstd level
    c = ["cache", "build", ds, "--cache", os.path.join(tmp, "c2"), "--batch-size", 8]
    for v in ["- 5", "--5", "+3", "23", "-131073", "0x3"]:
        refused(run(*c, "--level", v, ok=False), "level", v, f"--level {v}")


def check_rng_words():
    good = ["0", "ffffffff", "FFFFFFFF", "0x0", "0X2a", "00000001", "0xDeadBeef"]
    want = run("rng", "--key", "0", "0", "--counter", "0", "0", "0", "0").stdout
    assert want.strip() == "6627e8d5 e169c58d bc57ac4c 9b00dbd8", want
    for w in good:
        args = ["rng", "--key", w, "1", "--counter", "2", w, "3", "4"]
        c, r = run(*args).stdout, ref(*args).stdout
        assert c == r and len(c.split()) == 4, (w, c, r)
    for w in ["", "x", "0x", "123456789", "0x123456789", "-1", "+1", " 1", "1 ", "g", "0x-1", "1h",
              "1_0"]:
        for opt, args in [("key", ["--key", "0", w, "--counter", 0, 0, 0, 0]),
                          ("counter", ["--key", 0, 0, "--counter", 0, 0, w, 0])]:
            refused(run("rng", *args, ok=False), opt, w, f"rng --{opt} {w!r}")
            p = ref("rng", *args, ok=False)
            assert p.returncode == 2 and f"--{opt}" in p.stderr, (w, p.stderr)
    p = run("rng", "--batch", stdin="0 0 0 0 0 1x\n", ok=False)
    assert p.returncode == 1 and "line 1" in p.stderr, p.stderr
    # the reference reads every number option by the same rule
    for bad in BAD:
        for args in (["order", "--n", 10, "--seed", bad, "--epoch", 0],
                     ["order", "--n", 10, "--seed", 1, "--epoch", bad],
                     ["order", "--n", bad, "--seed", 1, "--epoch", 0],
                     ["rng", "--seed", bad, "--stream", "init"],
                     ["rng", "--seed", 1, "--stream", "worker", "--worker", bad]):
            p = ref(*args, ok=False)
            assert p.returncode == 2 and repr(bad).strip("'") in p.stderr, (args, p.stderr)
            assert run(*args, ok=False).returncode == 2, args
    p = ref("order", "--n", 10, "--seed", 1, "--seed", 2, "--epoch", 0, ok=False)
    assert p.returncode == 2 and "twice" in p.stderr, p.stderr


def check_epochs(ds, tmp):
    last = 4294967295
    p = run("digest", ds, "--batch-size", 8, "--epoch-start", last, "--epochs", 1, "--out", "-")
    rows = [json.loads(x) for x in p.stdout.splitlines()[1:]]
    assert rows and {r["epoch"] for r in rows} == {last}, rows[:1]
    order = [int(x) for x in run("order", ds, "--seed", 0, "--epoch", last).stdout.split()]
    assert [i for r in rows for i in r["indices"]] == order
    for start, n in [(last, 2), (last - 1, 3), (1, last + 1)]:
        p = run("digest", ds, "--epoch-start", start, "--epochs", n, "--out", "-", ok=False)
        assert p.returncode == 2 and "--epoch-start" in p.stderr and "--epochs" in p.stderr, \
            p.stderr
    refused(run("digest", ds, "--epoch-start", last + 1, "--out", "-", ok=False), "epoch-start",
            last + 1, "epoch-start 2^32")
    # epoch 2^32-2 two ways: streamed (the range ends before 2^32-1) and the
    # in-process loader (the range reaches it); the pool as the stream
    a, b, c = (os.path.join(tmp, f"e{k}.jsonl") for k in "abc")
    run("digest", ds, "--batch-size", 8, "--epoch-start", last - 1, "--epochs", 2, "--out", a)
    run("digest", ds, "--batch-size", 8, "--epoch-start", last - 1, "--out", b)
    run("digest", ds, "--batch-size", 8, "--epoch-start", last - 1, "--workers", 2, "--out", c)
    la, lb, lc = (open(x).read().splitlines()[1:] for x in (a, b, c))
    assert la[:len(lb)] == lb == lc and len(la) == 2 * len(lb)
    # a start in the middle: the same lines as the run from 0
    run("digest", ds, "--batch-size", 8, "--epochs", 3, "--out", a)
    run("digest", ds, "--batch-size", 8, "--epoch-start", 1, "--epochs", 2, "--out", b)
    la, lb = (open(x).read().splitlines()[1:] for x in (a, b))
    assert la[len(la) // 3:] == lb and len(lb) == 2 * len(la) // 3
    # stop, save, resume within a started range
    st, st1 = os.path.join(tmp, "st.json"), os.path.join(tmp, "st1.json")
    run("digest", ds, "--batch-size", 8, "--epoch-start", 1, "--epochs", 2, "--out", c,
        "--stop-after", 3, "--save-state", st)
    run("digest", ds, "--batch-size", 8, "--epoch-start", 1, "--epochs", 2, "--out", c,
        "--resume", st)
    assert open(c).read().splitlines()[1:] == lb[3:]
    run("digest", ds, "--batch-size", 8, "--epoch-start", 1, "--epochs", 2, "--out", c,
        "--stop-after", 1, "--save-state", st1)
    p = run("digest", ds, "--batch-size", 8, "--epoch-start", 2, "--epochs", 1, "--out", c,
            "--resume", st1, ok=False)
    assert p.returncode == 2 and "--epoch-start" in p.stderr, p.stderr
    p = run("digest", ds, "--epoch-start", last, "--workers", 2, "--out", c, ok=False)
    assert p.returncode == 2 and "4294967295" in p.stderr, p.stderr
    # cache build: a count from --epoch-start; the last epoch refused with a reason
    cd = os.path.join(tmp, "cache")
    run("cache", "build", ds, "--cache", cd, "--batch-size", 8, "--epoch-start", 5, "--epochs", 2)
    eps = sorted(int(ln.split()[1]) for ln in run("cache", "ls", cd).stdout.splitlines()[1:-1])
    assert eps == [5, 6], eps
    for args in (["--epoch-start", last], ["--epochs", f"{last - 1}-{last}"]):
        p = run("cache", "build", ds, "--cache", cd, "--batch-size", 8, *args, ok=False)
        assert p.returncode == 2 and "4294967295" in p.stderr, p.stderr
    p = run("cache", "build", ds, "--cache", cd, "--epoch-start", 1, "--epochs", "1-2", ok=False)
    assert p.returncode == 2 and "--epoch-start" in p.stderr, p.stderr


COMMANDS = ["make-shapes", "inspect", "index", "shard", "split", "explain", "digest", "verify",
            "serve", "status", "diff", "cache", "train", "dump", "order", "rng", "gcn-demo",
            "env", "version"]


def check_help_and_options(ds, tmp):
    for c in COMMANDS:
        p = run(c, "--help")
        assert p.stdout.startswith("usage: seedpipe\n") and f"  {c}" in p.stdout, (c, p.stdout)
        assert run("help", c).stdout == p.stdout
    for sub in ["build", "ls", "verify", "gc"]:
        p = run("cache", sub, "--help")
        assert f"cache {sub}" in p.stdout and p.stdout.count("  cache ") == 1, p.stdout
    every = run("help").stdout
    for c in COMMANDS:
        assert f"\n  {c} " in every or f"\n  {c}\n" in every, c
    d = run("digest", "--help").stdout
    for opt in ["dtype", "layout", "epoch-start", "epochs", "workers", "threads", "split",
                "save-state", "resume", "cache", "on-error", "rng-mode", "ring", "drop-last"]:
        assert f"--{opt} " in d or f"--{opt}]" in d, opt
    assert "--dtype" in run("verify", "--help").stdout
    assert "--dtype" not in run("explain", "--help").stdout   # it computes nothing
    assert run("help", "frobnicate", ok=False).returncode == 2
    # every command's lookups, then its unknown-option check (never "internal error")
    tmpf = os.path.join(tmp, "x")
    ctx = [("make-shapes", tmpf), ("inspect", ds), ("index", ds), ("shard", ds, tmpf),
           ("split", ds), ("explain", ds, "--sample", 1), ("digest", ds, "--out", "-"),
           ("digest", ds, "--out", "-", "--stop-after", 1, "--save-state", tmpf),
           ("verify", ds), ("verify", ds, "--rank", 0, "--world", 2),
           ("serve", ds, "--name", "x", "--workers", 1, "--world", 2, "--ranks", "0-1"),
           ("status", "x"), ("diff", "a", "b"), ("cache", "build", ds, "--cache", tmpf),
           ("cache", "ls", tmpf), ("cache", "verify", tmpf), ("cache", "gc", tmpf, "--max-size", "1G"),
           ("train", ds, "--out", tmpf), ("dump", ds, "--out", tmpf), ("order", ds),
           ("order", ds, "--split", "a=0.5,b=0.5", "--subset", "a"), ("rng", "--batch"),
           ("rng", "--key", 0, 0, "--counter", 0, 0, 0, 0),
           ("rng", "--seed", 1, "--stream", "worker", "--worker", 1), ("gcn-demo",), ("env",)]
    for args in ctx:
        p = run(*args, "--zzz", 1, ok=False)
        assert p.returncode == 2 and "unknown option --zzz" in p.stderr, (args, p.stderr)
    # an option given twice
    for args in [("digest", ds, "--seed", 1, "--seed", 2, "--out", "-"),
                 ("order", "--n", 5, "--epoch", 0, "--epoch", 0),
                 ("rng", "--key", 0, 0, "--key", 0, 0, "--counter", 0, 0, 0, 0),
                 ("verify", ds, "--no-cache", "--no-cache")]:
        p = run(*args, ok=False)
        key = args[2] if args[0] != "order" else "--epoch"
        key = {"rng": "--key", "verify": "--no-cache"}.get(args[0], key)
        assert p.returncode == 2 and f"{key} given twice" in p.stderr, (args, p.stderr)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-cli-numbers-")
    try:
        ds = os.path.join(tmp, "ds")
        run("make-shapes", ds, "--count", 20, "--size", 16)
        check_help_and_options(ds, tmp)
        check_numbers(ds, tmp)
        check_rng_words()
        check_epochs(ds, tmp)
    finally:
        shutil.rmtree(tmp)
    print("cli numbers: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

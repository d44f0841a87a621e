"""test_cli_newuser.py - what a new user of the tool meets first (issue 39
item 8), end to end (stdlib only).

Asserts: `-h` and `--help` after every command (and cache's subcommands,
and after other arguments, as `digest DATASET -h`) print that command's help
on stdout and exit 0, never a usage error about a missing option; a
mistyped preset (`--pipeline imagenet_train`) is refused naming the closest
preset (did you mean "imagenet-train"?) with every preset and every op
listed, a mistyped op names the closest op; `--pipeline imagenet-train`
without --dtype runs, in float32 (the same stream as --dtype float32),
while an explicit --dtype uint8 stays an error and a pipeline that does
not normalize stays uint8 (the same stream as --dtype uint8).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_testlib import run  # noqa: E402

COMMANDS = ["make-shapes", "inspect", "index", "shard", "split", "explain", "digest", "dump",
            "verify", "diff", "serve", "status", "order", "rng", "cache", "train", "gcn-demo",
            "env", "trace-summary", "version"]
PRESETS = ["imagenet-train", "imagenet-eval", "shapes-train", "shapes-eval", "mnist",
           "imagenet-train-fast", "imagenet-eval-fast"]
OPS = ["decode", "random_resized_crop", "resize", "center_crop", "hflip", "vflip",
       "color_jitter", "grayscale", "normalize"]


def stream(p):
    return p.stdout.split("stream ")[1].split()[0]


def help_everywhere(ds):
    cases = [[c, flag] for c in COMMANDS for flag in ("-h", "--help")]
    cases += [["cache", sub, "-h"] for sub in ("build", "ls", "verify", "gc")]
    cases += [["digest", ds, "-h"], ["digest", ds, "--seed", "1", "-h"], ["index", ds, "-h"]]
    for args in cases:
        p = run(*args, ok=False)
        name = args[0] if args[0] != "cache" or args[1].startswith("-") else f"cache {args[1]}"
        assert p.returncode == 0 and p.stdout.startswith("usage: seedpipe") and \
            name.split()[-1] in p.stdout and not p.stderr, (args, p.returncode, p.stdout, p.stderr)
    print(f"-h and --help: help for {len(cases)} command lines, exit 0")


def mistyped(ds, tmp):
    out = os.path.join(tmp, "x.jsonl")
    p = run("digest", ds, "--pipeline", "imagenet_train", "--seed", 1, "--batch-size", 8,
            "--out", out, ok=False)
    assert p.returncode != 0 and 'did you mean "imagenet-train"?' in p.stderr, p.stderr
    for name in PRESETS + OPS:
        assert name in p.stderr, (name, p.stderr)
    p = run("digest", ds, "--pipeline", "hflip p=0.5 | normalise mean=0.5 std=0.5", "--seed", 1,
            "--batch-size", 8, "--out", out, ok=False)
    assert p.returncode != 0 and 'op 1 "normalise"' in p.stderr and \
        'did you mean "normalize"?' in p.stderr, p.stderr
    p = run("digest", ds, "--pipeline", "qqqqqqqqqq", "--seed", 1, "--batch-size", 8,
            "--out", out, ok=False)
    assert p.returncode != 0 and "did you mean" not in p.stderr and "imagenet-train" in p.stderr
    print("a mistyped preset or op: refused, the closest named, every preset and op listed")


def dtype_follows(ds, tmp):
    out = os.path.join(tmp, "y.jsonl")
    common = ["--seed", 3, "--batch-size", 8, "--epochs", 1, "--out", out]
    auto = run("digest", ds, "--pipeline", "imagenet-train", *common)
    f32 = run("digest", ds, "--pipeline", "imagenet-train", "--dtype", "float32", *common)
    assert stream(auto) == stream(f32), (auto.stdout, f32.stdout)
    p = run("digest", ds, "--pipeline", "imagenet-train", "--dtype", "uint8", *common, ok=False)
    assert p.returncode != 0 and "normalizes" in p.stderr, p.stderr
    plain = run("digest", ds, "--pipeline", "shapes-train", *common)
    u8 = run("digest", ds, "--pipeline", "shapes-train", "--dtype", "uint8", *common)
    assert stream(plain) == stream(u8)
    assert stream(plain) != stream(run("digest", ds, "--pipeline", "shapes-train", "--dtype",
                                       "float32", *common))
    print("--dtype left out: float32 for imagenet-train (= --dtype float32), uint8 for "
          "shapes-train; --dtype uint8 with normalize still refused")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", "24", "--size", "32")
        help_everywhere(ds)
        mistyped(ds, tmp)
        dtype_follows(ds, tmp)
    print("test_cli_newuser: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

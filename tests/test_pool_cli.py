"""test_pool_cli.py - digest --workers, verify and diff end to end (stdlib only).

On a small shapes dataset: `digest` writes byte-identical manifests for
--workers 0 (in-process), --threads 2, --workers 1, 2, 3; a --stop-after /
--save-state run followed by a --resume run concatenates to the full
manifest; a state from another seed is refused naming the seed; `verify`
exits 0 with every row "yes" in the default mode and exits 1 naming the
first divergent batch with --rng-mode per-worker; `diff` exits 0 on equal
manifests and 1 with the first divergence (epoch, batch, position, sample
index) on different ones, and rejects a truncated manifest; with PngSuite's
corrupt files, --on-error skip lists "skipped" samples identically for
--workers 0 and 3 and prints each failure once; SIGABRT sent twice by
another process to the worker computing a sample leaves the --on-error
substitute stream unchanged, raised by the worker it substitutes the
sample (the crash hook, test builds only); no worker is left behind.
Without PngSuite ($SP_SHARED_DATA/pngsuite) the on-error part prints SKIP,
the rest runs, and the test exits 77 if nothing failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from cli_testlib import children_left, corpus, status

BIN = os.environ.get("SEEDPIPE_BIN")


def run(*args, ok=True, env=None):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=env)
    if ok and p.returncode != 0:
        raise AssertionError(f"seedpipe {' '.join(map(str, args))} failed ({p.returncode}): {p.stderr}")
    return p


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


def strip_versions(header):
    h = json.loads(header)
    h.pop("versions", None)
    return h


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-pool-cli-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 100, "--size", 32, "--seed", 2)
        common = ["--pipeline", "shapes-train", "--seed", 11, "--epochs", 2, "--batch-size", 8]
        ref = os.path.join(tmp, "ref.jsonl")
        run("digest", ds, *common, "--out", ref)
        ref_lines = lines(ref)
        assert len(ref_lines) == 1 + 2 * 13, len(ref_lines)
        for extra in (["--threads", 2], ["--workers", 1], ["--workers", 2, "--ring", 1],
                      ["--workers", 3]):
            out = os.path.join(tmp, "m.jsonl")
            run("digest", ds, *common, *extra, "--out", out)
            got = lines(out)
            assert strip_versions(got[0]) == strip_versions(ref_lines[0]), extra
            assert got[1:] == ref_lines[1:], f"manifest differs with {extra}"

        # stop after 9 batches, save the state, resume with other workers
        st = os.path.join(tmp, "state.json")
        a, b = os.path.join(tmp, "a.jsonl"), os.path.join(tmp, "b.jsonl")
        p = run("digest", ds, *common, "--workers", 2, "--stop-after", 9, "--save-state", st,
                "--out", a)
        assert "epoch 0 batch 9" in p.stdout, p.stdout
        state = json.load(open(st))
        assert state["epoch"] == 0 and state["batch"] == 9 and state["seed"] == 11
        run("digest", ds, *common, "--workers", 3, "--resume", st, "--out", b)
        assert lines(a)[1:] + lines(b)[1:] == ref_lines[1:], "stop + resume != uninterrupted"
        bad = run("digest", ds, "--pipeline", "shapes-train", "--seed", 12, "--epochs", 2,
                  "--batch-size", 8, "--resume", st, "--out", b, ok=False)
        assert bad.returncode == 1 and "seed 11 in the state, 12 here" in bad.stderr, bad.stderr
        with open(st, "w") as f:
            f.write('{"seedpipe_state":1,"seed":')
        bad = run("digest", ds, *common, "--resume", st, "--out", b, ok=False)
        assert bad.returncode == 1 and st in bad.stderr, bad.stderr

        # A crash signal (SIGABRT) sent twice from outside to the worker
        # computing sample 17, as a watchdog may: redone like a kill, so the
        # --on-error substitute stream is the uninterrupted one; raised by the
        # worker itself it is a crash and the sample is substituted (the
        # crash hook: test builds only, SEEDPIPE_TEST_HOOKS=ON).
        sub = [*common, "--workers", 2, "--on-error", "substitute"]
        plain, own, sent = (os.path.join(tmp, n) for n in ("plain.jsonl", "own.jsonl",
                                                            "sent.jsonl"))
        run("digest", ds, *sub, "--out", plain)
        hook = dict(os.environ, SEEDPIPE_TEST_CRASH_SAMPLE="17", SEEDPIPE_TEST_CRASH_SIGNAL="6",
                    SEEDPIPE_TEST_CRASH_TIMES="2")
        run("digest", ds, *sub, "--out", own, env=hook)
        if lines(own)[1:] == lines(plain)[1:]:
            print("SKIP: the crash hook is not compiled in (SEEDPIPE_TEST_HOOKS=OFF): "
                  "external SIGABRT case not run")
        else:
            assert any('"substituted"' in l and "17" in l for l in lines(own)[1:]), lines(own)
            run("digest", ds, *sub, "--out", sent,
                env=dict(hook, SEEDPIPE_TEST_CRASH_FROM="outside"))
            assert lines(sent)[1:] == lines(plain)[1:], "an external SIGABRT changed the stream"
            print("external SIGABRT twice: stream unchanged; raised by the worker: substituted")

        # verify: default mode all equal; per-worker mode diverges
        p = run("verify", ds, *common, "--workers", "1,2,3")
        rows = [l for l in p.stdout.splitlines() if l.startswith(("workers", "stop", "in-process"))]
        assert len(rows) == 6, p.stdout
        assert all(r.rstrip().endswith(("yes", "reference")) for r in rows), p.stdout
        # (4 workers: with 2, a loaded machine may leave worker 1 idle for a
        # whole epoch, and the per-worker bytes then happen to agree)
        p = run("verify", ds, *common, "--workers", "1,4", "--rng-mode", "per-worker", ok=False)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "first divergence at epoch " in p.stdout, p.stdout
        assert "byte offset" in p.stdout, p.stdout
        assert [l for l in p.stdout.splitlines() if l.startswith("workers 1 ")][0].endswith("yes")

        # diff
        p = run("diff", ref, ref)
        assert p.stdout.startswith("equal: 26 batches"), p.stdout
        other = os.path.join(tmp, "other.jsonl")
        run("digest", ds, "--pipeline", "shapes-train", "--seed", 11, "--epochs", 2,
            "--batch-size", 8, "--rng-mode", "per-worker", "--workers", 2, "--out", other)
        p = run("diff", ref, other, ok=False)
        assert p.returncode == 1, p.stdout
        assert "first divergence: epoch 0, batch 0" in p.stdout, p.stdout
        trunc = os.path.join(tmp, "trunc.jsonl")
        with open(trunc, "w") as f:
            f.write("\n".join(ref_lines[:3]) + "\n" + ref_lines[3][:40] + "\n")
        p = run("diff", ref, trunc, ok=False)
        assert p.returncode == 1 and "trunc.jsonl: line 4" in p.stderr, p.stderr

        # on-error skip with PngSuite's corrupt files
        src = corpus("pngsuite", "digest --on-error fail/skip/substitute on PngSuite's x*.png")
        if src:
            png = os.path.join(tmp, "png")
            for f in sorted(os.listdir(src)):
                if f.endswith(".png") and len(f) == 12:
                    d = os.path.join(png, f[4:6])
                    os.makedirs(d, exist_ok=True)
                    shutil.copy(os.path.join(src, f), d)
            pc = ["--pipeline", "random_resized_crop size=16 | hflip", "--seed", 1,
                  "--epochs", 2, "--batch-size", 16]
            m0, m3 = os.path.join(tmp, "p0.jsonl"), os.path.join(tmp, "p3.jsonl")
            p = run("digest", png, *pc, "--out", m0, ok=False)
            assert p.returncode == 1 and "/x" in p.stderr, p.stderr
            p0 = run("digest", png, *pc, "--on-error", "skip", "--out", m0)
            p3 = run("digest", png, *pc, "--on-error", "skip", "--workers", 3, "--out", m3)
            assert lines(m0)[1:] == lines(m3)[1:]
            assert sum("skipped" in l for l in lines(m0)) > 0
            fails = [l for l in p0.stderr.splitlines() if l.startswith("  sample ")]
            assert len(fails) == 14 and len(set(fails)) == 14, p0.stderr
            assert fails == [l for l in p3.stderr.splitlines() if l.startswith("  sample ")]
            run("digest", png, *pc, "--on-error", "substitute", "--workers", 2, "--out", m3)
            assert sum("substituted" in l for l in lines(m3)) > 0

        left = children_left()
        assert not left, f"processes left behind: {left}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("pool cli: all checks " + ("that ran passed (SKIP above)" if status() else "passed"))
    return status()


if __name__ == "__main__":
    sys.exit(main())

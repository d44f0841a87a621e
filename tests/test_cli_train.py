"""test_cli_train.py - `seedpipe train` options around the loader.

--eval-subset NAME evaluates on that subset of the training split (not on
the training subset, not on the whole dataset); --eval DATASET alone
evaluates on the whole dataset (the training split does not carry over);
--cache DIR gives the same final weights cold and warm, in-process and on
the pool, and the warm run reads every batch from the cache. Standard
library only; the CLI is $SEEDPIPE_BIN.
"""
import json
import os
import shutil
import sys
import tempfile

from cli_testlib import BIN, run


def record(path):
    with open(path) as f:
        return json.load(f)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-cli-train-")
    try:
        ds = os.path.join(tmp, "shapes")
        run("make-shapes", ds, "--count", 160, "--size", 32, "--seed", 4)
        common = ["--seed", 3, "--epochs", 2, "--batch-size", 16]
        split = ["--split", "train=0.75,val=0.25", "--subset", "train"]

        evals = {}
        for name, extra in (("val", ["--eval-subset", "val"]),
                            ("train", ["--eval-subset", "train"]),
                            ("whole", ["--eval", ds])):
            out = os.path.join(tmp, f"eval-{name}.json")
            run("train", ds, *common, *split, *extra, "--out", out)
            r = record(out)
            assert r["config"]["eval_subset"] == (None if name == "whole" else name), r["config"]
            ep = r["epochs"][-1]
            evals[name] = (ep["eval_accuracy"], ep["eval_loss"])
            weights = r["final_weights_digest"]
            evals.setdefault("weights", set()).add(weights)
        # Same training every time; three different evaluation sets.
        assert len(evals["weights"]) == 1, evals
        assert len({evals["val"], evals["train"], evals["whole"]}) == 3, evals
        p = run("train", ds, *common, "--eval-subset", "val", "--out", os.path.join(tmp, "x"),
                ok=False)
        assert p.returncode != 0 and "--split" in p.stderr, p.stderr

        ref = os.path.join(tmp, "ref.json")
        run("train", ds, *common, "--out", ref)
        want = record(ref)["final_weights_digest"]
        for workers in (0, 2):
            cache = os.path.join(tmp, f"cache-w{workers}")
            for attempt in ("cold", "warm"):
                out = os.path.join(tmp, f"c{workers}-{attempt}.json")
                p = run("train", ds, *common, "--workers", workers, "--cache", cache,
                        "--out", out)
                r = record(out)
                assert r["final_weights_digest"] == want, (workers, attempt)
                assert r["config"]["cache"] == cache
                assert "cache:" not in p.stderr, p.stderr
                if attempt == "warm":
                    assert "20 batches read, 0 computed" in p.stdout, p.stdout
            entries = [d for d in os.listdir(cache) if not d.startswith(".")]
            assert len(entries) == 2, entries
    finally:
        shutil.rmtree(tmp)
    print("cli train: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""examples/tokens/train.py (a tiny causal transformer on a docs-packed
token corpus, block-diagonal causal mask from segment_ids) runs a short
training, its losses are finite, and the resume from the mid-run
state_dict() replays the same batches and losses. Skipped (visibly)
without torch."""
import math
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch (python3-torch) not installed")

from launch import clean_env  # noqa: E402

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "examples", "tokens", "train.py")


@pytest.mark.parametrize("workers", [0, 2])
def test_short_run_trains_and_resumes_exactly(tmp_path, workers):
    p = subprocess.run([sys.executable, EXAMPLE, "--steps", "6", "--resume-at", "3",
                        "--workers", str(workers), "--docs", "60", "--out", str(tmp_path)],
                       env=clean_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    losses = [float(x) for x in re.findall(r"loss ([^\s,)]+)", p.stdout)]
    assert losses and all(math.isfinite(x) for x in losses), p.stdout
    assert "batches equal, losses equal" in p.stdout, p.stdout
    assert os.path.exists(tmp_path / "corpus.idx") and os.path.exists(tmp_path / "ckpt.pt")

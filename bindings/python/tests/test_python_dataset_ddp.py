"""examples/custom_dataset/train.py (a user's own Dataset, random
transforms, the Python backend) single-process and under `python3 -m
torch.distributed.run --nproc_per_node 2` with a DistributedSampler: the
ranks' batches, concatenated in rank order, are the single-process global
batches byte for byte (images, labels and a NumPy-drawn target), over 12
steps that cross an epoch, with 2 workers per rank against 1 in the single
process. Skipped (visibly) without torch.distributed or gloo."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("torch.distributed with the gloo backend not available", allow_module_level=True)

from launch import clean_env, torchrun  # noqa: E402

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "examples", "custom_dataset", "train.py")


def test_rank_slices_concatenate_to_the_single_process_batches(tmp_path):
    import subprocess
    env = clean_env()
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    args = ["--steps", "12", "--global-batch", "8"]
    p = subprocess.run([sys.executable, EXAMPLE, *args, "--workers", "1", "--out", one],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "backend python" in p.stdout, p.stdout
    p = torchrun(EXAMPLE, [*args, "--workers", "2", "--out", two], env, str(tmp_path / "logs"))
    assert p.returncode == 0, p.stdout + p.stderr
    single = torch.load(one + ".rank0")
    r0, r1 = torch.load(two + ".rank0"), torch.load(two + ".rank1")
    assert len(single) == len(r0) == len(r1) == 12
    for step, (g, a, b) in enumerate(zip(single, r0, r1)):
        for k in range(3):
            cat = torch.cat([a[k], b[k]])
            assert cat.dtype == g[k].dtype and torch.equal(cat, g[k]), \
                f"step {step}, leaf {k}: the ranks' slices are not the global batch"
    assert not torch.equal(single[0][0], single[8][0])      # epochs differ (8 steps an epoch)

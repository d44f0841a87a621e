"""examples/imagenet/main.py (a torchvision DDP train/val script whose only
seedpipe line is the DataLoader import) as one process and under
`python3 -m torch.distributed.run --nproc_per_node 2` (gloo, CPU): the
global train batches (the ranks' batches gathered in rank order) are the
one-process batches, byte for byte, and each rank's validation images are
the one-process images at DistributedSampler(shuffle=False, drop_last=True)'s
indices for that rank (25 images: an uneven tail), followed by the dropped
tail every rank validates (upstream's aux_val_loader, a Subset). Both runs
use --seed 5: the samplers' seed and the one process's torch seed agree. Skipped (visibly) without torch,
torchvision, or torch.distributed with gloo."""
import json
import os
import subprocess
import sys

import pytest


torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
pytest.importorskip("torchvision", reason="torchvision (python3-torchvision) not installed")
if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
    pytest.skip("torch.distributed with the gloo backend not available", allow_module_level=True)
from torch.utils.data import DistributedSampler  # noqa: E402

from launch import clean_env, torchrun  # noqa: E402

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "examples", "imagenet", "main.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory, binary):
    d = tmp_path_factory.mktemp("imagenet")
    for part, count, seed in (("train", "60", "3"), ("val", "25", "4")):
        subprocess.run([binary, "make-shapes", str(d / part), "--count", count, "--size", "32",
                        "--seed", seed], check=True, capture_output=True)
    return str(d)


def test_one_process_and_torchrun_2(data, tmp_path):
    env = clean_env()
    one, two = str(tmp_path / "one.json"), str(tmp_path / "two.json")
    p = subprocess.run([sys.executable, EXAMPLE, data, "--record", one, "--seed", "5"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "epoch 1: train loss" in p.stdout and "(world 1)" in p.stdout, p.stdout

    p = torchrun(EXAMPLE, [data, "--record", two, "--seed", "5"], env, str(tmp_path / "logs"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "(world 2)" in p.stdout, p.stdout

    with open(one) as f:
        a = json.load(f)
    with open(two) as f:
        b = json.load(f)
    assert (a["world"], b["world"]) == (1, 2)
    # train: 60 images, global batch 16, 2 epochs: 8 steps, each a different batch
    assert len(a["train"]) == 8 and len(set(a["train"])) == 8
    assert b["train"] == a["train"]
    # val: world 1 is torchvision's order; each rank gets DistributedSampler's indices
    import torchvision
    targets = torchvision.datasets.ImageFolder(os.path.join(data, "val")).targets
    (full,) = a["val"]
    assert [lab for lab, _ in full] == targets
    for r in range(2):
        idx = list(DistributedSampler(range(25), num_replicas=2, rank=r, shuffle=False,
                                      drop_last=True))
        assert len(idx) == 12
        assert b["val"][r] == [full[i] for i in idx + [24]], r

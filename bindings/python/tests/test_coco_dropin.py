"""test_coco_dropin.py - seedpipe.torch.DataLoader over torchvision's
CocoDetection wrapped with wrap_dataset_for_transforms_v2 and v2 transforms
(seedpipe._tvcoco; docs/python.md "Detection: CocoDetection").

Debian's torchvision 0.14 has no transforms.v2, so each case runs
coco_dropin_child.py under the torchvision v2 venv (tv2_venv.py), with
pycocotools from PyPI installed into it (the wrapper needs it for masks);
skipped, with the reason, where either cannot be had. On a generated
COCO-style folder (polygons, a crowd RLE, images without annotations):

- structure: the same batches' structure, types and dtypes as torch's
  DataLoader over the same object with collate_fn=tuple(zip(*b)); for
  Resize + flip p=1 (+ SanitizeBoundingBoxes(min_size=10)) boxes within
  1e-3 px of torchvision's, masks, labels and image ids equal; a
  CenterCrop that cuts boxes + Sanitize + ToPureTensor over a Subset of
  the wrapped dataset (a repeated Subset index refused);
- workers: RandomZoomOut + RandomIoUCrop + flip + Resize + Sanitize give
  equal batches at 0 and 2 workers, across a resume (state_dict) and at
  world 2 (the rank slices glued give the world-1 batches), and
  other batches with another seed;
- refusals: RandomPhotometricDistort, RandomRotation, labels_getter=None,
  Sanitize before Resize, ToDtype without scale, no ToImage, another
  collate_fn, raw target keys: refused by name (the automatic backend
  choice names the reason and takes the Python backend).
"""
import os
import subprocess

import pytest

import tv2_venv

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def venv_python():
    py, why = tv2_venv.tv2_python()
    if py is None:
        pytest.skip(why)
    ok, why = tv2_venv.with_module(py, "pycocotools", "pycocotools")
    if not ok:
        pytest.skip(why)
    return py


@pytest.mark.parametrize("case", ["structure", "workers", "refusals"])
def test_coco_dropin(venv_python, tmp_path, case):
    env = tv2_venv.child_env({"SEEDPIPE_CACHE": str(tmp_path / "cache")})
    r = subprocess.run([venv_python, os.path.join(HERE, "coco_dropin_child.py"),
                        str(tmp_path / "coco"), case], capture_output=True, env=env,
                       timeout=600)
    out = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, out[-4000:]
    assert f"OK {case}" in out, out[-4000:]
    print(out)

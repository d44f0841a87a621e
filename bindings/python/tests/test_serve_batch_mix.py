"""test_serve_batch_mix.py - `seedpipe serve --batch-mix`: the service mixes
each batch (MixUp, CutMix, a RandomChoice of them) and carries the soft
targets through its ring (docs/determinism.md 11a).

The served (images, soft targets) equal the drop-in's MixUp / CutMix /
RandomChoice applied to seedpipe.Loader's batches, byte for byte, and each
served batch digest equals the line `seedpipe digest --batch-mix` writes at
0 and 2 workers; with world 2 each rank's digests equal `digest --rank r
--world 2 --batch-mix`. Skipped (visibly) without torch.
"""
import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")

import seedpipe  # noqa: E402
from seedpipe._batchmix import CutMix, MixUp, RandomChoice  # noqa: E402
from conftest import our_regions  # noqa: E402
import served  # noqa: E402

DATA = "fakedata:size=30,image=3x12x10,classes=5"
PIPE, SEED, BS = "random_crop size=10 padding=2 | hflip p=0.5", 13, 6
COMMON = ["--pipeline", PIPE, "--dtype", "float32", "--seed", str(SEED), "--batch-size",
          str(BS), "--epochs", "2"]

SPECS = {
    "mixup:alpha=0.7": lambda: MixUp(alpha=0.7, num_classes=5),
    "cutmix:alpha=1.3,classes=9": lambda: CutMix(alpha=1.3, num_classes=9),
    "choice:mixup:alpha=0.8,cutmix:alpha=1.0,p=1/2": lambda: RandomChoice(
        [MixUp(alpha=0.8, num_classes=5), CutMix(alpha=1.0, num_classes=5)], p=[1, 2]),
}


def _digest_lines(binary, spec, workers, *extra):
    r = subprocess.run([binary, "digest", DATA, *COMMON, "--workers", str(workers),
                        "--batch-mix", spec, "--out", "-", *extra], capture_output=True,
                       text=True, timeout=120, check=True)
    return [json.loads(x)["digest"] for x in r.stdout.splitlines()[1:]]


def _drop_in(op):
    out = []
    with seedpipe.Loader(DATA, pipeline=PIPE, seed=SEED, batch_size=BS, dtype="float32",
                         epochs=2) as ld:
        for e in range(2):
            for b, (x, y) in enumerate(ld):
                x = torch.from_numpy(np.array(x))
                y = torch.from_numpy(np.array(y).astype(np.int64))
                mx, t = op.apply(x, y, seed=SEED, epoch=e, index=b)
                out.append((mx.numpy().tobytes(), t.numpy().tobytes()))
    return out


def _serve(binary, name, spec, *extra):
    return served.start([binary, "serve", "--name", name, DATA, *COMMON, "--batch-mix", spec,
                         *extra])


def _finish(p):
    rc, _, err = served.stop(p)
    return rc, err


@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("workers", [1, 2])
def test_served_mix_is_the_drop_ins(binary, region_name, spec, workers):
    want = _drop_in(SPECS[spec]())
    lines = _digest_lines(binary, spec, 0)
    assert lines == _digest_lines(binary, spec, 2)
    p = _serve(binary, region_name, spec, "--workers", workers)
    got, digests = [], []
    try:
        with seedpipe.attach(region_name) as cl:
            k = 9 if "classes=9" in spec else 5
            assert cl.mix_classes == k
            for x, t in cl.stream():
                assert x.dtype == np.float32 and t.shape == (x.shape[0], k)
                got.append((x.tobytes(), t.tobytes()))
                digests.append(cl.batch_digest())
        rc, err = _finish(p)
        assert rc == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert len(got) == len(want) == 10
    assert got == want
    assert digests == lines
    assert not our_regions()


def test_served_mix_two_ranks(binary, region_name):
    spec = "choice:mixup:alpha=0.8,cutmix:alpha=1.0"
    refs = [_digest_lines(binary, spec, 0, "--rank", str(r), "--world", "2") for r in (0, 1)]
    p = _serve(binary, region_name, spec, "--workers", 2, "--world", 2)
    try:
        got = served.two_rank_digests(region_name)
        assert got[0] == refs[0] and got[1] == refs[1]
        assert _finish(p)[0] == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("dtype,mix,msg", [
    ("uint8", "mixup:alpha=1", "--batch-mix needs --dtype float32"),
    ("float32", "choice:mixup:alpha=1,p=1/1", "--batch-mix choice:mixup:alpha=1,p=1/1: expected"),
])
def test_serve_mix_refusals(binary, region_name, dtype, mix, msg):
    r = subprocess.run([binary, "serve", "--name", region_name, DATA, "--pipeline", PIPE,
                        "--dtype", dtype, "--batch-size", "6", "--workers", "1", "--batch-mix",
                        mix], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and msg in r.stderr, r.stderr

"""docs/determinism.md section 11 recomputed from the page alone, with
tests/philox_ref.py's independent Philox: the generator states a Python
dataset's __getitem__ and collate_fn see (random, NumPy, torch, the
explicit seed) in the trainer and in workers, and the keyed draws of
RandomSampler(replacement=True)."""
import os
import random
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the Python backend's tests need PyTorch")
from seedpipe.torch import DataLoader, sample_seed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests"))
import philox_ref as R  # noqa: E402

SEED = 0x1234_5678_9ABC_DEF0


def block(tag, c0, c1, e, word3):
    k = R.philox((tag, 0, 0, 0), (SEED & 0xFFFFFFFF, SEED >> 32))[:2]
    return R.philox((c0, c1, e, word3), k)


def expected(tag, a, e, word3_base):
    w = [block(tag, a & 0xFFFFFFFF, a >> 32, e, word3_base + g) for g in range(4)]
    random.seed(w[0][0] | w[0][1] << 32 | w[0][2] << 64 | w[0][3] << 96)
    r = random.random()
    np.random.seed(np.array(w[1], dtype=np.uint32))
    n = np.random.rand()
    t = torch.Generator()
    t.manual_seed(w[2][0] | w[2][1] << 32)
    return r, n, float(torch.rand(1, generator=t)), (w[3][0] | w[3][1] << 32)


class Draws(torch.utils.data.Dataset):
    def __len__(self):
        return 9

    def __getitem__(self, i):
        return (random.random(), float(np.random.rand()), float(torch.rand(1)),
                sample_seed() >> 2, i)


def collate(samples):
    return samples, (random.random(), float(np.random.rand()), float(torch.rand(1)),
                     sample_seed() >> 2)


@pytest.mark.parametrize("workers", [0, 2])
def test_sample_and_batch_seeds_follow_the_spec(workers):
    dl = DataLoader(Draws(), batch_size=4, shuffle=True, seed=SEED, num_workers=workers,
                    collate_fn=collate)
    for epoch in (0, 3):
        dl.set_epoch(epoch)
        for b, (samples, batch_draws) in enumerate(dl):
            for r, n, t, s, i in samples:
                er, en, et, es = expected(8, i, epoch, 0)
                assert (r, n, t, s) == (er, en, et, es >> 2), f"sample {i} epoch {epoch}"
            er, en, et, es = expected(9, b, epoch, 0)
            assert batch_draws == (er, en, et, es >> 2), f"batch {b} epoch {epoch}"
    dl.close()


def test_a_repeated_index_gets_its_repetition_number():
    dl = DataLoader(Draws(), batch_size=3, sampler=[4, 4, 1, 4], seed=SEED, collate_fn=collate)
    (first, _), (second, _) = list(dl)
    got = [s[0] for s in first + second]
    want = [expected(8, i, 0, 4 * r)[0] for i, r in ((4, 0), (4, 1), (1, 0), (4, 2))]
    assert got == want and len(set(got)) == 4


def test_replacement_sampler_draws_follow_the_spec():
    ds = torch.utils.data.TensorDataset(torch.arange(9))
    rs = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=20)
    dl = DataLoader(ds, batch_size=5, sampler=rs, seed=SEED)
    dl.set_epoch(2)
    got = [int(i) for (x,) in dl for i in x]
    want = [R.uniform_int(block(10, p, 0, 2, 0)[0], 9) for p in range(20)]
    assert got == want

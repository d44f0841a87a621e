"""The seeds of a Python dataset's samples (docs/determinism.md section 11).

seedpipe's C ops draw from Philox blocks addressed by the sample; a user's
own __getitem__ draws from Python's `random`, NumPy's global generator and
torch's default generator instead. Before each dataset[i] the Python
backend seeds those three from the sample's Philox block, and before each
collate call from the batch's, so a sample is the same whichever process
computes it. This module is that derivation, written from the spec:

    K        = (seed & 0xffffffff, seed >> 32)
    K_tag    = philox((tag, 0, 0, 0), K)[0..1]
    sample i of epoch e, its r-th repetition in the epoch, generator g:
             w = philox((i & 0xffffffff, i >> 32, e, 4*r + g), K_8)
    batch b of epoch e (the collate call), generator g:
             w = philox((b & 0xffffffff, b >> 32, e, g), K_9)
    g: 0 random, 1 numpy, 2 torch, 3 sample_seed()/sample_generator()
    random.seed(w0 + w1*2^32 + w2*2^64 + w3*2^96)
    numpy.random.seed(numpy.array([w0, w1, w2, w3], dtype=uint32))
    torch.manual_seed(w0 + w1*2^32)
    explicit: seed64 = w0 + w1*2^32, seed128 = w0 + w1*2^32 + w2*2^64 + w3*2^96

Pure Python (the standard library only); tests/test_python_seeds.py
compares it with tests/philox_ref.py's independent Philox.
"""
from __future__ import annotations

MASK32 = 0xFFFFFFFF
_MULT = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)

TAG_SHUFFLE = 1
TAG_WORKER = 4
TAG_PY_SAMPLE = 8     # a Python dataset's samples
TAG_PY_BATCH = 9      # a Python dataset's collate calls
TAG_PY_SAMPLER = 10   # draws of a sampler seedpipe keys (RandomSampler(replacement=True))
TAG_WEIGHTED = 13     # WeightedRandomSampler's draws (both backends; determinism.md 13)

G_RANDOM, G_NUMPY, G_TORCH, G_EXPLICIT = 0, 1, 2, 3


def philox(ctr, key):
    """Philox4x32-10 (docs/determinism.md section 1)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0 = _MULT[0] * c0
        p1 = _MULT[1] * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, \
                         ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
        k0, k1 = (k0 + _WEYL[0]) & MASK32, (k1 + _WEYL[1]) & MASK32
    return c0, c1, c2, c3


def stream_key(seed: int, tag: int):
    """K_tag of a 64-bit seed."""
    return philox((tag, 0, 0, 0), (seed & MASK32, (seed >> 32) & MASK32))[:2]


def worker_seed(seed: int, worker: int) -> int:
    """A worker's own 64-bit seed (K_worker(w), section 3): what
    get_worker_info().seed reports and worker_init_fn may draw from; it
    never reaches a sample."""
    k = philox((worker, 0, 0, 0), stream_key(seed, TAG_WORKER))
    return k[0] | (k[1] << 32)


class Keys:
    """The two stream keys of one seed, and the blocks they address."""

    __slots__ = ("seed", "k_sample", "k_batch")

    def __init__(self, seed: int):
        self.seed = seed
        self.k_sample = stream_key(seed, TAG_PY_SAMPLE)
        self.k_batch = stream_key(seed, TAG_PY_BATCH)

    def sample(self, index: int, epoch: int, rep: int, g: int):
        return philox((index & MASK32, index >> 32, epoch, 4 * rep + g), self.k_sample)

    def batch(self, b: int, epoch: int, g: int):
        return philox((b & MASK32, b >> 32, epoch, g), self.k_batch)


def words128(w) -> int:
    return w[0] | (w[1] << 32) | (w[2] << 64) | (w[3] << 96)


def words64(w) -> int:
    return w[0] | (w[1] << 32)

"""sp_loader_info_get() through the bindings (loader.h, ABI 7): the one
struct the package reads a loader's geometry, spec and fingerprint from.
Each field is checked against what it must equal by another route: the
batches the loader gives, the options it was opened with, and the
pipeline hash recomputed from the spec with an independent XXH3."""
import ctypes

import numpy as np

import seedpipe
from seedpipe import _lib as L

from conftest import xxh3_128


def test_fields_agree_with_the_batches(shapes):
    with seedpipe.Loader(shapes, pipeline="center_crop size=24", seed=3, epochs=1,
                         batch_size=16, dtype="float32", world=2, rank=1,
                         pad_tail=True) as ld:
        info = L.loader_info(ld._ld())
        assert info.struct_size == ctypes.sizeof(L.sp_loader_info)
        assert info.spec.decode() == ld.spec
        assert info.pipeline_hash.hex() == xxh3_128(info.spec)
        assert info.fingerprint.hex() == ld.fingerprint
        assert info.size == ld.num_samples == 60
        assert info.padded_size == ld.padded_samples == 60   # already a multiple of 2
        assert info.batches_per_epoch == len(ld) == 4
        cfg = info.config.contents
        assert (cfg.batch_size, cfg.world, cfg.rank, cfg.pad_tail) == (16, 2, 1, 1)
        assert L.dataset_info(info.dataset).size == 60 and info.pipeline
        images, _labels = next(iter(ld))
        images = np.asarray(images)
        assert images.shape[1:] == (info.c, info.h, info.w) == (3, 24, 24)
        assert info.sample_bytes == info.c * info.h * info.w * 4


def test_struct_size_is_checked(shapes):
    with seedpipe.Loader(shapes, pipeline="center_crop size=24", seed=3, epochs=1,
                         batch_size=8) as ld:
        small = L.sp_loader_info(struct_size=8)
        assert L.sp_loader_info_get(ld._ld(), ctypes.byref(small)) != 0
        assert small.size == 0 and small.spec is None   # nothing written

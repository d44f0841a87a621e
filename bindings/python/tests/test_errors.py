"""C errors become seedpipe.Error with the C message; bad arguments ValueError naming them."""
import pytest

import seedpipe


def test_error_is_runtime_error():
    assert issubclass(seedpipe.Error, RuntimeError)


def test_bad_pipeline_word(shapes):
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.Loader(shapes, pipeline="hflip q=0.5")
    assert 'pipeline op 0 "hflip": unknown key "q"' in str(ei.value)
    assert ei.value.code_name == "ESPEC"
    with pytest.raises(seedpipe.Error, match='"rotate": unknown op'):
        seedpipe.Loader(shapes, pipeline="random_resized_crop size=32 | rotate deg=3")


def test_missing_dataset_path(tmp_path):
    missing = str(tmp_path / "no-such-dataset")
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.Loader(missing, workers=2)
    assert missing in str(ei.value) and "No such file or directory" in str(ei.value)
    assert ei.value.code_name == "EIO"


def test_normalize_needs_float32(shapes):
    with pytest.raises(seedpipe.Error, match="float32"):
        seedpipe.Loader(shapes, pipeline="imagenet-eval", dtype="uint8")


def test_attach_missing_region():
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.attach(".sp-py-no-such-region")
    assert "region .sp-py-no-such-region: no such region" in str(ei.value)


@pytest.mark.parametrize("kw,name", [
    (dict(batch_size=0), "batch_size"),
    (dict(batch_size="8"), "batch_size"),
    (dict(seed=-1), "seed"),
    (dict(workers=-1), "workers"),
    (dict(workers=65), "workers"),
    (dict(epochs=0), "epochs"),
    (dict(dtype="int7"), "dtype"),
    (dict(layout="chw"), "layout"),
    (dict(on_error="ignore"), "on_error"),
    (dict(rng_mode="random"), "rng_mode"),
    (dict(rank=2, world=2), "rank"),
    (dict(world=0), "world"),
    (dict(batch_size=9, world=2), "world"),
    (dict(pipeline=""), "pipeline"),
    (dict(ring=-1), "ring"),
])
def test_value_errors_name_the_argument(shapes, kw, name):
    with pytest.raises(ValueError, match=name):
        seedpipe.Loader(shapes, **kw)


def test_value_errors_misc(shapes):
    with pytest.raises(ValueError, match="data"):
        seedpipe.Loader(None)
    with seedpipe.Loader(shapes) as ld:
        with pytest.raises(ValueError, match="epoch"):
            ld.set_epoch(-1)
        with pytest.raises(ValueError, match="state"):
            ld.load_state_dict(42)
    with pytest.raises(ValueError, match="rank"):
        seedpipe.attach(".sp-py-x", rank=-1)
    with pytest.raises(ValueError, match="workers"):
        seedpipe.verify(shapes, workers=[])
    with pytest.raises(ValueError, match="epochs"):
        seedpipe.digest(shapes, epochs=0)


def test_numpy_dtype_accepted(shapes):
    import numpy as np
    with seedpipe.Loader(shapes, batch_size=4, dtype=np.float32) as ld:
        x, _ = next(iter(ld))
        assert x.dtype == np.float32

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
    with pytest.raises(seedpipe.Error, match='"perspective": unknown op'):
        seedpipe.Loader(shapes, pipeline="random_resized_crop size=32 | perspective deg=3")


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


def _c_status_codes():
    """{name: code} from common.h's two X-macros, read from the header
    itself (not through the library)."""
    import os
    import re
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "..", "include", "seedpipe", "common.h")) as f:
        text = f.read()
    codes = {"OK": 0}
    for macro in ("SP_ERRNO_MAP", "SP_STATUS_MAP"):
        body = re.search(r"#define %s\(XX\)(.*?)\n\n" % macro, text, re.S).group(1)
        for name, val in re.findall(r"XX\((\w+),\s*(-?\d+),", body):
            codes[name] = int(val)
    return codes


def test_error_codes_come_from_the_library():
    from seedpipe import _errors
    c = _c_status_codes()
    assert len(c) >= 14 and c["EINVAL"] == -1 and c["END"] == 1
    assert _errors.STATUS == c                   # every C code, under its C name
    assert list(_errors.STATUS) == list(c)       # in the header's order
    assert _errors.NAMES == {v: k for k, v in c.items()}
    for name, code in c.items():
        if code < 0:
            assert seedpipe.Error(code, "x").code_name == name
    assert (_errors.EINVAL, _errors.EIO, _errors.ERANGE, _errors.EUNSUPP, _errors.END) == \
        (c["EINVAL"], c["EIO"], c["ERANGE"], c["EUNSUPP"], c["END"])
    assert seedpipe.Error(-99, "x").code_name == "-99"


@pytest.mark.parametrize("call", [
    lambda d: seedpipe.Loader(d, "shapes-train"),
    lambda d: seedpipe.Loader(d, "shapes-train", 0, 8),
    lambda d: seedpipe.digest(d, "shapes-train"),
    lambda d: seedpipe.verify(d, "shapes-train"),
    lambda d: seedpipe.attach(".sp-py-no-such-region", 0, True),
    lambda d: seedpipe.Mixture([(d, 1)], 10),
])
def test_options_are_keyword_only(shapes, call):
    with pytest.raises(TypeError, match="positional"):
        call(shapes)


def test_import_has_no_side_effects():
    # A fresh interpreter: importing seedpipe (and its public submodules)
    # leaves the warnings filters as they were. numpy and torch install
    # their own at import, so they are imported first.
    import subprocess
    import sys
    code = ("import warnings, numpy\ntry:\n import torch\nexcept ImportError:\n pass\n"
            "before = list(warnings.filters); import seedpipe, seedpipe.torch; "
            "from seedpipe.audit import AuditReport; "
            "assert callable(seedpipe.audit) and seedpipe.audit.__name__ == 'audit'; "
            "assert warnings.filters == before, set(warnings.filters) ^ set(before); print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr


def test_environment_value_refused(shapes, monkeypatch):
    """A SEEDPIPE_* variable outside its values fails the Loader at its
    creation (sp_loader_create's sp_env_check), naming it and what it takes."""
    monkeypatch.setenv("SEEDPIPE_ISA", "bogus")
    with pytest.raises(seedpipe.Error, match=r'SEEDPIPE_ISA="bogus".*sse2, avx2 or avx512'):
        seedpipe.Loader(shapes, seed=1, batch_size=4)
    monkeypatch.setenv("SEEDPIPE_ISA", "sse2")
    with seedpipe.Loader(shapes, seed=1, batch_size=4) as ld:
        assert len(ld) > 0

"""Token corpora against megatron-core itself (docs/tokens.md "The format").

megatron-core (PyPI, pinned below) is installed once with --no-deps into a
venv cached in the build folder (BUILD/megatron-venv, --system-site-packages
so that Debian's numpy and torch are seen); its indexed_dataset module is
imported without running the megatron.core package's __init__ (which needs a
newer torch than 1.13): stub packages point at the real folders and
megatron.core.utils is replaced by the one function the module takes from it.
Where the install or the import fails the tests skip, saying why.

 - test_megatron_written_read_by_seedpipe: corpora written by megatron-core's
   IndexedDatasetBuilder (add_item + end_document, add_document with several
   sequences a document, empty documents; uint16 and int32) are read by
   seedpipe (tests/tokens_dump: sp_dataset_open() + sp__tok_read()) with the
   same documents and tokens;
 - test_seedpipe_written_read_by_megatron: seedpipe.tokens.write()'s files
   (every dtype) are read back by megatron-core's IndexedDataset equal;
 - test_write_refusals: the Python writer's own checks.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import pytest

import seedpipe
import seedpipe.tokens

MCORE = "megatron-core==0.16.1"


def _build_dir():
    lib = os.environ.get("SEEDPIPE_LIB") or seedpipe.LIB_PATH
    return os.path.dirname(os.path.realpath(lib))


def _venv_site():
    """The venv's site-packages holding megatron-core, installed on first use."""
    venv = os.path.join(_build_dir(), "megatron-venv")
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, "installed-" + MCORE)
    if not os.path.exists(stamp):
        try:
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                           check=True, capture_output=True, timeout=120)
            subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--timeout", "30",
                            "--retries", "1", MCORE], check=True, capture_output=True,
                           timeout=300)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            out = getattr(e, "stderr", b"") or b""
            pytest.skip(f"cannot install {MCORE} into {venv} (no network? no python3-venv?): "
                        f"{e}; {out.decode(errors='replace')[-300:]}")
        open(stamp, "w").close()
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=60).stdout.strip()
    return site


def _import_indexed_dataset():
    """megatron.core.datasets.indexed_dataset, without megatron.core's __init__."""
    if "megatron.core.datasets.indexed_dataset" in sys.modules:
        return sys.modules["megatron.core.datasets.indexed_dataset"]
    site = _venv_site()
    root = os.path.join(site, "megatron")
    if not os.path.exists(os.path.join(root, "core", "datasets", "indexed_dataset.py")):
        pytest.skip(f"{MCORE} installed but {root}/core/datasets/indexed_dataset.py is missing")
    for name, path in (("megatron", root), ("megatron.core", os.path.join(root, "core")),
                       ("megatron.core.datasets", os.path.join(root, "core", "datasets"))):
        if name not in sys.modules:
            m = types.ModuleType(name)
            m.__path__ = [path]
            sys.modules[name] = m
    if "megatron.core.utils" not in sys.modules:
        utils = types.ModuleType("megatron.core.utils")
        utils.log_single_rank = lambda logger, level, msg, *a, **k: logger.log(level, msg)
        sys.modules["megatron.core.utils"] = utils
    try:
        spec = importlib.util.find_spec("megatron.core.datasets.indexed_dataset")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    except Exception as e:   # an API or dependency this torch lacks
        sys.modules.pop("megatron.core.datasets.indexed_dataset", None)
        pytest.skip(f"megatron-core's indexed_dataset does not import here: {e!r}")
    return mod


def _seedpipe_docs(path, fingerprint=False):
    """seedpipe's documents of the corpus at path (and its fingerprint), through
    tests/tokens_dump."""
    exe = os.path.join(_build_dir(), "tests", "tokens_dump")
    if not os.path.exists(exe):
        pytest.fail(f"{exe} not built")
    fd, out = tempfile.mkstemp(suffix=".dump")
    os.close(fd)
    try:
        r = subprocess.run([exe, path, out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        raw = np.fromfile(out, dtype="<i8")
    finally:
        os.unlink(out)
    D, kind = int(raw[0]), int(raw[1])
    assert kind == 6
    fp = raw[2:4].view("<u8").tolist()
    docs, at = [], 4
    for _ in range(D):
        n = int(raw[at])
        docs.append(raw[at + 1:at + 1 + n])
        at += 1 + n
    assert at == raw.size
    return (docs, fp) if fingerprint else docs


def _megatron_docs(idx_mod, prefix):
    ds = idx_mod.IndexedDataset(prefix, mmap=True)
    di = ds.document_indices
    return [np.concatenate([np.asarray(ds[s], dtype=np.int64) for s in range(di[d], di[d + 1])]
                           or [np.zeros(0, np.int64)]) for d in range(len(di) - 1)]


def _docs(rng, dtype, n):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(2 ** 40)), min(int(info.max), 2 ** 40)
    lens = rng.integers(0, 40, size=n)
    lens[::7] = 0   # empty documents
    return [rng.integers(lo, hi, size=k, endpoint=True).astype(dtype) for k in lens]


def test_megatron_written_read_by_seedpipe(tmp_path):
    idx = _import_indexed_dataset()
    import torch
    rng = np.random.default_rng(5)
    for dtype in (np.uint16, np.int32):
        prefix = str(tmp_path / f"mc_{np.dtype(dtype).name}")
        b = idx.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
        want = []
        for k, doc in enumerate(_docs(rng, dtype, 30)):
            if k % 3 == 0:      # one sequence, add_item + end_document
                b.add_item(torch.from_numpy(doc.astype(np.int64)))
                b.end_document()
            else:               # several sequences (some empty) as one document
                cut = sorted(rng.integers(0, doc.size, size=2, endpoint=True))
                lens = [int(cut[0]), int(cut[1] - cut[0]), int(doc.size - cut[1])]
                b.add_document(torch.from_numpy(doc.astype(np.int64)), lens)
            want.append(doc.astype(np.int64))
        b.finalize(prefix + ".idx")
        for name in (prefix, prefix + ".idx", prefix + ".bin"):
            got = _seedpipe_docs(name)
            assert len(got) == len(want)
            for d, (g, w) in enumerate(zip(got, want)):
                assert np.array_equal(g, w), (dtype, d)
        # and megatron reads its own files as we do
        assert all(np.array_equal(a, w) for a, w in zip(_megatron_docs(idx, prefix), want))


def test_seedpipe_written_read_by_megatron(tmp_path):
    idx = _import_indexed_dataset()
    rng = np.random.default_rng(7)
    for dtype in seedpipe.tokens.DTYPES:
        prefix = str(tmp_path / f"sp_{dtype}")
        docs = _docs(rng, np.dtype(dtype), 25)
        assert seedpipe.tokens.write(prefix, iter(docs), dtype=dtype) == 25
        got = _megatron_docs(idx, prefix)
        ds = idx.IndexedDataset(prefix, mmap=False)
        assert ds.index.dtype == np.dtype(dtype).type
        assert len(got) == len(docs)
        for d, (g, w) in enumerate(zip(got, docs)):
            assert np.array_equal(g, w.astype(np.int64)), (dtype, d)
        mine = _seedpipe_docs(prefix)
        assert all(np.array_equal(a, w.astype(np.int64)) for a, w in zip(mine, docs))


def test_write_refusals(tmp_path):
    p = str(tmp_path / "r")
    with pytest.raises(ValueError, match="document 1: token 256 does not fit uint8"):
        seedpipe.tokens.write(p, [[1, 2], [256]], dtype="uint8")
    with pytest.raises(ValueError, match="tokens must be integers"):
        seedpipe.tokens.write(p, [np.array([1.5])], dtype="int32")
    with pytest.raises(ValueError, match="dtype 'float32'"):
        seedpipe.tokens.write(p, [[1]], dtype="float32")
    with pytest.raises(ValueError, match="1-D"):
        seedpipe.tokens.write(p, [np.zeros((2, 2), np.int32)], dtype="int32")
    assert not os.path.exists(p + ".bin") and not os.path.exists(p + ".idx")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".r.")]   # no temporaries
    with pytest.raises(seedpipe.Error, match="nodir"):
        seedpipe.tokens.write(str(tmp_path / "nodir" / "x"), [[1]])
    assert seedpipe.tokens.write(p, [[], [3, 4], np.array([], np.int64)], dtype="int16") == 3
    assert [d.tolist() for d in _seedpipe_docs(p)] == [[], [3, 4], []]

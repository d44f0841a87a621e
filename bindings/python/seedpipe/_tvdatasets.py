"""torchvision's dataset objects the drop-in's C path reads itself
(issue 39 item 5):

- MNIST, FashionMNIST and KMNIST keep their images in IDX files
  (`<root>/<Class>/raw/{train,t10k}-images-idx3-ubyte` and the labels beside
  them), which seedpipe's IDX reader opens; the pipeline starts with
  `decode mode=gray`, so a sample stays one channel, (n, 1, 28, 28) as
  torchvision's ToTensor() gives.
- CIFAR10 and CIFAR100 keep theirs in Python pickles, which seedpipe does not
  read; the object holds them in memory (.data, (n, 32, 32, 3) uint8, and
  .targets), and that is what its __getitem__ gives. Those arrays are written
  once as an RGB IDX pair (`images-idx4-ubyte`: n, rows, columns, 3;
  `labels-idx1-ubyte`) in a folder of the cache named by their content
  (BLAKE2b-128 of shape, pixels and labels: `<cache>/tv-arrays/<hex>/`, the
  cache being $SEEDPIPE_CACHE, else $XDG_CACHE_HOME/seedpipe, else
  ~/.cache/seedpipe), and the C side reads that pair. The dataset's identity
  is therefore its content: a .data or .targets changed after loading is
  what torch's __getitem__ reads too, so it is read as it is (not refused).

    idx_source(ds)       the images file of such a dataset, or None when ds is
                         not one (or was loaded from torchvision's legacy
                         processed/*.pt files, which seedpipe does not read);
                         for MNIST & co refuses by name a changed
                         .data/.targets; for all a target_transform
    array_source(ds, write=True)
                         the same for CIFAR10/100 (the cached IDX pair;
                         write=False: only the checks, no file)
    fake_source(ds)      the "fakedata:..." spec of a FakeData: its images
                         generated in C (a pure function of its settings and
                         the index, docs/determinism.md section 2, tag 14),
                         not torch's values
    channels_of(path)    1 or 3: the channels of an IDX images file, from its
                         header, or of a "fakedata:" spec (None when it is
                         neither)
    gray_pipeline(tf)    (pipeline spec, dtype) of its transform

Other torchvision datasets (EMNIST, QMNIST, SVHN, ...) are not read
by the C path: the automatic backend choice gives them to the Python
backend, which runs their own __getitem__ (docs/python.md).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import struct

import numpy as np

_IDX_CLASSES = ("MNIST", "FashionMNIST", "KMNIST")


def _refuse(what, why):
    raise ValueError(f"DataLoader: {what}: {why}")


def idx_source(ds):
    try:
        from torchvision.datasets import MNIST
    except ImportError:   # pragma: no cover
        return None
    name = type(ds).__name__
    if not isinstance(ds, MNIST) or name not in _IDX_CLASSES or \
            type(ds).__module__ != MNIST.__module__:
        return None
    part = "train" if ds.train else "t10k"
    images = os.path.join(ds.raw_folder, f"{part}-images-idx3-ubyte")
    labels = os.path.join(ds.raw_folder, f"{part}-labels-idx1-ubyte")
    if not (os.path.isfile(images) and os.path.isfile(labels)):
        return None
    if getattr(ds, "target_transform", None) is not None:
        _refuse(f"dataset: {name}(target_transform=...)", "seedpipe yields the IDX file's "
                "label; apply the target transform to the labels in your loop instead")
    data = np.fromfile(images, dtype=np.uint8, offset=16)
    tgt = np.fromfile(labels, dtype=np.uint8, offset=8)
    mine = ds.data.detach().cpu().numpy() if hasattr(ds.data, "numpy") else np.asarray(ds.data)
    theirs = ds.targets.detach().cpu().numpy() if hasattr(ds.targets, "numpy") else \
        np.asarray(ds.targets)
    if mine.dtype != np.uint8 or mine.size != data.size or \
            not np.array_equal(mine.reshape(-1), data):
        _refuse(f"dataset: {name}.data", f"it is not {images} (changed after loading); "
                "select samples with torch.utils.data.Subset instead")
    if theirs.shape != tgt.shape or not np.array_equal(theirs.astype(np.int64),
                                                       tgt.astype(np.int64)):
        _refuse(f"dataset: {name}.targets", f"they are not {labels} (changed after "
                "loading); relabel in your loop instead")
    return images


_ARRAY_CLASSES = ("CIFAR10", "CIFAR100")


def _cache_root():
    env = os.environ.get("SEEDPIPE_CACHE")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "seedpipe")
    return os.path.join(os.path.expanduser("~"), ".cache", "seedpipe")


def _write_once(path, parts):
    if os.path.isfile(path) and os.path.getsize(path) == sum(len(p) for p in parts):
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        for p in parts:
            f.write(p)
    os.replace(tmp, path)


def array_source(ds, write=True):
    try:
        from torchvision.datasets import CIFAR10
    except ImportError:   # pragma: no cover
        return None
    name = type(ds).__name__
    if not isinstance(ds, CIFAR10) or name not in _ARRAY_CLASSES or \
            type(ds).__module__ != CIFAR10.__module__:
        return None
    if getattr(ds, "target_transform", None) is not None:
        _refuse(f"dataset: {name}(target_transform=...)", "seedpipe yields the dataset's "
                "label; apply the target transform to the labels in your loop instead")
    data = ds.data
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 4 or \
            data.shape[3] != 3 or not all(0 < d < 65536 for d in data.shape[1:3]) or \
            not 0 < data.shape[0] < 2**32:
        _refuse(f"dataset: {name}.data", "seedpipe reads it as torchvision loads it, a "
                "(n, rows, columns, 3) uint8 numpy array; this one is "
                f"{type(data).__name__} {getattr(data, 'dtype', '')} "
                f"{getattr(data, 'shape', '')}")
    try:
        tgt = np.asarray(ds.targets)
    except Exception:   # noqa: BLE001
        tgt = None
    if tgt is None or tgt.shape != (data.shape[0],) or tgt.dtype.kind not in "iu" or \
            (tgt.size and (tgt.min() < 0 or tgt.max() > 255)):
        _refuse(f"dataset: {name}.targets", f"seedpipe takes one integer class in 0..255 per "
                f"image ({data.shape[0]} of them); relabel in your loop instead")
    if not write:
        return ""
    data = np.ascontiguousarray(data)
    labels = tgt.astype(np.uint8)
    h = hashlib.blake2b(digest_size=16)
    h.update(struct.pack("<4Q", *data.shape))
    h.update(memoryview(data).cast("B"))
    h.update(labels.tobytes())
    folder = os.path.join(_cache_root(), "tv-arrays", h.hexdigest())
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.stat(folder).st_uid != os.getuid():
        _refuse(f"dataset: {name}", f"the cache folder {folder} is not this user's (set "
                "SEEDPIPE_CACHE to a folder of your own)")
    n, rows, cols, ch = data.shape
    images = os.path.join(folder, "images-idx4-ubyte")
    _write_once(os.path.join(folder, "labels-idx1-ubyte"),
                [struct.pack(">II", 0x801, n), labels.tobytes()])
    _write_once(images, [struct.pack(">IIIII", 0x804, n, rows, cols, ch),
                         memoryview(data).cast("B")])
    return images


def fake_source(ds):
    """The "fakedata:..." dataset spec of a torchvision FakeData (its images
    generated in C, dataset/dataset_fake.c; not torch's values), or None
    when ds is not one; refuses by name a target_transform or an image_size
    that is not (1 or 3, H, W)."""
    try:
        from torchvision.datasets import FakeData
    except ImportError:   # pragma: no cover
        return None
    if type(ds) is not FakeData:
        return None
    if getattr(ds, "target_transform", None) is not None:
        _refuse("dataset: FakeData(target_transform=...)", "seedpipe yields the generated "
                "label; apply the target transform to the labels in your loop instead")
    shape = tuple(ds.image_size) if isinstance(ds.image_size, (tuple, list)) else ()
    if len(shape) != 3 or shape[0] not in (1, 3) or \
            not all(isinstance(v, int) and 0 < v < 65536 for v in shape):
        _refuse(f"dataset: FakeData(image_size={ds.image_size!r})", "seedpipe generates "
                "(C, H, W) images with C 1 (grey) or 3 (RGB), H and W in 1..65535")
    for name, v, lo, hi in (("size", ds.size, 1, 2**31), ("num_classes", ds.num_classes, 1,
                                                          65536),
                            ("random_offset", ds.random_offset, 0, 2**62)):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            _refuse(f"dataset: FakeData({name}={v!r})", f"seedpipe takes an integer in "
                    f"{lo}..{hi}")
    c, h, w = shape
    return (f"fakedata:size={ds.size},image={c}x{h}x{w},classes={ds.num_classes},"
            f"offset={ds.random_offset}")


_IDX_SUFFIXES = ("images-idx3-ubyte", "images.idx3-ubyte", "images-idx4-ubyte")


def channels_of(path):
    p = os.fsdecode(path)
    if p.startswith("fakedata:"):   # generated images: image=CxHxW, 3 by default
        for part in p[len("fakedata:"):].split(","):
            if part.startswith("image=") and part[6:7] in ("1", "3") and part[7:8] == "x":
                return int(part[6])
        return 3
    base = p[:-3] if p.endswith(".gz") else p
    if not base.endswith(_IDX_SUFFIXES) or not os.path.isfile(p):
        return None
    try:
        with (gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")) as f:
            h = f.read(20)
    except OSError:
        return None
    if len(h) >= 16 and h[:4] == b"\0\0\x08\x03":
        return 1
    if len(h) == 20 and h[:4] == b"\0\0\x08\x04":
        return struct.unpack(">I", h[16:20])[0]
    return None


def gray_pipeline(tf, dtype):
    """The transform as a pipeline on one-channel images: `decode mode=gray`
    first (the IDX pixels as torchvision's mode "L" PIL image), then the
    transform's ops. dtype: the caller's, else the transform's."""
    from . import transforms as T
    if tf is None:
        return "decode mode=gray", dtype
    if isinstance(tf, str):
        spec, tdt = tf, None
    else:
        comp = tf if hasattr(tf, "spec") else T.from_torchvision(tf)
        if isinstance(comp, T._Op):
            comp = T.Compose([comp])
        spec, tdt = comp.spec(), comp.dtype
    if spec and spec.lstrip().startswith("decode"):   # a pipeline with its own decode
        return spec, dtype or tdt
    return ("decode mode=gray" + (" | " + spec if spec else "")), dtype or tdt

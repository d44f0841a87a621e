"""torchvision's dataset objects the drop-in's C path reads itself
(issue 39 item 5): MNIST, FashionMNIST and KMNIST keep their images in IDX
files (`<root>/<Class>/raw/{train,t10k}-images-idx3-ubyte` and the labels
beside them), which seedpipe's IDX reader opens; the pipeline starts with
`decode mode=gray`, so a sample stays one channel, (n, 1, 28, 28) as
torchvision's ToTensor() gives.

    idx_source(ds)       the images file of such a dataset, or None when ds is
                         not one (or was loaded from torchvision's legacy
                         processed/*.pt files, which seedpipe does not read);
                         refuses by name a changed .data/.targets or a
                         target_transform
    gray_pipeline(tf)    (pipeline spec, dtype) of its transform

Other torchvision datasets (CIFAR10/100's pickled batches, FakeData, EMNIST,
QMNIST) are not read by the C path: the automatic backend choice gives them
to the Python backend, which runs their own __getitem__ (docs/python.md).
"""
from __future__ import annotations

import os

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

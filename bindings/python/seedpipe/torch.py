"""Optional PyTorch interop (torch is never required by seedpipe).

    from seedpipe.torch import to_tensors
    for images, labels in loader:
        x, y = to_tensors(images, labels)       # zero copy: torch.from_numpy

The tensors share memory with the loader's views, so they are valid exactly
as long as the views (until the next step); pass copy=True to own them, or
.to(device) which copies anyway.
"""
from __future__ import annotations

try:
    import torch as _torch
except ImportError:   # pragma: no cover - depends on the installation
    _torch = None

import os

import numpy as np

available = _torch is not None


def _need():
    if _torch is None:
        raise ImportError("seedpipe.torch needs PyTorch (pip install torch, or Debian "
                          "python3-torch)")
    return _torch


def to_tensor(a: np.ndarray, copy: bool = False):
    """numpy -> torch sharing memory; a seedpipe bfloat16 array (uint16 words
    marked by its dtype's metadata) becomes a torch.bfloat16 tensor."""
    torch = _need()
    if copy:
        a = np.array(a, copy=True, dtype=a.dtype)
    if (a.dtype.metadata or {}).get("seedpipe_dtype") == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def to_tensors(images: np.ndarray, labels: np.ndarray, copy: bool = False,
               labels_dtype=None):
    """(images, labels) numpy arrays -> torch tensors sharing their memory
    (torch.from_numpy; zero copy unless copy=True). labels_dtype, e.g.
    torch.long for nn.CrossEntropyLoss, converts (and so copies) the labels."""
    torch = _need()
    x = to_tensor(images, copy)
    y = to_tensor(labels, copy)
    if labels_dtype is not None:
        y = y.to(labels_dtype)
    return x, y


def from_dlpack(a: np.ndarray):
    """torch.from_dlpack over numpy's __dlpack__ (numpy >= 1.22; zero copy)."""
    torch = _need()
    return torch.utils.dlpack.from_dlpack(a)


# torch DataLoader arguments that have no meaning here: accepted only at their
# defaults (None / False / 0), else refused by name.
_TORCH_ONLY = {"sampler", "batch_sampler", "collate_fn", "worker_init_fn", "generator",
               "prefetch_factor", "persistent_workers", "timeout", "multiprocessing_context"}


class DataLoader:
    """A drop-in for torch.utils.data.DataLoader over an image dataset:

        from seedpipe.torch import DataLoader          # was: torch.utils.data
        loader = DataLoader(ImageFolder(root, transform=tf), batch_size=64,
                            shuffle=True, num_workers=4)

    `dataset` is a dataset path seedpipe opens (ImageFolder directory, list
    file, IDX, WebDataset shards) or a torchvision dataset object with a
    `.root` (ImageFolder, DatasetFolder): its root is opened and its
    `.transform`, when no `transform=` is given, is converted with
    seedpipe.transforms.from_torchvision. `transform` is a
    seedpipe.transforms / torchvision transform or a spec string (default
    "hflip p=0", the identity). Yields (images, labels) torch tensors: images
    share the batch memory (no copy; pinned copies with pin_memory=True),
    labels are int64 as default_collate makes them. Each iteration is one
    epoch; the next iteration is the next epoch (or call set_epoch).

    `state_dict()` / `load_state_dict()` follow torchdata's
    StatefulDataLoader: the state is the position after the last batch
    taken, and it resumes exactly with any num_workers. `seed` fixes the
    whole stream (shuffle order and augmentation draws). shuffle=False,
    sampler, batch_sampler, collate_fn and worker_init_fn are refused with a
    message: the order is seedpipe's keyed permutation, the same for any
    worker count.
    """

    def __init__(self, dataset, batch_size=1, shuffle=True, num_workers=0, transform=None,
                 seed=0, drop_last=False, pin_memory=False, dtype=None, layout="nchw",
                 copy=False, **kw):
        from . import transforms as T
        from ._core import Loader
        unknown = set(kw) - _TORCH_ONLY
        if unknown:
            raise TypeError(f"DataLoader: unexpected argument(s) {', '.join(sorted(unknown))}")
        refused = sorted(k for k, v in kw.items() if v not in (None, False, 0))
        if refused:
            raise ValueError(f"DataLoader: {', '.join(refused)} not supported (seedpipe orders, "
                             "batches and seeds the stream itself)")
        if not shuffle:
            raise ValueError("DataLoader: shuffle=False is not supported (the order is "
                             "seedpipe's keyed permutation of each epoch)")
        path = dataset
        if hasattr(dataset, "root") and not isinstance(dataset, (str, bytes, os.PathLike)):
            path = dataset.root
            if transform is None and getattr(dataset, "transform", None) is not None:
                transform = dataset.transform
            if getattr(dataset, "target_transform", None) is not None:
                raise ValueError("DataLoader: the dataset's target_transform is not supported")
        if transform is None:
            transform = "hflip p=0"
        elif not isinstance(transform, str) and not hasattr(transform, "spec"):
            transform = T.from_torchvision(transform)
        self.pin_memory = bool(pin_memory)
        self.batch_size = batch_size
        self._ld = Loader(path, pipeline=transform, seed=seed, batch_size=batch_size,
                          workers=num_workers, drop_last=drop_last, dtype=dtype,
                          layout=layout, copy=copy)
        self.dataset = dataset

    def __len__(self):
        return len(self._ld)

    @property
    def loader(self):
        """The seedpipe.Loader underneath (fingerprint, batch_info, explain...)."""
        return self._ld

    def set_epoch(self, epoch):
        self._ld.set_epoch(epoch)

    def state_dict(self):
        return self._ld.state_dict()

    def load_state_dict(self, state):
        self._ld.load_state_dict(state)

    def __iter__(self):
        torch = _need()
        for images, labels in self._ld:
            x, y = to_tensors(images, labels, labels_dtype=torch.long)
            if self.pin_memory:
                x = x.pin_memory()
            yield x, y

    def close(self):
        self._ld.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

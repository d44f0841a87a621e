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

"""Mixture: a weighted mixture of datasets, usable wherever a dataset path is.

    mix = seedpipe.Mixture([("data/main", 0.9), ("data/curated-{000000..000009}.tar", 0.1)],
                           length=500_000)
    loader = seedpipe.Loader(mix, pipeline="imagenet-train", seed=1, batch_size=256)
    dl = seedpipe.torch.DataLoader(mix, batch_size=256, shuffle=True)

A Mixture writes the `NAME.mix` file the C library reads (README "Mixtures";
docs/determinism.md section 10 is the schedule) into a private temporary
folder, or to `path=` when given, and is an os.PathLike of it: a Loader,
seedpipe.torch.DataLoader, digest() or verify() open it as any dataset. The
temporary file lives as long as the Mixture (a Loader keeps the Mixture it
was given). The sources are dataset paths (any kind but a mixture: an
ImageFolder, list, IDX file, WebDataset shards) or torchvision
ImageFolder-like objects (their root); each weight a positive int, float,
decimal.Decimal, decimal string or numpy integer or floating scalar,
written exactly as decimal digits: a float as its shortest repr (0.1 is
"0.1"), a numpy float as the shortest decimal that reads back to the same
value in its own type (numpy's repr: np.float32(0.1) is "0.1", not the
float64 value 0.10000000149011612), a numpy integer as its digits. The text
then follows the .mix weight rule (docs/determinism.md section 10: at most
18 significant digits and 18 decimals once trailing zeros are dropped).
length=None draws the sum of the sources' sizes per epoch.

Which source a sample came from: Loader.batch_info.sources gives (source,
index in that source) per sample of the last batch; Mixture.locate() maps
mixture indices.
"""
from __future__ import annotations

import decimal
import os
import shutil
import tempfile
import weakref
from typing import Iterable, List, Optional, Tuple


def _numpy_text(w):
    """A numpy integer or floating scalar's decimal text, or None when w is
    no such scalar: an integer as its digits, a float as the shortest
    decimal that reads back to the same value in its own type (numpy's
    repr: np.float32(0.1) is "0.1", not the 0.10000000149011612 of
    float(np.float32(0.1))). numpy is only asked when it is loaded already
    (a numpy scalar means it is)."""
    import sys
    np = sys.modules.get("numpy")
    if np is None:
        return None
    if isinstance(w, np.integer):
        return str(int(w))
    if isinstance(w, np.floating):
        return np.format_float_positional(w, unique=True, trim="-")
    return None


def _weight_text(w) -> str:
    """A weight as the .mix grammar writes it: digits with at most one '.'."""
    text = _numpy_text(w)
    if text is None and (isinstance(w, bool) or
                         not isinstance(w, (int, float, str, decimal.Decimal))):
        raise ValueError(f"Mixture: a weight must be a number, got {w!r}")
    try:
        if text is None:
            text = repr(w) if isinstance(w, float) else str(w).strip()
        d = decimal.Decimal(text)
    except decimal.InvalidOperation:
        raise ValueError(f"Mixture: weight {w!r} is not a number") from None
    if not d.is_finite() or d <= 0:
        raise ValueError(f"Mixture: weight {w!r} must be positive and finite")
    return format(d, "f")


def _source_path(ds) -> str:
    if isinstance(ds, Mixture):
        raise ValueError("Mixture: a mixture cannot be a source of a mixture (list its "
                         "sources instead)")
    if isinstance(ds, (str, bytes, os.PathLike)):
        path = os.fsdecode(ds)
    elif hasattr(ds, "root") and hasattr(ds, "samples"):   # torchvision ImageFolder
        path = os.fspath(ds.root)
    else:
        raise ValueError(f"Mixture: a source must be a dataset path or a torchvision "
                         f"ImageFolder, got {type(ds).__name__}")
    if not path or "\n" in path or "\t" in path:
        raise ValueError(f"Mixture: source path {path!r} is empty or holds a tab or newline")
    return os.path.abspath(os.path.expanduser(path))


class Mixture(os.PathLike):
    """Mixture(sources, *, length=None, path=None): sources is a list of
    (dataset, weight) pairs; see the module's help."""

    def __init__(self, sources: Iterable[Tuple[object, object]], *,
                 length: Optional[int] = None, path=None):
        pairs = list(sources)
        if not pairs:
            raise ValueError("Mixture: no source")
        if len(pairs) > 256:
            raise ValueError(f"Mixture: {len(pairs)} sources, at most 256")
        lines = []
        self.sources: List[str] = []
        self.weights: List[str] = []
        for k, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"Mixture: source {k} must be a (dataset, weight) pair, "
                                 f"got {pair!r}")
            src, w = _source_path(pair[0]), _weight_text(pair[1])
            self.sources.append(src)
            self.weights.append(w)
            lines.append(f"{w}\t{src}\n")
        if length is not None:
            if isinstance(length, bool) or not isinstance(length, int) or \
                    not 1 <= length <= 2**32:
                raise ValueError(f"Mixture: length must be an int in 1..2^32, got {length!r}")
            lines.insert(0, f"length\t{length}\n")
        self.length = length
        self._tmp = None
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="seedpipe-mix-")
            path = os.path.join(self._tmp, "mixture.mix")
            weakref.finalize(self, shutil.rmtree, self._tmp, True)
        path = os.path.abspath(os.fsdecode(path))
        if not path.endswith(".mix"):
            raise ValueError(f"Mixture: path {path!r} must end in .mix")
        with open(path, "w", encoding="utf-8") as f:
            f.write("# written by seedpipe.Mixture\n")
            f.writelines(lines)
        self.path = path
        self._info = None

    def __fspath__(self) -> str:
        return self.path

    def _dataset(self):
        """(sizes, class offsets, epoch length) from the library, once."""
        if self._info is None:
            import ctypes
            from ctypes import byref
            from . import _lib as L
            from ._errors import raise_error
            ds, err = ctypes.c_void_p(), L.sp_error()
            rc = L.sp_dataset_open(self.path.encode(), None, byref(ds), byref(err))
            if rc != 0:
                raise_error(rc, err, self.path)
            try:
                info = L.dataset_info(ds)
                srcs = [L.mix_source(ds, s) for s in range(info.mix_sources)]
                sizes = [int(L.dataset_info(src.dataset).size) for src in srcs]
                coff = [int(src.class_offset) for src in srcs]
                self._info = (sizes, coff, int(info.mix_length))
            finally:
                L.sp_dataset_close(ds)
        return self._info

    def __len__(self) -> int:
        """The draws of one epoch (length, or the sum of the sources' sizes)."""
        return self._dataset()[2]

    @property
    def sizes(self) -> List[int]:
        return list(self._dataset()[0])

    @property
    def class_offsets(self) -> List[int]:
        """Source s's labels start at class_offsets[s] in the mixture's labels."""
        return list(self._dataset()[1])

    def locate(self, index: int) -> Tuple[int, int]:
        """(source, index in that source) of mixture sample `index` (the
        sources' samples concatenated in order)."""
        sizes = self._dataset()[0]
        i = int(index)
        for s, n in enumerate(sizes):
            if 0 <= i < n:
                return s, i
            i -= n
        raise IndexError(f"Mixture.locate: sample {index} out of range ({sum(sizes)})")

    def __repr__(self):
        parts = ", ".join(f"({s!r}, {w})" for s, w in zip(self.sources, self.weights))
        return f"Mixture([{parts}], length={self.length!r})"

"""Optional PyTorch interop (torch is never required by seedpipe): the
drop-in DataLoader (below) and zero-copy conversions.

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

import json
import math
import os
import warnings

import numpy as np

from . import _tvcoco
from . import _tvdatasets as _tvd
from ._args import check_int as _check_int
from ._errors import Error
from ._launch import resolve_rank_world as _resolve_rank_world
from ._loader import Loader
from ._stream import EpochIter
from ._batchmix import CutMix, MixUp, RandomChoice  # noqa: F401 - batch mixes (collate_fn=)

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


# ---- the drop-in DataLoader ------------------------------------------------------

_warned_pin = [False]


def _refusal(name, why):
    return ValueError(f"DataLoader: {name}: {why} (or pass backend='python': the dataset's "
                      "own __getitem__ in seedpipe's workers, docs/python.md)")


def _refuse(name, why):
    raise _refusal(name, why)


def _torchvision_loaders():
    """torchvision's own image loaders (what ImageFolder uses by default)."""
    try:
        from torchvision.datasets import folder
    except ImportError:   # pragma: no cover - torchvision absent: nothing to compare
        return ()
    return tuple(f for f in (getattr(folder, n, None) for n in
                             ("default_loader", "pil_loader", "accimage_loader")) if f)


def _is_folder_dataset(ds):
    """A torchvision DatasetFolder (ImageFolder) or one shaped like it."""
    return (hasattr(ds, "root") and hasattr(ds, "samples") and hasattr(ds, "loader")
            and not isinstance(ds, (str, bytes, os.PathLike)))


def _check_folder_options(ds, where):
    """Refuse, by name, what a folder dataset does per sample in Python."""
    name = type(ds).__name__
    if getattr(ds, "target_transform", None) is not None:
        _refuse(f"{where}{name}(target_transform=...)",
                "seedpipe yields the folder's class index as the label; apply the target "
                "transform to the labels in your loop instead")
    if getattr(ds, "transforms", None) is not None and \
            type(ds.transforms).__name__ != "StandardTransform":
        _refuse(f"{where}{name}(transforms=...)",
                "a joint image/target transform runs Python per sample; use transform= "
                "(converted to a seedpipe pipeline)")
    loader = getattr(ds, "loader", None)
    if loader is not None and loader not in _torchvision_loaders():
        _refuse(f"{where}{name}(loader={getattr(loader, '__name__', loader)!r})",
                "seedpipe decodes the image files itself (JPEG, PNG); a custom loader would "
                "be ignored. Convert the files to JPEG or PNG, or keep "
                "torch.utils.data.DataLoader for this dataset")


def _check_folder_dataset(ds):
    """A folder dataset given as the DataLoader's dataset: its options, and
    its samples being the folder's listing."""
    _check_folder_options(ds, "dataset: ")
    if getattr(ds, "extensions", ()) is None:
        _refuse(f"dataset: {type(ds).__name__}(is_valid_file=...)",
                "seedpipe lists the folder's image files itself; select samples with "
                "torch.utils.data.Subset(dataset, indices) instead")
    if getattr(ds, "imgs", ds.samples) is not ds.samples:
        _refuse(f"dataset: {type(ds).__name__}.imgs",
                ".imgs was replaced and no longer is .samples; select samples with "
                "torch.utils.data.Subset instead")


def _dataset_transform(ds):
    return getattr(ds, "transform", None)


def _subset_indices(sub, n, where):
    """A Subset's indices as an int64 array in [0, n), refused by name as
    torch would refuse them (a float, a string, a nested list) or out of
    range; negative ones wrap, as a list index does."""
    raw = sub.indices
    if hasattr(raw, "detach") and hasattr(raw, "numpy"):     # a tensor of indices
        raw = raw.detach().cpu().numpy()
    try:
        a = np.asarray(raw)
    except ValueError:                                          # ragged: nested lists
        a = np.asarray(raw, dtype=object)
    if a.ndim != 1 and a.size:
        _refuse(f"{where}Subset.indices", f"a nested sequence ({a.ndim} dimensions); torch "
                "indexes with integers: pass a flat list of integer indices")
    if a.dtype.kind == "b":
        a = a.astype(np.int64)
    if a.size and a.dtype.kind not in "iu":
        bad = next((x for x in a.tolist() if isinstance(x, bool) or not isinstance(x, int)),
                   a.tolist()[0])
        if isinstance(bad, (list, tuple)):
            _refuse(f"{where}Subset.indices", f"a nested sequence ({bad!r}); torch indexes "
                    "with integers: pass a flat list of integer indices")
        _refuse(f"{where}Subset.indices", f"{bad!r} is not an integer index (torch raises "
                "TypeError for it): pass integer indices")
    a = a.astype(np.int64, copy=False)
    out = (a < -n) | (a >= n)
    if out.any():
        _refuse(f"{where}Subset.indices", f"index {int(a[out.argmax()])} out of range for {n} "
                "samples")
    return np.where(a < 0, a + n, a)


def _sample_list(ds, where="dataset: "):
    """(absolute paths, labels, classes, transform) of a folder dataset, or a
    Subset / ConcatDataset of them, in the dataset's index order: paths a
    numpy object array, labels an int32 array (a Subset of a million
    indices is one fancy index, not a Python loop; a chain of Subsets is
    walked, not recursed into)."""
    from torch.utils.data import ConcatDataset, Subset
    chain = []
    while isinstance(ds, Subset):
        chain.append(ds)
        ds = ds.dataset
    base = where + "Subset of " * min(len(chain), 3) + ("... " if len(chain) > 3 else "")
    if isinstance(ds, ConcatDataset):
        parts = [_sample_list(part, base + f"ConcatDataset part {k}: ")
                 for k, part in enumerate(ds.datasets)]
        for k, (_, _, _, t) in enumerate(parts[1:], 1):
            if _spec_of(t) != _spec_of(parts[0][3]):
                _refuse(f"{base}ConcatDataset", "its parts have different transforms; "
                        "seedpipe runs one pipeline per loader: give them the same "
                        "transform, or pass transform= to the DataLoader")
        paths = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, object)
        labels = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int32)
        ncls, tf = max((p[2] for p in parts), default=0), parts[-1][3] if parts else None
    elif _is_folder_dataset(ds):
        _check_folder_options(ds, base)
        root = os.path.abspath(os.path.expanduser(os.fspath(ds.root)))
        paths = np.empty(len(ds.samples), dtype=object)
        paths[:] = [os.path.join(root, os.path.relpath(os.path.abspath(p), root))
                    for p, _ in ds.samples]
        labels = np.fromiter((int(c) for _, c in ds.samples), dtype=np.int32,
                             count=len(ds.samples))
        ncls = len(getattr(ds, "classes", ())) or (int(labels.max()) + 1 if labels.size else 0)
        tf = _dataset_transform(ds)
    else:
        _refuse_dataset(ds)
    for k, sub in enumerate(reversed(chain)):
        idx = _subset_indices(sub, len(paths), where + "Subset of " * (len(chain) - 1 - k))
        paths, labels = paths[idx], labels[idx]
    return paths, labels, ncls, tf


def _refuse_dataset(ds):
    _refuse(f"dataset={type(ds).__name__}",
            "seedpipe reads and decodes the image files itself, so it takes an image "
            "dataset it can read without running Python per sample: a torchvision "
            "ImageFolder/DatasetFolder, a torch.utils.data.Subset or ConcatDataset of "
            "them, or a dataset path (an image folder, a list file, IDX files, WebDataset "
            "shards). For a custom Dataset keep torch.utils.data.DataLoader, or write its "
            "files as an image folder")


def _spec_of(tf):
    if tf is None:
        return None
    if isinstance(tf, str):
        return tf
    if hasattr(tf, "spec"):
        return (tf.spec(), getattr(tf, "dtype", None))
    from . import transforms as T
    c = T.from_torchvision(tf)
    return (c.spec(), c.dtype)


def _gen_seed(sampler):
    g = getattr(sampler, "generator", None)
    return int(g.initial_seed()) if g is not None else None


def _read_sampler(sampler, dataset):
    """(shuffle, rank, world, seed, drop_last, extra) from a torch sampler,
    extra the seedpipe.Loader arguments of its sampler (indices,
    num_samples, replacement, weights, repeat; docs/determinism.md section
    13), or a ValueError naming it."""
    from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler,
                                  SubsetRandomSampler, WeightedRandomSampler)
    name = type(sampler).__name__
    n = len(dataset) if hasattr(dataset, "__len__") else None
    # What the sampler is, first: one seedpipe cannot follow is refused by
    # its own name, whatever dataset it samples.
    if isinstance(sampler, SubsetRandomSampler):
        return True, None, None, _gen_seed(sampler), False, {"indices": _index_list(
            sampler.indices, n, name)}
    if isinstance(sampler, WeightedRandomSampler):
        return (False, None, None, _gen_seed(sampler), False,
                _weighted_args(sampler, n))
    if name == "RASampler" and all(hasattr(sampler, a) for a in (
            "repetitions", "num_replicas", "rank", "shuffle", "seed", "num_selected_samples")):
        return _ra_args(sampler, dataset)
    if isinstance(sampler, (list, tuple, range)) or (
            hasattr(sampler, "__len__") and hasattr(sampler, "__getitem__")
            and not hasattr(sampler, "set_epoch")):
        return False, None, None, None, False, {"indices": _index_list(sampler, n, name)}
    if not (isinstance(sampler, DistributedSampler) or type(sampler) is SequentialSampler
            or type(sampler) is RandomSampler):
        _refuse(f"sampler={name}",
                "seedpipe orders the epoch itself: pass shuffle=True or False, a "
                "DistributedSampler under DDP, or one of the samplers it maps "
                "(RandomSampler, SubsetRandomSampler, WeightedRandomSampler, RASampler, a "
                "list of indices; docs/python.md)")
    src = getattr(sampler, "dataset", getattr(sampler, "data_source", None))
    if src is not dataset:
        _refuse(f"sampler={name}", "it samples another dataset than the DataLoader's; "
                "pass the same dataset object to both")
    if isinstance(sampler, DistributedSampler):
        return (bool(sampler.shuffle), int(sampler.rank), int(sampler.num_replicas),
                int(sampler.seed), bool(sampler.drop_last), {})
    if type(sampler) is SequentialSampler:
        return False, None, None, None, False, {}
    # RandomSampler: torch's num_samples without replacement is whole
    # permutations, then a part of one (as seedpipe's rounds are)
    extra = {}
    if sampler.replacement:
        extra["replacement"] = True
    if sampler._num_samples is not None or sampler.replacement:
        extra["num_samples"] = int(sampler.num_samples)
    return True, None, None, _gen_seed(sampler), False, extra


def _index_list(indices, n, name):
    """A sampler's dataset indices as ints: in range, each once (seedpipe
    addresses a sample's augmentation by its index)."""
    try:
        out = [int(i.__index__()) for i in indices]
    except (AttributeError, TypeError):
        _refuse(f"sampler={name}", "its indices are not all integers; pass integer indices")
    if not out:
        _refuse(f"sampler={name}", "it has no indices (torch would yield an empty epoch); "
                "pass at least one index")
    bad = next((i for i in out if i < 0 or (n is not None and i >= n)), None)
    if bad is not None:
        _refuse(f"sampler={name}", f"index {bad} is out of range for the dataset's {n} "
                f"samples; pass indices in [0, {n - 1}]")
    if len(set(out)) != len(out):
        _refuse(f"sampler={name}", "an index is listed twice: seedpipe augments a sample "
                "by its index, so the two copies would be the same bytes; use "
                "seedpipe.torch.RASampler (each copy augmented as its own) to repeat samples")
    return out


def _weighted_args(sampler, n):
    name = "WeightedRandomSampler"
    w = sampler.weights.detach().cpu().double().numpy()
    extra = {"replacement": bool(sampler.replacement), "num_samples": int(sampler.num_samples),
             "weights": w}
    if not sampler.replacement and int(sampler.num_samples) > int((w > 0).sum()):
        _refuse(f"sampler={name}(replacement=False)", f"num_samples={int(sampler.num_samples)} "
                f"is more than the {int((w > 0).sum())} samples of weight above 0 (torch "
                "refuses it too); pass a smaller num_samples, or replacement=True")
    if n is not None and len(w) > n:
        _refuse(f"sampler={name}", f"{len(w)} weights for a dataset of {n} samples (torch "
                "would draw indices past its end)")
    if n is not None and len(w) < n:   # torch draws from the first len(w) samples
        extra["indices"] = list(range(len(w)))
    return extra


def _ra_args(sampler, dataset):
    """torchvision's classification reference RASampler (or seedpipe's): each
    sample repeated `repetitions` times, the copies dealt over the ranks, the
    epoch num_selected_samples per rank."""
    if sampler.dataset is not dataset:
        _refuse("sampler=RASampler", "it samples another dataset than the DataLoader's; "
                "pass the same dataset object to both")
    world = int(sampler.num_replicas)
    per_rank = int(sampler.num_selected_samples)
    if per_rank == 0:
        _refuse("sampler=RASampler", f"{len(dataset)} samples give each of {world} ranks "
                "num_selected_samples = 0 (the sampler keeps len // 256 * 256 / world): torch "
                "would yield an empty epoch")
    extra = {"repeat": int(sampler.repetitions), "num_samples": per_rank * world}
    return bool(sampler.shuffle), int(sampler.rank), world, int(sampler.seed), False, extra


class RASampler:
    """torchvision's classification reference sampler
    (references/classification/sampler.py), for seedpipe's DataLoader: each
    sample `repetitions` times an epoch, the copies dealt round-robin over
    the `num_replicas` ranks, num_selected_samples = len // 256 * 256 //
    num_replicas per rank. Given to seedpipe.torch.DataLoader it maps to
    Loader(repeat=repetitions) (each copy augmented as its own, seedpipe's
    keyed order); iterated by torch, it gives the reference's indices."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 repetitions=3):
        import torch
        if num_replicas is None or rank is None:
            dist = torch.distributed
            up = dist.is_available() and dist.is_initialized()
            if num_replicas is None:
                num_replicas = dist.get_world_size() if up else 1
            if rank is None:
                rank = dist.get_rank() if up else 0
        self.dataset, self.num_replicas, self.rank = dataset, int(num_replicas), int(rank)
        self.epoch, self.shuffle, self.seed = 0, bool(shuffle), int(seed)
        self.repetitions = _check_int("repetitions", repetitions, 1, 1 << 16)
        self.num_samples = int(math.ceil(len(dataset) * float(self.repetitions) /
                                         self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        self.num_selected_samples = int(math.floor(len(dataset) // 256 * 256 /
                                                   self.num_replicas))

    def __iter__(self):
        import torch
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(len(self.dataset), generator=g).tolist()
        else:
            indices = list(range(len(self.dataset)))
        indices = [i for i in indices for _ in range(self.repetitions)]
        indices += indices[:(self.total_size - len(indices))]
        indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(indices[:self.num_selected_samples])

    def __len__(self):
        return self.num_selected_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


class DataLoader:
    """A drop-in for torch.utils.data.DataLoader, over any map-style dataset:

    Two backends (`.backend`, and `.backend_reason` why the Python one was
    chosen). "c": seedpipe's C path, for an image dataset it reads and
    decodes itself, described below. "python": any other map-style
    dataset, its __getitem__ run in seedpipe's own forked workers with
    random, NumPy and torch seeded per sample (seedpipe._pytorch, docs/
    python.md "Your own Dataset, exact"), with collate_fn, worker_init_fn,
    any sampler or batch_sampler, batch_size=None. DataLoader(...) picks the
    C path when it applies (see c_path_reason in seedpipe._pytorch) and the
    Python backend otherwise; backend="c" or "python" forces one. The rest
    of this comment is the C path.

        from seedpipe.torch import DataLoader          # was: torch.utils.data
        sampler = DistributedSampler(train_ds)         # under DDP, as before
        loader = DataLoader(train_ds, batch_size=64, sampler=sampler,
                            num_workers=4, pin_memory=True)
        for epoch in range(start, epochs):
            sampler.set_epoch(epoch)   # or loader.set_epoch(epoch)
            for images, labels in loader: ...

    It takes torch's arguments, in torch's order, with torch's meaning, and
    refuses by name (ValueError "DataLoader: NAME: what to do instead") what
    it cannot honour; it never ignores one silently.

    dataset: a torchvision ImageFolder/DatasetFolder (its root is opened; its
    `.transform` is converted with seedpipe.transforms.from_torchvision; its
    samples must be what torchvision lists: `is_valid_file`, a custom
    `loader`, a changed `.samples`/`.imgs` and `target_transform` are
    refused), a torch Subset or ConcatDataset of them (handed to the C
    library as an explicit sample list: paths and labels in the dataset's
    index order; every file is hashed at open), or a dataset path seedpipe
    opens (image folder, list file, IDX, WebDataset shards), or torchvision's
    CocoDetection wrapped with wrap_dataset_for_transforms_v2 and given v2
    transforms (seedpipe._tvcoco: targets through the pipeline; batches are
    collate_fn=lambda b: tuple(zip(*b)) of (tv_tensors.Image, dict with
    BoundingBoxes, Mask, labels, image_id), as torchvision gives them). Any
    other dataset goes to the Python backend (backend="c" refuses it by
    name).

    batch_size: per process, as in torch: the global batch is batch_size *
    world. Keep batch_size * world fixed for world-size-invariant runs: the
    ranks' slices of a global batch, concatenated in rank order, are then
    the single-process batch (shuffle=True), byte for byte.

    shuffle (default False, as torch): True is seedpipe's keyed permutation
    of each epoch (not torch's random numbers); False is the dataset's
    canonical order, which is torchvision ImageFolder's index order.

    sampler: a DistributedSampler (its rank, num_replicas, shuffle, seed and
    drop_last are read; set_epoch on it or on the loader), a
    SequentialSampler or a RandomSampler (also replacement=True and
    num_samples=) of the same dataset, a SubsetRandomSampler, a list or
    range of indices, a WeightedRandomSampler (with or without
    replacement) or a RASampler (torchvision's reference or seedpipe.torch.RASampler): each
    mapped to seedpipe's keyed sampler (docs/determinism.md section 13).
    rank=/world= (ints or "auto": torchrun, OpenMPI, MPICH, Slurm,
    see seedpipe.distributed_env) give DDP without a sampler, as a
    DistributedSampler with the same shuffle would. Under DDP the epoch is
    padded to a multiple of world by wrapping around its own order (as
    DistributedSampler does) unless drop_last, so every rank gets the same
    number of batches and samples, never an empty batch; with shuffle=False
    rank r gets exactly DistributedSampler(shuffle=False)'s indices, also
    with the sampler's drop_last=True (pytorch/examples' validation
    sampler): the epoch is then the first floor(N / world) * world samples,
    rank r taking every world-th from r. Shuffled, the sampler's drop_last
    with an uneven tail needs the DataLoader's drop_last too (refused
    otherwise, by name). Other samplers (an index listed twice, custom
    classes) are refused by name.

    Batches: (images, labels) tensors; labels int64 as default_collate makes
    them. collate_fn=MixUp(...)/CutMix(...)/RandomChoice([...]) (seedpipe's,
    or torchvision v2's mapped to them) mixes each batch, keyed by its epoch
    and global index (docs/determinism.md section 11a): (float images,
    float32 targets (B, num_classes)); the transform must give float
    images. The images are the caller's (an owned copy; with
    pin_memory=True where CUDA exists, the pinned copy). zero_copy=True
    yields views of the loader's batch memory instead (a mixed batch is
    always new tensors): valid until the next batch is taken
    from this loader (its memory is then reused), set_epoch(),
    load_state_dict() or close() (keep one longer with .clone()). A view
    keeps the memory's owner alive, so it is never freed under it when the
    DataLoader is dropped or garbage-collected (only close() frees it).
    pin_memory=True without CUDA is ignored (seedpipe warns once; torch
    1.13 ignores it silently).

    Iterators: one live iterator per loader (they share its stream). Once
    iter() started a new one, the next __next__ of an older iterator that
    had not ended raises RuntimeError (so zip(dl, dl) is an error: use two
    loaders); an ended one keeps raising StopIteration.

    Epochs: each iter() starts an epoch: the first is 0, the next one more,
    or the one set_epoch(e) named; with a DistributedSampler, as in torch,
    the sampler's epoch (its set_epoch(e); loader.set_epoch(e) sets it).
    After load_state_dict(state) the next iterator resumes at the state's
    position (torchdata StatefulDataLoader's rule), also when set_epoch() is
    called with the state's epoch first, as a DDP loop does; state_dict()
    is the position after the last batch taken, and resumes exactly with
    any num_workers. A DistributedSampler epoch run again without
    set_epoch() in between repeats the epoch exactly, augmentation draws
    included (torch would draw new ones): warned once (UserWarning) when
    the order is shuffled or the transform draws random numbers.

    seed (seedpipe's): the whole stream (order and augmentation draws) is a
    function of it. seed=None (default): a DistributedSampler's seed (the
    value torch requires to be the same on every rank); with rank=/world=
    (world > 1) and no sampler, rank 0's torch.initial_seed() broadcast
    when torch.distributed is initialized (a collective: every rank builds
    the loader), else 0 as DistributedSampler's default, never each
    process's own; else generator.initial_seed() when a generator is given,
    or torch.initial_seed(), read when the first iterator starts (as torch
    reads it at iter()), or at the first state_dict() or .seed if earlier,
    and kept after. The seed used is .seed and is recorded in state_dict();
    a derived seed follows a loaded state's.

    num_workers: seedpipe's worker processes (C, forked; no Python runs in
    them), persistent for the loader's life whatever persistent_workers
    says (accepted, as torch: it needs num_workers > 0); prefetch_factor
    batches per worker are computed ahead (the ring: prefetch_factor *
    num_workers; default 2). on_error="fail" | "skip" | "substitute" says
    what a failing image does (seedpipe.Loader). transform, dtype, layout,
    cache and threads are seedpipe's (seedpipe.Loader).

    Refused by the C path, with what to do instead (the automatic choice
    gives these to the Python backend): batch_sampler, a collate_fn other
    than a batch mix, worker_init_fn, multiprocessing_context, a non-zero timeout, other
    samplers, num_workers > 64, batch_size * world > the samples with
    drop_last=True (torch would yield an empty epoch), a transform without
    one output size (ToTensor() alone: put CenterCrop(S) before it), rank=
    without world=.
    """

    backend = "c"
    backend_reason = None

    def __new__(cls, *args, backend=None, **kw):
        """The backend (see the class comment): a PythonDataLoader (a subclass)
        for a dataset the C path does not take, or with backend='python'."""
        _need()
        if cls is not DataLoader:
            return object.__new__(cls)
        if backend not in (None, "c", "python"):
            raise ValueError(f"DataLoader: backend={backend!r}: 'c', 'python' or None (chosen "
                             "from the dataset and the arguments)")
        named = dict(zip(_TORCH_ARGS, args), **kw)
        from . import _pytorch
        ds = named.get("dataset")
        if backend is None and not isinstance(ds, (str, bytes, os.PathLike)):
            _pytorch.refuse_iterable(ds)
            why = _pytorch.c_path_reason(ds, named, _c_path_checks)
            if why is not None:
                obj = object.__new__(_pytorch.PythonDataLoader)
                obj.backend_reason = why
                return obj
        if backend == "python":
            return object.__new__(_pytorch.PythonDataLoader)
        return object.__new__(cls)

    def __class_getitem__(cls, item):
        """DataLoader[Tensor] in annotations, as torch's class allows."""
        return cls

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 transform=None, seed=None, rank=None, world=None, dtype=None,
                 layout="nchw", zero_copy=False, on_error="fail", cache=None, threads=1,
                 backend=None, fingerprint=None, seq_len=None, packing="concat", eod=None,
                 pad=0):
        torch = _need()
        from . import transforms as T
        if fingerprint is not None:
            _refuse("fingerprint=", "it names a Python dataset's version for its cache; "
                    "seedpipe's C path hashes the files itself (leave it None)")
        if batch_sampler is not None:
            _refuse("batch_sampler", "seedpipe cuts the batches itself: pass batch_size= (per "
                    "process) and drop_last=, with a DistributedSampler as sampler= under DDP")
        from ._batchmix import as_batch_op
        coco = None if isinstance(dataset, (str, bytes, os.PathLike)) else \
            _tvcoco.coco_of(dataset)
        self._coco = None
        if coco is not None:
            # a wrapped CocoDetection: the detection collate (seedpipe._tvcoco)
            if transform is not None:
                _refuse("transform=", "a CocoDetection's v2 transforms are the dataset's "
                        "(transforms=); leave the DataLoader's transform None")
            self._coco = _tvcoco.Coco(dataset, collate_fn)
            collate_fn = None
        self._mix = as_batch_op(collate_fn) if collate_fn is not None else None
        if collate_fn is not None and self._mix is None:
            _refuse("collate_fn", "seedpipe yields (images, labels) tensors as "
                    "default_collate does for an image dataset; the C path takes only "
                    "seedpipe.torch.MixUp/CutMix/RandomChoice (or torchvision v2's) as "
                    "collate_fn: apply your function to each batch in the loop instead")
        if worker_init_fn is not None:
            _refuse("worker_init_fn", "seedpipe's workers are C processes that run no Python; "
                    "the stream is a function of seed= alone, whatever the workers: pass seed= "
                    "instead, and do per-process setup before creating the DataLoader")
        if multiprocessing_context is not None:
            _refuse("multiprocessing_context", "seedpipe forks its own C worker processes; "
                    "leave it None")
        if timeout:
            _refuse(f"timeout={timeout!r}", "seedpipe's workers have no per-batch timeout; a "
                    "failing image follows on_error= ('fail', 'skip', 'substitute'), a dead "
                    "worker is an error; leave timeout at 0")
        if batch_size is None:
            _refuse("batch_size=None", "seedpipe yields batches; give batch_size >= 1")
        batch_size = _check_int("batch_size", batch_size, 1, 0xFFFFFFFF)
        if isinstance(num_workers, int) and not isinstance(num_workers, bool) and \
                num_workers > 64:
            _refuse(f"num_workers={num_workers}", "seedpipe runs at most 64 worker processes "
                    "per loader (each decodes whole batches in C, so fewer are needed than "
                    "with torch); pass num_workers <= 64, and threads= for more decode "
                    "threads per worker")
        num_workers = _check_int("num_workers", num_workers, 0, 64)
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if prefetch_factor is not None:
            if num_workers == 0 and prefetch_factor != 2:
                raise ValueError("prefetch_factor option could only be specified in "
                                 "multiprocessing. let num_workers > 0 to enable "
                                 "multiprocessing")
            prefetch_factor = _check_int("prefetch_factor", prefetch_factor, 1, 1024)
        ring = prefetch_factor * num_workers if prefetch_factor and num_workers else 0
        if ring > 1024:
            _refuse(f"prefetch_factor={prefetch_factor}", "at most 1024 batches ahead in all "
                    "(prefetch_factor * num_workers)")

        # Order, rank and world: a sampler, or shuffle= and rank=/world=.
        s_rank = s_world = s_seed = None
        s_drop, s_extra = False, {}
        self.sampler = sampler
        if sampler is not None:
            if shuffle not in (None, False):
                raise ValueError("sampler option is mutually exclusive with shuffle")
            shuffle, s_rank, s_world, s_seed, s_drop, s_extra = _read_sampler(sampler,
                                                                              dataset)
        shuffle = bool(shuffle)
        if rank is None and world is None:
            rank, world = (s_rank, s_world) if s_rank is not None else (0, 1)
        else:
            if world is None and rank not in (None, 0, "auto"):
                _refuse(f"rank={rank!r} without world=", "world (the number of processes) "
                        "defaults to 1, where the only rank is 0; pass world= as well (an "
                        "integer, or 'auto' from torchrun/OpenMPI/Slurm), or both as 'auto'")
            rank, world = _resolve_rank_world(0 if rank is None else rank,
                                              1 if world is None else world)
            world = _check_int("world", world, 1, 1 << 16)
            if isinstance(rank, int) and not isinstance(rank, bool) and \
                    not 0 <= rank < world:
                _refuse(f"rank={rank}, world={world}", f"rank must be in [0, {world - 1}] "
                        "(one of the world's processes); pass the process's rank, or "
                        "rank='auto', world='auto' under a launcher")
            rank = _check_int("rank", rank, 0, world - 1)
            if s_rank is not None and (rank, world) != (s_rank, s_world):
                _refuse(f"rank={rank}, world={world}", f"the DistributedSampler says rank "
                        f"{s_rank} of {s_world}; pass one or the other")
        self.rank, self.world = rank, world

        # Seed. seed=None: derived; torch's own seed is read when the first
        # iterator starts (as torch draws its sampler's seed at iter()).
        self._seed_given = seed is not None
        self._seed_fn = None
        if seed is None:
            if generator is not None:
                self._seed_fn = lambda g=generator: int(g.initial_seed())
            elif s_seed is not None:
                seed = s_seed
            elif world > 1:
                # Every rank must draw the same stream: rank 0's torch seed
                # when a process group is up, else 0 (DistributedSampler's
                # default): never each process's own torch.initial_seed().
                seed = _shared_seed(torch)
            else:
                self._seed_fn = lambda: int(torch.initial_seed())
            if self._seed_fn is not None:
                seed = self._seed_fn()         # provisional: fixed at the first iter()
        seed = _check_int("seed", seed, 0, 2**64 - 1)

        # DistributedSampler(shuffle=False, drop_last=True) with an uneven
        # tail: the epoch is its first floor(N / world) * world samples in
        # the canonical order, rank r taking r::world of them, as torch's
        # sampler cuts it. An explicit sample list of that prefix is
        # exactly that (sequential order, nothing to pad).
        cut = None
        if s_drop and world > 1 and len(dataset) % world and not (shuffle and drop_last):
            # (with the DataLoader's drop_last too, shuffled: only full
            # global batches, torch's count of them; nothing to cut)
            if shuffle:
                n = len(dataset)
                _refuse("sampler=DistributedSampler(shuffle=True, drop_last=True)",
                        f"with {n} samples and {world} ranks torch drops the last {n % world} "
                        "samples of each epoch's permutation and keeps a partial last batch, "
                        "which seedpipe cannot cut from its own permutation; pass "
                        "drop_last=True to the DataLoader as well (drops the partial global "
                        "batch), or drop_last=False to the sampler (pads the epoch as torch "
                        "does), or use a Subset of a multiple of world samples")
            cut = int(sampler.total_size)

        # The dataset: a path, a folder dataset, or an explicit sample list.
        data, samples, folder = dataset, None, None
        idx = arr = None
        if not isinstance(dataset, (str, bytes, os.PathLike)) and cut is None:
            idx = _tvd.idx_source(dataset)
            arr = _tvd.array_source(dataset) if idx is None else None
            fake = _tvd.fake_source(dataset) if arr is None else None
            if fake is not None:
                # FakeData: generated in C, one channel kept for (1, H, W)
                arr = fake
                if transform is None:
                    transform = dataset.transform
                if dataset.image_size[0] == 1:
                    transform, dtype = _tvd.gray_pipeline(transform, dtype)
        if self._coco is not None:   # a wrapped CocoDetection (seedpipe._tvcoco)
            cargs = self._coco.loader_args()
            if dtype is not None and np.dtype(dtype) != np.dtype(cargs["dtype"]):
                _refuse(f"dtype={dtype!r}", f"the dataset's v2 transforms give "
                        f"{cargs['dtype']} images (ToDtype); leave dtype None")
            if layout != "nchw":
                _refuse(f"layout={layout!r}", "torchvision's images are (C, H, W): leave "
                        "layout='nchw'")
            data, transform, dtype = self._coco.root, cargs["pipeline"], cargs["dtype"]
            paths, labels, ncls = cargs["samples"]
            if cut is not None:
                paths, labels = paths[:cut], labels[:cut]
            samples = (paths, labels, ncls)
        elif isinstance(dataset, (str, bytes, os.PathLike)):
            if _tvd.channels_of(dataset) == 1:   # a grey IDX file stays one channel
                transform, dtype = _tvd.gray_pipeline(transform, dtype)
        elif idx is not None:   # MNIST & co: their IDX files, one channel (_tvdatasets.py)
            data = idx
            transform, dtype = _tvd.gray_pipeline(
                transform if transform is not None else dataset.transform, dtype)
        elif arr is not None:   # CIFAR10/100 (an RGB IDX pair), FakeData (generated in C)
            data = arr
            if transform is None:
                transform = dataset.transform
        elif _is_folder_dataset(dataset) and cut is None:
            _check_folder_dataset(dataset)
            data, folder = dataset.root, dataset
            if transform is None:
                transform = _dataset_transform(dataset)
        else:
            try:
                from torch.utils.data import ConcatDataset, Subset
            except ImportError:   # pragma: no cover
                Subset = ConcatDataset = ()
            if _is_folder_dataset(dataset):
                _check_folder_dataset(dataset)
            elif not isinstance(dataset, (Subset, ConcatDataset)):
                _refuse_dataset(dataset)
            paths, labels, ncls, tf = _sample_list(dataset)
            if cut is not None:
                paths, labels = paths[:cut], labels[:cut]
            if not len(paths):
                _refuse("dataset", "it has no samples")
            # each distinct path once (a Subset may repeat a file a million times)
            uniq = list(dict.fromkeys(paths.tolist()))
            data = os.path.commonpath([os.path.dirname(p) for p in uniq])
            rel = {p: os.path.relpath(p, data) for p in uniq}
            samples = ([rel[p] for p in paths.tolist()], labels, ncls)
            if transform is None:
                transform = tf
        tf_name = _transform_name(transform)
        if transform is None:
            transform = "hflip p=0"
        elif not isinstance(transform, str) and not hasattr(transform, "spec"):
            transform = T.from_torchvision(transform)

        # pin_memory
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        if self.pin_memory and not torch.cuda.is_available():
            if not _warned_pin[0]:
                warnings.warn("DataLoader: pin_memory=True but CUDA is not available: "
                              "ignored (the batches are ordinary owned tensors)",
                              UserWarning, stacklevel=2)
                _warned_pin[0] = True
            self.pin_memory = False

        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, bool(drop_last)
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.generator, self.timeout = generator, timeout
        self.shuffle, self.zero_copy = shuffle, bool(zero_copy)
        # The DistributedSampler's drop_last cuts the epoch to a multiple of
        # world; the DataLoader's drops a partial last batch. seedpipe pads
        # as DistributedSampler does by default (pad_tail) and, with the
        # DataLoader's drop_last, drops the partial global batch: the
        # batches are torch's. The sampler's drop_last alone (cut the epoch,
        # keep a partial batch) is the one case it cannot do.
        pad_tail = world > 1 and not s_drop
        self._args = dict(pipeline=transform, seed=seed, batch_size=batch_size * world,
                          workers=num_workers, drop_last=self.drop_last, dtype=dtype,
                          layout=layout, rank=rank, world=world, on_error=on_error,
                          threads=threads, ring=ring, cache=cache,
                          order="shuffle" if shuffle else "sequential", pad_tail=pad_tail,
                          samples=samples, **s_extra)
        if self._coco is not None:
            self._args["annotations"] = self._coco.annotations
        if seq_len is not None:
            # a token corpus (docs/tokens.md): dicts of token tensors, the
            # windows shuffled as samples are (shuffle=), no padded tail
            # (every rank's slice of a global batch is already equal)
            self._args.update(seq_len=seq_len, packing=packing, eod=eod, pad=pad,
                              pad_tail=False)
        self._data = data
        self._ld = self._open_loader(tf_name, batch_size, world)
        if self._mix is not None:
            self._check_mix(tf_name)
        if folder is not None:
            self._check_listing(folder)
        # Epochs (see the class comment): the next iterator's epoch, a
        # resumed position waiting for it, and the live iterator's number.
        self._next_epoch, self._pending, self._gen = 0, None, 0
        # A DistributedSampler's epoch repeated without set_epoch (see
        # _start): the epoch of the last epoch an iterator finished, and
        # whether set_epoch/load_state_dict was called since.
        self._completed, self._epoch_set, self._warned_epoch = None, False, False
        self._varies = (shuffle or bool(s_extra) or _draws_random(self._ld.pipeline) or
                        self._mix is not None)
        if self._dist_sampler():
            _watch_set_epoch(self.sampler, self)

    def _open_loader(self, tf_name, batch_size, world):
        """The seedpipe.Loader of self._args, with the core's refusals of a
        torch argument said in torch's terms."""
        try:
            return Loader(self._data, **self._args)
        except Error as e:
            msg = str(e)
            if "no fixed output size" in msg and self._coco is not None:
                raise _refusal("transforms", "seedpipe batches need one image size, and these "
                               "v2 transforms keep each image's own size (or a drawn one): end "
                               "them with Resize((H, W)) or a crop of one size") from None
            if "no fixed output size" in msg:
                raise _refusal(f"transform={tf_name}", "seedpipe batches need one image size, and "
                        "this transform keeps each image's own size (torch's default_collate "
                        "would fail on images of different sizes, or on PIL images without "
                        "ToTensor). Put a CenterCrop(S) or Resize((H, W)) before ToTensor(): "
                        "for images that are all S x S, CenterCrop(S) changes no pixel") from None
            if self.drop_last and "no batch" in msg:
                raise _refusal(f"batch_size={batch_size}", f"{msg}: with drop_last=True not one "
                        f"batch of batch_size * world = {batch_size * world} samples is "
                        "full (torch would yield an empty epoch, which seedpipe does not "
                        "make); pass a smaller batch_size, or drop_last=False") from None
            raise

    def _check_mix(self, tf_name):
        """A batch op as collate_fn: float images in (B, C, H, W)."""
        name = f"collate_fn={self._mix!r}"
        why = None
        if "seq_len" in self._args:
            why = "a token corpus has no images to mix; leave collate_fn None"
        elif self._ld.layout != "nchw":
            why = "it mixes (B, C, H, W) images as torchvision does; pass layout='nchw'"
        elif self._ld.dtype == np.uint8:
            why = (f"it mixes float images and transform={tf_name} gives uint8: end the "
                   "transform with ToTensor() (float32 in [0, 1]) or pass dtype='float32'")
        if why is not None:
            self._ld.close()
            _refuse(name, why)

    # ---- what seedpipe reads is what torchvision lists ----
    def _check_listing(self, ds):
        sp_paths, sp_labels = self._ld.dataset_samples()
        root = os.path.abspath(os.path.expanduser(os.fspath(ds.root)))
        tv = [(os.path.relpath(os.path.abspath(p), root), int(c)) for p, c in ds.samples]
        mine = list(zip(sp_paths, sp_labels))
        if tv == mine:
            return
        i = next((k for k, (a, b) in enumerate(zip(tv, mine)) if a != b), min(len(tv), len(mine)))
        what = (f"sample {i}: torchvision {tv[i] if i < len(tv) else 'none'}, seedpipe "
                f"{mine[i] if i < len(mine) else 'none'}")
        self._ld.close()
        _refuse(f"dataset: {type(ds).__name__}.samples",
                f"it is not the folder as seedpipe lists it ({len(tv)} samples against "
                f"{len(mine)}; {what}): .samples/.imgs were changed, or the folder has files "
                "one of the two does not read. Select samples with "
                "torch.utils.data.Subset(dataset, indices) instead")

    # ---- torch's interface ----
    def __len__(self):
        """Batches per epoch on this rank (the same on every rank)."""
        return len(self._ld)

    @property
    def loader(self):
        """The seedpipe.Loader underneath (fingerprint, batch_info, explain...)."""
        return self._ld

    @property
    def seed(self):
        """The stream's seed (derived ones are fixed by this read, as by the
        first iter() or state_dict())."""
        self._fix_seed()
        return self._ld.seed

    def _fix_seed(self):
        """seed=None from torch.initial_seed() or a generator: read it now,
        once (the first iter(), state_dict() or .seed), as torch reads its
        seed when an iterator starts; the loader follows it."""
        if self._seed_fn is None:
            return
        seed, self._seed_fn = self._seed_fn(), None
        if seed != self._ld.seed:
            self._ld._check_open()
            self._args["seed"] = seed
            self._ld.close()                # nothing was taken from it yet
            self._ld = Loader(self._data, **self._args)

    @property
    def batch_info(self):
        """Epoch, index and dataset indices of the last batch (seedpipe.BatchInfo;
        its indices are a view valid until the next batch)."""
        return self._ld.batch_info

    def set_epoch(self, epoch):
        """The epoch the next iterator yields (DistributedSampler.set_epoch).
        A position loaded by load_state_dict() in that epoch is kept."""
        epoch = _check_int("epoch", epoch, 0, 0xFFFFFFFE)
        if self._pending is not None and self._pending[0] != epoch:
            self._pending = None
        self._next_epoch = epoch
        self._epoch_set = True
        if self._dist_sampler():
            self.sampler.set_epoch(epoch)

    def state_dict(self):
        """The position after the last batch taken (seedpipe's loader state:
        fingerprint, seed, epoch, batch); JSON-able."""
        self._fix_seed()
        return self._ld.state_dict()

    def load_state_dict(self, state):
        """Resume at `state` (from state_dict(), any num_workers): the next
        iterator continues there. A derived seed (seed=None) follows the
        state's; a given one must equal it."""
        st = state if isinstance(state, dict) else json.loads(state)
        self._ld._check_open()
        if not self._seed_given:
            self._seed_fn = None            # the state's seed, not torch's
            if int(st.get("seed", self._ld.seed)) != self._ld.seed:
                # the old loader is dropped, not closed: zero-copy views of
                # its last batch keep it (and their memory) alive
                self._args["seed"] = int(st["seed"])
                self._ld = Loader(self._data, **self._args)
        self._ld.load_state_dict(st)
        self._epoch_set = True
        self._pending = (int(st["epoch"]), int(st["batch"]))
        self._next_epoch = self._pending[0]
        if self._dist_sampler():
            self.sampler.set_epoch(self._pending[0])

    def _start(self):
        """Position for a new iterator: its epoch (a DistributedSampler's
        .epoch, as torch; else the next one), at the pending resume if it
        is in that epoch."""
        epoch = self._next_epoch
        if self._dist_sampler():
            epoch = int(self.sampler.epoch)
            if epoch == self._completed and not self._epoch_set and self._varies \
                    and not self._warned_epoch:
                self._warned_epoch = True
                warnings.warn(f"DataLoader: a new epoch starts at the DistributedSampler's "
                              f"epoch {epoch} again, without set_epoch(): seedpipe repeats "
                              "that epoch exactly, augmentation draws included (torch would "
                              "repeat the order but draw new random crops). Call "
                              "sampler.set_epoch(epoch) (or loader.set_epoch(epoch)) before "
                              "each epoch", UserWarning, stacklevel=3)
        self._epoch_set = False
        pos = self._pending if self._pending is not None and self._pending[0] == epoch \
            else (epoch, 0)
        self._pending = None
        self._next_epoch = epoch + 1
        ld = self._ld
        if (ld._epoch, ld._batch) != pos:
            ld._reposition(*pos)
        return pos[0]

    def _dist_sampler(self):
        return self.sampler is not None and hasattr(self.sampler, "num_replicas") and \
            hasattr(self.sampler, "set_epoch")

    def __iter__(self):
        self._ld._check_open()
        self._fix_seed()
        self._gen += 1
        return _Iter(self, self._gen, self._start())

    def _tensors(self, images, labels):
        torch = _need()
        x = to_tensor(images)
        if self._mix is not None:
            # the batch op, keyed by this batch (docs/determinism.md 11a):
            # new tensors, so the loader's memory is never written
            info = self._ld.batch_info
            x, y = self._mix.apply(x, torch.from_numpy(labels).to(torch.long),
                                   seed=self._ld.seed, epoch=info.epoch, index=info.index)
            if self.pin_memory:
                dev = self.pin_memory_device or None
                x = x.pin_memory(dev) if dev else x.pin_memory()
                y = y.pin_memory(dev) if dev else y.pin_memory()
            return x, y
        if self.pin_memory:
            dev = self.pin_memory_device or None
            x = x.pin_memory(dev) if dev else x.pin_memory()    # the one copy
        elif not self.zero_copy:
            x = x.clone()
        return x, torch.from_numpy(labels).to(torch.long)

    def _coco_batch(self, fields):
        """A wrapped CocoDetection's batch: its collate_fn over (image,
        target) samples as torchvision's wrapper and v2 transforms give
        them (seedpipe._tvcoco)."""
        def own(x):
            if self.pin_memory:
                dev = self.pin_memory_device or None
                return x.pin_memory(dev) if dev else x.pin_memory()
            return x if self.zero_copy else x.clone()
        return self._coco.batch(fields, self._ld.batch_info.indices, own)

    def _token_tensors(self, fields):
        """A token batch's fields as tensors (int32, or int64 with
        dtype="int64"), owned unless zero_copy; pinned with pin_memory."""
        torch = _need()
        out = {}
        for k, a in fields.items():
            x = torch.from_numpy(a)
            if self.pin_memory:
                dev = self.pin_memory_device or None
                x = x.pin_memory(dev) if dev else x.pin_memory()
            elif not self.zero_copy:
                x = x.clone()
            out[k] = x
        return out

    def close(self):
        """Stop the workers and free the batch memory (views become invalid)."""
        self._ld.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"seedpipe.torch.DataLoader(batch_size={self.batch_size}, shuffle="
                f"{self.shuffle}, num_workers={self.num_workers}, rank={self.rank}, "
                f"world={self.world}, seed="
                f"{'<read at the first iter()>' if self._seed_fn else self._ld.seed})")


_TORCH_ARGS = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers",
               "collate_fn", "pin_memory", "drop_last", "timeout", "worker_init_fn",
               "multiprocessing_context", "generator")


def _c_path_checks(ds, kw):
    """Raise ValueError where the C path would refuse these arguments (the
    automatic backend choice then takes the Python backend)."""
    if not isinstance(kw.get("num_workers", 0), int) or kw.get("num_workers", 0) > 64:
        raise ValueError("num_workers > 64")
    if kw.get("sampler") is not None:
        _read_sampler(kw["sampler"], ds)
    if kw.get("multiprocessing_context") is not None:
        raise ValueError("multiprocessing_context=")
    if _tvcoco.coco_of(ds) is not None:   # a wrapped CocoDetection: its own checks
        if kw.get("transform") is not None:
            raise ValueError("DataLoader: transform=: a CocoDetection's transforms are its own")
        _tvcoco.Coco(ds, kw.get("collate_fn"), write=False)
        return
    if _tvd.idx_source(ds) is not None or _tvd.array_source(ds, write=False) is not None \
            or _tvd.fake_source(ds) is not None:
        # MNIST & co read from their IDX files, CIFAR10/100 from their arrays
        tf = kw.get("transform", ds.transform)
        if tf is not None and not isinstance(tf, str):
            _spec_of(tf)
        return
    _, _, _, tf = _sample_list(ds)
    if _is_folder_dataset(ds):
        _check_folder_dataset(ds)
    tf = kw.get("transform", tf)
    if tf is not None and not isinstance(tf, str):
        _spec_of(tf)


def _watch_set_epoch(sampler, dl):
    """Note on dl each sampler.set_epoch() call (what a DDP loop calls), so
    that an epoch set again on purpose is not warned about (see _start)."""
    import functools
    import weakref
    ref, orig = weakref.ref(dl), sampler.set_epoch

    @functools.wraps(orig)
    def set_epoch(epoch):
        orig(epoch)
        d = ref()
        if d is not None:
            d._epoch_set = True
    sampler.set_epoch = set_epoch


def _shared_seed(torch):
    """seed=None under DDP without a sampler: every rank must draw the same
    stream. With a process group up, rank 0's torch.initial_seed()
    (broadcast: a collective, so every rank builds its loader); without
    one, 0, as DistributedSampler's default seed."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 0
    box = [int(torch.initial_seed())]
    dist.broadcast_object_list(box, src=0)
    return int(box[0])


def _transform_name(tf):
    """A short name of a transform for a message: ToTensor(), Compose([...])."""
    if tf is None or isinstance(tf, str):
        return repr(tf)
    if type(tf).__name__ == "Compose" and hasattr(tf, "transforms"):
        return "Compose([" + ", ".join(_transform_name(t) for t in tf.transforms) + "])"
    return type(tf).__name__ + "()"


def _draws_random(spec):
    """Whether a pipeline spec draws random numbers (so an epoch repeated
    with the same number repeats augmentations torch would draw anew).
    Unknown ops and presets other than evaluation ones count as random."""
    if not isinstance(spec, str):
        return True
    if spec.startswith("tokens "):
        return True        # a token corpus: every epoch has its own document order
    for op in spec.split("|"):
        words = op.split()
        if not words:
            continue
        name, keys = words[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if name in ("decode", "resize", "center_crop", "normalize"):
            continue
        if name in ("hflip", "vflip", "grayscale", "invert", "posterize", "solarize",
                    "autocontrast", "equalize", "sharpness", "random_apply"):
            try:
                if float(keys.get("p", "0.5")) in (0.0, 1.0):
                    continue
            except ValueError:
                pass
            return True
        if name in ("gaussian_blur", "rotate"):   # a fixed sigma / angle draws nothing
            lo, _, hi = keys.get("sigma" if name == "gaussian_blur" else "degrees",
                                 "0.1,2").partition(",")
            if hi and lo == hi:
                continue
            return True
        if "eval" in name or name in ("mnist",):
            continue
        return True
    return False


class _Iter:
    """One epoch of a DataLoader (from its start or a resumed position). It
    ends (StopIteration) at the epoch's end. A loader has one live iterator
    (they share the loader's one stream): once a newer iterator of the
    loader started, the next __next__ of an older one that has not ended
    raises RuntimeError, rather than end early as if its epoch were done."""

    def __init__(self, dl, gen, epoch):
        self.dl, self.gen, self.epoch, self.ended = dl, gen, epoch, False
        self.it = EpochIter(dl._ld, epoch)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.dl)

    def __next__(self):
        if self.ended:
            raise StopIteration
        if self.gen != self.dl._gen:
            raise RuntimeError(
                "DataLoader: another iterator of this loader was started; this one was "
                "superseded (seedpipe's DataLoader has one stream, and each iter() starts "
                "an epoch on it). Finish or drop an iterator before starting the next, or "
                "use one DataLoader per concurrent iteration (e.g. zip(dl1, dl2) over two "
                "loaders, not zip(dl, dl))")
        try:
            item = next(self.it)
        except StopIteration:
            self._end()
            raise
        if self.it.done:
            self._end()
        if isinstance(item, dict) and self.dl._coco is not None:   # detection targets
            return self.dl._coco_batch(item)
        if isinstance(item, dict):           # a token corpus's fields
            return self.dl._token_tensors(item)
        return self.dl._tensors(*item)

    def _end(self):
        if not self.ended:
            self.ended = True
            if self.it.epoch is not None and self.dl._ld._epoch > self.it.epoch:
                self.dl._completed = self.epoch


# ---- a Python dataset's own generators (the Python backend, docs/python.md) -------

def sample_seed() -> int:
    """A 64-bit seed of the sample (or batch) being computed, for code that
    makes its own generator inside __getitem__ or collate_fn: a pure
    function of (seed, epoch, index, repetition), whichever worker runs it
    (docs/determinism.md section 11, generator word g = 3). RuntimeError
    outside a seedpipe DataLoader's __getitem__ or collate call."""
    from ._keys import words64
    from ._pyloader import current_words
    return words64(current_words())


def sample_generator(kind: str = "torch"):
    """A fresh generator for the sample being computed: kind="torch" a
    torch.Generator seeded with sample_seed(), kind="numpy" a
    numpy.random.Generator(PCG64) seeded with the block's 128 bits."""
    from ._keys import words64, words128
    from ._pyloader import current_words
    w = current_words()
    if kind == "torch":
        g = _need().Generator()
        g.manual_seed(words64(w))
        return g
    if kind == "numpy":
        return np.random.Generator(np.random.PCG64(words128(w)))
    raise ValueError(f"sample_generator(kind={kind!r}): 'torch' or 'numpy'")


def verify(make_loader, workers=(0, 2, 3), batches=8, world=None):
    """The guarantee checked on your own loader: see seedpipe._pyverify
    (make_loader(num_workers) builds it; returns a report, truthy when every
    batch is equal at every worker count)."""
    from ._pyverify import verify as run
    return run(make_loader, workers=workers, batches=batches, world=world)

"""seedpipe.torch.DataLoader over any map-style dataset: the Python
backend's face in torch's terms (DESIGN.md section 13; docs/python.md).

DataLoader(dataset, ...) picks its backend (`loader.backend`):
  "c"       the dataset is one seedpipe reads and decodes itself (a path,
            a torchvision ImageFolder or a Subset/ConcatDataset of them)
            and nothing asks for Python per sample or per batch (no
            collate_fn, worker_init_fn, batch_sampler or custom sampler,
            and a transform the C ops cover): seedpipe.torch's C path;
  "python"  anything else with __len__ and __getitem__: dataset[i] runs in
            seedpipe's own worker processes (_pyloader.py), every sample
            seeded from its own key, batches through shared memory.
backend="python" forces the second, backend="c" the first (refusing by
name what it cannot do). An IterableDataset is refused: it has no index
to key a sample by.
"""
from __future__ import annotations

import json
import os
import warnings

from ._args import check_int
from ._pyloader import PyLoader
from ._pyorder import (KeyedOrder, ListOrder, ReplacementOrder, RoundsOrder, SubsetOrder,
                       WeightedOrder)

_warned = set()


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(msg, UserWarning, stacklevel=4)


def refuse_iterable(dataset):
    from torch.utils.data import IterableDataset
    if isinstance(dataset, IterableDataset):
        raise ValueError(f"DataLoader: dataset={type(dataset).__name__}: an IterableDataset has "
                         "no index, and seedpipe keys every sample (its order, its random "
                         "draws, a resume) by its index; give it __len__ and __getitem__ (a "
                         "map-style Dataset), or keep torch.utils.data.DataLoader for it")


def c_path_reason(dataset, kw, c_checks):
    """None when the C path takes this loader, else why it does not (the
    Python backend then runs it)."""
    from . import _tvcoco
    from ._batchmix import as_batch_op
    for name in ("collate_fn", "worker_init_fn", "batch_sampler"):
        if name == "collate_fn" and as_batch_op(kw.get(name)) is not None:
            continue            # a batch mix: the C path applies it (seedpipe.torch)
        if name == "collate_fn" and not isinstance(dataset, (str, bytes, os.PathLike)) \
                and _tvcoco.coco_of(dataset) is not None:
            continue            # a wrapped CocoDetection: checked by seedpipe._tvcoco
        if kw.get(name) is not None:
            return f"{name}= runs Python per batch"
    if kw.get("timeout"):
        return "timeout="
    if "batch_size" in kw and kw["batch_size"] is None:
        return "batch_size=None"
    if isinstance(dataset, (str, bytes, os.PathLike)):
        return None
    try:
        c_checks(dataset, kw)
    except (ValueError, TypeError, ImportError) as e:
        msg = str(e)
        if msg.startswith("DataLoader: "):
            msg = msg[len("DataLoader: "):].split(": ")[0]
        return f"{msg}: not one seedpipe's C path takes"
    return None


def make_order(dataset, n, batch_size, shuffle, sampler, batch_sampler, drop_last, seed,
               rank, world):
    """(order, rank, world, sampler_seed) for the DataLoader's arguments."""
    from torch.utils.data import (BatchSampler, DistributedSampler, RandomSampler,
                                  SequentialSampler, SubsetRandomSampler,
                                  WeightedRandomSampler)
    if batch_sampler is not None:
        inner = getattr(batch_sampler, "sampler", None)
        if type(batch_sampler) is BatchSampler and _keyable(inner, dataset):
            return make_order(dataset, n, batch_sampler.batch_size, False, inner, None,
                              batch_sampler.drop_last, seed, rank, world)
        return ListOrder(batch_sampler, n, None, False, batched=True), rank, world, None
    bs = 1 if batch_size is None else batch_size
    if sampler is None:
        return KeyedOrder(n, seed, bs * world, drop_last, rank, world, shuffle,
                          pad_tail=world > 1), rank, world, None
    if isinstance(sampler, DistributedSampler) and _same(sampler, dataset) and \
            not (sampler.drop_last and n % int(sampler.num_replicas)):
        # (drop_last with an uneven tail: torch cuts its own permutation, which
        # the ListOrder below follows exactly, so every rank has as many batches)
        r, w = int(sampler.rank), int(sampler.num_replicas)
        return KeyedOrder(n, seed, bs * w, drop_last, r, w, bool(sampler.shuffle),
                          pad_tail=not sampler.drop_last), r, w, int(sampler.seed)
    if type(sampler) is SequentialSampler and _same(sampler, dataset):
        return KeyedOrder(n, seed, bs * world, drop_last, rank, world, False,
                          pad_tail=world > 1), rank, world, None
    if type(sampler) is RandomSampler and _same(sampler, dataset):
        g = getattr(sampler, "generator", None)
        gseed = int(g.initial_seed()) if g is not None else None
        if sampler.replacement:
            return ReplacementOrder(n, sampler.num_samples, seed, bs, drop_last), rank, 1, gseed
        if sampler._num_samples is None:
            return KeyedOrder(n, seed, bs * world, drop_last, rank, world, True,
                              pad_tail=world > 1), rank, world, gseed
        return RoundsOrder(n, int(sampler.num_samples), seed, bs, drop_last), rank, 1, gseed
    if type(sampler) is SubsetRandomSampler and _distinct_in_range(sampler.indices, n):
        g = getattr(sampler, "generator", None)
        gseed = int(g.initial_seed()) if g is not None else None
        return (SubsetOrder([int(i) for i in sampler.indices], seed, bs * world, drop_last,
                            rank, world), rank, world, gseed)
    if type(sampler) is WeightedRandomSampler and len(sampler.weights) <= n:
        g = getattr(sampler, "generator", None)
        gseed = int(g.initial_seed()) if g is not None else None
        return (WeightedOrder(sampler.weights.tolist(), int(sampler.num_samples), seed, bs,
                              drop_last, bool(sampler.replacement)), rank, 1, gseed)
    return ListOrder(sampler, n, batch_size, drop_last, batched=False), rank, 1, None


def _distinct_in_range(indices, n):
    try:
        idx = [int(i.__index__()) for i in indices]
    except (AttributeError, TypeError):
        return False
    return bool(idx) and len(set(idx)) == len(idx) and all(0 <= i < n for i in idx)


def _same(sampler, dataset):
    src = getattr(sampler, "dataset", getattr(sampler, "data_source", None))
    return src is dataset


def _keyable(sampler, dataset):
    from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler,
                                  WeightedRandomSampler)
    if type(sampler) is WeightedRandomSampler:
        return True
    if sampler is None or not _same(sampler, dataset):
        return False
    if type(sampler) is RandomSampler:
        return True
    return type(sampler) is SequentialSampler or isinstance(sampler, DistributedSampler)


def init_python(dl, dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                multiprocessing_context, generator, prefetch_factor, persistent_workers,
                pin_memory_device, seed, rank, world, cache, fingerprint, c_only):
    """DataLoader.__init__ for the Python backend (dl is the DataLoader)."""
    import torch
    from ._launch import resolve_rank_world
    from .torch import _shared_seed
    refuse_iterable(dataset)
    from ._batchmix import as_batch_op
    if collate_fn is not None:
        collate_fn = as_batch_op(collate_fn) or collate_fn   # torchvision v2's mixes: ours
        if getattr(collate_fn, "seedpipe_batch_op", False) and batch_size is None and \
                batch_sampler is None:
            raise ValueError(f"DataLoader: collate_fn={collate_fn!r} with batch_size=None: a "
                             "batch mix mixes the samples of a batch; pass batch_size= (or "
                             "a batch_sampler)")
    if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise ValueError(f"DataLoader: dataset={type(dataset).__name__}: a map-style dataset "
                         "needs __len__ and __getitem__ (seedpipe keys each sample by its "
                         "index)")
    for name, value in c_only.items():
        if value is not None and value is not False and value != "nchw" and \
                not (name == "on_error" and value == "fail") and \
                not (name == "threads" and value == 1):
            raise ValueError(f"DataLoader: {name}={value!r}: an option of seedpipe's C path "
                             f"(its own decode and ops); this loader runs the Python backend "
                             f"({dl.backend_reason}); apply it in your dataset instead")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                      or drop_last):
        raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                         "shuffle, sampler, and drop_last")
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_size is None and drop_last:
        raise ValueError("batch_size=None option disables auto-batching and is mutually "
                         "exclusive with drop_last")
    if batch_sampler is not None:
        batch_size = None
    elif batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1, 0xFFFFFFFF)
    num_workers = check_int("num_workers", num_workers, 0, 1 << 16)
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if multiprocessing_context not in (None, "fork") and \
            getattr(multiprocessing_context, "get_start_method", lambda: None)() != "fork":
        raise ValueError(f"DataLoader: multiprocessing_context={multiprocessing_context!r}: "
                         "seedpipe forks its own worker processes (a copy of the trainer, "
                         "as torch does on Linux by default); leave it None")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    if prefetch_factor is not None and num_workers == 0:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                         "let num_workers > 0 to enable multiprocessing.")
    prefetch = 2 if prefetch_factor is None else check_int("prefetch_factor",
                                                           prefetch_factor, 1, 1 << 16)
    cpus = len(os.sched_getaffinity(0))
    if num_workers > cpus:
        warnings.warn(f"This DataLoader will create {num_workers} worker processes in total. "
                      f"Our suggested max number of worker in current system is {cpus}, "
                      "which is smaller than what this DataLoader is going to create. Please "
                      "be aware that excessive worker creation might get DataLoader running "
                      "slow or even freeze, lower the worker number to avoid potential "
                      "slowness/freeze if necessary.", UserWarning, stacklevel=3)
    if rank is None and world is None:
        rank, world = 0, 1
    else:
        rank, world = resolve_rank_world(0 if rank is None else rank,
                                         1 if world is None else world)
        world = check_int("world", world, 1, 1 << 16)
        rank = check_int("rank", rank, 0, world - 1)
    n = len(dataset)
    if n < 1:
        raise ValueError(f"DataLoader: dataset={type(dataset).__name__} has no sample")
    dl._seed_given = seed is not None
    dl._seed_fn = None
    seed_default = seed
    if seed is None:
        if generator is not None:
            seed_default = int(generator.initial_seed())
        elif world > 1:
            seed_default = _shared_seed(torch)
        else:
            dl._seed_fn = lambda: int(torch.initial_seed())
            seed_default = dl._seed_fn()
    order, r, w, s_seed = make_order(dataset, n, batch_size, bool(shuffle), sampler,
                                     batch_sampler, bool(drop_last), 0, rank, world)
    # (keyed by seed 0 until the seed is known: _build() reseeds it)
    if seed is None and s_seed is not None:
        seed_default, dl._seed_fn = s_seed, None
    dl._seed = check_int("seed", seed_default, 0, 2**64 - 1)
    dl._order = order
    dl.dataset, dl.batch_size, dl.drop_last = dataset, batch_size, bool(drop_last)
    dl.sampler, dl.batch_sampler, dl.collate_fn = sampler, batch_sampler, collate_fn
    dl.num_workers, dl.prefetch_factor = num_workers, prefetch_factor
    dl.persistent_workers, dl.timeout = bool(persistent_workers), timeout
    dl.worker_init_fn, dl.generator, dl.multiprocessing_context = \
        worker_init_fn, generator, multiprocessing_context
    dl.rank, dl.world, dl.shuffle = r, w, bool(shuffle)
    dl.pin_memory, dl.pin_memory_device = bool(pin_memory), pin_memory_device
    if dl.pin_memory and not torch.cuda.is_available():
        _warn_once("pin", "DataLoader: pin_memory=True but CUDA is not available: ignored")
        dl.pin_memory = False
    dl._py = dict(batched=batch_size is not None or batch_sampler is not None,
                  collate_fn=collate_fn, worker_init_fn=worker_init_fn, workers=num_workers,
                  ring=prefetch * max(num_workers, 1), persistent=bool(persistent_workers),
                  timeout=timeout, cache=cache, fingerprint=fingerprint)
    dl._ld = _build(dl)
    dl._next_epoch, dl._pending, dl._gen = 0, None, 0


def _build(dl):
    """The PyLoader of dl's order under dl's seed."""
    dl._order.reseed(dl._seed)
    return PyLoader(dl.dataset, dl._order, dl._seed, **dl._py)


def fix_seed(dl):
    if dl._seed_fn is None:
        return
    seed, dl._seed_fn = dl._seed_fn(), None
    if seed != dl._seed:
        dl._seed = seed
        dl._ld.close()
        dl._ld = _build(dl)


def state_dict(dl):
    fix_seed(dl)
    ld = dl._ld
    return {"backend": "python", "seed": dl._seed, "epoch": ld.epoch_no,
            "batch": ld.batch_no, "order": ld.order.describe(), "samples": len(dl.dataset)}


def load_state_dict(dl, state):
    st = state if isinstance(state, dict) else json.loads(state)
    if st.get("backend") != "python":
        raise ValueError("DataLoader.load_state_dict: this state is not a Python-backend "
                         "state (it came from seedpipe's C path or another loader)")
    mine = dl._ld.order.describe()
    for key in sorted(set(mine) | set(st["order"])):
        if mine.get(key) != st["order"].get(key):
            raise ValueError(f"DataLoader.load_state_dict: {key}: the state has "
                             f"{st['order'].get(key)!r}, this loader {mine.get(key)!r} (the "
                             "global batch and the order must be the same to resume)")
    if st["samples"] != len(dl.dataset):
        raise ValueError(f"DataLoader.load_state_dict: the state is of a dataset of "
                         f"{st['samples']} samples, this one has {len(dl.dataset)}")
    seed = int(st["seed"])
    if dl._seed_given and seed != dl._seed:
        raise ValueError(f"DataLoader.load_state_dict: seed: the state has {seed}, this "
                         f"loader {dl._seed}")
    dl._seed_fn = None
    if seed != dl._seed:
        dl._seed = seed
        dl._ld.close()
        dl._ld = _build(dl)
    dl._pending = (int(st["epoch"]), int(st["batch"]))
    dl._next_epoch = dl._pending[0]


def epoch_sampler(dl):
    """The sampler that carries the epoch (a DistributedSampler's set_epoch/
    epoch), or None."""
    s = dl.sampler
    return s if s is not None and hasattr(s, "set_epoch") and hasattr(s, "epoch") else None


def start(dl):
    """The (epoch, batch) a new iterator begins at."""
    epoch = dl._next_epoch
    s = epoch_sampler(dl)
    if s is not None:
        epoch = int(s.epoch)
    pos = dl._pending if dl._pending is not None and dl._pending[0] == epoch else (epoch, 0)
    dl._pending = None
    dl._next_epoch = epoch + 1
    return pos


class PyIter:
    """One epoch of a Python-backend DataLoader."""

    def __init__(self, dl):
        fix_seed(dl)
        dl._gen += 1
        self.dl, self.gen = dl, dl._gen
        self.epoch, b = start(dl)
        self.it = dl._ld.epoch(self.epoch, b)
        self.n = dl._ld.order.batches(self.epoch) - b

    def __iter__(self):
        return self

    def __len__(self):
        return self.n

    def __next__(self):
        if self.gen != self.dl._gen:
            raise RuntimeError("DataLoader: another iterator of this loader was started; this "
                               "one was superseded (each iter() starts an epoch)")
        try:
            batch = next(self.it)
        except StopIteration:
            raise
        except BaseException:
            self.it.close()
            raise
        if self.dl.pin_memory:
            from torch.utils.data._utils.pin_memory import pin_memory
            batch = pin_memory(batch, self.dl.pin_memory_device or None) \
                if self.dl.pin_memory_device else pin_memory(batch)
        return batch


from .torch import DataLoader as _DataLoader   # noqa: E402 - seedpipe.torch is loaded first


class PythonDataLoader(_DataLoader):
    """seedpipe.torch.DataLoader on the Python backend (what DataLoader(...)
    returns for a dataset the C path does not take; see DataLoader)."""

    backend = "python"

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 seed=None, rank=None, world=None, cache=None, fingerprint=None,
                 backend="python", transform=None, dtype=None, layout="nchw",
                 zero_copy=False, on_error="fail", threads=1):
        self.backend_reason = getattr(self, "backend_reason", None) or "backend='python'"
        init_python(self, dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                    collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                    multiprocessing_context, generator, prefetch_factor, persistent_workers,
                    pin_memory_device, seed, rank, world, cache, fingerprint,
                    dict(transform=transform, dtype=dtype, layout=layout,
                         zero_copy=zero_copy, on_error=on_error, threads=threads))

    def __len__(self):
        return self._ld.order.batches(self._next_epoch if self._pending is None
                                      else self._pending[0])

    def __iter__(self):
        return PyIter(self)

    @property
    def loader(self):
        """The Python backend's loader underneath (its order, workers, cache)."""
        return self._ld

    @property
    def seed(self):
        fix_seed(self)
        return self._seed

    def worker_pids(self):
        """The worker processes' pids (for tests and tools that watch them)."""
        return self._ld.pids()

    def set_epoch(self, epoch):
        epoch = check_int("epoch", epoch, 0, 0xFFFFFFFE)
        if self._pending is not None and self._pending[0] != epoch:
            self._pending = None
        self._next_epoch = epoch
        s = epoch_sampler(self)
        if s is not None:
            s.set_epoch(epoch)

    def state_dict(self):
        """The position after the last batch taken: resumes exactly with any
        num_workers (and world, for the same global batch); JSON-able."""
        return state_dict(self)

    def load_state_dict(self, state):
        load_state_dict(self, state)
        s = epoch_sampler(self)
        if s is not None:
            s.set_epoch(self._pending[0])

    def close(self):
        """Stop the workers (the batches already taken stay valid)."""
        self._ld.close()

    def __del__(self):
        ld = getattr(self, "_ld", None)
        if ld is not None:
            ld.close()

    def __repr__(self):
        return (f"seedpipe.torch.DataLoader(backend='python', dataset="
                f"{type(self.dataset).__name__}, batch_size={self.batch_size}, num_workers="
                f"{self.num_workers}, seed={self._seed})")

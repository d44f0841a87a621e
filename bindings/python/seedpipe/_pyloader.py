"""The Python backend: a user's own map-style dataset (__len__ and
__getitem__) under seedpipe's order, batching, seeds, state and workers.

    ld = PyLoader(dataset, order, seed=7, workers=2, ring=4)
    for batch in ld.epoch(0):      # collated batches, in order
        ...
    ld.state_dict()                # where the next batch is: resume anywhere

Before each dataset[i] the process that runs it (a worker, or the trainer
with workers=0) seeds Python's `random`, NumPy's global generator and
torch's default CPU generator from the sample's key, and before each
collate call from the batch's (_keys.py; docs/determinism.md section 11),
with torch held to one thread (as torch's own workers are), so a batch is
the same bytes whichever process computes it and whatever ran before in
that process. With workers=0 the trainer's three generator states and
thread count are saved before a batch and restored after it: the loader
never changes the trainer's randomness.

What seedpipe cannot seed (a generator the dataset made in __init__,
os.urandom, time, a C library's own generator) it cannot make exact;
seedpipe.torch.verify() finds it (_pyverify.py).
"""
from __future__ import annotations

import hashlib
import os
import pickle
import random
import struct
import traceback
import warnings
import zlib

import numpy as np

from . import _keys, _pybatch
from ._pyworkers import Pool

try:
    import torch as _torch
except ImportError:   # pragma: no cover - depends on the installation
    _torch = None

_TB_MAX = 32 << 10

# What sample_seed() answers: (kind, a, epoch, rep, keys) of the call
# running in this process, or None outside dataset[i] and collate.
_current = [None]


def current_words():
    cur = _current[0]
    if cur is None:
        raise RuntimeError("seedpipe.torch.sample_seed()/sample_generator(): called outside "
                           "a dataset's __getitem__ or collate_fn run by a seedpipe "
                           "DataLoader (there is no sample to key it by)")
    kind, a, epoch, rep, keys = cur
    if kind == "sample":
        return keys.sample(a, epoch, rep, _keys.G_EXPLICIT)
    return keys.batch(a, epoch, _keys.G_EXPLICIT)


def _seed_all(keys_fn):
    w = keys_fn(_keys.G_RANDOM)
    random.seed(_keys.words128(w))
    np.random.seed(np.array(keys_fn(_keys.G_NUMPY), dtype=np.uint32))
    if _torch is not None:
        _torch.default_generator.manual_seed(_keys.words64(keys_fn(_keys.G_TORCH)))


class _Saved:
    """The trainer's generator states and torch thread count, restored on exit."""

    def __enter__(self):
        self.r, self.n = random.getstate(), np.random.get_state()
        if _torch is not None:
            self.t, self.threads = _torch.get_rng_state(), _torch.get_num_threads()
            if self.threads != 1:
                _torch.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        random.setstate(self.r)
        np.random.set_state(self.n)
        if _torch is not None:
            _torch.set_rng_state(self.t)     # initial_seed() too
            if self.threads != 1:
                _torch.set_num_threads(self.threads)
        _current[0] = None


class Job:
    """What a batch is: the samples of its indices, each seeded, then the
    collate call, seeded by the batch. Runs in a worker or in-process."""

    def __init__(self, dataset, seed, collate_fn, batched, worker_init_fn):
        self.cache = None
        self.dataset, self.keys = dataset, _keys.Keys(seed)
        self.collate_fn, self.batched = collate_fn, batched
        self.worker_init_fn, self.seed = worker_init_fn, seed
        self.index = None

    def build(self, epoch, b, indices, reps, writer=None):
        keys, samples = self.keys, []
        for i, r in zip(indices, reps):
            self.index = i
            _current[0] = ("sample", i, epoch, r, keys)
            _seed_all(lambda g, i=i, r=r: keys.sample(i, epoch, r, g))
            samples.append(self.dataset[i])
        self.index = None
        _current[0] = ("batch", b, epoch, 0, keys)
        _seed_all(lambda g: keys.batch(b, epoch, g))
        try:
            if not self.batched:
                return (self.collate_fn or _pybatch.default_convert)(samples[0])
            if self.collate_fn is None:
                return _pybatch.default_collate(samples, writer)
            return self.collate_fn(samples)
        finally:
            _current[0] = None

    # ---- in a worker ----
    def worker_start(self, wid, nworkers):
        ws = _keys.worker_seed(self.seed, wid)
        random.seed(ws)
        np.random.seed(np.array([ws & 0xFFFFFFFF, ws >> 32], dtype=np.uint32))
        if _torch is not None:
            _torch.set_num_threads(1)
            _torch.manual_seed(ws)
            from torch.utils.data._utils import worker as W
            W._worker_info = W.WorkerInfo(id=wid, num_workers=nworkers, seed=ws,
                                          dataset=self.dataset)
        if self.worker_init_fn is not None:
            self.worker_init_fn(wid)

    def compute(self, epoch, b, indices, reps, writer):
        """Fill the writer's buffer with batch b: (bytes used, cache status)."""
        status = None
        if self.cache is not None:
            n, status = self.cache.load_into(epoch, b, writer)
            if n is not None:
                return n, status
            writer.reset()
        n = writer.write(self.build(epoch, b, indices, reps, writer))
        if self.cache is not None:
            with memoryview(writer.maps[-1]) as m:
                self.cache.store(epoch, b, m[:n])
        return n, status

    def describe_error(self, e):
        tb = traceback.format_exc()
        if len(tb) > _TB_MAX:
            tb = "...\n" + tb[-_TB_MAX:]
        try:
            cls = pickle.dumps(type(e))
        except Exception:   # noqa: BLE001 - a class pickle cannot name
            cls = None
        return (self.index, cls, type(e).__name__, str(e)[:_TB_MAX], tb)

    def reraise(self, res, epoch, b, indices):
        _, _, index, cls, name, msg, tb = res
        where = (f"sample index {index}" if index is not None else "the collate_fn call") + \
            f" (epoch {epoch}, batch {b})"
        text = (f"Caught {name} in a seedpipe DataLoader worker process on {where}.\n"
                f"Original {tb}")
        raise _rebuild(cls, text, name)


def _rebuild(cls_pickle, text, name):
    try:
        cls = pickle.loads(cls_pickle) if cls_pickle else None
    except Exception:   # noqa: BLE001
        cls = None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        if cls is KeyError:
            text = KeyErrorMessage(text)
        try:
            return cls(text)
        except Exception:   # noqa: BLE001 - a constructor that wants other arguments
            pass
    return RuntimeError(f"{name}: {text}")


class KeyErrorMessage(str):
    """A KeyError's message printed as is (torch's ExceptionWrapper does the same)."""

    def __repr__(self):
        return self


class PyLoader:
    """Epochs of a Python dataset: `order` (_pyorder.py) says which
    indices each batch holds; workers=0 runs in the trainer."""

    backend = "python"

    def __init__(self, dataset, order, seed, *, batched=True, collate_fn=None,
                 worker_init_fn=None, workers=0, ring=None, persistent=True, timeout=0,
                 cache=None, fingerprint=None):
        self.dataset, self.order, self.seed = dataset, order, int(seed)
        self.job = Job(dataset, self.seed, collate_fn, batched, worker_init_fn)
        self.workers, self.ring = workers, ring or 2 * max(workers, 1)
        self.persistent, self.timeout = persistent, timeout or None
        self.pool, self.epoch_no, self.batch_no, self._gen = None, 0, 0, 0
        self.cache = None
        if cache is not None:
            self.cache = _Cache(cache, fingerprint, order, self.seed, batched, collate_fn)
        self.job.cache = self.cache

    def __len__(self):
        return self.order.batches(self.epoch_no)

    def pids(self):
        return self.pool.pids() if self.pool is not None else []

    def _pool(self, fresh):
        if self.pool is not None and (self.pool.closed or fresh and not self.persistent):
            self.pool.close()
            self.pool = None
        if self.pool is None:
            self.pool = Pool(self.job, self.workers, self.ring)
        return self.pool

    def epoch(self, epoch, start=0):
        """A generator of the batches of `epoch` from batch `start`."""
        self._gen += 1
        gen, nb = self._gen, self.order.batches(epoch)
        self.epoch_no, self.batch_no = epoch, start
        if self.workers == 0:
            return self._inprocess(gen, epoch, start, nb)
        return self._pooled(gen, epoch, start, nb)

    def _inprocess(self, gen, epoch, start, nb):
        for b in range(start, nb):
            batch, status = self.cache.load(epoch, b) if self.cache else (None, None)
            if batch is None:
                idx, reps = self.order.indices(epoch, b)
                with _Saved():
                    batch = self.job.build(epoch, b, idx, reps)
                if self.cache is not None:
                    self.cache.store(epoch, b, _pybatch.encode(batch))
            if self.cache is not None:
                self.cache.count(status)
            self.epoch_no, self.batch_no = epoch, b + 1
            yield batch

    def _pooled(self, gen, epoch, start, nb):
        pool = self._pool(fresh=start == 0 or self.pool is None)
        nxt, pending = start, []
        try:
            for b in range(start, nb):
                while nxt < nb and len(pool.tasks) < self.ring:
                    idx, reps = self.order.indices(epoch, nxt)
                    pool.submit((gen, nxt), epoch, nxt, idx, reps)
                    pending.append((gen, nxt))
                    nxt += 1
                batch = pool.take(pending.pop(0), self.timeout)
                if self.cache is not None:
                    self.cache.count(pool.last_status)
                self.epoch_no, self.batch_no = epoch, b + 1
                yield batch
        finally:
            if not pool.closed:
                for token in pending:
                    pool.discard(token)

    def close(self):
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class _Cache:
    """Augmented epochs of a Python dataset, by (fingerprint, seed, order,
    batch): each batch's bytes (the transport's layout, _pybatch.py) in one
    file, then a 16-byte trailer (magic "SPC1", the body's CRC-32, its
    length), written to a temporary name and renamed into place. With
    workers each worker writes the batches it computed and reads the ones
    it is given straight into the shared buffer, in parallel; a corrupt or
    missing entry is computed again (and rewritten)."""

    TRAILER = struct.Struct("<4sIQ")

    def __init__(self, root, fingerprint, order, seed, batched, collate_fn):
        if not fingerprint or not isinstance(fingerprint, str):
            raise ValueError("cache=DIR needs fingerprint= (a string naming the dataset's "
                             "version: seedpipe cannot hash a Python dataset's contents, so "
                             "a cache without it could serve another dataset's batches)")
        key = repr((fingerprint, seed, sorted(order.describe().items()), batched,
                    getattr(collate_fn, "__module__", None),
                    getattr(collate_fn, "__qualname__", None)))
        self.dir = os.path.join(os.fspath(root), "py-" + hashlib.blake2b(
            key.encode(), digest_size=16).hexdigest())
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        st = os.stat(self.dir)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise ValueError(f"cache={os.fspath(root)!r}: {self.dir} is not this user's alone "
                             f"(owner uid {st.st_uid}, mode {st.st_mode & 0o777:o}): its "
                             "entries are pickles, which only a folder no one else can write "
                             "may hold; point cache= at a folder of your own")
        self.hits = self.misses = self.corrupt = 0

    def count(self, status):
        if status == "hit":
            self.hits += 1
        elif status is not None:
            self.misses += 1
            self.corrupt += status == "corrupt"

    def _path(self, epoch, b):
        return os.path.join(self.dir, f"e{epoch}-b{b}.batch")

    def _open(self, epoch, b):
        """(file, body length) of a well-formed entry, or (None, status)."""
        try:
            f = open(self._path(epoch, b), "rb")
        except OSError:
            return None, "miss"
        st = os.fstat(f.fileno())
        size, t = st.st_size, self.TRAILER.size
        if st.st_uid == os.getuid() and size >= t:   # another user's file is never read
            f.seek(size - t)
            magic, crc, n = self.TRAILER.unpack(f.read(t))
            if magic == b"SPC1" and n == size - t:
                f.seek(0)
                return f, (n, crc)
        f.close()
        return None, "corrupt"

    def _verify(self, f, view, crc, epoch, b):
        ok = f.readinto(view) == len(view) and zlib.crc32(view) == crc
        f.close()
        if not ok:
            try:
                os.unlink(self._path(epoch, b))
            except OSError:
                pass
        return ok

    def load_into(self, epoch, b, writer):
        """(bytes, "hit") read into a worker's buffer, or (None, why)."""
        f, info = self._open(epoch, b)
        if f is None:
            return None, info
        n, crc = info
        writer.reserve(n)
        with memoryview(writer.maps[-1]) as m:
            ok = self._verify(f, m[:n], crc, epoch, b)
        return (n, "hit") if ok else (None, "corrupt")

    def load(self, epoch, b):
        """The batch read into the trainer's memory, or (None, why)."""
        f, info = self._open(epoch, b)
        if f is None:
            return None, info
        n, crc = info
        buf = np.empty(n, dtype=np.uint8)
        if not self._verify(f, memoryview(buf), crc, epoch, b):
            return None, "corrupt"
        return _pybatch.read(buf, n)[0], "hit"

    def store(self, epoch, b, body):
        path = self._path(epoch, b)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(body)
                f.write(self.TRAILER.pack(b"SPC1", zlib.crc32(body), len(body)))
            os.replace(tmp, path)
        except OSError as e:     # a full disk: the batch is still served, not cached
            try:
                os.unlink(tmp)
            except OSError:
                pass
            warnings.warn(f"seedpipe: cache {self.dir}: batch {b} of epoch {epoch} not "
                          f"written ({e.strerror or e})", RuntimeWarning, stacklevel=2)


class DatasetLoader:
    """seedpipe.Loader(dataset_object, ...) for a Python map-style dataset
    (what Loader returns for one): batches collated by torch's
    default_collate (numpy's stacking without torch), the same API as
    Loader for epochs and state.

        with seedpipe.Loader(MyDataset(), seed=1, batch_size=32, workers=4) as ld:
            for epoch in range(10):
                ld.set_epoch(epoch)
                for batch in ld: ...
    """

    backend = "python"

    def __init__(self, dataset, *, seed=0, batch_size=32, workers=0, drop_last=False,
                 rank=0, world=1, order="global", pad_tail=False, collate_fn=None,
                 worker_init_fn=None, ring=0, cache=None, fingerprint=None, **c_only):
        from ._args import check_int
        from ._pyorder import KeyedOrder
        for name in c_only:
            raise ValueError(f"Loader: {name}=: an option of seedpipe's C path (its own decode "
                             f"and pipeline); a Python dataset ({type(dataset).__name__}) "
                             "decodes and augments in its __getitem__")
        if order not in ("global", "shuffle", "sequential"):
            raise ValueError(f"Loader: order={order!r}: 'global' (or 'shuffle') or "
                             "'sequential' for a Python dataset")
        self.seed = check_int("seed", seed, 0, 2**64 - 1)
        self.batch_size = check_int("batch_size", batch_size, 1, 0xFFFFFFFF)
        world = check_int("world", world, 1, 1 << 16)
        rank = check_int("rank", rank, 0, world - 1)
        self.workers = check_int("workers", workers, 0, 1 << 16)
        self._ld = PyLoader(dataset, KeyedOrder(len(dataset), self.seed, self.batch_size,
                                                drop_last, rank, world, order != "sequential",
                                                pad_tail),
                            self.seed, collate_fn=collate_fn, worker_init_fn=worker_init_fn,
                            workers=self.workers, ring=ring or None, cache=cache,
                            fingerprint=fingerprint)
        self._epoch, self._batch = 0, 0

    def __len__(self):
        return len(self._ld)

    def __iter__(self):
        epoch, start = self._epoch, self._batch
        for batch in self._ld.epoch(epoch, start):
            self._batch = self._ld.batch_no
            yield batch
        self._epoch, self._batch = epoch + 1, 0

    def set_epoch(self, epoch):
        self._epoch, self._batch = int(epoch), 0

    def state_dict(self):
        return {"backend": "python", "seed": self.seed, "epoch": self._epoch,
                "batch": self._batch, "order": self._ld.order.describe(),
                "samples": self._ld.order.n}

    def load_state_dict(self, state):
        if state.get("backend") != "python" or state["seed"] != self.seed or \
                state["order"] != self._ld.order.describe():
            raise ValueError("Loader.load_state_dict: the state is of another loader (seed, "
                             "order or global batch differ)")
        self._epoch, self._batch = int(state["epoch"]), int(state["batch"])

    def close(self):
        self._ld.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""A Python batch in a shared-memory buffer: collated in place, written,
and read back without a copy (the Python backend's transport).

A buffer is a memfd (os.memfd_create) that the trainer process creates
and every worker maps; it only grows (ftruncate), never shrinks. A worker
writes one batch into it:

    offset 0   header: magic "SPPYBAT1", then u64 LE pickle offset, pickle
               length, table offset, buffer count
    offset 64  the batch's array data, each array 64-byte aligned: the
               tensors the default collate stacked in place (torch.stack
               with out= a view of the buffer), then a copy of every other
               out-of-band buffer the pickle names
    ...        the pickle (protocol 5), then the table: (offset, length)
               u64 LE per out-of-band buffer, in the pickle's order

The pickle carries only structure and metadata (dict keys, dtypes,
shapes, Python numbers and strings); numpy arrays and CPU tensors travel
out of band: the trainer unpickles with the buffers as slices of one
numpy array over its mapping, so every array and tensor of the batch is a
view of the shared memory, and that array (the lease) stays alive exactly
as long as any of them does. The trainer reuses a buffer only once its
lease is gone (weakref), so a batch the caller keeps is never overwritten.
"""
from __future__ import annotations

import io
import mmap
import os
import pickle
import struct

import numpy as np

try:
    import torch as _torch
except ImportError:   # pragma: no cover - depends on the installation
    _torch = None

MAGIC = b"SPPYBAT1"
HEAD = struct.Struct("<8sQQQQ")
ALIGN = 64
PAGE = mmap.PAGESIZE


def _align(n, a=ALIGN):
    return (n + a - 1) // a * a


# ---- torch tensors out of band ---------------------------------------------------

_NP_OF_TORCH = {}
if _torch is not None:
    for _t, _n in ((_torch.float32, np.float32), (_torch.float64, np.float64),
                   (_torch.float16, np.float16), (_torch.uint8, np.uint8),
                   (_torch.int8, np.int8), (_torch.int16, np.int16), (_torch.int32, np.int32),
                   (_torch.int64, np.int64), (_torch.bool, np.bool_),
                   (_torch.complex64, np.complex64), (_torch.complex128, np.complex128),
                   (_torch.bfloat16, np.int16)):     # bfloat16: its words as int16
        _NP_OF_TORCH[_t] = np.dtype(_n)


def _tensor_from(buf, dtype_name, shape, requires_grad):
    """Rebuild a CPU tensor over `buf` (an out-of-band buffer: a view)."""
    dt = getattr(_torch, dtype_name)
    a = np.frombuffer(buf, dtype=_NP_OF_TORCH[dt]).reshape(shape)
    t = _torch.from_numpy(a)
    if dt is _torch.bfloat16:
        t = t.view(_torch.bfloat16)
    if requires_grad:
        t.requires_grad_(True)
    return t


class _Pickler(pickle.Pickler):
    """Protocol 5; a plain strided CPU tensor is reduced to its bytes (out
    of band) and dtype/shape; anything else as pickle does it."""

    def reducer_override(self, obj):
        if _torch is None or type(obj) is not _torch.Tensor:
            return NotImplemented
        if obj.layout is not _torch.strided or obj.device.type != "cpu" or \
                obj.dtype not in _NP_OF_TORCH or obj.is_conj() or obj.is_neg():
            return NotImplemented
        t = obj.detach()
        if t.dtype is _torch.bfloat16:
            t = t.view(_torch.int16)
        a = t.contiguous().numpy()
        return _tensor_from, (pickle.PickleBuffer(a), str(obj.dtype).split(".")[-1],
                              tuple(obj.shape), bool(obj.requires_grad))


def _addr(obj):
    return np.frombuffer(obj, dtype=np.uint8).__array_interface__["data"][0]


class Writer:
    """One worker's side of one buffer: collate into it, then write the
    batch. `fd` is the buffer's memfd, `size` its current length."""

    def __init__(self, fd, size):
        self.fd, self.size = fd, size
        self.maps = [] if size == 0 else [mmap.mmap(fd, size)]
        self.off = ALIGN

    def reset(self):
        self.off = ALIGN
        del self.maps[:-1]      # older mappings live on while a view holds them

    def _ensure(self, end):
        if end > self.size:
            self.size = max(self.size, os.fstat(self.fd).st_size)   # grown by another worker
            if end > self.size:
                new = max(_align(end, PAGE), _align(self.size * 3 // 2, PAGE))
                os.ftruncate(self.fd, new)
                self.size = new
        if not self.maps or len(self.maps[-1]) < self.size:
            self.maps.append(mmap.mmap(self.fd, self.size))

    def reserve(self, nbytes):
        """Room for nbytes from offset 0 (a whole batch read in as it is)."""
        self._ensure(nbytes)
        self.off = max(self.off, nbytes)

    def alloc(self, nbytes):
        """(offset, uint8 view) of nbytes at the next aligned place."""
        off = _align(self.off)
        self._ensure(off + nbytes)
        self.off = off + nbytes
        return off, np.frombuffer(self.maps[-1], dtype=np.uint8, count=nbytes, offset=off)

    def _offset_of(self, view):
        """The buffer offset of a view inside one of this buffer's mappings, or None."""
        a, n = _addr(view), view.nbytes
        for m in self.maps:
            base = _addr(m)
            if base <= a and a + n <= base + len(m):
                return a - base
        return None

    def write(self, obj):
        """Write obj (a collated batch); returns the bytes used."""
        bufs = []
        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=bufs.append).dump(obj)
        table = []
        for pb in bufs:
            raw = pb.raw()
            off = self._offset_of(raw) if raw.nbytes else None
            if off is None:
                off, dst = self.alloc(raw.nbytes)
                if raw.nbytes:
                    dst[:] = np.frombuffer(raw, dtype=np.uint8)
            table.append((off, raw.nbytes))
        data = f.getbuffer()
        poff, _ = self.alloc(len(data))
        toff, _ = self.alloc(16 * len(table))
        m = self.maps[-1]
        m[poff:poff + len(data)] = data
        if table:
            m[toff:toff + 16 * len(table)] = np.asarray(table, dtype="<u8").tobytes()
        m[:HEAD.size] = HEAD.pack(MAGIC, poff, len(data), toff, len(table))
        return toff + 16 * len(table)

    def close(self):
        self.maps.clear()


def encode(obj):
    """A batch as one bytes object in the same layout (the cache's entry,
    an in-process batch)."""
    fd = os.memfd_create("seedpipe-encode", os.MFD_CLOEXEC)
    try:
        w = Writer(fd, 0)
        n = w.write(obj)
        return bytes(w.maps[-1][:n])
    finally:
        os.close(fd)


def read(mapping, nbytes):
    """(batch, lease): the batch in mapping[:nbytes], every array and tensor a
    view of it; lease is the numpy array they all keep alive."""
    base = np.frombuffer(mapping, dtype=np.uint8, count=nbytes)
    magic, poff, plen, toff, nb = HEAD.unpack_from(base, 0)
    if magic != MAGIC or poff + plen > nbytes or toff + 16 * nb > nbytes:
        raise RuntimeError("seedpipe: a worker's batch buffer is corrupt (bad header)")
    table = np.frombuffer(base, dtype="<u8", count=2 * nb, offset=toff).reshape(nb, 2)
    buffers = []
    for off, n in table.tolist():
        if off + n > nbytes:
            raise RuntimeError("seedpipe: a worker's batch buffer is corrupt (bad table)")
        buffers.append(base[off:off + n])
    return pickle.loads(base[poff:poff + plen], buffers=buffers), base


# ---- the default collate, stacking in place --------------------------------------

def _stacker(writer):
    def stack(batch, *, collate_fn_map=None):
        elem = batch[0]
        if writer is not None and type(elem) is _torch.Tensor and \
                elem.layout is _torch.strided and elem.dtype in _NP_OF_TORCH:
            shape = (len(batch),) + tuple(elem.shape)
            nd = _NP_OF_TORCH[elem.dtype]
            n = int(np.prod(shape, dtype=np.int64)) * nd.itemsize
            _, view = writer.alloc(n)
            out = _torch.from_numpy(view.view(nd).reshape(shape))
            if elem.dtype is _torch.bfloat16:
                out = out.view(_torch.bfloat16)
            return _torch.stack(batch, 0, out=out)
        return _torch.stack(batch, 0)
    return stack


def default_collate(batch, writer=None):
    """torch's default_collate (its own collate() and type map), with each
    stacked tensor written straight into the writer's buffer when one is
    given. Without torch: numpy arrays and numbers stacked with numpy,
    dicts, tuples and lists recursed into."""
    if _torch is None:
        return _np_collate(batch)
    from torch.utils.data._utils import collate as C
    fmap = getattr(C, "default_collate_fn_map", None)
    if fmap is None or not hasattr(C, "collate"):     # torch < 1.13: no type map
        return C.default_collate(batch)
    fmap = dict(fmap)
    fmap[_torch.Tensor] = _stacker(writer)
    return C.collate(batch, collate_fn_map=fmap)


def default_convert(sample):
    if _torch is None:
        return sample
    from torch.utils.data._utils.collate import default_convert as conv
    return conv(sample)


def _np_collate(batch):
    elem = batch[0]
    if isinstance(elem, np.ndarray) or isinstance(elem, (int, float, np.number)):
        return np.stack([np.asarray(b) for b in batch])
    if isinstance(elem, dict):
        return {k: _np_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, (tuple, list)):
        return [_np_collate(list(s)) for s in zip(*batch)]
    return list(batch)

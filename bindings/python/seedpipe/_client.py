"""seedpipe.attach() and Client: the batches of a running `seedpipe serve`,
as views on the service's shared memory (a SERVICE batch stream, see
_stream.py). The Client reads the service's epochs, pid and ring depth from
sp_client_info of sp_stream_client() (stream info has no such fields).
A service with a batch mix (`serve --batch-mix`) yields (mixed images,
soft targets (B, K) float32), as torchvision v2's MixUp/CutMix."""
from __future__ import annotations

import ctypes
import weakref
from ctypes import byref
from typing import Optional, Tuple

from . import _lib as L
from ._args import check_int
from ._errors import raise_error
from ._state import state_to_dict
from ._stream import EpochIter, Resources, StreamSource, need_streams
from ._views import as_array

__all__ = ["Client", "attach"]


class Client(StreamSource):
    """Batches of a running `seedpipe serve` (attach(name, rank)), as views
    on the service's shared memory. Same iteration interface as Loader:
    each `for` yields the rest of the current epoch; stream() yields all."""

    def __init__(self, name: str, rank: int = 0, *, copy: bool = False):
        self._res = Resources()
        self._finalizer = weakref.finalize(self, Resources.free, self._res)
        self._info = self._last = None
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty region name, got {name!r}")
        rank = check_int("rank", rank, 0, 63)
        self.name, self.rank, self.copy = name, rank, bool(copy)
        need_streams()
        self._err, self._failed = L.sp_error(), False
        sc = L.sp_stream_config()
        L.sp_stream_config_default(byref(sc))
        sc.kind = L.STREAM_KINDS["service"]
        self._bname = name.encode()
        sc.service_name, sc.rank = self._bname, rank
        s = ctypes.c_void_p()
        err = L.sp_error()
        rc = L.sp_stream_open(None, byref(sc), byref(s), byref(err))
        if rc != 0:
            raise_error(rc, err, f"region {name}")
        self._res.stream = s.value
        # What only a service has (epochs, its pid, ring slots): the client's info.
        info = L.sp_client_info()
        L.sp_client_info_get(L.sp_stream_client(self._res.stream), byref(info))
        self.info = info
        self._geometry((info.c, info.h, info.w), info.dtype, info.layout)
        # A served targets pipeline: each record is the image then its target
        # fields (docs/targets.md), cut into the in-process Loader's dict.
        self._targets = ((int(info.max_boxes), int(info.keypoints),
                          ("none", "instance", "semantic")[info.masks])
                         if info.targets else None)
        # A service that mixes (serve --batch-mix): (mixed images, soft targets).
        self.mix_classes = int(info.mix_classes)
        self._nb = int(info.batches_per_epoch)
        self.world, self.epochs, self.seed = int(info.world), int(info.epochs), int(info.seed)
        self.batch_size = int(info.batch_size)
        self.fingerprint = info.fingerprint.hex()
        self.service_pid = int(info.service_pid)
        self._ended = False

    def __len__(self) -> int:
        return self._nb

    def _pos(self) -> Tuple[int, int]:
        st = self._stream_state()
        return int(st.epoch), int(st.batch)

    @property
    def epoch(self) -> int:
        return self._pos()[0]

    def _next_epoch(self) -> int:
        return self._pos()[0]

    def _at_end(self) -> bool:
        return self._ended or self.closed

    def state_dict(self) -> dict:
        """Loader state after the last batch taken (for `serve --resume`,
        or Loader.load_state_dict: it resumes with any rank count)."""
        self._check_open()
        return state_to_dict(self._stream_state())

    def set_epoch(self, epoch: int) -> None:
        raise ValueError("set_epoch: a service client follows the service's stream; "
                         "start the service at another position with serve --resume")

    def load_state_dict(self, state) -> None:
        raise ValueError("load_state_dict: a service client follows the service's stream; "
                         "start the service with serve --resume STATE")

    def _arrays(self, b: L.sp_batch):
        if not self.mix_classes:
            return super()._arrays(b)
        images, _ = super()._arrays(b)
        # the soft targets (count, K) float32 beside the mixed images in the
        # ring; the batch's class labels stay in batch_info / labels
        t = L.sp_client_mix_targets(L.sp_stream_client(self._res.stream), byref(b), None)
        if not t:
            raise RuntimeError("seedpipe: the service's soft targets are missing")
        return images, as_array(t, (b.count, self.mix_classes), "<f4", self.copy, self)

    def _take(self) -> Optional[L.sp_batch]:
        b = super()._take()
        if b is None:
            self._ended = True
        return b

    def __iter__(self):
        self._check_open()
        return EpochIter(self, None)

    def __repr__(self):
        return f"seedpipe.Client({self.name!r}, rank={self.rank}, world={self.world})"


def attach(name: str, rank: int = 0, *, copy: bool = False) -> Client:
    """Attach to the running service NAME (`seedpipe serve --name NAME`) as
    `rank`; raises seedpipe.Error with the C message ("region NAME: ...")."""
    return Client(name, rank, copy=copy)

"""tokens_open.py [--docs N] [--mean-len L] [--runs R] [--dir DIR]

The open time of a token corpus (dataset kind "tokens", issue 40): a
generated Megatron corpus of N documents (default 10 million, one sequence
each, uint16, lengths uniform in 1..2L-1 so about N*L tokens: 3 billion by
default) opened with sp_dataset_open() through ctypes, R times (median).
The .idx is written with numpy (megatron-core's layout: 12 bytes a
sequence, 8 a document); the .bin is a sparse file of the right size (the
reader checks its size and maps it, never reads it at open), so the corpus
costs 200 MB of disk, not 6 GB. Peer, in the same run: reading the .idx's
bytes once into memory (np.fromfile), the least any reader that looks at
every length pays. The page cache is warm for both (the file was just
written). Prints both medians and their ratio.

    PYTHONPATH=bindings/python SEEDPIPE_LIB=build/libseedpipe.so \\
        /usr/bin/python3 bench/tokens_open.py
"""
import argparse
import ctypes
import os
import statistics
import struct
import tempfile
import time

import numpy as np

from seedpipe import _lib as L


def make(prefix, docs, mean_len):
    rng = np.random.default_rng(1)
    lens = rng.integers(1, 2 * mean_len, size=docs, dtype=np.int64)
    ptrs = np.zeros(docs, np.int64)
    np.cumsum(lens[:-1] * 2, out=ptrs[1:])
    total = int(lens.sum())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 8, docs, docs + 1))
        f.write(lens.astype("<i4").tobytes())
        f.write(ptrs.astype("<i8").tobytes())
        f.write(np.arange(docs + 1, dtype="<i8").tobytes())
    with open(prefix + ".bin", "wb") as f:
        f.truncate(total * 2)
    return total


def open_once(prefix):
    ds = L.P()
    err = L.sp_error()
    t0 = time.perf_counter()
    rc = L.sp_dataset_open(prefix.encode(), None, ctypes.byref(ds), ctypes.byref(err))
    t1 = time.perf_counter()
    assert rc == 0, err.msg.decode()
    n = L.dataset_info(ds).size
    L.sp_dataset_close(ds)
    return t1 - t0, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000_000)
    ap.add_argument("--mean-len", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        prefix = os.path.join(d, "corpus")
        t0 = time.perf_counter()
        total = make(prefix, a.docs, a.mean_len)
        print(f"corpus: {a.docs} documents, {total} tokens (uint16), .idx "
              f"{os.path.getsize(prefix + '.idx') / 1e6:.0f} MB, .bin {total * 2 / 1e9:.2f} GB "
              f"sparse; generated in {time.perf_counter() - t0:.1f} s")
        opens, reads = [], []
        for _ in range(a.runs):
            t, n = open_once(prefix)
            assert n == a.docs
            opens.append(t)
            t0 = time.perf_counter()
            b = np.fromfile(prefix + ".idx", dtype=np.uint8)
            reads.append(time.perf_counter() - t0)
            del b
        mo, mr = statistics.median(opens), statistics.median(reads)
        print(f"sp_dataset_open: median {mo * 1e3:.0f} ms of {a.runs} "
              f"({', '.join(f'{x * 1e3:.0f}' for x in opens)})")
        print(f"peer, np.fromfile of the .idx: median {mr * 1e3:.0f} ms")
        print(f"ratio open / read: {mo / mr:.2f}")


if __name__ == "__main__":
    main()

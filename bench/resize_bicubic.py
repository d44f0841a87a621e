#!/usr/bin/env python3
"""resize_bicubic.py - benchmark: seedpipe's bicubic resize against its
bilinear one and against PIL's bicubic, in one process, one thread.

    SEEDPIPE_LIB=build/libseedpipe.so /usr/bin/python3 bench/resize_bicubic.py [--rounds R]

The 16 photos of Debian's mate-backgrounds, decoded once by PIL and reduced
to 500x375 RGB (an ImageNet-sized photo), are resized to each case's size
by four contenders in alternated rounds (so machine noise hits all alike):
seedpipe bilinear and bicubic (sp__image_resize_filter through ctypes, the
output allocated and freed per call, as PIL's is), and PIL's
Image.resize with BILINEAR and BICUBIC (what torchvision runs on PIL
images). Prints the median time per image of each and the medians of the
per-round ratios seedpipe bicubic / seedpipe bilinear, PIL bicubic /
seedpipe bicubic, and PIL bicubic / PIL bilinear (a round's contenders run
back to back, so its ratios see the same machine load); the ctypes call
costs about 1 us, included.
Results: bench/RESULTS.md.
"""
import argparse
import ctypes
import glob
import os
import statistics
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                "python"))
from seedpipe import _lib as L  # noqa: E402  (the library the bindings load)


class SpImage(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int), ("channels", ctypes.c_int),
                ("stride", ctypes.c_size_t), ("data", ctypes.POINTER(ctypes.c_uint8))]


# sp__image_resize_filter as spt_image_resize_filter: the testing library of a
# test build (tests/testing_lib.c), beside libseedpipe.so
lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(L.LIB_PATH)),
                               "libseedpipe_testing.so"))
lib.spt_image_resize_filter.argtypes = [ctypes.POINTER(SpImage), ctypes.c_int, ctypes.c_int,
                                       ctypes.c_int, ctypes.POINTER(SpImage)]
lib.spt_image_resize_filter.restype = ctypes.c_int
lib.sp_image_free.argtypes = [ctypes.POINTER(SpImage)]
lib.sp_image_free.restype = None

CASES = [("down 500x375 -> 224x224", (224, 224)),
         ("down 500x375 -> 341x256 (Resize(256))", (341, 256)),
         ("up 500x375 -> 800x600", (800, 600))]


def photos():
    paths = sorted(glob.glob("/usr/share/backgrounds/mate/*/*.jpg"))
    if not paths:
        sys.exit("no /usr/share/backgrounds/mate/*/*.jpg (Debian's mate-backgrounds)")
    out = []
    for p in paths:
        with Image.open(p) as im:
            im.draft("RGB", (1000, 750))
            out.append(im.convert("RGB").resize((500, 375), Image.BILINEAR))
    return out


def seedpipe_round(srcs, w, h, filt):
    out = SpImage()
    t0 = time.perf_counter()
    for s in srcs:
        if lib.spt_image_resize_filter(ctypes.byref(s), w, h, filt, ctypes.byref(out)) != 0:
            sys.exit("sp__image_resize_filter failed")
        lib.sp_image_free(ctypes.byref(out))
    return (time.perf_counter() - t0) / len(srcs)


def pil_round(ims, w, h, filt):
    t0 = time.perf_counter()
    for im in ims:
        im.resize((w, h), filt)
    return (time.perf_counter() - t0) / len(ims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    ims = photos()
    arrays = [np.ascontiguousarray(np.asarray(im)) for im in ims]
    srcs = [SpImage(500, 375, 3, 1500, a_.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
            for a_ in arrays]
    print(f"{len(ims)} photos at 500x375 RGB, {a.rounds} alternated rounds, one thread; "
          f"median ms per image")
    for name, (w, h) in CASES:
        t = {"sp_bilinear": [], "sp_bicubic": [], "pil_bilinear": [], "pil_bicubic": []}
        for _ in range(a.rounds):
            t["sp_bilinear"].append(seedpipe_round(srcs, w, h, 0))
            t["sp_bicubic"].append(seedpipe_round(srcs, w, h, 1))
            t["pil_bilinear"].append(pil_round(ims, w, h, Image.BILINEAR))
            t["pil_bicubic"].append(pil_round(ims, w, h, Image.BICUBIC))
        m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
        r = lambda a, b: statistics.median(x / y for x, y in zip(t[a], t[b]))
        print(f"{name}: seedpipe bilinear {m['sp_bilinear']:.3f}, bicubic {m['sp_bicubic']:.3f}; "
              f"PIL bilinear {m['pil_bilinear']:.3f}, bicubic {m['pil_bicubic']:.3f}")
        print(f"  seedpipe bicubic / bilinear {r('sp_bicubic', 'sp_bilinear'):.2f}x time; "
              f"PIL bicubic / seedpipe bicubic {r('pil_bicubic', 'sp_bicubic'):.2f}x; "
              f"PIL bicubic / bilinear {r('pil_bicubic', 'pil_bilinear'):.2f}x")


if __name__ == "__main__":
    main()

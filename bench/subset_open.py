#!/usr/bin/env python3
"""bench/subset_open.py - the time to the first batch of seedpipe.torch's
C path over a torch Subset of a million indices (issue 38: was 58.8 s and
1.5 GB), against torch's DataLoader over the same Subset, each a whole
process, alternated (median of --runs).

    SEEDPIPE_LIB=build/libseedpipe.so PYTHONPATH=bindings/python \\
      /usr/bin/python3 bench/subset_open.py [--runs 5] [--indices 1000000]

The dataset: `seedpipe make-shapes` (60 PNGs) as an ImageFolder, CenterCrop +
ToTensor; the Subset draws its indices at random (repeats: each file is
named about 16,000 times). Printed: seconds to the first batch and peak
memory (ru_maxrss) of each side, and the ratio.
"""
import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--indices", type=int, default=1_000_000)
ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
args = ap.parse_args()

if args.child:
    import numpy as np
    import torch
    import torchvision as tv
    from torchvision import transforms as T

    from seedpipe.torch import DataLoader
    side, root = args.child
    ds = tv.datasets.ImageFolder(root, transform=T.Compose([T.CenterCrop(32), T.ToTensor()]))
    idx = np.random.default_rng(0).integers(0, len(ds), args.indices)
    t0 = time.perf_counter()
    sub = torch.utils.data.Subset(ds, idx)
    dl = (DataLoader(sub, batch_size=64, shuffle=True, seed=1, backend="c") if side == "seedpipe"
          else torch.utils.data.DataLoader(sub, batch_size=64, shuffle=True))
    next(iter(dl))
    dt = time.perf_counter() - t0
    print(f"{dt:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    sys.exit(0)

with tempfile.TemporaryDirectory(prefix="sp-subset-") as tmp:
    from seedpipe import find_binary
    subprocess.run([find_binary(), "make-shapes", tmp + "/shapes", "--count", "60"], check=True,
                   capture_output=True)
    res = {"seedpipe": [], "torch": []}
    for _ in range(args.runs):
        for side in res:
            out = subprocess.run([sys.executable, __file__, "--indices", str(args.indices),
                                  "--child", side, tmp + "/shapes"], capture_output=True,
                                 text=True, check=True)
            res[side].append(tuple(float(v) for v in out.stdout.split()))
    med = {s: (statistics.median(t for t, _ in v), statistics.median(m for _, m in v))
           for s, v in res.items()}
    print(f"Subset of {args.indices:,} indices, time to the first batch (median of {args.runs}): "
          f"seedpipe C path {med['seedpipe'][0]:.2f} s (peak {med['seedpipe'][1]:.0f} MB), torch "
          f"{med['torch'][0]:.2f} s (peak {med['torch'][1]:.0f} MB): seedpipe/torch "
          f"{med['seedpipe'][0] / med['torch'][0]:.2f}x")

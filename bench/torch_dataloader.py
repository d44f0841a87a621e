#!/usr/bin/env python3
"""bench/torch_dataloader.py - seedpipe.torch.DataLoader (owned tensors,
the default) against the same loader with zero_copy=True views, and against
torch.utils.data.DataLoader, on the same photos, in one run.

    SEEDPIPE_LIB=build/libseedpipe.so PYTHONPATH=bindings/python \\
      /usr/bin/python3 bench/torch_dataloader.py [PHOTO_DIR] [--workers 2] [--batch 16]

PHOTO_DIR (default /usr/share/backgrounds/mate, Debian's mate-backgrounds)
is searched for *.jpg; they are linked into a two-class image folder in a
temporary directory, repeated to --images. The pipeline is the training
one of imagenet/main.py: RandomResizedCrop(224) + RandomHorizontalFlip +
ToTensor + Normalize, float32. Each loader runs one warm-up epoch, then
--epochs timed epochs; the images/s of the best epoch are printed, with the
ratios (targets: owned >= 0.9x zero-copy, owned >= 3x torch).
"""
import argparse
import glob
import os
import tempfile

import torch
import torchvision
from torchvision import transforms as T

import epoch_rate  # bench/epoch_rate.py

from seedpipe.torch import DataLoader

ap = argparse.ArgumentParser()
ap.add_argument("photos", nargs="?", default="/usr/share/backgrounds/mate")
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--images", type=int, default=64)
ap.add_argument("--epochs", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(1)

files = sorted(glob.glob(os.path.join(args.photos, "**", "*.jpg"), recursive=True))
if not files:
    raise SystemExit(f"no *.jpg under {args.photos}")
tmp = tempfile.TemporaryDirectory(prefix="sp-bench-")
for i in range(args.images):
    d = os.path.join(tmp.name, f"c{i % 2}")
    os.makedirs(d, exist_ok=True)
    os.symlink(files[i % len(files)], os.path.join(d, f"{i:05d}.jpg"))
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
ds = torchvision.datasets.ImageFolder(tmp.name, transform=tf)


def rate(make):
    return epoch_rate.rate(make, args.epochs)


w, b = args.workers, args.batch
owned = rate(lambda: DataLoader(ds, batch_size=b, shuffle=True, num_workers=w, seed=0))
views = rate(lambda: DataLoader(ds, batch_size=b, shuffle=True, num_workers=w, seed=0,
                                zero_copy=True))
ref = rate(lambda: torch.utils.data.DataLoader(ds, batch_size=b, shuffle=True, num_workers=w,
                                               persistent_workers=w > 0))
print(f"{len(ds)} images ({len(files)} distinct JPEGs from {args.photos}), batch {b}, "
      f"{w} workers, {os.cpu_count()} CPUs")
print(f"seedpipe owned     {owned:8.1f} images/s")
print(f"seedpipe zero-copy {views:8.1f} images/s")
print(f"torch DataLoader   {ref:8.1f} images/s")
print(f"owned / zero-copy  {owned / views:.2f}x (target >= 0.9)")
print(f"owned / torch      {owned / ref:.2f}x (target >= 3)")

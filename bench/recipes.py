#!/usr/bin/env python3
"""bench/recipes.py - the training recipes people use (issue 39) through
seedpipe.torch.DataLoader against torch.utils.data.DataLoader with the same
torchvision transforms, on the same photos, in one run.

    SEEDPIPE_LIB=build/libseedpipe.so PYTHONPATH=bindings/python \\
      /usr/bin/python3 bench/recipes.py [PHOTO_DIR] [--workers 2] [--batch 16]

PHOTO_DIR (default /usr/share/backgrounds/mate, Debian's mate-backgrounds)
is searched for *.jpg; they are linked into a two-class image folder in a
temporary directory, repeated to --images. For the CIFAR recipe each photo
is first made a 32 x 32 PNG with PIL (setup, not timed). The recipes:

  reference   torchvision's classification reference (references/
              classification/presets.py): RandomResizedCrop(176),
              RandomHorizontalFlip, TrivialAugmentWide, ToTensor, Normalize,
              RandomErasing(0.1)
  randaug     timm-style: RandomResizedCrop(224, BICUBIC),
              RandomHorizontalFlip, RandAugment(2, 9), ToTensor, Normalize
  autoaug     RandomResizedCrop(224), RandomHorizontalFlip,
              AutoAugment(IMAGENET), ToTensor, Normalize
  cifar       RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor,
              Normalize (on the 32 x 32 PNGs)

Each loader runs one warm-up epoch, then --epochs timed epochs; the
images/s of the best epoch are printed with the ratio seedpipe / torch
(target >= 3 at 2 workers). torch is given one intra-op thread, as
seedpipe's workers use one each.
"""
import argparse
import glob
import os
import tempfile

import torch
import torchvision
from PIL import Image
from torchvision import transforms as T

import epoch_rate  # bench/epoch_rate.py

from seedpipe.torch import DataLoader

ap = argparse.ArgumentParser()
ap.add_argument("photos", nargs="?", default="/usr/share/backgrounds/mate")
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--images", type=int, default=64)
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--only", default=None, help="comma-separated recipe names")
args = ap.parse_args()
torch.set_num_threads(1)

files = sorted(glob.glob(os.path.join(args.photos, "**", "*.jpg"), recursive=True))
if not files:
    raise SystemExit(f"no *.jpg under {args.photos}")
tmp = tempfile.TemporaryDirectory(prefix="sp-recipes-")
big, small = os.path.join(tmp.name, "photos"), os.path.join(tmp.name, "cifar")
for i in range(args.images):
    for root in (big, small):
        os.makedirs(os.path.join(root, f"c{i % 2}"), exist_ok=True)
    os.symlink(files[i % len(files)], os.path.join(big, f"c{i % 2}", f"{i:05d}.jpg"))
    if i < len(files):
        with Image.open(files[i]) as im:
            im.convert("RGB").resize((32, 32), Image.BILINEAR).save(
                os.path.join(small, f"c{i % 2}", f"{i:05d}.png"))
    else:
        os.symlink(os.path.join(small, f"c{(i % len(files)) % 2}", f"{i % len(files):05d}.png"),
                   os.path.join(small, f"c{i % 2}", f"{i:05d}.png"))

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BICUBIC = T.InterpolationMode.BICUBIC
RECIPES = {
    "reference": (big, [T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
                        T.TrivialAugmentWide(), T.ToTensor(), T.Normalize(MEAN, STD),
                        T.RandomErasing(0.1)]),
    "randaug": (big, [T.RandomResizedCrop(224, interpolation=BICUBIC), T.RandomHorizontalFlip(),
                      T.RandAugment(2, 9), T.ToTensor(), T.Normalize(MEAN, STD)]),
    "autoaug": (big, [T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                      T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), T.ToTensor(),
                      T.Normalize(MEAN, STD)]),
    "cifar": (small, [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                      T.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))]),
}


def rate(make):
    return epoch_rate.rate(make, args.epochs)


w, b = args.workers, args.batch
print(f"{args.images} images ({len(files)} distinct JPEGs from {args.photos}), batch {b}, "
      f"{w} workers, {os.cpu_count()} CPUs, torch {torch.__version__}, "
      f"torchvision {torchvision.__version__}")
print("| recipe | seedpipe images/s | torch images/s | seedpipe / torch |")
print("|---|---|---|---|")
only = set(args.only.split(",")) if args.only else set(RECIPES)
for name, (root, tfs) in RECIPES.items():
    if name not in only:
        continue
    ds = torchvision.datasets.ImageFolder(root, transform=T.Compose(tfs))
    # backend="c": a transform the C path refuses fails here, never a silent Python path.
    ours = rate(lambda: DataLoader(ds, batch_size=b, shuffle=True, num_workers=w, seed=0,
                                   backend="c"))
    ref = rate(lambda: torch.utils.data.DataLoader(ds, batch_size=b, shuffle=True, num_workers=w,
                                                   persistent_workers=w > 0))
    print(f"| {name} | {ours:.1f} | {ref:.1f} | **{ours / ref:.2f}** |", flush=True)

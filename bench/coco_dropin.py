#!/usr/bin/env python3
"""bench/coco_dropin.py - torchvision's CocoDetection with v2 transforms:
seedpipe.torch.DataLoader (the C path with targets, seedpipe/_tvcoco.py)
against torch.utils.data.DataLoader over the same wrapped dataset object,
whole processes in alternated pairs, in one run (issue 41 item 4).

    SEEDPIPE_LIB=build/libseedpipe.so SEEDPIPE_BIN=build/seedpipe \\
      /usr/bin/python3 bench/coco_dropin.py [--pairs 5] [--workers 2] [--n 256]

It runs itself under the torchvision v2 venv (bindings/python/tests/
tv2_venv.py: torch 2.15, torchvision 0.29, pycocotools). The data: N JPEG
photos-like images (smooth colour fields with noise, 640 x 480, quality
90) with 2 to 8 polygon annotations each, made once in a temporary folder.
The transforms, the SSD recipe at a fixed size: ToImage, RandomZoomOut(
fill=114, side_range=(1, 2)), RandomIoUCrop, RandomHorizontalFlip,
Resize((320, 320)), SanitizeBoundingBoxes, ToDtype(float32, scale=True);
collate_fn=tuple(zip(*b)); batch 16; each loader in a fresh process,
timed from its creation to the last batch of one epoch, every image
touched (a sum). Two target sets: boxes + labels + image_id, and the same
with masks. Printed: each side's median images/s and the median of the
pairs' ratios.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "bindings", "python", "tests")

ap = argparse.ArgumentParser()
ap.add_argument("--pairs", type=int, default=5)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--n", type=int, default=256)
ap.add_argument("--child", nargs=3, metavar=("SIDE", "KEYS", "DIR"), help=argparse.SUPPRESS)
ap.add_argument("--make", metavar="DIR", help=argparse.SUPPRESS)
args = ap.parse_args()


def make(root, n):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(5)
    os.makedirs(os.path.join(root, "img"), exist_ok=True)
    h, w = 480, 640
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    images, anns = [], []
    for i in range(n):
        f = rng.uniform(0.005, 0.03, 6)
        px = np.stack([127 + 100 * np.sin(f[c] * xx + f[c + 3] * yy + i) for c in range(3)], -1)
        px += rng.normal(0, 6, px.shape)
        name = f"img/{i:05d}.jpg"
        Image.fromarray(np.clip(px, 0, 255).astype(np.uint8)).save(os.path.join(root, name),
                                                                   quality=90)
        images.append({"id": i + 1, "file_name": name, "height": h, "width": w})
        for _ in range(int(rng.integers(2, 9))):
            cx, cy = rng.uniform(60, w - 60), rng.uniform(60, h - 60)
            ang = np.sort(rng.uniform(0, 2 * np.pi, 8))
            rad = rng.uniform(10, 60, 8)
            poly = [float(round(v, 1)) for p in zip(cx + rad * np.cos(ang),
                                                    cy + rad * np.sin(ang)) for v in p]
            x0, y0, x1, y1 = min(poly[0::2]), min(poly[1::2]), max(poly[0::2]), max(poly[1::2])
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "iscrowd": 0, "area": 1.0,
                         "category_id": int(rng.integers(1, 91)), "segmentation": [poly],
                         "bbox": [x0, y0, round(x1 - x0, 1), round(y1 - y0, 1)]})
    with open(os.path.join(root, "instances.json"), "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": []}, f)


def child(side, keys, root):
    import contextlib
    import io
    import warnings
    import torch
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
    from torchvision.transforms import v2
    import seedpipe.torch as st
    torch.set_num_threads(1)
    tf = v2.Compose([v2.ToImage(), v2.RandomZoomOut(fill=114, side_range=(1.0, 2.0)),
                     v2.RandomIoUCrop(), v2.RandomHorizontalFlip(), v2.Resize((320, 320)),
                     v2.SanitizeBoundingBoxes(), v2.ToDtype(torch.float32, scale=True)])
    tk = ("image_id", "boxes", "labels") + (("masks",) if keys == "masks" else ())
    with contextlib.redirect_stdout(io.StringIO()):
        ds = wrap_dataset_for_transforms_v2(
            CocoDetection(root, os.path.join(root, "instances.json"), transforms=tf),
            target_keys=tk)
    collate = lambda b: tuple(zip(*b))   # noqa: E731
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if side == "seedpipe":
            dl = st.DataLoader(ds, batch_size=16, shuffle=True, seed=1,
                               num_workers=args.workers, collate_fn=collate)
            assert dl.backend == "c", dl.backend_reason
        else:
            dl = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True,
                                             num_workers=args.workers, collate_fn=collate)
        n, s, boxes = 0, 0.0, 0
        for imgs, tgts in dl:
            for im, t in zip(imgs, tgts):
                s += float(im.sum())
                boxes += len(t["boxes"])
            n += len(imgs)
    dt = time.perf_counter() - t0
    print(json.dumps({"rate": n / dt, "n": n, "boxes": boxes}))


def main():
    sys.path.insert(0, TESTS)
    import tv2_venv
    py, why = tv2_venv.tv2_python()
    if py is None:
        sys.exit("SKIP: " + why)
    ok, why = tv2_venv.with_module(py, "pycocotools", "pycocotools")
    if not ok:
        sys.exit("SKIP: " + why)
    env = tv2_venv.child_env({"OMP_NUM_THREADS": "1"})
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([py, me, "--make", root, "--n", str(args.n)], env=env, check=True)
        for keys in ("boxes", "masks"):
            rates = {"seedpipe": [], "torch": []}
            ratios = []
            for _ in range(args.pairs):
                got = {}
                for side in ("seedpipe", "torch"):
                    r = subprocess.run([py, me, "--workers", str(args.workers), "--child", side,
                                        keys, root], env=env, capture_output=True, check=True)
                    got[side] = json.loads(r.stdout.decode().strip().splitlines()[-1])
                    rates[side].append(got[side]["rate"])
                ratios.append(got["seedpipe"]["rate"] / got["torch"]["rate"])
            print(f"{keys}: seedpipe {statistics.median(rates['seedpipe']):.0f} images/s, "
                  f"torch {statistics.median(rates['torch']):.0f} images/s, ratio "
                  f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max "
                  f"{max(ratios):.2f}; {args.pairs} pairs, {args.workers} workers, "
                  f"{args.n} images)", flush=True)


if args.make:
    make(args.make, args.n)
elif args.child:
    child(*args.child)
else:
    main()

#!/usr/bin/env python3
"""bench/detection.py - a detection pipeline (issue 41): decode,
random_iou_crop, resize 300 x 300, hflip, boxes, through seedpipe.Loader
(the C path, annotations=) against torchvision v2 with torch's DataLoader
on the same images, in one run; and seedpipe's cost of carrying targets.

    SEEDPIPE_LIB=build/libseedpipe.so PYTHONPATH=bindings/python \\
      ~/.cache/seedpipe-venvs/torch2.15.0-torchvision0.29.2/bin/python bench/detection.py \\
      [--images N] [--workers 2] [--batch 16] [--epochs 2] [--pairs 3]

Runs under the python of the torchvision 0.29 venv that
bindings/python/tests/tv2_venv.py makes (Debian's torchvision 0.14 has no
transforms.v2); seedpipe is this checkout's package (numpy only).

The data: --images photos of ImageNet's size (500 x 375 JPEG, q90) made
by build/bench/bench_make_photos from Debian's mate-backgrounds, and a
COCO-style instances JSON written here (seeded: 1 to 8 boxes an image,
inside or across the border, categories 1..90). Setup, not timed.

  seedpipe    Loader(folder, annotations=JSON, workers=2) with
              "random_iou_crop | resize size=300,300 | hflip p=0.5 |
              targets max_boxes=100 min_area=1"; each batch is made a list
              of per-image target dicts of torch tensors (boxes[:n],
              labels[:n]), as docs/targets.md's training loop does
  torchvision torch.utils.data.DataLoader(2 workers, persistent) over a
              Dataset equal to CocoDetection + wrap_dataset_for_transforms_v2
              (PIL image, {"boxes": BoundingBoxes XYXY, "labels"}; written
              out here because CocoDetection needs pycocotools), with
              v2.RandomIoUCrop(), v2.Resize((300, 300)),
              v2.RandomHorizontalFlip(), v2.SanitizeBoundingBoxes(),
              v2.PILToTensor(); collated as lists
  targets     seedpipe "resize size=300,300 | hflip p=0.5" against the same
              with "| targets max_boxes=100" and annotations (random_iou_crop
              cannot run without targets: it decides by the boxes), both 2
              workers; the consumer sums the images (and the boxes array)

Each loader runs one warm-up epoch, then --epochs timed epochs; the best
epoch's images/s, and the CPU time per image of that epoch (this process
and its worker processes, from /proc: on a shared machine the wall rate
follows the load, the CPU per image much less). The two sides alternate
--pairs times; the medians of the pairs' ratios are the result. Every
batch is touched (every image byte read, boxes summed).
torch is given one intra-op thread, as seedpipe's workers use one each.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import v2

import seedpipe

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--images", type=int, default=512)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--pairs", type=int, default=3)
ap.add_argument("--make-photos", default=os.path.join(HERE, "..", "build", "bench",
                                                       "bench_make_photos"))
ap.add_argument("--only", default=None, help="comma-separated: detection,targets")
args = ap.parse_args()
torch.set_num_threads(1)


def make_data(root):
    subprocess.run([args.make_photos, root, "--count", str(args.images)], check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, fs in os.walk(root) for f in fs if f.endswith(".jpg"))
    rng = np.random.default_rng(41)
    images, anns = [], []
    for i, rel in enumerate(files):
        with Image.open(os.path.join(root, rel)) as im:
            w, h = im.size
        images.append({"id": i + 1, "file_name": rel, "width": w, "height": h})
        for _ in range(int(rng.integers(1, 9))):
            bw, bh = rng.uniform(0.05, 0.6) * w, rng.uniform(0.05, 0.6) * h
            x, y = rng.uniform(-0.1 * w, w - 0.5 * bw), rng.uniform(-0.1 * h, h - 0.5 * bh)
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "iscrowd": 0,
                         "category_id": int(rng.integers(1, 91)),
                         "bbox": [float(x), float(y), float(bw), float(bh)]})
    path = os.path.join(root, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": anns,
                   "categories": [{"id": c, "name": str(c)} for c in range(1, 91)]}, f)
    return path, len(files), len(anns)


class CocoBoxes(torch.utils.data.Dataset):
    """What wrap_dataset_for_transforms_v2(CocoDetection(root, ann)) gives with
    target_keys {"boxes", "labels"}: a PIL image and XYXY BoundingBoxes."""

    def __init__(self, root, ann, transforms):
        doc = json.load(open(ann))
        per = {im["id"]: [] for im in doc["images"]}
        for a in doc["annotations"]:
            per[a["image_id"]].append(a)
        self.items = [(os.path.join(root, im["file_name"]), (im["height"], im["width"]),
                       [a["bbox"] for a in per[im["id"]]],
                       [a["category_id"] for a in per[im["id"]]]) for im in doc["images"]]
        self.transforms = transforms

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, size, xywh, labels = self.items[i]
        img = Image.open(path).convert("RGB")
        boxes = tv_tensors.BoundingBoxes(torch.tensor(xywh, dtype=torch.float32).reshape(-1, 4),
                                         format="XYWH", canvas_size=size)
        target = {"boxes": v2.functional.convert_bounding_box_format(boxes, new_format="XYXY"),
                  "labels": torch.tensor(labels, dtype=torch.int64)}
        return self.transforms(img, target)


def touch(t):
    """Read every byte of a uint8 tensor (summed as int64 words: torch's own
    sum of uint8 costs about 1 ms per 300 x 300 image on one thread, which
    would be the consumer's cost, not the loader's)."""
    return t.reshape(-1).view(torch.int64).sum()


def collate(batch):
    return tuple(zip(*batch))


TICK = os.sysconf("SC_CLK_TCK")


def cpu_now():
    """CPU seconds of this process and its live children (the workers of
    both loaders are child processes), from /proc."""
    me = os.getpid()
    t = os.times()
    total = t.user + t.system
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[1]) == me:
            total += (int(st[11]) + int(st[12])) / TICK
    return total


def timed_epochs(epochs, run_epoch):
    """(best images/s, CPU ms per image of that epoch) over `epochs` timed
    epochs after one warm-up epoch."""
    best, cpu = 0.0, 0.0
    for epoch in range(epochs + 1):
        t0, c0 = time.perf_counter(), cpu_now()
        n = run_epoch(epoch)
        dt, dc = time.perf_counter() - t0, cpu_now() - c0
        if epoch and n / dt > best:
            best, cpu = n / dt, 1000.0 * dc / n
    return best, cpu


def torch_rate(ds):
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                     num_workers=args.workers, persistent_workers=True,
                                     collate_fn=collate)

    def run_epoch(epoch):
        n = 0
        for images, targets in dl:
            for im, t in zip(images, targets):
                touch(im)
                t["boxes"].sum()
            n += len(images)
        return n
    out = timed_epochs(args.epochs, run_epoch)
    del dl
    return out


def seedpipe_rate(root, spec, ann, epochs=None, lists=True):
    """lists: make each batch a list of per-image target dicts of tensors (the
    training loop's work); else only sum the boxes array (the loader's cost)."""
    with seedpipe.Loader(root, pipeline=spec, annotations=ann, batch_size=args.batch,
                         workers=args.workers, seed=0) as ld:
        def run_epoch(epoch):
            ld.set_epoch(epoch)
            n = 0
            for b in ld:
                if isinstance(b, dict) and not lists:
                    images = torch.from_numpy(b["image"])
                    b["boxes"].sum()
                elif isinstance(b, dict):
                    images = torch.from_numpy(b["image"])
                    nb = b["num_boxes"]
                    targets = [{"boxes": torch.from_numpy(b["boxes"][i, :nb[i]]),
                                "labels": torch.from_numpy(b["labels"][i, :nb[i]]).long()}
                               for i in range(len(nb))]
                    for t in targets:
                        t["boxes"].sum()
                else:
                    images = torch.from_numpy(b[0])
                touch(images)
                n += images.shape[0]
            return n
        return timed_epochs(args.epochs if epochs is None else epochs, run_epoch)


tmp = tempfile.TemporaryDirectory(prefix="sp-detection-")
root = os.path.join(tmp.name, "photos")
ann, nimg, nann = make_data(root)
only = set(args.only.split(",")) if args.only else {"detection", "targets"}
print(f"{nimg} photos 500x375 (bench_make_photos), {nann} boxes, batch {args.batch}, "
      f"{args.workers} workers, {os.cpu_count()} CPUs, torch {torch.__version__}, "
      f"torchvision {torchvision.__version__}")
DET = "random_iou_crop | resize size=300,300 | hflip p=0.5 | targets max_boxes=100 min_area=1"
if "detection" in only:
    tfs = v2.Compose([v2.RandomIoUCrop(), v2.Resize((300, 300)), v2.RandomHorizontalFlip(),
                      v2.SanitizeBoundingBoxes(), v2.PILToTensor()])
    rows = []
    for _ in range(args.pairs):
        rows.append((seedpipe_rate(root, DET, ann), torch_rate(CocoBoxes(root, ann, tfs))))
    print("| pair | seedpipe images/s | torchvision v2 images/s | ratio | seedpipe CPU ms/image "
          "| torchvision CPU ms/image | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for k, ((a, ac), (b, bc)) in enumerate(rows):
        print(f"| {k} | {a:.1f} | {b:.1f} | {a / b:.2f} | {ac:.2f} | {bc:.2f} | {bc / ac:.2f} |")
    print(f"detection, median seedpipe / torchvision images/s: "
          f"**{statistics.median(a / b for (a, _), (b, _) in rows):.2f}**; CPU per image "
          "torchvision / seedpipe: "
          f"**{statistics.median(bc / ac for (_, ac), (_, bc) in rows):.2f}**", flush=True)
if "targets" in only:
    base = "resize size=300,300 | hflip p=0.5"
    rows = []
    for _ in range(args.pairs):
        rows.append((seedpipe_rate(root, base, None),
                     seedpipe_rate(root, base + " | targets max_boxes=100", ann, lists=False)))
    print("| pair | without targets images/s | with targets images/s | with / without | "
          "CPU ms/image without | with | with / without |")
    print("|---|---|---|---|---|---|---|")
    for k, ((a, ac), (b, bc)) in enumerate(rows):
        print(f"| {k} | {a:.1f} | {b:.1f} | {b / a:.3f} | {ac:.2f} | {bc:.2f} | {bc / ac:.3f} |")
    r = statistics.median(b / a for (a, _), (b, _) in rows)
    rc = statistics.median(bc / ac for (_, ac), (_, bc) in rows)
    print(f"targets, median with / without images/s: **{r:.3f}**; CPU per image with / "
          f"without: **{rc:.3f}**")

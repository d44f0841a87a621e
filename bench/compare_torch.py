#!/usr/bin/env python3
"""compare_torch.py - seedpipe from Python vs torch DataLoader + torchvision, side by side.

On the same JPEG ImageFolder (default out/photos, made by
`build/bench/bench_make_photos out/photos`), the same augmentation:
RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize(ImageNet),
batch 64, float32 NCHW; seedpipe runs the equivalent preset `imagenet-train`.

 (a) throughput (images/s) at each worker count (default 0,1,2): torch
     DataLoader(num_workers=W) vs seedpipe.Loader(workers=W) (W=0: in the
     calling process), both iterating NBATCH batches of one epoch, the
     tensors handed over zero-copy (seedpipe.torch.to_tensors);
 (b) determinism: how many of the first NCMP augmented batches are equal
     (torch.equal) between worker counts 0 and each other W, for each. torch
     is seeded as the PyTorch reproducibility docs recommend (torch.manual_seed,
     a seeded Generator for the DataLoader, worker_init_fn seeding numpy and
     random); seedpipe must give all of them.
Prints a table and writes a PNG chart (matplotlib; skipped if missing).
Exits 0 with a SKIP line when torch or torchvision is missing.

    bench/compare_torch.py [--data out/photos] [--workers 0,1,2] [--batches 12]
                           [--compare 8] [--png out/compare_torch.png] [--seed 0]
"""
import argparse
import os
import random
import sys
import time

try:
    import numpy as np
    import torch
    import torchvision
    from torchvision import datasets, transforms
except ImportError as e:
    print(f"SKIP: torch + torchvision (and numpy) are needed: {e}")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
try:
    import seedpipe
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import seedpipe
from seedpipe.torch import to_tensors


def seed_worker(worker_id):
    # https://pytorch.org/docs/stable/notes/randomness.html#dataloader
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def torch_loader(data, workers, batch, seed):
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(data, transform=tf)
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                       worker_init_fn=seed_worker, generator=g)


def run_torch(data, workers, batch, seed, nbatch, keep):
    dl = torch_loader(data, workers, batch, seed)
    kept, n = [], 0
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(dl):
        n += x.shape[0]
        if i < keep:
            kept.append(x.clone())
        if i + 1 >= nbatch:
            break
    dt = time.perf_counter() - t0
    del dl
    return n / dt, kept


def run_seedpipe(data, workers, batch, seed, nbatch, keep):
    ld = seedpipe.Loader(data, pipeline="imagenet-train", seed=seed, batch_size=batch,
                         workers=workers, dtype="float32", layout="nchw", epochs=1)
    kept, n = [], 0
    try:
        t0 = time.perf_counter()
        for i, (images, labels) in enumerate(ld):
            x, y = to_tensors(images, labels)      # zero copy
            n += x.shape[0]
            if i < keep:
                kept.append(x.clone())
            if i + 1 >= nbatch:
                break
        dt = time.perf_counter() - t0
    finally:
        ld.close()
    return n / dt, kept


def equal_count(a, b):
    return sum(1 for x, y in zip(a, b) if x.shape == y.shape and torch.equal(x, y))


def chart(path, workers, rates):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("chart skipped: matplotlib not installed")
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    w = 0.38
    xs = list(range(len(workers)))
    for k, (name, color) in enumerate((("torch DataLoader", "#d9822b"),
                                       ("seedpipe (Python)", "#2b6cd9"))):
        vals = [rates[name][wk] for wk in workers]
        bars = ax.bar([x + (k - 0.5) * w for x in xs], vals, w, label=name, color=color)
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.0f}", ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{wk} workers" for wk in workers])
    ax.set_ylabel("images/s")
    ax.set_title("RandomResizedCrop 224 + flip + normalize, batch 64")
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"chart: {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "out", "photos"))
    ap.add_argument("--workers", default="0,1,2")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=12, help="batches timed per run")
    ap.add_argument("--compare", type=int, default=8, help="batches compared for equality")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", default=os.path.join(ROOT, "out", "compare_torch.png"))
    a = ap.parse_args()
    if not os.path.isdir(a.data):
        print(f"SKIP: {a.data} missing (make it with build/bench/bench_make_photos {a.data})")
        return 0
    workers = [int(w) for w in a.workers.split(",")]
    nb = max(a.batches, a.compare)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"{seedpipe.version()}, {os.cpu_count()} CPUs, data {a.data}")
    torch.set_num_threads(1)
    rates = {"torch DataLoader": {}, "seedpipe (Python)": {}}
    kept = {"torch DataLoader": {}, "seedpipe (Python)": {}}
    for w in workers:
        for name, fn in (("torch DataLoader", run_torch), ("seedpipe (Python)", run_seedpipe)):
            r, k = fn(a.data, w, a.batch, a.seed, nb, a.compare)
            rates[name][w], kept[name][w] = r, k
            print(f"  {name:18s} workers {w}: {r:8.1f} images/s", flush=True)
    base = workers[0]
    print()
    print(f"{'loader':18s} " + " ".join(f"{f'{w} workers':>10s}" for w in workers)
          + "  " + " ".join(f"{f'eq {base}v{w}':>8s}" for w in workers[1:]))
    for name in rates:
        eq = [f"{equal_count(kept[name][base], kept[name][w])}/{a.compare}" for w in workers[1:]]
        print(f"{name:18s} " + " ".join(f"{rates[name][w]:10.1f}" for w in workers)
              + "  " + " ".join(f"{e:>8s}" for e in eq))
    print("speedup (seedpipe / torch): " + ", ".join(
        f"{w} workers {rates['seedpipe (Python)'][w] / rates['torch DataLoader'][w]:.2f}x"
        for w in workers))
    chart(a.png, workers, rates)
    return 0


if __name__ == "__main__":
    sys.exit(main())

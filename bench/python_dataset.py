#!/usr/bin/env python3
"""bench/python_dataset.py - a user's own Dataset through seedpipe's Python
backend against torch.utils.data.DataLoader, as whole processes, in
alternated pairs, in one run (issue 37).

    SEEDPIPE_LIB=build/libseedpipe.so PYTHONPATH=bindings/python \\
      /usr/bin/python3 bench/python_dataset.py [--pairs 5] [--workers 2]

Two datasets, each loader in its own fresh process (worker start and one
epoch, timed from the loader's creation to its last batch; both sides
import torch and seedpipe before):
  photos  a tutorial Dataset: PIL decode of the mate-backgrounds JPEGs
          (Debian's mate-backgrounds; resized once to 512 px into a
          temporary folder), RandomResizedCrop(224) + ColorJitter +
          RandomHorizontalFlip + ToTensor, a draw from random and one from
          np.random; 320 images (SP_BENCH_N), batch 16
  arrays  4 MB of float32 per sample (a slice of a preloaded array, scaled:
          the work is the transport), 320 samples, batch 16 (64 MB batches)
Each process touches every batch (a sum), as a model would. Printed: the
median images/s of each side and the median of the pairs' ratios (targets:
photos >= 1.0x, arrays >= 1.5x); the photos through cache=DIR: an epoch without a cache,
a cold one and a warm one (whole processes, 3 triples, the cold and warm
batches' digests equal, hashing not timed; target warm >= 5x computed). Then the per-batch transport cost of the
Python backend on a 64 MB batch (the worker's write into the shared buffer
and the trainer's read), against a plain memory copy of the same bytes
measured in the same run.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--pairs", type=int, default=5)
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--child", nargs=3, metavar=("SIDE", "DATASET", "DIR"), help=argparse.SUPPRESS)
args = ap.parse_args()

N, BATCH = int(os.environ.get("SP_BENCH_N", 320)), 16


def datasets(which, folder):
    import random

    import numpy as np
    import torch
    from PIL import Image
    from torchvision import transforms as T

    class Photos(torch.utils.data.Dataset):
        def __init__(self):
            self.paths = sorted(glob.glob(os.path.join(folder, "*.jpg")))
            self.tf = T.Compose([T.RandomResizedCrop(224), T.ColorJitter(0.4, 0.4, 0.4),
                                 T.RandomHorizontalFlip(), T.ToTensor()])

        def __len__(self):
            return N

        def __getitem__(self, i):
            img = Image.open(self.paths[i % len(self.paths)]).convert("RGB")
            x = self.tf(img)
            return x, {"label": i % 10, "jitter": random.random() + np.random.rand()}

    class Arrays(torch.utils.data.Dataset):
        def __init__(self):
            self.data = np.random.default_rng(0).random((8, 1 << 20), dtype=np.float32)

        def __len__(self):
            return N

        def __getitem__(self, i):
            return self.data[i % 8] * np.float32(1 + i), i

    return Photos() if which == "photos" else Arrays()


def child(side, which, folder):
    import torch
    torch.set_num_threads(1)
    ds = datasets(which, folder)
    from seedpipe.torch import DataLoader       # imported by both sides, as a user would
    t0 = time.perf_counter()
    if side == "seedpipe":
        dl = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=args.workers, seed=1)
    elif side.startswith("cache="):
        dl = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=args.workers, seed=1,
                        cache=side[len("cache="):], fingerprint=f"bench-{which}")
    else:
        dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True,
                                         num_workers=args.workers)
    import hashlib
    n, h, hashing = 0, hashlib.blake2b(digest_size=16), 0.0
    for batch in dl:
        x = batch[0]
        x.sum()
        n += len(x)
        if side.startswith("cache="):      # the equality check, not timed
            th = time.perf_counter()
            h.update(memoryview(x.numpy()).cast("B"))
            hashing += time.perf_counter() - th
    dt = time.perf_counter() - t0 - hashing
    print(f"{n / dt:.3f} {h.hexdigest()}")


if args.child:
    child(*args.child)
    sys.exit(0)


def prepare_photos(tmp):
    from PIL import Image
    src = sorted(glob.glob("/usr/share/backgrounds/mate/**/*.jpg", recursive=True))
    if not src:
        raise SystemExit("no JPEGs under /usr/share/backgrounds/mate (apt-get install "
                         "mate-backgrounds)")
    for k, p in enumerate(src):
        img = Image.open(p).convert("RGB")
        img.thumbnail((512, 512))
        img.save(os.path.join(tmp, f"{k:03d}.jpg"), quality=90)


def run(side, which, folder):
    out = subprocess.run([sys.executable, __file__, "--workers", str(args.workers),
                          "--child", side, which, folder], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side} {which} failed:\n{out.stderr[-3000:]}")
    rate, digest = out.stdout.strip().splitlines()[-1].split()
    return float(rate) if not side.startswith("cache=") else (float(rate), digest)


def transport():
    import numpy as np
    import torch

    from seedpipe import _pybatch
    batch = (torch.rand(BATCH, 1 << 20), torch.arange(BATCH))
    fd = os.memfd_create("bench")
    w = _pybatch.Writer(fd, 0)
    w.write(batch)       # sized once, as a reused ring buffer is
    import mmap
    m = mmap.mmap(fd, w.size)
    writes, reads, copies = [], [], []
    dst = np.empty(BATCH << 20, dtype=np.float32)
    src = batch[0].numpy().reshape(-1)
    for _ in range(9):
        w.reset()
        t0 = time.perf_counter()
        n = w.write(batch)
        t1 = time.perf_counter()
        got, lease = _pybatch.read(m, n)
        float(got[0][0, 0])
        t2 = time.perf_counter()
        np.copyto(dst, src)
        t3 = time.perf_counter()
        writes.append(t1 - t0)
        reads.append(t2 - t1)
        copies.append(t3 - t2)
        del got, lease
    os.close(fd)
    mb = batch[0].numel() * 4 / 1e6
    wm, rm, cm = (statistics.median(v) * 1e3 for v in (writes, reads, copies))
    print(f"transport of a {mb:.0f} MB batch (a tensor the user's collate_fn made; the default "
          f"collate stacks into the buffer and skips the write's copy): write {wm:.2f} ms, "
          f"read {rm:.3f} ms; a plain copy of the same bytes {cm:.2f} ms: write/copy "
          f"{wm / cm:.2f}x")


def main():
    with tempfile.TemporaryDirectory(prefix="sp-pyds-") as tmp:
        prepare_photos(tmp)
        for which in ("photos", "arrays"):
            sp, tt, ratios = [], [], []
            for _ in range(args.pairs):
                a, b = run("seedpipe", which, tmp), run("torch", which, tmp)
                sp.append(a)
                tt.append(b)
                ratios.append(a / b)
            print(f"{which}: seedpipe {statistics.median(sp):.1f} images/s, torch "
                  f"{statistics.median(tt):.1f} images/s, seedpipe/torch median of pairs "
                  f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max "
                  f"{max(ratios):.2f}; {args.workers} workers, {args.pairs} pairs)", flush=True)
        # the cache by seed: an epoch computed without a cache, a cold one
        # (computed and written) and a warm one (read back by the workers,
        # no __getitem__), each a whole process
        plain, colds, warms = [], [], []
        for k in range(3):
            cache = os.path.join(tmp, f"cache{k}")
            plain.append(run("seedpipe", "photos", tmp))
            cold, cd = run(f"cache={cache}", "photos", tmp)
            warm, wd = run(f"cache={cache}", "photos", tmp)
            if cd != wd:
                raise SystemExit(f"the warm epoch's batches differ from the cold one's ({cd} vs {wd})")
            colds.append(cold)
            warms.append(warm)
        print(f"photos through cache=DIR: computed (no cache) {statistics.median(plain):.1f} "
              f"images/s, cold {statistics.median(colds):.1f}, warm "
              f"{statistics.median(warms):.1f}: warm/computed "
              f"{statistics.median(w / p for w, p in zip(warms, plain)):.1f}x, warm/cold "
              f"{statistics.median(w / c for w, c in zip(warms, colds)):.1f}x (3 triples, equal "
              "batches)", flush=True)
    transport()


main()

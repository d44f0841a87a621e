#!/usr/bin/env python3
"""train_torch.py - train a small PyTorch CNN on batches from `seedpipe serve`.

Makes the built-in shapes dataset, starts `seedpipe serve` (a pool of worker
processes behind a shared-memory region), attaches with seedpipe.attach()
and trains a tiny CNN on the zero-copy batches (seedpipe.torch.to_tensors).
Does it twice, with a different number of loader workers, and prints that
the two loss curves are identical: the batches are the same bytes whatever
the worker count, and torch runs deterministically on one CPU thread.

    examples/train_torch.py [--workers 1,3] [--epochs 8] [--batch-size 32] [--count 480] [--lr 0.003]

Needs torch (e.g. Debian python3-torch); without it, prints a SKIP line and
exits 0. Finds seedpipe from bindings/python when it is not installed, and the
`seedpipe` tool via $SEEDPIPE_BIN or next to the library.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("SKIP: torch is not installed (pip install torch, or apt-get install python3-torch)")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import seedpipe
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import seedpipe
from seedpipe.torch import to_tensors


def model(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 12 * 12, classes))


def train_from_service(binary, data, workers, args, name):
    """Serve the stream with `workers` processes and train on it; the loss curve."""
    serve = subprocess.Popen(
        [binary, "serve", "--name", name, data, "--pipeline", "shapes-train", "--seed",
         str(args.seed), "--batch-size", str(args.batch_size), "--epochs", str(args.epochs),
         "--workers", str(workers)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = serve.stdout.readline()
        if not ready.startswith("ready "):
            raise RuntimeError(f"seedpipe serve failed: {ready}{serve.stderr.read()}")
        torch.manual_seed(0)
        net = model(6)
        opt = torch.optim.Adam(net.parameters(), lr=args.lr)
        lossf = nn.CrossEntropyLoss()
        losses = []
        with seedpipe.attach(name) as client:
            for images, labels in client.stream():      # views on the service's memory
                x, y = to_tensors(images, labels)       # zero copy
                x = x.float().div_(255)                 # uint8 NCHW -> float (a copy)
                y = y.long()
                opt.zero_grad()
                loss = lossf(net(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        serve.wait(timeout=30)
        return losses
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="1,3")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--count", type=int, default=480)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--lr", type=float, default=0.003)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    binary = seedpipe.find_binary()
    with tempfile.TemporaryDirectory(prefix="seedpipe-train-torch-") as tmp:
        data = os.path.join(tmp, "shapes")
        subprocess.run([binary, "make-shapes", data, "--count", str(args.count), "--size", "40",
                        "--seed", "1"], check=True, capture_output=True)
        curves = {}
        for k, w in enumerate(int(v) for v in args.workers.split(",")):
            name = f".sp-example-torch-{os.getpid()}-{k}"
            curves[w] = train_from_service(binary, data, w, args, name)
            c = curves[w]
            print(f"workers {w}: {len(c)} steps, loss {c[0]:.4f} -> {c[-1]:.4f}  "
                  f"[{', '.join(f'{v:.3f}' for v in c[::max(1, len(c) // 8)])}]")
    ws = list(curves)
    same = all(curves[w] == curves[ws[0]] for w in ws[1:])
    if same:
        print(f"identical loss curves for {' and '.join(map(str, ws))} workers "
              f"({len(curves[ws[0]])} steps, bit for bit)")
        return 0
    print("DIFFERENT loss curves: " + ", ".join(f"{w} workers: {curves[w][:3]}..." for w in ws))
    return 1


if __name__ == "__main__":
    sys.exit(main())

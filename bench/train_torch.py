#!/usr/bin/env python3
"""train_torch.py - PyTorch peer for the training core's step time.

The same model as seedpipe's (conv3x3 16 + ReLU + maxpool, conv3x3 32 + ReLU
+ maxpool, linear; softmax cross-entropy; SGD momentum 0.9, weight decay
5e-4) on random float32 NCHW batches, timed per step on the CPU with a fixed
thread count (and on CUDA if available and --cuda is given). Prints
"torch cpu step time X ms" (the median; the mean follows, as `seedpipe
train` reports a mean) per thread count. Exits 0 with a SKIP line if torch
is missing.

    bench/train_torch.py [--size 32] [--channels 3] [--classes 6] [--batch 64]
                         [--threads N[,N...]] [--steps 30] [--cuda] [--omp-passive]

--omp-passive sets OMP_WAIT_POLICY=PASSIVE before torch starts OpenMP: on a
machine whose cores are busy with other work, OpenMP's default spin-waiting
makes 2+ threads many times slower than 1 (measured here: 242 ms vs 29 ms
per step at 2 threads with one core taken by another process).
"""
import argparse
import os
import time

torch = nn = None


def model(c, size, classes):
    return nn.Sequential(
        nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (size // 4) * (size // 4), classes))


def bench(dev, args):
    torch.manual_seed(0)
    m = model(args.channels, args.size, args.classes).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
    x = torch.rand(args.batch, args.channels, args.size, args.size, device=dev)
    y = torch.randint(0, args.classes, (args.batch,), device=dev)
    lossf = nn.CrossEntropyLoss()
    times = []
    for i in range(args.steps + 3):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = lossf(m(x), y)
        loss.backward()
        opt.step()
        if dev == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[len(times) // 2], 1e3 * sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="1", help="thread count(s), comma-separated")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--omp-passive", action="store_true",
                    help="OMP_WAIT_POLICY=PASSIVE (no spin-waiting; for a loaded machine)")
    args = ap.parse_args()
    try:
        threads = [int(t) for t in str(args.threads).split(",") if t.strip()]
    except ValueError:
        ap.error(f"--threads: expected N or N,N,..., got {args.threads!r}")
    if args.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"      # read when OpenMP starts
    global torch, nn
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("SKIP: torch not installed")
        return
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"# load average {load} on {os.cpu_count()} cpus; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'default')}")
    for t in threads:
        torch.set_num_threads(t)
        med, mean = bench("cpu", args)
        print(f"torch {torch.__version__} cpu step time {med:.2f} ms "
              f"(median, mean {mean:.2f} ms; batch {args.batch}, {args.size}px, {t} threads)")
    if args.cuda and torch.cuda.is_available():
        med, mean = bench("cuda", args)
        print(f"torch cuda step time {med:.2f} ms (median, mean {mean:.2f} ms)")


if __name__ == "__main__":
    main()

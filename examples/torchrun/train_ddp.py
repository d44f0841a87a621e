#!/usr/bin/env python3
"""train_ddp.py - torch DistributedDataParallel (gloo, CPU) on seedpipe batches.

Every rank opens the same dataset with seedpipe.Loader(rank="auto",
world="auto") and a fixed GLOBAL batch (--global-batch, default 48): each
rank gets its slice of global_batch / world samples of the same global
batch, so the union over the ranks is the same bytes for any world size.
The model (conv3x3 16 + ReLU + maxpool, conv3x3 32 + ReLU + maxpool,
linear; bench/train_torch.py's) starts from torch.manual_seed(--seed) on
every world size; the loss is each rank's mean over its slice, and DDP
averages the gradients over the ranks, which is the gradient of the mean
over the global batch (the slices are equal: drop_last=True).

    # one process, no torchrun, no process group:
    examples/torchrun/train_ddp.py DATA --steps 20 --out w1.json
    # two processes:
    python3 -m torch.distributed.run --nproc_per_node 2 \\
        examples/torchrun/train_ddp.py DATA --steps 20 --out w2.json --compare w1.json

DATA is any dataset seedpipe opens, e.g. `seedpipe make-shapes DATA --count
480 --size 32`. Rank 0 prints the global mean loss of every step and, with
--out, writes a JSON file: the losses and, per step, the SHA-256 of the
global batch it trained on (the ranks' images and labels gathered in rank
order). --compare REF.json (a run with another world size) prints whether
the batches were the same bytes and the worst relative loss difference.
The rank and world come from the environment through
seedpipe.distributed_env(): torchrun's RANK/WORLD_SIZE, or OpenMPI's, MPICH's
or srun's variables (then MASTER_ADDR and MASTER_PORT must be set for
gloo's rendezvous). See README.md in this folder for why the losses agree
only to rounding while the batches are identical.
"""
import argparse
import hashlib
import json
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (pip install torch numpy, or apt-get install "
          "python3-torch)")
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import seedpipe
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import seedpipe
from seedpipe.torch import to_tensors

SPEC = "random_resized_crop size=32 scale=0.5,1 | hflip | normalize mean=0.5 std=0.25"


def make_model(c, h, w, classes):
    return nn.Sequential(
        nn.Conv2d(c, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (h // 4) * (w // 4), classes))


def count_classes(data):
    """Class directories of an ImageFolder-style dataset (make-shapes makes one)."""
    return len([d for d in os.listdir(data)
                if not d.startswith(".") and os.path.isdir(os.path.join(data, d))])


def gather_rank_order(t, world):
    """The ranks' tensors concatenated in rank order (the global batch), and
    the gathered parts, which the caller keeps referenced (see main)."""
    if world == 1:
        return t, []
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts), parts


def labels_t(labels):
    """int32 labels as a tensor (no copy), for gathering the exact bytes."""
    return torch.from_numpy(np.ascontiguousarray(labels))


def compare(ref_path, out):
    with open(ref_path) as f:
        ref = json.load(f)
    n = min(len(ref["losses"]), len(out["losses"]))
    same_batches = ref["batch_sha256"][:n] == out["batch_sha256"][:n]
    worst, at, exact = 0.0, 0, 0
    for i in range(n):
        a, b = ref["losses"][i], out["losses"][i]
        rel = abs(a - b) / abs(a) if a else abs(b)
        exact += a == b
        if rel > worst:
            worst, at = rel, i
    print(f"vs {ref_path} (world {ref['world']}): global batches "
          f"{'identical bytes' if same_batches else 'DIFFERENT'} at all {n} steps; losses: "
          f"worst relative difference {worst:.2e} (step {at}), bit-identical at {exact} of {n} "
          "steps")
    return same_batches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", help="dataset directory (e.g. made by `seedpipe make-shapes`)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--global-batch", type=int, default=48,
                    help="samples per step over all ranks (a multiple of the world size)")
    ap.add_argument("--seed", type=int, default=0, help="model init and the data stream")
    ap.add_argument("--lr", type=float, default=0.01,
                    help="SGD learning rate (momentum 0.9, weight decay 5e-4)")
    ap.add_argument("--workers", type=int, default=0, help="seedpipe worker processes per rank")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--out", help="write losses and batch digests (JSON) here (rank 0)")
    ap.add_argument("--compare", metavar="REF.json",
                    help="compare with another run's --out (rank 0)")
    args = ap.parse_args()

    rank, world, source = seedpipe.distributed_env()
    if args.global_batch % world:
        ap.error(f"--global-batch {args.global_batch} is not a multiple of the world size {world}")
    torch.set_num_threads(args.threads)
    if world > 1:
        if source != "RANK/WORLD_SIZE" and not ("MASTER_ADDR" in os.environ and
                                                "MASTER_PORT" in os.environ):
            sys.exit(f"rank {rank} of {world} from {source}: set MASTER_ADDR and MASTER_PORT "
                     "(gloo's rendezvous), or start with torchrun")
        dist.init_process_group("gloo", rank=rank, world_size=world)
        assert (dist.get_rank(), dist.get_world_size()) == (rank, world)

    loader = seedpipe.Loader(args.data, pipeline=SPEC, seed=args.seed,
                             batch_size=args.global_batch, rank="auto", world="auto",
                             dtype="float32", drop_last=True, workers=args.workers)
    c, h, w = loader.sample_shape
    torch.manual_seed(args.seed)           # the same initial weights for every world size
    model = make_model(c, h, w, count_classes(args.data))
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)

    losses, digests, in_flight = [], [], None
    t0 = time.perf_counter()
    with loader:
        for step, (images, labels) in enumerate(loader.stream()):
            if step == args.steps:
                break
            x, y = to_tensors(images, labels, labels_dtype=torch.long)   # x: zero copy
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)    # mean over this rank's slice
            loss.backward()                                  # DDP: gradients averaged over ranks
            opt.step()
            # the global mean loss: the ranks' slice means averaged (equal slices)
            g = loss.detach().clone()
            if world > 1:
                dist.all_reduce(g)
                g /= world
            if len(y) != args.global_batch // world:
                raise RuntimeError(f"rank {rank}: {len(y)} samples, expected "
                                   f"{args.global_batch // world}")
            yl = labels_t(labels)
            gx, px = gather_rank_order(x, world)
            gy, py = gather_rank_order(yl, world)
            in_flight = (g, x, yl, px, py)   # the last collectives' tensors: see the end
            if rank == 0:
                losses.append(float(g))
                digests.append(hashlib.sha256(gx.numpy().tobytes() + gy.numpy().tobytes())
                               .hexdigest())
                print(f"step {step:3d} loss {float(g):.7f}", flush=True)
    secs = time.perf_counter() - t0

    ok = True
    if rank == 0:
        print(f"world {world} ({source}): {len(losses)} steps of {args.global_batch} samples, "
              f"{args.global_batch // world} per rank, {secs:.2f} s")
        out = {"world": world, "source": source, "global_batch": args.global_batch,
               "per_rank": args.global_batch // world, "seed": args.seed, "lr": args.lr,
               "steps": len(losses), "losses": losses, "batch_sha256": digests,
               "torch": torch.__version__, "seedpipe": seedpipe.__version__}
        if args.out:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f, indent=1)
            os.replace(tmp, args.out)
        if args.compare:
            ok = compare(args.compare, out)
    if world > 1:
        # Teardown order (torch 1.13 gloo): the DDP reducer holds the last
        # reference to the process group, whose destructor joins gloo's
        # worker threads while holding the GIL. A worker still holding the
        # last reference to a tensor whose Python object is gone needs the
        # GIL to free it: a deadlock. So the group goes first, while the
        # tensors of the last collectives are still referenced here.
        dist.destroy_process_group()
        del net
        del in_flight
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""examples/custom_dataset/train.py - your own Dataset (random transforms,
`random` and `np.random` draws, a dict of targets) through seedpipe's
DataLoader, one process or under torchrun, with a tiny model:

    PYTHONPATH=bindings/python SEEDPIPE_LIB=build/libseedpipe.so \\
      /usr/bin/python3 examples/custom_dataset/train.py --steps 10 --out run1.pt
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
      examples/custom_dataset/train.py --steps 10 --out run2.pt

The only seedpipe line is the DataLoader's import. Under torchrun each rank
takes its DistributedSampler's slice of every global batch (global batch
--global-batch, the same for any world size) and the rank slices,
concatenated in rank order, are the single-process global batch byte for
byte, at any --workers: each rank writes its batches to OUT.rankR so a test
can check it (bindings/python/tests/test_python_dataset_ddp.py).
"""
import argparse
import os
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DistributedSampler

from seedpipe.torch import DataLoader          # was: from torch.utils.data import DataLoader


class Noisy(Dataset):
    """A synthetic image-like dataset whose __getitem__ augments at random."""

    def __init__(self, n=64):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)                  # the sample's content: fixed
        x = torch.rand(3, 16, 16, generator=g)
        top, left = random.randint(0, 4), random.randint(0, 4)   # a random crop
        x = x[:, top:top + 12, left:left + 12]
        if torch.rand(()) < 0.5:                              # a random flip
            x = x.flip(2)
        x = x + 0.05 * torch.randn_like(x)                    # noise from torch's generator
        return x, {"label": i % 4, "scale": np.float32(np.random.uniform(0.5, 2.0))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    ds = Noisy()
    if world > 1:
        dist.init_process_group("gloo")
        sampler = DistributedSampler(ds, seed=args.seed)      # shuffles, as in torch
        dl = DataLoader(ds, batch_size=args.global_batch // world, sampler=sampler,
                        num_workers=args.workers)
    else:
        dl = DataLoader(ds, batch_size=args.global_batch, shuffle=True, seed=args.seed,
                        num_workers=args.workers)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 12 * 12, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen, step, epoch = [], 0, 0
    while step < args.steps:
        dl.set_epoch(epoch)
        for x, target in dl:
            loss = torch.nn.functional.cross_entropy(model(x * target["scale"][:, None, None,
                                                                               None]),
                                                     target["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.append((x.clone(), target["label"].clone(), target["scale"].clone()))
            step += 1
            if step == args.steps:
                break
        epoch += 1
    torch.save(seen, f"{args.out}.rank{rank}")
    print(f"rank {rank} of {world}: {step} steps, backend {dl.backend}, last loss "
          f"{float(loss):.4f}")
    dl.close()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

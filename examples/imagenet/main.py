#!/usr/bin/env python3
"""main.py - ImageNet-style training and validation with torchvision, in the
shape of pytorch/examples' imagenet/main.py, small enough for a CPU: a
train loader (RandomResizedCrop + flip + ToTensor + Normalize, shuffled),
a validation loader (Resize + CenterCrop, shuffle=False; under DDP
upstream's DistributedSampler(shuffle=False, drop_last=True) and a tail
loader over a Subset), DistributedSampler and DDP (gloo) when launched by
torchrun, pin_memory=True, set_epoch every epoch. The one seedpipe-specific
line is the DataLoader import.

    python3 examples/imagenet/main.py DATA --epochs 2             # one process
    torchrun --nproc_per_node 2 examples/imagenet/main.py DATA    # DDP, 2 processes

DATA holds train/ and val/ image folders (`seedpipe make-shapes` makes one).
--batch-size is the total over all processes (each gets batch-size / world),
as in imagenet/main.py. --record FILE writes what was trained and validated
on: the SHA-256 of every global train batch (the ranks' batches gathered in
rank order) and, per rank, the label and SHA-256 of every validation image.
"""
import argparse
import hashlib
import json
import os
import pickle

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DistributedSampler, Subset
from torchvision import datasets, transforms

from seedpipe.torch import DataLoader   # was: from torch.utils.data import DataLoader

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("data")
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--batch-size", type=int, default=16, help="total over all processes")
ap.add_argument("--workers", type=int, default=2)
ap.add_argument("--lr", type=float, default=0.05)
ap.add_argument("--image-size", type=int, default=24)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--record", help="write the batches' hashes here (JSON, rank 0)")
args = ap.parse_args()

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("gloo")
rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
torch.manual_seed(args.seed)
torch.set_num_threads(1)

normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
size = args.image_size
train_ds = datasets.ImageFolder(os.path.join(args.data, "train"), transforms.Compose([
    transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
    transforms.ToTensor(), normalize]))
val_ds = datasets.ImageFolder(os.path.join(args.data, "val"), transforms.Compose([
    transforms.Resize(size * 8 // 7), transforms.CenterCrop(size), transforms.ToTensor(),
    normalize]))
# the samplers' seed is --seed, as the one process's (torch.manual_seed above)
train_sampler = DistributedSampler(train_ds, seed=args.seed) if distributed else None
# upstream's validation sampler: no padding; the tail that does not divide
# among the ranks is validated by every rank afterwards (aux_val_loader)
val_sampler = (DistributedSampler(val_ds, shuffle=False, drop_last=True, seed=args.seed)
               if distributed else None)
train_loader = DataLoader(train_ds, batch_size=args.batch_size // world,
                          shuffle=(train_sampler is None), sampler=train_sampler,
                          num_workers=args.workers, pin_memory=True)
val_loader = DataLoader(val_ds, batch_size=args.batch_size // world, shuffle=False,
                        sampler=val_sampler, num_workers=args.workers, pin_memory=True)
aux_val_loader = None
if distributed and len(val_sampler) * world < len(val_ds):
    aux_val_loader = DataLoader(Subset(val_ds, range(len(val_sampler) * world, len(val_ds))),
                                batch_size=args.batch_size // world, shuffle=False,
                                num_workers=args.workers, pin_memory=True)

classes = len(train_ds.classes)
model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(32, classes))
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)

# gloo (torch 1.13): every tensor given to a collective is kept here until
# the end. A tensor whose last reference is a finished gloo work item is freed
# on gloo's own thread, which must take the GIL to do so; tearing DDP down
# (del model) joins that thread while holding the GIL: a deadlock, seen in
# about 1 run in 10 on a loaded machine. Kept tensors are never freed there.
keep = []
record = {"world": world, "train": [], "val": []}


def sha(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()


def gather(t):
    """This rank's tensor from every rank, in rank order (same shapes)."""
    if not distributed:
        return [t]
    out = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(out, t)
    keep.extend([t, *out])
    return out


def gather_object(obj):
    """dist.all_gather_object(), with its tensors kept (see keep)."""
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = gather(torch.tensor([data.numel()]))
    buf = torch.zeros(int(max(sizes)), dtype=torch.uint8)
    buf[:data.numel()] = data
    return [pickle.loads(o[:int(n)].numpy().tobytes()) for o, n in zip(gather(buf), sizes)]


def train(epoch):
    model.train()
    total = torch.zeros(2, dtype=torch.float64)
    for images, target in train_loader:
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += torch.tensor([loss.item() * len(target), len(target)], dtype=torch.float64)
        if args.record:
            record["train"].append(sha(torch.cat(gather(images)), torch.cat(gather(target))))
    if distributed:
        dist.all_reduce(total)
        keep.append(total)
    return float(total[0] / total[1])


def run_validate(loader, seen):
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for images, target in loader:
            correct += torch.tensor([(model(images).argmax(1) == target).sum().item(),
                                     len(target)], dtype=torch.float64)
            seen += [[int(t), sha(x)] for x, t in zip(images, target)]
    return correct


def validate():
    model.eval()
    seen = []
    correct = run_validate(val_loader, seen)
    if distributed:
        dist.all_reduce(correct)
        keep.append(correct)
    if aux_val_loader is not None:       # every rank: the samples the sampler dropped
        correct += run_validate(aux_val_loader, seen)
    if args.record:
        record["val"] = gather_object(seen) if distributed else [seen]
    return float(correct[0] / correct[1])


for epoch in range(args.epochs):
    if train_sampler is not None:
        train_sampler.set_epoch(epoch)
    loss = train(epoch)
    acc = validate()
    if rank == 0:
        print(f"epoch {epoch}: train loss {loss:.4f}, val acc@1 {acc:.3f} (world {world})",
              flush=True)

if rank == 0 and args.record:
    with open(args.record, "w") as f:
        json.dump(record, f)
if distributed:
    dist.barrier()
    dist.destroy_process_group()
    del model

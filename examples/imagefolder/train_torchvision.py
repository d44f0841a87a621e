#!/usr/bin/env python3
"""train_torchvision.py - a typical torchvision ImageFolder training script
(the starting point; train_seedpipe.py is the same script on seedpipe).

    examples/imagefolder/train_torchvision.py DATA_DIR [--epochs 2] [--batch-size 32]
"""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--workers", type=int, default=2)
args = ap.parse_args()

tf = transforms.Compose([
    transforms.RandomResizedCrop(32),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
])
dataset = datasets.ImageFolder(args.data, transform=tf)
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                    num_workers=args.workers)

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                      nn.Flatten(), nn.Linear(128, len(dataset.classes)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(args.epochs):
    total = 0.0
    for images, labels in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        total += loss.item() * len(labels)
    print(f"epoch {epoch}: loss {total / len(dataset):.4f}")

#!/usr/bin/env python3
"""examples/tokens/train.py - a token corpus packed by documents into a tiny
causal transformer, on the CPU, with a mid-run checkpoint and resume:

    PYTHONPATH=bindings/python SEEDPIPE_LIB=build/libseedpipe.so \\
      /usr/bin/python3 examples/tokens/train.py [--steps 40] [--out DIR]

1. Writes a synthetic corpus as Megatron's PREFIX.idx/.bin (the MMIDIDX
   format; seedpipe.tokens.write when this seedpipe has it, else the
   20 lines of numpy below): documents of 1..3*L tokens, each an arithmetic
   progression mod the vocabulary (start and stride drawn per document), so
   the next token is predictable from the two before it within a document
   and not at all across one.
2. Trains on seedpipe.Loader(prefix, seq_len=L, packing="docs"): windows of
   whole documents (a longer one in consecutive pieces) with segment_ids
   (1.., 0 = padding), position_ids (within each document) and labels
   (-100 where there is no next token of the same document). Attention is
   masked block-diagonally by segment_ids and causally, so no token sees
   another document; positions restart at each document.
3. At step --resume-at it saves the model, the optimiser and the loader's
   state_dict() (a few hundred bytes); after the run it builds a fresh
   loader and model, loads the three, replays the remaining steps and checks
   that the batches (every field) and the losses are the same: prints
   "resumed at step K: ... batches equal, losses equal" (or exits 1).
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

import seedpipe

FIELDS = ("tokens", "labels", "segment_ids", "position_ids")


def write_corpus(prefix, docs):
    """PREFIX.bin + PREFIX.idx, uint16 tokens, one sequence a document."""
    try:
        from seedpipe.tokens import write        # the library's writer, where present
    except ImportError:
        write = None
    if write is not None:
        write(prefix, docs, np.uint16)
        return prefix
    lens = np.array([len(d) for d in docs], dtype=np.int32)
    ptrs = np.zeros(len(docs), dtype=np.int64)
    ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64)) * 2
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(np.asarray(d, dtype=np.uint16).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
        f.write(lens.tobytes() + ptrs.tobytes() + np.arange(len(docs) + 1, dtype=np.int64).tobytes())
    return prefix


def synthetic_docs(n, L, vocab, seed):
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        m = int(rng.integers(1, 3 * L + 1))
        a, s = int(rng.integers(1, vocab)), int(rng.integers(1, 4))
        docs.append(1 + (a + s * np.arange(m)) % (vocab - 1))   # tokens 1..vocab-1
    return docs


class TinyCausalLM(torch.nn.Module):
    """Token + position embeddings, one single-head attention block with a
    block-diagonal causal mask, an MLP, a linear head. x: (n, L) -> (n, L, V)."""

    def __init__(self, vocab, L, d=48):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(L, d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))
        self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tokens, position_ids, segment_ids):
        n, L = tokens.shape
        h = self.tok(tokens) + self.pos(position_ids)                  # (n, L, d)
        seg = segment_ids
        causal = torch.ones(L, L, dtype=torch.bool).tril()            # j <= i
        allowed = (seg[:, :, None] == seg[:, None, :]) & causal       # (n, L, L)
        allowed |= torch.eye(L, dtype=torch.bool)                     # padding sees itself
        q, k, v = self.qkv(self.n1(h)).chunk(3, dim=-1)
        att = (q @ k.transpose(1, 2)) / q.shape[-1] ** 0.5            # (n, L, L)
        att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
        h = h + self.proj(att @ v)
        h = h + self.mlp(self.n2(h))
        return self.head(h)


def as_tensors(batch):
    """The packing's fields as int64 tensors (copies: the loader's arrays are
    views of a ring slot that the next batch reuses)."""
    return {k: torch.from_numpy(np.array(batch[k], dtype=np.int64)) for k in FIELDS}


def step(model, opt, b):
    logits = model(b["tokens"], b["position_ids"], b["segment_ids"])
    loss = F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def make(args, prefix):
    torch.manual_seed(args.seed)
    model = TinyCausalLM(args.vocab, args.seq_len)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    ld = seedpipe.Loader(prefix, seq_len=args.seq_len, packing="docs", batch_size=args.batch_size,
                         workers=args.workers, seed=args.seed, epochs=args.epochs, dtype="int32")
    return model, opt, ld


def run(model, opt, ld, steps, on_step=None):
    """`steps` optimiser steps over the loader (epoch after epoch); returns
    the batches (as tensors) and the losses."""
    got, losses = [], []
    while len(got) < steps:
        for batch in ld:
            b = as_tensors(batch)
            losses.append(step(model, opt, b))
            got.append(b)
            if on_step:
                on_step(len(got), b, losses[-1])
            if len(got) == steps:
                break
    return got, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--resume-at", type=int, default=None, help="default: steps // 2")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for the corpus and checkpoint (default: a temp dir)")
    args = ap.parse_args()
    k = args.steps // 2 if args.resume_at is None else args.resume_at
    if not 0 < k < args.steps:
        sys.exit("--resume-at must be in 1..steps-1")
    torch.set_num_threads(1)
    out = args.out or tempfile.mkdtemp(prefix="seedpipe-tokens-")
    os.makedirs(out, exist_ok=True)
    prefix = write_corpus(os.path.join(out, "corpus"),
                          synthetic_docs(args.docs, args.seq_len, args.vocab, args.seed))
    ckpt = os.path.join(out, "ckpt.pt")
    t0 = time.perf_counter()

    model, opt, ld = make(args, prefix)
    print(f"corpus {prefix}: {args.docs} documents; {len(ld)} batches an epoch of "
          f"{args.batch_size} windows of {args.seq_len} tokens (packing docs)")

    def log(i, b, loss):
        if i == 1 or i % 10 == 0 or i == args.steps:
            pad = float((b["segment_ids"] == 0).float().mean())
            print(f"step {i:3d}  loss {loss:.4f}  padding {pad:.3f}", flush=True)
        if i == k:      # the loader's state is the position after the last batch taken
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "loader": ld.state_dict()}, ckpt)
            print(f"step {i:3d}  saved {ckpt} (loader state: "
                  f"{len(json.dumps(ld.state_dict()))} bytes of JSON)", flush=True)

    batches, losses = run(model, opt, ld, args.steps, log)
    ld = None                   # the first run's workers exit
    if not all(np.isfinite(losses)):
        sys.exit("loss is not finite")

    model2, opt2, ld2 = make(args, prefix)
    c = torch.load(ckpt)
    model2.load_state_dict(c["model"])
    opt2.load_state_dict(c["opt"])
    ld2.load_state_dict(c["loader"])
    again, losses2 = run(model2, opt2, ld2, args.steps - k)
    same_b = all(torch.equal(x[f], y[f]) for x, y in zip(batches[k:], again) for f in FIELDS)
    same_l = losses[k:] == losses2
    print(f"resumed at step {k}: {args.steps - k} steps replayed, batches "
          f"{'equal' if same_b else 'DIFFER'}, losses {'equal' if same_l else 'DIFFER'} "
          f"(final loss {losses2[-1]:.4f}, {time.perf_counter() - t0:.1f} s)")
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    if not (same_b and same_l):
        sys.exit(1)


if __name__ == "__main__":
    main()

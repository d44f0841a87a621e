"""masks_ref.py - a plain Python reference for moving a mask through a
geometry log, written from docs/pipeline.md "Moving a mask" (not from the
C code): nearest-neighbour, one source pixel per output pixel.

A log is a list of steps (dicts): kind "axis" (in_w, in_h, out_w, out_h,
x0, y0, sx, sy), "hflip", "vflip" (in_w, in_h), "rotate" (in_w, in_h, c,
s: binary32 values), "affine" (in_w, in_h, th: the image's binary32 theta,
six values). Rotation and affine steps are torchvision's grid for F.rotate
/ F.affine with NEAREST computed by torch itself (grid_sample), so they are
checked against torch rather than against a second derivation.
"""
import math

import numpy as np


def nearest(d, n_in, n_out):
    """PyTorch's `nearest` source index: float32 scale in / out, floor of
    d * scale in float32, clamped to in - 1 (identity and d >> 1 when out
    equals in or 2 in)."""
    d = np.asarray(d, dtype=np.int64)
    if n_in == n_out:
        return d
    if n_out == 2 * n_in:
        return d >> 1
    scale = np.float32(n_in) / np.float32(n_out)
    s = np.floor(d.astype(np.float32) * scale).astype(np.int64)
    return np.minimum(s, n_in - 1)


def _axis(m, g, fill):
    ex = int(math.floor(g["out_w"] / g["sx"] + 0.5))
    ey = int(math.floor(g["out_h"] / g["sy"] + 0.5))
    xs = int(math.floor(g["x0"])) + nearest(np.arange(g["out_w"]), ex, g["out_w"])
    ys = int(math.floor(g["y0"])) + nearest(np.arange(g["out_h"]), ey, g["out_h"])
    out = np.full((g["out_h"], g["out_w"]), fill, dtype=np.uint8)
    okx = (xs >= 0) & (xs < g["in_w"])
    oky = (ys >= 0) & (ys < g["in_h"])
    sub = m[np.ix_(ys[oky], xs[okx])]
    out[np.ix_(np.nonzero(oky)[0], np.nonzero(okx)[0])] = sub
    return out


def _rotate(m, g, fill):
    c, s = np.float32(g["c"]), np.float32(g["s"])
    return _grid(m, [c, s, 0.0, -s, c, 0.0], fill)


def _grid(m, th, fill):
    """torchvision's _gen_affine_grid for theta th (binary32), then
    grid_sample nearest with a ones channel marking what is inside."""
    import torch
    import torch.nn.functional as F
    h, w = m.shape
    theta = torch.tensor([[th[0:3], th[3:6]]], dtype=torch.float32)
    base = torch.empty(1, h, w, 3)
    base[..., 0].copy_(torch.linspace(-w * 0.5 + 0.5, w * 0.5 - 0.5, steps=w))
    base[..., 1].copy_(torch.linspace(-h * 0.5 + 0.5, h * 0.5 - 0.5, steps=h).unsqueeze_(-1))
    base[..., 2].fill_(1)
    rt = theta.transpose(1, 2) / torch.tensor([0.5 * w, 0.5 * h])
    grid = base.view(1, h * w, 3).bmm(rt).view(1, h, w, 2)
    img = torch.from_numpy(m.astype(np.float32))[None, None]
    ones = torch.ones_like(img)
    out = F.grid_sample(torch.cat([img, ones], 1), grid, mode="nearest", padding_mode="zeros",
                        align_corners=False)
    v, inside = out[0, 0].numpy(), out[0, 1].numpy()
    v = np.where(inside < 0.5, np.float32(fill), v)
    return v.astype(np.uint8)


def warp(mask, steps, fill=0):
    m = np.ascontiguousarray(mask, dtype=np.uint8)
    for g in steps:
        if g["kind"] == "axis":
            m = _axis(m, g, fill)
        elif g["kind"] == "hflip":
            m = m[:, ::-1].copy()
        elif g["kind"] == "vflip":
            m = m[::-1, :].copy()
        elif g["kind"] == "affine":
            m = _grid(m, [np.float32(v) for v in g["th"]], fill)
        else:
            m = _rotate(m, g, fill)
    return m

"""tv2_targets_child.py - the torchvision v2 side of test_targets_tv2.py,
run by the venv's python (tv2_venv.py): torch 2.15, torchvision 0.29.

    python tv2_targets_child.py CASES.json MASKS.npz OUT.npz

Each case is a source image size, its boxes (xyxy), keypoints (n x K x
3), and the geometric ops seedpipe applied to the sample with the
parameters it drew (read from explain by the parent), in torchvision v2's
functional terms. For each case this applies torchvision.transforms.v2
.functional to tv_tensors.BoundingBoxes (float64: torch's default
dtype float64 too, so that resize's ratio is a double; float32: as
torchvision runs; clamping "soft", the default, and None), tv_tensors.KeyPoints (float64) and
tv_tensors.Mask (uint8), and writes, per case c:

  c_b64, c_b32   boxes, clamped after every op (torchvision's default)
  c_w64          boxes, never clamped (clamping_mode=None) after the source clamp
  c_k64          keypoints (n x K x 2), float64, each flip's W - 1 - x made W - x
  c_kin          each keypoint inside the canvas at the source and after every op
  c_empty        the clamped box was degenerate (x1 <= x0 or y1 <= y0) after some op
  c_within       RandomIoUCrop's is_within_crop_area (1 where no IoU crop ran)
  c_sane         SanitizeBoundingBoxes' mask (min_size=0, min_area=A) of c_b64 after
                 ClampBoundingBoxes
  c_sane32       SanitizeBoundingBoxes' mask of c_b32 as it is (no ClampBoundingBoxes)
  c_sanez        the same of the boxes RandomIoUCrop gives (centred outside: zeroed)
  c_m            the masks (n x H' x W'), when the case has masks
"""
import json
import sys

import numpy as np
import torch
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F


def _apply(x, op):
    name, p = op[0], op[1:]
    if name == "resized_crop":
        top, left, h, w, oh, ow = p
        return F.resized_crop(x, top, left, h, w, size=[oh, ow])
    if name == "resize":
        return F.resize(x, size=list(p))
    if name == "center_crop":
        return F.center_crop(x, output_size=list(p))
    if name == "pad":
        return F.pad(x, padding=list(p))
    if name in ("crop", "iou_crop"):
        return F.crop(x, *p)
    if name == "hflip":
        return F.horizontal_flip(x)
    if name == "vflip":
        return F.vertical_flip(x)
    if name == "rotate":
        return F.rotate(x, p[0])
    if name == "affine":
        angle, tx, ty, scale, shx, shy = p
        return F.affine(x, angle=angle, translate=[tx, ty], scale=scale, shear=[shx, shy])
    raise ValueError("unknown op " + name)


def _degenerate(b):
    return (b[:, 2] <= b[:, 0]) | (b[:, 3] <= b[:, 1])


def run_case(c, masks):
    H, W = c["H"], c["W"]
    n, K = len(c["boxes"]), c["K"]
    src = torch.tensor(c["boxes"], dtype=torch.float64).reshape(n, 4)
    # seedpipe clips the source boxes to the image
    src = F.clamp_bounding_boxes(src, format="XYXY", canvas_size=(H, W), clamping_mode="soft")
    out = {}
    b64 = tv_tensors.BoundingBoxes(src, format="XYXY", canvas_size=(H, W))
    b32 = tv_tensors.BoundingBoxes(src.float(), format="XYXY", canvas_size=(H, W))
    w64 = tv_tensors.BoundingBoxes(src, format="XYXY", canvas_size=(H, W), clamping_mode=None)
    z64 = b64.clone()     # RandomIoUCrop's way: boxes centred outside its crop zeroed
    kp = torch.tensor(c["kps"], dtype=torch.float64).reshape(n * K, 3)
    k64 = tv_tensors.KeyPoints(kp[:, :2], canvas_size=(H, W))
    kin = np.ones(n * K, bool)
    empty = _degenerate(b64).numpy().copy()
    within = np.ones(n, bool)
    m = tv_tensors.Mask(torch.from_numpy(masks)) if masks is not None else None

    def inside(k):
        h, w = k.canvas_size
        x, y = k[:, 0].numpy(), k[:, 1].numpy()
        return (x >= 0) & (x <= w) & (y >= 0) & (y <= h)

    kin &= inside(k64)
    for op in c["ops"]:
        if op[0] == "iou_crop":   # RandomIoUCrop.make_params: centres of the boxes it is given
            top, left, h, w = op[1:]
            cx = 0.5 * (b64[:, 0] + b64[:, 2])
            cy = 0.5 * (b64[:, 1] + b64[:, 3])
            inside_crop = (left < cx) & (cx < left + w) & (top < cy) & (cy < top + h)
            within &= inside_crop.numpy()
        torch.set_default_dtype(torch.float64)   # resize's ratios: torch.tensor(floats)
        b64, w64, z64, k64 = (_apply(t, op) for t in (b64, w64, z64, k64))
        if op[0] in ("hflip", "vflip"):
            # torchvision flips a KeyPoint to W - 1 - x (pixel indices), its boxes to
            # W - x; seedpipe flips both to W - x: the mapping is one pixel
            k64[:, 0 if op[0] == "hflip" else 1] += 1.0
        torch.set_default_dtype(torch.float32)
        b32 = _apply(b32, op)
        if op[0] == "iou_crop":
            z64[~inside_crop] = 0
        if m is not None:
            m = _apply(m, op)
        empty |= _degenerate(b64).numpy()
        kin &= inside(k64)
    # resize does not clamp (its boxes may end 1e-14 px, in float32 1e-6 px, past the
    # canvas, which SanitizeBoundingBoxes' canvas check refuses): ClampBoundingBoxes first
    sane = F.sanitize_bounding_boxes(F.clamp_bounding_boxes(b64), min_size=0.0,
                                     min_area=c["min_area"])[1].numpy()
    out["sanez"] = F.sanitize_bounding_boxes(F.clamp_bounding_boxes(z64), min_size=0.0,
                                             min_area=c["min_area"])[1].numpy()
    out["sane32"] = F.sanitize_bounding_boxes(b32, min_size=0.0, min_area=c["min_area"])[1].numpy()
    out["b64"], out["b32"], out["w64"] = b64.numpy(), b32.numpy(), w64.numpy()
    out["k64"] = k64.numpy().reshape(n, K, 2)
    out["kin"] = kin.reshape(n, K)
    out["empty"], out["within"], out["sane"] = empty, within, sane
    out["canvas"] = np.array(b64.canvas_size)
    if m is not None:
        out["m"] = m.numpy()
    return out


def main():
    cases = json.load(open(sys.argv[1]))
    masks = np.load(sys.argv[2])
    res = {}
    for ci, c in enumerate(cases):
        key = f"{ci}_src"
        for k, v in run_case(c, masks[key] if key in masks.files else None).items():
            res[f"{ci}_{k}"] = v
    np.savez(sys.argv[3], **res)
    print(torch.__version__, __import__("torchvision").__version__, len(cases), "cases")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

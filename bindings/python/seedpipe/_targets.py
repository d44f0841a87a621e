"""_targets.py - a detection batch's fields (docs/targets.md).

A Loader given annotations= (a COCO-style instances JSON beside the image
folder) over a pipeline that ends with a `targets` op writes, per sample,
the image, zero padding to a multiple of 8 bytes, then the target fields
(include/seedpipe/targets.h, "the sample record"):

    boxes      (N, 4) float32   xyxy in output pixels, kept boxes first
    keypoints  (N, K, 3) float32 (x, y, visibility), when K > 0
    labels     (N,) int32       category ids as the file gives them
    counts     (4,) int32       kept, dropped empty, dropped min_area,
                                dropped min_visibility

    masks      (N, H, W) uint8      with masks=instance: the kept boxes'
                                masks at the output size H x W
    semantic   (H, W) uint8         with masks=semantic: the label map

N = max_boxes, K = keypoints of the targets op; rows past the kept boxes
are zero. This module reads (N, K) from the canonical spec and cuts a
batch's bytes into named views (no copy).
"""
import re

import numpy as np


_TAIL = (r"targets max_boxes=(\d+) clip=\d min_area=\S+ min_visibility=\S+ "
         r"keypoints=(\d+)(?: masks=(instance|semantic) mask_fill=\d+)?(?: protect=\d+)?(?: flip_pairs=\S+)?$")


def parse(canonical: str):
    """(max_boxes, keypoints, masks) of a canonical spec ending with a
    targets op (masks: "none", "instance" or "semantic"), or None."""
    m = re.search(r"\| " + _TAIL, canonical or "") or re.match(_TAIL, canonical or "")
    return (int(m.group(1)), int(m.group(2)), m.group(3) or "none") if m else None


def record_bytes(image_bytes: int, n: int, k: int, masks: str = "none", hw=(0, 0)):
    """(offset of the target fields, bytes of a whole sample record); hw:
    the output (H, W), for masks."""
    span = (image_bytes + 7) & ~7
    t = (4 * (4 * n + 3 * n * k + n + 4) + 7) & ~7
    if masks == "instance":
        t += (n * hw[0] * hw[1] + 7) & ~7
    elif masks == "semantic":
        t += (hw[0] * hw[1] + 7) & ~7
    return span, span + t


def fields(raw, image_bytes: int, sshape: tuple, typestr: str, n: int, k: int,
           masks: str = "none", hw=(0, 0)) -> dict:
    """The named views of raw, a (count, record_bytes) uint8 array."""
    count = raw.shape[0]
    span, _ = record_bytes(image_bytes, n, k)
    image = raw[:, :image_bytes].view(np.dtype(typestr)).reshape((count,) + sshape)
    at = span
    boxes = raw[:, at:at + 16 * n].view("<f4").reshape(count, n, 4)
    at += 16 * n
    out = {"image": image, "boxes": boxes}
    if k:
        out["keypoints"] = raw[:, at:at + 12 * n * k].view("<f4").reshape(count, n, k, 3)
        at += 12 * n * k
    out["labels"] = raw[:, at:at + 4 * n].view("<i4")
    at += 4 * n
    counts = raw[:, at:at + 16].view("<i4")
    out["num_boxes"] = counts[:, 0]
    out["dropped"] = counts[:, 1:4]   # empty, min_area, min_visibility
    at = span + ((4 * (4 * n + 3 * n * k + n + 4) + 7) & ~7)
    h, w = hw
    if masks == "instance":
        out["masks"] = raw[:, at:at + n * h * w].reshape(count, n, h, w)
    elif masks == "semantic":
        out["semantic"] = raw[:, at:at + h * w].reshape(count, h, w)
    return out

"""torchvision's CocoDetection, wrapped with wrap_dataset_for_transforms_v2
and given v2 transforms, on seedpipe's C path with targets (issue 41 item
4; docs/python.md "Detection: CocoDetection", docs/targets.md).

    ds = wrap_dataset_for_transforms_v2(
        CocoDetection(root, annFile, transforms=v2.Compose([...])),
        target_keys=("boxes", "labels", "masks", "image_id"))
    loader = seedpipe.torch.DataLoader(ds, batch_size=8, num_workers=4,
                                       collate_fn=lambda b: tuple(zip(*b)))
    for images, targets in loader: ...

What is read from the objects (nothing runs torchvision per sample):

- the dataset: the wrapper's CocoDetection (its type exactly; the wrapper
  may be inside torch Subsets, whose indices select from `ids`, each
  once), its `root`,
  its `ids` (the index order) and its `coco` object's images and
  annotations. CocoDetection keeps no annotation file name, so the
  annotations it holds are written once as a COCO JSON in seedpipe's cache
  (`<cache>/tv-coco/<BLAKE2b-128 of the bytes>.json`, the cache as in
  _tvdatasets.py), with `iscrowd` left out, so that crowd annotations are
  boxes as the wrapper yields them, and `segmentation` only when masks
  are asked for. Samples are `root/file_name` in `ids` order.
- the joint transforms (`transforms=`, or `transform=` when it moves no
  pixel) mapped op by op to the pipeline (v2_pipeline below); anything
  else is refused by name.

A batch is the user's collate_fn (recognised: one that returns
`tuple(zip(*batch))` or `list(zip(*batch))`, checked on a probe batch of
sentinels) applied to the samples as the wrapper + transforms give them:
(image, target), image a tv_tensors.Image, target a dict with `image_id`
(int), `boxes` (tv_tensors.BoundingBoxes XYXY float32, canvas_size the
output size), `masks` (tv_tensors.Mask uint8 (N, H, W)) and `labels`
(int64), as target_keys asks, in the wrapper's key order; an image without
any annotation in the file gets `{"image_id": id}` only, as the wrapper
gives it. ToPureTensor() last gives plain tensors.
"""
from __future__ import annotations

import hashlib
import json
import numbers
import os
import warnings

import numpy as np

_KEYS = ("image_id", "boxes", "masks", "labels")   # the wrapper's key order
_GEOMETRIC = ("Resize", "RandomResizedCrop", "CenterCrop", "RandomZoomOut", "RandomIoUCrop",
              "RandomHorizontalFlip", "RandomVerticalFlip")
_SIZE_CHANGING = ("Resize", "RandomResizedCrop", "CenterCrop", "RandomZoomOut",
                  "RandomIoUCrop")
_NO_OP = ("ClampBoundingBoxes", "ConvertBoundingBoxFormat", "ToPureTensor", "Identity")
_warned_iou = [False]


def _refuse(what, why):
    raise ValueError(f"DataLoader: {what}: {why}")


def unwrap(ds):
    """(the v2 wrapper, its dataset indices in ds's index order or None)
    of a wrapped CocoDetection or a torch Subset (of a Subset...) of one;
    (None, None) for anything else."""
    chain = []
    while type(ds).__name__ == "Subset" and type(ds).__module__.startswith("torch.utils.data"):
        chain.append(ds)
        ds = ds.dataset
    if _wrapped_coco(ds) is None:
        return None, None
    idx = None
    for sub in reversed(chain):
        raw = sub.indices
        if hasattr(raw, "detach"):
            raw = raw.detach().cpu().numpy()
        a = np.asarray(raw)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            _refuse("dataset=Subset.indices", "integer indices, a flat sequence")
        a = a.astype(np.int64)
        n = len(ds) if idx is None else len(idx)
        if a.size and (a.min() < -n or a.max() >= n):
            _refuse("dataset=Subset.indices", f"an index out of range for {n} samples")
        a = np.where(a < 0, a + n, a)
        idx = a if idx is None else idx[a]
    return ds, idx


def coco_of(ds):
    """The CocoDetection inside a v2 wrapper (or a Subset of one), or None."""
    return _wrapped_coco(unwrap(ds)[0]) if ds is not None else None


def _wrapped_coco(ds):
    inner = getattr(ds, "__dict__", {}).get("_dataset")
    if inner is None or not any(c.__name__ == "VisionDatasetTVTensorWrapper" and
                                c.__module__.startswith("torchvision.")
                                for c in type(ds).__mro__):
        return None
    try:
        from torchvision.datasets import CocoDetection
    except ImportError:   # pragma: no cover
        return None
    return inner if type(inner) is CocoDetection else None


def is_detection_collate(fn):
    """Whether fn is the detection collate (tuple(zip(*b)) or
    list(zip(*b))): checked on a probe batch of two sentinel samples."""
    if fn is None or not callable(fn):
        return False
    a, b, c, d = object(), object(), object(), object()
    try:
        out = fn([(a, b), (c, d)])
    except Exception:   # noqa: BLE001 - any failure: not the detection collate
        return False
    return (isinstance(out, (tuple, list)) and len(out) == 2 and
            all(type(x) is tuple and len(x) == 2 for x in out) and
            out[0][0] is a and out[0][1] is c and out[1][0] is b and out[1][1] is d)


def _fill_of(t, kind):
    """v2's _get_fill(t._fill, kind) as an int or a triple; refused by name
    unless every value is a whole number in [0, 255]."""
    fd = getattr(t, "_fill", None) or {"others": 0}
    v = fd[kind] if kind in fd else (fd["others"] if "others" in fd else None)
    v = 0 if v is None else v
    seq = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(seq) not in (1, 3) or any(not isinstance(x, numbers.Number) or x != int(x) or
                                     not 0 <= x <= 255 for x in seq):
        _refuse(f"transforms={type(t).__name__}(fill={t.fill!r})", "seedpipe fills with "
                "whole numbers in [0, 255], one or three (the uint8 image's values)")
    return ",".join(str(int(x)) for x in seq)


def _flatten(t, where):
    name = type(t).__name__
    mod = type(t).__module__ or ""
    if name == "Compose" and mod.startswith("torchvision.transforms.v2"):
        out = []
        for x in t.transforms:
            out += _flatten(x, where)
        return out
    if not mod.startswith("torchvision.transforms.v2"):
        _refuse(f"{where}{name}", "a detection pipeline takes torchvision.transforms.v2 "
                "transforms (they move boxes and masks); this one is not one")
    return [t]


class Plan:
    """The pipeline spec, dtype and Python-side rules of a v2 transform."""

    def __init__(self, ops, dtype, sanitize, pure, mask_fill, iou):
        self.ops, self.dtype, self.sanitize = ops, dtype, sanitize
        self.pure, self.mask_fill, self.iou = pure, mask_fill, iou


def v2_pipeline(tf, where="transforms=", masks=False):
    """Map a v2 transform (Compose or one) to a Plan, refusing by name what
    seedpipe does not do as torchvision does."""
    import torch
    from . import transforms as T
    from torchvision import tv_tensors
    ts = _flatten(tf, where) if tf is not None else []
    ops, dtype, sanitize, pure, image, mask_fill, iou = [], "uint8", [], False, False, None, False
    seen_norm = False
    for k, t in enumerate(ts):
        name = type(t).__name__
        g = lambda a, d=None, t=t: getattr(t, a, d)   # noqa: E731
        here = f"{where}{name}"
        if pure and name != "ToPureTensor":
            _refuse(here, "after ToPureTensor(): put ToPureTensor() last")
        if sanitize and name in _SIZE_CHANGING:
            _refuse(f"{where}SanitizeBoundingBoxes before {name}", "seedpipe applies "
                    "SanitizeBoundingBoxes to the output boxes, which is its meaning only when "
                    "no crop, resize or zoom follows it: put it after the last of them (flips "
                    "and pixel transforms may follow)")
        if seen_norm and name in _GEOMETRIC + ("ColorJitter",):
            _refuse(here, "after Normalize: seedpipe normalizes when it writes the output; "
                    "put Normalize after every geometric and colour transform")
        if name in ("ToImage", "PILToTensor"):
            image = True
        elif name == "ToDtype":
            dt = g("dtype")
            if isinstance(dt, dict):
                _refuse(f"{here}(dtype={{...}})", "seedpipe takes one dtype for the image "
                        "(ToDtype(torch.float32, scale=True)); boxes and masks keep theirs")
            if dt == torch.uint8:
                continue
            if dt != torch.float32 or not g("scale"):
                _refuse(f"{here}(dtype={dt}, scale={g('scale')})", "seedpipe converts "
                        "uint8 images to float32 in [0, 1]: ToDtype(torch.float32, scale=True)")
            dtype = "float32"
        elif name == "Normalize":
            if dtype != "float32":
                _refuse(here, "needs float images: ToDtype(torch.float32, scale=True) before "
                        "it (torchvision refuses uint8 too)")
            ops.append(T.Normalize(g("mean"), g("std")).spec())
            seen_norm = True
        elif name == "Resize":
            ops.append(T.Resize(g("size"), g("interpolation"), g("max_size"),
                                g("antialias")).spec())
        elif name == "RandomResizedCrop":
            ops.append(T.RandomResizedCrop(g("size"), g("scale"), g("ratio"),
                                           g("interpolation"), g("antialias")).spec())
        elif name == "CenterCrop":
            ops.append(T.CenterCrop(g("size")).spec())
        elif name in ("RandomHorizontalFlip", "RandomVerticalFlip"):
            ops.append(getattr(T, name)(g("p")).spec())
        elif name == "ColorJitter":
            none = lambda v: (1.0, 1.0) if v is None else tuple(v)   # noqa: E731
            ops.append(T.ColorJitter(none(g("brightness")), none(g("contrast")),
                                     none(g("saturation")),
                                     None if g("hue") is None else tuple(g("hue"))).spec())
        elif name == "RandomZoomOut":
            img_kind = tv_tensors.Image if image else __import__("PIL.Image").Image.Image
            fill = _fill_of(t, img_kind)
            lo, hi = (float(x) for x in g("side_range"))
            ops.append(f"random_zoom_out fill={fill} side_range={T._num(lo)},{T._num(hi)} "
                       f"p={T._num(g('p'))}")
            if masks:
                mf = _fill_of(t, tv_tensors.Mask)
                if "," in mf or (mask_fill is not None and mf != mask_fill):
                    _refuse(f"{here}(fill={g('fill')!r})", "a mask is padded with one value "
                            "per pipeline (targets mask_fill=): give masks one fill")
                mask_fill = mf
        elif name == "RandomIoUCrop":
            opts = ",".join(T._num(x) for x in g("options"))
            ops.append(f"random_iou_crop min_scale={T._num(g('min_scale'))} "
                       f"max_scale={T._num(g('max_scale'))} "
                       f"min_aspect_ratio={T._num(g('min_aspect_ratio'))} "
                       f"max_aspect_ratio={T._num(g('max_aspect_ratio'))} "
                       f"sampler_options={opts} trials={int(g('trials'))}")
            iou = True
        elif name == "SanitizeBoundingBoxes":
            lg = g("labels_getter")
            if lg != "default":
                _refuse(f"{here}(labels_getter={lg!r})", "seedpipe drops a box's label (and "
                        "mask) with the box; only labels_getter='default' (the 'labels' key) "
                        "is that")
            sanitize.append((float(g("min_size")), float(g("min_area", 1.0))))
        elif name == "ConvertBoundingBoxFormat":
            fmt = getattr(g("format"), "name", g("format"))
            if str(fmt).upper() != "XYXY":
                _refuse(f"{here}(format={fmt!r})", "seedpipe yields XYXY boxes")
        elif name == "ToPureTensor":
            pure = True
        elif name in _NO_OP:
            continue
        else:
            _refuse(here, "no seedpipe op does what it does to images and targets "
                    "(covered: Compose, ToImage, PILToTensor, ToDtype, Normalize, Resize, "
                    "RandomResizedCrop, CenterCrop, RandomHorizontalFlip, RandomVerticalFlip, "
                    "ColorJitter, RandomZoomOut, RandomIoUCrop, SanitizeBoundingBoxes, "
                    "ClampBoundingBoxes, ConvertBoundingBoxFormat(XYXY), ToPureTensor); use "
                    "backend='python' to run it in Python")
    if not image:
        _refuse(f"{where}{_names(ts)}", "it yields PIL images; seedpipe yields tensors: add "
                "ToImage()")
    if dtype == "float32" and not seen_norm:
        ops.append("normalize mean=0 std=1")   # x / 255, as ToDtype(float32, scale=True)
    return Plan(ops, dtype, sanitize, pure, mask_fill or "0", iou)


def _names(ts):
    return "Compose([" + ", ".join(type(t).__name__ + "()" for t in ts) + "])"


def joint_transform(wrapper):
    """The wrapper's joint transform: transforms=, or transform= alone
    when it moves no pixel (it is applied to the image only)."""
    tf = wrapper.__dict__.get("transforms")
    if tf is not None and type(tf).__name__ == "StandardTransform":
        if tf.target_transform is not None:
            _refuse("dataset=CocoDetection(target_transform=...)", "a Python function of "
                    "the annotations; seedpipe yields the wrapper's targets")
        img = tf.transform
        ts = _flatten(img, "dataset=CocoDetection(transform=...) ") if img is not None \
            else []
        moving = [type(t).__name__ for t in ts if type(t).__name__ in _GEOMETRIC]
        if moving:
            _refuse(f"dataset=CocoDetection(transform={moving[0]}())", "transform= moves the "
                    "image only, the boxes stay where they were; pass the v2 transforms as "
                    "transforms= (joint)")
        return img
    return tf


class Coco:
    """A wrapped CocoDetection on the C path: the Loader's arguments and
    the per-batch samples."""

    def __init__(self, dataset, collate_fn, write=True):
        wrapper, index = unwrap(dataset)
        ds = _wrapped_coco(wrapper)
        if not is_detection_collate(collate_fn):
            _refuse(f"collate_fn={getattr(collate_fn, '__name__', collate_fn)!r}", "a "
                    "detection batch is a tuple of images and a tuple of target dicts of "
                    "different box counts (default_collate cannot stack them); seedpipe "
                    "recognises collate_fn=lambda b: tuple(zip(*b)) (torchvision's detection "
                    "references' utils.collate_fn) or list(zip(*b))")
        self.wrapper, self.collate_fn = wrapper, collate_fn
        keys = wrapper.__dict__.get("_target_keys")
        keys = {"image_id", "boxes", "labels"} if keys is None else \
            set(("segmentation", "area", "iscrowd", "image_id", "bbox", "category_id",
                 "boxes", "masks", "labels") if keys == "all" else keys)
        extra = sorted(keys - set(_KEYS))
        if extra:
            _refuse(f"dataset=wrap_dataset_for_transforms_v2(target_keys={extra})", "seedpipe "
                    "yields the moved targets (image_id, boxes, masks, labels); the raw "
                    "annotation fields would not follow the crops")
        self.keys = [k for k in _KEYS if k in keys]
        self.masks = "masks" in keys
        tf = joint_transform(wrapper)
        self.plan = v2_pipeline(tf, masks=self.masks)
        if any(s for s in self.plan.sanitize) and "labels" not in keys:
            _refuse("transforms=SanitizeBoundingBoxes(labels_getter='default')", "it finds no "
                    "'labels' in the targets (torchvision raises too): add 'labels' to "
                    "target_keys")
        if self.plan.iou and not _warned_iou[0]:
            _warned_iou[0] = True
            warnings.warn("DataLoader: RandomIoUCrop on seedpipe's C path keeps a box whose "
                          "centre falls outside the crop, clipped (torchvision zeroes it for "
                          "SanitizeBoundingBoxes to remove); docs/targets.md", UserWarning,
                          stacklevel=4)
        coco = ds.coco
        self.root = os.path.abspath(os.path.expanduser(os.fspath(ds.root)))
        self.ids = [int(i) for i in ds.ids]
        if index is not None:         # a Subset: its indices into ds.ids
            # an index listed twice is a file listed twice: each copy has
            # the image's targets (dataset_coco.c)
            self.ids = [self.ids[j] for j in index.tolist()]
        paths = []
        for i in self.ids:
            fn = coco.imgs[i]["file_name"]
            norm = os.path.normpath(fn)
            if os.path.isabs(fn) or norm != fn or norm.startswith(".."):
                _refuse(f"dataset=CocoDetection image {i} file_name {fn!r}", "seedpipe takes "
                        "a normalised path relative to root (no '..', './' or '//')")
            paths.append(fn)
        self.paths = paths
        counts = [len(coco.imgToAnns.get(i, ())) for i in self.ids]
        self.annotated = np.array([c > 0 for c in counts], dtype=bool)
        if self.plan.sanitize and not self.annotated.all():
            first = self.ids[int(np.argmin(self.annotated))]
            _refuse("transforms=SanitizeBoundingBoxes", f"image {first} has no annotation, so "
                    "the wrapper gives its target without 'labels' and torchvision's "
                    "SanitizeBoundingBoxes raises on it; leave such images out of "
                    "CocoDetection.ids (as torchvision's detection references do)")
        self.max_boxes = max([1] + counts)
        if self.max_boxes > 4096:
            _refuse("dataset=CocoDetection", f"an image has {self.max_boxes} annotations; "
                    "seedpipe carries at most 4096 boxes a sample")
        self.annotations = self._write_json(coco) if write else None

    def _write_json(self, coco):
        from ._tvdatasets import _cache_root, _write_once
        keep = set(self.ids)
        images = [{"id": i, "file_name": coco.imgs[i]["file_name"]}
                  for i in dict.fromkeys(self.ids)]
        anns = []
        for a in coco.dataset.get("annotations", ()):
            if a.get("image_id") not in keep:
                continue
            need = ("bbox", "category_id") + (("segmentation",) if self.masks else ())
            miss = [k for k in need if a.get(k) is None]
            if miss:
                _refuse(f"dataset=CocoDetection annotation {a.get('id', len(anns))} of image "
                        f"{a['image_id']}", f"it has no {miss[0]!r} (the wrapper needs it for "
                        "target_keys " + ", ".join(self.keys) + ")")
            b = {"id": a.get("id", len(anns)), "image_id": a["image_id"], "bbox": a["bbox"],
                 "category_id": a["category_id"]}
            if self.masks:
                b["segmentation"] = a["segmentation"]
            anns.append(b)
        data = json.dumps({"images": images, "annotations": anns},
                          separators=(",", ":")).encode()
        folder = os.path.join(_cache_root(), "tv-coco")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.getuid():
            _refuse("dataset=CocoDetection", f"the cache folder {folder} is not this user's "
                    "(set SEEDPIPE_CACHE to a folder of your own)")
        path = os.path.join(folder, hashlib.blake2b(data, digest_size=16).hexdigest() + ".json")
        _write_once(path, [data])
        return path

    def spec(self):
        tgt = f"targets max_boxes={self.max_boxes} clip=1 min_area=0"
        if self.masks:
            tgt += f" masks=instance mask_fill={self.plan.mask_fill}"
        return " | ".join(self.plan.ops + [tgt])

    def loader_args(self):
        labels = np.zeros(len(self.paths), dtype=np.int32)
        return dict(samples=(self.paths, labels, 1), annotations=self.annotations,
                    pipeline=self.spec(), dtype=self.plan.dtype)

    def batch(self, b, indices, own):
        """The collate_fn of this batch's (image, target) samples; own(t)
        makes a tensor the caller's (a copy or a pinned copy)."""
        import torch
        from torchvision import tv_tensors
        images = own(torch.from_numpy(b["image"]))
        boxes, labels, n = b["boxes"], b["labels"], b["num_boxes"]
        h, w = images.shape[-2:]
        samples = []
        for i, di in enumerate(np.asarray(indices).tolist()):
            img = images[i] if self.plan.pure else tv_tensors.Image(images[i])
            tid = self.ids[di]
            if not self.annotated[di]:
                samples.append((img, {"image_id": tid}))
                continue
            k = int(n[i])
            bx = torch.from_numpy(np.array(boxes[i, :k], dtype=np.float32))
            lb = torch.from_numpy(labels[i, :k].astype(np.int64))
            mk = torch.from_numpy(np.array(b["masks"][i, :k])) if self.masks else None
            for min_size, min_area in self.plan.sanitize:
                # torchvision's _get_sanitize_bounding_boxes_mask, on the
                # output boxes (clipped to the canvas), float32
                ws, hs = bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1]
                ok = (ws >= min_size) & (hs >= min_size) & (bx >= 0).all(dim=-1) & \
                    (ws * hs >= min_area)
                ok &= (bx[:, 0] <= w) & (bx[:, 2] <= w) & (bx[:, 1] <= h) & (bx[:, 3] <= h)
                bx, lb = bx[ok], lb[ok]
                mk = mk[ok] if mk is not None else None
            tgt = {}
            for key in self.keys:
                if key == "image_id":
                    tgt[key] = tid
                elif key == "boxes":
                    tgt[key] = bx if self.plan.pure else tv_tensors.BoundingBoxes(
                        bx, format="XYXY", canvas_size=(int(h), int(w)))
                elif key == "masks":
                    tgt[key] = mk if self.plan.pure else tv_tensors.Mask(mk)
                else:
                    tgt[key] = lb
            samples.append((img, tgt))
        return self.collate_fn(samples)

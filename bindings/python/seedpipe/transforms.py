"""seedpipe.transforms - the torchvision transforms users already write, as
seedpipe pipelines.

    from seedpipe import transforms as T
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                    T.ToTensor(), T.Normalize(mean, std)])
    loader = seedpipe.Loader("data/train", pipeline=tf, batch_size=64)

Each class takes torchvision's argument names and defaults and stands for
one op of the pipeline language (docs/pipeline.md); `Compose.spec()` is the
equivalent spec string and `Compose.dtype` the output dtype it implies
(float32 after ToTensor / ConvertImageDtype(torch.float32), else uint8), so
`Loader(pipeline=Compose([...]))` produces exactly the bytes of
`Loader(pipeline=compose.spec(), dtype=compose.dtype)`. Nothing runs in
Python: the C pipeline computes every sample, with its own deterministic
draws (the same distributions as torchvision, not torchvision's random
numbers).

An argument torchvision accepts that seedpipe cannot honour (an
interpolation other than bilinear and bicubic, antialias=False, max_size, fill/padding modes...) is a
ValueError naming it, never silently ignored.
"""
import numbers

__all__ = ["from_torchvision", "Compose", "RandomResizedCrop", "RandomHorizontalFlip", "RandomVerticalFlip",
           "ColorJitter", "RandomGrayscale", "Resize", "CenterCrop", "Normalize", "ToTensor",
           "PILToTensor", "ConvertImageDtype", "RandomInvert", "RandomPosterize",
           "RandomSolarize", "RandomAutocontrast", "RandomEqualize", "RandomAdjustSharpness",
           "RandomApply", "RandomCrop", "GaussianBlur", "RandomErasing", "RandomRotation",
           "RandomAffine", "AutoAugment", "RandAugment", "TrivialAugmentWide"]


def _num(x):
    """A number as spec text: repr round-trips a float; the parser
    normalises it (canonical "%.9g"), so 1.0 and "1" mean the same."""
    return repr(float(x))


def _size(name, size):
    """torchvision's size: an int, or a sequence (h, w) / (s,) -> 'H,W' or 'S'."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        return str(int(size)), int(size), int(size)
    try:
        seq = [int(v) for v in size]
    except TypeError:
        raise ValueError(f"{name}: size must be an int or a sequence (h, w), got {size!r}")
    if len(seq) == 1:
        return str(seq[0]), seq[0], seq[0]
    if len(seq) != 2:
        raise ValueError(f"{name}: size must have 1 or 2 elements, got {size!r}")
    return f"{seq[0]},{seq[1]}", seq[0], seq[1]


def _interp(name, interpolation):
    """The spec suffix of torchvision's interpolation: '' for bilinear (the
    default: the spec text stays what it always was), ' interpolation=bicubic'
    for bicubic; both antialiased. InterpolationMode, its string value, or
    PIL's int (Image.BILINEAR 2, Image.BICUBIC 3)."""
    v = getattr(interpolation, "value", interpolation)
    if v in (None, "bilinear", 2):
        return ""
    if v in ("bicubic", 3):
        return " interpolation=bicubic"
    raise ValueError(f"{name}: interpolation={interpolation!r} is not supported (seedpipe "
                     "resamples bilinearly or bicubically, with antialiasing)")


def _antialias(name, antialias):
    if antialias not in (None, True, "warn"):
        raise ValueError(f"{name}: antialias={antialias!r} is not supported (seedpipe always "
                         "antialiases, as torchvision does on PIL images)")


def _pair(name, key, v, center):
    """ColorJitter's value: b -> [max(0, center - b), center + b], or (lo, hi)."""
    if isinstance(v, numbers.Number) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"{name}: {key}={v!r} must be non-negative")
        return (max(0.0, center - float(v)), center + float(v))
    try:
        lo, hi = (float(x) for x in v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {key} must be a number or a pair (min, max), got {v!r}")
    if not 0 <= lo <= hi:
        raise ValueError(f"{name}: {key}={v!r} must satisfy 0 <= min <= max")
    return (lo, hi)


class _Op:
    op = None   # the spec text, or None (a dtype-only transform)
    dtype = None

    def spec(self):
        return self.op

    def __repr__(self):
        return f"{type(self).__name__}({self.op or self.dtype})"


class RandomResizedCrop(_Op):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=None, antialias=None):
        n = "RandomResizedCrop"
        interp = _interp(n, interpolation)
        _antialias(n, antialias)
        s, _, _ = _size(n, size)
        (s0, s1), (r0, r1) = [float(x) for x in scale], [float(x) for x in ratio]
        self.op = (f"random_resized_crop size={s} scale={_num(s0)},{_num(s1)} "
                   f"ratio={_num(r0)},{_num(r1)}{interp}")


def _ints(name, key, v, lo, hi, counts):
    """An int or a sequence of ints in [lo, hi] with a length in counts."""
    seq = [v] if isinstance(v, numbers.Number) else v
    try:
        seq = list(seq)
    except TypeError:
        raise ValueError(f"{name}: {key}={v!r} must be an int or a sequence of ints")
    if len(seq) not in counts or any(isinstance(x, bool) or not isinstance(x, numbers.Number)
                                     or int(x) != x or not lo <= x <= hi for x in seq):
        raise ValueError(f"{name}: {key}={v!r} must be {' or '.join(map(str, counts))} integers "
                         f"in [{lo}, {hi}]")
    return ",".join(str(int(x)) for x in seq)


class RandomCrop(_Op):
    """torchvision's RandomCrop: padding (int, (lr, tb) or (l, t, r, b)),
    padding_mode constant, edge or reflect, an integer fill (or an RGB
    triple), pad_if_needed; the offset from the sample's draws."""
    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        n = "RandomCrop"
        _, h, w = _size(n, size)
        if padding_mode not in ("constant", "edge", "reflect"):
            raise ValueError(f"{n}: padding_mode={padding_mode!r} is not supported (constant, "
                             "edge or reflect)")
        parts = [f"random_crop size={h},{w}"]
        if padding is not None:
            parts.append("padding=" + _ints(n, "padding", padding, 0, 16384, (1, 2, 4)))
        parts.append(f"pad_mode={padding_mode}")
        parts.append("fill=" + _ints(n, "fill", fill, 0, 255, (1, 3)))
        parts.append(f"pad_if_needed={1 if pad_if_needed else 0}")
        self.op = " ".join(parts)


class GaussianBlur(_Op):
    """torchvision's GaussianBlur(kernel_size, sigma=(0.1, 2.0)): kernel_size
    an odd int or (kx, ky) (x first, as torchvision), sigma a number or
    (min, max); the sigma from the sample's draws."""
    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        n = "GaussianBlur"
        k = _ints(n, "kernel_size", kernel_size, 1, 1023, (1, 2))
        if any(int(v) % 2 == 0 for v in k.split(",")):
            raise ValueError(f"{n}: kernel_size={kernel_size!r} must be odd")
        if isinstance(sigma, numbers.Number) and not isinstance(sigma, bool):
            lo = hi = float(sigma)
        else:
            try:
                lo, hi = (float(x) for x in sigma)
            except (TypeError, ValueError):
                raise ValueError(f"{n}: sigma must be a number or a pair (min, max), got {sigma!r}")
        if not 0 < lo <= hi <= 1e6:
            raise ValueError(f"{n}: sigma={sigma!r} must satisfy 0 < min <= max")
        self.op = f"gaussian_blur kernel={k} sigma={_num(lo)},{_num(hi)}"


class RandomErasing(_Op):
    """torchvision's RandomErasing(p, scale, ratio, value): it works on the
    output values (after ToTensor / Normalize when they are there, as in
    torchvision), so it must come after every other transform; value a
    number, a triple (per channel, in the output's units) or "random"
    (standard normal values from the sample's own draws)."""
    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        n = "RandomErasing"
        s0, s1 = (float(x) for x in scale)
        r0, r1 = (float(x) for x in ratio)
        if not 0 <= s0 <= s1 <= 1:
            raise ValueError(f"{n}: scale={scale!r} must satisfy 0 <= min <= max <= 1")
        if not 0 < r0 <= r1:
            raise ValueError(f"{n}: ratio={ratio!r} must satisfy 0 < min <= max")
        if value == "random":
            v = "random"
        elif isinstance(value, numbers.Number) and not isinstance(value, bool):
            v = _num(value)
        elif isinstance(value, (tuple, list)) and len(value) in (1, 3):
            v = ",".join(_num(x) for x in value)
        else:
            raise ValueError(f"{n}: value={value!r} must be a number, a sequence of 1 or 3 "
                             "numbers, or 'random'")
        self.op = (f"random_erasing p={_p(n, p)} scale={_num(s0)},{_num(s1)} "
                   f"ratio={_num(r0)},{_num(r1)} value={v}")


class RandomRotation(_Op):
    """torchvision's RandomRotation(degrees, interpolation, expand=False,
    center=None, fill): nearest or bilinear, computed as torchvision's
    tensor path (docs/pipeline.md); expand and center are not supported."""
    def __init__(self, degrees, interpolation=None, expand=False, center=None, fill=0):
        n = "RandomRotation"
        if expand:
            raise ValueError(f"{n}: expand=True is not supported (the output keeps the size)")
        if center is not None:
            raise ValueError(f"{n}: center={center!r} is not supported (the image's centre)")
        v = getattr(interpolation, "value", interpolation)
        mode = {None: "nearest", "nearest": "nearest", 0: "nearest", "bilinear": "bilinear",
                2: "bilinear"}.get(v)
        if mode is None:
            raise ValueError(f"{n}: interpolation={interpolation!r} is not supported (nearest or "
                             "bilinear)")
        if isinstance(degrees, numbers.Number) and not isinstance(degrees, bool):
            if degrees < 0:
                raise ValueError(f"{n}: degrees={degrees!r} must be non-negative")
            lo, hi = -float(degrees), float(degrees)
        else:
            try:
                lo, hi = (float(x) for x in degrees)
            except (TypeError, ValueError):
                raise ValueError(f"{n}: degrees must be a number or a pair (min, max)")
        if not -1e6 <= lo <= hi <= 1e6:
            raise ValueError(f"{n}: degrees={degrees!r} must satisfy min <= max")
        f = [fill] if isinstance(fill, numbers.Number) else list(fill)
        if len(f) not in (1, 3) or any(not 0 <= float(x) <= 255 for x in f):
            raise ValueError(f"{n}: fill={fill!r} must be 1 or 3 numbers in [0, 255]")
        self.op = (f"rotate degrees={_num(lo)},{_num(hi)} interpolation={mode} "
                   f"fill={','.join(_num(x) for x in f)}")


def _nearest_bilinear(name, interpolation):
    """torchvision's interpolation for the grid ops: nearest (default) or
    bilinear, as the enum, its value or PIL's number."""
    v = getattr(interpolation, "value", interpolation)
    mode = {None: "nearest", "nearest": "nearest", 0: "nearest", "bilinear": "bilinear",
            2: "bilinear"}.get(v)
    if mode is None:
        raise ValueError(f"{name}: interpolation={interpolation!r} is not supported (nearest or "
                         "bilinear)")
    return mode


def _fill(name, fill, none_ok):
    """fill: a number or 1 or 3 numbers in [0, 255]; None is torchvision's
    no-fill (zeros, no mask) where none_ok, else 0."""
    if fill is None:
        return "none" if none_ok else "0"
    f = [fill] if isinstance(fill, numbers.Number) else list(fill)
    if len(f) not in (1, 3) or any(isinstance(x, bool) or not isinstance(x, numbers.Number) or
                                   not 0 <= float(x) <= 255 for x in f):
        raise ValueError(f"{name}: fill={fill!r} is not supported (None, or 1 or 3 numbers in "
                         "[0, 255])")
    return ",".join(_num(x) for x in f)


def _range(name, key, v, lim):
    """d -> (-d, d) (d >= 0) or (lo, hi) with -lim <= lo <= hi <= lim."""
    if isinstance(v, numbers.Number) and not isinstance(v, bool):
        if v < 0:
            raise ValueError(f"{name}: {key}={v!r} must be non-negative")
        return -float(v), float(v)
    try:
        lo, hi = (float(x) for x in v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {key} must be a number or a pair (min, max), got {v!r}")
    if not -lim <= lo <= hi <= lim:
        raise ValueError(f"{name}: {key}={v!r} must satisfy min <= max (within +-{lim:g})")
    return lo, hi


class RandomAffine(_Op):
    """torchvision's RandomAffine(degrees, translate, scale, shear,
    interpolation, fill, center=None) on the uint8 tensor path
    (docs/pipeline.md "affine"); center is not supported."""
    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation=None,
                 fill=0, center=None):
        n = "RandomAffine"
        if center is not None:
            raise ValueError(f"{n}: center={center!r} is not supported (the image's centre)")
        lo, hi = _range(n, "degrees", degrees, 1e6)
        parts = [f"affine degrees={_num(lo)},{_num(hi)}"]
        if translate is not None:
            t = [float(x) for x in translate]
            if len(t) != 2 or not all(0 <= x <= 1 for x in t):
                raise ValueError(f"{n}: translate={translate!r} must be two fractions in [0, 1]")
            parts.append(f"translate={_num(t[0])},{_num(t[1])}")
        if scale is not None:
            sc = [float(x) for x in scale]
            if len(sc) != 2 or not 0 < sc[0] <= sc[1]:
                raise ValueError(f"{n}: scale={scale!r} must be (min, max) with 0 < min <= max")
            parts.append(f"scale={_num(sc[0])},{_num(sc[1])}")
        if shear is not None:
            if isinstance(shear, numbers.Number):
                sh = list(_range(n, "shear", shear, 90))
            else:
                sh = [float(x) for x in shear]
            if len(sh) not in (2, 4) or not all(-90 < x < 90 for x in sh):
                raise ValueError(f"{n}: shear={shear!r} must be a number, 2 or 4 values in "
                                 "degrees within (-90, 90)")
            parts.append("shear=" + ",".join(_num(x) for x in sh))
        parts.append(f"interpolation={_nearest_bilinear(n, interpolation)}")
        parts.append(f"fill={_fill(n, fill, False)}")
        self.op = " ".join(parts)


class AutoAugment(_Op):
    """torchvision's AutoAugment(policy, interpolation, fill): the ImageNet,
    CIFAR10 and SVHN policies, every sub-op on the uint8 tensor path."""
    def __init__(self, policy="imagenet", interpolation=None, fill=None):
        n = "AutoAugment"
        pol = str(getattr(policy, "value", policy)).lower()
        if pol not in ("imagenet", "cifar10", "svhn"):
            raise ValueError(f"{n}: policy={policy!r} is not supported (imagenet, cifar10, svhn)")
        self.op = (f"auto_augment policy={pol} interpolation={_nearest_bilinear(n, interpolation)}"
                   f" fill={_fill(n, fill, True)}")


def _int_arg(name, key, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not lo <= int(v) <= hi:
        raise ValueError(f"{name}: {key}={v!r} is not supported (an integer in [{lo}, {hi}])")
    return int(v)


class RandAugment(_Op):
    """torchvision's RandAugment(num_ops, magnitude, num_magnitude_bins,
    interpolation, fill)."""
    def __init__(self, num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=None,
                 fill=None):
        n = "RandAugment"
        bins = _int_arg(n, "num_magnitude_bins", num_magnitude_bins, 2, 1000)
        self.op = (f"rand_augment num_ops={_int_arg(n, 'num_ops', num_ops, 0, 16)} "
                   f"magnitude={_int_arg(n, 'magnitude', magnitude, 0, bins - 1)} "
                   f"num_magnitude_bins={bins} interpolation={_nearest_bilinear(n, interpolation)}"
                   f" fill={_fill(n, fill, True)}")


class TrivialAugmentWide(_Op):
    """torchvision's TrivialAugmentWide(num_magnitude_bins, interpolation,
    fill)."""
    def __init__(self, num_magnitude_bins=31, interpolation=None, fill=None):
        n = "TrivialAugmentWide"
        bins = _int_arg(n, "num_magnitude_bins", num_magnitude_bins, 2, 1000)
        self.op = (f"trivial_augment_wide num_magnitude_bins={bins} "
                   f"interpolation={_nearest_bilinear(n, interpolation)} "
                   f"fill={_fill(n, fill, True)}")


class RandomHorizontalFlip(_Op):
    def __init__(self, p=0.5):
        self.op = f"hflip p={_num(p)}"


class RandomVerticalFlip(_Op):
    def __init__(self, p=0.5):
        self.op = f"vflip p={_num(p)}"


class RandomGrayscale(_Op):
    def __init__(self, p=0.1):
        self.op = f"grayscale p={_num(p)}"


def _hue(name, hue):
    """ColorJitter's hue: h -> [-h, h] (0 <= h <= 0.5), or (lo, hi) with
    -0.5 <= lo <= hi <= 0.5, as torchvision; None or 0: no hue."""
    if hue is None:
        return None
    if isinstance(hue, numbers.Number) and not isinstance(hue, bool):
        if not 0 <= hue <= 0.5:
            raise ValueError(f"{name}: hue={hue!r} must be in [0, 0.5]")
        lo, hi = -float(hue), float(hue)
    else:
        try:
            lo, hi = (float(x) for x in hue)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: hue must be a number or a pair (min, max), got {hue!r}")
        if not -0.5 <= lo <= hi <= 0.5:
            raise ValueError(f"{name}: hue={hue!r} must satisfy -0.5 <= min <= max <= 0.5")
    return None if lo == hi == 0 else (lo, hi)


class ColorJitter(_Op):
    """torchvision's ColorJitter, hue included: a random order of the four
    adjustments (one of 24 with a hue range, else one of 6), the hue shift
    computed as torchvision's adjust_hue on a uint8 tensor."""
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        n = "ColorJitter"
        parts = []
        for key, v in (("brightness", brightness), ("contrast", contrast),
                       ("saturation", saturation)):
            lo, hi = _pair(n, key, v, 1.0)
            parts.append(f"{key}={_num(lo)},{_num(hi)}")
        h = _hue(n, hue)
        if h:
            parts.append(f"hue={_num(h[0])},{_num(h[1])}")
        self.op = "color_jitter " + " ".join(parts)


def _p(name, p):
    if isinstance(p, bool) or not isinstance(p, numbers.Number) or not 0 <= p <= 1:
        raise ValueError(f"{name}: p={p!r} must be a probability in [0, 1]")
    return _num(p)


class RandomInvert(_Op):
    def __init__(self, p=0.5):
        self.op = f"invert p={_p('RandomInvert', p)}"


class RandomPosterize(_Op):
    def __init__(self, bits, p=0.5):
        if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) or not 0 <= bits <= 8:
            raise ValueError(f"RandomPosterize: bits={bits!r} must be an integer in [0, 8]")
        self.op = f"posterize bits={int(bits)} p={_p('RandomPosterize', p)}"


class RandomSolarize(_Op):
    """threshold on the 0-255 scale (torchvision's uint8 semantics: a value
    >= threshold is inverted)."""
    def __init__(self, threshold, p=0.5):
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Number) or \
                not 0 <= threshold <= 255:
            raise ValueError(f"RandomSolarize: threshold={threshold!r} must be in [0, 255] "
                             "(seedpipe's images are uint8)")
        self.op = f"solarize threshold={_num(threshold)} p={_p('RandomSolarize', p)}"


class RandomAutocontrast(_Op):
    def __init__(self, p=0.5):
        self.op = f"autocontrast p={_p('RandomAutocontrast', p)}"


class RandomEqualize(_Op):
    def __init__(self, p=0.5):
        self.op = f"equalize p={_p('RandomEqualize', p)}"


class RandomAdjustSharpness(_Op):
    def __init__(self, sharpness_factor, p=0.5):
        f = sharpness_factor
        if isinstance(f, bool) or not isinstance(f, numbers.Number) or not 0 <= f <= 255:
            raise ValueError(f"RandomAdjustSharpness: sharpness_factor={f!r} must be in [0, 255]")
        self.op = f"sharpness factor={_num(f)} p={_p('RandomAdjustSharpness', p)}"


class RandomApply(_Op):
    """torchvision's RandomApply(transforms, p=0.5): with probability p all
    of them, else none: `random_apply ops=N p=P` followed by their N ops.
    Only transforms that keep the image size and dtype may be inside (no
    crop, resize, Normalize or ToTensor: the output must not depend on the
    draw's shape)."""
    def __init__(self, transforms, p=0.5):
        n = "RandomApply"
        inner = Compose(transforms)
        for t in inner._flat():
            if t.dtype or isinstance(t, (RandomResizedCrop, Resize, CenterCrop, Normalize,
                                         RandomCrop, RandomErasing)):
                raise ValueError(f"{n}: {type(t).__name__} inside RandomApply is not supported "
                                 "(only transforms that keep the image size and dtype)")
        ops = [t.spec() for t in inner._flat() if t.spec()]
        count = sum(len(o.split(" | ")) for o in ops)
        self.op = (f"random_apply ops={count} p={_p(n, p)} | " + " | ".join(ops)) if ops else None


class Resize(_Op):
    def __init__(self, size, interpolation=None, max_size=None, antialias=None):
        n = "Resize"
        interp = _interp(n, interpolation)
        _antialias(n, antialias)
        if max_size is not None:
            raise ValueError(f"{n}: max_size={max_size!r} is not supported")
        s, _, _ = _size(n, size)
        self.op = f"resize size={s}{interp}"


class CenterCrop(_Op):
    def __init__(self, size):
        s, h, w = _size("CenterCrop", size)
        self.op = f"center_crop size={h},{w}"


class Normalize(_Op):
    def __init__(self, mean, std, inplace=False):
        mean = [float(m) for m in (mean if hasattr(mean, "__iter__") else [mean])]
        std = [float(s) for s in (std if hasattr(std, "__iter__") else [std])]
        if any(s <= 0 for s in std):
            raise ValueError(f"Normalize: std={std!r} must be positive")
        self.op = (f"normalize mean={','.join(_num(m) for m in mean)} "
                   f"std={','.join(_num(s) for s in std)}")


class ToTensor(_Op):
    """float32 in [0, 1] (HWC uint8 -> CHW float); the layout is the
    Loader's (nchw by default)."""
    dtype = "float32"


class PILToTensor(_Op):
    dtype = "uint8"


class ConvertImageDtype(_Op):
    def __init__(self, dtype):
        name = str(dtype).replace("torch.", "")
        if name not in ("float32", "float", "uint8"):
            raise ValueError(f"ConvertImageDtype: dtype={dtype!r} is not supported (float32 or "
                             "uint8)")
        self.dtype = "uint8" if name == "uint8" else "float32"


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)
        for t in self.transforms:
            if not isinstance(t, (_Op, Compose)):
                raise ValueError(f"Compose: {t!r} is not a seedpipe.transforms transform (a "
                                 "Python callable cannot run inside the C pipeline)")

    def _flat(self):
        for t in self.transforms:
            if isinstance(t, Compose):
                yield from t._flat()
            else:
                yield t

    def spec(self):
        ops = [t.spec() for t in self._flat() if t.spec()]
        erasing = []   # trailing RandomErasing: it works on the output values
        while ops and ops[-1].startswith("random_erasing"):
            erasing.insert(0, ops.pop())
        norm = [i for i, o in enumerate(ops) if o.startswith("normalize")]
        if norm and norm[-1] != len(ops) - 1:
            raise ValueError("Compose: Normalize must be the last op that changes pixels "
                             "(RandomErasing alone may follow it)")
        if any(o.startswith("random_erasing") for o in ops):
            raise ValueError("Compose: RandomErasing must come after every other transform "
                             "(it works on the output values)")
        if norm and self.dtype != "float32":
            raise ValueError("Compose: Normalize needs ToTensor() (float output) before it")
        if not ops and not erasing:
            # ToTensor alone: the identity on [0, 1]
            return "normalize mean=0 std=1" if self.dtype == "float32" else "hflip p=0"
        if self.dtype == "float32" and not norm:
            ops.append("normalize mean=0 std=1")   # ToTensor: x / 255
        return " | ".join(ops + erasing)

    @property
    def dtype(self):
        d = "uint8"
        for t in self._flat():
            if t.dtype:
                d = t.dtype
        return d

    def __repr__(self):
        return "Compose([" + ", ".join(map(repr, self.transforms)) + "])"


def from_torchvision(t):
    """The seedpipe transform for a torchvision transform (or Compose of
    them), read from its attributes: RandomResizedCrop, RandomHorizontalFlip,
    RandomVerticalFlip, ColorJitter (hue included), RandomGrayscale, Resize,
    CenterCrop, Normalize, ToTensor, PILToTensor, ConvertImageDtype,
    RandomInvert, RandomPosterize, RandomSolarize, RandomAutocontrast,
    RandomEqualize, RandomAdjustSharpness, RandomApply, RandomCrop, GaussianBlur,
    RandomErasing, RandomRotation, RandomAffine, AutoAugment, RandAugment,
    TrivialAugmentWide, Compose. Anything
    else (Lambda, RandomPerspective, ...) is a ValueError naming it: it cannot
    run inside the C pipeline."""
    name = type(t).__name__
    g = lambda a, d=None: getattr(t, a, d)
    if name == "Compose":
        return Compose([from_torchvision(x) for x in t.transforms])
    if name == "RandomResizedCrop":
        return RandomResizedCrop(g("size"), g("scale"), g("ratio"), g("interpolation"),
                                 g("antialias"))
    if name in ("RandomHorizontalFlip", "RandomVerticalFlip", "RandomGrayscale"):
        return globals()[name](g("p"))
    if name == "ColorJitter":
        none = lambda v: (1.0, 1.0) if v is None else tuple(v)
        hue = g("hue")
        return ColorJitter(none(g("brightness")), none(g("contrast")), none(g("saturation")),
                           None if hue is None else tuple(hue))
    if name in ("RandomInvert", "RandomAutocontrast", "RandomEqualize"):
        return globals()[name](g("p"))
    if name == "RandomPosterize":
        return RandomPosterize(g("bits"), g("p"))
    if name == "RandomSolarize":
        return RandomSolarize(g("threshold"), g("p"))
    if name == "RandomApply":
        return RandomApply([from_torchvision(x) for x in t.transforms], g("p"))
    if name == "RandomAdjustSharpness":
        return RandomAdjustSharpness(g("sharpness_factor"), g("p"))
    if name == "Resize":
        return Resize(g("size"), g("interpolation"), g("max_size"), g("antialias"))
    if name == "CenterCrop":
        return CenterCrop(g("size"))
    if name == "RandomRotation":
        return RandomRotation(g("degrees"), g("interpolation"), g("expand", False), g("center"),
                              g("fill", 0))
    if name == "RandomAffine":
        return RandomAffine(g("degrees"), g("translate"), g("scale"), g("shear"),
                            g("interpolation"), g("fill", 0), g("center"))
    if name == "AutoAugment":
        return AutoAugment(g("policy"), g("interpolation"), g("fill"))
    if name == "RandAugment":
        return RandAugment(g("num_ops"), g("magnitude"), g("num_magnitude_bins"),
                           g("interpolation"), g("fill"))
    if name == "TrivialAugmentWide":
        return TrivialAugmentWide(g("num_magnitude_bins"), g("interpolation"), g("fill"))
    if name == "RandomErasing":
        return RandomErasing(g("p"), g("scale"), g("ratio"), g("value"), g("inplace", False))
    if name == "GaussianBlur":
        return GaussianBlur(tuple(g("kernel_size")), tuple(g("sigma")))
    if name == "RandomCrop":
        return RandomCrop(g("size"), g("padding"), g("pad_if_needed", False), g("fill", 0),
                          g("padding_mode", "constant"))
    if name == "Normalize":
        return Normalize(g("mean"), g("std"), g("inplace", False))
    if name in ("ToTensor", "PILToTensor"):
        return globals()[name]()
    if name == "ConvertImageDtype":
        return ConvertImageDtype(g("dtype"))
    raise ValueError(f"from_torchvision: {name} has no seedpipe equivalent (a Python transform "
                     "cannot run inside the C pipeline)")

"""seedpipe.transforms: torchvision's names and defaults, the bytes of the
equivalent spec string, and a clear error for what seedpipe cannot do."""
import numpy as np
import pytest

import seedpipe
from seedpipe import transforms as T

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def digests(shapes, pipeline, **kw):
    out = []
    with seedpipe.Loader(shapes, pipeline=pipeline, seed=3, batch_size=8, epochs=2, **kw) as ld:
        for _ in ld:
            out.append(ld.batch_digest())
    return out


@pytest.mark.parametrize("compose,spec,dtype", [
    (T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize(MEAN, STD)]),
     "random_resized_crop size=24 scale=0.08,1 ratio=0.75,1.3333333333333333 | hflip p=0.5 | "
     "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225", "float32"),
    (T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()]),
     "resize size=40 | center_crop size=32", "uint8"),
    (T.Compose([T.RandomResizedCrop((20, 28), scale=(0.5, 1.0), ratio=(0.5, 2)),
                T.ColorJitter(brightness=0.4, contrast=(0.5, 1.5), saturation=0.2),
                T.RandomVerticalFlip(p=0.25), T.RandomGrayscale()]),
     "random_resized_crop size=20,28 scale=0.5,1 ratio=0.5,2 | color_jitter "
     "brightness=0.6,1.4 contrast=0.5,1.5 saturation=0.8,1.2 | vflip p=0.25 | grayscale p=0.1",
     "uint8"),
    (T.Compose([T.Resize((30, 34)), T.ToTensor()]), "resize size=30,34 | normalize mean=0 std=1",
     "float32"),
    (T.Compose([T.CenterCrop(28), T.RandomInvert(), T.RandomPosterize(4, p=0.3),
                T.RandomSolarize(128), T.RandomAutocontrast(), T.RandomEqualize(p=0.7),
                T.RandomAdjustSharpness(2), T.ColorJitter(0.1, hue=0.2)]),
     "center_crop size=28,28 | invert p=0.5 | posterize bits=4 p=0.3 | solarize threshold=128 "
     "p=0.5 | autocontrast p=0.5 | equalize p=0.7 | sharpness factor=2 p=0.5 | color_jitter "
     "brightness=0.9,1.1 contrast=1,1 saturation=1,1 hue=-0.2,0.2", "uint8"),
    (T.Compose([T.CenterCrop(28), T.RandomApply([T.ColorJitter(0.4, hue=0.1), T.RandomApply(
        [T.RandomInvert(1)], p=0.3), T.RandomGrayscale(1)], p=0.8), T.RandomEqualize()]),
     "center_crop size=28,28 | random_apply ops=4 p=0.8 | color_jitter brightness=0.6,1.4 "
     "contrast=1,1 saturation=1,1 hue=-0.1,0.1 | random_apply ops=1 p=0.3 | invert p=1 | "
     "grayscale p=1 | equalize p=0.5", "uint8"),
    (T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor()]),
     "random_crop size=32,32 padding=4 pad_mode=constant fill=0 pad_if_needed=0 | hflip p=0.5 | "
     "normalize mean=0 std=1", "float32"),
    (T.Compose([T.RandomCrop((20, 70), padding=(1, 2), pad_if_needed=True, fill=(9, 8, 7),
                             padding_mode="edge")]),
     "random_crop size=20,70 padding=1,2 pad_mode=edge fill=9,8,7 pad_if_needed=1", "uint8"),
    (T.Compose([T.RandomCrop(28), T.ToTensor(), T.Normalize((0.5,), (0.25,)),
                T.RandomErasing(), T.RandomErasing(p=1, value="random")]),
     "random_crop size=28,28 pad_mode=constant fill=0 pad_if_needed=0 | normalize mean=0.5 "
     "std=0.25 | random_erasing p=0.5 scale=0.02,0.33 ratio=0.3,3.3 value=0 | random_erasing "
     "p=1 scale=0.02,0.33 ratio=0.3,3.3 value=random", "float32"),
    (T.Compose([T.CenterCrop(28), T.ToTensor(), T.RandomErasing(value=(0.1, 0.2, 0.3))]),
     "center_crop size=28,28 | normalize mean=0 std=1 | random_erasing p=0.5 scale=0.02,0.33 "
     "ratio=0.3,3.3 value=0.1,0.2,0.3", "float32"),
    (T.Compose([T.CenterCrop(28), T.RandomRotation(15), T.RandomApply(
        [T.RandomRotation((80, 100), interpolation="bilinear", fill=(1, 2, 3))], p=0.5)]),
     "center_crop size=28,28 | rotate degrees=-15,15 interpolation=nearest fill=0 | "
     "random_apply ops=1 p=0.5 | rotate degrees=80,100 interpolation=bilinear fill=1,2,3",
     "uint8"),
    (T.Compose([T.CenterCrop(28), T.RandomApply([T.GaussianBlur(5)], p=0.5),
                T.GaussianBlur((3, 7), sigma=0.8)]),
     "center_crop size=28,28 | random_apply ops=1 p=0.5 | gaussian_blur kernel=5 sigma=0.1,2.0 | "
     "gaussian_blur kernel=3,7 sigma=0.8,0.8", "uint8"),
])
def test_compose_is_its_spec(shapes, compose, spec, dtype):
    assert compose.dtype == dtype
    got = seedpipe.Loader(shapes, pipeline=compose, batch_size=8)
    want = seedpipe.Loader(shapes, pipeline=spec, batch_size=8, dtype=dtype)
    assert got.fingerprint == want.fingerprint, (compose.spec(), spec)
    got.close()
    want.close()
    assert digests(shapes, compose) == digests(shapes, spec, dtype=dtype)


def test_totensor_is_x_over_255(shapes):
    with seedpipe.Loader(shapes, pipeline=T.Compose([T.CenterCrop(32), T.ToTensor()]),
                         batch_size=4, epochs=1) as a, \
         seedpipe.Loader(shapes, pipeline="center_crop size=32", batch_size=4,
                         epochs=1) as b:
        (x, _), (y, _) = next(iter(a)), next(iter(b))
        assert x.dtype == np.float32 and y.dtype == np.uint8
        np.testing.assert_allclose(x, y.astype(np.float32) / 255, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("make,word", [
    (lambda: T.ColorJitter(hue=0.7), "hue"),
    (lambda: T.ColorJitter(hue=(0.2, 0.1)), "hue"),
    (lambda: T.RandomPosterize(9), "bits"),
    (lambda: T.RandomSolarize(300), "threshold"),
    (lambda: T.RandomAdjustSharpness(-1), "sharpness_factor"),
    (lambda: T.RandomInvert(p=2), "p="),
    (lambda: T.RandomApply([T.RandomResizedCrop(8)]), "RandomResizedCrop inside RandomApply"),
    (lambda: T.RandomApply([T.ToTensor()]), "ToTensor inside RandomApply"),
    (lambda: T.RandomCrop(32, padding_mode="symmetric"), "padding_mode"),
    (lambda: T.GaussianBlur(4), "odd"),
    (lambda: T.RandomRotation(10, expand=True), "expand"),
    (lambda: T.RandomRotation(10, center=(1, 2)), "center"),
    (lambda: T.RandomRotation(10, interpolation="bicubic"), "interpolation"),
    (lambda: T.RandomErasing(value="noise"), "value"),
    (lambda: T.RandomErasing(scale=(0.5, 2)), "scale"),
    (lambda: T.Compose([T.ToTensor(), T.RandomErasing(), T.Normalize(0, 1)]).spec(),
     "RandomErasing"),
    (lambda: T.GaussianBlur(3, sigma=(2, 1)), "sigma"),
    (lambda: T.GaussianBlur(3, sigma=0), "sigma"),
    (lambda: T.RandomCrop(32, padding=(1, 2, 3)), "padding"),
    (lambda: T.RandomCrop(32, fill=0.5), "fill"),
    (lambda: T.RandomApply([T.RandomCrop(8)]), "RandomCrop inside RandomApply"),
    (lambda: T.Resize(32, interpolation="nearest"), "interpolation"),
    (lambda: T.RandomResizedCrop(32, antialias=False), "antialias"),
    (lambda: T.Resize(32, max_size=64), "max_size"),
    (lambda: T.ConvertImageDtype("float64"), "dtype"),
    (lambda: T.Compose([lambda im: im]), "not a seedpipe.transforms"),
    (lambda: T.Compose([T.Normalize(MEAN, STD), T.RandomHorizontalFlip()]).spec(), "last"),
    (lambda: T.Compose([T.Resize(32), T.Normalize(MEAN, STD)]).spec(), "ToTensor"),
])
def test_unsupported_arguments_are_named(make, word):
    with pytest.raises(ValueError, match=word):
        make()


def test_torchvision_enums_accepted():
    tv = pytest.importorskip("torchvision.transforms")
    r = T.Resize(32, interpolation=tv.InterpolationMode.BILINEAR, antialias=True)
    assert r.spec() == "resize size=32"
    r = T.Resize(32, interpolation=tv.InterpolationMode.BICUBIC)
    assert r.spec() == "resize size=32 interpolation=bicubic"
    with pytest.raises(ValueError, match="interpolation"):
        T.Resize(32, interpolation=tv.InterpolationMode.NEAREST)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_outputs_are_float32_rounded(shapes, dtype):
    spec = ("random_resized_crop size=24 | hflip | "
            "normalize mean=0.485,0.456,0.406 std=0.229,0.224,0.225")
    kw = dict(pipeline=spec, seed=5, batch_size=8, epochs=1)
    with seedpipe.Loader(shapes, dtype="float32", **kw) as a, \
         seedpipe.Loader(shapes, dtype=dtype, **kw) as b:
        assert b.dtype.itemsize == 2
        for (x, _), (h, _) in zip(a, b):
            if dtype == "float16":
                assert h.dtype == np.float16
                np.testing.assert_array_equal(h, x.astype(np.float16))   # numpy rounds RNE
            else:
                u = x.view(np.uint32).astype(np.uint64)
                want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
                np.testing.assert_array_equal(h.view(np.uint16), want)
                torch = pytest.importorskip("torch")
                from seedpipe.torch import to_tensor
                t = to_tensor(h)
                assert t.dtype == torch.bfloat16 and t.data_ptr() == h.ctypes.data
                assert torch.equal(t, torch.from_numpy(np.array(x)).to(torch.bfloat16))
            assert h.nbytes * 2 == x.nbytes


def test_bfloat16_through_pool_and_cache(shapes, tmp_path):
    spec = "random_resized_crop size=24 | normalize mean=0.5 std=0.25"
    ref = digests(shapes, spec, dtype="bfloat16")
    assert digests(shapes, spec, dtype="bfloat16", workers=2) == ref
    cache = str(tmp_path / "cache")
    assert digests(shapes, spec, dtype="bfloat16", cache=cache) == ref   # cold
    assert digests(shapes, spec, dtype="bfloat16", cache=cache, workers=2) == ref   # warm
    assert ref != digests(shapes, spec, dtype="float16")

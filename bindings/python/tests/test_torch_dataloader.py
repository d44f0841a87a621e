"""seedpipe.torch.DataLoader: a drop-in for torch's over an image folder,
torchvision transforms converted, StatefulDataLoader-style resume at any
num_workers."""
import pytest

import seedpipe
from seedpipe import transforms as T

torch = pytest.importorskip("torch", reason="torch (python3-torch) not installed")
tv = pytest.importorskip("torchvision", reason="torchvision (python3-torchvision) not installed")
from seedpipe.torch import DataLoader  # noqa: E402

TV = tv.transforms.Compose([tv.transforms.RandomResizedCrop(24), tv.transforms.RandomHorizontalFlip(),
                            tv.transforms.ColorJitter(0.3, 0.3, 0.3), tv.transforms.ToTensor(),
                            tv.transforms.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))])


def test_torchvision_transforms_convert(shapes):
    mine = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(),
                      T.ColorJitter(0.3, 0.3, 0.3), T.ToTensor(),
                      T.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))])
    conv = T.from_torchvision(TV)
    fps = []
    for c in (conv, mine):   # the same canonical pipeline and dtype
        with seedpipe.Loader(shapes, pipeline=c, batch_size=8) as ld:
            fps.append(ld.fingerprint)
    assert fps[0] == fps[1], (conv.spec(), mine.spec())
    with pytest.raises(ValueError, match="RandomPerspective"):
        T.from_torchvision(tv.transforms.Compose([tv.transforms.RandomPerspective()]))
    with pytest.raises(ValueError, match="expand"):
        T.from_torchvision(tv.transforms.RandomRotation(10, expand=True))
    geom = tv.transforms.Compose([
        tv.transforms.RandomCrop(24, padding=4, padding_mode="reflect"),
        tv.transforms.RandomRotation(10, interpolation=tv.transforms.InterpolationMode.BILINEAR),
        tv.transforms.GaussianBlur(5), tv.transforms.ToTensor(),
        tv.transforms.RandomErasing(value="random")])
    assert T.from_torchvision(geom).spec() == (
        "random_crop size=24,24 padding=4 pad_mode=reflect fill=0 pad_if_needed=0 | rotate "
        "degrees=-10.0,10.0 interpolation=bilinear fill=0.0 | gaussian_blur kernel=5,5 "
        "sigma=0.1,2.0 | normalize mean=0 std=1 | random_erasing p=0.5 scale=0.02,0.33 "
        "ratio=0.3,3.3 value=random")
    assert T.from_torchvision(tv.transforms.ColorJitter(hue=0.1)).spec() == (
        "color_jitter brightness=1.0,1.0 contrast=1.0,1.0 saturation=1.0,1.0 hue=-0.1,0.1")
    tvt = tv.transforms
    pix = tvt.Compose([tvt.RandomInvert(), tvt.RandomPosterize(3, p=0.2), tvt.RandomSolarize(
        100.5), tvt.RandomAutocontrast(p=1), tvt.RandomEqualize(0.3),
        tvt.RandomAdjustSharpness(1.5), tvt.ColorJitter(0.2, hue=(-0.1, 0.25))])
    assert T.from_torchvision(pix).spec() == (
        "invert p=0.5 | posterize bits=3 p=0.2 | solarize threshold=100.5 p=0.5 | "
        "autocontrast p=1.0 | equalize p=0.3 | sharpness factor=1.5 p=0.5 | color_jitter "
        "brightness=0.8,1.2 contrast=1.0,1.0 saturation=1.0,1.0 hue=-0.1,0.25")
    ra = tvt.RandomApply(torch.nn.ModuleList([tvt.ColorJitter(0.4, 0.4, 0.4, 0.1)]), p=0.8)
    assert T.from_torchvision(tvt.Compose([ra, tvt.RandomGrayscale(0.2)])).spec() == (
        "random_apply ops=1 p=0.8 | color_jitter brightness=0.6,1.4 contrast=0.6,1.4 "
        "saturation=0.6,1.4 hue=-0.1,0.1 | grayscale p=0.2")


def test_drop_in_over_an_imagefolder(shapes):
    ds = tv.datasets.ImageFolder(shapes, transform=TV)
    dl = DataLoader(ds, batch_size=8, shuffle=True, num_workers=0, seed=4)
    assert len(dl) == 8   # 60 samples, batch 8
    batches = list(dl)
    assert len(batches) == 8
    x, y = batches[0]
    assert x.dtype == torch.float32 and x.shape == (8, 3, 24, 24)
    assert y.dtype == torch.int64 and int(y.max()) < len(ds.classes)
    again = [b[1].tolist() for b in dl]   # the next epoch: other order
    assert again != [b[1].tolist() for b in batches]
    dl.set_epoch(0)
    assert [b[1].tolist() for b in dl] == [b[1].tolist() for b in batches]
    seq = DataLoader(ds, batch_size=8, shuffle=False)   # the ImageFolder's index order
    assert [l for _, y in seq for l in y.tolist()] == ds.targets
    with pytest.raises(ValueError, match="collate_fn"):
        DataLoader(shapes, batch_size=8, collate_fn=lambda b: b)
    with pytest.raises(TypeError, match="nonsense"):
        DataLoader(shapes, batch_size=8, nonsense=1)


def test_resume_at_another_num_workers(shapes):
    def run(workers, state=None, take=None):
        dl = DataLoader(shapes, batch_size=8, num_workers=workers, seed=7, transform=TV)
        if state is not None:
            dl.load_state_dict(state)
        out, st = [], None
        for i, (x, y) in enumerate(dl):
            out.append((x.clone(), y.clone()))
            if take is not None and i + 1 == take:
                st = dl.state_dict()
                break
        dl.close()
        return out, st
    full, _ = run(0)
    head, st = run(2, take=3)
    tail, _ = run(3, state=st)
    got = head + tail
    assert len(got) == len(full) == 8
    for (a, b), (c, d) in zip(got, full):
        assert torch.equal(a, c) and torch.equal(b, d)


def test_bfloat16_tensors(shapes):
    dl = DataLoader(shapes, batch_size=8, transform=TV, dtype="bfloat16", seed=1)
    ref = DataLoader(shapes, batch_size=8, transform=TV, seed=1)
    (x, _), (r, _) = next(iter(dl)), next(iter(ref))
    assert x.dtype == torch.bfloat16 and torch.equal(x, r.to(torch.bfloat16))


def test_the_example_converts_in_a_few_lines(shapes):
    import difflib
    import os
    import subprocess
    import sys
    ex = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "imagefolder")
    a, b = (open(os.path.join(ex, f)).read().splitlines()
            for f in ("train_torchvision.py", "train_seedpipe.py"))
    changed = [l for l in difflib.unified_diff(a, b, lineterm="", n=0)
               if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    code = [l for l in changed if not l[1:].lstrip().startswith(('"""', "examples/", "(the"))
            and "train_" not in l]
    assert len(code) <= 8, changed
    env = dict(os.environ, PYTHONPATH=os.path.dirname(seedpipe.__path__[0]))
    outs = []
    for script, workers in (("train_torchvision.py", "0"), ("train_seedpipe.py", "0"),
                            ("train_seedpipe.py", "2")):
        p = subprocess.run([sys.executable, os.path.join(ex, script), shapes, "--epochs", "1",
                            "--workers", workers], capture_output=True, text=True, timeout=300,
                           env=env)
        assert p.returncode == 0, (script, p.stderr)
        assert "epoch 0: loss" in p.stdout, p.stdout
        outs.append(p.stdout)
    assert outs[1] == outs[2]   # seedpipe: the same loss for any number of workers

#!/usr/bin/env python3
"""test_order_ref.py - the sequential order, the padded tail and the strided
rank slices (docs/determinism.md section 7a) against two independent
references.

Run by ctest with python3 (standard library; torch when it imports). Checks:
  1. tests/philox_ref.py's rank_positions() (written from the spec) equals
     torch.utils.data.DistributedSampler's algorithm, written out here from
     its documentation (shuffle=False: range(n), padded by repeating its own
     head to a multiple of world, rank r takes indices[r::world]) and then
     cut into DataLoader batches of B/world; and equals
     torch.utils.data.DistributedSampler itself when `import torch` works
     (else that part is skipped, and said so);
  2. the C library's pure sampler (sp__batch_span + sp_batch_position through
     ctypes, $SP_BUILD_DIR/libseedpipe.so) equals rank_positions() for every
     layout, n, B, world, rank and batch of a grid;
  3. end to end: loaders created through the Python package's ctypes struct
     mirror (bindings/python/seedpipe/_lib.py, loaded by path, so the new
     order / pad_tail fields are exercised) on a shapes dataset of 37
     samples give, for world 1, 2, 3 and each rank, the sample indices that
     DistributedSampler(shuffle=False) + DataLoader(batch_size=B/world) give
     (sequential order, pad_tail), and rank_indices() for the shuffled
     order with pad_tail; and every rank gets the same count, never 0;
  4. the ImageFolder canonical order (byte-wise sorted relative paths)
     against torchvision.datasets.ImageFolder's index order (its
     make_dataset() written out: classes sorted, then per class
     sorted(os.walk(class_dir, followlinks=True)) and sorted(fnames); and
     torchvision itself when it imports): equal on a flat folder, and on a
     nested one different exactly as include/seedpipe/dataset.h says.
Exit 77 (skip) when the library cannot be loaded.
"""
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import philox_ref as R  # noqa: E402
from cli_testlib import reexec_for  # noqa: E402

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL: " + msg, file=sys.stderr)


def ddp_documented(n, world, rank, batch, drop_last_loader=False):
    """DistributedSampler(shuffle=False, drop_last=False) + DataLoader(batch_size
    = batch // world), from torch's documented algorithm: the rank's batches of
    dataset indices."""
    indices = list(range(n))
    total = -(-n // world) * world
    pad = total - n
    if pad <= n:
        indices += indices[:pad]
    else:
        indices += (indices * -(-pad // n))[:pad]
    mine = indices[rank:total:world]
    b = batch // world
    out = [mine[i:i + b] for i in range(0, len(mine), b)]
    if drop_last_loader and out and len(out[-1]) < b:
        out.pop()
    return out


def ddp_torch(n, world, rank, batch, drop_last_loader=False):
    import torch.utils.data as tud
    ds = list(range(n))
    s = tud.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    dl = tud.DataLoader(ds, batch_size=batch // world, sampler=s, drop_last=drop_last_loader)
    return [[int(x) for x in t] for t in dl]


def ref_batches(n, world, rank, batch, drop_last=False):
    bt = []
    b = 0
    while True:
        p = R.rank_positions(n, batch, drop_last, rank, world, b, "sequential", True)
        if not p:
            return bt
        bt.append(p)
        b += 1


def part1():
    try:
        import torch  # noqa: F401
        have_torch = True
    except Exception as e:   # noqa: BLE001
        have_torch = False
        print("SKIP (part 1b): import torch failed (%s): DistributedSampler itself not compared"
              % type(e).__name__)
    n_cases = 0
    for n in (1, 2, 5, 7, 10, 11, 37):
        for world in (1, 2, 3, 4):
            for per in (1, 2, 3):
                batch = world * per
                for dl in (False, True):
                    for rank in range(world):
                        want = ddp_documented(n, world, rank, batch, dl)
                        got = ref_batches(n, world, rank, batch, dl)
                        check(got == want, "ref vs documented DistributedSampler n=%d world=%d "
                              "rank=%d B=%d drop_last=%s: %s vs %s" % (n, world, rank, batch,
                                                                       dl, got, want))
                        if have_torch:
                            t = ddp_torch(n, world, rank, batch, dl)
                            check(t == want, "torch DistributedSampler n=%d world=%d rank=%d "
                                  "B=%d: %s vs documented %s" % (n, world, rank, batch, t, want))
                        n_cases += 1
    print("part 1: %d rank streams equal DistributedSampler's (%s)"
          % (n_cases, "documented algorithm and torch" if have_torch else "documented algorithm"))


class Batching(ctypes.Structure):   # sp_batching (sampler.h)
    _fields_ = [("n", ctypes.c_uint64), ("batch_size", ctypes.c_uint32),
                ("drop_last", ctypes.c_int), ("rank", ctypes.c_uint32),
                ("world", ctypes.c_uint32), ("pad_tail", ctypes.c_int),
                ("strided", ctypes.c_int)]


def part2(lib):
    lib.sp_batches_per_epoch.restype = ctypes.c_uint64
    lib.sp_batch_position.restype = ctypes.c_uint64
    lib.sp_batch_position.argtypes = [ctypes.POINTER(Batching), ctypes.c_uint64]
    lib.spt_batch_span.argtypes = [ctypes.POINTER(Batching), ctypes.c_uint64, ctypes.c_uint32,
                                  ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)]
    n_cases = 0
    for n in (1, 3, 7, 10, 11, 37, 64):
        for world in (1, 2, 3, 4):
            for per in (1, 2, 5):
                for dl in (0, 1):
                    for pad in (0, 1):
                        for order in ("shuffle", "sequential"):
                            for rank in range(world):
                                bt = Batching(n, world * per, dl, rank, world, pad,
                                              order == "sequential")
                                nb = lib.sp_batches_per_epoch(ctypes.byref(bt))
                                for b in range(nb + 1):
                                    pos, cnt = ctypes.c_uint64(), ctypes.c_uint32()
                                    lib.spt_batch_span(ctypes.byref(bt), b, 1, ctypes.byref(pos),
                                                      ctypes.byref(cnt))
                                    got = [lib.sp_batch_position(ctypes.byref(bt), pos.value + k)
                                           for k in range(cnt.value)]
                                    want = R.rank_positions(n, world * per, dl, rank, world, b,
                                                            order, pad)
                                    check(got == want, "C vs ref n=%d B=%d dl=%d pad=%d %s "
                                          "rank %d/%d batch %d: %s vs %s" %
                                          (n, world * per, dl, pad, order, rank, world, b, got,
                                           want))
                                    n_cases += 1
    print("part 2: %d (layout, rank, batch) cases of the C sampler equal the reference" % n_cases)


def load_mirror(build):
    os.environ["SEEDPIPE_LIB"] = os.path.join(build, "libseedpipe.so")
    path = os.path.join(os.environ.get("SP_SOURCE_DIR", os.path.dirname(HERE)), "bindings",
                        "python", "seedpipe", "_lib.py")
    spec = importlib.util.spec_from_file_location("sp_lib_mirror", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def loader_indices(L, root, order, pad, rank, world, batch, seed=9, epoch=1):
    cfg = L.sp_loader_config()
    L.sp_loader_config_default(ctypes.byref(cfg))
    cfg.dataset = root.encode()
    cfg.pipeline = b"resize size=16,16"
    cfg.seed = seed
    cfg.batch_size = batch
    cfg.rank = rank
    cfg.world = world
    cfg.order = L.ORDERS[order]
    cfg.pad_tail = pad
    ld = ctypes.c_void_p()
    err = L.sp_error()
    rc = L.sp_loader_create(ctypes.byref(cfg), ctypes.byref(ld), ctypes.byref(err))
    if rc != 0:
        raise RuntimeError(err.msg.decode())
    b = L.sp_batch()
    L.sp_batch_alloc(ld, ctypes.byref(b))
    out = []
    for k in range(L.loader_info(ld).batches_per_epoch):
        rc = L.sp_loader_batch(ld, epoch, k, ctypes.byref(b), ctypes.byref(err))
        if rc != 0:
            raise RuntimeError(err.msg.decode())
        idx = ctypes.cast(b.indices, ctypes.POINTER(ctypes.c_uint64))
        out.append([int(idx[i]) for i in range(b.count)])
    L.sp_batch_free(ctypes.byref(b))
    L.sp_loader_destroy(ld)
    return out


def part3(build):
    L = load_mirror(build)
    bin_ = os.environ.get("SEEDPIPE_BIN", os.path.join(build, "seedpipe"))
    with tempfile.TemporaryDirectory(prefix="sp-order-ref-") as tmp:
        root = os.path.join(tmp, "shapes")
        subprocess.run([bin_, "make-shapes", root, "--count", "37", "--size", "16", "--seed", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        n = 37
        for world in (1, 2, 3):
            batch = 2 * world
            counts = None
            for rank in range(world):
                seq = loader_indices(L, root, "sequential", 1, rank, world, batch)
                check(seq == ddp_documented(n, world, rank, batch),
                      "loader sequential+pad rank %d/%d: %s" % (rank, world, seq))
                shuf = loader_indices(L, root, "shuffle", 1, rank, world, batch)
                want = [R.rank_indices(n, 9, 1, batch, False, rank, world, b, "shuffle", True)
                        for b in range(len(shuf))]
                check(shuf == want, "loader shuffle+pad rank %d/%d: %s vs %s"
                      % (rank, world, shuf, want))
                c = [len(x) for x in seq] + [len(x) for x in shuf]
                check(min(c) > 0, "an empty batch at rank %d/%d" % (rank, world))
                counts = counts or c
                check(c == counts, "rank %d/%d batch sizes %s, rank 0's %s" % (rank, world, c,
                                                                                counts))
            print("part 3: world %d: every rank's loader indices equal DistributedSampler's "
                  "(sequential) and the reference's (shuffle), same counts, none empty" % world)


def torchvision_order(root):
    """torchvision ImageFolder's samples (relative paths), from its code."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    out = []
    for c in classes:
        for d, _, fnames in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            for f in sorted(fnames):
                if f.lower().endswith((".png", ".jpg", ".jpeg")):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def seedpipe_order(bin_, root):
    r = subprocess.run([bin_, "split", root, "--split", "all=1", "--subset", "all"],
                       check=True, capture_output=True, text=True,
                       env=dict(os.environ, SEEDPIPE_INDEX="off"))
    return [x for x in r.stdout.splitlines() if x]


def part4(build):
    bin_ = os.environ.get("SEEDPIPE_BIN", os.path.join(build, "seedpipe"))
    try:
        import torchvision.datasets as tvd
    except Exception as e:   # noqa: BLE001
        tvd = None
        print("SKIP (part 4b): import torchvision failed (%s): its ImageFolder itself not "
              "compared" % type(e).__name__)
    with tempfile.TemporaryDirectory(prefix="sp-order-tv-") as tmp:
        src = os.path.join(tmp, "shapes")
        subprocess.run([bin_, "make-shapes", src, "--count", "6", "--size", "16", "--seed", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        img = None
        for d, _, fs in os.walk(src):
            img = img or next((os.path.join(d, f) for f in fs if f.endswith(".png")), None)
        with open(img, "rb") as fh:
            data = fh.read()
        trees = {"flat": ["cat/1.png", "cat/1-a.png", "cat/10.png", "dog/b.png", "dog_x/a.png"],
                 "nested": ["a/b.png", "a/z.png", "a/a/c.png", "a/b/c.png", "a/b-c.png",
                            "a/b-c/d.png", "a-b/x.png"]}
        for name, files in trees.items():
            root = os.path.join(tmp, name)
            for f in files:
                os.makedirs(os.path.dirname(os.path.join(root, f)), exist_ok=True)
                with open(os.path.join(root, f), "wb") as fh:
                    fh.write(data)
            sp = seedpipe_order(bin_, root)
            tv = torchvision_order(root)
            check(sp == sorted(files, key=lambda x: x.encode()),
                  "%s: seedpipe's order is not byte-wise sorted: %s" % (name, sp))
            if tvd is not None:
                real = [os.path.relpath(p, root) for p, _ in tvd.ImageFolder(root).samples]
                check(real == tv, "%s: torchvision %s, its written-out algorithm %s"
                      % (name, real, tv))
            if name == "flat":
                check(sp == tv, "flat folder: seedpipe %s, torchvision %s" % (sp, tv))
            else:   # the documented difference (dataset.h)
                check(tv == ["a/b-c.png", "a/b.png", "a/z.png", "a/a/c.png", "a/b/c.png",
                             "a/b-c/d.png", "a-b/x.png"], "nested torchvision order %s" % tv)
                check(sp == ["a-b/x.png", "a/a/c.png", "a/b-c.png", "a/b-c/d.png", "a/b.png",
                             "a/b/c.png", "a/z.png"], "nested seedpipe order %s" % sp)
        print("part 4: ImageFolder order equals torchvision's on a flat folder, differs on a "
              "nested one exactly as documented%s" % ("" if tvd else " (algorithm only)"))


def main():
    part1()
    build = os.environ.get("SP_BUILD_DIR", os.path.join(os.path.dirname(HERE), "build"))
    reexec_for(os.path.join(build, "libseedpipe.so"))   # a sanitizer build: runtimes first
    try:
        # the public API and spt_batch_span (sp__batch_span; tests/testing_lib.c)
        lib = ctypes.CDLL(os.path.join(build, "libseedpipe_testing.so"))
    except OSError as e:
        print("SKIP: cannot load %s/libseedpipe_testing.so (%s)" % (build, e))
        return 77 if not FAILURES else 1
    part2(lib)
    part3(build)
    part4(build)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES), file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

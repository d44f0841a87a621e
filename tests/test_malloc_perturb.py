"""test_malloc_perturb.py - no batch byte depends on what memory held before.

glibc's MALLOC_PERTURB_=N fills every malloc'd block with N ^ 0xff and
every freed one with N, so a byte that the pipeline forgets to write (or a
read of memory it never wrote) comes out different for each N. Over a
matrix of pipelines (every geometric op at every size relation that broke
before: center_crop at n+1 on one and both axes, padding, resize |
center_crop on portrait and landscape images, random_resized_crop with
jitter and normalize) and output types and layouts, on an ImageFolder of
PNGs of mixed sizes (portrait, landscape, square, a 1-pixel-wide strip):
the manifest of every run must be identical for MALLOC_PERTURB_ unset, 85
and 170, in-process with 1 and 2 threads and on 2 worker processes. Then
`seedpipe verify` (worker counts 1-3, a crash, a resume, the cache cold and
warm) must be clean on the n+1 crop and on resize | center_crop over
portraits.
"""
import os
import struct
import sys
import tempfile
import zlib

import cli_testlib as t

SIZES = [(10, 10), (9, 13), (13, 9), (1, 5), (16, 16), (11, 12), (12, 10)]   # (w, h)

# (pipeline, extra digest options)
MATRIX = [
    ("center_crop size=11", []),                       # +1 on both axes of 10x10
    ("center_crop size=11,10", ["--layout", "nhwc"]),  # +1 on one axis
    ("center_crop size=14,17", []),                    # pads by 2..16
    ("resize size=8 | center_crop size=9,8", []),      # fused when it fits, padded when not
    ("resize size=7 | center_crop size=7 | hflip p=0.5", ["--dtype", "float32"]),
    ("random_resized_crop size=9,7 | color_jitter brightness=0.4 contrast=0.4 saturation=0.4"
     " | normalize mean=0.5 std=0.25", ["--dtype", "bfloat16"]),
    ("decode mode=gray | center_crop size=12 | vflip p=0.5", ["--dtype", "float16"]),
]


def png(w, h, seed):
    """A 24-bit PNG of w x h pseudo-random pixels (stdlib only)."""
    rows = b""
    x = seed * 2654435761 & 0xffffffff
    for _ in range(h):
        row = bytearray([0])
        for _ in range(3 * w):
            x = (x * 1103515245 + 12345) & 0x7fffffff
            row.append(x >> 16 & 0xff)
        rows += bytes(row)

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def make_folder(root):
    for c in range(2):
        os.makedirs(os.path.join(root, f"class{c}"))
        for i, (w, h) in enumerate(SIZES):
            with open(os.path.join(root, f"class{c}", f"img{i}.png"), "wb") as f:
                f.write(png(w, h, 7 * c + i))


def manifest(ds, spec, extra, mode, perturb, out):
    env = {"MALLOC_PERTURB_": "" if perturb is None else str(perturb)}   # "": off
    t.run("digest", ds, "--pipeline", spec, "--seed", 3, "--epochs", 2, "--batch-size", 4,
          *mode, *extra, "--out", out, env=env)
    with open(out) as f:
        lines = f.read().splitlines()
    return lines[1:]   # the header names the run's options; the batches must agree


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ds = os.path.join(tmp, "mixed")
        make_folder(ds)
        out = os.path.join(tmp, "m.jsonl")
        for spec, extra in MATRIX:
            ref = None
            for mode in (["--threads", 1], ["--threads", 2], ["--workers", 2]):
                for perturb in (None, 85, 170):
                    got = manifest(ds, spec, extra, mode, perturb, out)
                    assert len(got) == 8, (spec, got)
                    if ref is None:
                        ref = got
                    assert got == ref, (f"{spec} {extra}: {mode} with MALLOC_PERTURB_={perturb} "
                                        f"differs:\n{got}\nvs\n{ref}")
            print(f"{spec} {' '.join(extra)}: 9 runs equal")
        for spec in ("center_crop size=11", "resize size=8 | center_crop size=9,8"):
            p = t.run("verify", ds, "--pipeline", spec, "--seed", 5, "--epochs", 2,
                      "--batch-size", 4, "--workers", "1,2,3", timeout=300,
                      env={"MALLOC_PERTURB_": "85"})
            assert "MISMATCH" not in p.stdout and p.returncode == 0, p.stdout + p.stderr
            print(f"verify {spec}: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())

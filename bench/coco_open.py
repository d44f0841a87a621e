#!/usr/bin/env python3
"""Open time and peak RSS of a COCO train2017-scale instances JSON.

    python3 bench/coco_open.py BUILD_DIR [--mb 500] [--dir /tmp/coco-bench]

Writes a synthetic COCO-shaped file of about --mb MB (118,287 images, as
train2017; annotations with a 1 to 3 polygon segmentation each, COCO's
number formatting, until the size is reached) and a list file naming the
images, then measures, each in its own process, in this run:

  seedpipe   bench_coco_open (the --annotations reader), segmentations
             checked only (masks=none) and kept (masks=instance)
  json.load  Python's json module (the file to Python objects)
  COCO()     pycocotools' COCO(file) (json.load + its indexes), when a
             venv with pycocotools is at $SP_PYCOCOTOOLS_VENV (default
             /tmp/seedpipe-pycocotools-venv, the one test_masks.py makes)

Peak RSS is ru_maxrss of the process that opened the file; "base" is the
same process before the open (the interpreter, the dataset). Prints a
Markdown table for bench/RESULTS.md.
"""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time

N_IMAGES = 118287


def write_file(path, mb):
    rnd = random.Random(0)
    target = mb * 1000 * 1000
    with open(path, "w") as f:
        f.write('{"info": {"description": "synthetic"}, "licenses": [], "images": [')
        f.write(", ".join('{"license": 1, "file_name": "images/%012d.jpg", "height": 480, '
                          '"width": 640, "id": %d}' % (i, i) for i in range(N_IMAGES)))
        f.write('], "annotations": [')
        n, size = 0, f.tell()
        while size < target:
            chunk = []
            for _ in range(1000):
                img = rnd.randrange(N_IMAGES)
                x, y = rnd.uniform(0, 600), rnd.uniform(0, 440)
                polys = []
                for _ in range(rnd.randint(1, 3)):
                    pts = rnd.randint(8, 40)
                    polys.append("[" + ",".join("%.2f" % (rnd.uniform(x, x + 40) if k % 2 == 0
                                                          else rnd.uniform(y, y + 40))
                                                for k in range(2 * pts)) + "]")
                chunk.append('{"segmentation": [%s], "area": 702.1, "iscrowd": 0, '
                             '"image_id": %d, "bbox": [%.2f, %.2f, 40.0, 40.0], '
                             '"category_id": %d, "id": %d}'
                             % (",".join(polys), img, x, y, rnd.randint(1, 90), n))
                n += 1
            f.write((", " if n > len(chunk) else "") + ", ".join(chunk))
            size = f.tell()
        f.write('], "categories": [%s]}' % ", ".join(
            '{"supercategory": "s", "id": %d, "name": "c%d"}' % (i, i) for i in range(1, 91)))
    return n


PEER = r'''
import json, resource, sys, time
def mb(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
base = mb()
t = time.perf_counter()
if sys.argv[1] == "json":
    d = json.load(open(sys.argv[2]))
    n = len(d["annotations"])
else:
    from pycocotools.coco import COCO
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        d = COCO(sys.argv[2])
    n = len(d.anns)
print("open_s=%.3f peak_rss_mb=%.1f base_rss_mb=%.1f boxes=%d" % (time.perf_counter() - t, mb(), base, n))
'''


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="coco-bench-")
    os.makedirs(d, exist_ok=True)
    js, lst = os.path.join(d, "instances.json"), os.path.join(d, "list.txt")
    t = time.perf_counter()
    if not os.path.exists(js):
        n = write_file(js, a.mb)
        print("wrote %s: %d annotations, %.0f MB in %.0f s" % (js, n, os.path.getsize(js) / 1e6,
                                                               time.perf_counter() - t),
              file=sys.stderr)
    img = os.path.join(d, "images")
    if not os.path.isdir(img):   # the list file's samples must exist (1 byte each)
        os.makedirs(img)
        for i in range(N_IMAGES):
            with open(os.path.join(img, "%012d.jpg" % i), "wb") as f:
                f.write(b"x")
    with open(lst, "w") as f:
        f.writelines("images/%012d.jpg\t0\n" % i for i in range(N_IMAGES))
    exe = os.path.join(a.build, "bench", "bench_coco_open")
    rows = [("seedpipe (masks=none: segmentations checked)", run([exe, lst, js, "0"])),
            ("seedpipe (masks=instance: segmentations kept)", run([exe, lst, js, "1"])),
            ("Python json.load", run([sys.executable, "-c", PEER, "json", js]))]
    venv = os.environ.get("SP_PYCOCOTOOLS_VENV", "/tmp/seedpipe-pycocotools-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.exists(py):
        rows.append(("pycocotools COCO()", run([py, "-c", PEER, "coco", js])))
    ref = rows[2][1]
    print("file: %.0f MB, %d annotations" % (os.path.getsize(js) / 1e6, rows[0][1]["boxes"]))
    print("| reader | open s | peak RSS MB | RSS added MB | time vs json.load | RSS added vs json.load |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        add, radd = r["peak_rss_mb"] - r["base_rss_mb"], ref["peak_rss_mb"] - ref["base_rss_mb"]
        print("| %s | %.2f | %.0f | %.0f | %.2fx | %.3fx |" % (
            name, r["open_s"], r["peak_rss_mb"], add, r["open_s"] / ref["open_s"], add / radd))


if __name__ == "__main__":
    main()

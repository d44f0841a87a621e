"""test_folder_walk.py - the ImageFolder walk, as a property, and its budget.

The walk (dataset/dataset_folder.c, include/seedpipe/dataset.h) reads each
real directory once: sub-folders in byte-wise order after the files; a
second path to a directory already read (a symlink sideways, a class linked
to another) is an error naming it, as are a link back to an enclosing
folder and a dangling link named like an image. Here 200 random trees (folders, image files, other files,
hidden entries, symlinks to siblings, cousins, other classes, ancestors,
files and nowhere) are opened with `seedpipe split` (which lists every
sample path) and compared with a plain reference of that rule written in
this file: the same paths in the same order, or an error exactly when the
reference has one (naming the path). Then the tree that used to explode
(31 folders, each with two links to the next: 2^30 paths; 21 took 41 s and
31 never ended) is refused at once, naming the second path, and readdir
order never matters (the same tree built in two creation orders gives the
same list).
"""
import os
import random
import sys
import tempfile

import cli_testlib as t

IMG = (".png", ".jpg", ".jpeg")


class WalkError(Exception):
    pass


def is_img(name):
    """.png, .jpg or .jpeg in any case, after at least one character."""
    return any(name.lower().endswith(x) and len(name) > len(x) for x in IMG)


def reference(root):
    """The documented walk: sample paths relative to root, in the byte-wise
    order the dataset sorts them into, or WalkError."""
    def dir_id(p):
        st = os.stat(p)
        return (st.st_dev, st.st_ino)

    seen = {dir_id(root)}
    out = []

    def walk(d, rel, stack):
        subs = []
        for name in os.listdir(d):
            if name.startswith("."):
                continue
            full = os.path.join(d, name)
            try:
                os.stat(full)
            except OSError:
                if is_img(name):
                    raise WalkError(full)
                continue
            if os.path.isdir(full):
                subs.append(name)
            elif os.path.isfile(full) and is_img(name):
                out.append(f"{rel}/{name}")
        for name in sorted(subs, key=lambda s: s.encode()):
            full = os.path.join(d, name)
            i = dir_id(full)
            if i in stack or i in seen:
                raise WalkError(full)
            seen.add(i)
            walk(full, f"{rel}/{name}", stack + [i])

    classes = sorted((c for c in os.listdir(root) if not c.startswith(".")
                      and os.path.isdir(os.path.join(root, c))), key=lambda s: s.encode())
    for c in classes:
        i = dir_id(os.path.join(root, c))
        if i in seen:
            raise WalkError(os.path.join(root, c))
        seen.add(i)
        walk(os.path.join(root, c), c, [dir_id(root), i])
    return sorted(out, key=lambda s: s.encode())


def listing(root):
    p = t.run("split", root, "--split", "a=1", "--subset", "a", ok=False,
              env={"SEEDPIPE_INDEX": "off"}, timeout=60)
    if p.returncode != 0:
        return None, p.stderr
    return p.stdout.splitlines(), p.stderr


def random_tree(rnd, root, order):
    dirs = []
    for c in range(rnd.randint(1, 3)):
        dirs.append(f"c{c}")
    for _ in range(rnd.randint(0, 8)):
        dirs.append(rnd.choice(dirs) + f"/d{len(dirs)}")
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    files = []
    for _ in range(rnd.randint(0, 12)):
        d = rnd.choice(dirs)
        name = rnd.choice(["a.png", "b.JPG", "c.jpeg", "x.txt", ".h.png", "e.png", "f.jpg"])
        files.append(f"{d}/{len(files)}{name}" if not name.startswith(".") else f"{d}/{name}")
    links = []
    for _ in range(rnd.randint(0, 4)):
        d = rnd.choice(dirs)
        kind = rnd.random()
        if kind < 0.55:
            target = os.path.join(root, rnd.choice(dirs))          # sideways, or up
        elif kind < 0.75 and files:
            target = os.path.join(root, rnd.choice(files))
        elif kind < 0.95:
            target = os.path.join(root, "nowhere")
        else:
            target = root
        name = f"L{len(links)}" + (".png" if 0.75 <= kind < 0.95 and rnd.random() < 0.3 else "")
        links.append((f"{d}/{name}", target))
    items = [("f", f) for f in files] + [("l", l) for l in links]
    if order:
        items.reverse()
    for kind, it in items:
        if kind == "f":
            p = os.path.join(root, it)
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(it.encode())
        else:
            p = os.path.join(root, it[0])
            if not os.path.lexists(p):
                os.symlink(it[1], p)


def main():
    rnd = random.Random(2612)
    agree_ok = agree_err = 0
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(200):
            root = os.path.join(tmp, f"t{trial}")
            os.makedirs(root)
            seed = rnd.randrange(1 << 30)
            random_tree(random.Random(seed), root, 0)
            try:
                want = reference(root)
            except WalkError as e:
                want = e
            got, stderr = listing(root)
            if isinstance(want, WalkError):
                assert got is None, f"trial {trial}: accepted, the reference refuses at {want}"
                assert str(want) in stderr, (trial, str(want), stderr)
                agree_err += 1
            elif not want:
                assert got is None and "no images" in stderr, (trial, got, stderr)
                agree_ok += 1
            else:
                assert got == want, f"trial {trial}:\n{got}\nvs reference\n{want}"
                other = os.path.join(tmp, f"r{trial}")   # the same tree, made in another order
                os.makedirs(other)
                random_tree(random.Random(seed), other, 1)
                got2, _ = listing(other)
                assert got2 == got, f"trial {trial}: creation order changed the walk"
                agree_ok += 1
        chain = os.path.join(tmp, "chain", "c")
        for i in range(31):
            os.makedirs(os.path.join(chain, f"s{i}"))
            with open(os.path.join(chain, f"s{i}", "img.png"), "wb") as f:
                f.write(b"%d" % i)
        for i in range(30):
            for k in (1, 2):
                os.symlink(f"../s{i + 1}", os.path.join(chain, f"s{i}", f"l{k}"))
        got, stderr = listing(os.path.dirname(chain))
        assert got is None and stderr.startswith(f"seedpipe split: {chain}/s0/l1/") and \
            "the same folder as" in stderr, stderr
    print(f"folder walk: {agree_ok} trees listed and {agree_err} refused as the reference says; "
          f"a chain of 31 folders with 2^30 paths refused at once, naming the second path")
    assert agree_ok > 30 and agree_err > 30, (agree_ok, agree_err)
    return 0


if __name__ == "__main__":
    sys.exit(main())

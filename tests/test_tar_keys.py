"""test_tar_keys.py - the WebDataset reader's key check, as a property.

A sample is the run of adjacent members sharing a key; a key that comes
back after other keys in the same shard is an error naming the shard and
the key (the reader keeps a hash set of the shard's keys, O(1) a member;
it compared every new key with every earlier one, 80,000 members took
25 s). Here 300 random shards (keys drawn from small and large alphabets,
runs of 1-3 members, some keys repeated, some not) are written with
Python's tarfile and opened with `seedpipe inspect`: the open must fail
exactly when a plain reference says a key reappears, naming the first such
key, and otherwise list exactly the reference's sample count. The same key
in two different shards is two samples, never an error. Last, one shard of
60,000 members opens with its 30,000 samples (the old quadratic check's
worst case; no timing is asserted).
"""
import io
import os
import random
import sys
import tarfile
import tempfile

import cli_testlib as t


def write_shard(path, members):
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            tf.addfile(ti, io.BytesIO(data))


def reference(keys):
    """(number of samples, first key that reappears after other keys or None)."""
    seen, last, n = set(), None, 0
    for k in keys:
        if k == last:
            continue
        if k in seen:
            return n, k
        seen.add(k)
        last = k
        n += 1
    return n, None


def members_for(keys):
    out = []
    for i, k in enumerate(keys):
        # the first member of a run is the image, the others the label (or
        # a second label: a bad sample, but one sample all the same)
        first = i == 0 or keys[i - 1] != k
        out.append((f"{k}.png" if first else f"{k}.cls", b"\x89PNG" if first else b"1"))
    return out


def inspect(path):
    return t.run("inspect", path, ok=False, env={"SEEDPIPE_INDEX": "off"})


def main():
    rnd = random.Random(20261202)
    errors = clean = 0
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(300):
            alphabet = rnd.choice([3, 10, 1000])
            keys = []
            for _ in range(rnd.randint(1, 40)):
                k = f"s{rnd.randrange(alphabet):04d}"
                keys += [k] * rnd.randint(1, 3)
            path = os.path.join(tmp, f"t{trial}.tar")
            write_shard(path, members_for(keys))
            n, again = reference(keys)
            p = inspect(path)
            if again:
                assert p.returncode != 0, f"trial {trial}: {keys}: accepted"
                assert f'key "{again}" appears again' in p.stderr and path in p.stderr, p.stderr
                errors += 1
            else:
                assert p.returncode == 0, f"trial {trial}: {keys}: {p.stderr}"
                assert f"samples:     {n}\n" in p.stdout, (keys, p.stdout)
                clean += 1
            os.unlink(path)
        # one key in two shards: two samples
        d = os.path.join(tmp, "two")
        os.mkdir(d)
        for s in range(2):
            write_shard(os.path.join(d, f"part{s}.tar"), members_for(["a", "a", "b"]))
        p = inspect(d)
        assert p.returncode == 0 and "samples:     4\n" in p.stdout, p.stdout + p.stderr
        big = os.path.join(tmp, "big.tar")
        write_shard(big, members_for([f"k{i:06d}" for i in range(30000) for _ in range(2)]))
        p = inspect(big)
        assert p.returncode == 0 and "samples:     30000\n" in p.stdout, p.stdout + p.stderr
    print(f"tar keys: {errors} shards refused and {clean} accepted as the reference says; "
          f"one key in two shards; 60,000 members")
    assert errors > 50 and clean > 50, (errors, clean)
    return 0


if __name__ == "__main__":
    sys.exit(main())

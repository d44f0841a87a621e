"""seedpipe.Loader writes nothing into the user's data (issue 39 item 7): the
persistent index goes to the cache folder (SEEDPIPE_CACHE, set by conftest),
and the dataset's folder, hidden names included, is as it was."""
import os
import subprocess
import time

import seedpipe


def listing(root):
    out = []
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            st = os.lstat(os.path.join(dp, n))
            out.append((os.path.relpath(os.path.join(dp, n), root), st.st_size, st.st_mtime_ns))
    return sorted(out)


def test_loader_leaves_the_folder_unchanged(tmp_path, binary):
    ds = str(tmp_path / "shapes")
    subprocess.run([binary, "make-shapes", ds, "--count", "24", "--size", "24", "--seed", "2"],
                   check=True, capture_output=True)
    time.sleep(2.2)   # older than the index's racy window: an index is written
    before = listing(ds)
    cache = os.environ["SEEDPIPE_CACHE"]
    entries = set(os.listdir(cache)) if os.path.isdir(cache) else set()
    for workers in (0, 2):
        with seedpipe.Loader(ds, pipeline="shapes-train", seed=1, epochs=1, batch_size=8,
                             workers=workers) as ld:
            n = sum(1 for _ in ld.stream())
        assert n == 3
        assert listing(ds) == before, sorted(set(listing(ds)) - set(before))
    new = set(os.listdir(cache)) - entries
    assert any(e.startswith("folder-") for e in new), (new, entries)

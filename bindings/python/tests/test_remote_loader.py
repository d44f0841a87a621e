"""seedpipe.Loader over remote shards (docs/remote.md): nginx serving a
sharded shapes dataset on 127.0.0.1 (tests/remote_servers.py; skipped with
the reason when nginx cannot start). The URL gives the local shards'
fingerprint and batches, in-process and on 2 workers, in the global and the
block:2 order; a state saved over HTTP resumes on the local copy; a folder
without an index object and a missing shard are errors naming the URL."""
import contextlib
import os
import shutil
import subprocess
import sys

import pytest

import seedpipe

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
import remote_servers as rs  # noqa: E402

P = "shapes-train"
PATTERN = "shard-{000000..000007}.tar"   # 60 shapes, shards of at most 8


@pytest.fixture(scope="module")
def served(shapes, binary, tmp_path_factory):
    """(local pattern, nginx base URL, www folder) for the module's tests."""
    tmp = str(tmp_path_factory.mktemp("sp-remote"))
    os.chmod(tmp, 0o755)   # nginx's workers read it
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    subprocess.run([binary, "shard", shapes, os.path.join(www, "data"), "--max-count", "8"],
                   check=True, capture_output=True)
    shutil.copytree(os.path.join(www, "data"), os.path.join(www, "noidx"))
    os.remove(os.path.join(www, "noidx", "seedpipe.index"))
    with contextlib.ExitStack() as stack:
        try:
            ng = stack.enter_context(rs.nginx_no_proxy(www, tmp))
        except rs.Unavailable as e:
            pytest.skip(f"nginx cannot start here: {e}")
        yield os.path.join(www, "data", PATTERN), ng.url, www


def batches(data, workers, order, epochs=2):
    with seedpipe.Loader(data, pipeline=P, seed=6, batch_size=8, epochs=epochs,
                         workers=workers, order=order, copy=True) as ld:
        return ld.fingerprint, [(x.tobytes(), y.tobytes()) for x, y in ld.stream()]


@pytest.mark.parametrize("order", ["global", "block:2"])
@pytest.mark.parametrize("workers", [0, 2])
def test_url_streams_the_local_batches(served, workers, order):
    local, url, _ = served
    fp, want = batches(local, 0, order)
    got_fp, got = batches(f"{url}/data/{PATTERN}", workers, order)
    assert got_fp == fp and len(got) == len(want) == 16
    assert got == want


def test_state_from_remote_resumes_locally(served):
    local, url, _ = served
    _, want = batches(local, 0, "block:2")
    with seedpipe.Loader(f"{url}/data/", pipeline=P, seed=6, batch_size=8, epochs=2,
                         order="block:2", copy=True) as ld:
        got = []
        for x, y in ld.stream():
            got.append((x.tobytes(), y.tobytes()))
            if len(got) == 5:
                break
        state = ld.state_dict()
    with seedpipe.Loader(local, pipeline=P, seed=6, batch_size=8, epochs=2, order="block:2",
                         copy=True) as ld2:
        ld2.load_state_dict(state)
        got += [(x.tobytes(), y.tobytes()) for x, y in ld2.stream()]
    assert got == want


def test_named_errors(served):
    _, url, www = served
    with pytest.raises(seedpipe.Error) as ei:
        seedpipe.Loader(f"{url}/noidx/{PATTERN}", pipeline=P, batch_size=8)
    assert "seedpipe.index" in str(ei.value) and "404" in str(ei.value), str(ei.value)
    os.rename(os.path.join(www, "data", "shard-000003.tar"),
              os.path.join(www, "data", "gone.tar"))
    try:
        with seedpipe.Loader(f"{url}/data/{PATTERN}", pipeline=P, batch_size=60,
                             order="sequential") as ld:
            with pytest.raises(seedpipe.Error) as ei:
                next(iter(ld))
        msg = str(ei.value)
        assert "shard-000003.tar" in msg and "HTTP 404" in msg, msg
    finally:
        os.rename(os.path.join(www, "data", "gone.tar"),
                  os.path.join(www, "data", "shard-000003.tar"))

"""Remote token corpora (docs/tokens.md "The format", dataset/dataset_tokens.c
REMOTE): nginx serving corpora written by seedpipe.tokens.write() on
127.0.0.1 (tests/remote_servers.py; skipped with the reason when nginx
cannot start). Read through tests/tokens_dump (sp_dataset_open() of the
URL, every document read by one sp__tok_read() call).

 - the URL of the .idx, of the .bin and the prefix URL give the local copy's documents,
   tokens and fingerprint; the open is two requests (the .idx whole, one
   byte of the .bin for its size) and the read of every document, adjacent
   in the .bin, one more (nginx's access log);
 - a missing .idx names the URL and HTTP 404; a .bin of another size than
   the index describes is SP_EFORMAT naming the .idx's URL.
"""
import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import seedpipe.tokens

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
sys.path.insert(0, HERE)
import remote_servers as rs  # noqa: E402
from test_tokens_megatron import _build_dir, _seedpipe_docs  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("sp-tokens-remote"))
    os.chmod(tmp, 0o755)   # nginx's workers read it
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 65535, size=int(n), dtype=np.uint16)
            for n in rng.integers(0, 200, size=60)]
    seedpipe.tokens.write(os.path.join(www, "c"), docs, dtype="uint16")
    seedpipe.tokens.write(os.path.join(www, "short"), docs, dtype="uint16")
    with open(os.path.join(www, "short.bin"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(www, "short.bin")) - 2)
    with contextlib.ExitStack() as stack:
        try:
            ng = stack.enter_context(rs.nginx_no_proxy(www, tmp))
        except rs.Unavailable as e:
            pytest.skip(f"nginx cannot start here: {e}")
        yield www, ng, docs


def _requests(ng):
    with open(ng.log) as f:
        return len(f.readlines())


def test_remote_equals_local(served, tmp_path):
    www, ng, docs = served
    local, fp = _seedpipe_docs(os.path.join(www, "c"), fingerprint=True)
    assert len(local) == len(docs)
    assert all(np.array_equal(a, d.astype(np.int64)) for a, d in zip(local, docs))
    for leaf in ("c.idx", "c.bin", "c"):
        before = _requests(ng)
        got, rfp = _seedpipe_docs(f"{ng.url}/{leaf}", fingerprint=True)
        assert rfp == fp
        assert all(np.array_equal(a, b) for a, b in zip(got, local)) and len(got) == len(local)
        assert _requests(ng) - before == 3   # the .idx, the .bin's size, one range


def _dump_fails(url, tmp_path):
    exe = os.path.join(_build_dir(), "tests", "tokens_dump")
    r = subprocess.run([exe, url, str(tmp_path / "x.dump")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    return r.stdout


def test_remote_refusals(served, tmp_path):
    www, ng, _ = served
    out = _dump_fails(f"{ng.url}/none.idx", tmp_path)
    assert f"{ng.url}/none.idx" in out and "404" in out, out
    out = _dump_fails(f"{ng.url}/none", tmp_path)
    assert f"{ng.url}/none.idx" in out and "404" in out and "a token corpus's PREFIX" in out, out
    out = _dump_fails(f"{ng.url}/short.idx", tmp_path)
    assert out.startswith(f"ERR {seedpipe._errors.STATUS['EFORMAT']} {ng.url}/short.idx: "), out
    assert "run past the end of " + f"{ng.url}/short.bin" in out, out


@pytest.mark.parametrize("packing", ["concat", "docs"])
def test_loader_over_http_gives_the_local_batches(served, packing):
    """The loader over the URL: the local corpus's fingerprint and batches,
    in-process and on 2 workers (issue 40: local and over HTTP alike)."""
    import seedpipe
    www, ng, _ = served

    def stream(data, workers):
        with seedpipe.Loader(data, seq_len=16, packing=packing, seed=4, batch_size=8,
                             epochs=2, workers=workers, copy=True) as ld:
            return ld.fingerprint, [{k: np.array(v) for k, v in b.items()} for b in ld.stream()]

    fp, want = stream(os.path.join(www, "c"), 0)
    for workers in (0, 2):
        got_fp, got = stream(f"{ng.url}/c.idx", workers)
        assert got_fp == fp and len(got) == len(want)
        for g, w in zip(got, want):
            assert all((g[k] == w[k]).all() for k in w)

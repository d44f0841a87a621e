"""test_remote_targets.py - annotations="@json" over remote shards
(docs/targets.md "Targets in WebDataset shards", docs/remote.md): the shards
of test_shard_targets.py (photos with boxes, keypoints, polygon masks, a
sample without annotations, one KEY.json a sample) served by nginx over
HTTP and by SeaweedFS over S3 on 127.0.0.1 (tests/remote_servers.py; each
skipped with the reason when its server cannot start).

- the batches (images and every target array, and the batch digests) and
  the fingerprint over HTTP and S3 equal the local shards', at 0 and 2
  workers; a state saved on the local shards resumes over HTTP;
- the members are read by ranged requests: opening with "@json" costs at
  most one request a member (members close together share one);
- a member changed on the server (same size, other bytes) is an error
  naming URL/shard/KEY.json, never other targets;
- a version 1 index object (no members' places) still opens, and "@json"
  over it is refused by name, saying to rebuild it.
"""
import contextlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile

import pytest

import seedpipe
from test_shard_targets import SPEC, _equal, _run, data  # noqa: F401 (data: a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))
import remote_servers as rs  # noqa: E402
from cli_testlib import xxh64  # noqa: E402

PATTERN = "shard-{000000..000002}.tar"   # 9 samples, shards of at most 4
PLAIN = "resize size=32,32"               # no targets: no member read


def _shards(shards):
    names = sorted(n for n in os.listdir(shards) if n.endswith(".tar"))
    assert len(names) == 3, names
    return names


@pytest.fixture(scope="module")
def http(data, tmp_path_factory):  # noqa: F811
    """(nginx, www folder): the shards under www/data, and www/tampered a
    copy whose one KEY.json has other bytes of the same length."""
    shards = data[3]
    tmp = str(tmp_path_factory.mktemp("sp-remote-targets"))
    os.chmod(tmp, 0o755)   # nginx's workers read it
    www = os.path.join(tmp, "www")
    shutil.copytree(shards, os.path.join(www, "data"))
    shutil.copytree(shards, os.path.join(www, "tampered"))
    with contextlib.ExitStack() as stack:
        try:
            ng = stack.enter_context(rs.nginx_no_proxy(www, tmp))
        except rs.Unavailable as e:
            pytest.skip(f"nginx cannot start here: {e}")
        yield ng, www


@pytest.fixture(scope="module")
def s3(data, tmp_path_factory):  # noqa: F811
    """The S3 URL of the shards uploaded to SeaweedFS, with the credentials
    in the environment while the module's tests run."""
    if not shutil.which("curl"):
        pytest.skip("the curl tool is needed to upload the shards (apt-get install curl)")
    tmp = str(tmp_path_factory.mktemp("sp-s3-targets"))
    try:
        w = rs.Weed(tmp)
    except rs.Unavailable as e:
        pytest.skip(f"SeaweedFS cannot start here: {e}")
    env = {"AWS_ENDPOINT_URL": w.endpoint, "AWS_REGION": "us-east-1",
           "AWS_CONFIG_FILE": os.path.join(tmp, "none"),
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(tmp, "none"),
           "SEEDPIPE_S3_ALLOW_HTTP": "1", "AWS_ACCESS_KEY_ID": w.KEY,
           "AWS_SECRET_ACCESS_KEY": w.SECRET, "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    saved = {k: os.environ.get(k) for k in env}
    try:
        def put(path, src=None):
            cmd = ["curl", "-sS", "--fail-with-body", "-X", "PUT", "--aws-sigv4",
                   "aws:amz:us-east-1:s3", "--user", f"{w.KEY}:{w.SECRET}",
                   f"{w.endpoint}/{path}", "--noproxy", "*"] + (["-T", src] if src else [])
            p = subprocess.run(cmd, capture_output=True, timeout=60, env=rs.tool_env())
            assert p.returncode == 0, (p.stdout, p.stderr)
        put("bkt")
        shards = data[3]
        for n in _shards(shards) + ["seedpipe.index"]:
            put(f"bkt/data/{n}", os.path.join(shards, n))
        os.environ.update(env)
        yield f"s3://bkt/data/{PATTERN}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        w.stop()


@pytest.mark.parametrize("workers", [0, 2])
def test_http_gives_the_local_batches(data, http, workers):  # noqa: F811
    ng, _ = http
    ref, fp = _run(data[3], "@json", SPEC, seed=3)
    assert sum(int(b["num_boxes"].sum()) for b, _ in ref) > 0
    got, got_fp = _run(f"{ng.url}/data/{PATTERN}", "@json", SPEC, seed=3, workers=workers)
    assert got_fp == fp
    _equal(ref, got)


@pytest.mark.parametrize("workers", [0, 2])
def test_s3_gives_the_local_batches(data, s3, workers):  # noqa: F811
    ref, fp = _run(data[3], "@json", SPEC, seed=5)
    got, got_fp = _run(s3, "@json", SPEC, seed=5, workers=workers)
    assert got_fp == fp
    _equal(ref, got)


def test_local_state_resumes_over_http(data, http):  # noqa: F811
    ng, _ = http
    url = f"{ng.url}/data/{PATTERN}"
    kw = dict(pipeline=SPEC, annotations="@json", batch_size=3, epochs=2, seed=4, copy=True)
    with seedpipe.Loader(data[3], **kw) as ld:
        it = iter(ld.stream())
        next(it)
        state = ld.state_dict()
        want = [{k: v.tobytes() for k, v in b.items()} for b in it]
    with seedpipe.Loader(url, **kw) as ld:
        ld.load_state_dict(state)
        got = [{k: v.tobytes() for k, v in b.items()} for b in ld.stream()]
    assert len(got) == len(want) > 0 and got == want


def test_members_take_at_most_one_request_each(data, http):  # noqa: F811
    ng, www = http
    url = f"{ng.url}/data/{PATTERN}"
    members = 0
    for n in _shards(data[3]):
        with tarfile.open(os.path.join(data[3], n)) as tf:
            members += sum(m.name.endswith(".json") for m in tf.getmembers())
    assert members == 9
    counts = []
    for spec, ann in ((PLAIN, None), (SPEC, "@json")):
        before = len(ng.requests())
        with seedpipe.Loader(url, pipeline=spec, annotations=ann, batch_size=3) as ld:
            assert ld.fingerprint
        counts.append(len(ng.requests()) - before)
    assert 1 <= counts[1] - counts[0] <= members, counts


def test_changed_member_is_a_named_error(data, http):  # noqa: F811
    ng, www = http
    shard = _shards(data[3])[1]
    path = os.path.join(www, "tampered", shard)
    with tarfile.open(path) as tf:
        m = next(m for m in tf.getmembers()
                 if m.name.endswith(".json") and b"bbox" in tf.extractfile(m).read())
        at = m.offset_data
    with open(path, "r+b") as f:
        body = bytearray(f.read())
        box = body.index(b'"bbox": [', at) + 9    # the box's first digit: other targets
        digit = next(k for k in range(box, at + m.size) if chr(body[k]).isdigit())
        body[digit] = ord("7") if body[digit] != ord("7") else ord("3")
        f.seek(0)
        f.write(body)
    url = f"{ng.url}/tampered/{PATTERN}"
    with seedpipe.Loader(url, pipeline=PLAIN, batch_size=3) as ld:   # images: unchanged
        assert ld.fingerprint
    name = re.escape(f"{ng.url}/tampered/{shard}/{m.name}")
    with pytest.raises(seedpipe.Error, match=f"{name}: the object changed since the dataset "
                                             "was indexed"):
        seedpipe.Loader(url, pipeline=SPEC, annotations="@json", batch_size=3)


def _as_version_1(b, h64):
    """The index object b (version 2) rewritten as version 1: each sample's
    KEY.json fields (32 bytes after its hash) dropped, the checksum redone."""
    assert struct.unpack_from("<I", b, 8)[0] == 2
    out, pos = bytearray(b[:8]) + struct.pack("<I", 1) + b[12:24], 24
    ns = struct.unpack_from("<I", b, 20)[0]
    for _ in range(ns):
        n = struct.unpack_from("<I", b, pos)[0]
        out += b[pos:pos + 4 + n + 12]
        count = struct.unpack_from("<I", b, pos + 4 + n + 8)[0]
        pos += 4 + n + 12
        for _ in range(count):
            m = struct.unpack_from("<I", b, pos)[0]
            out += b[pos:pos + 4 + m + 36]
            pos += 4 + m + 36 + 32
            r = struct.unpack_from("<I", b, pos)[0]
            out += b[pos:pos + 4 + r]
            pos += 4 + r
    assert pos == len(b) - 8
    return bytes(out + struct.pack("<Q", h64(bytes(out))))


def test_version_1_index_is_refused_by_name(data, http):  # noqa: F811
    h64 = xxh64()
    if h64 is None:
        pytest.skip("libxxhash not found (the version 1 object needs its XXH3-64)")
    ng, www = http
    v1 = os.path.join(www, "v1")
    shutil.copytree(os.path.join(www, "data"), v1)
    with open(os.path.join(v1, "seedpipe.index"), "rb") as f:
        b = f.read()
    with open(os.path.join(v1, "seedpipe.index"), "wb") as f:
        f.write(_as_version_1(b, h64))
    url = f"{ng.url}/v1/{PATTERN}"
    with seedpipe.Loader(url, pipeline=PLAIN, batch_size=3) as ld, \
            seedpipe.Loader(data[3], pipeline=PLAIN, batch_size=3) as local:
        assert ld.fingerprint == local.fingerprint    # images: read as before
    with pytest.raises(seedpipe.Error, match=re.escape(f"{ng.url}/v1/seedpipe.index: a version "
                                                       "1 dataset index object") + ".*rebuild"):
        seedpipe.Loader(url, pipeline=SPEC, annotations="@json", batch_size=3)

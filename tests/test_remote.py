"""test_remote.py - remote WebDataset shards (docs/remote.md) against real
servers this test starts on 127.0.0.1 (tests/remote_servers.py): nginx for
HTTP, SeaweedFS's S3 gateway (SigV4 checked, anonymous refused), and our
fault-injecting proxy. Each part whose server cannot start is skipped
visibly (a SKIP line, exit 77 at the end, the other parts still run).

On a shapes dataset (PNG and JPEG) sharded by `seedpipe shard --max-count 8`
(12 shards and the dataset index object seedpipe.index beside them):
 - the same shards locally, over HTTP (a brace pattern and a folder URL)
   and from S3 give the same fingerprint and the same stream: `seedpipe
   verify` (in-process, 1 and 3 workers, a worker killed, stopped and
   resumed 1 -> 3 workers, the cache cold and warm, a service to one
   client and to 2 ranks) prints the local reference digest for each;
 - opening 100 remote shards makes one request (nginx's access log);
 - `seedpipe index URL` reads every shard once and makes the same index
   object byte for byte (written with --out for HTTP, uploaded to S3); a
   dataset without one is a named error saying how to make it;
 - a shard replaced under the index (one byte of a member, a shorter
   shard) is a named error naming the object; a missing one names the URL
   and HTTP 404; --on-error skip streams the rest;
 - with ~5% of requests answered 503 SlowDown, reset, or cut short by the
   proxy, the stream is unchanged (HTTP and S3);
 - a refused connection: an address that never answered (a wrong port) is
   a named error at open after 3 tries; a server that answered and then
   refuses for 1.5 s (the proxy going down after 40 requests) is retried,
   the stream unchanged;
 - --shard-cache: each shard downloaded whole once for 3 workers, the next
   run reads none, a damaged copy is downloaded again, a small size bound
   holds;
 - the Python Loader (canonical order, in-process and 2 workers) gives the
   local batches, reading adjacent members as one range (far fewer GETs
   than samples); `mpirun -np 2 seedpipe train` over HTTP ends with the
   local run's final weights (where the tool has MPI);
 - HTTPS (nginx, a self-signed certificate): refused without its CA, the
   same stream with SEEDPIPE_CA_BUNDLE;
 - S3 over plain http:// (every store here) is refused by name without
   SEEDPIPE_S3_ALLOW_HTTP=1, and warned about once with it (the other S3
   parts set it);
 - S3: path-style and virtual-hosted (bkt.localhost) addressing; credentials from the environment and from a shared credentials file
   (AWS_PROFILE); a wrong secret is a named 403 at open, none at all too;
   the secret appears in no output and no file written (manifest, state,
   cache, run record);
 - S3 with a session token (AWS_SESSION_TOKEN, a made-up one, with the
   static key and secret): every request the proxy relays carries
   `x-amz-security-token` with exactly that token, listed in the
   SignedHeaders of its SigV4 Authorization. SeaweedFS refuses it (403
   InvalidAccessKeyId at open, a named error: it takes a request with a
   token for temporary credentials of its own STS, never for a static
   identity), so the stream is checked through the proxy in front of nginx
   serving the same objects path-style (the proxy, not nginx, checks the
   requests): the local stream, 1 and 3 workers, resumed, cached, 2 ranks;
   the token appears in no output and no file written.
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import remote_servers as rs
from cli_testlib import final_digest, preload_env, run

BIN = os.environ.get("SEEDPIPE_BIN")
MPIEXEC = os.environ.get("SP_MPIEXEC")
TRAIN = ["--seed", 3, "--epochs", 2, "--batch-size", 48]
COMMON = ["--pipeline", "shapes-train", "--seed", 9, "--epochs", 2, "--batch-size", 8]
PATTERN = "shard-{000000..000011}.tar"
# a made-up session token (base64 characters, as STS's are); never printed by the test
TOKEN = "IQoJb3JpZ2luX2VjEMadeUp//////////wEaCXNlZWRwaXBlLXRlc3RzIkcwRQIh+AmadeUpToken0x5eed="
skipped = []
outputs = []   # every CLI output, grepped for the secret at the end


def skip(what, why):
    print(f"SKIP: {what}: {why}", flush=True)
    skipped.append(what)


def cli(*args, ok=True, env=None, timeout=180):
    e = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    e.update(env or {})
    p = run(*args, ok=ok, env=e, timeout=timeout)
    outputs.append(p.stdout + p.stderr)
    return p


def verify_ref(ds, env=None):
    """verify's reference stream digest, after checking every configuration agreed."""
    p = cli("verify", ds, *COMMON, "--workers", "1,3", env=env)
    out = p.stdout
    assert "all configurations give identical streams" in out, out
    for line in out.splitlines():
        if line.startswith("in-process (reference)"):
            return line.split()[3]
    raise AssertionError(out)


def digest(ds, *extra, env=None, ok=True):
    p = cli("digest", ds, *COMMON, *extra, "--out", "/dev/null", env=env, ok=ok)
    if not ok:
        return p
    for l in (p.stdout + p.stderr).splitlines():
        if l.startswith("digest:"):
            return l.split("stream ")[1].strip()
    raise AssertionError(p.stdout + p.stderr)


def fingerprint(ds, env=None):
    out = cli("inspect", ds, env=env).stdout
    return [l for l in out.splitlines() if l.startswith("fingerprint:")][0].split()[1]


PY_DIGEST = r"""
import hashlib, sys
import seedpipe
h = hashlib.sha256()
n = 0
for x, y in seedpipe.Loader(sys.argv[1], pipeline="shapes-train", seed=9, batch_size=8,
                            workers=int(sys.argv[2]), epochs=1, order="sequential"):
    h.update(x.tobytes()); h.update(y.tobytes()); n += len(y)
print(n, h.hexdigest())
"""


def py_digest(ds, workers):
    """The Python Loader's batches (canonical order) over ds, hashed in a child
    python (the library's sanitizer runtimes preloaded where it has them)."""
    lib = os.path.join(os.environ.get("SP_BUILD_DIR", ""), "libseedpipe.so")
    src = os.path.join(os.environ.get("SP_SOURCE_DIR", os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "bindings", "python")
    env = preload_env(lib, dict(os.environ, SEEDPIPE_LIB=lib, PYTHONPATH=src,
                                NO_PROXY="127.0.0.1", no_proxy="127.0.0.1"))
    p = subprocess.run([sys.executable, "-c", PY_DIGEST, ds, str(workers)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    outputs.append(p.stdout + p.stderr)
    return p.stdout.split()


def through_faults(what, port, tmp, seed, ref, url_env):
    """The stream on 3 workers through the fault proxy in front of `port`
    (~5% of requests answered 503, reset or cut short) is ref, and faults
    were injected. url_env(proxy_url) gives the dataset URL and env."""
    try:
        px = rs.Proxy(port, tmp, fault_rate=0.05, seed=seed)
    except rs.Unavailable as e:
        skip(f"{what} faults (proxy)", e)
        return
    try:
        url, env = url_env(px.url)
        got = digest(url, "--workers", 3, env=env)
    finally:
        st = px.stop()
    assert got == ref, (got, ref)
    assert st.get("503", 0) + st.get("reset", 0) + st.get("cut", 0) > 0, st
    print(f"{what}: through the fault proxy ({st}): the same stream", flush=True)


def refused_part(tmp, port, ref):
    """A refused connection: at an address that never answered (a wrong
    port) the open fails after 3 tries, naming the address; from a server
    that answered before and goes down for 1.5 s (the proxy, after 40
    requests: its port closed, its connections reset) the stream is
    retried through it and unchanged (2 workers, one request a sample)."""
    wrong = f"http://127.0.0.1:{rs.free_port()}/data/{PATTERN}"
    p = cli("inspect", wrong, ok=False)
    assert p.returncode != 0 and "no server has answered at this address" in p.stderr and \
        "gave up after 3 tries" in p.stderr and "seedpipe.index" in p.stderr, p.stderr
    try:
        px = rs.Proxy(port, tmp, down_after=40, down_for=1.5, seed=11)
    except rs.Unavailable as e:
        skip("http: a server restarting (proxy)", e)
        return
    try:
        got = digest(f"{px.url}/data/{PATTERN}", "--workers", 2, env={"SEEDPIPE_PREFETCH": "0"})
    finally:
        st = px.stop()
    assert got == ref and st.get("down") == 1 and st.get("requests", 0) > 40, (got, ref, st)
    print(f"http: a wrong port fails at open after 3 tries, by name; a server down for 1.5 s "
          f"mid-stream is retried, the same stream ({st})", flush=True)


def http_part(tmp, www, ref, fp):
    try:
        ng = rs.Nginx(www, tmp, tls=True)
    except rs.Unavailable as e:
        skip("HTTP (nginx)", e)
        return
    try:
        # HTTPS: the certificate checked (a named error without its CA)
        https = f"{ng.https_url}/data/{PATTERN}"
        p = cli("inspect", https, ok=False)
        assert p.returncode != 0 and "seedpipe.index" in p.stderr and \
            "certificate" in p.stderr.lower(), p.stderr
        tls = {"SEEDPIPE_CA_BUNDLE": ng.ca}
        assert fingerprint(https, env=tls) == fp
        assert digest(https, "--workers", 2, env=tls) == ref
        print("https: certificate checked; the same stream (2 workers)", flush=True)

        url = f"{ng.url}/data/{PATTERN}"
        assert fingerprint(url) == fp
        assert fingerprint(f"{ng.url}/data/") == fp
        assert verify_ref(url) == ref
        assert verify_ref(f"{ng.url}/data/") == ref
        print("http: fingerprint and verify (1, 3 workers, kill, resume, cache, 2 ranks) "
              "equal to local", flush=True)

        refused_part(tmp, ng.port, ref)

        # opening 100 shards: the index object, one request
        before = len(ng.requests())
        assert "samples:     200" in cli("inspect", f"{ng.url}/hundred/shard-{{000000..000099}}.tar").stdout
        reqs = ng.requests()[before:]
        assert len(reqs) == 1 and "GET /hundred/seedpipe.index " in reqs[0], reqs
        print("http: opening 100 shards made 1 request", flush=True)

        # Python, in the canonical order: the same batches; the read-ahead
        # coalesces adjacent members into one range (far fewer GETs than samples)
        local = py_digest(os.path.join(www, "data", PATTERN), 0)
        for workers in (0, 2):
            before = len(ng.requests())
            assert py_digest(url, workers) == local, workers
            gets = [r for r in ng.requests()[before:] if "/data/shard-" in r]
            assert 0 < len(gets) <= 96 // 4, (workers, len(gets), gets[:5])
        print(f"http: Python Loader, canonical order: same batches, {len(gets)} GETs for 96 "
              "samples (adjacent members coalesced)", flush=True)

        # no index object: a named error; `seedpipe index URL --out` makes it
        noidx = f"{ng.url}/noidx/{PATTERN}"
        p = cli("inspect", noidx, ok=False)
        assert p.returncode != 0 and "noidx/seedpipe.index: HTTP 404" in p.stderr and \
            "seedpipe index" in p.stderr, p.stderr
        before = len(ng.requests())
        made = os.path.join(tmp, "made.index")
        cli("index", noidx, "--out", made)
        reqs = [r for r in ng.requests()[before:] if "/noidx/shard-" in r]
        assert len(reqs) == 12 and all(" 200 " in r for r in reqs), reqs   # each shard once
        with open(made, "rb") as a, open(os.path.join(www, "data", "seedpipe.index"), "rb") as b:
            assert a.read() == b.read()
        print("http: seedpipe index URL read each shard once, same index object", flush=True)

        # a replaced shard: a named error naming the object, never other bytes
        repl = os.path.join(www, "repl")
        with open(os.path.join(repl, "shard-000003.tar"), "r+b") as f:
            f.seek(512 + 100)   # inside the first member's data
            b = f.read(1)
            f.seek(512 + 100)
            f.write(bytes([b[0] ^ 0xff]))
        p = digest(f"{ng.url}/repl/{PATTERN}", ok=False)
        assert p.returncode != 0 and "repl/shard-000003.tar: the object changed since the " \
            "dataset was indexed (content hash of shard-000003.tar/" in p.stderr, p.stderr
        skipped_run = digest(f"{ng.url}/repl/{PATTERN}", "--on-error", "skip")
        assert skipped_run != ref
        with open(os.path.join(repl, "shard-000005.tar"), "r+b") as f:
            f.truncate(os.path.getsize(f.name) - 1024)
        p = digest(f"{ng.url}/repl/shard-000005.tar", ok=False)
        assert p.returncode != 0 and "repl/shard-000005.tar: the object changed since the " \
            "dataset was indexed (" in p.stderr, p.stderr
        os.remove(os.path.join(repl, "shard-000007.tar"))
        p = digest(f"{ng.url}/repl/shard-000007.tar", ok=False)
        assert p.returncode != 0 and f"{ng.url}/repl/shard-000007.tar: HTTP 404" in p.stderr, \
            p.stderr
        print("http: replaced, shortened, missing shard: named errors", flush=True)

        # the shard cache: whole shards copied once, shared by 3 workers and
        # the next run (no shard GET), bounded in size; a damaged copy is
        # replaced, never used
        cache = os.path.join(tmp, "shard-cache")
        before = len(ng.requests())
        assert digest(url, "--workers", 3, "--shard-cache", cache) == ref
        gets = [r for r in ng.requests()[before:] if "/data/shard-" in r]
        assert len(gets) >= 12 and all(" 200 " in r for r in gets), gets   # whole shards
        own = os.path.join(cache, f"seedpipe-shards-{os.geteuid()}")   # the cache's own folder
        assert os.listdir(cache) == [os.path.basename(own)]
        copies = sorted(f for f in os.listdir(own) if f.endswith(".tar"))
        assert len(copies) == 12, copies
        assert not [f for f in os.listdir(own) if ".tmp-" in f]   # every publish renamed
        modes = {oct(os.stat(os.path.join(own, f)).st_mode & 0o777) for f in copies}
        assert modes == {oct(0o600)}, modes   # the owner's alone, as mkstemp made them
        before = len(ng.requests())
        assert digest(url, "--shard-cache", cache) == ref
        assert not [r for r in ng.requests()[before:] if "/data/shard-" in r]
        with open(os.path.join(own, copies[0]), "r+b") as f:   # bit rot in a copy
            f.seek(512 + 10)
            b = f.read(1)
            f.seek(512 + 10)
            f.write(bytes([b[0] ^ 1]))
        before = len(ng.requests())
        assert digest(url, "--shard-cache", cache) == ref
        assert [r for r in ng.requests()[before:] if "/data/shard-" in r]   # fetched again
        small = os.path.join(tmp, "shard-cache-small")
        size = os.path.getsize(os.path.join(www, "data", "shard-000000.tar"))
        assert digest(url, "--workers", 2, "--shard-cache", small, "--shard-cache-size",
                      3 * size + 100) == ref
        small_own = os.path.join(small, f"seedpipe-shards-{os.geteuid()}")
        total = sum(os.path.getsize(os.path.join(small_own, f)) for f in os.listdir(small_own))
        assert total <= 4 * size, (total, size)   # the cap, and at most one copy being placed
        print("http: shard cache: one download a shard, reused, damage refetched, size bounded",
              flush=True)

        # data-parallel training over HTTP: the local run's final weights
        if MPIEXEC:
            local_w = final_digest(cli("train", os.path.join(www, "data", PATTERN), *TRAIN,
                                       "--out", os.path.join(tmp, "train-local.json")).stdout)
            e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                     OMPI_MCA_rmaps_base_oversubscribe="1", NO_PROXY="127.0.0.1")
            p = subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", BIN, "train", url,
                                *map(str, TRAIN), "--out", os.path.join(tmp, "train-mpi.json")],
                               capture_output=True, text=True, env=e, timeout=180)
            assert p.returncode == 0, p.stdout + p.stderr
            assert final_digest(p.stdout) == local_w, (p.stdout, local_w)
            print(f"http: mpirun -np 2 seedpipe train: final weights {local_w}, as local",
                  flush=True)
        else:
            print("http: (mpirun -np 2 train not run: this seedpipe was built without MPI)")

        through_faults("http", ng.port, tmp, 7, ref, lambda u: (f"{u}/data/{PATTERN}", None))
    finally:
        ng.stop()


def curl_s3(w, method, path, src=None):
    """An upload or download with the curl tool (libcurl's SigV4), to set up S3."""
    cmd = ["curl", "-sS", "--fail-with-body", "-X", method, "--aws-sigv4", "aws:amz:us-east-1:s3",
           "--user", f"{w.KEY}:{w.SECRET}", f"{w.endpoint}/{path}", "--noproxy", "*"]
    if src:
        cmd += ["-T", src]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    assert p.returncode == 0, (cmd[:4], p.stdout, p.stderr)
    return p.stdout


def s3_part(tmp, www, ref, fp):
    if not shutil.which("curl"):
        skip("S3 (SeaweedFS)", "the curl tool is needed to upload the shards (apt-get install curl)")
        session_token_part(tmp, www, ref, fp, None)
        return
    try:
        w = rs.Weed(tmp)
    except rs.Unavailable as e:
        skip("S3 (SeaweedFS)", e)
        session_token_part(tmp, www, ref, fp, None)
        return
    home = os.path.join(tmp, "home")
    os.makedirs(os.path.join(home, ".aws"), exist_ok=True)
    # SeaweedFS listens on plain http://127.0.0.1: opted in (SEEDPIPE_S3_ALLOW_HTTP=1)
    base = {"HOME": home, "AWS_ENDPOINT_URL": w.endpoint, "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.path.join(home, "none"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(home, "none"),
            "SEEDPIPE_S3_ALLOW_HTTP": "1"}
    env = dict(base, AWS_ACCESS_KEY_ID=w.KEY, AWS_SECRET_ACCESS_KEY=w.SECRET)
    try:
        curl_s3(w, "PUT", "bkt")
        for i in range(12):
            n = f"shard-{i:06d}.tar"
            curl_s3(w, "PUT", f"bkt/data/{n}", os.path.join(www, "data", n))
        url = f"s3://bkt/data/{PATTERN}"
        p = cli("inspect", url, env=env, ok=False)
        assert p.returncode != 0 and "s3://bkt/data/seedpipe.index: HTTP 404" in p.stderr, p.stderr
        cli("index", url, env=env)   # reads each shard once, uploads the index object
        with open(os.path.join(www, "data", "seedpipe.index"), "rb") as f:
            assert curl_s3(w, "GET", "bkt/data/seedpipe.index") == f.read()
        assert fingerprint(url, env=env) == fp
        assert fingerprint("s3://bkt/data/", env=env) == fp
        assert verify_ref(url, env=env) == ref
        print("s3: index uploaded (same bytes), fingerprint and verify equal to local", flush=True)

        plain_http_part(w, url, env, ref)

        # files written from an S3 stream hold no secret either
        man = os.path.join(tmp, "s3.jsonl")
        state = os.path.join(tmp, "s3-state.json")
        cache = os.path.join(tmp, "s3-cache")
        cli("digest", url, *COMMON, "--workers", 2, "--out", man, "--cache", cache, env=env)
        cli("digest", url, *COMMON, "--out", os.path.join(tmp, "s3b.jsonl"), "--stop-after", 3,
            "--save-state", state, env=env)
        cli("train", url, *TRAIN, "--out", os.path.join(tmp, "s3-train.json"), env=env)
        for root, _, files in os.walk(tmp):
            if root.startswith(os.path.join(tmp, "weed")) or root.startswith(home):
                continue
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    assert w.SECRET.encode() not in fh.read(), os.path.join(root, f)

        # a shared credentials file and a named profile
        with open(os.path.join(home, ".aws", "credentials"), "w") as f:
            f.write(f"[other]\naws_access_key_id = {w.KEY}\naws_secret_access_key = {w.SECRET}\n")
        prof = dict(base, AWS_SHARED_CREDENTIALS_FILE=os.path.join(home, ".aws", "credentials"),
                    AWS_PROFILE="other")
        assert fingerprint(url, env=prof) == fp
        p = cli("inspect", url, env=dict(prof, AWS_PROFILE="nosuch"), ok=False)
        assert p.returncode != 0 and 'AWS profile "nosuch"' in p.stderr, p.stderr

        # wrong credentials, no credentials: a named 403 at open
        p = cli("inspect", url, env=dict(env, AWS_SECRET_ACCESS_KEY="wrong-secret-value"), ok=False)
        assert p.returncode != 0 and "s3://bkt/data/seedpipe.index" in p.stderr and \
            "HTTP 403" in p.stderr and "wrong-secret-value" not in p.stderr, p.stderr
        p = cli("inspect", url, env=base, ok=False)
        assert p.returncode != 0 and "HTTP 403 (AccessDenied" in p.stderr, p.stderr
        print("s3: credentials file + profile; wrong and missing credentials: named 403", flush=True)

        # virtual-hosted addressing (bkt.localhost: libcurl resolves *.localhost to loopback)
        virt = dict(env, AWS_ENDPOINT_URL=f"http://localhost:{w.port}",
                    SEEDPIPE_S3_ADDRESSING="virtual")
        assert fingerprint(url, env=virt) == fp
        assert digest(url, "--workers", 2, env=virt) == ref
        print("s3: virtual-hosted addressing: the same stream", flush=True)

        token_corpus_part(w, tmp, env)

        # faults in front of S3 (the proxy keeps the Host the request was signed for)
        through_faults("s3", w.port, tmp, 11, ref,
                       lambda u: (url, dict(env, AWS_ENDPOINT_URL=u)))

        session_token_part(tmp, www, ref, fp, w)
    finally:
        w.stop()


def token_corpus_part(w, tmp, env):
    """A token corpus in S3 (docs/tokens.md): the URL of its .idx streams the
    local corpus's windows, both packings, in-process and on 2 workers."""
    prefix = os.path.join(tmp, "corpus")
    rnd = random.Random(7)
    docs = [[rnd.randrange(65536) for _ in range(rnd.randrange(0, 70))] for _ in range(90)]
    with open(prefix + ".bin", "wb") as f:
        for d in docs:
            f.write(struct.pack("<%dH" % len(d), *d))
    lens = [len(d) for d in docs]
    ptrs = [2 * sum(lens[:i]) for i in range(len(lens))]
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
        f.write(struct.pack("<%di" % len(lens), *lens) + struct.pack("<%dq" % len(ptrs), *ptrs))
        f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
    for ext in (".idx", ".bin"):
        curl_s3(w, "PUT", f"bkt/tok/corpus{ext}", prefix + ext)
    for packing in ("concat", "docs"):
        args = ["--seq-len", 16, "--packing", packing, "--seed", 3, "--epochs", 2,
                "--batch-size", 8, "--out", "-"]
        def batches(out):   # the batch lines and the stream digest (not the timing, the path)
            lines = out.splitlines()
            return ([l for l in lines if l.startswith('{"epoch"')],
                    [l.split("stream ")[1] for l in lines if l.startswith("digest:")])
        p = cli("digest", prefix, *args)
        want = batches(p.stdout + p.stderr)
        assert len(want[0]) > 4 and len(want[1]) == 1
        for workers in (0, 2):
            got = cli("digest", "s3://bkt/tok/corpus.idx", *args, "--workers", workers, env=env)
            assert batches(got.stdout + got.stderr) == want, (packing, workers)
    print("s3: a token corpus's windows (concat, docs) equal to the local copy's", flush=True)


def plain_http_part(w, url, env, ref):
    """S3 over plain http:// (signatures, a session token in clear): without
    SEEDPIPE_S3_ALLOW_HTTP=1 the open is refused by name before any request
    (SeaweedFS sees none); with it, one warning naming the risk, however many
    workers, and the stream."""
    no = {k: v for k, v in env.items() if k != "SEEDPIPE_S3_ALLOW_HTTP"}
    for e in (no, dict(no, SEEDPIPE_S3_ALLOW_HTTP="0")):
        p = cli("inspect", url, env=e, ok=False)
        assert p.returncode != 0 and f"S3 endpoint {w.endpoint}: plain http:// is refused" in \
            p.stderr and "SEEDPIPE_S3_ALLOW_HTTP=1" in p.stderr, p.stderr
    p = cli("inspect", url, env=dict(no, SEEDPIPE_S3_ALLOW_HTTP="yes"), ok=False)
    assert p.returncode != 0 and "SEEDPIPE_S3_ALLOW_HTTP=yes: expected 0 or 1" in p.stderr, p.stderr
    p = cli("digest", url, *COMMON, "--workers", 3, "--out", "/dev/null", env=env)
    warn = [l for l in p.stderr.splitlines() if "is plain http://" in l]
    assert len(warn) == 1 and "SEEDPIPE_S3_ALLOW_HTTP=1" in warn[0] and "in clear" in warn[0] \
        and f"stream {ref}" in p.stdout + p.stderr, (p.stdout, p.stderr)
    print("s3: plain http:// refused by name without SEEDPIPE_S3_ALLOW_HTTP=1; with it, one "
          "warning (3 workers) and the same stream", flush=True)


def token_counts(st):
    """Asserts every request the proxy relayed carried the session token,
    signed; returns the number of requests."""
    n = st.get("requests", 0)
    assert n > 0 and st.get("token") == n and st.get("token_signed") == n, \
        f"requests {n}, with the token {st.get('token')}, signed {st.get('token_signed')}"
    return n


def session_token_part(tmp, www, ref, fp, w):
    """AWS_SESSION_TOKEN (made up) with the static key and secret: the token
    is sent and signed on every request, the stream is the local one, and
    the token is in no output or file. w: the running SeaweedFS, or None."""
    home = os.path.join(tmp, "home-token")
    os.makedirs(home, exist_ok=True)
    env = {"HOME": home, "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": os.path.join(home, "none"),
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(home, "none"),
           "AWS_ACCESS_KEY_ID": rs.Weed.KEY, "AWS_SECRET_ACCESS_KEY": rs.Weed.SECRET,
           "AWS_SESSION_TOKEN": TOKEN, "SEEDPIPE_S3_ALLOW_HTTP": "1"}   # the proxy: http://
    url = f"s3://bkt/data/{PATTERN}"
    seed = 13
    if w is None:
        print("s3 session token: (SeaweedFS not running: its refusal not checked)", flush=True)
    else:
        # SeaweedFS authenticates a request with x-amz-security-token as
        # temporary credentials of its own STS (a session token it issued,
        # for the key it issued), never as a static identity: a named 403
        # at open, the token sent and signed all the same
        try:
            px = rs.Proxy(w.port, tmp, token=TOKEN, seed=seed)
        except rs.Unavailable as e:
            skip("S3 session token (proxy)", e)
            return
        try:
            p = cli("inspect", url, env=dict(env, AWS_ENDPOINT_URL=px.url), ok=False)
        finally:
            st = px.stop()
        n = token_counts(st)
        assert p.returncode != 0 and "s3://bkt/data/seedpipe.index: HTTP 403 (InvalidAccessKeyId" \
            in p.stderr, ("SeaweedFS no longer refuses a static key with a session token? "
                          "then stream from it here and say so in docs/remote.md", p.stderr)
        print(f"s3 session token: SeaweedFS refuses a static key with a token (403 "
              f"InvalidAccessKeyId at open, named); the token was sent and signed on all {n} "
              "request(s)", flush=True)

    # the same objects, path-style (/bkt/data/...), from nginx behind the
    # proxy, which checks each request's token and SignedHeaders
    root = os.path.join(tmp, "token-root")
    shutil.copytree(os.path.join(www, "data"), os.path.join(root, "bkt", "data"))
    ngdir = os.path.join(tmp, "token-nginx")
    os.makedirs(ngdir)
    try:
        ng = rs.Nginx(root, ngdir)
    except rs.Unavailable as e:
        skip("S3 session token (nginx)", e)
        return
    try:
        try:
            px = rs.Proxy(ng.port, tmp, token=TOKEN, seed=seed + 1)
        except rs.Unavailable as e:
            skip("S3 session token (proxy)", e)
            return
        files = os.path.join(tmp, "token-files")
        os.makedirs(files)
        try:
            e = dict(env, AWS_ENDPOINT_URL=px.url)
            assert fingerprint(url, env=e) == fp
            assert verify_ref(url, env=e) == ref
            p = cli("digest", url, *COMMON, "--workers", 3, "--out",
                    os.path.join(files, "m.jsonl"), "--cache", os.path.join(files, "cache"), env=e)
            assert f"stream {ref}" in p.stdout + p.stderr, (p.stdout, p.stderr, ref)
            cli("digest", url, *COMMON, "--out", os.path.join(files, "m2.jsonl"),
                "--stop-after", 3, "--save-state", os.path.join(files, "state.json"), env=e)
            cli("digest", url, *COMMON, "--out", os.path.join(files, "m3.jsonl"),
                "--resume", os.path.join(files, "state.json"), "--workers", 2, env=e)
        finally:
            st = px.stop()

        def batches(name):
            with open(os.path.join(files, name)) as f:
                return f.read().splitlines()[1:]   # the batch lines after the header
        assert batches("m2.jsonl") + batches("m3.jsonl") == batches("m.jsonl")
        n = token_counts(st)
        gets = [r for r in ng.requests() if "GET /bkt/data/" in r]
        assert len(gets) == n, (len(gets), n)   # each relayed request reached the store
    finally:
        ng.stop()
    written = 0
    for r, _, fs in os.walk(tmp):
        if r.startswith(os.path.join(tmp, "weed")):
            continue
        for f in fs:
            with open(os.path.join(r, f), "rb") as fh:
                assert TOKEN.encode() not in fh.read(), os.path.join(r, f)
            written += r.startswith(files)
    assert written >= 3, written   # manifests and the state were there to check
    print(f"s3 session token: the local stream (verify: 1, 3 workers, kill, resume, cache, "
          f"2 ranks; digest, stop and resume) through the proxy to nginx; the token sent "
          f"and signed on all {n} requests; not in any output or file", flush=True)


def main():
    if not BIN or not os.path.exists(BIN):
        print("FAIL: SEEDPIPE_BIN not set or missing")
        return 1
    tmp = tempfile.mkdtemp(prefix="sp-test-remote-")
    os.chmod(tmp, 0o755)
    try:
        ds = os.path.join(tmp, "shapes")
        cli("make-shapes", ds, "--count", 96, "--size", 32, "--seed", 5)
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        data = os.path.join(www, "data")
        cli("shard", ds, data, "--max-count", 8)
        shutil.copytree(data, os.path.join(www, "repl"))
        shutil.copytree(data, os.path.join(www, "noidx"))
        os.remove(os.path.join(www, "noidx", "seedpipe.index"))
        cli("make-shapes", os.path.join(tmp, "s200"), "--count", 200, "--size", 16, "--seed", 1)
        cli("shard", os.path.join(tmp, "s200"), os.path.join(www, "hundred"), "--max-count", 2)
        local = os.path.join(data, PATTERN)
        fp = fingerprint(local)
        ref = verify_ref(local)
        http_part(tmp, www, ref, fp)
        s3_part(tmp, www, ref, fp)
        for out in outputs:
            assert rs.Weed.SECRET not in out, out
            assert TOKEN not in out, "the session token in an output"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("remote: ok" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())

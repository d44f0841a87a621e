"""Token corpora (issue 40): seedpipe's token windows against a plain memory
copy, megatron-core's GPTDataset index build, LitData's TokensLoader and a
plain torch DataLoader over np.memmap, all in one run (bench/README.md: every
claim a ratio against a peer measured here).

    /usr/bin/python3 bench/tokens.py [--docs N] [--seq-len L] [--batch-size B]
        [--seconds S] [--rounds R] [--out DIR] [--venv DIR] [--only open]

Setup (not timed): a corpus of N documents (uint16 tokens uniform in
[1, vocab), lengths lognormal: median --median, log-sd --sigma, at least 1,
at most --max-len), written as Megatron's MMIDIDX PREFIX.idx/.bin by numpy
(the format of megatron-core's indexed_dataset.py); the peers' venv
(--venv, `python -m venv --system-site-packages` so Debian's torch 1.13 is
seen, `pip install --no-deps` of megatron-core 0.16.1, litdata 0.2.76 and the
small pure-python modules they import); LitData's own format of the same
token stream (litdata.optimize, TokensLoader layout); then the files are read
once so every side starts from the page cache.

Measured, each side in its own subprocess:
  throughput  tokens/s (n x L trained tokens a batch) over --seconds after
              3 warm-up batches; every side's consumer copies the batch into
              a preallocated int32 array (what staging for a device does).
              "copy" is the limit: the .bin's uint16 tokens copied into int32
              windows of the same shape, random window order, same process
              as seedpipe's concat and docs runs, at --workers and in
              process (workers=0), alternated (--rounds, medians). torch: DataLoader over np.memmap windows
              tokens[i*L : i*L+L+1], shuffle, the same workers and batch.
              LitData: StreamingDataset + TokensLoader(block_size=L+1),
              StreamingDataLoader, shuffle, the same workers and batch.
  open        seconds to open the corpus and have the first batch, then to
              have batch k (late in the epoch: 90%) in a fresh loader, and
              peak RSS (ru_maxrss of the process, and of its workers) above
              the process's RSS after its imports. seedpipe: Loader in
              process (workers=0), state_dict() with batch = k, then
              load_state_dict(); also the first batch at 2 workers.
              megatron-core: IndexedDataset + GPTDataset (sequence_length=L,
              its index build with a cache folder; the files' size) and its
              samples k*B..k*B+B-1; then a second open that loads the cache.
  padding     docs packing: 1 - corpus tokens / (windows x L), exact, and
              the fraction of segment_ids == 0 in the batches streamed.

Peers run under the venv's interpreter with these shims, written below:
megatron-core is imported without its package __init__ (empty `megatron`
and `megatron.core` packages pointing at its folder; parallel_state first),
a stand-in tokenizer (eod 0, pad -1, vocab 65536), torch.distributed left
uninitialised; LitData gets torch.uint16/uint32/uint64 aliased to the signed
types of the same width (torch 1.13 has none; only its dtype table names
them) and a collate_fn that stacks the uint16 windows as int32 (torch 1.13
cannot make a tensor of uint16). A peer that cannot be installed or imported
prints SKIP and the run goes on."""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = ["megatron-core==0.16.1", "litdata==0.2.76"]
PEER_DEPS = ["lightning-utilities", "filelock", "boto3", "botocore", "s3transfer", "jmespath"]


# ---------------------------------------------------------------- corpus

def doc_lengths(n, median, sigma, max_len, seed):
    rng = np.random.default_rng(seed)
    x = np.ceil(rng.lognormal(np.log(median), sigma, size=n))
    return np.clip(x, 1, max_len).astype(np.int32)


def write_corpus(prefix, lens, vocab, seed, sparse):
    """PREFIX.idx/.bin (MMIDIDX v1, uint16 = code 8, one sequence a
    document); with sparse, the .bin is a hole of zeros (the index build and
    the open do not read tokens)."""
    n = len(lens)
    ptrs = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1].astype(np.int64) * 2, out=ptrs[1:])
    total = int(lens.astype(np.int64).sum())
    with open(prefix + ".bin", "wb") as f:
        if sparse:
            f.truncate(total * 2)
        else:
            rng = np.random.default_rng(seed + 1)
            left = total
            while left:
                k = min(left, 1 << 26)
                f.write(rng.integers(1, vocab, size=k, dtype=np.uint16).tobytes())
                left -= k
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(np.array([1], "<u8").tobytes())
        f.write(np.array([8], "u1").tobytes())
        f.write(np.array([n, n + 1], "<u8").tobytes())
        f.write(lens.tobytes())
        f.write(ptrs.tobytes())
        f.write(np.arange(n + 1, dtype=np.int64).tobytes())
    return total


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def rss_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_split():
    """(anonymous, file-backed) resident bytes now (/proc/self/status)."""
    got = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                got[line.split(":")[0]] = int(line.split()[1]) * 1024
    return got.get("RssAnon", 0), got.get("RssFile", 0)


def peak_rss():
    """(this process's peak RSS, its largest waited-for child's), bytes."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


# ---------------------------------------------------------------- peers' shims

def shim_megatron():
    import importlib.util
    import types
    spec = importlib.util.find_spec("megatron")
    if spec is None:
        raise ImportError("megatron-core not installed")
    root = list(spec.submodule_search_locations)[0]
    for name, path in [("megatron", root), ("megatron.core", os.path.join(root, "core"))]:
        m = types.ModuleType(name)
        m.__path__ = [path]
        sys.modules[name] = m
    import megatron.core.parallel_state  # noqa: F401  (breaks utils <-> parallel_state)
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split
    return GPTDataset, GPTDatasetConfig, IndexedDataset, Split


class StandInTokenizer:
    eod = 0
    pad = -1
    vocab_size = 65536
    unique_identifiers = {"class": "bench-tokens"}


def shim_litdata():
    """Also run at import in LitData's spawned workers (TOKBENCH_LITDATA set
    below: they import this file as __mp_main__ before unpickling litdata)."""
    os.environ["TOKBENCH_LITDATA"] = "1"
    import torch
    for a, b in [("uint16", "int16"), ("uint32", "int32"), ("uint64", "int64")]:
        if not hasattr(torch, a):
            setattr(torch, a, getattr(torch, b))
    import litdata
    return litdata


def lit_collate(batch):
    import torch
    return torch.from_numpy(np.stack(batch).astype(np.int32))


# ---------------------------------------------------------------- sides

def timed_rate(batches, L, seconds, dst_for):
    """Take 3 batches, then as many as fit in `seconds`; each is copied into
    an int32 destination. Returns (tokens/s, batches timed)."""
    it = iter(batches)
    for _ in range(3):
        b = next(it)
        np.copyto(dst_for(b), b)
    n, tok = 0, 0
    t0 = time.perf_counter()
    while True:
        b = next(it)
        np.copyto(dst_for(b), b)
        n += 1
        tok += b.shape[0] * L
        t = time.perf_counter() - t0
        if t >= seconds:
            return tok / t, n


def forever(loader):
    """Epoch after epoch (an iteration of these loaders is one epoch)."""
    while True:
        yield from loader


def dst_cache():
    bufs = {}

    def get(b):
        key = tuple(b.shape)
        if key not in bufs:
            bufs[key] = np.empty(key, dtype=np.int32)
        return bufs[key]
    return get


def copy_rate(prefix, L, B, seconds, seed):
    """As timed_rate, but the batch is the memmap windows, cast-copied once
    into int32 (no intermediate): the one copy any loader must make."""
    tok = np.memmap(prefix + ".bin", dtype=np.uint16, mode="r")
    nw = (len(tok) - 1) // L
    rng = np.random.default_rng(seed)
    dst = np.empty((B, L + 1), dtype=np.int32)
    n, ntok = 0, 0
    t0 = time.perf_counter()
    while True:
        idx = rng.integers(0, nw, size=B)
        for r, i in enumerate(idx):
            np.copyto(dst[r], tok[i * L:i * L + L + 1])
        n += 1
        ntok += B * L
        t = time.perf_counter() - t0
        if t >= seconds:
            return ntok / t, n


def side_seedpipe(a):
    """copy, then concat and docs at --workers and in process (workers=0),
    alternated in this one process (--rounds)."""
    import seedpipe
    L, B, W = a.seq_len, a.batch_size, a.workers
    out = {"copy": [], "concat": [], "docs": [], "concat0": [], "docs0": []}
    # epochs= is given to every Loader: with workers > 0 and epochs=None the
    # pool refuses an epoch of >= 256 batches ("stream of N batches is too
    # long": U32_MAX epochs x batches >= 2^40, pool.c).
    for r in range(a.rounds):
        out["copy"].append(copy_rate(a.prefix, L, B, a.seconds, a.seed + r)[0])
        for packing, w, key in (("concat", W, "concat"), ("docs", W, "docs"),
                                ("concat", 0, "concat0"), ("docs", 0, "docs0")):
            ld = seedpipe.Loader(a.prefix, seq_len=L, packing=packing, batch_size=B, workers=w,
                                 seed=a.seed + r, epochs=1000, dtype="int32")
            rate, _ = timed_rate((b["tokens"] for b in forever(ld)), L, a.seconds, dst_cache())
            out[key].append(rate)
            if packing == "docs":
                out["docs_windows"] = int(ld.num_samples)
            del ld
    # padding as streamed (untimed): segment_ids == 0 over the first 500 batches
    ld = seedpipe.Loader(a.prefix, seq_len=L, packing="docs", batch_size=B, workers=W,
                         seed=a.seed, epochs=1, dtype="int32")
    zeros = cells = 0
    for i, b in enumerate(ld):
        s = b["segment_ids"]
        zeros += int((s == 0).sum())
        cells += s.size
        if i == 499:
            break
    out["pad_streamed"] = zeros / max(1, cells)
    out["pad_streamed_batches"] = i + 1
    return out


class MemmapWindows:
    """torch Dataset: window i = tokens[i*L : i*L+L+1] as an int32 tensor."""

    def __init__(self, path, L):
        self.path, self.L = path, L
        self.tok = np.memmap(path, dtype=np.uint16, mode="r")
        self.n = (len(self.tok) - 1) // L

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        L = self.L
        return torch.from_numpy(self.tok[i * L:i * L + L + 1].astype(np.int32))


def side_torch(a):
    import torch
    ds = MemmapWindows(a.prefix + ".bin", a.seq_len)
    g = torch.Generator()
    g.manual_seed(a.seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True,
                                     num_workers=a.workers, generator=g)
    rates = [timed_rate((b.numpy() for b in forever(dl)), a.seq_len, a.seconds, dst_cache())[0]
             for _ in range(a.rounds)]
    return {"torch": rates}


def side_litdata(a):
    shim_litdata()
    from litdata import StreamingDataLoader, StreamingDataset, TokensLoader
    rates = []
    for r in range(a.rounds):
        ds = StreamingDataset(a.lit_dir, item_loader=TokensLoader(block_size=a.seq_len + 1),
                              shuffle=True, seed=a.seed + r)
        dl = StreamingDataLoader(ds, batch_size=a.batch_size, num_workers=a.workers,
                                 collate_fn=lit_collate)
        rates.append(timed_rate((b.numpy() for b in forever(dl)), a.seq_len, a.seconds, dst_cache())[0])
        del dl, ds
    return {"litdata": rates}


def side_lit_convert(a):
    """Setup: the .bin's token stream in LitData's format (not timed), as
    pieces of 2^20 tokens (litdata.optimize, TokensLoader, 64 MB chunks)."""
    shim_litdata()
    from litdata import TokensLoader, optimize
    os.environ["TOKBENCH_BIN"] = a.prefix + ".bin"
    n = os.path.getsize(a.prefix + ".bin") // 2
    optimize(fn=_lit_piece, inputs=list(range(0, n, LIT_PIECE)), output_dir=a.lit_dir,
             chunk_bytes="64MB", item_loader=TokensLoader(), num_workers=1, mode="overwrite")
    with open(os.path.join(a.lit_dir, "index.json")) as f:
        chunks = json.load(f)["chunks"]
    if not chunks:
        raise RuntimeError("litdata.optimize wrote no chunks")
    return {"chunks": len(chunks)}


LIT_PIECE = 1 << 20


def _lit_piece(i):
    tok = np.memmap(os.environ["TOKBENCH_BIN"], dtype=np.uint16, mode="r")
    yield np.array(tok[i:i + LIT_PIECE])


def side_open_seedpipe(a):
    import seedpipe
    base = rss_now()
    base_anon, base_file = rss_split()
    L, B = a.seq_len, a.batch_size
    t0 = time.perf_counter()
    ld = seedpipe.Loader(a.prefix, seq_len=L, packing=a.packing, batch_size=B, workers=0,
                         seed=a.seed, epochs=1, dtype="int32")
    next(iter(ld))
    t_first = time.perf_counter() - t0
    nb = len(ld)
    k = int(nb * 0.9)
    st = ld.state_dict()
    st["batch"] = k
    del ld
    t0 = time.perf_counter()
    ld = seedpipe.Loader(a.prefix, seq_len=L, packing=a.packing, batch_size=B, workers=0,
                         seed=a.seed, epochs=1, dtype="int32")
    ld.load_state_dict(st)
    jumped = next(iter(ld))["tokens"]
    t_jump = time.perf_counter() - t0
    self_peak, _ = peak_rss()
    anon, filed = rss_split()
    del ld
    t0 = time.perf_counter()
    ld = seedpipe.Loader(a.prefix, seq_len=L, packing=a.packing, batch_size=B, workers=2,
                         seed=a.seed, epochs=1, dtype="int32")
    next(iter(ld))
    t_first2 = time.perf_counter() - t0
    del ld
    _, child_peak = peak_rss()
    return {"first": t_first, "jump": t_jump, "k": k, "batches": nb, "jump_sum": int(jumped.sum()),
            "first_w2": t_first2, "base_rss": base, "peak_rss": self_peak,
            "worker_peak_rss": child_peak, "anon_after": anon - base_anon,
            "file_after": filed - base_file}


def side_open_megatron(a):
    GPTDataset, GPTDatasetConfig, IndexedDataset, Split = shim_megatron()
    import warnings
    warnings.simplefilter("ignore")
    base = rss_now()
    base_anon, base_file = rss_split()
    L, B = a.seq_len, a.batch_size
    cache = a.mg_cache
    shutil.rmtree(cache, ignore_errors=True)

    def build():
        cfg = GPTDatasetConfig(random_seed=a.seed, sequence_length=L, tokenizer=StandInTokenizer(),
                               path_to_cache=cache, reset_position_ids=False,
                               reset_attention_mask=False, eod_mask_loss=False,
                               create_attention_mask=False, split="1,0,0")
        ids = IndexedDataset(a.prefix, multimodal=False, mmap=True)
        return GPTDataset(ids, a.prefix, np.arange(len(ids), dtype=np.int32), None, Split.train, cfg)
    t0 = time.perf_counter()
    ds = build()
    [ds[i] for i in range(B)]
    t_first = time.perf_counter() - t0
    nb = len(ds) // B
    k = int(nb * 0.9)
    t0 = time.perf_counter()
    [ds[k * B + i] for i in range(B)]
    t_jump_built = time.perf_counter() - t0
    size = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache))
    nfiles = len(os.listdir(cache))
    self_peak, _ = peak_rss()
    anon, filed = rss_split()
    del ds
    t0 = time.perf_counter()
    ds = build()
    [ds[k * B + i] for i in range(B)]
    t_jump_cached = time.perf_counter() - t0
    import torch
    return {"first": t_first, "jump_built": t_jump_built, "jump_cached": t_jump_cached,
            "k": k, "batches": nb, "base_rss": base, "peak_rss": self_peak,
            "cache_bytes": size, "cache_files": nfiles, "torch": torch.__version__,
            "anon_after": anon - base_anon, "file_after": filed - base_file}


if os.environ.get("TOKBENCH_LITDATA"):
    shim_litdata()

SIDES = {"seedpipe": side_seedpipe, "torch": side_torch, "litdata": side_litdata,
         "lit_convert": side_lit_convert, "open_seedpipe": side_open_seedpipe,
         "open_megatron": side_open_megatron}


# ---------------------------------------------------------------- driver

def run_side(py, name, a, env=None, timeout=1800):
    argv = [py, os.path.abspath(__file__), "--side", name, "--prefix", a.prefix,
            "--seq-len", str(a.seq_len), "--batch-size", str(a.batch_size),
            "--workers", str(a.workers), "--seconds", str(a.seconds), "--rounds", str(a.rounds),
            "--seed", str(a.seed), "--lit-dir", a.lit_dir, "--mg-cache", a.mg_cache,
            "--packing", a.packing]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return None, " | ".join(tail)
    return json.loads(lines[-1][7:]), ""


def setup_venv(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
    have = subprocess.run([py, "-m", "pip", "freeze", "--local"], capture_output=True, text=True).stdout
    want = [p for p in PEERS + PEER_DEPS if p.split("==")[0].lower() not in have.lower()]
    if want:
        p = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", *want],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print("  pip install --no-deps %s failed: %s" % (" ".join(want), p.stderr.strip()[-300:]))
    vers = subprocess.run([py, "-m", "pip", "freeze", "--local"], capture_output=True, text=True).stdout
    return py, " ".join(l for l in vers.split() if l.split("==")[0] in ("megatron-core", "litdata"))


def med(xs):
    return float(np.median(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--median", type=float, default=400.0, help="document length median (tokens)")
    ap.add_argument("--sigma", type=float, default=1.0, help="log-sd of the lognormal lengths")
    ap.add_argument("--max-len", type=int, default=65536)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds a throughput run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--packing", default="docs", help="packing of the open/jump measurement")
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "tokbench"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "tokvenv"))
    ap.add_argument("--only", choices=["open", "throughput"], default=None)
    ap.add_argument("--sparse-bin", action="store_true",
                    help="the .bin as a hole of zeros (open/jump only: nothing reads tokens)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", help=argparse.SUPPRESS)
    ap.add_argument("--lit-dir", help=argparse.SUPPRESS)
    ap.add_argument("--mg-cache", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.side:
        print("RESULT " + json.dumps(SIDES[a.side](a)), flush=True)
        return
    if a.sparse_bin and a.only != "open":
        sys.exit("--sparse-bin measures nothing but the open: give --only open")

    os.makedirs(a.out, exist_ok=True)
    tag = "d%d-m%g-s%g-x%d-v%d-r%d%s" % (a.docs, a.median, a.sigma, a.max_len, a.vocab, a.seed,
                                        "-sparse" if a.sparse_bin else "")
    a.prefix = os.path.join(a.out, "corpus-" + tag)
    a.lit_dir = a.prefix + ".litdata"
    a.mg_cache = a.prefix + ".megatron-cache"
    print(f"interpreter {sys.executable} {sys.version.split()[0]}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")

    # ---- corpus
    lens = doc_lengths(a.docs, a.median, a.sigma, a.max_len, a.seed)
    total = int(lens.astype(np.int64).sum())
    need = total * 2 * (1 if a.sparse_bin or a.only == "open" else 2) + a.docs * 40
    free = shutil.disk_usage(a.out).free
    print(f"corpus: {a.docs} documents, lognormal lengths median {a.median:g} sigma {a.sigma:g} "
          f"(clipped to [1, {a.max_len}]): mean {lens.mean():.0f}, p99 {np.percentile(lens, 99):.0f}, "
          f"max {lens.max()}, {total} tokens ({total * 2 / 1e9:.2f} GB uint16"
          f"{', sparse' if a.sparse_bin else ''}); disk free {free / 1e9:.0f} GB, "
          f"memory available {mem_available() / 1e9:.1f} GB")
    if not os.path.exists(a.prefix + ".idx"):
        if need > free * 0.8:
            sys.exit(f"needs ~{need / 1e9:.1f} GB on disk, {free / 1e9:.1f} GB free: use --sparse-bin "
                     "--only open or fewer --docs")
        t0 = time.perf_counter()
        write_corpus(a.prefix + ".tmp", lens, a.vocab, a.seed, a.sparse_bin)
        for ext in (".bin", ".idx"):
            os.replace(a.prefix + ".tmp" + ext, a.prefix + ext)
        print(f"  written in {time.perf_counter() - t0:.1f} s: {a.prefix}.idx/.bin")
    if not a.sparse_bin:
        t0 = time.perf_counter()
        with open(a.prefix + ".bin", "rb") as f:       # into the page cache
            while f.read(1 << 24):
                pass
        print(f"  .bin read once ({time.perf_counter() - t0:.1f} s)")

    peer_py, versions = None, "none"
    if not a.no_peers:
        try:
            peer_py, versions = setup_venv(a.venv)
            print(f"peers: {peer_py} ({versions or 'none installed'})")
        except Exception as e:  # noqa: BLE001
            print(f"SKIP peers: venv {a.venv}: {e}")
    sp_env = dict(os.environ)
    rows = []          # (what, value, unit, peer, ratio)

    # ---- throughput
    if a.only in (None, "throughput"):
        print(f"throughput: L={a.seq_len}, batch {a.batch_size}, {a.workers} workers, "
              f"{a.seconds:g} s x {a.rounds} rounds a side, consumer copies each batch to int32")
        sp, err = run_side("/usr/bin/python3", "seedpipe", a, sp_env)
        if sp is None:
            sys.exit("seedpipe side failed: " + err)
        cp, cc, dc = med(sp["copy"]), med(sp["concat"]), med(sp["docs"])
        print("  M tokens/s by round: " + "  ".join(
            k + " " + ", ".join(f"{x / 1e6:.1f}" for x in sp[k])
            for k in ("copy", "concat", "docs", "concat0", "docs0")))
        rows.append(("memory copy .bin -> int32 windows (limit)", cp, 1.0, "-"))
        rows.append(("seedpipe concat, %d workers" % a.workers, cc, cc / cp, "copy"))
        rows.append(("seedpipe docs, %d workers" % a.workers, dc, dc / cp, "copy"))
        c0, d0 = med(sp["concat0"]), med(sp["docs0"])
        rows.append(("seedpipe concat, in process (workers=0)", c0, c0 / cp, "copy"))
        rows.append(("seedpipe docs, in process (workers=0)", d0, d0 / cp, "copy"))
        tr, err = run_side("/usr/bin/python3", "torch", a, sp_env)
        if tr is None:
            print("SKIP torch DataLoader over np.memmap: " + err)
        else:
            t = med(tr["torch"])
            print("  torch " + ", ".join(f"{x / 1e6:.2f}" for x in tr["torch"]))
            rows.append(("torch DataLoader over np.memmap, %d workers" % a.workers, t, cc / t,
                         "seedpipe concat / torch"))
        lit = None
        if peer_py:
            if not os.path.exists(os.path.join(a.lit_dir, "done")):
                t0 = time.perf_counter()
                conv, err = run_side(peer_py, "lit_convert", a, sp_env, timeout=3600)
                if conv is None:
                    print("SKIP LitData (optimize failed): " + err)
                else:
                    open(os.path.join(a.lit_dir, "done"), "w").close()
                    print(f"  LitData format written in {time.perf_counter() - t0:.0f} s (setup, "
                          f"{conv['chunks']} chunks)")
            if os.path.exists(os.path.join(a.lit_dir, "done")):
                lit, err = run_side(peer_py, "litdata", a, sp_env)
                if lit is None:
                    print("SKIP LitData: " + err)
        else:
            print("SKIP LitData: no peer venv")
        if lit:
            ll = med(lit["litdata"])
            print("  litdata " + ", ".join(f"{x / 1e6:.2f}" for x in lit["litdata"]))
            rows.append(("LitData TokensLoader, %d workers" % a.workers, ll, cc / ll,
                         "seedpipe concat / LitData"))
        exact = 1 - total / (sp["docs_windows"] * a.seq_len)
        rows.append(("docs padding, exact (1 - tokens / windows x L)", exact, None, "target <= 0.02"))
        rows.append(("docs padding, first %d batches streamed (segment_ids == 0)"
                     % sp["pad_streamed_batches"], sp["pad_streamed"], None,
                     "target <= 0.02"))

    # ---- open, first batch, jump
    if a.only in (None, "open"):
        print(f"open: {a.packing} packing for seedpipe, L={a.seq_len}, batch {a.batch_size}; "
              "jump to batch k = 90% of the epoch in a fresh loader")
        so, err = run_side("/usr/bin/python3", "open_seedpipe", a, sp_env)
        if so is None:
            sys.exit("seedpipe open failed: " + err)
        print("  seedpipe " + json.dumps(so))
        mo = None
        if peer_py:
            mo, err = run_side(peer_py, "open_megatron", a, sp_env)
            if mo is None:
                print("SKIP megatron-core GPTDataset: " + err)
            else:
                print("  megatron " + json.dumps(mo))
        else:
            print("SKIP megatron-core GPTDataset: no peer venv")
        mib = 1 << 20
        sp_mem = (so["peak_rss"] - so["base_rss"]) / mib
        rows.append(("seedpipe open + first batch (s, in process)", so["first"],
                     mo["first"] / so["first"] if mo else None, "megatron / seedpipe"))
        rows.append(("seedpipe open + first batch at 2 workers (s)", so["first_w2"], None, "-"))
        rows.append(("seedpipe fresh loader + state at batch %d + that batch (s)" % so["k"],
                     so["jump"], mo["first"] / so["jump"] if mo else None,
                     "megatron build + batch / seedpipe"))
        rows.append(("seedpipe peak RSS above imports (MiB; %.0f bytes/doc)"
                     % (sp_mem * mib / a.docs), sp_mem, None, "-"))
        rows.append(("seedpipe after the jump: anonymous RSS above imports (MiB; %.0f bytes/doc)"
                     % (so["anon_after"] / a.docs), so["anon_after"] / mib, None, "-"))
        rows.append(("seedpipe after the jump: file-backed RSS above imports (MiB; the .idx is %.1f)"
                     % (os.path.getsize(a.prefix + ".idx") / mib), so["file_after"] / mib, None, "-"))
        if mo:
            mg_mem = (mo["peak_rss"] - mo["base_rss"]) / mib
            rows.append(("megatron GPTDataset build + first batch (s)", mo["first"], 1.0, "-"))
            rows.append(("megatron batch %d after the build (s)" % mo["k"], mo["jump_built"], None, "-"))
            rows.append(("megatron reopen from its cache + batch %d (s)" % mo["k"], mo["jump_cached"],
                         mo["jump_cached"] / so["jump"], "megatron cached / seedpipe jump"))
            rows.append(("megatron peak RSS above imports (MiB)", mg_mem,
                         mg_mem / sp_mem if sp_mem > 0 else None, "megatron / seedpipe"))
            rows.append(("megatron after the build: anonymous / file-backed RSS above imports (MiB)",
                         mo["anon_after"] / mib, None, "file %.1f" % (mo["file_after"] / mib)))
            rows.append(("megatron cache files written (MB, %d files)" % mo["cache_files"],
                         mo["cache_bytes"] / 1e6, None, "seedpipe writes 0"))

    print()
    print("| what | value | ratio | ratio of |")
    print("|---|---|---|---|")
    for what, v, ratio, of in rows:
        vs = (f"{v / 1e6:.1f} M tokens/s" if v > 1000 else f"{v:.3g}")
        rs = "-" if ratio is None else f"**{ratio:.2f}**"
        print(f"| {what} | {vs} | {rs} | {of} |")
    print(f"\npeers: {versions}; command: /usr/bin/python3 bench/tokens.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
